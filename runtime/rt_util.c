/* runtime/rt_util.c — small shared helpers (runtime/rt_util.h). */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int rt_write_file(const char *path, const void *data, size_t len, char *err, size_t n)
{
    const char *slash = strrchr(path, '/');
    char *tmp = slash ? rt_strf("%.*s/.kiln-%ld.tmp", (int)(slash - path), path, (long)getpid())
                      : rt_strf(".kiln-%ld.tmp", (long)getpid());
    if (!tmp) {
        if (err && n) snprintf(err, n, "%s: out of memory", path);
        return ENOMEM;
    }
    int e = 0;
    FILE *f = fopen(tmp, "wb");
    if (!f) e = errno;
    if (f && len && fwrite(data, 1, len, f) != len) e = errno ? errno : EIO;
    if (f && fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        if (f) (void)remove(tmp);
        if (err && n) snprintf(err, n, "%s: %s", path, strerror(e));
    }
    free(tmp);
    return e;
}
