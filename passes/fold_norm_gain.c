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
 * folded weights.
 *
 * A norm computed in float32 between two casts, as Gemma writes it —
 * cast(rmsnorm(cast(x, f32), g), T) read by linears of T weights, each cast
 * read by nothing else — folds too: without its gain the sandwich is the
 * norm of x computed in float and rounded once to T, which is what a norm of
 * a T input computes, so it becomes rmsnorm(x) of dtype T (and norm-gemv can
 * take it at decode); the weights become cast(mul(cast(W, f32), g), T), the
 * product of the float32 gain rounded once to T. A LayerNorm with a bias is
 * not taken in that form (its float32 bias would need a float32 product). */
#include <stdlib.h>

#include "passes/pass.h"

#define RULE PASS_RULE_NORM_GAIN
#define NZ(s) ((s) ? (s) : "?")

static ir_node *bias_of(const ir_node *l) { return l->ninputs > 2 ? l->inputs[2] : NULL; }

/* How the linears see norm n: `reader` is what they read, n itself, or for a float32 norm
 * that casts its result to a narrower float type T the cast `cout` (the sandwich
 * cast(norm(cast(x, f32)), T) when `cin`, n's input, is a cast from T; why_not checks the rest). */
typedef struct norm_view {
    const ir_node *reader, *cin, *cout;
} norm_view;

static norm_view view_of(const ir_graph *g, const pass_users *u, const ir_node *n)
{
    norm_view v = {n, NULL, NULL};
    if (n->type.dtype != IR_F32) return v;
    for (int k = 0; k < u->count[n->id]; k++) {
        const ir_node *c = g->nodes[u->users[n->id][k]];
        if (c->op != IR_OP_CAST || !ir_dtype_is_float(c->type.dtype) || c->type.dtype == IR_F32) continue;
        for (int j = 0; j < u->count[c->id]; j++)
            if (g->nodes[u->users[c->id][j]]->op == IR_OP_LINEAR) v.reader = v.cout = c;
    }
    const ir_node *ci = n->inputs[0];
    if (v.cout && ci->op == IR_OP_CAST && ci->inputs[0]->type.dtype == v.cout->type.dtype) v.cin = ci;
    return v;
}

/* Why the gain of norm n cannot be folded, or NULL. */
static const char *why_not(arena *a, const ir_graph *g, const pass_users *u, const bool *bt, const ir_node *n,
                           const norm_view *v)
{
    const ir_node *gain = n->inputs[1], *b = n->ninputs > 2 ? n->inputs[2] : NULL, *r = v->reader;
    if (!bt[gain->id]) return "its gain is computed at run time";
    if (b && !bt[b->id]) return "its bias is computed at run time";
    if (v->cout) { /* the sandwich: n read by its cast alone, its input a cast read by n alone */
        const char *t = ir_dtype_name(v->cout->type.dtype);
        if (u->is_output[n->id]) return "its float32 result is a model output";
        if (u->count[n->id] != 1) return arena_printf(a, "its float32 result is read by more than its cast to %s", t);
        if (!v->cin) return arena_printf(a, "it is cast to %s but its input is not cast from %s", t, t);
        if (u->count[v->cin->id] != 1 || u->is_output[v->cin->id])
            return arena_printf(a, "its input's cast from %s is read elsewhere too", t);
        if (b) return "a LayerNorm's bias between casts to float32 is not folded";
    }
    if (u->is_output[r->id]) return "its result is a model output";
    for (int k = 0; k < u->count[r->id]; k++) {
        const ir_node *l = g->nodes[u->users[r->id][k]];
        if (l->op != IR_OP_LINEAR || l->inputs[0] != r)
            return arena_printf(a, "it is also read by %s", NZ(pass_describe(a, l)));
        for (int j = 1; j < l->ninputs; j++)
            if (l->inputs[j] == r) return arena_printf(a, "%s also reads it as a weight", NZ(pass_describe(a, l)));
        const ir_node *w = l->inputs[1], *c = bias_of(l);
        if (!bt[w->id] || (c && !bt[c->id]))
            return arena_printf(a, "the weight or bias of %s is computed at run time", NZ(pass_describe(a, l)));
        const ir_dtype want = v->cout ? v->cout->type.dtype : gain->type.dtype;
        if (w->type.rank != 2 || w->type.dtype != want || (b && c && c->type.dtype != b->type.dtype))
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
    ir_node *wg;
    if (w->type.dtype == gain->type.dtype) {
        wg = ir_binary(d, IR_OP_MUL, w, gain, l->inputs[1]->loc);
    } else { /* the sandwich: the product in the gain's float32, rounded once to the weight's dtype */
        const src_loc wl = l->inputs[1]->loc;
        ir_node *wf = ir_cast(d, w, gain->type.dtype, wl), *p = wf ? ir_binary(d, IR_OP_MUL, wf, gain, wl) : NULL;
        wg = p ? ir_cast(d, p, w->type.dtype, wl) : NULL;
    }
    if (!wg) return false;
    if (l->inputs[1]->name)
        wg->name = arena_printf(&d->arena, "%s*%s", l->inputs[1]->name,
                                norm->inputs[1]->name ? norm->inputs[1]->name : "gain");
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
    /* fold[i]: 1 a folded norm, 2 a linear reading one, 3 a cast of a float32 sandwich (it becomes
     * the norm's value); norm_of[i]: the norm a linear (2) or cast (3) belongs to */
    char *fold = calloc((size_t)g->nnodes + 1, 1);
    int *norm_of = calloc((size_t)g->nnodes + 1, sizeof *norm_of);
    arena a;
    arena_init(&a);
    if (!u || !bt || !fold || !norm_of) {
        diag_error(ctx->diags, g->loc, "out of memory");
        goto fail;
    }
    int nfold = 0;
    for (int i = 0; i < g->nnodes; i++) {
        ir_node *n = g->nodes[i];
        if ((n->op != IR_OP_RMSNORM && n->op != IR_OP_LAYERNORM) || n->ninputs < 2 || bt[i]) continue;
        const norm_view v = view_of(g, u, n);
        const int r = v.reader->id;
        ir_node *nodes[8] = {n};
        int nn = 1, nlin = 0;
        for (int k = 0; k < u->count[r]; k++) {
            ir_node *l = g->nodes[u->users[r][k]];
            if (l->op != IR_OP_LINEAR || l->inputs[0] != v.reader) continue;
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
        const char *why = why_not(&a, g, u, bt, n, &v);
        if (why) {
            pass_decide(ctx, g, RULE, false, bytes, nodes, nn, NZ(what), "not folded: %s", why);
            continue;
        }
        fold[i] = 1;
        if (v.cout) fold[r] = 3, norm_of[r] = i;
        for (int k = 0; k < u->count[r]; k++) fold[u->users[r][k]] = 2, norm_of[u->users[r][k]] = i;
        nfold++;
        pass_decide(ctx, g, RULE, true, bytes, nodes, nn, NZ(what),
                    "the weight times the gain%s%s: computed once when the weights are bound (one copy of each "
                    "weight); the norm reads no gain, so a decode GEMV can compute it from its input (norm-gemv)%s",
                    v.cout ? " (in float32, rounded once to the weight's dtype)" : "",
                    n->ninputs > 2 ? ", and the norm's bias times the weight added to the linear's bias" : "",
                    v.cout ? arena_printf(&a, "; without its gain the norm between casts to float32 and back is the "
                                              "norm of its %s input, which the linears read",
                                          ir_dtype_name(v.cout->type.dtype))
                           : "");
    }
    if (nfold == 0) {
        free(fold);
        free(norm_of);
        arena_free(&a);
        return g;
    }

    pass_rewriter rw;
    if (!pass_rw_begin(&rw, g, ctx)) goto fail;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        bool ok = true;
        if (fold[i] == 1) {
            /* the sandwich's norm reads x itself (its input cast is left to DCE) */
            const norm_view v = view_of(g, u, n);
            ir_node *x = pass_rw_get(&rw, v.cin ? v.cin->inputs[0] : n->inputs[0]);
            ir_node *nn = n->op == IR_OP_RMSNORM ? ir_rmsnorm(rw.dst, x, NULL, n->attrs.eps, n->loc)
                                                 : ir_layernorm(rw.dst, x, NULL, NULL, n->attrs.eps, n->loc);
            if ((ok = nn != NULL)) {
                if (n->name) nn->name = arena_strdup(&rw.dst->arena, n->name);
                rw.map[i] = nn;
            }
        } else if (fold[i] == 3) {
            ir_node *nn = pass_rw_get(&rw, g->nodes[norm_of[i]]);
            if ((ok = nn != NULL)) {
                if (n->name) nn->name = arena_strdup(&rw.dst->arena, n->name);
                rw.map[i] = nn;
            }
        } else if (fold[i] == 2) {
            ok = emit_linear(&rw, g->nodes[norm_of[i]], n);
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
    free(norm_of);
    arena_free(&a);
    g = pass_rw_finish(&rw, g);
    return g ? pass_dce(g, ctx) : NULL;

fail:
    free(fold);
    free(norm_of);
    arena_free(&a);
    ir_graph_free(g);
    return NULL;
}
