// codegen/kernels/pack.cuh — bind-time weight packing on the device
// (runtime/rt_pack_dev.c). The data movement of packing (concat, slice, the
// interleave of gate/up, the RoPE row pairs) is cudaMemcpy2D; these two kernels
// do what a copy cannot. Each takes one PackArgs by value; any grid, 256 threads
// (grid-stride loops over the output's elements):
//   kiln_pack_rowscale  dst[r, c] = src[r, c] * gain[c] (a norm's gain folded into a
//                       weight): both operands converted to float exactly, one
//                       float product, rounded once to the dtype (bf16: to
//                       nearest, ties to even; NaN made quiet), bit for bit what
//                       the host's packing (runtime/rt_pack.c) computes.
//                       dtype 2: src bf16, gain float32 (a float32 gain folded into a bf16
//                       weight): the same float product of exact operands, rounded once to bf16.
//   kiln_pack_permute   dst element e (row-major over shape[0..rank)) =
//                       src[sum_i idx_i(e) * stride[i]], elements of es bytes.
// Header-free: bf16 values are raw 16-bit patterns.

struct PackArgs {
    unsigned long long src, gain, dst;
    long long numel, cols;        // rowscale: numel = rows * cols
    int dtype;                    // rowscale: 0 bf16, 1 f32, 2 bf16 times a float32 gain
    int es, rank, pad_;           // permute: element bytes (1, 2, 4, 8), rank
    long long shape[8], stride[8];
};

__device__ __forceinline__ unsigned short kiln_pack_to_bf16(float f)
{
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

extern "C" __global__ void __launch_bounds__(256) kiln_pack_rowscale(const PackArgs a)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < a.numel; e += step) {
        const long long c = e % a.cols;
        if (a.dtype == 0) {
            const unsigned short *s = (const unsigned short *)a.src, *g = (const unsigned short *)a.gain;
            float v = __fmul_rn(__uint_as_float((unsigned)s[e] << 16), __uint_as_float((unsigned)g[c] << 16));
            ((unsigned short *)a.dst)[e] = kiln_pack_to_bf16(v);
        } else if (a.dtype == 2) {
            const unsigned short *s = (const unsigned short *)a.src;
            const float *g = (const float *)a.gain;
            ((unsigned short *)a.dst)[e] = kiln_pack_to_bf16(__fmul_rn(__uint_as_float((unsigned)s[e] << 16), g[c]));
        } else {
            const float *s = (const float *)a.src, *g = (const float *)a.gain;
            ((float *)a.dst)[e] = __fmul_rn(s[e], g[c]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) kiln_pack_permute(const PackArgs a)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < a.numel; e += step) {
        long long rest = e, off = 0;
        for (int i = a.rank - 1; i >= 0; i--) {
            off += (rest % a.shape[i]) * a.stride[i];
            rest /= a.shape[i];
        }
        switch (a.es) {
        case 1: ((unsigned char *)a.dst)[e] = ((const unsigned char *)a.src)[off]; break;
        case 2: ((unsigned short *)a.dst)[e] = ((const unsigned short *)a.src)[off]; break;
        case 4: ((unsigned *)a.dst)[e] = ((const unsigned *)a.src)[off]; break;
        default: ((unsigned long long *)a.dst)[e] = ((const unsigned long long *)a.src)[off]; break;
        }
    }
}
