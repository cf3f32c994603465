/* passes/merge_linears.c — merge parallel linears that read the same input.
 *
 * The Q/K/V projections of attention and the gate/up pair of a SwiGLU MLP are
 * linears over one activation x with different weights. One linear over the
 * weights stacked along N reads x once and runs one kernel instead of n. The
 * stacked weight is a concat of weights: it depends on weights only, so it is
 * computed once when the weights are bound and costs nothing per call.
 *
 * Algorithm:
 *  1. Mark the bind-time nodes: WEIGHTs, CONSTs, and nodes all of whose
 *     inputs are bind-time.
 *  2. For every node x, take the linears that read x as their input, in node
 *     order. A linear whose weight (or bias) is computed at run time cannot be
 *     packed; it is reported and left alone. The others are split into
 *     classes: same weight dtype and K, all with or all without a bias, widths
 *     (N) within a factor of 64 of the class's first (a router's or a gate's
 *     few columns stay apart from an FFN's gate/up pair). A
 *     class of two or more is one merge; a linear left in a class of its own
 *     is reported with what set it apart.
 *  3. Rebuild the graph in order. At the first member of a class, emit
 *     concat(w1, ..., wn, axis=0) (and the concat of the biases), the merged
 *     linear, and one slice per member along the last axis; each member is
 *     mapped to its slice, so its users read the slice. Weights made by
 *     bind-time nodes that appear later in the file are copied early: they
 *     depend on weights only, so the order stays topological.
 *  4. DCE (nothing should be dead, but the contract of rewriting passes is
 *     to leave no dead nodes behind).
 *
 * The slices are views of the merged result: they cost no kernel. Whether
 * the merged linear's epilogue can absorb what follows them (SwiGLU) is
 * decided by fuse-epilogue. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

#define RULE PASS_RULE_MERGE_LINEARS
#define NZ(s) ((s) ? (s) : "?")

static ir_node *bias_of(const ir_node *l) { return l->ninputs > 2 ? l->inputs[2] : NULL; }

/* Can b be merged into the class led by a? NULL when yes, else why not. */
static const char *incompatible(arena *a, const ir_node *x, const ir_node *y)
{
    const ir_node *wx = x->inputs[1], *wy = y->inputs[1];
    if (wx->type.dtype != wy->type.dtype)
        return arena_printf(a, "%s has %s weights and %s has %s weights", NZ(pass_describe(a, x)),
                            ir_dtype_name(wx->type.dtype), NZ(pass_describe(a, y)), ir_dtype_name(wy->type.dtype));
    if (!ir_dim_eq(&wx->type.dims[1], &wy->type.dims[1]))
        return arena_printf(a, "%s and %s reduce over different K", NZ(pass_describe(a, x)), NZ(pass_describe(a, y)));
    /* a router or a gate of a few columns next to an FFN's gate/up pair:
     * merged, the pair would lose its SwiGLU epilogue for one read of x */
    int64_t nx, ny;
    if (ir_dim_is_const(&wx->type.dims[0], &nx) && ir_dim_is_const(&wy->type.dims[0], &ny) &&
        (nx * 64 < ny || ny * 64 < nx))
        return arena_printf(a, "%s has %lld output columns and %s %lld: a linear under 1/64 of the other's width is "
                               "kept apart (one more read of the input, and the wider one keeps its epilogue)",
                            NZ(pass_describe(a, x)), (long long)nx, NZ(pass_describe(a, y)), (long long)ny);
    const ir_node *bx = bias_of(x), *by = bias_of(y);
    if (!bx != !by)
        return arena_printf(a, "%s has a bias and %s has none", NZ(pass_describe(a, bx ? x : y)),
                            NZ(pass_describe(a, bx ? y : x)));
    if (bx && bx->type.dtype != by->type.dtype)
        return arena_printf(a, "the biases of %s and %s have different dtypes", NZ(pass_describe(a, x)),
                            NZ(pass_describe(a, y)));
    return NULL;
}

/* A short name for a weight in the report: its name, "permute(wt)", or its op and line. */
static const char *weight_name(arena *a, const ir_node *w)
{
    if (w->name) return w->name;
    if (w->ninputs == 1 && w->inputs[0]->name) return arena_printf(a, "%s(%s)", ir_op_name(w->op), w->inputs[0]->name);
    return pass_describe(a, w);
}

/* Copies n (a bind-time node, or one already copied) and what it reads. */
static ir_node *copy_early(pass_rewriter *rw, const ir_node *n)
{
    if (rw->map[n->id]) return rw->map[n->id];
    for (int i = 0; i < n->ninputs; i++)
        if (!copy_early(rw, n->inputs[i])) return NULL;
    return pass_rw_copy(rw, n);
}

/* Emits the merged linear for the class whose members are ids[0..n). */
static bool emit_merge(pass_rewriter *rw, const ir_graph *g, const int *ids, int n)
{
    ir_node *ws[64], *bs[64];
    const ir_node *first = g->nodes[ids[0]];
    for (int i = 0; i < n; i++) {
        const ir_node *l = g->nodes[ids[i]];
        if (!(ws[i] = copy_early(rw, l->inputs[1]))) return false;
        bs[i] = NULL;
        if (bias_of(l) && !(bs[i] = copy_early(rw, bias_of(l)))) return false;
    }
    ir_graph *d = rw->dst;
    ir_node *wcat = ir_concat(d, n, ws, 0, first->loc);
    ir_node *bcat = bias_of(first) ? ir_concat(d, n, bs, 0, first->loc) : NULL;
    if (!wcat || (bias_of(first) && !bcat)) return false;
    ir_node *merged = ir_linear(d, pass_rw_get(rw, first->inputs[0]), wcat, bcat, first->loc);
    if (!merged) return false;
    /* name it after its members when they all have one: "g+u" */
    bool named = true;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = g->nodes[ids[i]]->name;
        named = named && nm;
        if (nm) len += strlen(nm) + 1;
    }
    if (named) {
        char *s = arena_alloc(&d->arena, len + 1);
        if (!s) return false;
        for (int i = 0; i < n; i++) {
            if (i) strcat(s, "+");
            strcat(s, g->nodes[ids[i]]->name);
        }
        merged->name = s;
    }
    int axis = merged->type.rank - 1;
    ir_dim off = ir_dim_const(0);
    for (int i = 0; i < n; i++) {
        const ir_node *l = g->nodes[ids[i]];
        ir_dim end;
        if (!ir_dim_add(off, l->inputs[1]->type.dims[0], &end)) return false;
        ir_node *s = ir_slice(d, merged, axis, off, end, l->loc);
        if (!s) return false;
        if (l->name) s->name = arena_strdup(&d->arena, l->name);
        rw->map[l->id] = s;
        off = end;
    }
    return true;
}

static void report_merge(pass_ctx *ctx, const ir_graph *g, arena *a, const ir_node *x, const int *ids, int n)
{
    ir_node *nodes[64];
    char what[1024], ws[512];
    size_t off = 0, woff = 0;
    what[0] = ws[0] = 0;
    /* members on one line are told apart by their column */
    bool same_line = false;
    for (int i = 1; i < n; i++)
        for (int j = 0; j < i; j++) same_line = same_line || g->nodes[ids[i]]->loc.line == g->nodes[ids[j]]->loc.line;
    for (int i = 0; i < n; i++) {
        ir_node *l = g->nodes[ids[i]];
        nodes[i] = l;
        const char *where = same_line ? arena_printf(a, "%d:%d", l->loc.line, l->loc.col)
                                      : arena_printf(a, "%d", l->loc.line);
        const char *item = arena_printf(a, "%s%s%s%s(%s%s)", i == 0 ? "linear " : "", l->name ? "'" : "",
                                        l->name ? l->name : "", l->name ? "' " : "", i == 0 ? "line " : "", NZ(where));
        int w = snprintf(what + off, sizeof what - off, "%s%s", i == 0 ? "" : ", ", NZ(item));
        if (w > 0 && (size_t)w < sizeof what - off) off += (size_t)w;
        w = snprintf(ws + woff, sizeof ws - woff, "%s%s", i == 0 ? "" : "; ", NZ(weight_name(a, l->inputs[1])));
        if (w > 0 && (size_t)w < sizeof ws - woff) woff += (size_t)w;
    }
    const char *full = arena_printf(a, "merge %s into one linear over packed weights [%s]", what, ws);
    ir_dim bytes = pass_size(ctx, x, n - 1);
    const char *who = x->name && x->param < 0 ? arena_printf(a, "'%s'", x->name)
                      : x->param >= 0         ? arena_printf(a, "input '%s'", x->name)
                                              : "the input";
    pass_decide(ctx, g, RULE, true, bytes, nodes, n, NZ(full),
                "%s is read once and one kernel runs instead of %d; the weights are packed once at bind time",
                NZ(who), n);
}

static void report_refusal(pass_ctx *ctx, const ir_graph *g, arena *a, const ir_node *l, const ir_node *other,
                           const char *why)
{
    ir_node *nodes[2] = {(ir_node *)l, (ir_node *)other};
    ir_dim bytes = pass_size(ctx, l->inputs[0], 1);
    const char *what = arena_printf(a, "merge %s with %s", NZ(pass_describe(a, l)), NZ(pass_describe(a, other)));
    pass_decide(ctx, g, RULE, false, bytes, nodes, 2, NZ(what), "not merged: %s", NZ(why));
}

ir_graph *pass_merge_linears(ir_graph *g, pass_ctx *ctx)
{
    if (!pass_rule_enabled(ctx, RULE)) return g;
    int n = g->nnodes;
    const bool *bt = pass_bind_time_of(ctx, g);
    int *leader = malloc(((size_t)n + 1) * sizeof *leader); /* class leader of a merged linear, else -1 */
    int *cand = malloc(((size_t)n + 1) * sizeof *cand);
    int *members = malloc(((size_t)n + 1) * sizeof *members);
    const pass_users *u = pass_users_of(ctx, g);
    arena a;
    arena_init(&a);
    if (!bt || !leader || !cand || !members || !u) {
        diag_error(ctx->diags, g->loc, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++) leader[i] = -1;

    int merges = 0;
    for (int xi = 0; xi < n; xi++) {
        const ir_node *x = g->nodes[xi];
        int nc = 0;
        for (int k = 0; k < u->count[xi]; k++) {
            ir_node *l = g->nodes[u->users[xi][k]];
            if (l->op == IR_OP_LINEAR && l->inputs[0] == x) cand[nc++] = l->id;
        }
        if (nc < 2) continue;
        /* run-time weights cannot be packed */
        int first_ok = -1;
        for (int k = 0; k < nc; k++) {
            const ir_node *l = g->nodes[cand[k]];
            if (bt[l->inputs[1]->id] && (!bias_of(l) || bt[bias_of(l)->id])) {
                if (first_ok < 0) first_ok = k;
                continue;
            }
            const ir_node *other = g->nodes[cand[k == 0 ? 1 : 0]];
            const char *why = !bt[l->inputs[1]->id]
                                  ? arena_printf(&a, "the weight of %s is computed at run time, so it cannot be packed at bind time",
                                                 NZ(pass_describe(&a, l)))
                                  : arena_printf(&a, "the bias of %s is computed at run time, so it cannot be packed at bind time",
                                                 NZ(pass_describe(&a, l)));
            report_refusal(ctx, g, &a, l, other, why);
            cand[k] = -1;
        }
        if (first_ok < 0) continue;
        /* classes, in node order */
        int first_leader = -1;
        for (int k = 0; k < nc; k++) {
            if (cand[k] < 0 || leader[cand[k]] >= 0) continue;
            const ir_node *lead = g->nodes[cand[k]];
            int nm = 0;
            members[nm++] = lead->id;
            for (int j = k + 1; j < nc && nm < 64; j++)
                if (cand[j] >= 0 && leader[cand[j]] < 0 && !incompatible(&a, lead, g->nodes[cand[j]]))
                    members[nm++] = cand[j];
            if (first_leader < 0) first_leader = lead->id;
            else report_refusal(ctx, g, &a, lead, g->nodes[first_leader],
                                incompatible(&a, g->nodes[first_leader], lead));
            if (nm < 2) continue;
            for (int j = 0; j < nm; j++) leader[members[j]] = lead->id;
            report_merge(ctx, g, &a, x, members, nm);
            merges++;
        }
    }
    free(cand);
    cand = NULL;
    if (merges == 0) {
        free(leader);
        free(members);
        arena_free(&a);
        return g;
    }

    pass_rewriter rw;
    if (!pass_rw_begin(&rw, g, ctx)) goto fail;
    for (int i = 0; i < n; i++) {
        const ir_node *node = g->nodes[i];
        if (rw.map[i]) continue; /* copied early, or a merged member */
        bool ok;
        if (leader[i] == i) {
            int nm = 0;
            for (int j = i; j < n; j++)
                if (leader[j] == i) members[nm++] = j;
            ok = emit_merge(&rw, g, members, nm);
        } else {
            ok = pass_rw_copy(&rw, node) != NULL;
        }
        if (!ok) {
            diag_error(ctx->diags, node->loc, "internal error: merge-linears could not rebuild %s",
                       ir_op_name(node->op));
            pass_rw_abort(&rw);
            goto fail;
        }
    }
    free(leader);
    free(members);
    arena_free(&a);
    g = pass_rw_finish(&rw, g);
    return g ? pass_dce(g, ctx) : NULL;

fail:
    free(leader);
    free(cand);
    free(members);
    arena_free(&a);
    ir_graph_free(g);
    return NULL;
}
