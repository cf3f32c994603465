/* tests/interp/test_interp_errors.c — what ir_interp_run refuses: parameters
 * of the wrong shape, rank or dtype, missing dims, negative or absurd sizes.
 * Every failure returns -1 with a message, leaves the outputs empty and the
 * states untouched (and, under ASan, leaks nothing). */
#include "interp_test.h"

static void test_param_checks(void)
{
    tgraph t;
    tg_init(&t, "params");
    ir_graph *g = t.g;
    int B = ir_graph_add_sym(g, "B");
    ir_node *x = in_(&t, "x", ty(IR_BF16, 3, SYM(B), 3, 8));
    ir_node *w = wt_(&t, "w", ty(IR_BF16, 1, 8));
    ir_node *s = st_(&t, "s", ty(IR_BF16, 1, 8));
    ir_node *y = ir_binary(g, IR_OP_MUL, x, w, NOLOC);
    ir_graph_add_output(g, "y", y, NOLOC);
    ir_graph_set_state(g, s, ir_binary(g, IR_OP_ADD, s, w, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[3] = {
        tf(IR_BF16, 3, SHAPE(2, 3, 7), NULL),
        tf(IR_BF16, 1, SHAPE(8), FLOATS(1, 1, 1, 1, 1, 1, 1, 1)),
        tf(IR_BF16, 1, SHAPE(8), FLOATS(5, 5, 5, 5, 5, 5, 5, 5)),
    };
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "input 'x': expected bf16[2, 3, 8], got bf16[2, 3, 7]");
    CHECK(o[0].f == NULL && o[0].i == NULL);
    ir_tensor_free(&p[0]);

    p[0] = tf(IR_F32, 3, SHAPE(2, 3, 8), NULL);
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "input 'x': expected bf16[2, 3, 8], got f32[2, 3, 8]");
    ir_tensor_free(&p[0]);

    p[0] = tf(IR_BF16, 2, SHAPE(6, 8), NULL);
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "input 'x': expected bf16[2, 3, 8], got bf16[6, 8]");
    ir_tensor_free(&p[0]);

    p[0] = tf(IR_BF16, 3, SHAPE(2, 3, 8), NULL);
    ir_tensor_free(&p[1]);
    p[1] = ti(1, SHAPE(8), NULL);
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "weight 'w': expected bf16[8], got i32[8]");
    ir_tensor_free(&p[1]);
    p[1] = tf(IR_BF16, 1, SHAPE(8), FLOATS(1, 1, 1, 1, 1, 1, 1, 1));

    /* a different B is fine as long as the tensors agree with it */
    rc = ir_interp_run(g, SHAPE(3), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "input 'x': expected bf16[3, 3, 8], got bf16[2, 3, 8]");
    rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_ERR(rc, err, "dims");
    CHECK(p[2].f[0] == 5); /* no state written by a failed run */

    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(o[0].dtype == IR_BF16 && o[0].rank == 3 && o[0].shape[0] == 2);
        CHECK(p[2].f[0] == 6 && p[2].f[7] == 6); /* s + w */
        free_tensors(o, 1);
    }
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK(rc == 0 && p[2].f[3] == 7);
    if (rc == 0) free_tensors(o, 1);

    /* a tiny error buffer is filled but never overrun */
    char small[8];
    rc = ir_interp_run(g, SHAPE(-1), p, o, small, sizeof small);
    CHECK(rc == -1 && strlen(small) == 7);
    rc = ir_interp_run(g, SHAPE(-1), p, o, NULL, 0);
    CHECK(rc == -1);
    free_tensors(p, 3);
    tg_free(&t);
}

/* Sizes that a reference interpreter must refuse rather than try. */
static void test_sizes(void)
{
    tgraph t;
    tg_init(&t, "sizes");
    ir_graph *g = t.g;
    int S = ir_graph_add_sym(g, "S");
    ir_node *m = ir_causal_mask(g, ir_dim_sym(S), ir_dim_sym(S), IR_F32, NOLOC);
    ir_graph_add_output(g, "m", ir_reduce(g, IR_OP_SUM, m, 3, false, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(100000), NULL, o, err, sizeof err); /* 40 GB */
    CHECK_ERR(rc, err, "too large for the reference interpreter");
    CHECK_ERR(rc, err, "causal_mask");
    rc = ir_interp_run(g, SHAPE((int64_t)1 << 40), NULL, o, err, sizeof err); /* numel overflows */
    CHECK_ERR(rc, err, "too large for the reference interpreter");
    rc = ir_interp_run(g, SHAPE(INT64_MAX), NULL, o, err, sizeof err);
    CHECK(rc == -1);
    rc = ir_interp_run(g, SHAPE(-2), NULL, o, err, sizeof err);
    CHECK_ERR(rc, err, "negative");
    rc = ir_interp_run(g, SHAPE(3), NULL, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(o[0].rank == 0 && o[0].f[0] == -INFINITY);
        free_tensors(o, 1);
    }
    /* S = 0: empty tensors are fine */
    rc = ir_interp_run(g, SHAPE(0), NULL, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(o[0].f[0] == 0);
        free_tensors(o, 1);
    }
    tg_free(&t);

    ir_tensor x;
    CHECK(!ir_tensor_alloc(&x, IR_F32, 2, SHAPE(INT64_MAX, 2)));
    CHECK(x.f == NULL && x.i == NULL);
    CHECK(!ir_tensor_alloc(&x, IR_F32, 1, SHAPE(-1)));
    CHECK(!ir_tensor_alloc(&x, IR_F32, IR_MAX_RANK + 1, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1)));
    CHECK(ir_tensor_alloc(&x, IR_I32, 0, NULL));
    CHECK(x.i && x.i[0] == 0 && ir_tensor_numel(&x) == 1);
    ir_tensor_free(&x);
    ir_tensor_free(&x); /* idempotent */
    CHECK(ir_tensor_alloc(&x, IR_F16, 2, SHAPE(3, 0)));
    CHECK(x.f != NULL && ir_tensor_numel(&x) == 0);
    ir_tensor_free(&x);
}

/* The error names the node: its id, op, variable name and source line. */
static void test_message_names_node(void)
{
    tgraph t;
    tg_init(&t, "named");
    ir_graph *g = t.g;
    ir_node *tab = wt_(&t, "tok", ty(IR_F32, 2, 2, 2));
    ir_node *ids = in_(&t, "ids", ty(IR_I32, 1, 1));
    src_loc loc = {"model.kiln", 7, 9, 12};
    ir_node *e = ir_embedding(g, tab, ids, loc);
    CHECK(e != NULL);
    if (e) e->name = "emb";
    ir_graph_add_output(g, "e", e, NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[2] = {tf(IR_F32, 2, SHAPE(2, 2), NULL), ti(1, SHAPE(1), INTS(2))};
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_ERR(rc, err, "%2 = embedding ('emb' at model.kiln:7:9): id 2 at index [0] is out of range [0, 2)");
    free_tensors(p, 2);
    tg_free(&t);
}

int main(void)
{
    test_param_checks();
    test_sizes();
    test_message_names_node();
    return CHECK_DONE();
}
