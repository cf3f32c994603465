/* tests/gpu/test_gpu_matmul.c — the matmul templates on the GPU.
 *
 * Every configuration (template x dtype x B layout x epilogue x tiles) is
 * compiled once with NVRTC for sm_90a (tests/gpu/mm_src.h builds the unit:
 * common.cuh, a hand-written generated part, the template) and loaded with
 * runtime/rt_launch. Each case draws fresh random inputs (seed printed; set
 * KILN_SEED to repeat a run), poisons the output (and the split-K workspace)
 * with 0xFF bytes (NaN in every dtype), launches by CONTRACT.md's launch rule
 * and compares with a reference: float64 on the CPU for small problems,
 * cuBLAS (cublasGemmStridedBatchedEx, f32 compute, f32 output) for large
 * ones, plus bias + residual on the CPU for that epilogue. Pass:
 * ||out - ref|| / ||ref|| < 1e-2 (bf16, f16) or 1e-4 (f32) and no NaN (an
 * element left unwritten stays NaN). Split-K cases run twice on the same
 * counters: the last CTA must have reset them.
 *
 * matmul_wgmma.cuh (Hopper: TMA + wgmma, persistent) runs the same cases when
 * TMA can describe the operands (16-byte aligned base, leading dims multiples
 * of 8 elements, B as [N, K]); the others are skipped for it, as codegen sends
 * them to matmul_mma.cuh. Its kernel parameter is {tensor map of A, of W,
 * KilnArgs} (runtime/rt_tmap.h encodes the maps), its grid one CTA (or
 * cluster) per resident slot.
 *
 * Output: one line per case, then "N passed, N failed". Exit 0, 1 on any
 * failure, 77 when there is no CUDA device.
 * Environment: KILN_MM_FILTER=substr runs only configurations whose name
 * contains substr (a|b|...: any of them); KILN_MM_SMALL=1 only the cases checked against the CPU (small enough
 * for compute-sanitizer); KILN_SEED=n fixes the inputs; KILN_BENCH=1 also times
 * decode GEMVs and the prefill O and QKV products (M = 2048; QKV also 16384) against cuBLAS (median of 50 launches,
 * CUDA events, inputs rotated so weights do not sit in L2; KILN_BENCH_ONLY=1: those
 * alone, no test cases); KILN_BENCH=2
 * instead sweeps GEMV and skinny configurations over the Llama layers'
 * projections at M = 1, 17, 32 and 64 (and 2 when KILN_SWEEP_M names it) against cuBLAS in the same process (sweep(): CUPTI
 * kernel durations, CSV to $KILN_BENCH_CSV); KILN_SWEEP_ONLY=1 with it compiles and runs
 * the sweep's configurations alone (no test cases), KILN_SWEEP_M=m at that row count alone
 * (m1,m2,...: at those), KILN_SWEEP_SHAPES=substr on the shapes whose name holds it.
 * No test asserts a time. */
#define _POSIX_C_SOURCE 200809L
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/mm_src.h"
#include "ir/ir.h"
#include "runtime/rt_cupti.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_tmap.h"

static int g_pass, g_fail, g_broken;

/* ---- random numbers: splitmix64 ------------------------------------------- */
static uint64_t g_rng;
static uint64_t rng_next(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_uniform(void) /* [-1, 1) */
{
    return (float)((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* A host tensor: raw storage in dtype dt and the stored values as float. */
typedef struct htensor {
    int dt;
    size_t n;
    void *raw;
    float *val;
} htensor;

static int ht_random(htensor *t, int dt, size_t n)
{
    t->dt = dt;
    t->n = n;
    t->raw = malloc(n * mm_dt_size(dt) + 16);
    t->val = malloc(n * sizeof(float) + 16);
    if (!t->raw || !t->val) return 0;
    for (size_t i = 0; i < n; i++) {
        float f = rng_uniform();
        if (dt == MM_BF16) {
            uint16_t h = ir_f32_to_bf16_bits(f);
            ((uint16_t *)t->raw)[i] = h;
            t->val[i] = ir_bf16_bits_to_f32(h);
        } else if (dt == MM_F16) {
            uint16_t h = ir_f32_to_f16_bits(f);
            ((uint16_t *)t->raw)[i] = h;
            t->val[i] = ir_f16_bits_to_f32(h);
        } else {
            ((float *)t->raw)[i] = f;
            t->val[i] = f;
        }
    }
    return 1;
}
static void ht_free(htensor *t)
{
    free(t->raw);
    free(t->val);
    memset(t, 0, sizeof *t);
}
static double raw_get(int dt, const void *raw, size_t i)
{
    if (dt == MM_BF16) return ir_bf16_bits_to_f32(((const uint16_t *)raw)[i]);
    if (dt == MM_F16) return ir_f16_bits_to_f32(((const uint16_t *)raw)[i]);
    return ((const float *)raw)[i];
}

/* ---- CUDA helpers ------------------------------------------------------------- */
static int cuda_ok(cudaError_t e, const char *what, int line)
{
    if (e == cudaSuccess) return 1;
    fprintf(stderr, "test_gpu_matmul.c:%d: %s: %s (%s)\n", line, what, cudaGetErrorString(e), cudaGetErrorName(e));
    if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorMisalignedAddress ||
        e == cudaErrorIllegalInstruction || e == cudaErrorHardwareStackError || e == cudaErrorLaunchTimeout ||
        e == cudaErrorAssert)
        g_broken = 1; /* sticky: the context is lost, later cases cannot run */
    return 0;
}
#define CK(call) cuda_ok((call), #call, __LINE__)

static int blas_ok(cublasStatus_t s, const char *what, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return 1;
    fprintf(stderr, "test_gpu_matmul.c:%d: %s: cuBLAS status %d\n", line, what, (int)s);
    return 0;
}
#define BK(call) blas_ok((call), #call, __LINE__)

static cudaDataType_t cuda_type(int dt)
{
    return dt == MM_BF16 ? CUDA_R_16BF : dt == MM_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* C[b] (f32, [M][N]) = A[b] (M x K, lda) * B(b) through cuBLAS (column-major:
 * C^T = op(W) A^T). */
static int cublas_ref(cublasHandle_t h, int dt, int nk, const void *dA, const void *dW, float *dC, long long M,
                      long long N, long long K, long long batch, long long lda, long long ldw, long long sa,
                      long long sw)
{
    const float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = dt == MM_F32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    return BK(cublasGemmStridedBatchedEx(h, nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                                         dW, cuda_type(dt), (int)ldw, sw, dA, cuda_type(dt), (int)lda, sa, &zero, dC,
                                         CUDA_R_32F, (int)N, M * N, (int)batch, ct, CUBLAS_GEMM_DEFAULT));
}

/* ---- one case ------------------------------------------------------------------- */
typedef struct mm_case {
    int cfg;
    long long M, N, K, batch;
    int shared_w; /* batch > 1 with one weight (sw = 0) */
    int a_off;    /* A starts a_off elements into its allocation (misaligned when odd) */
    int pad;      /* padded leading dims: lda, ldw = the row length rounded up to 8, plus 8 */
} mm_case;

typedef struct compiled {
    mm_cfg cfg;
    char name[128];
    rt_module *mod;
    rt_kernel k;
    int ok;
    long long resident; /* matmul_wgmma: CTAs (clusters when wn = 2) resident at once */
} compiled;

static const double CPU_REF_LIMIT = 3e7; /* multiply-adds; above: cuBLAS */
static int g_maxsmem; /* the device's opt-in shared memory per block (gemv_mma's staged K slice) */
static int g_small;   /* KILN_MM_SMALL=1: only the cases checked on the CPU (for compute-sanitizer) */

/* matmul_wgmma.cuh's one kernel parameter (KilnTmaArgs): the maps of A, W and the output, with
 * KILN_WGMMA_RES_TMA (mm_src.h: bk bit 6) two more (the residual's, one unused), then KilnArgs. */
typedef struct wg_args {
    rt_tmap m[5];
    mm_args p;
} wg_args;

/* The operands of `a` as tensor maps for configuration c (batch b); the
 * output too with the TMA-store epilogue (c->cols > 0). */
static int wg_operands(const mm_cfg *c, const mm_args *a, rt_tmap_operand *oa, rt_tmap_operand *ow,
                       rt_tmap_operand *oo)
{
    *oa = (rt_tmap_operand){a->a, c->dt == MM_F16, a->K, a->M, a->lda, a->batch, a->sa, c->bm};
    *ow = (rt_tmap_operand){a->w, c->dt == MM_F16, a->K, a->N, a->ldw, a->batch, a->sw, c->bn / c->wn};
    *oo = (rt_tmap_operand){a->out, c->dt == MM_F16, a->N, a->M, a->ldo, a->batch, a->so, 64};
    return c->nk && rt_tmap_describable(oa) && rt_tmap_describable(ow) && (c->cols == 0 || rt_tmap_describable(oo));
}
/* Tiles of configuration c (the split-K workspace and counters). */
static long long wg_tiles(const mm_cfg *c, long long M, long long N, long long batch)
{
    return batch * ((M + c->bm - 1) / c->bm) * ((N + c->bn - 1) / c->bn);
}

/* Launch c on `a` by its launch rule (CONTRACT.md; matmul_wgmma.cuh's header for wgmma). */
static rt_status launch_cfg(const compiled *c, const mm_args *a, char *err, size_t n)
{
    const mm_cfg *cf = &c->cfg;
    unsigned grid[3];
    rt_dim3 bl = {(unsigned)mm_threads(cf), 1, 1};
    if (cf->kind != MM_KIND_WGMMA) {
        mm_grid(cf, a->M, a->N, a->batch, grid);
        rt_dim3 g = {grid[0], grid[1], grid[2]};
        const size_t smem = cf->kind == MM_KIND_GMMA ? mm_gmma_smem(cf, a->K) : mm_smem_bytes(cf);
        return rt_launch(&c->k, g, bl, smem, NULL, a, sizeof *a, err, n);
    }
    wg_args w;
    rt_tmap_operand oa, ow, oo;
    memset(&w, 0, sizeof w);
    const bool res = (cf->bk & 64) != 0;
    if (!wg_operands(cf, a, &oa, &ow, &oo)) {
        snprintf(err, n, "operands not describable by TMA");
        return RT_ERR_INVALID;
    }
    /* the residual: the output's geometry (mm_src.h's hooks read p.res + b * so + m * ldo + n) */
    const rt_tmap_operand orr = {a->res, cf->dt == MM_F16, a->N, a->M, a->ldo, a->batch, a->so, 64};
    if (res && !rt_tmap_describable(&orr)) {
        snprintf(err, n, "the residual is not describable by TMA");
        return RT_ERR_INVALID;
    }
    rt_status s = rt_tmap_encode(&w.m[0], &oa, err, n);
    if (s == RT_OK) s = rt_tmap_encode(&w.m[1], &ow, err, n);
    if (s == RT_OK && cf->cols > 0) s = rt_tmap_encode(&w.m[2], &oo, err, n);
    if (s == RT_OK && res) s = rt_tmap_encode(&w.m[3], &orr, err, n);
    if (s != RT_OK) return s;
    /* KilnArgs right after the maps: at +384, or +640 with the residual's */
    const size_t at = (res ? 5 : 3) * sizeof(rt_tmap), psize = (at + sizeof *a + 63) / 64 * 64;
    memcpy((unsigned char *)&w + at, a, sizeof *a);
    const long long units_m = ((a->M + cf->bm - 1) / cf->bm + cf->wn - 1) / cf->wn;
    const long long units = a->batch * units_m * ((a->N + cf->bn - 1) / cf->bn) * (cf->splitk > 1 ? cf->splitk : 1);
    /* split-K in a cluster: one cluster of ck CTAs along y per unit (resident: clusters) */
    rt_dim3 g = {(unsigned)(cf->wn * (units < c->resident ? units : c->resident)), cf->ck > 1 ? (unsigned)cf->ck : 1u, 1};
    return rt_launch(&c->k, g, bl, mm_smem_bytes(cf), NULL, &w, psize, err, n);
}

static void run_case(const compiled *c, const mm_case *t, cublasHandle_t blas)
{
    const mm_cfg *cf = &c->cfg;
    const int dt = cf->dt;
    const size_t es = mm_dt_size(dt);
    const long long M = t->M, N = t->N, K = t->K, B = t->batch;
    const long long wcols = cf->nk ? K : N;
    const long long lda = t->pad ? (K + 7) / 8 * 8 + 8 : K, ldw = t->pad ? (wcols + 7) / 8 * 8 + 8 : wcols;
    const long long wrows = cf->nk ? N : K;
    const long long sa = M * lda, sw = t->shared_w ? 0 : wrows * ldw;
    const size_t na = (size_t)(B * sa) + (size_t)t->a_off, nw = (size_t)((t->shared_w ? 1 : B) * wrows * ldw);
    const size_t no = (size_t)(B * M * N);
    const double tol = dt == MM_F32 ? 1e-4 : 1e-2;
    unsigned grid[3] = {0, 0, 0}; /* the GEMV split-K counters need grid[0] */
    if (cf->kind != MM_KIND_WGMMA) mm_grid(cf, M, N, B, grid);
    if (cf->kind == MM_KIND_WGMMA) {
        /* stands in for the cudaMalloc bases (256-byte aligned) in the describability check */
        static _Alignas(256) unsigned char base[512];
        mm_args probe = {0};
        rt_tmap_operand oa, ow, oo;
        probe.a = base + (size_t)t->a_off * es;
        probe.w = base;
        probe.out = base;
        probe.so = M * N;
        probe.ldo = N;
        probe.sa = M * lda;
        probe.sw = sw;
        probe.lda = lda;
        probe.ldw = ldw;
        probe.M = M;
        probe.N = N;
        probe.K = K;
        probe.batch = B;
        if (!wg_operands(cf, &probe, &oa, &ow, &oo)) {
            printf("skip %s M=%lld N=%lld K=%lld b=%lld%s%s: not TMA-describable (matmul_mma.cuh's case)\n", c->name,
                   M, N, K, B, t->a_off ? " A+1(misaligned)" : "", t->pad ? " padded-ld" : "");
            return;
        }
    }
    if (cf->kind == MM_KIND_GMMA && (M > 8LL * cf->maxm || mm_gmma_smem(cf, K) > (size_t)g_maxsmem)) {
        /* codegen splits K further (or takes another template) for such a shape */
        printf("skip %s M=%lld N=%lld K=%lld: the K slice (%zu B) exceeds shared memory or M > 8*NT\n", c->name, M, N,
               K, mm_gmma_smem(cf, K));
        return;
    }
    const int use_cpu = (double)M * N * K * B <= CPU_REF_LIMIT;
    if (g_small && !use_cpu) return; /* not counted: the run asked for the small cases alone */
    /* split-K counters reset themselves, the cluster split's barriers start afresh: launch twice */
    const int reps = cf->splitk > 1 || cf->ck > 1 ? 2 : 1;

    char label[256];
    snprintf(label, sizeof label, "%s M=%lld N=%lld K=%lld b=%lld%s%s%s", c->name, M, N, K, B,
             t->shared_w ? " sharedW" : "", t->a_off ? " A+1(misaligned)" : "", t->pad ? " padded-ld" : "");

    htensor hA = {0}, hW = {0}, hBias = {0}, hRes = {0};
    void *dA = NULL, *dW = NULL, *dO = NULL, *dBias = NULL, *dRes = NULL;
    float *dC = NULL, *dWs = NULL;
    int *dSem = NULL;
    double *acc = NULL;
    void *hO = NULL;
    float *hC = NULL;
    int ok = 0;
    char err[512];
    double rel = -1;
    long long nans = 0;

    if (!ht_random(&hA, dt, na) || !ht_random(&hW, dt, nw) || !ht_random(&hBias, dt, (size_t)N) ||
        !ht_random(&hRes, dt, no) || !(acc = malloc(no * sizeof(double))) || !(hO = malloc(no * es))) {
        fprintf(stderr, "out of host memory\n");
        goto done;
    }
    if (!CK(cudaMalloc(&dA, na * es)) || !CK(cudaMalloc(&dW, nw * es)) || !CK(cudaMalloc(&dO, no * es)) ||
        !CK(cudaMalloc(&dBias, (size_t)N * es)) || !CK(cudaMalloc(&dRes, no * es)) ||
        !CK(cudaMemcpy(dA, hA.raw, na * es, cudaMemcpyHostToDevice)) ||
        !CK(cudaMemcpy(dW, hW.raw, nw * es, cudaMemcpyHostToDevice)) ||
        !CK(cudaMemcpy(dBias, hBias.raw, (size_t)N * es, cudaMemcpyHostToDevice)) ||
        !CK(cudaMemcpy(dRes, hRes.raw, no * es, cudaMemcpyHostToDevice)))
        goto done;
    size_t nws = 0, nsem = 0;
    if (cf->kind == MM_KIND_GEMV && cf->splitk > 1) {
        nws = (size_t)(B * cf->splitk * M * N) * (cf->norm ? 2 : 1); /* + the sums of squares */
        nsem = (size_t)(B * ((N + cf->cols - 1) / cf->cols)); /* one per column block */
        if (!CK(cudaMalloc((void **)&dWs, nws * sizeof(float))) || !CK(cudaMalloc((void **)&dSem, nsem * sizeof(int))) ||
            !CK(cudaMemset(dSem, 0, nsem * sizeof(int))))
            goto done;
    }
    if (cf->kind == MM_KIND_GMMA && cf->splitk > 1) {
        nws = (size_t)(B * cf->splitk * M * N) * (cf->norm ? 2 : 1); /* + the sums of squares */
        nsem = (size_t)(B * mm_gmma_tiles(cf, N));                   /* one per tile */
        if (!CK(cudaMalloc((void **)&dWs, nws * sizeof(float))) || !CK(cudaMalloc((void **)&dSem, nsem * sizeof(int))) ||
            !CK(cudaMemset(dSem, 0, nsem * sizeof(int))))
            goto done;
    }
    if (cf->kind == MM_KIND_WGMMA && cf->splitk > 1) {
        const long long tiles = wg_tiles(cf, M, N, B);
        nws = (size_t)(tiles * cf->splitk * cf->bm * cf->bn);
        nsem = (size_t)(tiles * (cf->wm ? 1 : 2));
        if (!CK(cudaMalloc((void **)&dWs, nws * sizeof(float))) || !CK(cudaMalloc((void **)&dSem, nsem * sizeof(int))) ||
            !CK(cudaMemset(dSem, 0, nsem * sizeof(int))))
            goto done;
    }

    /* reference accumulators */
    if (use_cpu) {
        for (long long b = 0; b < B; b++)
            for (long long m = 0; m < M; m++) {
                const float *a = hA.val + t->a_off + b * sa + m * lda;
                for (long long n = 0; n < N; n++) {
                    double s = 0;
                    const float *w = hW.val + b * sw;
                    if (cf->nk)
                        for (long long k = 0; k < K; k++) s += (double)a[k] * w[n * ldw + k];
                    else
                        for (long long k = 0; k < K; k++) s += (double)a[k] * w[k * ldw + n];
                    acc[(b * M + m) * N + n] = s;
                }
            }
    } else {
        if (!CK(cudaMalloc((void **)&dC, no * sizeof(float))) || !(hC = malloc(no * sizeof(float))) ||
            !cublas_ref(blas, dt, cf->nk, (const char *)dA + (size_t)t->a_off * es, dW, dC, M, N, K, B, lda, ldw, sa,
                        sw) ||
            !CK(cudaDeviceSynchronize()) || !CK(cudaMemcpy(hC, dC, no * sizeof(float), cudaMemcpyDeviceToHost)))
            goto done;
        for (size_t i = 0; i < no; i++) acc[i] = hC[i];
    }
    if (cf->norm) /* the folded RMSNorm: each row's products times 1/rms of its A row */
        for (long long b = 0; b < B; b++)
            for (long long m = 0; m < M; m++) {
                const float *a = hA.val + t->a_off + b * sa + m * lda;
                double ss = 0;
                for (long long k = 0; k < K; k++) ss += (double)a[k] * a[k];
                const double rs = 1.0 / sqrt(ss / (double)K + 1e-5);
                for (long long n = 0; n < N; n++) acc[(b * M + m) * N + n] *= rs;
            }
    if (cf->epi == MM_EPI_BIAS_RES)
        for (size_t i = 0; i < no; i++) acc[i] += (double)hBias.val[i % (size_t)N] + hRes.val[i];

    mm_args args = {0};
    args.a = (const char *)dA + (size_t)t->a_off * es;
    args.w = dW;
    args.out = dO;
    args.bias = dBias;
    args.res = dRes;
    args.ws = dWs;
    args.sem = dSem;
    args.sa = sa;
    args.sw = sw;
    args.lda = lda;
    args.ldw = ldw;
    args.M = M;
    args.N = N;
    args.K = K;
    args.batch = B;
    args.so = M * N;
    args.ldo = N;

    ok = 1;
    for (int rep = 0; rep < reps && ok; rep++) {
        if (!CK(cudaMemset(dO, 0xff, no * es)) || (dWs && !CK(cudaMemset(dWs, 0xff, nws * sizeof(float))))) {
            ok = 0;
            break;
        }
        rt_status s = launch_cfg(c, &args, err, sizeof err);
        if (s != RT_OK) {
            fprintf(stderr, "%s: %s\n", label, err);
            ok = 0;
            break;
        }
        if (!CK(cudaGetLastError()) || !CK(cudaDeviceSynchronize()) ||
            !CK(cudaMemcpy(hO, dO, no * es, cudaMemcpyDeviceToHost))) {
            ok = 0;
            break;
        }
        double num = 0, den = 0;
        nans = 0;
        for (size_t i = 0; i < no; i++) {
            double o = raw_get(dt, hO, i);
            if (!isfinite(o)) {
                nans++;
                continue;
            }
            num += (o - acc[i]) * (o - acc[i]);
            den += acc[i] * acc[i];
        }
        rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (nans || !(rel < tol)) ok = 0;
        if (!ok && reps > 1) fprintf(stderr, "%s: failed on launch %d of %d (split-K counters)\n", label, rep + 1, reps);
    }

done:
    if (ok) g_pass++;
    else g_fail++;
    if (nans)
        printf("%-4s %s  %lld of %zu outputs NaN/unwritten, rel=%.2e (ref %s)\n", ok ? "ok" : "FAIL", label, nans, no,
               rel, use_cpu ? "cpu f64" : "cublas");
    else
        printf("%-4s %s  rel=%.2e tol=%.0e (ref %s)\n", ok ? "ok" : "FAIL", label, rel, tol,
               use_cpu ? "cpu f64" : "cublas");
    fflush(stdout);
    cudaFree(dA);
    cudaFree(dW);
    cudaFree(dO);
    cudaFree(dBias);
    cudaFree(dRes);
    cudaFree(dC);
    cudaFree(dWs);
    cudaFree(dSem);
    ht_free(&hA);
    ht_free(&hW);
    ht_free(&hBias);
    ht_free(&hRes);
    free(acc);
    free(hO);
    free(hC);
}

/* cuBLAS itself against the CPU, both layouts, batched: the large cases rely on it. */
static void cublas_selfcheck(cublasHandle_t blas)
{
    for (int nk = 0; nk <= 1; nk++) {
        const long long M = 33, N = 70, K = 100, B = 2, lda = K, ldw = nk ? K : N;
        const long long sa = M * lda, sw = (nk ? N : K) * ldw;
        htensor hA = {0}, hW = {0};
        void *dA = NULL, *dW = NULL;
        float *dC = NULL, *hC = NULL;
        int ok = 0;
        double num = 0, den = 0;
        if (ht_random(&hA, MM_BF16, (size_t)(B * sa)) && ht_random(&hW, MM_BF16, (size_t)(B * sw)) &&
            (hC = malloc((size_t)(B * M * N) * sizeof(float))) && CK(cudaMalloc(&dA, (size_t)(B * sa) * 2)) &&
            CK(cudaMalloc(&dW, (size_t)(B * sw) * 2)) && CK(cudaMalloc((void **)&dC, (size_t)(B * M * N) * 4)) &&
            CK(cudaMemcpy(dA, hA.raw, (size_t)(B * sa) * 2, cudaMemcpyHostToDevice)) &&
            CK(cudaMemcpy(dW, hW.raw, (size_t)(B * sw) * 2, cudaMemcpyHostToDevice)) &&
            cublas_ref(blas, MM_BF16, nk, dA, dW, dC, M, N, K, B, lda, ldw, sa, sw) &&
            CK(cudaMemcpy(hC, dC, (size_t)(B * M * N) * 4, cudaMemcpyDeviceToHost))) {
            for (long long b = 0; b < B; b++)
                for (long long m = 0; m < M; m++)
                    for (long long n = 0; n < N; n++) {
                        double s = 0;
                        for (long long k = 0; k < K; k++)
                            s += (double)hA.val[b * sa + m * lda + k] *
                                 hW.val[b * sw + (nk ? n * ldw + k : k * ldw + n)];
                        double d = hC[(b * M + m) * N + n] - s;
                        num += d * d;
                        den += s * s;
                    }
            ok = sqrt(num / den) < 1e-5;
        }
        printf("%-4s cublas reference self-check (%s, batched) rel=%.2e\n", ok ? "ok" : "FAIL", nk ? "B [N,K]" : "B [K,N]",
               den > 0 ? sqrt(num / den) : -1.0);
        if (ok) g_pass++;
        else g_fail++;
        cudaFree(dA);
        cudaFree(dW);
        cudaFree(dC);
        free(hC);
        ht_free(&hA);
        ht_free(&hW);
    }
}

/* ---- benchmark (KILN_BENCH=1) ---------------------------------------------------- */
static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

enum { BENCH_ITERS = 50, BENCH_WARM = 5 };

/* Median launch time (ms) of `launch(i)` over BENCH_ITERS, each timed alone with events. */
typedef int (*bench_fn)(void *u, int i);
static float bench_median(bench_fn fn, void *u)
{
    cudaEvent_t ev[2 * BENCH_ITERS];
    float t[BENCH_ITERS];
    for (int i = 0; i < 2 * BENCH_ITERS; i++)
        if (!CK(cudaEventCreate(&ev[i]))) return -1;
    for (int i = 0; i < BENCH_WARM; i++)
        if (!fn(u, i)) return -1;
    for (int i = 0; i < BENCH_ITERS; i++) {
        CK(cudaEventRecord(ev[2 * i], NULL));
        if (!fn(u, i)) return -1;
        CK(cudaEventRecord(ev[2 * i + 1], NULL));
    }
    if (!CK(cudaDeviceSynchronize())) return -1;
    for (int i = 0; i < BENCH_ITERS; i++) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    for (int i = 0; i < 2 * BENCH_ITERS; i++) cudaEventDestroy(ev[i]);
    qsort(t, BENCH_ITERS, sizeof t[0], cmp_float);
    return 0.5f * (t[BENCH_ITERS / 2 - 1] + t[BENCH_ITERS / 2]);
}

typedef struct bench_ctx {
    const compiled *c;
    cublasHandle_t blas;
    int nrot;
    void **A, **W, **O;
    float *ws;
    int *sem;
    long long M, N, K;
} bench_ctx;

static int bench_kiln(void *u, int i)
{
    bench_ctx *b = u;
    const mm_cfg *cf = &b->c->cfg;
    int r = i % b->nrot;
    mm_args a = {0};
    a.a = b->A[r];
    a.w = b->W[r];
    a.out = b->O[r];
    a.ws = b->ws;
    a.sem = b->sem;
    /* the bias + residual epilogue: a bias of N from the weight, the residual another output */
    a.bias = b->W[r];
    a.res = b->O[(r + 1) % b->nrot];
    a.lda = b->K;
    a.ldw = cf->nk ? b->K : b->N;
    a.M = b->M;
    a.N = b->N;
    a.K = b->K;
    a.batch = 1;
    a.so = b->M * b->N;
    a.ldo = b->N;
    a.sa = b->M * b->K;
    a.sw = (cf->nk ? b->N : b->K) * a.ldw;
    char err[512];
    if (launch_cfg(b->c, &a, err, sizeof err) != RT_OK) {
        fprintf(stderr, "bench: %s\n", err);
        return 0;
    }
    return 1;
}

static int bench_cublas(void *u, int i)
{
    bench_ctx *b = u;
    int r = i % b->nrot;
    const float one = 1.0f, zero = 0.0f;
    return BK(cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)b->N, (int)b->M, (int)b->K, &one, b->W[r],
                           CUDA_R_16BF, (int)b->K, b->A[r], CUDA_R_16BF, (int)b->K, &zero, b->O[r], CUDA_R_16BF,
                           (int)b->N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Times kiln configs cs[0..nc) and cuBLAS on M x N x K, bf16, B = [N, K]. */
static void bench_shape(const compiled *cs, int nc, cublasHandle_t blas, long long M, long long N, long long K)
{
    const size_t wbytes = (size_t)(N * K) * 2, abytes = (size_t)(M * K) * 2, obytes = (size_t)(M * N) * 2;
    /* rotate so that the set of weights touched between two uses of one set is >= 3 x 60 MB of L2 */
    int nrot = (int)((180u << 20) / wbytes) + 1;
    if (nrot < 2) nrot = 2;
    if (nrot > 16) nrot = 16;
    void *A[16] = {0}, *W[16] = {0}, *O[16] = {0};
    htensor hA = {0}, hW = {0};
    float *ws = NULL;
    int *sem = NULL;
    const double flop = 2.0 * M * N * K, bytes = (double)(wbytes + abytes + obytes);
    if (!ht_random(&hA, MM_BF16, (size_t)(M * K)) || !ht_random(&hW, MM_BF16, (size_t)(N * K))) goto out;
    for (int r = 0; r < nrot; r++) {
        if (!CK(cudaMalloc(&A[r], abytes)) || !CK(cudaMalloc(&W[r], wbytes)) || !CK(cudaMalloc(&O[r], obytes)) ||
            !CK(cudaMemcpy(A[r], hA.raw, abytes, cudaMemcpyHostToDevice)) ||
            !CK(cudaMemcpy(W[r], hW.raw, wbytes, cudaMemcpyHostToDevice)))
            goto out;
    }
    /* split-K scratch big enough for any config here */
    int slices = 1;
    for (int i = 0; i < nc; i++)
        if (cs[i].cfg.splitk > slices) slices = cs[i].cfg.splitk;
    if (!CK(cudaMalloc((void **)&ws, (size_t)(slices * M * N) * sizeof(float))) ||
        !CK(cudaMalloc((void **)&sem, (size_t)(N + 1) * sizeof(int))) ||
        !CK(cudaMemset(sem, 0, (size_t)(N + 1) * sizeof(int))))
        goto out;
    printf("bench M=%lld N=%lld K=%lld bf16 (floor: %.1f MB, %.2f GFLOP; %d rotating input sets)\n", M, N, K,
           bytes / 1e6, flop / 1e9, nrot);
    for (int i = -1; i < nc; i++) {
        bench_ctx b = {.c = i >= 0 ? &cs[i] : NULL, .blas = blas, .nrot = nrot, .A = A, .W = W, .O = O,
                       .ws = ws, .sem = sem, .M = M, .N = N, .K = K};
        float ms = bench_median(i >= 0 ? bench_kiln : bench_cublas, &b);
        if (ms <= 0) {
            printf("  %-44s failed\n", i >= 0 ? cs[i].name : "cublasGemmEx");
            continue;
        }
        printf("  %-44s %9.2f us  %7.1f GB/s  %7.1f TFLOP/s\n", i >= 0 ? cs[i].name : "cublasGemmEx", ms * 1e3,
               bytes / (ms * 1e-3) / 1e9, flop / (ms * 1e-3) / 1e12);
        fflush(stdout);
    }
out:
    for (int r = 0; r < 16; r++) {
        cudaFree(A[r]);
        cudaFree(W[r]);
        cudaFree(O[r]);
    }
    cudaFree(ws);
    cudaFree(sem);
    ht_free(&hA);
    ht_free(&hW);
}

/* ---- the GEMV sweep (KILN_BENCH=2) ------------------------------------------------- */
/* Every configuration of cs[0..nc) that covers M, on each projection of the Llama-3.2-1B and
 * Llama-3-8B layers at M = 1, 17, 32 and 64 (2 when KILN_SWEEP_M asks): kernel durations from CUPTI (GPU timestamps of each
 * launch, launched back to back, inputs rotated over >= 180 MB so the weights come from
 * HBM), median and p10/p90 of SWEEP_ITERS launches; one line each on stdout and in the CSV
 * file $KILN_BENCH_CSV (when set). TB/s counts the weight, A and output bytes. */
enum { SWEEP_ITERS = 40 };

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void sweep(const compiled *cs, int nc, cublasHandle_t blas)
{
    static const struct { const char *name; long long N, K; } shapes[] = {
        {"1b.qkv", 3072, 2048},  {"1b.o", 2048, 2048},  {"1b.gate_up", 16384, 2048}, {"1b.down", 2048, 8192},
        {"8b.qkv", 6144, 4096},  {"8b.o", 4096, 4096},  {"8b.gate_up", 28672, 4096}, {"8b.down", 4096, 14336},
        /* probes (only when KILN_SWEEP_SHAPES names "probe"): 16..264 column blocks of 128 over a
         * long K, so that a 64x128 tile's CTA streams 4 MB of W: the read rate against the number
         * of SMs streaming at once (one tile per SM up to 132) */
        {"probe.n16", 2048, 16384},   {"probe.n33", 4224, 16384},   {"probe.n66", 8448, 16384},
        {"probe.n99", 12672, 16384},  {"probe.n132", 16896, 16384}, {"probe.n264", 33792, 16384},
    };
    static const long long rows[] = {1, 2, 17, 32, 64};
    const char *csv_path = getenv("KILN_BENCH_CSV");
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv) fprintf(csv, "shape,M,N,K,config,us_median,us_p10,us_p90,weight_MB,TBps\n");
    char err[512];
    rt_cupti *cu = NULL;
    if (rt_cupti_open(&cu, err, sizeof err) != RT_OK) {
        printf("sweep: no CUPTI: %s\n", err);
        if (csv) fclose(csv);
        return;
    }
    /* KILN_SWEEP_M: the row counts to run (one, or a comma-separated list); KILN_SWEEP_SHAPES: only
     * the shapes whose name holds it */
    const char *only_m = getenv("KILN_SWEEP_M"), *only_s = getenv("KILN_SWEEP_SHAPES");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !g_broken; si++)
        for (int ri = 0; ri < (int)(sizeof rows / sizeof rows[0]) && !g_broken; ri++) {
            const long long M = rows[ri], N = shapes[si].N, K = shapes[si].K;
            if (only_s && !strstr(shapes[si].name, only_s)) continue;
            if (!strncmp(shapes[si].name, "probe", 5) && !(only_s && strstr(only_s, "probe"))) continue;
            if (M == 2 && !only_m) continue; /* two rows (decode at B=2) only when asked for */
            if (only_m) {
                char want[32], have[80];
                snprintf(want, sizeof want, ",%lld,", M);
                snprintf(have, sizeof have, ",%s,", only_m);
                if (!strstr(have, want)) continue;
            }
            const size_t wbytes = (size_t)(N * K) * 2, abytes = (size_t)(M * K) * 2, obytes = (size_t)(M * N) * 2;
            int nrot = (int)((180u << 20) / wbytes) + 1;
            if (nrot < 2) nrot = 2;
            if (nrot > 16) nrot = 16;
            void *A[16] = {0}, *W[16] = {0}, *O[16] = {0};
            htensor hA = {0}, hW = {0};
            float *ws = NULL;
            int *sem = NULL;
            if (!ht_random(&hA, MM_BF16, (size_t)(M * K)) || !ht_random(&hW, MM_BF16, (size_t)(N * K))) goto next;
            for (int r = 0; r < nrot; r++)
                if (!CK(cudaMalloc(&A[r], abytes)) || !CK(cudaMalloc(&W[r], wbytes)) || !CK(cudaMalloc(&O[r], obytes)) ||
                    !CK(cudaMemcpy(A[r], hA.raw, abytes, cudaMemcpyHostToDevice)) ||
                    !CK(cudaMemcpy(W[r], hW.raw, wbytes, cudaMemcpyHostToDevice)))
                    goto next;
            if (!CK(cudaMalloc((void **)&ws, (size_t)(2 * 16 * M * N) * sizeof(float))) ||
                !CK(cudaMalloc((void **)&sem, (size_t)(N + 1) * sizeof(int))) ||
                !CK(cudaMemset(sem, 0, (size_t)(N + 1) * sizeof(int))))
                goto next;
            for (int i = 0; i < nc && !g_broken; i++) {
                const compiled *c = &cs[i];
                if (!c->ok) continue;
                if (c->cfg.kind == MM_KIND_GEMV && c->cfg.maxm < M) continue;
                if (c->cfg.kind == MM_KIND_GMMA &&
                    (8LL * c->cfg.maxm < M || 8LL * c->cfg.maxm >= M + 8 || mm_gmma_smem(&c->cfg, K) > (size_t)g_maxsmem))
                    continue;
                if (c->cfg.kind == MM_KIND_WGMMA && M == 1) continue;
                bench_ctx b = {.c = c, .nrot = nrot, .A = A, .W = W, .O = O, .ws = ws, .sem = sem, .M = M, .N = N, .K = K};
                int ok = 1;
                for (int it = 0; it < 3 && ok; it++) ok = bench_kiln(&b, it);
                if (!ok || !CK(cudaDeviceSynchronize()) || rt_cupti_flush(cu, err, sizeof err) != RT_OK) continue;
                rt_cupti_clear(cu);
                for (int it = 0; it < SWEEP_ITERS && ok; it++) ok = bench_kiln(&b, it);
                if (!ok || !CK(cudaDeviceSynchronize()) || rt_cupti_flush(cu, err, sizeof err) != RT_OK) continue;
                int nrec = 0;
                uint64_t dropped = 0, d[SWEEP_ITERS];
                rt_cupti_record *rec = rt_cupti_take(cu, &nrec, &dropped);
                int nd = 0;
                for (int r = 0; r < nrec && nd < SWEEP_ITERS; r++)
                    if (rec[r].kind == RT_CUPTI_KERNEL) d[nd++] = rec[r].end - rec[r].start;
                free(rec);
                if (nd < 3) {
                    printf("sweep %s M=%lld %s: %d kernel records\n", shapes[si].name, M, c->name, nd);
                    continue;
                }
                qsort(d, (size_t)nd, sizeof d[0], cmp_u64);
                const double med = d[nd / 2] * 1e-3, p10 = d[nd / 10] * 1e-3, p90 = d[nd * 9 / 10] * 1e-3;
                const double tbs = (double)(wbytes + abytes + obytes) / (med * 1e-6) / 1e12;
                printf("sweep %-12s M=%-3lld %-44s %8.2f us (p10 %.2f, p90 %.2f)  %.2f TB/s\n", shapes[si].name, M,
                       c->name, med, p10, p90, tbs);
                if (csv)
                    fprintf(csv, "%s,%lld,%lld,%lld,%s,%.3f,%.3f,%.3f,%.2f,%.3f\n", shapes[si].name, M, N, K, c->name, med,
                            p10, p90, wbytes / 1e6, tbs);
                fflush(stdout);
            }
            /* cuBLAS (cublasGemmEx, bf16 out) in the same process: the span of its kernels over
             * SWEEP_ITERS back-to-back calls, per call (a call may launch more than one kernel) */
            if (M > 1 && !g_broken) {
                bench_ctx b = {.blas = blas, .nrot = nrot, .A = A, .W = W, .O = O, .M = M, .N = N, .K = K};
                int ok = 1;
                for (int it = 0; it < 3 && ok; it++) ok = bench_cublas(&b, it);
                if (ok && CK(cudaDeviceSynchronize()) && rt_cupti_flush(cu, err, sizeof err) == RT_OK) {
                    rt_cupti_clear(cu);
                    for (int it = 0; it < SWEEP_ITERS && ok; it++) ok = bench_cublas(&b, it);
                    if (ok && CK(cudaDeviceSynchronize()) && rt_cupti_flush(cu, err, sizeof err) == RT_OK) {
                        int nrec = 0;
                        uint64_t dropped = 0, t0 = UINT64_MAX, t1 = 0;
                        rt_cupti_record *rec = rt_cupti_take(cu, &nrec, &dropped);
                        for (int r = 0; r < nrec; r++)
                            if (rec[r].kind == RT_CUPTI_KERNEL) {
                                if (rec[r].start < t0) t0 = rec[r].start;
                                if (rec[r].end > t1) t1 = rec[r].end;
                            }
                        free(rec);
                        if (t1 > t0) {
                            const double us = (double)(t1 - t0) * 1e-3 / SWEEP_ITERS;
                            const double tbs = (double)(wbytes + abytes + obytes) / (us * 1e-6) / 1e12;
                            printf("sweep %-12s M=%-3lld %-44s %8.2f us (span / %d calls)  %.2f TB/s\n",
                                   shapes[si].name, M, "cublasGemmEx", us, SWEEP_ITERS, tbs);
                            if (csv)
                                fprintf(csv, "%s,%lld,%lld,%lld,cublasGemmEx,%.3f,,,%.2f,%.3f\n", shapes[si].name, M, N,
                                        K, us, wbytes / 1e6, tbs);
                        }
                    }
                }
            }
        next:
            for (int r = 0; r < 16; r++) {
                cudaFree(A[r]);
                cudaFree(W[r]);
                cudaFree(O[r]);
            }
            cudaFree(ws);
            cudaFree(sem);
            ht_free(&hA);
            ht_free(&hW);
        }
    rt_cupti_close(cu);
    if (csv) fclose(csv);
}

/* ---- the configurations and cases -------------------------------------------------- */
#define MMA(dt, nk, epi, bm, bn, bk, wm, wn, st) {MM_KIND_MMA, dt, nk, epi, bm, bn, bk, wm, wn, st, 0, 0, 0, 0, 0}
#define GEMV(dt, nk, epi, cols, sk, maxm) {MM_KIND_GEMV, dt, nk, epi, 0, 0, 0, 0, 0, 0, cols, sk, maxm, 0, 0}
#define GEMV_NORM(dt, nk, epi, cols, sk, maxm) {MM_KIND_GEMV, dt, nk, epi, 0, 0, 0, 0, 0, 0, cols, sk, maxm, 1, 0}
/* a grid of at most `grid` CTAs along N, each walking several column blocks */
#define GEMV_GRID(dt, nk, epi, cols, sk, maxm, norm, grid) {MM_KIND_GEMV, dt, nk, epi, grid, 0, 0, 0, 0, 0, cols, sk, maxm, norm, 0}
/* gemv_mma: nt row tiles of 8, mt 16-column tiles per warp task, w warps, u k blocks per load
 * group, sk K slices, norm, grid: at most that many CTAs along N (0: none) */
#define GMMA(dt, epi, nt, mt, w, u, sk, norm, grid) {MM_KIND_GMMA, dt, 1, epi, grid, 0, 0, w, 0, u, mt, sk, nt, norm, 0}
/* the GEMV's knobs (0: the template's default): unroll, CTAs per SM (minb), nopipe 1 = no
 * column-block pipelining (KILN_GEMV_PIPE 0) */
#define GEMV_X(dt, nk, epi, cols, sk, maxm, norm, grid, unroll, minb, nopipe) \
    {MM_KIND_GEMV, dt, nk, epi, grid, 0, 0, minb, nopipe, unroll, cols, sk, maxm, norm, 0}
/* ... and the deferred reduction (KILN_GEMV_DEFER, mm_src.h: in bn; 0 the template's default,
 * -1 off: the CTA-wide reduction after every column block) */
#define GEMV_D(dt, nk, epi, cols, sk, maxm, norm, grid, unroll, minb, defer) \
    {MM_KIND_GEMV, dt, nk, epi, grid, defer, 0, minb, 0, unroll, cols, sk, maxm, norm, 0}
/* ... and the weights through a ring of `ring` slots per thread in shared memory (KILN_GEMV_RING;
 * mm_src.h: in ck), the deferred reduction at its default */
#define GEMV_R(dt, nk, epi, cols, maxm, norm, grid, minb, ring) \
    {MM_KIND_GEMV, dt, nk, epi, grid, 0, 0, minb, 0, 0, cols, 1, maxm, norm, ring}
/* pp: ping-pong consumers; cm: CTAs per cluster along M (mm_src.h keeps them in wm, wn) */
#define WGMMA(dt, epi, bm, bn, st, pp, cm) {MM_KIND_WGMMA, dt, 1, epi, bm, bn, 0, pp, cm, st, 0, 0, 0, 0, 0}
/* ec: output columns staged by the TMA-store epilogue (0: from registers); sk: split-K factor */
#define WGMMA_X(dt, epi, bm, bn, st, pp, ec, sk) {MM_KIND_WGMMA, dt, 1, epi, bm, bn, 0, pp, 1, st, ec, sk, 0, 0, 0}
/* ... with the decode-sized options (mm_src.h: kept in bk; W early, W evict-first, the epilogue's
 * operands early, W's next steps into L2) */
#define WGMMA_O(dt, epi, bm, bn, st, pp, ec, sk, o) {MM_KIND_WGMMA, dt, 1, epi, bm, bn, o, pp, 1, st, ec, sk, 0, 0, 0}
/* the folded RMSNorm (KILN_MATMUL_NORM) in the Hopper template (no split-K; o: the decode-sized
 * options as above) and its mma.sync fallback */
#define WGMMA_NORM(dt, epi, bm, bn, st, pp, ec, o) {MM_KIND_WGMMA, dt, 1, epi, bm, bn, o, pp, 1, st, ec, 1, 0, 1, 0}
#define MMA_NORM(dt, nk, epi, bm, bn, bk, wm, wn, st) {MM_KIND_MMA, dt, nk, epi, bm, bn, bk, wm, wn, st, 0, 0, 0, 1, 0}
/* ... staging ec columns for the TMA store, in clusters of cm CTAs along M (the W box multicast) */
#define WGMMA_XC(dt, epi, bm, bn, st, pp, ec, cm) {MM_KIND_WGMMA, dt, 1, epi, bm, bn, 0, pp, cm, st, ec, 1, 0, 0, 0}
/* split-K in a cluster of ck CTAs (KILN_WGMMA_CLUSTER_K; o: the decode-sized options; norm: the folded norm) */
#define WGMMA_CK(dt, epi, bm, bn, st, pp, ec, ck, o, norm) {MM_KIND_WGMMA, dt, 1, epi, bm, bn, o, pp, 1, st, ec, 1, 0, norm, ck}

static const mm_cfg test_cfgs[] = {
    /* 0 */ MMA(MM_BF16, 1, MM_EPI_STORE, 128, 128, 32, 2, 2, 4),
    /* 1 */ MMA(MM_BF16, 0, MM_EPI_STORE, 128, 128, 32, 2, 2, 4),
    /* 2 */ MMA(MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 32, 2, 2, 3),
    /* 3 */ MMA(MM_BF16, 0, MM_EPI_BIAS_RES, 128, 256, 32, 2, 4, 3),
    /* 4 */ MMA(MM_F16, 1, MM_EPI_STORE, 128, 64, 64, 2, 2, 2),
    /* 5 */ MMA(MM_F32, 1, MM_EPI_STORE, 64, 64, 16, 2, 2, 1),
    /* 6 */ MMA(MM_F32, 0, MM_EPI_BIAS_RES, 64, 128, 32, 2, 2, 1),
    /* 7 */ GEMV(MM_BF16, 1, MM_EPI_STORE, 8, 1, 4),
    /* 8 */ GEMV(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 4, 16),
    /* 9 */ GEMV(MM_BF16, 0, MM_EPI_STORE, 8, 1, 4),
    /* 10 */ GEMV(MM_BF16, 0, MM_EPI_BIAS_RES, 8, 3, 4),
    /* 11 */ GEMV(MM_F32, 1, MM_EPI_STORE, 4, 2, 4),
    /* 12 */ GEMV(MM_F32, 0, MM_EPI_BIAS_RES, 8, 1, 16),
    /* 13 */ GEMV(MM_F16, 1, MM_EPI_STORE, 16, 3, 1),
    /* 14 */ WGMMA(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 1),
    /* 15 */ WGMMA(MM_BF16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 2),
    /* 16 */ WGMMA(MM_BF16, MM_EPI_STORE, 64, 256, 5, 1, 2),
    /* 17 */ WGMMA(MM_F16, MM_EPI_BIAS_RES, 256, 128, 4, 0, 1),
    /* 18 */ WGMMA_X(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 128, 1),
    /* 19 */ WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 128, 1),
    /* 20 */ WGMMA_X(MM_F16, MM_EPI_STORE, 128, 256, 3, 0, 256, 1),
    /* 21 */ WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 256, 4, 1, 128, 4),
    /* 22 */ WGMMA_X(MM_F16, MM_EPI_STORE, 64, 256, 5, 1, 0, 3),
    /* 23 */ WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 128, 5),
    /* 24 */ GEMV_NORM(MM_BF16, 1, MM_EPI_STORE, 8, 1, 4),
    /* 25 */ GEMV_NORM(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 4, 16),
    /* 26 */ GEMV_NORM(MM_BF16, 0, MM_EPI_STORE, 8, 3, 4),
    /* 27 */ GEMV_NORM(MM_F32, 1, MM_EPI_BIAS_RES, 4, 2, 1),
    /* 28 */ GEMV_GRID(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 3, 4, 0, 5),
    /* 29 */ GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 2, 1, 1, 7),
    /* 30 */ GEMV_GRID(MM_BF16, 0, MM_EPI_STORE, 8, 1, 4, 1, 3),
    /* 31 */ GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 1, 0, 0),
    /* 32 */ GMMA(MM_BF16, MM_EPI_BIAS_RES, 8, 1, 8, 2, 4, 0, 0),
    /* 33 */ GMMA(MM_F16, MM_EPI_BIAS_RES, 3, 2, 4, 2, 3, 0, 0),
    /* 34 */ GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 2, 1, 1, 0),
    /* 35 */ GMMA(MM_BF16, MM_EPI_BIAS_RES, 8, 2, 8, 2, 4, 1, 0),
    /* 36 */ GMMA(MM_BF16, MM_EPI_BIAS_RES, 4, 1, 4, 2, 2, 1, 5),
    /* 37 */ GMMA(MM_BF16, MM_EPI_STORE, 6, 1, 8, 2, 8, 1, 3),
    /* 38 */ GMMA(MM_F16, MM_EPI_STORE, 4, 1, 8, 4, 16, 0, 0),
    /* the widths codegen picks besides 8 (two CTAs per SM), walking several column blocks
     * (the next block's loads issued before the reduction), and the walk without it */
    /* 39 */ GEMV_X(MM_BF16, 1, MM_EPI_BIAS_RES, 6, 1, 1, 1, 5, 0, 2, 0),
    /* 40 */ GEMV_X(MM_BF16, 1, MM_EPI_STORE, 4, 2, 2, 0, 3, 2, 2, 0),
    /* 41 */ GEMV_X(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 1, 4, 1, 3, 0, 0, 1),
    /* 42 */ GEMV_X(MM_BF16, 1, MM_EPI_STORE, 6, 3, 1, 0, 7, 0, 2, 0),
    /* 43 */ GEMV_X(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 1, 2, 1, 4, 0, 2, 0),
    /* skinny M (issue 9's M = 32): the 64x128 tile codegen picks, with the residual through the
     * TMA store at splits 2 and 4; the 64x64 tile through the TMA store and from registers */
    /* 44 */ WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 2),
    /* 45 */ WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 4),
    /* 46 */ WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2),
    /* 47 */ WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 1),
    /* 48 */ WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 0, 3),
    /* 49 */ WGMMA_X(MM_F16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 4),
    /* the decode-sized options codegen turns on at skinny M (W early, evict-first, the epilogue's
     * operands early; the first also W's next steps into L2) on the skinny tiles and splits it
     * picks, and W early alone on a cooperative tile (several units per CTA) */
    /* 50 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 1, 15),
    /* 51 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 7),
    /* 52 */ WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 128, 4, 7),
    /* 53 */ WGMMA_O(MM_F16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 1, 7),
    /* 54 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 128, 1, 1),
    /* decode rows with the norm folded (codegen's 64x128 and 64x64 skinny tiles with the options it
     * turns on, the TMA store and registers, a cooperative 128-row tile) and the fallbacks (bf16, f32) */
    /* 55 */ WGMMA_NORM(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 128, 3),
    /* 56 */ WGMMA_NORM(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 3),
    /* 57 */ WGMMA_NORM(MM_F16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 0, 0),
    /* 58 */ WGMMA_NORM(MM_BF16, MM_EPI_BIAS_RES, 128, 128, 5, 0, 0, 0),
    /* 59 */ MMA_NORM(MM_BF16, 1, MM_EPI_BIAS_RES, 128, 128, 32, 2, 2, 3),
    /* 60 */ MMA_NORM(MM_F32, 1, MM_EPI_STORE, 64, 64, 16, 2, 2, 1),
    /* split-K in a cluster (issue 9's M = 32): the skinny tiles codegen picks with the options it
     * turns on, the register epilogue at an odd cluster size, f16, the folded norm's sums through
     * the exchange too, cooperative tiles (both consumers exchange), the largest cluster */
    /* 61 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 6, 1, 128, 2, 7, 0),
    /* 62 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 10, 1, 64, 4, 3, 0),
    /* 63 */ WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 6, 1, 0, 3, 0, 0),
    /* 64 */ WGMMA_CK(MM_F16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 0, 0),
    /* 65 */ WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 6, 1, 128, 2, 3, 1),
    /* 66 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 10, 1, 0, 4, 0, 1),
    /* 67 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 128, 128, 4, 0, 128, 2, 0, 0),
    /* 68 */ WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 64, 6, 1, 64, 8, 1, 0),
    /* the GEMV's deferred reduction (on by default: every GEMV above with split-K 1, B as [N, K]
     * and M <= MAXM runs it): few slots (many flushes: grids of 3..7 CTAs walk up to ~100 column
     * blocks at N = 4096), f32 and f16, two steps of loads at once, M > MAXM and misaligned A
     * falling back to the general path; and the general path forced */
    /* 69 */ GEMV_D(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 1, 4, 1, 5, 0, 0, 2),
    /* 70 */ GEMV_D(MM_F32, 1, MM_EPI_STORE, 4, 1, 4, 0, 7, 0, 0, 3),
    /* 71 */ GEMV_D(MM_F16, 1, MM_EPI_BIAS_RES, 6, 1, 1, 1, 3, 0, 2, 16),
    /* 72 */ GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 5, 0, 2, -1),
    /* 73 */ GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 4, 0, 0, 2, 0, 16),
    /* the epilogue's operands in registers from the tile's start (bit 4: KILN_WGMMA_EPI_EARLY 2)
     * and the tile's end without a round trip (bit 5: KILN_WGMMA_TAIL: st.async exchange, the
     * hand-back only before a cluster's next unit, the staging's reads waited for, a relaxed
     * final barrier) on codegen's skinny tiles and splits (O, down, QKV-sized), the folded norm's
     * sums through st.async, a split of 4, no cluster (ping-pong consumers taking several tiles),
     * f16, cooperative tiles (both consumers exchange) */
    /* 74 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 6, 1, 128, 2, 51, 0),
    /* 75 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 51, 0),
    /* 76 */ WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 6, 1, 128, 2, 51, 1),
    /* 77 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 10, 1, 64, 4, 51, 0),
    /* 78 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 1, 51),
    /* 79 */ WGMMA_CK(MM_F16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 48, 0),
    /* 80 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 128, 128, 4, 0, 128, 2, 48, 0),
    /* 81 */ WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 10, 1, 0, 4, 35, 1),
    /* the ring (KILN_GEMV_RING): grids of 3..7 CTAs walking many column blocks (the slots refilled
     * across blocks and flushes), the folded norm, the residual, two rows, M > MAXM, K not a
     * multiple of 8 and misaligned A falling back to the deferred path, f16 and f32, 2 and 4 slots,
     * one block per CTA */
    /* 82 */ GEMV_R(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 5, 2, 3),
    /* 83 */ GEMV_R(MM_BF16, 1, MM_EPI_BIAS_RES, 6, 2, 0, 7, 2, 3),
    /* 84 */ GEMV_R(MM_F16, 1, MM_EPI_STORE, 8, 4, 1, 3, 0, 2),
    /* 85 */ GEMV_R(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 1, 1, 0, 2, 4),
    /* 86 */ GEMV_R(MM_F32, 1, MM_EPI_STORE, 4, 1, 0, 5, 0, 3),
    /* the residual by TMA into the staging (bit 6: KILN_WGMMA_RES_TMA; codegen's knob
     * KILN_CG_WG_RES_TMA): the cooperative 128x256 tile of the 8B O and down (several tiles per
     * CTA: round 0 asked for under the mainloop once the previous tile's stores have read the
     * staging), ping-pong 128x128, f16 with four rounds of 64 columns */
    /* 87 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 128, 1, 64),
    /* 88 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 128, 128, 5, 1, 128, 1, 64),
    /* 89 */ WGMMA_O(MM_F16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 64, 1, 64),
    /* ... with the later rounds' residual in registers (bit 7: KILN_WGMMA_RES_REGS; codegen's knob
     * KILN_CG_WG_RES_REGS): cooperative 128x256 (round 1 of 128 columns), 256x128 (two m64
     * blocks, round 1 of 64 columns), f16 at 64 columns a round (three later rounds: by TMA;
     * test_matmul_wgmma_nvrtc checks which configurations the registers change) */
    /* 90 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 128, 1, 192),
    /* 91 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 256, 128, 4, 0, 64, 1, 192),
    /* 92 */ WGMMA_O(MM_F16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 64, 1, 192),
    /* ... ping-pong 128x128 at 64 columns a round (two m64 blocks, round 1 in registers) */
    /* 93 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 128, 128, 5, 1, 64, 1, 192),
    /* clusters of two CTAs along M with the TMA-store epilogue (the W box multicast: half the
     * W bytes from L2 per CTA): ping-pong 128x128 s5 and s4 (the plain store: with the bias +
     * residual epilogue it spills), cooperative 128x256 s4, f16 256x128 s4 */
    /* 94 */ WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 128, 5, 1, 128, 2),
    /* 95 */ WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 128, 4, 1, 128, 2),
    /* 96 */ WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 128, 2),
    /* 97 */ WGMMA_XC(MM_F16, MM_EPI_BIAS_RES, 256, 128, 4, 0, 64, 2),
    /* the other widths (skinny M's column blocks spread evenly over the SMs): 48 and 224 from
     * registers (the 8B QKV and gate/up in 128 tiles), f16 192 through the TMA store, 32 under the
     * workspace's split, 112 under the cluster's */
    /* 98 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 48, 12, 1, 0, 1, 3),
    /* 99 */ WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 224, 6, 1, 0, 1, 0),
    /* 100 */ WGMMA_X(MM_F16, MM_EPI_BIAS_RES, 64, 192, 6, 1, 64, 1),
    /* 101 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 32, 12, 1, 0, 2, 0),
    /* 102 */ WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 112, 6, 1, 0, 2, 35, 0),
    /* 103 */ WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 16, 12, 1, 0, 1, 1),
};
enum { NTEST = (int)(sizeof test_cfgs / sizeof test_cfgs[0]) };

static const mm_cfg bench_cfgs[] = {
    GEMV(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1),   GEMV(MM_BF16, 1, MM_EPI_STORE, 16, 1, 1),
    GEMV(MM_BF16, 1, MM_EPI_STORE, 4, 1, 1),   GEMV(MM_BF16, 1, MM_EPI_STORE, 8, 2, 1),
    MMA(MM_BF16, 1, MM_EPI_STORE, 128, 128, 32, 2, 2, 4), MMA(MM_BF16, 1, MM_EPI_STORE, 128, 128, 32, 2, 4, 4),
    MMA(MM_BF16, 1, MM_EPI_STORE, 128, 256, 32, 2, 4, 3), MMA(MM_BF16, 1, MM_EPI_STORE, 128, 128, 64, 2, 4, 3),
    WGMMA(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 1),      WGMMA(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 2),
    WGMMA(MM_BF16, MM_EPI_STORE, 64, 256, 5, 1, 2),
    /* the TMA-store tiles alone and in clusters of two along M (W multicast) */
    WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 128, 1), WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 128, 2),
    WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 128, 5, 1, 128, 1), WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 128, 5, 1, 128, 2),
    WGMMA_XC(MM_BF16, MM_EPI_STORE, 128, 128, 4, 1, 128, 2), WGMMA_XC(MM_BF16, MM_EPI_STORE, 256, 128, 4, 0, 64, 1),
    WGMMA_XC(MM_BF16, MM_EPI_STORE, 256, 128, 4, 0, 64, 2),
};
enum { NBENCH = (int)(sizeof bench_cfgs / sizeof bench_cfgs[0]), NGEMV_BENCH = 4 };

/* KILN_BENCH=2: the sweep's configurations (GEMVs at M = 1, the folded norm, and at M = 32
 * the skinny wgmma split-K that codegen picks against multi-row GEMVs) */
static const mm_cfg sweep_cfgs[] = {
    GEMV(MM_BF16, 1, MM_EPI_STORE, 4, 1, 1),      GEMV(MM_BF16, 1, MM_EPI_STORE, 4, 2, 1),
    GEMV(MM_BF16, 1, MM_EPI_STORE, 4, 4, 1),      GEMV(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1),
    GEMV(MM_BF16, 1, MM_EPI_STORE, 8, 2, 1),      GEMV(MM_BF16, 1, MM_EPI_STORE, 8, 4, 1),
    GEMV(MM_BF16, 1, MM_EPI_STORE, 8, 8, 1),      GEMV(MM_BF16, 1, MM_EPI_STORE, 16, 1, 1),
    GEMV(MM_BF16, 1, MM_EPI_STORE, 16, 2, 1),     GEMV(MM_BF16, 1, MM_EPI_STORE, 16, 4, 1),
    GEMV_NORM(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1), GEMV_NORM(MM_BF16, 1, MM_EPI_STORE, 8, 2, 1),
    GEMV_NORM(MM_BF16, 1, MM_EPI_STORE, 8, 4, 1), GEMV_NORM(MM_BF16, 1, MM_EPI_STORE, 16, 1, 1),
    GEMV_NORM(MM_BF16, 1, MM_EPI_STORE, 16, 2, 1),
    GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 264), GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 2, 1, 0, 132),
    GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 4, 1, 0, 66), GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 16, 1, 1, 0, 264),
    GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 264), GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 2, 1, 1, 132),
    GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 396), GEMV_GRID(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 528),
    WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 128, 1), WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 128, 2),
    WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 128, 3), WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 128, 4),
    /* the residual through the TMA store (O, down) and the 64x64 tile */
    WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 1), WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 2),
    WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 4),
    WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 1),   WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 2),
    WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 3),   WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 4),
    WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2), WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 4),
    /* the decode-sized options (alone, no kernel before: W early changes nothing here) */
    WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 1, 7), WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 2, 7),
    WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 1, 7),  WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 7),
    WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 3),  WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 8, 1, 128, 1, 3),
    WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 128, 1, 3),    WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 2, 3),
    WGMMA_X(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 1),
    GEMV(MM_BF16, 1, MM_EPI_STORE, 2, 1, 32),
    GEMV(MM_BF16, 1, MM_EPI_STORE, 2, 4, 32),
    /* the tensor-core GEMV (gemv_mma.cuh) at M = 32: split, warps, unroll, tile width, grid */
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 2, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 3, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 4, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 8, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 2, 2, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 2, 4, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 2, 8, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 16, 2, 2, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 16, 2, 4, 0, 0),  GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 4, 4, 4, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 4, 8, 4, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 8, 4, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 2, 8, 2, 2, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 4, 2, 8, 2, 4, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 2, 0, 66),  GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 4, 0, 33),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 2, 4, 0, 66),  GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 8, 0, 16),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 16, 0, 0),  GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 4, 2, 1, 66),
    GMMA(MM_BF16, MM_EPI_STORE, 4, 1, 8, 2, 4, 1, 0),
    /* M = 17 (3 row tiles) and 64 (8) */
    GMMA(MM_BF16, MM_EPI_STORE, 3, 1, 8, 4, 2, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 3, 1, 8, 4, 4, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 3, 1, 8, 2, 4, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 3, 1, 8, 4, 8, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 8, 1, 8, 2, 4, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 8, 1, 8, 2, 8, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 8, 1, 8, 4, 4, 0, 0),   GMMA(MM_BF16, MM_EPI_STORE, 8, 1, 8, 2, 16, 0, 0),
    GMMA(MM_BF16, MM_EPI_STORE, 8, 2, 8, 2, 4, 0, 0),
    /* issue 11's knobs at M = 1 and the grid codegen gives (two CTAs per SM): the column-block
     * pipelining off (the earlier kernel) and on, widths 6..12, unroll 2, one CTA per SM */
    GEMV_X(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 264, 0, 2, 1), GEMV_X(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 264, 0, 2, 0),
    GEMV_X(MM_BF16, 1, MM_EPI_STORE, 12, 1, 1, 1, 264, 0, 2, 0), GEMV_X(MM_BF16, 1, MM_EPI_STORE, 12, 1, 1, 1, 264, 0, 2, 1),
    GEMV_X(MM_BF16, 1, MM_EPI_STORE, 6, 1, 1, 1, 264, 0, 2, 0), GEMV_X(MM_BF16, 1, MM_EPI_STORE, 10, 1, 1, 1, 264, 0, 2, 0),
    GEMV_X(MM_BF16, 1, MM_EPI_STORE, 4, 1, 1, 1, 264, 0, 2, 0), GEMV_X(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 264, 2, 2, 0),
    GEMV_X(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 132, 2, 1, 0), GEMV_X(MM_BF16, 1, MM_EPI_STORE, 16, 1, 1, 1, 264, 0, 2, 0),
    GEMV_X(MM_BF16, 1, MM_EPI_STORE, 8, 2, 1, 1, 132, 0, 2, 0), GEMV_X(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 396, 0, 2, 0),
    /* the deferred reduction (_dfr16) against the CTA-wide one after every block (_dfr0) on the
     * grid codegen gives: widths, the folded norm, the residual, fewer slots (4), two steps of
     * loads, 256 CTAs (whole rounds for the 1B gate/up's 2048 blocks), two rows */
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 264, 0, 2, -1), GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 264, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 6, 1, 1, 0, 264, 0, 2, -1), GEMV_D(MM_BF16, 1, MM_EPI_STORE, 6, 1, 1, 0, 264, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 4, 1, 1, 0, 264, 0, 2, 16), GEMV_D(MM_BF16, 1, MM_EPI_STORE, 10, 1, 1, 0, 264, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 12, 1, 1, 0, 264, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 264, 0, 2, -1), GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 1, 264, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 6, 1, 1, 1, 264, 0, 2, -1), GEMV_D(MM_BF16, 1, MM_EPI_STORE, 6, 1, 1, 1, 264, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 1, 1, 0, 264, 0, 2, -1),
    GEMV_D(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 1, 1, 0, 264, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 264, 0, 2, 4), GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 264, 2, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 0, 256, 0, 2, 16),
    GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 2, 0, 264, 0, 2, -1), GEMV_D(MM_BF16, 1, MM_EPI_STORE, 8, 1, 2, 0, 264, 0, 2, 16),
    /* the ring of 3 and 2 slots against the above, plain, with the folded norm, the residual, 6 columns */
    GEMV_R(MM_BF16, 1, MM_EPI_STORE, 8, 1, 0, 264, 2, 3), GEMV_R(MM_BF16, 1, MM_EPI_STORE, 8, 1, 0, 264, 2, 2),
    GEMV_R(MM_BF16, 1, MM_EPI_STORE, 8, 1, 1, 264, 2, 3), GEMV_R(MM_BF16, 1, MM_EPI_BIAS_RES, 8, 1, 0, 264, 2, 3),
    GEMV_R(MM_BF16, 1, MM_EPI_STORE, 6, 1, 0, 264, 2, 3),
    /* split-K in a cluster: the tiles and cluster sizes codegen may pick, plain and with the
     * residual and the options it turns on (O, down) */
    WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 6, 1, 128, 2, 0, 0), WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 5, 1, 128, 3, 0, 0),
    WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 4, 1, 128, 4, 0, 0), WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 2, 0, 0),
    WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 64, 11, 1, 64, 3, 0, 0),  WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 64, 10, 1, 64, 4, 0, 0),
    WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 64, 6, 1, 64, 8, 0, 0),
    WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 3, 0), WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 10, 1, 64, 4, 3, 0),
    WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 6, 1, 128, 2, 3, 0), WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 4, 1, 128, 4, 3, 0),
    WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 7, 0),
    /* the same with the epilogue's operands in registers from the tile's start (o16) and the
     * tile's end without a round trip (o32), apart and together */
    WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 19, 0), WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 35, 0),
    WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 64, 12, 1, 64, 2, 51, 0), WGMMA_CK(MM_BF16, MM_EPI_BIAS_RES, 64, 128, 6, 1, 128, 2, 51, 0),
    WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 6, 1, 128, 2, 35, 0), WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 64, 12, 1, 64, 2, 35, 0),
    WGMMA_CK(MM_BF16, MM_EPI_STORE, 64, 128, 6, 1, 128, 2, 3, 0),
    /* the probes' other rings: 64x128 at 4 stages, 64x256 at 4 */
    WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 128, 4, 1, 128, 1), WGMMA_X(MM_BF16, MM_EPI_STORE, 64, 256, 4, 1, 128, 1),
    /* the widths that spread the 8B layer's column blocks evenly over 132 SMs (128 tiles): QKV 48,
     * gate/up 224 (or 112, two per CTA), O and down 32; W early + evict-first, from registers */
    WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 48, 12, 1, 0, 1, 3),  WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 224, 6, 1, 0, 1, 3),
    WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 112, 8, 1, 0, 1, 3),  WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 32, 12, 1, 0, 1, 3),
    WGMMA_O(MM_BF16, MM_EPI_BIAS_RES, 64, 32, 12, 1, 0, 1, 3), WGMMA_O(MM_BF16, MM_EPI_STORE, 64, 128, 8, 1, 0, 1, 3),
};
enum { NSWEEP = (int)(sizeof sweep_cfgs / sizeof sweep_cfgs[0]) };

static const long long Ms[] = {1, 3, 16, 77, 512}, Ns[] = {8, 200, 4096}, Ks[] = {64, 100, 4096};

static int add(mm_case *cs, int n, int cfg, long long M, long long N, long long K)
{
    mm_case c = {.cfg = cfg, .M = M, .N = N, .K = K, .batch = 1};
    cs[n] = c;
    return n + 1;
}

/* gemv_mma: rows across the 17..64 it serves, columns and K not multiples of the tiles */
static const long long gMs[] = {17, 24, 32, 33, 48, 64}, gNs[] = {8, 200, 4096}, gKs[] = {64, 100, 1000, 4096};

static int build_cases(mm_case *cs)
{
    int n = 0;
    for (int cfg = 0; cfg < NTEST; cfg++) {
        const mm_cfg *c = &test_cfgs[cfg];
        if (c->kind == MM_KIND_GMMA) {
            const int full = cfg == 31 || cfg == 35; /* the whole shape grid */
            for (int mi = 0; mi < 6; mi++)
                for (int ni = 0; ni < 3; ni++)
                    for (int ki = 0; ki < 4; ki++) {
                        const long long M = gMs[mi];
                        if (M > 8LL * c->maxm) continue;
                        if (!full && !(ni >= 1 && ki >= 1 && (ni == 1 || ki == 2))) continue;
                        n = add(cs, n, cfg, M, gNs[ni], gKs[ki]);
                    }
            const long long Mb = 8LL * c->maxm - 3;
            cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 200, .K = 136, .batch = 3};
            cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 200, .K = 136, .batch = 2, .shared_w = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 264, .K = 264, .batch = 1, .a_off = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 98, .K = 517, .batch = 1, .pad = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 98, .K = 517, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 17, .N = 6144, .K = 4104, .batch = 1};
            continue;
        }
        const int full = cfg == 0 || cfg == 7 || cfg == 8 || cfg == 25; /* the whole shape grid */
        for (int mi = 0; mi < 5; mi++)
            for (int ni = 0; ni < 3; ni++)
                for (int ki = 0; ki < 3; ki++) {
                    long long M = Ms[mi], N = Ns[ni], K = Ks[ki];
                    if (c->kind == MM_KIND_GEMV && M > 16 && !(M == 77 && N == 200 && K == 100)) continue;
                    if (!full && !((ni >= 1 && ki >= 1) || (mi == 2 && ni == 0 && ki == 0))) continue;
                    n = add(cs, n, cfg, M, N, K);
                }
        /* batched (own weights, then one shared weight), misaligned A, padded leading dims */
        long long Mb = c->kind == MM_KIND_GEMV ? 3 : 77;
        cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 200, .K = 136, .batch = 3};
        cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 200, .K = 136, .batch = 2, .shared_w = 1};
        cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 264, .K = 264, .batch = 1, .a_off = 1};
        cs[n++] = (mm_case){.cfg = cfg, .M = Mb, .N = 98, .K = 517, .batch = 1, .pad = 1};
        if (c->kind == MM_KIND_WGMMA) { /* prefill-sized: several tiles per CTA, edges in M, N and K */
            cs[n++] = (mm_case){.cfg = cfg, .M = 2047, .N = 4096, .K = 4096, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 4099, .N = 1000, .K = 4104, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 33, .N = 6144, .K = 4096, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 17, .N = 1000, .K = 4104, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 100, .N = 4096, .K = 1000, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 2048, .N = 6144, .K = 4096, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 1, .N = 4104, .K = 2048, .batch = 1};
            /* decode-batch rows: N an odd number of 64-column blocks, a K tail */
            cs[n++] = (mm_case){.cfg = cfg, .M = 32, .N = 4160, .K = 4104, .batch = 1};
            cs[n++] = (mm_case){.cfg = cfg, .M = 31, .N = 200, .K = 14336, .batch = 1};
            if (c->bk || c->ck > 1) { /* the decode-sized options: a whole 64-row block, fewer K steps than the ring */
                cs[n++] = (mm_case){.cfg = cfg, .M = 64, .N = 4160, .K = 4104, .batch = 1};
                cs[n++] = (mm_case){.cfg = cfg, .M = 32, .N = 1000, .K = 200, .batch = 1};
            }
            if (c->ck > 1) { /* the cluster split: decode rows, a slice of one K step or none (K = 64) */
                cs[n++] = (mm_case){.cfg = cfg, .M = 17, .N = 6144, .K = 4096, .batch = 1};
                cs[n++] = (mm_case){.cfg = cfg, .M = 33, .N = 200, .K = 64, .batch = 1};
                cs[n++] = (mm_case){.cfg = cfg, .M = 64, .N = 264, .K = 200, .batch = 2};
                /* more tiles than resident clusters (66 of two on the H200): clusters take several
                 * tiles, reusing the exchange; small enough for the CPU reference (KILN_MM_SMALL) */
                cs[n++] = (mm_case){.cfg = cfg, .M = 17, .N = 8960, .K = 192, .batch = 1};
            }
        }
    }
    return n;
}

/* KILN_MM_FILTER: one substring, or several separated by '|' (any of them) */
static int filter_has(const char *filter, const char *name)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", filter);
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
        if (strstr(name, t)) return 1;
    return 0;
}

int main(void)
{
    char why[256];
    if (!rt_device_available(why, sizeof why)) {
        printf("skip: %s\n", why);
        return 77;
    }
    const char *seed_env = getenv("KILN_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
    g_rng = seed;
    const char *filter = getenv("KILN_MM_FILTER");
    g_small = getenv("KILN_MM_SMALL") && atoi(getenv("KILN_MM_SMALL")) > 0;
    const int bench = getenv("KILN_BENCH") && atoi(getenv("KILN_BENCH")) > 0;
    const int do_sweep = bench && atoi(getenv("KILN_BENCH")) == 2;
    const int sweep_only = do_sweep && getenv("KILN_SWEEP_ONLY") && atoi(getenv("KILN_SWEEP_ONLY")) > 0;
    /* KILN_BENCH_ONLY=1 with KILN_BENCH=1: only the benchmark's configurations, no test cases */
    const int bench_only = bench && !do_sweep && getenv("KILN_BENCH_ONLY") && atoi(getenv("KILN_BENCH_ONLY")) > 0;
    struct cudaDeviceProp prop;
    if (CK(cudaGetDeviceProperties(&prop, 0)))
        printf("device: %s, %d SMs, %.0f MB L2; seed %llu (KILN_SEED to repeat)\n", prop.name,
               prop.multiProcessorCount, prop.l2CacheSize / 1048576.0, (unsigned long long)seed);

    /* compile everything at once */
    const int ncomp = NTEST + (bench ? NBENCH : 0) + (do_sweep ? NSWEEP : 0);
    enum { NALL = NTEST + NBENCH + NSWEEP };
    mm_cfg all[NALL];
    static compiled comp[NALL];
    rt_compile_result res[NALL];
    memset(comp, 0, sizeof comp);
    for (int i = 0; i < ncomp; i++)
        all[i] = i < NTEST ? test_cfgs[i] : i < NTEST + NBENCH ? bench_cfgs[i - NTEST] : sweep_cfgs[i - NTEST - NBENCH];
    /* KILN_MM_FILTER: only the configurations whose name holds it are compiled and run */
    int sel[NALL], nsel = 0;
    mm_cfg pick[NALL];
    rt_compile_result pres[NALL];
    for (int i = 0; i < ncomp; i++) {
        char nm[128];
        mm_cfg_name(&all[i], nm, sizeof nm);
        memset(&res[i], 0, sizeof res[i]);
        res[i].status = RT_ERR_INVALID;
        if (sweep_only && i < NTEST + NBENCH) continue;
        if (bench_only && i < NTEST) continue;
        if (!filter || filter_has(filter, nm)) pick[nsel] = all[i], sel[nsel++] = i;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mm_compile_all(pick, nsel, 0, pres);
    int kidx[NALL]; /* configuration i is kernel kiln_test_mm<kidx[i]> of its unit */
    for (int j = 0; j < nsel; j++) res[sel[j]] = pres[j], kidx[sel[j]] = j;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("compiled %d kernels in %.1f s\n", nsel, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    int maxsmem = 0;
    char err[512];
    if (rt_device_max_smem_optin(&maxsmem, err, sizeof err) != RT_OK) fprintf(stderr, "%s\n", err);
    g_maxsmem = maxsmem;
    for (int i = 0; i < ncomp; i++) {
        compiled *c = &comp[i];
        c->cfg = all[i];
        mm_cfg_name(&c->cfg, c->name, sizeof c->name);
        char kname[32];
        if (filter && !filter_has(filter, c->name)) continue;
        if (sweep_only && i < NTEST + NBENCH) continue;
        if (bench_only && i < NTEST) continue;
        snprintf(kname, sizeof kname, "kiln_test_mm%d", kidx[i]);
        if (res[i].status != RT_OK) {
            printf("FAIL %s: compile: %s\n", c->name, res[i].message ? res[i].message : rt_status_str(res[i].status));
            g_fail++;
            continue;
        }
        if (res[i].log && res[i].log[0]) printf("note %s: NVRTC log:\n%s\n", c->name, res[i].log);
        rt_kernel_attrs at;
        if (rt_module_load(&c->mod, res[i].code.data, res[i].code.size, err, sizeof err) != RT_OK ||
            rt_module_kernel(c->mod, kname, &c->k, err, sizeof err) != RT_OK ||
            /* any dynamic shared memory: with the kernel's static bytes it may pass the default 48 KB
             * (the f32 ring's 48 KB beside the deferred reduction's slots) */
            (mm_smem_bytes(&c->cfg) > 0 &&
             rt_kernel_set_max_smem(&c->k, mm_smem_bytes(&c->cfg), err, sizeof err) != RT_OK) ||
            /* gemv_mma: its shared memory follows K, up to the device's maximum */
            (c->cfg.kind == MM_KIND_GMMA && rt_kernel_set_max_smem(&c->k, (size_t)maxsmem, err, sizeof err) != RT_OK) ||
            rt_kernel_get_attrs(&c->k, &at, err, sizeof err) != RT_OK) {
            printf("FAIL %s: load: %s\n", c->name, err);
            g_fail++;
            continue;
        }
        if (c->cfg.kind == MM_KIND_WGMMA) { /* persistent grid: CTAs / clusters resident at once */
            int per_sm = 0, clusters = 0;
            const size_t smem = mm_smem_bytes(&c->cfg);
            if (!CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)c->k.fn, mm_threads(&c->cfg),
                                                                   smem))) {
                g_fail++;
                continue;
            }
            c->resident = (long long)per_sm * prop.multiProcessorCount;
            if (c->cfg.wn > 1 || c->cfg.ck > 1) {
                const unsigned cy = c->cfg.ck > 1 ? (unsigned)c->cfg.ck : 1u;
                cudaLaunchAttribute attr;
                memset(&attr, 0, sizeof attr);
                attr.id = cudaLaunchAttributeClusterDimension;
                attr.val.clusterDim.x = (unsigned)c->cfg.wn;
                attr.val.clusterDim.y = cy;
                attr.val.clusterDim.z = 1;
                cudaLaunchConfig_t lc;
                memset(&lc, 0, sizeof lc);
                lc.gridDim = (dim3){(unsigned)(c->cfg.wn * prop.multiProcessorCount), cy, 1};
                lc.blockDim = (dim3){(unsigned)mm_threads(&c->cfg), 1, 1};
                lc.dynamicSmemBytes = smem;
                lc.attrs = &attr;
                lc.numAttrs = 1;
                if (!CK(cudaOccupancyMaxActiveClusters(&clusters, (const void *)c->k.fn, &lc))) {
                    g_fail++;
                    continue;
                }
                c->resident = clusters;
            }
            if (c->resident < 1) {
                printf("FAIL %s: no CTA fits on the device\n", c->name);
                g_fail++;
                continue;
            }
        }
        c->ok = 1;
        printf("kernel %-44s %3d regs, %6zu B dyn smem + %5zu static, %zu B local%s, %lld resident\n", c->name,
               at.num_regs, mm_smem_bytes(&c->cfg), at.static_smem, at.local_bytes, at.local_bytes ? "  (SPILLS)" : "",
               c->cfg.kind == MM_KIND_WGMMA ? c->resident : 0LL);
    }
    for (int i = 0; i < ncomp; i++) rt_compile_result_free(&res[i]);

    cublasHandle_t blas = NULL;
    if (!BK(cublasCreate(&blas))) {
        printf("FAIL cublasCreate\n");
        return 1;
    }
    cublas_selfcheck(blas);

    if (do_sweep) sweep(comp + NTEST + NBENCH, NSWEEP, blas); /* first: the cases after it may be cut by a timeout */
    static mm_case cases[NTEST * 96];
    int ncase = sweep_only || bench_only ? 0 : build_cases(cases);
    for (int i = 0; i < ncase && !g_broken; i++) {
        const compiled *c = &comp[cases[i].cfg];
        if (filter && !filter_has(filter, c->name)) continue;
        if (!c->ok) {
            g_fail++;
            continue;
        }
        run_case(c, &cases[i], blas);
    }
    if (g_broken) printf("FAIL stopping: a kernel broke the CUDA context (illegal address or similar)\n");

    if (bench && !do_sweep && !g_broken) {
        bench_shape(comp + NTEST, NGEMV_BENCH, blas, 1, 4096, 4096);
        bench_shape(comp + NTEST, NGEMV_BENCH, blas, 1, 14336, 4096);
        bench_shape(comp + NTEST + NGEMV_BENCH, NBENCH - NGEMV_BENCH, blas, 2048, 4096, 4096);
        bench_shape(comp + NTEST + NGEMV_BENCH, NBENCH - NGEMV_BENCH, blas, 2048, 6144, 4096);
        bench_shape(comp + NTEST + NGEMV_BENCH, NBENCH - NGEMV_BENCH, blas, 16384, 6144, 4096);
    }

    cublasDestroy(blas);
    for (int i = 0; i < ncomp; i++) rt_module_free(comp[i].mod);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
