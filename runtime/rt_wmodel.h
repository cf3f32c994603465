/* runtime/rt_wmodel.h — running a whole model (issue 13): token generation
 * over a model whose inputs are token ids and positions and whose output is
 * the logits of each sequence's last new token (samples/models/), with the GPU
 * sampler (rt_sample.h) choosing each next token.
 *
 * A generation, for nseq prompts of lengths len[b], is a serving loop over
 * the slot table (rt_server below):
 *   - batch: the smallest configured bucket >= the rows in use (default 1, 2,
 *     4, 8, 16, 32), capped by the model's max B; when no bucket fits (over
 *     the largest bucket but within max B) the exact size runs and counts a
 *     bucket miss. Rows without a running sequence (padding, holes) run in
 *     free cache slots, never a live one.
 *   - prefill: per distinct prompt length, the prompts of that length together
 *     into their slots, in calls of at most prefill_chunk tokens (0: the whole
 *     prompt, at most max S), each appending to the caches at the next
 *     positions; the last one's logits are sampled into each sequence's row.
 *   - decode: one call with S = 1 for all running sequences per step; the
 *     model's positions advance on the device (the sampler's combine adds 1),
 *     so decode steps replay one CUDA graph and copy nothing until a sequence
 *     joins or leaves.
 *   - stop tokens end a sequence (the token is kept; checked every
 *     RT_GEN_STOP_EVERY steps), as do max_new tokens; a finished sequence
 *     leaves and the next prompt joins in its slot. */
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
    rt_model *packed;   /* NULL, or the model compiled packed (same file, defines and weights):
                         * joins prefill in packed calls (rt_server_join); it runs on the
                         * model's caches (rt_model_borrow_states) */
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

/* The slot table's bookkeeping (rt_wmodel_slots.c): nslots cache slots (a
 * state's rows: the model's max B) and as many batch rows. A sequence that
 * opens takes the highest free slot and the lowest free batch row; one that
 * closes frees both, and nothing moves. A call runs rows 0 .. rows - 1 (rows
 * at least rt_slots_rows: the last used row + 1, padded to a bucket); table[r]
 * is row r's slot, and a row without a sequence (a hole, or padding) gets a
 * free slot of its own, the lowest ones first, so it writes no live slot. */
typedef struct rt_slots {
    int nslots, live;
    int *slot_row; /* per slot: its batch row, -1 free */
    int *row_slot; /* per batch row: its slot, -1 none */
} rt_slots;
int rt_slots_init(rt_slots *t, int nslots); /* 0, or -1 (nslots < 1, out of memory) */
void rt_slots_free(rt_slots *t);
/* The slot opened (its row in *row), or -1 when every slot is taken. */
int rt_slots_open(rt_slots *t, int *row);
/* 0, or -1 when slot is not an open slot's id. */
int rt_slots_close(rt_slots *t, int slot);
int rt_slots_row(const rt_slots *t, int slot); /* -1: not open */
int rt_slots_rows(const rt_slots *t);
/* table[0 .. rows - 1]; -1 when rows < rt_slots_rows(t) or rows > nslots. */
int rt_slots_table(const rt_slots *t, int rows, int32_t *table);

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

/* Serving (rt_wmodel_serve.c): sequences join and leave a running batch
 * through the slot table (rt_model_set_slots), so no cache is copied.
 *   create: at most max_live sequences at once (<= 0 or over max B: max B);
 *     the sampler needs max_rows >= the bucket of max_live and a history of
 *     max_new tokens. Zeroes the model's states and the sampler.
 *   join: k prompts take free slots (seqs[i]: the slot id, which names the
 *     sequence) and batch rows; each distinct prompt length is one prefill
 *     (in chunks of prefill_chunk, at most max S) of the prompts of that
 *     length, padded to a bucket when enough slots are free for the padding
 *     rows (exact size otherwise); then each one's first token is sampled.
 *     Fails with nothing joined when the slots do not suffice, a prompt is
 *     empty, has a token outside the vocabulary, or len + max_new - 1 > T.
 *   step: one decode token for every running sequence (one S = 1 call of R
 *     rows, R the last used row + 1 padded to a bucket, and one sampler call);
 *     a sequence done (max_new tokens, or a stop token seen by tokens) runs on
 *     idle in its own slot until it leaves.
 *   tokens: the sequence's tokens so far (up to and including a stop token:
 *     *done then), read from the device (a synchronization).
 *   leave: frees the slot and the row.
 * An unknown or closed slot id is an error. The sampler's random stream is
 * keyed by the batch row of each call (rt_sample_extra.row0), so a sampled
 * (not greedy) sequence draws differently than it would alone. */
typedef struct rt_server rt_server;
typedef struct rt_server_stats {
    int prefill_calls, decode_steps;
    int batch;       /* the most rows a step runs: the bucket of max_live */
    int bucket_miss; /* 1: no bucket fitted max_live, the exact size ran */
} rt_server_stats;
rt_status rt_server_create(rt_model *m, rt_sampler *smp, const rt_gen_config *cfg, int max_live, rt_server **out,
                           char *err, size_t n);
void rt_server_free(rt_server *s); /* NULL-safe; the model runs without a slot table again */
rt_status rt_server_join(rt_server *s, int k, const int32_t *const *prompts, const int *lens, int *seqs, char *err,
                         size_t n);
rt_status rt_server_step(rt_server *s, char *err, size_t n);
rt_status rt_server_tokens(rt_server *s, int seq, int32_t *out, int cap, int *count, bool *done, char *err, size_t n);
rt_status rt_server_leave(rt_server *s, int seq, char *err, size_t n);
int rt_server_live(const rt_server *s);
int rt_server_free_slots(const rt_server *s);
bool rt_server_done(const rt_server *s, int seq); /* what the host knows: max_new reached, or a stop seen */
void rt_server_get_stats(const rt_server *s, rt_server_stats *st);

/* out: nseq x max_new tokens, out_len[b] of them valid (up to and including
 * the first stop token). A serving loop (rt_server): the first min(nseq,
 * max_live) prompts join at once; when a sequence finishes (max_new tokens,
 * or a stop token, checked every RT_GEN_STOP_EVERY steps) its tokens are read
 * and it leaves, and the next prompt joins in its slot while the others keep
 * decoding. max_live <= 0: the model's max B. The sampler as rt_server_create
 * needs. */
rt_status rt_generate(rt_model *m, rt_sampler *smp, const rt_gen_config *cfg, int max_live, int nseq,
                      const int32_t *const *prompts, const int *len, int32_t *out, int *out_len, rt_gen_stats *stats,
                      char *err, size_t n);

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
