/* runtime/rt_util.h — small helpers the runtime's files share. */
#ifndef KILN_RT_UTIL_H
#define KILN_RT_UTIL_H

/* printf into a malloc'd string; NULL when the format fails or on OOM. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
char *rt_strf(const char *fmt, ...);

/* Milliseconds on CLOCK_MONOTONIC (for durations). */
double rt_now_ms(void);

#endif
