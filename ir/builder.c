/* ir/builder.c — node constructors with type inference.
 *
 * ir_infer_type is the single definition of every op's typing rule; the
 * constructors and the verifier both call it, so a graph that verifies is a
 * graph the builder could have built. Errors are reported at the node's
 * source location with the shapes involved printed in full. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/ir_internal.h"

#define SHAPE_BUF 256

static void err(diag_list *d, src_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void err(diag_list *d, src_loc loc, const char *fmt, ...)
{
    if (!d) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(d, loc, "%s", msg);
}

static const char *shape_str(const ir_graph *g, const ir_type *t, char *buf)
{
    ir_shape_print(t, g->syms, buf, SHAPE_BUF);
    return buf;
}

static const char *type_str(const ir_graph *g, const ir_type *t, char *buf)
{
    ir_type_print(t, g->syms, buf, SHAPE_BUF);
    return buf;
}

static const char *dim_str(const ir_graph *g, const ir_dim *dm, char *buf)
{
    ir_dim_print(dm, g->syms, buf, SHAPE_BUF);
    return buf;
}

static bool dim_is_one(const ir_dim *d)
{
    int64_t v;
    return ir_dim_is_const(d, &v) && v == 1;
}

/* Both operands share a dtype. */
static bool same_dtype(const ir_graph *g, const char *op, const ir_node *a, const ir_node *b,
                       diag_list *d, src_loc loc)
{
    if (a->type.dtype == b->type.dtype) return true;
    err(d, loc, "%s: dtype mismatch: %s and %s (use cast() to convert)", op,
        ir_dtype_name(a->type.dtype), ir_dtype_name(b->type.dtype));
    return false;
}

static bool need_float(const char *op, const ir_node *x, diag_list *d, src_loc loc)
{
    if (ir_dtype_is_float(x->type.dtype)) return true;
    err(d, loc, "%s needs a floating-point tensor, got %s", op, ir_dtype_name(x->type.dtype));
    return false;
}

static bool need_rank(const ir_graph *g, const char *op, const char *what, const ir_node *x,
                      int rank, diag_list *d, src_loc loc)
{
    if (x->type.rank == rank) return true;
    char b[SHAPE_BUF];
    err(d, loc, "%s: %s must have rank %d, got %s", op, what, rank, shape_str(g, &x->type, b));
    return false;
}

static bool need_dim_eq(const ir_graph *g, const char *op, const char *what, const ir_dim *a,
                        const ir_dim *b, diag_list *d, src_loc loc)
{
    if (ir_dim_eq(a, b)) return true;
    char ba[SHAPE_BUF], bb[SHAPE_BUF];
    err(d, loc, "%s: %s do not agree: %s vs %s", op, what, dim_str(g, a, ba), dim_str(g, b, bb));
    return false;
}

/* pos: i32[B] */
static bool check_pos(const ir_graph *g, const char *op, const ir_node *pos, const ir_dim *batch,
                      diag_list *d, src_loc loc)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (pos->type.dtype != IR_I32 || pos->type.rank != 1 || !ir_dim_eq(&pos->type.dims[0], batch)) {
        err(d, loc, "%s: positions must be i32[%s], got %s", op, dim_str(g, batch, b1),
            type_str(g, &pos->type, b2));
        return false;
    }
    return true;
}

/* A packed op's token operand: [1, S, ...] (axis 0 one, the sequences' tokens along axis 1). */
static bool packed_tokens(const ir_graph *g, const char *op, const char *what, const ir_node *x, diag_list *d,
                          src_loc loc)
{
    char b1[SHAPE_BUF];
    if (x->type.rank >= 2 && dim_is_one(&x->type.dims[0])) return true;
    err(d, loc, "%s: packed %s must be [1, S, ...] (the sequences' tokens along axis 1), got %s", op, what,
        type_str(g, &x->type, b1));
    return false;
}

static bool broadcast(const ir_graph *g, const char *op, const ir_type *a, const ir_type *b,
                      ir_type *out, diag_list *d, src_loc loc)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    out->rank = r;
    for (int i = 0; i < r; i++) {
        const ir_dim *da = i < r - a->rank ? NULL : &a->dims[i - (r - a->rank)];
        const ir_dim *db = i < r - b->rank ? NULL : &b->dims[i - (r - b->rank)];
        if (!da) out->dims[i] = *db;
        else if (!db) out->dims[i] = *da;
        else if (ir_dim_eq(da, db) || dim_is_one(db)) out->dims[i] = *da;
        else if (dim_is_one(da)) out->dims[i] = *db;
        else {
            char ba[SHAPE_BUF], bb[SHAPE_BUF];
            err(d, loc, "%s: shapes %s and %s cannot be broadcast together", op,
                shape_str(g, a, ba), shape_str(g, b, bb));
            return false;
        }
    }
    return true;
}

static bool product(const ir_type *t, ir_dim *out)
{
    *out = ir_dim_const(1);
    for (int i = 0; i < t->rank; i++)
        if (!ir_dim_mul(*out, t->dims[i], out)) return false;
    return true;
}

bool ir_infer_type(const ir_graph *g, ir_op op, int n, ir_node *const *in, const ir_attrs *at,
                   ir_type *out, diag_list *d, src_loc loc)
{
    const char *name = ir_op_name(op);
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF];
    int lo = ir_op_min_inputs(op), hi = ir_op_max_inputs(op);
    if (n < lo || (hi >= 0 && n > hi)) {
        err(d, loc, "%s takes %d to %d inputs, got %d", name, lo, hi, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!in[i]) return false;
    const ir_node *x = n > 0 ? in[0] : NULL;

    switch (op) {
    case IR_OP_INPUT:
    case IR_OP_WEIGHT:
    case IR_OP_STATE:
        if (out->rank < 0 || out->rank > IR_MAX_RANK) {
            err(d, loc, "rank %d is out of range (at most %d)", out->rank, IR_MAX_RANK);
            return false;
        }
        return true;
    case IR_OP_CONST:
        if (out->rank != 0) {
            err(d, loc, "a constant is a scalar");
            return false;
        }
        return true;
    case IR_OP_CAUSAL_MASK:
        if (out->rank != 2 || !ir_dtype_is_float(out->dtype)) {
            err(d, loc, "causal_mask is a floating-point [Sq, Sk] tensor");
            return false;
        }
        return true;

    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_MAX: case IR_OP_MIN:
    case IR_OP_DIV: case IR_OP_POW:
        if (!same_dtype(g, name, in[0], in[1], d, loc)) return false;
        if ((op == IR_OP_DIV || op == IR_OP_POW) && !need_float(name, x, d, loc)) return false;
        out->dtype = x->type.dtype;
        return broadcast(g, name, &in[0]->type, &in[1]->type, out, d, loc);

    case IR_OP_NEG:
        *out = x->type;
        return true;
    case IR_OP_EXP: case IR_OP_LOG: case IR_OP_SQRT: case IR_OP_RSQRT: case IR_OP_TANH:
    case IR_OP_SIGMOID: case IR_OP_SILU: case IR_OP_GELU: case IR_OP_RELU:
        if (!need_float(name, x, d, loc)) return false;
        *out = x->type;
        return true;
    case IR_OP_CAST: {
        ir_dtype to = out->dtype;
        *out = x->type;
        out->dtype = to;
        return true;
    }

    case IR_OP_SUM: case IR_OP_MEAN: case IR_OP_REDUCE_MAX: {
        if (!need_float(name, x, d, loc)) return false;
        if (x->type.rank < 32 && (at->axes >> x->type.rank) != 0) {
            err(d, loc, "%s: axis out of range for %s", name, shape_str(g, &x->type, b1));
            return false;
        }
        if (at->axes == 0 && x->type.rank > 0) {
            err(d, loc, "%s: no axis to reduce", name);
            return false;
        }
        out->dtype = x->type.dtype;
        out->rank = 0;
        for (int i = 0; i < x->type.rank; i++) {
            if (at->axes & (1u << i)) {
                if (at->keepdim) out->dims[out->rank++] = ir_dim_const(1);
            } else {
                out->dims[out->rank++] = x->type.dims[i];
            }
        }
        return true;
    }
    case IR_OP_SOFTMAX:
        if (!need_float(name, x, d, loc)) return false;
        if (at->axis < 0 || at->axis >= x->type.rank) {
            err(d, loc, "softmax: axis %d out of range for %s", at->axis, shape_str(g, &x->type, b1));
            return false;
        }
        *out = x->type;
        return true;
    case IR_OP_RMSNORM:
    case IR_OP_LAYERNORM: {
        if (!need_float(name, x, d, loc)) return false;
        if (x->type.rank < 1) {
            err(d, loc, "%s needs at least one axis", name);
            return false;
        }
        const ir_dim *last = &x->type.dims[x->type.rank - 1];
        for (int i = 1; i < n; i++) {
            const char *what = i == 1 ? "weight" : "bias";
            if (!same_dtype(g, name, x, in[i], d, loc)) return false;
            if (in[i]->type.rank != 1 || !ir_dim_eq(&in[i]->type.dims[0], last)) {
                err(d, loc, "%s: %s must be [%s] to match the last axis of %s, got %s", name, what,
                    dim_str(g, last, b1), shape_str(g, &x->type, b2), shape_str(g, &in[i]->type, b3));
                return false;
            }
        }
        *out = x->type;
        return true;
    }

    case IR_OP_MATMUL: {
        const ir_type *a = &in[0]->type, *b = &in[1]->type;
        if (!same_dtype(g, name, in[0], in[1], d, loc) || !need_float(name, x, d, loc)) return false;
        if (a->rank < 2 || b->rank < 2) {
            err(d, loc, "matmul needs operands of rank >= 2, got %s and %s", shape_str(g, a, b1),
                shape_str(g, b, b2));
            return false;
        }
        if (!ir_dim_eq(&a->dims[a->rank - 1], &b->dims[b->rank - 2])) {
            err(d, loc, "matmul: inner dimensions do not agree: %s @ %s", shape_str(g, a, b1),
                shape_str(g, b, b2));
            return false;
        }
        ir_type ba = *a, bb = *b;
        ba.rank -= 2;
        bb.rank -= 2;
        if (!broadcast(g, "matmul batch axes", &ba, &bb, out, d, loc)) return false;
        out->dtype = a->dtype;
        out->dims[out->rank++] = a->dims[a->rank - 2];
        out->dims[out->rank++] = b->dims[b->rank - 1];
        return true;
    }
    case IR_OP_LINEAR: {
        const ir_type *w = &in[1]->type;
        if (!same_dtype(g, name, x, in[1], d, loc) || !need_float(name, x, d, loc)) return false;
        if (x->type.rank < 1 || w->rank != 2) {
            err(d, loc, "linear: weight must be [N, K] (or [E, N, K]) and input [..., K], got %s and %s",
                shape_str(g, &x->type, b1), shape_str(g, w, b2));
            return false;
        }
        if (!ir_dim_eq(&x->type.dims[x->type.rank - 1], &w->dims[1])) {
            err(d, loc, "linear: input %s does not match weight %s: the last axis must equal the weight's second axis",
                shape_str(g, &x->type, b1), shape_str(g, w, b2));
            return false;
        }
        if (n == 3) {
            if (!same_dtype(g, name, x, in[2], d, loc)) return false;
            if (in[2]->type.rank != 1 || !ir_dim_eq(&in[2]->type.dims[0], &w->dims[0])) {
                err(d, loc, "linear: bias must be [%s], got %s", dim_str(g, &w->dims[0], b1),
                    shape_str(g, &in[2]->type, b2));
                return false;
            }
        }
        *out = x->type;
        out->dims[out->rank - 1] = w->dims[0];
        return true;
    }

    case IR_OP_RESHAPE: {
        ir_dim pa, pb;
        out->dtype = x->type.dtype;
        if (out->rank < 0 || out->rank > IR_MAX_RANK) {
            err(d, loc, "reshape: rank %d out of range", out->rank);
            return false;
        }
        if (!product(&x->type, &pa) || !product(out, &pb)) {
            err(d, loc, "reshape: element counts are too complex to compare");
            return false;
        }
        if (!ir_dim_eq(&pa, &pb)) {
            char c1[SHAPE_BUF], c2[SHAPE_BUF];
            err(d, loc, "reshape: %s has %s elements but %s has %s", shape_str(g, &x->type, b1),
                dim_str(g, &pa, c1), shape_str(g, out, b2), dim_str(g, &pb, c2));
            return false;
        }
        return true;
    }
    case IR_OP_PERMUTE: {
        uint32_t seen = 0;
        for (int i = 0; i < x->type.rank; i++) {
            int p = at->perm[i];
            if (p < 0 || p >= x->type.rank || (seen & (1u << p))) {
                err(d, loc, "permute: not a permutation of the %d axes of %s", x->type.rank,
                    shape_str(g, &x->type, b1));
                return false;
            }
            seen |= 1u << p;
        }
        out->dtype = x->type.dtype;
        out->rank = x->type.rank;
        for (int i = 0; i < x->type.rank; i++) out->dims[i] = x->type.dims[at->perm[i]];
        return true;
    }
    case IR_OP_SLICE: {
        if (at->axis < 0 || at->axis >= x->type.rank) {
            err(d, loc, "slice: axis %d out of range for %s", at->axis, shape_str(g, &x->type, b1));
            return false;
        }
        const ir_dim *dim = &x->type.dims[at->axis];
        int64_t s, e, len;
        ir_dim size;
        if (!ir_dim_sub(at->end, at->start, &size)) {
            err(d, loc, "slice: bounds too complex");
            return false;
        }
        bool cs = ir_dim_is_const(&at->start, &s), ce = ir_dim_is_const(&at->end, &e);
        bool bad = (cs && s < 0) || (cs && ce && e < s);
        if (ce && ir_dim_is_const(dim, &len) && e > len) bad = true;
        if (bad || (ir_dim_is_const(&size, &len) && len <= 0)) {
            err(d, loc, "slice: [%s, %s) is not a non-empty range inside axis %d of %s",
                dim_str(g, &at->start, b1), dim_str(g, &at->end, b2), at->axis,
                shape_str(g, &x->type, b3));
            return false;
        }
        *out = x->type;
        out->dims[at->axis] = size;
        if (at->packed) { /* [1, S, ...] packed tokens -> [nseq, end - start, ...] */
            if (at->axis != 1 || x->type.rank < 2 || !dim_is_one(&x->type.dims[0]) || !ir_dim_is_const(&size, &len)) {
                err(d, loc, "slice: a packed slice takes a constant number of tokens along axis 1 of [1, S, ...], not %s",
                    shape_str(g, &x->type, b1));
                return false;
            }
            out->dims[0] = at->nseq;
        }
        return true;
    }
    case IR_OP_CONCAT: {
        if (at->axis < 0 || at->axis >= x->type.rank) {
            err(d, loc, "concat: axis %d out of range for %s", at->axis, shape_str(g, &x->type, b1));
            return false;
        }
        *out = x->type;
        for (int i = 1; i < n; i++) {
            const ir_type *t = &in[i]->type;
            if (!same_dtype(g, name, x, in[i], d, loc)) return false;
            bool ok = t->rank == x->type.rank;
            for (int j = 0; ok && j < t->rank; j++)
                if (j != at->axis && !ir_dim_eq(&t->dims[j], &x->type.dims[j])) ok = false;
            if (!ok) {
                err(d, loc, "concat: %s and %s differ outside axis %d", shape_str(g, &x->type, b1),
                    shape_str(g, t, b2), at->axis);
                return false;
            }
            if (!ir_dim_add(out->dims[at->axis], t->dims[at->axis], &out->dims[at->axis])) {
                err(d, loc, "concat: size too complex");
                return false;
            }
        }
        return true;
    }
    case IR_OP_TOPK: {
        int64_t e;
        if (!need_float(name, x, d, loc)) return false;
        if (x->type.rank < 1) {
            err(d, loc, "topk: x must have an axis to choose along");
            return false;
        }
        if (!at || at->topk < 1) {
            err(d, loc, "topk: k must be at least 1");
            return false;
        }
        if (ir_dim_is_const(&x->type.dims[x->type.rank - 1], &e) && at->topk > e) {
            err(d, loc, "topk: k=%lld exceeds the %lld values of the last axis of %s", (long long)at->topk,
                (long long)e, shape_str(g, &x->type, b1));
            return false;
        }
        *out = x->type;
        out->dims[out->rank - 1] = ir_dim_const(at->topk);
        if (at->indices) out->dtype = IR_I32;
        return true;
    }
    case IR_OP_EXPERT_LINEAR: {
        const ir_node *w = in[1], *idx = in[2];
        if (!need_float(name, x, d, loc) || !same_dtype(g, name, x, w, d, loc) ||
            !need_rank(g, name, "w ([experts, N, K])", w, 3, d, loc))
            return false;
        if (idx->type.dtype != IR_I32 || idx->type.rank < 1 || idx->type.rank >= IR_MAX_RANK) {
            err(d, loc, "expert_linear: idx must be i32 [..., k] (the chosen experts), got %s",
                type_str(g, &idx->type, b1));
            return false;
        }
        int r = idx->type.rank;
        /* x [..., K] shared by the k slots, or [..., k, K] one row per slot */
        bool shared = x->type.rank == r, per_slot = x->type.rank == r + 1;
        bool ok = shared || per_slot;
        for (int i = 0; ok && i < (shared ? r - 1 : r); i++) ok = ir_dim_eq(&x->type.dims[i], &idx->type.dims[i]);
        if (!ok) {
            err(d, loc, "expert_linear: x %s fits neither [..., K] nor [..., k, K] for idx %s", shape_str(g, &x->type, b1),
                shape_str(g, &idx->type, b2));
            return false;
        }
        if (!ir_dim_eq(&x->type.dims[x->type.rank - 1], &w->type.dims[2])) {
            err(d, loc, "expert_linear: the rows of x %s are not the K of w %s ([experts, N, K])",
                shape_str(g, &x->type, b1), shape_str(g, &w->type, b2));
            return false;
        }
        *out = idx->type;
        out->dtype = x->type.dtype;
        out->dims[out->rank++] = w->type.dims[1];
        return true;
    }
    case IR_OP_EMBEDDING: {
        const ir_node *ids = in[1];
        if (!need_float(name, x, d, loc) || !need_rank(g, name, "table", x, 2, d, loc)) return false;
        if (ids->type.dtype != IR_I32) {
            err(d, loc, "embedding: ids must be i32, got %s", ir_dtype_name(ids->type.dtype));
            return false;
        }
        if (ids->type.rank >= IR_MAX_RANK) {
            err(d, loc, "embedding: ids have too many axes");
            return false;
        }
        *out = ids->type;
        out->dtype = x->type.dtype;
        out->dims[out->rank++] = x->type.dims[1];
        return true;
    }
    case IR_OP_ROPE: {
        int64_t hd;
        if (!need_float(name, x, d, loc) || !need_rank(g, name, "input ([B, S, heads, head_dim])", x, 4, d, loc))
            return false;
        if (ir_dim_is_const(&x->type.dims[3], &hd) && hd % 2 != 0 && !(at && at->rope.rotary_dims)) {
            err(d, loc, "rope: head dim %lld must be even", (long long)hd);
            return false;
        }
        if (at && at->rope.rotary_dims && ir_dim_is_const(&x->type.dims[3], &hd) && at->rope.rotary_dims >= hd) {
            err(d, loc, "rope: dims=%lld rotary dims must be fewer than the head dim %lld (or omitted)",
                (long long)at->rope.rotary_dims, (long long)hd);
            return false;
        }
        if (at && at->packed) { /* positions per sequence: any number of them */
            if (!packed_tokens(g, name, "input", x, d, loc) ||
                (n == 2 && !check_pos(g, name, in[1], &in[1]->type.dims[0], d, loc)))
                return false;
        } else if (n == 2 && !check_pos(g, name, in[1], &x->type.dims[0], d, loc))
            return false;
        *out = x->type;
        return true;
    }
    case IR_OP_ATTENTION: {
        const ir_node *q = in[0], *k = in[1], *v = in[2];
        if (!need_float(name, q, d, loc) || !same_dtype(g, name, q, k, d, loc) ||
            !same_dtype(g, name, q, v, d, loc))
            return false;
        if (!need_rank(g, name, "q ([B, S, H, HD])", q, 4, d, loc) ||
            !need_rank(g, name, "k ([B, KV, T, HD])", k, 4, d, loc) ||
            !need_rank(g, name, "v ([B, KV, T, HD])", v, 4, d, loc))
            return false;
        if (at->packed ? !packed_tokens(g, name, "q", q, d, loc) || !need_dim_eq(g, name, "sequences of k and v", &k->type.dims[0], &v->type.dims[0], d, loc)
                       : !need_dim_eq(g, name, "batch sizes of q and k", &q->type.dims[0], &k->type.dims[0], d, loc) ||
                             !need_dim_eq(g, name, "batch sizes of q and v", &q->type.dims[0], &v->type.dims[0], d, loc))
            return false;
        if (
            !need_dim_eq(g, name, "head dims of q and k", &q->type.dims[3], &k->type.dims[3], d, loc) ||
            !need_dim_eq(g, name, "KV heads of k and v", &k->type.dims[1], &v->type.dims[1], d, loc) ||
            !need_dim_eq(g, name, "key lengths of k and v", &k->type.dims[2], &v->type.dims[2], d, loc))
            return false;
        int64_t h, kv;
        if (ir_dim_is_const(&q->type.dims[2], &h) && ir_dim_is_const(&k->type.dims[1], &kv) &&
            (kv <= 0 || h % kv != 0)) {
            err(d, loc, "attention: %lld query heads cannot be grouped over %lld KV heads", (long long)h,
                (long long)kv);
            return false;
        }
        if (n == 4 && !check_pos(g, name, in[3], &(at->packed ? k : q)->type.dims[0], d, loc)) return false;
        if (!(at->scale > 0) || !isfinite(at->scale)) {
            err(d, loc, "attention: scale must be positive and finite");
            return false;
        }
        *out = q->type;
        out->dims[3] = v->type.dims[3];
        return true;
    }
    case IR_OP_CACHE_WRITE: {
        const ir_node *c = in[0], *v = in[1];
        if (!same_dtype(g, name, c, v, d, loc)) return false;
        if (!need_rank(g, name, "cache ([B, KV, T, HD])", c, 4, d, loc) ||
            !need_rank(g, name, "new rows ([B, S, KV, HD])", v, 4, d, loc))
            return false;
        if (at->packed ? !packed_tokens(g, name, "new rows", v, d, loc)
                       : !need_dim_eq(g, name, "batch sizes of cache and new rows", &c->type.dims[0], &v->type.dims[0], d, loc))
            return false;
        if (!need_dim_eq(g, name, "heads of cache and new rows", &c->type.dims[1], &v->type.dims[2], d, loc) ||
            !need_dim_eq(g, name, "head dims of cache and new rows", &c->type.dims[3], &v->type.dims[3], d, loc))
            return false;
        if (n == 3 && !check_pos(g, name, in[2], &c->type.dims[0], d, loc)) return false;
        *out = c->type;
        return true;
    }
    case IR_OP_COUNT: break;
    }
    err(d, loc, "unknown op %d", (int)op);
    return false;
}

/* Creates a node whose type is `type` on entry (for ops whose type is
 * declared) and checked/inferred by ir_infer_type. */
static ir_node *make(ir_graph *g, ir_op op, int n, ir_node *const *in, const ir_attrs *at,
                     const ir_type *declared, src_loc loc)
{
    for (int i = 0; i < n; i++)
        if (!in[i]) return NULL;
    ir_type t;
    memset(&t, 0, sizeof t);
    if (declared) t = *declared;
    ir_attrs a0;
    memset(&a0, 0, sizeof a0);
    if (!at) at = &a0;
    if (!ir_infer_type(g, op, n, in, at, &t, g->diags, loc)) return NULL;
    ir_node *node = arena_alloc(&g->arena, sizeof *node);
    ir_node **ins = n ? arena_alloc(&g->arena, (size_t)n * sizeof *ins) : NULL;
    if (!node || (n && !ins)) {
        err(g->diags, loc, "out of memory");
        return NULL;
    }
    if (n) memcpy(ins, in, (size_t)n * sizeof *ins);
    node->op = op;
    node->ninputs = n;
    node->inputs = ins;
    node->type = t;
    node->attrs = *at;
    node->loc = ir_graph_loc(g, loc); /* the file name must outlive the graph loc came from */
    node->group = -1;
    if (!ir_graph_append_node_(g, node)) {
        err(g->diags, loc, "out of memory");
        return NULL;
    }
    return node;
}

ir_node *ir_node_new(ir_graph *g, ir_op op, int n, ir_node *const *in, const ir_attrs *attrs,
                     src_loc loc)
{
    return make(g, op, n, in, attrs, NULL, loc);
}

ir_node *ir_node_copy(ir_graph *g, const ir_node *n, ir_node *const *inputs)
{
    ir_node *c = make(g, n->op, n->ninputs, inputs, &n->attrs, &n->type, n->loc);
    if (c && n->name) c->name = arena_strdup(&g->arena, n->name);
    return c;
}

ir_node *ir_param(ir_graph *g, ir_op kind, const char *name, const ir_type *type, src_loc loc)
{
    if (kind != IR_OP_INPUT && kind != IR_OP_WEIGHT && kind != IR_OP_STATE) return NULL;
    ir_node *n = make(g, kind, 0, NULL, NULL, type, loc);
    if (n) n->name = arena_strdup(&g->arena, name);
    return n;
}

ir_node *ir_const(ir_graph *g, double value, ir_dtype dtype, src_loc loc)
{
    ir_type t = {.dtype = dtype, .rank = 0};
    ir_attrs a = {.value = value};
    return make(g, IR_OP_CONST, 0, NULL, &a, &t, loc);
}

ir_node *ir_causal_mask(ir_graph *g, ir_dim q, ir_dim k, ir_dtype dtype, src_loc loc)
{
    ir_type t = {.dtype = dtype, .rank = 2};
    t.dims[0] = q;
    t.dims[1] = k;
    return make(g, IR_OP_CAUSAL_MASK, 0, NULL, NULL, &t, loc);
}

ir_node *ir_unary(ir_graph *g, ir_op op, ir_node *x, src_loc loc)
{
    if (ir_op_class(op) != IR_CLASS_ELEMENTWISE || ir_op_max_inputs(op) != 1 || op == IR_OP_CAST) {
        err(g->diags, loc, "%s is not a unary elementwise op", ir_op_name(op));
        return NULL;
    }
    return make(g, op, 1, &x, NULL, NULL, loc);
}

ir_node *ir_gelu(ir_graph *g, ir_node *x, bool tanh_approx, src_loc loc)
{
    ir_attrs a = {.gelu_tanh = tanh_approx};
    return make(g, IR_OP_GELU, 1, &x, &a, NULL, loc);
}

static bool weakly_typed(const ir_node *n)
{
    return n->op == IR_OP_CONST || n->op == IR_OP_CAUSAL_MASK;
}

/* A weakly typed operand (a scalar constant, a mask) takes the other
 * operand's dtype: `x * 0.5` keeps x's dtype. */
static ir_node *retype_weak(ir_graph *g, ir_node *w, ir_dtype to)
{
    if (w->type.dtype == to) return w;
    if (!ir_dtype_is_float(to)) { /* `pos + 1`: an integral constant becomes i32 */
        bool integral = w->op == IR_OP_CONST && w->attrs.value == (double)(int32_t)w->attrs.value;
        return integral ? ir_const(g, w->attrs.value, to, w->loc) : w;
    }
    if (w->op == IR_OP_CONST) return ir_const(g, w->attrs.value, to, w->loc);
    return ir_causal_mask(g, w->type.dims[0], w->type.dims[1], to, w->loc);
}

ir_node *ir_binary(ir_graph *g, ir_op op, ir_node *a, ir_node *b, src_loc loc)
{
    if (!a || !b) return NULL;
    if (ir_op_class(op) != IR_CLASS_ELEMENTWISE || ir_op_max_inputs(op) != 2) {
        err(g->diags, loc, "%s is not a binary elementwise op", ir_op_name(op));
        return NULL;
    }
    if (weakly_typed(a) && !weakly_typed(b)) a = retype_weak(g, a, b->type.dtype);
    else if (weakly_typed(b) && !weakly_typed(a)) b = retype_weak(g, b, a->type.dtype);
    ir_node *in[2] = {a, b};
    return make(g, op, 2, in, NULL, NULL, loc);
}

ir_node *ir_cast(ir_graph *g, ir_node *x, ir_dtype to, src_loc loc)
{
    ir_type t = {.dtype = to};
    return make(g, IR_OP_CAST, 1, &x, NULL, &t, loc);
}

ir_node *ir_reduce(ir_graph *g, ir_op op, ir_node *x, uint32_t axes, bool keepdim, src_loc loc)
{
    if (op != IR_OP_SUM && op != IR_OP_MEAN && op != IR_OP_REDUCE_MAX) {
        err(g->diags, loc, "%s is not a reduction", ir_op_name(op));
        return NULL;
    }
    ir_attrs a = {.axes = axes, .keepdim = keepdim};
    return make(g, op, 1, &x, &a, NULL, loc);
}

ir_node *ir_softmax(ir_graph *g, ir_node *x, int axis, src_loc loc)
{
    ir_attrs a = {.axis = axis};
    return make(g, IR_OP_SOFTMAX, 1, &x, &a, NULL, loc);
}

ir_node *ir_rmsnorm(ir_graph *g, ir_node *x, ir_node *w, double eps, src_loc loc)
{
    ir_attrs a = {.eps = eps};
    ir_node *in[2] = {x, w};
    return make(g, IR_OP_RMSNORM, w ? 2 : 1, in, &a, NULL, loc);
}

ir_node *ir_layernorm(ir_graph *g, ir_node *x, ir_node *w, ir_node *b, double eps, src_loc loc)
{
    ir_attrs a = {.eps = eps};
    ir_node *in[3] = {x, w, b};
    return make(g, IR_OP_LAYERNORM, b ? 3 : w ? 2 : 1, in, &a, NULL, loc);
}

ir_node *ir_matmul(ir_graph *g, ir_node *a, ir_node *b, src_loc loc)
{
    ir_node *in[2] = {a, b};
    return make(g, IR_OP_MATMUL, 2, in, NULL, NULL, loc);
}

/* A 3-D weight [E, N, K] (experts stacked, as stored): every expert's
 * linear at once, result [..., E, N] — a linear over the weight viewed as
 * [E*N, K] (the bias [E, N] as [E*N]), reshaped; the views cost nothing. */
static ir_node *linear_3d(ir_graph *g, ir_node *x, ir_node *w, ir_node *bias, src_loc loc)
{
    const ir_type *t = &w->type;
    ir_dim en, flat[2];
    if (!ir_dim_mul(t->dims[0], t->dims[1], &en) || x->type.rank < 1 || x->type.rank >= IR_MAX_RANK) {
        ir_node *in[3] = {x, w, bias};
        return make(g, IR_OP_LINEAR, bias ? 3 : 2, in, NULL, NULL, loc); /* reports the shapes */
    }
    flat[0] = en;
    flat[1] = t->dims[2];
    ir_node *wf = ir_reshape(g, w, 2, flat, loc);
    ir_node *bf = bias && bias->type.rank == 2 ? ir_reshape(g, bias, 1, &en, loc) : bias;
    ir_node *in[3] = {x, wf, bf};
    ir_node *y = wf && (!bias || bf) ? make(g, IR_OP_LINEAR, bias ? 3 : 2, in, NULL, NULL, loc) : NULL;
    if (!y) return NULL;
    ir_dim dims[IR_MAX_RANK];
    for (int i = 0; i + 1 < x->type.rank; i++) dims[i] = x->type.dims[i];
    dims[x->type.rank - 1] = t->dims[0];
    dims[x->type.rank] = t->dims[1];
    return ir_reshape(g, y, x->type.rank + 1, dims, loc);
}

ir_node *ir_linear(ir_graph *g, ir_node *x, ir_node *w, ir_node *bias, src_loc loc)
{
    if (x && w && w->type.rank == 3) return linear_3d(g, x, w, bias, loc);
    ir_node *in[3] = {x, w, bias};
    return make(g, IR_OP_LINEAR, bias ? 3 : 2, in, NULL, NULL, loc);
}

ir_node *ir_reshape(ir_graph *g, ir_node *x, int rank, const ir_dim *dims, src_loc loc)
{
    if (rank < 0 || rank > IR_MAX_RANK) {
        err(g->diags, loc, "reshape: rank %d out of range (at most %d)", rank, IR_MAX_RANK);
        return NULL;
    }
    ir_type t = {.rank = rank};
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    return make(g, IR_OP_RESHAPE, 1, &x, NULL, &t, loc);
}

ir_node *ir_permute(ir_graph *g, ir_node *x, const int *perm, src_loc loc)
{
    ir_attrs a;
    memset(&a, 0, sizeof a);
    if (x)
        for (int i = 0; i < x->type.rank; i++) a.perm[i] = perm[i];
    return make(g, IR_OP_PERMUTE, 1, &x, &a, NULL, loc);
}

ir_node *ir_slice(ir_graph *g, ir_node *x, int axis, ir_dim start, ir_dim end, src_loc loc)
{
    ir_attrs a = {.axis = axis, .start = start, .end = end};
    return make(g, IR_OP_SLICE, 1, &x, &a, NULL, loc);
}

ir_node *ir_concat(ir_graph *g, int n, ir_node *const *xs, int axis, src_loc loc)
{
    ir_attrs a = {.axis = axis};
    return make(g, IR_OP_CONCAT, n, xs, &a, NULL, loc);
}

ir_node *ir_embedding(ir_graph *g, ir_node *table, ir_node *ids, src_loc loc)
{
    ir_node *in[2] = {table, ids};
    return make(g, IR_OP_EMBEDDING, 2, in, NULL, NULL, loc);
}

ir_node *ir_rope(ir_graph *g, ir_node *x, ir_node *pos, double theta, src_loc loc)
{
    return ir_rope_scaled(g, x, pos, theta, NULL, loc);
}

ir_node *ir_rope_scaled(ir_graph *g, ir_node *x, ir_node *pos, double theta, const ir_rope_attrs *r,
                        src_loc loc)
{
    if (!(theta > 0) || !isfinite(theta)) {
        err(g->diags, loc, "rope: theta must be positive, got %g", theta);
        return NULL;
    }
    const char *bad = r ? ir_rope_check(r) : NULL;
    if (bad) {
        err(g->diags, loc, "rope: %s", bad);
        return NULL;
    }
    ir_attrs a = {.theta = theta};
    if (r) a.rope = *r;
    int64_t rotary = a.rope.rotary_dims, hd;
    if (a.rope.scaling == IR_ROPE_NONE) memset(&a.rope, 0, sizeof a.rope);
    if (x && x->type.rank == 4 && ir_dim_is_const(&x->type.dims[3], &hd)) {
        if (rotary > hd) {
            err(g->diags, loc, "rope: dims=%lld rotary dims exceed the head dim %lld", (long long)rotary, (long long)hd);
            return NULL;
        }
        if (rotary == hd) rotary = 0; /* every dim: full RoPE */
    }
    a.rope.rotary_dims = rotary;
    if (a.rope.scaling != IR_ROPE_YARN) a.rope.mscale = 0; /* ir_rope_mscale: 1 */
    ir_node *in[2] = {x, pos};
    return make(g, IR_OP_ROPE, pos ? 2 : 1, in, &a, NULL, loc);
}

ir_node *ir_attention(ir_graph *g, ir_node *q, ir_node *k, ir_node *v, ir_node *pos, double scale,
                      bool causal, src_loc loc)
{
    return ir_attention_ex(g, q, k, v, pos, scale, causal, 0, 0, loc);
}

ir_node *ir_attention_ex(ir_graph *g, ir_node *q, ir_node *k, ir_node *v, ir_node *pos, double scale, bool causal,
                         int64_t window, double softcap, src_loc loc)
{
    if (!q || !k || !v) return NULL;
    if (window < 0) {
        err(g->diags, loc, "attention: window must be positive (keys within window positions of the query), got %lld",
            (long long)window);
        return NULL;
    }
    if (softcap < 0 || !isfinite(softcap)) {
        err(g->diags, loc, "attention: softcap must be positive, got %g", softcap);
        return NULL;
    }
    if (scale <= 0) {
        int64_t hd;
        if (q->type.rank != 4 || !ir_dim_is_const(&q->type.dims[3], &hd) || hd <= 0) {
            err(g->diags, loc, "attention: the default scale 1/sqrt(head_dim) needs a constant head dim; pass scale=");
            return NULL;
        }
        scale = 1.0 / sqrt((double)hd);
    }
    ir_attrs a = {.scale = scale, .causal = causal, .window = window, .softcap = softcap};
    ir_node *in[4] = {q, k, v, pos};
    return make(g, IR_OP_ATTENTION, pos ? 4 : 3, in, &a, NULL, loc);
}

ir_node *ir_topk(ir_graph *g, ir_node *x, int64_t k, bool indices, src_loc loc)
{
    ir_attrs a = {.topk = k, .indices = indices};
    return make(g, IR_OP_TOPK, 1, &x, &a, NULL, loc);
}

ir_node *ir_expert_linear(ir_graph *g, ir_node *x, ir_node *w, ir_node *idx, src_loc loc)
{
    ir_node *in[3] = {x, w, idx};
    return make(g, IR_OP_EXPERT_LINEAR, 3, in, NULL, NULL, loc);
}

ir_node *ir_cache_write(ir_graph *g, ir_node *cache, ir_node *x, ir_node *pos, src_loc loc)
{
    ir_node *in[3] = {cache, x, pos};
    return make(g, IR_OP_CACHE_WRITE, pos ? 3 : 2, in, NULL, NULL, loc);
}
