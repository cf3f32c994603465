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

#endif
