/* tests/frontend/samples_test.c — every sample model compiles with no
 * diagnostic at all (no warning either), verifies, and has the expected
 * interface and the features of its checkpoint. */
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

typedef struct expect {
    const char *path;
    int nparams, noutputs, nstates;
    const char *out_type; /* type of the first output */
} expect;

static const expect samples[] = {
    {"samples/llama3_8b_layer.kiln", 13, 1, 2, "bf16[B, S, 4096]"},
    {"samples/llama3_1b_layer.kiln", 13, 1, 2, "bf16[B, S, 2048]"},
    {"samples/llama3_1_8b_layer.kiln", 13, 1, 2, "bf16[B, S, 4096]"},
    {"samples/gpt2_block.kiln", 13, 1, 0, "f32[B, S, 768]"},
    {"samples/pythia_1_4b_layer.kiln", 16, 1, 2, "f16[B, S, 2048]"},
    {"samples/gemma2_2b_layer.kiln", 15, 1, 2, "bf16[B, S, 2304]"},
    {"samples/qwen3_8b_layer.kiln", 15, 1, 2, "bf16[B, S, 4096]"},
    {"samples/mixtral_8x7b_layer.kiln", 14, 1, 2, "bf16[B, S, 4096]"},
    {"samples/qwen_moe_layer.kiln", 21, 1, 2, "bf16[B, S, 2048]"},
};

/* The issue-18 samples: each states its model's feature as the checkpoint has it. */
static void check_reach(const char *path, const ir_graph *g, const int *counts)
{
    int64_t rot = 0, window = 0, topk = 0;
    double softcap = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = g->nodes[k];
        if (n->op == IR_OP_ROPE && n->attrs.rope.rotary_dims) rot = n->attrs.rope.rotary_dims;
        if (n->op == IR_OP_ATTENTION) window = n->attrs.window, softcap = n->attrs.softcap;
        if (n->op == IR_OP_TOPK) topk = n->attrs.topk;
    }
    CHECK(counts[IR_OP_ATTENTION] == 1 && counts[IR_OP_CACHE_WRITE] == 2 && counts[IR_OP_ROPE] == 2);
    if (strstr(path, "pythia")) CHECK_MSG(rot == 32 && counts[IR_OP_LAYERNORM] == 2, "%s: rotary dims %lld", path, (long long)rot);
    else CHECK_MSG(rot == 0, "%s: partial rotary", path);
    if (strstr(path, "gemma2"))
        CHECK_MSG(window == 4096 && softcap == 50.0 && counts[IR_OP_RMSNORM] == 4, "%s: window %lld softcap %g", path,
                  (long long)window, softcap);
    else CHECK_MSG(window == 0 && softcap == 0, "%s: window or softcap", path);
    if (strstr(path, "qwen3")) CHECK_MSG(counts[IR_OP_RMSNORM] == 4, "%s: q/k norms", path); /* ln1, ln2, q, k */
    if (strstr(path, "mixtral") || strstr(path, "moe")) {
        CHECK_MSG(topk == (strstr(path, "mixtral") ? 2 : 4) && counts[IR_OP_TOPK] == 2 && counts[IR_OP_EXPERT_LINEAR] == 3,
                  "%s: top-%lld, %d expert_linears", path, (long long)topk, counts[IR_OP_EXPERT_LINEAR]);
    } else
        CHECK_MSG(counts[IR_OP_TOPK] == 0 && counts[IR_OP_EXPERT_LINEAR] == 0, "%s: MoE ops", path);
}

static void count_ops(const ir_graph *g, int *counts)
{
    memset(counts, 0, IR_OP_COUNT * sizeof *counts);
    for (int i = 0; i < g->nnodes; i++) counts[g->nodes[i]->op]++;
}

int main(void)
{
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        const expect *e = &samples[i];
        arena a;
        arena_init(&a);
        diag_list d;
        diag_list_init(&d, &a);
        fe_source src;
        if (fe_source_read(&src, e->path, &d) != 0) {
            diag_print(&d, stderr, NULL);
            CHECK_MSG(0, "%s: cannot read", e->path);
            continue;
        }
        ir_graph *g = fe_compile(&src, NULL, &d);
        CHECK_MSG(g && d.count == 0, "%s: %d diagnostics", e->path, d.count);
        if (d.count) diag_print(&d, stderr, src.text);
        if (g) {
            CHECK(ir_verify(g, NULL) == 0);
            CHECK_MSG(g->nparams == e->nparams, "%s: %d params", e->path, g->nparams);
            CHECK(g->noutputs == e->noutputs && g->nstates == e->nstates);
            char buf[256];
            ir_type_print(&g->outputs[0].value->type, g->syms, buf, sizeof buf);
            CHECK_MSG(strcmp(buf, e->out_type) == 0, "%s: output %s", e->path, buf);
            int counts[IR_OP_COUNT];
            count_ops(g, counts);
            if (strstr(e->path, "gpt2")) {
                /* primitives only */
                CHECK(counts[IR_OP_LAYERNORM] == 0 && counts[IR_OP_SOFTMAX] == 0 &&
                      counts[IR_OP_ATTENTION] == 0 && counts[IR_OP_LINEAR] == 0);
                CHECK(counts[IR_OP_MATMUL] == 6 && counts[IR_OP_CAUSAL_MASK] == 1);
                CHECK(counts[IR_OP_TANH] == 1 && counts[IR_OP_REDUCE_MAX] == 1);
            } else if (!strstr(e->path, "llama")) {
                check_reach(e->path, g, counts);
            } else {
                CHECK(counts[IR_OP_LINEAR] == 7 && counts[IR_OP_RMSNORM] == 2);
                CHECK(counts[IR_OP_ROPE] == 2 && counts[IR_OP_ATTENTION] == 1);
                CHECK(counts[IR_OP_CACHE_WRITE] == 2 && counts[IR_OP_SILU] == 1);
                /* which checkpoint: Llama-3.1/3.2 scale their RoPE (config rope_scaling), Llama-3 does not */
                double factor = strstr(e->path, "llama3_1b") ? 32 : strstr(e->path, "llama3_1_8b") ? 8 : 0;
                for (int k = 0; k < g->nnodes; k++) {
                    const ir_node *n = g->nodes[k];
                    if (n->op != IR_OP_ROPE) continue;
                    const ir_rope_attrs *r = &n->attrs.rope;
                    CHECK_MSG(n->attrs.theta == 500000.0, "%s: theta %g", e->path, n->attrs.theta);
                    if (factor == 0) CHECK_MSG(r->scaling == IR_ROPE_NONE, "%s: rope scaled", e->path);
                    else
                        CHECK_MSG(r->scaling == IR_ROPE_LLAMA3 && r->factor == factor && r->low_freq_factor == 1 &&
                                      r->high_freq_factor == 4 && r->original_max_pos == 8192,
                                  "%s: rope scaling", e->path);
                }
            }
            ir_graph_free(g);
        }
        fe_source_free(&src);
        diag_list_free(&d);
        arena_free(&a);
    }
    return CHECK_DONE();
}
