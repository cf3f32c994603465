/* tests/fault/test_fault_cpu.c — the fault sweep on the CPU (README,
 * "Fault injection"): for every sample at small dims, a whole
 * kiln_model_compile_file with its kernels served from a prepared disk cache
 * (no NVRTC: compiles are refused while armed), and a safetensors load
 * against a model (validated up to where a device is needed), the N-th host
 * allocation and then the N-th file operation made to fail, for every N up
 * to the number the run makes. Each run must come back with a status (a
 * message when not KILN_OK: a failure the library tolerates, such as a cache
 * write, may still succeed), leak nothing (the wrappers' live count here;
 * LeakSanitizer in the sanitizer build), and leave the context usable: the
 * next, unfaulted run succeeds. KILN_FAULT_STRIDE=K tries every K-th N only
 * (for a quick look; CI sweeps every N). */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fault.h"
#include "kiln.h"
#include "runtime/rt_err.h"
#include "../runtime/rt_test_util.h"

void *__wrap_malloc(size_t n);
void __wrap_free(void *p);

typedef struct sample {
    const char *path;
    kiln_define defines[4];
    int ndefines;
    int has_cache;
} sample;

static const sample SAMPLES[] = {
    {"samples/llama3_1b_layer.kiln", {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}}, 4, 1},
    {"samples/llama3_8b_layer.kiln", {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}}, 4, 1},
    {"samples/llama3_1_8b_layer.kiln", {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}}, 4, 1},
    {"samples/gpt2_block.kiln", {{"D", "128"}, {"H", "2"}}, 2, 0},
};
#define NSAMPLES ((int)(sizeof SAMPLES / sizeof SAMPLES[0]))

static char *cache_dir, *weights_path;
static const kiln_dim MAXD[] = {{"B", 2}, {"S", 8}, {"T", 32}};

typedef struct scenario {
    const char *name;
    const sample *s;
    bool load; /* compile, then load weights_path */
} scenario;

static int quiet_fd = -1; /* the library's stderr during runs: it must stay empty */

static kiln_status run_inner(const scenario *sc);

/* One whole run; the status of the first step that failed. */
static kiln_status run(const scenario *sc)
{
    fflush(stderr);
    int saved = dup(2);
    if (quiet_fd >= 0) dup2(quiet_fd, 2);
    kiln_status st = run_inner(sc);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    return st;
}

static kiln_status run_inner(const scenario *sc)
{
    kiln_context_options co = {.compile_only = 1, .cache_dir = cache_dir};
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&ctx, &co);
    if (st != KILN_OK) return st;
    kiln_model_options mo = {.defines = sc->s->defines, .ndefines = sc->s->ndefines, .max_dims = MAXD,
                             .nmax_dims = sc->s->has_cache ? 3 : 2};
    kiln_model *m = NULL;
    st = kiln_model_compile_file(ctx, sc->s->path, &mo, &m);
    if (st == KILN_OK && sc->load) {
        st = kiln_model_load_safetensors(m, weights_path);
        if (st == KILN_ERR_NO_DEVICE) st = KILN_OK; /* validated: the copy to the device is where the CPU stops */
    }
    kiln_model_free(m);
    kiln_context_free(ctx);
    return st;
}

static long stride = 1;

static void sweep(const scenario *sc, fault_class cls)
{
    fault_block_nvrtc(true);
    int64_t live0 = fault_live();
    fault_arm(cls, 0);
    kiln_status st0 = run(sc);
    uint64_t total = fault_disarm();
    CHECK_MSG(st0 == KILN_OK, "%s: unfaulted run: %s: %s", sc->name, kiln_status_str(st0), kiln_last_error());
    CHECK_MSG(fault_live() == live0, "%s: unfaulted run leaked %lld allocations", sc->name,
              (long long)(fault_live() - live0));
    uint64_t failed = 0, tolerated = 0, leaks = 0, silent = 0, unusable = 0;
    for (uint64_t k = 1; k <= total; k += (uint64_t)stride) {
        live0 = fault_live();
        fault_arm(cls, k);
        kiln_status st = run(sc);
        bool fired = fault_fired();
        fault_disarm();
        if (fault_live() != live0 && leaks++ < 5)
            fprintf(stderr, "%s: %s %llu (%s) failed: %lld allocations leaked (status %s: %s)\n", sc->name,
                    fault_class_name(cls), (unsigned long long)k, fault_last_call(), (long long)(fault_live() - live0),
                    kiln_status_str(st), kiln_last_error());
        if (st == KILN_OK) {
            tolerated += fired;
        } else {
            failed++;
            if (!kiln_last_error()[0] && silent++ < 5)
                fprintf(stderr, "%s: %s %llu (%s): status %s with no message\n", sc->name, fault_class_name(cls),
                        (unsigned long long)k, fault_last_call(), kiln_status_str(st));
            /* the context comes back: the next run, unfaulted, succeeds */
            if (run(sc) != KILN_OK && unusable++ < 5)
                fprintf(stderr, "%s: after %s %llu (%s) failed, an unfaulted run fails: %s\n", sc->name,
                        fault_class_name(cls), (unsigned long long)k, fault_last_call(), kiln_last_error());
        }
    }
    fault_block_nvrtc(false);
    printf("%-40s %-16s %6llu calls: %llu failed with a status, %llu tolerated\n", sc->name, fault_class_name(cls),
           (unsigned long long)total, (unsigned long long)failed, (unsigned long long)tolerated);
    CHECK_MSG(!leaks && !silent && !unusable, "%s, %s: %llu leaks, %llu silent failures, %llu unusable afterwards",
              sc->name, fault_class_name(cls), (unsigned long long)leaks, (unsigned long long)silent,
              (unsigned long long)unusable);
}

/* The weights of the last sample (gpt2 at small dims), random, as a file. */
static void write_weights(const sample *s)
{
    kiln_context_options co = {.compile_only = 1, .cache_dir = cache_dir};
    kiln_context *ctx = NULL;
    CHECK(kiln_context_create(&ctx, &co) == KILN_OK);
    kiln_model_options mo = {.defines = s->defines, .ndefines = s->ndefines, .max_dims = MAXD, .nmax_dims = 2, .lazy = 1};
    kiln_model *m = NULL;
    CHECK(kiln_model_compile_file(ctx, s->path, &mo, &m) == KILN_OK);
    int n = kiln_model_num_tensors(m, KILN_WEIGHT);
    kiln_host_tensor *ts = calloc((size_t)n, sizeof *ts);
    kiln_tensor_info *info = calloc((size_t)n, sizeof *info);
    for (int i = 0; i < n; i++) {
        CHECK(kiln_model_tensor(m, KILN_WEIGHT, i, NULL, 0, &info[i]) == KILN_OK);
        ts[i].name = info[i].name;
        ts[i].dtype = info[i].dtype;
        ts[i].rank = info[i].rank;
        memcpy(ts[i].shape, info[i].shape, sizeof ts[i].shape);
        ts[i].data = calloc(1, info[i].bytes + 1);
    }
    CHECK(kiln_safetensors_write(weights_path, ts, n) == KILN_OK);
    for (int i = 0; i < n; i++) free((void *)ts[i].data);
    free(ts);
    free(info);
    kiln_model_free(m);
    kiln_context_free(ctx);
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(__wrap_malloc, __wrap_free); /* jansson's allocations are the library's too */
    const char *sv = getenv("KILN_FAULT_STRIDE");
    if (sv && atol(sv) > 0) stride = atol(sv);
    const char *only = getenv("KILN_FAULT_ONLY"); /* "SAMPLE_INDEX CLASS N": one faulted run, for debugging */
    const char *keep = getenv("KILN_FAULT_CACHE"); /* a directory to keep the prepared cache in (debugging) */
    cache_dir = keep ? strdup(keep) : make_tmpdir();
    char qp[600];
    snprintf(qp, sizeof qp, "%s/stderr.txt", cache_dir);
    quiet_fd = open(qp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char wp[600];
    snprintf(wp, sizeof wp, "%s/weights.safetensors", cache_dir);
    weights_path = wp;
    /* argv[1]: the sample to sweep (0..NSAMPLES-1), or NSAMPLES for the
     * safetensors load; none: all of them (ctest runs one test per sample) */
    int which = argc > 1 ? atoi(argv[1]) : -1;
    /* the prepared cache: one compile of each sample with NVRTC */
    for (int i = 0; i < NSAMPLES; i++) {
        if (which >= 0 && i != which && !(which == NSAMPLES && i == NSAMPLES - 1)) continue;
        scenario sc = {SAMPLES[i].path, &SAMPLES[i], false};
        kiln_status st = run(&sc);
        CHECK_MSG(st == KILN_OK, "preparing %s: %s", SAMPLES[i].path, kiln_last_error());
    }
    if (which < 0 || which == NSAMPLES) write_weights(&SAMPLES[NSAMPLES - 1]);
    int oi, oc;
    unsigned long long on;
    if (only && sscanf(only, "%d %d %llu", &oi, &oc, &on) == 3 && oi >= 0 && oi < NSAMPLES) {
        scenario sc = {SAMPLES[oi].path, &SAMPLES[oi], false};
        fault_block_nvrtc(true);
        int64_t live0 = fault_live();
        uint64_t mark = fault_mark();
        fault_arm((fault_class)oc, on);
        kiln_status st = run(&sc);
        fault_disarm();
        fault_print_live(mark);
        printf("status %s: %s; %lld leaked\n", kiln_status_str(st), kiln_last_error(), (long long)(fault_live() - live0));
        return 0;
    }
    const char *pick = getenv("KILN_FAULT_SAMPLES"); /* e.g. "0,3": only those samples (debugging) */
    for (int i = 0; i < NSAMPLES; i++) {
        char idx[8];
        snprintf(idx, sizeof idx, "%d", i);
        if ((pick && !strstr(pick, idx)) || (which >= 0 && which != i)) continue;
        scenario sc = {SAMPLES[i].path, &SAMPLES[i], false};
        sweep(&sc, FAULT_ALLOC);
        sweep(&sc, FAULT_FILE);
    }
    char name[700];
    snprintf(name, sizeof name, "%s + load", SAMPLES[NSAMPLES - 1].path);
    scenario load = {name, &SAMPLES[NSAMPLES - 1], true};
    if ((!pick || strstr(pick, "load")) && (which < 0 || which == NSAMPLES)) {
        sweep(&load, FAULT_ALLOC);
        sweep(&load, FAULT_FILE);
    }

    /* the library never prints, faults or not */
    CHECK_MSG(file_size(qp) == 0, "the library wrote %ld bytes to stderr (%s)", file_size(qp), qp);
    close(quiet_fd);

    /* a sticky CUDA error says the context must be recreated; another does not */
    char err[512];
    CHECK(rt_cuda_check(700 /* cudaErrorIllegalAddress */, "cudaStreamSynchronize(s)", NULL, err, sizeof err) == RT_ERR_CUDA);
    CHECK_MSG(strstr(err, "sticky") && strstr(err, "create a new one"), "%s", err);
    CHECK(rt_cuda_check(2 /* cudaErrorMemoryAllocation */, "cudaMalloc(&p, n)", NULL, err, sizeof err) == RT_ERR_NOMEM);
    CHECK_MSG(!strstr(err, "sticky"), "%s", err);
    if (!keep) rm_tree(cache_dir);
    free(cache_dir);
    return CHECK_DONE();
}
