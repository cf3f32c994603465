/* bench/compile_time.c — how long Kiln takes to have a model's kernels ready:
 *
 *   compile_time MODEL.kiln [B=1,S=1,T=1024] [--cache DIR] [--device]
 *
 * cold: an empty cache directory, every kernel compiled by NVRTC;
 * memory: the same model again in the same context (in-memory cache hits);
 * warm: a new context on the same directory, as a new process would start
 * (disk cache hits). Uses a compile-only context: no GPU needed. Prints the
 * median of 5 runs for the warm cases. --cache DIR: that cache directory,
 * kept (a cache filled before makes "cold" a warm start too). --device: a
 * device context (created before the clock starts), so the time includes
 * loading the kernels: the model is ready to run. Warm starts go through the
 * plan cache: the counters say how many variants came from it and how many
 * times codegen ran (0 on a warm start). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Compiles path in ctx; returns milliseconds or -1. */
static double compile(kiln_context *ctx, const char *path, const kiln_dim *dims, int nd, kiln_counters *c)
{
    kiln_model_options o = {.max_dims = dims, .nmax_dims = nd};
    kiln_model *m = NULL;
    double t0 = now_ms();
    if (kiln_model_compile_file(ctx, path, &o, &m) != KILN_OK) {
        fprintf(stderr, "compile_time: %s\n", kiln_last_error());
        return -1;
    }
    double t = now_ms() - t0;
    if (c) kiln_model_counters(m, c);
    kiln_model_free(m);
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: compile_time MODEL.kiln [B=1,S=1,T=1024] [--cache DIR]\n");
        return 64;
    }
    const char *path = argv[1];
    char spec[256];
    const char *keep = NULL;
    int device = 0;
    snprintf(spec, sizeof spec, "%s", "B=1,S=1,T=1024");
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--cache") && i + 1 < argc) keep = argv[++i];
        else if (!strcmp(argv[i], "--device")) device = 1;
        else snprintf(spec, sizeof spec, "%s", argv[i]);
    }
    kiln_dim dims[8];
    int nd = 0;
    for (char *t = strtok(spec, ","); t && nd < 8; t = strtok(NULL, ",")) {
        char *eq = strchr(t, '=');
        if (!eq) return 64;
        *eq = 0;
        dims[nd++] = (kiln_dim){t, atoll(eq + 1)};
    }
    char tmp[] = "/tmp/kiln-compile-time-XXXXXX";
    const char *dir = keep ? keep : mkdtemp(tmp);
    if (!dir) return 70;
    kiln_context_options co = {.cache_dir = dir, .compile_only = !device};
    kiln_context *ctx = NULL;
    if (kiln_context_create(&ctx, &co) != KILN_OK) {
        fprintf(stderr, "compile_time: %s\n", kiln_last_error());
        return 70;
    }
    kiln_counters c;
    double cold = compile(ctx, path, dims, nd, &c);
    if (cold < 0) return 1;
    unsigned long long compiled = (unsigned long long)c.kernels_compiled;
    double mem[5], warm[5];
    kiln_counters wc = {0};
    for (int i = 0; i < 5; i++) {
        mem[i] = compile(ctx, path, dims, nd, &c);
        kiln_context *ctx2 = NULL;
        if (kiln_context_create(&ctx2, &co) != KILN_OK) return 70;
        warm[i] = compile(ctx2, path, dims, nd, &wc);
        kiln_context_free(ctx2);
    }
    kiln_context_free(ctx);
    qsort(mem, 5, sizeof mem[0], cmp);
    qsort(warm, 5, sizeof warm[0], cmp);
    printf("%s (%llu kernels compiled, %ld CPUs, %s context):\n", path, compiled, sysconf(_SC_NPROCESSORS_ONLN),
           device ? "device" : "compile-only");
    printf("  %-34s %10.1f ms\n", keep ? "first (the cache as found)" : "cold (NVRTC, empty cache)", cold);
    printf("  warm start (disk cache, new ctx)   %10.2f ms\n", warm[2]);
    printf("  in-memory hit (same context)       %10.2f ms\n", mem[2]);
    printf("  warm start: %llu variant(s) from the plan cache, %llu codegen runs, %llu kernels from the disk cache\n",
           (unsigned long long)wc.plan_cache_hits, (unsigned long long)wc.codegen_runs,
           (unsigned long long)wc.cache_hits_disk);
    printf("  (whole kiln_model_compile_file: parse, passes, the plan cache or codegen, kernel cache%s)\n",
           device ? ", kernel loads" : "");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!keep && system(cmd) != 0) fprintf(stderr, "compile_time: could not remove %s\n", dir);
    return 0;
}
