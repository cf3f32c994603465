/* runtime/rt_util.c — small shared helpers (runtime/rt_util.h). */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_util.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
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

#ifndef KILN_CUDA_ROOT
#define KILN_CUDA_ROOT "/usr/local/cuda"
#endif

int rt_lib_candidates(const char *env, const char *base, int major, const char *const *subs, int nsubs,
                      rt_getenv_fn getenv_fn, void *user, char (*out)[512], int max)
{
    int k = 0;
#define ADD(...)                                            \
    do {                                                    \
        if (k < max) snprintf(out[k++], 512, __VA_ARGS__); \
    } while (0)
    const char *lib = env ? rt_env_get(getenv_fn, user, env) : NULL;
    if (lib) ADD("%s", lib);
    ADD("%s.%d", base, major);
    ADD("%s", base);
    const char *roots[] = {rt_env_get(getenv_fn, user, "CUDA_HOME"), rt_env_get(getenv_fn, user, "CUDA_PATH"), KILN_CUDA_ROOT,
                           "/usr/local/cuda"};
    for (int r = 0; r < 4; r++) {
        if (!roots[r]) continue;
        bool seen = false;
        for (int q = 0; q < r; q++) seen = seen || (roots[q] && !strcmp(roots[q], roots[r]));
        if (seen) continue;
        for (int s = 0; s < nsubs; s++) {
            ADD("%s/%s/%s.%d", roots[r], subs[s], base, major);
            ADD("%s/%s/%s", roots[r], subs[s], base);
        }
    }
#undef ADD
    return k;
}

void *rt_lib_load(char (*cand)[512], int n, const rt_lib_sym *syms, int nsyms, char *path, size_t pn, char *why,
                  size_t wn)
{
    void *h = NULL;
    size_t used = 0;
    why[0] = 0;
    for (int i = 0; i < n && !h; i++) {
        h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(path, pn, "%.500s", cand[i]);
        } else if (used + 1 < wn && i < 3) {
            const char *e = dlerror();
            used += (size_t)snprintf(why + used, wn - used, "%s%s", used ? "; " : "", e ? e : cand[i]);
        }
    }
    if (!h) return NULL;
    for (int i = 0; i < nsyms; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(why, wn, "%s has no %s", path, syms[i].name);
            path[0] = 0;
            for (int j = 0; j < nsyms; j++) *syms[j].slot = NULL;
            return NULL; /* the handle stays open: unloading a half-used library is not safe */
        }
    }
    return h;
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
