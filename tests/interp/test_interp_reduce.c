/* tests/interp/test_interp_reduce.c — sum / mean / reduce_max over axis masks
 * with and without keepdim, softmax along each axis, rmsnorm, layernorm. */
#include "interp_test.h"

static void test_reductions(void)
{
    tgraph t;
    tg_init(&t, "reduce");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, 2, 3));
    ir_node *y = in_(&t, "y", ty(IR_F32, 3, 2, 2, 2));
    ir_graph_add_output(g, "sum1", ir_reduce(g, IR_OP_SUM, x, 2, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "sum1k", ir_reduce(g, IR_OP_SUM, x, 2, true, NOLOC), NOLOC);
    ir_graph_add_output(g, "sum0", ir_reduce(g, IR_OP_SUM, x, 1, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "sumall", ir_reduce(g, IR_OP_SUM, x, 3, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "sumallk", ir_reduce(g, IR_OP_SUM, x, 3, true, NOLOC), NOLOC);
    ir_graph_add_output(g, "mean1", ir_reduce(g, IR_OP_MEAN, x, 2, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "max1", ir_reduce(g, IR_OP_REDUCE_MAX, x, 2, true, NOLOC), NOLOC);
    ir_graph_add_output(g, "max0", ir_reduce(g, IR_OP_REDUCE_MAX, x, 1, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "sum02", ir_reduce(g, IR_OP_SUM, y, 5, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "mean02k", ir_reduce(g, IR_OP_MEAN, y, 5, true, NOLOC), NOLOC);
    ir_graph_add_output(g, "max12", ir_reduce(g, IR_OP_REDUCE_MAX, y, 6, false, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    /* x = [[1, -2, 3], [-4, 5, -6]]; y[i][j][k] = 4i + 2j + k - 4 */
    ir_tensor p[2] = {
        tf(IR_F32, 2, SHAPE(2, 3), FLOATS(1, -2, 3, -4, 5, -6)),
        tf(IR_F32, 3, SHAPE(2, 2, 2), FLOATS(-4, -3, -2, -1, 0, 1, 2, 3)),
    };
    ir_tensor o[11];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 1, SHAPE(2), FLOATS(2, -5), 0, 0);
        CHECK_TENSOR(o[1], 2, SHAPE(2, 1), FLOATS(2, -5), 0, 0);
        CHECK_TENSOR(o[2], 1, SHAPE(3), FLOATS(-3, 3, -3), 0, 0);
        CHECK_TENSOR(o[3], 0, NULL, FLOATS(-3), 0, 0);
        CHECK_TENSOR(o[4], 2, SHAPE(1, 1), FLOATS(-3), 0, 0);
        CHECK_TENSOR(o[5], 1, SHAPE(2), FLOATS(2.0f / 3, -5.0f / 3), 0, 1e-7);
        CHECK_TENSOR(o[6], 2, SHAPE(2, 1), FLOATS(3, 5), 0, 0);
        CHECK_TENSOR(o[7], 1, SHAPE(3), FLOATS(1, 5, 3), 0, 0);
        /* over i and k: j=0: -4-3+0+1 = -6; j=1: -2-1+2+3 = 2 */
        CHECK_TENSOR(o[8], 1, SHAPE(2), FLOATS(-6, 2), 0, 0);
        CHECK_TENSOR(o[9], 3, SHAPE(1, 2, 1), FLOATS(-1.5f, 0.5f), 0, 0);
        /* over j and k: i=0: max(-4..-1) = -1; i=1: 3 */
        CHECK_TENSOR(o[10], 1, SHAPE(2), FLOATS(-1, 3), 0, 0);
        free_tensors(o, 11);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

/* bf16 mean: accumulated in double, rounded once at the end. */
static void test_reduce_bf16(void)
{
    tgraph t;
    tg_init(&t, "reduce_bf16");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_BF16, 1, 256));
    ir_graph_add_output(g, "sum", ir_reduce(g, IR_OP_SUM, x, 1, false, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    /* 256 * (1 + 2^-7) = 258.0: a bf16 running sum would stall at 256 */
    float v[256];
    for (int k = 0; k < 256; k++) v[k] = 1 + 0x1p-7f;
    ir_tensor p[1] = {tf(IR_BF16, 1, SHAPE(256), v)};
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(o[0].dtype == IR_BF16);
        CHECK_NEAR(o[0].f[0], 258.0, 0, 0);
        free_tensors(o, 1);
    }
    free_tensors(p, 1);
    tg_free(&t);
}

static void test_softmax(void)
{
    tgraph t;
    tg_init(&t, "softmax");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, 2, 2));
    ir_node *z = in_(&t, "z", ty(IR_F32, 2, 2, 3));
    ir_graph_add_output(g, "s1", ir_softmax(g, x, 1, NOLOC), NOLOC);
    ir_graph_add_output(g, "s0", ir_softmax(g, x, 0, NOLOC), NOLOC);
    ir_graph_add_output(g, "big", ir_softmax(g, z, 1, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    float ln3 = (float)log(3.0);
    ir_tensor p[2] = {
        tf(IR_F32, 2, SHAPE(2, 2), (float[]){0, ln3, 1, 1}),
        /* huge values (stable only if the max is subtracted) and a masked entry */
        tf(IR_F32, 2, SHAPE(2, 3), FLOATS(1000, 1000, -INFINITY, -1000, -1000 + ln3, -INFINITY)),
    };
    ir_tensor o[3];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* row [0, ln 3] -> [1/4, 3/4]; row [1, 1] -> [1/2, 1/2] */
        CHECK_TENSOR(o[0], 2, SHAPE(2, 2), FLOATS(0.25f, 0.75f, 0.5f, 0.5f), 0, 1e-6);
        /* columns [0, 1] -> [1/(1+e), e/(1+e)]; [ln 3, 1] -> [3/(3+e), e/(3+e)] */
        double e = exp(1.0);
        CHECK_TENSOR(o[1], 2, SHAPE(2, 2),
                     FLOATS((float)(1 / (1 + e)), (float)(3 / (3 + e)), (float)(e / (1 + e)),
                            (float)(e / (3 + e))),
                     0, 1e-6);
        CHECK_TENSOR(o[2], 2, SHAPE(2, 3), FLOATS(0.5f, 0.5f, 0, 0.25f, 0.75f, 0), 1e-4, 0);
        free_tensors(o, 3);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

static void test_norms(void)
{
    tgraph t;
    tg_init(&t, "norms");
    ir_graph *g = t.g;
    ir_graph_add_sym(g, "B");
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, SYM(0), 4));
    ir_node *w = wt_(&t, "w", ty(IR_F32, 1, 4));
    ir_node *b = wt_(&t, "b", ty(IR_F32, 1, 4));
    ir_graph_add_output(g, "rms0", ir_rmsnorm(g, x, w, 0.0, NOLOC), NOLOC);
    ir_graph_add_output(g, "rms5", ir_rmsnorm(g, x, w, 5.0, NOLOC), NOLOC);
    ir_graph_add_output(g, "ln", ir_layernorm(g, x, w, b, 0.0, NOLOC), NOLOC);
    ir_graph_add_output(g, "lnnb", ir_layernorm(g, x, w, NULL, 0.0, NOLOC), NOLOC);
    ir_graph_add_output(g, "lneps", ir_layernorm(g, x, w, b, 1.0, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[3] = {
        tf(IR_F32, 2, SHAPE(3, 4), FLOATS(2, -2, 2, -2, 3, 4, 0, 0, 1, 2, 3, 4)),
        tf(IR_F32, 1, SHAPE(4), FLOATS(1, 2, 3, 4)),
        tf(IR_F32, 1, SHAPE(4), FLOATS(0, 1, 0, -1)),
    };
    ir_tensor o[5];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(3), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* row 0: mean(x^2) = 4 -> x/2 * w; row 1: mean = 25/4 -> x/2.5 * w;
         * row 2: mean = 30/4 = 7.5 -> x/sqrt(7.5) * w */
        double r75 = 1 / sqrt(7.5);
        CHECK_TENSOR(o[0], 2, SHAPE(3, 4),
                     FLOATS(1, -2, 3, -4, 1.2f, 3.2f, 0, 0, (float)r75, (float)(4 * r75),
                            (float)(9 * r75), (float)(16 * r75)),
                     0, 1e-6);
        /* eps = 5: row 0: 1/sqrt(9) = 1/3; row 1: 1/sqrt(11.25); row 2: 1/sqrt(12.5) */
        double r1 = 1 / sqrt(11.25), r2 = 1 / sqrt(12.5);
        CHECK_TENSOR(o[1], 2, SHAPE(3, 4),
                     FLOATS(2.0f / 3, -4.0f / 3, 2, -8.0f / 3, (float)(3 * r1), (float)(8 * r1), 0, 0,
                            (float)r2, (float)(4 * r2), (float)(9 * r2), (float)(16 * r2)),
                     0, 1e-6);
        /* layernorm: row 0 mean 0 var 4 -> [1,-1,1,-1]; row 1 mean 1.75,
         * var (1.5625 + 5.0625 + 3.0625 + 3.0625)/4 = 3.1875;
         * row 2 mean 2.5 var 1.25 -> [-1.5,-0.5,0.5,1.5]/sqrt(1.25) */
        double s1 = 1 / sqrt(3.1875), s2 = 1 / sqrt(1.25);
        float n[12] = {1, -1, 1, -1, (float)(1.25 * s1), (float)(2.25 * s1), (float)(-1.75 * s1),
                       (float)(-1.75 * s1), (float)(-1.5 * s2), (float)(-0.5 * s2),
                       (float)(0.5 * s2), (float)(1.5 * s2)};
        float wv[4] = {1, 2, 3, 4}, bv[4] = {0, 1, 0, -1}, with_b[12], no_b[12];
        for (int k = 0; k < 12; k++) {
            no_b[k] = n[k] * wv[k % 4];
            with_b[k] = no_b[k] + bv[k % 4];
        }
        CHECK_TENSOR(o[2], 2, SHAPE(3, 4), with_b, 1e-6, 1e-6);
        CHECK_TENSOR(o[3], 2, SHAPE(3, 4), no_b, 1e-6, 1e-6);
        /* eps = 1, row 0: var 4 -> x / sqrt(5) */
        double r5 = 1 / sqrt(5.0);
        CHECK_NEAR(o[4].f[0], 2 * r5 * 1 + 0, 0, 1e-6);
        CHECK_NEAR(o[4].f[1], -2 * r5 * 2 + 1, 0, 1e-6);
        CHECK_NEAR(o[4].f[3], -2 * r5 * 4 - 1, 0, 1e-6);
        free_tensors(o, 5);
    }
    free_tensors(p, 3);
    tg_free(&t);
}

/* x * rsqrt(mean(x * x, -1, keepdim) + eps) * w equals rmsnorm(x, w, eps). */
static void test_rmsnorm_matches_primitives(void)
{
    tgraph t;
    tg_init(&t, "rms_prim");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 3, 2, 3, 8));
    ir_node *w = wt_(&t, "w", ty(IR_F32, 1, 8));
    ir_node *ms = ir_reduce(g, IR_OP_MEAN, ir_binary(g, IR_OP_MUL, x, x, NOLOC), 4, true, NOLOC);
    ir_node *r = ir_unary(g, IR_OP_RSQRT, ir_binary(g, IR_OP_ADD, ms, ir_const(g, 1e-5, IR_F32, NOLOC), NOLOC), NOLOC);
    ir_graph_add_output(g, "prim", ir_binary(g, IR_OP_MUL, ir_binary(g, IR_OP_MUL, x, r, NOLOC), w, NOLOC), NOLOC);
    ir_graph_add_output(g, "fused", ir_rmsnorm(g, x, w, 1e-5, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    float xv[48], wv[8];
    for (int i = 0; i < 48; i++) xv[i] = (float)sin(i * 0.91) * 3;
    for (int i = 0; i < 8; i++) wv[i] = 1 + 0.1f * (float)i;
    ir_tensor p[2] = {tf(IR_F32, 3, SHAPE(2, 3, 8), xv), tf(IR_F32, 1, SHAPE(8), wv)};
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[1], 3, SHAPE(2, 3, 8), o[0].f, 1e-6, 1e-6);
        free_tensors(o, 2);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

int main(void)
{
    test_rmsnorm_matches_primitives();
    test_reductions();
    test_reduce_bf16();
    test_softmax();
    test_norms();
    return CHECK_DONE();
}
