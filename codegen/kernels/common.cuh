// codegen/kernels/common.cuh — what every kernel template and every generated
// hook uses: storage types, loads and stores that convert to and from float,
// rounding, the math of the elementwise ops, warp and block reductions.
//
// First in every translation unit (see CONTRACT.md). The generated part that
// follows defines KILN_KERNEL, KILN_T (typedef kiln_t), the KilnArgs struct
// and the family's hooks; the template comes last. Compiled by NVRTC with
// -std=c++17 -default-device; the CUDA headers below are the only includes.
#ifndef KILN_COMMON_CUH
#define KILN_COMMON_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define KILN_INF __int_as_float(0x7f800000)
#define KILN_NAN __int_as_float(0x7fffffff)

// ---- loads and stores: element math is float32 --------------------------
__device__ __forceinline__ float kiln_ld(const float *p) { return *p; }
__device__ __forceinline__ float kiln_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float kiln_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float kiln_ld(const int *p) { return (float)*p; }

// Loads from the L2 (ld.global.cg), not the SM's L1: values another CTA of the same launch
// stored before a __threadfence and an atomic this thread observed (the QKV epilogue's per-head
// norm, codegen/cg_family.c).
__device__ __forceinline__ float kiln_ld_cg(const float *p) { return __ldcg(p); }
__device__ __forceinline__ float kiln_ld_cg(const __half *p)
{
    return __half2float(__ushort_as_half(__ldcg(reinterpret_cast<const unsigned short *>(p))));
}
__device__ __forceinline__ float kiln_ld_cg(const __nv_bfloat16 *p)
{
    return __uint_as_float((unsigned)__ldcg(reinterpret_cast<const unsigned short *>(p)) << 16);
}

// Eight consecutive elements, 16-byte aligned, from the L2 (as kiln_ld_cg).
__device__ __forceinline__ void kiln_ld_cg8(const __nv_bfloat16 *p, float (&f)[8])
{
    const uint4 u = __ldcg(reinterpret_cast<const uint4 *>(p));
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) f[2 * i] = __uint_as_float(w[i] << 16), f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}
__device__ __forceinline__ void kiln_ld_cg8(const __half *p, float (&f)[8])
{
    const uint4 u = __ldcg(reinterpret_cast<const uint4 *>(p));
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++)
        f[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu))),
        f[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
}

__device__ __forceinline__ void kiln_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void kiln_st(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void kiln_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void kiln_st(int *p, float v) { *p = (int)v; }

// kiln_ld / kiln_st as plain integer loads and stores around the conversion (bf16 rounded to
// nearest even in integer arithmetic, as cvt.rn.bf16.f32 rounds; NaN to 0x7fff), with no inline
// assembly between neighbouring elements, so that the compiler may merge a thread's consecutive
// elements into one vector access where it knows the alignment (row.cuh's aligned path).
__device__ __forceinline__ float kiln_ldv(const float *p) { return kiln_ld(p); }
__device__ __forceinline__ float kiln_ldv(const __nv_bfloat16 *p)
{
    return __uint_as_float((unsigned)*reinterpret_cast<const unsigned short *>(p) << 16);
}
__device__ __forceinline__ float kiln_ldv(const __half *p) { return kiln_ld(p); }
__device__ __forceinline__ float kiln_ldv(const int *p) { return kiln_ld(p); }
__device__ __forceinline__ void kiln_stv(float *p, float v) { kiln_st(p, v); }
__device__ __forceinline__ void kiln_stv(__nv_bfloat16 *p, float v)
{
    const unsigned u = __float_as_uint(v);
    const unsigned r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    *reinterpret_cast<unsigned short *>(p) = (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : r);
}
__device__ __forceinline__ void kiln_stv(__half *p, float v) { kiln_st(p, v); }
__device__ __forceinline__ void kiln_stv(int *p, float v) { kiln_st(p, v); }
// The state row of batch row b: slot[b] with a slot table (KilnArgs field "slot", CG_ARG_SLOTS),
// b without one.
__device__ __forceinline__ long long kiln_slot(const int *slot, long long b) { return slot ? (long long)slot[b] : b; }

// A packed run's sequence table (KilnArgs field "cu_q", CG_ARG_SEQS): int32 cu[0..N] (cumulative
// token offsets of its N sequences), then the sequence of each packed token t. Sequence of t:
__device__ __forceinline__ long long kiln_seq_of(const int *cu, long long nseq, long long t) { return cu[nseq + 1 + t]; }

// Round to a storage type and back (an explicit cast inside a fused chain).
__device__ __forceinline__ float kiln_round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ float kiln_round_f16(float v) { return __half2float(__float2half_rn(v)); }

// ---- the elementwise ops that are more than one operator ------------------
// sigmoid and silu divide with __fdividef (2 ulp; 0 once 1 + e^-x passes 2^126, where the true
// value is below 2e-36): an IEEE `/` is a range check and a branch to a slow-path call per
// element, which serializes an epilogue's elements (docs/MATMUL.md, "The fused epilogues")
__device__ __forceinline__ float kiln_sigmoid(float x) { return __fdividef(1.0f, 1.0f + expf(-x)); }
__device__ __forceinline__ float kiln_silu(float x) { return __fdividef(x, 1.0f + expf(-x)); }
__device__ __forceinline__ float kiln_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.707106781f)); }
__device__ __forceinline__ float kiln_gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.797884561f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float kiln_relu(float x) { return x > 0.0f ? x : 0.0f; }

// ---- reductions ----------------------------------------------------------
__device__ __forceinline__ float kiln_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float kiln_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Sum (or max) over the CTA; every thread gets the result. blockDim.x is a
// multiple of 32; `red` is __shared__ float[32]. Safe to call repeatedly with
// the same `red` (the first barrier protects the previous call's reads).
template <bool MAX>
__device__ __forceinline__ float kiln_block_reduce(float v, float *red)
{
    v = MAX ? kiln_warp_max(v) : kiln_warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nwarps ? red[lane] : (MAX ? -KILN_INF : 0.0f);
    return MAX ? kiln_warp_max(v) : kiln_warp_sum(v);
}

// ---- programmatic dependent launch (sm_90+; no-ops elsewhere) -------------
// The runtime launches kernels with cudaLaunchAttributeProgrammaticStreamSerialization
// (captured into the graph as programmatic edges), so a kernel may start while the one
// before it is still running. Every template calls kiln_pdl_wait() before it reads
// anything an earlier kernel wrote or writes anything an earlier kernel reads; before
// that it may only prefetch bytes no kernel of the graph writes (weights, the cache rows
// of earlier steps). kiln_pdl_launch() lets the next kernel start launching: its own
// kiln_pdl_wait() still waits for this whole grid to finish and flush, so calling it
// early is safe. Without the launch attribute both return at once.
__device__ __forceinline__ void kiln_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void kiln_pdl_launch()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// p as a pointer the compiler may take to be AL-byte aligned (AL 0: p as it is). A template
// instantiated with AL > 0 only where the pointer was checked at run time (row.cuh).
template <int AL, typename P> __device__ __forceinline__ P kiln_al(P p)
{
    if constexpr (AL > 0) return (P)__builtin_assume_aligned(p, AL);
    else return p;
}
// Asks the L2 to fetch [p, p + bytes) (a hint: no data comes back, nothing faults).
// p 16-byte aligned; bytes rounded down to 16.
__device__ __forceinline__ void kiln_prefetch_l2(const void *p, long long bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    bytes &= ~15ll;
    if (bytes > 0 && ((reinterpret_cast<unsigned long long>(p) & 15ull) == 0))
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"((unsigned)bytes) : "memory");
#else
    (void)p;
    (void)bytes;
#endif
}

// kiln_ld's form for a generated warm-up hook (matmul_wgmma.cuh's kiln_epilogue_warm: the
// value hook's body with its loads replaced): asks the L2 for the element's line, returns 0.
template <typename T> __device__ __forceinline__ float kiln_ld_warm(const T *p)
{
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
#else
    (void)p;
#endif
    return 0.0f;
}

// ---- row family op codes (KILN_ROW_OP) -------------------------------------
#define KILN_ROW_RMSNORM 1
#define KILN_ROW_LAYERNORM 2
#define KILN_ROW_SOFTMAX 3
#define KILN_ROW_SUM 4
#define KILN_ROW_MEAN 5
#define KILN_ROW_MAX 6

#endif
