// codegen/kernels/elementwise.cuh — one thread computes KILN_VEC consecutive
// output elements per step of a grid-stride loop. The generated hook
//   __device__ void kiln_elem(const KilnArgs &p, long long i)
// computes and stores element i of the kernel's index space [0, p.n)
// (CONTRACT.md). Also the generic fallback: gathers, concat, materialized
// views, cache writes and reductions that fit no other template put their
// index math and loops in kiln_elem.
//
// Launch: block KILN_EW_THREADS, grid min(ceil(n / (KILN_EW_THREADS * KILN_VEC)), 132 * 8).
#ifndef KILN_VEC
#define KILN_VEC 1
#endif
#ifndef KILN_EW_THREADS
#define KILN_EW_THREADS 256
#endif

extern "C" __global__ void __launch_bounds__(KILN_EW_THREADS) KILN_KERNEL(KilnArgs p)
{
    kiln_pdl_wait(); // programmatic dependent launch (common.cuh)
    kiln_pdl_launch();
    const long long n = p.n;
    const long long step = (long long)gridDim.x * KILN_EW_THREADS * KILN_VEC;
    for (long long base = ((long long)blockIdx.x * KILN_EW_THREADS + threadIdx.x) * KILN_VEC; base < n;
         base += step) {
        if (base + KILN_VEC <= n) {
#pragma unroll
            for (int v = 0; v < KILN_VEC; v++) kiln_elem(p, base + v);
        } else {
            for (int v = 0; v < KILN_VEC && base + v < n; v++) kiln_elem(p, base + v);
        }
    }
}
