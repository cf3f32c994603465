// scripts/initcheck_tma_probe.cu — does compute-sanitizer initcheck see global
// memory written by the TMA unit? (scripts/sanitize.sh builds and runs it with
// nvcc on the GPU machine.) Kiln's Hopper matmul stores its output tiles with
// cp.async.bulk.tensor from shared memory; if initcheck does not count such
// stores as initializing, every later read of those outputs is reported as an
// uninitialized read. This probe writes one buffer with a plain store and one
// with a bulk copy (cp.async.bulk.global.shared::cta, the same TMA unit), then
// reads it in a second kernel: `probe plain` or `probe bulk`. Under initcheck,
// errors in the bulk run only mean the tool misses TMA stores. Both runs print
// the same sum.
#include <cstdio>
#include <cuda_runtime.h>

constexpr int N = 1024;  // floats per buffer: 4 KiB, one bulk copy

__global__ void write_plain(float *dst)
{
    for (int i = threadIdx.x; i < N; i += blockDim.x) dst[i] = 1.0f + i;
}

__global__ void write_bulk(float *dst)
{
    __shared__ alignas(128) float tile[N];
    for (int i = threadIdx.x; i < N; i += blockDim.x) tile[i] = 1.0f + i;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned s = (unsigned)__cvta_generic_to_shared(tile);
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(s), "r"(N * 4)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

__global__ void sum(const float *src, float *out)
{
    float acc = 0.0f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) acc += src[i];
    atomicAdd(out, acc);
}

int main(int argc, char **argv)
{
    const bool bulk = argc > 1 && argv[1][0] == 'b';
    float *a, *s;
    if (cudaMalloc(&a, N * 4) || cudaMalloc(&s, 4) || cudaMemset(s, 0, 4)) return 2;
    if (bulk)
        write_bulk<<<1, 256>>>(a);
    else
        write_plain<<<1, 256>>>(a);
    sum<<<1, 256>>>(a, s);
    float h = 0;
    if (cudaMemcpy(&h, s, 4, cudaMemcpyDeviceToHost) != cudaSuccess) return 2;
    const float want = N * (N + 1) / 2.0f;
    std::printf("%s store: sum %.0f (%s)\n", bulk ? "bulk-copy" : "plain", h, h == want ? "right" : "WRONG");
    return h == want ? 0 : 1;
}
