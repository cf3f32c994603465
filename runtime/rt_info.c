/* runtime/rt_info.c — component versions for `kiln --version`. */
#include "runtime/rt_info.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <stdio.h>

void rt_versions(char *buf, size_t n)
{
    char nv[64], rt[64], bl[64];
    int maj = 0, min = 0, v = 0, pat = 0;
    nvrtcResult nr = nvrtcVersion(&maj, &min);
    if (nr == NVRTC_SUCCESS) snprintf(nv, sizeof nv, "NVRTC %d.%d", maj, min);
    else snprintf(nv, sizeof nv, "NVRTC unavailable (%s)", nvrtcGetErrorString(nr));
    cudaError_t ce = cudaRuntimeGetVersion(&v);
    if (ce == cudaSuccess) snprintf(rt, sizeof rt, "CUDA runtime %d.%d", v / 1000, (v % 1000) / 10);
    else snprintf(rt, sizeof rt, "CUDA runtime unavailable (%s)", cudaGetErrorString(ce));
    if (cublasGetProperty(MAJOR_VERSION, &maj) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &min) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &pat) == CUBLAS_STATUS_SUCCESS)
        snprintf(bl, sizeof bl, "cuBLAS %d.%d.%d", maj, min, pat);
    else snprintf(bl, sizeof bl, "cuBLAS unavailable");
    snprintf(buf, n, "%s, %s, %s", nv, rt, bl);
}
