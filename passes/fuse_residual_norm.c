/* passes/fuse_residual_norm.c — fuse a residual add into the norm after it.
 *
 * A pre-norm transformer keeps a residual stream: x1 = x + attn(...) is both
 * normalized (h2 = rmsnorm(x1)) and carried on (y = x1 + mlp(h2)). One row
 * kernel can compute the sum, write it once for the stream, and normalize it
 * from registers: the norm does not read the sum back, and one kernel runs
 * instead of two.
 *
 * Algorithm: every RMSNORM/LAYERNORM computed at run time and not yet in a
 * group starts a group of kind "row" (a norm is a row kernel of its own even
 * with nothing to fuse). When its input is an ADD not in a group whose result
 * also has other consumers (the residual stream) the add joins (rule
 * residual-norm). An add already fused into a matmul epilogue is reported as
 * a refusal with 0 bytes, so the user can see which way it went. An add
 * whose only consumer is the norm is an ordinary prologue, left to
 * fuse-elementwise (rule reduction-prologue). The add must not be a
 * transitive input of the norm's other inputs (the gain, the bias), or the
 * kernel would wait on itself. An add one of whose operands is another norm's
 * result (through casts read once: Gemma-2's x + cast(rmsnorm(o)), a norm
 * after the attention) stays for that norm's kernel, as its epilogue
 * (fuse-elementwise): one row kernel either way, and this norm keeps a stored
 * input, so a decode GEMV can compute it (norm-gemv). */
#include <stdio.h>
#include <stdlib.h>

#include "passes/pass.h"

#define RULE PASS_RULE_RESIDUAL_NORM
#define NZ(s) ((s) ? (s) : "?")

/* Scratch for depends_on: a visit stamp per node and a stack. */
typedef struct walk {
    int *stamp;
    int cur;
    const ir_node **stack;
} walk;

/* Is target a transitive input of n? Nodes before target in the (topological)
 * order cannot depend on it, which bounds the walk. */
static bool depends_on(walk *w, const ir_node *n, const ir_node *target)
{
    if (n->id < target->id) return false;
    int sp = 0;
    w->cur++;
    w->stack[sp++] = n;
    w->stamp[n->id] = w->cur;
    while (sp > 0) {
        const ir_node *m = w->stack[--sp];
        if (m == target) return true;
        for (int j = 0; j < m->ninputs; j++) {
            const ir_node *in = m->inputs[j];
            if (in->id < target->id || w->stamp[in->id] == w->cur) continue;
            w->stamp[in->id] = w->cur;
            w->stack[sp++] = in;
        }
    }
    return false;
}

/* The norm computed at run time whose result reaches add operand o through casts that are
 * read once, or NULL. */
static const ir_node *norm_operand(const pass_users *u, const bool *bt, const ir_node *o)
{
    while (o->op == IR_OP_CAST && u->count[o->id] == 1 && !u->is_output[o->id]) {
        o = o->inputs[0];
        if ((o->op == IR_OP_RMSNORM || o->op == IR_OP_LAYERNORM) && !bt[o->id] &&
            u->count[o->id] == 1 && !u->is_output[o->id])
            return o;
    }
    return NULL;
}

static const char *anchor_of(arena *a, const ir_graph *g, const ir_node *n)
{
    return pass_describe(a, g->groups[n->group].anchor);
}

ir_graph *pass_fuse_residual_norm(ir_graph *g, pass_ctx *ctx)
{
    int nn = g->nnodes;
    const pass_users *u = pass_users_of(ctx, g);
    const bool *bt = pass_bind_time_of(ctx, g);
    walk w = {calloc((size_t)nn + 1, sizeof *w.stamp), 0, calloc((size_t)nn + 1, sizeof *w.stack)};
    arena a;
    arena_init(&a);
    bool ok = u && bt && w.stamp && w.stack;
    for (int i = 0; ok && i < nn; i++) {
        ir_node *norm = g->nodes[i];
        if ((norm->op != IR_OP_RMSNORM && norm->op != IR_OP_LAYERNORM) || norm->group >= 0 || bt[i]) continue;
        ir_node *add = norm->inputs[0];
        ir_node *join = NULL;
        if (add->op == IR_OP_ADD && !bt[add->id]) {
            ir_node *nodes[2] = {add, norm};
            const char *what = arena_printf(&a, "fuse the residual %s into the row kernel of %s",
                                            NZ(pass_describe(&a, add)), NZ(pass_describe(&a, norm)));
            int others = u->count[add->id] + (u->is_output[add->id] ? 1 : 0) - 1;
            ir_dim bytes = pass_size(ctx, add, 1);
            bool cycle = false;
            for (int j = 1; j < norm->ninputs; j++) cycle = cycle || depends_on(&w, norm->inputs[j], add);
            if (add->group >= 0) {
                const ir_group *grp = &g->groups[add->group];
                const char *where = grp->anchor->op == IR_OP_MATMUL || grp->anchor->op == IR_OP_LINEAR
                                        ? arena_printf(&a, "the epilogue of %s", NZ(anchor_of(&a, g, add)))
                                        : arena_printf(&a, "the %s kernel of %s", ir_group_kind_name(grp->kind), NZ(anchor_of(&a, g, add)));
                pass_decide(ctx, g, RULE, false, ir_dim_const(0), nodes, 2, NZ(what),
                            "the residual add (line %d) is already in %s", add->loc.line, NZ(where));
            } else if (others < 1) {
                /* not a residual stream: an ordinary prologue (fuse-elementwise) */
            } else if (!pass_rule_enabled(ctx, RULE)) {
                pass_decide(ctx, g, RULE, false, bytes, nodes, 2, NZ(what),
                            "not fused: rule %s is disabled (--disable)", pass_rule_name(RULE));
            } else if (norm_operand(u, bt, add->inputs[0]) || norm_operand(u, bt, add->inputs[1])) {
                const ir_node *o = norm_operand(u, bt, add->inputs[0]);
                if (!o) o = norm_operand(u, bt, add->inputs[1]);
                pass_decide(ctx, g, RULE, false, bytes, nodes, 2, NZ(what),
                            "not fused: the add is left to the row kernel of %s as its epilogue: "
                            "one row kernel either way, and this norm keeps a stored input for a decode "
                            "GEMV to compute it from (norm-gemv)",
                            NZ(pass_describe(&a, o)));
            } else if (cycle) {
                pass_decide(ctx, g, RULE, false, bytes, nodes, 2, NZ(what),
                            "not fused: the norm's weight is computed from the sum, so it cannot be read by the same kernel");
            } else {
                join = add;
                char tb[256];
                ir_type_print(&add->type, g->syms, tb, sizeof tb);
                char who[64];
                if (others == 1) snprintf(who, sizeof who, "its other consumer");
                else snprintf(who, sizeof who, "its %d other consumers", others);
                pass_decide(ctx, g, RULE, true, bytes, nodes, 2, NZ(what),
                            "one row kernel writes the sum %s once for %s and normalizes it "
                            "from registers; the norm does not read it back",
                            tb, who);
            }
        }
        int k = ir_graph_add_group(g, norm, IR_GROUP_ROW);
        if (k < 0) ok = false;
        else if (join) join->group = k;
    }
    free(w.stamp);
    free(w.stack);
    arena_free(&a);
    return pass_done(g, ctx, ok);
}
