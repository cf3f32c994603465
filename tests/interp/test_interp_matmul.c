/* tests/interp/test_interp_matmul.c — matmul (with broadcast batch axes) and
 * linear (with and without bias, rank 2 and 3 inputs, bf16). */
#include "interp_test.h"

static void test_matmul(void)
{
    tgraph t;
    tg_init(&t, "matmul");
    ir_graph *g = t.g;
    ir_node *a = in_(&t, "a", ty(IR_F32, 2, 2, 3));
    ir_node *b = in_(&t, "b", ty(IR_F32, 2, 3, 2));
    ir_node *c = in_(&t, "c", ty(IR_F32, 4, 2, 1, 2, 2));
    ir_node *d = in_(&t, "d", ty(IR_F32, 3, 3, 2, 2));
    ir_graph_add_output(g, "ab", ir_matmul(g, a, b, NOLOC), NOLOC);
    ir_graph_add_output(g, "cd", ir_matmul(g, c, d, NOLOC), NOLOC);
    /* rank 2 @ rank 3: the left operand is shared by every batch */
    ir_node *sq = ir_slice(g, ir_reshape(g, a, 2, (ir_dim[]){ir_dim_const(3), ir_dim_const(2)}, NOLOC), 0,
                           ir_dim_const(0), ir_dim_const(2), NOLOC); /* [[1,2],[3,4]] */
    ir_graph_add_output(g, "sd", ir_matmul(g, sq, d, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    float cv[8], dv[12];
    for (int k = 0; k < 8; k++) cv[k] = (float)(k - 3);
    for (int k = 0; k < 12; k++) dv[k] = (float)(k % 5) - 1.5f;
    ir_tensor p[4] = {
        tf(IR_F32, 2, SHAPE(2, 3), FLOATS(1, 2, 3, 4, 5, 6)),
        tf(IR_F32, 2, SHAPE(3, 2), FLOATS(7, 8, 9, 10, 11, 12)),
        tf(IR_F32, 4, SHAPE(2, 1, 2, 2), cv),
        tf(IR_F32, 3, SHAPE(3, 2, 2), dv),
    };
    ir_tensor o[3];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]] = [[58,64],[139,154]] */
        CHECK_TENSOR(o[0], 2, SHAPE(2, 2), FLOATS(58, 64, 139, 154), 0, 0);
        /* cd[i][j] = c[i][0] @ d[j], naive */
        float want[2 * 3 * 4], want2[12];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int m = 0; m < 2; m++)
                    for (int n = 0; n < 2; n++) {
                        float s = 0;
                        for (int k = 0; k < 2; k++) s += cv[i * 4 + m * 2 + k] * dv[j * 4 + k * 2 + n];
                        want[((i * 3 + j) * 2 + m) * 2 + n] = s;
                    }
        CHECK_TENSOR(o[1], 4, SHAPE(2, 3, 2, 2), want, 0, 0);
        float sv[4] = {1, 2, 3, 4};
        for (int j = 0; j < 3; j++)
            for (int m = 0; m < 2; m++)
                for (int n = 0; n < 2; n++)
                    want2[(j * 2 + m) * 2 + n] = sv[m * 2] * dv[j * 4 + n] + sv[m * 2 + 1] * dv[j * 4 + 2 + n];
        CHECK_TENSOR(o[2], 3, SHAPE(3, 2, 2), want2, 0, 0);
        free_tensors(o, 3);
    }
    free_tensors(p, 4);
    tg_free(&t);
}

static void test_linear(void)
{
    tgraph t;
    tg_init(&t, "linear");
    ir_graph *g = t.g;
    ir_graph_add_sym(g, "S");
    ir_node *x = in_(&t, "x", ty(IR_F32, 3, 1, SYM(0), 3));
    ir_node *w = wt_(&t, "w", ty(IR_F32, 2, 2, 3));
    ir_node *b = wt_(&t, "b", ty(IR_F32, 1, 2));
    ir_node *xb = in_(&t, "xb", ty(IR_BF16, 2, 1, 4));
    ir_node *wb = wt_(&t, "wb", ty(IR_BF16, 2, 1, 4));
    ir_graph_add_output(g, "nobias", ir_linear(g, x, w, NULL, NOLOC), NOLOC);
    ir_graph_add_output(g, "bias", ir_linear(g, x, w, b, NOLOC), NOLOC);
    ir_graph_add_output(g, "bf", ir_linear(g, xb, wb, NULL, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[5] = {
        tf(IR_F32, 3, SHAPE(1, 2, 3), FLOATS(1, 2, 3, 4, 5, 6)),
        tf(IR_F32, 2, SHAPE(2, 3), FLOATS(1, 0, -1, 2, 1, 0)),
        tf(IR_F32, 1, SHAPE(2), FLOATS(0.5f, -1)),
        /* bf16 dot: 256 + 1 + 1 - 256 would lose both ones in a bf16 accumulator */
        tf(IR_BF16, 2, SHAPE(1, 4), FLOATS(256, 1, 1, -256)),
        tf(IR_BF16, 2, SHAPE(1, 4), FLOATS(1, 1, 1, 1)),
    };
    ir_tensor o[3];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* row [1,2,3]: [1-3, 2+2] = [-2, 4]; row [4,5,6]: [4-6, 8+5] = [-2, 13] */
        CHECK_TENSOR(o[0], 3, SHAPE(1, 2, 2), FLOATS(-2, 4, -2, 13), 0, 0);
        CHECK_TENSOR(o[1], 3, SHAPE(1, 2, 2), FLOATS(-1.5f, 3, -1.5f, 12), 0, 0);
        CHECK(o[2].dtype == IR_BF16);
        CHECK_TENSOR(o[2], 2, SHAPE(1, 1), FLOATS(2), 0, 0);
        free_tensors(o, 3);
    }
    free_tensors(p, 5);
    tg_free(&t);
}

int main(void)
{
    test_matmul();
    test_linear();
    return CHECK_DONE();
}
