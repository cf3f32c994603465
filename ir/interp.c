/* ir/interp.c — the CPU reference interpreter.
 *
 * Runs any graph for concrete values of its `dims` symbols. It is the
 * definition in code of the op semantics written in ir/ir.h, and the reference
 * every pass and kernel is tested against, so it favours plain loops that can
 * be checked by eye over speed.
 *
 * Algorithm: evaluate every node in creation (= topological) order, keeping
 * one ir_tensor per node id. Parameters are borrowed from the caller; every
 * other value is owned and freed after its last use (uses by other nodes,
 * outputs and state updates are counted up front), so a large graph at small
 * dims stays small. Storage is f32 for every float dtype and i32 for IR_I32.
 *
 * Numerics: elementwise ops evaluate each element in double and round once to
 * f32 (for + - * / sqrt this is exactly the f32 operation); reductions, norms,
 * softmax, matmul/linear dot products, RoPE angles and attention accumulate in
 * double. Every node's result is then rounded to the node's dtype
 * (ir_round_to), so a bf16 graph behaves like one that stores bf16 between
 * ops. A bf16/f16 parameter whose values are not of its dtype is read
 * through a rounded copy (the caller's tensor is not touched). Float -> i32
 * truncates toward zero; NaN becomes 0 and values outside the i32 range
 * saturate. i32 arithmetic wraps around; i32 division truncates.
 *
 * Errors never abort: every entry point returns -1 with a message naming the
 * node ("%7 = attention ('a' at llama.kiln:12:5): ...") and frees everything
 * it allocated; the caller's state tensors are only written after the whole
 * run has succeeded. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* No single tensor may exceed this many bytes (elements are 4 bytes). */
#define INTERP_MAX_BYTES ((int64_t)8 << 30)

/* ---- tensors --------------------------------------------------------------- */

/* Number of elements; -1 when the shape is invalid or the count overflows. */
static int64_t shape_numel(int rank, const int64_t *shape)
{
    if (rank < 0 || rank > IR_MAX_RANK) return -1;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] != 0 && n > INT64_MAX / shape[i]) return -1;
        n *= shape[i];
    }
    return n;
}

int64_t ir_tensor_numel(const ir_tensor *t) { return shape_numel(t->rank, t->shape); }

bool ir_tensor_alloc(ir_tensor *t, ir_dtype dtype, int rank, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    if ((int)dtype < 0 || dtype >= IR_DTYPE_COUNT) return false;
    int64_t n = shape_numel(rank, shape);
    if (n < 0 || (uint64_t)n > SIZE_MAX / 4) return false;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    size_t count = n > 0 ? (size_t)n : 1; /* never a NULL buffer for 0 elements */
    if (dtype == IR_I32) t->i = calloc(count, sizeof(int32_t));
    else t->f = calloc(count, sizeof(float));
    if (!t->i && !t->f) {
        memset(t, 0, sizeof *t);
        return false;
    }
    return true;
}

void ir_tensor_free(ir_tensor *t)
{
    if (!t) return;
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
}

double ir_tensor_rel_err(const ir_tensor *ref, const ir_tensor *got)
{
    if (ref->rank != got->rank || ir_tensor_numel(ref) != ir_tensor_numel(got)) return INFINITY;
    int64_t n = ir_tensor_numel(ref);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ref->f ? ref->f[i] : ref->i[i], y = got->f ? got->f[i] : got->i[i];
        if (isnan(x) != isnan(y)) return INFINITY;
        if (isinf(x) || isinf(y)) {
            if (x != y) return INFINITY;
            continue;
        }
        num += (x - y) * (x - y);
        den += x * x;
    }
    if (num == 0) return 0;
    return sqrt(num) / (den > 0 ? sqrt(den) : 1e-30);
}

static void row_major_strides(int rank, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= shape[i];
    }
}

bool ir_tensor_same_shape(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static const char *dtype_str(ir_dtype t)
{
    if ((int)t < 0 || t >= IR_DTYPE_COUNT) return "?";
    return ir_dtype_name(t);
}

/* "bf16[2, 3, 8]" */
static void type_str(char *buf, size_t n, ir_dtype dt, int rank, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", dtype_str(dt));
    for (int i = 0; i < rank && i < IR_MAX_RANK && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Element access through double: exact for f32 and i32 values. */
static inline double get(const ir_tensor *t, int64_t k)
{
    return t->dtype == IR_I32 ? (double)t->i[k] : (double)t->f[k];
}

static int32_t to_i32(double v)
{
    if (isnan(v)) return 0;
    v = trunc(v);
    if (v >= 2147483647.0) return INT32_MAX;
    if (v <= -2147483648.0) return INT32_MIN;
    return (int32_t)v;
}

/* Store v (rounded to f32 here; to bf16/f16 by the pass after each node). */
static inline void put(ir_tensor *t, int64_t k, double v)
{
    if (t->dtype == IR_I32) t->i[k] = to_i32(v);
    else t->f[k] = (float)v;
}

/* Copy one element, converting between storage kinds when they differ. */
static inline void copy_elem(ir_tensor *dst, int64_t di, const ir_tensor *src, int64_t si)
{
    if (dst->dtype == IR_I32) {
        dst->i[di] = src->dtype == IR_I32 ? src->i[si] : to_i32(src->f[si]);
    } else {
        dst->f[di] = src->dtype == IR_I32 ? (float)src->i[si] : src->f[si];
    }
}

static void round_tensor(ir_tensor *t)
{
    if (t->dtype != IR_F16 && t->dtype != IR_BF16) return;
    int64_t n = ir_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) t->f[k] = ir_round_to(t->dtype, t->f[k]);
}

static bool is_rounded(const ir_tensor *t)
{
    if (t->dtype != IR_F16 && t->dtype != IR_BF16) return true;
    int64_t n = ir_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        float v = t->f[k];
        if (v == v && ir_round_to(t->dtype, v) != v) return false;
    }
    return true;
}

/* ---- interpreter state and errors ------------------------------------------ */

typedef struct interp {
    const ir_graph *g;
    const int64_t *dims;
    char *err;
    size_t errlen;
    ir_tensor *vals; /* one per node id */
    bool *owned;     /* vals[i] was allocated here (not a caller's parameter) */
    int *uses;       /* remaining uses of each node */
    const int32_t *cu; /* a packed run's cumulative offsets (nseq + 1), else NULL */
    int nseq;
} interp;

static int failv(interp *c, const ir_node *n, const char *fmt, va_list ap)
{
    if (!c->err || c->errlen == 0) return -1;
    size_t k = 0;
    if (n) {
        int w = snprintf(c->err, c->errlen, "%%%d = %s", n->id, ir_op_name(n->op));
        k = w > 0 ? (size_t)w : 0;
        if (k < c->errlen && (n->name || n->loc.line > 0)) {
            w = snprintf(c->err + k, c->errlen - k, " (%s%s%s", n->name ? "'" : "",
                         n->name ? n->name : "", n->name ? "'" : "");
            k += w > 0 ? (size_t)w : 0;
            if (k < c->errlen && n->loc.line > 0) {
                w = snprintf(c->err + k, c->errlen - k, "%s%s%s%d:%d", n->name ? " at " : "",
                             n->loc.file ? n->loc.file : "", n->loc.file ? ":" : "line ",
                             n->loc.line, n->loc.col);
                k += w > 0 ? (size_t)w : 0;
            }
            if (k < c->errlen) {
                w = snprintf(c->err + k, c->errlen - k, ")");
                k += w > 0 ? (size_t)w : 0;
            }
        }
        if (k < c->errlen) {
            w = snprintf(c->err + k, c->errlen - k, ": ");
            k += w > 0 ? (size_t)w : 0;
        }
    }
    if (k < c->errlen) vsnprintf(c->err + k, c->errlen - k, fmt, ap);
    return -1;
}

__attribute__((format(printf, 3, 4)))
static int fail(interp *c, const ir_node *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(c, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Concrete shape of type t at c->dims; an element count that overflows is
 * left to the caller ("too large"). who: what the message is about (node n
 * when NULL). */
static int eval_shape(interp *c, const ir_node *n, const char *who, const ir_type *t, int64_t *shape)
{
    const char *sep = who ? ": " : "";
    who = who ? who : "";
    if (t->rank < 0 || t->rank > IR_MAX_RANK) return fail(c, n, "%s%sinvalid rank %d", who, sep, t->rank);
    int bad;
    switch (ir_type_eval_shape(t, c->dims, shape, NULL, &bad)) {
    case IR_SHAPE_UNBOUND: return fail(c, n, "%s%sdimension %d does not evaluate (overflow)", who, sep, bad);
    case IR_SHAPE_NEGATIVE:
        return fail(c, n, "%s%sdimension %d is negative (%lld)", who, sep, bad, (long long)shape[bad]);
    case IR_SHAPE_OK:
    case IR_SHAPE_OVERFLOW: break;
    }
    return 0;
}

static int eval_dim(interp *c, const ir_node *n, const ir_dim *d, int64_t *v)
{
    if (!ir_dim_eval(d, c->dims, v)) return fail(c, n, "a dimension does not evaluate (overflow)");
    return 0;
}

/* Allocates the result of n (shape from its type), zeroed. */
static int alloc_result(interp *c, const ir_node *n, ir_tensor *out)
{
    int64_t shape[IR_MAX_RANK];
    if (eval_shape(c, n, NULL, &n->type, shape)) return -1;
    if ((int)n->type.dtype < 0 || n->type.dtype >= IR_DTYPE_COUNT)
        return fail(c, n, "invalid dtype %d", (int)n->type.dtype);
    int64_t numel = shape_numel(n->type.rank, shape);
    if (numel < 0 || numel > INTERP_MAX_BYTES / 4) {
        char ts[256];
        type_str(ts, sizeof ts, n->type.dtype, n->type.rank, shape);
        return fail(c, n, "%s is too large for the reference interpreter (limit %lld bytes)", ts,
                    (long long)INTERP_MAX_BYTES);
    }
    if (!ir_tensor_alloc(out, n->type.dtype, n->type.rank, shape))
        return fail(c, n, "out of memory");
    return 0;
}

static int shape_mismatch(interp *c, const ir_node *n, const char *what, const ir_tensor *t)
{
    char ts[256];
    type_str(ts, sizeof ts, t->dtype, t->rank, t->shape);
    return fail(c, n, "%s has shape %s, which does not fit the op", what, ts);
}

/* ---- elementwise ------------------------------------------------------------ */

/* Strides of `in` broadcast to out's shape (0 along stretched axes). */
static int bcast_strides(interp *c, const ir_node *n, const ir_tensor *in, const ir_tensor *out,
                         int64_t *st)
{
    int64_t ist[IR_MAX_RANK];
    row_major_strides(in->rank, in->shape, ist);
    if (in->rank > out->rank) return shape_mismatch(c, n, "an operand", in);
    int lead = out->rank - in->rank;
    for (int i = 0; i < out->rank; i++) {
        int j = i - lead;
        if (j < 0) st[i] = 0;
        else if (in->shape[j] == out->shape[i]) st[i] = in->shape[j] == 1 ? 0 : ist[j];
        else if (in->shape[j] == 1) st[i] = 0;
        else return shape_mismatch(c, n, "an operand", in);
    }
    return 0;
}

static double gelu(double x, bool tanh_form)
{
    if (tanh_form) {
        const double k = 0.79788456080286535588; /* sqrt(2/pi) */
        return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + erf(x / 1.41421356237309504880));
}

/* Float math, f64, unrounded; false for an op that has none. */
static bool eval_f(ir_op op, bool gelu_tanh, double a, double b, double *r)
{
    switch (op) {
    case IR_OP_NEG: *r = -a; return true;
    case IR_OP_EXP: *r = exp(a); return true;
    case IR_OP_LOG: *r = log(a); return true;
    case IR_OP_SQRT: *r = sqrt(a); return true;
    case IR_OP_RSQRT: *r = 1.0 / sqrt(a); return true;
    case IR_OP_TANH: *r = tanh(a); return true;
    case IR_OP_SIGMOID: *r = 1.0 / (1.0 + exp(-a)); return true;
    case IR_OP_SILU: *r = a / (1.0 + exp(-a)); return true;
    case IR_OP_GELU: *r = gelu(a, gelu_tanh); return true;
    case IR_OP_RELU: *r = isnan(a) ? a : a > 0 ? a : 0.0; return true;
    case IR_OP_CAST: *r = a; return true;
    case IR_OP_ADD: *r = a + b; return true;
    case IR_OP_SUB: *r = a - b; return true;
    case IR_OP_MUL: *r = a * b; return true;
    case IR_OP_DIV: *r = a / b; return true;
    case IR_OP_MAX: *r = isnan(a) || isnan(b) ? NAN : a > b ? a : b; return true;
    case IR_OP_MIN: *r = isnan(a) || isnan(b) ? NAN : a < b ? a : b; return true;
    case IR_OP_POW: *r = pow(a, b); return true;
    default: *r = NAN; return false;
    }
}

bool ir_eval_scalar(ir_op op, bool gelu_tanh, double a, double b, ir_dtype t, double *out)
{
    double r;
    bool ok = eval_f(op, gelu_tanh, a, b, &r);
    *out = t == IR_I32 ? (double)to_i32(r) : (double)ir_round_to(t, (float)r);
    if (!ok) *out = NAN;
    return ok;
}

/* One element of a float-math op into out[k]: f64 math, stored by put()
 * (f32 or i32); bf16/f16 rounding follows per tensor (round_tensor). */
static void eval_put(const ir_node *n, ir_tensor *out, int64_t k, double a, double b)
{
    double r;
    eval_f(n->op, n->attrs.gelu_tanh, a, b, &r);
    put(out, k, r);
}

static int run_unary(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    if (!ir_tensor_same_shape(x, out)) return shape_mismatch(c, n, "the operand", x);
    int64_t numel = ir_tensor_numel(out);
    if (n->op == IR_OP_NEG && x->dtype == IR_I32 && out->dtype == IR_I32) {
        for (int64_t k = 0; k < numel; k++) out->i[k] = (int32_t)(0u - (uint32_t)x->i[k]);
        return 0;
    }
    if (n->op == IR_OP_CAST && x->dtype == IR_I32 && out->dtype == IR_I32) {
        memcpy(out->i, x->i, (size_t)numel * sizeof(int32_t));
        return 0;
    }
    for (int64_t k = 0; k < numel; k++) {
        double v = get(x, k);
        /* Float math is f32: the operand is an f32 value already. */
        eval_put(n, out, k, v, 0);
    }
    return 0;
}

/* Integer ops wrap around like two's-complement i32; division truncates. */
const char *ir_eval_i32(ir_op op, int32_t a, int32_t b, int32_t *r)
{
    int64_t x = a, y = b, v;
    switch (op) {
    case IR_OP_ADD: v = x + y; break;
    case IR_OP_SUB: v = x - y; break;
    case IR_OP_MUL: v = x * y; break;
    case IR_OP_DIV:
        if (y == 0) return "integer division by zero";
        v = x / y;
        break;
    case IR_OP_MAX: v = x > y ? x : y; break;
    case IR_OP_MIN: v = x < y ? x : y; break;
    case IR_OP_POW: {
        if (y < 0) {
            if (x == 0) return "integer 0 raised to a negative power";
            v = x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
            break;
        }
        uint32_t acc = 1, base = (uint32_t)a;
        for (int64_t e = y; e > 0; e >>= 1) {
            if (e & 1) acc *= base;
            base *= base;
        }
        v = (int32_t)acc;
        break;
    }
    default: return "not a binary op";
    }
    *r = (int32_t)(uint32_t)(uint64_t)v;
    return NULL;
}

static int binary_i(interp *c, const ir_node *n, int32_t a, int32_t b, int32_t *r)
{
    const char *why = ir_eval_i32(n->op, a, b, r);
    return why ? fail(c, n, "%s", why) : 0;
}

static int run_binary(interp *c, const ir_node *n, const ir_tensor *a, const ir_tensor *b,
                      ir_tensor *out)
{
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    if (bcast_strides(c, n, a, out, sa) || bcast_strides(c, n, b, out, sb)) return -1;
    int64_t numel = ir_tensor_numel(out);
    bool ints = out->dtype == IR_I32 && a->dtype == IR_I32 && b->dtype == IR_I32;
    int64_t ia = 0, ib = 0;
    for (int64_t k = 0; k < numel; k++) {
        if (ints) {
            if (binary_i(c, n, a->i[ia], b->i[ib], &out->i[k])) return -1;
        } else {
            eval_put(n, out, k, get(a, ia), get(b, ib));
        }
        for (int r = out->rank - 1; r >= 0; r--) {
            ia += sa[r];
            ib += sb[r];
            if (++idx[r] < out->shape[r]) break;
            ia -= sa[r] * out->shape[r];
            ib -= sb[r] * out->shape[r];
            idx[r] = 0;
        }
    }
    return 0;
}

/* ---- reductions ------------------------------------------------------------- */

static int run_reduce(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    uint32_t axes = n->attrs.axes;
    if (x->rank < 32 && (axes >> x->rank) != 0)
        return fail(c, n, "reduction axes 0x%x out of range for rank %d", axes, x->rank);
    /* Expected result shape, and out strides for each input axis. */
    int64_t exp_shape[IR_MAX_RANK];
    int er = 0;
    for (int i = 0; i < x->rank; i++) {
        bool red = (axes >> i) & 1u;
        if (red && !n->attrs.keepdim) continue;
        exp_shape[er++] = red ? 1 : x->shape[i];
    }
    ir_tensor want = {.rank = er};
    memcpy(want.shape, exp_shape, sizeof exp_shape);
    if (!ir_tensor_same_shape(&want, out)) return shape_mismatch(c, n, "the operand", x);

    int64_t ost_all[IR_MAX_RANK], ost[IR_MAX_RANK], count = 1;
    row_major_strides(out->rank, out->shape, ost_all);
    for (int i = 0, j = 0; i < x->rank; i++) {
        bool red = (axes >> i) & 1u;
        if (red) count *= x->shape[i];
        if (red && !n->attrs.keepdim) {
            ost[i] = 0;
            continue;
        }
        ost[i] = red ? 0 : ost_all[j];
        j++;
    }
    int64_t on = ir_tensor_numel(out), xn = ir_tensor_numel(x);
    double *acc = malloc((size_t)(on > 0 ? on : 1) * sizeof(double));
    if (!acc) return fail(c, n, "out of memory");
    for (int64_t k = 0; k < on; k++) acc[k] = n->op == IR_OP_REDUCE_MAX ? -INFINITY : 0.0;
    int64_t idx[IR_MAX_RANK] = {0}, o = 0;
    for (int64_t k = 0; k < xn; k++) {
        double v = get(x, k);
        if (n->op == IR_OP_REDUCE_MAX) {
            if (isnan(v) || v > acc[o] || isnan(acc[o])) acc[o] = isnan(acc[o]) ? acc[o] : v;
        } else {
            acc[o] += v;
        }
        for (int r = x->rank - 1; r >= 0; r--) {
            o += ost[r];
            if (++idx[r] < x->shape[r]) break;
            o -= ost[r] * x->shape[r];
            idx[r] = 0;
        }
    }
    for (int64_t k = 0; k < on; k++)
        put(out, k, n->op == IR_OP_MEAN ? acc[k] / (double)count : acc[k]);
    free(acc);
    return 0;
}

/* Split x's shape around `axis` into outer * len * inner. */
static void split_axis(const ir_tensor *x, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= x->shape[i];
    for (int i = axis + 1; i < x->rank; i++) *inner *= x->shape[i];
    *len = x->shape[axis];
}

static int run_softmax(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    int axis = n->attrs.axis;
    if (axis < 0 || axis >= x->rank) return fail(c, n, "axis %d out of range", axis);
    if (!ir_tensor_same_shape(x, out)) return shape_mismatch(c, n, "the operand", x);
    int64_t outer, len, inner;
    split_axis(x, axis, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double m = -INFINITY;
            for (int64_t j = 0; j < len; j++) {
                double v = get(x, base + j * inner);
                if (v > m || isnan(v)) m = v;
            }
            double s = 0;
            for (int64_t j = 0; j < len; j++) s += exp(get(x, base + j * inner) - m);
            for (int64_t j = 0; j < len; j++)
                put(out, base + j * inner, exp(get(x, base + j * inner) - m) / s);
        }
    return 0;
}

static int run_norm(interp *c, const ir_node *n, const ir_tensor *x, const ir_tensor *w,
                    const ir_tensor *b, ir_tensor *out)
{
    if (x->rank < 1 || !ir_tensor_same_shape(x, out)) return shape_mismatch(c, n, "the input", x);
    int64_t d = x->shape[x->rank - 1];
    if (w && (w->rank != 1 || w->shape[0] != d)) return shape_mismatch(c, n, "the weight", w);
    if (b && (b->rank != 1 || b->shape[0] != d)) return shape_mismatch(c, n, "the bias", b);
    int64_t rows = d ? ir_tensor_numel(x) / d : 0;
    double eps = n->attrs.eps;
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = r * d;
        if (n->op == IR_OP_RMSNORM) {
            double ss = 0;
            for (int64_t j = 0; j < d; j++) {
                double v = get(x, base + j);
                ss += v * v;
            }
            double inv = 1.0 / sqrt(ss / (double)d + eps);
            for (int64_t j = 0; j < d; j++) put(out, base + j, get(x, base + j) * inv * (w ? get(w, j) : 1.0));
        } else {
            double mean = 0, var = 0;
            for (int64_t j = 0; j < d; j++) mean += get(x, base + j);
            mean /= (double)d;
            for (int64_t j = 0; j < d; j++) {
                double v = get(x, base + j) - mean;
                var += v * v;
            }
            var /= (double)d;
            double inv = 1.0 / sqrt(var + eps);
            for (int64_t j = 0; j < d; j++) {
                double v = (get(x, base + j) - mean) * inv * (w ? get(w, j) : 1.0);
                if (b) v += get(b, j);
                put(out, base + j, v);
            }
        }
    }
    return 0;
}

/* ---- matrix products ---------------------------------------------------------- */

static int run_matmul(interp *c, const ir_node *n, const ir_tensor *a, const ir_tensor *b,
                      ir_tensor *out)
{
    if (a->rank < 2) return shape_mismatch(c, n, "the left operand", a);
    if (b->rank < 2) return shape_mismatch(c, n, "the right operand", b);
    int ro = out->rank;
    int64_t M = a->shape[a->rank - 2], K = a->shape[a->rank - 1];
    int64_t N = b->shape[b->rank - 1];
    if (b->shape[b->rank - 2] != K) return shape_mismatch(c, n, "the right operand", b);
    int rmax = a->rank > b->rank ? a->rank : b->rank;
    if (ro != rmax || out->shape[ro - 2] != M || out->shape[ro - 1] != N)
        return shape_mismatch(c, n, "the left operand", a);
    /* Batch strides (in units of whole matrices), broadcast to out's batch. */
    int nb = ro - 2;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    const ir_tensor *ops[2] = {a, b};
    int64_t *sts[2] = {sa, sb};
    for (int t = 0; t < 2; t++) {
        const ir_tensor *x = ops[t];
        int xb = x->rank - 2, lead = nb - xb;
        int64_t s = x->shape[x->rank - 2] * x->shape[x->rank - 1];
        for (int i = nb - 1; i >= 0; i--) {
            int j = i - lead;
            if (j < 0) sts[t][i] = 0;
            else if (x->shape[j] == out->shape[i]) sts[t][i] = x->shape[j] == 1 ? 0 : s;
            else if (x->shape[j] == 1) sts[t][i] = 0;
            else return shape_mismatch(c, n, t ? "the right operand" : "the left operand", x);
            if (j >= 0) s *= x->shape[j];
        }
    }
    int64_t batches = 1;
    for (int i = 0; i < nb; i++) batches *= out->shape[i];
    /* one output row at a time, accumulated over k in order, in double */
    double *acc = malloc((size_t)(N > 0 ? N : 1) * sizeof(double));
    if (!acc) return fail(c, n, "out of memory");
    int64_t idx[IR_MAX_RANK] = {0}, oa = 0, ob = 0;
    for (int64_t bt = 0; bt < batches; bt++) {
        int64_t oo = bt * M * N;
        for (int64_t m = 0; m < M; m++) {
            for (int64_t j = 0; j < N; j++) acc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                double av = get(a, oa + m * K + k);
                int64_t br = ob + k * N;
                if (b->dtype != IR_I32)
                    for (int64_t j = 0; j < N; j++) acc[j] += av * (double)b->f[br + j];
                else
                    for (int64_t j = 0; j < N; j++) acc[j] += av * get(b, br + j);
            }
            for (int64_t j = 0; j < N; j++) put(out, oo + m * N + j, acc[j]);
        }
        for (int r = nb - 1; r >= 0; r--) {
            oa += sa[r];
            ob += sb[r];
            if (++idx[r] < out->shape[r]) break;
            oa -= sa[r] * out->shape[r];
            ob -= sb[r] * out->shape[r];
            idx[r] = 0;
        }
    }
    free(acc);
    return 0;
}

/* sum x[k] w[k] in double; four partial sums keep the adds independent. */
static double dot_f32(const float *x, const float *w, int64_t K)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        s0 += (double)x[k] * w[k];
        s1 += (double)x[k + 1] * w[k + 1];
        s2 += (double)x[k + 2] * w[k + 2];
        s3 += (double)x[k + 3] * w[k + 3];
    }
    for (; k < K; k++) s0 += (double)x[k] * w[k];
    return (s0 + s1) + (s2 + s3);
}

static int run_linear(interp *c, const ir_node *n, const ir_tensor *x, const ir_tensor *w,
                      const ir_tensor *b, ir_tensor *out)
{
    if (x->rank < 1) return shape_mismatch(c, n, "the input", x);
    int64_t K = x->shape[x->rank - 1];
    if (w->rank != 2 || w->shape[1] != K) return shape_mismatch(c, n, "the weight", w);
    int64_t N = w->shape[0];
    if (b && (b->rank != 1 || b->shape[0] != N)) return shape_mismatch(c, n, "the bias", b);
    if (out->rank != x->rank || out->shape[out->rank - 1] != N)
        return shape_mismatch(c, n, "the input", x);
    for (int i = 0; i < x->rank - 1; i++)
        if (out->shape[i] != x->shape[i]) return shape_mismatch(c, n, "the input", x);
    int64_t rows = ir_tensor_numel(out) / (N ? N : 1);
    if (N == 0) rows = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            if (x->dtype != IR_I32 && w->dtype != IR_I32)
                acc = dot_f32(x->f + r * K, w->f + j * K, K);
            else
                for (int64_t k = 0; k < K; k++) acc += get(x, r * K + k) * get(w, j * K + k);
            if (b) acc += get(b, j);
            put(out, r * N + j, acc);
        }
    return 0;
}

/* ---- data movement -------------------------------------------------------------- */

static int run_reshape(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    int64_t numel = ir_tensor_numel(out);
    if (ir_tensor_numel(x) != numel) return shape_mismatch(c, n, "the input", x);
    for (int64_t k = 0; k < numel; k++) copy_elem(out, k, x, k);
    return 0;
}

static int run_permute(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    if (out->rank != x->rank) return shape_mismatch(c, n, "the input", x);
    int64_t xst[IR_MAX_RANK], st[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    bool seen[IR_MAX_RANK] = {false};
    row_major_strides(x->rank, x->shape, xst);
    for (int i = 0; i < out->rank; i++) {
        int p = n->attrs.perm[i];
        if (p < 0 || p >= x->rank || seen[p]) return fail(c, n, "invalid permutation");
        seen[p] = true;
        if (out->shape[i] != x->shape[p]) return shape_mismatch(c, n, "the input", x);
        st[i] = xst[p];
    }
    int64_t numel = ir_tensor_numel(out), xi = 0;
    for (int64_t k = 0; k < numel; k++) {
        copy_elem(out, k, x, xi);
        for (int r = out->rank - 1; r >= 0; r--) {
            xi += st[r];
            if (++idx[r] < out->shape[r]) break;
            xi -= st[r] * out->shape[r];
            idx[r] = 0;
        }
    }
    return 0;
}

static int check_packed(interp *c, const ir_node *n, const ir_tensor *x, int64_t nseq);

/* The symbol a dim is (S of a packed value's axis 1), else -1. */
static int dim_sym(const ir_dim *d)
{
    if (d->nterms != 1 || d->t[0].coef != 1) return -1;
    int sym = -1;
    for (int i = 0; i < IR_MAX_SYMS; i++) {
        if (!d->t[0].exp[i]) continue;
        if (sym >= 0 || d->t[0].exp[i] != 1) return -1;
        sym = i;
    }
    return sym;
}

/* slice packed: row q of the result is tokens [start, end) of sequence q,
 * start and end evaluated with the tokens' symbol S bound to its length. */
static int run_slice_packed(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    if (x->rank < 2 || out->rank != x->rank || x->shape[0] != 1 || n->attrs.axis != 1)
        return shape_mismatch(c, n, "the input", x);
    if (check_packed(c, n, x, out->shape[0])) return -1;
    int sym = dim_sym(&n->inputs[0]->type.dims[1]);
    if (sym < 0 || sym >= c->g->nsyms) return fail(c, n, "a packed slice's input has no symbol along its tokens");
    int64_t local[IR_MAX_SYMS] = {0}, inner = 1;
    memcpy(local, c->dims, (size_t)c->g->nsyms * sizeof *local);
    for (int i = 2; i < x->rank; i++) inner *= x->shape[i];
    for (int q = 0; q < c->nseq; q++) {
        int64_t len = c->cu[q + 1] - c->cu[q], start, end;
        local[sym] = len;
        if (!ir_dim_eval(&n->attrs.start, local, &start) || !ir_dim_eval(&n->attrs.end, local, &end))
            return fail(c, n, "a dimension does not evaluate (overflow)");
        if (start < 0 || end > len || end - start != out->shape[1])
            return fail(c, n, "sequence %d: slice [%lld, %lld) out of range for its %lld tokens", q, (long long)start,
                        (long long)end, (long long)len);
        for (int64_t j = 0; j < (end - start) * inner; j++)
            copy_elem(out, q * out->shape[1] * inner + j, x, (c->cu[q] + start) * inner + j);
    }
    return 0;
}

static int run_slice(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    if (n->attrs.packed) return run_slice_packed(c, n, x, out);
    int axis = n->attrs.axis;
    if (axis < 0 || axis >= x->rank) return fail(c, n, "axis %d out of range", axis);
    int64_t start, end;
    if (eval_dim(c, n, &n->attrs.start, &start) || eval_dim(c, n, &n->attrs.end, &end)) return -1;
    if (start < 0 || end < start || end > x->shape[axis])
        return fail(c, n, "slice [%lld, %lld) out of range for axis %d of size %lld",
                    (long long)start, (long long)end, axis, (long long)x->shape[axis]);
    if (out->rank != x->rank) return shape_mismatch(c, n, "the input", x);
    for (int i = 0; i < x->rank; i++)
        if (out->shape[i] != (i == axis ? end - start : x->shape[i]))
            return shape_mismatch(c, n, "the input", x);
    int64_t outer, len, inner;
    split_axis(x, axis, &outer, &len, &inner);
    int64_t olen = end - start;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < olen * inner; j++)
            copy_elem(out, (o * olen) * inner + j, x, (o * len + start) * inner + j);
    return 0;
}

static int run_concat(interp *c, const ir_node *n, const ir_tensor *const *xs, ir_tensor *out)
{
    int axis = n->attrs.axis;
    if (axis < 0 || axis >= out->rank) return fail(c, n, "axis %d out of range", axis);
    int64_t total = 0;
    for (int t = 0; t < n->ninputs; t++) {
        const ir_tensor *x = xs[t];
        if (x->rank != out->rank) return shape_mismatch(c, n, "an operand", x);
        for (int i = 0; i < x->rank; i++)
            if (i != axis && x->shape[i] != out->shape[i])
                return shape_mismatch(c, n, "an operand", x);
        total += x->shape[axis];
    }
    if (total != out->shape[axis]) return fail(c, n, "operand sizes do not add up to the result");
    int64_t outer, olen, inner;
    split_axis(out, axis, &outer, &olen, &inner);
    int64_t off = 0;
    for (int t = 0; t < n->ninputs; t++) {
        const ir_tensor *x = xs[t];
        int64_t len = x->shape[axis];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < len * inner; j++)
                copy_elem(out, (o * olen + off) * inner + j, x, o * len * inner + j);
        off += len;
    }
    return 0;
}

static void index_str(char *buf, size_t n, int rank, const int64_t *shape, int64_t k)
{
    int64_t idx[IR_MAX_RANK];
    for (int i = rank - 1; i >= 0; i--) {
        idx[i] = shape[i] ? k % shape[i] : 0;
        k = shape[i] ? k / shape[i] : 0;
    }
    type_str(buf, n, IR_I32, rank, idx);
    /* type_str prefixes the dtype name; drop it ("i32[1, 2]" -> "[1, 2]"). */
    char *br = strchr(buf, '[');
    if (br) memmove(buf, br, strlen(br) + 1);
}

static int run_embedding(interp *c, const ir_node *n, const ir_tensor *t, const ir_tensor *ids,
                         ir_tensor *out)
{
    if (t->rank != 2) return shape_mismatch(c, n, "the table", t);
    if (ids->dtype != IR_I32) return fail(c, n, "ids must be i32");
    int64_t V = t->shape[0], D = t->shape[1];
    if (out->rank != ids->rank + 1 || out->shape[out->rank - 1] != D)
        return shape_mismatch(c, n, "the ids", ids);
    for (int i = 0; i < ids->rank; i++)
        if (out->shape[i] != ids->shape[i]) return shape_mismatch(c, n, "the ids", ids);
    int64_t nid = ir_tensor_numel(ids);
    for (int64_t k = 0; k < nid; k++) {
        int64_t id = ids->i[k];
        if (id < 0 || id >= V) {
            char is[160];
            index_str(is, sizeof is, ids->rank, ids->shape, k);
            return fail(c, n, "id %lld at index %s is out of range [0, %lld)", (long long)id, is,
                        (long long)V);
        }
        for (int64_t j = 0; j < D; j++) copy_elem(out, k * D + j, t, id * D + j);
    }
    return 0;
}

/* The k largest of each row along the last axis (ties: lower index first),
 * by rank counting so the order is exact; values or their indices. */
static int run_topk(interp *c, const ir_node *n, const ir_tensor *x, ir_tensor *out)
{
    if (x->rank < 1 || out->rank != x->rank) return shape_mismatch(c, n, "x", x);
    int64_t E = x->shape[x->rank - 1], k = n->attrs.topk;
    if (k < 1 || k > E || out->shape[out->rank - 1] != k) return shape_mismatch(c, n, "x", x);
    int64_t rows = E ? ir_tensor_numel(x) / E : 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < E; i++) {
            double xi = get(x, r * E + i);
            int64_t rank = 0;
            for (int64_t j = 0; j < E; j++) {
                double xj = get(x, r * E + j);
                rank += xj > xi || (xj == xi && j < i);
            }
            if (rank >= k) continue;
            if (n->attrs.indices) out->i[r * k + rank] = (int32_t)i;
            else put(out, r * k + rank, xi);
        }
    return 0;
}

/* out[..., j, :] = w[idx[..., j]] @ x_j (x_j: the row shared by the slots,
 * or the slot's own row); f64 accumulation. */
static int run_expert_linear(interp *c, const ir_node *n, const ir_tensor *x, const ir_tensor *w,
                             const ir_tensor *idx, ir_tensor *out)
{
    if (w->rank != 3) return shape_mismatch(c, n, "w", w);
    int64_t E = w->shape[0], N = w->shape[1], K = w->shape[2];
    if (idx->dtype != IR_I32 || idx->rank < 1) return fail(c, n, "idx must be i32");
    int64_t k = idx->shape[idx->rank - 1], nidx = ir_tensor_numel(idx);
    bool per_slot = x->rank == idx->rank + 1;
    if (x->shape[x->rank - 1] != K || (!per_slot && x->rank != idx->rank)) return shape_mismatch(c, n, "x", x);
    if (out->rank != idx->rank + 1 || out->shape[out->rank - 1] != N) return shape_mismatch(c, n, "idx", idx);
    for (int64_t t = 0; t < nidx; t++) {
        int64_t e = idx->i[t];
        if (e < 0 || e >= E) {
            char is[160];
            index_str(is, sizeof is, idx->rank, idx->shape, t);
            return fail(c, n, "expert %lld at index %s is out of range [0, %lld)", (long long)e, is, (long long)E);
        }
        int64_t xb = (per_slot ? t : t / k) * K;
        for (int64_t o = 0; o < N; o++) {
            double acc = 0;
            int64_t wb = (e * N + o) * K;
            for (int64_t q = 0; q < K; q++) acc += get(x, xb + q) * get(w, wb + q);
            put(out, t * N + o, acc);
        }
    }
    return 0;
}

static int check_pos(interp *c, const ir_node *n, const ir_tensor *pos, int64_t B)
{
    if (!pos) return 0;
    if (pos->dtype != IR_I32) return fail(c, n, "positions must be i32");
    if (pos->rank != 1 || pos->shape[0] != B) return shape_mismatch(c, n, "pos", pos);
    return 0;
}

/* A packed op's operands against the run's table: x [1, cu[nseq], ...] and
 * nseq sequences. */
static int check_packed(interp *c, const ir_node *n, const ir_tensor *x, int64_t nseq)
{
    if (!c->cu) return fail(c, n, "a packed op outside a packed run (ir_interp_run_packed)");
    if (x->rank < 2 || x->shape[0] != 1) return shape_mismatch(c, n, "the packed tokens", x);
    if (nseq != c->nseq)
        return fail(c, n, "%lld sequences, but the packed run's table has %d", (long long)nseq, c->nseq);
    if (x->shape[1] != c->cu[c->nseq])
        return fail(c, n, "the sequences hold %d tokens but the packed tokens are %lld", (int)c->cu[c->nseq],
                    (long long)x->shape[1]);
    return 0;
}

static int run_rope(interp *c, const ir_node *n, const ir_tensor *x, const ir_tensor *pos,
                    ir_tensor *out)
{
    if (x->rank != 4 || !ir_tensor_same_shape(x, out)) return shape_mismatch(c, n, "the input", x);
    int64_t B = x->shape[0], S = x->shape[1], NH = x->shape[2], HD = x->shape[3];
    int64_t R = ir_rope_dims(&n->attrs.rope, HD); /* partial rotary: the first R rotate, the rest pass */
    if (R % 2 || R > HD) return fail(c, n, "rotary dims %lld of a head of %lld", (long long)R, (long long)HD);
    if (n->attrs.packed ? check_packed(c, n, x, pos ? pos->shape[0] : c->nseq) || check_pos(c, n, pos, c->nseq)
                        : check_pos(c, n, pos, B))
        return -1;
    int64_t half = R / 2;
    /* cos/sin of p * f_i for one position, shared by all heads; f_i from
     * the table every kernel uses too, cos and sin times YaRN's mscale */
    double *cs = malloc((size_t)(half > 0 ? 3 * half : 1) * sizeof(double));
    if (!cs) return fail(c, n, "out of memory");
    double *sn = cs + half, *inv = cs + 2 * half;
    ir_rope_inv_freq(n->attrs.theta, &n->attrs.rope, R, inv);
    double m = ir_rope_mscale(&n->attrs.rope);
    int q = 0; /* a packed run: the sequence of token s */
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            while (n->attrs.packed && s >= c->cu[q + 1]) q++;
            double p = n->attrs.packed ? (double)((pos ? (int64_t)pos->i[q] : 0) + s - c->cu[q])
                                       : (double)((pos ? (int64_t)pos->i[b] : 0) + s);
            for (int64_t i = 0; i < half; i++) {
                cs[i] = cos(p * inv[i]) * m;
                sn[i] = sin(p * inv[i]) * m;
            }
            for (int64_t h = 0; h < NH; h++) {
                int64_t base = ((b * S + s) * NH + h) * HD;
                for (int64_t i = 0; i < half; i++) {
                    double x1 = get(x, base + i), x2 = get(x, base + i + half);
                    put(out, base + i, x1 * cs[i] - x2 * sn[i]);
                    put(out, base + i + half, x2 * cs[i] + x1 * sn[i]);
                }
                for (int64_t i = R; i < HD; i++) put(out, base + i, get(x, base + i));
            }
        }
    free(cs);
    return 0;
}

/* o for batch b (pos[b], or `dflt` without pos), checked against o + S <= T. */
static int batch_offset(interp *c, const ir_node *n, const ir_tensor *pos, int64_t b, int64_t S,
                        int64_t T, int64_t dflt, int64_t *o)
{
    *o = pos ? (int64_t)pos->i[b] : dflt;
    if (!pos && S > T)
        return fail(c, n, "%lld new tokens exceed the cache length %lld", (long long)S,
                    (long long)T);
    if (*o < 0)
        return fail(c, n, "%s %lld: position %lld is negative", n->attrs.packed ? "sequence" : "batch", (long long)b,
                    (long long)*o);
    if (*o + S > T)
        return fail(c, n,
                    "%s %lld: position %lld + %lld new tokens exceeds the cache length %lld",
                    n->attrs.packed ? "sequence" : "batch", (long long)b, (long long)*o, (long long)S, (long long)T);
    return 0;
}

/* The sequences of a run of attention or cache_write: b < *nb, each of len(b)
 * tokens from row row0(b) of the [.., S, ..] operand; packed: the table's. */
static int64_t seq_count(const interp *c, const ir_node *n, int64_t B) { return n->attrs.packed ? c->nseq : B; }
static int64_t seq_len(const interp *c, const ir_node *n, int64_t b, int64_t S)
{
    return n->attrs.packed ? c->cu[b + 1] - c->cu[b] : S;
}
static int64_t seq_row0(const interp *c, const ir_node *n, int64_t b, int64_t S)
{
    return n->attrs.packed ? c->cu[b] : b * S;
}

static int run_attention(interp *c, const ir_node *n, const ir_tensor *q, const ir_tensor *k,
                         const ir_tensor *v, const ir_tensor *pos, ir_tensor *out)
{
    if (q->rank != 4) return shape_mismatch(c, n, "q", q);
    if (k->rank != 4) return shape_mismatch(c, n, "k", k);
    if (v->rank != 4 || v->shape[0] != k->shape[0] || v->shape[1] != k->shape[1] ||
        v->shape[2] != k->shape[2])
        return shape_mismatch(c, n, "v", v);
    int64_t B = q->shape[0], S = q->shape[1], H = q->shape[2], HD = q->shape[3];
    int64_t KV = k->shape[1], T = k->shape[2], VD = v->shape[3];
    if (n->attrs.packed) {
        if (check_packed(c, n, q, k->shape[0])) return -1;
    } else if (k->shape[0] != B)
        return shape_mismatch(c, n, "k", k);
    if (k->shape[3] != HD) return shape_mismatch(c, n, "k", k);
    if (KV == 0 || H % KV) return fail(c, n, "%lld query heads do not divide into %lld KV heads",
                                       (long long)H, (long long)KV);
    if (out->rank != 4 || out->shape[0] != B || out->shape[1] != S || out->shape[2] != H ||
        out->shape[3] != VD)
        return shape_mismatch(c, n, "q", q);
    if (check_pos(c, n, pos, k->shape[0])) return -1;
    int64_t group = H / KV;
    double scale = n->attrs.scale > 0 ? n->attrs.scale : 1.0 / sqrt((double)HD);
    double *p = malloc((size_t)(T > 0 ? T : 1) * sizeof(double));
    double *acc = malloc((size_t)(VD > 0 ? VD : 1) * sizeof(double));
    if (!p || !acc) {
        free(p);
        free(acc);
        return fail(c, n, "out of memory");
    }
    int rc = 0;
    for (int64_t b = 0; b < seq_count(c, n, B) && !rc; b++) {
        int64_t o, L = seq_len(c, n, b, S), r0 = seq_row0(c, n, b, S);
        if (batch_offset(c, n, pos, b, L, T, T - L, &o)) {
            rc = -1;
            break;
        }
        for (int64_t s = 0; s < L; s++)
            for (int64_t h = 0; h < H; h++) {
                int64_t kh = h / group;
                int64_t qb = ((r0 + s) * H + h) * HD;
                int64_t nk = n->attrs.causal ? o + s + 1 : o + L;
                /* a sliding window keeps the keys less than W behind the query */
                int64_t j0 = n->attrs.window > 0 && o + s - n->attrs.window + 1 > 0 ? o + s - n->attrs.window + 1 : 0;
                double m = -INFINITY, cap = n->attrs.softcap;
                for (int64_t j = j0; j < nk; j++) {
                    int64_t kb = ((b * KV + kh) * T + j) * HD;
                    double dot = 0;
                    for (int64_t d = 0; d < HD; d++) dot += get(q, qb + d) * get(k, kb + d);
                    p[j] = dot * scale;
                    if (cap > 0) p[j] = cap * tanh(p[j] / cap); /* logit soft-capping */
                    if (p[j] > m) m = p[j];
                }
                double sum = 0;
                for (int64_t j = j0; j < nk; j++) {
                    p[j] = exp(p[j] - m);
                    sum += p[j];
                }
                for (int64_t d = 0; d < VD; d++) acc[d] = 0;
                for (int64_t j = j0; j < nk; j++) {
                    int64_t vb = ((b * KV + kh) * T + j) * VD;
                    for (int64_t d = 0; d < VD; d++) acc[d] += p[j] * get(v, vb + d);
                }
                int64_t ob = ((r0 + s) * H + h) * VD;
                for (int64_t d = 0; d < VD; d++) put(out, ob + d, acc[d] / sum);
            }
    }
    free(p);
    free(acc);
    return rc;
}
static int run_cache_write(interp *c, const ir_node *n, const ir_tensor *cache, const ir_tensor *x,
                           const ir_tensor *pos, ir_tensor *out)
{
    if (cache->rank != 4 || !ir_tensor_same_shape(cache, out)) return shape_mismatch(c, n, "the cache", cache);
    int64_t B = cache->shape[0], KV = cache->shape[1], T = cache->shape[2], HD = cache->shape[3];
    if (x->rank != 4 || (!n->attrs.packed && x->shape[0] != B) || x->shape[2] != KV || x->shape[3] != HD)
        return shape_mismatch(c, n, "the new rows", x);
    if (n->attrs.packed && check_packed(c, n, x, B)) return -1;
    int64_t S = x->shape[1];
    if (check_pos(c, n, pos, B)) return -1;
    int64_t numel = ir_tensor_numel(out);
    for (int64_t k = 0; k < numel; k++) copy_elem(out, k, cache, k);
    for (int64_t b = 0; b < B; b++) {
        int64_t o, L = seq_len(c, n, b, S), r0 = seq_row0(c, n, b, S);
        if (batch_offset(c, n, pos, b, L, T, 0, &o)) return -1;
        for (int64_t s = 0; s < L; s++)
            for (int64_t h = 0; h < KV; h++)
                for (int64_t d = 0; d < HD; d++)
                    copy_elem(out, ((b * KV + h) * T + o + s) * HD + d, x, ((r0 + s) * KV + h) * HD + d);
    }
    return 0;
}

/* ---- sources ------------------------------------------------------------------- */

static int run_source(interp *c, const ir_node *n, ir_tensor *out)
{
    if (n->op == IR_OP_CONST) {
        int64_t numel = ir_tensor_numel(out);
        for (int64_t k = 0; k < numel; k++) put(out, k, n->attrs.value);
        return 0;
    }
    /* CAUSAL_MASK */
    if (out->rank != 2) return fail(c, n, "a causal mask must have rank 2");
    int64_t sq = out->shape[0], sk = out->shape[1];
    for (int64_t i = 0; i < sq; i++)
        for (int64_t j = 0; j < sk; j++) put(out, i * sk + j, j <= i + (sk - sq) ? 0.0 : -INFINITY);
    return 0;
}

/* ---- one node ------------------------------------------------------------------- */

static int eval_node(interp *c, const ir_node *n, const ir_tensor *const *in, ir_tensor *out)
{
    int ni = n->ninputs;
    /* elementwise ops, by arity (the op table); their math is eval_f's */
    if (ir_op_class(n->op) == IR_CLASS_ELEMENTWISE)
        return ir_op_max_inputs(n->op) == 2 ? run_binary(c, n, in[0], in[1], out) : run_unary(c, n, in[0], out);
    switch (n->op) {
    case IR_OP_CONST:
    case IR_OP_CAUSAL_MASK: return run_source(c, n, out);
    case IR_OP_SUM:
    case IR_OP_MEAN:
    case IR_OP_REDUCE_MAX: return run_reduce(c, n, in[0], out);
    case IR_OP_SOFTMAX: return run_softmax(c, n, in[0], out);
    case IR_OP_RMSNORM: return run_norm(c, n, in[0], ni > 1 ? in[1] : NULL, NULL, out);
    case IR_OP_LAYERNORM: return run_norm(c, n, in[0], ni > 1 ? in[1] : NULL, ni > 2 ? in[2] : NULL, out);
    case IR_OP_MATMUL: return run_matmul(c, n, in[0], in[1], out);
    case IR_OP_LINEAR: return run_linear(c, n, in[0], in[1], ni > 2 ? in[2] : NULL, out);
    case IR_OP_RESHAPE: return run_reshape(c, n, in[0], out);
    case IR_OP_PERMUTE: return run_permute(c, n, in[0], out);
    case IR_OP_SLICE: return run_slice(c, n, in[0], out);
    case IR_OP_CONCAT: return run_concat(c, n, in, out);
    case IR_OP_EMBEDDING: return run_embedding(c, n, in[0], in[1], out);
    case IR_OP_ROPE: return run_rope(c, n, in[0], ni > 1 ? in[1] : NULL, out);
    case IR_OP_ATTENTION:
        return run_attention(c, n, in[0], in[1], in[2], ni > 3 ? in[3] : NULL, out);
    case IR_OP_CACHE_WRITE: return run_cache_write(c, n, in[0], in[1], ni > 2 ? in[2] : NULL, out);
    case IR_OP_TOPK: return run_topk(c, n, in[0], out);
    case IR_OP_EXPERT_LINEAR: return run_expert_linear(c, n, in[0], in[1], in[2], out);
    default: break; /* parameters are bound, never evaluated */
    }
    return fail(c, n, "the interpreter does not handle this op");
}

static bool is_param_op(ir_op op)
{
    return op == IR_OP_INPUT || op == IR_OP_WEIGHT || op == IR_OP_STATE;
}

/* Checks the caller's tensors against the declared parameter types. */
static int check_params(interp *c, ir_tensor *params)
{
    const ir_graph *g = c->g;
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *p = g->params[i];
        const char *kind = ir_op_name(p->op), *name = p->name ? p->name : "?";
        int64_t shape[IR_MAX_RANK];
        char who[160];
        snprintf(who, sizeof who, "%s '%s'", kind, name);
        if (eval_shape(c, NULL, who, &p->type, shape)) return -1;
        const ir_tensor *t = &params[i];
        bool ok = t->dtype == p->type.dtype && t->rank == p->type.rank;
        for (int d = 0; ok && d < t->rank; d++) ok = t->shape[d] == shape[d];
        if (!ok) {
            char want[256], got[256];
            type_str(want, sizeof want, p->type.dtype, p->type.rank, shape);
            if (t->rank < 0 || t->rank > IR_MAX_RANK) snprintf(got, sizeof got, "rank %d", t->rank);
            else type_str(got, sizeof got, t->dtype, t->rank, t->shape);
            return fail(c, NULL, "%s '%s': expected %s, got %s", kind, name, want, got);
        }
        if (ir_tensor_numel(t) > 0 && (t->dtype == IR_I32 ? (void *)t->i : (void *)t->f) == NULL)
            return fail(c, NULL, "%s '%s': no data", kind, name);
    }
    return 0;
}

static void release(interp *c, int id)
{
    if (c->owned[id]) ir_tensor_free(&c->vals[id]);
    c->owned[id] = false;
    memset(&c->vals[id], 0, sizeof c->vals[id]);
}

static int run_graph(interp *c, ir_tensor *params, ir_tensor *outputs, ir_tensor *newstate)
{
    const ir_graph *g = c->g;
    if (check_params(c, params)) return -1;
    const ir_tensor *in_stack[8];
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = g->nodes[k];
        if (!n || n->id != k) return fail(c, NULL, "node %d has a bad id", k);
        if (n->ninputs < ir_op_min_inputs(n->op) ||
            (ir_op_max_inputs(n->op) >= 0 && n->ninputs > ir_op_max_inputs(n->op)))
            return fail(c, n, "wrong number of inputs (%d)", n->ninputs);
        for (int i = 0; i < n->ninputs; i++) {
            const ir_node *x = n->inputs[i];
            if (!x || x->id < 0 || x->id >= k || g->nodes[x->id] != x)
                return fail(c, n, "input %d is not an earlier node", i);
        }
        if (is_param_op(n->op)) {
            if (n->param < 0 || n->param >= g->nparams || g->params[n->param] != n)
                return fail(c, n, "not a parameter of the graph");
            c->vals[k] = params[n->param];
            c->owned[k] = false;
            /* A bf16/f16 parameter holding values that are not of its dtype
             * is read through a rounded copy, so it behaves like storage. */
            if (!is_rounded(&c->vals[k])) {
                ir_tensor r;
                if (!ir_tensor_alloc(&r, c->vals[k].dtype, c->vals[k].rank, c->vals[k].shape))
                    return fail(c, n, "out of memory");
                memcpy(r.f, c->vals[k].f, (size_t)ir_tensor_numel(&r) * sizeof(float));
                round_tensor(&r);
                c->vals[k] = r;
                c->owned[k] = true;
            }
        } else {
            const ir_tensor **in = in_stack;
            if (n->ninputs > 8) {
                in = malloc((size_t)n->ninputs * sizeof *in);
                if (!in) return fail(c, n, "out of memory");
            }
            for (int i = 0; i < n->ninputs; i++) in[i] = &c->vals[n->inputs[i]->id];
            int rc = alloc_result(c, n, &c->vals[k]);
            if (!rc) {
                c->owned[k] = true;
                rc = eval_node(c, n, in, &c->vals[k]);
                if (!rc) round_tensor(&c->vals[k]);
            }
            if (in != in_stack) free(in);
            if (rc) return -1;
        }
        for (int i = 0; i < n->ninputs; i++) {
            int id = n->inputs[i]->id;
            if (--c->uses[id] == 0) release(c, id);
        }
        if (c->uses[k] == 0) release(c, k); /* dead: computed for its errors only */
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ir_node *v = g->outputs[i].value;
        if (!v || v->id < 0 || v->id >= g->nnodes || g->nodes[v->id] != v)
            return fail(c, NULL, "output %d is not a node of the graph", i);
        const ir_tensor *t = &c->vals[v->id];
        if (!ir_tensor_alloc(&outputs[i], t->dtype, t->rank, t->shape))
            return fail(c, v, "out of memory for output '%s'",
                        g->outputs[i].name ? g->outputs[i].name : "?");
        int64_t numel = ir_tensor_numel(t);
        for (int64_t e = 0; e < numel; e++) copy_elem(&outputs[i], e, t, e);
        round_tensor(&outputs[i]); /* outputs of parameters the caller did not round */
    }
    /* New state values go to temporaries first: the params may still be read
     * (a state update may be another state's old value). */
    for (int i = 0; i < g->nstates; i++) {
        const ir_node *s = g->states[i].state, *v = g->states[i].value;
        if (!s || s->op != IR_OP_STATE || s->param < 0 || s->param >= g->nparams)
            return fail(c, NULL, "state update %d does not name a state", i);
        if (!v || v->id < 0 || v->id >= g->nnodes || g->nodes[v->id] != v)
            return fail(c, NULL, "state update %d is not a node of the graph", i);
        const ir_tensor *t = &c->vals[v->id], *dst = &params[s->param];
        if (!ir_tensor_same_shape(t, dst))
            return fail(c, v, "new value of state '%s' has the wrong shape", s->name ? s->name : "?");
        if (!ir_tensor_alloc(&newstate[i], dst->dtype, dst->rank, dst->shape))
            return fail(c, v, "out of memory");
        int64_t numel = ir_tensor_numel(t);
        for (int64_t e = 0; e < numel; e++) copy_elem(&newstate[i], e, t, e);
        round_tensor(&newstate[i]);
    }
    for (int i = 0; i < g->nstates; i++) {
        ir_tensor *dst = &params[g->states[i].state->param];
        size_t bytes = (size_t)ir_tensor_numel(dst) * 4;
        if (bytes == 0) continue;
        if (dst->dtype == IR_I32) memcpy(dst->i, newstate[i].i, bytes);
        else memcpy(dst->f, newstate[i].f, bytes);
    }
    return 0;
}

static int run_top(const ir_graph *g, const int64_t *dims, ir_tensor *params, const int32_t *cu, int nseq,
                   ir_tensor *outputs, char *err, size_t errlen)
{
    interp c = {.g = g, .dims = dims, .err = err, .errlen = errlen, .cu = cu, .nseq = nseq};
    if (err && errlen) err[0] = '\0';
    if (!g) return fail(&c, NULL, "no graph");
    if (outputs)
        for (int i = 0; i < g->noutputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
    if (g->noutputs > 0 && !outputs) return fail(&c, NULL, "no output tensors given");
    if (g->nparams > 0 && !params) return fail(&c, NULL, "no parameter tensors given");
    if (g->nsyms > 0 && !dims) return fail(&c, NULL, "no values given for the dims");
    size_t nn = g->nnodes > 0 ? (size_t)g->nnodes : 1;
    size_t ns = g->nstates > 0 ? (size_t)g->nstates : 1;
    c.vals = calloc(nn, sizeof *c.vals);
    c.owned = calloc(nn, sizeof *c.owned);
    c.uses = calloc(nn, sizeof *c.uses);
    ir_tensor *newstate = calloc(ns, sizeof *newstate);
    int rc = -1;
    if (!c.vals || !c.owned || !c.uses || !newstate) {
        fail(&c, NULL, "out of memory");
        goto done;
    }
    /* Uses per input slot (mul(x, x) uses x twice), outputs, state updates. */
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = g->nodes[k];
        for (int i = 0; n && i < n->ninputs; i++)
            if (n->inputs[i] && n->inputs[i]->id >= 0 && n->inputs[i]->id < g->nnodes)
                c.uses[n->inputs[i]->id]++;
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ir_node *v = g->outputs[i].value;
        if (v && v->id >= 0 && v->id < g->nnodes) c.uses[v->id]++;
    }
    for (int i = 0; i < g->nstates; i++) {
        const ir_node *v = g->states[i].value;
        if (v && v->id >= 0 && v->id < g->nnodes) c.uses[v->id]++;
    }
    rc = run_graph(&c, params, outputs, newstate);
done:
    if (c.vals && c.owned)
        for (int k = 0; k < g->nnodes; k++)
            if (c.owned[k]) ir_tensor_free(&c.vals[k]);
    if (newstate)
        for (int i = 0; i < g->nstates; i++) ir_tensor_free(&newstate[i]);
    if (rc && outputs)
        for (int i = 0; i < g->noutputs; i++) ir_tensor_free(&outputs[i]);
    free(c.vals);
    free(c.owned);
    free(c.uses);
    free(newstate);
    return rc;
}

/* The slot table's meaning: batch row b of every state is row slots[b] of the
 * caller's tensor (rows of them). Gathered into tensors of the run's shape,
 * run, scattered back: rows no slot names are untouched. */
int ir_interp_run(const ir_graph *g, const int64_t *dims, ir_tensor *params, ir_tensor *outputs, char *err,
                  size_t errlen)
{
    return run_top(g, dims, params, NULL, 0, outputs, err, errlen);
}

static int run_slots(const ir_graph *g, const int64_t *dims, ir_tensor *params, const int32_t *slots, int nslots,
                     const int32_t *cu, ir_tensor *outputs, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!g || !params || !slots || nslots < 1) {
        if (err && errlen) snprintf(err, errlen, "slot run: no graph, parameters or slot table");
        return -1;
    }
    ir_tensor *local = calloc((size_t)g->nparams + 1, sizeof *local);
    if (!local) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    for (int i = 0; i < g->nparams; i++) {
        local[i] = params[i];
        const ir_tensor *t = &params[i];
        if (g->params[i]->op != IR_OP_STATE) continue;
        if (t->rank < 1 || t->shape[0] < 1) {
            if (err && errlen) snprintf(err, errlen, "slot run: state %s has no rows", g->params[i]->name);
            goto done;
        }
        for (int b = 0; b < nslots; b++) {
            bool dup = false;
            for (int c = 0; c < b; c++) dup |= slots[c] == slots[b];
            if (slots[b] < 0 || slots[b] >= t->shape[0] || dup) {
                if (err && errlen)
                    snprintf(err, errlen, "slot run: slot[%d] = %d is %s (state %s has %lld rows)", b, (int)slots[b],
                             dup ? "given twice" : "out of range", g->params[i]->name, (long long)t->shape[0]);
                goto done;
            }
        }
        int64_t shape[IR_MAX_RANK];
        memcpy(shape, t->shape, sizeof shape);
        shape[0] = nslots;
        memset(&local[i], 0, sizeof local[i]);
        if (!ir_tensor_alloc(&local[i], t->dtype, t->rank, shape)) {
            if (err && errlen) snprintf(err, errlen, "out of memory");
            goto done;
        }
        int64_t row = ir_tensor_numel(t) / t->shape[0];
        for (int b = 0; b < nslots; b++) {
            if (t->f) memcpy(local[i].f + b * row, t->f + (int64_t)slots[b] * row, (size_t)row * sizeof *t->f);
            else memcpy(local[i].i + b * row, t->i + (int64_t)slots[b] * row, (size_t)row * sizeof *t->i);
        }
    }
    rc = run_top(g, dims, local, cu, cu ? nslots : 0, outputs, err, errlen);
    for (int i = 0; rc == 0 && i < g->nparams; i++) {
        const ir_tensor *t = &params[i];
        if (g->params[i]->op != IR_OP_STATE) continue;
        int64_t row = ir_tensor_numel(t) / t->shape[0];
        for (int b = 0; b < nslots; b++) {
            if (t->f) memcpy(t->f + (int64_t)slots[b] * row, local[i].f + b * row, (size_t)row * sizeof *t->f);
            else memcpy(t->i + (int64_t)slots[b] * row, local[i].i + b * row, (size_t)row * sizeof *t->i);
        }
    }
done:
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->op == IR_OP_STATE && (local[i].f != params[i].f || local[i].i != params[i].i)) ir_tensor_free(&local[i]);
    free(local);
    return rc;
}

int ir_interp_run_slots(const ir_graph *g, const int64_t *dims, ir_tensor *params, const int32_t *slots, int nslots,
                        ir_tensor *outputs, char *err, size_t errlen)
{
    return run_slots(g, dims, params, slots, nslots, NULL, outputs, err, errlen);
}

/* The table's meaning is checked here, once, so that every packed op can
 * trust it: cu[0] = 0 and each sequence at least one token. That cu[nseq]
 * is the packed tokens and nseq the sequences' dim, each packed op checks
 * against its operands. */
int ir_interp_run_packed(const ir_graph *g, const int64_t *dims, ir_tensor *params, const int32_t *cu, int nseq,
                         const int32_t *slots, ir_tensor *outputs, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!cu || nseq < 1) {
        if (err && errlen) snprintf(err, errlen, "packed run: no sequences (cu_seqlens NULL or nseq %d < 1)", nseq);
        return -1;
    }
    if (cu[0] != 0) {
        if (err && errlen) snprintf(err, errlen, "packed run: cu_seqlens[0] = %d, not 0", (int)cu[0]);
        return -1;
    }
    for (int i = 0; i < nseq; i++)
        if (cu[i + 1] <= cu[i]) {
            if (err && errlen)
                snprintf(err, errlen, "packed run: cu_seqlens[%d] = %d is not greater than cu_seqlens[%d] = %d (sequence %d %s)",
                         i + 1, (int)cu[i + 1], i, (int)cu[i], i, cu[i + 1] == cu[i] ? "is empty" : "has a negative length");
            return -1;
        }
    if (slots) return run_slots(g, dims, params, slots, nseq, cu, outputs, err, errlen);
    return run_top(g, dims, params, cu, nseq, outputs, err, errlen);
}
