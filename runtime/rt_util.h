/* runtime/rt_util.h — small helpers the runtime's files share. */
#ifndef KILN_RT_UTIL_H
#define KILN_RT_UTIL_H
#include <stddef.h>

/* printf into a malloc'd string; NULL when the format fails or on OOM. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
char *rt_strf(const char *fmt, ...);

/* Environment lookup, so callers and tests can supply their own values.
 * NULL means the process environment (getenv). */
typedef const char *(*rt_getenv_fn)(void *user, const char *name);

/* name's value through fn (NULL: getenv); NULL when unset or empty. */
const char *rt_env_get(rt_getenv_fn fn, void *user, const char *name);

/* Writes len bytes to path through a temporary file in the same directory
 * (a short name, so a path near the file system's name limit fails on its
 * own name), renamed into place: path is either whole or untouched. Returns
 * 0, or the errno of the failure with "PATH: reason" in err. */
int rt_write_file(const char *path, const void *data, size_t len, char *err, size_t n);

/* Milliseconds on CLOCK_MONOTONIC (for durations). */
double rt_now_ms(void);

/* ---- CUDA libraries loaded at run time (CUPTI, cuBLAS) ---- */

/* The paths to try for the library `base` ("libcupti.so") of soname major
 * `major`, in order, into out (max entries of 512 bytes); returns how many:
 * $env (a path) when set, base.major and base through the library path,
 * then under each toolkit root ($CUDA_HOME, $CUDA_PATH, the toolkit Kiln was
 * built with, /usr/local/cuda) in each of subs (nsubs of them). */
int rt_lib_candidates(const char *env, const char *base, int major, const char *const *subs, int nsubs,
                      rt_getenv_fn getenv_fn, void *user, char (*out)[512], int max);

typedef struct rt_lib_sym {
    const char *name;
    void **slot;
} rt_lib_sym;

/* dlopen the first of the n candidates that loads and resolve every
 * symbol into its slot. Returns the handle (kept open for the process),
 * with the path in path; NULL with why (the first loader errors, or the
 * missing symbol; the slots are then zeroed). */
void *rt_lib_load(char (*cand)[512], int n, const rt_lib_sym *syms, int nsyms, char *path, size_t pn, char *why,
                  size_t wn);

#endif
