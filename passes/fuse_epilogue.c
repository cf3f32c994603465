/* passes/fuse_epilogue.c — fuse elementwise consumers into matmul epilogues.
 *
 * A matmul's result sits in registers before it is stored. Elementwise work
 * on it there — a bias, a scale, an activation, a residual add, the SwiGLU
 * product of a merged gate/up linear — costs no extra HBM traffic, where a
 * separate kernel would write the result and read it back.
 *
 * Algorithm: every MATMUL and LINEAR computed at run time starts a kernel
 * group of kind "matmul" (bind-time matmuls, over weights only, are not
 * kernels). From the anchor walk forward along the epilogue tail:
 *
 *   - SwiGLU (first, at the anchor only): the anchor's only consumers are two
 *     slices along the last axis splitting it into equal halves g and u, and
 *     silu(g) * u (or gelu) is their only consumer. The slices, the
 *     activation and the product join; at bind time the gate and up columns
 *     are interleaved so that each output tile holds both halves.
 *   - otherwise, while the tail has exactly one consumer c and c is an
 *     ungrouped elementwise op, c joins when its other operands are
 *       a scalar (rule epilogue-scale),
 *       a vector along the result's last axis added or subtracted (epilogue-bias),
 *       another operand that broadcasts to the result: a mask, a vector
 *       multiplied (epilogue-broadcast),
 *       a tensor of the result's full shape added or subtracted
 *       (epilogue-residual), or multiplied, divided... (epilogue-gate),
 *     or c is unary (epilogue-activation); c's result must have the tail's
 *     shape (a broadcast to a larger tensor would not fit the output tile).
 *     The rule names what c does, so a gating mul is never called a bias.
 *
 * Every op joined is a decision; so is every op refused (disabled rule,
 * shape mismatch). When the tail has several consumers, the refusal is
 * recorded at the end of the pass only for an elementwise consumer that no
 * other matmul took in (so an add that reads two matmul results is not
 * reported as refused by one and fused by the other). Slices of a merged
 * Q/K/V result are views read by other kernels and stay ungrouped.
 *
 * Bytes saved per fused op: the intermediate it would have read back,
 * written and read (2 x its bytes). */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

#define NZ(s) ((s) ? (s) : "?")

static const char *shape_str(arena *a, const ir_graph *g, const ir_type *t)
{
    char buf[256];
    ir_shape_print(t, g->syms, buf, sizeof buf);
    return arena_strdup(a, buf);
}

static const char *type_str(arena *a, const ir_graph *g, const ir_type *t)
{
    char buf[256];
    ir_type_print(t, g->syms, buf, sizeof buf);
    return arena_strdup(a, buf);
}

static bool is_one(const ir_dim *d)
{
    int64_t v;
    return ir_dim_is_const(d, &v) && v == 1;
}

static int consumers(const pass_users *u, const ir_node *n)
{
    return u->count[n->id] + (u->is_output[n->id] ? 1 : 0);
}

static ir_node *only_user(const ir_graph *g, const pass_users *u, const ir_node *n)
{
    return consumers(u, n) == 1 && u->count[n->id] == 1 ? g->nodes[u->users[n->id][0]] : NULL;
}

typedef enum { K_BIAS, K_SCALE, K_ACTIVATION, K_RESIDUAL, K_BROADCAST, K_GATE } epi_kind;

static pass_rule rule_of(epi_kind k)
{
    switch (k) {
    case K_BIAS: return PASS_RULE_EPILOGUE_BIAS;
    case K_BROADCAST: return PASS_RULE_EPILOGUE_BROADCAST;
    case K_SCALE: return PASS_RULE_EPILOGUE_SCALE;
    case K_ACTIVATION: return PASS_RULE_EPILOGUE_ACTIVATION;
    case K_GATE: return PASS_RULE_EPILOGUE_GATE;
    case K_RESIDUAL: break;
    }
    return PASS_RULE_EPILOGUE_RESIDUAL;
}

static const char *phrase_of(epi_kind k)
{
    switch (k) {
    case K_BIAS: return "the bias is applied to the accumulator in registers";
    case K_BROADCAST: return "the broadcast operand is read with broadcast indexing and applied to the accumulator in registers";
    case K_SCALE: return "the scale is applied to the accumulator in registers";
    case K_ACTIVATION: return "the activation is applied to the accumulator in registers";
    case K_GATE: return "the other operand is read and applied to the accumulator in registers";
    case K_RESIDUAL: break;
    }
    return "the residual is read and added to the accumulator in registers";
}

static bool is_add(ir_op op) { return op == IR_OP_ADD || op == IR_OP_SUB; }

/* How c (an elementwise op reading tail) joins the epilogue: by what its
 * other operand is. *why is set when it cannot join. */
static epi_kind classify(arena *a, const ir_graph *g, const ir_node *c, const ir_node *tail, const char **why)
{
    *why = NULL;
    const ir_type *tt = &tail->type;
    epi_kind kind = K_ACTIVATION;
    const ir_node *other = NULL;
    for (int i = 0; i < c->ninputs; i++)
        if (c->inputs[i] != tail) other = c->inputs[i];
    if (other) {
        const ir_type *ot = &other->type;
        bool scalar = true;
        for (int j = 0; j < ot->rank; j++) scalar = scalar && is_one(&ot->dims[j]);
        bool vector = ot->rank >= 1 && tt->rank >= 1 && ot->rank <= tt->rank &&
                      ir_dim_eq(&ot->dims[ot->rank - 1], &tt->dims[tt->rank - 1]);
        for (int j = 0; vector && j < ot->rank - 1; j++) vector = is_one(&ot->dims[j]);
        bool add = is_add(c->op);
        if (scalar) kind = K_SCALE;
        else if (ir_type_same_shape(ot, tt)) kind = add ? K_RESIDUAL : K_GATE;
        else if (vector && add) kind = K_BIAS;
        else if (ot->rank <= tt->rank) kind = K_BROADCAST;
        else kind = add ? K_RESIDUAL : K_GATE;
    }
    if (!ir_type_same_shape(&c->type, tt))
        *why = arena_printf(a, "the %s%s reads %s but the matmul produces %s", kind == K_RESIDUAL ? "residual " : "",
                            ir_op_name(c->op), NZ(shape_str(a, g, other ? &other->type : &c->type)),
                            NZ(shape_str(a, g, tt)));
    return kind;
}

typedef struct pending {
    ir_node *c, *tail, *anchor;
} pending;

typedef struct epi {
    ir_graph *g;
    pass_ctx *ctx;
    const pass_users *u;
    const bool *bt;
    arena a;
    pending *pend;
    int npend;
} epi;

static void refuse(epi *e, pass_rule rule, ir_dim bytes, ir_node *c, ir_node *anchor, const char *why)
{
    ir_node *nodes[2] = {c, anchor};
    const char *what = arena_printf(&e->a, "fuse %s into the epilogue of %s", NZ(pass_describe(&e->a, c)),
                                    NZ(pass_describe(&e->a, anchor)));
    pass_decide(e->ctx, e->g, rule, false, bytes, nodes, 2, NZ(what), "not fused: %s", NZ(why));
}

static bool slice_bounds(const ir_node *s, ir_dim *start, ir_dim *end)
{
    *start = s->attrs.start;
    *end = s->attrs.end;
    return true;
}

/* SwiGLU at the anchor. Returns the new tail (the product) or NULL. */
static ir_node *try_swiglu(epi *e, ir_node *anchor, int k)
{
    const pass_users *u = e->u;
    ir_graph *g = e->g;
    if (u->count[anchor->id] != 2 || u->is_output[anchor->id]) return NULL;
    ir_node *s[2] = {g->nodes[u->users[anchor->id][0]], g->nodes[u->users[anchor->id][1]]};
    int last = anchor->type.rank - 1;
    for (int i = 0; i < 2; i++)
        if (s[i]->op != IR_OP_SLICE || s[i]->attrs.axis != last || s[i]->group >= 0) return NULL;
    /* two equal halves covering the whole last axis */
    ir_dim st[2], en[2];
    slice_bounds(s[0], &st[0], &en[0]);
    slice_bounds(s[1], &st[1], &en[1]);
    ir_dim zero = ir_dim_const(0);
    int lo = ir_dim_eq(&st[0], &zero) ? 0 : 1;
    if (!ir_dim_eq(&st[lo], &zero) || !ir_dim_eq(&en[lo], &st[1 - lo]) ||
        !ir_dim_eq(&en[1 - lo], &anchor->type.dims[last]) ||
        !ir_dim_eq(&s[0]->type.dims[last], &s[1]->type.dims[last]))
        return NULL;
    /* find act(gate) * up */
    ir_node *gate = NULL, *up = NULL, *act = NULL, *mul = NULL;
    for (int i = 0; i < 2 && !mul; i++) {
        ir_node *a = u->count[s[i]->id] == 1 ? g->nodes[u->users[s[i]->id][0]] : NULL;
        if (!a || (a->op != IR_OP_SILU && a->op != IR_OP_GELU) || a->group >= 0) continue;
        ir_node *m = u->count[a->id] == 1 ? g->nodes[u->users[a->id][0]] : NULL;
        ir_node *other = s[1 - i];
        if (!m || m->op != IR_OP_MUL || m->group >= 0) continue;
        if (!((m->inputs[0] == a && m->inputs[1] == other) || (m->inputs[1] == a && m->inputs[0] == other)))
            continue;
        gate = s[i];
        up = other;
        act = a;
        mul = m;
    }
    if (!mul) return NULL;
    ir_node *nodes[5] = {anchor, gate, up, act, mul};
    ir_dim bytes = pass_size_sum(e->ctx, act, pass_size(e->ctx, anchor, 2), pass_size(e->ctx, act, 2));
    const char *what = arena_printf(&e->a, "fuse the %s gate %s(%s) * %s into the epilogue of %s",
                                    act->op == IR_OP_SILU ? "SwiGLU" : "GeGLU", ir_op_name(act->op),
                                    gate->name ? gate->name : "gate", up->name ? up->name : "up",
                                    NZ(pass_describe(&e->a, anchor)));
    const char *ctype = NZ(type_str(&e->a, g, &mul->type));
    if (!pass_rule_enabled(e->ctx, PASS_RULE_EPILOGUE_SWIGLU)) {
        pass_decide(e->ctx, g, PASS_RULE_EPILOGUE_SWIGLU, false, bytes, nodes, 5, NZ(what),
                    "not fused: rule epilogue-swiglu is disabled (--disable)");
        return NULL;
    }
    const ir_node *single[3] = {gate, up, act};
    for (int i = 0; i < 3; i++)
        if (consumers(u, single[i]) != 1) {
            pass_decide(e->ctx, g, PASS_RULE_EPILOGUE_SWIGLU, false, bytes, nodes, 5, NZ(what), "not fused: %s",
                        NZ(pass_describe_consumers(&e->a, g, u, single[i])));
            return NULL;
        }
    gate->group = up->group = act->group = mul->group = k;
    pass_decide(e->ctx, g, PASS_RULE_EPILOGUE_SWIGLU, true, bytes, nodes, 5, NZ(what),
                "the gate and up columns will be interleaved at bind time so each output tile holds both; "
                "%s(gate) * up is computed in registers and only the product %s is stored",
                ir_op_name(act->op), ctype);
    return mul;
}

static bool fuse_from(epi *e, ir_node *anchor)
{
    ir_graph *g = e->g;
    const pass_users *u = e->u;
    int k = ir_graph_add_group(g, anchor, IR_GROUP_MATMUL);
    if (k < 0) return false;
    ir_node *tail = try_swiglu(e, anchor, k);
    if (!tail) tail = anchor;
    for (;;) {
        ir_node *c = only_user(g, u, tail);
        if (!c) {
            /* several consumers: remember elementwise ones that could have joined */
            for (int i = 0; i < u->count[tail->id] && consumers(u, tail) > 1; i++) {
                ir_node *x = g->nodes[u->users[tail->id][i]];
                if (ir_op_class(x->op) != IR_CLASS_ELEMENTWISE || x->group >= 0) continue;
                e->pend[e->npend++] = (pending){x, tail, anchor};
                break;
            }
            return true;
        }
        if (ir_op_class(c->op) != IR_CLASS_ELEMENTWISE || c->group >= 0 || e->bt[c->id]) return true;
        const char *why;
        epi_kind kind = classify(&e->a, g, c, tail, &why);
        ir_dim bytes = pass_size(e->ctx, tail, 2);
        pass_rule rule = rule_of(kind);
        if (why) {
            refuse(e, rule, bytes, c, anchor, why);
            return true;
        }
        if (!pass_rule_enabled(e->ctx, rule)) {
            refuse(e, rule, bytes, c, anchor, arena_printf(&e->a, "rule %s is disabled (--disable)", pass_rule_name(rule)));
            return true;
        }
        c->group = k;
        ir_node *nodes[2] = {c, anchor};
        const char *what = arena_printf(&e->a, "fuse %s into the epilogue of %s", NZ(pass_describe(&e->a, c)),
                                        NZ(pass_describe(&e->a, anchor)));
        pass_decide(e->ctx, g, rule, true, bytes, nodes, 2, NZ(what), "%s, so the intermediate %s is not written and read back",
                    phrase_of(kind), NZ(type_str(&e->a, g, &tail->type)));
        tail = c;
    }
}

ir_graph *pass_fuse_epilogue(ir_graph *g, pass_ctx *ctx)
{
    epi e = {.g = g, .ctx = ctx};
    arena_init(&e.a);
    e.u = pass_users_of(ctx, g);
    e.bt = pass_bind_time_of(ctx, g);
    e.pend = malloc(((size_t)g->nnodes + 1) * sizeof *e.pend);
    bool ok = e.u && e.bt && e.pend;
    for (int i = 0; ok && i < g->nnodes; i++) {
        ir_node *n = g->nodes[i];
        if ((n->op == IR_OP_MATMUL || n->op == IR_OP_LINEAR) && n->group < 0 && !e.bt[i]) ok = fuse_from(&e, n);
    }
    /* refusals for consumers that no matmul took in */
    for (int i = 0; ok && i < e.npend; i++) {
        pending *p = &e.pend[i];
        if (p->c->group >= 0) continue;
        const char *why;
        epi_kind kind = classify(&e.a, g, p->c, p->tail, &why);
        refuse(&e, rule_of(kind), pass_size(ctx, p->tail, 2), p->c, p->anchor,
               pass_describe_consumers(&e.a, g, e.u, p->tail));
    }
    free(e.pend);
    arena_free(&e.a);
    return pass_done(g, ctx, ok);
}
