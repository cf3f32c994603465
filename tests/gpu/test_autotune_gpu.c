/* tests/gpu/test_autotune_gpu.c — autotuning on the device (runtime/rt_autotune.h):
 * a bias + GELU linear (bf16, K 1024, N 4096) compiled with autotune times
 * each candidate configuration on the GPU (rt_tuner_time_gpu, wrapped to
 * count and to see the times), runs the fastest, and its outputs match the
 * heuristic's kernel on fresh random inputs (poisoned outputs, S = 2048 and
 * S = 100: a row tail); a second context on the same cache directory times
 * nothing and runs the same configuration. Exits 77 without a device. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_test_util.h"
#include "runtime/rt_test_util.h"
#include "src/compile.h"

static const char *MODEL = "model tune_gpu {\n"
                           "  dims S\n"
                           "  input x : bf16[S, 1024]\n"
                           "  weight w : bf16[4096, 1024]\n"
                           "  weight b : bf16[4096]\n"
                           "  output y = gelu(linear(x, w, b))\n"
                           "}\n";
enum { K = 1024, N = 4096, MAXS = 2048 };

typedef struct timer {
    rt_ctx *ctx;
    int calls;
    double best;
    char best_cfg[160];
} timer;

static double gpu_time(void *user, const cg_kernel *k, const ir_graph *g, const int64_t *dims, char *err, size_t n)
{
    timer *t = user;
    t->calls++;
    double us = rt_tuner_time_gpu(t->ctx, k, g, dims, err, n);
    printf("  candidate %-60s %9.1f us%s%s\n", k->config, us, us > 0 ? "" : "  failed: ", us > 0 ? "" : err);
    if (us > 0 && (t->best <= 0 || us < t->best)) {
        t->best = us;
        snprintf(t->best_cfg, sizeof t->best_cfg, "%s", k->config);
    }
    return us;
}

static char err[4096];
static void *upload_random(size_t n, float scale)
{
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = enc(scale * rng_normal());
    void *d = NULL;
    cudaMalloc(&d, n * 2);
    cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice);
    free(h);
    return d;
}

static rt_model *compile(rt_ctx *ctx, bool autotune, timer *t, const char **cfg)
{
    static const rt_dim_value md[] = {{"S", MAXS}};
    kc_model_options o = {.compile = {.name = "tune_gpu.kiln", .text = MODEL},
                          .max_dims = md,
                          .nmax_dims = 1,
                          .autotune = autotune,
                          .tune_hooks = {.timer = gpu_time, .timer_user = t}};
    rt_model *m = NULL;
    rt_status st = kc_compile_model(ctx, &o, &m, NULL, err, sizeof err);
    CHECK_MSG(st == RT_OK, "compile: %s", err);
    *cfg = NULL;
    for (int i = 0; m && i < rt_model_num_kernels(m); i++)
        if (rt_model_kernel(m, i)->family == CG_FAMILY_MATMUL_WGMMA) *cfg = rt_model_kernel(m, i)->config;
    CHECK_MSG(*cfg, "no matmul_wgmma kernel");
    return m;
}

/* y of m at S rows (poisoned first), on the host. */
static uint16_t *run(rt_model *m, void *x, void *w, void *b, void *y, int64_t S)
{
    CHECK(rt_model_bind_weight(m, "w", 0, IR_BF16, 0, NULL, w, err, sizeof err) == RT_OK);
    CHECK(rt_model_bind_weight(m, "b", 0, IR_BF16, 0, NULL, b, err, sizeof err) == RT_OK);
    cudaMemset(y, 0xff, (size_t)MAXS * N * 2);
    cudaDeviceSynchronize();
    int64_t dims[1] = {S};
    rt_tensor_ptr in[1] = {{"x", x}}, out[1] = {{"y", y}};
    rt_status st = rt_model_run(m, dims, in, 1, out, 1, NULL, err, sizeof err);
    if (st == RT_OK) st = rt_model_sync(m, err, sizeof err);
    CHECK_MSG(st == RT_OK, "run S=%lld: %s", (long long)S, err);
    uint16_t *h = malloc((size_t)S * N * 2);
    cudaMemcpy(h, y, (size_t)S * N * 2, cudaMemcpyDeviceToHost);
    return h;
}

int main(void)
{
    if (gpu_sm90_or_skip()) return 77;
    rng_state = 20261201;
    char *dir = make_tmpdir();
    rt_ctx_config cc = {.cache_dir = dir};
    rt_ctx *ctx = NULL, *ctx2 = NULL;
    CHECK_MSG(rt_ctx_create(&ctx, &cc, err, sizeof err) == RT_OK, "context: %s", err);
    if (!ctx) return 1;
    timer t = {ctx, 0, 0, ""};
    const char *tuned_cfg = NULL, *heur_cfg = NULL, *again_cfg = NULL;
    rt_model *mt = compile(ctx, true, &t, &tuned_cfg);
    const int ntimed = t.calls;
    printf("tuned: %s (%d candidates timed, best %.1f us: %s)\n", tuned_cfg ? tuned_cfg : "-", ntimed, t.best, t.best_cfg);
    CHECK_MSG(ntimed >= 2, "%d candidates timed", ntimed);
    CHECK_MSG(tuned_cfg && strstr(tuned_cfg, "(autotuned)"), "not autotuned: %s", tuned_cfg ? tuned_cfg : "-");
    CHECK_MSG(tuned_cfg && !strcmp(tuned_cfg, t.best_cfg), "runs %s, the fastest was %s", tuned_cfg ? tuned_cfg : "-",
              t.best_cfg);
    timer t0 = {ctx, 0, 0, ""};
    rt_model *mh = compile(ctx, false, &t0, &heur_cfg);
    CHECK(t0.calls == 0);
    printf("heuristic: %s\n", heur_cfg ? heur_cfg : "-");

    void *x = upload_random((size_t)MAXS * K, 1.0f), *w = upload_random((size_t)N * K, 1.0f / 32.0f),
         *b = upload_random(N, 0.5f), *y = NULL;
    cudaMalloc(&y, (size_t)MAXS * N * 2);
    const int64_t rows[2] = {MAXS, 100};
    for (int r = 0; mt && mh && r < 2; r++) {
        uint16_t *yt = run(mt, x, w, b, y, rows[r]), *yh = run(mh, x, w, b, y, rows[r]);
        double num = 0, den = 0;
        size_t nan = 0;
        for (size_t i = 0; i < (size_t)rows[r] * N; i++) {
            const double a = dec(yt[i]), c = dec(yh[i]);
            if (isnan(a) || isnan(c)) nan++;
            else num += (a - c) * (a - c), den += c * c;
        }
        const double rel = sqrt(num / (den > 0 ? den : 1));
        printf("S=%lld: tuned vs heuristic rel %.2e, %zu NaN\n", (long long)rows[r], rel, nan);
        CHECK_MSG(nan == 0 && rel < 2e-2, "S=%lld: rel %.2e, %zu NaN", (long long)rows[r], rel, nan);
        free(yt);
        free(yh);
    }

    /* a second context (another cache object) on the same directory: nothing timed */
    CHECK(rt_ctx_create(&ctx2, &cc, err, sizeof err) == RT_OK);
    timer t2 = {ctx2, 0, 0, ""};
    rt_model *m2 = ctx2 ? compile(ctx2, true, &t2, &again_cfg) : NULL;
    CHECK_MSG(t2.calls == 0, "the second context timed %d candidates", t2.calls);
    CHECK_MSG(again_cfg && tuned_cfg && !strcmp(again_cfg, tuned_cfg), "second context: %s", again_cfg ? again_cfg : "-");

    rt_model_free(m2);
    rt_model_free(mt);
    rt_model_free(mh);
    cudaFree(x);
    cudaFree(w);
    cudaFree(b);
    cudaFree(y);
    rt_ctx_free(ctx2);
    rt_ctx_free(ctx);
    rm_tree(dir);
    free(dir);
    return CHECK_DONE();
}
