/* tests/gpu/nvrtc_unit.h — what the tests that assemble translation units by
 * hand (tests/gpu/attention_src.h, tests/gpu/mm_src.h) share: reading a
 * kernel template file and a growable string to print the unit into. They
 * compile the units with runtime/rt_nvrtc.h (rt_nvrtc_compile_many).
 *
 * Header-only (static functions). Templates are read from
 * $KILN_SOURCE_DIR/codegen/kernels, else from KILN_SOURCE_DIR (a compile-time
 * define), else ./codegen/kernels. */
#ifndef KILN_TESTS_NVRTC_UNIT_H
#define KILN_TESTS_NVRTC_UNIT_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file, NUL-terminated, malloc'd; NULL when it cannot be read. */
static inline char *nu_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1))) {
            if (fread(s, 1, (size_t)n, f) != (size_t)n) {
                free(s);
                s = NULL;
            } else {
                s[n] = 0;
            }
        }
    }
    fclose(f);
    return s;
}

/* codegen/kernels/<name>, malloc'd; NULL (and a line on stderr) when missing. */
static inline char *nu_read_kernel_file(const char *name)
{
    char path[4096];
    const char *env = getenv("KILN_SOURCE_DIR");
    char *s = NULL;
    if (env) {
        snprintf(path, sizeof path, "%s/codegen/kernels/%s", env, name);
        s = nu_read_text(path);
    }
#ifdef KILN_SOURCE_DIR
    if (!s) {
        snprintf(path, sizeof path, "%s/codegen/kernels/%s", KILN_SOURCE_DIR, name);
        s = nu_read_text(path);
    }
#endif
    if (!s) {
        snprintf(path, sizeof path, "codegen/kernels/%s", name);
        s = nu_read_text(path);
    }
    if (!s) fprintf(stderr, "cannot read codegen/kernels/%s (set KILN_SOURCE_DIR)\n", name);
    return s;
}

/* DIR/codegen/kernels/<name>, malloc'd; NULL (and a line on stderr) when DIR is NULL or the
 * file is missing. */
static inline char *nu_read_kernel_file_in(const char *dir, const char *name)
{
    char path[4096];
    char *s = NULL;
    if (dir) {
        snprintf(path, sizeof path, "%s/codegen/kernels/%s", dir, name);
        s = nu_read_text(path);
    }
    if (!s) fprintf(stderr, "cannot read %s/codegen/kernels/%s\n", dir ? dir : "(no directory)", name);
    return s;
}

/* Growable string; oom is set (and further prints dropped) when realloc fails. */
typedef struct nu_buf {
    char *s;
    size_t len, cap;
    int oom;
} nu_buf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline void nu_printf(nu_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->oom) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->len + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The string, or NULL (freed) after an allocation failure. */
static inline char *nu_take(nu_buf *b)
{
    if (b->oom) {
        free(b->s);
        b->s = NULL;
    }
    return b->s;
}

#endif
