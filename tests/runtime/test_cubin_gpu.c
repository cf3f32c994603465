/* tests/runtime/test_cubin_gpu.c — a cubin from NVRTC, stored in and read
 * back from the disk cache, loads through the CUDA runtime's library API
 * (cudaLibraryLoadData) and computes the right thing. Label `gpu`: exits 77
 * when there is no device (or no driver). */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <cuda_runtime_api.h>
#include <math.h>

#include "check.h"
#include "ir/ir.h"
#include "runtime/rt_cache.h"
#include "rt_test_util.h"

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));            \
        if (e_ != cudaSuccess) goto out;                                                  \
    } while (0)

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    char *dir = make_tmpdir();
    char src[1024];
    bf16_kernel(src, sizeof src, "scale3", 3);
    rt_cache *c = NULL;
    rt_cache_config cfg = {.dir = dir};
    rt_compile_result r = {0};
    rt_cache_lookup how;
    cudaLibrary_t lib = NULL;
    cudaKernel_t k = NULL;
    void *dx = NULL, *dy = NULL;
    enum { N = 1000 };
    uint16_t hx[N], hy[N];

    CHECK(rt_cache_open(&c, &cfg) == RT_OK);
    CHECK(rt_cache_compile(c, "scale3", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_MISS);
    rt_compile_result_free(&r);
    rt_cache_close(c);
    c = NULL;
    CHECK(rt_cache_open(&c, &cfg) == RT_OK);
    CHECK(rt_cache_compile(c, "scale3", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_HIT_DISK);
    if (r.status != RT_OK) goto out;

    CUDA_CHECK(cudaLibraryLoadData(&lib, r.code.data, NULL, NULL, 0, NULL, NULL, 0));
    CUDA_CHECK(cudaLibraryGetKernel(&k, lib, "scale3"));
    for (int i = 0; i < N; i++) hx[i] = ir_f32_to_bf16_bits((float)(i % 97) * 0.37f - 11.0f);
    CUDA_CHECK(cudaMalloc(&dx, sizeof hx));
    CUDA_CHECK(cudaMalloc(&dy, sizeof hy));
    CUDA_CHECK(cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dy, 0xff, sizeof hy)); /* poison */
    int n = N;
    void *args[] = {&dx, &dy, &n};
    CUDA_CHECK(cudaLaunchKernel((const void *)k, (dim3){4, 1, 1}, (dim3){256, 1, 1}, args, 0, NULL));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        float want = ir_bf16_bits_to_f32(ir_f32_to_bf16_bits(ir_bf16_bits_to_f32(hx[i]) * 3.0f));
        if (ir_bf16_bits_to_f32(hy[i]) != want) wrong++;
    }
    CHECK_MSG(wrong == 0, "%d of %d outputs wrong", wrong, N);

out:
    if (dx) cudaFree(dx);
    if (dy) cudaFree(dy);
    if (lib) cudaLibraryUnload(lib);
    rt_compile_result_free(&r);
    rt_cache_close(c);
    rm_tree(dir);
    free(dir);
    return CHECK_DONE();
}
