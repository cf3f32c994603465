/* tests/interp/test_interp_movement.c — reshape, permute, slice (symbolic
 * bounds), concat, embedding (and its out-of-range error). */
#include "interp_test.h"

static void test_reshape_permute(void)
{
    tgraph t;
    tg_init(&t, "movement");
    ir_graph *g = t.g;
    int B = ir_graph_add_sym(g, "B");
    ir_node *x = in_(&t, "x", ty(IR_F32, 3, 2, 3, 4));
    ir_node *y = in_(&t, "y", ty(IR_I32, 2, SYM(B), 3));
    ir_dim b3;
    CHECK(ir_dim_mul(ir_dim_sym(B), ir_dim_const(3), &b3));
    ir_graph_add_output(g, "r", ir_reshape(g, x, 2, (ir_dim[]){ir_dim_const(6), ir_dim_const(4)}, NOLOC), NOLOC);
    ir_graph_add_output(g, "p", ir_permute(g, x, (int[]){2, 0, 1}, NOLOC), NOLOC);
    ir_graph_add_output(g, "ry", ir_reshape(g, y, 1, &b3, NOLOC), NOLOC);
    ir_graph_add_output(g, "py", ir_permute(g, y, (int[]){1, 0}, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    float xv[24];
    for (int k = 0; k < 24; k++) xv[k] = (float)k;
    ir_tensor p[2] = {tf(IR_F32, 3, SHAPE(2, 3, 4), xv), ti(2, SHAPE(2, 3), INTS(1, 2, 3, -4, -5, -6))};
    ir_tensor o[4];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 2, SHAPE(6, 4), xv, 0, 0);
        /* p[i][j][k] = x[j][k][i] = 12j + 4k + i */
        float want[24];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                for (int k = 0; k < 3; k++) want[(i * 2 + j) * 3 + k] = (float)(12 * j + 4 * k + i);
        CHECK_TENSOR(o[1], 3, SHAPE(4, 2, 3), want, 0, 0);
        CHECK(o[2].dtype == IR_I32 && o[2].rank == 1 && o[2].shape[0] == 6);
        int32_t ry[] = {1, 2, 3, -4, -5, -6}, py[] = {1, -4, 2, -5, 3, -6};
        for (int k = 0; k < 6; k++) CHECK(o[2].i[k] == ry[k]);
        CHECK(o[3].dtype == IR_I32 && o[3].shape[0] == 3 && o[3].shape[1] == 2);
        for (int k = 0; k < 6; k++) CHECK(o[3].i[k] == py[k]);
        free_tensors(o, 4);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

static void test_slice_concat(void)
{
    tgraph t;
    tg_init(&t, "slice");
    ir_graph *g = t.g;
    int T = ir_graph_add_sym(g, "T"), S = ir_graph_add_sym(g, "S");
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, 2, SYM(T)));
    ir_dim tm1;
    CHECK(ir_dim_sub(ir_dim_sym(T), ir_dim_const(1), &tm1));
    /* columns [1, T-1) and rows [0, 1) */
    ir_graph_add_output(g, "mid", ir_slice(g, x, 1, ir_dim_const(1), tm1, NOLOC), NOLOC);
    ir_graph_add_output(g, "row", ir_slice(g, x, 0, ir_dim_const(1), ir_dim_const(2), NOLOC), NOLOC);
    ir_graph_add_output(g, "head", ir_slice(g, x, 1, ir_dim_const(0), ir_dim_sym(S), NOLOC), NOLOC);
    ir_node *a = in_(&t, "a", ty(IR_F32, 2, 2, 1));
    ir_node *b = in_(&t, "b", ty(IR_F32, 2, 2, 2));
    ir_graph_add_output(g, "c1", ir_concat(g, 3, (ir_node *[]){a, b, a}, 1, NOLOC), NOLOC);
    ir_node *bt = ir_permute(g, b, (int[]){1, 0}, NOLOC);
    ir_node *at = ir_reshape(g, a, 2, (ir_dim[]){ir_dim_const(1), ir_dim_const(2)}, NOLOC);
    ir_graph_add_output(g, "c0", ir_concat(g, 2, (ir_node *[]){at, bt}, 0, NOLOC), NOLOC);
    ir_graph_add_output(g, "c", ir_concat(g, 1, (ir_node *[]){a}, 0, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[3] = {
        tf(IR_F32, 2, SHAPE(2, 5), FLOATS(0, 1, 2, 3, 4, 10, 11, 12, 13, 14)),
        tf(IR_F32, 2, SHAPE(2, 1), FLOATS(-1, -2)),
        tf(IR_F32, 2, SHAPE(2, 2), FLOATS(5, 6, 7, 8)),
    };
    ir_tensor o[6];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(5, 2), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 2, SHAPE(2, 3), FLOATS(1, 2, 3, 11, 12, 13), 0, 0);
        CHECK_TENSOR(o[1], 2, SHAPE(1, 5), FLOATS(10, 11, 12, 13, 14), 0, 0);
        CHECK_TENSOR(o[2], 2, SHAPE(2, 2), FLOATS(0, 1, 10, 11), 0, 0);
        CHECK_TENSOR(o[3], 2, SHAPE(2, 4), FLOATS(-1, 5, 6, -1, -2, 7, 8, -2), 0, 0);
        CHECK_TENSOR(o[4], 2, SHAPE(3, 2), FLOATS(-1, -2, 5, 7, 6, 8), 0, 0);
        CHECK_TENSOR(o[5], 2, SHAPE(2, 1), FLOATS(-1, -2), 0, 0);
        free_tensors(o, 6);
    }
    /* S = 6 > T = 5: the slice end is past the axis at run time */
    rc = ir_interp_run(g, SHAPE(5, 6), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "slice [0, 6) out of range for axis 1 of size 5");
    CHECK(o[0].f == NULL);
    free_tensors(p, 3);
    tg_free(&t);
}

static void test_embedding(void)
{
    tgraph t;
    tg_init(&t, "embedding");
    ir_graph *g = t.g;
    int B = ir_graph_add_sym(g, "B");
    ir_node *tab = wt_(&t, "tok", ty(IR_BF16, 2, 4, 2));
    ir_node *ids = in_(&t, "ids", ty(IR_I32, 2, SYM(B), 2));
    ir_node *e = ir_embedding(g, tab, ids, NOLOC);
    ir_graph_add_output(g, "e", e, NOLOC);
    CHECK(tg_ok(&t));
    CHECK(e && e->type.rank == 3 && e->type.dtype == IR_BF16);
    ir_tensor p[2] = {
        tf(IR_BF16, 2, SHAPE(4, 2), FLOATS(0, 1, 10, 11, 20, 21, 30, 31)),
        ti(2, SHAPE(2, 2), INTS(3, 0, 1, 3)),
    };
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 3, SHAPE(2, 2, 2), FLOATS(30, 31, 0, 1, 10, 11, 30, 31), 0, 0);
        free_tensors(o, 1);
    }
    p[1].i[2] = 4;
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "id 4 at index [1, 0] is out of range [0, 4)");
    CHECK_ERR(rc, err, "embedding");
    p[1].i[2] = 1;
    p[1].i[1] = -1;
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "id -1 at index [0, 1] is out of range [0, 4)");
    free_tensors(p, 2);
    tg_free(&t);
}

int main(void)
{
    test_reshape_permute();
    test_slice_concat();
    test_embedding();
    return CHECK_DONE();
}
