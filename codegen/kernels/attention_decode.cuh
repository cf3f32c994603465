/* codegen/kernels/attention_decode.cuh — attention for a few query rows per
 * sequence (decode, S = 1..8), split-KV ("flash-decoding") on tensor cores.
 *
 * grid (KILN_SPLITS, KV, B): one CTA per (split c, KV head, batch b) serves
 * ALL query heads of its GQA group: its rows are the G*S pairs (s, g)
 * (G = H / KV, row r = s*G + g, head h = kvhead*G + g), packed into mma
 * m-tiles of 16 rows, so each K/V byte of the split is read once for the
 * whole group. The valid length L = o + S comes from p.pos on the device
 * (o = pos[b], or T - S without pos): split c takes keys
 * [c*per, min(L, (c+1)*per)), per = ceil(L / KILN_SPLITS) rounded up to 16,
 * so the same launch serves every decode step; a split past L publishes an
 * empty partial (m = -inf, l = 0) at once.
 *
 * Inside a CTA, KILN_DEC_WARPS warps take 16 keys each of a tile of
 * 16*KILN_DEC_WARPS keys; tiles stream through a KILN_DEC_STAGES-deep
 * cp.async ring (16-byte loads). Each warp keeps its own online softmax
 * (m, l, acc) in registers; at the end the warps are merged in shared memory
 * into the CTA's partial, written to p.ws. The last CTA of each (b, KV head)
 * to finish (atomic counter p.sem[b*KV + kvhead], reset to 0 by that CTA so
 * graph replays work) merges the KILN_SPLITS partials and writes o.
 *
 * p.ws (float): B*S*H*KILN_SPLITS*HD accumulators, then B*S*H*KILN_SPLITS
 * (m, l) pairs; row (b, s, h) split c at index ((b*S + s)*H + h)*SPLITS + c.
 * p.sem: B*KV ints, zero before the first launch (left zero after each).
 *
 * KILN_ROPE / KILN_APPEND as in attention_prefill.cuh: q row s is rotated at
 * pos[b] + s (at s without p.pos); new keys (positions o .. o+S-1) are read
 * from p.k_new / p.v_new (k rotated), never from the cache, and the CTA whose
 * split holds position o + s writes row s into the caches: one writer per
 * (b, KV head, s), and no CTA reads a row another CTA of the launch writes.
 *
 * Launch: grid (KILN_SPLITS, KV, B), block KILN_ATT_THREADS
 * (= 32 * KILN_DEC_WARPS; default 2 warps: 64 threads; stages default
 * 2 for HD 128, 4 for HD 64: 32 KB),
 * static shared memory only (<= 48 KB). Any S works (rows beyond 16 take
 * further passes over the split), but the kernel is made for G*S <= 16.
 * An invalid offset (o < 0 or o + S > T) writes NaN to the output rows.
 */

#ifndef KILN_ATT_HELPERS
#error "attention_decode.cuh: attention_common.cuh must come before it (codegen/kernels/CONTRACT.md)"
#endif
#ifndef KILN_PDL_PREFETCH
/* 1: prefetch this split's cached rows into L2 before waiting on the previous kernel
 * (off by default, as in gemv.cuh) */
#define KILN_PDL_PREFETCH 0
#endif
#ifndef KILN_SPLITS
#define KILN_SPLITS 16
#endif
#ifndef KILN_DEC_WARPS
#define KILN_DEC_WARPS 2
#endif
#ifndef KILN_DEC_STAGES
#define KILN_DEC_STAGES (KILN_HD >= 128 ? 2 : 4)
#endif
#ifndef KILN_ATT_THREADS
#define KILN_ATT_THREADS (32 * KILN_DEC_WARPS)
#endif

/* ---- the decode kernel --------------------------------------------------- */

static_assert(KILN_ATT_THREADS == 32 * KILN_DEC_WARPS, "decode: KILN_ATT_THREADS must be 32 * KILN_DEC_WARPS");
static_assert(KILN_DEC_STAGES >= 2, "decode: KILN_DEC_STAGES >= 2");
static_assert(KILN_SPLITS >= 1 && KILN_SPLITS <= 256, "decode: KILN_SPLITS 1..256");

extern "C" __global__ void __launch_bounds__(KILN_ATT_THREADS) KILN_KERNEL(KilnArgs p)
{
    using namespace katt;
    constexpr int NW = KILN_DEC_WARPS, NT = KILN_ATT_THREADS, TK = 16 * NW;
    constexpr int STG = KILN_DEC_STAGES, SPL = KILN_SPLITS;
    constexpr int STAGE = 2 * TK * CH; /* uint4s per stage: K tile, then V tile */
    static_assert(STG * STAGE * 16 <= 47 * 1024, "decode stages exceed 47 KB of shared memory");
    static_assert(NW * 16 * (HD + 2) * 4 <= STG * STAGE * 16, "decode: warp merge does not fit");
    static_assert(2 * 16 * SPL * 4 <= STG * STAGE * 16, "decode: split weights do not fit");
    __shared__ __align__(128) uint4 sbuf[STG * STAGE];
#if KILN_ROPE
    __shared__ double sInv[HD / 2];
#else
    const double *sInv = nullptr;
#endif
    __shared__ int sLast;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int S = (int)p.S, T = (int)p.T, H = (int)p.H, KV = (int)p.KV, B = (int)p.B;
    const int G = H / KV, R = G * S;
    const int o = p.pos ? ((const int *)p.pos)[b] : T - S;
    const int L = o + S;
    elem *out = (elem *)p.o;
    /* Programmatic dependent launch (common.cuh): wait for the previous kernel before
     * touching q, o or the caches' new rows. The cached rows [0, o) were written by earlier
     * steps, never by this graph's kernels, so they may be prefetched first (positions
     * are an input). */
    if (KILN_PDL_PREFETCH && o >= 0 && L <= T && tid < 2) {
        const int pper = ((L + SPL - 1) / SPL + 15) & ~15;
        const int pj0 = c * pper, pj1 = min(o, pj0 + pper);
        if (pj1 > pj0)
            kiln_prefetch_l2((const elem *)(tid ? p.v : p.k) + (((long long)b * KV + kvh) * T + pj0) * HD,
                             (long long)(pj1 - pj0) * HD * (long long)sizeof(elem));
    }
    kiln_pdl_wait();
    if (o < 0 || L > T) { /* run-time error: make it visible (split 0 writes) */
        if (c == 0)
            for (int i = tid; i < R * HD; i += NT) {
                const int rr = i / HD, s = rr / G, h = kvh * G + rr % G;
                ((unsigned short *)out)[(((long long)b * S + s) * H + h) * HD + i % HD] = 0x7fff;
            }
        return;
    }
#if KILN_ROPE
    rope_table(sInv, tid, NT);
    __syncthreads();
#endif
    const int per = ((L + SPL - 1) / SPL + 15) & ~15;
    const int j0 = c * per, j1 = min(L, j0 + per);
    const int ntiles = j1 > j0 ? (j1 - j0 + TK - 1) / TK : 0;

    const elem *kc = (const elem *)p.k + ((long long)b * KV + kvh) * T * HD;
    const elem *vc = (const elem *)p.v + ((long long)b * KV + kvh) * T * HD;
#if KILN_APPEND
    const elem *kn = (const elem *)p.k_new + (long long)b * p.kn_sb + (long long)kvh * p.kn_sh;
    const elem *vn = (const elem *)p.v_new + (long long)b * p.vn_sb + (long long)kvh * p.vn_sh;
    /* the cache write: the split that holds position o + s writes row s */
    for (int i = tid; i < S * HCH; i += NT) {
        const int s = i / HCH, cc = i % HCH;
        if (o + s >= j0 && o + s < j1) {
            append_pair((elem *)kc + (long long)(o + s) * HD, kn + (long long)s * p.kn_ss, cc,
                        KILN_ROPE, o + s, sInv);
            append_pair((elem *)vc + (long long)(o + s) * HD, vn + (long long)s * p.vn_ss, cc, false,
                        0, sInv);
        }
    }
#endif

    float *wsacc = (float *)p.ws;
    float *wsml = wsacc + (long long)B * S * H * SPL * HD;
    /* index of packed row rr's partials (split 0) */
    auto row_base = [&](int rr) -> long long {
        const int s = rr / G, h = kvh * G + rr % G;
        return (((long long)b * S + s) * H + h) * SPL;
    };

    /* keys t*TK .. of this split into stage st (zeros past j1) */
    auto load_tile = [&](int t, int st) {
        uint4 *sk = sbuf + st * STAGE, *sv = sk + TK * CH;
        for (int i = tid; i < TK * HCH; i += NT) {
            const int r = i / HCH, cc = i % HCH, j = j0 + t * TK + r;
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
            row_pair(sk, r, cc, ks, rot, j, sInv);
            row_pair(sv, r, cc, vs, false, j, sInv);
        }
    };

    if (ntiles == 0) {
        for (int rr = tid; rr < R; rr += NT) {
            const long long pi = row_base(rr) + c;
            wsml[2 * pi] = ninf();
            wsml[2 * pi + 1] = 0.f;
        }
    }
    for (int mt = 0; ntiles > 0 && mt * 16 < R; mt++) {
        __syncthreads(); /* sbuf free (previous m-tile's merge is done) */
        uint4 *sQ = sbuf + (STG - 1) * STAGE; /* the stage the prologue leaves alone */
        const elem *qb = (const elem *)p.q + (long long)b * p.q_sb;
        for (int i = tid; i < 16 * HCH; i += NT) {
            const int r = i / HCH, cc = i % HCH, rr = mt * 16 + r;
            const int s = rr / G, h = kvh * G + rr % G;
            row_pair(sQ, r, cc, rr < R ? qb + (long long)s * p.q_ss + (long long)h * p.q_sh : nullptr,
                     KILN_ROPE, (p.pos ? o : 0) + s, sInv);
        }
        cp_commit();
#pragma unroll
        for (int st = 0; st < STG - 1; st++) {
            if (st < ntiles) load_tile(st, st);
            cp_commit();
        }
        cp_wait<STG - 1>(); /* the Q group */
        __syncthreads();
        unsigned qf[HD / 16][4];
        load_q_frags(qf, sQ, 0, lane);

        float acc[HD / 8][4];
#pragma unroll
        for (int d = 0; d < HD / 8; d++) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
        float m[2] = {ninf(), ninf()}, l[2] = {0.f, 0.f};
        const int sr0 = (mt * 16 + (lane >> 2)) / G, sr1 = (mt * 16 + (lane >> 2) + 8) / G;

        for (int t = 0; t < ntiles; t++) {
            cp_wait<STG - 2>();
            __syncthreads(); /* tile t landed; every warp is done with tile t-1's stage */
            if (t + STG - 1 < ntiles) load_tile(t + STG - 1, (t + STG - 1) % STG);
            cp_commit();
            const uint4 *sk = sbuf + (t % STG) * STAGE, *sv = sk + TK * CH;
            const int jw = j0 + t * TK + warp * 16;
            if (jw < j1) {
                float sc[2][4];
                qk<16>(sc, qf, sk, warp * 16, lane);
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int j = jw + n * 8 + (lane & 3) * 2 + (e & 1);
                        if (j >= j1 || (KILN_CAUSAL && j > o + ((e >> 1) ? sr1 : sr0)))
                            sc[n][e] = ninf();
                    }
                softmax_step<16>(sc, m, l, acc);
                pv<16>(acc, sc, sv, warp * 16, lane);
            }
        }

        /* merge the warps' partials into the CTA's, write it to p.ws */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
            l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        }
        cp_wait<0>();
        __syncthreads(); /* every warp is done with the stages */
        float *sm_m = (float *)sbuf, *sm_l = sm_m + NW * 16, *sm_acc = sm_l + NW * 16;
        const int r = lane >> 2;
        if ((lane & 3) == 0) {
            sm_m[warp * 16 + r] = m[0];
            sm_m[warp * 16 + r + 8] = m[1];
            sm_l[warp * 16 + r] = l[0];
            sm_l[warp * 16 + r + 8] = l[1];
        }
#pragma unroll
        for (int d = 0; d < HD / 8; d++) {
            *(float2 *)&sm_acc[(warp * 16 + r) * HD + d * 8 + (lane & 3) * 2] = make_float2(acc[d][0], acc[d][1]);
            *(float2 *)&sm_acc[(warp * 16 + r + 8) * HD + d * 8 + (lane & 3) * 2] = make_float2(acc[d][2], acc[d][3]);
        }
        __syncthreads();
        for (int i = tid; i < 16 * HD; i += NT) {
            const int rw = i / HD, d = i % HD, rr = mt * 16 + rw;
            if (rr >= R) break;
            float M = ninf();
#pragma unroll
            for (int w = 0; w < NW; w++) M = fmaxf(M, sm_m[w * 16 + rw]);
            float ls = 0.f, a = 0.f;
#pragma unroll
            for (int w = 0; w < NW; w++) {
                const float mw = sm_m[w * 16 + rw];
                const float f = mw == ninf() ? 0.f : exp2f(mw - M);
                ls += f * sm_l[w * 16 + rw];
                a += f * sm_acc[(w * 16 + rw) * HD + d];
            }
            const long long pi = row_base(rr) + c;
            wsacc[pi * HD + d] = a;
            if (d == 0) {
                wsml[2 * pi] = M;
                wsml[2 * pi + 1] = ls;
            }
        }
    }

    kiln_pdl_launch(); /* the cache is read: the next kernel may launch */
    /* publish; the last CTA of (b, KV head) merges the splits */
    __threadfence();
    __syncthreads();
    int *sem = (int *)p.sem + (long long)b * KV + kvh;
    if (tid == 0) sLast = atomicAdd(sem, 1) == SPL - 1;
    __syncthreads();
    if (!sLast) return;
    __threadfence();
    float *sw = (float *)sbuf, *sl = sw + 16 * SPL; /* [16][SPL]: m then weights; l */
    for (int mt = 0; mt * 16 < R; mt++) {
        __syncthreads();
        const int nr = min(16, R - mt * 16);
        for (int i = tid; i < nr * SPL; i += NT) { /* independent loads, all in flight */
            const long long pi = row_base(mt * 16 + i / SPL) + i % SPL;
            sw[i] = __ldcg(&wsml[2 * pi]);
            sl[i] = __ldcg(&wsml[2 * pi + 1]);
        }
        __syncthreads();
        for (int rw = tid; rw < nr; rw += NT) {
            float M = ninf(), ls = 0.f;
            for (int cc = 0; cc < SPL; cc++) M = fmaxf(M, sw[rw * SPL + cc]);
            for (int cc = 0; cc < SPL; cc++) {
                const float mc = sw[rw * SPL + cc];
                const float f = mc == ninf() ? 0.f : exp2f(mc - M);
                sw[rw * SPL + cc] = f;
                ls += f * sl[rw * SPL + cc];
            }
            const float inv = ls > 0.f ? 1.f / ls : 0.f;
            for (int cc = 0; cc < SPL; cc++) sw[rw * SPL + cc] *= inv;
        }
        __syncthreads();
        for (int i = tid; i < nr * (HD / 2); i += NT) {
            const int rw = i / (HD / 2), d = (i % (HD / 2)) * 2, rr = mt * 16 + rw;
            const float2 *src = (const float2 *)&wsacc[row_base(rr) * HD + d];
            float a0 = 0.f, a1 = 0.f;
#pragma unroll 8
            for (int cc = 0; cc < SPL; cc++) {
                /* empty splits left their accumulators unwritten: select, never multiply */
                const float w = sw[rw * SPL + cc];
                const float2 v = __ldcg(src + (long long)cc * (HD / 2));
                a0 += w != 0.f ? w * v.x : 0.f;
                a1 += w != 0.f ? w * v.y : 0.f;
            }
            const int s = rr / G, h = kvh * G + rr % G;
            *(unsigned *)(out + (((long long)b * S + s) * H + h) * HD + d) = pack2(a0, a1);
        }
    }
    if (tid == 0) *sem = 0;
}
