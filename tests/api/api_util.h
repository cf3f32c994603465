/* tests/api/api_util.h — shared by the API tests: the samples shrunk to test
 * size, a seeded random generator, temp files. */
#ifndef KILN_TESTS_API_UTIL_H
#define KILN_TESTS_API_UTIL_H
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln.h"

/* A sample and the defines that shrink it (consts) for tests. */
typedef struct api_sample {
    const char *path;
    kiln_define defines[6];
    int ndefines;
    int has_cache; /* dims B, S, T with a KV cache and positions */
} api_sample;

static const api_sample API_SAMPLES[] = {
    {"samples/llama3_1b_layer.kiln", {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}}, 4, 1},
    {"samples/llama3_8b_layer.kiln", {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}}, 4, 1},
    {"samples/gpt2_block.kiln", {{"D", "128"}, {"H", "2"}}, 2, 0},
};
#define API_NSAMPLES ((int)(sizeof API_SAMPLES / sizeof API_SAMPLES[0]))

/* splitmix64 */
static inline uint64_t api_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [-1, 1) */
static inline float api_randf(uint64_t *s) { return (float)((api_rand(s) >> 40) * (2.0 / 16777216.0) - 1.0); }

/* A file under $TMPDIR (or /tmp) named after the test; the caller frees it. */
static inline char *api_tmpfile(const char *stem)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    size_t n = strlen(dir) + strlen(stem) + 64;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/kiln_api_%ld_%s", dir, (long)getpid(), stem);
    return p;
}

static inline int api_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static inline int api_contains(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle) != NULL; }

/* A compile-only context (lazy kernels: NVRTC never runs) whose kernel cache is a new folder
 * made from dir, a mkdtemp template (rewritten); NULL with the reason on stderr. */
static inline kiln_context *api_compile_only_context(char *dir)
{
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp %s failed\n", dir);
        return NULL;
    }
    kiln_context_options co = {.cache_dir = dir, .compile_only = 1};
    kiln_context *ctx = NULL;
    if (kiln_context_create(&ctx, &co) != KILN_OK) fprintf(stderr, "context: %s\n", kiln_last_error());
    return ctx;
}

/* Frees ctx and removes the folder api_compile_only_context made; 0 when it is gone. */
static inline int api_compile_only_done(kiln_context *ctx, const char *dir)
{
    kiln_context_free(ctx);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

#endif
