/* codegen/kernels/attention_common.cuh — what the two attention templates
 * (attention_prefill.cuh, attention_decode.cuh) share: the options both read
 * and the device helpers in namespace katt (16-byte cp.async and ldmatrix
 * loads into swizzled shared-memory tiles, mma.sync m16n8k16, RoPE on load,
 * the online-softmax step, Q K^T and P V over a key tile).
 *
 * A translation unit of the attention family is common.cuh, the generated
 * part, this file, then the template (codegen/kernels/CONTRACT.md;
 * cg_family_templates in codegen/cg.h lists the files). It reads KILN_T,
 * KILN_HD, KILN_SCALE and KILN_THETA, so it follows the generated part.
 * A rope with frequency scaling comes with KILN_ROPE_TABLE 1, the host's
 * frequencies in `kiln_rope_inv[HD/2]` and KILN_ROPE_MSCALE (YaRN's factor
 * on cos and sin; codegen/cg_rope.c writes them). */
#ifndef KILN_ATT_HELPERS
#define KILN_ATT_HELPERS

#ifndef KILN_HD
#error "attention_common.cuh: KILN_HD must be defined"
#endif
#ifndef KILN_SCALE
#error "attention_common.cuh: KILN_SCALE must be defined"
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
/* q / the new k rows with each rotation pair (d, d + HD/2) side by side as columns 2d, 2d + 1
 * (codegen's cg_rope_paired: the projection's weight rows paired at bind time); decode only */
#ifndef KILN_ROPE_PAIRED_Q
#define KILN_ROPE_PAIRED_Q 0
#endif
#ifndef KILN_ROPE_PAIRED_K
#define KILN_ROPE_PAIRED_K 0
#endif
#ifndef KILN_ROPE_TABLE
#define KILN_ROPE_TABLE 0
#endif
#ifndef KILN_ROPE_MSCALE
#define KILN_ROPE_MSCALE 1.0f
#endif
/* attention_wgmma.cuh and attention_decode.cuh: a sliding window W > 0 (key j visible to
 * query position P only when P - j < W) and a logit soft-cap c > 0 (scores become
 * c * tanh(score * scale / c)); 0: none */
#ifndef KILN_ATT_WINDOW
#define KILN_ATT_WINDOW 0
#endif
#ifndef KILN_ATT_SOFTCAP
#define KILN_ATT_SOFTCAP 0.0
#endif

namespace katt {

typedef KILN_T elem;
constexpr int HD = KILN_HD;
constexpr int CH = HD / 8;   /* 16-byte chunks per row */
constexpr int HCH = HD / 16; /* chunks per half row (RoPE pairs chunk c with c + HCH) */
/* A shared-memory row holds CHP >= CH chunks, a multiple of 8 (the swizzle permutes chunks
 * within groups of 8): CHP == CH at head dims 64, 128, 256. attention_prefill.cuh takes
 * 64 and 128 (its tiles are sized by CH); attention_decode.cuh and attention_wgmma.cuh any
 * multiple of 16 up to 256. */
constexpr int CHP = (CH + 7) & ~7;
static_assert(HD % 16 == 0 && HD >= 16 && HD <= 256, "attention templates: KILN_HD a multiple of 16, at most 256");

template <class T> struct is_bf16 { static constexpr bool value = false; };
template <> struct is_bf16<__nv_bfloat16> { static constexpr bool value = true; };
template <class T> struct is_f16 { static constexpr bool value = false; };
template <> struct is_f16<__half> { static constexpr bool value = true; };
constexpr bool BF16 = is_bf16<elem>::value;
static_assert(is_bf16<elem>::value || is_f16<elem>::value,
              "attention templates need KILN_T __nv_bfloat16 or __half");

__device__ __forceinline__ float ninf() { return __int_as_float(0xff800000); }

/* Shared-memory tiles are rows of CHP 16-byte chunks (the first CH used); chunk c of row r
 * lives at c ^ (r & 7), so ldmatrix's 8 row addresses hit 8 different bank groups. */
__device__ __forceinline__ int swz(int r, int c) { return r * CHP + (c ^ (r & 7)); }

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

/* theta^(-2i/HD) for i < HD/2, in double (the interpreter's formula); with
 * KILN_ROPE_TABLE the scaled frequencies the host computed. */
__device__ __forceinline__ void rope_table(double *inv, int tid, int nthreads)
{
    for (int i = tid; i < HD / 2; i += nthreads)
#if KILN_ROPE_TABLE
        inv[i] = kiln_rope_inv[i];
#else
        inv[i] = pow((double)(KILN_THETA), -2.0 * (double)i / (double)HD);
#endif
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
#if KILN_ROPE_TABLE
        sn *= KILN_ROPE_MSCALE;
        cs *= KILN_ROPE_MSCALE;
#endif
        float x1 = lo[e], x2 = hi[e];
        lo[e] = x1 * cs - x2 * sn;
        hi[e] = x2 * cs + x1 * sn;
    }
}

/* The pairs (c*8 + e, c*8 + e + HD/2), e < 8, of the HD-element row at src into lo and hi: from
 * chunks c and c + HCH, or (paired) from the 16 columns at c*16, pair e side by side at 2e, 2e + 1. */
__device__ __forceinline__ void load_pairs(const elem *src, int c, bool paired, float (&lo)[8], float (&hi)[8])
{
    if (paired) {
        float x[16];
        unpack8(ldg16(src + c * 16), *(float(*)[8])x);
        unpack8(ldg16(src + c * 16 + 8), *(float(*)[8])(x + 8));
#pragma unroll
        for (int e = 0; e < 8; e++) {
            lo[e] = x[2 * e];
            hi[e] = x[2 * e + 1];
        }
        return;
    }
    unpack8(ldg16(src + c * 8), lo);
    unpack8(ldg16(src + (c + HCH) * 8), hi);
}

/* Chunks c and c + HCH of smem row r (tile `s`) from the HD-element row at
 * src: cp.async when no rotation is needed, else load, rotate at `pos`,
 * round and store (and, when `dst` is not null, store the same row to dst:
 * the KV-cache write of KILN_APPEND). src == nullptr: zeros. paired: src
 * holds each rotation pair side by side (load_pairs). */
__device__ __forceinline__ void row_pair(uint4 *s, int r, int c, const elem *src, bool rotate,
                                         int pos, const double *inv, bool paired = false)
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
    load_pairs(src, c, paired, lo, hi);
    rope8(lo, hi, pos, c, inv);
    *d0 = pack8(lo);
    *d1 = pack8(hi);
}

/* Copy one new row (chunks c, c + HCH) into the cache row dst, rotated at
 * pos when `rotate` (paired: src holds each rotation pair side by side). */
__device__ __forceinline__ void append_pair(elem *dst, const elem *src, int c, bool rotate,
                                            int pos, const double *inv, bool paired = false)
{
    uint4 a, b;
    if (rotate) {
        float lo[8], hi[8];
        load_pairs(src, c, paired, lo, hi);
        rope8(lo, hi, pos, c, inv);
        a = pack8(lo);
        b = pack8(hi);
    } else {
        a = ldg16(src + c * 8);
        b = ldg16(src + (c + HCH) * 8);
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

/* The online softmax of one key tile for the thread's two rows (lane/4 and
 * lane/4 + 8): sc holds scores (masked ones -inf), sl2 the factor that takes
 * them to the log2 domain; on return sc holds P = exp2(sc*sl2 - m), m and l
 * are updated (l per thread: summed over the quad at the end) and al holds
 * the factor the accumulators must be rescaled by. */
template <int NK>
__device__ __forceinline__ void softmax_p(float (&sc)[NK / 8][4], float (&m)[2], float (&l)[2], float (&al)[2],
                                          const float SL2)
{
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
    float mu[2], sum[2] = {0.f, 0.f};
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
}

/* The accumulators of the thread's two rows times softmax_p's factors. */
__device__ __forceinline__ void rescale(float (&acc)[HD / 8][4], const float (&al)[2])
{
#pragma unroll
    for (int d = 0; d < HD / 8; d++) {
        acc[d][0] *= al[0];
        acc[d][1] *= al[0];
        acc[d][2] *= al[1];
        acc[d][3] *= al[1];
    }
}

/* Online softmax step: softmax_p with the scale folded in, then acc rescaled. */
template <int NK>
__device__ __forceinline__ void softmax_step(float (&sc)[NK / 8][4], float (&m)[2], float (&l)[2],
                                             float (&acc)[HD / 8][4])
{
    float al[2];
    softmax_p<NK>(sc, m, l, al, (float)(KILN_SCALE) * 1.4426950408889634f);
    rescale(acc, al);
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
