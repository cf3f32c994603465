/* bench/model/bench_gen.c — tokens per second of kiln_generate on a whole
 * model (bench/model/run.sh runs it on the GPU machine):
 *
 *   bench_gen MODEL.kiln CKPT_DIR B1,B2,... [PROMPT [NEW [NAME=VALUE...]]]
 *
 * For each batch size B: B random prompts of PROMPT tokens (default 32),
 * greedy, NEW new tokens each (default 128), one warm-up generation and then
 * the timed one, for the fused LM head (head_sample) and the model's own head
 * with the two-kernel sampler. One line per (B, head): time to first token,
 * decode tokens/s (all sequences), and the per-token latency of a step.
 * KILN_MODEL_WARM=1: compile-only, fills the kernel cache for every shape the
 * run uses (no device needed), then exits. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

#define MAX_B 64
#define MAX_DEFS 16

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > MAX_B) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_gen MODEL.kiln CKPT_DIR B1,B2,... [PROMPT [NEW [NAME=VALUE...]]]\n");
        return 64;
    }
    int bs[8];
    int nb = parse_list(argv[3], bs, 8);
    int plen = argc > 4 ? atoi(argv[4]) : 32, nnew = argc > 5 ? atoi(argv[5]) : 128;
    if (nb < 1 || plen < 1 || nnew < 2) {
        fprintf(stderr, "bench_gen: bad batch list, prompt or new-token count\n");
        return 64;
    }
    kiln_define defs[MAX_DEFS];
    int nd = 0;
    for (int i = 6; i < argc && nd < MAX_DEFS; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) continue;
        *eq = 0;
        defs[nd++] = (kiln_define){argv[i], eq + 1};
    }
    int bmax = 0;
    for (int i = 0; i < nb; i++) bmax = bs[i] > bmax ? bs[i] : bmax;
    const char *w = getenv("KILN_MODEL_WARM");
    int warm = w && !strcmp(w, "1");
    kiln_context *ctx = NULL;
    kiln_context_options co = {.compile_only = warm};
    kiln_status st = kiln_context_create(&ctx, &co);
    if (st != KILN_OK) {
        fprintf(stderr, "context: %s\n", kiln_last_error());
        return st == KILN_ERR_NO_DEVICE ? 77 : 1;
    }
    int rc = 0;
    int32_t *prompts = malloc(sizeof(int32_t) * (size_t)MAX_B * (size_t)plen);
    int32_t *out = malloc(sizeof(int32_t) * (size_t)MAX_B * (size_t)nnew);
    const int32_t *pp[MAX_B];
    int lens[MAX_B], olen[MAX_B];
    unsigned rng = 12345;
    for (int b = 0; b < MAX_B; b++) {
        for (int j = 0; j < plen; j++) {
            rng = rng * 1664525u + 1013904223u;
            prompts[b * plen + j] = (int32_t)((rng >> 8) % 32000);
        }
        pp[b] = prompts + b * plen;
        lens[b] = plen;
    }
    for (int head = 1; head >= 0 && !rc; head--) {
        kiln_dim maxd[] = {{"B", bmax}, {"S", plen}, {"T", plen + nnew}};
        kiln_model_options mo = {.defines = defs, .ndefines = nd, .max_dims = maxd, .nmax_dims = 3, .lazy = 1,
                                 .head_sample = head};
        kiln_model *m = NULL;
        if (kiln_model_compile_file(ctx, argv[1], &mo, &m) != KILN_OK) {
            fprintf(stderr, "compile: %s\n", kiln_last_error());
            rc = 1;
            break;
        }
        if (warm) {
            for (int i = 0; i < nb; i++)
                for (int s = 0; s < 2; s++) {
                    kiln_dim d[] = {{"B", bs[i]}, {"S", s ? 1 : plen}, {"T", plen + nnew}};
                    st = kiln_model_prepare(m, d, 3);
                    printf("prepare B=%d S=%d: %s\n", bs[i], s ? 1 : plen, st == KILN_OK ? "ok" : kiln_last_error());
                }
            kiln_sampler *ks = NULL;
            kiln_sampling g = {0};
            printf("sampler: %s\n", kiln_sampler_create(m, &g, 1, &ks) == KILN_ERR_NO_DEVICE ? "compiled" : kiln_last_error());
            kiln_model_free(m);
            continue;
        }
        if (kiln_model_load_checkpoint(m, argv[2], 0) != KILN_OK || kiln_model_alloc_states(m) != KILN_OK) {
            fprintf(stderr, "load: %s\n", kiln_last_error());
            kiln_model_free(m);
            rc = 1;
            break;
        }
        for (int i = 0; i < nb && !rc; i++) {
            kiln_generate_options go = {.max_new = nnew};
            kiln_generate_stats gs;
            for (int rep = 0; rep < 2 && !rc; rep++)
                if (kiln_generate(m, bs[i], pp, lens, &go, out, olen, &gs) != KILN_OK) {
                    fprintf(stderr, "generate B=%d: %s\n", bs[i], kiln_last_error());
                    rc = 1;
                }
            if (rc) break;
            double step_ms = gs.decode_steps > 0 ? gs.decode_ms / (gs.decode_steps - 0.0) : 0;
            printf("kiln %s B=%d prompt=%d new=%d: ttft %.2f ms, %.1f tokens/s, %.3f ms per step (%d steps)\n",
                   head ? "fused-head" : "logits-head", bs[i], plen, nnew, gs.ttft_ms, gs.tokens_per_s, step_ms,
                   gs.decode_steps);
            fflush(stdout);
        }
        kiln_model_free(m);
    }
    free(prompts);
    free(out);
    kiln_context_free(ctx);
    return rc;
}
