// codegen/kernels/gemv.cuh — family `matmul`, small M (decode): bandwidth-bound GEMV.
//
// acc[b][m][n] = sum_k A[b][m][k] * B(b, n, k) in float32, then kiln_epilogue2 per pair of
// adjacent columns (codegen/kernels/CONTRACT.md, family `matmul`).
//
// Work split: CTA (x, y, z) owns the column blocks cb = x, x + gridDim.x, ... (each the
// KILN_GEMV_COLS output columns [cb*COLS, cb*COLS+COLS)) of batch z, for ALL rows m, over K
// slice y of KILN_SPLITK: a grid of fewer CTAs than column blocks (codegen caps it at the
// CTAs resident at once) walks them, so no partial second wave is launched. Its 256 threads stride along k, and
// every thread works on all COLS columns and up to KILN_GEMV_MAXM rows at once: per step a
// thread issues COLS 16-byte weight loads (8 bf16/f16 or 4 f32 each) for each of
// KILN_GEMV_UNROLL steps before using any of them (COLS*UNROLL loads in flight), reads the
// matching 16 bytes of each A row (A is small and shared by all CTAs: L2/L1 hits), and
// accumulates in f32 registers. Then warp shuffles and a shared-memory pass over the 8 warps
// reduce the partial sums.
//
// B layout KILN_B_NK 1 ([N, K], k contiguous) is the fast path: a warp reads 512 contiguous
// bytes of one weight row per load. KILN_B_NK 0 ([K, N]) is supported (a thread reads the
// COLS contiguous weights of one k row per load) but is not the decode layout: codegen
// should transpose such weights at bind time.
//
// Split-K (KILN_SPLITK > 1): each CTA writes its partial sums to the float workspace
// p.ws[((b*SPLITK + s)*M + m)*N + n] (batch*SPLITK*M*N floats; twice that with the folded
// norm), then bumps the counter
// p.sem[b*ceil(N/COLS) + cb] (batch*ceil(N/COLS) ints, zero before the first launch). The CTA
// that brings it to SPLITK sums the slices in slice order (deterministic), runs the epilogue
// and puts the counter back to 0, so the next launch or graph replay needs no memset.
//
// Rows: p.M may exceed KILN_GEMV_MAXM; the CTA then loops over blocks of MAXM rows,
// reading its weights once per block (correct, slower: pick MAXM >= M).
// Alignment: 16-byte loads need the batch's A and W base 16-byte aligned and lda/ldw
// multiples of the vector width; otherwise the CTA uses scalar loads throughout. A K slice
// that is not a multiple of the vector width ends with a scalar tail.
//
// Folded RMSNorm (KILN_GEMV_NORM 1, passes/fold_norm_gemv.c): A is the norm's input x and
// the norm's gain is already in W (passes/fold_norm_gain.c). Next to the products each
// thread adds x[m][k]^2 of the x elements it reads into a sum of squares; the CTA reduces it
// with the products, and the reduced sums are scaled by rs[m] = rsqrt(sum/K + KILN_EPS)
// before the epilogue. Split-K: each slice's sum of squares goes to the workspace after the
// partial products (one float per batch, slice, column block and row; codegen doubles the
// workspace), and the last CTA adds them up in slice order with the products. Nothing runs
// before the first weight loads.
//
// Constants: KILN_GEMV_COLS (even, columns per CTA), KILN_SPLITK (>= 1), KILN_B_NK,
// KILN_GEMV_MAXM (rows held in registers, default 8: codegen gives the smallest power of two
// >= M), KILN_GEMV_UNROLL (default 1), KILN_GEMV_MINB (CTAs per SM for __launch_bounds__:
// 2 for MAXM <= 2 and COLS <= 8, else 1). Registers (bf16, sm_90a, ptxas): COLS 8, MAXM 1
// and 2 at MINB 2: 106-124, no spills; MAXM 4 and more, or COLS 16: 1 CTA per SM.
// Launch: grid (at most ceil(N/COLS), SPLITK, batch), block 256, no dynamic shared memory.
// KILN_GEMV_MMA 1: only the element traits and loads above the kernel, for gemv_mma.cuh
// (the tensor-core GEMV of 17..64 rows, which follows it in the unit).
// Programmatic dependent launch: each thread issues its first group of weight loads, then
// kiln_pdl_wait; kiln_pdl_launch right after it (KILN_GEMV_EARLY_LAUNCH) or where
// KILN_GEMV_LAUNCH_AT says (below). After the wait one thread calls the optional hook
// kiln_epilogue_prefetch(p) (the generated part defines KILN_HAS_EPILOGUE_PREFETCH with it) to
// warm the epilogue's small inputs.
// Column-block pipelining (KILN_GEMV_PIPE, default 1): a CTA walking several column blocks
// issues the next block's first group of weight loads before reducing the current one.
// The deferred reduction (KILN_GEMV_DEFER, default 16; kgv_main_defer, below): with SPLITK 1,
// B as [N, K] and MAXM*COLS <= 32 the kernel takes it for every launch: each warp sums its own
// MAXM*COLS partial products over its lanes (a transposing butterfly: P - 1 shuffles for P
// values instead of 5 per value) into a shared-memory slot, and the CTA synchronizes once per
// DEFER column blocks (and after its last) to add the warps' slots and run those blocks'
// epilogues, one column pair per thread, so warps never wait for each other between blocks.
// M > MAXM (row blocks) and unaligned operands (scalar loads) are handled there too; the
// general path (kgv_main) serves split-K, B as [K, N] and wider blocks.
// Where a CTA lets the next kernel launch: KILN_GEMV_LAUNCH_AT (default 1: once its last
// block's weights are read, before that block's reduction and epilogue).
#ifndef KILN_GEMV_CUH
#define KILN_GEMV_CUH

#ifndef __CUDA_BF16_H__
#include <cuda_bf16.h>
#endif
#ifndef __CUDA_FP16_H__
#include <cuda_fp16.h>
#endif

#ifndef KILN_T
#error "gemv.cuh: the generated part must define KILN_T"
#endif
#ifndef KILN_B_NK
#define KILN_B_NK 1
#endif
#ifndef KILN_SPLITK
#define KILN_SPLITK 1
#endif
#ifndef KILN_GEMV_MAXM
#define KILN_GEMV_MAXM 8
#endif
#ifndef KILN_GEMV_NORM
#define KILN_GEMV_NORM 0
#endif
#ifndef KILN_PDL_PREFETCH
// 1: the first KILN_PREFETCH_CTAS CTAs (about those resident at once) ask the L2 for their
// weight slice before waiting on the previous kernel. Codegen turns it on for weights of at
// most KILN_CG_GEMV_SMALL_MB (codegen/cg_family.c): on the 8B layer's large matrices the extra
// L2 traffic cost more than the overlap gained (README, "Decode without bubbles").
#define KILN_PDL_PREFETCH 0
#endif
#ifndef KILN_PREFETCH_CTAS
#define KILN_PREFETCH_CTAS 264
#endif
#ifndef KILN_GEMV_UNROLL
// Steps whose loads are all issued before the first use: COLS 16-byte loads each (8 per
// thread at COLS 8: 32 KB per CTA in flight, 64 KB per SM at two CTAs).
#define KILN_GEMV_UNROLL 1
#endif
#ifndef KILN_GEMV_PIPE
// 1: a CTA that walks several column blocks issues the first group of weight loads of its
// next block (as the first block's are issued before kiln_pdl_wait) before it reduces and
// stores the current one, so the cross-warp reduction and the epilogue's memory round trips
// overlap streaming. 0: the block's loads start after its epilogue.
#define KILN_GEMV_PIPE 1
#endif
#ifndef KILN_GEMV_EARLY_LAUNCH
// 1: every CTA lets the next kernel launch right after its kiln_pdl_wait (the next grid
// launches once every CTA of this one has done so, or exited), so that kernel's CTAs take
// whatever room this one leaves on the SMs at once and issue their independent loads under
// this kernel's whole run (decode attention's cached rows beside the QKV GEMV); where no room
// is left they start as this kernel's CTAs exit, as with 0. 0 (the default): where
// KILN_GEMV_LAUNCH_AT says.
// Measured on the H200 (README, "Decode attention beside the QKV GEMV"): 1 between GEMVs slows
// the layer; 1 on the QKV GEMV alone gains nothing unless the attention's shared memory fits
// the carveout the GEMV runs under.
#define KILN_GEMV_EARLY_LAUNCH 0
#endif
#ifndef KILN_GEMV_LAUNCH_AT
// Where a CTA lets the next kernel launch (kiln_pdl_launch; without KILN_GEMV_EARLY_LAUNCH): 0
// after the epilogue of its last column block; 1 (the default) once the weights of its last
// block are read, before that block's reduction and epilogue; 2 (the deferred path) when its
// last block starts (CTAs with fewer blocks than others let it launch one block earlier, so the
// next kernel's CTAs take their SMs as they exit). The general path takes 2 as 1.
#define KILN_GEMV_LAUNCH_AT 1
#endif
#ifndef KILN_GEMV_NREG
// > 0: registers capped at this many per thread (__maxnreg__, instead of __launch_bounds__'s
// KILN_GEMV_MINB). 96 (the 8B QKV GEMV: 16 bytes spilled) leaves a 4-warp CTA of 128 registers
// room beside two CTAs per SM (attention_decode.cuh KILN_DEC_MINB, KILN_GEMV_EARLY_LAUNCH).
#define KILN_GEMV_NREG 0
#endif
#ifndef KILN_GEMV_DEFER
// > 0: the deferred reduction (kgv_main_defer) where it applies: SPLITK 1, B as [N, K], at most
// 32 partial sums per thread (MAXM*COLS), and at run time M <= MAXM and 16-byte loads. Its
// value is the number of column blocks whose partial sums a CTA holds in shared memory before
// it synchronizes (and runs their epilogues). 0: the general path (a CTA-wide reduction and
// epilogue after every column block).
#define KILN_GEMV_DEFER 16
#endif
#ifndef KILN_GEMV_RING
// > 0 (R, at least 2; the deferred path only): the weights reach each thread through R slots of
// its own in dynamic shared memory (R * COLS * 256 16-byte slots: the launch's shared memory),
// filled by cp.async R - 1 steps ahead of their use across column blocks, so a CTA keeps R - 1
// steps of weights in flight without holding them in registers, through its reductions and
// epilogues too (a step: COLS 16-byte loads per thread). A slot is refilled one step after it
// was read, once the FMAs that used its values have issued. Applies at run time to M <= MAXM,
// K a multiple of the vector and aligned operands (else kgv_main_defer). 0: off.
#define KILN_GEMV_RING 0
#endif
#define KGV_DEFER_OK (KILN_GEMV_DEFER > 0 && KILN_B_NK && KILN_SPLITK == 1 && KILN_GEMV_MAXM * KILN_GEMV_COLS <= 32)
#ifndef KILN_GEMV_MINB
// CTAs per SM the registers are capped for (__launch_bounds__): two up to 2 rows of 8
// columns (ptxas then fits them in 128 registers without spilling), else one.
#define KILN_GEMV_MINB (KILN_GEMV_MAXM <= 2 && KILN_GEMV_COLS <= 8 ? 2 : 1)
#endif

#define KGV_THREADS 256
#define KGV_WARPS (KGV_THREADS / 32)

#ifndef KILN_GEMV_MMA
#define KILN_GEMV_MMA 0
#endif
#if !KILN_GEMV_MMA
static_assert(KILN_GEMV_COLS >= 2 && KILN_GEMV_COLS % 2 == 0, "KILN_GEMV_COLS must be even");
#endif
static_assert(KILN_SPLITK >= 1, "KILN_SPLITK must be >= 1");
static_assert(KILN_GEMV_MAXM >= 1 && KILN_GEMV_MAXM <= 32, "KILN_GEMV_MAXM in 1..32");
static_assert(KILN_GEMV_UNROLL >= 1, "KILN_GEMV_UNROLL must be >= 1");

template <typename X, typename Y> struct kgv_same { static constexpr bool value = false; };
template <typename X> struct kgv_same<X, X> { static constexpr bool value = true; };

// Element type traits: VEC elements per 16 bytes, conversions to f32.
template <typename T> struct kgv_t;
template <> struct kgv_t<__nv_bfloat16> {
    static constexpr int VEC = 8;
    static __device__ __forceinline__ float rnd(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
    static __device__ __forceinline__ float ld(const __nv_bfloat16 *p)
    {
        return __uint_as_float((unsigned)(*reinterpret_cast<const unsigned short *>(p)) << 16);
    }
    static __device__ __forceinline__ void cvt(const uint4 &u, float (&f)[8])
    {
        f[0] = __uint_as_float(u.x << 16);
        f[1] = __uint_as_float(u.x & 0xffff0000u);
        f[2] = __uint_as_float(u.y << 16);
        f[3] = __uint_as_float(u.y & 0xffff0000u);
        f[4] = __uint_as_float(u.z << 16);
        f[5] = __uint_as_float(u.z & 0xffff0000u);
        f[6] = __uint_as_float(u.w << 16);
        f[7] = __uint_as_float(u.w & 0xffff0000u);
    }
};
template <> struct kgv_t<__half> {
    static constexpr int VEC = 8;
    static __device__ __forceinline__ float rnd(float v) { return __half2float(__float2half_rn(v)); }
    static __device__ __forceinline__ float ld(const __half *p) { return __half2float(*p); }
    static __device__ __forceinline__ float2 h2(unsigned v)
    {
        __half2 h;
        *reinterpret_cast<unsigned *>(&h) = v;
        return __half22float2(h);
    }
    static __device__ __forceinline__ void cvt(const uint4 &u, float (&f)[8])
    {
        float2 t;
        t = h2(u.x), f[0] = t.x, f[1] = t.y;
        t = h2(u.y), f[2] = t.x, f[3] = t.y;
        t = h2(u.z), f[4] = t.x, f[5] = t.y;
        t = h2(u.w), f[6] = t.x, f[7] = t.y;
    }
};
template <> struct kgv_t<float> {
    static constexpr int VEC = 4;
    static __device__ __forceinline__ float rnd(float v) { return v; }
    static __device__ __forceinline__ float ld(const float *p) { return *p; }
    static __device__ __forceinline__ void cvt(const uint4 &u, float (&f)[4])
    {
        f[0] = __uint_as_float(u.x);
        f[1] = __uint_as_float(u.y);
        f[2] = __uint_as_float(u.z);
        f[3] = __uint_as_float(u.w);
    }
};

// Weights are read exactly once: 16-byte non-coherent load that does not allocate in L1.
__device__ __forceinline__ uint4 kgv_ld_stream(const void *p)
{
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}
__device__ __forceinline__ uint4 kgv_ld_vec(const void *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }

__device__ __forceinline__ bool kgv_aligned(const void *p, long long ld, int vec)
{
    return ((reinterpret_cast<unsigned long long>(p) & 15ull) == 0) && (ld % vec == 0);
}

// The same load, volatile: the weights a CTA asks for before kiln_pdl_wait (or before the
// reduction of its previous column block, KILN_GEMV_PIPE) stay there.
__device__ __forceinline__ uint4 kgv_ld_stream_early(const void *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

// 1/rms of a row from its sum of squares over all of K.
__device__ __forceinline__ float kgv_rs(float ss, long long K)
{
#if KILN_GEMV_NORM
    return rsqrtf(ss * (1.0f / (float)K) + KILN_EPS);
#else
    (void)ss;
    (void)K;
    return 1.f;
#endif
}

#if !KILN_GEMV_MMA // the CUDA-core kernel (gemv_mma.cuh, which follows, has its own)
// The folded RMSNorm's sums of squares (KILN_GEMV_NORM; else a no-op).
template <int MAXM> struct kgv_ss {
#if KILN_GEMV_NORM
    float v[MAXM];
    __device__ __forceinline__ void zero()
    {
#pragma unroll
        for (int m = 0; m < MAXM; m++) v[m] = 0.f;
    }
    __device__ __forceinline__ void add(int m, float a) { v[m] = fmaf(a, a, v[m]); }
#else
    __device__ __forceinline__ void zero() {}
    __device__ __forceinline__ void add(int, float) {}
#endif
};

// The folded norm's split-K partial sums of squares: after the batch*SPLITK*M*N partial
// products, one float per (batch, slice, column block, row).
__device__ __forceinline__ float *kgv_ws_ss(const KilnArgs &p, long long b, long long s, long long m, long long cb,
                                           long long ncb)
{
    return p.ws + (long long)gridDim.z * KILN_SPLITK * p.M * p.N + ((b * KILN_SPLITK + s) * ncb + cb) * p.M + m;
}

// Partial sums of this CTA (acc, per thread) -> reduced over the CTA -> epilogue, or into the
// split-K workspace. red: [KGV_WARPS][MAXM*(COLS+1)] floats of shared memory (the last
// column of each row: the folded norm's sum of squares).
template <int MAXM, int COLS>
__device__ __forceinline__ void kgv_reduce_out(const KilnArgs &p, float (&acc)[MAXM][COLS], kgv_ss<MAXM> &ss,
                                               float *red, long long b, long long mb, long long n0, long long cb,
                                               long long ncb)
{
    constexpr int RC = COLS + 1; // row stride in red
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const long long M = p.M, N = p.N;
#pragma unroll
    for (int m = 0; m < MAXM; m++) {
        if (mb + m < M) {
#pragma unroll
            for (int c = 0; c < COLS; c++) {
                float v = acc[m][c];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                if (lane == 0) red[warp * (MAXM * RC) + m * RC + c] = v;
            }
#if KILN_GEMV_NORM
            float v = ss.v[m];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) red[warp * (MAXM * RC) + m * RC + COLS] = v;
#endif
        }
    }
    (void)ss;
    __syncthreads();
    for (int i = tid; i < MAXM * (COLS / 2); i += KGV_THREADS) {
        const int m = i / (COLS / 2), c = (i % (COLS / 2)) * 2;
        const long long gm = mb + m, gn = n0 + c;
        if (gm >= M || gn >= N) continue;
        float v0 = 0.f, v1 = 0.f, sq = 0.f;
#pragma unroll
        for (int w = 0; w < KGV_WARPS; w++) {
            v0 += red[w * (MAXM * RC) + m * RC + c];
            v1 += red[w * (MAXM * RC) + m * RC + c + 1];
            if (KILN_GEMV_NORM) sq += red[w * (MAXM * RC) + m * RC + COLS];
        }
        if (KILN_SPLITK == 1) {
            const float rs = kgv_rs(sq, p.K);
            kiln_epilogue2(p, b, gm, gn, v0 * rs, v1 * rs, gn + 1 < N);
        } else {
            float *ws = p.ws + ((b * KILN_SPLITK + blockIdx.y) * M + gm) * N + gn;
            ws[0] = v0;
            if (gn + 1 < N) ws[1] = v1;
            if (KILN_GEMV_NORM && c == 0) *kgv_ws_ss(p, b, blockIdx.y, gm, cb, ncb) = sq;
        }
    }
    (void)cb;
    (void)ncb;
    __syncthreads(); // red is reused by the next row block
}

template <int MAXM, int COLS> __device__ __forceinline__ void kgv_zero(float (&acc)[MAXM][COLS])
{
#pragma unroll
    for (int m = 0; m < MAXM; m++)
#pragma unroll
        for (int c = 0; c < COLS; c++) acc[m][c] = 0.f;
}

// One step of a column block: the products of COLS weight vectors w with the matching vector of
// each row mb + m < M of A at k, into acc (and the rows' sums of squares into ss when `sums`).
template <typename T, int MAXM, int COLS>
__device__ __forceinline__ void kgv_fma_step(float (&acc)[MAXM][COLS], kgv_ss<MAXM> &ss, bool sums, const T *A,
                                             long long lda, long long mb, long long M, long long k,
                                             const uint4 (&w)[COLS])
{
    using TR = kgv_t<T>;
    constexpr int VEC = TR::VEC;
#pragma unroll
    for (int m = 0; m < MAXM; m++) {
        if (mb + m < M) {
            float af[VEC];
            TR::cvt(kgv_ld_vec(A + (mb + m) * lda + k), af);
            if (sums) {
#pragma unroll
                for (int e = 0; e < VEC; e++) ss.add(m, af[e]);
            }
#pragma unroll
            for (int c = 0; c < COLS; c++) {
                float wf[VEC];
                TR::cvt(w[c], wf);
#pragma unroll
                for (int e = 0; e < VEC; e++) acc[m][c] = fmaf(af[e], wf[e], acc[m][c]);
            }
        }
    }
}

template <typename T> __device__ __forceinline__ void kgv_main(const KilnArgs &p)
{
    using TR = kgv_t<T>;
    constexpr int VEC = TR::VEC, COLS = KILN_GEMV_COLS, MAXM = KILN_GEMV_MAXM, U = KILN_GEMV_UNROLL;
    constexpr int STEP = KGV_THREADS * VEC; // elements of k covered by one step of the CTA
    __shared__ float red[KGV_WARPS * MAXM * (COLS + 1)];
    __shared__ int last_flag;

    const int tid = threadIdx.x;
    const long long b = blockIdx.z;
    const long long M = p.M, N = p.N, K = p.K;
    const long long ncb = (N + COLS - 1) / COLS; // column blocks; CTA x takes x, x + gridDim.x, ...
    long long cb = blockIdx.x;
    long long n0 = cb * COLS;
    const T *A = reinterpret_cast<const T *>(p.a) + b * p.sa;
    const T *W = reinterpret_cast<const T *>(p.w) + b * p.sw;

    // This CTA's K slice; slice starts are multiples of VEC so 16-byte loads stay aligned.
    const long long kper = ((K + KILN_SPLITK - 1) / KILN_SPLITK + VEC - 1) / VEC * VEC;
    const long long k0 = kper * blockIdx.y < K ? kper * blockIdx.y : K;
    const long long k1 = k0 + kper < K ? k0 + kper : K;

    const bool vec_ok = kgv_aligned(A, p.lda, VEC) && kgv_aligned(W, p.ldw, VEC);
    bool vec = vec_ok && (KILN_B_NK || (n0 % VEC == 0 && n0 + COLS <= N && COLS % VEC == 0));
    long long kv = vec ? k0 + (k1 - k0) / VEC * VEC : k0; // end of the vectorized part

    // Row pointers of this CTA's weight rows ([N, K]); columns past N re-read row N-1 (ignored).
    const T *wr[COLS];
#pragma unroll
    for (int c = 0; c < COLS; c++) wr[c] = W + (n0 + c < N ? n0 + c : N - 1) * p.ldw;

    // Programmatic dependent launch (common.cuh): W is a weight (or a bind-time copy) that no
    // kernel of the graph writes, so each thread issues its first group of weight loads (the
    // first U steps of row block 0, COLS*U 16-byte loads) before it waits for the previous
    // kernel; they stream while that kernel drains. Every CTA waits before it reads A or
    // writes anything, and lets the next kernel launch once its weights are read.
    if (KILN_PDL_PREFETCH && KILN_B_NK && vec &&
        blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z) < KILN_PREFETCH_CTAS)
        for (int c = tid; c < COLS; c += KGV_THREADS)
            if (n0 + c < N) kiln_prefetch_l2(W + (n0 + c) * p.ldw + k0, (k1 - k0) * (long long)sizeof(T));
    uint4 w[U][COLS]; // a group of weight vectors (B_NK, vectorized)
    bool early = KILN_B_NK && vec && k0 + (long long)tid * VEC + (long long)(U - 1) * STEP < kv;
    if (early) {
        const long long k = k0 + (long long)tid * VEC;
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int c = 0; c < COLS; c++) w[u][c] = kgv_ld_stream_early(wr[c] + k + u * STEP);
    }
    kiln_pdl_wait();
    if (KILN_GEMV_EARLY_LAUNCH) kiln_pdl_launch(); // the next kernel may launch (its wait still waits)
#ifdef KILN_HAS_EPILOGUE_PREFETCH
    // the epilogue's small inputs (positions, tables: CONTRACT.md) into this SM's caches while
    // the first weights stream; after the wait, since an earlier kernel may write them
    if (tid == KGV_THREADS - 32) kiln_epilogue_prefetch(p);
#endif

    for (; cb < ncb; cb += gridDim.x) {
    if (cb != blockIdx.x) { // the next column block of this CTA
        n0 = cb * COLS;
        vec = vec_ok && (KILN_B_NK || (n0 % VEC == 0 && n0 + COLS <= N && COLS % VEC == 0));
        kv = vec ? k0 + (k1 - k0) / VEC * VEC : k0;
#pragma unroll
        for (int c = 0; c < COLS; c++) wr[c] = W + (n0 + c < N ? n0 + c : N - 1) * p.ldw;
    }
    for (long long mb = 0; mb < M; mb += MAXM) {
        float acc[MAXM][COLS];
#pragma unroll
        for (int m = 0; m < MAXM; m++)
#pragma unroll
            for (int c = 0; c < COLS; c++) acc[m][c] = 0.f;
        kgv_ss<MAXM> ss; // the folded norm's sums of squares of this thread's x elements
        ss.zero();

        if (KILN_B_NK) {
            if (vec) {
                long long k = k0 + (long long)tid * VEC;
                // U steps at a time: every load of the group is issued before the first use.
                for (; k + (long long)(U - 1) * STEP < kv; k += (long long)U * STEP) {
                    if (!early) {
#pragma unroll
                        for (int u = 0; u < U; u++)
#pragma unroll
                            for (int c = 0; c < COLS; c++) w[u][c] = kgv_ld_stream(wr[c] + k + u * STEP);
                    }
                    early = false;
#pragma unroll
                    for (int u = 0; u < U; u++) {
                        kgv_fma_step<T, MAXM, COLS>(acc, ss, true, A, p.lda, mb, M, k + u * STEP, w[u]);
                    }
                }
                for (; k < kv; k += STEP) {
                    uint4 w1[COLS];
#pragma unroll
                    for (int c = 0; c < COLS; c++) w1[c] = kgv_ld_stream(wr[c] + k);
                    kgv_fma_step<T, MAXM, COLS>(acc, ss, true, A, p.lda, mb, M, k, w1);
                }
            }
            // Scalar: the tail of a vectorized slice (< VEC elements), or the whole slice.
            for (long long k = kv + tid; k < k1; k += KGV_THREADS) {
                float wv[COLS];
#pragma unroll
                for (int c = 0; c < COLS; c++) wv[c] = TR::ld(wr[c] + k);
#pragma unroll
                for (int m = 0; m < MAXM; m++) {
                    if (mb + m < M) {
                        const float a = TR::ld(A + (mb + m) * p.lda + k);
                        ss.add(m, a);
#pragma unroll
                        for (int c = 0; c < COLS; c++) acc[m][c] = fmaf(a, wv[c], acc[m][c]);
                    }
                }
            }
        } else {
            // W is [K, N]: a thread takes whole k rows; the COLS weights of a row are contiguous.
            constexpr int KU = 4; // rows in flight per thread
            long long k = k0 + tid;
            for (; k < k1; k += (long long)KU * KGV_THREADS) {
                float wv[KU][COLS];
#pragma unroll
                for (int u = 0; u < KU; u++) {
                    const long long kk = k + (long long)u * KGV_THREADS;
                    const T *row = W + (kk < k1 ? kk : k1 - 1) * p.ldw + n0;
                    if (vec) {
#pragma unroll
                        for (int c = 0; c < COLS; c += VEC) {
                            float f[VEC];
                            TR::cvt(kgv_ld_stream(row + c), f);
#pragma unroll
                            for (int e = 0; e < VEC; e++)
                                if (c + e < COLS) wv[u][c + e] = f[e];
                        }
                    } else {
#pragma unroll
                        for (int c = 0; c < COLS; c++) wv[u][c] = n0 + c < N ? TR::ld(row + c) : 0.f;
                    }
                    if (kk >= k1) {
#pragma unroll
                        for (int c = 0; c < COLS; c++) wv[u][c] = 0.f;
                    }
                }
#pragma unroll
                for (int u = 0; u < KU; u++) {
                    const long long kk = k + (long long)u * KGV_THREADS;
                    if (kk < k1) {
#pragma unroll
                        for (int m = 0; m < MAXM; m++) {
                            if (mb + m < M) {
                                const float a = TR::ld(A + (mb + m) * p.lda + kk);
                                ss.add(m, a);
#pragma unroll
                                for (int c = 0; c < COLS; c++) acc[m][c] = fmaf(a, wv[u][c], acc[m][c]);
                            }
                        }
                    }
                }
            }
        }
        if (KILN_GEMV_PIPE && KILN_B_NK && mb + MAXM >= M && cb + gridDim.x < ncb) {
            // the next column block's first group of weight loads, before this block's reduction
            const long long nn0 = (cb + gridDim.x) * COLS;
            const long long k = k0 + (long long)tid * VEC;
            early = vec_ok && k + (long long)(U - 1) * STEP < (k0 + (k1 - k0) / VEC * VEC);
            if (early) {
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int c = 0; c < COLS; c++)
                        w[u][c] = kgv_ld_stream_early(W + (nn0 + c < N ? nn0 + c : N - 1) * p.ldw + k + u * STEP);
            }
        }
        if (!KILN_GEMV_EARLY_LAUNCH && KILN_GEMV_LAUNCH_AT >= 1 && mb + MAXM >= M && cb + gridDim.x >= ncb)
            kiln_pdl_launch(); // this CTA's weights are read
        kgv_reduce_out<MAXM, COLS>(p, acc, ss, red, b, mb, n0, cb, ncb);
    }
    if (!KILN_GEMV_EARLY_LAUNCH && KILN_GEMV_LAUNCH_AT == 0 && cb + gridDim.x >= ncb) kiln_pdl_launch();

    if (KILN_SPLITK > 1) {
        // Last CTA of this column block sums the slices (fixed order) and runs the epilogue.
        __threadfence(); // this CTA's workspace writes are visible device-wide ...
        __syncthreads(); // ... before thread 0 announces them
        if (tid == 0) {
            const int prev = atomicAdd(&p.sem[b * ncb + cb], 1);
            last_flag = (prev == KILN_SPLITK - 1);
        }
        __syncthreads();
        if (!last_flag) continue; // uniform over the CTA
        __threadfence();
        for (long long i = tid; i < M * (COLS / 2); i += KGV_THREADS) {
            const long long m = i / (COLS / 2), gn = n0 + (i % (COLS / 2)) * 2;
            if (gn >= N) continue;
            const bool has1 = gn + 1 < N;
            float v0 = 0.f, v1 = 0.f, sq = 0.f;
#pragma unroll 2
            for (int s = 0; s < KILN_SPLITK; s++) {
                const float *ws = p.ws + ((b * KILN_SPLITK + s) * M + m) * N + gn;
                v0 += __ldcg(ws);
                if (has1) v1 += __ldcg(ws + 1);
                if (KILN_GEMV_NORM) sq += __ldcg(kgv_ws_ss(p, b, s, m, cb, ncb));
            }
            const float rs = kgv_rs(sq, K);
            kiln_epilogue2(p, b, m, gn, v0 * rs, v1 * rs, has1);
        }
        if (tid == 0) p.sem[b * ncb + cb] = 0; // ready for the next launch
    }
    }
}

#if KGV_DEFER_OK
// ceil to a power of two (1, 2, 4, ...)
template <int V> struct kgv_pow2 { static constexpr int P = 2 * kgv_pow2<(V + 1) / 2>::P; };
template <> struct kgv_pow2<1> { static constexpr int P = 1; };

// The warp's sums of P values at once (a transposing butterfly): at each of the first log2(P)
// halvings a lane keeps one half of its values and adds its partner's copy of that half, so
// P - 1 shuffles instead of 5 per value; then plain xor steps finish the sums. Lane l ends with
// the warp's sum of value l / (32 / P) (all 32 / P lanes of a group hold it).
template <int P> struct kgv_log2 { static constexpr int L = 1 + kgv_log2<P / 2>::L; };
template <> struct kgv_log2<1> { static constexpr int L = 0; };
template <int P> __device__ __forceinline__ float kgv_warp_sums(float (&v)[P], int lane)
{
    constexpr int L = kgv_log2<P>::L;
#pragma unroll
    for (int t = 0; t < L; t++) {
        const int h = P >> (t + 1), mask = 16 >> t;
        const bool up = (lane & mask) != 0;
#pragma unroll
        for (int i = 0; i < P / 2; i++) {
            if (i < h) {
                const float send = up ? v[i] : v[i + h], keep = up ? v[i + h] : v[i];
                v[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
            }
        }
    }
    float r = v[0];
#pragma unroll
    for (int t = L; t < 5; t++) r += __shfl_xor_sync(0xffffffffu, r, 16 >> t);
    return r;
}

// The deferred reduction (KILN_GEMV_DEFER = NB > 0, SPLITK 1, B as [N, K]): the warps of a CTA
// never wait for each other between column blocks. A CTA walks units (column block j of its
// walk, row block of MAXM rows; one unit per block when M <= MAXM); each warp streams its k range
// of every unit (the next unit's first group of loads issued before it sums the current one, as
// KILN_GEMV_PIPE), sums its MAXM*COLS partial dot products over its lanes (kgv_warp_sums) and
// leaves them in shared-memory slot q % NB; once per NB units (and after the last) the CTA
// synchronizes once, adds the 8 warps' partials of every held unit and runs all their epilogues
// at once, one column pair per thread. The folded norm's sums of squares are taken in the first
// unit only when M <= MAXM (every column block reads the same x), else in every unit. Unaligned
// operands take scalar loads throughout.
// The deferred reduction's end of unit q (of nq, nrb row blocks per column block; kgv_main_defer
// and kgv_main_ring): the warp's MAXM*COLS partial sums (and the folded norm's sums of squares,
// `sums`) into slot q % KILN_GEMV_DEFER of part (ssp); after the last slot or the last unit one
// CTA-wide pass adds the warps' slots and runs those units' epilogues, a column pair per thread.
template <int MAXM, int COLS>
__device__ __forceinline__ void kgv_defer_unit_end(const KilnArgs &p, float (&acc)[MAXM][COLS], kgv_ss<MAXM> &ss,
                                                   bool sums, bool ss_once, long long q, long long nq,
                                                   long long nrb, long long b, long long n00)
{
    constexpr int NB = KILN_GEMV_DEFER, V = MAXM * COLS, P = kgv_pow2<V>::P;
    constexpr int G = 32 / P, PAIRS = MAXM * (COLS / 2);
    // the slots (one allocation per kernel, whichever path calls this)
    __shared__ float part[NB][KGV_WARPS][V];
#if KILN_GEMV_NORM
    __shared__ float ssp[NB][KGV_WARPS][MAXM];
#endif
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const long long M = p.M, N = p.N, K = p.K;
    const int slot = (int)(q % NB);
    {
        float v[P];
#pragma unroll
        for (int i = 0; i < P; i++) v[i] = i < V ? acc[(i < V ? i : 0) / COLS][(i < V ? i : 0) % COLS] : 0.f;
        const float r = kgv_warp_sums<P>(v, lane);
        if (lane % G == 0 && lane / G < V) part[slot][warp][lane / G] = r;
    }
#if KILN_GEMV_NORM
    if (sums) {
#pragma unroll
        for (int m = 0; m < MAXM; m++) {
            const float t = kiln_warp_sum(ss.v[m]);
            if (lane == 0) ssp[slot][warp][m] = t;
        }
    }
#endif
    if (slot == NB - 1 || q + 1 == nq) { // the CTA's partials of the held units -> epilogues
        __syncthreads();
        const long long q0 = q - slot;
        for (int i = tid; i < (slot + 1) * PAIRS; i += KGV_THREADS) {
            const int s = i / PAIRS, m = (i % PAIRS) / (COLS / 2), c = (i % (COLS / 2)) * 2;
            const long long qs = q0 + s, gm = qs % nrb * MAXM + m;
            const long long gn = n00 + qs / nrb * gridDim.x * COLS + c;
            if (gm >= M || gn >= N) continue;
            float v0 = 0.f, v1 = 0.f, sq = 0.f;
#pragma unroll
            for (int w8 = 0; w8 < KGV_WARPS; w8++) {
                v0 += part[s][w8][m * COLS + c];
                v1 += part[s][w8][m * COLS + c + 1];
#if KILN_GEMV_NORM
                sq += ssp[ss_once ? 0 : s][w8][m];
#endif
            }
            const float rs = kgv_rs(sq, K);
            kiln_epilogue2(p, b, gm, gn, v0 * rs, v1 * rs, gn + 1 < N);
        }
        if (q + 1 < nq) __syncthreads(); // the slots are written again
        else if (!KILN_GEMV_EARLY_LAUNCH && KILN_GEMV_LAUNCH_AT == 0) kiln_pdl_launch();
    }
#if !KILN_GEMV_NORM
    (void)ss;
    (void)sums;
    (void)ss_once;
#endif
}

template <typename T> __device__ __forceinline__ void kgv_main_defer(const KilnArgs &p)
{
    using TR = kgv_t<T>;
    constexpr int VEC = TR::VEC, COLS = KILN_GEMV_COLS, MAXM = KILN_GEMV_MAXM, U = KILN_GEMV_UNROLL;
    constexpr int STEP = KGV_THREADS * VEC;

    const int tid = threadIdx.x;
    const long long b = blockIdx.z;
    const long long M = p.M, N = p.N, K = p.K;
    const long long ncb = (N + COLS - 1) / COLS;
    const long long nrb = (M + MAXM - 1) / MAXM; // row blocks
    const long long nblk = (long long)blockIdx.x < ncb ? (ncb - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const long long nq = nblk * nrb; // units
    const bool ss_once = nrb == 1;
    const T *A = reinterpret_cast<const T *>(p.a) + b * p.sa;
    const T *W = reinterpret_cast<const T *>(p.w) + b * p.sw;
    const bool vec = kgv_aligned(A, p.lda, VEC) && kgv_aligned(W, p.ldw, VEC);
    const long long kv = vec ? K / VEC * VEC : 0; // the vectorized part; scalar loads after it
    const long long kt = (long long)tid * VEC;
    const bool full = kt + (long long)(U - 1) * STEP < kv; // this thread has a first group of U steps
    const long long n00 = (long long)blockIdx.x * COLS;

    if (KILN_PDL_PREFETCH && nq > 0 && blockIdx.x + (long long)gridDim.x * blockIdx.z < KILN_PREFETCH_CTAS)
        for (int c = tid; c < COLS; c += KGV_THREADS)
            if (n00 + c < N) kiln_prefetch_l2(W + (n00 + c) * p.ldw, K * (long long)sizeof(T));
    uint4 w[U][COLS];
    bool early = nq > 0 && full;
    if (early) {
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int c = 0; c < COLS; c++)
                w[u][c] = kgv_ld_stream_early(W + (n00 + c < N ? n00 + c : N - 1) * p.ldw + kt + u * STEP);
    }
    kiln_pdl_wait();
    if (KILN_GEMV_EARLY_LAUNCH) kiln_pdl_launch();
#ifdef KILN_HAS_EPILOGUE_PREFETCH
    if (tid == KGV_THREADS - 32) kiln_epilogue_prefetch(p);
#endif

    long long j = 0, mb = 0; // the unit q's column block (of the walk) and first row
    for (long long q = 0; q < nq; q++) {
        if (!KILN_GEMV_EARLY_LAUNCH && KILN_GEMV_LAUNCH_AT == 2 && q + 1 == nq) kiln_pdl_launch();
        const long long n0 = n00 + j * gridDim.x * COLS;
        const T *wr[COLS];
#pragma unroll
        for (int c = 0; c < COLS; c++) wr[c] = W + (n0 + c < N ? n0 + c : N - 1) * p.ldw;
        const bool sums = KILN_GEMV_NORM && (q == 0 || !ss_once);
        kgv_ss<MAXM> ss;
        ss.zero();
        float acc[MAXM][COLS];
        kgv_zero(acc);
        long long k = kt;
        for (; k + (long long)(U - 1) * STEP < kv; k += (long long)U * STEP) {
            if (!early) {
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int c = 0; c < COLS; c++) w[u][c] = kgv_ld_stream(wr[c] + k + u * STEP);
            }
            early = false;
#pragma unroll
            for (int u = 0; u < U; u++) {
                kgv_fma_step<T, MAXM, COLS>(acc, ss, sums, A, p.lda, mb, M, k + u * STEP, w[u]);
            }
        }
        if (U > 1) {
            for (; k < kv; k += STEP) { // the steps short of a group of U
                uint4 w1[COLS];
#pragma unroll
                for (int c = 0; c < COLS; c++) w1[c] = kgv_ld_stream(wr[c] + k);
                kgv_fma_step<T, MAXM, COLS>(acc, ss, sums, A, p.lda, mb, M, k, w1);
            }
        }
        for (long long kk = kv + tid; kk < K; kk += KGV_THREADS) { // scalar: a tail, or all of K
            float wv[COLS];
#pragma unroll
            for (int c = 0; c < COLS; c++) wv[c] = TR::ld(wr[c] + kk);
#pragma unroll
            for (int m = 0; m < MAXM; m++) {
                if (mb + m < M) {
                    const float a = TR::ld(A + (mb + m) * p.lda + kk);
                    if (sums) ss.add(m, a);
#pragma unroll
                    for (int c = 0; c < COLS; c++) acc[m][c] = fmaf(a, wv[c], acc[m][c]);
                }
            }
        }
        // the next unit
        const long long jn = mb + MAXM < M ? j : j + 1, mbn = mb + MAXM < M ? mb + MAXM : 0;
        if (q + 1 < nq) {
            early = KILN_GEMV_PIPE && full;
            if (early) { // its first group of weight loads, before this unit's sums
                const long long nn0 = n00 + jn * gridDim.x * COLS;
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int c = 0; c < COLS; c++)
                        w[u][c] = kgv_ld_stream_early(W + (nn0 + c < N ? nn0 + c : N - 1) * p.ldw + kt + u * STEP);
            }
        } else if (!KILN_GEMV_EARLY_LAUNCH && KILN_GEMV_LAUNCH_AT == 1) {
            kiln_pdl_launch(); // this CTA's weights are read
        }
        kgv_defer_unit_end<MAXM, COLS>(p, acc, ss, sums, ss_once, q, nq, nrb, b, n00);
        j = jn;
        mb = mbn;
    }
}

#if KILN_GEMV_RING > 0
__device__ __forceinline__ void kgv_cp16(void *sdst, const void *gsrc)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(sdst)),
                 "l"(gsrc)
                 : "memory");
}
// The ring path (KILN_GEMV_RING R > 0; above the kernel's doc): false, having done nothing,
// where it does not apply (more rows than MAXM, K not a multiple of the vector, unaligned
// operands); kgv_main_defer then runs.
template <typename T> __device__ __forceinline__ bool kgv_main_ring(const KilnArgs &p)
{
    using TR = kgv_t<T>;
    constexpr int VEC = TR::VEC, COLS = KILN_GEMV_COLS, MAXM = KILN_GEMV_MAXM, R = KILN_GEMV_RING;
    constexpr int STEP = KGV_THREADS * VEC;
    static_assert(R >= 2, "KILN_GEMV_RING: at least 2 slots");
    const long long M = p.M, N = p.N, K = p.K;
    const long long b = blockIdx.z;
    const T *A = reinterpret_cast<const T *>(p.a) + b * p.sa;
    const T *W = reinterpret_cast<const T *>(p.w) + b * p.sw;
    if (M > MAXM || K % VEC != 0 || !kgv_aligned(A, p.lda, VEC) || !kgv_aligned(W, p.ldw, VEC)) return false;
    extern __shared__ uint4 kgv_ring[]; // [R][COLS][KGV_THREADS]: each thread's own slots
    const int tid = threadIdx.x;
    const long long ncb = (N + COLS - 1) / COLS;
    const long long nq = (long long)blockIdx.x < ncb ? (ncb - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const long long kt = (long long)tid * VEC;
    const long long ns = kt < K ? (K - 1 - kt) / STEP + 1 : 0; // this thread's steps per column block
    const long long n00 = (long long)blockIdx.x * COLS, cstride = (long long)gridDim.x * COLS;
    uint4 *const ring = kgv_ring + tid;
    long long iq = 0, ik = 0; // the next step to issue: its column block and step
    int is = 0;               // and its slot
    auto issue = [&]() {
        if (iq < nq && ns > 0) {
            const long long n0 = n00 + iq * cstride;
#pragma unroll
            for (int c = 0; c < COLS; c++)
                kgv_cp16(ring + (is * COLS + c) * KGV_THREADS, W + (n0 + c < N ? n0 + c : N - 1) * p.ldw + kt + ik * STEP);
            if (++ik == ns) ik = 0, iq++;
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        is = is + 1 == R ? 0 : is + 1;
    };
#pragma unroll
    for (int i = 0; i < R - 1; i++) issue(); // before the wait: weights only
    kiln_pdl_wait();
    if (KILN_GEMV_EARLY_LAUNCH) kiln_pdl_launch();
#ifdef KILN_HAS_EPILOGUE_PREFETCH
    if (tid == KGV_THREADS - 32) kiln_epilogue_prefetch(p);
#endif
    int cs = 0; // the slot of the step consumed next
    for (long long q = 0; q < nq; q++) {
        if (!KILN_GEMV_EARLY_LAUNCH && KILN_GEMV_LAUNCH_AT == 2 && q + 1 == nq) kiln_pdl_launch();
        const bool sums = KILN_GEMV_NORM && q == 0;
        kgv_ss<MAXM> ss;
        ss.zero();
        float acc[MAXM][COLS];
        kgv_zero(acc);
        for (long long st = 0; st < ns; st++) {
            // the slot read in the previous step is free (its values were used by the FMAs
            // issued before this point): refill it, then wait for this step's group
            issue();
            asm volatile("cp.async.wait_group %0;\n" ::"n"(R - 1) : "memory");
            const long long k = kt + st * STEP;
            uint4 w[COLS];
#pragma unroll
            for (int c = 0; c < COLS; c++) w[c] = ring[(cs * COLS + c) * KGV_THREADS];
            cs = cs + 1 == R ? 0 : cs + 1;
            kgv_fma_step<T, MAXM, COLS>(acc, ss, sums, A, p.lda, 0, M, k, w);
        }
        if (!KILN_GEMV_EARLY_LAUNCH && KILN_GEMV_LAUNCH_AT == 1 && q + 1 == nq) kiln_pdl_launch();
        kgv_defer_unit_end<MAXM, COLS>(p, acc, ss, sums, true, q, nq, 1, b, n00);
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    return true;
}
#endif // KILN_GEMV_RING
#endif // KGV_DEFER_OK

#if KILN_GEMV_NREG > 0
#define KGV_BOUNDS __maxnreg__(KILN_GEMV_NREG) // (cannot be combined with __launch_bounds__)
#else
#define KGV_BOUNDS __launch_bounds__(KGV_THREADS, KILN_GEMV_MINB)
#endif
extern "C" __global__ void KGV_BOUNDS KILN_KERNEL(KilnArgs p)
{
#if KGV_DEFER_OK
#if KILN_GEMV_RING > 0
    if (kgv_main_ring<KILN_T>(p)) return;
#endif
    kgv_main_defer<KILN_T>(p);
#else
    kgv_main<KILN_T>(p);
#endif
}
#endif // !KILN_GEMV_MMA

#endif // KILN_GEMV_CUH
