/* codegen/kernels/attention_prefill.cuh — attention over many query rows
 * (prefill), FlashAttention-2 style, on tensor cores (mma.sync m16n8k16).
 *
 * One CTA per (query tile of KILN_BQ rows, query head h, batch b); each warp
 * owns 16 query rows and keeps them in registers as mma A fragments. The CTA
 * walks the valid key positions in tiles of KILN_BK rows with an online
 * softmax in float32 (log2 domain, KILN_SCALE * log2(e) folded in):
 *
 *   for each key tile t:   K(t) -> smem   (cp.async, issued one step ahead)
 *                          S = Q K^T      (ldmatrix + mma, f32 accumulators)
 *                          mask, m/l update, P = exp2(S - m) -> bf16/f16
 *                          V(t) -> smem   (issued before S was computed)
 *                          O += P V       (ldmatrix.trans + mma)
 *
 * Causal tile skip: the loop stops at the last key the tile's last query row
 * may see, so fully masked tiles are never loaded; masking is applied only in
 * tiles that straddle the diagonal or the end of the valid keys.
 * GQA: query head h reads KV head h / (H / KV); the CTAs of one group read
 * the same K/V tiles (neighbouring blockIdx.y, so mostly from L2).
 * KILN_ROPE: q (and new k rows) are rotated (rotate-half, KILN_THETA) as they
 * are loaded; angles in double, reduced to [-pi, pi], then __sincosf. Query
 * row s is rotated at pos[b] + s, or at s when p.pos is null (ir ROPE without
 * positions), new key row s at pos[b] + s (APPEND needs p.pos).
 * KILN_APPEND: keys at positions o .. o+S-1 come from p.k_new / p.v_new
 * (k rotated when KILN_ROPE), never from the cache; the CTAs with
 * h % (H/KV) == 0 write the rows s of their query tile into the caches, so
 * every (b, kv head, s) row is written exactly once and no CTA reads a cache
 * row that another CTA of this launch writes.
 *
 * KILN_ATT_VARLEN 1 (packed variable-length sequences, as in attention_wgmma.cuh): KilnArgs
 * field `cu_q`, int32 [B + 1] cumulative query offsets; q, k_new, v_new and o are [1, total,
 * heads, HD] (their batch strides unused); p.S is the total; sequence b (blockIdx.z) has
 * cu_q[b+1] - cu_q[b] queries from row cu_q[b], at offset pos[b] in cache row slot[b]; the
 * query tiles past its end return at once.
 *
 * Launch: grid (ceil(S / KILN_BQ), H, B), block KILN_ATT_THREADS
 * (= 2 * KILN_BQ), static shared memory only (<= 48 KB; no dynamic smem).
 * Requirements: q strides and the k_new/v_new strides multiples of 8
 * elements, all pointers 16-byte aligned; KILN_HD 64 or 128.
 * An invalid offset (o < 0 or o + S > T) writes NaN to the output rows.
 */

#ifndef KILN_ATT_HELPERS
#error "attention_prefill.cuh: attention_common.cuh must come before it (codegen/kernels/CONTRACT.md)"
#endif
#ifndef KILN_BQ
#define KILN_BQ 64
#endif
#ifndef KILN_BK
#define KILN_BK 64
#endif
#ifndef KILN_ATT_THREADS
#define KILN_ATT_THREADS (2 * KILN_BQ)
#endif
#ifndef KILN_ATT_VARLEN
#define KILN_ATT_VARLEN 0
#endif

/* ---- the prefill kernel -------------------------------------------------- */

static_assert(KILN_HD == 64 || KILN_HD == 128, "attention_prefill.cuh: KILN_HD 64 or 128");
static_assert(KILN_BQ % 16 == 0 && KILN_BQ >= 16 && KILN_BQ <= 128, "KILN_BQ: 16..128, multiple of 16");
static_assert(KILN_BK % 16 == 0 && KILN_BK >= 16 && KILN_BK <= 128, "KILN_BK: 16..128, multiple of 16");
static_assert(KILN_ATT_THREADS == 2 * KILN_BQ, "prefill: KILN_ATT_THREADS must be 2 * KILN_BQ (a warp per 16 query rows)");

extern "C" __global__ void __launch_bounds__(KILN_ATT_THREADS) KILN_KERNEL(KilnArgs p)
{
    using namespace katt;
    constexpr int BQ = KILN_BQ, BK = KILN_BK, NT = KILN_ATT_THREADS;
    constexpr int BMAX = BQ > BK ? BQ : BK;
    static_assert((BK + BMAX) * HD * 2 <= 48 * 1024, "prefill tiles exceed 48 KB of shared memory");
    __shared__ __align__(128) uint4 sK[BK * CH];
    __shared__ __align__(128) uint4 sQV[BMAX * CH]; /* Q tile, then V tiles, then the output tile */
#if KILN_ROPE
    __shared__ double sInv[HD / 2];
#else
    const double *sInv = nullptr;
#endif

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* heaviest (last) query tiles first when causal */
    const int qt = KILN_CAUSAL ? (int)gridDim.x - 1 - (int)blockIdx.x : (int)blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z;
#if KILN_ATT_VARLEN
    const int S = p.cu_q[b + 1] - p.cu_q[b];
    const long long row0 = p.cu_q[b]; /* sequence b's first row of q, k_new, v_new and o */
#else
    const int S = (int)p.S;
    const long long row0 = (long long)b * S;
#endif
    const int T = (int)p.T, H = (int)p.H, KV = (int)p.KV;
    const int G = H / KV, kvh = h / G;
    const int o = p.pos ? ((const int *)p.pos)[b] : T - S;
    const int L = o + S; /* valid keys j < L */
    const int s0 = qt * BQ;
    const int nq = min(BQ, S - s0);
    elem *out = (elem *)p.o;
    if (nq <= 0) return;
    if (o < 0 || L > T) { /* run-time error: make it visible */
        for (int i = tid; i < nq * HD; i += NT) /* 0x7fff: NaN in bf16 and f16 */
            ((unsigned short *)out)[((row0 + s0 + i / HD) * H + h) * HD + i % HD] = 0x7fff;
        return;
    }
#if KILN_ROPE
    rope_table(sInv, tid, NT);
    __syncthreads();
#endif
    const long long crow = kiln_slot((const int *)p.slot, b); /* the caches' row of batch row b */
    const elem *kc = (const elem *)p.k + (crow * KV + kvh) * T * HD;
    const elem *vc = (const elem *)p.v + (crow * KV + kvh) * T * HD;
#if KILN_APPEND
#if KILN_ATT_VARLEN
    const elem *kn = (const elem *)p.k_new + row0 * p.kn_ss + (long long)kvh * p.kn_sh;
    const elem *vn = (const elem *)p.v_new + row0 * p.vn_ss + (long long)kvh * p.vn_sh;
#else
    const elem *kn = (const elem *)p.k_new + (long long)b * p.kn_sb + (long long)kvh * p.kn_sh;
    const elem *vn = (const elem *)p.v_new + (long long)b * p.vn_sb + (long long)kvh * p.vn_sh;
#endif
    /* The cache write: the first query head of the group writes the new rows
     * of its query tile. Nothing in this launch reads cache rows >= o. */
    if (h % G == 0) {
        for (int i = tid; i < nq * HCH; i += NT) {
            const int r = i / HCH, c = i % HCH, s = s0 + r;
            append_pair((elem *)kc + (long long)(o + s) * HD, kn + (long long)s * p.kn_ss, c,
                        KILN_ROPE, o + s, sInv);
            append_pair((elem *)vc + (long long)(o + s) * HD, vn + (long long)s * p.vn_ss, c, false,
                        0, sInv);
        }
    }
#endif

    /* Q tile (rotated as it is loaded, at pos[b] + s; at s without p.pos, as ir ROPE) */
    const int qpos0 = p.pos ? o : 0;
#if KILN_ATT_VARLEN
    const elem *qb = (const elem *)p.q + row0 * p.q_ss + (long long)h * p.q_sh;
#else
    const elem *qb = (const elem *)p.q + (long long)b * p.q_sb + (long long)h * p.q_sh;
#endif
    for (int i = tid; i < BQ * HCH; i += NT) {
        const int r = i / HCH, c = i % HCH;
        row_pair(sQV, r, c, r < nq ? qb + (long long)(s0 + r) * p.q_ss : nullptr, KILN_ROPE,
                 qpos0 + s0 + r, sInv);
    }
    cp_commit();

    /* keys to visit: causal stops at the last row's diagonal */
    const int kend = KILN_CAUSAL ? min(L, o + s0 + nq) : L;
    const int ntiles = (kend + BK - 1) / BK;

    /* K or V tile t into smem tile s */
    auto load_kv = [&](uint4 *s, int t, bool is_k) {
        const elem *cache = is_k ? kc : vc;
        for (int i = tid; i < BK * HCH; i += NT) {
            const int r = i / HCH, c = i % HCH, j = t * BK + r;
            const elem *src = nullptr;
            bool rot = false;
            if (j < kend) {
#if KILN_APPEND
                if (j >= o) {
                    src = is_k ? kn + (long long)(j - o) * p.kn_ss : vn + (long long)(j - o) * p.vn_ss;
                    rot = is_k && KILN_ROPE;
                } else
#endif
                    src = cache + (long long)j * HD;
            }
            row_pair(s, r, c, src, rot, j, sInv);
        }
    };

    load_kv(sK, 0, true);
    cp_commit();
    cp_wait<1>();
    __syncthreads();

    const bool active = warp * 16 < nq; /* warps whose rows are all past S only help load */
    unsigned qf[HD / 16][4];
    load_q_frags(qf, sQV, warp * 16, lane);

    float acc[HD / 8][4];
#pragma unroll
    for (int d = 0; d < HD / 8; d++) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
    float m[2] = {ninf(), ninf()}, l[2] = {0.f, 0.f};
    const int srow = s0 + warp * 16 + (lane >> 2); /* query index of the thread's first row */

    for (int t = 0; t < ntiles; t++) {
        cp_wait<0>();
        __syncthreads(); /* K(t) landed; every warp is done with sQV (Q or V(t-1)) */
        load_kv(sQV, t, false);
        cp_commit();

        float sc[BK / 8][4];
        const int j0 = t * BK;
        if (active) {
            qk<BK>(sc, qf, sK, 0, lane);
            const bool need_mask =
                j0 + BK > L || (KILN_CAUSAL && j0 + BK - 1 > o + s0 + warp * 16);
            if (need_mask) {
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int j = j0 + n * 8 + (lane & 3) * 2 + (e & 1);
                        const int s = srow + (e >> 1) * 8;
                        if (j >= L || (KILN_CAUSAL && j > o + s)) sc[n][e] = ninf();
                    }
            }
            softmax_step<BK>(sc, m, l, acc);
        }

        cp_wait<0>();
        __syncthreads(); /* V(t) landed; every warp is done with sK */
        if (t + 1 < ntiles) load_kv(sK, t + 1, true);
        cp_commit();
        if (active) pv<BK>(acc, sc, sQV, 0, lane);
    }

    /* normalize, stage the tile in smem, store 16-byte rows */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        l[i] = l[i] > 0.f ? 1.f / l[i] : 0.f;
    }
    __syncthreads(); /* every warp is done with the last V tile */
    {
        const int r = warp * 16 + (lane >> 2);
#pragma unroll
        for (int d = 0; d < HD / 8; d++) {
            ((unsigned *)&sQV[swz(r, d)])[lane & 3] = pack2(acc[d][0] * l[0], acc[d][1] * l[0]);
            ((unsigned *)&sQV[swz(r + 8, d)])[lane & 3] = pack2(acc[d][2] * l[1], acc[d][3] * l[1]);
        }
    }
    __syncthreads();
    for (int i = tid; i < nq * CH; i += NT) {
        const int r = i / CH, c = i % CH;
        *(uint4 *)(out + ((row0 + s0 + r) * H + h) * HD + c * 8) = sQV[swz(r, c)];
    }
}
