/* samples/embed/embed.c — embedding Kiln in a C program: a generation loop.
 *
 *   embed [MODEL.kiln] [CHECKPOINT_DIR | -] [MAX_NEW]
 *
 * Compiles a whole model (samples/models/llama3_2_1b.kiln by default, shrunk
 * to 2 layers of width 256 unless a checkpoint is given, which must match the
 * file's own constants), loads a Hugging Face checkpoint (a directory with
 * model.safetensors or an index and shards) or binds random weights from
 * device memory, then generates MAX_NEW tokens (default 16) greedily for two
 * prompts of different lengths and once more with temperature 0.8, top-k 40,
 * top-p 0.95 and a seed; prints the tokens, the time to first token, tokens/s
 * and the counters (every decode step replays one CUDA graph). Exits 77 when
 * there is no GPU.
 *
 * Only kiln.h and the CUDA runtime API are used. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
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
    const char *model_path = argc > 1 ? argv[1] : "samples/models/llama3_2_1b.kiln";
    const char *ckpt = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL;
    int max_new = argc > 3 ? atoi(argv[3]) : 16;
    enum { NSEQ = 2, MAXW = 512 };
    int rc = 1;
    kiln_context *ctx = NULL;
    kiln_model *m = NULL;
    void *wdev[MAXW] = {0};
    int32_t *out = NULL;
    if (max_new < 1) max_new = 16;

    kiln_status st = kiln_context_create(&ctx, NULL);
    if (st == KILN_ERR_NO_DEVICE) {
        printf("embed: no GPU, skipping: %s\n", kiln_last_error());
        return 77;
    }
    CK(st);
    printf("%s on %s\n", kiln_version(), kiln_context_arch(ctx));

    /* without a checkpoint, shrink the model so the example runs anywhere in seconds */
    kiln_define defs[] = {{"NL", "2"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
    static const int32_t p0[] = {1, 17, 42, 7, 99, 3, 250, 11}, p1[] = {5, 64, 2};
    const int32_t *prompts[NSEQ] = {p0, p1};
    int lens[NSEQ] = {8, 3};
    kiln_dim maxd[] = {{"B", 4}, {"S", 16}, {"T", 64}};
    if (max_new > 64 - 8 + 1) max_new = 64 - 8 + 1;
    kiln_model_options mo = {.defines = ckpt ? NULL : defs, .ndefines = ckpt ? 0 : 6, .max_dims = maxd, .nmax_dims = 3,
                             .lazy = 1};
    CK(kiln_model_compile_file(ctx, model_path, &mo, &m));
    printf("model %s: %d kernels, %d weights\n", kiln_model_name(m), kiln_model_num_kernels(m),
           kiln_model_num_tensors(m, KILN_WEIGHT));

    if (ckpt) {
        CK(kiln_model_load_checkpoint(m, ckpt, 0));
    } else {
        int nw = kiln_model_num_tensors(m, KILN_WEIGHT);
        for (int i = 0; i < nw && i < MAXW; i++) {
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

    out = malloc(sizeof *out * NSEQ * (size_t)max_new);
    int out_len[NSEQ];
    kiln_generate_options go = {.max_new = max_new};
    for (int round = 0; round < 2; round++) {
        if (round == 1) go.sampling = (kiln_sampling){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 1};
        kiln_generate_stats gs;
        CK(kiln_generate(m, NSEQ, prompts, lens, &go, out, out_len, &gs));
        printf("%s:\n", round ? "sampled (temperature 0.8, top-k 40, top-p 0.95, seed 1)" : "greedy");
        for (int b = 0; b < NSEQ; b++) {
            printf("  sequence %d:", b);
            for (int j = 0; j < out_len[b]; j++) printf(" %d", out[b * max_new + j]);
            printf("\n");
        }
        printf("  batch %d, time to first token %.2f ms, %.1f tokens/s\n", gs.batch, gs.ttft_ms, gs.tokens_per_s);
    }
    kiln_counters c;
    CK(kiln_model_counters(m, &c));
    printf("counters: kernels compiled %llu, cache hits %llu (memory) %llu (disk), variants %llu, runs %llu, "
           "launches %llu, graph captures %llu, replays %llu, updates %llu, eager runs %llu\n",
           (unsigned long long)c.kernels_compiled, (unsigned long long)c.cache_hits_memory,
           (unsigned long long)c.cache_hits_disk, (unsigned long long)c.variants, (unsigned long long)c.runs,
           (unsigned long long)c.launches, (unsigned long long)c.graph_captures, (unsigned long long)c.graph_replays,
           (unsigned long long)c.graph_updates, (unsigned long long)c.eager_runs);
    rc = 0;
out:
    free(out);
    for (int i = 0; i < MAXW; i++) cudaFree(wdev[i]);
    kiln_model_free(m);
    kiln_context_free(ctx);
    return rc;
}
