/* runtime/rt_util.c — small shared helpers (runtime/rt_util.h). */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

char *rt_strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) return NULL;
    char *s = malloc((size_t)len + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    return s;
}

const char *rt_env_get(rt_getenv_fn fn, void *user, const char *name)
{
    const char *v = fn ? fn(user, name) : getenv(name);
    return v && *v ? v : NULL;
}

double rt_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
