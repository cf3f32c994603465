// codegen/kernels/matmul_wgmma.cuh — family `matmul`, large M on Hopper (sm_90a), bf16 / f16.
//
// acc[b][m][n] = sum_k A[b][m][k] * W[b][n][k] in float32 (W as nn.Linear stores it: [N, K],
// K contiguous, i.e. KILN_B_NK 1), then kiln_epilogue2 per pair of adjacent columns, on the
// accumulators in registers (codegen/kernels/CONTRACT.md, family `matmul`: same KilnArgs
// fields, same hook).
//
// How: a persistent kernel of 3 warpgroups (384 threads, one CTA per SM). Warpgroup 0 is the
// producer: one thread walks the tile sequence and, per 64-wide slice of K, waits for a free
// slot of a KILN_STAGES-deep shared-memory ring (an `empty` mbarrier), then issues two TMA
// copies (cp.async.bulk.tensor, 128-byte swizzle) of the A [BM x 64] and W [BN x 64] boxes
// that complete on the slot's `full` mbarrier. Warpgroups 1 and 2 are consumers: each owns
// BM/2 rows of the BM x BN tile and issues wgmma.mma_async m64nBNk16 straight from the
// swizzled shared tiles (B from shared memory, accumulators in registers), keeps one wgmma
// group in flight, frees a slot once the group that read it has retired, and runs the
// epilogue for its rows while the producer already fills the ring for the next tile.
// setmaxnreg gives the consumers 232 registers and the producer 40.
// Programmatic dependent launch: the prologue (mbarrier init, tensor-map prefetch) runs before
// kiln_pdl_wait (common.cuh), under the previous kernel's tail; the producer lets the next
// kernel launch (kiln_pdl_launch) once it has issued its last load.
// Tiles (units: CM row blocks x one column block, one per cluster) are handed out round-robin
// (unit u to CTA / cluster u mod their number) in grouped order: runs of KILN_GROUP_M row
// blocks sweep the N blocks together, so the concurrent tiles share A and W slices in L2.
//
// Ordering (what makes the ring safe; compute-sanitizer's racecheck does not see TMA writes or
// wgmma reads, so this is argued, not checked): a slot is written only by TMA, after the
// producer saw its `empty` barrier complete, which needs one arrival from every consumer warp
// (of both CTAs with clusters) that reads the slot, each made after wgmma.wait_group proved the
// wgmma groups reading it retired; it is read only by wgmma, after the consumer saw its `full`
// barrier complete, which needs the producer's expect_tx arrival and all of the slot's bytes.
// Both walk the same slot sequence with one phase bit per wrap, and neither can run a whole
// phase ahead of the other, so parity waits are exact. Ping-pong consumers skip the other's
// slots and start a tile only after the other has issued its last K slice (the `order`
// barriers), so they too are never more than one phase away from the slot they wait on.
//
// Operands come in through two tensor maps (CUtensorMap, 128 bytes, 64-byte aligned), encoded
// on the host by cuTensorMapEncodeTiled (runtime/rt_tmap.h). The kernel takes ONE by-value
// __grid_constant__ parameter, `KilnTmaArgs` = {map of A, map of W, KilnArgs} (256 + 8*nargs
// bytes), so it launches like every Kiln kernel (runtime/rt_launch.h). Each map is rank 3:
//   dims {K, rows, batches}, strides (bytes) {ld * 2, batch stride * 2}, box {64, BM or BN, 1},
//   CU_TENSOR_MAP_SWIZZLE_128B, interleave none, OOB fill none (zeros);
//   A: rows M, ld p.lda, batch stride p.sa; W: rows N, ld p.ldw, batch stride p.sw;
//   an operand shared by every batch (stride 0) gets batches = 1 (the kernel then reads batch 0).
// Requirements (TMA): base 16-byte aligned, ld and batch stride multiples of 8 elements;
// other operands take matmul_mma.cuh. K, M, N need not be multiples of the tiles: the boxes
// past the edges read zeros and the epilogue is called only for m < M, n < N.
// The maps hold the base pointers: they must be encoded again when a pointer changes.
//
// Folded RMSNorm (KILN_MATMUL_NORM 1, passes/fold_norm_gemv.c, decode variants of skinny M):
// A is the norm's input x and its gain is already in W (passes/fold_norm_gain.c), so
// linear(rmsnorm(x), W) = (x @ W^T) * rs with rs[m] = rsqrt(mean(x[m]^2) + KILN_EPS). Each
// consumer adds up the squares of its rows of every A slot it multiplies (the slot is in
// shared memory anyway: nothing more is read from memory; the four lanes of a quad read the
// 128 bytes of one of their two accumulator rows, whose 16-byte chunks the swizzle only
// permutes within the row), the quad's partial sums are reduced once the tile's K is done,
// and the accumulators are scaled by their row's rs before the epilogue. A tile must see the
// whole of K: codegen never splits K with it.
//
// Constants: KILN_BM, KILN_BN (tile per CTA), KILN_STAGES, KILN_GROUP_M (default 16),
// KILN_WGMMA_PINGPONG (0: both consumers share a tile, BM 128 or 256; 1: they take tiles in
// turn, BM 64 or 128), KILN_CLUSTER_M (1, or 2: clusters of two CTAs on adjacent row blocks,
// the W box multicast; the W map's box is then BN/2 rows), KILN_WGMMA_F16 (1 when KILN_T is
// __half). BN is 64 (skinny M: twice the column blocks of 128; not with SwiGLU's TMA store), 128
// or 256, or with ping-pong 64-row tiles 16, 32, 48, 96, 112, 160, 192 or 224 (skinny M: column
// blocks spread evenly over the SMs); a consumer holds at most 64 x 256 or 128 x 128 accumulators.
// Decode-sized options (codegen sets them for skinny M; all default 0):
//   KILN_WGMMA_W_EARLY 1: W is a weight no kernel of the graph writes (common.cuh, PDL): the
//     producer issues the W boxes of its first min(KILN_STAGES, steps) ring slots before
//     kiln_pdl_wait, their A boxes after it, so the ring fills under the previous kernel's tail;
//   KILN_WGMMA_W_L2 n (with KILN_WGMMA_W_EARLY): also asks the L2 for the W boxes of the next n
//     K steps of that unit (TMA prefetches), still before the wait;
//   KILN_WGMMA_W_EVICT_FIRST 1: W is read once (one row block): its boxes are loaded with the
//     L2 evict-first policy, so the stream does not evict what the epilogue and A need;
//   KILN_WGMMA_EPI_EARLY 1: KWG_WARM_LEAD K steps before a tile's mainloop ends, each consumer
//     thread asks for what its epilogue will read: the generated hook kiln_epilogue_warm
//     (KILN_HAS_EPILOGUE_WARM; kiln_epilogue_val's signature, its values discarded: L2
//     prefetches of the operands kiln_epilogue_val reads at (b, m, n..n+1)) over its rows, or
//     with the QKV epilogue its rows' positions (loaded into registers, held until the
//     epilogue, so the epilogue's own loads of them hit the SM's L1);
//   KILN_WGMMA_EPI_EARLY 2: at the start of a tile (before its mainloop) each consumer thread
//     loads into registers every operand its epilogue will read, so that the tile's end has no
//     load that waits on memory (under the weight stream such a round trip takes microseconds,
//     and the L1 is no place to keep them: the cluster exchange's acquire invalidates it).
//     The QKV epilogue: its rows' positions and the rotation frequencies of its columns
//     (kiln_qkv_turn), and decode rows go to the caches from the rows' own warps (positions by
//     shuffle); the others: the generated kiln_epilogue_pre loads what kiln_epilogue_val would
//     (KILN_HAS_EPILOGUE_PRE, KILN_EPI_NPRE floats per call) and kiln_epilogue_post computes
//     the values from them (tiles of at most 64 such floats per thread; else as 0);
//   KILN_WGMMA_RES_TMA 1 (large M; with KILN_WGMMA_TMA_STORE, not with SwiGLU, the QKV epilogue,
//     split-K or a cluster): the epilogue's one operand, a residual of the output's element type
//     read where the output is written, comes by TMA (map `to[1]`, the output's geometry) into the
//     staging, as the same 64 x 64 swizzled boxes the output leaves by: round 0 of a tile is asked
//     for KWG_WARM_LEAD K steps before its mainloop ends (once the previous tile's stores have read
//     the staging), each later round once the round before has been stored. The consumer waits on
//     its mbarrier, reads the pair at the place it will write its output pair, and the generated
//     kiln_epilogue_post (KILN_EPI_NPRE 2: pre[0] at column n, pre[1] at n + 1) computes the
//     values. No element load waits at the tile's end.
//   KILN_WGMMA_RES_REGS 1 (with KILN_WGMMA_RES_TMA): the rounds after the first take their
//     residual from registers instead (where they fit: MW m64 blocks times the later rounds'
//     columns at most 128, 32 registers a thread), loaded by each consumer thread, as pairs in the
//     output's type, at the K step round 0 is asked for (the generated kiln_res_at(p, b, m, n): the
//     residual's address at the output's index). No later round then waits for a store to read the
//     staging and a TMA load behind it.
//   KILN_WGMMA_TAIL 1: the tile's end without a memory round trip or GPU-wide fence: the last
//     TMA stores are waited for until they have read the staging only (their writes complete
//     with the grid, as any store's), the cluster split's partial sums travel by st.async
//     completing on the leader's mbarrier (no fence.acq_rel per thread), the leader hands the
//     exchange back only when its cluster takes another unit, and the final cluster barrier is
//     relaxed (no remote access is left in flight then).
// Split-K in a cluster (KILN_WGMMA_CLUSTER_K = CK in 2..8; CM 1, KILN_SPLITK 1): a cluster of CK
//   CTAs along y takes one tile; CTA rank r (its %cluster_ctarank) loads and multiplies K
//   slice r (ceil(K steps / CK) steps each). Once its mainloop is done, each consumer thread
//   of a rank r > 0 stores its accumulators (and with KILN_MATMUL_NORM its sums of squares)
//   into slot r - 1 of the leader's (rank 0) exchange buffer in distributed shared memory
//   (mapa + st.shared::cluster) and arrives on the leader's `rfull` mbarrier (release at
//   cluster scope); the leader waits on it (acquire), adds slots 0..CK-2 to its own slice's
//   sums in rank order (deterministic), hands the slots back (one arrival on each rank's
//   `rempty` mbarrier once its warpgroup has read them) and runs the epilogue, whichever it
//   is (the QKV epilogue, the folded norm's scaling, the TMA store). No workspace, no
//   counter. A warp whose 16 rows all lie at or past M neither stores nor reads. With
//   ping-pong tiles only consumer 0 works (it takes every unit of its CTA, in order, so
//   that one exchange buffer and one phase bit per barrier serve it).
// Launch: persistent, grid = (CM * min(batch * ceil(ceil(M/BM)/CM) * ceil(N/BN), resident),
// 1, 1) where resident = CTAs (CM 1: one per SM) or clusters (cudaOccupancyMaxActiveClusters)
// that fit at once; with CK: grid = (min(batch * ceil(M/BM) * ceil(N/BN), resident clusters),
// CK, 1); block 384; dynamic shared memory KILN_SMEM_BYTES (formula below, plus
// KWG_SMEM_RED with CK; above 48 KiB the kernel's limit must be raised first).
#ifndef KILN_MATMUL_WGMMA_CUH
#define KILN_MATMUL_WGMMA_CUH

#ifndef __CUDA_BF16_H__
#include <cuda_bf16.h>
#endif
#ifndef __CUDA_FP16_H__
#include <cuda_fp16.h>
#endif

#ifndef KILN_T
#error "matmul_wgmma.cuh: the generated part must define KILN_T"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "matmul_wgmma.cuh needs sm_90a (wgmma, setmaxnreg)"
#endif
#ifndef KILN_BM
#define KILN_BM 128
#endif
#ifndef KILN_BN
#define KILN_BN 256
#endif
#ifndef KILN_STAGES
#define KILN_STAGES 4
#endif
#ifndef KILN_GROUP_M
#define KILN_GROUP_M 16
#endif
#ifndef KILN_WGMMA_F16
#define KILN_WGMMA_F16 0
#endif
#if KILN_WGMMA_F16
#define KWG_AB "f16.f16"
#else
#define KWG_AB "bf16.bf16"
#endif

#define KWG_BK 64 /* K per stage: one 128-byte swizzle row of 2-byte elements */
#define KWG_THREADS 384
/* the epilogues through shared memory: hook values (column groups of 8 accumulator columns; the
 * QKV epilogue's per-element cache writes: elements per thread) computed, or loaded, before any is
 * stored */
#ifndef KWG_EPI_BATCH
#define KWG_EPI_BATCH 8
#endif
/* ... for a consumer's MW x BN accumulators: KWG_EPI_BATCH while they take at most 64 registers,
 * else one at a time (larger tiles have no registers to spare under the consumers' cap) */
#define KWG_EPI_BATCHES(MW, BN) ((MW) * (BN) <= 128 ? KWG_EPI_BATCH : 1)
/* the ring, 1024 bytes of slack to align it, 2 mbarriers per stage, 2 ordering barriers and
 * 2 split-K flags */
#define KWG_SMEM_BYTES(BM, BN, ST) ((ST) * ((BM) + (BN)) * KWG_BK * 2 + 1024 + (ST) * 16 + 32)
/* ... plus the TMA-store staging: EC output columns of each consumer's rows (both consumers:
 * BM rows cooperative, 2 * BM ping-pong) */
#define KWG_SMEM_TOTAL(BM, BN, ST, PP, EC) (KWG_SMEM_BYTES(BM, BN, ST) + ((PP) ? 2 : 1) * (BM) * (EC) * 2)
#ifndef KILN_WGMMA_PINGPONG
#define KILN_WGMMA_PINGPONG 0
#endif
#ifndef KILN_SWIGLU
#define KILN_SWIGLU 0
#endif
#ifndef KILN_WGMMA_TMA_STORE
#define KILN_WGMMA_TMA_STORE 0
#endif
#ifndef KILN_WGMMA_EPI_COLS
#define KILN_WGMMA_EPI_COLS (KILN_SWIGLU ? KILN_BN / 2 : KILN_BN)
#endif
#ifndef KILN_MATMUL_NORM
#define KILN_MATMUL_NORM 0
#endif
#if KILN_MATMUL_NORM && KILN_SPLITK > 1
#error "matmul_wgmma.cuh: a folded norm needs the whole of K in each tile (KILN_SPLITK 1)"
#endif
#ifndef KILN_SPLITK
#define KILN_SPLITK 1
#endif
#ifndef KILN_WGMMA_CLUSTER_K
#define KILN_WGMMA_CLUSTER_K 1
#endif
#if KILN_WGMMA_CLUSTER_K > 1 && KILN_SPLITK > 1
#error "matmul_wgmma.cuh: split K in a cluster (KILN_WGMMA_CLUSTER_K) or through the workspace (KILN_SPLITK), not both"
#endif
/* split-K in a cluster: the leader's exchange buffer (CK - 1 slots of a consumer's accumulators,
 * plus one 16-byte chunk per m64 block for the folded norm's sums; both consumers' with
 * cooperative tiles, consumer 0's with ping-pong: BM / 64 m64 blocks either way) and 4 mbarriers */
#define KWG_SMEM_RED(BM, BN, CK, NORM) ((CK) > 1 ? (CK - 1) * ((BM) / 64) * 128 * ((BN) / 8 + ((NORM) ? 1 : 0)) * 16 + 32 : 0)
#ifndef KILN_WGMMA_W_EARLY
#define KILN_WGMMA_W_EARLY 0
#endif
#ifndef KILN_WGMMA_W_EVICT_FIRST
#define KILN_WGMMA_W_EVICT_FIRST 0
#endif
#ifndef KILN_WGMMA_W_L2
#define KILN_WGMMA_W_L2 0
#endif
#ifndef KILN_WGMMA_EPI_EARLY
#define KILN_WGMMA_EPI_EARLY 0
#endif
#ifndef KILN_WGMMA_TAIL
#define KILN_WGMMA_TAIL 0
#endif
#ifndef KILN_WGMMA_RES_TMA
#define KILN_WGMMA_RES_TMA 0
#endif
#if KILN_WGMMA_RES_TMA && (!KILN_WGMMA_TMA_STORE || KILN_SWIGLU || KILN_WGMMA_QKV || KILN_WGMMA_CLUSTER_K > 1 || \
                           KILN_SPLITK > 1 || (defined(KILN_CLUSTER_M) && KILN_CLUSTER_M > 1) || KILN_WGMMA_EPI_EARLY)
#error "matmul_wgmma.cuh: KILN_WGMMA_RES_TMA needs the TMA store, no SwiGLU or QKV epilogue, no split-K or cluster, no early epilogue"
#endif
#ifndef KILN_WGMMA_RES_REGS
#define KILN_WGMMA_RES_REGS 0
#endif
#if KILN_WGMMA_RES_REGS && !KILN_WGMMA_RES_TMA
#error "matmul_wgmma.cuh: KILN_WGMMA_RES_REGS needs KILN_WGMMA_RES_TMA"
#endif
/* KILN_WGMMA_RES_TMA: one mbarrier per consumer (in the split-K exchange's slots, unused then) */
#define KWG_SMEM_RES (KILN_WGMMA_RES_TMA ? 16 : 0)
/* K steps before the end of a tile's mainloop at which KILN_WGMMA_EPI_EARLY asks for the
 * epilogue's operands (about one ring of steps: the loads' latency under the weight stream) */
#ifndef KWG_WARM_LEAD
#define KWG_WARM_LEAD 8
#endif
/* KilnArgs has the split-K fields ws and sem (the generated part has them when KILN_SPLITK > 1) */
#ifndef KILN_WGMMA_SPLIT_FIELDS
#define KILN_WGMMA_SPLIT_FIELDS (KILN_SPLITK > 1)
#endif
#ifndef KILN_SMEM_BYTES
#define KILN_SMEM_BYTES                                                                                        \
    (KWG_SMEM_TOTAL(KILN_BM, KILN_BN, KILN_STAGES, KILN_WGMMA_PINGPONG, KILN_WGMMA_TMA_STORE ? KILN_WGMMA_EPI_COLS : 0) + \
     KWG_SMEM_RED(KILN_BM, KILN_BN, KILN_WGMMA_CLUSTER_K, KILN_MATMUL_NORM) + KWG_SMEM_RES)
#endif

// A CUtensorMap as the driver encodes it: opaque, 128 bytes, 64-byte aligned (cuda.h is not
// included under NVRTC).
struct __align__(64) kiln_tmap {
    unsigned long long opaque[16];
};

template <typename X, typename Y> struct kwg_same { static constexpr bool value = false; };
template <typename X> struct kwg_same<X, X> { static constexpr bool value = true; };

__device__ __forceinline__ unsigned kwg_saddr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

// ---- mbarriers ---------------------------------------------------------------------------
__device__ __forceinline__ void kwg_bar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void kwg_bar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void kwg_bar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Wait until the phase with this parity has completed; acq_cluster: with acquire semantics at
// cluster scope (the arrivals came from other CTAs of the cluster with release.cluster).
__device__ __forceinline__ void kwg_bar_wait(unsigned bar, unsigned parity, bool acq_cluster = false)
{
    unsigned done;
    do {
        if (acq_cluster)
            asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, P;\n}\n"
                         : "=r"(done)
                         : "r"(bar), "r"(parity)
                         : "memory");
        else
            asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                         : "=r"(done)
                         : "r"(bar), "r"(parity)
                         : "memory");
    } while (!done);
}

// ---- TMA ---------------------------------------------------------------------------------
__device__ __forceinline__ void kwg_tma_load(unsigned dst, const kiln_tmap *map, unsigned bar, int k, int row, int b)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(k), "r"(row), "r"(b)
                 : "memory");
}
// ... with an L2 cache policy (createpolicy): KILN_WGMMA_W_EVICT_FIRST's W boxes.
__device__ __forceinline__ void kwg_tma_load_hint(unsigned dst, const kiln_tmap *map, unsigned bar, int k, int row,
                                                  int b, unsigned long long policy)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
                 "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(k), "r"(row), "r"(b), "l"(policy)
                 : "memory");
}
__device__ __forceinline__ unsigned long long kwg_policy_evict_first()
{
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
// The box at (k, row, b) into the L2 only (KILN_WGMMA_W_L2).
__device__ __forceinline__ void kwg_tma_prefetch_box(const kiln_tmap *map, int k, int row, int b)
{
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(k), "r"(row), "r"(b)
                 : "memory");
}
__device__ __forceinline__ void kwg_tma_prefetch(const kiln_tmap *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// ---- wgmma -------------------------------------------------------------------------------
// Shared-memory matrix descriptor of a K-major tile written by TMA with the 128-byte swizzle:
// rows of 128 bytes, 8-row core groups 1024 bytes apart (stride byte offset), swizzle mode 1.
// Stepping K by 16 elements inside the 128-byte row adds 32 bytes to the start address.
__device__ __forceinline__ unsigned long long kwg_desc(unsigned saddr)
{
    return (unsigned long long)((saddr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void kwg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void kwg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void kwg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keep the compiler from moving accumulator reads or writes across a wgmma wait.
template <int R> __device__ __forceinline__ void kwg_fence_acc(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define KWG_D8(i)                                                                                         \
    "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]),             \
        "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])

// d[64 x N] (+)= A[64 x 16] * B[N x 16]^T, both K-major in shared memory; accumulate = 0
// overwrites d. Thread t of the warpgroup holds rows 16*(t/32) + (t%32)/4 + {0, 8} and
// columns 8*j + 2*(t%4) + {0, 1}: d[4j + 0/1] row +0, d[4j + 2/3] row +8.
template <int N> struct kwg_mma;
// Its operands: KWG_Lc the first c groups of 8 accumulators in the instruction text, KWG_Oc the
// same as asm operands; after the N/2 accumulators come the two descriptors and the scale-d flag.
#define KWG_L1 "%0, %1, %2, %3, %4, %5, %6, %7"
#define KWG_L2 KWG_L1 ", " "%8, %9, %10, %11, %12, %13, %14, %15"
#define KWG_L3 KWG_L2 ", " "%16, %17, %18, %19, %20, %21, %22, %23"
#define KWG_L4 KWG_L3 ", " "%24, %25, %26, %27, %28, %29, %30, %31"
#define KWG_L5 KWG_L4 ", " "%32, %33, %34, %35, %36, %37, %38, %39"
#define KWG_L6 KWG_L5 ", " "%40, %41, %42, %43, %44, %45, %46, %47"
#define KWG_L7 KWG_L6 ", " "%48, %49, %50, %51, %52, %53, %54, %55"
#define KWG_L8 KWG_L7 ", " "%56, %57, %58, %59, %60, %61, %62, %63"
#define KWG_L9 KWG_L8 ", " "%64, %65, %66, %67, %68, %69, %70, %71"
#define KWG_L10 KWG_L9 ", " "%72, %73, %74, %75, %76, %77, %78, %79"
#define KWG_L11 KWG_L10 ", " "%80, %81, %82, %83, %84, %85, %86, %87"
#define KWG_L12 KWG_L11 ", " "%88, %89, %90, %91, %92, %93, %94, %95"
#define KWG_L13 KWG_L12 ", " "%96, %97, %98, %99, %100, %101, %102, %103"
#define KWG_L14 KWG_L13 ", " "%104, %105, %106, %107, %108, %109, %110, %111"
#define KWG_L15 KWG_L14 ", " "%112, %113, %114, %115, %116, %117, %118, %119"
#define KWG_L16 KWG_L15 ", " "%120, %121, %122, %123, %124, %125, %126, %127"
#define KWG_O1 KWG_D8(0)
#define KWG_O2 KWG_O1, KWG_D8(8)
#define KWG_O3 KWG_O2, KWG_D8(16)
#define KWG_O4 KWG_O3, KWG_D8(24)
#define KWG_O5 KWG_O4, KWG_D8(32)
#define KWG_O6 KWG_O5, KWG_D8(40)
#define KWG_O7 KWG_O6, KWG_D8(48)
#define KWG_O8 KWG_O7, KWG_D8(56)
#define KWG_O9 KWG_O8, KWG_D8(64)
#define KWG_O10 KWG_O9, KWG_D8(72)
#define KWG_O11 KWG_O10, KWG_D8(80)
#define KWG_O12 KWG_O11, KWG_D8(88)
#define KWG_O13 KWG_O12, KWG_D8(96)
#define KWG_O14 KWG_O13, KWG_D8(104)
#define KWG_O15 KWG_O14, KWG_D8(112)
#define KWG_O16 KWG_O15, KWG_D8(120)
#define KWG_MMA_N(N, REGS, DESC, P, ...)                                                                     \
    template <> struct kwg_mma<N> {                                                                      \
        static __device__ __forceinline__ void run(float (&d)[N / 2], unsigned long long da,               \
                                                   unsigned long long db, int accumulate)                 \
        {                                                                                                \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                    \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." KWG_AB " {" REGS "}, " DESC      \
                         ", p, 1, 1, 0, 0;\n}\n"                                                          \
                         : __VA_ARGS__                                                                   \
                         : "l"(da), "l"(db), "r"(accumulate));                                           \
        }                                                                                                \
    };
// 64, 128 and 256, and the widths skinny M takes to spread its column blocks evenly over the SMs
// (codegen's wg_even_pick)
KWG_MMA_N(16, KWG_L1, "%8, %9", "%10", KWG_O1)
KWG_MMA_N(32, KWG_L2, "%16, %17", "%18", KWG_O2)
KWG_MMA_N(48, KWG_L3, "%24, %25", "%26", KWG_O3)
KWG_MMA_N(64, KWG_L4, "%32, %33", "%34", KWG_O4)
KWG_MMA_N(96, KWG_L6, "%48, %49", "%50", KWG_O6)
KWG_MMA_N(112, KWG_L7, "%56, %57", "%58", KWG_O7)
KWG_MMA_N(128, KWG_L8, "%64, %65", "%66", KWG_O8)
KWG_MMA_N(160, KWG_L10, "%80, %81", "%82", KWG_O10)
KWG_MMA_N(192, KWG_L12, "%96, %97", "%98", KWG_O12)
KWG_MMA_N(224, KWG_L14, "%112, %113", "%114", KWG_O14)
KWG_MMA_N(256, KWG_L16, "%128, %129", "%130", KWG_O16)

// ---- clusters ----------------------------------------------------------------------------
__device__ __forceinline__ unsigned kwg_cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void kwg_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// Arrive on the mbarrier at the same shared offset in CTA `rank` of the cluster. Default
// semantics (release at CTA scope): it only says "this warp's wgmma reads of the slot have
// retired" (a WAR hand-off to the TMA writes that follow); a .release.cluster arrive would
// put a GPU-wide memory barrier (MEMBAR.ALL.GPU) in front of every arrival.
__device__ __forceinline__ void kwg_bar_arrive_cluster(unsigned bar, unsigned rank)
{
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
                 "r"(rank)
                 : "memory");
}
// The box lands at the same shared offset in every CTA of `mask`, completing on each one's
// mbarrier at offset `bar`.
__device__ __forceinline__ void kwg_tma_load_mc(unsigned dst, const kiln_tmap *map, unsigned bar, int k, int row,
                                                int b, unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
                 "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(k), "r"(row), "r"(b), "h"(mask)
                 : "memory");
}

// Split-K in a cluster: the address of shared offset `a` in CTA `rank` of the cluster; a store of
// four floats there; an arrival there with release semantics at cluster scope (it publishes this
// thread's earlier stores to whoever acquires the phase; kwg_bar_wait's acq_cluster acquires it).
__device__ __forceinline__ unsigned kwg_mapa(unsigned a, unsigned rank)
{
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ void kwg_st_cluster4(unsigned ra, float x, float y, float z, float w)
{
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(ra), "f"(x), "f"(y), "f"(z), "f"(w)
                 : "memory");
}
__device__ __forceinline__ void kwg_bar_arrive_release_cluster(unsigned ra)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(ra) : "memory");
}
// KILN_WGMMA_TAIL: four floats into CTA memory of the cluster (ra, from kwg_mapa) that complete
// 16 bytes of the transaction count of the mbarrier at rbar (its cluster address) when they land:
// no fence, no arrival (the receiver's expect_tx counts the bytes).
__device__ __forceinline__ void kwg_st_async4(unsigned ra, float x, float y, float z, float w, unsigned rbar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(ra),
                 "r"(__float_as_uint(x)), "r"(__float_as_uint(y)), "r"(__float_as_uint(z)), "r"(__float_as_uint(w)),
                 "r"(rbar)
                 : "memory");
}
// The kernel's last cluster barrier without release semantics (KILN_WGMMA_TAIL: nothing of this
// CTA's is left for a peer to see; the barrier only keeps each CTA's shared memory alive until
// the peers are done with it).
__device__ __forceinline__ void kwg_cluster_sync_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}

// ---- TMA stores, named barriers ----------------------------------------------------------
__device__ __forceinline__ void kwg_tma_store(const kiln_tmap *map, unsigned src, int col, int row, int b)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(src), "r"(col), "r"(row), "r"(b)
                 : "memory");
}
__device__ __forceinline__ void kwg_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Every store this thread issued has finished reading its shared-memory source.
__device__ __forceinline__ void kwg_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// ... and has completed.
__device__ __forceinline__ void kwg_store_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Generic-proxy writes to shared memory become visible to the async proxy (TMA) that reads them.
__device__ __forceinline__ void kwg_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// A barrier of one consumer warpgroup (ids 1 and 2; 0 is __syncthreads).
__device__ __forceinline__ void kwg_wg_sync(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void kwg_sts32(unsigned a, unsigned v) { asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(v) : "memory"); }
__device__ __forceinline__ unsigned kwg_lds32(unsigned a)
{
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ void kwg_sts16(unsigned a, unsigned short v)
{
    asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(a), "h"(v) : "memory");
}
__device__ __forceinline__ unsigned kwg_pack2(float x, float y)
{
#if KILN_WGMMA_F16
    __half2 h = __floats2half2_rn(x, y);
#else
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
#endif
    return *reinterpret_cast<unsigned *>(&h);
}
__device__ __forceinline__ float2 kwg_unpack2(unsigned u)
{
#if KILN_WGMMA_F16
    return __half22float2(*reinterpret_cast<const __half2 *>(&u));
#else
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u));
#endif
}
__device__ __forceinline__ unsigned short kwg_pack1(float x)
{
#if KILN_WGMMA_F16
    return __half_as_ushort(__float2half_rn(x));
#else
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#endif
}

// ---- the kernel --------------------------------------------------------------------------
// Unit u -> (batch, unit row, column block), grouped: `group` unit rows share a sweep of N.
__device__ __forceinline__ void kwg_tile(long long u, long long per_batch, int units_m, int tiles_n, int group,
                                         long long &b, int &um, int &nb)
{
    b = u / per_batch;
    const int r = (int)(u - b * per_batch);
    const int g = r / (group * tiles_n);
    const int first = g * group;
    const int gm = units_m - first < group ? units_m - first : group;
    const int in = r - g * group * tiles_n;
    um = first + in % gm;
    nb = in / gm;
}
// Split-K: unit u is slice u % S of tile u / S; slice s takes K steps [k0, k0 + nk).
__device__ __forceinline__ void kwg_slice(long long u, int S, int ktiles, long long &t, int &s, int &k0, int &nk)
{
    t = u / S;
    s = (int)(u - t * S);
    const int per = (ktiles + S - 1) / S;
    k0 = s * per;
    nk = ktiles - k0 < per ? ktiles - k0 : per;
    if (nk < 0) nk = 0;
}

// The epilogue of one consumer's MW x 64 rows by BN columns; CHECK: bounds per element.
template <bool CHECK, int MW, int BN>
__device__ __forceinline__ void kwg_epilogue(const KilnArgs &p, long long b, long long row0, long long col0,
                                             float (&acc)[MW][BN / 2], long long M, long long N)
{
#pragma unroll
    for (int mi = 0; mi < MW; mi++) {
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            const long long col = col0 + j * 8;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const long long row = row0 + mi * 64 + h * 8;
                if (!CHECK || (col < N && row < M))
                    kiln_epilogue2(p, b, row, col, acc[mi][j * 4 + h * 2], acc[mi][j * 4 + h * 2 + 1],
                                   !CHECK || col + 1 < N);
            }
        }
    }
}

#ifndef KILN_WGMMA_QKV
#define KILN_WGMMA_QKV 0
#endif
#ifndef KILN_QKV_NORM
#define KILN_QKV_NORM 0
#endif
/* KILN_WGMMA_EPI_EARLY 2 with a value hook that loads (KILN_HAS_EPILOGUE_PRE): the loads of the
 * tile's epilogue, made at its start (kwg_pre_load) and kept in registers until its end */
#if KILN_WGMMA_EPI_EARLY == 2 && defined(KILN_HAS_EPILOGUE_PRE) && KILN_WGMMA_TMA_STORE && !KILN_WGMMA_QKV
#define KWG_PRE 1
#else
#define KWG_PRE 0
#endif
template <int MW, int BN> struct kwg_pre_regs {
#if KWG_PRE
    static_assert(MW * (BN / 8) * 2 * KILN_EPI_NPRE <= 64, "KILN_EPI_NPRE: at most 64 preloaded floats per thread");
    float v[MW][BN / 8][2][KILN_EPI_NPRE];
#endif
};
#if KWG_PRE
// What this thread's epilogue of the tile (rows rbase.., column block nb) will load: for each of
// its accumulator pairs (mi, j, h), the operands kiln_epilogue_val reads at (b, m, n..n+1), by
// the generated kiln_epilogue_pre (its loads alone; the values are kiln_epilogue_post's). The
// loads are issued here and complete under the mainloop; no load waits at the tile's end.
template <int MW, int BN>
__device__ __forceinline__ void kwg_pre_load(const KilnArgs &p, long long b, long long rbase, int nb, long long M,
                                             long long N, kwg_pre_regs<MW, BN> &pre)
{
    const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int e = 0; e < KILN_EPI_NPRE; e++) pre.v[mi][j][h][e] = 0.f;
                const long long m = rbase + mi * 64 + warp * 16 + (lane >> 2) + h * 8;
                const long long n = (long long)nb * BN + j * 8 + (lane & 3) * 2;
                if (m < M && n < N) (void)kiln_epilogue_pre(p, b, m, n, 0.f, 0.f, n + 1 < N, pre.v[mi][j][h]);
            }
}
#endif
// KILN_WGMMA_RES_REGS: the residual of a tile's rounds after the first (output columns EC..BN of
// the tile), this thread's pairs (mi, column group g, h) as loaded, in the output's type; `on`
// where they fit in 32 registers
template <int MW, int BN, int EC> struct kwg_rr { // BN: output columns too (no SwiGLU with RES_TMA)
    static constexpr bool on = KILN_WGMMA_RES_REGS && BN > EC && MW * (BN - EC) <= 128;
    unsigned v[MW][on ? (BN - EC) / 8 : 1][2];
};
#if KILN_WGMMA_RES_REGS
template <int MW, int BN, int EC>
__device__ __forceinline__ void kwg_rr_load(const KilnArgs &p, long long b, long long rbase, int nb, long long M,
                                            long long N, kwg_rr<MW, BN, EC> &rr)
{
    if constexpr (kwg_rr<MW, BN, EC>::on) {
        const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
#pragma unroll
        for (int mi = 0; mi < MW; mi++)
#pragma unroll
            for (int g = 0; g < (BN - EC) / 8; g++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const long long m = rbase + mi * 64 + warp * 16 + (lane >> 2) + h * 8;
                    const long long n = (long long)nb * BN + EC + g * 8 + (lane & 3) * 2;
                    // a pair at an even column of rows whose width is a multiple of 8: 4-byte aligned
                    rr.v[mi][g][h] = m < M && n < N ? *(const unsigned *)kiln_res_at(p, b, m, n) : 0u;
                }
    }
}
#endif
#if KILN_WGMMA_TMA_STORE && !KILN_WGMMA_QKV
// The epilogue through shared memory and TMA stores (KILN_WGMMA_TMA_STORE 1): the hook
// kiln_epilogue_val returns the output values (KILN_SWIGLU: one, at column n / 2), the
// consumer writes them as KILN_T into its staging buffer — EC output columns at a time, as
// 64 x 64 boxes in the 128-byte swizzle (conflict-free: the 8 rows of a warp's store fall in 8
// different 16-byte units) — and one thread stores each box with a TMA store that runs on
// while the consumer goes on to its next tile. The TMA store clips rows >= M and columns past
// the output's width. Before the staging buffer is written again, the thread that issued the
// stores waits until they have read it (bulk wait_group.read), then the warpgroup syncs.
// KILN_WGMMA_RES_TMA: round r's residual boxes (the staging's MW x EC/64 boxes of 64 x 64) asked
// for on the consumer's mbarrier `rbar`, by its thread 0, once the staging is free.
template <int MW, int BN, int EC>
__device__ __forceinline__ void kwg_res_issue(const kiln_tmap *tr, unsigned stage, unsigned rbar, long long b,
                                              long long rbase, int nb, int r)
{
    constexpr int NCH = EC / 64;
    kwg_bar_expect_tx(rbar, (unsigned)(MW * NCH * 8192));
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int q = 0; q < NCH; q++)
            kwg_tma_load(stage + (unsigned)((mi * NCH + q) * 8192), tr, rbar, nb * BN + r * EC + q * 64,
                         (int)(rbase + mi * 64), (int)b);
}

template <bool CHECK, int MW, int BN, int EC>
__device__ __forceinline__ void kwg_epilogue_tma(const KilnArgs &p, const kiln_tmap *to, unsigned stage, int c,
                                                 long long b, long long rbase, int nb, float (&acc)[MW][BN / 2],
                                                 long long M, long long N, bool &pending, const kwg_pre_regs<MW, BN> &pre,
                                                 unsigned rbar, unsigned &rph, bool issued0, kwg_rr<MW, BN, EC> &rr)
{
    (void)pre;
    (void)rbar;
    (void)rph;
    (void)issued0;
    (void)rr;
    constexpr bool RR = kwg_rr<MW, BN, EC>::on; // rounds after the first: the residual in registers
    (void)RR;
#if KILN_WGMMA_RES_REGS
    if (RR && !issued0) kwg_rr_load<MW, BN, EC>(p, b, rbase, nb, M, N, rr);
#endif
    constexpr int OBN = KILN_SWIGLU ? BN / 2 : BN; // output columns of a tile
    constexpr int CPJ = KILN_SWIGLU ? 4 : 8;       // output columns of 8 accumulator columns
    constexpr int NCH = EC / 64;                   // 64-column boxes per round
    static_assert(EC % 64 == 0 && EC <= OBN && OBN % EC == 0,
                  "KILN_WGMMA_EPI_COLS: a multiple of 64 that divides the tile's output columns");
    constexpr int EB = KWG_EPI_BATCHES(MW, BN);
    static_assert((EC / CPJ) % EB == 0, "KWG_EPI_BATCH must divide the column groups of a round");
    const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
#pragma unroll
    for (int r = 0; r < OBN / EC; r++) {
        if (pending && wt == 0) kwg_store_wait_read();
#if KILN_WGMMA_RES_TMA
        if (wt == 0 && (r > 0 ? !RR : !issued0)) kwg_res_issue<MW, BN, EC>(to + 1, stage, rbar, b, rbase, nb, r);
#endif
        kwg_wg_sync(1 + c);
#if KILN_WGMMA_RES_TMA
        if (r == 0 || !RR) {
            kwg_bar_wait(rbar, rph);
            rph ^= 1u;
        }
#endif
        // where pair (mi, column group jc + q of the round, h) lives in the staging: 64 x 64 boxes
        // in the 128-byte swizzle
        auto at = [&](int mi, int jq, int h) {
            const int oc = jq * CPJ + (lane & 3) * (KILN_SWIGLU ? 1 : 2); // output column in the round
            const unsigned byte = (unsigned)(oc & 63) * 2u;
            const int row = warp * 16 + (lane >> 2) + h * 8; // row in the m64 block
            return stage + (unsigned)((mi * NCH + (oc >> 6)) * 8192 + row * 128) +
                   ((((byte >> 4) ^ (unsigned)(row & 7)) << 4) | (byte & 15u));
        };
        (void)at;
#pragma unroll
        for (int mi = 0; mi < MW; mi++)
#pragma unroll
            for (int jc = 0; jc < EC / CPJ; jc += EB) {
                // the values of EB column groups first, then their stores: the hook's
                // loads (a residual, a bias) are then all in flight together, not each behind
                // the shared-memory stores (asm volatile, "memory") of the one before
                float2 v[EB][2];
#pragma unroll
                for (int q = 0; q < EB; q++) {
                    const int j = r * (EC / CPJ) + jc + q;
                    const long long n = (long long)nb * BN + j * 8 + (lane & 3) * 2;
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const long long m = rbase + mi * 64 + warp * 16 + (lane >> 2) + h * 8;
                        v[q][h] = make_float2(0.f, 0.f);
                        if (!CHECK || (m < M && n < N))
#if KILN_WGMMA_RES_TMA
                        {
                            const int g = RR && r > 0 ? (r - 1) * (EC / CPJ) + jc + q : -1; // its register group
                            const float2 rv = kwg_unpack2(g >= 0 ? rr.v[mi][g][h] : kwg_lds32(at(mi, jc + q, h)));
                            const float res[2] = {rv.x, rv.y};
                            v[q][h] = kiln_epilogue_post(p, b, m, n, acc[mi][j * 4 + h * 2], acc[mi][j * 4 + h * 2 + 1],
                                                         !CHECK || n + 1 < N, res);
                        }
#elif KWG_PRE
                            v[q][h] = kiln_epilogue_post(p, b, m, n, acc[mi][j * 4 + h * 2], acc[mi][j * 4 + h * 2 + 1],
                                                         !CHECK || n + 1 < N, pre.v[mi][j][h]);
#else
                            v[q][h] = kiln_epilogue_val(p, b, m, n, acc[mi][j * 4 + h * 2], acc[mi][j * 4 + h * 2 + 1],
                                                        !CHECK || n + 1 < N);
#endif
                    }
                }
#pragma unroll
                for (int q = 0; q < EB; q++) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const unsigned a = at(mi, jc + q, h);
                        if (KILN_SWIGLU) kwg_sts16(a, kwg_pack1(v[q][h].x));
                        else kwg_sts32(a, kwg_pack2(v[q][h].x, v[q][h].y));
                    }
                }
            }
        kwg_fence_async_smem();
        kwg_wg_sync(1 + c);
        if (wt == 0) {
#pragma unroll
            for (int mi = 0; mi < MW; mi++)
#pragma unroll
                for (int q = 0; q < NCH; q++)
                    kwg_tma_store(to, stage + (unsigned)((mi * NCH + q) * 8192), nb * OBN + r * EC + q * 64,
                                  (int)(rbase + mi * 64), (int)b);
            kwg_store_commit();
        }
        pending = true;
    }
}
#endif

#if KILN_WGMMA_TMA_STORE && KILN_WGMMA_QKV
// The QKV epilogue through shared memory and TMA stores (KILN_WGMMA_QKV 1, with
// KILN_WGMMA_TMA_STORE 1 and KILN_WGMMA_EPI_COLS = KILN_QKV_HD; codegen/cg_family.c,
// passes/fuse_qkv_epilogue.c). The tile's columns are whole heads of HD (64 or 128) columns,
// each head inside one segment (q, k or v) with one destination: the rotated q rows (the map
// `to[0]`, rows M of the q buffer) or a KV cache written in place (maps to[1], to[2]: {HD, T,
// B*heads}). The generated part gives
//   kiln_qkv_chunk kiln_qkv_find(long long n0): the segment of the head at column n0 (seg < 0:
//     no segment), its destination map, head, the segment's head count, whether it rotates;
//   float2 kiln_qkv_in(p, n, v0, v1): bias and rounding to the projection's type;
//   float2 kiln_qkv_turn(seg, i): rotation pair i's frequency (dims i, i + HD/2), and
//   void kiln_qkv_rotate_g(seg, pos, g, y0, y1): the pair rotated at pos with it;
//   long long kiln_qkv_rows(p) (S: rows per batch), int kiln_qkv_pos(p, b) (pos[b], or 0);
//   long long kiln_qkv_slot(p, b): the caches' row of batch row b (the slot table's, or b);
//   void kiln_qkv_put(p, dst, b, head, t, d, v): one element into cache `dst` (row t < 0 or
//     past the cache: not written);
//   with KILN_QKV_NORM 1 (passes/fuse_qkv_epilogue.c rule epilogue-head-norm: a per-head RMSNorm
//     before the rope; chunk.norm says which heads): float kiln_qkv_rstd(seg, ss) (1/rms from a
//     row's sum of squares over the head) and float2 kiln_qkv_norm(p, seg, d0, d1, rs, y) (y
//     scaled by rs and the gain at dims d0, d1, rounded to the norm's type). A row's HD columns
//     are in the four lanes of its quad, so the sum takes two shuffles and nothing else.
// Bind time permuted the weight rows of a rotating segment so that columns 2i, 2i + 1 of a head
// are dims i, i + HD/2; the consumer rotates them in registers and writes dims in their natural
// order into its staging (64 x 64 boxes, 128-byte swizzle, as kwg_epilogue_tma), one head at a
// time. Then one thread stores the boxes with TMA: q at (column head*HD, row m0), a cache at
// (dim, row pos[b] + s0, slab slot*heads + head; slot = kiln_qkv_slot(p, b)), which clips rows past the cache (they are not
// written). A 64-row block whose rows are not all < M and of one batch row, or whose first
// position is negative, is stored element by element from the staging by the whole warpgroup
// (kiln_qkv_put) instead; q rows past M are clipped by its map.
// KILN_WGMMA_EPI_EARLY 2: at the tile's start, the positions of this thread's rows (rows past M:
// 0, never stored) and the rotation frequencies of its columns (kiln_qkv_turn: pair i = 4 jj +
// lane % 4 of each head r, at g[r * HD / 8 + jj]), made registers at once: the frequencies are
// constant loads, which the compiler might otherwise issue again at their use, at the tile's end.
template <int MW, int BN>
__device__ __forceinline__ void kwg_qkv_early(const KilnArgs &p, long long rbase, int nb, long long M, int (&pos)[MW][2],
                                              float2 (&g)[BN / 8])
{
    constexpr int HD = KILN_QKV_HD;
    const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
    const long long S = kiln_qkv_rows(p);
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long long m = rbase + mi * 64 + warp * 16 + (lane >> 2) + h * 8;
            pos[mi][h] = 0;
            if (m < M) {
                const long long bb = m / S;
                pos[mi][h] = (int)(kiln_qkv_pos(p, bb) + (m - bb * S));
            }
            asm volatile("" : "+r"(pos[mi][h]));
        }
#pragma unroll
    for (int r = 0; r < BN / HD; r++) {
        const kiln_qkv_chunk ch = kiln_qkv_find((long long)nb * BN + r * HD);
#pragma unroll
        for (int jj = 0; jj < HD / 8; jj++) {
            float2 v = make_float2(0.f, 0.f);
            if (ch.seg >= 0 && ch.rot) v = kiln_qkv_turn(ch.seg, jj * 4 + (lane & 3));
            asm volatile("" : "+f"(v.x), "+f"(v.y));
            g[r * (HD / 8) + jj] = v;
        }
    }
}

// One head of the QKV epilogue into the staging (kwg_epilogue_qkv): the projection's values of
// the head at column n0 (tile head r), normed (KILN_QKV_NORM, rsd per row: nullptr without it),
// rotated when ROT (ch.rot, hoisted by the caller), stored in their natural dim order.
template <int MW, int BN, bool ROT>
__device__ __forceinline__ void kwg_qkv_stage(const KilnArgs &p, const kiln_qkv_chunk &ch, long long n0, int r,
                                              unsigned stage, const float (&acc)[MW][BN / 2], const int (&pos)[MW][2],
                                              const float2 (&eg)[BN / 8], const float (*rsd)[2])
{
    constexpr int HD = KILN_QKV_HD, NCH = HD / 64;
    const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
    (void)eg;
    (void)rsd;
#pragma unroll
    for (int jj = 0; jj < HD / 8; jj++) {
        const int j = r * (HD / 8) + jj;
        const int lc = jj * 8 + (lane & 3) * 2; // column in the head
        const int i = lc >> 1;                  // its rotation pair
        // the pair's frequency, read once for the 2 * MW rows of this thread
#if KILN_WGMMA_EPI_EARLY == 2
        const float2 g = eg[r * (HD / 8) + jj];
#else
        const float2 g = ROT ? kiln_qkv_turn(ch.seg, i) : make_float2(0.f, 0.f);
#endif
#pragma unroll
        for (int mi = 0; mi < MW; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int rr = warp * 16 + (lane >> 2) + h * 8;
                float2 y = kiln_qkv_in(p, n0 + lc, acc[mi][j * 4 + h * 2], acc[mi][j * 4 + h * 2 + 1]);
#if KILN_QKV_NORM
                // dims i and i + HD/2 of a rotated head (its weight rows paired), else lc, lc + 1
                if (ch.norm) y = kiln_qkv_norm(p, ch.seg, ROT ? i : lc, ROT ? i + HD / 2 : lc + 1, rsd[mi][h], y);
#endif
                const unsigned row = stage + (unsigned)(mi * NCH * 8192 + rr * 128);
                if (ROT) {
                    kiln_qkv_rotate_g(ch.seg, pos[mi][h], g, y.x, y.y);
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int d = i + e * (HD / 2);
                        const unsigned byte = (unsigned)(d & 63) * 2u;
                        kwg_sts16(row + (unsigned)((d >> 6) * 8192) +
                                      ((((byte >> 4) ^ (unsigned)(rr & 7)) << 4) | (byte & 15u)),
                                  kwg_pack1(e ? y.y : y.x));
                    }
                } else {
                    const unsigned byte = (unsigned)(lc & 63) * 2u;
                    kwg_sts32(row + (unsigned)((lc >> 6) * 8192) + ((((byte >> 4) ^ (unsigned)(rr & 7)) << 4) | (byte & 15u)),
                              kwg_pack2(y.x, y.y));
                }
            }
    }
}

template <int MW, int BN>
__device__ __forceinline__ void kwg_epilogue_qkv(const KilnArgs &p, const kiln_tmap *to, unsigned stage, int c,
                                                 long long rbase, int nb, float (&acc)[MW][BN / 2], long long M,
                                                 bool &pending, const int (&epos)[MW][2], const float2 (&eg)[BN / 8])
{
    constexpr int HD = KILN_QKV_HD, NCH = HD / 64;
    static_assert(HD == 64 || HD == 128, "KILN_QKV_HD: 64 or 128");
    static_assert(BN % HD == 0 && KILN_WGMMA_EPI_COLS == HD, "KILN_WGMMA_EPI_COLS must be KILN_QKV_HD");
    const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
    const long long S = kiln_qkv_rows(p);
    (void)eg;
    // the positions of this thread's rows (rows past M: 0, never stored)
    int pos[MW][2];
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
#if KILN_WGMMA_EPI_EARLY == 2
            pos[mi][h] = epos[mi][h];
#else
            (void)epos;
            const long long m = rbase + mi * 64 + warp * 16 + (lane >> 2) + h * 8;
            pos[mi][h] = 0;
            if (m < M) {
                const long long bb = m / S;
                pos[mi][h] = (int)(kiln_qkv_pos(p, bb) + (m - bb * S));
            }
#endif
        }
#pragma unroll
    for (int r = 0; r < BN / HD; r++) {
        const long long n0 = (long long)nb * BN + r * HD;
        const kiln_qkv_chunk ch = kiln_qkv_find(n0);
        if (ch.seg < 0) continue;
#if KILN_QKV_NORM
        // per-head RMSNorm: each row's sum of squares over the head's HD columns, which sit in the
        // four lanes of its quad (lane & 3), then 1/rms (ch is the same for the whole warpgroup)
        float rsd[MW][2];
#pragma unroll
        for (int mi = 0; mi < MW; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                rsd[mi][h] = 1.f;
                if (!ch.norm) continue;
                float ss = 0.f;
#pragma unroll
                for (int jj = 0; jj < HD / 8; jj++) {
                    const int j = r * (HD / 8) + jj;
                    const float2 y = kiln_qkv_in(p, n0 + jj * 8 + (lane & 3) * 2, acc[mi][j * 4 + h * 2],
                                                 acc[mi][j * 4 + h * 2 + 1]);
                    ss += y.x * y.x + y.y * y.y;
                }
                ss += __shfl_xor_sync(0xffffffffu, ss, 1);
                ss += __shfl_xor_sync(0xffffffffu, ss, 2);
                rsd[mi][h] = kiln_qkv_rstd(ch.seg, ss);
            }
#endif
        if (pending && wt == 0) kwg_store_wait_read();
        kwg_wg_sync(1 + c);
        // ch.rot (and ch.norm) are uniform over the head: the branch is taken once per head, so
        // that each head's 16 * MW pairs are straight-line code the compiler can interleave (a
        // branch per pair made every pair's rotation a serial chain of its own)
#if KILN_QKV_NORM
        if (ch.rot) kwg_qkv_stage<MW, BN, true>(p, ch, n0, r, stage, acc, pos, eg, rsd);
        else kwg_qkv_stage<MW, BN, false>(p, ch, n0, r, stage, acc, pos, eg, rsd);
#else
        if (ch.rot) kwg_qkv_stage<MW, BN, true>(p, ch, n0, r, stage, acc, pos, eg, nullptr);
        else kwg_qkv_stage<MW, BN, false>(p, ch, n0, r, stage, acc, pos, eg, nullptr);
#endif
        kwg_fence_async_smem();
        kwg_wg_sync(1 + c);
#pragma unroll
        for (int mi = 0; mi < MW; mi++) {
            const long long m0 = rbase + mi * 64;
            if (m0 >= M) continue;
            const unsigned box = stage + (unsigned)(mi * NCH * 8192);
            if (ch.dst == 0) {
                if (wt == 0)
#pragma unroll
                    for (int q = 0; q < NCH; q++)
                        kwg_tma_store(to, box + (unsigned)(q * 8192), ch.head * HD + q * 64, (int)m0, 0);
                continue;
            }
            const long long b0 = m0 / S, s0 = m0 - b0 * S;
            const long long t0 = (long long)kiln_qkv_pos(p, b0) + s0;
            if (m0 + 64 <= M && s0 + 64 <= S && t0 >= 0 && t0 < (1ll << 31)) {
                if (wt == 0)
#pragma unroll
                    for (int q = 0; q < NCH; q++)
                        kwg_tma_store(to + ch.dst, box + (unsigned)(q * 8192), q * 64, (int)t0,
                                      (int)(kiln_qkv_slot(p, b0) * ch.heads + ch.head));
                continue;
            }
            // element by element: rows past M, across batch rows, negative positions (decode: one
            // row per batch row).
#if KILN_WGMMA_EPI_EARLY == 2
            // Each warp stores its own 16 rows (the rows its lanes' accumulators held), whose
            // positions its lanes hold: row i of the warp's is lane (i % 8) * 4's pos[mi][i / 8]
            // (a shuffle, no load); lane l stores dims l, l + 32, ... of each row (64 contiguous
            // bytes per store instruction).
            if (m0 + warp * 16 < M) { // uniform across the warp
#pragma unroll
                for (int i = 0; i < 16; i++) {
                    const int rr = warp * 16 + i;
                    const int pv = __shfl_sync(0xffffffffu, (i >> 3) ? pos[mi][1] : pos[mi][0], (i & 7) * 4);
                    const long long m = m0 + rr;
                    if (m >= M) break; // uniform
                    const long long bb = m / S;
#pragma unroll
                    for (int k = 0; k < HD / 32; k++) {
                        const int d = lane + 32 * k;
                        const unsigned byte = (unsigned)(d & 63) * 2u;
                        unsigned short v;
                        asm volatile("ld.shared.b16 %0, [%1];\n"
                                     : "=h"(v)
                                     : "r"(box + (unsigned)((d >> 6) * 8192 + rr * 128) +
                                           ((((byte >> 4) ^ (unsigned)(rr & 7)) << 4) | (byte & 15u)))
                                     : "memory");
#if KILN_WGMMA_F16
                        const float x = __half2float(__ushort_as_half(v));
#else
                        const float x = __bfloat162float(__ushort_as_bfloat16(v));
#endif
                        kiln_qkv_put(p, ch.dst, bb, ch.head, (long long)pv, d, x);
                    }
                }
            }
            continue;
#endif
            // EB elements per thread at a time: their staged values and positions are read first,
            // so the position loads are in flight together rather than each behind the cache
            // stores of the one before.
            constexpr int EB = KWG_EPI_BATCHES(MW, BN);
            const int rows = M - m0 < 64 ? (int)(M - m0) : 64;
#pragma unroll 1
            for (int e0 = 0; e0 < rows * HD; e0 += 128 * EB) {
                float x[EB];
                long long t[EB], bb[EB];
#pragma unroll
                for (int q = 0; q < EB; q++) {
                    const int e = e0 + q * 128 + wt, rr = e / HD, d = e % HD;
                    bb[q] = -1;
                    x[q] = 0.f;
                    t[q] = 0;
                    if (e < rows * HD) {
                        const unsigned byte = (unsigned)(d & 63) * 2u;
                        unsigned short v;
                        asm volatile("ld.shared.b16 %0, [%1];\n"
                                     : "=h"(v)
                                     : "r"(box + (unsigned)((d >> 6) * 8192 + rr * 128) +
                                           ((((byte >> 4) ^ (unsigned)(rr & 7)) << 4) | (byte & 15u)))
                                     : "memory");
#if KILN_WGMMA_F16
                        x[q] = __half2float(__ushort_as_half(v));
#else
                        x[q] = __bfloat162float(__ushort_as_bfloat16(v));
#endif
                        const long long m = m0 + rr;
                        bb[q] = m / S;
                        t[q] = m - bb[q] * S;
                    }
                }
#pragma unroll
                for (int q = 0; q < EB; q++)
                    if (bb[q] >= 0) t[q] += (long long)kiln_qkv_pos(p, bb[q]);
#pragma unroll
                for (int q = 0; q < EB; q++)
                    if (bb[q] >= 0) kiln_qkv_put(p, ch.dst, bb[q], ch.head, t[q], (e0 + q * 128 + wt) % HD, x[q]);
            }
        }
        if (wt == 0) kwg_store_commit();
        pending = true;
    }
}
#endif

// Split-K (S > 1): the consumer's partial sums of slice s go to p.ws (float, rows < M of its
// ROWS x BN block, row-major, at slot `slot0 + s`), then one thread counts the slice on
// p.sem[cidx]. The consumer that counts last resets the counter (the next launch, a graph
// replay, needs no memset), adds the S partials in slice order 0..S-1 (its own read back too,
// so the result does not depend on which slice is last) and returns true: it runs the
// epilogue. The others return false.
#if KILN_WGMMA_SPLIT_FIELDS
template <int MW, int BN>
__device__ __forceinline__ bool kwg_splitk(const KilnArgs &p, float (&acc)[MW][BN / 2], long long slot0, int s, int S,
                                           long long cidx, long long rbase, long long M, int c, volatile int *flag)
{
    constexpr int ROWS = MW * 64;
    const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
    float *mine = p.ws + (slot0 + s) * (long long)(ROWS * BN);
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int rr = mi * 64 + warp * 16 + (lane >> 2) + h * 8;
            if (rbase + rr < M)
#pragma unroll
                for (int j = 0; j < BN / 8; j++)
                    __stcg(reinterpret_cast<float2 *>(mine + rr * BN + j * 8 + (lane & 3) * 2),
                           make_float2(acc[mi][j * 4 + h * 2], acc[mi][j * 4 + h * 2 + 1]));
        }
    __threadfence();
    kwg_wg_sync(1 + c);
    if (wt == 0) flag[0] = atomicAdd(p.sem + cidx, 1) == S - 1;
    kwg_wg_sync(1 + c);
    if (!flag[0]) return false;
    if (wt == 0) p.sem[cidx] = 0;
    __threadfence();
    // slice by slice (its own too, read back: the same values), each slice's loads all in flight
#pragma unroll 1
    for (int q = 0; q < S; q++) {
        const float *part = p.ws + (slot0 + q) * (long long)(ROWS * BN);
#pragma unroll
        for (int mi = 0; mi < MW; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int rr = mi * 64 + warp * 16 + (lane >> 2) + h * 8;
                if (rbase + rr < M)
#pragma unroll
                    for (int j = 0; j < BN / 8; j++) {
                        const float2 v = __ldcg(reinterpret_cast<const float2 *>(part + rr * BN + j * 8 + (lane & 3) * 2));
                        acc[mi][j * 4 + h * 2] = q ? acc[mi][j * 4 + h * 2] + v.x : v.x;
                        acc[mi][j * 4 + h * 2 + 1] = q ? acc[mi][j * 4 + h * 2 + 1] + v.y : v.y;
                    }
            }
    }
    return true;
}
#endif

#if KILN_WGMMA_CLUSTER_K > 1
// Split-K in a cluster (header): this consumer's part of the exchange for its `use`-th unit.
// red: its exchange buffer (CK - 1 slots of SLOT bytes, at the same offset in every CTA);
// rfull / rempty: its two mbarriers. A slot holds CH 16-byte chunks per m64 block and thread
// (BN / 8 of accumulators, then the folded norm's two sums), chunk q of thread t at
// (q * 128 + t) * 16: consecutive threads, consecutive 16 bytes. Returns true on the leader (its
// acc and ss then hold the whole of K), false on the other ranks. more: the cluster takes
// another unit after this one (KILN_WGMMA_TAIL hands the slots back only then).
// KILN_WGMMA_TAIL: the ranks' stores are st.async, each completing its 16 bytes on the leader's
// rfull (count 1: the leader's thread 0 arrives with the bytes of every warp that has rows < M),
// so no rank thread fences or arrives.
template <int MW, int BN, int CK>
__device__ __forceinline__ bool kwg_cluster_reduce(float (&acc)[MW][BN / 2], float (&ss)[MW][2], unsigned red,
                                                   unsigned rfull, unsigned rempty, unsigned krank, unsigned use,
                                                   long long rbase, long long M, int c, bool more)
{
    constexpr int NS = KILN_MATMUL_NORM ? 1 : 0, CH = BN / 8 + NS;
    constexpr unsigned SLOT = (unsigned)(MW * 128 * CH * 16);
    const int wt = threadIdx.x & 127, warp = wt >> 5;
    (void)ss;
    (void)more;
    if (krank != 0) {
        // the leader has read this rank's slot of the previous unit
        if (use > 0) kwg_bar_wait(rempty, (use - 1u) & 1u, true);
        const unsigned slot = kwg_mapa(red + (krank - 1u) * SLOT, 0u);
#if KILN_WGMMA_TAIL
        const unsigned rb = kwg_mapa(rfull, 0u);
#endif
#pragma unroll
        for (int mi = 0; mi < MW; mi++) {
            if (rbase + mi * 64 + warp * 16 >= M) continue; // uniform across the warp
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                const unsigned a = slot + (unsigned)(((mi * CH + j) * 128 + wt) * 16);
#if KILN_WGMMA_TAIL
                kwg_st_async4(a, acc[mi][4 * j], acc[mi][4 * j + 1], acc[mi][4 * j + 2], acc[mi][4 * j + 3], rb);
#else
                kwg_st_cluster4(a, acc[mi][4 * j], acc[mi][4 * j + 1], acc[mi][4 * j + 2], acc[mi][4 * j + 3]);
#endif
            }
#if KILN_MATMUL_NORM
#if KILN_WGMMA_TAIL
            kwg_st_async4(slot + (unsigned)(((mi * CH + BN / 8) * 128 + wt) * 16), ss[mi][0], ss[mi][1], 0.f, 0.f, rb);
#else
            kwg_st_cluster4(slot + (unsigned)(((mi * CH + BN / 8) * 128 + wt) * 16), ss[mi][0], ss[mi][1], 0.f, 0.f);
#endif
#endif
        }
#if !KILN_WGMMA_TAIL
        kwg_bar_arrive_release_cluster(kwg_mapa(rfull, 0u));
#endif
        return false;
    }
#if KILN_WGMMA_TAIL
    if (wt == 0) { // the bytes of this unit: every warp with rows < M of every other rank
        unsigned bytes = 0;
#pragma unroll
        for (int mi = 0; mi < MW; mi++) {
            const long long left = M - (rbase + mi * 64);
            const unsigned warps = left <= 0 ? 0u : left >= 64 ? 4u : (unsigned)((left + 15) / 16);
            bytes += warps * 32u * (unsigned)CH * 16u;
        }
        kwg_bar_expect_tx(rfull, (unsigned)(CK - 1) * bytes);
    }
#endif
    kwg_bar_wait(rfull, use & 1u, true);
#pragma unroll 1
    for (int r = 0; r < CK - 1; r++) {
        const unsigned slot = red + (unsigned)r * SLOT;
#pragma unroll
        for (int mi = 0; mi < MW; mi++) {
            if (rbase + mi * 64 + warp * 16 >= M) continue;
#pragma unroll
            for (int j = 0; j < BN / 8 + NS; j++) {
                float4 v;
                asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                             : "r"(slot + (unsigned)(((mi * CH + j) * 128 + wt) * 16))
                             : "memory");
                if (j < BN / 8) {
                    acc[mi][4 * j] += v.x;
                    acc[mi][4 * j + 1] += v.y;
                    acc[mi][4 * j + 2] += v.z;
                    acc[mi][4 * j + 3] += v.w;
                } else {
                    ss[mi][0] += v.x;
                    ss[mi][1] += v.y;
                }
            }
        }
    }
    // every thread of the warpgroup has read the slots: hand them back. (compute-sanitizer's
    // racecheck does not follow this ordering — the reads, the named barrier, then one thread's
    // release arrival that the rank acquires before it stores again — and reports the exchange
    // when a cluster takes a second tile (more tiles than resident clusters); codegen's splits
    // never do: README, "The M = 32 projections")
    if (KILN_WGMMA_TAIL && !more) return true; // the last unit: nothing will overwrite the slots
    kwg_wg_sync(1 + c);
    if (wt == 0)
#pragma unroll 1
        for (int r = 1; r < CK; r++) kwg_bar_arrive_release_cluster(kwg_mapa(rempty, (unsigned)r));
    return true;
}
#endif

// KILN_WGMMA_EPI_EARLY: what the epilogue of this consumer's tile will read, asked for while
// its mainloop still runs. The QKV epilogue: this thread's rows' positions, loaded into `pos`
// (held in registers until the epilogue: the load completes under the mainloop and leaves the
// line in the SM's L1, where the epilogue's own loads find it). Else kiln_epilogue_warm (L2
// prefetches) at every 8th column of the tile for this thread's rows: lane l of a quad takes
// columns 8 * (l % 4) + 32 * j.
template <int MW, int BN>
__device__ __forceinline__ void kwg_warm(const KilnArgs &p, long long b, long long rbase, int nb, long long M,
                                         long long N, int (&pos)[MW][2])
{
    const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
    (void)p;
    (void)b;
    (void)nb;
    (void)N;
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long long m = rbase + mi * 64 + warp * 16 + (lane >> 2) + h * 8;
            pos[mi][h] = 0;
            if (m >= M) continue;
#if KILN_WGMMA_QKV
            pos[mi][h] = kiln_qkv_pos(p, m / kiln_qkv_rows(p));
#elif defined(KILN_HAS_EPILOGUE_WARM)
#pragma unroll
            for (int j = 0; j < BN / 32; j++) {
                const long long n = (long long)nb * BN + j * 32 + (lane & 3) * 8;
                if (n < N) (void)kiln_epilogue_warm(p, b, m, n, 0.f, 0.f, n + 1 < N);
            }
#endif
        }
}

#if KILN_MATMUL_NORM
// The folded norm's sums of squares (KILN_MATMUL_NORM). kwg_norm_load reads, from the
// consumer's slot `tile` (its MW m64 blocks of 128-byte rows), a quarter of rows mi*64 +
// warp*16 + lane/4 + 8h: two 16-byte chunks per row and lane. It reads physical chunks
// (2 * (lane & 3) + q) ^ (lane / 4): the four lanes of a quad still cover all eight chunks of
// their row, whatever the swizzle did to them, and the eight rows of one load hit distinct
// banks (four wavefronts for 512 bytes). A warp whose 16 rows all lie at or past M (rows0:
// the first row of the tile's block) reads nothing. kwg_norm_add then adds the squares;
// kwg_norm_scale reduces the quad's sums once the tile's K is done.
template <int MW> struct kwg_norm_regs {
    unsigned v[MW][2][2][4];
};
template <int MW>
__device__ __forceinline__ void kwg_norm_load(kwg_norm_regs<MW> &r, unsigned tile, int warp, int lane, long long rows0,
                                              long long M)
{
#pragma unroll
    for (int mi = 0; mi < MW; mi++) {
        if (rows0 + mi * 64 + warp * 16 >= M) continue; // uniform across the warp
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const unsigned ch = (unsigned)(((lane & 3) * 2 + q) ^ ((lane >> 2) & 7));
                const unsigned a = tile + (unsigned)((mi * 64 + warp * 16 + (lane >> 2) + h * 8) * 128) + 16u * ch;
                asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(r.v[mi][h][q][0]), "=r"(r.v[mi][h][q][1]), "=r"(r.v[mi][h][q][2]),
                               "=r"(r.v[mi][h][q][3])
                             : "r"(a));
            }
    }
}
template <int MW>
__device__ __forceinline__ void kwg_norm_add(float (&ss)[MW][2], const kwg_norm_regs<MW> &r, int warp, long long rows0,
                                             long long M)
{
#pragma unroll
    for (int mi = 0; mi < MW; mi++) {
        if (rows0 + mi * 64 + warp * 16 >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int q = 0; q < 2; q++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const unsigned v = r.v[mi][h][q][e];
#if KILN_WGMMA_F16
                    const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&v));
                    const float lo = f.x, hi = f.y;
#else
                    const float lo = __uint_as_float(v << 16), hi = __uint_as_float(v & 0xffff0000u);
#endif
                    ss[mi][h] = fmaf(lo, lo, fmaf(hi, hi, ss[mi][h]));
                }
    }
}

// rs = rsqrt(mean + eps) of each accumulator row once the tile's K is done; the accumulators
// are scaled by it (rows past M summed zeros: their values are never stored)
template <int MW, int BN>
__device__ __forceinline__ void kwg_norm_scale(float (&ss)[MW][2], float (&acc)[MW][BN / 2], long long K)
{
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float v = ss[mi][h];
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            const float rs = rsqrtf(v * (1.0f / (float)K) + KILN_EPS);
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                acc[mi][j * 4 + h * 2] *= rs;
                acc[mi][j * 4 + h * 2 + 1] *= rs;
            }
            ss[mi][h] = 0.f;
        }
}
#endif

// BM x BN: the tile of one unit of work per CTA. PP 0 (cooperative): both consumer
// warpgroups share each tile, BM/2 rows each. PP 1 (ping-pong): the consumers take whole
// tiles in turn, so one's epilogue runs under the other's mainloop; an ordering barrier pair
// makes their mainloops alternate. CM 2: a cluster of two CTAs takes two row blocks of one
// column block; each CTA loads its A box and half of the W box, multicast to both.
// TS: the epilogue through shared memory and TMA stores of the map `to` (EC output columns
// staged at a time); else kiln_epilogue2 from registers. S > 1: split-K (S slices of K per
// tile, p.ws / p.sem as kwg_splitk says; CM 1 only: with clusters S is taken as 1). CK > 1:
// split-K in a cluster of CK CTAs along y (the header; S is then taken as 1).
template <int BM, int BN, int STAGES, int GROUP_M, bool PP, int CM, bool TS, int EC, int CK = 1>
__device__ __forceinline__ void kwg_main(const KilnArgs &p, const kiln_tmap *ta, const kiln_tmap *tw,
                                         const kiln_tmap *to, int S)
{
    if (CM > 1 || CK > 1 || S < 1 || !KILN_WGMMA_SPLIT_FIELDS) S = 1;
    static_assert(CK >= 1 && CK <= 8, "KILN_WGMMA_CLUSTER_K: 1 to 8 (the portable cluster size)");
    static_assert(CK == 1 || CM == 1, "split-K in a cluster needs KILN_CLUSTER_M 1");
    constexpr bool ALT = PP && CK == 1; // ping-pong consumers taking units in turn
    static_assert(sizeof(KILN_T) == 2, "matmul_wgmma.cuh: bf16 or f16 only");
    static_assert(kwg_same<KILN_T, __half>::value == (KILN_WGMMA_F16 != 0), "KILN_WGMMA_F16 must match KILN_T");
    constexpr int CW = PP ? 1 : 2;  // consumer warpgroups per tile
    constexpr int MW = BM / 64 / CW; // m64 blocks per consumer
    static_assert(BM % (64 * CW) == 0 && MW >= 1, "KILN_BM: 128 or 256 (cooperative), 64 or 128 (ping-pong)");
    static_assert(BN == 16 || BN == 32 || BN == 48 || BN == 64 || BN == 96 || BN == 112 || BN == 128 || BN == 160 ||
                      BN == 192 || BN == 224 || BN == 256,
                  "KILN_BN: one of kwg_mma's widths (64, 128, 256; 16, 32, 48, 96, 112, 160, 192, 224)");
    static_assert(MW * BN <= 256, "the accumulators do not fit the registers (MW * BN / 2 floats per thread)");
    static_assert(CM == 1 || CM == 2, "KILN_CLUSTER_M must be 1 or 2");
    static_assert(STAGES >= 2, "KILN_STAGES must be at least 2");
    static_assert(KWG_SMEM_TOTAL(BM, BN, STAGES, PP, TS ? EC : 0) + KWG_SMEM_RED(BM, BN, CK, KILN_MATMUL_NORM) +
                          KWG_SMEM_RES <=
                      227 * 1024,
                  "the ring and the staging do not fit in shared memory");
    constexpr unsigned A_BYTES = BM * KWG_BK * 2, B_BYTES = BN * KWG_BK * 2, B_PART = B_BYTES / CM;

    extern __shared__ unsigned char kwg_smem[];
    const unsigned base = (kwg_saddr(kwg_smem) + 1023u) & ~1023u;
    const unsigned sA = base, sB = base + STAGES * A_BYTES, sC = sB + STAGES * B_BYTES;
    const unsigned sR = sC + (TS ? (unsigned)(2 * MW * 64 * EC * 2) : 0u); // CK: the exchange buffers
    constexpr unsigned RED_C = CK > 1 ? (unsigned)((CK - 1) * MW * 128 * (BN / 8 + (KILN_MATMUL_NORM ? 1 : 0)) * 16) : 0u;
    const unsigned bars = sR + (CK > 1 ? (PP ? 1u : 2u) * RED_C : 0u);
#define KWG_FULL(s) (bars + 8u * (unsigned)(s))
#define KWG_EMPTY(s) (bars + 8u * (unsigned)(STAGES + (s)))
#define KWG_ORDER(c) (bars + 8u * (unsigned)(2 * STAGES + (c)))
#define KWG_RFULL(c) (bars + 8u * (unsigned)(2 * STAGES + 3 + (c)))
#define KWG_REMPTY(c) (bars + 8u * (unsigned)(2 * STAGES + 5 + (c)))
#define KWG_RES(c) KWG_RFULL(c) // KILN_WGMMA_RES_TMA (no split-K exchange then)

    const long long M = p.M, N = p.N, K = p.K;
    const int tiles_m = (int)((M + BM - 1) / BM), tiles_n = (int)((N + BN - 1) / BN);
    const int units_m = (tiles_m + CM - 1) / CM;
    const int ktiles = (int)((K + KWG_BK - 1) / KWG_BK);
    const long long per_batch = (long long)units_m * tiles_n, nunits = per_batch * p.batch * S; // CK: S is 1
    const int group = GROUP_M / CM > 0 ? GROUP_M / CM : 1;
    const unsigned rank = CM > 1 ? kwg_cluster_rank() : 0u;
    const unsigned krank = CK > 1 ? kwg_cluster_rank() : 0u; // CK: this CTA's K slice
    const long long cluster = blockIdx.x / CM, nclusters = gridDim.x / CM;
    // unit u's tile t, slice sl and K steps [k0, k0 + nk)
    auto slice = [&](long long u, long long &t, int &sl, int &k0, int &nk) {
        if (CK > 1) kwg_slice(u * CK + (long long)krank, CK, ktiles, t, sl, k0, nk);
        else kwg_slice(u, S, ktiles, t, sl, k0, nk);
    };
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            kwg_bar_init(KWG_FULL(s), 1);            // the producer's expect_tx; the bytes complete it
            kwg_bar_init(KWG_EMPTY(s), 4 * CW * CM); // lane 0 of each consumer warp reading it, per CTA
        }
        kwg_bar_init(KWG_ORDER(0), 4);
        kwg_bar_init(KWG_ORDER(1), 4);
        if (KILN_WGMMA_RES_TMA) {
            kwg_bar_init(KWG_RES(0), 1); // the consumer's thread 0's expect_tx; the residual's bytes complete it
            kwg_bar_init(KWG_RES(1), 1);
        }
        if (CK > 1)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                // every thread of the other ranks' consumer; KILN_WGMMA_TAIL: the leader's expect_tx
                kwg_bar_init(KWG_RFULL(c), KILN_WGMMA_TAIL ? 1u : (unsigned)(CK - 1) * 128u);
                kwg_bar_init(KWG_REMPTY(c), 1);                        // the leader's hand-back
            }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (threadIdx.x == 0) { // the maps live in the kernel parameter: no kernel writes them
        kwg_tma_prefetch(ta);
        kwg_tma_prefetch(tw);
    }
    if (CM > 1 || CK > 1) kwg_cluster_sync(); // CK: the peers' barriers are initialized before any arrival
    else __syncthreads();
    // W's boxes: with KILN_WGMMA_W_EVICT_FIRST under the evict-first policy
    constexpr bool W_EARLY = KILN_WGMMA_W_EARLY != 0 && CM == 1;
    unsigned long long wpol = 0;
    if (KILN_WGMMA_W_EVICT_FIRST && threadIdx.x == 0) wpol = kwg_policy_evict_first();
    auto load_w = [&](int slot, int kt, int nb, int wb) {
        if (KILN_WGMMA_W_EVICT_FIRST)
            kwg_tma_load_hint(sB + slot * B_BYTES, tw, KWG_FULL(slot), kt * KWG_BK, nb * BN, wb, wpol);
        else kwg_tma_load(sB + slot * B_BYTES, tw, KWG_FULL(slot), kt * KWG_BK, nb * BN, wb);
    };
    // KILN_WGMMA_W_EARLY: the W boxes of the first `early` slots of this CTA's first unit (ring
    // slots 0.., phase 0: free) are issued now, before the wait: W is a weight no kernel of the
    // graph writes. Their slots' expect_tx counts the A boxes too, issued after the wait, so no
    // slot completes before its A box has landed.
    int early = 0;
    if (W_EARLY && threadIdx.x == 0 && cluster < nunits) {
        long long t, b;
        int sl, k0, nk, um, nb;
        slice(cluster, t, sl, k0, nk);
        kwg_tile(t, per_batch, units_m, tiles_n, group, b, um, nb);
        early = nk < STAGES ? nk : STAGES;
        for (int e = 0; e < early; e++) {
            kwg_bar_expect_tx(KWG_FULL(e), A_BYTES + B_BYTES);
            load_w(e, k0 + e, nb, p.sw ? (int)b : 0);
        }
        for (int e = early; e < nk && e < early + KILN_WGMMA_W_L2; e++)
            kwg_tma_prefetch_box(tw, (k0 + e) * KWG_BK, nb * BN, p.sw ? (int)b : 0);
    }
    // Programmatic dependent launch (common.cuh): everything above touched only shared memory,
    // the parameter and W; A, the epilogue's operands, the output and the split-K workspace may
    // belong to the kernel before, so every thread waits here, under that kernel's tail.
    kiln_pdl_wait();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) {
            int s = 0;
            unsigned ph = 0;
            for (long long u = cluster; u < nunits; u += nclusters) {
                long long t, b;
                int sl, k0, nk, um, nb;
                slice(u, t, sl, k0, nk);
                kwg_tile(t, per_batch, units_m, tiles_n, group, b, um, nb);
                const int mb = um * CM + (int)rank;
                const int ab = p.sa ? (int)b : 0, wb = p.sw ? (int)b : 0;
                for (int kt = k0; kt < k0 + nk; kt++) {
                    if (early > 0) { // slot s of the first pass: its W box and expect_tx are issued
                        early--;
                        kwg_tma_load(sA + s * A_BYTES, ta, KWG_FULL(s), kt * KWG_BK, mb * BM, ab);
                    } else {
                        kwg_bar_wait(KWG_EMPTY(s), ph ^ 1u);
                        kwg_bar_expect_tx(KWG_FULL(s), A_BYTES + B_BYTES);
                        kwg_tma_load(sA + s * A_BYTES, ta, KWG_FULL(s), kt * KWG_BK, mb * BM, ab);
                        if (CM == 1) load_w(s, kt, nb, wb);
                        else
                            kwg_tma_load_mc(sB + s * B_BYTES + rank * B_PART, tw, KWG_FULL(s), kt * KWG_BK,
                                            nb * BN + (int)rank * (BN / CM), wb, (unsigned short)((1u << CM) - 1u));
                    }
                    if (++s == STAGES) {
                        s = 0;
                        ph ^= 1u;
                    }
                }
            }
        }
        // every load of this CTA is issued: the next kernel may start launching (its own
        // kiln_pdl_wait still waits for this whole grid; its CTAs fit only as ours leave)
        kiln_pdl_launch();
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1, wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31;
        const unsigned stage = sC + (unsigned)(c * MW * 64 * EC * 2); // TS: this consumer's staging
        (void)stage;
        float acc[MW][BN / 2];
#if KILN_MATMUL_NORM
        float ss[MW][2] = {}; // the folded norm's sums of squares of this tile's rows
#endif
        bool pending = false; // TMA stores issued by this warpgroup (TS)
        volatile int *flag = reinterpret_cast<volatile int *>(kwg_smem + (bars - kwg_saddr(kwg_smem)) +
                                                              8u * (unsigned)(2 * STAGES + 2)) + c;
        (void)flag;
        (void)pending;
        (void)to;
        // a slot is free again once every consumer warp of the cluster that reads it is done
        auto release = [&](int slot) {
            if (CM == 1) kwg_bar_arrive(KWG_EMPTY(slot));
            else
#pragma unroll
                for (int r = 0; r < CM; r++) kwg_bar_arrive_cluster(KWG_EMPTY(slot), (unsigned)r);
        };
        int s = 0;
        unsigned ph = 0, turn = 0, ruse = 0; // ruse: CK exchanges done
        unsigned rph = 0;                    // KILN_WGMMA_RES_TMA: the phase of KWG_RES(c) to wait for
        (void)rph;
#if !KILN_MATMUL_NORM
        float ss[MW][2]; // (kwg_cluster_reduce's sums: unused without the folded norm)
        (void)ss;
#endif
        (void)ruse;
        long long i = 0;
        // CK with ping-pong tiles: consumer 0 takes every unit, consumer 1 none
        for (long long u = (PP && CK > 1 && c == 1) ? nunits : cluster; u < nunits; u += nclusters, i++) {
            long long t, b;
            int sl, k0, nk, um, nb;
            slice(u, t, sl, k0, nk);
            if (ALT && (int)(i & 1) != c) { // the other consumer's tile: skip its ring slots
                s += nk;
                ph ^= (unsigned)(s / STAGES) & 1u;
                s %= STAGES;
                continue;
            }
            kwg_tile(t, per_batch, units_m, tiles_n, group, b, um, nb);
            const int mb = um * CM + (int)rank;
#if KILN_MATMUL_NORM
            const long long nrow0 = (long long)mb * BM + (PP ? 0 : c * (BM / 2)); // the consumer's first row
#endif
            if (ALT && i > 0) { // the other consumer has issued the previous tile's mainloop
                kwg_bar_wait(KWG_ORDER(c), c == 0 ? ((turn - 1u) & 1u) : (turn & 1u));
            }
            if (ALT) turn++;
            const long long rbase = (long long)mb * BM + (PP ? 0 : c * (BM / 2));
            int wpos[MW][2]; // KILN_WGMMA_EPI_EARLY with the QKV epilogue: the rows' positions
#pragma unroll
            for (int mi = 0; mi < MW; mi++) wpos[mi][0] = wpos[mi][1] = 0;
            float2 wg_turn[BN / 8]; // KILN_WGMMA_EPI_EARLY 2 with the QKV epilogue: the frequencies
            (void)wg_turn;
#if KILN_WGMMA_EPI_EARLY == 2 && KILN_WGMMA_QKV && KILN_WGMMA_TMA_STORE
            if (krank == 0) kwg_qkv_early<MW, BN>(p, rbase, nb, M, wpos, wg_turn);
#endif
            kwg_pre_regs<MW, BN> pre; // KILN_WGMMA_EPI_EARLY 2: the epilogue's loads
            (void)pre;
            kwg_rr<MW, BN, TS ? EC : 64> rr; // KILN_WGMMA_RES_REGS: the later rounds' residual
            (void)rr;
#if KWG_PRE
            if (krank == 0) kwg_pre_load<MW, BN>(p, b, rbase, nb, M, N, pre);
#endif
            const int warm_at = nk > KWG_WARM_LEAD ? nk - KWG_WARM_LEAD : 0;
            bool res0 = false; // KILN_WGMMA_RES_TMA: round 0's residual asked for under the mainloop
            (void)res0;
            if (nk == 0) {
#pragma unroll
                for (int mi = 0; mi < MW; mi++)
#pragma unroll
                    for (int e = 0; e < BN / 2; e++) acc[mi][e] = 0.f;
            }
#pragma unroll
            for (int mi = 0; mi < MW; mi++) kwg_fence_acc(acc[mi]);
            int prev = 0;
            for (int kt = 0; kt < nk; kt++) {
                kwg_bar_wait(KWG_FULL(s), ph);
#if KILN_MATMUL_NORM
                // the slot's rows for the sums, read while the wgmma group below is issued
                kwg_norm_regs<MW> nr;
                kwg_norm_load<MW>(nr, sA + s * A_BYTES + (unsigned)((PP ? 0 : c * MW) * 64 * 128), warp, lane, nrow0, M);
#endif
                kwg_fence();
#pragma unroll
                for (int kk = 0; kk < KWG_BK / 16; kk++) {
#pragma unroll
                    for (int mi = 0; mi < MW; mi++) {
                        const unsigned long long da =
                            kwg_desc(sA + s * A_BYTES + (unsigned)(((PP ? 0 : c * MW) + mi) * 64 * 128 + kk * 32));
                        const unsigned long long db = kwg_desc(sB + s * B_BYTES + (unsigned)(kk * 32));
                        kwg_mma<BN>::run(acc[mi], da, db, (kt | kk) != 0);
                    }
                }
                kwg_commit();
#if KILN_MATMUL_NORM
                // the sums need the loaded values: every lane has them before this warp's lane 0
                // can release the slot
                kwg_norm_add<MW>(ss, nr, warp, nrow0, M);
#pragma unroll
                for (int mi = 0; mi < MW; mi++) kwg_fence_acc(ss[mi]);
#endif
                if (KILN_WGMMA_EPI_EARLY == 1 && kt == warm_at && krank == 0) kwg_warm<MW, BN>(p, b, rbase, nb, M, N, wpos);
#if KILN_WGMMA_RES_TMA
                if (kt == warm_at) { // the staging is free once the previous tile's stores have read it
                    if (wt == 0) {
                        if (pending) kwg_store_wait_read();
                        kwg_res_issue<MW, BN, EC>(to + 1, stage, KWG_RES(c), b, rbase, nb, 0);
                    }
#if KILN_WGMMA_RES_REGS
                    kwg_rr_load<MW, BN, TS ? EC : 64>(p, b, rbase, nb, M, N, rr);
#endif
                    res0 = true;
                }
#endif
                if (ALT && kt == nk - 1 && lane == 0) kwg_bar_arrive(KWG_ORDER(1 - c)); // your turn
#ifdef KWG_TEST_EARLY_RELEASE
                // tests only (bench/wgmma): a planted race that racecheck must report: the slot
                // is released while the wgmma group reading it may still run
                if (lane == 0) release(s);
#else
                if (kt > 0) {
                    kwg_wait<1>(); // the group that read slot `prev` has retired
                    if (lane == 0) release(prev);
                }
#endif
                prev = s;
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1u;
                }
            }
            if (ALT && nk == 0 && lane == 0) kwg_bar_arrive(KWG_ORDER(1 - c));
            kwg_wait<0>();
#ifndef KWG_TEST_EARLY_RELEASE
            if (nk > 0 && lane == 0) release(prev);
#endif
#pragma unroll
            for (int mi = 0; mi < MW; mi++) kwg_fence_acc(acc[mi]);
#if KILN_WGMMA_CLUSTER_K > 1
            {
                const bool lead = kwg_cluster_reduce<MW, BN, CK>(acc, ss, sR + (unsigned)(PP ? 0 : c) * RED_C,
                                                                 KWG_RFULL(c), KWG_REMPTY(c), krank, ruse, rbase, M, c,
                                                                 u + nclusters < nunits);
                ruse++;
                if (!lead) {
#if KILN_MATMUL_NORM
#pragma unroll
                    for (int mi = 0; mi < MW; mi++) ss[mi][0] = ss[mi][1] = 0.f;
#endif
                    continue; // the leader runs the epilogue
                }
            }
#endif
#if KILN_MATMUL_NORM
            kwg_norm_scale<MW, BN>(ss, acc, K);
#endif
#if KILN_WGMMA_EPI_EARLY && KILN_WGMMA_QKV
            // the positions' loads complete here at the latest (their lines are then in L1)
#pragma unroll
            for (int mi = 0; mi < MW; mi++) asm volatile("" ::"r"(wpos[mi][0]), "r"(wpos[mi][1]));
#endif
#if KILN_WGMMA_SPLIT_FIELDS
            if (S > 1) {
                const long long cidx = t * CW + (PP ? 0 : c);
                if (!kwg_splitk<MW, BN>(p, acc, cidx * S, sl, S, cidx, rbase, M, c, flag)) continue;
            }
#endif
            const bool interior = rbase + MW * 64 <= M && (long long)(nb + 1) * BN <= N;
#if KILN_WGMMA_TMA_STORE
            if (TS) {
#if KILN_WGMMA_QKV
                kwg_epilogue_qkv<MW, BN>(p, to, stage, c, rbase, nb, acc, M, pending, wpos, wg_turn);
#else
                if (interior)
                    kwg_epilogue_tma<false, MW, BN, TS ? EC : 64>(p, to, stage, c, b, rbase, nb, acc, M, N, pending, pre,
                                                                  KWG_RES(c), rph, res0, rr);
                else
                    kwg_epilogue_tma<true, MW, BN, TS ? EC : 64>(p, to, stage, c, b, rbase, nb, acc, M, N, pending, pre,
                                                                 KWG_RES(c), rph, res0, rr);
#endif
                continue;
            }
#endif
            const long long row0 = rbase + warp * 16 + (lane >> 2);
            const long long col0 = (long long)nb * BN + (lane & 3) * 2;
            if (interior) kwg_epilogue<false, MW, BN>(p, b, row0, col0, acc, M, N);
            else kwg_epilogue<true, MW, BN>(p, b, row0, col0, acc, M, N);
        }
        // the staging outlives the stores reading it (KILN_WGMMA_TAIL: their writes complete with
        // the grid, as every store's do; nothing of this kernel reads them)
        if (TS && pending && wt == 0) {
            if (KILN_WGMMA_TAIL) kwg_store_wait_read();
            else kwg_store_wait();
        }
    }
    // A CTA's shared memory must outlive the peer's arrivals on its barriers (and CK's stores).
    if (KILN_WGMMA_TAIL && CM == 1 && CK > 1) kwg_cluster_sync_relaxed();
    else if (CM > 1 || CK > 1) kwg_cluster_sync();
#undef KWG_FULL
#undef KWG_EMPTY
#undef KWG_ORDER
#undef KWG_RFULL
#undef KWG_REMPTY
#undef KWG_RES
}

#ifndef KILN_CLUSTER_M
#define KILN_CLUSTER_M 1
#endif
// The kernel's one parameter: the three tensor maps (A, W, then the output's, encoded only
// with KILN_WGMMA_TMA_STORE), then KilnArgs: 384 + 8*nargs bytes; with KILN_WGMMA_QKV five
// maps (A, W, q, two caches), with KILN_WGMMA_RES_TMA five too (A, W, the output, the residual,
// one unused), 640 + 8*nargs bytes.
struct KilnTmaArgs {
    kiln_tmap a, w, o;
#if KILN_WGMMA_QKV || KILN_WGMMA_RES_TMA
    kiln_tmap c0, c1; // right after o: the QKV epilogue's cache maps (o: its q map); the residual's (c0)
#endif
    KilnArgs p;
};

#ifndef KILN_WGMMA_NO_KERNEL
extern "C" __global__ void __launch_bounds__(KWG_THREADS, 1)
#if KILN_CLUSTER_M > 1
    __cluster_dims__(KILN_CLUSTER_M, 1, 1)
#elif KILN_WGMMA_CLUSTER_K > 1
    __cluster_dims__(1, KILN_WGMMA_CLUSTER_K, 1)
#endif
    KILN_KERNEL(const __grid_constant__ KilnTmaArgs prm)
{
    kwg_main<KILN_BM, KILN_BN, KILN_STAGES, KILN_GROUP_M, KILN_WGMMA_PINGPONG != 0, KILN_CLUSTER_M,
             KILN_WGMMA_TMA_STORE != 0, KILN_WGMMA_EPI_COLS, KILN_WGMMA_CLUSTER_K>(prm.p, &prm.a, &prm.w, &prm.o,
                                                                                  KILN_SPLITK);
}
#endif

#endif // KILN_MATMUL_WGMMA_CUH
