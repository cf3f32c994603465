/* passes/fuse_elementwise.c — fuse what elementwise work is left.
 *
 * After the matmul, norm and attention groups exist, the elementwise ops
 * still ungrouped would each be a kernel that reads its inputs and writes its
 * result. Three rules put them into as few kernels as possible:
 *
 *   reduction-prologue  an elementwise op whose only consumer is a reduction
 *                       (sum, mean, max, softmax, a norm) — or a member of the
 *                       reduction's group — is computed as the row is loaded.
 *                       Applied transitively backwards.
 *   reduction-epilogue  the only consumer of a reduction (then of that op,
 *                       and so on) that is elementwise is applied to the
 *                       result before it is stored.
 *   elementwise-chain   a tree of elementwise ops in which every op but the
 *                       last has exactly one consumer, inside the tree,
 *                       becomes one kernel of kind "elementwise" anchored at
 *                       the last op.
 *
 * Algorithm: (1) for every reduction (ungrouped, or the anchor of its
 * group), walk backwards from its group's members and add single-consumer
 * elementwise inputs; (2) walk forward from every reduction while the tail
 * has one elementwise consumer, refusing an operand computed by another
 * kernel from this group's results (the two kernels would wait on each
 * other); (3) visit the remaining elementwise ops from last to first; each
 * starts a tree and pulls in its single-consumer elementwise inputs. A
 * reduction with something to fuse and no group yet starts one of kind
 * "row". Trees of one op are left to plan-kernels. Bind-time nodes (over
 * weights and constants only) are never fused: they run at bind time.
 * An input with several consumers is a refusal, reported once. */
#include <stdlib.h>

#include "passes/pass.h"

#define NZ(s) ((s) ? (s) : "?")

typedef struct ew {
    ir_graph *g;
    pass_ctx *ctx;
    const pass_users *u;
    const bool *bt;
    bool *refused; /* a refusal about this node was recorded */
    int *stamp;    /* visit marks for walks */
    int cur;
    ir_node **stack;
    arena a;
} ew;

static int consumers(const ew *e, const ir_node *n)
{
    return e->u->count[n->id] + (e->u->is_output[n->id] ? 1 : 0);
}

/* An elementwise op computed at run time that no kernel holds yet. */
static bool free_elementwise(const ew *e, const ir_node *n)
{
    return ir_op_class(n->op) == IR_CLASS_ELEMENTWISE && n->group < 0 && !e->bt[n->id];
}

static bool is_row_anchor(const ir_graph *g, const ir_node *n)
{
    return ir_op_class(n->op) == IR_CLASS_REDUCTION && (n->group < 0 || g->groups[n->group].anchor == n);
}

static void refuse_once(ew *e, pass_rule rule, ir_node *n, ir_node *into, const char *what, const char *why)
{
    if (e->refused[n->id]) return;
    e->refused[n->id] = true;
    ir_node *nodes[2] = {n, into};
    pass_decide(e->ctx, e->g, rule, false, pass_size(e->ctx, n, 2), nodes, 2, NZ(what), "not fused: %s", NZ(why));
}

static const char *disabled(ew *e, pass_rule rule)
{
    return arena_printf(&e->a, "rule %s is disabled (--disable)", pass_rule_name(rule));
}

/* The group of reduction r, started on demand; -1 when out of memory. */
static int row_group(ew *e, ir_node *r)
{
    if (r->group >= 0) return r->group;
    return ir_graph_add_group(e->g, r, IR_GROUP_ROW);
}

/* (1) prologue of reduction r. False when out of memory. */
static bool prologue(ew *e, ir_node *r)
{
    const pass_rule rule = PASS_RULE_REDUCTION_PROLOGUE;
    ir_graph *g = e->g;
    int sp = 0;
    e->stack[sp++] = r;
    if (r->group >= 0)
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i]->group == r->group && g->nodes[i] != r) e->stack[sp++] = g->nodes[i];
    while (sp > 0) {
        ir_node *m = e->stack[--sp];
        for (int j = 0; j < m->ninputs; j++) {
            ir_node *p = m->inputs[j];
            if (!free_elementwise(e, p)) continue;
            const char *what = arena_printf(&e->a, "fuse %s into the row kernel of %s as a prologue",
                                            NZ(pass_describe(&e->a, p)), NZ(pass_describe(&e->a, r)));
            if (consumers(e, p) != 1) {
                refuse_once(e, rule, p, r, what, pass_describe_consumers(&e->a, g, e->u, p));
                continue;
            }
            if (!pass_rule_enabled(e->ctx, rule)) {
                refuse_once(e, rule, p, r, what, disabled(e, rule));
                continue;
            }
            int k = row_group(e, r);
            if (k < 0) return false;
            p->group = k;
            ir_node *nodes[2] = {p, r};
            char tb[256];
            ir_type_print(&p->type, g->syms, tb, sizeof tb);
            pass_decide(e->ctx, g, rule, true, pass_size(e->ctx, p, 2), nodes, 2, NZ(what),
                        "computed as the row is loaded; the intermediate %s is not written and read back", tb);
            e->stack[sp++] = p;
        }
    }
    return true;
}

/* Does n depend on a member of group k computed by another kernel? */
static bool reads_group_via_other_kernel(ew *e, const ir_node *n, int k)
{
    if (k < 0 || n->group == k) return false;
    int sp = 0;
    e->cur++;
    e->stack[sp++] = (ir_node *)n;
    e->stamp[n->id] = e->cur;
    while (sp > 0) {
        const ir_node *m = e->stack[--sp];
        for (int j = 0; j < m->ninputs; j++) {
            ir_node *in = m->inputs[j];
            if (in->group == k) return true;
            if (e->stamp[in->id] == e->cur) continue;
            e->stamp[in->id] = e->cur;
            e->stack[sp++] = in;
        }
    }
    return false;
}

/* (2) epilogue of reduction r. False when out of memory. */
static bool epilogue(ew *e, ir_node *r)
{
    const pass_rule rule = PASS_RULE_REDUCTION_EPILOGUE;
    ir_graph *g = e->g;
    const pass_users *u = e->u;
    ir_node *tail = r;
    for (;;) {
        if (consumers(e, tail) != 1 || u->count[tail->id] != 1) {
            for (int i = 0; i < u->count[tail->id] && consumers(e, tail) > 1; i++) {
                ir_node *c = g->nodes[u->users[tail->id][i]];
                if (!free_elementwise(e, c)) continue;
                const char *what = arena_printf(&e->a, "fuse %s into the row kernel of %s as an epilogue",
                                                NZ(pass_describe(&e->a, c)), NZ(pass_describe(&e->a, r)));
                refuse_once(e, rule, tail, r, what, pass_describe_consumers(&e->a, g, u, tail));
                break;
            }
            return true;
        }
        ir_node *c = g->nodes[u->users[tail->id][0]];
        if (!free_elementwise(e, c)) return true;
        const char *what = arena_printf(&e->a, "fuse %s into the row kernel of %s as an epilogue",
                                        NZ(pass_describe(&e->a, c)), NZ(pass_describe(&e->a, r)));
        if (!pass_rule_enabled(e->ctx, rule)) {
            refuse_once(e, rule, c, r, what, disabled(e, rule));
            return true;
        }
        for (int j = 0; j < c->ninputs; j++)
            if (c->inputs[j] != tail && reads_group_via_other_kernel(e, c->inputs[j], r->group)) {
                refuse_once(e, rule, c, r, what,
                            arena_printf(&e->a, "its operand %s is computed by another kernel from this kernel's results",
                                         NZ(pass_describe(&e->a, c->inputs[j]))));
                return true;
            }
        int k = row_group(e, r);
        if (k < 0) return false;
        c->group = k;
        ir_node *nodes[2] = {c, r};
        char tb[256];
        ir_type_print(&tail->type, g->syms, tb, sizeof tb);
        pass_decide(e->ctx, g, rule, true, pass_size(e->ctx, tail, 2), nodes, 2, NZ(what),
                    "applied to the result before it is stored; the intermediate %s is not written and read back", tb);
        tail = c;
    }
}

/* (3) the tree ending at n. False when out of memory. */
static bool chain(ew *e, ir_node *n)
{
    const pass_rule rule = PASS_RULE_ELEMENTWISE_CHAIN;
    ir_graph *g = e->g;
    ir_node **members = e->stack + g->nnodes; /* second half of the scratch */
    int nm = 0, sp = 0;
    e->cur++;
    members[nm++] = n;
    e->stack[sp++] = n;
    e->stamp[n->id] = e->cur;
    while (sp > 0) {
        ir_node *m = e->stack[--sp];
        for (int j = 0; j < m->ninputs; j++) {
            ir_node *p = m->inputs[j];
            if (!free_elementwise(e, p) || e->stamp[p->id] == e->cur) continue;
            e->stamp[p->id] = e->cur;
            if (consumers(e, p) != 1) {
                const char *what = arena_printf(&e->a, "fuse %s and %s into one elementwise kernel",
                                                NZ(pass_describe(&e->a, p)), NZ(pass_describe(&e->a, m)));
                refuse_once(e, rule, p, m, what, pass_describe_consumers(&e->a, g, e->u, p));
                continue;
            }
            members[nm++] = p;
            e->stack[sp++] = p;
        }
    }
    if (nm < 2) return true;
    /* the members in node order, for the report */
    for (int i = 1; i < nm; i++)
        for (int j = i; j > 0 && members[j - 1]->id > members[j]->id; j--) {
            ir_node *t = members[j];
            members[j] = members[j - 1];
            members[j - 1] = t;
        }
    char what[1024];
    size_t off = 0;
    ir_dim bytes = ir_dim_const(0);
    int w = snprintf(what, sizeof what, "fuse ");
    if (w > 0) off = (size_t)w;
    for (int i = 0; i < nm; i++) {
        w = snprintf(what + off, sizeof what - off, "%s%s", i == 0 ? "" : i == nm - 1 ? " and " : ", ",
                     NZ(pass_describe(&e->a, members[i])));
        if (w > 0 && (size_t)w < sizeof what - off) off += (size_t)w;
        if (members[i] != n) bytes = pass_size_sum(e->ctx, members[i], bytes, pass_size(e->ctx, members[i], 2));
    }
    snprintf(what + off, sizeof what - off, " into one elementwise kernel");
    if (!pass_rule_enabled(e->ctx, rule)) {
        for (int i = 0; i < nm; i++) e->refused[members[i]->id] = true;
        pass_decide(e->ctx, g, rule, false, bytes, members, nm < 8 ? nm : 8, what, "not fused: %s", disabled(e, rule));
        return true;
    }
    int k = ir_graph_add_group(g, n, IR_GROUP_ELEMENTWISE);
    if (k < 0) return false;
    for (int i = 0; i < nm; i++) members[i]->group = k;
    pass_decide(e->ctx, g, rule, true, bytes, members, nm < 8 ? nm : 8, what,
                "one kernel runs instead of %d; %d intermediate%s not written and read back", nm, nm - 1,
                nm - 1 == 1 ? " is" : "s are");
    return true;
}

ir_graph *pass_fuse_elementwise(ir_graph *g, pass_ctx *ctx)
{
    size_t nn = (size_t)g->nnodes + 1;
    ew e = {.g = g, .ctx = ctx};
    arena_init(&e.a);
    e.u = pass_users_of(ctx, g);
    e.bt = pass_bind_time_of(ctx, g);
    e.refused = calloc(nn, sizeof *e.refused);
    e.stamp = calloc(nn, sizeof *e.stamp);
    e.stack = calloc(2 * nn, sizeof *e.stack);
    bool ok = e.u && e.bt && e.refused && e.stamp && e.stack;
    for (int i = 0; ok && i < g->nnodes; i++)
        if (is_row_anchor(g, g->nodes[i]) && !e.bt[i]) ok = prologue(&e, g->nodes[i]);
    for (int i = 0; ok && i < g->nnodes; i++)
        if (is_row_anchor(g, g->nodes[i]) && !e.bt[i]) ok = epilogue(&e, g->nodes[i]);
    for (int i = g->nnodes - 1; ok && i >= 0; i--) {
        ir_node *n = g->nodes[i];
        if (free_elementwise(&e, n) && !(e.refused[i] && !pass_rule_enabled(ctx, PASS_RULE_ELEMENTWISE_CHAIN))) ok = chain(&e, n);
    }
    free(e.refused);
    free(e.stamp);
    free(e.stack);
    arena_free(&e.a);
    return pass_done(g, ctx, ok);
}
