/* runtime/rt_wmodel.h — running a whole model (issue 13): token generation
 * over a model whose inputs are token ids and positions and whose output is
 * the logits of each sequence's last new token (samples/models/), with the GPU
 * sampler (rt_sample.h) choosing each next token.
 *
 * A generation, for nseq prompts of lengths len[b]:
 *   - batch: the smallest configured bucket >= nseq (default 1, 2, 4, 8, 16,
 *     32), capped by the model's max B; when no bucket fits (nseq over the
 *     largest bucket but within max B) the exact size runs and counts a
 *     bucket miss. Padded rows run token 0 in cache rows no sequence uses.
 *   - prefill: the common prompt length Lmin = min len[b], in calls of at most
 *     prefill_chunk tokens (0: the whole of it, at most max S), each appending
 *     to the caches at the next positions; the last one's logits are sampled.
 *   - the prompts' tails (len[b] > Lmin) are fed one token per decode step as
 *     forced tokens of the sampler, so every decode step is one call with S = 1
 *     for the whole batch (a sequence with a longer prompt starts generating
 *     later); the model's positions advance on the device (the sampler's
 *     combine adds 1), so decode steps replay one CUDA graph and copy nothing.
 *   - stop tokens end a sequence (the token is kept); generation ends when
 *     every sequence has stopped (checked every RT_GEN_STOP_EVERY steps) or
 *     max_new tokens each. */
#ifndef KILN_RT_WMODEL_H
#define KILN_RT_WMODEL_H
#include <pthread.h>
#include <stdint.h>

#include "runtime/rt_model.h"
#include "runtime/rt_sample.h"

#define RT_GEN_MAX_BUCKETS 16
#define RT_GEN_STOP_EVERY 16

typedef struct rt_gen_config {
    const char *ids, *pos, *logits; /* tensor names (NULL: "ids", "pos", "logits") */
    int max_new;
    const int32_t *stop;
    int nstop;
    int prefill_chunk;
    const int *buckets; /* ascending; NULL: 1, 2, 4, 8, 16, 32 */
    int nbuckets;
} rt_gen_config;

typedef struct rt_gen_stats {
    double ttft_ms;      /* from the call to every sequence's first new token being on the device */
    double decode_ms;    /* from then to the last token */
    int64_t new_tokens;  /* tokens returned, all sequences */
    double tokens_per_s; /* (new_tokens - nseq) / decode time */
    int batch;           /* the batch size the calls ran with */
    int bucket_miss;     /* 1: no bucket fitted, the exact size ran */
    int prefill_calls, decode_steps;
} rt_gen_stats;

/* The batch size for nseq sequences (rt_gen_config's rule); -1 when nseq > max_b. */
int rt_gen_bucket(const int *buckets, int nbuckets, int nseq, int64_t max_b, int *miss);

/* Vocabulary size of a generation model: checks that it has dims B, S, T,
 * inputs ids i32[B, S] and pos i32[B] and one output logits [B, 1, V] (*dmodel
 * 0), or, compiled with head_sample (rt_plan.head), one output head_in [B, 1,
 * D] and the head's weight [V, D] (*dmodel D: the sampler computes the head). */
rt_status rt_gen_check_model(const rt_model *m, const rt_gen_config *cfg, int64_t *vocab, int64_t *dmodel, char *err,
                             size_t n);
/* The bound LM head weight of a head_sample model (NULL: none, or not bound yet). */
const void *rt_model_head_weight(const rt_model *m);

/* A sampler for the model's context (rt_sampler_create on its device and cache). */
rt_status rt_model_sampler_create(rt_model *m, const char *source, const rt_sample_config *cfg, rt_sampler **out,
                                  char *err, size_t n);

/* out: nseq x max_new tokens, out_len[b] of them valid (up to and including
 * the first stop token). The sampler needs max_rows >= the batch and a
 * history of at least (Lmax - Lmin) + max_new tokens. The model's states are
 * zeroed first. */
rt_status rt_generate(rt_model *m, rt_sampler *smp, const rt_gen_config *cfg, int nseq, const int32_t *const *prompts,
                      const int *len, int32_t *out, int *out_len, rt_gen_stats *stats, char *err, size_t n);

/* Weight uploads (rt_wmodel_upload.c): begin with the bytes to come (starts
 * up to RT_UPLOAD_THREADS threads, each with its stream and two pinned
 * buffers of RT_UPLOAD_PIECE bytes); add each copy (from memory, or read from
 * a file descriptor at an offset): the threads start on it at once, reading
 * pieces into one buffer while the stream copies the previous one to the
 * device; run (no more copies: returns when every copy has finished, or with
 * the first failure's status and message, after every thread has stopped);
 * end (stops and joins threads still running, frees the queue; always call
 * it). The copies' device buffers must stay allocated until run or end
 * returns. */
#define RT_UPLOAD_PIECE ((size_t)8 << 20)
#define RT_UPLOAD_THREADS 8
struct rt_upload_job;
struct rt_upload_worker;
typedef struct rt_upload {
    int device;
    size_t piece;
    /* the queue, under mu: workers wait on cv for pieces until closed */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sync_ready; /* mu and cv exist (threads were started) */
    struct rt_upload_job *jobs;
    size_t njobs, capjobs, next_job, next_off, total;
    bool closed, failed;
    struct rt_upload_worker *workers;
    int nworkers, nstarted;
} rt_upload;
rt_status rt_upload_begin(rt_upload *u, int device, size_t total, char *err, size_t n);
rt_status rt_upload_add(rt_upload *u, void *dev, const void *src, int fd, size_t off, size_t bytes, const char *who, char *err,
                        size_t n);
rt_status rt_upload_run(rt_upload *u, char *err, size_t n);
void rt_upload_end(rt_upload *u);

#endif
