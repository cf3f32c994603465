/* runtime/rt_autotune.h — measured configurations of the Hopper matmul, kept
 * next to the kernel cache.
 *
 * A problem (cg_kernel.tune_problem: the template, dtype, M, N, K, batch and
 * the epilogue's kind) has candidate configurations (cg_kernel.tune_cands).
 * With autotuning on (kiln_model_options.autotune, `kiln run --autotune`) the
 * compile driver (src/compile.c) asks the tuner for each problem's choice; on
 * a miss it emits one kernel per candidate, the tuner times each on the device
 * (rt_tuner_time_gpu: all candidates compiled first, in parallel, through the
 * kernel cache, then each launched on scratch
 * operands at the dims the variant serves, median of several launches after a
 * warm-up), the fastest wins (ties: the earlier candidate) and is stored.
 *
 * Storage: an entry of the kernel cache (runtime/rt_cache.h) under
 * <root>/v1/<arch>_tune/, keyed by XXH3-128 over (RT_TUNE_FORMAT, Kiln's
 * version, the driver's version, the device — name, compute capability, SM
 * count — and the problem): the cache's header, its secret-keyed checksum,
 * temp file and rename, trust rules. A file that does not check is deleted
 * by the cache and the problem measured again; a payload that does not parse
 * counts as a miss and is overwritten. A second process reads the choice
 * from disk and times nothing. The payload is text:
 *   choice BM BN STAGES PP EC SPLIT      (a template configuration), or
 *   choice cublasLt                      (cuBLASLt: codegen/cg_lt.c)
 *   us BEST
 *   cand BM BN STAGES PP EC SPLIT US     (one line per candidate timed;
 *   cand cublasLt US                      cuBLASLt's, when it was one)
 * Entries written before cuBLASLt was a candidate (template choices only)
 * read as they did. A matmul that cuBLASLt can implement has " lt=EPILOGUE"
 * at the end of its problem (a problem of its own: measured again once).
 *
 * Export and import (`kiln tune export FILE`, `kiln tune import FILE`): one
 * JSON file {"kiln_tune": 1, "entries": [{arch, device, driver, kiln,
 * problem, payload, key}], "checksum"} (every <arch>_tune directory); import checks the file's checksum (XXH3-64 of
 * the entries' canonical JSON) and each entry's key (recomputed from its
 * fields), and stores the entries that check into this cache.
 *
 * Test hook: rt_tune_hooks.timer replaces the device timing (CPU tests give
 * fake times; nothing is compiled), rt_tune_hooks.device the device's
 * identity. Without a device and without a timer the tuner only reads. */
#ifndef KILN_RT_AUTOTUNE_H
#define KILN_RT_AUTOTUNE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/cg.h"
#include "ir/ir.h"
#include "runtime/rt_cache.h"
#include "runtime/rt_err.h"

#define RT_TUNE_FORMAT 1u

typedef struct rt_ctx rt_ctx;

/* Who the measurements are valid for. */
typedef struct rt_tune_device {
    char name[128]; /* "NVIDIA H200" */
    int cc;         /* compute capability, 90 */
    int sms;
    int driver;     /* cudaDriverGetVersion */
} rt_tune_device;

/* Microseconds of one launch of k at dims (k's graph g), or < 0 with a
 * message: the candidate is skipped. */
typedef double (*rt_tune_timer_fn)(void *user, const cg_kernel *k, const ir_graph *g, const int64_t *dims, char *err,
                                   size_t n);

typedef struct rt_tune_hooks {
    rt_tune_timer_fn timer;        /* NULL: the device (rt_tuner_time_gpu) */
    void *timer_user;
    const rt_tune_device *device;  /* NULL: the context's device */
} rt_tune_hooks;

typedef struct rt_tune_stats {
    uint64_t hits;      /* problems answered from the store */
    uint64_t measured;  /* problems timed */
    uint64_t timed;     /* candidate launches timed (kernels) */
    uint64_t skipped;   /* candidates that failed to compile or run */
} rt_tune_stats;

typedef struct rt_tuner rt_tuner;

/* A tuner over ctx's kernel cache (hooks may be NULL). RT_ERR_NOMEM only. */
rt_status rt_tuner_create(rt_ctx *ctx, const rt_tune_hooks *hooks, rt_tuner **out, char *err, size_t n);
void rt_tuner_free(rt_tuner *t); /* NULL-safe */
/* Whether the tuner can time candidates (a device or a timer hook). */
bool rt_tuner_can_measure(const rt_tuner *t);
void rt_tuner_stats(const rt_tuner *t, rt_tune_stats *out);

/* The stored choice for problem, verified; false on a miss (counted as a hit
 * when found). us (may be NULL) receives its time. */
bool rt_tuner_lookup(rt_tuner *t, const char *problem, cg_wg_choice *out, double *us);
/* Time cands[i] (kernels of graph g, each the same group with another
 * configuration: choice[i]) at dims, store the fastest for problem, and
 * return its index in *best (-1 when none ran). */
rt_status rt_tuner_measure(rt_tuner *t, const char *problem, const cg_kernel *cands, const cg_wg_choice *choice,
                           int ncands, const ir_graph *g, const int64_t *dims, int *best, char *err, size_t n);

/* The device timing (rt_autotune_gpu.c): compile k through ctx's cache, load
 * it, launch it on scratch operands (random bits for what it reads, zeros for
 * its counters) at dims; the median of the launches after a warm-up. */
double rt_tuner_time_gpu(rt_ctx *ctx, const cg_kernel *k, const ir_graph *g, const int64_t *dims, char *err, size_t n);
/* This context's device identity (false without a device). */
bool rt_tune_device_of(rt_ctx *ctx, rt_tune_device *out);

/* Every stored choice of cache c into one file at path / the entries of such
 * a file into c. *count (may be NULL): entries written / stored; *rejected:
 * entries of the file that did not check. RT_ERR_IO for a file that cannot
 * be written or read, RT_ERR_INVALID for one whose checksum fails. */
rt_status rt_tune_export(rt_cache *c, const char *path, int *count, char *err, size_t n);
rt_status rt_tune_import(rt_cache *c, const char *path, int *count, int *rejected, char *err, size_t n);

#endif
