/* samples/embed/embed.c — embedding Kiln in a C program.
 *
 *   embed [MODEL.kiln] [WEIGHTS.safetensors] [DECODE_STEPS]
 *
 * Compiles the Llama-3.2-1B layer (samples/llama3_1b_layer.kiln by default)
 * with small max dims, binds random weights (or loads a .safetensors file),
 * allocates the KV caches, runs a prefill of 8 tokens for 2 sequences and
 * then N decode steps, each feeding the position forward in device memory
 * (so every step replays one CUDA graph), and prints a checksum of the last
 * output and the counters. Exits 77 when there is no GPU.
 *
 * Only kiln.h and the CUDA runtime API are used. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        kiln_status s_ = (call);                                                          \
        if (s_ != KILN_OK) {                                                              \
            fprintf(stderr, "embed: %s failed (%s):\n%s\n", #call, kiln_status_str(s_), kiln_last_error()); \
            goto out;                                                                     \
        }                                                                                 \
    } while (0)

#define CU(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "embed: %s: %s\n", #call, cudaGetErrorString(e_));            \
            goto out;                                                                     \
        }                                                                                 \
    } while (0)

static unsigned long long rng = 88172645463325252ull;
static float frand(void) /* xorshift, uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (2.0 / 16777216.0) - 1.0);
}

static unsigned short to_bf16(float f)
{
    unsigned int u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (unsigned short)(u >> 16);
}

static float from_bf16(unsigned short b)
{
    unsigned int u = (unsigned int)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Random bf16 device tensor of n elements, scaled. */
static void *random_device(size_t n, float scale, float offset)
{
    unsigned short *h = malloc(n * 2);
    void *d = NULL;
    if (!h) return NULL;
    for (size_t i = 0; i < n; i++) h[i] = to_bf16(offset + scale * frand());
    if (cudaMalloc(&d, n * 2) != cudaSuccess || cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        d = NULL;
    }
    free(h);
    return d;
}

int main(int argc, char **argv)
{
    const char *model_path = argc > 1 ? argv[1] : "samples/llama3_1b_layer.kiln";
    const char *weights = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL;
    int steps = argc > 3 ? atoi(argv[3]) : 16;
    enum { B = 2, P = 8, T = 64 };
    int rc = 1;
    kiln_context *ctx = NULL;
    kiln_model *m = NULL;
    void *wdev[16] = {0}, *x = NULL, *y = NULL, *pos = NULL;
    unsigned short *yh = NULL;

    kiln_status st = kiln_context_create(&ctx, NULL);
    if (st == KILN_ERR_NO_DEVICE) {
        printf("embed: no GPU, skipping: %s\n", kiln_last_error());
        return 77;
    }
    CK(st);
    printf("%s on %s\n", kiln_version(), kiln_context_arch(ctx));

    /* shrink the layer's constants so the example runs anywhere in seconds */
    kiln_define defs[] = {{"D", "512"}, {"H", "8"}, {"KV", "2"}, {"F", "1024"}};
    kiln_dim maxd[] = {{"B", B}, {"S", P}, {"T", T}};
    kiln_model_options mo = {.defines = defs, .ndefines = 4, .max_dims = maxd, .nmax_dims = 3};
    CK(kiln_model_compile_file(ctx, model_path, &mo, &m));
    printf("model %s: %d kernels\n", kiln_model_name(m), kiln_model_num_kernels(m));

    if (weights) {
        CK(kiln_model_load_safetensors(m, weights));
    } else {
        int nw = kiln_model_num_tensors(m, KILN_WEIGHT);
        for (int i = 0; i < nw && i < 16; i++) {
            kiln_tensor_info ti;
            CK(kiln_model_tensor(m, KILN_WEIGHT, i, NULL, 0, &ti));
            size_t n = ti.bytes / kiln_dtype_size(ti.dtype);
            float scale = ti.rank >= 2 ? 1.0f / sqrtf((float)ti.shape[ti.rank - 1]) : 0.1f;
            wdev[i] = random_device(n, scale, ti.rank == 1 ? 1.0f : 0.0f); /* norm gains near 1 */
            if (!wdev[i]) {
                fprintf(stderr, "embed: out of device memory\n");
                goto out;
            }
            CK(kiln_model_bind_weight_checked(m, ti.name, ti.dtype, ti.rank, ti.shape, wdev[i]));
        }
    }
    CK(kiln_model_alloc_states(m));

    kiln_tensor_info xi;
    kiln_dim dp[] = {{"B", B}, {"S", P}, {"T", T}};
    CK(kiln_model_find_tensor(m, "x", dp, 3, &xi));
    size_t D = (size_t)xi.shape[2];
    x = random_device((size_t)B * P * D, 1.0f, 0.0f);
    CU(cudaMalloc(&y, (size_t)B * P * D * 2));
    CU(cudaMalloc(&pos, B * sizeof(int)));
    int p0[B] = {0, 0};
    CU(cudaMemcpy(pos, p0, sizeof p0, cudaMemcpyHostToDevice));

    /* cudaMemcpy runs on the legacy stream, which the context's (non-blocking)
     * stream does not wait for: finish the copies before the first run */
    CU(cudaStreamSynchronize(cudaStreamLegacy));

    /* prefill P tokens */
    kiln_tensor_arg in[] = {{"x", x}, {"pos", pos}}, out[] = {{"y", y}};
    CK(kiln_model_run(m, dp, 3, in, 2, out, 1, NULL));

    /* decode: one token per step, positions advanced in device memory */
    kiln_dim dd[] = {{"B", B}, {"S", 1}, {"T", T}};
    for (int t = 0; t < steps && P + t < T; t++) {
        int pv[B] = {P + t, P + t};
        CK(kiln_model_sync(m)); /* pos is written from the host: wait for the previous step */
        CU(cudaMemcpy(pos, pv, sizeof pv, cudaMemcpyHostToDevice));
        CU(cudaStreamSynchronize(cudaStreamLegacy));
        CK(kiln_model_run(m, dd, 3, in, 2, out, 1, NULL)); /* y's first B*D elements: this step's output */
    }
    CK(kiln_model_sync(m));

    yh = malloc((size_t)B * D * 2);
    CU(cudaMemcpy(yh, y, (size_t)B * D * 2, cudaMemcpyDeviceToHost));
    double sum = 0, asum = 0;
    for (size_t i = 0; i < (size_t)B * D; i++) {
        float v = from_bf16(yh[i]);
        sum += v;
        asum += fabs(v);
    }
    printf("checksum of the last output: sum %.6f, sum |y| %.6f%s\n", sum, asum, isfinite(sum) ? "" : "  (NOT FINITE)");
    kiln_counters c;
    CK(kiln_model_counters(m, &c));
    printf("counters: kernels compiled %llu, cache hits %llu (memory) %llu (disk), variants %llu, runs %llu, "
           "launches %llu, graph captures %llu, replays %llu, updates %llu, eager runs %llu, eager fallbacks %llu\n",
           (unsigned long long)c.kernels_compiled, (unsigned long long)c.cache_hits_memory,
           (unsigned long long)c.cache_hits_disk, (unsigned long long)c.variants, (unsigned long long)c.runs,
           (unsigned long long)c.launches, (unsigned long long)c.graph_captures, (unsigned long long)c.graph_replays,
           (unsigned long long)c.graph_updates, (unsigned long long)c.eager_runs, (unsigned long long)c.eager_fallbacks);
    rc = isfinite(sum) ? 0 : 1;
out:
    free(yh);
    for (int i = 0; i < 16; i++) cudaFree(wdev[i]);
    cudaFree(x);
    cudaFree(y);
    cudaFree(pos);
    kiln_model_free(m);
    kiln_context_free(ctx);
    return rc;
}
