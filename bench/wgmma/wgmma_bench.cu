// bench/wgmma/wgmma_bench.cu — the Hopper matmul template (codegen/kernels/matmul_wgmma.cuh)
// on its own: correctness against cuBLAS and timing against cuBLAS, several tile
// configurations in one process. Built with nvcc for sm_90a (bench/wgmma/run.sh).
//
// The translation unit is assembled as codegen does it (CONTRACT.md): common.cuh, a
// hand-written generated part (KilnArgs as tests/gpu/mm_src.h declares it, and an epilogue
// that stores acc, or acc + bias[n] + res[m][n] when p.bias is set), then the template.
// Tensor maps are encoded through cudaGetDriverEntryPointByVersion (no libcuda link).
//
// Checks: fresh random inputs per case (seed printed; KILN_SEED repeats), output poisoned
// with 0xFF (NaN) before each launch, compared on the GPU with cuBLAS's f32 result:
// ||out - ref|| / ||ref|| < 1e-2 and no NaN. Timing: CUDA events around each launch, median
// of ITERS after a warm-up, cuBLAS bf16 (cublasGemmEx, f32 compute) on the same inputs.
// Usage: wgmma_bench [check|bench|all|small] (default all). `small` is the short correctness
// pass meant for compute-sanitizer.
#include <cublas_v2.h>
#include <cuda_runtime.h>
extern "C" {
#include "runtime/rt_tmap.h"
}
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#include "common.cuh" /* codegen/kernels/, through -I */

// ---- generated part (hand-written for the harness) ----------------------------------------
#define KILN_KERNEL kwg_default_kernel
#define KILN_T __nv_bfloat16
typedef KILN_T kiln_t;
#define KILN_B_NK 1
#define KILN_BM 128
#define KILN_BN 256
#define KILN_STAGES 4
struct KilnArgs {
    const kiln_t *a;
    const kiln_t *w;
    kiln_t *out;
    const kiln_t *bias;
    const kiln_t *res;
    float *ws;
    int *sem;
    long long sa, sw, lda, ldw, M, N, K, batch, so, ldo;
};
__device__ __forceinline__ void kiln_epilogue2(const KilnArgs &p, long long b, long long m, long long n, float v0,
                                               float v1, bool has1)
{
    const long long i = b * p.so + m * p.ldo + n;
    if (p.bias) {
        v0 += kiln_ld(p.bias + n) + kiln_ld(p.res + i);
        if (has1) v1 += kiln_ld(p.bias + n + 1) + kiln_ld(p.res + i + 1);
    }
    if (has1 && (i & 1) == 0) {
        *reinterpret_cast<__nv_bfloat162 *>(p.out + i) = __floats2bfloat162_rn(v0, v1);
    } else {
        kiln_st(p.out + i, v0);
        if (has1) kiln_st(p.out + i + 1, v1);
    }
}
#include "matmul_wgmma.cuh"

// Other configurations of the same template in this process.
template <int BM, int BN, int ST, int G, bool PP>
__global__ void __launch_bounds__(KWG_THREADS, 1) kwg_cfg_kernel(const __grid_constant__ KilnTmaArgs prm)
{
    kwg_main<BM, BN, ST, G, PP, 1>(prm.p, &prm.a, &prm.w);
}
template <int BM, int BN, int ST, int G, bool PP>
__global__ void __launch_bounds__(KWG_THREADS, 1) __cluster_dims__(2, 1, 1)
    kwg_cfg_kernel_c2(const __grid_constant__ KilnTmaArgs prm)
{
    kwg_main<BM, BN, ST, G, PP, 2>(prm.p, &prm.a, &prm.w);
}

typedef void (*kern_fn)(const KilnTmaArgs);
struct Cfg {
    const char *name;
    kern_fn fn;
    int bm, bn, stages, cm;
    int resident; // CTAs (cm 1) or clusters (cm 2) that fit on the device at once
};
static Cfg g_cfgs[] = {
    {"coop 128x256 s4 (extern C)", (kern_fn)kwg_default_kernel, 128, 256, 4, 1},
    {"coop 128x256 s4 g8", kwg_cfg_kernel<128, 256, 4, 8, false>, 128, 256, 4, 1},
    {"coop 128x256 s4 c2", kwg_cfg_kernel_c2<128, 256, 4, 16, false>, 128, 256, 4, 2},
    {"coop 128x256 s4 c2 g8", kwg_cfg_kernel_c2<128, 256, 4, 8, false>, 128, 256, 4, 2},
    {"coop 128x256 s3 c2", kwg_cfg_kernel_c2<128, 256, 3, 16, false>, 128, 256, 3, 2},
    {"coop 256x128 s4 c2", kwg_cfg_kernel_c2<256, 128, 4, 16, false>, 256, 128, 4, 2},
    {"pp 128x128 s6 c2", kwg_cfg_kernel_c2<128, 128, 6, 16, true>, 128, 128, 6, 2},
    {"pp 64x256 s5 c2", kwg_cfg_kernel_c2<64, 256, 5, 16, true>, 64, 256, 5, 2},
};
static const int NCFG = (int)(sizeof g_cfgs / sizeof g_cfgs[0]);

// ---- host helpers ----------------------------------------------------------------------------
#define CK(x)                                                                                         \
    do {                                                                                              \
        cudaError_t e_ = (x);                                                                         \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
            exit(2);                                                                                  \
        }                                                                                             \
    } while (0)
#define CB(x)                                                                                         \
    do {                                                                                              \
        cublasStatus_t s_ = (x);                                                                      \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                            \
            fprintf(stderr, "%s:%d: %s: cuBLAS %d\n", __FILE__, __LINE__, #x, (int)s_);               \
            exit(2);                                                                                  \
        }                                                                                             \
    } while (0)

static int g_sms;

// Rank-3 map {K, rows, batches} of a K-major bf16 operand (runtime/rt_tmap.c); false when TMA
// cannot describe it.
static bool make_map(kiln_tmap *m, const void *ptr, long long K, long long rows, long long ld, long long batch,
                     long long sbatch, int box_rows)
{
    rt_tmap_operand op = {ptr, false, K, rows, ld, batch, sbatch, box_rows};
    rt_tmap t;
    char err[256];
    static_assert(sizeof(kiln_tmap) == sizeof(rt_tmap) && alignof(kiln_tmap) == alignof(rt_tmap), "same layout");
    if (!rt_tmap_describable(&op)) return false;
    if (rt_tmap_encode(&t, &op, err, sizeof err) != RT_LAUNCH_OK) {
        fprintf(stderr, "%s\n", err);
        return false;
    }
    memcpy(m, &t, sizeof t);
    return true;
}

struct Problem {
    long long M, N, K, batch;
    bool shared_w, bias;
    __nv_bfloat16 *A, *W, *O, *bias_d, *res;
    float *ref;
};

static unsigned long long g_seed;
__global__ void fill_random(__nv_bfloat16 *p, size_t n, unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed + i * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        p[i] = __float2bfloat16((float)((double)(z >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0));
    }
}
static void randomize(__nv_bfloat16 *p, size_t n)
{
    fill_random<<<1024, 256>>>(p, n, g_seed);
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    CK(cudaGetLastError());
}

// sum (out - ref)^2, sum ref^2, count of non-finite outputs; ref = acc (+ bias + res).
__global__ void compare(const __nv_bfloat16 *o, const float *ref, const __nv_bfloat16 *bias,
                        const __nv_bfloat16 *res, long long n, long long N, double *acc, unsigned long long *bad)
{
    double num = 0, den = 0;
    unsigned long long nb = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        double r = ref[i];
        if (bias) r += (double)__bfloat162float(bias[i % N]) + (double)__bfloat162float(res[i]);
        float v = __bfloat162float(o[i]);
        if (!isfinite(v)) {
            nb++;
            continue;
        }
        num += (v - r) * (v - r);
        den += r * r;
    }
    atomicAdd(&acc[0], num);
    atomicAdd(&acc[1], den);
    if (nb) atomicAdd(bad, nb);
}

static size_t wrows_total(const Problem &P) { return (size_t)(P.shared_w ? 1 : P.batch) * P.N * P.K; }

static void alloc_problem(Problem &P)
{
    const size_t na = (size_t)P.batch * P.M * P.K, nw = wrows_total(P), no = (size_t)P.batch * P.M * P.N;
    CK(cudaMalloc(&P.A, na * 2));
    CK(cudaMalloc(&P.W, nw * 2));
    CK(cudaMalloc(&P.O, no * 2));
    CK(cudaMalloc(&P.ref, no * 4));
    randomize(P.A, na);
    randomize(P.W, nw);
    P.bias_d = P.res = NULL;
    if (P.bias) {
        CK(cudaMalloc(&P.bias_d, (size_t)P.N * 2));
        CK(cudaMalloc(&P.res, no * 2));
        randomize(P.bias_d, (size_t)P.N);
        randomize(P.res, no);
    }
}
static void free_problem(Problem &P)
{
    cudaFree(P.A);
    cudaFree(P.W);
    cudaFree(P.O);
    cudaFree(P.ref);
    cudaFree(P.bias_d);
    cudaFree(P.res);
}

static void reference(cublasHandle_t h, const Problem &P)
{
    const float one = 1.f, zero = 0.f;
    CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)P.N, (int)P.M, (int)P.K, &one, P.W, CUDA_R_16BF,
                                  (int)P.K, P.shared_w ? 0 : P.N * P.K, P.A, CUDA_R_16BF, (int)P.K, P.M * P.K, &zero,
                                  P.ref, CUDA_R_32F, (int)P.N, P.M * P.N, (int)P.batch, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
}

struct Launch {
    KilnTmaArgs prm;
    unsigned grid;
    size_t smem;
};
static bool prepare(const Cfg &c, const Problem &P, Launch &L)
{
    memset(&L.prm, 0, sizeof L.prm);
    KilnArgs &a = L.prm.p;
    a.a = P.A;
    a.w = P.W;
    a.out = P.O;
    a.bias = P.bias_d;
    a.res = P.res;
    a.sa = P.M * P.K;
    a.sw = P.shared_w ? 0 : P.N * P.K;
    a.lda = P.K;
    a.ldw = P.K;
    a.M = P.M;
    a.N = P.N;
    a.K = P.K;
    a.batch = P.batch;
    a.so = P.M * P.N;
    a.ldo = P.N;
    if (!make_map(&L.prm.a, P.A, P.K, P.M, P.K, P.batch, a.sa, c.bm)) return false;
    if (!make_map(&L.prm.w, P.W, P.K, P.N, P.K, P.batch, a.sw, c.bn / c.cm)) return false;
    const long long units_m = ((P.M + c.bm - 1) / c.bm + c.cm - 1) / c.cm;
    const long long units = P.batch * units_m * ((P.N + c.bn - 1) / c.bn);
    L.grid = (unsigned)(c.cm * std::min<long long>(units, c.resident));
    L.smem = KWG_SMEM_BYTES(c.bm, c.bn, c.stages);
    return true;
}
static void launch(const Cfg &c, const Launch &L)
{
    c.fn<<<L.grid, KWG_THREADS, L.smem>>>(L.prm);
}

static int g_pass, g_fail;

static double check_output(const Problem &P, unsigned long long *nan_out)
{
    double *acc;
    unsigned long long *bad;
    CK(cudaMalloc(&acc, 16));
    CK(cudaMalloc(&bad, 8));
    CK(cudaMemset(acc, 0, 16));
    CK(cudaMemset(bad, 0, 8));
    compare<<<1024, 256>>>(P.O, P.ref, P.bias_d, P.res, P.batch * P.M * P.N, P.N, acc, bad);
    CK(cudaGetLastError());
    double h[2];
    unsigned long long hb;
    CK(cudaMemcpy(h, acc, 16, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&hb, bad, 8, cudaMemcpyDeviceToHost));
    cudaFree(acc);
    cudaFree(bad);
    *nan_out = hb;
    return h[1] > 0 ? sqrt(h[0] / h[1]) : sqrt(h[0]);
}

static void check_case(cublasHandle_t h, int ci, Problem P)
{
    const Cfg &c = g_cfgs[ci];
    alloc_problem(P);
    reference(h, P);
    Launch L;
    if (!prepare(c, P, L)) {
        printf("FAIL %-28s M=%lld N=%lld K=%lld b=%lld: not TMA-describable\n", c.name, P.M, P.N, P.K, P.batch);
        g_fail++;
        free_problem(P);
        return;
    }
    CK(cudaMemset(P.O, 0xff, (size_t)P.batch * P.M * P.N * 2));
    launch(c, L);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    unsigned long long nans;
    double rel = check_output(P, &nans);
    bool ok = nans == 0 && rel < 1e-2;
    printf("%-4s %-28s M=%lld N=%lld K=%lld b=%lld%s%s  rel=%.2e nan=%llu\n", ok ? "ok" : "FAIL", c.name, P.M, P.N,
           P.K, P.batch, P.shared_w ? " sharedW" : "", P.bias ? " bias+res" : "", rel, nans);
    fflush(stdout);
    if (ok) g_pass++;
    else g_fail++;
    free_problem(P);
}

static float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5f * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

template <typename F> static float time_median(F f, int iters)
{
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < 3; i++) f();
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(ev[2 * i]));
        f();
        CK(cudaEventRecord(ev[2 * i + 1]));
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> t(iters);
    for (int i = 0; i < iters; i++) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    for (auto &e : ev) cudaEventDestroy(e);
    return median(t);
}

static void bench_shape(cublasHandle_t h, long long M, long long N, long long K, const char *what, FILE *csv)
{
    Problem P = {M, N, K, 1, false, false};
    alloc_problem(P);
    reference(h, P);
    const double flop = 2.0 * M * N * K;
    const int iters = flop > 2e12 ? 15 : 40;
    const float one = 1.f, zero = 0.f;
    float tb = time_median(
        [&] {
            CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, P.W, CUDA_R_16BF, (int)K, P.A,
                            CUDA_R_16BF, (int)K, &zero, P.O, CUDA_R_16BF, (int)N, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
        },
        iters);
    const double tf_blas = flop / (tb * 1e-3) / 1e12;
    printf("bench %-7s M=%-5lld N=%-5lld K=%-5lld cuBLAS %8.1f us %6.1f TFLOP/s\n", what, M, N, K, tb * 1e3, tf_blas);
    double best = 0;
    const char *bestname = "";
    for (int ci = 0; ci < NCFG; ci++) {
        const Cfg &c = g_cfgs[ci];
        Launch L;
        if (!prepare(c, P, L)) continue;
        float tk = time_median([&] { launch(c, L); }, iters);
        CK(cudaGetLastError());
        CK(cudaMemset(P.O, 0xff, (size_t)M * N * 2));
        launch(c, L);
        CK(cudaDeviceSynchronize());
        unsigned long long nans;
        double rel = check_output(P, &nans);
        const double tf = flop / (tk * 1e-3) / 1e12;
        const bool ok = nans == 0 && rel < 1e-2;
        if (ok) g_pass++;
        else g_fail++;
        printf("      %-28s %8.1f us %6.1f TFLOP/s  %5.3f x cuBLAS  rel=%.1e%s\n", c.name, tk * 1e3, tf, tf / tf_blas,
               rel, ok ? "" : "  FAIL");
        if (csv) fprintf(csv, "%s,%lld,%lld,%lld,%s,%.2f,%.1f,%.1f,%.4f,%.2e\n", what, M, N, K, c.name, tk * 1e3, tf,
                         tf_blas, tf / tf_blas, rel);
        if (ok && tf > best) best = tf, bestname = c.name;
        fflush(stdout);
    }
    printf("SUMMARY %-7s M=%-5lld N=%-5lld K=%-5lld cuBLAS %6.1f  best %6.1f (%5.3f x) %s\n", what, M, N, K, tf_blas,
           best, best / tf_blas, bestname);
    free_problem(P);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    const char *se = getenv("KILN_SEED");
    g_seed = se ? strtoull(se, NULL, 10) : (unsigned long long)time(NULL);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    printf("device %s, %d SMs, %.0f MB L2, seed %llu\n", prop.name, g_sms, prop.l2CacheSize / 1048576.0, g_seed);
    for (int ci = 0; ci < NCFG; ci++) {
        Cfg &c = g_cfgs[ci];
        CK(cudaFuncSetAttribute((const void *)c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)KWG_SMEM_BYTES(c.bm, c.bn, c.stages)));
        cudaFuncAttributes at;
        CK(cudaFuncGetAttributes(&at, (const void *)c.fn));
        // persistent grid: as many CTAs / clusters as are resident at once
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)c.fn, KWG_THREADS,
                                                         KWG_SMEM_BYTES(c.bm, c.bn, c.stages)));
        c.resident = per_sm * g_sms;
        if (c.cm > 1) {
            cudaLaunchConfig_t lc = {};
            cudaLaunchAttribute attr;
            attr.id = cudaLaunchAttributeClusterDimension;
            attr.val.clusterDim.x = (unsigned)c.cm;
            attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
            lc.gridDim = dim3((unsigned)(c.cm * g_sms));
            lc.blockDim = dim3(KWG_THREADS);
            lc.dynamicSmemBytes = KWG_SMEM_BYTES(c.bm, c.bn, c.stages);
            lc.attrs = &attr;
            lc.numAttrs = 1;
            CK(cudaOccupancyMaxActiveClusters(&c.resident, (const void *)c.fn, &lc));
        }
        printf("kernel %-28s %3d regs, %zu B local, smem %d, resident %d %s\n", c.name, at.numRegs,
               at.localSizeBytes, (int)KWG_SMEM_BYTES(c.bm, c.bn, c.stages), c.resident,
               c.cm > 1 ? "clusters" : "CTAs");
    }
    cublasHandle_t h;
    CB(cublasCreate(&h));
    const bool small = !strcmp(mode, "small");
    if (small || !strcmp(mode, "check") || !strcmp(mode, "all")) {
        struct { long long M, N, K, b; bool sw, bias; } cases[] = {
            {128, 256, 64, 1, false, false},  {777, 1000, 200, 1, false, false}, {1, 136, 4096, 1, false, false},
            {33, 8, 72, 1, false, false},     {300, 520, 4104, 1, false, true},  {200, 384, 256, 3, false, false},
            {200, 384, 264, 2, true, false},  {17, 4096, 4096, 1, false, true},  {2048, 6144, 4096, 1, false, false},
            {4099, 4096, 14336, 1, false, true},
        };
        const int ncase = small ? 8 : (int)(sizeof cases / sizeof cases[0]);
        for (int ci = 0; ci < (small ? 2 : NCFG); ci++)
            for (int i = 0; i < ncase; i++) {
                Problem P = {cases[i].M, cases[i].N, cases[i].K, cases[i].b, cases[i].sw, cases[i].bias};
                check_case(h, small ? (ci == 0 ? 2 : 6) : ci, P);
            }
    }
    if (!strcmp(mode, "profile")) { // one launch of cuBLAS and of each configuration, for ncu
        Problem P = {2048, 6144, 4096, 1, false, false};
        alloc_problem(P);
        const float one = 1.f, zero = 0.f;
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)P.N, (int)P.M, (int)P.K, &one, P.W, CUDA_R_16BF, (int)P.K,
                        P.A, CUDA_R_16BF, (int)P.K, &zero, P.O, CUDA_R_16BF, (int)P.N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
        for (int ci = 0; ci < NCFG; ci++) {
            Launch L;
            if (prepare(g_cfgs[ci], P, L)) launch(g_cfgs[ci], L);
        }
        CK(cudaDeviceSynchronize());
        free_problem(P);
    }
    if (!strcmp(mode, "bench") || !strcmp(mode, "all")) {
        FILE *csv = getenv("BENCH_CSV") ? fopen(getenv("BENCH_CSV"), "w") : NULL;
        if (csv) fprintf(csv, "gemm,M,N,K,config,us,tflops,cublas_tflops,ratio,rel\n");
        const long long Ms[] = {2048, 16384};
        for (long long M : Ms) {
            bench_shape(h, M, 6144, 4096, "QKV", csv);
            bench_shape(h, M, 4096, 4096, "O", csv);
            bench_shape(h, M, 28672, 4096, "gate/up", csv);
            bench_shape(h, M, 4096, 14336, "down", csv);
        }
        if (csv) fclose(csv);
    }
    cublasDestroy(h);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
