/* tests/model/bench_load.c — how fast a checkpoint loads:
 *   bench_load MODEL.kiln CKPT_DIR [NAME=VALUE defines...]
 * measures, in this order and in one process: the file-read bandwidth (every
 * .safetensors file of CKPT_DIR read with pread by 8 threads, pieces of 16 MiB,
 * into pageable buffers: what the files give), the pinned host-to-device
 * bandwidth (4 GiB from one pinned 256 MiB buffer, one stream), then compiles
 * the model lazily (no kernels) and times kiln_model_load_checkpoint (index and
 * shard checks, cudaMalloc of each weight, the threaded reads into pinned
 * buffers overlapped with the copies). Prints the three bandwidths and the load's
 * share of the lower of the first two. Exits 77 without a device. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kiln.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

enum { READ_THREADS = 8, MAX_FILES = 256 };
#define PIECE ((size_t)16 << 20)

typedef struct reader {
    char **files;
    int nfiles;
    pthread_mutex_t *mu;
    int *next_file;
    size_t *next_off;
    size_t bytes;
    int fail;
} reader;

static void *read_files(void *arg)
{
    reader *r = arg;
    char *buf = malloc(PIECE);
    int fd = -1, fd_file = -1;
    while (buf) {
        pthread_mutex_lock(r->mu);
        int f = *r->next_file;
        size_t off = *r->next_off;
        struct stat sb;
        while (f < r->nfiles && (stat(r->files[f], &sb) != 0 || off >= (size_t)sb.st_size)) {
            f = ++*r->next_file;
            off = *r->next_off = 0;
        }
        if (f < r->nfiles) *r->next_off += PIECE;
        pthread_mutex_unlock(r->mu);
        if (f >= r->nfiles) break;
        if (fd_file != f) {
            if (fd >= 0) close(fd);
            fd = open(r->files[f], O_RDONLY);
            fd_file = f;
        }
        ssize_t got = fd >= 0 ? pread(fd, buf, PIECE, (off_t)off) : -1;
        if (got < 0) r->fail = 1;
        else r->bytes += (size_t)got;
    }
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
}

/* Every .safetensors file of dir read by READ_THREADS threads: GB/s (0 on failure). */
static double file_read_gbs(const char *dir, double *gb)
{
    char *files[MAX_FILES];
    int nf = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) && nf < MAX_FILES) {
        size_t l = strlen(e->d_name);
        if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")) {
            files[nf] = malloc(strlen(dir) + l + 2);
            sprintf(files[nf++], "%s/%s", dir, e->d_name);
        }
    }
    if (d) closedir(d);
    pthread_mutex_t mu;
    pthread_mutex_init(&mu, NULL);
    int next_file = 0;
    size_t next_off = 0;
    reader r[READ_THREADS];
    pthread_t th[READ_THREADS];
    double t0 = now_s();
    for (int i = 0; i < READ_THREADS; i++) {
        r[i] = (reader){files, nf, &mu, &next_file, &next_off, 0, 0};
        pthread_create(&th[i], NULL, read_files, &r[i]);
    }
    size_t bytes = 0;
    int fail = 0;
    for (int i = 0; i < READ_THREADS; i++) {
        pthread_join(th[i], NULL);
        bytes += r[i].bytes;
        fail |= r[i].fail;
    }
    double dt = now_s() - t0;
    pthread_mutex_destroy(&mu);
    for (int i = 0; i < nf; i++) free(files[i]);
    *gb = (double)bytes / 1e9;
    return fail || !bytes ? 0 : (double)bytes / 1e9 / dt;
}

/* 4 GiB host-to-device from one pinned 256 MiB buffer: GB/s (0 on failure). */
static double pinned_h2d_gbs(void)
{
    const size_t sz = (size_t)256 << 20;
    void *h = NULL, *dv = NULL;
    if (cudaHostAlloc(&h, sz, cudaHostAllocDefault) != cudaSuccess || cudaMalloc(&dv, sz) != cudaSuccess) return 0;
    memset(h, 1, sz);
    cudaMemcpy(dv, h, sz, cudaMemcpyHostToDevice);
    double t0 = now_s();
    for (int i = 0; i < 16; i++) cudaMemcpyAsync(dv, h, sz, cudaMemcpyHostToDevice, 0);
    int ok = cudaDeviceSynchronize() == cudaSuccess;
    double dt = now_s() - t0;
    cudaFreeHost(h);
    cudaFree(dv);
    return ok ? 16.0 * (double)sz / 1e9 / dt : 0;
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
    double file_gb = 0, file_bw = file_read_gbs(argv[2], &file_gb), h2d_bw = pinned_h2d_gbs();
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
    double load_bw = (double)bytes / 1e9 / (t2 - t1), low = file_bw < h2d_bw ? file_bw : h2d_bw;
    printf("compile (lazy, %d weights): %.1f ms; load: %.3f GB in %.3f s = %.2f GB/s\n", nw, (t1 - t0) * 1e3,
           (double)bytes / 1e9, t2 - t1, load_bw);
    printf("file read %.2f GB/s (%.3f GB, %d threads), pinned host-to-device %.2f GB/s, load %.2f GB/s = %.0f%% of the "
           "lower\n", file_bw, file_gb, READ_THREADS, h2d_bw, load_bw, low > 0 ? 100 * load_bw / low : 0.0);
    kiln_model_free(m);
    kiln_context_free(ctx);
    return 0;
}
