/* runtime/rt_cupti.h — kernel timestamps from CUPTI's activity API, loaded
 * at run time.
 *
 * libcupti is opened with dlopen on first use, so nothing needs it to start
 * and a machine without it only loses the profiler. Tried in order:
 * $KILN_CUPTI_LIB (a path), then libcupti.so.13 and libcupti.so through the
 * library path, then under each toolkit root ($CUDA_HOME, $CUDA_PATH, the
 * toolkit Kiln was built with, /usr/local/cuda): lib64/, extras/CUPTI/lib64/,
 * lib/, targets/x86_64-linux/lib/ (rt_cupti_candidates).
 *
 * A session collects CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL records (kernels,
 * those inside CUDA-graph replays included; this kind does not serialize
 * kernels) and CUPTI_ACTIVITY_KIND_MEMSET records, with GPU start and end
 * timestamps in ns; or, switched (rt_cupti_trace_graphs), one record per graph launch. CUPTI delivers records through process-wide buffer
 * callbacks that carry no user pointer, and allows one activity client per
 * process: so the one piece of process-wide state here is the open session
 * (behind a mutex), and a second session while one is open is refused with
 * RT_ERR_INVALID. Graphs should be instantiated after the session opens
 * (the profiler clears the model's graph cache first). */
#ifndef KILN_RT_CUPTI_H
#define KILN_RT_CUPTI_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/rt_err.h"
#include "runtime/rt_util.h"

typedef enum rt_cupti_kind { RT_CUPTI_KERNEL, RT_CUPTI_MEMSET, RT_CUPTI_GRAPH } rt_cupti_kind;

typedef struct rt_cupti_record {
    rt_cupti_kind kind;
    const char *name;   /* kernels: the kernel's name (owned by the session); memsets, graphs: NULL */
    uint64_t start, end; /* ns, GPU timestamps on CUPTI's clock */
    uint32_t stream, correlation;
} rt_cupti_record;

typedef struct rt_cupti rt_cupti;

/* The paths to try, in order (see above), into out (max entries of n
 * bytes); returns how many. getenv_fn NULL: the process environment. */
int rt_cupti_candidates(rt_getenv_fn getenv_fn, void *user, char (*out)[512], int max);

/* Loads libcupti (once per process) without starting anything: the path
 * that loaded, or NULL with the reasons in err. */
const char *rt_cupti_load(char *err, size_t n);

/* Opens a session: loads CUPTI, registers the buffers, enables the kinds. */
rt_status rt_cupti_open(rt_cupti **out, char *err, size_t n);
/* Switches the session to graph-level records for the rest of its life:
 * CUPTI_ACTIVITY_KIND_GRAPH_TRACE, one RT_CUPTI_GRAPH record per graph launch with the start and end
 * of its execution on the GPU. CUPTI then records no kernels or memsets inside graphs, so the kernel
 * and memset kinds are disabled. Records already delivered stay. When CUPTI refuses the switch, a
 * failure with its reason and the session as it was. Graphs should be instantiated again after it. */
rt_status rt_cupti_trace_graphs(rt_cupti *c, char *err, size_t n);
/* Delivers every record CUPTI holds (after the work is synchronized). */
rt_status rt_cupti_flush(rt_cupti *c, char *err, size_t n);
/* Drops the records collected so far (warm-up runs). */
void rt_cupti_clear(rt_cupti *c);
/* Takes the records collected so far, in delivery order (malloc'd, the
 * caller frees; their names live until rt_cupti_close); *dropped: records
 * CUPTI lost. NULL with *count 0 when there are none. */
rt_cupti_record *rt_cupti_take(rt_cupti *c, int *count, uint64_t *dropped);
/* Disables the kinds, flushes, ends the session. NULL-safe. */
void rt_cupti_close(rt_cupti *c);

#endif
