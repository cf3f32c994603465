/* tests/model/bench_load.c — how fast a checkpoint loads:
 *   bench_load MODEL.kiln CKPT_DIR [NAME=VALUE defines...]
 * compiles the model lazily (no kernels), then times kiln_model_load_checkpoint
 * (index and shard checks, the copy from the memory-mapped shards through the
 * pinned staging buffers to the device) and prints the bytes of weights loaded
 * per second. Exits 77 without a device. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_load MODEL.kiln CKPT_DIR [NAME=VALUE...]\n");
        return 64;
    }
    kiln_define defs[16];
    int nd = 0;
    for (int i = 3; i < argc && nd < 16; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) continue;
        *eq = 0;
        defs[nd++] = (kiln_define){argv[i], eq + 1};
    }
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&ctx, NULL);
    if (st == KILN_ERR_NO_DEVICE) return 77;
    if (st != KILN_OK) return 1;
    kiln_dim maxd[] = {{"B", 1}, {"S", 1}, {"T", 16}};
    kiln_model_options mo = {.defines = defs, .ndefines = nd, .max_dims = maxd, .nmax_dims = 3, .lazy = 1};
    kiln_model *m = NULL;
    double t0 = now_s();
    if (kiln_model_compile_file(ctx, argv[1], &mo, &m) != KILN_OK) {
        fprintf(stderr, "%s\n", kiln_last_error());
        return 1;
    }
    double t1 = now_s();
    st = kiln_model_load_checkpoint(m, argv[2], 0);
    double t2 = now_s();
    if (st != KILN_OK) {
        fprintf(stderr, "%s\n", kiln_last_error());
        return 1;
    }
    size_t bytes = 0;
    int nw = kiln_model_num_tensors(m, KILN_WEIGHT);
    for (int i = 0; i < nw; i++) {
        kiln_tensor_info ti;
        if (kiln_model_tensor(m, KILN_WEIGHT, i, NULL, 0, &ti) == KILN_OK) bytes += ti.bytes;
    }
    printf("compile (lazy, %d weights): %.1f ms; load: %.3f GB in %.3f s = %.2f GB/s\n", nw, (t1 - t0) * 1e3,
           (double)bytes / 1e9, t2 - t1, (double)bytes / 1e9 / (t2 - t1));
    kiln_model_free(m);
    kiln_context_free(ctx);
    return 0;
}
