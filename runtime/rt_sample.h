/* runtime/rt_sample.h — sampling the next token from the LM head's logits on
 * the GPU (codegen/kernels/sample.cuh): per-CTA partial top-K over slices of
 * the vocabulary, then one combine per row that picks the token (greedy, or
 * temperature / top-k / top-p with a seed). The random state and the step
 * counter live in device memory and advance on the device, so the same launches
 * captured into a CUDA graph draw new numbers at every replay.
 *
 * With dmodel > 0 the sampler also computes the LM head (kiln_sample_head, one
 * kernel): it takes the head's input (bf16 [rows, dmodel]) and weight (bf16
 * [vocab, dmodel]) instead of logits, and writes the logits only when asked.
 *
 * The kernels' source is handed in (the driver reads the template from
 * codegen), compiled through the kernel cache, and loaded. */
#ifndef KILN_RT_SAMPLE_H
#define KILN_RT_SAMPLE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/rt_err.h"

struct rt_ctx;

#define RT_SAMPLE_MAX_K 64         /* candidates kept per row */
#define RT_SAMPLE_MAX_CANDS 4096   /* nct * K: the combine's shared memory */
#define RT_SAMPLE_CHUNK_MIN 1024   /* logits per partial CTA, at least */
#define RT_HEAD_CTAS 256           /* the fused head: CTAs it aims at (a slice of the vocabulary each) */
#define RT_HEAD_CHUNK_MIN 64       /* ... and tokens per CTA, at least */
#define RT_HEAD_MAX_NCT 512        /* sample.cuh's KILN_HEAD_MAX_NCT */
#define RT_HEAD_MAX_SMEM (200 << 10) /* rows * chunk floats of shared memory, at most */

typedef struct rt_sample_config {
    int64_t vocab;       /* logits per row */
    int64_t ld;          /* elements between rows (>= vocab) */
    int max_rows;
    float temperature;   /* <= 0: greedy */
    int top_k;           /* 0: RT_SAMPLE_MAX_K candidates; clamped to it */
    float top_p;         /* (0, 1): nucleus over the top-K candidates; else off */
    uint64_t seed;
    int hist_cap;        /* tokens kept per row in the history (0: none) */
    int64_t dmodel;      /* > 0: the fused LM head over inputs of this width (rt_sampler_run_head) */
} rt_sample_config;

/* The launch geometry: candidates per row k, partial CTAs per row nct, logits
 * per CTA chunk. Pure, for tests. */
void rt_sample_geometry(int64_t vocab, float temperature, int top_k, int *k, int *nct, int *chunk);

/* The fused head's geometry: CTAs nct, tokens per CTA chunk (each CTA keeps
 * rows * chunk floats); false when max_rows * chunk floats exceed
 * RT_HEAD_MAX_SMEM. Pure, for tests. */
bool rt_sample_head_geometry(int64_t vocab, int max_rows, int *nct, int *chunk);

typedef struct rt_sampler rt_sampler;

rt_status rt_sampler_create(struct rt_ctx *ctx, const char *source, const rt_sample_config *cfg, rt_sampler **out,
                            char *err, size_t n);
void rt_sampler_free(rt_sampler *s); /* NULL-safe */
/* Zero the step counters and the draws made (a new generation, same seed). */
rt_status rt_sampler_reset(rt_sampler *s, void *stream, char *err, size_t n);
/* The same for rows row0 .. row0 + rows - 1 only (a sequence starting in them). */
rt_status rt_sampler_reset_rows(rt_sampler *s, int row0, int rows, void *stream, char *err, size_t n);
/* Sample rows tokens from logits (bf16 [rows, ld], device) into out_ids
 * (i32 [rows], device), asynchronously on stream (NULL: the context's, where
 * models run). */
rt_status rt_sampler_run(rt_sampler *s, const void *logits, void *out_ids, int rows, void *stream, char *err,
                         size_t n);
/* What a generation step adds (all optional): positions advanced by pos_add
 * after the step (the position input of the model, i32 [rows]); forced
 * tokens, i32 [rows, force_cap], emitted at step s of row r while s <
 * force_len[r] (i32 [rows]) instead of a sampled one; row0: the rows are the
 * sampler's rows row0 .. row0 + rows - 1 (their histories, step counters and
 * random states; the random stream is keyed by the row within the call). */
typedef struct rt_sample_extra {
    void *pos;
    int pos_add;
    const void *force, *force_len;
    int force_cap;
    int row0;
} rt_sample_extra;
rt_status rt_sampler_run_ex(rt_sampler *s, const void *logits, void *out_ids, int rows, const rt_sample_extra *x,
                            void *stream, char *err, size_t n);
/* The fused LM head (a sampler created with dmodel > 0): rows tokens from
 * hidden (bf16 [rows, dmodel]) and weight (bf16 [vocab, dmodel]); logits
 * (bf16 [rows, ld]) written only when not NULL. x as rt_sampler_run_ex. */
rt_status rt_sampler_run_head(rt_sampler *s, const void *hidden, const void *weight, void *logits, void *out_ids, int rows,
                              const rt_sample_extra *x, void *stream, char *err, size_t n);
bool rt_sampler_is_head(const rt_sampler *s);
/* The device history: i32 [max_rows, hist_cap], token j of row r at r * hist_cap + j. */
const void *rt_sampler_history(const rt_sampler *s);
int rt_sampler_hist_cap(const rt_sampler *s);
int rt_sampler_max_rows(const rt_sampler *s);

#endif
