/* passes/pack_sequences.c — a model's packed form: the prompts of a batch
 * concatenated along one token axis, no padding.
 *
 * Not a pipeline pass: the driver runs it on the graph as written, before
 * the pipeline, when the model is compiled packed (kiln_model_options.packed,
 * `kiln compile --packed`); the pipeline then fuses the packed graph as any
 * other (ir/ir.h, "Packed sequences", gives the ops' meaning).
 *
 * Algorithm. The model's dims B (sequences) and S (new tokens) name the two
 * kinds of values: a token value has type [B, S', ...] with S in S' (ids,
 * activations, q/k/v); every other value is per sequence (pos [B], the
 * states [B, KV, T, HD], the last token [B, 1, D], the logits) or
 * independent of both (weights). One walk in node order rebuilds the graph:
 *   - a token value's type becomes [1, S', ...] (its B rows packed into one
 *     row of cu[B] tokens, S meaning that total at run time);
 *   - rope, cache_write and attention over token values, and a slice along
 *     the tokens of a fixed count (slice(x, 1, start=S-1)), become their
 *     packed forms (attrs.packed, per sequence through the run's table);
 *   - every other node is copied, its type inferred again: a node whose type
 *     then differs from the rewritten one mixes the two kinds in a way that
 *     has no packed meaning (a per-sequence value broadcast over tokens, a
 *     B*S axis, a reduction across tokens) and packing fails there with the
 *     node's line. */
#include <string.h>

#include "passes/pass.h"

/* Whether symbol sym occurs in d. */
static bool dim_has(const ir_dim *d, int sym)
{
    for (int i = 0; i < d->nterms; i++)
        if (d->t[i].exp[sym]) return true;
    return false;
}

/* A token value: [B, S', ...] with S in S'. */
static bool is_tokens(const ir_type *t, int b, int s)
{
    ir_dim B = ir_dim_sym(b);
    return t->rank >= 2 && ir_dim_eq(&t->dims[0], &B) && dim_has(&t->dims[1], s);
}

ir_graph *pass_pack_sequences(ir_graph *g, diag_list *d)
{
    int b = ir_graph_find_sym(g, "B"), s = ir_graph_find_sym(g, "S");
    if (b < 0 || s < 0) {
        diag_error(d, g->loc, "packed sequences: model %s has no dims B (sequences) and S (new tokens)", g->name);
        ir_graph_free(g);
        return NULL;
    }
    pass_ctx ctx = {.diags = d};
    pass_rewriter rw;
    if (!pass_rw_begin(&rw, g, &ctx)) {
        ir_graph_free(g);
        return NULL;
    }
    char tb[256], tb2[256];
    bool packed_any = false;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        ir_node tmp = *n;
        bool tok = is_tokens(&n->type, b, s);
        for (int k = 0; k < n->type.rank && !tok; k++)
            if (dim_has(&n->type.dims[k], s) && dim_has(&n->type.dims[k], b)) {
                ir_type_print(&n->type, g->syms, tb, sizeof tb);
                diag_error(d, n->loc, "packed sequences: %s has type %s, an axis over both B and S", ir_op_name(n->op), tb);
                pass_rw_abort(&rw);
                ir_graph_free(g);
                return NULL;
            }
        if (tok) tmp.type.dims[0] = ir_dim_const(1);
        const ir_node *x = n->ninputs ? n->inputs[0] : NULL;
        switch (n->op) {
        case IR_OP_ROPE: tmp.attrs.packed = tok; break;
        case IR_OP_ATTENTION: tmp.attrs.packed = tok; break;
        case IR_OP_CACHE_WRITE: tmp.attrs.packed = is_tokens(&n->inputs[1]->type, b, s); break;
        case IR_OP_SLICE:
            if (x && n->attrs.axis == 1 && is_tokens(&x->type, b, s) && !tok) {
                tmp.attrs.packed = true;
                tmp.attrs.nseq = ir_dim_sym(b);
            }
            break;
        default: break;
        }
        packed_any |= tmp.attrs.packed;
        ir_node *c = pass_rw_copy(&rw, &tmp);
        if (c && !ir_type_eq(&c->type, &tmp.type)) {
            ir_type_print(&c->type, g->syms, tb, sizeof tb);
            ir_type_print(&tmp.type, g->syms, tb2, sizeof tb2);
            diag_error(d, n->loc,
                       "packed sequences: %s mixes per-sequence and per-token values (packed it is %s, not %s)",
                       ir_op_name(n->op), tb, tb2);
            c = NULL;
        }
        if (!c) {
            pass_rw_abort(&rw);
            ir_graph_free(g);
            return NULL;
        }
    }
    if (!packed_any) {
        diag_error(d, g->loc, "packed sequences: model %s has no rope, cache_write, attention or last-token slice over values [B, S, ...] (dims B and S bound with -D stay unpacked)",
                   g->name);
        pass_rw_abort(&rw);
        ir_graph_free(g);
        return NULL;
    }
    return pass_rw_finish(&rw, g);
}
