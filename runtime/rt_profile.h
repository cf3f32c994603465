/* runtime/rt_profile.h — where the time of a layer goes: every kernel timed
 * inside the CUDA-graph replay, against its floor.
 *
 * A profile (rt_profile) is plain data: per kernel its times over N whole
 * replays (CUPTI activity records, runtime/rt_cupti.h), its compulsory bytes
 * and FLOPs at the run's dims and positions (ir/cost.h) and its floor under
 * the device's ceilings (runtime/rt_ceilings.h); per replay the wall time
 * (CUDA events around each replay) and the bubbles (wall time minus the union
 * of its kernels' intervals); the replays' wall time once more with CUPTI detached; the layer against both floors: the
 * benchmark's (weights + attended KV, or FLOPs) and the sum of the
 * per-kernel floors (which also counts intermediates).
 *
 * Writers (runtime/rt_prof_out.c, no CUDA): the table for people, JSON for
 * tools, a Chrome trace (Perfetto) and a roofline SVG. They take any
 * rt_profile, so tests feed them synthetic ones. */
#ifndef KILN_RT_PROFILE_H
#define KILN_RT_PROFILE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/cost.h"
#include "runtime/rt_ceilings.h"
#include "runtime/rt_model.h"
#include "util/arena.h"

typedef struct rt_prof_kernel {
    const char *name;      /* the kernel's name, as CUPTI reports it */
    const char *kind;      /* the group's kind: "matmul", "attention", "row", ... */
    const char *tmpl;      /* the family's template file: "gemv.cuh" */
    const char *constants; /* its compile-time constants: "SPLITK=1 GEMV_COLS=8" */
    const char *lines;     /* model lines of the group's ops: "41" or "32-36" */
    int group;             /* kernel group index */
    ir_cost cost;
    ir_floor floor;        /* seconds */
    int samples;           /* records found (one per replay) */
    double median_us, p10_us, p90_us;
} rt_prof_kernel;

/* One kernel execution in one replay; times in us from the first record. */
typedef struct rt_prof_event {
    int kernel, run;
    double start_us, end_us;
} rt_prof_event;

typedef struct rt_profile {
    arena a;                  /* strings and arrays */
    const char *model, *dims; /* "llama3_8b_layer", "B=1,S=1,T=1024" */
    const char *device;       /* "NVIDIA H200" */
    double bw, rate;          /* ceilings used: bytes/s, FLOP/s */
    const char *ceilings;     /* where they came from, in words */
    int runs;                 /* replays timed */
    rt_prof_kernel *k;        /* sorted by median time, longest first */
    int nk;
    rt_prof_event *ev;        /* every kernel execution, by start */
    int nev;
    double *replay_start_us, *replay_end_us; /* per run: first kernel start, last kernel end */
    double layer_median_us, layer_p10_us, layer_p90_us;       /* replay wall time */
    double bubbles_median_us, bubbles_p10_us, bubbles_p90_us; /* wall time - union of kernels */
    /* the same replays timed again with CUPTI detached (CUDA events around each; 0 runs: not
     * measured): the layer as an application sees it, CUPTI's tracing lengthens every replay */
    int detached_runs;
    double detached_median_us, detached_p10_us, detached_p90_us;
    /* the same replays from their first kernel's start to their last kernel's end: the span, and the
     * gaps between kernels (span minus the union of the intervals), medians over the replays */
    double span_median_us;
    double gaps_median_us, gaps_p10_us, gaps_p90_us;
    /* the same replays once more with CUPTI's graph-level records (one per replay: the graph's
     * execution from its start to its end on the GPU, no kernel records): 0 runs: not measured,
     * graph_why says why (NULL: not asked) */
    int graph_runs;
    double graph_median_us, graph_p10_us, graph_p90_us;
    double graph_events_median_us; /* those replays between their CUDA events */
    const char *graph_why;
    ir_cost layer;            /* the benchmark's floor quantities (ir_cost_layer) */
    ir_floor layer_floor;
    double sum_floor_us;      /* sum of the per-kernel floors */
} rt_profile;

void rt_profile_init(rt_profile *p);

void rt_profile_free(rt_profile *p);

/* Fills the derived fields from the per-kernel costs and times: every
 * kernel's floor, the sum of floors, the layer floor (from p->layer), and
 * sorts the kernels by median time (events keep pointing at them). */
void rt_profile_finish(rt_profile *p);

/* ---- profiling a model (runtime/rt_profile.c) -------------------------------------------------- */

typedef struct rt_profile_opts {
    int runs;                /* replays timed (0: 50) */
    int warmup;              /* replays before them (0: 5) */
    double peak_bw;          /* bytes/s; > 0 overrides the measured read bandwidth */
    double peak_flops;       /* FLOP/s; > 0 overrides the measured tensor rate */
    const char *cache_root;  /* where the ceilings are kept (NULL: the kernel cache's root) */
} rt_profile_opts;

/* Runs the model opts->warmup + opts->runs times with these dims, inputs and
 * outputs (as rt_model_run; each run updates the states, as a run does) in
 * the context's stream, the timed runs back to back, and fills *out (which
 * the caller frees with rt_profile_free). The graph cache is cleared first,
 * so the graph is captured while CUPTI watches. Positions (i32 inputs) are
 * read from device memory for the cost model. Needs CUPTI (RT_ERR_NOT_FOUND
 * with the reason when it cannot be loaded) and a device. */
int rt_model_profile(rt_model *m, const int64_t *dims, const rt_tensor_ptr *inputs, int ninputs,
                     const rt_tensor_ptr *outputs, int noutputs, const rt_profile_opts *opts, rt_profile *out,
                     char *err, size_t n);

/* The ceilings of the context's device (rt_ceilings_get under root; NULL:
 * the context's kernel cache directory, else the default one). */
int rt_ctx_ceilings(rt_ctx *c, const char *root, bool remeasure, rt_ceilings *out, bool *from_file, char **path,
                    char *err, size_t n);

/* The ceilings a profile of m would use, in bytes/s and FLOP/s (the tensor
 * rate of the model's first float weight's dtype: f16, else bf16), with
 * where they came from (arena of p). */
int rt_profile_ceilings(rt_model *m, const rt_profile_opts *opts, rt_profile *p, char *err, size_t n);

/* Fills the times of a profile from CUPTI's records of p->runs replays
 * (sorted here; every replay runs the same graph, so the records fall into
 * p->runs equal chunks) and each replay's wall time in us (sorted here):
 * rows p->k[0..nkern) hold the kernels (name, kind, group, template,
 * constants, lines, cost); each gets its samples and median/p10/p90; a
 * record of another kernel gets a row per name ("other"), memsets one row;
 * then the events, the replays' spans, the layer's times and the bubbles
 * (wall time minus the union of the replay's record intervals). p->k must
 * have room for nkern + nrec rows. */
struct rt_cupti_record;
int rt_profile_add_records(rt_profile *p, int nkern, struct rt_cupti_record *rec, int nrec, double *wall_us, char *err,
                           size_t n);

/* Fills the graph_* fields from CUPTI's graph records of p->runs replays
 * (RT_CUPTI_GRAPH, one per replay; other records are skipped) and the wall
 * times of those replays between CUDA events (wall_us[p->runs], sorted
 * here). Fails when there is not one graph record per replay. */
int rt_profile_add_graph_records(rt_profile *p, const struct rt_cupti_record *rec, int nrec, double *wall_us,
                                 char *err, size_t n);

/* p-th percentile (0..100) of n values (sorted in place), nearest rank. */
double rt_percentile(double *v, int n, double pct);

/* The table, sorted by time; last rows: the layer against both floors, the
 * bubbles. */
void rt_profile_print(const rt_profile *p, FILE *out);
/* The same for tools (jansson). Returns 0, or -1 with a message. */
int rt_profile_write_json(const rt_profile *p, const char *path, char *err, size_t n);
/* Chrome trace: one event per kernel execution (name, model lines, figures
 * in args), the replays as spans on their own track. */
int rt_profile_write_trace(const rt_profile *p, const char *path, char *err, size_t n);
/* Roofline: the two roofs from the ceilings, each kernel a labelled point
 * (<circle class="kernel">) at its arithmetic intensity and achieved rate. A
 * kernel without FLOPs sits at the left edge, as high below the bandwidth
 * roof as its achieved bandwidth is below the ceiling (hollow marker). */
int rt_profile_write_svg(const rt_profile *p, const char *path, char *err, size_t n);

#endif
