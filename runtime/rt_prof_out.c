/* runtime/rt_prof_out.c — a profile's derived figures and its four
 * renderings: the table, JSON, a Chrome trace and a roofline SVG
 * (runtime/rt_profile.h). No CUDA: tests feed synthetic profiles. */
#define _DEFAULT_SOURCE /* M_PI */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_err.h"
#include "runtime/rt_cupti.h"
#include "runtime/rt_profile.h"

void rt_profile_init(rt_profile *p)
{
    memset(p, 0, sizeof *p);
    arena_init(&p->a);
}

void rt_profile_free(rt_profile *p)
{
    if (!p) return;
    arena_free(&p->a);
    memset(p, 0, sizeof *p);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double rt_percentile(double *v, int n, double pct)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)ceil(pct / 100.0 * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static int cmp_kernel_time(const void *a, const void *b)
{
    const rt_prof_kernel *x = a, *y = b;
    if (x->median_us != y->median_us) return x->median_us < y->median_us ? 1 : -1;
    return x->group - y->group;
}

void rt_profile_finish(rt_profile *p)
{
    p->sum_floor_us = 0;
    for (int i = 0; i < p->nk; i++) {
        rt_prof_kernel *k = &p->k[i];
        k->floor = ir_floor_of(ir_cost_bytes(&k->cost), k->cost.flops, p->bw, p->rate);
        p->sum_floor_us += k->floor.t * 1e6;
    }
    p->layer_floor = ir_floor_of(ir_cost_bytes(&p->layer), p->layer.flops, p->bw, p->rate);
    /* sort, keeping the events' kernel indices right */
    int *order = malloc((size_t)p->nk * sizeof *order + 1), *pos = malloc((size_t)p->nk * sizeof *pos + 1);
    if (!order || !pos) {
        free(order);
        free(pos);
        return;
    }
    for (int i = 0; i < p->nk; i++) order[i] = p->k[i].group;
    qsort(p->k, (size_t)p->nk, sizeof *p->k, cmp_kernel_time);
    for (int i = 0; i < p->nk; i++)
        for (int j = 0; j < p->nk; j++)
            if (p->k[j].group == order[i]) pos[i] = j;
    for (int e = 0; e < p->nev; e++)
        if (p->ev[e].kernel >= 0 && p->ev[e].kernel < p->nk) p->ev[e].kernel = pos[p->ev[e].kernel];
    free(order);
    free(pos);
}

/* ---- from CUPTI's records ------------------------------------------------------------------ */

static int cmp_rec(const void *a, const void *b)
{
    const rt_cupti_record *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Row for a record: a Kiln kernel of the variant, else a row per other name.
 * Kernels of identical layers share one program and its name, so a record
 * whose name occurred occ times before it in its replay is the (occ+1)-th
 * kernel of that name (records and kernels are both in launch order). */
static int row_of(rt_profile *p, const rt_cupti_record *rec, int occ, int nkern, int *nextra)
{
    if (rec->kind == RT_CUPTI_MEMSET) {
        for (int i = nkern; i < nkern + *nextra; i++)
            if (!strcmp(p->k[i].kind, "memset")) return i;
    } else {
        int seen = 0;
        for (int i = 0; i < nkern; i++)
            if (p->k[i].name && rec->name && !strcmp(p->k[i].name, rec->name) && seen++ == occ) return i;
        for (int i = nkern; i < nkern + *nextra; i++)
            if (p->k[i].name && rec->name && !strcmp(p->k[i].name, rec->name)) return i;
    }
    int i = nkern + (*nextra)++;
    rt_prof_kernel *k = &p->k[i];
    memset(k, 0, sizeof *k);
    k->group = -1 - (i - nkern);
    k->kind = rec->kind == RT_CUPTI_MEMSET ? "memset" : "other";
    k->name = rec->kind == RT_CUPTI_MEMSET ? "(memsets of zeroed workspaces)" : arena_strdup(&p->a, rec->name);
    k->tmpl = k->constants = k->lines = "";
    return i;
}

int rt_profile_add_records(rt_profile *p, int nkern, rt_cupti_record *rec, int nrec, double *wall_us, char *err,
                           size_t n)
{
    int runs = p->runs, nextra = 0;
    if (runs <= 0 || nrec == 0 || nrec % runs)
        return rt_fail(RT_ERR_INTERNAL, err, n,
                       "CUPTI delivered %d records for %d replays (not the same number per replay)", nrec, runs);
    int per = nrec / runs;
    qsort(rec, (size_t)nrec, sizeof *rec, cmp_rec);
    p->ev = arena_alloc(&p->a, (size_t)nrec * sizeof *p->ev);
    p->replay_start_us = arena_alloc(&p->a, (size_t)runs * sizeof(double));
    p->replay_end_us = arena_alloc(&p->a, (size_t)runs * sizeof(double));
    double *dur = malloc((size_t)nrec * sizeof *dur + 1), *bub = malloc((size_t)runs * sizeof *bub + 1);
    double *gap = malloc((size_t)runs * sizeof *gap + 1), *span = malloc((size_t)runs * sizeof *span + 1);
    int *row = malloc((size_t)nrec * sizeof *row + 1);
    if (!p->ev || !p->replay_start_us || !p->replay_end_us || !dur || !bub || !row || !gap || !span) {
        free(dur), free(bub), free(row), free(gap), free(span);
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    uint64_t t0 = rec[0].start;
    for (int i = 0; i < nrec; i++) {
        int occ = 0; /* earlier records of this name in the replay */
        for (int j = i / per * per; j < i; j++)
            if (rec[i].kind != RT_CUPTI_MEMSET && rec[j].name && rec[i].name && !strcmp(rec[j].name, rec[i].name)) occ++;
        row[i] = row_of(p, &rec[i], occ, nkern, &nextra);
        p->ev[i] = (rt_prof_event){row[i], i / per, (double)(rec[i].start - t0) * 1e-3, (double)(rec[i].end - t0) * 1e-3};
    }
    p->nev = nrec;
    p->nk = nkern + nextra;
    /* A kernel's time: from its start, or from the end of the replay's kernels
     * before it when it started earlier (programmatic dependent launch starts a
     * kernel while its predecessor runs, and it waits in griddepcontrol.wait),
     * to its end. Without overlap that is its interval; with it, the times add
     * up to the union of the intervals, as a serialized run's would. */
    double *own = malloc((size_t)nrec * sizeof *own + 1);
    if (!own) {
        free(dur), free(bub), free(row), free(gap), free(span);
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    for (int q = 0; q < runs; q++) {
        double hi = -1e300;
        for (int i = q * per; i < (q + 1) * per; i++) {
            double from = p->ev[i].start_us > hi ? p->ev[i].start_us : hi;
            own[i] = p->ev[i].end_us > from ? p->ev[i].end_us - from : 0;
            if (p->ev[i].end_us > hi) hi = p->ev[i].end_us;
        }
    }
    for (int k = 0; k < p->nk; k++) {
        int cnt = 0;
        for (int i = 0; i < nrec; i++)
            if (row[i] == k) dur[cnt++] = own[i];
        rt_prof_kernel *K = &p->k[k];
        K->samples = cnt;
        K->median_us = rt_percentile(dur, cnt, 50);
        K->p10_us = rt_percentile(dur, cnt, 10);
        K->p90_us = rt_percentile(dur, cnt, 90);
    }
    /* per replay: its span and the union of its records' intervals */
    for (int q = 0; q < runs; q++) {
        const rt_prof_event *e = &p->ev[q * per];
        double uni = 0, lo = e[0].start_us, hi = e[0].end_us;
        for (int i = 1; i < per; i++) {
            if (e[i].start_us > hi) uni += hi - lo, lo = e[i].start_us, hi = e[i].end_us;
            else if (e[i].end_us > hi) hi = e[i].end_us;
        }
        uni += hi - lo;
        p->replay_start_us[q] = e[0].start_us;
        p->replay_end_us[q] = hi;
        bub[q] = wall_us[q] > uni ? wall_us[q] - uni : 0;
        span[q] = hi - e[0].start_us;
        gap[q] = span[q] > uni ? span[q] - uni : 0;
    }
    p->span_median_us = rt_percentile(span, runs, 50);
    p->gaps_median_us = rt_percentile(gap, runs, 50);
    p->gaps_p10_us = rt_percentile(gap, runs, 10);
    p->gaps_p90_us = rt_percentile(gap, runs, 90);
    p->layer_median_us = rt_percentile(wall_us, runs, 50);
    p->layer_p10_us = rt_percentile(wall_us, runs, 10);
    p->layer_p90_us = rt_percentile(wall_us, runs, 90);
    p->bubbles_median_us = rt_percentile(bub, runs, 50);
    p->bubbles_p10_us = rt_percentile(bub, runs, 10);
    p->bubbles_p90_us = rt_percentile(bub, runs, 90);
    free(dur), free(bub), free(row), free(own), free(gap), free(span);
    return RT_OK;
}

int rt_profile_add_graph_records(rt_profile *p, const rt_cupti_record *rec, int nrec, double *wall_us, char *err,
                                 size_t n)
{
    int runs = p->runs, ng = 0;
    for (int i = 0; i < nrec; i++) ng += rec[i].kind == RT_CUPTI_GRAPH;
    if (runs <= 0 || ng != runs)
        return rt_fail(RT_ERR_INTERNAL, err, n, "CUPTI delivered %d graph records for %d replays", ng, runs);
    double *g = malloc((size_t)runs * sizeof *g + 1);
    if (!g) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    ng = 0;
    for (int i = 0; i < nrec; i++)
        if (rec[i].kind == RT_CUPTI_GRAPH) g[ng++] = rec[i].end > rec[i].start ? (double)(rec[i].end - rec[i].start) * 1e-3 : 0;
    p->graph_runs = runs;
    p->graph_median_us = rt_percentile(g, runs, 50);
    p->graph_p10_us = rt_percentile(g, runs, 10);
    p->graph_p90_us = rt_percentile(g, runs, 90);
    p->graph_events_median_us = rt_percentile(wall_us, runs, 50);
    free(g);
    return RT_OK;
}

/* ---- figures ------------------------------------------------------------------------------ */

static double tbps(const rt_prof_kernel *k) { return k->median_us > 0 ? ir_cost_bytes(&k->cost) / (k->median_us * 1e6) : 0; }
static double tflops(const rt_prof_kernel *k) { return k->median_us > 0 ? k->cost.flops / (k->median_us * 1e6) : 0; }
static double pct_floor(double floor_us, double us) { return us > 0 ? 100.0 * floor_us / us : 0; }

static double kernels_total_us(const rt_profile *p)
{
    double t = 0;
    for (int i = 0; i < p->nk; i++) t += p->k[i].median_us;
    return t;
}

/* "50.3 MB", "8.2 kB", "4 B" (decimal, as the benchmark's tables) */
static const char *si(char *buf, size_t n, double v, const char *unit)
{
    const char *pre[] = {"", "k", "M", "G", "T", "P"};
    int i = 0;
    while (fabs(v) >= 1000 && i < 5) v /= 1000, i++;
    snprintf(buf, n, i ? "%.1f %s%s" : "%.0f %s%s", v, pre[i], unit);
    return buf;
}

/* ---- the table ------------------------------------------------------------------------------ */

void rt_profile_print(const rt_profile *p, FILE *out)
{
    char b1[32], b2[32];
    fprintf(out, "profile of %s at %s: %d graph replays; kernels timed inside the replay (CUPTI)\n",
            p->model ? p->model : "?", p->dims ? p->dims : "", p->runs);
    fprintf(out, "ceilings: read %.2f TB/s, tensor %.0f TFLOP/s (%s)%s%s\n", p->bw / 1e12, p->rate / 1e12,
            p->ceilings ? p->ceilings : "given", p->device ? "; " : "", p->device ? p->device : "");
    fprintf(out, "%-34s %-9s %-20s %9s %9s %9s %10s %10s %6s %7s %9s %6s %6s  %s\n", "kernel", "lines", "template",
            "median", "p10", "p90", "bytes", "FLOPs", "TB/s", "TFLOP/s", "floor", "%floor", "share", "constants");
    double total = p->layer_median_us > 0 ? p->layer_median_us : kernels_total_us(p);
    for (int i = 0; i < p->nk; i++) {
        const rt_prof_kernel *k = &p->k[i];
        fprintf(out, "%-34s %-9s %-20s %7.1f us %6.1f us %6.1f us %10s %10s %6.2f %7.1f %6.2f us %5.0f%% %5.1f%%  %s\n",
                k->name, k->lines ? k->lines : "", k->tmpl ? k->tmpl : "", k->median_us, k->p10_us, k->p90_us,
                si(b1, sizeof b1, (double)ir_cost_bytes(&k->cost), "B"), si(b2, sizeof b2, (double)k->cost.flops, ""),
                tbps(k), tflops(k), k->floor.t * 1e6, pct_floor(k->floor.t * 1e6, k->median_us),
                total > 0 ? 100.0 * k->median_us / total : 0, k->constants ? k->constants : "");
    }
    fprintf(out, "layer: median %.1f us (p10 %.1f, p90 %.1f; CUDA events around each replay); kernels %.1f us\n",
            p->layer_median_us, p->layer_p10_us, p->layer_p90_us, kernels_total_us(p));
    if (p->detached_runs > 0)
        fprintf(out, "  without the profiler %7.1f us  (p10 %.1f, p90 %.1f; %d more replays with CUPTI detached: its tracing adds %.1f us to each)\n",
                p->detached_median_us, p->detached_p10_us, p->detached_p90_us, p->detached_runs,
                p->layer_median_us - p->detached_median_us);
    fprintf(out, "  benchmark floor     %8.1f us  %s-bound: %s (weights %s + attended KV %s), %s FLOPs  -> %.0f%% of floor\n",
            p->layer_floor.t * 1e6, p->layer_floor.flops_bound ? "FLOPs" : "bytes",
            si(b1, sizeof b1, (double)ir_cost_bytes(&p->layer), "B"), si(b2, sizeof b2, (double)p->layer.weights, "B"),
            si((char[32]){0}, 32, (double)p->layer.states, "B"), si((char[32]){0}, 32, (double)p->layer.flops, ""),
            pct_floor(p->layer_floor.t * 1e6, p->layer_median_us));
    fprintf(out, "  sum of kernel floors %7.1f us  (intermediates counted)  -> %.0f%% of floor\n", p->sum_floor_us,
            pct_floor(p->sum_floor_us, p->layer_median_us));
    fprintf(out, "bubbles: median %.1f us (p10 %.1f, p90 %.1f) = %.1f%% of the layer: replay time minus the union of its kernels\n",
            p->bubbles_median_us, p->bubbles_p10_us, p->bubbles_p90_us,
            p->layer_median_us > 0 ? 100.0 * p->bubbles_median_us / p->layer_median_us : 0);
    fprintf(out, "  between kernels     %7.1f us  (p10 %.1f, p90 %.1f) = %.1f%% of the layer: the same replays from their first "
                 "kernel's start to their last kernel's end (%.1f us), minus the union of the kernels\n",
            p->gaps_median_us, p->gaps_p10_us, p->gaps_p90_us,
            p->layer_median_us > 0 ? 100.0 * p->gaps_median_us / p->layer_median_us : 0, p->span_median_us);
    if (p->graph_runs > 0) {
        fprintf(out, "  graph on the GPU    %7.1f us  (p10 %.1f, p90 %.1f; %d more replays with CUPTI's graph records: the graph's "
                     "execution from its start to its end; %.1f us between their CUDA events: %.1f us of graph launch "
                     "head and tail outside it)\n",
                p->graph_median_us, p->graph_p10_us, p->graph_p90_us, p->graph_runs, p->graph_events_median_us,
                p->graph_events_median_us > p->graph_median_us ? p->graph_events_median_us - p->graph_median_us : 0);
    } else if (p->graph_why) {
        fprintf(out, "  graph on the GPU    not measured (%s)\n", p->graph_why);
    }
}

/* ---- JSON ---------------------------------------------------------------------------------- */

/* {"median_us", "p10_us", "p90_us"} */
static json_t *times_json(double median, double p10, double p90)
{
    json_t *o = json_object();
    json_object_set_new(o, "median_us", json_real(median));
    json_object_set_new(o, "p10_us", json_real(p10));
    json_object_set_new(o, "p90_us", json_real(p90));
    return o;
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *cost_json(const ir_cost *c, const ir_floor *f)
{
    json_t *o = json_object();
    json_object_set_new(o, "bytes", json_integer(ir_cost_bytes(c)));
    json_object_set_new(o, "read", json_integer(c->read));
    json_object_set_new(o, "written", json_integer(c->written));
    json_object_set_new(o, "weights", json_integer(c->weights));
    json_object_set_new(o, "states", json_integer(c->states));
    json_object_set_new(o, "flops", json_integer(c->flops));
    json_object_set_new(o, "floor_us", json_real(f->t * 1e6));
    json_object_set_new(o, "bound", json_string(f->flops_bound ? "flops" : "bytes"));
    return o;
}

static int write_json_file(json_t *root, const char *path, const char *what, char *err, size_t n)
{
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(9));
    json_decref(root);
    return rc == 0 ? 0 : rt_fail(-1, err, n, "cannot write the %s to %s", what, path);
}

int rt_profile_write_json(const rt_profile *p, const char *path, char *err, size_t n)
{
    json_t *root = json_object(), *ks = json_array();
    if (!root || !ks) return rt_fail(-1, err, n, "out of memory");
    json_object_set_new(root, "model", str_or_null(p->model));
    json_object_set_new(root, "dims", str_or_null(p->dims));
    json_object_set_new(root, "device", str_or_null(p->device));
    json_object_set_new(root, "runs", json_integer(p->runs));
    json_t *c = json_object();
    json_object_set_new(c, "read_bw", json_real(p->bw));
    json_object_set_new(c, "tensor_rate", json_real(p->rate));
    json_object_set_new(c, "source", str_or_null(p->ceilings));
    json_object_set_new(root, "ceilings", c);
    double total = p->layer_median_us > 0 ? p->layer_median_us : kernels_total_us(p);
    for (int i = 0; i < p->nk; i++) {
        const rt_prof_kernel *k = &p->k[i];
        json_t *o = times_json(k->median_us, k->p10_us, k->p90_us);
        json_object_set_new(o, "name", str_or_null(k->name));
        json_object_set_new(o, "group", json_integer(k->group));
        json_object_set_new(o, "kind", str_or_null(k->kind));
        json_object_set_new(o, "template", str_or_null(k->tmpl));
        json_object_set_new(o, "constants", str_or_null(k->constants));
        json_object_set_new(o, "lines", str_or_null(k->lines));
        json_object_set_new(o, "samples", json_integer(k->samples));
        json_object_set_new(o, "cost", cost_json(&k->cost, &k->floor));
        json_object_set_new(o, "tbps", json_real(tbps(k)));
        json_object_set_new(o, "tflops", json_real(tflops(k)));
        json_object_set_new(o, "pct_floor", json_real(pct_floor(k->floor.t * 1e6, k->median_us)));
        json_object_set_new(o, "share", json_real(total > 0 ? k->median_us / total : 0));
        json_array_append_new(ks, o);
    }
    json_object_set_new(root, "kernels", ks);
    json_t *l = times_json(p->layer_median_us, p->layer_p10_us, p->layer_p90_us);
    json_object_set_new(l, "kernels_us", json_real(kernels_total_us(p)));
    json_object_set_new(l, "benchmark_floor", cost_json(&p->layer, &p->layer_floor));
    json_object_set_new(l, "pct_benchmark_floor", json_real(pct_floor(p->layer_floor.t * 1e6, p->layer_median_us)));
    json_object_set_new(l, "sum_kernel_floors_us", json_real(p->sum_floor_us));
    json_object_set_new(l, "pct_sum_kernel_floors", json_real(pct_floor(p->sum_floor_us, p->layer_median_us)));
    if (p->detached_runs > 0) {
        json_t *d = times_json(p->detached_median_us, p->detached_p10_us, p->detached_p90_us);
        json_object_set_new(d, "runs", json_integer(p->detached_runs));
        json_object_set_new(l, "without_profiler", d);
    }
    if (p->graph_runs > 0) {
        json_t *gj = times_json(p->graph_median_us, p->graph_p10_us, p->graph_p90_us);
        json_object_set_new(gj, "runs", json_integer(p->graph_runs));
        json_object_set_new(gj, "events_median_us", json_real(p->graph_events_median_us));
        json_object_set_new(l, "graph_on_gpu", gj);
    }
    json_object_set_new(root, "layer", l);
    json_t *bu = times_json(p->bubbles_median_us, p->bubbles_p10_us, p->bubbles_p90_us);
    json_t *bk = times_json(p->gaps_median_us, p->gaps_p10_us, p->gaps_p90_us);
    json_object_set_new(bk, "kernels_span_us", json_real(p->span_median_us));
    json_object_set_new(bu, "between_kernels", bk);
    json_object_set_new(root, "bubbles", bu);
    return write_json_file(root, path, "profile", err, n);
}

/* ---- Chrome trace ------------------------------------------------------------------------------ */

static json_t *trace_event(const char *name, const char *cat, int tid, double ts, double dur)
{
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(name));
    json_object_set_new(e, "cat", json_string(cat));
    json_object_set_new(e, "ph", json_string("X"));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(tid));
    json_object_set_new(e, "ts", json_real(ts));
    json_object_set_new(e, "dur", json_real(dur));
    return e;
}

static json_t *thread_name(int tid, const char *name)
{
    json_t *e = json_object(), *a = json_object();
    json_object_set_new(e, "name", json_string("thread_name"));
    json_object_set_new(e, "ph", json_string("M"));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(tid));
    json_object_set_new(a, "name", json_string(name));
    json_object_set_new(e, "args", a);
    return e;
}

int rt_profile_write_trace(const rt_profile *p, const char *path, char *err, size_t n)
{
    json_t *root = json_object(), *evs = json_array();
    if (!root || !evs) return rt_fail(-1, err, n, "out of memory");
    json_array_append_new(evs, thread_name(0, "graph replays"));
    json_array_append_new(evs, thread_name(1, "kernels"));
    for (int r = 0; r < p->runs && p->replay_start_us; r++) {
        char name[32];
        snprintf(name, sizeof name, "replay %d", r);
        json_t *e = trace_event(name, "replay", 0, p->replay_start_us[r], p->replay_end_us[r] - p->replay_start_us[r]);
        json_t *a = json_object();
        json_object_set_new(a, "run", json_integer(r));
        json_object_set_new(e, "args", a);
        json_array_append_new(evs, e);
    }
    for (int i = 0; i < p->nev; i++) {
        const rt_prof_event *ev = &p->ev[i];
        if (ev->kernel < 0 || ev->kernel >= p->nk) continue;
        const rt_prof_kernel *k = &p->k[ev->kernel];
        double dur = ev->end_us - ev->start_us;
        json_t *e = trace_event(k->name, k->kind ? k->kind : "kernel", 1, ev->start_us, dur);
        json_t *a = json_object();
        json_object_set_new(a, "run", json_integer(ev->run));
        json_object_set_new(a, "lines", str_or_null(k->lines));
        json_object_set_new(a, "template", str_or_null(k->tmpl));
        json_object_set_new(a, "constants", str_or_null(k->constants));
        json_object_set_new(a, "bytes", json_integer(ir_cost_bytes(&k->cost)));
        json_object_set_new(a, "flops", json_integer(k->cost.flops));
        json_object_set_new(a, "floor_us", json_real(k->floor.t * 1e6));
        json_object_set_new(a, "pct_floor", json_real(pct_floor(k->floor.t * 1e6, dur)));
        json_object_set_new(a, "tbps", json_real(dur > 0 ? ir_cost_bytes(&k->cost) / (dur * 1e6) : 0));
        json_object_set_new(e, "args", a);
        json_array_append_new(evs, e);
    }
    json_object_set_new(root, "traceEvents", evs);
    json_object_set_new(root, "displayTimeUnit", json_string("ns"));
    return write_json_file(root, path, "trace", err, n);
}

/* ---- roofline ---------------------------------------------------------------------------------- */

static void xml_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* The plot: x = FLOP per byte, y = FLOP/s, both log10. */
typedef struct plot {
    double x0, x1, y0, y1; /* log10 bounds */
    double left, top, w, h;
} plot;

static double px(const plot *pl, double x) { return pl->left + (log10(x) - pl->x0) / (pl->x1 - pl->x0) * pl->w; }
static double py(const plot *pl, double y) { return pl->top + pl->h - (log10(y) - pl->y0) / (pl->y1 - pl->y0) * pl->h; }

int rt_profile_write_svg(const rt_profile *p, const char *path, char *err, size_t n)
{
    if (!(p->bw > 0) || !(p->rate > 0)) return rt_fail(-1, err, n, "roofline: the ceilings are not known");
    FILE *f = fopen(path, "w");
    if (!f) return rt_fail(-1, err, n, "cannot write the roofline to %s", path);
    double ridge = p->rate / p->bw;
    plot pl = {.left = 90, .top = 50, .w = 760, .h = 460};
    /* x from 0.1 FLOP/B (or lower) to past the ridge and every kernel */
    double xmin = 0.1, xmax = ridge * 10;
    for (int i = 0; i < p->nk; i++) {
        double by = (double)ir_cost_bytes(&p->k[i].cost);
        if (p->k[i].cost.flops > 0 && by > 0) {
            double ai = p->k[i].cost.flops / by;
            if (ai < xmin) xmin = ai / 2;
            if (ai > xmax) xmax = ai * 2;
        }
    }
    pl.x0 = floor(log10(xmin));
    pl.x1 = ceil(log10(xmax));
    pl.y1 = ceil(log10(p->rate * 2));
    pl.y0 = pl.y1 - 6;
    double ylow = pow(10, pl.y0);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"600\" viewBox=\"0 0 960 600\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n");
    fprintf(f, "<rect width=\"960\" height=\"600\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"480\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">Roofline: ");
    xml_text(f, p->model);
    fprintf(f, " at ");
    xml_text(f, p->dims);
    fprintf(f, "</text>\n");
    /* grid and axes */
    for (double e = pl.x0; e <= pl.x1 + 1e-9; e++) {
        double x = px(&pl, pow(10, e));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, pl.top, x, pl.top + pl.h);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, pl.top + pl.h + 20, pow(10, e));
    }
    for (double e = pl.y0; e <= pl.y1 + 1e-9; e++) {
        double y = py(&pl, pow(10, e));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", pl.left, y, pl.left + pl.w, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", pl.left - 6, y + 4, pow(10, e) / 1e12);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", pl.left,
            pl.top, pl.w, pl.h);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte of compulsory traffic)</text>\n",
            pl.left + pl.w / 2, pl.top + pl.h + 40);
    fprintf(f, "<text transform=\"translate(28 %.1f) rotate(-90)\" text-anchor=\"middle\">achieved TFLOP/s</text>\n",
            pl.top + pl.h / 2);
    /* the roofs */
    double xa = pow(10, pl.x0), xb = pow(10, pl.x1);
    double xs = ylow / p->bw > xa ? ylow / p->bw : xa; /* where the bandwidth roof enters the plot */
    fprintf(f, "<polyline class=\"roof\" fill=\"none\" stroke=\"#c00\" stroke-width=\"2\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
            px(&pl, xs), py(&pl, xs * p->bw), px(&pl, ridge), py(&pl, p->rate), px(&pl, xb), py(&pl, p->rate));
    double lx0 = xs * 2, ang = atan2(py(&pl, ridge) - py(&pl, xs), px(&pl, ridge) - px(&pl, xs)) * 180 / M_PI;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c00\" transform=\"rotate(%.1f %.1f %.1f)\">read bandwidth %.2f TB/s</text>\n",
            px(&pl, lx0), py(&pl, lx0 * p->bw) - 6, ang, px(&pl, lx0), py(&pl, lx0 * p->bw) - 6, p->bw / 1e12);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c00\" text-anchor=\"end\">tensor cores %.0f TFLOP/s</text>\n",
            pl.left + pl.w - 6, py(&pl, p->rate) - 8, p->rate / 1e12);
    /* the kernels; labels pushed down until they clear the ones placed before */
    double *lx = malloc((size_t)p->nk * sizeof *lx + 1), *ly = malloc((size_t)p->nk * sizeof *ly + 1);
    if (!lx || !ly) {
        free(lx);
        free(ly);
        fclose(f);
        return rt_fail(-1, err, n, "out of memory");
    }
    for (int i = 0; i < p->nk; i++) {
        const rt_prof_kernel *k = &p->k[i];
        double by = (double)ir_cost_bytes(&k->cost), t = k->median_us * 1e-6;
        bool noflops = k->cost.flops <= 0;
        double x = noflops || by <= 0 ? xa : k->cost.flops / by;
        double y = t > 0 ? (noflops ? by / t * xa : k->cost.flops / t) : ylow;
        if (y < ylow) y = ylow;
        double cx = px(&pl, x), cy = py(&pl, y);
        fprintf(f, "<circle class=\"kernel\" data-kernel=\"");
        xml_text(f, k->name);
        fprintf(f, "\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"#036\" stroke-width=\"1.5\"><title>", cx, cy,
                noflops ? "white" : "#06c");
        xml_text(f, k->name);
        fprintf(f, ": %.1f us, %.0f%% of floor</title></circle>\n", k->median_us, pct_floor(k->floor.t * 1e6, k->median_us));
        lx[i] = cx + 8;
        ly[i] = cy + 4;
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++)
                if (fabs(lx[j] - lx[i]) < 130 && fabs(ly[j] - ly[i]) < 13) ly[i] = ly[j] + 13, moved = true;
        }
        fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\">", lx[i], ly[i]);
        if (k->group >= 0) fprintf(f, "k%d ", k->group);
        xml_text(f, k->kind);
        fprintf(f, " %.0f%%</text>\n", pct_floor(k->floor.t * 1e6, k->median_us));
        if (fabs(ly[i] - (cy + 4)) > 1)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-width=\"0.5\"/>\n", cx + 5,
                    cy, lx[i] - 2, ly[i] - 4);
    }
    free(lx);
    free(ly);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">hollow: no FLOPs (placed by achieved bandwidth); label: %% of floor</text>\n",
            pl.left + 8, pl.top + 16);
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : rt_fail(-1, err, n, "cannot write the roofline to %s", path);
}
