/* tests/model/test_model_lang.c — the layer block: N instances with their own
 * weights (named by the pattern) and states, values carried from one instance
 * to the next, locals private to an instance, tied embeddings as one weight
 * read twice, and the model samples' interfaces. */
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

static ir_graph *compile_text(diag_list *d, const char *text)
{
    fe_source src;
    if (fe_source_from_string(&src, "test.kiln", text) != 0) return NULL;
    ir_graph *g = fe_compile(&src, NULL, d);
    if (d->count) diag_print(d, stderr, text);
    fe_source_free(&src);
    return g;
}

static const ir_node *param(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->nparams; i++)
        if (strcmp(g->params[i]->name, name) == 0) return g->params[i];
    return NULL;
}

static void test_instances(void)
{
    const char *text =
        "model m {\n"
        "  dims B, S, T\n"
        "  const V = 32, D = 16, NL = 3\n"
        "  input ids : i32[B, S]\n"
        "  input pos : i32[B]\n"
        "  weight embed : f32[V, D] = \"model.embed_tokens.weight\"\n"
        "  x = embedding(embed, ids)\n"
        "  layer l < NL {\n"
        "    state kc : f32[B, 1, T, D]\n"
        "    weight w : f32[D, D] = \"model.layers.{l}.proj.weight\"\n"
        "    weight s : f32[D]\n"
        "    h = linear(x, w) * s\n"
        "    kc = cache_write(kc, reshape(h, [B, S, 1, D]), pos)\n"
        "    x = x + h\n"
        "  }\n"
        "  output logits = linear(x, embed)\n"
        "}\n";
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    ir_graph *g = compile_text(&d, text);
    CHECK(g && d.count == 0);
    if (!g) return;
    /* ids, pos, embed + 3 x (kc, w, s) */
    CHECK_MSG(g->nparams == 12, "%d params", g->nparams);
    CHECK(g->nstates == 3);
    CHECK(param(g, "model.embed_tokens.weight") != NULL);
    CHECK(param(g, "model.layers.0.proj.weight") && param(g, "model.layers.2.proj.weight"));
    CHECK(param(g, "model.layers.3.proj.weight") == NULL);
    CHECK(param(g, "s.0") && param(g, "s.1") && param(g, "s.2"));
    CHECK(param(g, "kc.0") && param(g, "kc.2") && param(g, "kc.0")->op == IR_OP_STATE);
    /* the carried x: layer 1's input is layer 0's output; the head reads layer 2's */
    const ir_node *out = g->outputs[0].value;
    CHECK(out->op == IR_OP_LINEAR && out->inputs[1] == param(g, "model.embed_tokens.weight"));
    CHECK(out->inputs[0]->name && strcmp(out->inputs[0]->name, "x.2") == 0);
    const ir_node *x2 = out->inputs[0];
    CHECK(x2->op == IR_OP_ADD && x2->inputs[0]->name && strcmp(x2->inputs[0]->name, "x.1") == 0);
    /* each state is updated by its own layer's write */
    for (int i = 0; i < g->nstates; i++) {
        const ir_node *w = g->states[i].value;
        CHECK(w->op == IR_OP_CACHE_WRITE && w->inputs[0] == g->states[i].state);
    }
    ir_graph_free(g);
    arena_free(&a);
}

typedef struct expect {
    const char *path;
    int layers, nparams, nstates;
    const char *out_type;
} expect;

static void test_samples(void)
{
    static const expect samples[] = {
        {"samples/models/llama3_8b.kiln", 32, 2 + 3 + 32 * 11, 64, "bf16[B, 1, 128256]"},
        {"samples/models/llama3_2_1b.kiln", 16, 2 + 2 + 16 * 11, 32, "bf16[B, 1, 128256]"},
        {"samples/models/qwen2_5_0_5b.kiln", 24, 2 + 2 + 24 * 14, 48, "bf16[B, 1, 151936]"},
    };
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        const expect *e = &samples[i];
        arena a;
        arena_init(&a);
        diag_list d;
        diag_list_init(&d, &a);
        fe_source src;
        if (fe_source_read(&src, e->path, &d) != 0) {
            CHECK_MSG(0, "%s: cannot read", e->path);
            arena_free(&a);
            continue;
        }
        ir_graph *g = fe_compile(&src, NULL, &d);
        CHECK_MSG(g && d.count == 0, "%s: %d diagnostics (warnings included)", e->path, d.count);
        if (d.count) diag_print(&d, stderr, src.text);
        if (g) {
            CHECK_MSG(g->nparams == e->nparams, "%s: %d params", e->path, g->nparams);
            CHECK(g->nstates == e->nstates && g->noutputs == 1);
            char buf[256];
            ir_type_print(&g->outputs[0].value->type, g->syms, buf, sizeof buf);
            CHECK_MSG(strcmp(buf, e->out_type) == 0, "%s: output %s", e->path, buf);
            char name[128];
            snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", e->layers - 1);
            CHECK_MSG(param(g, name) != NULL, "%s: no %s", e->path, name);
            ir_graph_free(g);
        }
        fe_source_free(&src);
        arena_free(&a);
    }
}

int main(void)
{
    test_instances();
    test_samples();
    return CHECK_DONE();
}
