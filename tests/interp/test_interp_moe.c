/* tests/interp/test_interp_moe.c — the mixture-of-experts ops, worked out by
 * hand: topk's values and indices (largest first, ties to the lower index),
 * expert_linear over [E, N, K] weights with a row shared by the slots and
 * with one row per slot, the two routing conventions (Mixtral: softmax over
 * the chosen logits; Qwen-MoE: softmax over all, then the chosen renormalized)
 * and a whole top-2 MoE FFN against the dense sum over the chosen experts,
 * and the run-time error of an expert index out of range; and the per-head
 * q/k RMSNorm of Qwen3 (rmsnorm over each head). */
#include "interp_test.h"

/* x = [[3, 1, 4, 1, 5], [2, 7, 1, 8, 2]]: top 3 = [5, 4, 3] at [4, 2, 0] and
 * [8, 7, 2] at [3, 1, 0] (2 at index 0 and 4: the lower index first). */
static void test_topk(void)
{
    tgraph t;
    tg_init(&t, "topk");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, 2, 5));
    ir_node *v = ir_topk(g, x, 3, false, NOLOC), *i = ir_topk(g, x, 3, true, NOLOC);
    ir_graph_add_output(g, "v", v, NOLOC);
    ir_graph_add_output(g, "i", i, NOLOC);
    CHECK(tg_ok(&t));
    CHECK(v && v->type.dtype == IR_F32 && i && i->type.dtype == IR_I32 && i->attrs.topk == 3 && i->attrs.indices);
    ir_tensor p[1] = {tf(IR_F32, 2, SHAPE(2, 5), FLOATS(3, 1, 4, 1, 5, 2, 7, 1, 8, 2))};
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 2, SHAPE(2, 3), FLOATS(5, 4, 3, 8, 7, 2), 0, 0);
        CHECK(o[1].i && o[1].i[0] == 4 && o[1].i[1] == 2 && o[1].i[2] == 0 && o[1].i[3] == 3 && o[1].i[4] == 1 &&
              o[1].i[5] == 0);
        free_tensors(o, 2);
    }
    free_tensors(p, 1);
    /* k beyond the axis, k < 1, an i32 x: builder errors */
    CHECK(ir_topk(g, x, 6, false, NOLOC) == NULL && ir_topk(g, x, 0, true, NOLOC) == NULL);
    ir_node *xi = in_(&t, "xi", ty(IR_I32, 1, 4));
    CHECK(ir_topk(g, xi, 1, false, NOLOC) == NULL);
    tg_free(&t);
}

/* E = 3 experts, N = 2, K = 2: w[e] = [[e, 1], [0, e + 1]] so
 * w[e] @ [a, b] = [e a + b, (e + 1) b]. x = [1, 2] shared by slots chosen
 * [2, 0] -> [[2 + 2, 3 * 2], [0 + 2, 1 * 2]] = [[4, 6], [2, 2]]; per slot
 * x = [[1, 2], [3, 4]] with [1, 1] -> [[1 + 2, 2 * 2], [3 + 4, 2 * 4]]. */
static void test_expert_linear(void)
{
    tgraph t;
    tg_init(&t, "expert_linear");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, 1, 2));
    ir_node *xs = in_(&t, "xs", ty(IR_F32, 3, 1, 2, 2));
    ir_node *w = wt_(&t, "w", ty(IR_F32, 3, 3, 2, 2));
    ir_node *i1 = in_(&t, "i1", ty(IR_I32, 2, 1, 2));
    ir_node *i2 = in_(&t, "i2", ty(IR_I32, 2, 1, 2));
    ir_node *shared = ir_expert_linear(g, x, w, i1, NOLOC), *per = ir_expert_linear(g, xs, w, i2, NOLOC);
    ir_graph_add_output(g, "shared", shared, NOLOC);
    ir_graph_add_output(g, "per", per, NOLOC);
    CHECK(tg_ok(&t));
    CHECK(shared && shared->type.rank == 3 && per && per->type.rank == 3);
    ir_tensor p[5] = {
        tf(IR_F32, 2, SHAPE(1, 2), FLOATS(1, 2)),
        tf(IR_F32, 3, SHAPE(1, 2, 2), FLOATS(1, 2, 3, 4)),
        tf(IR_F32, 3, SHAPE(3, 2, 2), FLOATS(0, 1, 0, 1, 1, 1, 0, 2, 2, 1, 0, 3)),
        ti(2, SHAPE(1, 2), INTS(2, 0)),
        ti(2, SHAPE(1, 2), INTS(1, 1)),
    };
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 3, SHAPE(1, 2, 2), FLOATS(4, 6, 2, 2), 0, 0);
        CHECK_TENSOR(o[1], 3, SHAPE(1, 2, 2), FLOATS(3, 4, 7, 8), 0, 0);
        free_tensors(o, 2);
    }
    /* an expert index out of range is a run-time error naming it */
    p[3].i[1] = 3;
    rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc != 0 && strstr(err, "expert 3 at index [0, 1] is out of range [0, 3)"), "%s", err);
    free_tensors(p, 5);
    /* shapes that fit neither form, a K that differs, a float idx */
    ir_node *bad_x = in_(&t, "bx", ty(IR_F32, 2, 1, 3));
    CHECK(ir_expert_linear(g, bad_x, w, i1, NOLOC) == NULL);
    ir_node *x4 = in_(&t, "x4", ty(IR_F32, 4, 1, 2, 2, 2));
    CHECK(ir_expert_linear(g, x4, w, i1, NOLOC) == NULL);
    ir_node *fi = in_(&t, "fi", ty(IR_F32, 2, 1, 2));
    CHECK(ir_expert_linear(g, x, w, fi, NOLOC) == NULL);
    tg_free(&t);
}

/* The two routing conventions on logits [ln 1, ln 2, ln 3, ln 4], top 2:
 *   Mixtral, softmax over the chosen (4, 3): [4/7, 3/7];
 *   Qwen-MoE, softmax over all [1, 2, 3, 4] / 10, top 2 [0.4, 0.3], then
 *   renormalized: [4/7, 3/7] as well (softmax is monotone and its ratios
 *   are those of the exponentials); without renormalizing [0.4, 0.3].
 * Then a top-2 FFN with a scalar "expert" e(x) = (e + 1) x (N = K = 1):
 * x = 2 chooses experts 3 and 2: 4/7 * 8 + 3/7 * 6 = 50/7. */
static void test_routing(void)
{
    tgraph t;
    tg_init(&t, "routing");
    ir_graph *g = t.g;
    ir_node *l = in_(&t, "logits", ty(IR_F32, 2, 1, 4));
    ir_node *x = in_(&t, "x", ty(IR_F32, 2, 1, 1));
    ir_node *w = wt_(&t, "w", ty(IR_F32, 3, 4, 1, 1));
    ir_node *cv = ir_topk(g, l, 2, false, NOLOC), *ci = ir_topk(g, l, 2, true, NOLOC);
    ir_node *mixtral = ir_softmax(g, cv, 1, NOLOC);
    ir_node *all = ir_softmax(g, l, 1, NOLOC);
    ir_node *av = ir_topk(g, all, 2, false, NOLOC);
    ir_node *qwen = ir_binary(g, IR_OP_DIV, av, ir_reduce(g, IR_OP_SUM, av, 1u << 1, true, NOLOC), NOLOC);
    ir_node *y = ir_expert_linear(g, x, w, ci, NOLOC); /* [1, 2, 1] */
    ir_dim sh[3] = {ir_dim_const(1), ir_dim_const(2), ir_dim_const(1)};
    ir_node *gw = ir_reshape(g, mixtral, 3, sh, NOLOC);
    ir_node *ffn = ir_reduce(g, IR_OP_SUM, ir_binary(g, IR_OP_MUL, y, gw, NOLOC), 1u << 1, false, NOLOC);
    ir_graph_add_output(g, "mixtral", mixtral, NOLOC);
    ir_graph_add_output(g, "qwen", qwen, NOLOC);
    ir_graph_add_output(g, "plain", av, NOLOC);
    ir_graph_add_output(g, "ffn", ffn, NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[3] = {
        tf(IR_F32, 2, SHAPE(1, 4), (float[]){0, (float)log(2.0), (float)log(3.0), (float)log(4.0)}),
        tf(IR_F32, 2, SHAPE(1, 1), FLOATS(2)),
        tf(IR_F32, 3, SHAPE(4, 1, 1), FLOATS(1, 2, 3, 4)),
    };
    ir_tensor o[4];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 2, SHAPE(1, 2), FLOATS(4.0f / 7, 3.0f / 7), 1e-6, 1e-6);
        CHECK_TENSOR(o[1], 2, SHAPE(1, 2), FLOATS(4.0f / 7, 3.0f / 7), 1e-6, 1e-6);
        CHECK_TENSOR(o[2], 2, SHAPE(1, 2), FLOATS(0.4f, 0.3f), 1e-6, 1e-6);
        CHECK_TENSOR(o[3], 2, SHAPE(1, 1), FLOATS(50.0f / 7), 1e-5, 1e-6);
        free_tensors(o, 4);
    }
    free_tensors(p, 3);
    tg_free(&t);
}

/* Qwen3's per-head q/k norm is rmsnorm over each head's last axis with one
 * [HD] weight: heads [3, 4] and [0, 2] with w = [1, 2], eps 0: rms 5/sqrt(2)
 * and sqrt(2) -> [3 sqrt2/5, 8 sqrt2/5] and [0, 2 sqrt2]. */
static void test_per_head_norm(void)
{
    tgraph t;
    tg_init(&t, "qk_norm");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "q", ty(IR_F32, 4, 1, 1, 2, 2));
    ir_node *w = wt_(&t, "qn", ty(IR_F32, 1, 2));
    ir_graph_add_output(g, "y", ir_rmsnorm(g, x, w, 0.0, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[2] = {tf(IR_F32, 4, SHAPE(1, 1, 2, 2), FLOATS(3, 4, 0, 2)), tf(IR_F32, 1, SHAPE(2), FLOATS(1, 2))};
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        float r2 = (float)sqrt(2.0);
        CHECK_TENSOR(o[0], 4, SHAPE(1, 1, 2, 2), FLOATS(3 * r2 / 5, 8 * r2 / 5, 0, 2 * r2), 1e-6, 1e-6);
        free_tensors(o, 1);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

int main(void)
{
    test_per_head_norm();
    test_topk();
    test_expert_linear();
    test_routing();
    return CHECK_DONE();
}
