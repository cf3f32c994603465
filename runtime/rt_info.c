/* runtime/rt_info.c — component versions for `kiln --version`. */
#include "runtime/rt_info.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <stdio.h>

#include "runtime/rt_cublas.h"
#include "runtime/rt_err.h"

void rt_versions(char *buf, size_t n)
{
    char nv[160], rt[160], bl[160], why[128];
    int maj = 0, min = 0, v = 0, pat = 0;
    if (RT_NVRTC_CHECK(nvrtcVersion(&maj, &min), NULL, why, sizeof why) == RT_OK)
        snprintf(nv, sizeof nv, "NVRTC %d.%d", maj, min);
    else snprintf(nv, sizeof nv, "NVRTC unavailable (%s)", why);
    if (RT_CUDA_CHECK(cudaRuntimeGetVersion(&v), NULL, why, sizeof why) == RT_OK)
        snprintf(rt, sizeof rt, "CUDA runtime %d.%d", v / 1000, (v % 1000) / 10);
    else snprintf(rt, sizeof rt, "CUDA runtime unavailable (%s)", why);
    const rt_cublas_api *b = rt_cublas(NULL, 0); /* loaded here, for the version alone */
    if (b && RT_CUBLAS_CHECK(b->get_property(MAJOR_VERSION, &maj), NULL, NULL, 0) == RT_OK &&
        RT_CUBLAS_CHECK(b->get_property(MINOR_VERSION, &min), NULL, NULL, 0) == RT_OK &&
        RT_CUBLAS_CHECK(b->get_property(PATCH_LEVEL, &pat), NULL, NULL, 0) == RT_OK)
        snprintf(bl, sizeof bl, "cuBLAS %d.%d.%d", maj, min, pat);
    else snprintf(bl, sizeof bl, "cuBLAS unavailable");
    snprintf(buf, n, "%s, %s, %s", nv, rt, bl);
}
