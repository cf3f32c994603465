/* tests/runtime/test_rt_err.c — the runtime's status and its call checkers
 * (runtime/rt_err.h), no GPU needed: rt_status equals kiln_status value for
 * value, each checker passes success through silently and turns a failure
 * into the mapped status and a message naming the call, and the TRY macros
 * return from the enclosing function. */
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <string.h>

#include "check.h"
#include "kiln.h"
#include "runtime/rt_err.h"

#define SAME(r, k) _Static_assert((int)(r) == (int)(k), #r " is " #k)
SAME(RT_OK, KILN_OK);
SAME(RT_ERR_INVALID, KILN_ERR_INVALID_ARGUMENT);
SAME(RT_ERR_NOT_FOUND, KILN_ERR_NOT_FOUND);
SAME(RT_ERR_MODEL, KILN_ERR_MODEL);
SAME(RT_ERR_COMPILE, KILN_ERR_CODEGEN);
SAME(RT_ERR_WEIGHTS, KILN_ERR_WEIGHTS);
SAME(RT_ERR_MISSING_WEIGHT, KILN_ERR_MISSING_WEIGHT);
SAME(RT_ERR_STATE, KILN_ERR_STATE);
SAME(RT_ERR_IO, KILN_ERR_IO);
SAME(RT_ERR_NO_DEVICE, KILN_ERR_NO_DEVICE);
SAME(RT_ERR_CUDA, KILN_ERR_CUDA);
SAME(RT_ERR_NOMEM, KILN_ERR_OUT_OF_MEMORY);
SAME(RT_ERR_INTERNAL, KILN_ERR_INTERNAL);

static cudaError_t fake_cuda(cudaError_t e) { return e; }
static nvrtcResult fake_nvrtc(nvrtcResult r) { return r; }
static cublasStatus_t fake_cublas(cublasStatus_t s) { return s; }

static int calls;

static rt_status try_cuda(cudaError_t e, char *err, size_t n)
{
    RT_CUDA_TRY(fake_cuda(e), err, n);
    calls++; /* reached only on success */
    return RT_OK;
}

static rt_status try_nvrtc(nvrtcResult r, char *err, size_t n)
{
    RT_NVRTC_TRY(fake_nvrtc(r), err, n);
    calls++;
    return RT_OK;
}

static rt_status try_cublas(cublasStatus_t s, char *err, size_t n)
{
    RT_CUBLAS_TRY(fake_cublas(s), err, n);
    calls++;
    return RT_OK;
}

static rt_status try_any(rt_status s)
{
    RT_TRY(s);
    calls++;
    return RT_OK;
}

static int cleanups;

static rt_status try_goto(cudaError_t e, char *err, size_t n)
{
    rt_status st = RT_OK;
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(fake_cuda(e), "arena", err, n));
    calls++;
out:
    cleanups++; /* reached on success and on failure */
    return st;
}

static void test_strings(void)
{
    CHECK(!strcmp(rt_status_str(RT_OK), "ok"));
    CHECK(!strcmp(rt_status_str(RT_ERR_NO_DEVICE), "no CUDA device"));
    CHECK(!strcmp(rt_status_str(RT_ERR_COMPILE), "compile error"));
    CHECK(!strcmp(rt_status_str((rt_status)99), "unknown status"));
    for (int s = RT_OK; s <= RT_ERR_INTERNAL; s++)
        CHECK_MSG(strcmp(rt_status_str((rt_status)s), "unknown status") != 0, "status %d has no string", s);
}

static void test_cuda(void)
{
    char err[256] = "untouched";
    calls = 0;
    CHECK(try_cuda(cudaSuccess, err, sizeof err) == RT_OK && calls == 1 && !strcmp(err, "untouched"));
    CHECK(try_cuda(cudaErrorInvalidValue, err, sizeof err) == RT_ERR_CUDA && calls == 1);
    CHECK_MSG(strstr(err, "fake_cuda(e): ") == err && strstr(err, "(cudaErrorInvalidValue)"), "%s", err);
    CHECK(try_cuda(cudaErrorMemoryAllocation, err, sizeof err) == RT_ERR_NOMEM);
    CHECK(try_cuda(cudaErrorNoDevice, err, sizeof err) == RT_ERR_NO_DEVICE);
    CHECK(try_cuda(cudaErrorInsufficientDriver, NULL, 0) == RT_ERR_NO_DEVICE); /* NULL err is fine */
    CHECK(rt_cuda_status(cudaSuccess) == RT_OK && rt_cuda_status(cudaErrorLaunchFailure) == RT_ERR_CUDA);

    /* the expression form, with what the call was for */
    CHECK(RT_CUDA_CHECK(fake_cuda(cudaErrorInvalidDeviceFunction), "kernel 'k'", err, sizeof err) == RT_ERR_CUDA);
    CHECK_MSG(strstr(err, "kernel 'k': fake_cuda(cudaErrorInvalidDeviceFunction): ") == err, "%s", err);
    /* a message longer than the buffer is cut, still NUL-terminated */
    char tiny[8];
    CHECK(RT_CUDA_CHECK(fake_cuda(cudaErrorInvalidValue), "a long subject", tiny, sizeof tiny) == RT_ERR_CUDA);
    CHECK(strlen(tiny) == sizeof tiny - 1);
}

static void test_nvrtc(void)
{
    char err[256] = "";
    calls = 0;
    CHECK(try_nvrtc(NVRTC_SUCCESS, err, sizeof err) == RT_OK && calls == 1 && err[0] == '\0');
    CHECK(try_nvrtc(NVRTC_ERROR_INVALID_OPTION, err, sizeof err) == RT_ERR_COMPILE && calls == 1);
    CHECK_MSG(strstr(err, "fake_nvrtc(r): NVRTC_ERROR_INVALID_OPTION") == err, "%s", err);
}

static void test_cublas(void)
{
    char err[256] = "";
    calls = 0;
    CHECK(try_cublas(CUBLAS_STATUS_SUCCESS, err, sizeof err) == RT_OK && calls == 1 && err[0] == '\0');
    CHECK(try_cublas(CUBLAS_STATUS_NOT_INITIALIZED, err, sizeof err) == RT_ERR_CUDA && calls == 1);
    CHECK_MSG(strstr(err, "fake_cublas(s): ") == err && strstr(err, "(CUBLAS_STATUS_NOT_INITIALIZED)"), "%s", err);
    CHECK(try_cublas(CUBLAS_STATUS_ALLOC_FAILED, err, sizeof err) == RT_ERR_NOMEM);
}

static void test_try_and_fail(void)
{
    calls = 0;
    CHECK(try_any(RT_OK) == RT_OK && calls == 1);
    CHECK(try_any(RT_ERR_IO) == RT_ERR_IO && calls == 1);
    char err[64];
    CHECK(rt_fail(RT_ERR_WEIGHTS, err, sizeof err, "weight '%s'", "wq") == RT_ERR_WEIGHTS && !strcmp(err, "weight 'wq'"));
    CHECK(rt_fail(RT_ERR_IO, NULL, 0, "ignored") == RT_ERR_IO);

    calls = cleanups = 0;
    CHECK(try_goto(cudaSuccess, err, sizeof err) == RT_OK && calls == 1 && cleanups == 1);
    CHECK(try_goto(cudaErrorMemoryAllocation, err, sizeof err) == RT_ERR_NOMEM && calls == 1 && cleanups == 2);
    CHECK_MSG(strstr(err, "arena: fake_cuda(e): ") == err, "%s", err);

    CHECK(rt_status_of(0) == RT_OK && rt_status_of(RT_ERR_STATE) == RT_ERR_STATE);
    CHECK(rt_status_of(-1) == RT_ERR_INTERNAL && rt_status_of(99) == RT_ERR_INTERNAL);
}

int main(void)
{
    test_strings();
    test_cuda();
    test_nvrtc();
    test_cublas();
    test_try_and_fail();
    return CHECK_DONE();
}
