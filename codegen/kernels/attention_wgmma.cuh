/* codegen/kernels/attention_wgmma.cuh — prefill attention on Hopper (sm_90a), bf16 / f16:
 * wgmma for Q K^T and P V, K/V tiles brought by TMA into an mbarrier ring, a producer
 * warpgroup and two consumer warpgroups in ping-pong (FlashAttention-3's scheme).
 *
 * Computes what attention_prefill.cuh computes (CONTRACT.md, family `attention`) for the
 * case where q arrives rotated and k/v are in the cache: KILN_ROPE 0, KILN_APPEND 0.
 * The fused RoPE-on-load and cache write stay with attention_prefill.cuh.
 *
 * Work: a sub-tile is 64 query rows of one query head; a CTA tile is two sub-tiles of one
 * (batch, KV head): sub-tiles u = 2i, 2i+1 of the list u = qblock * G + g (G = H / KV), so
 * with G even both are the same query rows of two query heads of the group and read the
 * very same K/V tiles from shared memory (GQA sharing); with G odd (MHA) they are two
 * neighbouring query blocks of one head (a 128-row tile). The keys visited are the union
 * of the two sub-tiles' ranges: causal stops at the last row's diagonal, a sliding window
 * starts at the first row's window; tiles past either edge are never loaded, and the mask
 * is applied only on tiles that straddle a diagonal, a window edge or the end of the keys.
 *
 * Warpgroup 0 (one thread) produces: per CTA tile, each sub-tile's Q [64 x HD] by TMA
 * into that consumer's Q buffer (once the consumer released it), then per key tile K and
 * V [BK x HD] into a KILN_ATT_STAGES-deep ring (`full`/`empty` mbarriers, separate for K
 * and V so Q K^T starts before V lands). Boxes are 64 columns wide (128-byte swizzle), so
 * a head dim that is not a multiple of 64 reads zeros (K/V: past HD) or the next head's
 * columns (Q) into columns no wgmma reads.
 * Warpgroups 1 and 2 consume, one sub-tile each, 64 rows in registers per warpgroup:
 *   step t:  wait K(t); [my turn]  S = Q K(t)^T (wgmma, both operands in shared memory),
 *            O += P(t-1) V(t-1) (wgmma, P from registers, V N-major); [your turn];
 *            wait for S; release K(t); mask; online softmax in exp2 with the scale folded
 *            (S -> P(t), row max and sum); wait for the P V; release V(t-1); rescale O.
 * so a warpgroup's softmax runs under its own P V and under the other's two products
 * (the turns are a pair of named barriers). O is normalized in registers and stored.
 * Tiles are handed out persistently, longest causal tiles first (descending query block),
 * in a snake order over the CTAs; the G heads of a group run side by side, so K/V mostly
 * come from L2. The softmax takes the row max on the raw scores (one multiply by the scale
 * per row) and exponentiates with ex2.approx.ftz (MUFU.EX2 alone: exp2f's subnormal fix-up
 * is three more instructions per element); the O rescale is skipped when no row of the warp
 * moved its max.
 *
 * Knobs (FlashAttention-3's choices, each a compile-time constant, codegen's values in
 * cg_family.c att_wgmma_config; docs/ATTENTION.md): KILN_ATT_ORDER (1: K(0) before Q, K(t+1)
 * before V(t)), KILN_ATT_QBUF 2 / KILN_ATT_QPF 1 (the next tile's Q in a second buffer / in
 * L2 while this tile runs), KILN_ATT_FREE (first Q K^T and last P V outside the turns),
 * KILN_ATT_TH (the row max moves only by more than TH), KILN_ATT_SCHED 1 (dynamic scheduler:
 * a global ticket counter, KilnArgs field `sched`, zero before and after a launch; the tile
 * indices reach the consumers through a two-slot ring in shared memory), KILN_ATT_L2SEC
 * (longest-first within sections of (batch, KV head) pairs whose K/V fit that many bytes),
 * KILN_ATT_HINT (L2 evict-first for Q, evict-last for K/V), KILN_ATT_PREG / _CREG (setmaxnreg).
 *
 * Compile-time hooks: KILN_ATT_WINDOW W > 0 (a key j is visible to query position P only
 * when P - j < W), KILN_ATT_SOFTCAP c > 0 (scores become c * tanh(score * scale / c)),
 * KILN_ATT_VARLEN 1 (packed variable-length sequences: KilnArgs field `cu_q`, int32
 * [B + 1] cumulative query offsets; q and o are [total, H, HD]; p.S is the longest
 * sequence; sequence b has cu_q[b+1] - cu_q[b] query rows).
 * Positions: p.pos (i32[B], the query offset of sequence b: chunked prefill appends to a
 * cache holding earlier chunks) or null (offset T - len). Valid keys j < offset + len;
 * causal j <= offset + s. An invalid offset writes NaN to the sequence's output rows.
 * Cache rows past the valid keys are read (a whole tile at a time) and must hold finite
 * values; their probabilities are zero.
 *
 * Kernel parameter: KilnAttTmaArgs = {map q, map k, map v, KilnArgs} (128 bytes each,
 * 384 + 8 * nargs bytes), by value, __grid_constant__. Maps (runtime/rt_tmap.h, rank 3,
 * box {64, rows, 1}, 128-byte swizzle): q {H*HD, S (varlen: total rows), B (varlen: 1)}
 * with ld q_ss, batch stride q_sb, box rows 64; k and v {HD, T, B*KV}, ld HD, batch
 * stride T*HD, box rows KILN_ATT_BK.
 * Launch: persistent, grid min(tiles, SMs) (a different grid is only slower), block 384,
 * dynamic shared memory KILN_ATT_SMEM_BYTES (formula below).
 * Constants: KILN_HD (multiple of 16, <= 256), KILN_ATT_BK (key rows per tile, multiple
 * of 16; default 128, 64 above HD 128), KILN_ATT_STAGES (default 2), KILN_WGMMA_F16 (1
 * when KILN_T is __half), the knobs above (defaults: the kernel before them). Helpers from attention_common.cuh (softmax, packing) and
 * matmul_wgmma.cuh (mbarriers, TMA, descriptors; included with KILN_WGMMA_NO_KERNEL).
 *
 * Ordering (as in matmul_wgmma.cuh, argued since racecheck does not see TMA or wgmma):
 * a ring slot or Q buffer is written by TMA only after its `empty` barrier completed,
 * which needs an arrival from every consumer warp reading it, each made after
 * wgmma.wait_group proved the groups reading it retired; it is read only after its
 * `full` barrier completed (the producer's expect_tx and all the bytes). Producer and
 * consumers walk the same tile sequence and slot sequence, one phase bit per wrap (K and V
 * rings counted apart, so any load order keeps them matched). The dynamic scheduler's slot
 * is written by the producer after its `empty` barrier completed (one arrival per consumer
 * warp, after __syncwarp following the warp's read) and read after its `full` barrier
 * (mbarrier.arrive releases, try_wait acquires). Its counter: the CTA drawing ticket
 * ntiles - 1 draws the last one (every CTA draws until one fails, ntiles draws in all) and
 * writes it back to zero; the next launch in the stream starts after this one ends. */
#ifndef KILN_ATT_HELPERS
#error "attention_wgmma.cuh: attention_common.cuh must come before it (codegen/kernels/CONTRACT.md)"
#endif
#ifndef KILN_MATMUL_WGMMA_CUH
#error "attention_wgmma.cuh: matmul_wgmma.cuh (with KILN_WGMMA_NO_KERNEL) must come before it"
#endif
#if KILN_ROPE || KILN_APPEND
#error "attention_wgmma.cuh reads q rotated and k/v from the cache: RoPE on load and the cache write take attention_prefill.cuh"
#endif
#ifndef KILN_ATT_BK
#define KILN_ATT_BK (KILN_HD > 128 ? 64 : 128)
#endif
#ifndef KILN_ATT_STAGES
#define KILN_ATT_STAGES 2
#endif
#ifndef KILN_ATT_VARLEN
#define KILN_ATT_VARLEN 0
#endif
/* Producer load order. 0: per CTA tile Q, then K(t), V(t) for each key tile t. 1 (as
 * FlashAttention-3): K(0) first, then Q, then K(t+1) before V(t), so a consumer's next Q K^T
 * never waits behind the V it needs one step later, nor a tile's first K behind its Q. */
#ifndef KILN_ATT_ORDER
#define KILN_ATT_ORDER 0
#endif
/* Q buffers per consumer: 1, or 2 (the next CTA tile's Q is loaded while this one runs) */
#ifndef KILN_ATT_QBUF
#define KILN_ATT_QBUF 1
#endif
/* 1: with one Q buffer, the producer prefetches the next CTA tile's Q into L2 when it
 * starts a tile (cp.async.bulk.prefetch.tensor), so the load at the boundary hits L2 */
#ifndef KILN_ATT_QPF
#define KILN_ATT_QPF 0
#endif
/* 1: a CTA tile's first Q K^T and last P V are issued outside the consumers' turns */
#ifndef KILN_ATT_FREE
#define KILN_ATT_FREE 0
#endif
/* The row max moves only when a key tile's max exceeds it by more than KILN_ATT_TH (log2
 * units; P then stays below 2^TH): with TH 8 the O rescale is rarely needed and skipped
 * (warp-uniform) when no row of the warp moved; 0: the max follows every tile exactly */
#ifndef KILN_ATT_TH
#define KILN_ATT_TH 0
#endif
/* Tile scheduler. 0: static, the CTA's r-th tile is r * grid + (snake) blockIdx.x. 1: dynamic,
 * the producer takes the next tile index from a global counter (KilnArgs field `sched`, an
 * int that is zero when the kernel starts and is left zero: the CTA drawing the last ticket
 * resets it) and hands it to the consumers through shared memory. */
#ifndef KILN_ATT_SCHED
#define KILN_ATT_SCHED 0
#endif
/* L2 sections: > 0, tiles are ordered longest-first within sections of (batch, KV head)
 * pairs whose K and V (T * HD * 2 elements each) fit in KILN_ATT_L2SEC bytes, one section
 * after another (FlashAttention-3's L2 swizzle); 0: longest-first over all pairs. */
#ifndef KILN_ATT_L2SEC
#define KILN_ATT_L2SEC 0
#endif
/* 1: Q loads with an L2 evict-first policy, K and V with evict-last */
#ifndef KILN_ATT_HINT
#define KILN_ATT_HINT 0
#endif
/* registers per thread (setmaxnreg) of the producer and the consumer warpgroups, multiples
 * of 8 with 128 * PREG + 256 * CREG <= 384 * 168 (the launch's allocation): head dims above
 * 128 need 232 for the consumers; the producer's Q look-ahead (KILN_ATT_QBUF 2, _QPF) needs
 * more than 40 (56, leaving 224 to the consumers: enough up to head dim 128) */
#ifndef KILN_ATT_PREG
#define KILN_ATT_PREG (KILN_HD <= 128 && (KILN_ATT_QBUF == 2 || KILN_ATT_QPF) ? 56 : 40)
#endif
#ifndef KILN_ATT_CREG
#define KILN_ATT_CREG (KILN_ATT_PREG > 40 ? 224 : 232)
#endif
/* Q buffers (2 consumers x KILN_ATT_QBUF), the K and V rings, 1 KiB to align them, the
 * mbarriers (Q full/empty per buffer, K and V full/empty per stage, 2 + 2 for the tile-index
 * ring of the dynamic scheduler) and its two 8-byte slots */
#define KILN_ATT_QBYTES(HD) ((((HD) + 63) / 64) * 64 * 128)
#define KILN_ATT_KVBYTES(HD, BK) ((((HD) + 63) / 64) * (BK) * 128)
#define KILN_ATT_SMEM(HD, BK, ST, QB)                                                                       \
    (2 * (QB) * KILN_ATT_QBYTES(HD) + 2 * (ST) * KILN_ATT_KVBYTES(HD, BK) + 1024 + (4 * (QB) + 4 * (ST) + 4) * 8 + 16)
#define KILN_ATT_SMEM_BYTES KILN_ATT_SMEM(KILN_HD, KILN_ATT_BK, KILN_ATT_STAGES, KILN_ATT_QBUF)

namespace katw {
using namespace katt;

#define KATW_D4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
/* ss<N>: d[64 x N] (+)= A[64 x 16] * B[N x 16]^T, both K-major in shared memory (acc 0:
 * overwrite). rs<N>: d[64 x N] += A[64 x 16] (registers, the mma.sync m16n8k16 A layout per
 * warp) * B[16 x N] (shared memory, N-major). d[j][e] holds row 16*warp + lane/4 + 8*(e/2),
 * column 8*j + 2*(lane%4) + e%2. Every N that is a multiple of 16 up to 256. */
template <int N> struct ss;
template <int N> struct rs;
template <> struct ss<16> {
    static __device__ __forceinline__ void run(float (&d)[2][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7"
                     "}, %8, %9, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<16> {
    static __device__ __forceinline__ void run(float (&d)[2][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7"
                     "}, {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<32> {
    static __device__ __forceinline__ void run(float (&d)[4][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<32> {
    static __device__ __forceinline__ void run(float (&d)[4][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     "}, {%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<48> {
    static __device__ __forceinline__ void run(float (&d)[6][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n48k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23"
                     "}, %24, %25, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<48> {
    static __device__ __forceinline__ void run(float (&d)[6][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %29, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n48k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23"
                     "}, {%24, %25, %26, %27}, %28, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<64> {
    static __device__ __forceinline__ void run(float (&d)[8][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<64> {
    static __device__ __forceinline__ void run(float (&d)[8][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<80> {
    static __device__ __forceinline__ void run(float (&d)[10][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n80k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39"
                     "}, %40, %41, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<80> {
    static __device__ __forceinline__ void run(float (&d)[10][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n80k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39"
                     "}, {%40, %41, %42, %43}, %44, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<96> {
    static __device__ __forceinline__ void run(float (&d)[12][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     "}, %48, %49, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<96> {
    static __device__ __forceinline__ void run(float (&d)[12][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     "}, {%48, %49, %50, %51}, %52, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<112> {
    static __device__ __forceinline__ void run(float (&d)[14][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n112k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55"
                     "}, %56, %57, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<112> {
    static __device__ __forceinline__ void run(float (&d)[14][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %61, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n112k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55"
                     "}, {%56, %57, %58, %59}, %60, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<128> {
    static __device__ __forceinline__ void run(float (&d)[16][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<128> {
    static __device__ __forceinline__ void run(float (&d)[16][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<144> {
    static __device__ __forceinline__ void run(float (&d)[18][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n144k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71"
                     "}, %72, %73, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<144> {
    static __device__ __forceinline__ void run(float (&d)[18][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %77, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n144k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71"
                     "}, {%72, %73, %74, %75}, %76, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<160> {
    static __device__ __forceinline__ void run(float (&d)[20][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n160k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
                     "}, %80, %81, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<160> {
    static __device__ __forceinline__ void run(float (&d)[20][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %85, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n160k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
                     "}, {%80, %81, %82, %83}, %84, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<176> {
    static __device__ __forceinline__ void run(float (&d)[22][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n176k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87"
                     "}, %88, %89, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<176> {
    static __device__ __forceinline__ void run(float (&d)[22][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %93, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n176k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87"
                     "}, {%88, %89, %90, %91}, %92, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<192> {
    static __device__ __forceinline__ void run(float (&d)[24][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<192> {
    static __device__ __forceinline__ void run(float (&d)[24][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     "}, {%96, %97, %98, %99}, %100, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<208> {
    static __device__ __forceinline__ void run(float (&d)[26][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %106, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n208k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103"
                     "}, %104, %105, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<208> {
    static __device__ __forceinline__ void run(float (&d)[26][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %109, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n208k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103"
                     "}, {%104, %105, %106, %107}, %108, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<224> {
    static __device__ __forceinline__ void run(float (&d)[28][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %114, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n224k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
                     "}, %112, %113, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25), KATW_D4(26), KATW_D4(27)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<224> {
    static __device__ __forceinline__ void run(float (&d)[28][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %117, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n224k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
                     "}, {%112, %113, %114, %115}, %116, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25), KATW_D4(26), KATW_D4(27)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<240> {
    static __device__ __forceinline__ void run(float (&d)[30][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %122, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n240k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119"
                     "}, %120, %121, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25), KATW_D4(26), KATW_D4(27), KATW_D4(28), KATW_D4(29)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<240> {
    static __device__ __forceinline__ void run(float (&d)[30][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %125, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n240k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119"
                     "}, {%120, %121, %122, %123}, %124, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25), KATW_D4(26), KATW_D4(27), KATW_D4(28), KATW_D4(29)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct ss<256> {
    static __device__ __forceinline__ void run(float (&d)[32][4], unsigned long long da, unsigned long long db, int acc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                     "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25), KATW_D4(26), KATW_D4(27), KATW_D4(28), KATW_D4(29), KATW_D4(30), KATW_D4(31)
                     : "l"(da), "l"(db), "r"(acc));
    }
};
template <> struct rs<256> {
    static __device__ __forceinline__ void run(float (&d)[32][4], const unsigned (&a)[4], unsigned long long db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32." KWG_AB " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                     "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
                     : KATW_D4(0), KATW_D4(1), KATW_D4(2), KATW_D4(3), KATW_D4(4), KATW_D4(5), KATW_D4(6), KATW_D4(7), KATW_D4(8), KATW_D4(9), KATW_D4(10), KATW_D4(11), KATW_D4(12), KATW_D4(13), KATW_D4(14), KATW_D4(15), KATW_D4(16), KATW_D4(17), KATW_D4(18), KATW_D4(19), KATW_D4(20), KATW_D4(21), KATW_D4(22), KATW_D4(23), KATW_D4(24), KATW_D4(25), KATW_D4(26), KATW_D4(27), KATW_D4(28), KATW_D4(29), KATW_D4(30), KATW_D4(31)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};

constexpr int BM = 64; /* query rows per consumer warpgroup */
constexpr int BK = KILN_ATT_BK;
constexpr int ST = KILN_ATT_STAGES;
constexpr int QB = KILN_ATT_QBUF;
constexpr int NA = (HD + 63) / 64; /* 128-byte column blocks of a row */
constexpr unsigned Q_ATOM = BM * 128, KV_ATOM = BK * 128;
constexpr unsigned Q_BYTES = KILN_ATT_QBYTES(HD), KV_BYTES = KILN_ATT_KVBYTES(HD, BK);
constexpr int W = KILN_ATT_WINDOW;
constexpr float CAP = (float)(KILN_ATT_SOFTCAP);
constexpr float TH = (float)(KILN_ATT_TH);
constexpr bool FREE = KILN_ATT_FREE != 0;
constexpr int END = -1; /* the tile stream's end */
static_assert(BK % 16 == 0 && BK >= 16 && BK <= 256, "KILN_ATT_BK: a multiple of 16, at most 256");
static_assert(ST >= 2, "KILN_ATT_STAGES must be at least 2");
static_assert(QB == 1 || QB == 2, "KILN_ATT_QBUF: 1 or 2");
static_assert(KILN_ATT_ORDER == 0 || KILN_ATT_ORDER == 1, "KILN_ATT_ORDER: 0 or 1");
static_assert(TH >= 0.f && TH <= 16.f, "KILN_ATT_TH: 0..16");
static_assert(128 * KILN_ATT_PREG + 256 * KILN_ATT_CREG <= 384 * 168 && KILN_ATT_PREG % 8 == 0 && KILN_ATT_CREG % 8 == 0,
              "KILN_ATT_PREG / KILN_ATT_CREG: multiples of 8 within the launch's registers");
static_assert(HD / 2 + BK / 2 + BK / 4 <= 200, "the accumulators do not fit the consumers' registers");
static_assert(KILN_ATT_SMEM_BYTES <= 227 * 1024, "the tiles do not fit in shared memory");
static_assert(kwg_same<elem, __half>::value == (KILN_WGMMA_F16 != 0), "KILN_WGMMA_F16 must match KILN_T");

/* V tile descriptor: N-major (HD contiguous), 128-byte swizzle; 8-key groups 1024 bytes
 * apart (stride byte offset), 64-column blocks KV_ATOM apart (leading byte offset). */
__device__ __forceinline__ unsigned long long vdesc(unsigned saddr)
{
    return (unsigned long long)((saddr & 0x3FFFF) >> 4) | ((unsigned long long)(KV_ATOM >> 4) << 16) | (64ull << 32) |
           (1ull << 62);
}
__device__ __forceinline__ void nbar_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void nbar_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
/* Pin register operands in place around wgmma issues and waits (the compiler must neither
 * sink their definitions past wgmma.fence nor hoist their reads above a wait; otherwise
 * ptxas serializes every wgmma of the kernel). */
template <int R, int C> __device__ __forceinline__ void fence2(float (&d)[R][C])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < C; j++) asm volatile("" : "+f"(d[i][j])::"memory");
}
template <int R> __device__ __forceinline__ void fence_p(unsigned (&d)[R][4])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(d[i][j])::"memory");
}

/* 2^x, subnormal results flushed to zero (MUFU.EX2 alone; exp2f's subnormal handling costs
 * three more instructions per element) */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* One key tile's online softmax for the thread's two rows: S (raw scores, masked with -inf)
 * becomes P = 2^(S * SL2 - m) with the scale folded in (SL2 > 0, so the max is taken on the
 * raw scores and scaled once); the row max m moves only when the tile's exceeds it by more
 * than TH; l (this thread's partial row sums) and al (the factor the accumulators must be
 * rescaled by: 1 when m did not move) follow. */
template <int NK>
__device__ __forceinline__ void softmax_w(float (&sc)[NK / 8][4], float (&m)[2], float (&l)[2], float (&al)[2],
                                          const float SL2)
{
    float mr[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mr[i][0] = fmaxf(sc[0][2 * i], sc[0][2 * i + 1]);
        mr[i][1] = fmaxf(sc[1][2 * i], sc[1][2 * i + 1]);
    }
#pragma unroll
    for (int n = 2; n < NK / 8; n++)
#pragma unroll
        for (int i = 0; i < 2; i++) mr[i][n & 1] = fmaxf(mr[i][n & 1], fmaxf(sc[n][2 * i], sc[n][2 * i + 1]));
    float mu[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float mx = fmaxf(mr[i][0], mr[i][1]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx *= SL2;
        const bool up = mx > m[i] + TH; /* m = -inf: any finite max */
        const float mn = up ? mx : m[i];
        al[i] = up ? ex2(m[i] - mn) : 1.f;
        m[i] = mn;
        mu[i] = mn == ninf() ? 0.f : mn;
    }
    float sum[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
    for (int n = 0; n < NK / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            sc[n][e] = ex2(fmaf(sc[n][e], SL2, -mu[e >> 1]));
            sum[e >> 1][n & 1] += sc[n][e];
        }
#pragma unroll
    for (int i = 0; i < 2; i++) l[i] = fmaf(l[i], al[i], sum[i][0] + sum[i][1]);
}

/* One CTA tile: two sub-tiles (c = 0, 1) of one (batch, KV head), and the key tiles
 * [kt0, kt1) both visit. A sub-tile past the end of the list or of its sequence
 * (store false) computes its partner's rows again and stores nothing, so both
 * consumers always run the same wgmma sequence (no wgmma in a divergent path). */
struct tile {
    int b, kvh, h0, h1, q00, q01, nq0, nq1;
    bool st0, st1, bad;
    int off, L, kt0, kt1;
    long long row0; /* row of query 0 of sequence b in q / o (varlen: cu_q[b]) */
};

__device__ __forceinline__ int seq_len(const KilnArgs &p, int b)
{
#if KILN_ATT_VARLEN
    return p.cu_q[b + 1] - p.cu_q[b];
#else
    (void)b;
    return (int)p.S;
#endif
}

/* The tile list's shape: np pairs of sub-tiles per (batch, KV head), bkv = B * KV such pairs,
 * sec of them per L2 section (KILN_ATT_L2SEC; bkv: one section), ntiles = np * bkv (< 2^31). */
struct geo {
    int np, bkv, sec, ntiles;
};
__device__ __forceinline__ geo make_geo(const KilnArgs &p)
{
    geo g;
    const int G = (int)p.H / (int)p.KV, nqb = ((int)p.S + BM - 1) / BM;
    g.np = (nqb * G + 1) / 2;
    g.bkv = (int)p.B * (int)p.KV;
    g.ntiles = g.np * g.bkv;
    g.sec = g.bkv;
#if KILN_ATT_L2SEC > 0
    const long long per = (long long)p.T * HD * 2 * (long long)sizeof(elem); /* K and V of one pair */
    const long long sec = (long long)(KILN_ATT_L2SEC) / (per > 0 ? per : 1);
    if (sec < g.bkv) { /* equal sections: ceil(bkv / nsec) pairs each */
        const int nsec = (int)((g.bkv + (sec < 1 ? 1 : sec) - 1) / (sec < 1 ? 1 : sec));
        g.sec = (g.bkv + nsec - 1) / nsec;
    }
#endif
    return g;
}

/* Tile index i -> (pr, bk): pr the pair of sub-tiles (descending: longest causal tiles
 * first), bk = b * KV + KV head; longest-first within each L2 section of g.sec pairs. */
__device__ __forceinline__ void tile_coords(const geo &g, int i, int &pr, int &bk)
{
    const int span = g.sec * g.np, s = i / span, j = i - s * span;
    const int sn = min(g.sec, g.bkv - s * g.sec);
    const int a = j / sn;
    pr = g.np - 1 - a;
    bk = s * g.sec + (j - a * sn);
}

__device__ __forceinline__ bool decode_tile(const KilnArgs &p, const geo &g, int i, tile &t)
{
    const int KV = (int)p.KV, G = (int)p.H / KV, T = (int)p.T;
    int pr, bk;
    tile_coords(g, i, pr, bk);
    t.b = bk / KV;
    t.kvh = bk % KV;
    const int len = seq_len(p, t.b);
    t.off = p.pos ? ((const int *)p.pos)[t.b] : T - len;
    t.L = t.off + len;
    t.bad = t.off < 0 || t.L > T;
#if KILN_ATT_VARLEN
    t.row0 = p.cu_q[t.b];
#else
    t.row0 = (long long)t.b * p.S;
#endif
    const int nqb = ((int)p.S + BM - 1) / BM;
    int lo = 1 << 30, hi = 0, h[2], q0[2], nq[2];
    bool st[2];
#pragma unroll
    for (int c = 0; c < 2; c++) {
        const int u = 2 * pr + c, qb = u / G;
        h[c] = t.kvh * G + u % G;
        q0[c] = qb * BM;
        nq[c] = min(BM, len - qb * BM);
        st[c] = u < nqb * G && nq[c] > 0;
        if (st[c]) {
            const int e = KILN_CAUSAL ? min(t.L, t.off + q0[c] + nq[c]) : t.L;
            const int s = W > 0 ? max(0, t.off + q0[c] - W + 1) : 0;
            hi = max(hi, e);
            lo = min(lo, s);
        }
    }
    if (!st[0] && !st[1]) return false;
    const bool d = !st[0]; /* the partner a sub-tile without rows repeats */
    t.st0 = st[0];
    t.st1 = st[1];
    t.h0 = st[0] ? h[0] : (d ? h[1] : h[0]);
    t.q00 = st[0] ? q0[0] : (d ? q0[1] : q0[0]);
    t.nq0 = st[0] ? nq[0] : (d ? nq[1] : nq[0]);
    t.h1 = st[1] ? h[1] : (d ? h[1] : h[0]);
    t.q01 = st[1] ? q0[1] : (d ? q0[1] : q0[0]);
    t.nq1 = st[1] ? nq[1] : (d ? nq[1] : nq[0]);
    if (t.bad || hi <= lo) t.kt0 = t.kt1 = 0;
    else {
        t.kt0 = lo / BK;
        t.kt1 = (hi + BK - 1) / BK;
    }
    return true;
}

/* Whether tile index i has keys to visit (and so Q and K/V loads), decoded into t */
__device__ __forceinline__ bool tile_work(const KilnArgs &p, const geo &g, int i, tile &t)
{
    return i >= 0 && i < g.ntiles && decode_tile(p, g, i, t) && t.kt1 > t.kt0;
}

/* Static scheduler: the CTA's r-th tile index (snake order over the CTAs); an index
 * >= ntiles is a tile without work; END once every CTA is past the last round. */
__device__ __forceinline__ int static_index(int r, int ntiles)
{
    const int g = (int)gridDim.x;
    if ((long long)r * g >= ntiles) return END;
    return r * g + ((r & 1) ? g - 1 - (int)blockIdx.x : (int)blockIdx.x);
}

/* Mask the scores of key tile j0 for rows of sub-tile c (positions off + q0 + row). */
__device__ __forceinline__ void mask_tile(float (&S)[BK / 8][4], int j0, int L, int qpos0, int lane)
{
#pragma unroll
    for (int n = 0; n < BK / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int j = j0 + n * 8 + (lane & 3) * 2 + (e & 1);
            const int P = qpos0 + (lane >> 2) + (e >> 1) * 8;
            bool out = j >= L;
            if (KILN_CAUSAL) out = out || j > P;
            if (W > 0) out = out || P - j >= W;
            if (out) S[n][e] = ninf();
        }
}

__device__ __forceinline__ float tanh_fast(float x)
{
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned long long policy_evict_last()
{
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
/* TMA load; KILN_ATT_HINT: with an L2 policy, evict-first (Q) or evict-last (K, V), made
 * where it is used (a register less in the lean producer) */
__device__ __forceinline__ void tma_load(unsigned dst, const kiln_tmap *map, unsigned bar, int k, int row, int b,
                                         bool last)
{
#if KILN_ATT_HINT
    kwg_tma_load_hint(dst, map, bar, k, row, b, last ? policy_evict_last() : kwg_policy_evict_first());
#else
    (void)last;
    kwg_tma_load(dst, map, bar, k, row, b);
#endif
}

__device__ __forceinline__ void run(const KilnArgs &p, const kiln_tmap *mq, const kiln_tmap *mk, const kiln_tmap *mv)
{
    extern __shared__ unsigned char katw_smem[];
    const unsigned base = (kwg_saddr(katw_smem) + 1023u) & ~1023u;
    const unsigned sQ = base, sK = base + 2 * QB * Q_BYTES, sV = sK + ST * KV_BYTES, bars = sV + ST * KV_BYTES;
    /* Q buffer b of consumer c: sQ + (c * QB + b) * Q_BYTES */
#define KATW_QFULL(c, b) (bars + 8u * (unsigned)((c) * QB + (b)))
#define KATW_QEMPTY(c, b) (bars + 8u * (unsigned)(2 * QB + (c) * QB + (b)))
#define KATW_KFULL(s) (bars + 8u * (unsigned)(4 * QB + (s)))
#define KATW_KEMPTY(s) (bars + 8u * (unsigned)(4 * QB + ST + (s)))
#define KATW_VFULL(s) (bars + 8u * (unsigned)(4 * QB + 2 * ST + (s)))
#define KATW_VEMPTY(s) (bars + 8u * (unsigned)(4 * QB + 3 * ST + (s)))
#define KATW_SFULL(j) (bars + 8u * (unsigned)(4 * QB + 4 * ST + (j)))
#define KATW_SEMPTY(j) (bars + 8u * (unsigned)(4 * QB + 4 * ST + 2 + (j)))
    const unsigned slots = bars + 8u * (unsigned)(4 * QB + 4 * ST + 4); /* the dynamic scheduler's tile indices */
    volatile int *slot = (volatile int *)(katw_smem + (slots - kwg_saddr(katw_smem)));
    const geo gm = make_geo(p);
    /* broadcast, so ptxas sees it warp-uniform (wgmma on a divergent path is serialized) */
    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);

    if (threadIdx.x == 0) {
        for (int c = 0; c < 2; c++)
            for (int b = 0; b < QB; b++) {
                kwg_bar_init(KATW_QFULL(c, b), 1);
                kwg_bar_init(KATW_QEMPTY(c, b), 4);
            }
        for (int s = 0; s < ST; s++) {
            kwg_bar_init(KATW_KFULL(s), 1);
            kwg_bar_init(KATW_KEMPTY(s), 8);
            kwg_bar_init(KATW_VFULL(s), 1);
            kwg_bar_init(KATW_VEMPTY(s), 8);
        }
        for (int j = 0; j < 2; j++) {
            kwg_bar_init(KATW_SFULL(j), 1);
            kwg_bar_init(KATW_SEMPTY(j), 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(KILN_ATT_PREG));
        if (threadIdx.x == 0) {
            kwg_tma_prefetch(mq);
            kwg_tma_prefetch(mk);
            kwg_tma_prefetch(mv);
            unsigned qn = 0, kn = 0, vn = 0; /* Q loads (one per tile with keys, both buffers), K and V tile loads */
            auto load_q = [&](const tile &t) {
                const unsigned b = qn % QB, ph = (qn / QB) & 1u;
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    kwg_bar_wait(KATW_QEMPTY(c, b), ph ^ 1u);
                    kwg_bar_expect_tx(KATW_QFULL(c, b), Q_BYTES);
#if KILN_ATT_VARLEN
                    const int qr = (int)t.row0 + (c ? t.q01 : t.q00), qbt = 0;
#else
                    const int qr = c ? t.q01 : t.q00, qbt = t.b;
#endif
                    const int hc = c ? t.h1 : t.h0;
                    for (int a = 0; a < NA; a++)
                        tma_load(sQ + (c * QB + b) * Q_BYTES + a * Q_ATOM, mq, KATW_QFULL(c, b), hc * HD + a * 64, qr,
                                 qbt, false);
                }
                qn++;
            };
            auto prefetch_q = [&](const tile &t) {
#pragma unroll
                for (int c = 0; c < 2; c++) {
#if KILN_ATT_VARLEN
                    const int qr = (int)t.row0 + (c ? t.q01 : t.q00), qbt = 0;
#else
                    const int qr = c ? t.q01 : t.q00, qbt = t.b;
#endif
                    const int hc = c ? t.h1 : t.h0;
                    for (int a = 0; a < NA; a++) kwg_tma_prefetch_box(mq, hc * HD + a * 64, qr, qbt);
                }
            };
            auto load_k = [&](int kt, int kvb) {
                const int s = (int)(kn % ST);
                kwg_bar_wait(KATW_KEMPTY(s), ((kn / ST) & 1u) ^ 1u);
                kwg_bar_expect_tx(KATW_KFULL(s), KV_BYTES);
                for (int a = 0; a < NA; a++)
                    tma_load(sK + s * KV_BYTES + a * KV_ATOM, mk, KATW_KFULL(s), a * 64, kt * BK, kvb, true);
                kn++;
            };
            auto load_v = [&](int kt, int kvb) {
                const int s = (int)(vn % ST);
                kwg_bar_wait(KATW_VEMPTY(s), ((vn / ST) & 1u) ^ 1u);
                kwg_bar_expect_tx(KATW_VFULL(s), KV_BYTES);
                for (int a = 0; a < NA; a++)
                    tma_load(sV + s * KV_BYTES + a * KV_ATOM, mv, KATW_VFULL(s), a * 64, kt * BK, kvb, true);
                vn++;
            };
#if KILN_ATT_SCHED
            int cur = (int)blockIdx.x < gm.ntiles ? (int)blockIdx.x : END;
#else
            int cur = static_index(0, gm.ntiles);
#endif
            if (QB == 2) {
                tile t0;
                if (tile_work(p, gm, cur, t0)) load_q(t0);
            }
            for (int r = 0;; r++) {
#if KILN_ATT_SCHED
                { /* hand tile r's index to the consumers */
                    const int j = (int)(r & 1);
                    kwg_bar_wait(KATW_SEMPTY(j), (((unsigned)(r >> 1)) & 1u) ^ 1u);
                    slot[j] = cur;
                    kwg_bar_arrive(KATW_SFULL(j));
                }
#endif
                if (cur == END) break;
                tile t;
                const bool tv = tile_work(p, gm, cur, t);
                const int kvb = tv ? (int)kiln_slot((const int *)p.slot, t.b) * (int)p.KV + t.kvh : 0; /* the caches' row */
                if (tv) {
                    if (KILN_ATT_ORDER == 1) load_k(t.kt0, kvb);
                    if (QB == 1) load_q(t);
                }
                int nxt; /* the next tile (its ticket drawn after this tile's first loads went out) */
#if KILN_ATT_SCHED
                {
                    const int v = atomicAdd((int *)p.sched, 1);
                    if (v == gm.ntiles - 1) atomicExch((int *)p.sched, 0); /* the last ticket: every draw is done */
                    nxt = (long long)v + gridDim.x < gm.ntiles ? v + (int)gridDim.x : END;
                }
#else
                nxt = static_index(r + 1, gm.ntiles);
#endif
                if (QB == 2 || KILN_ATT_QPF) { /* the next tile's Q: into the other buffer, or into L2 */
                    tile tn;
                    if (tile_work(p, gm, nxt, tn)) {
                        if (QB == 2) load_q(tn);
                        else prefetch_q(tn);
                    }
                }
                if (tv) {
                    const int k0 = t.kt0, k1 = t.kt1;
                    if (KILN_ATT_ORDER == 1) {
                        for (int kt = k0 + 1; kt < k1; kt++) {
                            load_k(kt, kvb);
                            load_v(kt - 1, kvb);
                        }
                        load_v(k1 - 1, kvb);
                    } else {
                        for (int kt = k0; kt < k1; kt++) {
                            load_k(kt, kvb);
                            load_v(kt, kvb);
                        }
                    }
                }
                cur = nxt;
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(KILN_ATT_CREG));
        const int c = wg - 1, wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
        constexpr float SL2 = CAP > 0.f ? 1.4426950408889634f * CAP : (float)(KILN_SCALE) * 1.4426950408889634f;
        static_assert(SL2 > 0.f, "the softmax scale must be positive");
        /* the turns: barrier 1 + c is consumer c's; consumer 0 goes first */
        if (c == 1) nbar_arrive(1);
        unsigned qn = 0, kvn = 0;
        elem *out = (elem *)p.o;
        const int H = (int)p.H;
        for (int r = 0;; r++) {
#if KILN_ATT_SCHED
            int i;
            {
                const int j = (int)(r & 1);
                kwg_bar_wait(KATW_SFULL(j), ((unsigned)(r >> 1)) & 1u);
                i = slot[j];
                __syncwarp();
                if (lane == 0) kwg_bar_arrive(KATW_SEMPTY(j));
            }
#else
            const int i = static_index(r, gm.ntiles);
#endif
            if (i == END) break;
            tile t;
            if (i >= gm.ntiles || !decode_tile(p, gm, i, t)) continue;
            const bool store = c ? t.st1 : t.st0;
            const int n = t.kt1 - t.kt0;
            const int q0 = c ? t.q01 : t.q00, qpos0 = t.off + q0 + warp * 16, h = c ? t.h1 : t.h0;
            const unsigned qb = qn % QB, sQc = sQ + (c * QB + qb) * Q_BYTES;
            float O[HD / 8][4], S[BK / 8][4], m[2] = {ninf(), ninf()}, l[2] = {0.f, 0.f}, al[2];
            unsigned P[BK / 16][4];
#pragma unroll
            for (int d = 0; d < HD / 8; d++) O[d][0] = O[d][1] = O[d][2] = O[d][3] = 0.f;
            /* Every wgmma below sits in straight-line code between its fence and its wait (the
             * first key tile peeled, the last P V after the loop): a wgmma under a branch
             * makes ptxas serialize all of them. */
            auto issue_qk = [&](int st) {
#pragma unroll
                for (int kk = 0; kk < HD / 16; kk++)
                    ss<BK>::run(S, kwg_desc(sQc + (kk / 4) * Q_ATOM + (kk % 4) * 32),
                                kwg_desc(sK + st * KV_BYTES + (kk / 4) * KV_ATOM + (kk % 4) * 32), kk);
                kwg_commit();
            };
            auto issue_pv = [&](int st) {
#pragma unroll
                for (int kk = 0; kk < BK / 16; kk++) rs<HD>::run(O, P[kk], vdesc(sV + st * KV_BYTES + kk * 2048));
                kwg_commit();
            };
            /* S of key tile `it` retired: release K, mask, softmax into S */
            auto scores = [&](int it, int st) {
                fence2(S);
                if (lane == 0) {
                    kwg_bar_arrive(KATW_KEMPTY(st));
                    if (it == n - 1) kwg_bar_arrive(KATW_QEMPTY(c, qb));
                }
                const int j0 = (t.kt0 + it) * BK;
                if (CAP > 0.f) {
                    constexpr float IN = (float)(KILN_SCALE) / (CAP > 0.f ? CAP : 1.f);
#pragma unroll
                    for (int x = 0; x < BK / 8; x++)
#pragma unroll
                        for (int e = 0; e < 4; e++) S[x][e] = tanh_fast(S[x][e] * IN);
                }
                const bool need = j0 + BK > t.L || (KILN_CAUSAL && j0 + BK - 1 > qpos0) ||
                                  (W > 0 && qpos0 + 15 - j0 >= W);
                if (need) mask_tile(S, j0, t.L, qpos0, lane);
                softmax_w<BK>(S, m, l, al, SL2);
            };
            /* O *= al, skipped when no row of the warp moved its max */
            auto rescale_o = [&]() {
                if (__any_sync(0xffffffffu, al[0] != 1.f || al[1] != 1.f)) rescale(O, al);
            };
            /* P = S rounded to the element type (the A operand of the next P V) */
            auto pack_p = [&]() {
#pragma unroll
                for (int kk = 0; kk < BK / 16; kk++) {
                    P[kk][0] = pack2(S[2 * kk][0], S[2 * kk][1]);
                    P[kk][1] = pack2(S[2 * kk][2], S[2 * kk][3]);
                    P[kk][2] = pack2(S[2 * kk + 1][0], S[2 * kk + 1][1]);
                    P[kk][3] = pack2(S[2 * kk + 1][2], S[2 * kk + 1][3]);
                }
            };
            if (n > 0) {
                kwg_bar_wait(KATW_QFULL(c, qb), (qn / QB) & 1u);
                /* key tile 0: S only */
                int sp = (int)(kvn % ST);
                unsigned php = (kvn / ST) & 1u;
                kwg_bar_wait(KATW_KFULL(sp), php);
                if (!FREE) nbar_sync(1 + c);
                fence2(S);
                kwg_fence();
                issue_qk(sp);
                fence2(S);
                if (!FREE) nbar_arrive(2 - c);
                kwg_wait<0>();
                scores(0, sp);
                pack_p();
                kvn++;
                for (int it = 1; it < n; it++, kvn++) {
                    const int s = (int)(kvn % ST);
                    const unsigned ph = (kvn / ST) & 1u;
                    kwg_bar_wait(KATW_KFULL(s), ph);
                    kwg_bar_wait(KATW_VFULL(sp), php);
                    nbar_sync(1 + c);
                    fence2(S);
                    fence2(O);
                    fence_p(P);
                    kwg_fence();
                    issue_qk(s);
                    issue_pv(sp);
                    fence2(S);
                    fence2(O);
                    nbar_arrive(2 - c);
                    kwg_wait<1>();
                    scores(it, s);
                    kwg_wait<0>();
                    fence2(O);
                    if (lane == 0) kwg_bar_arrive(KATW_VEMPTY(sp));
                    rescale_o();
                    pack_p();
                    sp = s;
                    php = ph;
                }
                /* the last P V */
                kwg_bar_wait(KATW_VFULL(sp), php);
                if (!FREE) nbar_sync(1 + c);
                fence2(O);
                fence_p(P);
                kwg_fence();
                issue_pv(sp);
                fence2(O);
                if (!FREE) nbar_arrive(2 - c);
                kwg_wait<0>();
                fence2(O);
                if (lane == 0) kwg_bar_arrive(KATW_VEMPTY(sp));
                qn++;
            }
            if (!store) continue;
            /* normalize and store the rows < nq (an invalid offset: NaN) */
#pragma unroll
            for (int x = 0; x < 2; x++) {
                l[x] += __shfl_xor_sync(0xffffffffu, l[x], 1);
                l[x] += __shfl_xor_sync(0xffffffffu, l[x], 2);
                l[x] = l[x] > 0.f ? 1.f / l[x] : 0.f;
            }
#pragma unroll
            for (int x = 0; x < 2; x++) {
                const int row = warp * 16 + (lane >> 2) + x * 8;
                if (row >= (c ? t.nq1 : t.nq0)) continue;
                elem *dst = out + ((t.row0 + q0 + row) * H + h) * HD + (lane & 3) * 2;
#pragma unroll
                for (int d = 0; d < HD / 8; d++)
                    *(unsigned *)(dst + d * 8) = t.bad ? 0x7fff7fffu : pack2(O[d][2 * x] * l[x], O[d][2 * x + 1] * l[x]);
            }
        }
        /* consumer 1 made one arrival more than consumer 0 waits for in the loop */
        if (c == 0) nbar_sync(1);
    }
#undef KATW_QFULL
#undef KATW_QEMPTY
#undef KATW_KFULL
#undef KATW_KEMPTY
#undef KATW_VFULL
#undef KATW_VEMPTY
#undef KATW_SFULL
#undef KATW_SEMPTY
}

} /* namespace katw */

/* The kernel's one parameter: the three tensor maps (q, k, v), then KilnArgs. */
struct KilnAttTmaArgs {
    kiln_tmap q, k, v;
    KilnArgs p;
};

extern "C" __global__ void __launch_bounds__(384, 1) KILN_KERNEL(const __grid_constant__ KilnAttTmaArgs prm)
{
    katw::run(prm.p, &prm.q, &prm.k, &prm.v);
}
