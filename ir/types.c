/* ir/types.c — the op table's accessors, dtypes, rounding to bf16/f16 and
 * their storage bits, and type printing. */
#include <math.h>
#include <string.h>

#include "ir/ir.h"

static const struct {
    const char *name;
    int lo, hi;
    ir_fusion_class cls;
    ir_group_kind kind;
    const char *cuda;
} op_table[IR_OP_COUNT] = {
#define IR_OP(e, name, lo, hi, cls, kind, cuda) {name, lo, hi, IR_CLASS_##cls, IR_GROUP_##kind, cuda},
#include "ir/ops.def"
#undef IR_OP
};

const char *ir_op_name(ir_op op) { return (unsigned)op < IR_OP_COUNT ? op_table[op].name : "?"; }
int ir_op_min_inputs(ir_op op) { return op_table[op].lo; }
int ir_op_max_inputs(ir_op op) { return op_table[op].hi; }
ir_fusion_class ir_op_class(ir_op op) { return op_table[op].cls; }
ir_group_kind ir_op_kernel_kind(ir_op op) { return op_table[op].kind; }
const char *ir_op_cuda(ir_op op) { return (unsigned)op < IR_OP_COUNT ? op_table[op].cuda : NULL; }

const char *ir_group_kind_name(ir_group_kind k)
{
    static const char *const names[IR_GROUP_KIND_COUNT] = {"elementwise", "row",    "matmul",     "attention",
                                                           "copy",        "gather", "cache-write"};
    return (unsigned)k < IR_GROUP_KIND_COUNT ? names[k] : "?";
}

const char *ir_class_name(ir_fusion_class c)
{
    static const char *const names[] = {"source", "elementwise", "broadcast", "injective",
                                        "reduction", "matmul", "attention", "opaque"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "?";
}

static const char *const dtype_names[IR_DTYPE_COUNT] = {"f32", "f16", "bf16", "i32"};

const char *ir_dtype_name(ir_dtype t) { return (unsigned)t < IR_DTYPE_COUNT ? dtype_names[t] : "?"; }

bool ir_dtype_parse(const char *s, ir_dtype *out)
{
    for (int i = 0; i < IR_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0) {
            *out = (ir_dtype)i;
            return true;
        }
    return false;
}

int ir_dtype_size(ir_dtype t) { return t == IR_F16 || t == IR_BF16 ? 2 : 4; }

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

float ir_round_bf16(float x)
{
    if (isnan(x)) return x;
    uint32_t u = f2u(x);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflows to inf correctly */
    return u2f(u & 0xffff0000u);
}

float ir_round_f16(float x)
{
    if (isnan(x) || isinf(x)) return x;
    float a = fabsf(x);
    if (a >= 65520.0f) return copysignf(INFINITY, x); /* beyond max half after rounding */
    /* quantum: 2^(e-10) for normals, 2^-24 for subnormals (e >= -14) */
    int e;
    frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int exp2 = e - 1;
    if (exp2 < -14) exp2 = -14;
    float q = ldexpf(1.0f, exp2 - 10);
    float r = nearbyintf(a / q) * q; /* default rounding mode: nearest even */
    return copysignf(r, x);
}

float ir_round_to(ir_dtype t, float x)
{
    switch (t) {
    case IR_BF16: return ir_round_bf16(x);
    case IR_F16: return ir_round_f16(x);
    default: return x;
    }
}

uint16_t ir_f32_to_bf16_bits(float x)
{
    uint32_t u = f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float ir_bf16_bits_to_f32(uint16_t b) { return u2f((uint32_t)b << 16); }

uint16_t ir_f32_to_f16_bits(float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    if (isnan(x)) return 0x7e00;
    float a = fabsf(ir_round_f16(x)); /* exact in half (or inf) after rounding */
    if (isinf(a)) return sign | 0x7c00;
    if (a == 0) return sign;
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int be = e - 1 + 15;     /* biased exponent of 1.xxx form */
    if (be <= 0) return sign | (uint16_t)lrintf(ldexpf(a, 24)); /* subnormal: a / 2^-24 */
    uint16_t mant = (uint16_t)lrintf((m * 2.0f - 1.0f) * 1024.0f);
    return sign | (uint16_t)(be << 10) | mant;
}

float ir_f16_bits_to_f32(uint16_t h)
{
    int sign = (h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 0x400), e - 25);
    return sign ? -v : v;
}

bool ir_type_same_shape(const ir_type *a, const ir_type *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (!ir_dim_eq(&a->dims[i], &b->dims[i])) return false;
    return true;
}

bool ir_type_eq(const ir_type *a, const ir_type *b) { return a->dtype == b->dtype && ir_type_same_shape(a, b); }

ir_shape_status ir_type_eval_shape(const ir_type *t, const int64_t *dims, int64_t *shape, int64_t *numel, int *bad)
{
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < t->rank; i++) {
        int64_t v;
        if (bad) *bad = i;
        if (!ir_dim_value(&t->dims[i], dims, &v)) return IR_SHAPE_UNBOUND;
        if (v < 0) {
            if (shape) shape[i] = v;
            return IR_SHAPE_NEGATIVE;
        }
        if (shape) shape[i] = v;
        overflow = overflow || __builtin_mul_overflow(n, v, &n);
    }
    if (bad) *bad = -1;
    if (overflow) return IR_SHAPE_OVERFLOW;
    if (numel) *numel = n;
    return IR_SHAPE_OK;
}

bool ir_type_shape_at(const ir_type *t, const int64_t *dims, int64_t *shape, int64_t *numel)
{
    return ir_type_eval_shape(t, dims, shape, numel, NULL) == IR_SHAPE_OK;
}

ir_dim ir_type_numel(const ir_type *t, int from, int to, bool *overflow)
{
    ir_dim r = ir_dim_const(1);
    for (int i = from; i < to; i++) r = ir_dim_times(r, t->dims[i], overflow);
    return r;
}

ir_dim ir_type_bytes(const ir_type *t, bool *overflow)
{
    return ir_dim_times(ir_dim_const(ir_dtype_size(t->dtype)), ir_type_numel(t, 0, t->rank, overflow), overflow);
}

int ir_shape_print(const ir_type *t, const char *const *syms, char *buf, size_t n)
{
    size_t off = 0;
    int w = snprintf(buf, n, "[");
    off += (size_t)w;
    for (int i = 0; i < t->rank; i++) {
        if (i) {
            w = snprintf(buf + (off < n ? off : n), off < n ? n - off : 0, ", ");
            off += (size_t)w;
        }
        w = ir_dim_print(&t->dims[i], syms, buf + (off < n ? off : n), off < n ? n - off : 0);
        off += (size_t)w;
    }
    w = snprintf(buf + (off < n ? off : n), off < n ? n - off : 0, "]");
    off += (size_t)w;
    return (int)off;
}

int ir_type_print(const ir_type *t, const char *const *syms, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s", ir_dtype_name(t->dtype));
    size_t off = (size_t)w;
    off += (size_t)ir_shape_print(t, syms, buf + (off < n ? off : n), off < n ? n - off : 0);
    return (int)off;
}
