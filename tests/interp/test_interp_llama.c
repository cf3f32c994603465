/* tests/interp/test_interp_llama.c — a tiny Llama-style decoder layer built
 * with the builder (rmsnorm -> q/k/v linears -> rope -> cache_write ->
 * GQA causal attention -> output linear -> residual -> SwiGLU MLP ->
 * residual), run by the interpreter and compared against a straightforward
 * implementation written here in plain loops over double. A prefill of 3
 * tokens is followed by two decode steps; the KV-cache states carry over, and
 * the result equals a single prefill over all the tokens. */
#include "interp_test.h"

enum { D = 8, H = 4, KV = 2, HD = 4, F = 12, TMAX = 8 };
#define EPS 1e-5
#define THETA 10000.0

typedef struct weights {
    float ln1[D], wq[H * HD][D], wk[KV * HD][D], wv[KV * HD][D], wo[D][H * HD];
    float ln2[D], wg[F][D], wu[F][D], wd[D][F];
} weights;

/* Deterministic values in [-scale, scale). */
static float rnd(uint32_t *s, float scale)
{
    *s = *s * 1664525u + 1013904223u;
    return ((float)(*s >> 8) / (float)(1u << 24) * 2 - 1) * scale;
}

static void fill(float *p, int n, uint32_t *s, float scale, float bias)
{
    for (int i = 0; i < n; i++) p[i] = bias + rnd(s, scale);
}

/* ---- the reference, one token row at a time -------------------------------- */

static void ref_rmsnorm(const double *x, const float *w, double *out)
{
    double ss = 0;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    double r = 1 / sqrt(ss / D + EPS);
    for (int i = 0; i < D; i++) out[i] = x[i] * r * w[i];
}

/* out[n] = sum_k w[n][k] x[k] */
static void ref_linear(const double *x, const float *w, int n, int k, double *out)
{
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < k; j++) s += (double)w[i * k + j] * x[j];
        out[i] = s;
    }
}

static void ref_rope(double *v, int p) /* one head of HD values */
{
    double tmp[HD];
    for (int i = 0; i < HD / 2; i++) {
        double ang = p * pow(THETA, -2.0 * i / HD);
        tmp[i] = v[i] * cos(ang) - v[i + HD / 2] * sin(ang);
        tmp[i + HD / 2] = v[i + HD / 2] * cos(ang) + v[i] * sin(ang);
    }
    memcpy(v, tmp, sizeof tmp);
}

/* One sequence: S new tokens x[S][D] at positions p0.., caches kc/vc[KV][TMAX][HD]. */
static void ref_layer(const weights *w, int S, int p0, const float *x, double (*kc)[TMAX][HD],
                      double (*vc)[TMAX][HD], double *y)
{
    double q[8][H * HD], xd[8][D];
    for (int s = 0; s < S; s++) {
        double h[D], k[KV * HD], v[KV * HD];
        for (int i = 0; i < D; i++) xd[s][i] = x[s * D + i];
        ref_rmsnorm(xd[s], w->ln1, h);
        ref_linear(h, &w->wq[0][0], H * HD, D, q[s]);
        ref_linear(h, &w->wk[0][0], KV * HD, D, k);
        ref_linear(h, &w->wv[0][0], KV * HD, D, v);
        for (int hh = 0; hh < H; hh++) ref_rope(&q[s][hh * HD], p0 + s);
        for (int g = 0; g < KV; g++) {
            ref_rope(&k[g * HD], p0 + s);
            for (int d = 0; d < HD; d++) {
                kc[g][p0 + s][d] = k[g * HD + d];
                vc[g][p0 + s][d] = v[g * HD + d];
            }
        }
    }
    for (int s = 0; s < S; s++) {
        double a[H * HD];
        for (int hh = 0; hh < H; hh++) {
            int g = hh / (H / KV);
            double sc[TMAX], m = -INFINITY, sum = 0;
            int n = p0 + s + 1; /* causal */
            for (int j = 0; j < n; j++) {
                double dot = 0;
                for (int d = 0; d < HD; d++) dot += q[s][hh * HD + d] * kc[g][j][d];
                sc[j] = dot / sqrt((double)HD);
                if (sc[j] > m) m = sc[j];
            }
            for (int j = 0; j < n; j++) sum += (sc[j] = exp(sc[j] - m));
            for (int d = 0; d < HD; d++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += sc[j] * vc[g][j][d];
                a[hh * HD + d] = acc / sum;
            }
        }
        double o[D], x1[D], h2[D], gt[F], up[F], act[F], dn[D];
        ref_linear(a, &w->wo[0][0], D, H * HD, o);
        for (int i = 0; i < D; i++) x1[i] = xd[s][i] + o[i];
        ref_rmsnorm(x1, w->ln2, h2);
        ref_linear(h2, &w->wg[0][0], F, D, gt);
        ref_linear(h2, &w->wu[0][0], F, D, up);
        for (int i = 0; i < F; i++) act[i] = gt[i] / (1 + exp(-gt[i])) * up[i];
        ref_linear(act, &w->wd[0][0], D, F, dn);
        for (int i = 0; i < D; i++) y[s * D + i] = x1[i] + dn[i];
    }
}

/* ---- the graph ---------------------------------------------------------------- */

static ir_node *reshape4(ir_graph *g, ir_node *x, int heads)
{
    ir_dim d[4] = {ir_dim_sym(0), ir_dim_sym(1), ir_dim_const(heads), ir_dim_const(HD)};
    return ir_reshape(g, x, 4, d, NOLOC);
}

static void build_layer(tgraph *t)
{
    ir_graph *g = t->g;
    int B = ir_graph_add_sym(g, "B"), S = ir_graph_add_sym(g, "S"), T = ir_graph_add_sym(g, "T");
    ir_node *x = in_(t, "x", ty(IR_F32, 3, SYM(B), SYM(S), D));
    ir_node *pos = in_(t, "pos", ty(IR_I32, 1, SYM(B)));
    ir_node *kc = st_(t, "kc", ty(IR_F32, 4, SYM(B), KV, SYM(T), HD));
    ir_node *vc = st_(t, "vc", ty(IR_F32, 4, SYM(B), KV, SYM(T), HD));
    ir_node *ln1 = wt_(t, "ln1", ty(IR_F32, 1, D));
    ir_node *wq = wt_(t, "wq", ty(IR_F32, 2, H * HD, D));
    ir_node *wk = wt_(t, "wk", ty(IR_F32, 2, KV * HD, D));
    ir_node *wv = wt_(t, "wv", ty(IR_F32, 2, KV * HD, D));
    ir_node *wo = wt_(t, "wo", ty(IR_F32, 2, D, H * HD));
    ir_node *ln2 = wt_(t, "ln2", ty(IR_F32, 1, D));
    ir_node *wg = wt_(t, "wg", ty(IR_F32, 2, F, D));
    ir_node *wu = wt_(t, "wu", ty(IR_F32, 2, F, D));
    ir_node *wd = wt_(t, "wd", ty(IR_F32, 2, D, F));

    ir_node *h = ir_rmsnorm(g, x, ln1, EPS, NOLOC);
    ir_node *q = ir_rope(g, reshape4(g, ir_linear(g, h, wq, NULL, NOLOC), H), pos, THETA, NOLOC);
    ir_node *k = ir_rope(g, reshape4(g, ir_linear(g, h, wk, NULL, NOLOC), KV), pos, THETA, NOLOC);
    ir_node *v = reshape4(g, ir_linear(g, h, wv, NULL, NOLOC), KV);
    ir_node *kc2 = ir_cache_write(g, kc, k, pos, NOLOC);
    ir_node *vc2 = ir_cache_write(g, vc, v, pos, NOLOC);
    ir_node *a = ir_attention(g, q, kc2, vc2, pos, 0, true, NOLOC);
    ir_dim flat[3] = {ir_dim_sym(B), ir_dim_sym(S), ir_dim_const(H * HD)};
    ir_node *x1 = ir_binary(g, IR_OP_ADD, x,
                            ir_linear(g, ir_reshape(g, a, 3, flat, NOLOC), wo, NULL, NOLOC), NOLOC);
    ir_node *h2 = ir_rmsnorm(g, x1, ln2, EPS, NOLOC);
    ir_node *gate = ir_unary(g, IR_OP_SILU, ir_linear(g, h2, wg, NULL, NOLOC), NOLOC);
    ir_node *mlp = ir_binary(g, IR_OP_MUL, gate, ir_linear(g, h2, wu, NULL, NOLOC), NOLOC);
    ir_node *y = ir_binary(g, IR_OP_ADD, x1, ir_linear(g, mlp, wd, NULL, NOLOC), NOLOC);
    ir_graph_add_output(g, "y", y, NOLOC);
    ir_graph_set_state(g, kc, kc2, NOLOC);
    ir_graph_set_state(g, vc, vc2, NOLOC);
}

/* params: x, pos, kc, vc, then the 9 weights in declaration order. */
static void set_weights(ir_tensor *p, const weights *w)
{
    const float *src[9] = {w->ln1, &w->wq[0][0], &w->wk[0][0], &w->wv[0][0], &w->wo[0][0],
                           w->ln2, &w->wg[0][0], &w->wu[0][0], &w->wd[0][0]};
    const int64_t shapes[9][2] = {{D, 0}, {H * HD, D}, {KV * HD, D}, {KV * HD, D}, {D, H * HD},
                                  {D, 0}, {F, D},      {F, D},       {D, F}};
    for (int i = 0; i < 9; i++)
        p[4 + i] = tf(IR_F32, shapes[i][1] ? 2 : 1, shapes[i], src[i]);
}

static void test_llama_layer(void)
{
    tgraph t;
    tg_init(&t, "llama");
    build_layer(&t);
    CHECK(tg_ok(&t));
    CHECK(ir_verify(t.g, NULL) == 0);
    CHECK(t.g->nparams == 13 && t.g->noutputs == 1 && t.g->nstates == 2);

    static weights w;
    uint32_t seed = 12345;
    fill(w.ln1, D, &seed, 0.2f, 1);
    fill(&w.wq[0][0], H * HD * D, &seed, 0.5f, 0);
    fill(&w.wk[0][0], KV * HD * D, &seed, 0.5f, 0);
    fill(&w.wv[0][0], KV * HD * D, &seed, 0.5f, 0);
    fill(&w.wo[0][0], D * H * HD, &seed, 0.3f, 0);
    fill(w.ln2, D, &seed, 0.2f, 1);
    fill(&w.wg[0][0], F * D, &seed, 0.5f, 0);
    fill(&w.wu[0][0], F * D, &seed, 0.5f, 0);
    fill(&w.wd[0][0], D * F, &seed, 0.3f, 0);

    enum { B = 2, NTOK = 5 };
    const int start[B] = {0, 2}; /* batch 1 already holds 2 tokens in its cache */
    float xs[B][NTOK][D];
    fill(&xs[0][0][0], B * NTOK * D, &seed, 1.0f, 0);

    /* reference caches start with the same random "history" as the states */
    static double rkc[B][KV][TMAX][HD], rvc[B][KV][TMAX][HD];
    float kc0[B * KV * TMAX * HD], vc0[B * KV * TMAX * HD];
    fill(kc0, B * KV * TMAX * HD, &seed, 1.0f, 0);
    fill(vc0, B * KV * TMAX * HD, &seed, 1.0f, 0);
    for (int i = 0; i < B * KV * TMAX * HD; i++) {
        (&rkc[0][0][0][0])[i] = kc0[i];
        (&rvc[0][0][0][0])[i] = vc0[i];
    }

    ir_tensor p[13];
    p[2] = tf(IR_F32, 4, SHAPE(B, KV, TMAX, HD), kc0);
    p[3] = tf(IR_F32, 4, SHAPE(B, KV, TMAX, HD), vc0);
    set_weights(p, &w);

    /* steps: prefill 3 tokens, then decode 1, then decode 1 */
    const int steps[3] = {3, 1, 1};
    int done = 0;
    double max_err = 0;
    for (int st = 0; st < 3; st++) {
        int S = steps[st];
        float xin[B * 3 * D];
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++)
                for (int i = 0; i < D; i++) xin[(b * S + s) * D + i] = xs[b][done + s][i];
        p[0] = tf(IR_F32, 3, SHAPE(B, S, D), xin);
        p[1] = ti(1, SHAPE(B), INTS(start[0] + done, start[1] + done));
        ir_tensor o[1];
        char err[256];
        int rc = ir_interp_run(t.g, SHAPE(B, S, TMAX), p, o, err, sizeof err);
        CHECK_MSG(rc == 0, "step %d: %s", st, err);
        for (int b = 0; b < B; b++) {
            double y[3 * D];
            ref_layer(&w, S, start[b] + done, &xs[b][done][0], rkc[b], rvc[b], y);
            for (int k = 0; rc == 0 && k < S * D; k++) {
                double got = o[0].f[b * S * D + k];
                double e = fabs(got - y[k]);
                if (e > max_err) max_err = e;
                CHECK_MSG(e <= 1e-4 + 1e-4 * fabs(y[k]), "step %d b %d [%d]: %.7g vs %.7g", st, b, k,
                          got, y[k]);
            }
        }
        /* the states now hold the reference caches */
        for (int i = 0; rc == 0 && i < B * KV * TMAX * HD; i++) {
            CHECK_MSG(fabs(p[2].f[i] - (&rkc[0][0][0][0])[i]) <= 1e-5, "kc[%d] step %d", i, st);
            CHECK_MSG(fabs(p[3].f[i] - (&rvc[0][0][0][0])[i]) <= 1e-5, "vc[%d] step %d", i, st);
        }
        if (rc == 0) free_tensors(o, 1);
        ir_tensor_free(&p[0]);
        ir_tensor_free(&p[1]);
        done += S;
    }
    printf("llama layer: max |interp - reference| = %.3g\n", max_err);
    /* batch 1 wrote rows 2..6, batch 0 rows 0..4; row 7 of batch 1 is untouched */
    CHECK(p[2].f[((1 * KV + 0) * TMAX + 7) * HD] == kc0[((1 * KV + 0) * TMAX + 7) * HD]);
    CHECK(p[2].f[((0 * KV + 1) * TMAX + 4) * HD] != kc0[((0 * KV + 1) * TMAX + 4) * HD]);

    /* One more decode step would run past TMAX = 8 for batch 1 (7 + 2 > 8). */
    p[0] = tf(IR_F32, 3, SHAPE(B, 2, D), NULL);
    p[1] = ti(1, SHAPE(B), INTS(5, 7));
    ir_tensor o[1];
    char err[256];
    float before = p[2].f[0];
    int rc = ir_interp_run(t.g, SHAPE(B, 2, TMAX), p, o, err, sizeof err);
    CHECK_ERR(rc, err, "batch 1: position 7 + 2 new tokens exceeds the cache length 8");
    CHECK(p[2].f[0] == before);
    free_tensors(p, 13);
    tg_free(&t);
}

/* The same layer in one prefill of 5 tokens equals prefill 3 + decode 1 + 1. */
static void test_prefill_equals_decode(void)
{
    tgraph t;
    tg_init(&t, "llama");
    build_layer(&t);
    CHECK(tg_ok(&t));
    static weights w;
    uint32_t seed = 777;
    fill(&w.ln1[0], (int)(sizeof w / sizeof(float)), &seed, 0.4f, 0);
    for (int i = 0; i < D; i++) w.ln1[i] += 1, w.ln2[i] += 1;
    float xs[5 * D];
    fill(xs, 5 * D, &seed, 1, 0);

    ir_tensor a[13], b[13], oa[1], ob[1];
    char err[256];
    for (int i = 2; i < 4; i++) {
        a[i] = tf(IR_F32, 4, SHAPE(1, KV, TMAX, HD), NULL);
        b[i] = tf(IR_F32, 4, SHAPE(1, KV, TMAX, HD), NULL);
    }
    set_weights(a, &w);
    set_weights(b, &w);
    a[0] = tf(IR_F32, 3, SHAPE(1, 5, D), xs);
    a[1] = ti(1, SHAPE(1), INTS(0));
    int rc = ir_interp_run(t.g, SHAPE(1, 5, TMAX), a, oa, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    int off = 0;
    const int steps[3] = {3, 1, 1};
    for (int st = 0; st < 3 && rc == 0; st++) {
        b[0] = tf(IR_F32, 3, SHAPE(1, steps[st], D), xs + off * D);
        b[1] = ti(1, SHAPE(1), INTS(off));
        int r2 = ir_interp_run(t.g, SHAPE(1, steps[st], TMAX), b, ob, err, sizeof err);
        CHECK_MSG(r2 == 0, "%s", err);
        for (int k = 0; r2 == 0 && k < steps[st] * D; k++)
            CHECK_NEAR(ob[0].f[k], oa[0].f[off * D + k], 1e-5, 1e-5);
        if (r2 == 0) free_tensors(ob, 1);
        ir_tensor_free(&b[0]);
        ir_tensor_free(&b[1]);
        off += steps[st];
    }
    for (int i = 0; i < KV * TMAX * HD; i++) CHECK_NEAR(b[2].f[i], a[2].f[i], 1e-6, 1e-6);
    if (rc == 0) free_tensors(oa, 1);
    free_tensors(a, 13);
    free_tensors(b + 2, 11);
    tg_free(&t);
}

int main(void)
{
    test_llama_layer();
    test_prefill_equals_decode();
    return CHECK_DONE();
}
