/* runtime/rt_util.h — small helpers the runtime's files share. */
#ifndef KILN_RT_UTIL_H
#define KILN_RT_UTIL_H

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

/* Milliseconds on CLOCK_MONOTONIC (for durations). */
double rt_now_ms(void);

#endif
