/* tests/interp/test_interp_elementwise.c — sources (const, causal_mask),
 * binary ops with numpy broadcasting, unary ops, casts and dtype rounding. */
#include "interp_test.h"

#include <limits.h>

/* add: rank-0 constant, a vector stretched over rows, general [2,1,3] + [4,1]. */
static void test_broadcast(void)
{
    tgraph t;
    tg_init(&t, "bcast");
    ir_graph *g = t.g;
    ir_node *a = in_(&t, "a", ty(IR_F32, 2, 2, 3));
    ir_node *b = in_(&t, "b", ty(IR_F32, 1, 3));
    ir_node *c = in_(&t, "c", ty(IR_F32, 3, 2, 1, 3));
    ir_node *d = in_(&t, "d", ty(IR_F32, 2, 4, 1));
    ir_node *e = in_(&t, "e", ty(IR_F32, 2, 3, 1));
    ir_node *f = in_(&t, "f", ty(IR_F32, 2, 1, 4));
    ir_node *s = in_(&t, "s", ty(IR_F32, 0));
    ir_graph_add_output(g, "ab", ir_binary(g, IR_OP_ADD, a, b, NOLOC), NOLOC);
    ir_graph_add_output(g, "cd", ir_binary(g, IR_OP_ADD, c, d, NOLOC), NOLOC);
    ir_graph_add_output(g, "ef", ir_binary(g, IR_OP_SUB, e, f, NOLOC), NOLOC);
    ir_graph_add_output(g, "half", ir_binary(g, IR_OP_MUL, a, ir_const(g, 0.5, IR_F32, NOLOC), NOLOC), NOLOC);
    ir_graph_add_output(g, "sa", ir_binary(g, IR_OP_DIV, s, a, NOLOC), NOLOC);
    ir_graph_add_output(g, "ba", ir_binary(g, IR_OP_SUB, b, a, NOLOC), NOLOC); /* stretch on the left */
    CHECK(tg_ok(&t));

    float cv[6] = {1, 2, 3, 4, 5, 6}, dv[4] = {10, 20, 30, 40};
    ir_tensor p[7] = {
        tf(IR_F32, 2, SHAPE(2, 3), FLOATS(1, 2, 3, 4, 5, 6)),
        tf(IR_F32, 1, SHAPE(3), FLOATS(10, 20, 30)),
        tf(IR_F32, 3, SHAPE(2, 1, 3), cv),
        tf(IR_F32, 2, SHAPE(4, 1), dv),
        tf(IR_F32, 2, SHAPE(3, 1), FLOATS(1, 2, 3)),
        tf(IR_F32, 2, SHAPE(1, 4), FLOATS(0.5f, -1, 2, -4)),
        tf(IR_F32, 0, NULL, FLOATS(-6)),
    };
    ir_tensor o[6];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 2, SHAPE(2, 3), FLOATS(11, 22, 33, 14, 25, 36), 0, 0);
        /* cd[i][j][k] = c[i][0][k] + d[j][0], written out by a naive loop */
        float want[24];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 3; k++) want[(i * 4 + j) * 3 + k] = cv[i * 3 + k] + dv[j];
        CHECK_TENSOR(o[1], 3, SHAPE(2, 4, 3), want, 0, 0);
        /* ef[i][j] = e[i] - f[j]: both operands stretch */
        CHECK_TENSOR(o[2], 2, SHAPE(3, 4),
                     FLOATS(0.5f, 2, -1, 5, 1.5f, 3, 0, 6, 2.5f, 4, 1, 7), 0, 0);
        CHECK_TENSOR(o[3], 2, SHAPE(2, 3), FLOATS(0.5f, 1, 1.5f, 2, 2.5f, 3), 0, 0);
        CHECK_TENSOR(o[4], 2, SHAPE(2, 3), FLOATS(-6, -3, -2, -1.5f, -1.2f, -1), 0, 0);
        CHECK_TENSOR(o[5], 2, SHAPE(2, 3), FLOATS(9, 18, 27, 6, 15, 24), 0, 0);
        free_tensors(o, 6);
    }
    free_tensors(p, 7);
    tg_free(&t);
}

/* max, min, pow with negative values; symbolic batch dim. */
static void test_binary_ops(void)
{
    tgraph t;
    tg_init(&t, "binops");
    ir_graph *g = t.g;
    ir_graph_add_sym(g, "B");
    ir_node *a = in_(&t, "a", ty(IR_F32, 2, SYM(0), 2));
    ir_node *b = in_(&t, "b", ty(IR_F32, 2, SYM(0), 2));
    ir_graph_add_output(g, "max", ir_binary(g, IR_OP_MAX, a, b, NOLOC), NOLOC);
    ir_graph_add_output(g, "min", ir_binary(g, IR_OP_MIN, a, b, NOLOC), NOLOC);
    ir_graph_add_output(g, "pow", ir_binary(g, IR_OP_POW, a, ir_const(g, 2, IR_F32, NOLOC), NOLOC), NOLOC);
    ir_graph_add_output(g, "pow3", ir_binary(g, IR_OP_POW, b, ir_const(g, 3, IR_F32, NOLOC), NOLOC), NOLOC);
    ir_graph_add_output(g, "powh", ir_binary(g, IR_OP_POW, ir_const(g, 2, IR_F32, NOLOC), a, NOLOC), NOLOC);
    ir_graph_add_output(g, "neg", ir_unary(g, IR_OP_NEG, a, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[2] = {
        tf(IR_F32, 2, SHAPE(3, 2), FLOATS(-1, 2, -3, 0.5f, 0, -2)),
        tf(IR_F32, 2, SHAPE(3, 2), FLOATS(-3, 5, -1, 0.25f, -0.0f, -2)),
    };
    ir_tensor o[6];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(3), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 2, SHAPE(3, 2), FLOATS(-1, 5, -1, 0.5f, 0, -2), 0, 0);
        CHECK_TENSOR(o[1], 2, SHAPE(3, 2), FLOATS(-3, 2, -3, 0.25f, 0, -2), 0, 0);
        CHECK_TENSOR(o[2], 2, SHAPE(3, 2), FLOATS(1, 4, 9, 0.25f, 0, 4), 0, 0);
        CHECK_TENSOR(o[3], 2, SHAPE(3, 2), FLOATS(-27, 125, -1, 0.015625f, 0, -8), 0, 0);
        CHECK_TENSOR(o[4], 2, SHAPE(3, 2), FLOATS(0.5f, 4, 0.125f, 1.41421356f, 1, 0.25f), 0, 1e-7);
        CHECK_TENSOR(o[5], 2, SHAPE(3, 2), FLOATS(1, -2, 3, -0.5f, 0, 2), 0, 0);
        free_tensors(o, 6);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

/* i32 arithmetic stays integer; float -> i32 truncates toward zero. */
static void test_int_and_cast(void)
{
    tgraph t;
    tg_init(&t, "ints");
    ir_graph *g = t.g;
    ir_node *i = in_(&t, "i", ty(IR_I32, 1, 4));
    ir_node *j = in_(&t, "j", ty(IR_I32, 1, 4));
    ir_node *x = in_(&t, "x", ty(IR_F32, 1, 7));
    ir_graph_add_output(g, "add", ir_binary(g, IR_OP_ADD, i, j, NOLOC), NOLOC);
    ir_graph_add_output(g, "mul", ir_binary(g, IR_OP_MUL, i, j, NOLOC), NOLOC);
    ir_graph_add_output(g, "max", ir_binary(g, IR_OP_MAX, i, j, NOLOC), NOLOC);
    ir_graph_add_output(g, "neg", ir_unary(g, IR_OP_NEG, i, NOLOC), NOLOC);
    ir_graph_add_output(g, "toi", ir_cast(g, x, IR_I32, NOLOC), NOLOC);
    ir_graph_add_output(g, "tof", ir_cast(g, i, IR_F32, NOLOC), NOLOC);
    ir_graph_add_output(g, "tobf", ir_cast(g, i, IR_BF16, NOLOC), NOLOC);
    ir_graph_add_output(g, "ci", ir_const(g, -7.9, IR_I32, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[3] = {
        ti(1, SHAPE(4), INTS(3, -7, 100000, 257)),
        ti(1, SHAPE(4), INTS(4, 2, 100000, -1)),
        tf(IR_F32, 1, SHAPE(7), FLOATS(-2.7f, -0.5f, 0.5f, 2.9f, 1e10f, -1e10f, 123456.75f)),
    };
    ir_tensor o[8];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        for (int k = 0; k < 8; k++) CHECK(o[k].dtype == (k == 5 ? IR_F32 : k == 6 ? IR_BF16 : IR_I32));
        int32_t add[] = {7, -5, 200000, 256}, mul[] = {12, -14, 1410065408 /* 10^10 wraps */, -257};
        int32_t mx[] = {4, 2, 100000, 257}, neg[] = {-3, 7, -100000, -257};
        int32_t toi[] = {-2, 0, 0, 2, INT32_MAX, INT32_MIN, 123456};
        for (int k = 0; k < 4; k++) {
            CHECK_MSG(o[0].i[k] == add[k], "add[%d] = %d", k, o[0].i[k]);
            CHECK_MSG(o[1].i[k] == mul[k], "mul[%d] = %d", k, o[1].i[k]);
            CHECK_MSG(o[2].i[k] == mx[k], "max[%d] = %d", k, o[2].i[k]);
            CHECK_MSG(o[3].i[k] == neg[k], "neg[%d] = %d", k, o[3].i[k]);
        }
        for (int k = 0; k < 7; k++) CHECK_MSG(o[4].i[k] == toi[k], "toi[%d] = %d", k, o[4].i[k]);
        CHECK_TENSOR(o[5], 1, SHAPE(4), FLOATS(3, -7, 100000, 257), 0, 0);
        /* 100000 in bf16: 8 significant bits -> 99840; 257 -> 256 (tie to even) */
        CHECK_TENSOR(o[6], 1, SHAPE(4), FLOATS(3, -7, 99840, 256), 0, 0);
        CHECK(o[7].rank == 0 && o[7].i[0] == -7);
        free_tensors(o, 8);
    }
    free_tensors(p, 3);
    tg_free(&t);
}

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void test_unary(void)
{
    tgraph t;
    tg_init(&t, "unary");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 1, 6));
    ir_node *pz = in_(&t, "p", ty(IR_F32, 1, 3));
    static const ir_op ops[] = {IR_OP_NEG, IR_OP_EXP, IR_OP_TANH, IR_OP_SIGMOID, IR_OP_SILU, IR_OP_RELU};
    for (int k = 0; k < 6; k++) ir_graph_add_output(g, ir_op_name(ops[k]), ir_unary(g, ops[k], x, NOLOC), NOLOC);
    ir_graph_add_output(g, "gelu", ir_gelu(g, x, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "gelu_tanh", ir_gelu(g, x, true, NOLOC), NOLOC);
    ir_graph_add_output(g, "log", ir_unary(g, IR_OP_LOG, pz, NOLOC), NOLOC);
    ir_graph_add_output(g, "sqrt", ir_unary(g, IR_OP_SQRT, pz, NOLOC), NOLOC);
    ir_graph_add_output(g, "rsqrt", ir_unary(g, IR_OP_RSQRT, pz, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    float xv[6] = {-2, -0.5f, 0, 0.5f, 1, 3};
    ir_tensor p[2] = {tf(IR_F32, 1, SHAPE(6), xv), tf(IR_F32, 1, SHAPE(3), FLOATS(0.25f, 1, 16))};
    ir_tensor o[11];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        float w[6];
        CHECK_TENSOR(o[0], 1, SHAPE(6), FLOATS(2, 0.5f, 0, -0.5f, -1, -3), 0, 0);
        for (int k = 0; k < 6; k++) w[k] = (float)exp(xv[k]);
        CHECK_TENSOR(o[1], 1, SHAPE(6), w, 0, 1e-7);
        for (int k = 0; k < 6; k++) w[k] = (float)tanh(xv[k]);
        CHECK_TENSOR(o[2], 1, SHAPE(6), w, 1e-8, 1e-7);
        /* sigmoid(0) = 0.5, silu(1) = 0.7310585786 by hand */
        for (int k = 0; k < 6; k++) w[k] = (float)ref_sigmoid(xv[k]);
        CHECK_TENSOR(o[3], 1, SHAPE(6), w, 0, 1e-7);
        CHECK(o[3].f[2] == 0.5f);
        for (int k = 0; k < 6; k++) w[k] = (float)(xv[k] * ref_sigmoid(xv[k]));
        CHECK_TENSOR(o[4], 1, SHAPE(6), w, 1e-8, 1e-7);
        CHECK_NEAR(o[4].f[4], 0.7310585786, 0, 1e-7);
        CHECK_TENSOR(o[5], 1, SHAPE(6), FLOATS(0, 0, 0, 0.5f, 1, 3), 0, 0);
        /* gelu(1): erf form 0.841344746, tanh form 0.841191990; gelu(0) = 0 */
        CHECK_NEAR(o[6].f[4], 0.8413447460685429, 0, 1e-7);
        CHECK_NEAR(o[7].f[4], 0.8411919906082768, 0, 1e-7);
        CHECK(o[6].f[2] == 0 && o[7].f[2] == 0);
        for (int k = 0; k < 6; k++) w[k] = (float)(0.5 * xv[k] * (1 + erf(xv[k] / sqrt(2.0))));
        CHECK_TENSOR(o[6], 1, SHAPE(6), w, 1e-8, 1e-6);
        for (int k = 0; k < 6; k++) {
            double v = xv[k];
            w[k] = (float)(0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
        }
        CHECK_TENSOR(o[7], 1, SHAPE(6), w, 1e-8, 1e-6);
        CHECK_TENSOR(o[8], 1, SHAPE(3), FLOATS(-1.38629436f, 0, 2.77258872f), 1e-7, 1e-7);
        CHECK_TENSOR(o[9], 1, SHAPE(3), FLOATS(0.5f, 1, 4), 0, 0);
        CHECK_TENSOR(o[10], 1, SHAPE(3), FLOATS(2, 1, 0.25f), 0, 0);
        free_tensors(o, 11);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

/* bf16 / f16 graphs round every node's result. */
static void test_low_precision(void)
{
    tgraph t;
    tg_init(&t, "bf16");
    ir_graph *g = t.g;
    ir_node *a = in_(&t, "a", ty(IR_BF16, 1, 4));
    ir_node *b = in_(&t, "b", ty(IR_BF16, 1, 4));
    ir_node *h = in_(&t, "h", ty(IR_F16, 1, 2));
    ir_node *x = in_(&t, "x", ty(IR_F32, 1, 5));
    ir_graph_add_output(g, "add", ir_binary(g, IR_OP_ADD, a, b, NOLOC), NOLOC);
    ir_graph_add_output(g, "mul", ir_binary(g, IR_OP_MUL, a, b, NOLOC), NOLOC);
    ir_graph_add_output(g, "addc", ir_binary(g, IR_OP_ADD, a, ir_const(g, 0.1, IR_F32, NOLOC), NOLOC), NOLOC);
    ir_graph_add_output(g, "tobf", ir_cast(g, x, IR_BF16, NOLOC), NOLOC);
    ir_graph_add_output(g, "hadd", ir_binary(g, IR_OP_ADD, h, ir_const(g, 0x1p-11, IR_F32, NOLOC), NOLOC), NOLOC);
    ir_graph_add_output(g, "exp", ir_unary(g, IR_OP_EXP, a, NOLOC), NOLOC);
    /* (a + b) - a: the intermediate sum is stored in bf16, so 1 + 2^-9 - 1 = 0 */
    ir_graph_add_output(g, "cancel",
                        ir_binary(g, IR_OP_SUB, ir_binary(g, IR_OP_ADD, a, b, NOLOC), a, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[4] = {
        tf(IR_BF16, 1, SHAPE(4), FLOATS(1, 3.14159f, 1, -2)),
        tf(IR_BF16, 1, SHAPE(4), FLOATS(0x1p-9f, 2.71828f, 0x1p-8f, 0x1p-7f)),
        tf(IR_F16, 1, SHAPE(2), FLOATS(1, 2048)),
        /* 1+2^-9 -> 1; 1+3*2^-9 -> 1+2^-7; ties 1+2^-8 -> 1 and 1+3*2^-8 -> 1+2^-6 (even) */
        tf(IR_F32, 1, SHAPE(5), FLOATS(1 + 0x1p-9f, 1 + 3 * 0x1p-9f, 1 + 0x1p-8f, 1 + 3 * 0x1p-8f, -1.0f / 3)),
    };
    ir_tensor o[7];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(o[0].dtype == IR_BF16);
        /* 1 + 2^-9 - 1 -> 0; 5.875 - 3.140625 = 2.734375; 1 - 1 = 0; -2^-7 + ... */
        CHECK_TENSOR(o[6], 1, SHAPE(4), FLOATS(0, ir_round_bf16(5.875f - 3.140625f), 0, 0x1p-7f), 0, 0);
        /* the parameters were rounded on the way in: 3.14159 -> 3.140625, 2.71828 -> 2.71875 */
        CHECK(p[0].f[1] == 3.140625f && p[1].f[1] == 2.71875f);
        CHECK(o[0].f[0] == 1.0f); /* 1 + 2^-9 rounds to 1 in bf16 */
        CHECK(o[0].f[1] == ir_round_bf16(3.140625f + 2.71875f));
        CHECK(o[0].f[1] == 5.875f);
        CHECK(o[0].f[2] == 1.0f);          /* tie, to even */
        CHECK(o[0].f[3] == -1.9921875f);   /* -2 + 2^-7, exactly representable */
        CHECK(o[1].f[1] == ir_round_bf16(3.140625f * 2.71875f));
        CHECK(o[1].f[1] == 8.5625f);
        CHECK(o[2].f[0] == ir_round_bf16(1 + ir_round_bf16(0.1f)));
        CHECK(o[2].f[0] == 1.1015625f);
        CHECK_TENSOR(o[3], 1, SHAPE(5), FLOATS(1, 1 + 0x1p-7f, 1, 1 + 0x1p-6f, -0.333984375f), 0, 0);
        CHECK(o[4].dtype == IR_F16);
        CHECK(o[4].f[0] == 1.0f && o[4].f[1] == 2048.0f); /* f16: 1+2^-11 is a tie -> 1 */
        for (int k = 0; k < 4; k++) CHECK(o[5].f[k] == ir_round_bf16((float)exp(p[0].f[k])));
        free_tensors(o, 7);
    }
    free_tensors(p, 4);
    tg_free(&t);
}

static void test_sources(void)
{
    tgraph t;
    tg_init(&t, "sources");
    ir_graph *g = t.g;
    int S = ir_graph_add_sym(g, "S"), T = ir_graph_add_sym(g, "T");
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, SYM(S), SYM(T)));
    ir_node *m = ir_causal_mask(g, ir_dim_sym(S), ir_dim_sym(T), IR_F32, NOLOC);
    ir_graph_add_output(g, "mask", m, NOLOC);
    ir_graph_add_output(g, "xm", ir_binary(g, IR_OP_ADD, x, m, NOLOC), NOLOC);
    ir_graph_add_output(g, "c", ir_const(g, 2.5, IR_F32, NOLOC), NOLOC);
    ir_graph_add_output(g, "sq", ir_causal_mask(g, ir_dim_const(3), ir_dim_const(3), IR_BF16, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[1] = {tf(IR_F32, 2, SHAPE(2, 4), FLOATS(1, 2, 3, 4, 5, 6, 7, 8))};
    ir_tensor o[4];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(2, 4), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* Sq = 2, Sk = 4: m[i][j] = 0 iff j <= i + 2 */
        CHECK_TENSOR(o[0], 2, SHAPE(2, 4), FLOATS(0, 0, 0, -INFINITY, 0, 0, 0, 0), 0, 0);
        CHECK_TENSOR(o[1], 2, SHAPE(2, 4), FLOATS(1, 2, 3, -INFINITY, 5, 6, 7, 8), 0, 0);
        CHECK(o[2].rank == 0 && o[2].dtype == IR_F32 && o[2].f[0] == 2.5f);
        CHECK_TENSOR(o[3], 2, SHAPE(3, 3),
                     FLOATS(0, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0, 0, 0), 0, 0);
        free_tensors(o, 4);
    }
    free_tensors(p, 1);
    tg_free(&t);
}

/* A long chain at small dims: intermediates are freed as they die. */
static void test_long_chain(void)
{
    tgraph t;
    tg_init(&t, "chain");
    ir_graph *g = t.g;
    ir_graph_add_sym(g, "N");
    ir_node *x = in_(&t, "x", ty(IR_F32, 1, SYM(0)));
    ir_node *one = ir_const(g, 1, IR_F32, NOLOC);
    ir_node *y = x;
    for (int k = 0; k < 2000; k++) y = ir_binary(g, IR_OP_ADD, y, one, NOLOC);
    ir_node *sq = ir_binary(g, IR_OP_MUL, y, y, NOLOC); /* one node using y twice */
    ir_graph_add_output(g, "y", sq, NOLOC);
    ir_graph_add_output(g, "x", x, NOLOC); /* a parameter as an output is copied */
    CHECK(tg_ok(&t));
    ir_tensor p[1] = {tf(IR_F32, 1, SHAPE(3), FLOATS(0, 1, -2000))};
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(3), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 1, SHAPE(3), FLOATS(4000000, 4004001, 0), 0, 0);
        CHECK_TENSOR(o[1], 1, SHAPE(3), FLOATS(0, 1, -2000), 0, 0);
        CHECK(o[1].f != p[0].f);
        free_tensors(o, 2);
    }
    free_tensors(p, 1);
    tg_free(&t);
}

/* A bf16 parameter whose values are not bf16 is read as if rounded, and the
 * caller's tensor is left as it was. */
static void test_unrounded_param(void)
{
    tgraph t;
    tg_init(&t, "raw");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_BF16, 1, 2));
    ir_graph_add_output(g, "xx", ir_binary(g, IR_OP_MUL, x, x, NOLOC), NOLOC);
    ir_graph_add_output(g, "x", x, NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[1] = {tf(IR_BF16, 1, SHAPE(2), NULL)};
    p[0].f[0] = 1 + 0x1p-9f; /* not a bf16 value: (1 + 2^-9)^2 would round up to 1 + 2^-7 */
    p[0].f[1] = 3;
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 1, SHAPE(2), FLOATS(1, 9), 0, 0);
        CHECK_TENSOR(o[1], 1, SHAPE(2), FLOATS(1, 3), 0, 0);
        CHECK(p[0].f[0] == 1 + 0x1p-9f);
        free_tensors(o, 2);
    }
    free_tensors(p, 1);
    tg_free(&t);
}

int main(void)
{
    test_unrounded_param();
    test_broadcast();
    test_binary_ops();
    test_int_and_cast();
    test_unary();
    test_low_precision();
    test_sources();
    test_long_chain();
    return CHECK_DONE();
}
