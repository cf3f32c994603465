/* tests/runtime/rt_test_util.h — temp directories, files and a fake
 * environment for the runtime tests. Include after the feature macros. */
#ifndef KILN_TESTS_RT_TEST_UTIL_H
#define KILN_TESTS_RT_TEST_UTIL_H
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A tiny bf16 kernel; `tag` makes distinct sources (and keys). */
static inline char *bf16_kernel(char *buf, size_t n, const char *name, int tag)
{
    snprintf(buf, n,
             "#include <cuda_bf16.h>\n"
             "extern \"C\" __global__ void %s(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n)\n"
             "{\n"
             "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "    if (i < n) y[i] = __float2bfloat16(__bfloat162float(x[i]) * %d.0f);\n"
             "}\n",
             name, tag);
    return buf;
}

/* Tinier still: no headers, so it compiles in ~20 ms. */
static inline char *plain_kernel(char *buf, size_t n, const char *name, int tag)
{
    snprintf(buf, n,
             "extern \"C\" __global__ void %s(float *y) { y[threadIdx.x] += %d.0f; }\n", name, tag);
    return buf;
}

static inline char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/kiln-rt-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static inline int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st; (void)flag; (void)f;
    return remove(p);
}

static inline void rm_tree(const char *dir)
{
    if (dir) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static inline long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static inline double ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) * 1e-6;
}

/* A fake environment: NULL-terminated name/value pairs. */
typedef struct fake_env {
    const char *const *pairs;
} fake_env;

static inline const char *fake_getenv(void *user, const char *name)
{
    const fake_env *e = user;
    for (const char *const *p = e->pairs; p[0]; p += 2)
        if (!strcmp(p[0], name)) return p[1];
    return NULL;
}

#endif
