/* runtime/rt_err.h — the runtime's one status type and its one way to check
 * CUDA, NVRTC and cuBLAS calls.
 *
 * Status: every runtime function that can fail returns an rt_status. Its
 * values are the public kiln_status values (include/kiln.h) one for one, so
 * the API layer passes them through (tests/runtime/test_rt_err.c pins the
 * correspondence). A failure also writes one line into the caller's buffer
 * (`char *err, size_t n`, err may be NULL); rt_fail does both in one statement:
 *
 *     return rt_fail(RT_ERR_WEIGHTS, err, n, "weight '%s': %s", name, why);
 *
 * Library calls: each CUDA runtime, NVRTC or cuBLAS call goes through a
 * checker, which returns RT_OK for success and otherwise writes
 * "[who: ]<the call as written>: <the library's reason> (<its error name>)"
 * and returns the status the error maps to. The macros stringify the call:
 *
 *     RT_CUDA_TRY(cudaGetDevice(&dev), err, n);          // return on failure
 *     rt_status st = RT_CUDA_CHECK(cudaLibraryLoadData(...), "kernel 'k'", err, n);
 *     if (st != RT_OK) { free(mod); return st; }         // clean up, then return
 *     RT_TRY(some_runtime_call(..., err, n));           // any rt_status expression
 *     RT_TRY_GOTO(st, fail, RT_CUDA_CHECK(cudaMalloc(&p, b), "arena", err, n));
 *
 * A CUDA error that means "no usable device or driver" maps to
 * RT_ERR_NO_DEVICE, cudaErrorMemoryAllocation to RT_ERR_NOMEM, any other to
 * RT_ERR_CUDA; a failed CUDA call also clears CUDA's last-error record
 * (cudaGetLastError), so a later check does not report it again. NVRTC
 * failures map to RT_ERR_COMPILE, cuBLAS ones to RT_ERR_CUDA (out of memory
 * to RT_ERR_NOMEM). Nothing here prints, exits or aborts. */
#ifndef KILN_RT_ERR_H
#define KILN_RT_ERR_H
#include <stdbool.h>
#include <stddef.h>

typedef enum rt_status {
    RT_OK = 0,                 /* KILN_OK */
    RT_ERR_INVALID = 1,        /* KILN_ERR_INVALID_ARGUMENT: NULL, bad option, not a cubin, size mismatch */
    RT_ERR_NOT_FOUND = 2,      /* KILN_ERR_NOT_FOUND: no tensor, dim or kernel of that name */
    RT_ERR_MODEL = 3,          /* KILN_ERR_MODEL */
    RT_ERR_COMPILE = 4,        /* KILN_ERR_CODEGEN: a kernel did not compile (NVRTC's log in the message) */
    RT_ERR_WEIGHTS = 5,        /* KILN_ERR_WEIGHTS: a weight file or a bound weight does not match */
    RT_ERR_MISSING_WEIGHT = 6, /* KILN_ERR_MISSING_WEIGHT */
    RT_ERR_STATE = 7,          /* KILN_ERR_STATE */
    RT_ERR_IO = 8,             /* KILN_ERR_IO: a file or directory operation failed */
    RT_ERR_NO_DEVICE = 9,      /* KILN_ERR_NO_DEVICE: no CUDA device or no usable driver */
    RT_ERR_CUDA = 10,          /* KILN_ERR_CUDA: a CUDA or cuBLAS call failed */
    RT_ERR_NOMEM = 11,         /* KILN_ERR_OUT_OF_MEMORY: host or device memory */
    RT_ERR_INTERNAL = 12,      /* KILN_ERR_INTERNAL: a bug in Kiln */
} rt_status;

/* "ok", "invalid argument", "compile error", ... (static strings). */
const char *rt_status_str(rt_status s);

/* Formats the message into err (truncated to n bytes, NUL-terminated) when
 * err is not NULL and n > 0; returns status (an rt_status; int, so that a
 * function returning either an rt_status or a plain int can use it). */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
int rt_fail(int status, char *err, size_t n, const char *fmt, ...);

/* A callback's int result as a status: 0 is RT_OK, an rt_status value is
 * itself, any other value (a -1, say) is a failure: RT_ERR_INTERNAL. */
rt_status rt_status_of(int result);

/* The status a CUDA runtime error (a cudaError_t) maps to (see above);
 * RT_OK for cudaSuccess. */
rt_status rt_cuda_status(int cuda_error);
/* Errors after which the CUDA context is unusable (an illegal address in a
 * kernel, ...): rt_cuda_check's message then says the context must be
 * recreated. */
bool rt_cuda_sticky(int cuda_error);

/* The checkers behind the macros. code is the call's cudaError_t,
 * nvrtcResult or cublasStatus_t; call its text; who (may be NULL) what the
 * call was for, e.g. "kernel 'k'". */
rt_status rt_cuda_check(int code, const char *call, const char *who, char *err, size_t n);
rt_status rt_nvrtc_check(int code, const char *call, const char *who, char *err, size_t n);
rt_status rt_cublas_check(int code, const char *call, const char *who, char *err, size_t n);

/* Expressions: the call's rt_status (message in err on failure). */
#define RT_CUDA_CHECK(call, who, err, n) rt_cuda_check((int)(call), #call, (who), (err), (n))
#define RT_NVRTC_CHECK(call, who, err, n) rt_nvrtc_check((int)(call), #call, (who), (err), (n))
#define RT_CUBLAS_CHECK(call, who, err, n) rt_cublas_check((int)(call), #call, (who), (err), (n))

/* Statements: return the status from the enclosing function on failure. */
#define RT_TRY(status_expr)                                   \
    do {                                                      \
        rt_status rt_try_status_ = (status_expr);             \
        if (rt_try_status_ != RT_OK) return rt_try_status_;   \
    } while (0)
/* ... or set st and jump to label (for functions that clean up on failure). */
#define RT_TRY_GOTO(st, label, status_expr)              \
    do {                                                 \
        if (((st) = (status_expr)) != RT_OK) goto label; \
    } while (0)
#define RT_CUDA_TRY(call, err, n) RT_TRY(RT_CUDA_CHECK(call, NULL, err, n))
#define RT_NVRTC_TRY(call, err, n) RT_TRY(RT_NVRTC_CHECK(call, NULL, err, n))
#define RT_CUBLAS_TRY(call, err, n) RT_TRY(RT_CUBLAS_CHECK(call, NULL, err, n))

#endif
