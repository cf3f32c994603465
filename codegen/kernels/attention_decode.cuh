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

#ifndef KILN_HD
#error "attention_decode.cuh: KILN_HD must be defined"
#endif
#ifndef KILN_SCALE
#error "attention_decode.cuh: KILN_SCALE must be defined"
#endif
#ifndef KILN_CAUSAL
#define KILN_CAUSAL 0
#endif
#ifndef KILN_ROPE
#define KILN_ROPE 0
#endif
#ifndef KILN_APPEND
#define KILN_APPEND 0
#endif
#ifndef KILN_THETA
#define KILN_THETA 10000.0
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

/* ---- helpers shared by the attention templates --------------------------
 * The same text is in attention_decode.cuh (a translation unit holds one
 * template; templates include nothing but through common.cuh). */
#ifndef KILN_ATT_HELPERS
#define KILN_ATT_HELPERS
namespace katt {

typedef KILN_T elem;
constexpr int HD = KILN_HD;
constexpr int CH = HD / 8;   /* 16-byte chunks per row */
constexpr int HCH = HD / 16; /* chunks per half row (RoPE pairs chunk c with c + HCH) */
static_assert(HD == 64 || HD == 128, "attention templates support KILN_HD 64 and 128");

template <class T> struct is_bf16 { static constexpr bool value = false; };
template <> struct is_bf16<__nv_bfloat16> { static constexpr bool value = true; };
template <class T> struct is_f16 { static constexpr bool value = false; };
template <> struct is_f16<__half> { static constexpr bool value = true; };
constexpr bool BF16 = is_bf16<elem>::value;
static_assert(is_bf16<elem>::value || is_f16<elem>::value,
              "attention templates need KILN_T __nv_bfloat16 or __half");

__device__ __forceinline__ float ninf() { return __int_as_float(0xff800000); }

/* Shared-memory tiles are rows of CH 16-byte chunks; chunk c of row r lives
 * at c ^ (r & 7), so ldmatrix's 8 row addresses hit 8 different bank groups. */
__device__ __forceinline__ int swz(int r, int c) { return r * CH + (c ^ (r & 7)); }

__device__ __forceinline__ unsigned smem_u32(const void *ptr)
{
    return (unsigned)__cvta_generic_to_shared(ptr);
}

__device__ __forceinline__ void cp_async16(void *sdst, const void *gsrc)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(sdst)), "l"(gsrc)
                 : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ float lo_f(unsigned u)
{
    if constexpr (BF16) return __uint_as_float(u << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)(u & 0xffffu)));
    return f;
}
__device__ __forceinline__ float hi_f(unsigned u)
{
    if constexpr (BF16) return __uint_as_float(u & 0xffff0000u);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)(u >> 16)));
    return f;
}
/* Two floats rounded (nearest even) into one packed pair, lo in the low half. */
__device__ __forceinline__ unsigned pack2(float lo, float hi)
{
    unsigned d;
    if constexpr (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
__device__ __forceinline__ void unpack8(const uint4 &v, float (&f)[8])
{
    f[0] = lo_f(v.x); f[1] = hi_f(v.x); f[2] = lo_f(v.y); f[3] = hi_f(v.y);
    f[4] = lo_f(v.z); f[5] = hi_f(v.z); f[6] = lo_f(v.w); f[7] = hi_f(v.w);
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8])
{
    return make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
}
__device__ __forceinline__ uint4 ldg16(const elem *g) { return __ldg((const uint4 *)g); }

__device__ __forceinline__ void ldsm4(unsigned (&r)[4], const void *s)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(s))
                 : "memory");
}
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], const void *s)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(s))
                 : "memory");
}
/* d += a (16x16, row) * b (16x8, col), f32 accumulate. */
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    if constexpr (BF16)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* theta^(-2i/HD) for i < HD/2, in double (the interpreter's formula). */
__device__ __forceinline__ void rope_table(double *inv, int tid, int nthreads)
{
    for (int i = tid; i < HD / 2; i += nthreads)
        inv[i] = pow((double)(KILN_THETA), -2.0 * (double)i / (double)HD);
}
/* Rotate-half RoPE of the pairs (c*8 + e, c*8 + e + HD/2) at position pos. */
__device__ __forceinline__ void rope8(float (&lo)[8], float (&hi)[8], int pos, int c,
                                      const double *inv)
{
#pragma unroll
    for (int e = 0; e < 8; e++) {
        double a = (double)pos * inv[c * 8 + e];
        double k = rint(a * 0.15915494309189533577);
        float r = (float)fma(-k, 6.2831853071795864769, a);
        float sn, cs;
        __sincosf(r, &sn, &cs);
        float x1 = lo[e], x2 = hi[e];
        lo[e] = x1 * cs - x2 * sn;
        hi[e] = x2 * cs + x1 * sn;
    }
}

/* Chunks c and c + HCH of smem row r (tile `s`) from the HD-element row at
 * src: cp.async when no rotation is needed, else load, rotate at `pos`,
 * round and store (and, when `dst` is not null, store the same row to dst:
 * the KV-cache write of KILN_APPEND). src == nullptr: zeros. */
__device__ __forceinline__ void row_pair(uint4 *s, int r, int c, const elem *src, bool rotate,
                                         int pos, const double *inv)
{
    uint4 *d0 = &s[swz(r, c)], *d1 = &s[swz(r, c + HCH)];
    if (!src) {
        *d0 = make_uint4(0, 0, 0, 0);
        *d1 = make_uint4(0, 0, 0, 0);
        return;
    }
    if (!rotate) {
        cp_async16(d0, src + c * 8);
        cp_async16(d1, src + (c + HCH) * 8);
        return;
    }
    float lo[8], hi[8];
    unpack8(ldg16(src + c * 8), lo);
    unpack8(ldg16(src + (c + HCH) * 8), hi);
    rope8(lo, hi, pos, c, inv);
    *d0 = pack8(lo);
    *d1 = pack8(hi);
}

/* Copy one new row (chunks c, c + HCH) into the cache row dst, rotated at
 * pos when `rotate`. */
__device__ __forceinline__ void append_pair(elem *dst, const elem *src, int c, bool rotate,
                                            int pos, const double *inv)
{
    uint4 a = ldg16(src + c * 8), b = ldg16(src + (c + HCH) * 8);
    if (rotate) {
        float lo[8], hi[8];
        unpack8(a, lo);
        unpack8(b, hi);
        rope8(lo, hi, pos, c, inv);
        a = pack8(lo);
        b = pack8(hi);
    }
    *(uint4 *)(dst + c * 8) = a;
    *(uint4 *)(dst + (c + HCH) * 8) = b;
}

/* Load the A fragments of 16 query rows (row0 .. row0+15 of tile s). */
__device__ __forceinline__ void load_q_frags(unsigned (&qf)[HD / 16][4], const uint4 *s, int row0,
                                             int lane)
{
    const int mi = lane >> 3;
#pragma unroll
    for (int ks = 0; ks < HD / 16; ks++)
        ldsm4(qf[ks], &s[swz(row0 + (mi & 1) * 8 + (lane & 7), ks * 2 + (mi >> 1))]);
}

/* sc[n] (keys key0 + 8n .. +7) = Q K^T for NK keys of tile sK starting at key0. */
template <int NK>
__device__ __forceinline__ void qk(float (&sc)[NK / 8][4], const unsigned (&qf)[HD / 16][4],
                                   const uint4 *sK, int key0, int lane)
{
    const int mi = lane >> 3;
#pragma unroll
    for (int n = 0; n < NK / 8; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < HD / 16; ks++)
#pragma unroll
        for (int np = 0; np < NK / 16; np++) {
            unsigned b[4];
            ldsm4(b, &sK[swz(key0 + np * 16 + (mi >> 1) * 8 + (lane & 7), ks * 2 + (mi & 1))]);
            mma(sc[2 * np], qf[ks], b[0], b[1]);
            mma(sc[2 * np + 1], qf[ks], b[2], b[3]);
        }
}

/* Online softmax step for the thread's two rows (lane/4 and lane/4 + 8):
 * sc holds raw scores (masked ones -inf); on return it holds P, m/l are
 * updated (l per thread: summed over the quad at the end) and acc rescaled. */
template <int NK>
__device__ __forceinline__ void softmax_step(float (&sc)[NK / 8][4], float (&m)[2], float (&l)[2],
                                             float (&acc)[HD / 8][4])
{
    constexpr float SL2 = (float)(KILN_SCALE) * 1.4426950408889634f;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < NK / 8; n++) {
        mx[0] = fmaxf(mx[0], fmaxf(sc[n][0], sc[n][1]) * SL2);
        mx[1] = fmaxf(mx[1], fmaxf(sc[n][2], sc[n][3]) * SL2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    }
    float mu[2], al[2], sum[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mu[i] = mx[i] == ninf() ? 0.f : mx[i];
        al[i] = exp2f(m[i] - mu[i]);
        m[i] = mx[i];
    }
#pragma unroll
    for (int n = 0; n < NK / 8; n++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            sc[n][e] = exp2f(fmaf(sc[n][e], SL2, -mu[e >> 1]));
            sum[e >> 1] += sc[n][e];
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++) l[i] = l[i] * al[i] + sum[i];
#pragma unroll
    for (int d = 0; d < HD / 8; d++) {
        acc[d][0] *= al[0];
        acc[d][1] *= al[0];
        acc[d][2] *= al[1];
        acc[d][3] *= al[1];
    }
}

/* acc += P V for NK keys of tile sV starting at key0 (P from softmax_step). */
template <int NK>
__device__ __forceinline__ void pv(float (&acc)[HD / 8][4], const float (&sc)[NK / 8][4],
                                   const uint4 *sV, int key0, int lane)
{
    const int mi = lane >> 3;
#pragma unroll
    for (int kk = 0; kk < NK / 16; kk++) {
        unsigned a[4];
        a[0] = pack2(sc[2 * kk][0], sc[2 * kk][1]);
        a[1] = pack2(sc[2 * kk][2], sc[2 * kk][3]);
        a[2] = pack2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
        a[3] = pack2(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < HD / 16; dp++) {
            unsigned b[4];
            ldsm4t(b, &sV[swz(key0 + kk * 16 + (mi & 1) * 8 + (lane & 7), dp * 2 + (mi >> 1))]);
            mma(acc[2 * dp], a, b[0], b[1]);
            mma(acc[2 * dp + 1], a, b[2], b[3]);
        }
    }
}

} /* namespace katt */
#endif /* KILN_ATT_HELPERS */

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
