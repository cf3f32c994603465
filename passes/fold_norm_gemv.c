/* passes/fold_norm_gemv.c — let decode linears compute the RMSNorm they read.
 *
 * At decode a row of the residual stream is a few KB, and the RMSNorm of it
 * is a kernel of its own that moves almost nothing: its launch and the
 * boundary cost more than its bytes. Once fold-norm-gain has moved the gain
 * into the weights, linear(rmsnorm(x), W') = (x @ W'^T) * rs with rs =
 * 1/sqrt(mean(x^2) + eps) per row: the linear reads x instead of the norm's
 * result, adds up x[k]^2 from the x it reads anyway and scales its dot
 * products by rs before its epilogue. Which kernel does it depends on the
 * rows (cg_norm_fold_max_rows): the CUDA-core GEMV (up to cg_gemv_max_rows:
 * 2 rows on sm_90a, 16 on other targets) next to each product in its main
 * loop (split-K: the slices' sums of squares are added with the slices); on
 * sm_90a from 17 to 64 rows the Hopper matmul's skinny tiles, from the A
 * tiles its consumers multiply in shared memory (no split-K then; its
 * mma.sync fallback reads them from memory), unless a linear reading the
 * norm holds the QKV epilogue (rope, cache write), whose few tiles make the
 * sums cost more than the norm's kernel (cg_norm_folded). The norm's kernel is not
 * launched and its result is never written or read back.
 *
 * The decision depends on the row count, which a variant fixes: this pass
 * marks the norm's kernel (ir_group.fold_into_gemv); codegen, for a variant
 * of at most cg_norm_fold_max_rows rows, skips that kernel (an empty launch)
 * and has each linear read x instead of the norm's result. Other variants
 * (prefill) keep the row kernel.
 *
 * Algorithm: after plan-kernels, for every RMSNORM anchoring a row kernel:
 *  - it has no gain (fold-norm-gain took it into the weights),
 *  - the kernel holds the norm alone (no residual add or prologue fused in:
 *    those must still run),
 *  - its result is no model output and every consumer is a linear that
 *    reads it as its input (inputs[0]) and anchors a matmul kernel,
 *  - its input is stored (computed by another kernel, or an input).
 * Then the kernel is marked (rule norm-gemv); a norm read by a linear that
 * fails one of these is reported as refused, with the reason. */
#include "passes/pass.h"

#define RULE PASS_RULE_NORM_GEMV
#define NZ(s) ((s) ? (s) : "?")

/* Why the norm n cannot be computed by its consumers, or NULL. */
static const char *why_not(arena *a, const ir_graph *g, const pass_users *u, const ir_node *n, int *nlinears)
{
    *nlinears = 0;
    const char *blocker = NULL, *member = NULL;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *m = g->nodes[i];
        if (m != n && m->group == n->group && !pass_is_view(m) && !member)
            member = arena_printf(a, "the norm's kernel also computes %s", NZ(pass_describe(a, m)));
        for (int j = 0; j < m->ninputs; j++) {
            if (m->inputs[j] != n) continue;
            bool linear = m->op == IR_OP_LINEAR && j == 0 && m->group >= 0 && g->groups[m->group].anchor == m;
            if (linear) (*nlinears)++;
            else if (!blocker) blocker = arena_printf(a, "it is also read by %s", NZ(pass_describe(a, m)));
        }
    }
    if (member) return member;
    if (n->ninputs > 1) return "its gain is not folded into the weights (rule norm-gain refused or disabled)";
    if (u->is_output[n->id]) return "its result is a model output";
    if (blocker) return blocker;
    const ir_node *x = n->inputs[0];
    if (pass_is_view(x) || x->group == n->group) return "its input is not stored by an earlier kernel";
    return NULL;
}

ir_graph *pass_fold_norm_gemv(ir_graph *g, pass_ctx *ctx)
{
    const pass_users *u = pass_users_of(ctx, g);
    const bool *bt = pass_bind_time_of(ctx, g);
    if (!u || !bt) return pass_done(g, ctx, false);
    arena a;
    arena_init(&a);
    for (int i = 0; i < g->nnodes; i++) {
        ir_node *n = g->nodes[i];
        if (n->op != IR_OP_RMSNORM || bt[i] || n->group < 0 || g->groups[n->group].anchor != n) continue;
        int nlin = 0;
        const char *why = why_not(&a, g, u, n, &nlin);
        if (nlin == 0) continue; /* not read by a linear: nothing to say */
        ir_node *nodes[8] = {n};
        int nn = 1;
        for (int j = 0; j < g->nnodes && nn < 8; j++)
            if (g->nodes[j]->op == IR_OP_LINEAR && g->nodes[j]->inputs[0] == n) nodes[nn++] = g->nodes[j];
        const char *what = arena_printf(&a, "compute %s inside the kernel%s of %s at decode", NZ(pass_describe(&a, n)),
                                        nlin > 1 ? "s" : "", NZ(pass_describe(&a, nodes[1])));
        /* the norm's result written once and read by each linear */
        ir_dim bytes = pass_size(ctx, n, 1 + nlin);
        if (why) {
            pass_decide(ctx, g, RULE, false, bytes, nodes, nn, NZ(what), "not folded: %s", why);
        } else if (!pass_rule_enabled(ctx, RULE)) {
            pass_decide(ctx, g, RULE, false, bytes, nodes, nn, NZ(what), "not folded: rule %s is disabled (--disable)",
                        pass_rule_name(RULE));
        } else {
            g->groups[n->group].fold_into_gemv = true;
            pass_decide(ctx, g, RULE, true, bytes, nodes, nn, NZ(what),
                        "in a decode variant (on sm_90a the GEMV to 2 rows, and from 17 to 64 the Hopper matmul's skinny "
                        "tiles unless a linear holds the QKV epilogue; 16 rows on other targets: the GEMV) each linear "
                        "reads the norm's input, adds up its squares "
                        "beside the dot products and scales them by 1/rms; the row kernel k%d is not launched "
                        "(one kernel fewer per call; other variants keep it)",
                        n->group);
        }
    }
    arena_free(&a);
    return pass_done(g, ctx, true);
}
