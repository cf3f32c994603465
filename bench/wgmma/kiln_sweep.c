/* bench/wgmma/kiln_sweep.c — the generated Hopper matmul (codegen's own kernels, not the
 * harness's hand-written part) against cuBLAS, every autotuning candidate of each 8B GEMM at
 * M = 2048 and 16384, in one process. The candidates are the ones `--autotune` times
 * (cg_kernel.tune_cands: the rule's configuration first), emitted by the driver for a
 * one-linear model (bf16, y = linear(x, w): the TMA-store epilogue) and timed by the tuner's
 * device timer (rt_tuner_time_gpu: scratch operands, median of 15 launches); right after
 * each candidate cuBLAS (cublasGemmEx, bf16 in and out, f32 compute, default algorithm) runs
 * the same shape 15 times on random operands of the same kind (the tuner's fill: magnitudes
 * in [0.5, 1), random signs and mantissas), median: both see the same clocks. All candidates are compiled first, in parallel.
 * The shapes with a "+" are the 8B layer's GEMMs with the epilogue the layer fuses into them
 * (issue 9 asks for these against cuBLAS without one): "QKV+rope" the Q/K/V projection with RoPE
 * on q and k and k, v into the caches (passes/fuse_qkv_epilogue.c; the tuner's zeroed
 * operands: every position 0), "O+res" and "down+res" the residual add, "gate/up+swiglu" the
 * gate and up projections side by side with the SwiGLU product (N = 28672 columns computed,
 * 14336 stored); cuBLAS beside each runs the plain projection of the same M, N, K.
 * Usage: kiln_sweep [OUT.csv]; prints one line per candidate and a summary per shape.
 * KILN_SWEEP_SHAPES=NAME,NAME (e.g. QKV,QKV+rope) sweeps only those.
 * KILN_SWEEP_DRY=1 (no device needed): only list the candidates; KILN_SWEEP_DUMP=DIR writes each
 * candidate's source to DIR/cand_N.cu. KILN_SWEEP_M=2048 or 16384 runs one M; KILN_SWEEP_ONLY=N times
 * only each shape's candidate N (the others are reported as 1e9 us without a launch: for ncu). */
#define _DEFAULT_SOURCE
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_model_internal.h"
#include "src/compile.h"

static char err[4096];

typedef struct collect {
    int n;
    char *name[64], *src[64];
} collect;

/* pass 1: remember each candidate's source (a fake time: the first wins) */
static double collect_time(void *user, const cg_kernel *k, const ir_graph *g, const int64_t *dims, char *e, size_t n)
{
    collect *c = user;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->src[i], k->source)) return 1.0;
    if (c->n < 64) {
        c->name[c->n] = strdup(k->name);
        c->src[c->n++] = strdup(k->source);
    }
    return 1.0;
}

typedef enum { EPI_NONE, EPI_QKV, EPI_RES, EPI_SWIGLU } epi_kind;

typedef struct shape {
    const char *what;
    long long N, K; /* the product's columns and depth (gate/up: both halves) */
    epi_kind epi;   /* the epilogue the 8B layer fuses into it */
} shape;

typedef struct sweep {
    rt_ctx *ctx;
    cublasHandle_t h;
    void *a, *w, *o;
    long long M, N, K;
    const char *what;
    FILE *csv;
    double best_ratio, rule_ratio;
    int idx;
} sweep;

static int cmpf(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static double cublas_us(sweep *s)
{
    const float one = 1.f, zero = 0.f;
    cudaEvent_t ev[32];
    float t[15];
    for (int i = 0; i < 32; i++) cudaEventCreate(&ev[i]);
    for (int i = 0; i < 3 + 15; i++) {
        if (i >= 3) cudaEventRecord(ev[2 * (i - 3)], (cudaStream_t)s->ctx->stream);
        cublasGemmEx(s->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)s->N, (int)s->M, (int)s->K, &one, s->w, CUDA_R_16BF, (int)s->K,
                     s->a, CUDA_R_16BF, (int)s->K, &zero, s->o, CUDA_R_16BF, (int)s->N, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
        if (i >= 3) cudaEventRecord(ev[2 * (i - 3) + 1], (cudaStream_t)s->ctx->stream);
    }
    cudaStreamSynchronize((cudaStream_t)s->ctx->stream);
    for (int i = 0; i < 15; i++) cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]);
    for (int i = 0; i < 32; i++) cudaEventDestroy(ev[i]);
    qsort(t, 15, sizeof t[0], cmpf);
    return 1e3 * t[7];
}

/* pass 2: the device timer, then cuBLAS */
static double sweep_time(void *user, const cg_kernel *k, const ir_graph *g, const int64_t *dims, char *e, size_t n)
{
    sweep *s = user;
    const char *only = getenv("KILN_SWEEP_ONLY"); /* time only candidate N of each shape (for ncu) */
    if (only && atoi(only) != s->idx) {
        s->idx++;
        return 1e9;
    }
    double us = rt_tuner_time_gpu(s->ctx, k, g, dims, e, n);
    double cb = cublas_us(s);
    const double fl = 2.0 * s->M * s->N * s->K;
    const double r = us > 0 ? cb / us : 0;
    printf("  %-14s M=%-5lld %-58s %9.1f us %6.1f TFLOP/s | cuBLAS %9.1f us %6.1f | x%.3f%s\n", s->what, s->M, k->config,
           us, us > 0 ? fl / us / 1e6 : 0, cb, fl / cb / 1e6, r, s->idx == 0 ? "  <- rule" : "");
    if (s->csv)
        fprintf(s->csv, "%s,%lld,%lld,%lld,\"%s\",%d,%.2f,%.2f,%.4f\n", s->what, s->M, s->N, s->K, k->config,
                s->idx == 0, us, cb, r);
    if (s->idx == 0) s->rule_ratio = r;
    if (r > s->best_ratio) s->best_ratio = r;
    s->idx++;
    fflush(stdout);
    return us;
}

/* bf16 of magnitude [0.5, 1), random signs and mantissas: what the tuner's fill kernel writes */
static void upload_random(void *dev, size_t n, uint64_t seed)
{
    uint16_t *h = malloc(n * 2);
    uint64_t z = seed * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        z ^= z << 13;
        z ^= z >> 7;
        z ^= z << 17;
        h[i] = (uint16_t)((z & 0x8000u) | 0x3F00u | ((z >> 20) & 0x7Fu));
    }
    cudaMemcpy(dev, h, n * 2, cudaMemcpyHostToDevice);
    free(h);
}

static char *model_text(const shape *sh)
{
    char *t = malloc(1024);
    switch (sh->epi) {
    case EPI_QKV:
        snprintf(t, 1024,
                 "model mm {\n  dims S\n  input x : bf16[1, S, 4096]\n  input pos : i32[1]\n"
                 "  state kc : bf16[1, 8, S, 128]\n  state vc : bf16[1, 8, S, 128]\n"
                 "  weight wq : bf16[4096, 4096]\n  weight wk : bf16[1024, 4096]\n  weight wv : bf16[1024, 4096]\n"
                 "  q = rope(reshape(linear(x, wq), [1, S, 32, 128]), pos, theta=500000.0)\n"
                 "  k = rope(reshape(linear(x, wk), [1, S, 8, 128]), pos, theta=500000.0)\n"
                 "  v = reshape(linear(x, wv), [1, S, 8, 128])\n"
                 "  kc, vc = cache_write(kc, vc, k, v, pos)\n  output o = q\n}\n");
        break;
    case EPI_RES:
        snprintf(t, 1024,
                 "model mm {\n  dims S\n  input x : bf16[S, %lld]\n  input r : bf16[S, %lld]\n"
                 "  weight w : bf16[%lld, %lld]\n  output y = r + linear(x, w)\n}\n",
                 sh->K, sh->N, sh->N, sh->K);
        break;
    case EPI_SWIGLU:
        snprintf(t, 1024,
                 "model mm {\n  dims S\n  input x : bf16[S, %lld]\n  weight wg : bf16[%lld, %lld]\n"
                 "  weight wu : bf16[%lld, %lld]\n  output y = silu(linear(x, wg)) * linear(x, wu)\n}\n",
                 sh->K, sh->N / 2, sh->K, sh->N / 2, sh->K);
        break;
    default:
        snprintf(t, 1024,
                 "model mm {\n  dims S\n  input x : bf16[S, %lld]\n  weight w : bf16[%lld, %lld]\n  output y = linear(x, w)\n}\n",
                 sh->K, sh->N, sh->K);
    }
    return t;
}

static int compile(rt_ctx *ctx, const char *text, long long M, rt_tune_hooks hooks)
{
    const rt_dim_value md[] = {{"S", M}};
    kc_model_options o = {.compile = {.name = "mm.kiln", .text = text},
                          .max_dims = md,
                          .nmax_dims = 1,
                          .run = {.lazy = true},
                          .autotune = true,
                          .tune_hooks = hooks};
    rt_model *m = NULL;
    rt_status st = kc_compile_model(ctx, &o, &m, NULL, err, sizeof err);
    if (st != RT_OK) fprintf(stderr, "compile: %s\n", err);
    rt_model_free(m);
    return st == RT_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    char dir[] = "/tmp/kiln-sweep-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    const bool dry = getenv("KILN_SWEEP_DRY") != NULL; /* no device: list the candidates only */
    rt_ctx_config cc = {.cache_dir = dir, .compile_threads = 16, .compile_only = dry, .arch = dry ? "sm_90a" : NULL};
    rt_ctx *ctx = NULL;
    if (rt_ctx_create(&ctx, &cc, err, sizeof err) != RT_OK || (!dry && !rt_ctx_has_device(ctx))) {
        fprintf(stderr, "no device: %s\n", err);
        return 77;
    }
    FILE *csv = argc > 1 ? fopen(argv[1], "w") : NULL;
    if (csv) fprintf(csv, "gemm,M,N,K,config,rule,us,cublas_us,x_cublas\n");
    const shape shapes[] = {{"QKV", 6144, 4096, EPI_NONE},           {"QKV+rope", 6144, 4096, EPI_QKV},
                            {"O", 4096, 4096, EPI_NONE},             {"O+res", 4096, 4096, EPI_RES},
                            {"gate/up", 28672, 4096, EPI_NONE},      {"gate/up+swiglu", 28672, 4096, EPI_SWIGLU},
                            {"down", 4096, 14336, EPI_NONE},         {"down+res", 4096, 14336, EPI_RES}};
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    const char *only = getenv("KILN_SWEEP_SHAPES");
    bool use[NSHAPES];
    for (int s = 0; s < NSHAPES; s++) {
        use[s] = !only;
        for (const char *c = only; c && *c; c += strcspn(c, ",") + (c[strcspn(c, ",")] == ',')) {
            size_t l = strcspn(c, ",");
            use[s] |= strlen(shapes[s].what) == l && !strncmp(c, shapes[s].what, l);
        }
    }
    const long long Ms[] = {2048, 16384};
    const long long only_m = getenv("KILN_SWEEP_M") ? atoll(getenv("KILN_SWEEP_M")) : 0; /* one of them */
    /* pass 1: every candidate's source, compiled in parallel through the context's cache */
    collect col = {0};
    const rt_tune_device fake = {"collect", 0, 0, 0};
    for (int s = 0; s < NSHAPES; s++) {
        if (!use[s]) continue;
        char *t = model_text(&shapes[s]);
        if (compile(ctx, t, 2048, (rt_tune_hooks){.timer = collect_time, .timer_user = &col, .device = &fake})) return 1;
        free(t);
    }
    for (int i = 0; dry && i < col.n; i++) printf("candidate %s (%zu bytes of source)\n", col.name[i], strlen(col.src[i]));
    const char *dump = getenv("KILN_SWEEP_DUMP"); /* a folder: each candidate's source as cand_N.cu */
    for (int i = 0; dump && i < col.n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/cand_%d.cu", dump, i);
        FILE *f = fopen(path, "w");
        if (!f || fputs(col.src[i], f) < 0) fprintf(stderr, "kiln_sweep: cannot write %s\n", path);
        if (f) fclose(f);
    }
    if (dry) return 0;
    rt_compile_opts co = {.arch = ctx->arch};
    rt_compile_result *res = calloc((size_t)col.n, sizeof *res);
    rt_status cst = rt_cache_compile_many(ctx->cache, col.n, (const char *const *)col.name, (const char *const *)col.src,
                                          &co, 0, res, NULL, 16, NULL, NULL);
    printf("compiled %d candidates: %s\n", col.n, rt_status_str(cst));
    for (int i = 0; i < col.n; i++) rt_compile_result_free(&res[i]);
    free(res);
    /* pass 2: time them, cuBLAS next to each */
    sweep sw = {.ctx = ctx, .csv = csv};
    cublasCreate(&sw.h);
    cublasSetStream(sw.h, (cudaStream_t)ctx->stream);
    for (int mi = 0; mi < 2; mi++)
        for (int s = 0; s < NSHAPES; s++) {
            if (!use[s] || (only_m && Ms[mi] != only_m)) continue;
            sw.M = Ms[mi];
            sw.N = shapes[s].N;
            sw.K = shapes[s].K;
            sw.what = shapes[s].what;
            sw.idx = 0;
            sw.best_ratio = sw.rule_ratio = 0;
            cudaMalloc(&sw.a, (size_t)sw.M * sw.K * 2);
            cudaMalloc(&sw.w, (size_t)sw.N * sw.K * 2);
            cudaMalloc(&sw.o, (size_t)sw.M * sw.N * 2);
            upload_random(sw.a, (size_t)sw.M * sw.K, 1);
            upload_random(sw.w, (size_t)sw.N * sw.K, 2);
            /* the real device, one identity per M (the large-shape variant's problem has M=sym) */
            rt_tune_device dev;
            rt_tune_device_of(ctx, &dev);
            char nm[sizeof dev.name];
            snprintf(nm, sizeof nm, "%.90s, sweep M=%lld", dev.name, sw.M);
            memcpy(dev.name, nm, sizeof nm);
            char *t = model_text(&shapes[s]);
            int rc = compile(ctx, t, sw.M, (rt_tune_hooks){.timer = sweep_time, .timer_user = &sw, .device = &dev});
            free(t);
            printf("SUMMARY %-14s M=%-5lld rule x%.3f best x%.3f%s\n", sw.what, sw.M, sw.rule_ratio, sw.best_ratio,
                   rc ? "  (compile failed)" : "");
            cudaFree(sw.a);
            cudaFree(sw.w);
            cudaFree(sw.o);
        }
    cublasDestroy(sw.h);
    if (csv) fclose(csv);
    rt_ctx_free(ctx);
    return 0;
}
