/* runtime/rt_profile.c — profile a model: N whole graph replays timed by
 * CUPTI, each kernel against its floor (runtime/rt_profile.h).
 *
 * Algorithm:
 *  1. The run's positions are read from device memory (the cost model's
 *     attended rows); the variant the dims pick is prepared; the ceilings
 *     are given, or read from the cache directory, or measured.
 *  2. A CUPTI session opens; the model's CUDA graphs are dropped, so the one
 *     this run uses is captured and instantiated while CUPTI watches.
 *     Warm-up replays run and their records are dropped.
 *  3. N replays are issued back to back, a CUDA event recorded before each
 *     and after the last: event i to i+1 is replay i's wall time.
 *  4. The records become rows, events, bubbles and the gaps between the
 *     kernels of each replay (rt_profile_add_records).
 *  5. Kernel rows get their cost (ir/cost.h) at the run's dims and
 *     positions; rt_profile_finish computes the floors and sorts.
 *  6. CUPTI switches to graph-level records, the graph is captured again,
 *     and N more replays give the graph's own time on the GPU (time_graphs):
 *     what lies between the CUDA events and the graph is its launch head and
 *     tail. A CUPTI that cannot trace graphs leaves the row out, with the
 *     reason.
 *  7. CUPTI is detached, the graph captured again, and N more replays are
 *     timed with the events alone (time_detached): CUPTI's tracing makes
 *     each replay longer, and the profile says by how much. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_profile.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/rt_ceilings.h"
#include "runtime/rt_cupti.h"
#include "runtime/rt_model_internal.h"

/* ---- what the rows say about their kernels --------------------------------------------------- */

/* "32-34, 36": the source lines of group k's ops. */
static const char *group_lines(arena *a, const ir_graph *g, int k)
{
    bool seen[4096] = {false};
    int max = 0;
    for (int i = 0; i < g->nnodes; i++) {
        int l = g->nodes[i]->loc.line;
        if (g->nodes[i]->group == k && l > 0 && l < 4096) seen[l] = true, max = l > max ? l : max;
    }
    char buf[512] = "";
    size_t len = 0;
    for (int l = 1; l <= max && len + 16 < sizeof buf; l++) {
        if (!seen[l]) continue;
        int e = l;
        while (e + 1 <= max && seen[e + 1]) e++;
        len += (size_t)snprintf(buf + len, sizeof buf - len, len ? ", %d" : "%d", l);
        if (e > l) len += (size_t)snprintf(buf + len, sizeof buf - len, "-%d", e);
        l = e;
    }
    return arena_strdup(a, buf);
}

/* "SPLITK=1 GEMV_COLS=8": the single-token #defines of the generated part
 * (tiles, splits, flags), without the kernel's name and element type. */
static const char *kernel_constants(arena *a, const cg_kernel *k)
{
    char buf[512] = "";
    size_t len = 0;
    for (const char *s = k->generated; s && (s = strstr(s, "#define KILN_")); s++) {
        const char *name = s + 13, *ne = name;
        while (*ne && *ne != ' ' && *ne != '\n' && *ne != '(') ne++;
        if (*ne != ' ') continue;
        const char *val = ne + 1, *ve = val;
        while (*ve && *ve != '\n' && *ve != ' ') ve++;
        if (ve == val || (*ve == ' ' && ve[1] != '\n')) continue; /* an expression, not a constant */
        int nl = (int)(ne - name), vl = (int)(ve - val);
        if ((nl == 6 && !strncmp(name, "KERNEL", 6)) || (nl == 1 && name[0] == 'T')) continue;
        if (len + (size_t)nl + (size_t)vl + 3 >= sizeof buf) break;
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%.*s=%.*s", len ? " " : "", nl, name, vl, val);
    }
    return arena_strdup(a, buf);
}

/* ---- ceilings ------------------------------------------------------------------------------------ */

static bool model_is_f16(const ir_graph *g)
{
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->op == IR_OP_WEIGHT && ir_dtype_is_float(g->params[i]->type.dtype))
            return g->params[i]->type.dtype == IR_F16;
    return false;
}

int rt_ctx_ceilings(rt_ctx *c, const char *root, bool remeasure, rt_ceilings *out, bool *from_file, char **path,
                    char *err, size_t n)
{
    if (!c->has_device) return rt_fail(RT_ERR_NO_DEVICE, err, n, "ceilings: no CUDA device (the context was created compile_only)");
    RT_CUDA_TRY(cudaSetDevice(c->device), err, n);
    if (!root) root = rt_cache_dir(c->cache); /* the context's cache directory, when it has one on disk */
    return rt_ceilings_get(c->device, c->arch, root, remeasure, out, from_file, path, err, n);
}

int rt_profile_ceilings(rt_model *m, const rt_profile_opts *o, rt_profile *p, char *err, size_t n)
{
    rt_profile_opts def = {0};
    if (!o) o = &def;
    p->bw = o->peak_bw;
    p->rate = o->peak_flops;
    const char *given = o->peak_bw > 0 && o->peak_flops > 0 ? "both given" : NULL;
    if (!given) {
        rt_ceilings c;
        bool from_file = false;
        char *path = NULL;
        RT_TRY(rt_ctx_ceilings(m->ctx, o->cache_root, false, &c, &from_file, &path, err, n));
        bool f16 = model_is_f16(m->g);
        if (!(p->bw > 0)) p->bw = c.read_bw;
        if (!(p->rate > 0)) p->rate = f16 ? c.f16_rate : c.bf16_rate;
        p->device = arena_strdup(&p->a, c.device);
        p->ceilings = arena_printf(&p->a, "%s %s%s%s; the %s rate%s%s", from_file ? "measured" : "measured now,",
                                   c.measured, path ? ", kept in " : "", path ? path : "", f16 ? "f16" : "bf16",
                                   o->peak_bw > 0 ? "; read bandwidth given" : "",
                                   o->peak_flops > 0 ? "; tensor rate given" : "");
        free(path);
    } else {
        p->ceilings = "--peak-bw and --peak-flops";
    }
    return RT_OK;
}

/* ---- the run ---------------------------------------------------------------------------------------- */

typedef struct prof_run {
    rt_model *m;
    const int64_t *dims;
    const rt_tensor_ptr *in, *out;
    int nin, nout;
    cudaEvent_t *ev;
    int nev;
    int32_t **pos; /* per param: host values of i32 inputs */
    rt_cupti *cupti;
} prof_run;

/* Host copies of the i32 inputs (positions). */
static int read_positions(prof_run *r, char *err, size_t n)
{
    const ir_graph *g = r->m->g;
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *p = g->params[i];
        if (p->op != IR_OP_INPUT || p->type.dtype != IR_I32) continue;
        const void *dev = NULL;
        for (int j = 0; j < r->nin; j++)
            if (r->in[j].name && !strcmp(r->in[j].name, p->name)) dev = r->in[j].ptr;
        int64_t numel;
        if (!dev || !ir_type_shape_at(&p->type, r->dims, NULL, &numel)) continue; /* the run reports it */
        r->pos[i] = calloc((size_t)numel + 1, sizeof(int32_t));
        if (!r->pos[i]) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        RT_CUDA_TRY(cudaMemcpy(r->pos[i], dev, (size_t)numel * sizeof(int32_t), cudaMemcpyDeviceToHost), err, n);
    }
    return RT_OK;
}

static int run_once(prof_run *r, char *err, size_t n)
{
    return rt_model_run(r->m, r->dims, r->in, r->nin, r->out, r->nout, NULL, err, n);
}

static int rec_start_cmp(const void *a, const void *b)
{
    const rt_cupti_record *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* A matmul that autotuning gave to cuBLASLt (cg_kernel.lt.chosen) runs
 * cuBLAS's kernels under cuBLAS's names: in each replay (records in start
 * order), a kernel record whose name is no kernel of the variant's is
 * renamed to the first such matmul after the last Kiln kernel seen, so its
 * row gets its time. */
static void name_lt_records(const rt_variant *v, rt_cupti_record *rec, int nrec, int runs)
{
    const int nk = v->plan.nkernels;
    bool any = false;
    for (int j = 0; j < nk; j++) any |= v->plan.kernels[j].lt.chosen;
    if (!any || runs <= 0 || nrec % runs) return;
    qsort(rec, (size_t)nrec, sizeof *rec, rec_start_cmp);
    const int per = nrec / runs;
    for (int q = 0; q < runs; q++) {
        int last = -1;
        for (int i = q * per; i < (q + 1) * per; i++) {
            if (rec[i].kind == RT_CUPTI_MEMSET || !rec[i].name) continue;
            int hit = -1;
            for (int j = last + 1; j < nk && hit < 0; j++)
                if (!strcmp(v->plan.kernels[j].name, rec[i].name)) hit = j;
            for (int j = 0; j < nk && hit < 0; j++)
                if (!strcmp(v->plan.kernels[j].name, rec[i].name)) hit = -2;
            if (hit >= 0) {
                last = hit;
                continue;
            }
            if (hit == -2) continue; /* a Kiln kernel out of order: leave it */
            for (int j = last + 1; j < nk; j++)
                if (v->plan.kernels[j].lt.chosen) {
                    rec[i].name = v->plan.kernels[j].name;
                    break;
                }
        }
    }
}

static int fill_profile(prof_run *r, const rt_variant *v, rt_cupti_record *rec, int nrec, double *wall, rt_profile *p,
                        char *err, size_t n)
{
    const ir_graph *g = rt_variant_graph(&v->plan, r->m->g); /* its kernels' groups */
    int nkern = v->plan.nkernels;
    /* rows: every kernel of the variant, then whatever else ran */
    p->k = arena_alloc(&p->a, (size_t)(nkern + nrec + 1) * sizeof *p->k);
    if (!p->k) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    int st = RT_OK;
    char ce[256];
    int nrows = 0; /* kernels launched at these dims (a norm its GEMVs compute is not) */
    for (int j = 0; j < nkern && st == RT_OK; j++) {
        const cg_kernel *K = &v->plan.kernels[j];
        unsigned grid[3], block;
        size_t smem;
        if (cg_launch_eval(K, r->dims, grid, &block, &smem, ce, sizeof ce) && (!grid[0] || !grid[1] || !grid[2])) continue;
        rt_prof_kernel *k = &p->k[nrows++];
        k->name = K->name;
        k->kind = K->kind;
        k->group = K->group;
        /* the template and its configuration (which implementation ran, and "(autotuned)" when measured) */
        k->tmpl = K->lt.chosen ? arena_printf(&p->a, "cublasLt: %s", K->config)
                  : K->config  ? arena_printf(&p->a, "%s: %s", cg_family_template(K->family), K->config)
                               : cg_family_template(K->family);
        k->constants = K->lt.chosen ? "" : kernel_constants(&p->a, K); /* cuBLASLt: no template constants */
        k->lines = group_lines(&p->a, g, K->group);
        if (ir_cost_group(g, K->group, r->dims, (const int32_t *const *)r->pos, &k->cost, ce, sizeof ce) != 0)
            st = rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: %s", K->name, ce);
    }
    if (st == RT_OK) name_lt_records(v, rec, nrec, p->runs);
    if (st == RT_OK) st = rt_profile_add_records(p, nrows, rec, nrec, wall, err, n);
    if (st == RT_OK && ir_cost_layer(g, r->dims, (const int32_t *const *)r->pos, &p->layer, ce, sizeof ce) != 0)
        st = rt_fail(RT_ERR_INTERNAL, err, n, "the layer's cost: %s", ce);
    return st;
}

/* N replays between the events r->ev[0..runs] (after `warmup` untimed ones, the graph captured
 * anew), their wall times into wall[runs]. */
static int timed_replays(prof_run *r, const rt_profile_opts *o, int runs, double *wall, char *err, size_t n)
{
    rt_model *m = r->m;
    rt_graph_cache_clear(m->graphs);
    for (int i = 0; i < (o->warmup > 0 ? o->warmup : 5); i++) RT_TRY(run_once(r, err, n));
    RT_TRY(rt_model_sync(m, err, n));
    if (r->cupti) {
        RT_TRY(rt_cupti_flush(r->cupti, err, n));
        rt_cupti_clear(r->cupti);
    }
    cudaStream_t s = (cudaStream_t)m->ctx->stream;
    for (int q = 0; q < runs; q++) {
        RT_CUDA_TRY(cudaEventRecord(r->ev[q], s), err, n);
        RT_TRY(run_once(r, err, n));
    }
    RT_CUDA_TRY(cudaEventRecord(r->ev[runs], s), err, n);
    RT_TRY(rt_model_sync(m, err, n));
    for (int q = 0; q < runs; q++) {
        float ms = 0;
        RT_TRY(RT_CUDA_CHECK(cudaEventElapsedTime(&ms, r->ev[q], r->ev[q + 1]), "replay time", err, n));
        wall[q] = ms * 1e3;
    }
    return RT_OK;
}

/* Step 6: the replays once more with CUPTI's graph records: p->graph_*. */
static int time_graphs(prof_run *r, const rt_profile_opts *o, rt_profile *p, char *err, size_t n)
{
    char why[512];
    if (rt_cupti_trace_graphs(r->cupti, why, sizeof why) != RT_OK) {
        p->graph_why = arena_printf(&p->a, "CUPTI: %s", why);
        return RT_OK;
    }
    double *wall = malloc((size_t)p->runs * sizeof *wall + 1);
    if (!wall) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    int st = timed_replays(r, o, p->runs, wall, err, n);
    if (st == RT_OK) st = rt_cupti_flush(r->cupti, err, n);
    if (st == RT_OK) {
        int nrec;
        uint64_t dropped;
        rt_cupti_record *rec = rt_cupti_take(r->cupti, &nrec, &dropped);
        if (rt_profile_add_graph_records(p, rec, nrec, wall, why, sizeof why) != RT_OK)
            p->graph_why = arena_printf(&p->a, "%s", why); /* the profile stands without the row */
        free(rec);
    }
    free(wall);
    return st;
}

/* Step 7: the replays once more, CUPTI detached (its session closed) and the graph captured again
 * without it, timed by the same events: p->detached_*. */
static int time_detached(prof_run *r, const rt_profile_opts *o, rt_profile *p, char *err, size_t n)
{
    rt_cupti_close(r->cupti);
    r->cupti = NULL;
    double *wall = malloc((size_t)p->runs * sizeof *wall + 1);
    if (!wall) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    int st = timed_replays(r, o, p->runs, wall, err, n);
    if (st == RT_OK) {
        p->detached_runs = p->runs;
        p->detached_median_us = rt_percentile(wall, p->runs, 50);
        p->detached_p10_us = rt_percentile(wall, p->runs, 10);
        p->detached_p90_us = rt_percentile(wall, p->runs, 90);
    }
    free(wall);
    return st;
}

static int profile(prof_run *r, const rt_profile_opts *o, rt_profile *p, char *err, size_t n)
{
    rt_model *m = r->m;
    rt_status st;
    if (!rt_model_use_device(m, "profile", &st, err, n)) return st;
    RT_TRY(rt_model_prepare(m, r->dims, err, n));
    RT_TRY(rt_model_sync(m, err, n));
    RT_TRY(read_positions(r, err, n));
    int vi;
    RT_TRY(rt_variant_pick(m, r->dims, &vi, err, n));
    const rt_variant *v = m->vars[vi];
    RT_TRY(rt_profile_ceilings(m, o, p, err, n));
    RT_TRY(rt_cupti_open(&r->cupti, err, n));
    double *wall = malloc((size_t)p->runs * sizeof *wall + 1);
    if (!wall) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    st = timed_replays(r, o, p->runs, wall, err, n); /* the graph captured again, under CUPTI */
    if (st == RT_OK) st = rt_cupti_flush(r->cupti, err, n);
    if (st != RT_OK) {
        free(wall);
        return st;
    }
    int nrec;
    uint64_t dropped;
    rt_cupti_record *rec = rt_cupti_take(r->cupti, &nrec, &dropped);
    if (dropped) {
        free(rec), free(wall);
        return rt_fail(RT_ERR_INTERNAL, err, n, "CUPTI dropped %llu records: profile fewer runs",
                       (unsigned long long)dropped);
    }
    for (int i = 0; i < nrec; i++) /* the names live in the session: copy them */
        if (rec[i].name) rec[i].name = arena_strdup(&p->a, rec[i].name);
    st = fill_profile(r, v, rec, nrec, wall, p, err, n);
    free(rec), free(wall);
    if (st == RT_OK) rt_profile_finish(p);
    if (st == RT_OK) st = time_graphs(r, o, p, err, n);
    if (st == RT_OK) st = time_detached(r, o, p, err, n);
    return st;
}

int rt_model_profile(rt_model *m, const int64_t *dims, const rt_tensor_ptr *inputs, int ninputs,
                     const rt_tensor_ptr *outputs, int noutputs, const rt_profile_opts *opts, rt_profile *out,
                     char *err, size_t n)
{
    rt_profile_opts def = {0};
    if (!opts) opts = &def;
    rt_profile_init(out);
    const ir_graph *g = m->g;
    out->runs = opts->runs > 0 ? opts->runs : 50;
    out->model = arena_strdup(&out->a, g->name ? g->name : "");
    char dt[256] = "";
    size_t len = 0;
    for (int s = 0; s < g->nsyms && len + 32 < sizeof dt; s++)
        len += (size_t)snprintf(dt + len, sizeof dt - len, "%s%s=%lld", s ? "," : "", g->syms[s], (long long)dims[s]);
    out->dims = arena_strdup(&out->a, dt);
    prof_run r = {m, dims, inputs, outputs, ninputs, noutputs, NULL, out->runs + 1, NULL, NULL};
    r.ev = calloc((size_t)r.nev, sizeof *r.ev);
    r.pos = calloc((size_t)g->nparams + 1, sizeof *r.pos);
    int st = r.ev && r.pos ? RT_OK : rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    for (int i = 0; i < r.nev && st == RT_OK; i++)
        st = RT_CUDA_CHECK(cudaEventCreate(&r.ev[i]), "profile", err, n);
    if (st == RT_OK) st = profile(&r, opts, out, err, n);
    rt_cupti_close(r.cupti);
    for (int i = 0; r.ev && i < r.nev; i++)
        if (r.ev[i]) (void)cudaEventDestroy(r.ev[i]);
    for (int i = 0; r.pos && i < g->nparams; i++) free(r.pos[i]);
    free(r.pos);
    free(r.ev);
    if (st != RT_OK) rt_profile_free(out);
    return st;
}
