/* tests/gpu/test_decode_gpu.c — decode without bubbles, on a GPU (label gpu;
 * exits 77 without a device). Through the compile driver and the runtime
 * (src/compile.h, runtime/rt_model.h), with the Llama-3.2-1B layer shrunk so
 * that the GEMVs split K (D=1024, H=16, KV=4, F=2048) and random weights,
 * states and inputs; outputs poisoned with NaN before every run.
 *
 *  1. PDL on == off: decode runs (B=1 and B=2, S=1, graph capture then
 *     replay, and a small prefill S=5) give the same bits, outputs and KV
 *     caches, with programmatic dependent launch on and off
 *     (rt_model_config.no_pdl), and eagerly (no graphs) too.
 *  2. counters: after runs, the kernels' counters region is all zeros (the
 *     kernels leave it so; no memset in the graph). Counters poisoned and a
 *     failed run after: the next run gives the reference bits (the runtime
 *     zeroed them). Poisoned without a failed run: the run's output differs
 *     (the check can fail).
 *  3. rebinding: weights bound again to other values after a run change
 *     the decode output to the other model's (bind-time work is redone).
 *  4. the norm folds (rules norm-gain and norm-gemv, on by default) on and
 *     off: with them the gains are in the weights and the decode GEMVs
 *     compute the RMSNorms (5 kernels launched per eager run instead of 7);
 *     outputs and caches agree with the rules off within bf16 tolerance
 *     (2e-2 relative); at 10, 8, 32 and 40 rows too (B=2 S=5, B=8 S=1, B=4
 *     S=8, B=8 S=5: folded in variants of their own dims up to
 *     cg_norm_fold_max_rows of the target, by the GEMV or on sm_90a the
 *     Hopper matmul's skinny tiles; 40 rows take the large-shape variant,
 *     whose norms are launched). The rebinding of 3
 *     runs with the folds on, so the folded weights are made again. Against
 *     the interpreter: tests/api/test_api_gpu. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/rt_model_internal.h"
#include "src/compile.h"

#define SAMPLE "samples/llama3_1b_layer.kiln"
enum { MAXB = 8, MAXS = 8, T = 64, D = 1024 };

static uint64_t seed = 12345;
static float rndf(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static uint16_t bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

typedef struct weights {
    const char *name[16];
    void *dev[16];
    int n;
} weights;

static char err[4096];

static rt_model *make(rt_ctx *ctx, const rt_model_config *cfg, const char *const *disabled, int ndisabled)
{
    static const kc_define defs[] = {{"D", "1024"}, {"H", "16"}, {"KV", "4"}, {"F", "2048"}};
    static const rt_dim_value md[] = {{"B", MAXB}, {"S", MAXS}, {"T", T}};
    kc_model_options o = {.compile = {.name = SAMPLE, .defines = defs, .ndefines = 4, .disabled = disabled,
                                      .ndisabled = ndisabled},
                          .max_dims = md,
                          .nmax_dims = 3,
                          .run = *cfg};
    rt_model *m = NULL;
    rt_status st = kc_compile_model(ctx, &o, &m, NULL, err, sizeof err);
    CHECK_MSG(st == RT_OK, "compile: %s", err);
    return st == RT_OK ? m : NULL;
}

/* Random weights for m's graph (gains near 1), on the device. */
static void weights_make(const rt_model *m, weights *w)
{
    const ir_graph *g = rt_model_graph(m);
    memset(w, 0, sizeof *w);
    for (int i = 0; i < g->nparams && w->n < 16; i++) {
        const ir_node *p = g->params[i];
        if (p->op != IR_OP_WEIGHT) continue;
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        rt_model_param_bytes(m, i, shape, &bytes);
        size_t n = bytes / 2;
        uint16_t *h = malloc(bytes);
        float scale = p->type.rank >= 2 ? 1.0f / 32.0f : 0.2f, off = p->type.rank >= 2 ? 0.0f : 1.0f;
        for (size_t j = 0; j < n; j++) h[j] = bf16(off + scale * rndf());
        cudaMalloc(&w->dev[w->n], bytes);
        cudaMemcpy(w->dev[w->n], h, bytes, cudaMemcpyHostToDevice);
        free(h);
        w->name[w->n++] = p->name;
    }
}

static bool bind_only(rt_model *m, const weights *w)
{
    for (int i = 0; i < w->n; i++) {
        rt_status st = rt_model_bind_weight(m, w->name[i], 0, IR_BF16, 0, NULL, w->dev[i], err, sizeof err);
        CHECK_MSG(st == RT_OK, "bind %s: %s", w->name[i], err);
        if (st != RT_OK) return false;
    }
    return true;
}

static bool bind(rt_model *m, const weights *w)
{
    if (!bind_only(m, w)) return false;
    rt_status st = rt_model_alloc_states(m, err, sizeof err);
    CHECK_MSG(st == RT_OK, "alloc states: %s", err);
    return st == RT_OK;
}

/* One run's inputs and results. */
typedef struct io {
    int64_t B, S;
    void *x, *pos, *y;
    uint16_t *kc0, *vc0;           /* initial caches (host) */
    uint16_t *yh, *kch, *vch;      /* results (host) */
    size_t ybytes, cbytes;
} io;

static void io_make(io *r, int64_t B, int64_t S, int p0)
{
    memset(r, 0, sizeof *r);
    r->B = B;
    r->S = S;
    size_t xb = (size_t)(B * S * D) * 2;
    uint16_t *xh = malloc(xb);
    for (size_t j = 0; j < xb / 2; j++) xh[j] = bf16(rndf());
    cudaMalloc(&r->x, xb);
    cudaMemcpy(r->x, xh, xb, cudaMemcpyHostToDevice);
    free(xh);
    int32_t pos[MAXB];
    for (int j = 0; j < MAXB; j++) pos[j] = (p0 + 7 * j) % (T - MAXS);
    cudaMalloc(&r->pos, sizeof pos);
    cudaMemcpy(r->pos, pos, sizeof pos, cudaMemcpyHostToDevice);
    r->ybytes = xb;
    cudaMalloc(&r->y, xb);
    r->yh = malloc(xb);
    r->cbytes = (size_t)MAXB * 4 * T * 64 * 2;
    r->kc0 = malloc(r->cbytes);
    r->vc0 = malloc(r->cbytes);
    r->kch = malloc(r->cbytes);
    r->vch = malloc(r->cbytes);
    for (size_t j = 0; j < r->cbytes / 2; j++) r->kc0[j] = bf16(rndf()), r->vc0[j] = bf16(rndf());
}

static void io_free(io *r)
{
    cudaFree(r->x);
    cudaFree(r->pos);
    cudaFree(r->y);
    free(r->kc0);
    free(r->vc0);
    free(r->yh);
    free(r->kch);
    free(r->vch);
}

/* Initial caches in, output poisoned, run, results out. */
static rt_status run(rt_model *m, io *r, const char *input_name)
{
    void *kp, *vp;
    size_t kb, vb;
    if (rt_model_state_ptr(m, "kc", &kp, &kb, err, sizeof err) != RT_OK ||
        rt_model_state_ptr(m, "vc", &vp, &vb, err, sizeof err) != RT_OK || kb != r->cbytes || vb != r->cbytes) {
        CHECK_MSG(0, "state pointers: %s (%zu bytes, expected %zu)", err, kb, r->cbytes);
        return RT_ERR_INTERNAL;
    }
    cudaMemcpy(kp, r->kc0, kb, cudaMemcpyHostToDevice);
    cudaMemcpy(vp, r->vc0, vb, cudaMemcpyHostToDevice);
    cudaMemset(r->y, 0xff, r->ybytes);
    cudaDeviceSynchronize();
    int64_t dims[3] = {r->B, r->S, T};
    rt_tensor_ptr in[2] = {{input_name, r->x}, {"pos", r->pos}}, out[1] = {{"y", r->y}};
    rt_status st = rt_model_run(m, dims, in, 2, out, 1, NULL, err, sizeof err);
    if (st == RT_OK) st = rt_model_sync(m, err, sizeof err);
    if (st != RT_OK) return st;
    cudaMemcpy(r->yh, r->y, r->ybytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(r->kch, kp, kb, cudaMemcpyDeviceToHost);
    cudaMemcpy(r->vch, vp, vb, cudaMemcpyDeviceToHost);
    return RT_OK;
}

typedef struct result {
    uint16_t *y, *k, *v;
    size_t yb, cb;
} result;

static void keep(result *res, const io *r)
{
    res->yb = r->ybytes;
    res->cb = r->cbytes;
    res->y = malloc(res->yb);
    res->k = malloc(res->cb);
    res->v = malloc(res->cb);
    memcpy(res->y, r->yh, res->yb);
    memcpy(res->k, r->kch, res->cb);
    memcpy(res->v, r->vch, res->cb);
}
static void result_free(result *res)
{
    free(res->y);
    free(res->k);
    free(res->v);
}
static bool same(const result *a, const io *r)
{
    return !memcmp(a->y, r->yh, a->yb) && !memcmp(a->k, r->kch, a->cb) && !memcmp(a->v, r->vch, a->cb);
}
static bool finite_out(const io *r)
{
    for (size_t j = 0; j < r->ybytes / 2; j++)
        if ((r->yh[j] & 0x7f80) == 0x7f80) return false;
    return true;
}

static bool counters_zero(rt_model *m)
{
    if (!m->counters_dev) return true;
    unsigned char *h = malloc(m->counters_bytes);
    cudaMemcpy(h, m->counters_dev, m->counters_bytes, cudaMemcpyDeviceToHost);
    bool z = true;
    for (size_t i = 0; i < m->counters_bytes; i++) z &= h[i] == 0;
    free(h);
    return z;
}

static void test_pdl_and_counters(rt_ctx *ctx)
{
    rt_model_config on = {0}, off = {.no_pdl = true}, eager = {.no_graphs = true};
    rt_model *m = make(ctx, &on, NULL, 0), *mo = make(ctx, &off, NULL, 0), *me = make(ctx, &eager, NULL, 0);
    if (!m || !mo || !me) goto out;
    CHECK_MSG(m->pdl, "PDL is on by default for %s", rt_ctx_arch(ctx));
    CHECK(!mo->pdl);
    weights w;
    weights_make(m, &w);
    if (!bind(m, &w) || !bind(mo, &w) || !bind(me, &w)) goto out;
    struct { int64_t B, S; int p0; } cases[] = {{1, 1, 30}, {2, 1, 41}, {2, 5, 9}};
    for (int c = 0; c < 3; c++) {
        io r;
        io_make(&r, cases[c].B, cases[c].S, cases[c].p0);
        result ref;
        rt_status st = run(m, &r, "x"); /* capture */
        CHECK_MSG(st == RT_OK, "run B=%lld S=%lld: %s", (long long)r.B, (long long)r.S, err);
        if (st == RT_OK) {
            CHECK_MSG(finite_out(&r), "B=%lld S=%lld: non-finite output", (long long)r.B, (long long)r.S);
            keep(&ref, &r);
            CHECK_MSG(run(m, &r, "x") == RT_OK && same(&ref, &r), "B=%lld S=%lld: graph replay differs from its capture",
                      (long long)r.B, (long long)r.S);
            CHECK_MSG(run(mo, &r, "x") == RT_OK && run(mo, &r, "x") == RT_OK && same(&ref, &r),
                      "B=%lld S=%lld: PDL off differs from PDL on", (long long)r.B, (long long)r.S);
            CHECK_MSG(run(me, &r, "x") == RT_OK && same(&ref, &r), "B=%lld S=%lld: eager differs from graph replay",
                      (long long)r.B, (long long)r.S);
            CHECK_MSG(counters_zero(m) && counters_zero(mo) && counters_zero(me),
                      "B=%lld S=%lld: counters not left zeroed", (long long)r.B, (long long)r.S);
            if (c == 1) {
                /* poisoned counters, no failed run: the run goes wrong (the check bites) */
                cudaMemset(m->counters_dev, 0x01, m->counters_bytes);
                cudaDeviceSynchronize();
                CHECK(run(m, &r, "x") == RT_OK && !same(&ref, &r));
                /* poisoned, then a failed run: the runtime zeroes them before the next */
                cudaMemset(m->counters_dev, 0x01, m->counters_bytes);
                cudaDeviceSynchronize();
                CHECK(run(m, &r, "no_such_input") != RT_OK);
                CHECK_MSG(run(m, &r, "x") == RT_OK && same(&ref, &r), "after a failed run: %s", err);
                CHECK(counters_zero(m));
            }
            result_free(&ref);
        }
        io_free(&r);
    }
    /* rebinding: m with other weights bound after a run gives what a model bound to them alone gives */
    {
        weights w2;
        weights_make(m, &w2);
        rt_model *mf = make(ctx, &eager, NULL, 0);
        io r;
        io_make(&r, 1, 1, 12);
        if (mf && bind(mf, &w2) && run(m, &r, "x") == RT_OK) {
            result before;
            keep(&before, &r);
            CHECK(bind_only(m, &w2) && run(m, &r, "x") == RT_OK);
            result after;
            keep(&after, &r);
            CHECK_MSG(run(mf, &r, "x") == RT_OK && same(&after, &r), "rebound weights: output differs from a fresh model's");
            CHECK_MSG(memcmp(before.y, after.y, before.yb) != 0, "rebound weights did not change the output");
            result_free(&before);
            result_free(&after);
        }
        io_free(&r);
        rt_model_free(mf);
        for (int i = 0; i < w2.n; i++) cudaFree(w2.dev[i]);
    }
    for (int i = 0; i < w.n; i++) cudaFree(w.dev[i]);
out:
    rt_model_free(m);
    rt_model_free(mo);
    rt_model_free(me);
}

static double rel(const uint16_t *a, const uint16_t *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t ua = (uint32_t)a[i] << 16, ub = (uint32_t)b[i] << 16;
        float fa, fb;
        memcpy(&fa, &ua, 4);
        memcpy(&fb, &ub, 4);
        num += ((double)fa - fb) * ((double)fa - fb);
        den += (double)fb * fb;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void test_norm_fold(rt_ctx *ctx)
{
    rt_model_config eager = {.no_graphs = true};
    static const char *const off[] = {"norm-gain", "norm-gemv"};
    rt_model *m = make(ctx, &eager, NULL, 0), *mn = make(ctx, &eager, off, 2);
    weights w = {0};
    if (!m || !mn) goto out;
    weights_make(m, &w);
    if (!bind(m, &w) || !bind(mn, &w)) goto out;
    /* in a variant planned for its dims (at most the model's decode_max_rows rows, 32) of up to
     * cg_norm_fold_max_rows rows of the target, the norms are computed by the linears (the GEMV to
     * cg_gemv_max_rows; on sm_90a from CG_NORM_FOLD_HOPPER_MIN_ROWS rows the Hopper matmul's skinny
     * tiles compute the norm before gate/up, and in the batched decode graph the QKV one too: 32 rows
     * of 8 per sequence, 5 launches); else (8 and 10 rows on sm_90a;
     * 40 rows: the large-shape variant) kernels of their own (7 launches both ways) */
    cg_target t;
    rt_ctx_target(ctx, &t);
    struct { int64_t B, S; int p0; } cases[] = {{1, 1, 30}, {2, 1, 41}, {2, 5, 9}, {8, 1, 20}, {4, 8, 2}, {8, 5, 3}};
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const int64_t rows = cases[c].B * cases[c].S;
        /* the GEMV computes both norms; the skinny tiles the one before gate/up, and the QKV
         * projection's too where it has no rope epilogue (the batched decode graph: at most
         * CG_GEMV_MAX_ROWS rows per sequence and CG_DECODE_BATCHED_ROWS in all; cg_norm_folded) */
        const bool batched = cases[c].S <= CG_GEMV_MAX_ROWS && rows >= CG_DECODE_BATCHED_ROWS;
        const uint64_t want = rows <= cg_gemv_max_rows(&t)                                          ? 5
                              : rows >= CG_NORM_FOLD_HOPPER_MIN_ROWS && rows <= cg_norm_fold_max_rows(&t) &&
                                        rows <= m->decode_max_rows
                                  ? (batched ? 5 : 6)
                                                                                                 : 7;
        io r;
        io_make(&r, cases[c].B, cases[c].S, cases[c].p0);
        uint64_t l0 = m->cnt.launches, n0 = mn->cnt.launches;
        if (run(m, &r, "x") == RT_OK) {
            result folded;
            keep(&folded, &r);
            CHECK_MSG(finite_out(&r), "norm-gemv B=%lld S=%lld: non-finite output", (long long)r.B, (long long)r.S);
            if (run(mn, &r, "x") == RT_OK) {
                double ey = rel(folded.y, r.yh, r.ybytes / 2), ek = rel(folded.k, r.kch, r.cbytes / 2),
                       ev = rel(folded.v, r.vch, r.cbytes / 2);
                printf("norm-gemv on vs off, B=%lld S=%lld: output %.3g, k cache %.3g, v cache %.3g; launches %llu vs %llu\n",
                       (long long)r.B, (long long)r.S, ey, ek, ev, (unsigned long long)(m->cnt.launches - l0),
                       (unsigned long long)(mn->cnt.launches - n0));
                CHECK_MSG(ey < 2e-2 && ek < 2e-2 && ev < 2e-2, "norm-gemv on vs off: %.3g %.3g %.3g", ey, ek, ev);
                CHECK_MSG(m->cnt.launches - l0 == want && mn->cnt.launches - n0 == 7,
                          "B=%lld S=%lld: %llu kernels launched with norm-gemv, %llu without (expected %llu and 7)",
                          (long long)r.B, (long long)r.S, (unsigned long long)(m->cnt.launches - l0),
                          (unsigned long long)(mn->cnt.launches - n0), (unsigned long long)want);
            }
            result_free(&folded);
        }
        io_free(&r);
    }
out:
    for (int i = 0; i < w.n; i++) cudaFree(w.dev[i]);
    rt_model_free(m);
    rt_model_free(mn);
}

int main(void)
{
    rt_ctx *ctx = NULL;
    rt_ctx_config cfg = {0};
    if (rt_ctx_create(&ctx, &cfg, err, sizeof err) != RT_OK || !rt_ctx_has_device(ctx)) {
        printf("no CUDA device: skipped (%s)\n", err);
        rt_ctx_free(ctx);
        return 77;
    }
    test_pdl_and_counters(ctx);
    test_norm_fold(ctx);
    rt_ctx_free(ctx);
    return CHECK_DONE();
}
