/* passes/fuse_moe.c — the mixture-of-experts kernels: the router, the
 * gated expert FFN and the combine.
 *
 * A model author routes tokens with topk over the router's scores, softmaxes
 * (over all experts before topk, or over the chosen after it) and runs each
 * chosen expert's FFN with expert_linear. Left alone, that is a kernel per
 * topk result, one per softmax, one per expert_linear, one for the gate and
 * one for the weighted sum over the slots: small launches at decode,
 * intermediates of [B, S, k, F] at prefill. Three rules group them for
 * codegen's moe template (codegen/cg_moe.c):
 *
 *   moe-router  both results of one topk (values and indices), a softmax
 *               over all experts that only they read, a softmax over the
 *               chosen values and the single-consumer elementwise chain
 *               after it (a cast) become one router kernel, anchored at
 *               the indices: one warp per token computes the whole route
 *               (with the single-consumer elementwise ops that make the
 *               scores, a cast of the logits, as it reads them).
 *   moe-gated   act(expert_linear(x, wg, idx)) * expert_linear(x, wu, idx)
 *               (the SwiGLU of an expert FFN: the same input, the same
 *               experts) becomes one expert kernel that reads both weights
 *               of each chosen expert and stores only the product.
 *   moe-combine sum(expert_linear(h, w, idx) * weights, axis=slots) (the
 *               combine: each token's slots weighted and added up), with
 *               the single-consumer elementwise chain after the sum (the
 *               residual add), joins the expert kernel: the CTA that
 *               completes a column block of every slot adds them up and
 *               stores the chain's result, so the slots' results are not
 *               written and read back by a kernel of their own.
 *
 * Algorithm: one walk over the nodes, before fuse-elementwise (so the
 * softmaxes and casts are still free): for every ungrouped topk of indices,
 * its sibling of values, then the optional softmax before and the chain
 * after; for every mul of an unary op of one expert_linear and another
 * expert_linear over the same x and ids, each used once; for every sum
 * over one axis of a mul of an ungrouped expert_linear (the axis before its
 * last: the slots) whose expert_linear and mul have one consumer each, the
 * chain after it while each op is elementwise of the sum's shape with one
 * consumer.
 * Each candidate that fails a condition is reported as refused with the
 * reason. */
#include "passes/pass.h"

#define NZ(s) ((s) ? (s) : "?")

static int consumers(const pass_users *u, const ir_node *n) { return u->count[n->id] + (u->is_output[n->id] ? 1 : 0); }

static ir_node *only_user(const ir_graph *g, const pass_users *u, const ir_node *n)
{
    return consumers(u, n) == 1 && u->count[n->id] == 1 ? g->nodes[u->users[n->id][0]] : NULL;
}

static bool free_node(const ir_node *n, const bool *bt) { return n->group < 0 && !bt[n->id]; }

static bool last_axis_softmax(const ir_node *n) { return n->op == IR_OP_SOFTMAX && n->attrs.axis == n->type.rank - 1; }

static void router(ir_graph *g, pass_ctx *ctx, const pass_users *u, const bool *bt, ir_node *ti, arena *a)
{
    ir_node *x = ti->inputs[0], *tv = NULL;
    for (int j = 0; j < u->count[x->id]; j++) {
        ir_node *s = g->nodes[u->users[x->id][j]];
        if (s->op == IR_OP_TOPK && !s->attrs.indices && s->attrs.topk == ti->attrs.topk && free_node(s, bt)) tv = s;
    }
    ir_node *nodes[8] = {ti};
    int nn = 1;
    if (tv) nodes[nn++] = tv;
    /* a softmax over all experts read by nothing else */
    ir_node *pre = NULL;
    if (last_axis_softmax(x) && free_node(x, bt) && !u->is_output[x->id]) {
        bool only = true;
        for (int j = 0; j < u->count[x->id]; j++) {
            const ir_node *s = g->nodes[u->users[x->id][j]];
            only &= s == ti || s == tv;
        }
        if (only) pre = x, nodes[nn++] = x;
    }
    /* a softmax over the chosen, then a single-consumer elementwise chain */
    ir_node *chain[4];
    int nc = 0;
    ir_node *tail = tv;
    ir_node *post = tv ? only_user(g, u, tv) : NULL;
    if (post && last_axis_softmax(post) && free_node(post, bt)) chain[nc++] = post, tail = post;
    else post = NULL;
    while (tail && nc < 4) {
        ir_node *c = only_user(g, u, tail);
        if (!c || ir_op_class(c->op) != IR_CLASS_ELEMENTWISE || !free_node(c, bt) || c->ninputs != 1 ||
            !ir_type_same_shape(&c->type, &tail->type))
            break;
        chain[nc++] = c;
        tail = c;
    }
    for (int i = 0; i < nc && nn < 8; i++) nodes[nn++] = chain[i];
    const char *what = arena_printf(a, "compute %s%s%s in one router kernel", NZ(pass_describe(a, ti)),
                                    tv ? " with its values" : "", pre ? ", the softmax before it" : "");
    ir_dim bytes = pass_size(ctx, ti, 0);
    if (tv) bytes = pass_size_sum(ctx, ti, bytes, pass_size(ctx, x, 1)); /* the scores read once, not twice */
    if (pre) bytes = pass_size_sum(ctx, ti, bytes, pass_size(ctx, pre, 2));
    if (nc && tv) bytes = pass_size_sum(ctx, ti, bytes, pass_size(ctx, tv, 2));
    for (int i = 0; i + 1 < nc; i++) bytes = pass_size_sum(ctx, ti, bytes, pass_size(ctx, chain[i], 2));
    if (!pass_rule_enabled(ctx, PASS_RULE_MOE_ROUTER)) {
        pass_decide(ctx, g, PASS_RULE_MOE_ROUTER, false, bytes, nodes, nn, what, "not fused: rule %s is disabled (--disable)",
                    pass_rule_name(PASS_RULE_MOE_ROUTER));
        return;
    }
    int k = ir_graph_add_group(g, ti, IR_GROUP_GATHER);
    if (k < 0) return;
    for (int i = 1; i < nn; i++) nodes[i]->group = k;
    pass_decide(ctx, g, PASS_RULE_MOE_ROUTER, true, bytes, nodes, nn, what,
                "one warp per token reads its %s scores once, %s the top %lld%s and stores the experts and their "
                "weights; one kernel instead of %d",
                pre ? "router" : "router's", pre ? "softmaxes them, picks" : "picks", (long long)ti->attrs.topk,
                post ? ", softmaxes the chosen" : "", 1 + (tv ? 1 : 0) + (pre ? 1 : 0) + (nc ? 1 : 0));
    /* the elementwise work that only makes the scores (a cast of the logits) runs as they are read */
    for (ir_node *c = pre ? pre->inputs[0] : x; free_node(c, bt) && ir_op_class(c->op) == IR_CLASS_ELEMENTWISE &&
                                               c->ninputs == 1 && !u->is_output[c->id];
         c = c->inputs[0]) {
        bool inside = true;
        for (int j = 0; j < u->count[c->id]; j++) inside &= g->nodes[u->users[c->id][j]]->group == k;
        if (!inside) break;
        c->group = k;
    }
}

static bool same_route(const ir_node *a, const ir_node *b)
{
    return a->op == IR_OP_EXPERT_LINEAR && b->op == IR_OP_EXPERT_LINEAR && a != b && a->inputs[0] == b->inputs[0] &&
           a->inputs[2] == b->inputs[2] && ir_type_eq(&a->inputs[1]->type, &b->inputs[1]->type);
}

static void gated(ir_graph *g, pass_ctx *ctx, const pass_users *u, const bool *bt, ir_node *m, arena *a)
{
    for (int s = 0; s < 2; s++) {
        ir_node *act = m->inputs[s], *up = m->inputs[1 - s];
        if (ir_op_class(act->op) != IR_CLASS_ELEMENTWISE || act->ninputs != 1) continue;
        ir_node *gate = act->inputs[0];
        if (!same_route(gate, up)) continue;
        ir_node *nodes[4] = {gate, up, act, m};
        const char *what = arena_printf(a, "compute %s of %s and %s in one expert kernel", NZ(pass_describe(a, m)),
                                        NZ(pass_describe(a, gate)), NZ(pass_describe(a, up)));
        ir_dim bytes = pass_size_sum(ctx, m, pass_size(ctx, gate, 2), pass_size(ctx, up, 2));
        bytes = pass_size_sum(ctx, m, bytes, pass_size(ctx, act, 2));
        const char *why = NULL;
        if (!free_node(gate, bt) || !free_node(up, bt) || !free_node(act, bt) || !free_node(m, bt))
            why = "another kernel already holds one of them";
        else if (consumers(u, gate) != 1 || consumers(u, act) != 1 || consumers(u, up) != 1)
            why = arena_printf(a, "%s", NZ(pass_describe_consumers(a, g, u, consumers(u, gate) != 1 ? gate
                                                                         : consumers(u, act) != 1 ? act
                                                                                                  : up)));
        else if (!pass_rule_enabled(ctx, PASS_RULE_MOE_GATED))
            why = arena_printf(a, "rule %s is disabled (--disable)", pass_rule_name(PASS_RULE_MOE_GATED));
        if (why) {
            pass_decide(ctx, g, PASS_RULE_MOE_GATED, false, bytes, nodes, 4, what, "not fused: %s", why);
            return;
        }
        int k = ir_graph_add_group(g, gate, IR_GROUP_GATHER);
        if (k < 0) return;
        up->group = act->group = m->group = k;
        pass_decide(ctx, g, PASS_RULE_MOE_GATED, true, bytes, nodes, 4, what,
                    "each CTA reads the gate and up rows of its chosen expert side by side and stores only %s(gate) * up; "
                    "the two projections and the gate are not written and read back; one kernel instead of 3",
                    ir_op_name(act->op));
        return;
    }
}

static void combine(ir_graph *g, pass_ctx *ctx, const pass_users *u, const bool *bt, ir_node *s, arena *a)
{
    ir_node *m = s->inputs[0];
    if (m->op != IR_OP_MUL) return;
    ir_node *d = m->inputs[0]->op == IR_OP_EXPERT_LINEAR ? m->inputs[0] : m->inputs[1];
    ir_node *wt = d == m->inputs[0] ? m->inputs[1] : m->inputs[0];
    if (d->op != IR_OP_EXPERT_LINEAR || wt == d) return;
    const int r = d->type.rank;
    if (r < 2 || s->attrs.axes != (1u << (r - 2)) || !ir_type_same_shape(&m->type, &d->type)) return;
    ir_node *nodes[8] = {d, m, s};
    int nn = 3;
    const char *what = arena_printf(a, "compute %s of %s in the epilogue of %s", NZ(pass_describe(a, s)),
                                    NZ(pass_describe(a, m)), NZ(pass_describe(a, d)));
    const ir_dim bytes = pass_size(ctx, d, 2);
    const char *why = NULL;
    if (!free_node(d, bt) || !free_node(m, bt) || !free_node(s, bt)) why = "another kernel already holds one of them";
    else if (consumers(u, d) != 1 || consumers(u, m) != 1)
        why = arena_printf(a, "%s", NZ(pass_describe_consumers(a, g, u, consumers(u, d) != 1 ? d : m)));
    else if (!pass_rule_enabled(ctx, PASS_RULE_MOE_COMBINE))
        why = arena_printf(a, "rule %s is disabled (--disable)", pass_rule_name(PASS_RULE_MOE_COMBINE));
    if (why) {
        pass_decide(ctx, g, PASS_RULE_MOE_COMBINE, false, bytes, nodes, nn, what, "not fused: %s", why);
        return;
    }
    int k = ir_graph_add_group(g, d, IR_GROUP_GATHER);
    if (k < 0) return;
    m->group = s->group = k;
    /* the chain after the sum: single-consumer elementwise ops of its shape. Every member has one
     * consumer, the next member, so no operand from outside (the weights, the residual) can be
     * computed from the group's results: the group cannot wait on a kernel that waits on it. */
    for (ir_node *tail = s; nn < 8;) {
        ir_node *c = u->is_output[tail->id] ? NULL : only_user(g, u, tail);
        if (!c || ir_op_class(c->op) != IR_CLASS_ELEMENTWISE || !free_node(c, bt) ||
            !ir_type_same_shape(&c->type, &s->type))
            break;
        c->group = k;
        nodes[nn++] = c;
        tail = c;
    }
    pass_decide(ctx, g, PASS_RULE_MOE_COMBINE, true, bytes, nodes, nn, what,
                "each slot's weighted result goes to a workspace; the CTA that completes a column block of every slot "
                "adds each token's slots%s and stores the result; the slots' results are not written and read back "
                "by a kernel of their own; one kernel instead of 2",
                nn > 3 ? " and applies what follows the sum" : "");
}

ir_graph *pass_fuse_moe(ir_graph *g, pass_ctx *ctx)
{
    const pass_users *u = pass_users_of(ctx, g);
    const bool *bt = pass_bind_time_of(ctx, g);
    if (!u || !bt) return pass_done(g, ctx, false);
    arena a;
    arena_init(&a);
    for (int i = 0; i < g->nnodes; i++) {
        ir_node *n = g->nodes[i];
        if (n->op == IR_OP_TOPK && n->attrs.indices && free_node(n, bt)) router(g, ctx, u, bt, n, &a);
        else if (n->op == IR_OP_MUL && free_node(n, bt)) gated(g, ctx, u, bt, n, &a);
        else if (n->op == IR_OP_SUM && free_node(n, bt)) combine(g, ctx, u, bt, n, &a);
    }
    arena_free(&a);
    return pass_done(g, ctx, true);
}
