/* passes/canonicalize.c — exact local simplifications.
 *
 * Algorithm: rebuild the graph in order. Each node is first mapped onto the
 * already rebuilt (and so already canonical) copies of its inputs; then the
 * rules below look at it and may answer an existing node (the node is
 * dropped and its users read that one instead) or a new, simpler node.
 * Because inputs are canonical before their users are visited, chains
 * collapse in one sweep: reshape(reshape(reshape(x))) becomes one reshape of
 * x, permute(permute(x)) one permute (or x). What becomes dead is dropped by
 * DCE at the end of the pass.
 *
 * Rules (each a --disable name):
 *   fold-constants     an elementwise op (binary, unary or cast) whose inputs
 *                      are all scalar CONSTs becomes one CONST of the result
 *                      dtype. The value is computed by the reference
 *                      interpreter's own scalar code (ir_eval_scalar,
 *                      ir_eval_i32: f32 operands, f64 math, rounded to the
 *                      dtype; i32 wraps), so results do not change.
 *   collapse-reshapes  reshape(reshape(x)) -> reshape(x); a reshape to the
 *                      shape its input already has -> its input.
 *   collapse-permutes  permute(permute(x), q) -> one permute of x by the
 *                      composed permutation; an identity permute -> x.
 *   drop-identity      x*1, 1*x, x+0, 0+x, x-0, x/1 -> x (only when the
 *                      result has exactly x's type: broadcasting against the
 *                      constant must not change the shape); neg(neg(x)) -> x;
 *                      a cast to x's own dtype -> x; a slice covering a whole
 *                      axis -> x.
 *
 * Nothing here changes a result beyond exact identities (x + 0 may turn a
 * -0 into +0 and back: both compare equal). When a node is replaced by its
 * input the replaced node's variable name is lost; a new node built to
 * replace a chain takes the name and location of the chain's last node. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

typedef struct canon {
    ir_graph *dst;
    bool fold, reshapes, permutes, identity;
} canon;

/* The value a CONST has when the graph runs: the interpreter stores it in
 * its dtype (f32 then rounded to bf16/f16; i32 truncated). */
static bool const_value(const ir_node *n, double *v)
{
    if (!n || n->op != IR_OP_CONST) return false;
    ir_eval_scalar(IR_OP_CAST, false, n->attrs.value, 0, n->type.dtype, v);
    return true;
}

static bool const_is(const ir_node *n, double want)
{
    double v;
    return const_value(n, &v) && v == want;
}

/* A new node standing for src node n: it takes n's name. */
static ir_node *named(canon *c, ir_node *x, const ir_node *n)
{
    if (x && n->name && !x->name) x->name = arena_strdup(&c->dst->arena, n->name);
    return x;
}

/* fold-constants: n's (mapped) inputs in[] are all CONSTs. */
static ir_node *fold(canon *c, const ir_node *n, ir_node *const *in)
{
    if (ir_op_class(n->op) != IR_CLASS_ELEMENTWISE || n->type.rank != 0) return NULL;
    for (int i = 0; i < n->ninputs; i++)
        if (in[i]->op != IR_OP_CONST) return NULL;
    ir_dtype to = n->type.dtype;
    double v, a, b = 0;
    const_value(in[0], &a);
    if (n->ninputs == 2) const_value(in[1], &b);
    if (n->ninputs == 2 && to == IR_I32 && in[0]->type.dtype == IR_I32) {
        /* i32 arithmetic as the interpreter's; what it reports as a run-time
         * error is not folded, nor INT32_MIN / -1 */
        int32_t ri;
        if (n->op == IR_OP_DIV && (int32_t)a == INT32_MIN && (int32_t)b == -1) return NULL;
        if (ir_eval_i32(n->op, (int32_t)a, (int32_t)b, &ri)) return NULL;
        v = ri;
    } else if (n->op == IR_OP_NEG && to == IR_I32) {
        v = (int32_t)(0u - (uint32_t)(int32_t)a);
    } else {
        if (!ir_eval_scalar(n->op, n->attrs.gelu_tanh, a, b, to, &v)) return NULL;
    }
    return named(c, ir_const(c->dst, v, to, n->loc), n);
}

/* drop-identity; answers the node n reduces to, or NULL. */
static ir_node *identity(const ir_node *n, ir_node *const *in)
{
    ir_node *a = n->ninputs > 0 ? in[0] : NULL, *b = n->ninputs > 1 ? in[1] : NULL;
    switch (n->op) {
    case IR_OP_MUL:
        if (const_is(b, 1) && ir_type_eq(&n->type, &a->type)) return a;
        if (const_is(a, 1) && ir_type_eq(&n->type, &b->type)) return b;
        return NULL;
    case IR_OP_ADD:
        if (const_is(b, 0) && ir_type_eq(&n->type, &a->type)) return a;
        if (const_is(a, 0) && ir_type_eq(&n->type, &b->type)) return b;
        return NULL;
    case IR_OP_SUB:
        return const_is(b, 0) && ir_type_eq(&n->type, &a->type) ? a : NULL;
    case IR_OP_DIV:
        return const_is(b, 1) && ir_type_eq(&n->type, &a->type) ? a : NULL;
    case IR_OP_NEG:
        return a->op == IR_OP_NEG && ir_type_eq(&n->type, &a->inputs[0]->type) ? a->inputs[0] : NULL;
    case IR_OP_CAST:
        return ir_type_eq(&n->type, &a->type) ? a : NULL;
    case IR_OP_SLICE: {
        int64_t s;
        const ir_attrs *at = &n->attrs;
        if (at->axis < 0 || at->axis >= a->type.rank) return NULL;
        return ir_dim_is_const(&at->start, &s) && s == 0 && ir_dim_eq(&at->end, &a->type.dims[at->axis]) &&
                       ir_type_eq(&n->type, &a->type)
                   ? a
                   : NULL;
    }
    default: return NULL;
    }
}

/* collapse-reshapes */
static ir_node *reshape(canon *c, const ir_node *n, ir_node *a)
{
    ir_node *base = a->op == IR_OP_RESHAPE ? a->inputs[0] : a;
    if (ir_type_same_shape(&base->type, &n->type) && base->type.dtype == n->type.dtype) return base;
    if (base == a) return NULL;
    return named(c, ir_reshape(c->dst, base, n->type.rank, n->type.dims, n->loc), n);
}

/* collapse-permutes: out.dims[i] = in.dims[perm[i]], so permute(permute(x,
 * p), q) reads x.dims[p[q[i]]]. */
static ir_node *permute(canon *c, const ir_node *n, ir_node *a)
{
    int r = n->type.rank, perm[IR_MAX_RANK];
    ir_node *base = a->op == IR_OP_PERMUTE ? a->inputs[0] : a;
    bool ident = true;
    for (int i = 0; i < r; i++) {
        perm[i] = base == a ? n->attrs.perm[i] : a->attrs.perm[n->attrs.perm[i]];
        ident &= perm[i] == i;
    }
    if (ident) return base;
    if (base == a) return NULL;
    return named(c, ir_permute(c->dst, base, perm, n->loc), n);
}

/* The node (existing or new) that n canonicalizes to, or NULL to copy it. */
static ir_node *simplify(canon *c, const ir_node *n, ir_node *const *in)
{
    ir_node *r = NULL;
    if (n->param >= 0 || n->ninputs == 0) return NULL;
    if (c->fold && (r = fold(c, n, in))) return r;
    if (c->identity && (r = identity(n, in))) return r;
    if (c->reshapes && n->op == IR_OP_RESHAPE && (r = reshape(c, n, in[0]))) return r;
    if (c->permutes && n->op == IR_OP_PERMUTE && (r = permute(c, n, in[0]))) return r;
    return NULL;
}

ir_graph *pass_canonicalize(ir_graph *g, pass_ctx *ctx)
{
    canon c = {
        .fold = pass_rule_enabled(ctx, PASS_RULE_FOLD_CONSTANTS),
        .reshapes = pass_rule_enabled(ctx, PASS_RULE_COLLAPSE_RESHAPES),
        .permutes = pass_rule_enabled(ctx, PASS_RULE_COLLAPSE_PERMUTES),
        .identity = pass_rule_enabled(ctx, PASS_RULE_DROP_IDENTITY),
    };
    if (!c.fold && !c.reshapes && !c.permutes && !c.identity) return g;
    pass_rewriter rw;
    if (!pass_rw_begin(&rw, g, ctx)) {
        ir_graph_free(g);
        return NULL;
    }
    c.dst = rw.dst;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        ir_node *in[8] = {0};
        ir_node *r = NULL;
        if (n->ninputs <= 8) {
            for (int j = 0; j < n->ninputs; j++) in[j] = pass_rw_get(&rw, n->inputs[j]);
            r = simplify(&c, n, in);
        }
        if (r) rw.map[n->id] = r;
        else r = pass_rw_copy(&rw, n);
        if (!r) {
            diag_error(ctx->diags, n->loc, "internal error: canonicalize could not rebuild %s",
                       ir_op_name(n->op));
            pass_rw_abort(&rw);
            ir_graph_free(g);
            return NULL;
        }
    }
    g = pass_rw_finish(&rw, g);
    return g ? pass_dce(g, ctx) : NULL;
}
