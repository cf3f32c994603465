/* passes/fold_norm_gain.c — fold a norm's gain (and a LayerNorm's bias) into
 * the weights of the linears that read it.
 *
 * linear(rmsnorm(x, g), W, c) = linear(rmsnorm(x), W * g, c): the gain scales
 * the K axis of every weight that reads the norm, so it can be multiplied
 * into those weights once, when they are bound. A LayerNorm's bias b adds
 * b @ W^T to the product: linear(layernorm(x, g, b), W, c) =
 * linear(layernorm(x), W * g, b @ W^T + c), the new bias computed at bind time
 * as well. The norm then reads no gain (it is the same kernel in every variant,
 * so there is one copy of each weight), and at decode a GEMV can compute the
 * whole norm itself from x: its sum of squares is accumulated next to the dot
 * products and 1/rms scales the result (fold-norm-gemv, rule norm-gemv).
 *
 * Algorithm: for every RMSNORM / LAYERNORM computed at run time with a gain,
 *  - the gain (and bias) are bind-time (weights or made from weights),
 *  - its result is no model output and every user is a linear reading it as
 *    its input (inputs[0]),
 *  - each linear's weight (and bias) is bind-time, of the gain's dtype, and
 *    read by that linear alone (else the original would stay next to the
 *    folded copy);
 * then the graph is rebuilt with the norm without gain and bias and each
 * linear over mul(W, g) (and linear(b, W, c) as its bias). Refusals are
 * reported with the reason. Runs before merge-linears, which then stacks the
 * folded weights. */
#include <stdlib.h>

#include "passes/pass.h"

#define RULE PASS_RULE_NORM_GAIN
#define NZ(s) ((s) ? (s) : "?")

static ir_node *bias_of(const ir_node *l) { return l->ninputs > 2 ? l->inputs[2] : NULL; }

/* Why the gain of norm n cannot be folded, or NULL. */
static const char *why_not(arena *a, const ir_graph *g, const pass_users *u, const bool *bt, const ir_node *n)
{
    const ir_node *gain = n->inputs[1], *b = n->ninputs > 2 ? n->inputs[2] : NULL;
    if (!bt[gain->id]) return "its gain is computed at run time";
    if (b && !bt[b->id]) return "its bias is computed at run time";
    if (u->is_output[n->id]) return "its result is a model output";
    for (int k = 0; k < u->count[n->id]; k++) {
        const ir_node *l = g->nodes[u->users[n->id][k]];
        if (l->op != IR_OP_LINEAR || l->inputs[0] != n)
            return arena_printf(a, "it is also read by %s", NZ(pass_describe(a, l)));
        for (int j = 1; j < l->ninputs; j++)
            if (l->inputs[j] == n) return arena_printf(a, "%s also reads it as a weight", NZ(pass_describe(a, l)));
        const ir_node *w = l->inputs[1], *c = bias_of(l);
        if (!bt[w->id] || (c && !bt[c->id]))
            return arena_printf(a, "the weight or bias of %s is computed at run time", NZ(pass_describe(a, l)));
        if (w->type.rank != 2 || w->type.dtype != gain->type.dtype || (b && c && c->type.dtype != b->type.dtype))
            return arena_printf(a, "the weight of %s is of another dtype than the gain", NZ(pass_describe(a, l)));
        if (u->count[w->id] != 1)
            return arena_printf(a, "the weight of %s is read elsewhere too (folded, it would be stored twice)",
                                NZ(pass_describe(a, l)));
    }
    return NULL;
}

static bool emit_linear(pass_rewriter *rw, const ir_node *norm, const ir_node *l)
{
    ir_graph *d = rw->dst;
    ir_node *w = pass_rw_get(rw, l->inputs[1]), *gain = pass_rw_get(rw, norm->inputs[1]);
    ir_node *c = bias_of(l) ? pass_rw_get(rw, bias_of(l)) : NULL;
    ir_node *wg = ir_binary(d, IR_OP_MUL, w, gain, l->inputs[1]->loc);
    if (!wg) return false;
    if (l->inputs[1]->name && norm->inputs[1]->name)
        wg->name = arena_printf(&d->arena, "%s*%s", l->inputs[1]->name, norm->inputs[1]->name);
    if (norm->ninputs > 2) { /* the LayerNorm's bias through the unscaled weight: b @ W^T (+ c) */
        c = ir_linear(d, pass_rw_get(rw, norm->inputs[2]), w, c, l->loc);
        if (!c) return false;
    }
    ir_node *nl = ir_linear(d, pass_rw_get(rw, l->inputs[0]), wg, c, l->loc);
    if (!nl) return false;
    if (l->name) nl->name = arena_strdup(&d->arena, l->name);
    rw->map[l->id] = nl;
    return true;
}

ir_graph *pass_fold_norm_gain(ir_graph *g, pass_ctx *ctx)
{
    if (!pass_rule_enabled(ctx, RULE)) return g;
    const pass_users *u = pass_users_of(ctx, g);
    const bool *bt = pass_bind_time_of(ctx, g);
    char *fold = calloc((size_t)g->nnodes + 1, 1); /* 1: a folded norm; 2: a linear reading one */
    arena a;
    arena_init(&a);
    if (!u || !bt || !fold) {
        diag_error(ctx->diags, g->loc, "out of memory");
        goto fail;
    }
    int nfold = 0;
    for (int i = 0; i < g->nnodes; i++) {
        ir_node *n = g->nodes[i];
        if ((n->op != IR_OP_RMSNORM && n->op != IR_OP_LAYERNORM) || n->ninputs < 2 || bt[i]) continue;
        ir_node *nodes[8] = {n};
        int nn = 1, nlin = 0;
        for (int k = 0; k < u->count[i]; k++) {
            ir_node *l = g->nodes[u->users[i][k]];
            if (l->op != IR_OP_LINEAR || l->inputs[0] != n) continue;
            nlin++;
            if (nn < 8) nodes[nn++] = l;
        }
        if (nlin == 0) continue; /* not read by a linear: nothing to say */
        const char *what =
            arena_printf(&a, "fold the gain%s of %s into the weight%s of %s%s", n->ninputs > 2 ? " and bias" : "",
                         NZ(pass_describe(&a, n)), nlin > 1 ? "s" : "", NZ(pass_describe(&a, nodes[1])),
                         nlin > 1 ? arena_printf(&a, " and %d more", nlin - 1) : "");
        /* per call the norm no longer reads its gain (and bias) */
        ir_dim bytes = pass_size(ctx, n->inputs[1], n->ninputs > 2 ? 2 : 1);
        const char *why = why_not(&a, g, u, bt, n);
        if (why) {
            pass_decide(ctx, g, RULE, false, bytes, nodes, nn, NZ(what), "not folded: %s", why);
            continue;
        }
        fold[i] = 1;
        for (int k = 0; k < u->count[i]; k++) fold[u->users[i][k]] = 2;
        nfold++;
        pass_decide(ctx, g, RULE, true, bytes, nodes, nn, NZ(what),
                    "the weight times the gain%s: computed once when the weights are bound (one copy of each "
                    "weight); the norm reads no gain, so a decode GEMV can compute it from its input (norm-gemv)",
                    n->ninputs > 2 ? ", and the norm's bias times the weight added to the linear's bias" : "");
    }
    if (nfold == 0) {
        free(fold);
        arena_free(&a);
        return g;
    }

    pass_rewriter rw;
    if (!pass_rw_begin(&rw, g, ctx)) goto fail;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        bool ok = true;
        if (fold[i] == 1) {
            ir_node *x = pass_rw_get(&rw, n->inputs[0]);
            ir_node *nn = n->op == IR_OP_RMSNORM ? ir_rmsnorm(rw.dst, x, NULL, n->attrs.eps, n->loc)
                                                 : ir_layernorm(rw.dst, x, NULL, NULL, n->attrs.eps, n->loc);
            if ((ok = nn != NULL)) {
                if (n->name) nn->name = arena_strdup(&rw.dst->arena, n->name);
                rw.map[i] = nn;
            }
        } else if (fold[i] == 2) {
            ok = emit_linear(&rw, n->inputs[0], n);
        } else {
            ok = pass_rw_copy(&rw, n) != NULL;
        }
        if (!ok) {
            diag_error(ctx->diags, n->loc, "internal error: fold-norm-gain could not rebuild %s", ir_op_name(n->op));
            pass_rw_abort(&rw);
            goto fail;
        }
    }
    free(fold);
    arena_free(&a);
    g = pass_rw_finish(&rw, g);
    return g ? pass_dce(g, ctx) : NULL;

fail:
    free(fold);
    arena_free(&a);
    ir_graph_free(g);
    return NULL;
}
