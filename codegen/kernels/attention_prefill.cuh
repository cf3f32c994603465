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
 * Launch: grid (ceil(S / KILN_BQ), H, B), block KILN_ATT_THREADS
 * (= 2 * KILN_BQ), static shared memory only (<= 48 KB; no dynamic smem).
 * Requirements: q strides and the k_new/v_new strides multiples of 8
 * elements, all pointers 16-byte aligned; KILN_HD 64 or 128.
 * An invalid offset (o < 0 or o + S > T) writes NaN to the output rows.
 */

#ifndef KILN_HD
#error "attention_prefill.cuh: KILN_HD must be defined"
#endif
#ifndef KILN_SCALE
#error "attention_prefill.cuh: KILN_SCALE must be defined"
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
#ifndef KILN_BQ
#define KILN_BQ 64
#endif
#ifndef KILN_BK
#define KILN_BK 64
#endif
#ifndef KILN_ATT_THREADS
#define KILN_ATT_THREADS (2 * KILN_BQ)
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

/* ---- the prefill kernel -------------------------------------------------- */

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
    const int S = (int)p.S, T = (int)p.T, H = (int)p.H, KV = (int)p.KV;
    const int G = H / KV, kvh = h / G;
    const int o = p.pos ? ((const int *)p.pos)[b] : T - S;
    const int L = o + S; /* valid keys j < L */
    const int s0 = qt * BQ;
    const int nq = min(BQ, S - s0);
    elem *out = (elem *)p.o;
    if (nq <= 0) return;
    if (o < 0 || L > T) { /* run-time error: make it visible */
        for (int i = tid; i < nq * HD; i += NT) /* 0x7fff: NaN in bf16 and f16 */
            ((unsigned short *)out)[(((long long)b * S + s0 + i / HD) * H + h) * HD + i % HD] = 0x7fff;
        return;
    }
#if KILN_ROPE
    rope_table(sInv, tid, NT);
    __syncthreads();
#endif
    const elem *kc = (const elem *)p.k + ((long long)b * KV + kvh) * T * HD;
    const elem *vc = (const elem *)p.v + ((long long)b * KV + kvh) * T * HD;
#if KILN_APPEND
    const elem *kn = (const elem *)p.k_new + (long long)b * p.kn_sb + (long long)kvh * p.kn_sh;
    const elem *vn = (const elem *)p.v_new + (long long)b * p.vn_sb + (long long)kvh * p.vn_sh;
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
    const elem *qb = (const elem *)p.q + (long long)b * p.q_sb + (long long)h * p.q_sh;
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
        *(uint4 *)(out + (((long long)b * S + s0 + r) * H + h) * HD + c * 8) = sQV[swz(r, c)];
    }
}
