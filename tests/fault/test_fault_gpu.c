/* tests/fault/test_fault_gpu.c — the fault sweep on a GPU (label gpu; exits
 * 77 without a device): a compile of the Llama-3.2-1B sample at small dims
 * (kernels from the context's cache, filled once), a safetensors load, the
 * states, a prefill run and two decode runs (graph capture and replay), with
 * the N-th host allocation, file operation or CUDA call failing, for every N.
 * Each run must return a status (with a message when not KILN_OK), leak no
 * host allocation, return the device memory in use to where it was, and
 * leave the context usable (the next unfaulted run succeeds). A second CUDA
 * sweep fails the calls with cudaErrorIllegalAddress, a sticky error: a
 * KILN_ERR_CUDA message must then say that the context must be recreated.
 * KILN_FAULT_STRIDE=K tries every K-th N only; KILN_FAULT_CLASSES=cuda,sticky
 * runs only those sweeps (of alloc, file, cuda, sticky). */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <cuda_runtime_api.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fault.h"
#include "kiln.h"
#include "../runtime/rt_test_util.h"

void *__wrap_malloc(size_t n);
void __wrap_free(void *p);
cudaError_t __real_cudaMemset(void *p, int v, size_t n); /* the test's own calls are not the library's */

static const char *SAMPLE = "samples/llama3_1b_layer.kiln";
static const kiln_define DEFS[] = {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
static const kiln_dim MAXD[] = {{"B", 1}, {"S", 4}, {"T", 16}};
static kiln_context *ctx;
static char *dir, *weights;
static long stride = 1;

static kiln_status run_dims(kiln_model *m, int64_t S, void **bufs, int *nbufs)
{
    kiln_dim d[] = {{"B", 1}, {"S", S}, {"T", 16}};
    kiln_tensor_arg in[8], out[8];
    int ni = kiln_model_num_tensors(m, KILN_INPUT), no = kiln_model_num_tensors(m, KILN_OUTPUT);
    if (ni > 8 || no > 8) return KILN_ERR_INVALID_ARGUMENT;
    kiln_status st = KILN_OK;
    for (int k = 0; k < ni + no && st == KILN_OK; k++) {
        kiln_tensor_info ti;
        st = kiln_model_tensor(m, k < ni ? KILN_INPUT : KILN_OUTPUT, k < ni ? k : k - ni, d, 3, &ti);
        void *p = NULL;
        if (st == KILN_OK) st = kiln_device_alloc(ctx, ti.bytes ? ti.bytes : 1, &p);
        if (st == KILN_OK) {
            bufs[(*nbufs)++] = p;
            if (__real_cudaMemset(p, 0, ti.bytes) != cudaSuccess) st = KILN_ERR_CUDA;
            if (k < ni) in[k] = (kiln_tensor_arg){ti.name, p};
            else out[k - ni] = (kiln_tensor_arg){ti.name, p};
        }
    }
    if (st == KILN_OK) st = kiln_model_run(m, d, 3, in, ni, out, no, NULL);
    if (st == KILN_OK) st = kiln_model_sync(m);
    return st;
}

/* One whole use of the model. */
static kiln_status run(void)
{
    kiln_model_options mo = {.defines = DEFS, .ndefines = 4, .max_dims = MAXD, .nmax_dims = 3};
    kiln_model *m = NULL;
    void *bufs[64];
    int nbufs = 0;
    kiln_status st = kiln_model_compile_file(ctx, SAMPLE, &mo, &m);
    if (st == KILN_OK) st = kiln_model_load_safetensors(m, weights);
    if (st == KILN_OK) st = kiln_model_alloc_states(m);
    if (st == KILN_OK) st = run_dims(m, 4, bufs, &nbufs);
    for (int step = 0; step < 2 && st == KILN_OK; step++) st = run_dims(m, 1, bufs, &nbufs);
    (void)cudaDeviceSynchronize();
    for (int i = 0; i < nbufs; i++) kiln_device_free(ctx, bufs[i]);
    kiln_model_free(m);
    return st;
}

static size_t device_used(void)
{
    size_t fr = 0, total = 0;
    (void)cudaMemGetInfo(&fr, &total);
    return total - fr;
}

static void sweep(fault_class cls, int cuda_error, bool want_sticky)
{
    fault_set_cuda_error(cuda_error);
    fault_block_nvrtc(true);
    int64_t live0 = fault_live();
    size_t dev0 = device_used();
    fault_arm(cls, 0);
    kiln_status st0 = run();
    uint64_t total = fault_disarm();
    CHECK_MSG(st0 == KILN_OK, "unfaulted run: %s", kiln_last_error());
    CHECK(fault_live() == live0 && device_used() == dev0);
    uint64_t failed = 0, tolerated = 0, leaks = 0, dev_leaks = 0, silent = 0, unusable = 0, not_sticky = 0;
    for (uint64_t k = 1; k <= total; k += (uint64_t)stride) {
        live0 = fault_live();
        dev0 = device_used();
        fault_arm(cls, k);
        kiln_status st = run();
        bool fired = fault_fired();
        fault_disarm();
        const char *why = kiln_last_error();
        if (fault_live() != live0 && leaks++ < 5)
            fprintf(stderr, "%s %llu (%s): %lld host allocations leaked (%s)\n", fault_class_name(cls),
                    (unsigned long long)k, fault_last_call(), (long long)(fault_live() - live0), why);
        if (device_used() != dev0 && dev_leaks++ < 5)
            fprintf(stderr, "%s %llu (%s): device memory in use %zu -> %zu bytes (%s)\n", fault_class_name(cls),
                    (unsigned long long)k, fault_last_call(), dev0, device_used(), why);
        if (st == KILN_OK) {
            tolerated += fired;
            continue;
        }
        failed++;
        if (!why[0] && silent++ < 5)
            fprintf(stderr, "%s %llu (%s): %s with no message\n", fault_class_name(cls), (unsigned long long)k,
                    fault_last_call(), kiln_status_str(st));
        if (want_sticky && st == KILN_ERR_CUDA && !strstr(why, "sticky") && not_sticky++ < 5)
            fprintf(stderr, "%s %llu (%s): a sticky error not named as one: %s\n", fault_class_name(cls),
                    (unsigned long long)k, fault_last_call(), why);
        if (run() != KILN_OK && unusable++ < 5)
            fprintf(stderr, "after %s %llu (%s): an unfaulted run fails: %s\n", fault_class_name(cls),
                    (unsigned long long)k, fault_last_call(), kiln_last_error());
    }
    fault_block_nvrtc(false);
    printf("%s%-16s %6llu calls: %llu failed with a status, %llu tolerated\n", want_sticky ? "(sticky) " : "",
           fault_class_name(cls), (unsigned long long)total, (unsigned long long)failed, (unsigned long long)tolerated);
    CHECK_MSG(!leaks && !dev_leaks && !silent && !unusable && !not_sticky,
              "%s: %llu host leaks, %llu device leaks, %llu silent, %llu unusable after, %llu sticky errors unnamed",
              fault_class_name(cls), (unsigned long long)leaks, (unsigned long long)dev_leaks,
              (unsigned long long)silent, (unsigned long long)unusable, (unsigned long long)not_sticky);
}

static void write_weights(void)
{
    kiln_model_options mo = {.defines = DEFS, .ndefines = 4, .max_dims = MAXD, .nmax_dims = 3, .lazy = 1};
    kiln_model *m = NULL;
    CHECK(kiln_model_compile_file(ctx, SAMPLE, &mo, &m) == KILN_OK);
    int n = kiln_model_num_tensors(m, KILN_WEIGHT);
    kiln_host_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
    uint64_t seed = 1;
    for (int i = 0; i < n; i++) {
        kiln_tensor_info ti;
        CHECK(kiln_model_tensor(m, KILN_WEIGHT, i, NULL, 0, &ti) == KILN_OK);
        ts[i].name = ti.name;
        ts[i].dtype = ti.dtype;
        ts[i].rank = ti.rank;
        memcpy(ts[i].shape, ti.shape, sizeof ts[i].shape);
        unsigned char *b = malloc(ti.bytes + 1);
        for (size_t j = 0; j < ti.bytes; j += 2) { /* small bf16 values: 0x3c00 + noise */
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            b[j] = (unsigned char)(seed >> 56);
            if (j + 1 < ti.bytes) b[j + 1] = (unsigned char)(0x3c | ((seed >> 40) & 1 ? 0x80 : 0));
        }
        ts[i].data = b;
    }
    CHECK(kiln_safetensors_write(weights, ts, n) == KILN_OK);
    for (int i = 0; i < n; i++) free((void *)ts[i].data);
    free(ts);
    kiln_model_free(m);
}

int main(void)
{
    json_set_alloc_funcs(__wrap_malloc, __wrap_free);
    const char *sv = getenv("KILN_FAULT_STRIDE");
    if (sv && atol(sv) > 0) stride = atol(sv);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    dir = make_tmpdir();
    char wp[600];
    snprintf(wp, sizeof wp, "%s/w.safetensors", dir);
    weights = wp;
    kiln_context_options co = {.cache_dir = dir};
    CHECK_MSG(kiln_context_create(&ctx, &co) == KILN_OK, "%s", kiln_last_error());
    if (!ctx) return CHECK_DONE();
    write_weights();
    CHECK_MSG(run() == KILN_OK, "the first run (kernels compiled): %s", kiln_last_error());
    /* KILN_FAULT_CLASSES: a comma list of alloc, file, cuda, sticky (default: all four sweeps) */
    const char *only = getenv("KILN_FAULT_CLASSES");
#define WANT(c) (!only || strstr(only, c))
    if (WANT("alloc")) sweep(FAULT_ALLOC, cudaErrorInvalidValue, false);
    if (WANT("file")) sweep(FAULT_FILE, cudaErrorInvalidValue, false);
    if (WANT("cuda")) sweep(FAULT_CUDA, cudaErrorInvalidValue, false);
    if (WANT("sticky")) sweep(FAULT_CUDA, cudaErrorIllegalAddress, true);
#undef WANT
    kiln_context_free(ctx);
    rm_tree(dir);
    free(dir);
    return CHECK_DONE();
}
