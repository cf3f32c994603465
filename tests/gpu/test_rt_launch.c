/* tests/gpu/test_rt_launch.c — runtime/rt_launch, the kernel loader/launcher.
 *
 * Everywhere: bad arguments come back as RT_ERR_INVALID with a
 * message, never a crash. Without a device (CI): rt_device_available says
 * why, and loading a real sm_90a cubin (compiled here with NVRTC) fails with
 * a status and a message instead of crashing. With a device: load, look up,
 * a missing kernel (NOT_FOUND), the KilnArgs size check, a launch whose
 * by-value struct reaches the kernel, more than 48 KiB of dynamic shared
 * memory after rt_kernel_set_max_smem (and a refusal above the device's
 * limit), attributes, a PDL launch, unload. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_nvrtc.h"

/* The kernel's struct, mirrored on the host: every field 8 bytes. */
typedef struct targs {
    float *out;
    const float *x;
    long long n;
    long long smem_floats; /* > 0: round-trip the values through that much dynamic shared memory */
    double scale;
} targs;

static const char *src =
    "struct TArgs { float *out; const float *x; long long n; long long smem_floats; double scale; };\n"
    "extern \"C\" __global__ void t_axpy(TArgs p)\n"
    "{\n"
    "    extern __shared__ float sm[];\n"
    "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    float v = i < p.n ? (float)p.scale * p.x[i] + 1.0f : 0.0f;\n"
    "    if (p.smem_floats > 0) {\n"
    "        for (long long j = threadIdx.x; j < p.smem_floats; j += blockDim.x) sm[j] = (float)j;\n"
    "        __syncthreads();\n"
    "        long long last = p.smem_floats - 1 - threadIdx.x;\n"
    "        v += sm[last] - (float)last; /* + 0 when the whole buffer is there */\n"
    "    }\n"
    "    if (i < p.n) p.out[i] = v;\n"
    "}\n"
    "extern \"C\" __global__ void t_two(int a, int b) { (void)a; (void)b; }\n";

int main(void)
{
    char err[512], why[256];
    rt_module *m = (rt_module *)1;
    rt_kernel k;

    /* bad arguments */
    CHECK(rt_module_load(&m, NULL, 10, err, sizeof err) == RT_ERR_INVALID && m == NULL && err[0]);
    CHECK(rt_module_load(NULL, "x", 2, err, sizeof err) == RT_ERR_INVALID);
    static const unsigned char junk[4] = {1, 2, 3, 4};
    CHECK(rt_module_load(&m, junk, sizeof junk, err, sizeof err) == RT_ERR_INVALID && strstr(err, "cubin"));
    CHECK(rt_module_kernel(NULL, "t", &k, err, sizeof err) == RT_ERR_INVALID);
    targs a0 = {0};
    rt_dim3 one = {1, 1, 1};
    CHECK(rt_launch(NULL, one, one, 0, NULL, &a0, sizeof a0, err, sizeof err) == RT_ERR_INVALID && err[0]);
    CHECK(rt_launch(NULL, one, one, 0, NULL, &a0, sizeof a0, NULL, 0) == RT_ERR_INVALID); /* NULL err ok */
    rt_module_free(NULL);
    CHECK(strcmp(rt_status_str(RT_OK), "ok") == 0);
    CHECK(strcmp(rt_status_str(RT_ERR_NO_DEVICE), "no CUDA device") == 0);

    /* a real cubin */
    rt_compile_result cr;
    rt_status cs = rt_nvrtc_compile("t_axpy", src, NULL, RT_TARGET_CUBIN, &cr);
    CHECK_MSG(cs == RT_OK, "%s", cr.message ? cr.message : "");
    if (cs != RT_OK) return CHECK_DONE();

    int have = rt_device_available(why, sizeof why);
    if (!have) {
        CHECK(why[0] != 0);
        printf("no device (%s): checking graceful failures only\n", why);
        rt_status s = rt_module_load(&m, cr.code.data, cr.code.size, err, sizeof err);
        CHECK_MSG(s != RT_OK && m == NULL && err[0], "load without a device gave %s", rt_status_str(s));
        printf("load without a device: %s: %s\n", rt_status_str(s), err);
        int smem = 0;
        CHECK(rt_device_max_smem_optin(&smem, err, sizeof err) != RT_OK && err[0]);
        rt_compile_result_free(&cr);
        return CHECK_DONE();
    }

    CHECK(rt_module_load(&m, cr.code.data, cr.code.size, err, sizeof err) == RT_OK);
    rt_compile_result_free(&cr); /* the module does not keep the image */
    if (!m) {
        fprintf(stderr, "load: %s\n", err);
        return CHECK_DONE();
    }
    CHECK(rt_module_kernel(m, "nope", &k, err, sizeof err) == RT_ERR_NOT_FOUND && strstr(err, "nope"));
    /* only parameter 0 is probed (asking past the last one is an API error that
     * compute-sanitizer reports): a kernel of two ints loads with its first one's size */
    CHECK(rt_module_kernel(m, "t_two", &k, err, sizeof err) == RT_OK && k.param_size == sizeof(int));
    CHECK_MSG(rt_module_kernel(m, "t_axpy", &k, err, sizeof err) == RT_OK, "%s", err);
    CHECK(k.param_size == sizeof(targs) && strcmp(k.name, "t_axpy") == 0 && k.mod == m);

    const long long n = 100000;
    float *hx = malloc(n * sizeof(float)), *ho = malloc(n * sizeof(float));
    float *dx = NULL, *dout = NULL;
    CHECK(hx && ho);
    for (long long i = 0; i < n; i++) hx[i] = (float)(i % 1000) * 0.25f;
    CHECK(cudaMalloc((void **)&dx, n * sizeof(float)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&dout, n * sizeof(float)) == cudaSuccess);
    CHECK(cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    rt_dim3 grid = {(unsigned)((n + 255) / 256), 1, 1}, block = {256, 1, 1};

    /* size mismatch, empty grid */
    targs a = {dout, dx, n, 0, 3.0};
    CHECK(rt_launch(&k, grid, block, 0, NULL, &a, sizeof a - 8, err, sizeof err) == RT_ERR_INVALID &&
          strstr(err, "KilnArgs"));
    rt_dim3 zero = {0, 1, 1};
    CHECK(rt_launch(&k, zero, block, 0, NULL, &a, sizeof a, err, sizeof err) == RT_ERR_INVALID);

    /* plain launch */
    int good = 1;
    CHECK(cudaMemset(dout, 0xff, n * sizeof(float)) == cudaSuccess);
    CHECK_MSG(rt_launch(&k, grid, block, 0, NULL, &a, sizeof a, err, sizeof err) == RT_OK, "%s", err);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(ho, dout, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    for (long long i = 0; i < n; i++) good &= ho[i] == 3.0f * hx[i] + 1.0f;
    CHECK_MSG(good, "launch: wrong values (struct not passed by value?)");

    /* 100 KiB of dynamic shared memory: refused before the attribute, works after */
    int optin = 0;
    CHECK(rt_device_max_smem_optin(&optin, err, sizeof err) == RT_OK && optin >= 48 * 1024);
    size_t big = 100 * 1024;
    if ((size_t)optin >= big) {
        a.smem_floats = (long long)(big / 4);
        rt_status s = rt_launch(&k, grid, block, big, NULL, &a, sizeof a, err, sizeof err);
        CHECK_MSG(s == RT_ERR_CUDA, "100 KiB without the attribute: %s", rt_status_str(s));
        CHECK_MSG(rt_kernel_set_max_smem(&k, big, err, sizeof err) == RT_OK, "%s", err);
        CHECK(cudaMemset(dout, 0xff, n * sizeof(float)) == cudaSuccess);
        CHECK_MSG(rt_launch(&k, grid, block, big, NULL, &a, sizeof a, err, sizeof err) == RT_OK, "%s", err);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        CHECK(cudaMemcpy(ho, dout, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
        good = 1;
        for (long long i = 0; i < n; i++) good &= ho[i] == 3.0f * hx[i] + 1.0f;
        CHECK_MSG(good, "launch with 100 KiB of shared memory: wrong values");
    }
    CHECK(rt_kernel_set_max_smem(&k, (size_t)optin + 4096, err, sizeof err) == RT_ERR_INVALID &&
          strstr(err, "opt-in"));

    rt_kernel_attrs at;
    CHECK(rt_kernel_get_attrs(&k, &at, err, sizeof err) == RT_OK && at.num_regs > 0 && at.max_threads >= 256);
    printf("t_axpy: %d registers, %zu B local, max dynamic smem %d\n", at.num_regs, at.local_bytes, at.max_dynamic_smem);

    /* programmatic dependent launch flag */
    a.smem_floats = 0;
    CHECK_MSG(rt_launch_ex(&k, grid, block, 0, NULL, &a, sizeof a, RT_LAUNCH_PDL, err, sizeof err) == RT_OK,
              "%s", err);
    CHECK(rt_launch_ex(&k, grid, block, 0, NULL, &a, sizeof a, 0x80, err, sizeof err) == RT_ERR_INVALID);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess); /* nothing left behind by the refused calls */

    cudaFree(dx);
    cudaFree(dout);
    free(hx);
    free(ho);
    rt_module_free(m);
    return CHECK_DONE();
}
