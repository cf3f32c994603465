/* runtime/rt_graph.h — CUDA graphs of a model's launches, keyed by shape.
 *
 * Key: an array of int64 values chosen by the caller (rt_model: the shape
 * variant and the values of the dims that change launch shapes or kernel
 * scalars; positions are read from device memory and are not part of it).
 * Each entry also remembers the external pointers (inputs, outputs) it was
 * captured with. A run:
 *   - key found, same pointers: replay (cudaGraphLaunch);
 *   - key found, other pointers: capture again and cudaGraphExecUpdate the
 *     instantiated graph in place (re-instantiate when the update is
 *     refused); counted as an update;
 *   - key new and fewer than max entries: capture (thread-local capture
 *     mode), instantiate, launch;
 *   - key new and the cache full: launch eagerly (an eager fallback). The
 *     cache never evicts: a model's working set of shapes is small and fixed
 *     (a prefill shape or two, a decode shape per batch size), and evicting
 *     would re-capture forever under a cycling workload; the fallback is
 *     counted so it shows.
 * Internal pointers (weights, states, arena) are not in the key: the owner
 * clears the cache (rt_graph_cache_clear) whenever one of them changes. */
#ifndef KILN_RT_GRAPH_H
#define KILN_RT_GRAPH_H
#include <stddef.h>
#include <stdint.h>

#include "runtime/rt_err.h"

typedef struct rt_graph_cache rt_graph_cache;

/* Issues the launches into stream (eagerly or under capture). Returns 0
 * (RT_OK), or an rt_status with a message; any other non-zero value also
 * means failure and comes back from rt_graph_run as RT_ERR_INTERNAL
 * (rt_status_of). */
typedef int (*rt_record_fn)(void *user, void *stream, char *err, size_t n);

typedef enum rt_graph_how {
    RT_GRAPH_REPLAYED,
    RT_GRAPH_CAPTURED,
    RT_GRAPH_UPDATED,
    RT_GRAPH_EAGER_FULL,      /* the cache was full */
    RT_GRAPH_EAGER_CAPTURING, /* the stream was already being captured by the caller */
    RT_GRAPH_EAGER_CAPTURE_FAILED, /* CUDA refused or invalidated the capture: launched eagerly */
} rt_graph_how;

rt_graph_cache *rt_graph_cache_new(int max_entries); /* NULL on out of memory */
void rt_graph_cache_free(rt_graph_cache *c);          /* NULL-safe */
void rt_graph_cache_clear(rt_graph_cache *c);
int rt_graph_cache_size(const rt_graph_cache *c);

/* Returns RT_OK (with *how), or a status with a message: a failing record's
 * own status and message when it was the record that failed. */
rt_status rt_graph_run(rt_graph_cache *c, const int64_t *key, int nkey, const void *const *ptrs, int nptrs,
                       void *stream, rt_record_fn record, void *user, rt_graph_how *how, char *err, size_t errlen);

#endif
