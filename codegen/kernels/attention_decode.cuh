/* codegen/kernels/attention_decode.cuh — attention for a few query rows per
 * sequence (decode, S = 1..16), split-KV ("flash-decoding") on tensor cores.
 *
 * grid (KILN_SPLITS, KV, B): one CTA per (split c, KV head, batch b) serves
 * ALL query heads of its GQA group: its rows are the G*S pairs (s, g)
 * (G = H / KV, row r = s*G + g, head h = kvhead*G + g), packed into mma
 * m-tiles of 16 rows, so each K/V byte of the split is read once for the
 * whole group. The valid length L = o + S comes from p.pos on the device
 * (o = pos[b], or T - S without pos), and so does the split count: the keys
 * any row sees, [lo, L) (lo = 0, or o + 1 - W with a sliding window), are cut
 * into n = ceil((L - lo) / per) splits of per = ceil((L - lo) / KILN_SPLITS)
 * keys rounded up to a tile, KILN_DEC_MINKEYS at least; CTAs c >= n return at once, so the same launch
 * serves every decode step and a short cache costs few splits to combine.
 *
 * Inside a CTA, KILN_DEC_WARPS warps take 16 keys each of a tile of
 * 16*KILN_DEC_WARPS keys (KILN_ATT_THREADS may hold more warps than that: at a
 * small batch the extra warps help issue the loads and do the combine, which
 * reads every split's partial); tiles stream through a KILN_DEC_STAGES-deep
 * cp.async ring (16-byte loads). The first tiles' cached rows (positions < o,
 * written by earlier steps, never by this graph's kernels) are issued before
 * the programmatic-launch wait, so they are in flight while the previous
 * kernel ends; q and the new rows are read after it. Each warp keeps its own
 * online softmax (m, l, acc) in registers; at the end the warps are merged in
 * shared memory into the CTA's partial, written to p.ws. The last of the n
 * CTAs of each (b, KV head) to finish (atomic counter p.sem[b*KV + kvhead],
 * reset to 0 by that CTA so graph replays work) merges the n partials and
 * writes o.
 *
 * p.ws (float): B*S*H*KILN_SPLITS*HD accumulators, then B*S*H*KILN_SPLITS
 * (m, l) pairs; row (b, s, h) split c at index ((b*S + s)*H + h)*SPLITS + c.
 * p.sem: B*KV ints, zero before the first launch (left zero after each).
 *
 * KILN_DEC_CLUSTER C > 1 (sm_90; C == KILN_SPLITS, at most 16): the KILN_SPLITS CTAs of each
 * (KV head, batch) are one thread-block cluster, and they combine through distributed shared
 * memory instead: each CTA leaves its partial (m, l, acc of the m-tile's rows) in its own
 * shared memory, a cluster barrier, then the C CTAs each combine a slice of the rows'
 * outputs, reading every CTA's partial (ld.shared::cluster), and a second barrier before the
 * partials are reused or the CTAs exit. No p.ws, no p.sem, no last-CTA election; every CTA
 * of the cluster takes part (a CTA past the split count has no keys: m = -inf, l = 0).
 * Cluster sizes above 8 need cudaFuncAttributeNonPortableClusterSizeAllowed on the kernel.
 *
 * KILN_DEC_PUSH P > 0 (with a cluster; codegen: when the rows G*S <= P <= 16): the combine is
 * pushed instead: each CTA sends its partial (m, l, acc of its R <= P rows) with st.async into
 * slot c of the leader's (rank 0) shared memory, completing bytes on one mbarrier there, and
 * the CTAs other than the leader exit at once; the leader waits on the mbarrier (acquire) and
 * combines the C slots from its own shared memory. One cluster barrier (its arrive at entry,
 * after the leader initializes the mbarrier; its wait before the first push), no remote reads,
 * no second barrier. R > P writes NaN (codegen never launches it so).
 *
 * KILN_DEC_COLS 1 (with KILN_DEC_PUSH and KILN_HD a multiple of 8 * warps; codegen: only with
 * KILN_CG_DEC_COLS 1, off until measured on a GPU): per key
 * tile one softmax for the whole CTA instead of one per warp: each warp takes 16 keys of Q K^T,
 * the warps' row maxima meet in shared memory (a barrier), each warp writes its keys' P =
 * exp2(s - M) (bf16/f16) into a [16][TK] tile there and its row sums (a barrier), then warp w
 * multiplies the whole tile's P by V's columns [w*HD/NW, (w+1)*HD/NW) (two accumulator sets,
 * even and odd key steps). The CTA's partial is then already split by columns over the warps:
 * no warp merge, each warp pushes its columns. Shared memory after the mbarrier's 16 bytes:
 * P [16][PCHP] 16-byte chunks (PCHP = TK / 8 rounded up to 8), then 2 * 16 * NW floats.
 *
 * The cached rows (positions below o, every row of a split that holds no new position) are
 * loaded with a fixed 16-byte chunk column per thread and row steps of NT / CH rows (the
 * addresses computed once); the other rows (new rows, zeros past the length) row by row.
 *
 * KILN_ROPE / KILN_APPEND as in attention_prefill.cuh: q row s is rotated at
 * pos[b] + s (at s without p.pos); new keys (positions o .. o+S-1) are read
 * from p.k_new / p.v_new (k rotated), never from the cache, and the CTA whose
 * split holds position o + s writes row s into the caches: one writer per
 * (b, KV head, s), and no CTA reads a row another CTA of the launch writes.
 * Without KILN_APPEND the caches already hold the new rows (the attention is
 * a pure read of q and the caches).
 *
 * KILN_ATT_WINDOW W > 0: query position P sees key j only when P - j < W
 * (only the window is read); KILN_ATT_SOFTCAP c > 0: scores become
 * c * tanh(score * scale / c) (as attention_wgmma.cuh and ir/interp.c).
 *
 * Head dims: any multiple of 16 up to 256 (rows padded to CHP chunks in
 * shared memory). Launch: grid (KILN_SPLITS, KV, B), block KILN_ATT_THREADS
 * (a multiple of 32, at least 32 * KILN_DEC_WARPS; codegen:
 * cg_attention_decode_config). Without a cluster static shared memory (<= 47 KB), or with
 * KILN_DEC_DYNSMEM (a larger ring) dynamic shared memory of the ring and q as below; with a
 * cluster, dynamic shared memory of KILN_DEC_STAGES * 2 * 16 * KILN_DEC_WARPS * CHP * 16 bytes
 * (the K/V ring), plus 16 * CHP * 16 with KILN_DEC_QSMEM, plus 16 * (KILN_HD + 2) * 4 (the
 * partial; with KILN_DEC_PUSH P instead C * P * (KILN_HD + 2) * 4 + 16: the slots and the
 * mbarrier); codegen: cg_attention_decode_smem. One split (the cache length gives a single
 * split) writes the output itself: no partials, no counter. Any S works (rows beyond 16 take further passes
 * over the split), but the kernel is made for G*S <= 16. An invalid offset
 * (o < 0 or o + S > T) writes NaN to the output rows.
 */

#ifndef KILN_ATT_HELPERS
#error "attention_decode.cuh: attention_common.cuh must come before it (codegen/kernels/CONTRACT.md)"
#endif
#ifndef KILN_SPLITS
#define KILN_SPLITS 16
#endif
#ifndef KILN_DEC_WARPS
#define KILN_DEC_WARPS (KILN_HD > 128 ? 1 : 2)
#endif
#ifndef KILN_DEC_STAGES
#define KILN_DEC_STAGES (KILN_HD > 64 ? 2 : 4)
#endif
#ifndef KILN_ATT_THREADS
#define KILN_ATT_THREADS (32 * KILN_DEC_WARPS)
#endif
#ifndef KILN_DEC_QSMEM
/* 1: q's fragments are read from shared memory for every key tile instead of held in
 * registers (head dims above 128: the registers go to the accumulators; at head dim 128 with a
 * cluster a thread then fits in 128 registers, see KILN_DEC_MINB) */
#define KILN_DEC_QSMEM (KILN_HD > 128)
#endif
#ifndef KILN_DEC_CLUSTER
#define KILN_DEC_CLUSTER 1
#endif
#ifndef KILN_DEC_DYNSMEM
/* 1: the K/V ring (and q with KILN_DEC_QSMEM) in dynamic shared memory without a cluster too
 * (codegen: when the ring passes 47 KB; cg_attention_decode_smem) */
#define KILN_DEC_DYNSMEM (KILN_DEC_CLUSTER > 1)
#endif
#ifndef KILN_DEC_MINB
/* CTAs per SM for __launch_bounds__. 4 with 128 threads caps a thread at 128 registers (the
 * cluster shapes of the 1B and 8B layers, the 8B's with KILN_DEC_QSMEM 1, compile so without
 * spills), so a CTA fits beside the two CTAs per SM of a GEMV capped at 96 (gemv.cuh
 * KILN_GEMV_NREG, KILN_GEMV_EARLY_LAUNCH): README, "Decode attention beside the QKV GEMV" */
#define KILN_DEC_MINB 1
#endif
#ifndef KILN_DEC_LAUNCH_AT
/* where the CTAs let the next kernel launch (programmatic dependent launch): 0 once their keys
 * are read (the default), 1 right after kiln_pdl_wait, 2 at entry (the next kernel's CTAs then
 * take the room the previous kernel's CTAs leave as they exit, and issue their weight loads
 * under this kernel's run; its kiln_pdl_wait still waits for this whole grid) */
#define KILN_DEC_LAUNCH_AT 0
#endif
#ifndef KILN_DEC_TIMING
#define KILN_DEC_TIMING 0
#endif
#ifndef KILN_DEC_PUSH
/* with a cluster: > 0, the partials of at most this many rows pushed into the leader's shared
 * memory (the header); 0, the two-barrier combine through distributed shared memory */
#define KILN_DEC_PUSH 0
#endif
#ifndef KILN_DEC_COLS
/* with KILN_DEC_PUSH: 1, one softmax per key tile for the whole CTA and P V split by columns
 * among the warps (KILN_HD a multiple of 8 * KILN_DEC_WARPS; the header) */
#define KILN_DEC_COLS 0
#endif
#ifndef KILN_DEC_MINKEYS
/* the fewest keys a split takes (rounded up to a tile): about 16 KB of K and V (32 KB above
 * head dim 128), so a short cache is cut into few splits (fewer partials to combine) */
#define KILN_DEC_MINKEYS (KILN_HD > 128 ? 32 : 8192 / (KILN_HD * 2))
#endif

/* ---- the decode kernel --------------------------------------------------- */

namespace katt {
/* sc (keys key0 + 8n .. +7) = Q K^T over a 16-key slice, as katt::qk, but the head dim's steps
 * alternate between two accumulators added at the end: two dependent mma chains of HD/32 steps
 * instead of one of HD/16 (one key tile per CTA leaves that chain on the critical path). QS: q's A
 * fragments read from the 16-row tile sQ as they are needed (else from qf). */
template <int NK, bool QS>
__device__ __forceinline__ void qk_dec(float (&sc)[NK / 8][4], const unsigned (&qf)[HD / 16][4], const uint4 *sQ,
                                       const uint4 *sK, int key0, int lane)
{
    const int mi = lane >> 3;
    float s2[NK / 8][4];
#pragma unroll
    for (int n = 0; n < NK / 8; n++) {
        sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
        s2[n][0] = s2[n][1] = s2[n][2] = s2[n][3] = 0.f;
    }
#pragma unroll
    for (int ks = 0; ks < HD / 16; ks++) {
        unsigned a[4];
        if constexpr (QS) ldsm4(a, &sQ[swz((mi & 1) * 8 + (lane & 7), ks * 2 + (mi >> 1))]);
        else a[0] = qf[ks][0], a[1] = qf[ks][1], a[2] = qf[ks][2], a[3] = qf[ks][3];
#pragma unroll
        for (int np = 0; np < NK / 16; np++) {
            unsigned bf[4];
            ldsm4(bf, &sK[swz(key0 + np * 16 + (mi >> 1) * 8 + (lane & 7), ks * 2 + (mi & 1))]);
            if (!QS && (ks & 1)) { /* q from shared memory (head dims above 128): one chain, fewer registers */
                mma(s2[2 * np], a, bf[0], bf[1]);
                mma(s2[2 * np + 1], a, bf[2], bf[3]);
            } else {
                mma(sc[2 * np], a, bf[0], bf[1]);
                mma(sc[2 * np + 1], a, bf[2], bf[3]);
            }
        }
    }
    if constexpr (!QS)
#pragma unroll
        for (int n = 0; n < NK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) sc[n][e] += s2[n][e];
}
} /* namespace katt */

static_assert(KILN_ATT_THREADS % 32 == 0 && KILN_ATT_THREADS >= 32 * KILN_DEC_WARPS && KILN_ATT_THREADS <= 512,
              "decode: KILN_ATT_THREADS a multiple of 32, at least 32 * KILN_DEC_WARPS, at most 512");
static_assert(KILN_DEC_STAGES >= 2, "decode: KILN_DEC_STAGES >= 2");
static_assert(KILN_SPLITS >= 1 && KILN_SPLITS <= 256, "decode: KILN_SPLITS 1..256");
static_assert(KILN_DEC_CLUSTER == 1 || (KILN_DEC_CLUSTER == KILN_SPLITS && KILN_DEC_CLUSTER <= 16),
              "decode: a cluster holds all KILN_SPLITS CTAs of a (KV head, batch), at most 16");
static_assert(KILN_DEC_CLUSTER == 1 || KILN_DEC_DYNSMEM, "decode: a cluster's ring is in dynamic shared memory");
static_assert(KILN_DEC_PUSH == 0 || (KILN_DEC_CLUSTER > 1 && KILN_DEC_PUSH <= 16),
              "decode: KILN_DEC_PUSH (1..16 rows) needs a cluster");
static_assert(KILN_DEC_COLS == 0 || (KILN_DEC_PUSH > 0 && KILN_HD % (8 * KILN_DEC_WARPS) == 0),
              "decode: KILN_DEC_COLS needs KILN_DEC_PUSH and KILN_HD a multiple of 8 * KILN_DEC_WARPS");

#if KILN_DEC_CLUSTER > 1
namespace katt {
/* The shared::cluster address of this CTA's shared variable at `p` in CTA `rank` of the cluster. */
__device__ __forceinline__ unsigned dsmem_addr(const void *p, unsigned rank)
{
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
    return r;
}
__device__ __forceinline__ float4 ld_dsmem4(unsigned a)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ float2 ld_dsmem2(unsigned a)
{
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(a) : "memory");
    return v;
}
/* every thread of every CTA of the cluster: writes before it are seen by reads after it */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* KILN_DEC_PUSH: the cluster barrier in two halves (the arrive orders nothing: the leader's
 * mbarrier initialization is published by fence.mbarrier_init, and the wait acquires it) */
__device__ __forceinline__ void cluster_arrive_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
/* two transposed 8x8 matrices (lanes 0-15 give the rows' addresses) */
__device__ __forceinline__ void ldsm2t(unsigned (&r)[2], const void *s)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_u32(s))
                 : "memory");
}
__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* the leader's mbarrier: one arrival (its own, with the bytes it expects from the others) */
__device__ __forceinline__ void mbar_init_expect(void *bar, unsigned bytes)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n"
                 "fence.mbarrier_init.release.cluster;\n"
                 "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait_cluster(const void *bar, unsigned parity)
{
    unsigned done;
    do {
        asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, P;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}
/* stores into another CTA's shared memory (shared::cluster addresses from dsmem_addr) that
 * complete their bytes on that CTA's mbarrier `bar` */
__device__ __forceinline__ void st_async4(unsigned a, float4 v, unsigned bar)
{
    asm volatile("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(a),
                 "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)),
                 "r"(__float_as_uint(v.w)), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void st_async2(unsigned a, float2 v, unsigned bar)
{
    asm volatile("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n" ::"r"(a),
                 "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(bar)
                 : "memory");
}
} /* namespace katt */
#define KDEC_CLUSTER_ATTR __cluster_dims__(KILN_DEC_CLUSTER, 1, 1)
#else
#define KDEC_CLUSTER_ATTR
#endif

/* KILN_DEC_TIMING 1 (tests only, with a cluster: p.ws is free): thread 0 of each CTA writes
 * %globaltimer at the kernel's entry and SM clock stamps at its milestones to p.ws as
 * unsigned long long [CTA][16] (CTA = (b * KV + kvh) * SPLITS + c): 0 globaltimer at entry,
 * 1..10 clock64 at entry, positions read, first loads issued, after the wait, q and the first
 * tiles landed, keys done, partial stored, first cluster barrier, combined, second barrier. */
#if KILN_DEC_TIMING && KILN_DEC_CLUSTER > 1
#define KDEC_STAMP(k)                                                                                 \
    do {                                                                                              \
        if (threadIdx.x == 0) {                                                                       \
            unsigned long long t_;                                                                    \
            asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t_)::"memory");                            \
            ((unsigned long long *)p.ws)[(((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + \
                                          blockIdx.x) * 16 + (k)] = t_;                               \
        }                                                                                             \
    } while (0)
#else
#define KDEC_STAMP(k) ((void)0)
#endif

#if KILN_DEC_MINB > 1
#define KDEC_BOUNDS __launch_bounds__(KILN_ATT_THREADS, KILN_DEC_MINB)
#elif KILN_DEC_COLS
/* one CTA per SM said outright: without it ptxas holds the kernel at 128 registers and spills
 * (eight warps, a ring of three stages) */
#define KDEC_BOUNDS __launch_bounds__(KILN_ATT_THREADS, 1)
#else
#define KDEC_BOUNDS __launch_bounds__(KILN_ATT_THREADS)
#endif
extern "C" __global__ void KDEC_BOUNDS KDEC_CLUSTER_ATTR KILN_KERNEL(KilnArgs p)
{
    using namespace katt;
    constexpr int NW = KILN_DEC_WARPS, NT = KILN_ATT_THREADS, TK = 16 * NW, NWT = NT / 32;
    constexpr int STG = KILN_DEC_STAGES, SPL = KILN_SPLITS, WIN = KILN_ATT_WINDOW;
    constexpr float CAP = (float)(KILN_ATT_SOFTCAP);
    constexpr int STAGE = 2 * TK * CHP; /* uint4s per stage: K tile, then V tile */
    constexpr int CL = KILN_DEC_CLUSTER;
    static_assert(NW * 16 * (HD + 2) * 4 <= STG * STAGE * 16, "decode: warp merge does not fit");
    static_assert(16 * SPL * 4 <= STG * STAGE * 16, "decode: split weights do not fit");
#if KILN_DEC_DYNSMEM
    /* dynamic shared memory (the header's formula): the K/V ring, q, the cluster's partial */
    extern __shared__ __align__(128) uint4 kdec_smem[];
    uint4 *const sbuf = kdec_smem;
#if KILN_DEC_QSMEM
    uint4 *const sQbuf = sbuf + STG * STAGE; /* q stays here for the whole split */
#endif
#if KILN_DEC_CLUSTER > 1 && KILN_DEC_PUSH
    /* the leader's slots: acc [CL][P][HD], then (m, l) [CL][P][2], then its mbarrier */
    constexpr int PR = KILN_DEC_PUSH;
    float *const sRecv = (float *)(sbuf + STG * STAGE + (KILN_DEC_QSMEM ? 16 * CHP : 0));
    float *const sRml = sRecv + CL * PR * HD;
    unsigned long long *const sBar = (unsigned long long *)(sRml + CL * PR * 2);
#if KILN_DEC_COLS
    /* the tile's P [16][TK] (16-byte chunks of 8 keys, swizzled as swz), the warps' row maxima
     * and row sums [16][NW] */
    uint4 *const sP = (uint4 *)((char *)sBar + 16);
    float *const sMx = (float *)(sP + 16 * ((16 * KILN_DEC_WARPS / 8 + 7) & ~7));
    float *const sSm = sMx + 16 * KILN_DEC_WARPS;
#endif
#elif KILN_DEC_CLUSTER > 1
    /* this CTA's partial of an m-tile: acc [16][HD], then (m, l) [16][2] */
    float *const sPart = (float *)(sbuf + STG * STAGE + (KILN_DEC_QSMEM ? 16 * CHP : 0));
    float *const sPml = sPart + 16 * HD;
#endif
#else
    static_assert(STG * STAGE * 16 + (KILN_DEC_QSMEM ? 16 * CHP * 16 : 0) <= 47 * 1024,
                  "decode stages exceed 47 KB of shared memory");
    __shared__ __align__(128) uint4 sbuf[STG * STAGE];
#if KILN_DEC_QSMEM
    __shared__ __align__(128) uint4 sQbuf[16 * CHP]; /* q stays here for the whole split */
#endif
#endif
#if KILN_ROPE
    __shared__ double sInv[HD / 2];
#else
    const double *sInv = nullptr;
#endif
#if KILN_DEC_CLUSTER == 1
    __shared__ int sLast;
#endif

#if KILN_DEC_TIMING && KILN_DEC_CLUSTER > 1
    if (threadIdx.x == 0) {
        unsigned long long g_;
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(g_)::"memory");
        ((unsigned long long *)p.ws)[(((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * 16] = g_;
    }
#endif
    KDEC_STAMP(1);
    if (KILN_DEC_LAUNCH_AT == 2) kiln_pdl_launch();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int S = (int)p.S, T = (int)p.T, H = (int)p.H, KV = (int)p.KV, B = (int)p.B;
    const int G = H / KV, R = G * S;
    /* positions are an input (no kernel of the graph writes them): read before the wait, and
     * first, so that the load is in flight while the mbarrier is set up */
    const int o = p.pos ? ((const int *)p.pos)[b] : T - S;
#if KILN_DEC_PUSH
    /* the leader's mbarrier expects the other CTAs' R rows of HD floats and (m, l); every
     * thread arrives on the cluster barrier, whose wait (before the first push) publishes it */
    if (c == 0 && warp == 0) { /* a branch of whole warps: the init stays one thread's */
        if (lane == 0) mbar_init_expect(sBar, (unsigned)((CL - 1) * min(R, PR) * (HD * 4 + 8)));
        __syncwarp();
    }
    cluster_arrive_relaxed();
#endif
    const int L = o + S;
#if KILN_DEC_TIMING && KILN_DEC_CLUSTER > 1
    if (tid == 0 && o == -12345) ((unsigned long long *)p.ws)[0] = 0; /* o is needed before the stamp */
#endif
    KDEC_STAMP(2);
    elem *out = (elem *)p.o;
    if (o < 0 || L > T || (KILN_DEC_PUSH && R > KILN_DEC_PUSH)) { /* run-time error: make it visible (split 0 writes) */
        kiln_pdl_wait();
        if (c == 0)
            for (int i = tid; i < R * HD; i += NT) {
                const int rr = i / HD, s = rr / G, h = kvh * G + rr % G;
                ((unsigned short *)out)[(((long long)b * S + s) * H + h) * HD + i % HD] = 0x7fff;
            }
        return;
    }
    /* the split count, from the keys any row sees: [lo, L) */
    const int lo = WIN > 0 ? max(0, o + 1 - WIN) : 0;
    constexpr int MINK = (KILN_DEC_MINKEYS + TK - 1) / TK * TK;
    const int per = max(MINK, ((L - lo + SPL - 1) / SPL + TK - 1) / TK * TK);
    const int nsp = (L - lo + per - 1) / per;
    /* not a split at this length: the counter waits for nsp CTAs (a cluster's CTAs all stay) */
    if (CL == 1 && c >= nsp) return;
    const int j0 = lo + c * per, j1 = min(L, j0 + per);
    const int ntiles = max(0, (j1 - j0 + TK - 1) / TK);

    const long long crow = kiln_slot((const int *)p.slot, b); /* the caches' row of batch row b */
    const elem *kc = (const elem *)p.k + (crow * KV + kvh) * T * HD;
    const elem *vc = (const elem *)p.v + (crow * KV + kvh) * T * HD;
#if KILN_APPEND
    const elem *kn = (const elem *)p.k_new + (long long)b * p.kn_sb + (long long)kvh * p.kn_sh;
    const elem *vn = (const elem *)p.v_new + (long long)b * p.vn_sb + (long long)kvh * p.vn_sh;
#endif

    /* keys t*TK .. of this split into stage st. part 0: only the cached rows (< o: no
     * kernel of this graph writes them); 1: only the others (new rows, zeros past j1);
     * 2: all. The cached rows of a tile are its first nc (< min(o, j1)): each thread takes one
     * 16-byte chunk column and every (NT / CH)-th row, its addresses computed once (where NT / CH
     * is a multiple of 8 the swizzle repeats along the rows); the others row by row. */
    auto load_tile = [&](int t, int st, int part) {
        uint4 *sk = sbuf + st * STAGE, *sv = sk + TK * CHP;
        const int jt = j0 + t * TK, nc = max(0, min(TK, min(o, j1) - jt));
        if (part != 1) {
            if constexpr (NT % CH == 0 && (NT / CH) % 8 == 0) {
                constexpr int RS = NT / CH;
                const int cc = tid % CH, r0 = tid / CH;
                const elem *kg = kc + (long long)(jt + r0) * HD + cc * 8, *vg = vc + (long long)(jt + r0) * HD + cc * 8;
                uint4 *skt = sk + swz(r0, cc), *svt = sv + swz(r0, cc);
#pragma unroll
                for (int k = 0; k < (TK + RS - 1) / RS; k++)
                    if (r0 + k * RS < nc) {
                        cp_async16(skt + k * RS * CHP, kg + (long long)k * RS * HD);
                        cp_async16(svt + k * RS * CHP, vg + (long long)k * RS * HD);
                    }
            } else {
                for (int i = tid; i < nc * CH; i += NT) {
                    const int r = i / CH, cc = i % CH;
                    cp_async16(&sk[swz(r, cc)], kc + (long long)(jt + r) * HD + cc * 8);
                    cp_async16(&sv[swz(r, cc)], vc + (long long)(jt + r) * HD + cc * 8);
                }
            }
        }
        if (part == 0) return;
        for (int i = nc * HCH + tid; i < TK * HCH; i += NT) {
            const int r = i / HCH, cc = i % HCH, j = jt + r;
            const elem *ks = nullptr, *vs = nullptr;
            bool rot = false;
            if (j < j1) {
#if KILN_APPEND
                if (j >= o) {
                    ks = kn + (long long)(j - o) * p.kn_ss;
                    vs = vn + (long long)(j - o) * p.vn_ss;
                    rot = KILN_ROPE;
                } else
#endif
                {
                    ks = kc + (long long)j * HD;
                    vs = vc + (long long)j * HD;
                }
            }
            row_pair(sk, r, cc, ks, rot, j, sInv, KILN_ROPE_PAIRED_K);
            row_pair(sv, r, cc, vs, false, j, sInv);
        }
    };

    /* the first tiles' cached rows, before the wait: in flight while the previous kernel ends */
#pragma unroll
    for (int st = 0; st < STG - 1; st++) {
        if (st < ntiles) load_tile(st, st, 0);
        cp_commit();
    }
    /* Programmatic dependent launch (common.cuh): wait for the previous kernel before
     * touching q, o, the workspace or the caches' new rows. */
    KDEC_STAMP(3);
    kiln_pdl_wait();
    if (KILN_DEC_LAUNCH_AT == 1) kiln_pdl_launch();
    KDEC_STAMP(4);
#if KILN_ROPE
    rope_table(sInv, tid, NT);
    __syncthreads();
#endif
#if KILN_APPEND
    /* the cache write: the split that holds position o + s writes row s */
    for (int i = tid; i < S * HCH; i += NT) {
        const int s = i / HCH, cc = i % HCH;
        if (o + s >= j0 && o + s < j1) {
            append_pair((elem *)kc + (long long)(o + s) * HD, kn + (long long)s * p.kn_ss, cc,
                        KILN_ROPE, o + s, sInv, KILN_ROPE_PAIRED_K);
            append_pair((elem *)vc + (long long)(o + s) * HD, vn + (long long)s * p.vn_ss, cc, false,
                        0, sInv);
        }
    }
#endif

#if KILN_DEC_CLUSTER == 1
    float *wsacc = (float *)p.ws;
    float *wsml = wsacc + (long long)B * S * H * SPL * HD;
    /* index of packed row rr's partials (split 0) */
    auto row_base = [&](int rr) -> long long {
        const int s = rr / G, h = kvh * G + rr % G;
        return (((long long)b * S + s) * H + h) * SPL;
    };
#else
    (void)B;
    (void)NWT;
#endif
    const float SL2 = (CAP > 0.f ? 1.f : (float)(KILN_SCALE)) * 1.4426950408889634f;

    for (int mt = 0; mt * 16 < R; mt++) {
#if KILN_DEC_QSMEM
        uint4 *sQ = sQbuf;
#else
        uint4 *sQ = sbuf + (STG - 1) * STAGE; /* the stage the prologue leaves alone */
#endif
        if (mt > 0) {
            __syncthreads(); /* sbuf free (previous m-tile's merge is done) */
#pragma unroll
            for (int st = 0; st < STG - 1; st++) {
                if (st < ntiles) load_tile(st, st, 2);
                cp_commit();
            }
        } else {
#pragma unroll
            for (int st = 0; st < STG - 1; st++)
                if (st < ntiles) load_tile(st, st, 1);
        }
        const elem *qb = (const elem *)p.q + (long long)b * p.q_sb;
        for (int i = tid; i < 16 * HCH; i += NT) {
            const int r = i / HCH, cc = i % HCH, rr = mt * 16 + r;
            const int s = rr / G, h = kvh * G + rr % G;
            row_pair(sQ, r, cc, rr < R ? qb + (long long)s * p.q_ss + (long long)h * p.q_sh : nullptr,
                     KILN_ROPE, (p.pos ? o : 0) + s, sInv, KILN_ROPE_PAIRED_Q);
        }
        cp_commit();
        cp_wait<0>(); /* q and the prologue's tiles */
        __syncthreads();
        if (mt == 0) KDEC_STAMP(5);
#if !KILN_DEC_QSMEM
        unsigned qf[HD / 16][4];
        load_q_frags(qf, sQ, 0, lane);
#endif

#if KILN_DEC_COLS
        /* one softmax for the CTA per key tile, P V split by columns: warp w multiplies the
         * tile's P (all TK keys, shared memory) by V's columns [w*CW, (w+1)*CW); no warp merge */
        constexpr int CW = HD / NW, NCW = CW / 8, PCHP = (TK / 8 + 7) & ~7;
        const int r0 = lane >> 2, col0 = warp * CW;
        float Mx[2] = {ninf(), ninf()}, Ls[2] = {0.f, 0.f};
        float oc[2][NCW][4]; /* two accumulator sets (even and odd key steps): two mma chains */
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int n = 0; n < NCW; n++) oc[h][n][0] = oc[h][n][1] = oc[h][n][2] = oc[h][n][3] = 0.f;
        const int sr0 = (mt * 16 + r0) / G, sr1 = (mt * 16 + r0 + 8) / G;
        for (int t = 0; t < ntiles; t++) {
            if (t > 0 || (!KILN_DEC_QSMEM && STG - 1 < ntiles)) {
                cp_wait<STG - 2>();
                __syncthreads();
            }
            if (t + STG - 1 < ntiles) load_tile(t + STG - 1, (t + STG - 1) % STG, 2);
            cp_commit();
            const uint4 *sk = sbuf + (t % STG) * STAGE, *sv = sk + TK * CHP;
            const int jw = j0 + t * TK + warp * 16;
            float sc[2][4];
            if (warp < NW) {
#if KILN_DEC_QSMEM
                const unsigned qf[HD / 16][4] = {};
                qk_dec<16, true>(sc, qf, sQ, sk, warp * 16, lane);
#else
                qk_dec<16, false>(sc, qf, sQ, sk, warp * 16, lane);
#endif
                float mx[2] = {ninf(), ninf()};
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int j = jw + n * 8 + (lane & 3) * 2 + (e & 1);
                        const int P = o + ((e >> 1) ? sr1 : sr0); /* the row's query position */
                        if (CAP > 0.f) sc[n][e] = CAP * tanhf(sc[n][e] * ((float)(KILN_SCALE) / CAP));
                        if (j >= j1 || (KILN_CAUSAL && j > P) || (WIN > 0 && P - j >= WIN)) sc[n][e] = ninf();
                        mx[e >> 1] = fmaxf(mx[e >> 1], sc[n][e] * SL2);
                    }
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                }
                if ((lane & 3) == 0) {
                    sMx[r0 * NW + warp] = mx[0];
                    sMx[(r0 + 8) * NW + warp] = mx[1];
                }
            }
            __syncthreads(); /* the warps' row maxima */
            float al[2];
            if (warp < NW) {
                float mu[2], ps[2] = {0.f, 0.f};
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    float m = Mx[i];
#pragma unroll
                    for (int w = 0; w < NW; w++) m = fmaxf(m, sMx[(r0 + 8 * i) * NW + w]);
                    mu[i] = m == ninf() ? 0.f : m;
                    al[i] = exp2f(Mx[i] - mu[i]);
                    Mx[i] = m;
                }
#pragma unroll
                for (int n = 0; n < 2; n++) {
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        sc[n][e] = exp2f(fmaf(sc[n][e], SL2, -mu[e >> 1]));
                        ps[e >> 1] += sc[n][e];
                    }
                    /* P of rows r0 and r0 + 8, keys warp*16 + n*8 + (lane&3)*2 .. +1: chunk 2*warp + n */
                    ((unsigned *)&sP[(r0 * PCHP + ((2 * warp + n) ^ (r0 & 7)))])[lane & 3] = pack2(sc[n][0], sc[n][1]);
                    ((unsigned *)&sP[((r0 + 8) * PCHP + ((2 * warp + n) ^ (r0 & 7)))])[lane & 3] = pack2(sc[n][2], sc[n][3]);
                }
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    ps[i] += __shfl_xor_sync(0xffffffffu, ps[i], 1);
                    ps[i] += __shfl_xor_sync(0xffffffffu, ps[i], 2);
                }
                if ((lane & 3) == 0) {
                    sSm[r0 * NW + warp] = ps[0];
                    sSm[(r0 + 8) * NW + warp] = ps[1];
                }
            }
            __syncthreads(); /* P and the warps' row sums */
            if (warp < NW) {
                const int mi = lane >> 3;
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    float s = 0.f;
#pragma unroll
                    for (int w = 0; w < NW; w++) s += sSm[(r0 + 8 * i) * NW + w];
                    Ls[i] = Ls[i] * al[i] + s;
                }
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int n = 0; n < NCW; n++) {
                        oc[h][n][0] *= al[0];
                        oc[h][n][1] *= al[0];
                        oc[h][n][2] *= al[1];
                        oc[h][n][3] *= al[1];
                    }
#pragma unroll
                for (int kk = 0; kk < NW; kk++) { /* keys kk*16 .. +15 of the tile */
                    unsigned a[4];
                    ldsm4(a, &sP[((mi & 1) * 8 + (lane & 7)) * PCHP + ((kk * 2 + (mi >> 1)) ^ (lane & 7))]);
#pragma unroll
                    for (int dp = 0; dp < NCW / 2; dp++) {
                        unsigned bf[4];
                        ldsm4t(bf, &sv[swz(kk * 16 + (mi & 1) * 8 + (lane & 7), col0 / 8 + dp * 2 + (mi >> 1))]);
                        mma(oc[kk & 1][2 * dp], a, bf[0], bf[1]);
                        mma(oc[kk & 1][2 * dp + 1], a, bf[2], bf[3]);
                    }
                    if constexpr (NCW % 2) { /* the last 8 columns: two 8x8 matrices (lanes 0-15 address them) */
                        unsigned bf[2];
                        ldsm2t(bf, &sv[swz(kk * 16 + (mi & 1) * 8 + (lane & 7), col0 / 8 + NCW - 1)]);
                        mma(oc[kk & 1][NCW - 1], a, bf[0], bf[1]);
                    }
                }
            }
        }
#if KILN_DEC_CLUSTER > 1
        if (KILN_DEC_LAUNCH_AT == 0 && mt == 0) kiln_pdl_launch(); /* the cache is read: the next kernel may launch */
        if (mt == 0) KDEC_STAMP(6);
#endif
        const int nr = min(16, R - mt * 16);
        cluster_wait(); /* the leader's mbarrier is initialized (it returns at once by now) */
        const unsigned bar0 = dsmem_addr(sBar, 0u);
        if (warp < NW) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int rw = r0 + 8 * i;
                if (rw >= nr) continue;
#pragma unroll
                for (int n = 0; n < NCW; n++) {
                    const float2 v = make_float2(oc[0][n][2 * i] + oc[1][n][2 * i], oc[0][n][2 * i + 1] + oc[1][n][2 * i + 1]);
                    const int d = col0 + n * 8 + (lane & 3) * 2;
                    if (c == 0) *(float2 *)&sRecv[rw * HD + d] = v; /* the leader's own slot */
                    else st_async2(dsmem_addr(&sRecv[(c * PR + rw) * HD + d], 0u), v, bar0);
                }
                if (warp == 0 && (lane & 3) == 0) {
                    if (c == 0) *(float2 *)&sRml[2 * rw] = make_float2(Mx[i], Ls[i]);
                    else st_async2(dsmem_addr(&sRml[2 * (c * PR + rw)], 0u), make_float2(Mx[i], Ls[i]), bar0);
                }
            }
        }
#else
        float acc[HD / 8][4];
#pragma unroll
        for (int d = 0; d < HD / 8; d++) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
        float m[2] = {ninf(), ninf()}, l[2] = {0.f, 0.f};
        const int sr0 = (mt * 16 + (lane >> 2)) / G, sr1 = (mt * 16 + (lane >> 2) + 8) / G;

        for (int t = 0; t < ntiles; t++) {
            /* tile t landed; every warp is done with tile t-1's stage (tile 0: waited for above;
             * the sync keeps q's stage until every warp holds its fragments, if it is reloaded) */
            if (t > 0 || (!KILN_DEC_QSMEM && STG - 1 < ntiles)) {
                cp_wait<STG - 2>();
                __syncthreads();
            }
            if (t + STG - 1 < ntiles) load_tile(t + STG - 1, (t + STG - 1) % STG, 2);
            cp_commit();
            const uint4 *sk = sbuf + (t % STG) * STAGE, *sv = sk + TK * CHP;
            const int jw = j0 + t * TK + warp * 16;
            if (warp < NW && jw < j1) {
                float sc[2][4];
#if KILN_DEC_QSMEM
                const unsigned qf[HD / 16][4] = {};
                qk_dec<16, true>(sc, qf, sQ, sk, warp * 16, lane);
#else
                qk_dec<16, false>(sc, qf, sQ, sk, warp * 16, lane);
#endif
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int j = jw + n * 8 + (lane & 3) * 2 + (e & 1);
                        const int P = o + ((e >> 1) ? sr1 : sr0); /* the row's query position */
                        if (CAP > 0.f) sc[n][e] = CAP * tanhf(sc[n][e] * ((float)(KILN_SCALE) / CAP));
                        if (j >= j1 || (KILN_CAUSAL && j > P) || (WIN > 0 && P - j >= WIN))
                            sc[n][e] = ninf();
                    }
                float al[2];
                softmax_p<16>(sc, m, l, al, SL2);
                rescale(acc, al);
                pv<16>(acc, sc, sv, warp * 16, lane);
            }
        }

#if KILN_DEC_CLUSTER > 1
        if (KILN_DEC_LAUNCH_AT == 0 && mt == 0) kiln_pdl_launch(); /* the cache is read: the next kernel may launch */
        if (mt == 0) KDEC_STAMP(6);
#endif
        /* merge the warps' partials into the CTA's, write it to p.ws (a cluster: sPart) */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
            l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        }
        cp_wait<0>();
        __syncthreads(); /* every warp is done with the stages */
        float *sm_m = (float *)sbuf, *sm_l = sm_m + NW * 16, *sm_acc = sm_l + NW * 16;
        const int r = lane >> 2, nr = min(16, R - mt * 16); /* only the m-tile's nr rows are read */
        if (warp < NW && (lane & 3) == 0) {
            sm_m[warp * 16 + r] = m[0];
            sm_m[warp * 16 + r + 8] = m[1];
            sm_l[warp * 16 + r] = l[0];
            sm_l[warp * 16 + r + 8] = l[1];
        }
#pragma unroll
        for (int d = 0; d < HD / 8; d++) {
            if (warp >= NW) break;
            if (r < nr)
                *(float2 *)&sm_acc[(warp * 16 + r) * HD + d * 8 + (lane & 3) * 2] = make_float2(acc[d][0], acc[d][1]);
            if (r + 8 < nr)
                *(float2 *)&sm_acc[(warp * 16 + r + 8) * HD + d * 8 + (lane & 3) * 2] = make_float2(acc[d][2], acc[d][3]);
        }
        __syncthreads();
#if KILN_DEC_PUSH
        cluster_wait(); /* the leader's mbarrier is initialized (it returns at once by now) */
        const unsigned bar0 = dsmem_addr(sBar, 0u);
#endif
        for (int i = tid; i < nr * (HD / 4); i += NT) {
            const int rw = i / (HD / 4), d = (i % (HD / 4)) * 4;
            float M = ninf();
#pragma unroll
            for (int w = 0; w < NW; w++) M = fmaxf(M, sm_m[w * 16 + rw]);
            float ls = 0.f;
            float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int w = 0; w < NW; w++) {
                const float mw = sm_m[w * 16 + rw];
                const float f = mw == ninf() ? 0.f : exp2f(mw - M);
                const float4 v = *(const float4 *)&sm_acc[(w * 16 + rw) * HD + d];
                ls += f * sm_l[w * 16 + rw];
                a.x += f * v.x;
                a.y += f * v.y;
                a.z += f * v.z;
                a.w += f * v.w;
            }
#if KILN_DEC_CLUSTER > 1 && KILN_DEC_PUSH
            if (c == 0) { /* the leader's own slot */
                *(float4 *)&sRecv[rw * HD + d] = a;
                if (d == 0) *(float2 *)&sRml[2 * rw] = make_float2(M, ls);
            } else {
                st_async4(dsmem_addr(&sRecv[(c * PR + rw) * HD + d], 0u), a, bar0);
                if (d == 0) st_async2(dsmem_addr(&sRml[2 * (c * PR + rw)], 0u), make_float2(M, ls), bar0);
            }
#elif KILN_DEC_CLUSTER > 1
            *(float4 *)&sPart[rw * HD + d] = a;
            if (d == 0) *(float2 *)&sPml[2 * rw] = make_float2(M, ls);
#else
            if (nsp == 1) { /* one split: it is the output, no partials, no counter */
                const float inv = ls > 0.f ? 1.f / ls : 0.f;
                const int rr = mt * 16 + rw, s = rr / G, h = kvh * G + rr % G;
                *(uint2 *)(out + (((long long)b * S + s) * H + h) * HD + d) =
                    make_uint2(pack2(a.x * inv, a.y * inv), pack2(a.z * inv, a.w * inv));
            } else {
                const long long pi = row_base(mt * 16 + rw) + c;
                __stcg((float4 *)&wsacc[pi * HD + d], a);
                if (d == 0) __stcg((float2 *)&wsml[2 * pi], make_float2(M, ls));
            }
#endif
        }
#endif /* KILN_DEC_COLS */
#if KILN_DEC_CLUSTER > 1
#if KILN_DEC_PUSH
        /* the other CTAs are done (their stores complete on the leader's mbarrier); the leader
         * waits for them and combines the slots from its own shared memory */
        if (mt == 0) KDEC_STAMP(7);
        if (c != 0) {
            KDEC_STAMP(8);
            KDEC_STAMP(9);
            KDEC_STAMP(10);
            return;
        }
        __syncthreads(); /* the leader's own slot */
        mbar_wait_cluster(sBar, 0u);
        if (mt == 0) KDEC_STAMP(8);
        for (int i = tid; i < nr * (HD / 4); i += NT) {
            const int rw = i / (HD / 4), d = (i % (HD / 4)) * 4, rr = mt * 16 + rw;
            float2 ml[CL];
            float4 v[CL];
#pragma unroll
            for (int k = 0; k < CL; k++) {
                ml[k] = *(const float2 *)&sRml[2 * (k * PR + rw)];
                v[k] = *(const float4 *)&sRecv[(k * PR + rw) * HD + d];
            }
#else
        /* the cluster's CTAs combine: output float4 i of the m-tile by thread i mod (CL*NT) */
        if (mt == 0) KDEC_STAMP(7);
        cluster_sync(); /* every CTA's partial is in its shared memory */
        if (mt == 0) KDEC_STAMP(8);
        for (int i = c * NT + tid; i < nr * (HD / 4); i += CL * NT) {
            const int rw = i / (HD / 4), d = (i % (HD / 4)) * 4, rr = mt * 16 + rw;
            float2 ml[CL];
            float4 v[CL];
#pragma unroll
            for (int k = 0; k < CL; k++) {
                ml[k] = ld_dsmem2(dsmem_addr(&sPml[2 * rw], (unsigned)k));
                v[k] = ld_dsmem4(dsmem_addr(&sPart[rw * HD + d], (unsigned)k));
            }
#endif
            float M = ninf();
#pragma unroll
            for (int k = 0; k < CL; k++) M = fmaxf(M, ml[k].x);
            float ls = 0.f;
            float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int k = 0; k < CL; k++) {
                const float f = ml[k].x == ninf() ? 0.f : exp2f(ml[k].x - M);
                ls += f * ml[k].y;
                a.x += f * v[k].x;
                a.y += f * v[k].y;
                a.z += f * v[k].z;
                a.w += f * v[k].w;
            }
            const float inv = ls > 0.f ? 1.f / ls : 0.f;
            const int s = rr / G, h = kvh * G + rr % G;
            *(uint2 *)(out + (((long long)b * S + s) * H + h) * HD + d) =
                make_uint2(pack2(a.x * inv, a.y * inv), pack2(a.z * inv, a.w * inv));
        }
        if (mt == 0) KDEC_STAMP(9);
#if !KILN_DEC_PUSH
        cluster_sync(); /* the partials are read: reusable, and the CTAs may exit */
#endif
        if (mt == 0) KDEC_STAMP(10);
#endif
    }
#if KILN_DEC_CLUSTER == 1

    if (KILN_DEC_LAUNCH_AT == 0) kiln_pdl_launch(); /* the cache is read: the next kernel may launch */
    if (nsp == 1) return; /* the output is written */
    /* publish; the last of the nsp CTAs of (b, KV head) merges the splits */
    __threadfence();
    __syncthreads();
    int *sem = (int *)p.sem + (long long)b * KV + kvh;
    if (tid == 0) sLast = atomicAdd(sem, 1) == nsp - 1;
    __syncthreads();
    if (!sLast) return;
    __threadfence();
    float *sw = (float *)sbuf; /* [16][SPL]: the splits' weights of each row */
    for (int mt = 0; mt * 16 < R; mt++) {
        const int nr = min(16, R - mt * 16);
        __syncthreads();
        /* a warp per row, a lane per split: the weights exp2(m_c - M) / sum_c exp2(m_c - M) l_c */
        for (int rw = warp; rw < nr; rw += NWT) {
            const long long rb = row_base(mt * 16 + rw);
            float2 ml[(SPL + 31) / 32];
            float M = ninf();
#pragma unroll
            for (int k = 0; k < (SPL + 31) / 32; k++) {
                const int cc = k * 32 + lane;
                ml[k] = cc < nsp ? __ldcg((const float2 *)&wsml[2 * (rb + cc)]) : make_float2(ninf(), 0.f);
                M = fmaxf(M, ml[k].x);
            }
#pragma unroll
            for (int off = 16; off; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
            float ls = 0.f;
#pragma unroll
            for (int k = 0; k < (SPL + 31) / 32; k++) {
                ml[k].x = ml[k].x == ninf() ? 0.f : exp2f(ml[k].x - M);
                ls += ml[k].x * ml[k].y;
            }
#pragma unroll
            for (int off = 16; off; off >>= 1) ls += __shfl_xor_sync(0xffffffffu, ls, off);
            const float inv = ls > 0.f ? 1.f / ls : 0.f;
#pragma unroll
            for (int k = 0; k < (SPL + 31) / 32; k++)
                if (k * 32 + lane < nsp) sw[rw * SPL + k * 32 + lane] = ml[k].x * inv;
        }
        __syncthreads();
        for (int i = tid; i < nr * (HD / 4); i += NT) {
            const int rw = i / (HD / 4), d = (i % (HD / 4)) * 4, rr = mt * 16 + rw;
            const float4 *src = (const float4 *)&wsacc[row_base(rr) * HD + d];
            float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 16
            for (int cc = 0; cc < nsp; cc++) {
                const float w = sw[rw * SPL + cc];
                const float4 v = __ldcg(src + (long long)cc * (HD / 4));
                a.x += w * v.x;
                a.y += w * v.y;
                a.z += w * v.z;
                a.w += w * v.w;
            }
            const int s = rr / G, h = kvh * G + rr % G;
            *(uint2 *)(out + (((long long)b * S + s) * H + h) * HD + d) = make_uint2(pack2(a.x, a.y), pack2(a.z, a.w));
        }
    }
    if (tid == 0) *sem = 0;
#endif
}
