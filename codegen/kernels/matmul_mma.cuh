// codegen/kernels/matmul_mma.cuh — family `matmul`, large M (prefill, big batch).
//
// acc[b][m][n] = sum_k A[b][m][k] * B(b, n, k) in float32, then kiln_epilogue2 per
// pair of adjacent columns (codegen/kernels/CONTRACT.md, family `matmul`).
//
// bf16 / f16 (KILN_T): tensor cores through mma.sync.m16n8k16 (f32 accumulate), operands
// moved global -> shared by cp.async (16 bytes, zero-filled at the edges) in a
// KILN_STAGES-deep ring, shared -> registers by ldmatrix (.trans for a [K, N] B).
// Shared rows are padded by 16 bytes, so ldmatrix's eight 16-byte rows hit eight
// different bank groups (row strides of 80 or 144 bytes for BK = 32 or 64).
// f32 (KILN_T float): a plain shared-memory-tiled FFMA kernel, same tiles and launch rule.
//
// Edges: any M, N, K. Tiles past M/N/K are zero-filled in shared memory; the K tail
// of a row is a partial cp.async (src-size < 16). When a row cannot be read with
// 16-byte copies (base pointer not 16-byte aligned, or lda/ldw/sa/sw not a multiple
// of 8 elements, e.g. K = 100 with lda = K) that operand is loaded by scalar loads
// into the same ring instead: slower, same results.
//
// Constants (codegen): KILN_BM, KILN_BN, KILN_BK, KILN_WARPS_M, KILN_WARPS_N,
// KILN_STAGES, KILN_B_NK. Requirements (static_assert below):
//   BM % (16*WARPS_M) == 0, BN % (16*WARPS_N) == 0, BK % 16 == 0, STAGES >= 2;
//   f32 path: BM % 4 == 0, BN % 4 == 0, THREADS % (BN/4) == 0, BM % (THREADS/(BN/4)) == 0.
// Launch: grid (ceil(N/BN), ceil(M/BM), batch), block 32*WARPS_M*WARPS_N,
// dynamic shared memory KILN_SMEM_BYTES (formula below; > 48 KiB needs the kernel's
// max-dynamic-shared-memory attribute raised first: rt_kernel_set_max_smem).
//
// Folded RMSNorm (KILN_MATMUL_NORM 1, KILN_EPS; passes/fold_norm_gemv.c): A is the norm's
// input x and its gain is in W, so the products are scaled by rs[m] = rsqrt(mean(x[m]^2) +
// KILN_EPS) before the epilogue. Here (the run-time fallback of matmul_wgmma.cuh, which
// computes the sums from its shared tiles) the CTA computes rs of its BM rows from A in
// memory after its main loop, a warp per row, into the ring's shared memory.
//
// This is the portable first version; a Hopper wgmma + TMA kernel replaces the
// body behind the same KilnArgs, hook, constants and launch rule.
#ifndef KILN_MATMUL_MMA_CUH
#define KILN_MATMUL_MMA_CUH

#ifndef __CUDA_BF16_H__
#include <cuda_bf16.h>
#endif
#ifndef __CUDA_FP16_H__
#include <cuda_fp16.h>
#endif

#ifndef KILN_T
#error "matmul_mma.cuh: the generated part must define KILN_T"
#endif
#ifndef KILN_B_NK
#define KILN_B_NK 1
#endif

#define KMM_THREADS (32 * KILN_WARPS_M * KILN_WARPS_N)
#define KMM_PAD 8 /* elements of padding per shared row (16 bytes at 2 bytes each) */
#define KMM_F32_PAD 4

// Dynamic shared memory, bytes. 2-byte types: the ring; f32: one A and one B tile,
// both stored k-major. Codegen computes the same number on the host.
#define KMM_SMEM_BYTES_16                                                                        \
    (KILN_STAGES *                                                                               \
     (KILN_BM * (KILN_BK + KMM_PAD) +                                                            \
      (KILN_B_NK ? KILN_BN * (KILN_BK + KMM_PAD) : KILN_BK * (KILN_BN + KMM_PAD))) * 2)
#define KMM_SMEM_BYTES_32 ((KILN_BK * (KILN_BM + KMM_F32_PAD) + KILN_BK * (KILN_BN + KMM_F32_PAD)) * 4)
#ifndef KILN_SMEM_BYTES
#define KILN_SMEM_BYTES (sizeof(KILN_T) == 4 ? KMM_SMEM_BYTES_32 : KMM_SMEM_BYTES_16)
#endif

template <typename X, typename Y> struct kmm_same { static constexpr bool value = false; };
template <typename X> struct kmm_same<X, X> { static constexpr bool value = true; };

__device__ __forceinline__ unsigned kmm_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// 16-byte async copy; bytes beyond src_bytes (0..16) are zero-filled.
__device__ __forceinline__ void kmm_cp_async16(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(kmm_smem_addr(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void kmm_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void kmm_cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void kmm_ldsm_x4(unsigned (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(kmm_smem_addr(p)));
}
__device__ __forceinline__ void kmm_ldsm_x4_t(unsigned (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(kmm_smem_addr(p)));
}

template <typename T>
__device__ __forceinline__ void kmm_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    if constexpr (kmm_same<T, __half>::value) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// One [ROWS, COLS] tile of a row-major matrix (COLS contiguous, row stride ld) into
// shared memory with row stride COLS + KMM_PAD, 8 elements per copy. Rows >= rlim or
// columns >= clim are zero. vec: rows may be copied 16 bytes at a time.
template <int ROWS, int COLS, typename T>
__device__ __forceinline__ void kmm_load_tile16(T *s, const T *g, long long r0, long long c0,
                                                       long long rlim, long long clim, long long ld,
                                                       bool vec, int tid)
{
    constexpr int CPR = COLS / 8;
    constexpr int CHUNKS = ROWS * CPR;
    constexpr int ITERS = (CHUNKS + KMM_THREADS - 1) / KMM_THREADS;
#pragma unroll
    for (int i = 0; i < ITERS; i++) {
        const int c = tid + i * KMM_THREADS;
        if (CHUNKS % KMM_THREADS != 0 && c >= CHUNKS) break;
        const int r = c / CPR, cc = (c % CPR) * 8;
        const long long gr = r0 + r, gc = c0 + cc;
        T *dst = s + r * (COLS + KMM_PAD) + cc;
        if (vec) {
            int bytes = 0;
            const T *src = g;
            if (gr < rlim && gc < clim) {
                const long long rem = clim - gc;
                bytes = rem >= 8 ? 16 : (int)rem * 2;
                src = g + gr * ld + gc;
            }
            kmm_cp_async16(dst, src, bytes);
        } else {
            const unsigned short *src = reinterpret_cast<const unsigned short *>(g);
            unsigned short v[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] = (gr < rlim && gc + e < clim) ? src[gr * ld + gc + e] : (unsigned short)0;
            uint4 u;
            u.x = v[0] | ((unsigned)v[1] << 16);
            u.y = v[2] | ((unsigned)v[3] << 16);
            u.z = v[4] | ((unsigned)v[5] << 16);
            u.w = v[6] | ((unsigned)v[7] << 16);
            *reinterpret_cast<uint4 *>(dst) = u;
        }
    }
}

__device__ __forceinline__ bool kmm_aligned16(const void *p, long long ld, long long sb)
{
    return ((reinterpret_cast<unsigned long long>(p) & 15ull) == 0) && (ld % 8 == 0) && (sb % 8 == 0);
}

#ifndef KILN_MATMUL_NORM
#define KILN_MATMUL_NORM 0
#endif
// The folded norm's rs of rows m0 .. m0 + BM - 1 of A into rs_s (shared memory that the main
// loop no longer reads); 1 for every row without KILN_MATMUL_NORM (not called then).
template <typename T, int BM>
__device__ __forceinline__ void kmm_norm_rs(float *rs_s, const T *A, long long m0, long long M, long long K, long long lda)
{
#if KILN_MATMUL_NORM
    __syncthreads(); // every warp is past its last read of the ring
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int r = warp; r < BM; r += nw) {
        float v = 0.f;
        if (m0 + r < M)
            for (long long k = lane; k < K; k += 32) {
                const float x = kiln_ld(A + (m0 + r) * lda + k);
                v = fmaf(x, x, v);
            }
        v = kiln_warp_sum(v);
        if (lane == 0) rs_s[r] = rsqrtf(v * (1.0f / (float)K) + KILN_EPS);
    }
    __syncthreads();
#else
    (void)rs_s, (void)A, (void)m0, (void)M, (void)K, (void)lda;
#endif
}

// ---- bf16 / f16: tensor cores ------------------------------------------------------------
template <typename T> __device__ __forceinline__ void kmm_main16(const KilnArgs &p)
{
    constexpr int BM = KILN_BM, BN = KILN_BN, BK = KILN_BK;
    constexpr int WM = BM / KILN_WARPS_M, WN = BN / KILN_WARPS_N;
    constexpr int MI = WM / 16, NI = WN / 8;
    constexpr int SA = BM * (BK + KMM_PAD);                                        // A stage, elements
    constexpr int SB = KILN_B_NK ? BN * (BK + KMM_PAD) : BK * (BN + KMM_PAD);     // B stage, elements
    static_assert(BM % (16 * KILN_WARPS_M) == 0, "KILN_BM must be a multiple of 16*KILN_WARPS_M");
    static_assert(BN % (16 * KILN_WARPS_N) == 0, "KILN_BN must be a multiple of 16*KILN_WARPS_N");
    static_assert(BK % 16 == 0, "KILN_BK must be a multiple of 16");
    static_assert(KILN_STAGES >= 2, "KILN_STAGES must be at least 2");

    extern __shared__ __align__(16) unsigned char kmm_smem[];
    T *sA = reinterpret_cast<T *>(kmm_smem);
    T *sB = sA + KILN_STAGES * SA;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / KILN_WARPS_N, wn = warp % KILN_WARPS_N;
    const long long b = blockIdx.z;
    const long long n0 = (long long)blockIdx.x * BN, m0 = (long long)blockIdx.y * BM;
    const long long M = p.M, N = p.N, K = p.K;
    const T *A = reinterpret_cast<const T *>(p.a) + b * p.sa;
    const T *W = reinterpret_cast<const T *>(p.w) + b * p.sw;
    const bool vecA = kmm_aligned16(A, p.lda, p.sa);
    const bool vecB = kmm_aligned16(W, p.ldw, p.sw);

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    const int ktiles = (int)((K + BK - 1) / BK);
    auto load = [&](int stage, int kt) {
        const long long k0 = (long long)kt * BK;
        kmm_load_tile16<BM, BK>(sA + stage * SA, A, m0, k0, M, K, p.lda, vecA, tid);
        if (KILN_B_NK)
            kmm_load_tile16<BN, BK>(sB + stage * SB, W, n0, k0, N, K, p.ldw, vecB, tid);
        else
            kmm_load_tile16<BK, BN>(sB + stage * SB, W, k0, n0, K, N, p.ldw, vecB, tid);
    };

#pragma unroll
    for (int s = 0; s < KILN_STAGES - 1; s++) {
        if (s < ktiles) load(s, s);
        kmm_cp_commit();
    }

    for (int kt = 0; kt < ktiles; kt++) {
        kmm_cp_wait<KILN_STAGES - 2>();
        __syncthreads(); // tile kt is in shared memory for everyone; stage (kt-1)%S is free
        {
            const int next = kt + KILN_STAGES - 1;
            if (next < ktiles) load(next % KILN_STAGES, next);
            kmm_cp_commit();
        }
        const T *a_s = sA + (kt % KILN_STAGES) * SA;
        const T *b_s = sB + (kt % KILN_STAGES) * SB;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[MI][4], bfr[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
                kmm_ldsm_x4(af[mi], a_s + (wm * WM + mi * 16 + (lane & 15)) * (BK + KMM_PAD) + kk + (lane >> 4) * 8);
#pragma unroll
            for (int ni = 0; ni < NI; ni += 2) {
                unsigned r[4];
                if (KILN_B_NK)
                    kmm_ldsm_x4(r, b_s + (wn * WN + ni * 8 + (lane >> 4) * 8 + (lane & 7)) * (BK + KMM_PAD) + kk +
                                       ((lane >> 3) & 1) * 8);
                else
                    kmm_ldsm_x4_t(r, b_s + (kk + (lane & 7) + ((lane >> 3) & 1) * 8) * (BN + KMM_PAD) + wn * WN +
                                         ni * 8 + (lane >> 4) * 8);
                bfr[ni][0] = r[0];
                bfr[ni][1] = r[1];
                bfr[ni + 1][0] = r[2];
                bfr[ni + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++) kmm_mma<T>(acc[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
        }
    }
    kmm_cp_wait<0>();
    float *rs_s = reinterpret_cast<float *>(kmm_smem);
    kmm_norm_rs<T, BM>(rs_s, A, m0, M, K, p.lda);

#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
        const long long r = m0 + wm * WM + mi * 16 + (lane >> 2);
        if (KILN_MATMUL_NORM) {
            const float r0 = rs_s[r - m0], r1 = rs_s[r + 8 - m0];
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                acc[mi][ni][0] *= r0;
                acc[mi][ni][1] *= r0;
                acc[mi][ni][2] *= r1;
                acc[mi][ni][3] *= r1;
            }
        }
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
            const long long c = n0 + wn * WN + ni * 8 + (lane & 3) * 2;
            if (c < N) {
                if (r < M) kiln_epilogue2(p, b, r, c, acc[mi][ni][0], acc[mi][ni][1], c + 1 < N);
                if (r + 8 < M) kiln_epilogue2(p, b, r + 8, c, acc[mi][ni][2], acc[mi][ni][3], c + 1 < N);
            }
        }
    }
}

// ---- f32: shared-memory tiled FFMA ---------------------------------------------------------
template <typename T> __device__ __forceinline__ void kmm_main32(const KilnArgs &p)
{
    static_assert(sizeof(T) == 4, "f32 path");
    constexpr int BM = KILN_BM, BN = KILN_BN, BK = KILN_BK;
    constexpr int NT = KMM_THREADS;
    constexpr int TX = BN / 4, TY = NT / TX, RM = BM / TY; // 4 columns x RM rows per thread
    constexpr int LA = BM + KMM_F32_PAD, LB = BN + KMM_F32_PAD;
    static_assert(BN % 4 == 0 && BM % 4 == 0 && NT % TX == 0 && TY > 0 && BM % TY == 0,
                  "f32 matmul: need BM, BN % 4 == 0, threads % (BN/4) == 0, BM % (threads/(BN/4)) == 0");

    extern __shared__ __align__(16) unsigned char kmm_smem[];
    float *sA = reinterpret_cast<float *>(kmm_smem); // [BK][LA], k-major
    float *sB = sA + BK * LA;                        // [BK][LB], k-major

    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const long long b = blockIdx.z;
    const long long n0 = (long long)blockIdx.x * BN, m0 = (long long)blockIdx.y * BM;
    const long long M = p.M, N = p.N, K = p.K;
    const float *A = reinterpret_cast<const float *>(p.a) + b * p.sa;
    const float *W = reinterpret_cast<const float *>(p.w) + b * p.sw;

    float acc[RM][4];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.f;

    for (long long k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += NT) {
            const int r = e / BK, kc = e % BK;
            const long long gm = m0 + r, gk = k0 + kc;
            sA[kc * LA + r] = (gm < M && gk < K) ? A[gm * p.lda + gk] : 0.f;
        }
        if (KILN_B_NK) {
            for (int e = tid; e < BN * BK; e += NT) {
                const int r = e / BK, kc = e % BK;
                const long long gn = n0 + r, gk = k0 + kc;
                sB[kc * LB + r] = (gn < N && gk < K) ? W[gn * p.ldw + gk] : 0.f;
            }
        } else {
            for (int e = tid; e < BN * BK; e += NT) {
                const int kr = e / BN, nc = e % BN;
                const long long gk = k0 + kr, gn = n0 + nc;
                sB[kr * LB + nc] = (gn < N && gk < K) ? W[gk * p.ldw + gn] : 0.f;
            }
        }
        __syncthreads();
#pragma unroll 4
        for (int k = 0; k < BK; k++) {
            const float4 bv = *reinterpret_cast<const float4 *>(sB + k * LB + tx * 4);
#pragma unroll
            for (int i = 0; i < RM; i++) {
                const float av = sA[k * LA + ty + i * TY];
                acc[i][0] = fmaf(av, bv.x, acc[i][0]);
                acc[i][1] = fmaf(av, bv.y, acc[i][1]);
                acc[i][2] = fmaf(av, bv.z, acc[i][2]);
                acc[i][3] = fmaf(av, bv.w, acc[i][3]);
            }
        }
        __syncthreads();
    }

    kmm_norm_rs<T, BM>(sA, A, m0, M, K, p.lda);
    const long long c = n0 + tx * 4;
#pragma unroll
    for (int i = 0; i < RM; i++) {
        const long long r = m0 + ty + i * TY;
        if (KILN_MATMUL_NORM) {
            const float rs = sA[ty + i * TY];
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] *= rs;
        }
        if (r < M) {
            if (c < N) kiln_epilogue2(p, b, r, c, acc[i][0], acc[i][1], c + 1 < N);
            if (c + 2 < N) kiln_epilogue2(p, b, r, c + 2, acc[i][2], acc[i][3], c + 3 < N);
        }
    }
}

template <typename T> __device__ __forceinline__ void kmm_main(const KilnArgs &p)
{
    if constexpr (sizeof(T) == 4)
        kmm_main32<T>(p);
    else
        kmm_main16<T>(p);
}

extern "C" __global__ void __launch_bounds__(KMM_THREADS) KILN_KERNEL(KilnArgs p) { kmm_main<KILN_T>(p); }

#endif // KILN_MATMUL_MMA_CUH
