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
// Usage: wgmma_bench [check|bench|all|small|table|sweep|profile] (default all). `small` is the
// short correctness pass meant for compute-sanitizer; `sweep` times the 8B GEMMs at M = 2048 and
// 16384 over more large-M configurations (tile, stages, staging, rasterization group) and 8-launch
// chains with and without programmatic dependent launch.
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
#define KILN_WGMMA_TMA_STORE 1 /* the kernels below choose per configuration (template argument TS) */
#define KILN_WGMMA_EPI_COLS 128
#define KILN_WGMMA_SPLIT_FIELDS 1 /* the configuration kernels take the split-K factor from p.splitk */
struct KilnArgs {
    const kiln_t *a;
    const kiln_t *w;
    kiln_t *out;
    const kiln_t *bias;
    const kiln_t *res;
    float *ws;
    int *sem;
    long long sa, sw, lda, ldw, M, N, K, batch, so, ldo;
    long long splitk; /* harness only: the split-K factor of the configuration kernels */
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
// The value hook of the TMA-store epilogue: the same values kiln_epilogue2 stores.
__device__ __forceinline__ float2 kiln_epilogue_val(const KilnArgs &p, long long b, long long m, long long n, float v0,
                                                   float v1, bool has1)
{
    if (p.bias) {
        const long long i = b * p.so + m * p.ldo + n;
        v0 += kiln_ld(p.bias + n) + kiln_ld(p.res + i);
        if (has1) v1 += kiln_ld(p.bias + n + 1) + kiln_ld(p.res + i + 1);
    }
    return make_float2(v0, v1);
}
#include "matmul_wgmma.cuh"

// Other configurations of the same template in this process (split-K from p.splitk).
template <int BM, int BN, int ST, int G, bool PP, bool TS, int EC>
__global__ void __launch_bounds__(KWG_THREADS, 1) kwg_cfg_kernel(const __grid_constant__ KilnTmaArgs prm)
{
    kwg_main<BM, BN, ST, G, PP, 1, TS, EC>(prm.p, &prm.a, &prm.w, &prm.o, (int)prm.p.splitk);
}
template <int BM, int BN, int ST, int G, bool PP, bool TS, int EC>
__global__ void __launch_bounds__(KWG_THREADS, 1) __cluster_dims__(2, 1, 1)
    kwg_cfg_kernel_c2(const __grid_constant__ KilnTmaArgs prm)
{
    kwg_main<BM, BN, ST, G, PP, 2, TS, EC>(prm.p, &prm.a, &prm.w, &prm.o, 1);
}

typedef void (*kern_fn)(const KilnTmaArgs);
struct Cfg {
    const char *name;
    kern_fn fn;
    int bm, bn, stages, cm, pp, ts, ec;
    int skinny;   // 1: benched at skinny M with split-K (split chosen per shape), 0: large M
    int resident; // CTAs (cm 1) or clusters (cm 2) that fit on the device at once
};
#define CFG(name, BM, BN, ST, PP, TS, EC, SK) {name, kwg_cfg_kernel<BM, BN, ST, 16, PP, TS, EC>, BM, BN, ST, 1, PP, TS, EC, SK}
#define CFG2(name, BM, BN, ST, PP, TS, EC) {name, kwg_cfg_kernel_c2<BM, BN, ST, 16, PP, TS, EC>, BM, BN, ST, 2, PP, TS, EC, 0}
static Cfg g_cfgs[] = {
    {"coop 128x256 s4 tma128 (extern C)", (kern_fn)kwg_default_kernel, 128, 256, 4, 1, 0, 1, 128, 0},
    CFG("coop 128x256 s4 regs", 128, 256, 4, false, false, 64, 0),
    CFG("coop 128x256 s3 tma256", 128, 256, 3, false, true, 256, 0),
    CFG2("coop 128x256 s4 c2 tma128", 128, 256, 4, false, true, 128),
    CFG2("coop 128x256 s3 c2 tma256", 128, 256, 3, false, true, 256),
    CFG2("coop 256x128 s4 c2 tma64", 256, 128, 4, false, true, 64),
    CFG2("pp 64x256 s4 c2 tma256", 64, 256, 4, true, true, 256),
    CFG("pp 128x128 s5 tma128", 128, 128, 5, true, true, 128, 0),
    CFG2("pp 128x128 s5 c2 tma128", 128, 128, 5, true, true, 128),
    CFG2("coop 128x256 s4 c2 regs", 128, 256, 4, false, false, 64),
    CFG("skinny pp 64x256 s4 splitk tma128", 64, 256, 4, true, true, 128, 1),
    CFG("skinny pp 64x256 s5 splitk regs", 64, 256, 5, true, false, 64, 1),
    CFG("skinny pp 64x128 s8 splitk tma", 64, 128, 8, true, true, 128, 1),
    CFG("skinny coop 128x256 s4 splitk tma", 128, 256, 4, false, true, 128, 1),
    // MODE=sweep only (skinny 2): the large-M neighbours of the generated configurations
    {"pp 128x128 s5 tma128 g8", kwg_cfg_kernel<128, 128, 5, 8, true, true, 128>, 128, 128, 5, 1, 1, 1, 128, 2},
    {"pp 128x128 s5 tma128 g4", kwg_cfg_kernel<128, 128, 5, 4, true, true, 128>, 128, 128, 5, 1, 1, 1, 128, 2},
    {"pp 128x128 s5 tma128 g32", kwg_cfg_kernel<128, 128, 5, 32, true, true, 128>, 128, 128, 5, 1, 1, 1, 128, 2},
    {"pp 128x128 s4 tma128", kwg_cfg_kernel<128, 128, 4, 16, true, true, 128>, 128, 128, 4, 1, 1, 1, 128, 2},
    {"pp 128x128 s6 tma64", kwg_cfg_kernel<128, 128, 6, 16, true, true, 64>, 128, 128, 6, 1, 1, 1, 64, 2},
    {"pp 64x256 s4 tma256", kwg_cfg_kernel<64, 256, 4, 16, true, true, 256>, 64, 256, 4, 1, 1, 1, 256, 2},
    {"coop 256x128 s4 tma64", kwg_cfg_kernel<256, 128, 4, 16, false, true, 64>, 256, 128, 4, 1, 0, 1, 64, 2},
    {"coop 128x256 s4 tma128 g8", kwg_cfg_kernel<128, 256, 4, 8, false, true, 128>, 128, 256, 4, 1, 0, 1, 128, 2},
    {"coop 128x256 s4 tma64", kwg_cfg_kernel<128, 256, 4, 16, false, true, 64>, 128, 256, 4, 1, 0, 1, 64, 2},
};
static const int NCFG = (int)(sizeof g_cfgs / sizeof g_cfgs[0]);
static size_t cfg_smem(const Cfg &c) { return KWG_SMEM_TOTAL(c.bm, c.bn, c.stages, c.pp, c.ts ? c.ec : 0); }

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
    if (rt_tmap_encode(&t, &op, err, sizeof err) != RT_OK) {
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
    int wcopies; // bench: copies of W rotated through so that each call reads it from HBM
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

// A streaming read of n 16-byte words (the bandwidth ceiling of the bench).
__global__ void read_stream(const int4 *p, size_t n, int *sink)
{
    int x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int4 v = __ldcs(p + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x12345678) *sink = x;
}

static size_t wrows_total(const Problem &P) { return (size_t)(P.shared_w ? 1 : P.batch) * P.N * P.K; }

static void alloc_problem(Problem &P)
{
    const size_t na = (size_t)P.batch * P.M * P.K, nw = wrows_total(P), no = (size_t)P.batch * P.M * P.N;
    if (P.wcopies < 1) P.wcopies = 1;
    CK(cudaMalloc(&P.A, na * 2));
    CK(cudaMalloc(&P.W, nw * 2 * P.wcopies));
    CK(cudaMalloc(&P.O, no * 2));
    CK(cudaMalloc(&P.ref, no * 4));
    randomize(P.A, na);
    randomize(P.W, nw * P.wcopies);
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

// The split-K factor for a skinny shape (what codegen's heuristic computes, codegen/cg_family.c
// wg_choose): enough slices that the tiles fill the SMs at most once, at most 2 (4 when
// K >= 8192), each slice at least 2 K steps, and the partial sums (written and read: 8 * M * N
// * S bytes) at most a quarter of the weight.
static int auto_split(long long M, long long N, long long K, long long batch, int bm, int bn)
{
    const long long tiles = batch * ((M + bm - 1) / bm) * ((N + bn - 1) / bn), ktiles = (K + 63) / 64;
    long long s = tiles >= g_sms ? 1 : g_sms / tiles;
    if (s > (K >= 8192 ? 4 : 2)) s = K >= 8192 ? 4 : 2;
    if (s > ktiles / 2) s = ktiles / 2;
    const long long mr = M < bm ? M : bm; // partial rows written per tile row
    while (s > 1 && 8.0 * mr * ((M + bm - 1) / bm) * N * s > 0.25 * 2.0 * N * K) s--;
    return s < 1 ? 1 : (int)s;
}

struct Launch {
    KilnTmaArgs prm;
    unsigned grid;
    size_t smem;
};
struct Work { // split-K workspace and counters of one problem
    float *ws = NULL;
    int *sem = NULL;
    size_t ws_bytes = 0, sem_bytes = 0;
};
static void work_reserve(Work &w, size_t ws_bytes, size_t sem_bytes)
{
    if (ws_bytes > w.ws_bytes) {
        cudaFree(w.ws);
        CK(cudaMalloc(&w.ws, ws_bytes));
        w.ws_bytes = ws_bytes;
    }
    if (sem_bytes > w.sem_bytes) {
        cudaFree(w.sem);
        CK(cudaMalloc(&w.sem, sem_bytes));
        CK(cudaMemset(w.sem, 0, sem_bytes)); // zeroed once: the kernel resets what it counts
        w.sem_bytes = sem_bytes;
    }
}
static void work_free(Work &w)
{
    cudaFree(w.ws);
    cudaFree(w.sem);
    w = Work();
}

// copy: which copy of W (bench rotation); split: the split-K factor (skinny configs).
static bool prepare(const Cfg &c, const Problem &P, Launch &L, Work &wk, int split = 1, int copy = 0)
{
    memset(&L.prm, 0, sizeof L.prm);
    KilnArgs &a = L.prm.p;
    const __nv_bfloat16 *W = P.W + (size_t)copy * wrows_total(P);
    a.a = P.A;
    a.w = W;
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
    a.splitk = c.cm > 1 ? 1 : split;
    if (!make_map(&L.prm.a, P.A, P.K, P.M, P.K, P.batch, a.sa, c.bm)) return false;
    if (!make_map(&L.prm.w, W, P.K, P.N, P.K, P.batch, a.sw, c.bn / c.cm)) return false;
    if (c.ts && !make_map(&L.prm.o, P.O, P.N, P.M, P.N, P.batch, a.so, 64)) return false;
    const long long units_m = ((P.M + c.bm - 1) / c.bm + c.cm - 1) / c.cm;
    const long long tiles = P.batch * units_m * ((P.N + c.bn - 1) / c.bn);
    const long long units = tiles * a.splitk;
    if (a.splitk > 1) {
        const int cw = c.pp ? 1 : 2;
        work_reserve(wk, (size_t)tiles * a.splitk * c.bm * c.bn * 4, (size_t)tiles * cw * 4);
        a.ws = wk.ws;
        a.sem = wk.sem;
    }
    L.grid = (unsigned)(c.cm * std::min<long long>(units, c.resident));
    L.smem = cfg_smem(c);
    return true;
}
static void launch(const Cfg &c, const Launch &L)
{
    c.fn<<<L.grid, KWG_THREADS, L.smem>>>(L.prm);
}
// The same launch with programmatic stream serialization (as the runtime launches the
// template inside a graph): it may start under the previous kernel's tail.
static void launch_pdl(const Cfg &c, const Launch &L)
{
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute at[2];
    int na = 0;
    at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[na++].val.programmaticStreamSerializationAllowed = 1;
    if (c.cm > 1) {
        at[na].id = cudaLaunchAttributeClusterDimension;
        at[na].val.clusterDim.x = (unsigned)c.cm;
        at[na].val.clusterDim.y = at[na].val.clusterDim.z = 1;
        na++;
    }
    lc.gridDim = dim3(L.grid);
    lc.blockDim = dim3(KWG_THREADS);
    lc.dynamicSmemBytes = L.smem;
    lc.attrs = at;
    lc.numAttrs = (unsigned)na;
    CK(cudaLaunchKernelEx(&lc, c.fn, L.prm));
}
static bool g_sweep; // MODE=sweep: the skinny-2 configurations too, the 8B shapes at M 2048, 16384

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

// One configuration on one problem: poisoned output, one launch, compared with cuBLAS's f32
// result; split-K configurations launch a second time on a poisoned output and must give the
// same bytes (the counters reset themselves; the reduction order is fixed).
static void check_case(cublasHandle_t h, int ci, Problem P, int split)
{
    const Cfg &c = g_cfgs[ci];
    alloc_problem(P);
    reference(h, P);
    Launch L;
    Work wk;
    char what[96];
    snprintf(what, sizeof what, "%s%s", c.name, split > 1 ? " S" : "");
    if (!prepare(c, P, L, wk, split)) {
        const bool out_ok = P.N % 8 == 0;
        printf("%s %-36s M=%lld N=%lld K=%lld b=%lld: not TMA-describable\n", out_ok ? "FAIL" : "skip", c.name, P.M,
               P.N, P.K, P.batch);
        if (out_ok) g_fail++;
        free_problem(P);
        work_free(wk);
        return;
    }
    const size_t ob = (size_t)P.batch * P.M * P.N * 2;
    CK(cudaMemset(P.O, 0xff, ob));
    launch(c, L);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    unsigned long long nans;
    double rel = check_output(P, &nans);
    bool ok = nans == 0 && rel < 1e-2;
    bool same = true;
    if (L.prm.p.splitk > 1) {
        std::vector<unsigned char> h1(ob), h2(ob);
        CK(cudaMemcpy(h1.data(), P.O, ob, cudaMemcpyDeviceToHost));
        CK(cudaMemset(P.O, 0xff, ob));
        launch(c, L);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h2.data(), P.O, ob, cudaMemcpyDeviceToHost));
        same = !memcmp(h1.data(), h2.data(), ob);
        ok = ok && same;
    }
    printf("%-4s %-36s M=%lld N=%lld K=%lld b=%lld S=%lld%s%s  rel=%.2e nan=%llu%s\n", ok ? "ok" : "FAIL", c.name, P.M,
           P.N, P.K, P.batch, (long long)L.prm.p.splitk, P.shared_w ? " sharedW" : "", P.bias ? " bias+res" : "", rel,
           nans, same ? "" : " (second launch differs)");
    fflush(stdout);
    if (ok) g_pass++;
    else g_fail++;
    free_problem(P);
    work_free(wk);
}

static float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5f * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// f(i) for call i; median of iters after 3 warm-ups.
template <typename F> static float time_median(F f, int iters)
{
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < 3; i++) f(i);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(ev[2 * i]));
        f(i);
        CK(cudaEventRecord(ev[2 * i + 1]));
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> t(iters);
    for (int i = 0; i < iters; i++) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    for (auto &e : ev) cudaEventDestroy(e);
    return median(t);
}

// fa(i) and fb(i) alternately, each timed on its own (events around each call), so that both
// see the same clocks and temperature; medians of iters after 3 warm-ups of each.
template <typename FA, typename FB> static void time_pair(FA fa, FB fb, int iters, float *ta, float *tb)
{
    std::vector<cudaEvent_t> ev(3 * iters);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < 3; i++) fa(i), fb(i);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(ev[3 * i]));
        fa(i);
        CK(cudaEventRecord(ev[3 * i + 1]));
        fb(i);
        CK(cudaEventRecord(ev[3 * i + 2]));
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> a(iters), b(iters);
    for (int i = 0; i < iters; i++) {
        CK(cudaEventElapsedTime(&a[i], ev[3 * i], ev[3 * i + 1]));
        CK(cudaEventElapsedTime(&b[i], ev[3 * i + 1], ev[3 * i + 2]));
    }
    for (auto &e : ev) cudaEventDestroy(e);
    *ta = median(a);
    *tb = median(b);
}

static double g_bw = 0, g_peak = 0; // ceilings measured in this run: bytes/s, FLOP/s

static void measure_ceilings(cublasHandle_t h)
{
    const size_t bytes = 2ull << 30;
    int4 *p;
    int *sink;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(p, 1, bytes));
    float t = time_median([&](int) { read_stream<<<g_sms * 8, 512>>>(p, bytes / 16, sink); }, 10);
    g_bw = bytes / (t * 1e-3);
    cudaFree(p);
    cudaFree(sink);
    // tensor-core rate: cuBLAS 8192^3 sustained for > 100 ms (median of 100 calls)
    Problem P = {8192, 8192, 8192, 1, false, false};
    alloc_problem(P);
    const float one = 1.f, zero = 0.f;
    float tb = time_median(
        [&](int) {
            CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 8192, 8192, 8192, &one, P.W, CUDA_R_16BF, 8192, P.A,
                            CUDA_R_16BF, 8192, &zero, P.O, CUDA_R_16BF, 8192, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        100);
    g_peak = 2.0 * 8192.0 * 8192.0 * 8192.0 / (tb * 1e-3);
    free_problem(P);
    printf("ceilings: read %.2f TB/s (2 GiB stream), bf16 matmul %.1f TFLOP/s (cuBLAS 8192^3, 100 calls)\n",
           g_bw / 1e12, g_peak / 1e12);
}

// One GEMM shape: cuBLAS and every configuration of the shape's class (large M: the tile
// configurations; M <= 256: the skinny ones at every split factor that fits, the automatic
// one marked), against the floor max(bytes / bw, flops / peak) of this run's ceilings.
// Bytes: A, W, the output. W (and cuBLAS's) rotates over copies so that each call reads it
// from HBM when W is under 200 MB.
static void bench_shape(cublasHandle_t h, const char *model, const char *what, long long M, long long N, long long K,
                        FILE *csv)
{
    const bool skinny = M <= 256;
    const double wbytes = 2.0 * N * K;
    Problem P = {M, N, K, 1, false, false};
    P.wcopies = wbytes >= 200e6 ? 1 : (int)std::min(16.0, ceil(200e6 / wbytes));
    alloc_problem(P);
    reference(h, P);
    const double flop = 2.0 * M * N * K, bytes = wbytes + 2.0 * M * K + 2.0 * M * N;
    const double floor_s = std::max(bytes / g_bw, flop / g_peak);
    const int iters = flop > 2e12 ? 15 : 40;
    const float one = 1.f, zero = 0.f;
    const size_t wn = wrows_total(P);
    auto blas = [&](int i) {
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, P.W + (i % P.wcopies) * wn,
                        CUDA_R_16BF, (int)K, P.A, CUDA_R_16BF, (int)K, &zero, P.O, CUDA_R_16BF, (int)N,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    float tb = time_median(blas, iters);
    // tbi: cuBLAS timed alternately with the configuration (time_pair); the ratio uses it
    auto row = [&](const char *cfg, int split, float ms, float tbi, double rel, bool ok, bool chosen) {
        const double s = ms * 1e-3;
        printf("      %-36s S=%-2d %8.1f us %6.1f TFLOP/s %5.2f TB/s %5.1f%% floor  %5.3f x cuBLAS (%.1f us)%s%s\n", cfg,
               split, ms * 1e3, flop / s / 1e12, bytes / s / 1e12, 100 * floor_s / s, tbi / ms, tbi * 1e3,
               chosen ? "  <- auto" : "", ok ? "" : "  FAIL");
        if (csv)
            fprintf(csv, "%s,%s,%lld,%lld,%lld,%s,%d,%d,%.2f,%.2f,%.2f,%.2f,%.1f,%.1f,%.3f,%.3f,%.1f,%.1f,%.4f,%.2e,%d\n",
                    model, what, M, N, K, cfg, split, chosen ? 1 : 0, ms * 1e3, tb * 1e3, tbi * 1e3, floor_s * 1e6,
                    flop / s / 1e12, flop / (tbi * 1e-3) / 1e12, bytes / s / 1e12, bytes / (tbi * 1e-3) / 1e12,
                    100 * floor_s / s, 100 * floor_s / (tbi * 1e-3), tbi / ms, rel, ok ? 1 : 0);
    };
    printf("bench %s %-7s M=%-5lld N=%-5lld K=%-5lld floor %.1f us; cuBLAS %.1f us (%.1f%% floor)  [W copies %d]\n", model,
           what, M, N, K, floor_s * 1e6, tb * 1e3, 100 * floor_s / (tb * 1e-3), P.wcopies);
    row("cuBLAS", 1, tb, tb, 0, true, false);
    double best = 1e30, best_blas = tb;
    char bestname[96] = "";
    Work wk;
    for (int ci = 0; ci < NCFG; ci++) {
        const Cfg &c = g_cfgs[ci];
        if (c.skinny != (skinny ? 1 : 0) && !(g_sweep && !skinny && c.skinny == 2)) continue;
        const int as = skinny ? auto_split(M, N, K, 1, c.bm, c.bn) : 1;
        const int splits_all[] = {1, 2, 3, 4, 6, 8, 12, 16};
        for (int split : splits_all) {
            if (!skinny && split > 1) break;
            if (split > (K + 63) / 64) break;
            std::vector<Launch> Ls(P.wcopies);
            bool okp = true;
            for (int cp = 0; cp < P.wcopies; cp++) okp = okp && prepare(c, P, Ls[cp], wk, split, cp);
            if (!okp) break;
            float tk, tbi;
            time_pair(blas, [&](int i) { launch(c, Ls[i % P.wcopies]); }, iters, &tbi, &tk);
            CK(cudaGetLastError());
            CK(cudaMemset(P.O, 0xff, (size_t)M * N * 2));
            launch(c, Ls[0]);
            CK(cudaDeviceSynchronize());
            unsigned long long nans;
            double rel = check_output(P, &nans);
            const bool ok = nans == 0 && rel < 1e-2;
            if (ok) g_pass++;
            else g_fail++;
            row(c.name, split, tk, tbi, rel, ok, skinny && split == as);
            if (ok && tk < best) best = tk, best_blas = tbi, snprintf(bestname, sizeof bestname, "%s S=%d", c.name, split);
            fflush(stdout);
        }
    }
    printf("SUMMARY %s %-7s M=%-5lld N=%-5lld K=%-5lld cuBLAS %7.1f us  best %7.1f us (%5.3f x cuBLAS, %5.1f%% floor) %s\n",
           model, what, M, N, K, best_blas * 1e3, best * 1e3, best_blas / best, 100 * floor_s / (best * 1e-3), bestname);
    free_problem(P);
    work_free(wk);
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
        CK(cudaFuncSetAttribute((const void *)c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg_smem(c)));
        cudaFuncAttributes at;
        CK(cudaFuncGetAttributes(&at, (const void *)c.fn));
        // persistent grid: as many CTAs / clusters as are resident at once
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)c.fn, KWG_THREADS, cfg_smem(c)));
        c.resident = per_sm * g_sms;
        if (c.cm > 1) {
            cudaLaunchConfig_t lc = {};
            cudaLaunchAttribute attr;
            attr.id = cudaLaunchAttributeClusterDimension;
            attr.val.clusterDim.x = (unsigned)c.cm;
            attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
            lc.gridDim = dim3((unsigned)(c.cm * g_sms));
            lc.blockDim = dim3(KWG_THREADS);
            lc.dynamicSmemBytes = cfg_smem(c);
            lc.attrs = &attr;
            lc.numAttrs = 1;
            CK(cudaOccupancyMaxActiveClusters(&c.resident, (const void *)c.fn, &lc));
        }
        printf("kernel %-36s %3d regs, %zu B local, smem %zu, resident %d %s\n", c.name, at.numRegs, at.localSizeBytes,
               cfg_smem(c), c.resident, c.cm > 1 ? "clusters" : "CTAs");
    }
    cublasHandle_t h;
    CB(cublasCreate(&h));
    const bool small = !strcmp(mode, "small");
    if (small || !strcmp(mode, "check") || !strcmp(mode, "all")) {
        struct { long long M, N, K, b; bool sw, bias; } cases[] = {
            {128, 256, 64, 1, false, false},  {777, 1000, 200, 1, false, false}, {1, 136, 4096, 1, false, false},
            {33, 8, 72, 1, false, false},     {300, 520, 4104, 1, false, true},  {200, 384, 256, 3, false, false},
            {200, 384, 264, 2, true, false},  {17, 4096, 4096, 1, false, true},  {100, 1000, 1000, 1, false, true},
            {33, 777, 520, 1, false, false},  {2047, 6144, 4096, 1, false, true}, {2048, 6144, 4096, 1, false, false},
            {4099, 4096, 14336, 1, false, true},
        };
        const int ncase = small ? 8 : (int)(sizeof cases / sizeof cases[0]);
        // small (for compute-sanitizer): the extern "C" kernel (TMA store), a cluster ping-pong
        // one and a split-K one
        const int small_cfgs[] = {0, 6, 10, 11};
        for (int k = 0; k < (small ? 4 : NCFG); k++) {
            const int ci = small ? small_cfgs[k] : k;
            for (int i = 0; i < ncase; i++) {
                Problem P = {cases[i].M, cases[i].N, cases[i].K, cases[i].b, cases[i].sw, cases[i].bias};
                if (g_cfgs[ci].skinny && P.M > 300 && P.K > 4096) continue; // slow under the sanitizer, covered by 2047
                const int split = g_cfgs[ci].skinny ? std::max(2, auto_split(P.M, P.N, P.K, P.batch, g_cfgs[ci].bm, g_cfgs[ci].bn)) : 1;
                check_case(h, ci, P, split);
            }
        }
    }
    if (!strcmp(mode, "profile")) { // one launch of cuBLAS and of each configuration, for ncu
        Problem P = {2048, 6144, 4096, 1, false, false};
        alloc_problem(P);
        Work wk;
        const float one = 1.f, zero = 0.f;
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)P.N, (int)P.M, (int)P.K, &one, P.W, CUDA_R_16BF, (int)P.K,
                        P.A, CUDA_R_16BF, (int)P.K, &zero, P.O, CUDA_R_16BF, (int)P.N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
        for (int ci = 0; ci < NCFG; ci++) {
            Launch L;
            if (!g_cfgs[ci].skinny && prepare(g_cfgs[ci], P, L, wk)) launch(g_cfgs[ci], L);
        }
        CK(cudaDeviceSynchronize());
        free_problem(P);
        work_free(wk);
    }
    if (!strcmp(mode, "sweep")) { // PDL chains: 8 launches back to back, with and without the attribute
        g_sweep = true;
        const int chain_cfgs[] = {7, 0}; // pp 128x128 s5 tma128, coop 128x256 s4 tma128
        struct { long long M, N, K; } cs[] = {{2048, 4096, 4096}, {2048, 6144, 4096}, {128, 4096, 4096}};
        for (auto &q : cs)
            for (int ci : chain_cfgs) {
                Problem P = {q.M, q.N, q.K, 1, false, false};
                alloc_problem(P);
                reference(h, P);
                Work wk;
                Launch L;
                const Cfg &c = g_cfgs[ci];
                if (!prepare(c, P, L, wk)) { free_problem(P); continue; }
                const float t0 = time_median([&](int) { for (int r = 0; r < 8; r++) launch(c, L); }, 20);
                const float t1 = time_median([&](int) { for (int r = 0; r < 8; r++) launch_pdl(c, L); }, 20);
                CK(cudaMemset(P.O, 0xff, (size_t)P.M * P.N * 2));
                for (int r = 0; r < 8; r++) launch_pdl(c, L);
                CK(cudaDeviceSynchronize());
                unsigned long long nans;
                const double rel = check_output(P, &nans);
                const bool ok = nans == 0 && rel < 1e-2;
                ok ? g_pass++ : g_fail++;
                printf("pdl-chain %-36s M=%-5lld N=%-5lld K=%-5lld 8 launches: %.1f us plain, %.1f us PDL (%.2f us/launch saved)%s\n",
                       c.name, q.M, q.N, q.K, t0 * 1e3, t1 * 1e3, (t0 - t1) * 1e3 / 8, ok ? "" : "  FAIL");
                free_problem(P);
                work_free(wk);
            }
    }
    if (!strcmp(mode, "bench") || !strcmp(mode, "all") || !strcmp(mode, "table") || !strcmp(mode, "sweep")) {
        measure_ceilings(h);
        FILE *csv = getenv("BENCH_CSV") ? fopen(getenv("BENCH_CSV"), "w") : NULL;
        if (csv)
            fprintf(csv, "model,gemm,M,N,K,config,split,auto,us,cublas_alone_us,cublas_us,floor_us,tflops,cublas_tflops,tbs,cublas_tbs,"
                         "pct_floor,cublas_pct_floor,x_cublas,rel,ok\n");
        struct { const char *model, *what; long long N, K; } g[] = {
            {"8B", "QKV", 6144, 4096},    {"8B", "O", 4096, 4096},       {"8B", "gate/up", 28672, 4096},
            {"8B", "down", 4096, 14336},  {"1B", "QKV", 3072, 2048},     {"1B", "O", 2048, 2048},
            {"1B", "gate/up", 16384, 2048}, {"1B", "down", 2048, 8192},
        };
        const bool table = !strcmp(mode, "table") || !strcmp(mode, "all");
        const bool only8b = g_sweep;
        const long long Ms_all[] = {1, 8, 32, 64, 128, 2048, 16384}, Ms_big[] = {2048, 16384};
        const long long *Ms = table ? Ms_all : Ms_big;
        const int nM = table ? 7 : 2;
        for (int mi = 0; mi < nM; mi++)
            for (auto &s : g) {
                if (Ms[mi] == 16384 && s.model[0] == '1' && !table) continue;
                if (only8b && s.model[0] != '8') continue;
                bench_shape(h, s.model, s.what, Ms[mi], s.N, s.K, csv);
            }
        if (csv) fclose(csv);
    }
    cublasDestroy(h);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
