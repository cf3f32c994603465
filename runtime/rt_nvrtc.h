/* runtime/rt_nvrtc.h — compile CUDA C++ translation units with NVRTC.
 *
 * One call compiles one translation unit (the source codegen emits for one
 * kernel group) to PTX or to a cubin; rt_nvrtc_compile_many compiles many on
 * a pool of worker threads (NVRTC is thread-safe for separate programs).
 * Nothing here needs a GPU or a driver: NVRTC alone produces sm_90a cubins.
 *
 * Every NVRTC call is checked. Failures come back as an rt_status plus a
 * malloc'd message that names the kernel and, for a compile error, carries
 * NVRTC's program log; the library never prints, exits or aborts.
 *
 * Options always passed (in this order, then opts->extra):
 *   -arch=<arch>                    (CUBIN)   or
 *   --gpu-architecture=compute_<n>  (PTX: sm_90a -> compute_90a)
 *   -std=c++17 -default-device
 *   -lineinfo                       only when opts->lineinfo
 *   -I<cuda include dir>            see rt_nvrtc_include_dir
 * --use_fast_math is not on by default; pass it in extra.
 *
 * Headers: NVRTC 13.0 does not ship cuda_bf16.h/cuda_fp16.h as built-in
 * headers (checked: "could not open source file cuda_bf16.h"), so the CUDA
 * include directory must exist at run time when a kernel includes them. */
#ifndef KILN_RT_NVRTC_H
#define KILN_RT_NVRTC_H
#include <stdbool.h>
#include <stddef.h>

#include "runtime/rt_err.h"
#include "runtime/rt_util.h"

typedef enum rt_target { RT_TARGET_PTX, RT_TARGET_CUBIN } rt_target;

/* Compiled code, malloc'd. PTX is NUL-terminated (size excludes the NUL);
 * a cubin is size bytes. */
typedef struct rt_blob {
    unsigned char *data;
    size_t size;
} rt_blob;
void rt_blob_free(rt_blob *b); /* frees data, zeroes the struct; NULL-safe */


#define RT_DEFAULT_ARCH "sm_90a"

typedef struct rt_compile_opts {
    const char *arch;         /* "sm_90a" when NULL; [a-z0-9_]+, starts "sm_" */
    const char *const *extra; /* more NVRTC options ("-DTILE=64", "--use_fast_math") */
    int nextra;               /* must not set the architecture: use arch */
    bool lineinfo;            /* add -lineinfo */
    const char *include_dir;  /* CUDA headers; NULL = rt_nvrtc_include_dir(),
                               * "" = none */
    rt_getenv_fn getenv;      /* used to resolve include_dir when NULL */
    void *getenv_user;
} rt_compile_opts;

typedef struct rt_compile_result {
    rt_status status;
    rt_blob code;   /* the PTX or cubin on success; empty otherwise */
    char *log;      /* NVRTC's program log, malloc'd; "" when clean (no
                     * warnings). NULL only when it could not be obtained. */
    char *message;  /* NULL on success; otherwise malloc'd, starts with
                     * "kernel 'NAME': " and, for RT_ERR_COMPILE, ends with
                     * the log */
    double ms;      /* wall-clock time of this compile */
} rt_compile_result;
void rt_compile_result_free(rt_compile_result *r); /* NULL-safe; zeroes */

/* The NVRTC library's version (nvrtcVersion). */
rt_status rt_nvrtc_version(int *major, int *minor);

/* arch is a real-GPU architecture name usable in a path: "sm_" then
 * [a-z0-9_], under 32 characters. */
bool rt_nvrtc_arch_valid(const char *arch);

/* The CUDA include directory handed to NVRTC: the first of $KILN_CUDA_INCLUDE,
 * $CUDA_HOME/include, $CUDA_PATH/include, KILN_CUDA_INCLUDE_DIR (a build-time
 * define, default /usr/local/cuda/include), /usr/include that holds
 * cuda_bf16.h. Writes it to buf; false (buf = "") when none does. */
bool rt_nvrtc_include_dir(rt_getenv_fn getenv_fn, void *user, char *buf, size_t n);

/* The options that determine the output, as passed to NVRTC, without the
 * include directory (a path, not an input: the headers are versioned with
 * NVRTC). For cache keys. Writes up to max pointers (into opts' strings and
 * static strings) and returns the total count, or -1 for invalid opts. */
int rt_nvrtc_key_options(const rt_compile_opts *opts, rt_target target,
                         const char **argv, int max);

/* Compile `source` (NUL-terminated) named `name` (the NVRTC program name:
 * it appears in the log). opts may be NULL (defaults). Fills *out (which the
 * caller frees with rt_compile_result_free) and returns out->status. */
rt_status rt_nvrtc_compile(const char *name, const char *source, const rt_compile_opts *opts,
                           rt_target target, rt_compile_result *out);

/* Called once per finished compile, from a worker thread, serialized (never
 * two calls at once). done counts finished compiles including this one. */
typedef void (*rt_progress_fn)(void *user, int done, int total, int index,
                               const rt_compile_result *r);

/* Compile n units in parallel on nthreads threads (<= 0: one per online CPU,
 * at most RT_NVRTC_DEFAULT_THREADS_MAX; never more than n; the calling thread
 * is one of them). out[i] receives unit i, exactly as rt_nvrtc_compile would
 * give it. Returns RT_OK when all succeeded, else the status of the
 * lowest-indexed failure.
 *
 * Threads in one process barely scale -- NVRTC serializes most of a compile
 * internally -- while separate processes do (the measurement is in the
 * README, "Compile times"). Each live NVRTC instance also costs memory, so
 * the default is capped; a process pool is the way to real parallelism. */
#define RT_NVRTC_DEFAULT_THREADS_MAX 4
rt_status rt_nvrtc_compile_many(int n, const char *const names[], const char *const sources[],
                                const rt_compile_opts *opts, rt_target target,
                                rt_compile_result out[], int nthreads,
                                rt_progress_fn progress, void *user);

#endif
