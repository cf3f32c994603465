// codegen/kernels/gemv_mma.cuh — family `matmul`, 17..64 rows (batched decode): a
// bandwidth-bound GEMV on tensor cores (bf16 / f16, B as [N, K]).
//
// acc[b][m][n] = sum_k A[b][m][k] * W[b][n][k] in float32, then kiln_epilogue2 per pair of
// adjacent columns (codegen/kernels/CONTRACT.md, family `matmul`). Follows gemv.cuh in the
// unit (compiled with KILN_GEMV_MMA 1: its element traits, streaming loads and kgv_rs, not
// its kernel).
//
// The weights are the MMA's A operand: mma.sync m16n8k16 with 16 weight rows (16 output
// columns n) as its rows and 8 rows m of A (tokens) as its columns, f32 accumulators. A dot
// product does not care about the order of k, so the weights go from global memory straight
// into A-fragment registers, 16 bytes per load, with no shared memory: lane (g = lane/4,
// t = lane%4) loads the 8 elements k = 32*j + 8*t .. +8 of weight rows g and g+8 of its
// tile for k block j, and these fill the fragments of the block's two k steps s = 0, 1
// under one fixed permutation of k: step s's logical k slots 2t, 2t+1 (registers a0 of
// row g, a1 of row g+8) are physical 8t+4s+0, +1 (32-bit word 2s of the load), slots
// 2t+8, 2t+9 (a2, a3) are 8t+4s+2, +3 (word 2s+1). The B fragment (slots 2t, 2t+1 in b0,
// 2t+8, 2t+9 in b1, of column g) then needs the same physical k of token g: words 2s and
// 2s+1 of the 16 contiguous bytes at A[g][32*j + 8*t], read from shared memory. Every
// physical k of the block is used once by each of the two steps' slots, so the MMAs sum all
// 32 products of the block.
//
// Work split: CTA (x, y, z) stages A's K slice y (KILN_SPLITK slices of kper elements,
// kper = ceil(K / SPLITK) rounded up to 32) for all rows of batch z in shared memory
// (rows padded with zeros to 8*KILN_GMMA_NT, k to a multiple of 32), once. Its
// KILN_GMMA_WARPS warps then take tiles of 16*KILN_GMMA_MT output columns, tile
// x + gridDim.x * (warp + WARPS * i) for i = 0, 1, ... (round robin over the CTAs first,
// so each CTA gets the same number of tiles to within one), each over the whole slice:
// no reduction between warps. Per k block a warp issues 2*MT 16-byte weight loads per lane;
// KILN_GMMA_UNROLL blocks form a group, and the next group's loads are issued before the
// current group's MMAs (two groups of registers), so 2 groups of 2*MT*UNROLL loads per lane
// are in flight while a warp streams its rows.
//
// A is staged with cp.async (16 bytes each, all of a thread's copies in flight before it
// waits), so staging costs about one L2 round trip, not one per 4 KB of the CTA.
// Shared memory (dynamic, KILN_SMEM of the launch): A's slice as [8*NT][XS] elements,
// XS = round_up(kper, 64) + 32 (a row stride of 64 bytes mod 128, so the 8 lanes of each
// quarter-warp, 2 rows x 64 bytes, hit distinct banks), then 8*NT floats (the folded
// norm's sums of squares): gmma_smem_bytes(M, K) below, which codegen computes the same way.
//
// Split-K (KILN_SPLITK > 1): each warp writes its tile's partial sums to
// p.ws[((b*SPLITK + s)*M + m)*N + n] (as gemv.cuh; with the folded norm also its slice's
// sums of squares, one float per batch, slice, tile and row, after the batch*SPLITK*M*N
// partials), fences, and bumps p.sem[b*ntiles + tile] (ntiles = ceil(N / (16*MT)); zero
// before the first launch). The warp that brings it to SPLITK sums the slices in slice
// order (deterministic), runs the epilogue and puts the counter back to 0: no memset
// before the next launch or graph replay, and no barrier between the warps of a CTA.
//
// Folded RMSNorm (KILN_GEMV_NORM 1, passes/fold_norm_gemv.c): A is the norm's input and the
// gain is in W. The CTA adds up each row's squares from its staged slice; the products are
// scaled by rsqrt(ss/K + KILN_EPS) before the epilogue (split-K: the slices' sums added in
// slice order).
//
// Epilogue: the accumulators of a lane are columns g and g+8 of its tile for rows 2t, 2t+1;
// one shuffle with lane ^ 4 gives each lane two adjacent columns of one row (even g: row
// 2t, columns g, g+1; odd g: row 2t+1, columns g-1, g), passed to kiln_epilogue2 as
// gemv.cuh passes them.
//
// Alignment: 16-byte weight loads need W's batch base 16-byte aligned and ldw a multiple
// of 8; otherwise (and for the last, partial k block of a slice) the loads are scalar with
// zeros past the slice. A is staged by 16-byte copies when aligned likewise, else scalar.
// Programmatic dependent launch: each warp issues its first two groups of weight loads
// before kiln_pdl_wait (W is a weight no kernel of the graph writes), then the CTA stages A;
// kiln_pdl_launch once a warp has read the weights of its last tile.
//
// Constants: KILN_GMMA_NT (n tiles of 8 rows, M <= 8*NT, 1..8), KILN_GMMA_MT (16-column
// tiles per warp task, 1 or 2), KILN_GMMA_WARPS (warps per CTA), KILN_GMMA_UNROLL (k blocks
// per load group), KILN_GMMA_MINB (CTAs per SM for __launch_bounds__), KILN_SPLITK,
// KILN_GEMV_NORM, KILN_EPS. Launch: grid (at most ceil(ntiles / WARPS), SPLITK, batch),
// block 32*WARPS, dynamic shared memory gmma_smem_bytes(M, K).
#ifndef KILN_GEMV_MMA_CUH
#define KILN_GEMV_MMA_CUH

#ifndef KILN_GEMV_CUH
#error "gemv_mma.cuh: gemv.cuh (with KILN_GEMV_MMA 1) must come first"
#endif
#ifndef KILN_GMMA_NT
#define KILN_GMMA_NT 4
#endif
#ifndef KILN_GMMA_MT
#define KILN_GMMA_MT 1
#endif
#ifndef KILN_GMMA_WARPS
#define KILN_GMMA_WARPS 8
#endif
#ifndef KILN_GMMA_UNROLL
#define KILN_GMMA_UNROLL 2
#endif
#ifndef KILN_GMMA_MINB
#define KILN_GMMA_MINB 1
#endif

static_assert(KILN_GMMA_NT >= 1 && KILN_GMMA_NT <= 8, "KILN_GMMA_NT in 1..8 (at most 64 rows)");
static_assert(KILN_GMMA_MT == 1 || KILN_GMMA_MT == 2, "KILN_GMMA_MT is 1 or 2");
static_assert(KILN_GMMA_WARPS >= 1 && KILN_GMMA_WARPS <= 32, "KILN_GMMA_WARPS in 1..32");
static_assert(KILN_GMMA_UNROLL >= 1, "KILN_GMMA_UNROLL must be >= 1");
static_assert(KILN_B_NK == 1, "gemv_mma.cuh reads W as [N, K]");
static_assert(kgv_same<KILN_T, __nv_bfloat16>::value || kgv_same<KILN_T, __half>::value,
              "gemv_mma.cuh: bf16 or f16 operands");

#define KGM_THREADS (32 * KILN_GMMA_WARPS)
#define KGM_ROWS (8 * KILN_GMMA_NT)
#define KGM_TN (16 * KILN_GMMA_MT)

// The K slice of every CTA (elements, a multiple of 32), and its staged row stride.
__host__ __device__ __forceinline__ long long gmma_kper(long long K)
{
    return ((K + KILN_SPLITK - 1) / KILN_SPLITK + 31) / 32 * 32;
}
__host__ __device__ __forceinline__ long long gmma_xs(long long K) { return (gmma_kper(K) + 63) / 64 * 64 + 32; }
__host__ __device__ __forceinline__ long long gmma_smem_bytes(long long K)
{
    return (long long)KGM_ROWS * gmma_xs(K) * 2 + KGM_ROWS * 4;
}

template <typename T>
__device__ __forceinline__ void kgm_mma(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                        unsigned b1)
{
    if constexpr (kgv_same<T, __half>::value) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
}

__device__ __forceinline__ unsigned kgm_word(const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ uint4 kgm_lds(const void *p)
{
    uint4 r;
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(a));
    return r;
}

// 16 bytes global -> shared without registers (cp.async, L2 only): the staging of A issues
// all of a thread's copies before waiting for any.
__device__ __forceinline__ void kgm_cp16(void *s, const void *g)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g) : "memory");
}
__device__ __forceinline__ void kgm_cp_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// 8 elements of a row at p[0..8), those at or past `lim` (elements from p) zero: the
// scalar load of an unaligned operand or of a slice's last partial block.
template <typename T> __device__ __forceinline__ uint4 kgm_ld8(const T *p, long long lim)
{
    unsigned short h[8];
#pragma unroll
    for (int e = 0; e < 8; e++) h[e] = e < lim ? reinterpret_cast<const unsigned short *>(p)[e] : (unsigned short)0;
    return make_uint4(h[0] | (unsigned)h[1] << 16, h[2] | (unsigned)h[3] << 16, h[4] | (unsigned)h[5] << 16,
                      h[6] | (unsigned)h[7] << 16);
}

// One group of UNROLL k blocks of the weights (the warp's 2*MT rows per lane) from block j.
template <int U, bool EARLY>
__device__ __forceinline__ void kgm_load(uint4 (&w)[U][KILN_GMMA_MT][2], const KILN_T *const (&wr)[KILN_GMMA_MT][2],
                                         long long j)
{
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int mt = 0; mt < KILN_GMMA_MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                w[u][mt][h] = EARLY ? kgv_ld_stream_early(wr[mt][h] + (j + u) * 32)
                                    : kgv_ld_stream(wr[mt][h] + (j + u) * 32);
}

// The MMAs of UNROLL k blocks from block j: B fragments from the staged slice xs (this
// lane's row g and k offset 8t already applied).
template <int U>
__device__ __forceinline__ void kgm_compute(float (&acc)[KILN_GMMA_MT][KILN_GMMA_NT][4],
                                            const uint4 (&w)[U][KILN_GMMA_MT][2], const KILN_T *xs, long long xs_ld,
                                            long long j)
{
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int nt = 0; nt < KILN_GMMA_NT; nt++) {
            const uint4 bx = kgm_lds(xs + nt * 8 * xs_ld + (j + u) * 32);
#pragma unroll
            for (int s = 0; s < 2; s++)
#pragma unroll
                for (int mt = 0; mt < KILN_GMMA_MT; mt++)
                    kgm_mma<KILN_T>(acc[mt][nt], kgm_word(w[u][mt][0], 2 * s), kgm_word(w[u][mt][1], 2 * s),
                                    kgm_word(w[u][mt][0], 2 * s + 1), kgm_word(w[u][mt][1], 2 * s + 1),
                                    kgm_word(bx, 2 * s), kgm_word(bx, 2 * s + 1));
        }
}

// The split-K slices' sums of squares of the folded norm: after the batch*SPLITK*M*N
// partial products, one float per (batch, slice, tile, row).
__device__ __forceinline__ float *kgm_ws_ss(const KilnArgs &p, long long b, long long s, long long tile, long long m,
                                           long long ntiles)
{
    return p.ws + (long long)gridDim.z * KILN_SPLITK * p.M * p.N + ((b * KILN_SPLITK + s) * ntiles + tile) * p.M + m;
}

template <typename T> __device__ __forceinline__ void kgm_main(const KilnArgs &p)
{
    constexpr int MT = KILN_GMMA_MT, NT = KILN_GMMA_NT, U = KILN_GMMA_UNROLL, WARPS = KILN_GMMA_WARPS;
    extern __shared__ __align__(16) unsigned char kgm_smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const long long b = blockIdx.z, s = blockIdx.y;
    const long long M = p.M, N = p.N, K = p.K;
    const long long ntiles = (N + KGM_TN - 1) / KGM_TN;
    const long long kper = gmma_kper(K), xs_ld = gmma_xs(K);
    const long long k0 = kper * s < K ? kper * s : K;
    const long long k1 = k0 + kper < K ? k0 + kper : K;
    const long long kpad = (k1 - k0 + 31) / 32 * 32; // staged k of the slice
    T *xs = reinterpret_cast<T *>(kgm_smem);
    float *ssm = reinterpret_cast<float *>(kgm_smem + (size_t)KGM_ROWS * xs_ld * 2);
    const T *A = reinterpret_cast<const T *>(p.a) + b * p.sa;
    const T *W = reinterpret_cast<const T *>(p.w) + b * p.sw;
    const bool wvec = kgv_aligned(W, p.ldw, 8);
    const long long nfull = wvec ? (k1 - k0) / 32 : 0; // k blocks read with 16-byte loads
    const long long ng = nfull / U;                     // groups of U of them
    const long long tstride = (long long)gridDim.x * WARPS;

    // This lane's weight rows of a tile (rows past N re-read row N-1; their sums are dropped).
    const KILN_T *wr[MT][2];
    auto rows = [&](long long tile) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const long long n = tile * KGM_TN + mt * 16 + h * 8 + g;
                wr[mt][h] = W + (n < N ? n : N - 1) * p.ldw + k0 + 8 * t;
            }
    };

    long long tile = blockIdx.x + (long long)gridDim.x * warp;
    uint4 w0[U][MT][2], w1[U][MT][2];
    // Programmatic dependent launch: the first two groups of weights before the wait (they
    // stream while the previous kernel drains and while the CTA stages A).
    bool early = tile < ntiles && ng > 0;
    const bool early1 = early && ng > 1; // w1 holds group 1
    if (tile < ntiles) rows(tile);
    if (early) kgm_load<U, true>(w0, wr, 0);
    if (early1) kgm_load<U, true>(w1, wr, U);
    kiln_pdl_wait();

    // Stage A's slice (rows past M and k past the slice zero): every whole 16-byte chunk by
    // cp.async, all in flight at once; the rest (a partial chunk, an unaligned A) by plain loads.
    {
        const bool avec = kgv_aligned(A, p.lda, 8) && (k0 % 8 == 0);
        const long long cpr = kpad / 8; // 16-byte chunks per row
        for (long long i = tid; i < KGM_ROWS * cpr; i += KGM_THREADS) {
            const long long m = i / cpr, k = (i % cpr) * 8;
            const T *src = A + m * p.lda + k0 + k;
            if (m < M && avec && k0 + k + 8 <= k1) {
                kgm_cp16(xs + m * xs_ld + k, src);
                continue;
            }
            uint4 v = make_uint4(0, 0, 0, 0);
            if (m < M && k0 + k < k1) v = kgm_ld8(src, k1 - k0 - k);
            *reinterpret_cast<uint4 *>(xs + m * xs_ld + k) = v;
        }
        kgm_cp_wait();
    }
    __syncthreads();
#if KILN_GEMV_NORM
    // Each row's sum of squares over the slice (rows past M: zero).
    for (int m = warp; m < KGM_ROWS; m += WARPS) {
        float v = 0.f;
        for (long long k = lane; k < kpad; k += 32) {
            const float x = kgv_t<T>::ld(xs + m * xs_ld + k);
            v = fmaf(x, x, v);
        }
        v = kiln_warp_sum(v);
        if (lane == 0) ssm[m] = v;
    }
    __syncthreads();
#endif
    (void)ssm;

    const T *xl = xs + g * xs_ld + 8 * t; // this lane's B row and k offset
    if (tile >= ntiles) kiln_pdl_launch();
    for (; tile < ntiles; tile += tstride) {
        if (!early) rows(tile);
        float acc[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[mt][nt][e] = 0.f;

        // Groups of U blocks, the next group's loads in flight during this one's MMAs.
        if (ng > 0) {
            if (!early) kgm_load<U, false>(w0, wr, 0);
            for (long long gi = 0; gi < ng; gi += 2) {
                if (gi + 1 < ng && !(early1 && early && gi == 0)) kgm_load<U, false>(w1, wr, (gi + 1) * U);
                kgm_compute<U>(acc, w0, xl, xs_ld, gi * U);
                if (gi + 1 >= ng) break;
                if (gi + 2 < ng) kgm_load<U, false>(w0, wr, (gi + 2) * U);
                kgm_compute<U>(acc, w1, xl, xs_ld, (gi + 1) * U);
            }
        }
        early = false;
        // Whole blocks left over from the groups, then the partial (or unaligned) rest.
        for (long long j = ng * U; j < nfull; j++) {
            uint4 w[1][MT][2];
            kgm_load<1, false>(w, wr, j);
            kgm_compute<1>(acc, w, xl, xs_ld, j);
        }
        for (long long j = nfull; j * 32 < k1 - k0; j++) {
            uint4 w[1][MT][2];
            const long long lim = k1 - k0 - j * 32 - 8 * t;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) w[0][mt][h] = kgm_ld8(wr[mt][h] + j * 32, lim);
            kgm_compute<1>(acc, w, xl, xs_ld, j);
        }
        if (tile + tstride >= ntiles) kiln_pdl_launch(); // this warp's weights are read

        // Pairs of adjacent columns: even g keeps row 2t (columns g, g+1), odd g row 2t+1
        // (columns g-1, g). q indexes (mt, nt, half): column n0 + 16*mt + 8*half + (g & ~1).
        const bool even = (g & 1) == 0;
        float v0[MT][NT][2], v1[MT][NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const float c0 = acc[mt][nt][2 * h], c1 = acc[mt][nt][2 * h + 1];
                    const float r = __shfl_xor_sync(0xffffffffu, even ? c1 : c0, 4);
                    v0[mt][nt][h] = even ? c0 : r;
                    v1[mt][nt][h] = even ? r : c1;
                }
        const long long mrow = 2 * t + (even ? 0 : 1), ncol = tile * KGM_TN + (g & ~1);

#if KILN_SPLITK == 1
        {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const long long m = nt * 8 + mrow;
                if (m >= M) continue;
                const float rs = kgv_rs(KILN_GEMV_NORM ? ssm[m] : 0.f, K);
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const long long n = ncol + mt * 16 + h * 8;
                        if (n < N) kiln_epilogue2(p, b, m, n, v0[mt][nt][h] * rs, v1[mt][nt][h] * rs, n + 1 < N);
                    }
            }
        }
#else
        // Split-K: this slice's partial sums (and sums of squares), then the last warp of the
        // tile adds the slices in order.
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const long long m = nt * 8 + mrow;
            if (m >= M) continue;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const long long n = ncol + mt * 16 + h * 8;
                    if (n >= N) continue;
                    float *ws = p.ws + ((b * KILN_SPLITK + s) * M + m) * N + n;
                    ws[0] = v0[mt][nt][h];
                    if (n + 1 < N) ws[1] = v1[mt][nt][h];
                }
        }
        if (KILN_GEMV_NORM)
            for (long long m = lane; m < M; m += 32) *kgm_ws_ss(p, b, s, tile, m, ntiles) = ssm[m];
        __threadfence(); // this lane's workspace writes are visible device-wide ...
        __syncwarp();    // ... before lane 0 announces the warp's
        int prev = 0;
        if (lane == 0) prev = atomicAdd(&p.sem[b * ntiles + tile], 1);
        prev = __shfl_sync(0xffffffffu, prev, 0);
        if (prev != KILN_SPLITK - 1) continue; // uniform over the warp
        __threadfence();
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const long long m = nt * 8 + mrow;
            if (m >= M) continue;
            float sq = 0.f;
            if (KILN_GEMV_NORM)
                for (int sl = 0; sl < KILN_SPLITK; sl++) sq += __ldcg(kgm_ws_ss(p, b, sl, tile, m, ntiles));
            const float rs = kgv_rs(sq, K);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const long long n = ncol + mt * 16 + h * 8;
                    if (n >= N) continue;
                    const bool has1 = n + 1 < N;
                    float a0 = 0.f, a1 = 0.f;
                    for (int sl = 0; sl < KILN_SPLITK; sl++) {
                        const float *ws = p.ws + ((b * KILN_SPLITK + sl) * M + m) * N + n;
                        a0 += __ldcg(ws);
                        if (has1) a1 += __ldcg(ws + 1);
                    }
                    kiln_epilogue2(p, b, m, n, a0 * rs, a1 * rs, has1);
                }
        }
        if (lane == 0) p.sem[b * ntiles + tile] = 0; // ready for the next launch
#endif
    }
}

extern "C" __global__ void __launch_bounds__(KGM_THREADS, KILN_GMMA_MINB) KILN_KERNEL(KilnArgs p)
{
    kgm_main<KILN_T>(p);
}

#endif // KILN_GEMV_MMA_CUH
