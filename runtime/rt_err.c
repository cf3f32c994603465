/* runtime/rt_err.c — rt_status, rt_fail and the library-call checkers
 * (runtime/rt_err.h). The only place in the runtime that compares a CUDA,
 * NVRTC or cuBLAS result with success. */
#include "runtime/rt_err.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/rt_cublas.h"

const char *rt_status_str(rt_status s)
{
    switch (s) {
    case RT_OK: return "ok";
    case RT_ERR_INVALID: return "invalid argument";
    case RT_ERR_NOT_FOUND: return "not found";
    case RT_ERR_MODEL: return "error in the model";
    case RT_ERR_COMPILE: return "compile error";
    case RT_ERR_WEIGHTS: return "weights do not match the model";
    case RT_ERR_MISSING_WEIGHT: return "weights not bound";
    case RT_ERR_STATE: return "states not allocated or reshaped";
    case RT_ERR_IO: return "I/O error";
    case RT_ERR_NO_DEVICE: return "no CUDA device";
    case RT_ERR_CUDA: return "CUDA error";
    case RT_ERR_NOMEM: return "out of memory";
    case RT_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

int rt_fail(int status, char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return status;
}

rt_status rt_status_of(int result)
{
    return result >= RT_OK && result <= RT_ERR_INTERNAL ? (rt_status)result : RT_ERR_INTERNAL;
}

/* CUDA errors that mean "no usable device or driver" rather than a bug. */
static int no_device_error(cudaError_t e)
{
    return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInitializationError ||
           e == cudaErrorDevicesUnavailable || e == cudaErrorSystemDriverMismatch ||
           e == cudaErrorCompatNotSupportedOnDevice || e == cudaErrorStubLibrary || e == cudaErrorNotSupported;
}

rt_status rt_cuda_status(int cuda_error)
{
    cudaError_t e = (cudaError_t)cuda_error;
    if (e == cudaSuccess) return RT_OK;
    if (e == cudaErrorMemoryAllocation) return RT_ERR_NOMEM;
    return no_device_error(e) ? RT_ERR_NO_DEVICE : RT_ERR_CUDA;
}

static rt_status call_fail(rt_status st, const char *call, const char *who, const char *reason, const char *name,
                           char *err, size_t n)
{
    return (rt_status)rt_fail(st, err, n, "%s%s%s: %s%s%s%s", who ? who : "", who ? ": " : "", call, reason, name ? " (" : "",
                   name ? name : "", name ? ")" : "");
}

bool rt_cuda_sticky(int cuda_error)
{
    cudaError_t e = (cudaError_t)cuda_error;
    return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorHardwareStackError ||
           e == cudaErrorIllegalInstruction || e == cudaErrorMisalignedAddress || e == cudaErrorInvalidAddressSpace ||
           e == cudaErrorInvalidPc || e == cudaErrorECCUncorrectable || e == cudaErrorAssert ||
           e == cudaErrorLaunchTimeout || e == cudaErrorContextIsDestroyed || e == cudaErrorTensorMemoryLeak;
}

rt_status rt_cuda_check(int code, const char *call, const char *who, char *err, size_t n)
{
    cudaError_t e = (cudaError_t)code;
    if (e == cudaSuccess) return RT_OK;
    (void)cudaGetLastError(); /* the failure is reported here; leave no record for the next check */
    rt_status st = call_fail(rt_cuda_status(code), call, who, cudaGetErrorString(e), cudaGetErrorName(e), err, n);
    size_t len = err && n ? strlen(err) : 0;
    if (rt_cuda_sticky(code) && len + 1 < n)
        snprintf(err + len, n - len, "; this error is sticky: the CUDA context cannot be used again (free the Kiln "
                 "context and create a new one, or restart the process)");
    return st;
}

rt_status rt_nvrtc_check(int code, const char *call, const char *who, char *err, size_t n)
{
    nvrtcResult r = (nvrtcResult)code;
    if (r == NVRTC_SUCCESS) return RT_OK;
    return call_fail(RT_ERR_COMPILE, call, who, nvrtcGetErrorString(r), NULL, err, n);
}

rt_status rt_cublas_check(int code, const char *call, const char *who, char *err, size_t n)
{
    cublasStatus_t s = (cublasStatus_t)code;
    if (s == CUBLAS_STATUS_SUCCESS) return RT_OK;
    /* the names come from the library (loaded by whoever made the call) */
    const rt_cublas_api *b = rt_cublas(NULL, 0);
    char num[48];
    snprintf(num, sizeof num, "cuBLAS status %d", code);
    return call_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? RT_ERR_NOMEM : RT_ERR_CUDA, call, who,
                     b ? b->status_string(s) : num, b ? b->status_name(s) : NULL, err, n);
}
