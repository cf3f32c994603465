/* ir/print.c — the stable text form of a graph. One line per node:
 *   %7 = rmsnorm(%0, %3) {eps=1e-05} : bf16[B, S, 4096]  # h @12:8
 * then the outputs and the state updates. Golden tests diff this text, so
 * the format changes only on purpose. */
#include <string.h>

#include "ir/ir.h"

static void print_attrs(const ir_graph *g, const ir_node *n, FILE *out)
{
    char b1[256], b2[256];
    const ir_attrs *a = &n->attrs;
    switch (n->op) {
    case IR_OP_CONST: fprintf(out, " {value=%.9g}", a->value); break;
    case IR_OP_GELU:
        if (a->gelu_tanh) fprintf(out, " {approx=tanh}");
        break;
    case IR_OP_SUM:
    case IR_OP_MEAN:
    case IR_OP_REDUCE_MAX: {
        fprintf(out, " {axes=[");
        bool first = true;
        for (int i = 0; i < 32; i++)
            if (a->axes & (1u << i)) {
                fprintf(out, "%s%d", first ? "" : ", ", i);
                first = false;
            }
        fprintf(out, "]%s}", a->keepdim ? ", keepdim" : "");
        break;
    }
    case IR_OP_SOFTMAX:
    case IR_OP_CONCAT: fprintf(out, " {axis=%d}", a->axis); break;
    case IR_OP_SLICE:
        ir_dim_print(&a->start, g->syms, b1, sizeof b1);
        ir_dim_print(&a->end, g->syms, b2, sizeof b2);
        fprintf(out, " {axis=%d, start=%s, end=%s", a->axis, b1, b2);
        if (a->packed) {
            ir_dim_print(&a->nseq, g->syms, b1, sizeof b1);
            fprintf(out, ", packed over %s", b1);
        }
        fputc('}', out);
        break;
    case IR_OP_PERMUTE:
        fprintf(out, " {perm=[");
        for (int i = 0; i < n->type.rank; i++) fprintf(out, "%s%d", i ? ", " : "", a->perm[i]);
        fprintf(out, "]}");
        break;
    case IR_OP_RMSNORM:
    case IR_OP_LAYERNORM: fprintf(out, " {eps=%.9g}", a->eps); break;
    case IR_OP_ROPE: {
        const ir_rope_attrs *r = &a->rope;
        fprintf(out, " {theta=%.9g", a->theta);
        if (r->scaling != IR_ROPE_NONE) fprintf(out, ", scaling=%s, factor=%.9g", ir_rope_scaling_name(r->scaling), r->factor);
        if (r->scaling == IR_ROPE_LLAMA3)
            fprintf(out, ", low_freq_factor=%.9g, high_freq_factor=%.9g", r->low_freq_factor, r->high_freq_factor);
        if (r->scaling == IR_ROPE_LLAMA3 || r->scaling == IR_ROPE_YARN)
            fprintf(out, ", original_max_pos=%.9g", r->original_max_pos);
        if (r->scaling == IR_ROPE_YARN)
            fprintf(out, ", beta_fast=%.9g, beta_slow=%.9g%s, mscale=%.9g", r->beta_fast, r->beta_slow,
                    r->no_truncate ? ", truncate=false" : "", r->mscale);
        if (r->rotary_dims) fprintf(out, ", dims=%lld", (long long)r->rotary_dims);
        if (a->packed) fprintf(out, ", packed");
        fputc('}', out);
        break;
    }
    case IR_OP_TOPK: fprintf(out, " {k=%lld%s}", (long long)a->topk, a->indices ? ", indices" : ""); break;
    case IR_OP_ATTENTION:
        fprintf(out, " {scale=%.9g%s", a->scale, a->causal ? ", causal" : "");
        if (a->window) fprintf(out, ", window=%lld", (long long)a->window);
        if (a->softcap) fprintf(out, ", softcap=%.9g", a->softcap);
        if (a->packed) fprintf(out, ", packed");
        fputc('}', out);
        break;
    case IR_OP_CACHE_WRITE:
        if (a->packed) fprintf(out, " {packed}");
        break;
    default: break;
    }
}

void ir_print(const ir_graph *g, FILE *out)
{
    char tb[512];
    fprintf(out, "model %s\n", g->name);
    if (g->nsyms) {
        fprintf(out, "dims ");
        for (int i = 0; i < g->nsyms; i++) fprintf(out, "%s%s", i ? ", " : "", g->syms[i]);
        fprintf(out, "\n");
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        ir_type_print(&n->type, g->syms, tb, sizeof tb);
        fprintf(out, "%%%d = %s", n->id, ir_op_name(n->op));
        if (n->param >= 0) {
            fprintf(out, " %s : %s", n->name ? n->name : "?", tb);
        } else {
            if (n->ninputs) {
                fputc('(', out);
                for (int j = 0; j < n->ninputs; j++) fprintf(out, "%s%%%d", j ? ", " : "", n->inputs[j]->id);
                fputc(')', out);
            }
            print_attrs(g, n, out);
            fprintf(out, " : %s", tb);
            if (n->group >= 0) fprintf(out, " [k%d]", n->group);
            if (n->name) fprintf(out, "  # %s", n->name);
        }
        if (n->loc.line > 0) fprintf(out, "%s@%d:%d", n->name && n->param < 0 ? " " : "  # ", n->loc.line, n->loc.col);
        fputc('\n', out);
    }
    for (int i = 0; i < g->ngroups; i++)
        fprintf(out, "kernel k%d = %s(%%%d)\n", i, ir_group_kind_name(g->groups[i].kind), g->groups[i].anchor->id);
    for (int i = 0; i < g->noutputs; i++)
        fprintf(out, "output %s = %%%d\n", g->outputs[i].name, g->outputs[i].value->id);
    for (int i = 0; i < g->nstates; i++)
        fprintf(out, "state %s = %%%d\n", g->states[i].state->name, g->states[i].value->id);
}
