/* tests/interp/test_interp_attention.c — rope, attention and cache_write,
 * worked out by hand: exact rotation angles, 2- and 3-key softmaxes, GQA head
 * mapping, causal masks with position offsets, the default offset T - S,
 * the run-time position errors, and the RoPE frequency scalings (linear,
 * llama3, YaRN) against values computed from the published formulas,
 * partial rotary (dims=R: the first R rotate as a head of R), attention's
 * sliding window and logit soft-capping. */
#include "interp_test.h"

/* HD = 2: out = [x0 cos p - x1 sin p, x1 cos p + x0 sin p] (f = theta^0 = 1). */
static void test_rope_hd2(void)
{
    tgraph t;
    tg_init(&t, "rope2");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 4, 1, 3, 1, 2));
    ir_node *pos = in_(&t, "pos", ty(IR_I32, 1, 1));
    ir_graph_add_output(g, "nopos", ir_rope(g, x, NULL, 10000.0, NOLOC), NOLOC);
    ir_graph_add_output(g, "pos", ir_rope(g, x, pos, 10000.0, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[2] = {tf(IR_F32, 4, SHAPE(1, 3, 1, 2), FLOATS(1, 0, 1, 0, 0, 1)), ti(1, SHAPE(1), INTS(2))};
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        const float c1 = 0.5403023059f, s1 = 0.8414709848f, c2 = -0.4161468365f, s2 = 0.9092974268f;
        const float c3 = -0.9899924966f, s3 = 0.1411200081f, c4 = -0.6536436209f, s4 = -0.7568024953f;
        /* positions 0, 1, 2: [1,0] -> [1,0]; [1,0] at 1 -> [c1, s1]; [0,1] at 2 -> [-s2, c2] */
        CHECK_TENSOR(o[0], 4, SHAPE(1, 3, 1, 2), FLOATS(1, 0, c1, s1, -s2, c2), 1e-7, 1e-6);
        /* pos = 2: positions 2, 3, 4 */
        CHECK_TENSOR(o[1], 4, SHAPE(1, 3, 1, 2), FLOATS(c2, s2, c3, s3, -s4, c4), 1e-7, 1e-6);
        free_tensors(o, 2);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

/* Partial rotary, R = 4 of HD = 6, theta = 4/pi^2: the first four dims rotate
 * as a head of 4 (f0 = 1, f1 = theta^(-2/4) = pi/2), dims 4 and 5 pass
 * through. At p = 1 pair (0, 2) turns by 1 radian, pair (1, 3) by 90
 * degrees. With linear scaling factor 2 at p = 2 the angles are the same
 * (the scaling applies to the table of the rotary dims). */
static void test_rope_partial(void)
{
    tgraph t;
    tg_init(&t, "rope_partial");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 4, 1, 1, 1, 6));
    ir_node *pos = in_(&t, "pos", ty(IR_I32, 1, 1));
    ir_rope_attrs r = {.rotary_dims = 4};
    ir_rope_attrs lin = {.scaling = IR_ROPE_LINEAR, .factor = 2, .rotary_dims = 4};
    ir_graph_add_output(g, "y", ir_rope_scaled(g, x, pos, 4.0 / (M_PI * M_PI), &r, NOLOC), NOLOC);
    ir_graph_add_output(g, "z", ir_rope_scaled(g, x, NULL, 4.0 / (M_PI * M_PI), &lin, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    CHECK(g->nodes[2]->attrs.rope.rotary_dims == 4 && ir_rope_dims(&g->nodes[2]->attrs.rope, 6) == 4);
    /* z has no pos: position s = 0 only; give x one row and check y, then z at s = 0 (identity on all) */
    ir_tensor p[2] = {tf(IR_F32, 4, SHAPE(1, 1, 1, 6), FLOATS(1, 2, 3, 4, 5, 6)), ti(1, SHAPE(1), INTS(1))};
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
        CHECK_TENSOR(o[0], 4, SHAPE(1, 1, 1, 6), FLOATS((float)(c1 - 3 * s1), -4, (float)(3 * c1 + s1), 2, 5, 6), 1e-6,
                     1e-6);
        CHECK_TENSOR(o[1], 4, SHAPE(1, 1, 1, 6), FLOATS(1, 2, 3, 4, 5, 6), 0, 0);
        free_tensors(o, 2);
    }
    free_tensors(p, 2);
    tg_free(&t);

    /* linear factor 2 at p = 2: the same angles as p = 1 unscaled */
    tg_init(&t, "rope_partial_linear");
    g = t.g;
    x = in_(&t, "x", ty(IR_F32, 4, 1, 1, 1, 6));
    pos = in_(&t, "pos", ty(IR_I32, 1, 1));
    ir_graph_add_output(g, "y", ir_rope_scaled(g, x, pos, 4.0 / (M_PI * M_PI), &lin, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor q[2] = {tf(IR_F32, 4, SHAPE(1, 1, 1, 6), FLOATS(1, 2, 3, 4, 5, 6)), ti(1, SHAPE(1), INTS(2))};
    rc = ir_interp_run(g, NULL, q, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
        CHECK_TENSOR(o[0], 4, SHAPE(1, 1, 1, 6), FLOATS((float)(c1 - 3 * s1), -4, (float)(3 * c1 + s1), 2, 5, 6), 1e-6,
                     1e-6);
        free_tensors(o, 1);
    }
    free_tensors(q, 2);
    tg_free(&t);

    /* dims equal to the head is full RoPE (stored as 0); more, or odd, is an error */
    tg_init(&t, "rope_partial_bad");
    g = t.g;
    x = in_(&t, "x", ty(IR_F32, 4, 1, 1, 1, 6));
    ir_rope_attrs full = {.rotary_dims = 6}, big = {.rotary_dims = 8}, odd = {.rotary_dims = 3};
    ir_node *f = ir_rope_scaled(g, x, NULL, 10000.0, &full, NOLOC);
    CHECK(f && f->attrs.rope.rotary_dims == 0);
    CHECK(ir_rope_scaled(g, x, NULL, 10000.0, &big, NOLOC) == NULL && t.d.errors == 1);
    CHECK(ir_rope_scaled(g, x, NULL, 10000.0, &odd, NOLOC) == NULL && t.d.errors == 2);
    tg_free(&t);
}

/* HD = 4 with theta = 4/pi^2, so f1 = theta^(-1/2) = pi/2: at p = 1 the second
 * pair turns by exactly 90 degrees, at p = 2 by 180. Two heads, two batches
 * with different pos. */
static void test_rope_hd4(void)
{
    tgraph t;
    tg_init(&t, "rope4");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 4, 2, 1, 2, 4));
    ir_node *pos = in_(&t, "pos", ty(IR_I32, 1, 2));
    ir_graph_add_output(g, "y", ir_rope(g, x, pos, 4.0 / (M_PI * M_PI), NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor p[2] = {
        tf(IR_F32, 4, SHAPE(2, 1, 2, 4), FLOATS(1, 2, 3, 4, -1, -2, -3, -4, 1, 2, 3, 4, 0, 0, 0, 0)),
        ti(1, SHAPE(2), INTS(1, 2)),
    };
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
        const double c2 = -0.4161468365471424, s2 = 0.9092974268256817;
        /* p = 1: [1c1 - 3s1, 2*0 - 4*1, 3c1 + 1s1, 4*0 + 2*1] */
        float b0[4] = {(float)(c1 - 3 * s1), -4, (float)(3 * c1 + s1), 2};
        /* p = 2: [c2 - 3s2, 2*(-1) - 0, 3c2 + s2, 4*(-1) + 0] */
        float b1[4] = {(float)(c2 - 3 * s2), -2, (float)(3 * c2 + s2), -4};
        float want[16] = {b0[0], b0[1], b0[2], b0[3], -b0[0], -b0[1], -b0[2], -b0[3],
                          b1[0], b1[1], b1[2], b1[3], 0, 0, 0, 0};
        CHECK_TENSOR(o[0], 4, SHAPE(2, 1, 2, 4), want, 1e-6, 1e-6);
        free_tensors(o, 1);
    }
    free_tensors(p, 2);
    tg_free(&t);
}

/* One query, two keys, scale 1: scores [0, ln 3] -> weights [1/4, 3/4]. */
static void test_attention_two_keys(void)
{
    tgraph t;
    tg_init(&t, "attn2");
    ir_graph *g = t.g;
    ir_node *q = in_(&t, "q", ty(IR_F32, 4, 1, 1, 1, 2));
    ir_node *k = in_(&t, "k", ty(IR_F32, 4, 1, 1, 2, 2));
    ir_node *v = in_(&t, "v", ty(IR_F32, 4, 1, 1, 2, 2));
    ir_graph_add_output(g, "a", ir_attention(g, q, k, v, NULL, 1.0, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "c", ir_attention(g, q, k, v, NULL, 1.0, true, NOLOC), NOLOC);
    ir_node *def = ir_attention(g, q, k, v, NULL, 0, false, NOLOC);
    CHECK(def && fabs(def->attrs.scale - 1 / sqrt(2.0)) < 1e-15);
    ir_graph_add_output(g, "d", def, NOLOC);
    CHECK(tg_ok(&t));
    float ln3 = (float)log(3.0);
    ir_tensor p[3] = {
        tf(IR_F32, 4, SHAPE(1, 1, 1, 2), FLOATS(1, 0)),
        tf(IR_F32, 4, SHAPE(1, 1, 2, 2), (float[]){0, 5, ln3, 7}),
        tf(IR_F32, 4, SHAPE(1, 1, 2, 2), FLOATS(4, 8, 0, -4)),
    };
    ir_tensor o[3];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* no pos: o = T - S = 1, the query sits at position 1 and sees keys 0
         * and 1 (causal or not): 1/4 [4, 8] + 3/4 [0, -4] = [1, -1] */
        CHECK_TENSOR(o[0], 4, SHAPE(1, 1, 1, 2), FLOATS(1, -1), 1e-6, 1e-6);
        CHECK_TENSOR(o[1], 4, SHAPE(1, 1, 1, 2), FLOATS(1, -1), 1e-6, 1e-6);
        /* scale 1/sqrt(2): weights 1 : 3^(1/sqrt 2) */
        double w1 = pow(3.0, 1 / sqrt(2.0)), z = 1 + w1;
        CHECK_TENSOR(o[2], 4, SHAPE(1, 1, 1, 2), FLOATS((float)(4 / z), (float)((8 - 4 * w1) / z)), 1e-6, 1e-6);
        free_tensors(o, 3);
    }
    free_tensors(p, 3);
    tg_free(&t);
}

/* Sliding window and soft-capping. HD = 1, scale 1, q = 1, k = [0, ln 2,
 * ln 4]: key weights 1, 2, 4; v = [10, 20, 30]; S = T = 3, no pos, so the
 * queries sit at positions 0, 1, 2, causal.
 *   window=2: query 0 sees key 0 -> 10; query 1 keys 0, 1 -> (10 + 40) / 3;
 *             query 2 keys 1, 2 -> (40 + 120) / 6.
 *   window=1: each query sees only itself -> 10, 20, 30.
 *   softcap=1: scores tanh(0) = 0, tanh(ln 2) = 3/5, tanh(ln 4) = 15/17
 *             (tanh(ln a) = (a^2 - 1) / (a^2 + 1)). */
static void test_attention_window_softcap(void)
{
    tgraph t;
    tg_init(&t, "attn_window");
    ir_graph *g = t.g;
    ir_node *q = in_(&t, "q", ty(IR_F32, 4, 1, 3, 1, 1));
    ir_node *k = in_(&t, "k", ty(IR_F32, 4, 1, 1, 3, 1));
    ir_node *v = in_(&t, "v", ty(IR_F32, 4, 1, 1, 3, 1));
    ir_node *w2 = ir_attention_ex(g, q, k, v, NULL, 1.0, true, 2, 0, NOLOC);
    ir_graph_add_output(g, "w2", w2, NOLOC);
    ir_graph_add_output(g, "w1", ir_attention_ex(g, q, k, v, NULL, 1.0, true, 1, 0, NOLOC), NOLOC);
    ir_graph_add_output(g, "cap", ir_attention_ex(g, q, k, v, NULL, 1.0, true, 0, 1.0, NOLOC), NOLOC);
    ir_graph_add_output(g, "wide", ir_attention_ex(g, q, k, v, NULL, 1.0, true, 100, 0, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    CHECK(w2 && w2->attrs.window == 2 && w2->attrs.softcap == 0);
    ir_tensor p[3] = {
        tf(IR_F32, 4, SHAPE(1, 3, 1, 1), FLOATS(1, 1, 1)),
        tf(IR_F32, 4, SHAPE(1, 1, 3, 1), (float[]){0, (float)log(2.0), (float)log(4.0)}),
        tf(IR_F32, 4, SHAPE(1, 1, 3, 1), FLOATS(10, 20, 30)),
    };
    ir_tensor o[4];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[0], 4, SHAPE(1, 3, 1, 1), FLOATS(10, 50.0f / 3, 160.0f / 6), 1e-5, 1e-6);
        CHECK_TENSOR(o[1], 4, SHAPE(1, 3, 1, 1), FLOATS(10, 20, 30), 1e-5, 1e-6);
        double e1 = exp(0.6), e2 = exp(15.0 / 17.0);
        CHECK_TENSOR(o[2], 4, SHAPE(1, 3, 1, 1),
                     FLOATS(10, (float)((10 + 20 * e1) / (1 + e1)), (float)((10 + 20 * e1 + 30 * e2) / (1 + e1 + e2))),
                     1e-5, 1e-6);
        CHECK_TENSOR(o[3], 4, SHAPE(1, 3, 1, 1), FLOATS(10, 50.0f / 3, 170.0f / 7), 1e-5, 1e-6);
        free_tensors(o, 4);
    }
    free_tensors(p, 3);
    CHECK(ir_attention_ex(g, q, k, v, NULL, 1.0, true, -1, 0, NOLOC) == NULL);
    CHECK(ir_attention_ex(g, q, k, v, NULL, 1.0, true, 0, -2.0, NOLOC) == NULL);
    tg_free(&t);
}

/* HD = 1, scale 1, q = ln 2 and k = [0, 1, 1, 1]: key weights 1, 2, 2, 2;
 * v = [1, 2, 3, 100]. With pos = 1 and S = 2 the queries sit at positions
 * 1 and 2. */
static void test_attention_causal_offsets(void)
{
    tgraph t;
    tg_init(&t, "attn_causal");
    ir_graph *g = t.g;
    int S = ir_graph_add_sym(g, "S"), T = ir_graph_add_sym(g, "T");
    ir_node *q = in_(&t, "q", ty(IR_F32, 4, 1, SYM(S), 1, 1));
    ir_node *k = in_(&t, "k", ty(IR_F32, 4, 1, 1, SYM(T), 1));
    ir_node *v = in_(&t, "v", ty(IR_F32, 4, 1, 1, SYM(T), 1));
    ir_node *pos = in_(&t, "pos", ty(IR_I32, 1, 1));
    ir_graph_add_output(g, "causal", ir_attention(g, q, k, v, pos, 1.0, true, NOLOC), NOLOC);
    ir_graph_add_output(g, "full", ir_attention(g, q, k, v, pos, 1.0, false, NOLOC), NOLOC);
    ir_graph_add_output(g, "causal_nopos", ir_attention(g, q, k, v, NULL, 1.0, true, NOLOC), NOLOC);
    ir_graph_add_output(g, "full_nopos", ir_attention(g, q, k, v, NULL, 1.0, false, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    float ln2 = (float)log(2.0);
    ir_tensor p[4] = {
        tf(IR_F32, 4, SHAPE(1, 2, 1, 1), (float[]){ln2, ln2}),
        tf(IR_F32, 4, SHAPE(1, 1, 4, 1), FLOATS(0, 1, 1, 1)),
        tf(IR_F32, 4, SHAPE(1, 1, 4, 1), FLOATS(1, 2, 3, 100)),
        ti(1, SHAPE(1), INTS(1)),
    };
    ir_tensor o[4];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(2, 4), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* causal, pos 1: query 0 sees keys 0..1 -> (1 + 2*2)/3 = 5/3;
         *                query 1 sees keys 0..2 -> (1 + 4 + 6)/5 = 11/5 */
        CHECK_TENSOR(o[0], 4, SHAPE(1, 2, 1, 1), FLOATS(5.0f / 3, 2.2f), 1e-6, 1e-6);
        /* not causal: both see keys j < o + S = 3 */
        CHECK_TENSOR(o[1], 4, SHAPE(1, 2, 1, 1), FLOATS(2.2f, 2.2f), 1e-6, 1e-6);
        /* no pos: o = T - S = 2, queries at 2 and 3: 11/5 and
         * (1 + 4 + 6 + 200)/7 = 211/7; not causal: both see all 4 keys */
        CHECK_TENSOR(o[2], 4, SHAPE(1, 2, 1, 1), FLOATS(2.2f, 211.0f / 7), 1e-6, 1e-6);
        CHECK_TENSOR(o[3], 4, SHAPE(1, 2, 1, 1), FLOATS(211.0f / 7, 211.0f / 7), 1e-6, 1e-6);
        free_tensors(o, 4);
    }
    /* pos 3 + 2 tokens > 4 */
    p[3].i[0] = 3;
    rc = ir_interp_run(g, SHAPE(2, 4), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "batch 0: position 3 + 2 new tokens exceeds the cache length 4");
    CHECK_ERR(rc, err, "attention");
    CHECK(o[0].f == NULL && o[1].f == NULL);
    p[3].i[0] = -1;
    rc = ir_interp_run(g, SHAPE(2, 4), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "batch 0: position -1 is negative");
    free_tensors(p, 4);

    tg_free(&t);

    /* no pos and S > T */
    tg_init(&t, "attn_short");
    g = t.g;
    q = in_(&t, "q", ty(IR_F32, 4, 1, 3, 1, 1));
    k = in_(&t, "k", ty(IR_F32, 4, 1, 1, 2, 1));
    ir_graph_add_output(g, "a", ir_attention(g, q, k, k, NULL, 1.0, true, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    p[0] = tf(IR_F32, 4, SHAPE(1, 3, 1, 1), NULL);
    p[1] = tf(IR_F32, 4, SHAPE(1, 1, 2, 1), NULL);
    rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_ERR(rc, err, "3 new tokens exceed the cache length 2");
    free_tensors(p, 2);
    tg_free(&t);
}

/* GQA: H = 4 query heads over KV = 2: heads 0, 1 read KV head 0; heads 2, 3
 * read KV head 1 (h / (H/KV), not h % KV). Two batches with their own pos. */
static void test_attention_gqa_batches(void)
{
    tgraph t;
    tg_init(&t, "gqa");
    ir_graph *g = t.g;
    ir_node *q = in_(&t, "q", ty(IR_F32, 4, 2, 1, 4, 1));
    ir_node *k = in_(&t, "k", ty(IR_F32, 4, 2, 2, 3, 1));
    ir_node *v = in_(&t, "v", ty(IR_F32, 4, 2, 2, 3, 1));
    ir_node *pos = in_(&t, "pos", ty(IR_I32, 1, 2));
    ir_graph_add_output(g, "a", ir_attention(g, q, k, v, pos, 1.0, true, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    /* all scores 0 (k = 0): a plain average over the valid keys */
    float vv[12] = {/* b0 h0 */ 10, 11, 12, /* b0 h1 */ 20, 21, 22,
                    /* b1 h0 */ 30, 32, 34, /* b1 h1 */ 40, 44, 48};
    ir_tensor p[4] = {
        tf(IR_F32, 4, SHAPE(2, 1, 4, 1), FLOATS(1, 2, 3, 4, 5, 6, 7, 8)),
        tf(IR_F32, 4, SHAPE(2, 2, 3, 1), NULL),
        tf(IR_F32, 4, SHAPE(2, 2, 3, 1), vv),
        ti(1, SHAPE(2), INTS(0, 2)),
    };
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* batch 0 at position 0: key 0 only; batch 1 at position 2: keys 0..2 */
        CHECK_TENSOR(o[0], 4, SHAPE(2, 1, 4, 1), FLOATS(10, 10, 20, 20, 32, 32, 44, 44), 1e-6, 1e-6);
        free_tensors(o, 1);
    }
    p[3].i[1] = 3;
    rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_ERR(rc, err, "batch 1: position 3 + 1 new tokens exceeds the cache length 3");
    free_tensors(p, 4);
    tg_free(&t);
}

/* cache_write into a state: rows land at pos[b] + s, the state is updated. */
static void test_cache_write(void)
{
    tgraph t;
    tg_init(&t, "cache");
    ir_graph *g = t.g;
    int S = ir_graph_add_sym(g, "S");
    ir_node *kc = st_(&t, "kc", ty(IR_F32, 4, 2, 1, 3, 2));
    ir_node *x = in_(&t, "x", ty(IR_F32, 4, 2, SYM(S), 1, 2));
    ir_node *pos = in_(&t, "pos", ty(IR_I32, 1, 2));
    ir_node *w = ir_cache_write(g, kc, x, pos, NOLOC);
    ir_graph_add_output(g, "w", w, NOLOC);
    ir_graph_add_output(g, "w0", ir_cache_write(g, kc, x, NULL, NOLOC), NOLOC);
    CHECK(ir_graph_set_state(g, kc, w, NOLOC) == 0);
    CHECK(tg_ok(&t));
    float c0[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    ir_tensor p[3] = {
        tf(IR_F32, 4, SHAPE(2, 1, 3, 2), c0),
        tf(IR_F32, 4, SHAPE(2, 1, 1, 2), FLOATS(100, 101, 200, 201)),
        ti(1, SHAPE(2), INTS(2, 0)),
    };
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, SHAPE(1), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    float want[12] = {0, 1, 2, 3, 100, 101, 200, 201, 8, 9, 10, 11};
    if (rc == 0) {
        CHECK_TENSOR(o[0], 4, SHAPE(2, 1, 3, 2), want, 0, 0);
        /* without pos, o = 0 in both batches; computed from the old cache */
        CHECK_TENSOR(o[1], 4, SHAPE(2, 1, 3, 2), FLOATS(100, 101, 2, 3, 4, 5, 200, 201, 8, 9, 10, 11), 0, 0);
        CHECK_TENSOR(p[0], 4, SHAPE(2, 1, 3, 2), want, 0, 0); /* the state was updated */
        free_tensors(o, 2);
    }
    /* out of range: position 2 + 2 rows > 3 in batch 0; the state is left alone */
    ir_tensor x2 = tf(IR_F32, 4, SHAPE(2, 2, 1, 2), FLOATS(1, 1, 2, 2, 3, 3, 4, 4));
    ir_tensor_free(&p[1]);
    p[1] = x2;
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "cache_write");
    CHECK_ERR(rc, err, "batch 0: position 2 + 2 new tokens exceeds the cache length 3");
    CHECK_TENSOR(p[0], 4, SHAPE(2, 1, 3, 2), want, 0, 0);
    p[2].i[0] = 1; /* rows 1, 2 of batch 0; rows 0, 1 of batch 1 */
    rc = ir_interp_run(g, SHAPE(2), p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(p[0], 4, SHAPE(2, 1, 3, 2), FLOATS(0, 1, 1, 1, 2, 2, 3, 3, 4, 4, 10, 11), 0, 0);
        free_tensors(o, 2);
    }
    free_tensors(p, 3);
    tg_free(&t);
}

/* v may have its own head dim: the result is [B, S, H, v's head dim]. */
static void test_attention_value_dim(void)
{
    tgraph t;
    tg_init(&t, "attn_vd");
    ir_graph *g = t.g;
    ir_node *q = in_(&t, "q", ty(IR_F32, 4, 1, 1, 1, 2));
    ir_node *k = in_(&t, "k", ty(IR_F32, 4, 1, 1, 2, 2));
    ir_node *v = in_(&t, "v", ty(IR_F32, 4, 1, 1, 2, 3));
    ir_node *a = ir_attention(g, q, k, v, NULL, 1.0, true, NOLOC);
    ir_graph_add_output(g, "a", a, NOLOC);
    CHECK(tg_ok(&t));
    float ln3 = (float)log(3.0);
    ir_tensor p[3] = {
        tf(IR_F32, 4, SHAPE(1, 1, 1, 2), FLOATS(1, 0)),
        tf(IR_F32, 4, SHAPE(1, 1, 2, 2), (float[]){0, 5, ln3, 7}),
        tf(IR_F32, 4, SHAPE(1, 1, 2, 3), FLOATS(4, 8, 12, 0, -4, 4)),
    };
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        /* 1/4 [4, 8, 12] + 3/4 [0, -4, 4] */
        CHECK_TENSOR(o[0], 4, SHAPE(1, 1, 1, 3), FLOATS(1, -1, 6), 1e-6, 1e-6);
        free_tensors(o, 1);
    }
    free_tensors(p, 3);
    tg_free(&t);
}

/* The primitive form softmax(q @ k^T * scale + causal_mask(S, T)) @ v equals
 * the fused op without pos (offset T - S) — the pattern the passes raise. */
static void test_attention_matches_primitives(void)
{
    enum { B = 2, S = 3, H = 2, T = 5, HD = 4 };
    tgraph t;
    tg_init(&t, "attn_prim");
    ir_graph *g = t.g;
    ir_node *q = in_(&t, "q", ty(IR_F32, 4, B, S, H, HD));
    ir_node *k = in_(&t, "k", ty(IR_F32, 4, B, H, T, HD));
    ir_node *v = in_(&t, "v", ty(IR_F32, 4, B, H, T, HD));
    ir_node *qp = ir_permute(g, q, (int[]){0, 2, 1, 3}, NOLOC);  /* [B, H, S, HD] */
    ir_node *kt = ir_permute(g, k, (int[]){0, 1, 3, 2}, NOLOC);  /* [B, H, HD, T] */
    ir_node *sc = ir_binary(g, IR_OP_MUL, ir_matmul(g, qp, kt, NOLOC), ir_const(g, 0.5, IR_F32, NOLOC), NOLOC);
    sc = ir_binary(g, IR_OP_ADD, sc, ir_causal_mask(g, ir_dim_const(S), ir_dim_const(T), IR_F32, NOLOC), NOLOC);
    ir_node *pr = ir_matmul(g, ir_softmax(g, sc, 3, NOLOC), v, NOLOC); /* [B, H, S, HD] */
    ir_graph_add_output(g, "prim", ir_permute(g, pr, (int[]){0, 2, 1, 3}, NOLOC), NOLOC);
    ir_graph_add_output(g, "fused", ir_attention(g, q, k, v, NULL, 0.5, true, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    float qv[B * S * H * HD], kv[B * H * T * HD], vv[B * H * T * HD];
    for (int i = 0; i < B * S * H * HD; i++) qv[i] = (float)sin(i * 0.7) * 2;
    for (int i = 0; i < B * H * T * HD; i++) kv[i] = (float)cos(i * 1.3), vv[i] = (float)sin(i * 0.37 + 1);
    ir_tensor p[3] = {tf(IR_F32, 4, SHAPE(B, S, H, HD), qv), tf(IR_F32, 4, SHAPE(B, H, T, HD), kv),
                      tf(IR_F32, 4, SHAPE(B, H, T, HD), vv)};
    ir_tensor o[2];
    char err[256];
    int rc = ir_interp_run(g, NULL, p, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_TENSOR(o[1], 4, SHAPE(B, S, H, HD), o[0].f, 1e-6, 1e-5);
        free_tensors(o, 2);
    }
    free_tensors(p, 3);
    tg_free(&t);
}


/* One rope at position p of x[1, 1, 2, 8]: head 0 = [1 1 1 1 0 0 0 0] turns
 * into [m cos(p f_i), m sin(p f_i)], head 1 = [0 0 0 0 1 1 1 1] into
 * [-m sin, m cos]. theta = 10000, HD = 8: unscaled f = 1, 0.1, 0.01, 0.001. */
static void check_scaled_rope(const char *what, const ir_rope_attrs *r, int p, const double *inv_want,
                              const double *cs, const double *sn)
{
    double inv[4];
    ir_rope_inv_freq(10000.0, r, 8, inv);
    for (int i = 0; i < 4; i++) CHECK_MSG(fabs(inv[i] - inv_want[i]) <= 1e-15 * inv_want[i], "%s: f_%d = %.17g", what, i, inv[i]);
    tgraph t;
    tg_init(&t, "rope_scaled");
    ir_graph *g = t.g;
    ir_node *x = in_(&t, "x", ty(IR_F32, 4, 1, 1, 2, 8));
    ir_node *pos = in_(&t, "pos", ty(IR_I32, 1, 1));
    ir_graph_add_output(g, "y", ir_rope_scaled(g, x, pos, 10000.0, r, NOLOC), NOLOC);
    CHECK(tg_ok(&t));
    ir_tensor in[2] = {tf(IR_F32, 4, SHAPE(1, 1, 2, 8), FLOATS(1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1)),
                       ti(1, SHAPE(1), INTS(p))};
    ir_tensor o[1];
    char err[256];
    int rc = ir_interp_run(g, NULL, in, o, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", what, err);
    if (rc == 0) {
        float want[16];
        for (int i = 0; i < 4; i++) {
            want[i] = (float)cs[i];
            want[4 + i] = (float)sn[i];
            want[8 + i] = (float)-sn[i];
            want[12 + i] = (float)cs[i];
        }
        CHECK_TENSOR(o[0], 4, SHAPE(1, 1, 2, 8), want, 1e-6, 1e-6);
        free_tensors(o, 1);
    }
    free_tensors(in, 2);
    tg_free(&t);
}

static void test_rope_scalings(void)
{
    /* linear, factor 4, p = 5: f_i / 4 */
    ir_rope_attrs lin = {.scaling = IR_ROPE_LINEAR, .factor = 4};
    check_scaled_rope("linear", &lin, 5, (const double[]){0.25, 0.025, 0.0025, 0.00025},
                      (const double[]){0.3153223624, 0.9921976672, 0.9999218760, 0.9999992188},
                      (const double[]){0.9489846194, 0.1246747334, 0.0124996745, 0.0012499997});
    /* llama3, factor 8, low 1, high 4, L = 1024, at p = 2000 > L. Wavelengths
     * 2 pi / f: 6.28 and 62.8 < L/4 = 256 (kept), 628 in [256, 1024] (smoothed:
     * s = (1024/628.3 - 1) / 3 = 0.2099, f = (1 - s) 0.01/8 + s 0.01), 6283 > 1024
     * (0.001 / 8). */
    ir_rope_attrs l3 = {.scaling = IR_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                        .original_max_pos = 1024};
    check_scaled_rope("llama3", &l3, 2000, (const double[]){1.0, 0.1, 0.003086760967011274, 0.000125},
                      (const double[]){-0.3674595491, 0.4871876750, 0.9939929960, 0.9689124217},
                      (const double[]){0.9300395044, -0.8732972972, -0.1094437023, 0.2474039593});
    /* YaRN, factor 4, L = 1024, beta 32 / 1: d(32) = 8 ln(1024/(64 pi)) / (2 ln 10000)
     * = 0.71 -> 0, d(1) = 2.21 -> 3, ramp i/3: f = f_i/4 * i/3 + f_i (1 - i/3);
     * mscale = 0.1 ln 4 + 1 = 1.1386294361; p = 3000. */
    ir_rope_attrs y = {.scaling = IR_ROPE_YARN, .factor = 4, .original_max_pos = 1024, .beta_fast = 32,
                       .beta_slow = 1, .mscale = 1.138629436111989};
    CHECK_NEAR(ir_rope_yarn_mscale(4, 1), 1.138629436111989, 1e-15, 0);
    CHECK(ir_rope_yarn_mscale(1, 1) == 1.0);
    check_scaled_rope("yarn", &y, 3000, (const double[]){1.0, 0.075, 0.005, 0.00025},
                      (const double[]){-1.1109404731, 0.4182406446, -0.8650030198, 0.8331224842},
                      (const double[]){0.2495761568, -1.0590334065, 0.7404368767, 0.7761339570});
    /* no scaling: the plain frequencies */
    ir_rope_attrs none = {0};
    double inv[4];
    ir_rope_inv_freq(10000.0, &none, 8, inv);
    CHECK(inv[0] == 1.0 && fabs(inv[1] - 0.1) < 1e-17 && fabs(inv[3] - 0.001) < 1e-18);
    /* invalid attributes are refused by the builder */
    ir_rope_attrs bad = {.scaling = IR_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 4, .high_freq_factor = 1,
                         .original_max_pos = 8192};
    CHECK(ir_rope_check(&bad) != NULL);
    bad.scaling = IR_ROPE_YARN;
    CHECK(ir_rope_check(&bad) != NULL); /* no betas, no mscale */
}

int main(void)
{
    test_rope_scalings();
    test_attention_matches_primitives();
    test_attention_value_dim();
    test_rope_hd2();
    test_rope_hd4();
    test_rope_partial();
    test_attention_two_keys();
    test_attention_window_softcap();
    test_attention_causal_offsets();
    test_attention_gqa_batches();
    test_cache_write();
    return CHECK_DONE();
}
