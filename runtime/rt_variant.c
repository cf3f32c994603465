/* runtime/rt_variant.c — shape variants: which plan a run uses.
 *
 * A model runs through one of several variants, each a complete plan
 * (rt_variant_plan: kernels, arena offsets, packed values). Who plans them
 * and when:
 *
 *   - The compile driver (src/compile.c) plans every variant; the runtime
 *     never parses, never calls a pass and never calls codegen's emitters.
 *   - Up front: the driver plans the large-shape variant (symbolic dims:
 *     tensor-core matmul, prefill attention; right for any dims up to the
 *     max) into rt_plan.variants[0]; variants for buckets a model declares
 *     or its options ask for go in the same array (none does yet).
 *   - Lazily: for dims without a variant, the runtime calls the planner the
 *     plan carries (rt_plan.plan_variant) and keeps what it returns.
 *
 * How the runtime picks (rt_variant_pick): a run's rows are the largest
 * product of the leading dims of one of its inputs. A run of at most
 * decode_max_rows rows (rt_model_config; 32 unless set, < 0 never) uses the
 * variant planned for its exact dims (decode-shaped: GEMV, split-KV decode
 * attention), planned on first use; other runs use the large-shape variant.
 * At most RT_MAX_VARIANTS exact variants are kept; beyond that, and when the
 * plan has no planner, the large-shape variant serves, correct for any dims.
 *
 * docs/ARCHITECTURE.md ("Shape variants") says the same for readers of the
 * whole design.
 *
 * A variant's kernels are compiled (NVRTC through the kernel cache) when the
 * model is created unless it is lazy, else at first use, and loaded when
 * there is a device. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_cublaslt.h"
#include "runtime/rt_model_internal.h"
#include "util/vec.h"

void rt_variant_plan_free(rt_variant_plan *v)
{
    if (!v) return;
    cg_kernels_free(v->kernels, v->nkernels);
    free(v->node_offset);
    free(v->packed);
    free(v->arg_packed);
    memset(v, 0, sizeof *v);
}

void rt_plan_free(rt_plan *p)
{
    if (!p) return;
    for (int i = 0; i < p->nvariants; i++) rt_variant_plan_free(&p->variants[i]);
    free(p->variants);
    if (p->planner_free) p->planner_free(p->planner);
    if (p->graph) ir_graph_free(p->graph);
    free(p->name);
    free(p->text);
    memset(p, 0, sizeof *p);
}

void rt_variant_free(rt_variant *v)
{
    if (!v) return;
    int nk = v->plan.nkernels;
    if (v->cubins)
        for (int i = 0; i < 2 * nk; i++) rt_blob_free(&v->cubins[i]);
    free(v->cubins);
    if (v->mods)
        for (int i = 0; i < 2 * nk; i++) rt_module_free(v->mods[i]);
    free(v->mods);
    free(v->kern);
    if (v->lt)
        for (int i = 0; i < nk; i++) rt_lt_plan_free(v->lt[i]);
    free(v->lt);
    free(v->pack_slot);
    rt_variant_plan_free(&v->plan);
    free(v);
}

/* The model's buffer for a packed value, registered when new; -1 on OOM. */
static int packed_slot(rt_model *m, rt_packed_value pv)
{
    for (int i = 0; i < m->npacked; i++)
        if (rt_packed_value_eq(&m->packed[i].value, &pv)) return i;
    if (!VEC_GROW(m->packed, m->npacked, m->cappacked, NULL)) return -1;
    rt_packed_buffer *p = &m->packed[m->npacked];
    memset(p, 0, sizeof *p);
    p->value = pv;
    return m->npacked++;
}

rt_status rt_variant_adopt(rt_model *m, rt_variant_plan *planned, rt_variant **out, char *err, size_t n)
{
    *out = NULL;
    rt_variant *v = calloc(1, sizeof *v);
    if (!v) {
        rt_variant_plan_free(planned);
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    v->plan = *planned;
    memset(planned, 0, sizeof *planned);
    v->pack_slot = calloc((size_t)v->plan.npacked + 1, sizeof *v->pack_slot);
    if (!v->pack_slot) {
        rt_variant_free(v);
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    for (int i = 0; i < v->plan.npacked; i++)
        if ((v->pack_slot[i] = packed_slot(m, v->plan.packed[i])) < 0) {
            rt_variant_free(v);
            return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        }
    if (v->plan.arena_bytes > m->arena_need) m->arena_need = v->plan.arena_bytes;
    m->cnt.variants++;
    m->cnt.plan_cache_hits += v->plan.from_plan_cache;
    m->cnt.codegen_runs += (uint64_t)v->plan.codegen_runs;
    *out = v;
    return RT_OK;
}

typedef struct progress_ctx {
    const rt_model *m;
    const char *const *names;
} progress_ctx;

static void on_progress(void *user, int done, int total, int index, const rt_compile_result *r)
{
    const progress_ctx *p = user;
    p->m->progress(p->m->progress_user, done, total, p->names[index], r->ms);
}

rt_status rt_variant_compile(rt_model *m, rt_variant *v, char *err, size_t n)
{
    if (v->compiled) return RT_OK;
    int nk = v->plan.nkernels, nu = 0;
    /* the kernels, then the fallbacks of those that have one: unit u is
     * kernel which[u] (>= nk: the fallback of kernel which[u] - nk) */
    const char **names = calloc(2 * (size_t)nk + 1, sizeof *names), **srcs = calloc(2 * (size_t)nk + 1, sizeof *srcs);
    const cg_kernel **ks = calloc(2 * (size_t)nk + 1, sizeof *ks);
    int *which = calloc(2 * (size_t)nk + 1, sizeof *which);
    rt_compile_result *res = calloc(2 * (size_t)nk + 1, sizeof *res);
    rt_cache_lookup *how = calloc(2 * (size_t)nk + 1, sizeof *how);
    v->cubins = calloc(2 * (size_t)nk + 1, sizeof *v->cubins);
    int *same = calloc(2 * (size_t)nk + 1, sizeof *same); /* kernel i's unit when it repeats one, else -1 */
    rt_status st = RT_OK;
    if (!names || !srcs || !ks || !which || !res || !how || !v->cubins || !same) {
        st = rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        goto out;
    }
    /* kernels that share one source (identical layers: src/compile.c) compile once */
    for (int i = 0; i < 2 * nk; i++) {
        const cg_kernel *k = i < nk ? &v->plan.kernels[i] : v->plan.kernels[i - nk].fallback;
        same[i] = -1;
        if (!k) continue;
        for (int u = 0; u < nu && same[i] < 0; u++)
            if (k->source && srcs[u] == k->source && names[u] == k->name) same[i] = u; /* shared: same pointers */
        if (same[i] >= 0) continue;
        ks[nu] = k;
        which[nu] = i;
        names[nu] = k->name;
        srcs[nu++] = k->source;
    }
    rt_compile_opts co = {.arch = m->ctx->arch};
    progress_ctx pc = {m, names};
    rt_status compile_st = rt_cache_compile_many(m->ctx->cache, nu, names, srcs, &co, m->ctx->no_cache ? RT_CACHE_NO_CACHE : 0,
                                         res, how, m->ctx->compile_threads, m->progress ? on_progress : NULL, &pc);
    for (int i = 0; i < nu; i++) {
        if (res[i].status != RT_OK) continue;
        if (how[i] == RT_CACHE_HIT_MEMORY) m->cnt.cache_hits_memory++;
        else if (how[i] == RT_CACHE_HIT_DISK) m->cnt.cache_hits_disk++;
        else m->cnt.kernels_compiled++;
    }
    if (compile_st != RT_OK) {
        for (int i = 0; i < nu; i++)
            if (res[i].status != RT_OK) {
                st = rt_fail(res[i].status == RT_ERR_NOMEM ? RT_ERR_NOMEM : RT_ERR_COMPILE, err, n,
                             "NVRTC failed for kernel %s (%s, group k%d): %s", ks[i]->name, cg_family_name(ks[i]->family),
                             ks[i]->group, res[i].message ? res[i].message : rt_status_str(res[i].status));
                break;
            }
        if (st == RT_OK) st = rt_fail(RT_ERR_COMPILE, err, n, "NVRTC: %s", rt_status_str(compile_st));
        goto out;
    }
    for (int i = 0; i < 2 * nk; i++) /* the repeats (counted as memory hits) load their unit's module */
        if (same[i] >= 0) m->cnt.cache_hits_memory++;
    for (int i = 0; i < nu; i++) {
        v->cubins[which[i]] = res[i].code;
        memset(&res[i].code, 0, sizeof res[i].code);
    }
    v->compiled = true;
out:
    if (res)
        for (int i = 0; i < nu; i++) rt_compile_result_free(&res[i]);
    free(res);
    free(how);
    free(names);
    free(srcs);
    free(ks);
    free(which);
    free(same);
    return st;
}

rt_status rt_variant_load(rt_model *m, rt_variant *v, char *err, size_t n)
{
    if (v->loaded) return RT_OK;
    RT_TRY(rt_variant_compile(m, v, err, n));
    rt_status st;
    if (!rt_model_use_device(m, "loading kernels", &st, err, n)) return st;
    int nk = v->plan.nkernels;
    v->mods = calloc(2 * (size_t)nk + 1, sizeof *v->mods);
    v->kern = calloc(2 * (size_t)nk + 1, sizeof *v->kern);
    if (!v->mods || !v->kern) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    char load_err[512];
    for (int i = 0; i < 2 * nk; i++) {
        const cg_kernel *k = i < nk ? &v->plan.kernels[i] : v->plan.kernels[i - nk].fallback;
        if (!k) continue;
        int from = -1; /* a kernel with the same source and name (rt_variant_compile's repeats): its function */
        for (int j = 0; j < i && from < 0; j++) {
            const cg_kernel *kj = j < nk ? &v->plan.kernels[j] : v->plan.kernels[j - nk].fallback;
            if (kj && kj->source == k->source && kj->name == k->name && v->kern[j].fn) from = j;
        }
        if (from >= 0) {
            v->kern[i] = v->kern[from];
            continue;
        }
        rt_status ls = rt_module_load(&v->mods[i], v->cubins[i].data, v->cubins[i].size, load_err, sizeof load_err);
        if (ls == RT_OK) ls = rt_module_kernel(v->mods[i], k->name, &v->kern[i], load_err, sizeof load_err);
        if (ls == RT_OK && v->kern[i].param_size != k->param_size) {
            return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: its parameter is %zu bytes on the host but %zu in the cubin",
                           k->name, k->param_size, v->kern[i].param_size);
        }
        /* any dynamic shared memory: with the kernel's static bytes it may pass the default 48 KB */
        if (ls == RT_OK && k->launch.smem > 0)
            ls = rt_kernel_set_max_smem(&v->kern[i], (size_t)k->launch.smem, load_err, sizeof load_err);
        if (ls == RT_OK && k->launch.cluster > 8)
            ls = rt_kernel_allow_large_clusters(&v->kern[i], load_err, sizeof load_err);
        if (ls != RT_OK) return rt_fail(rt_kernel_status(ls), err, n, "loading kernel %s: %s", k->name, load_err);
    }
    for (int i = 0; i < 2 * nk; i++) rt_blob_free(&v->cubins[i]);
    v->loaded = true;
    return RT_OK;
}

/* Rows of the run: the largest product of an input's leading dims. */
static int64_t run_rows(const rt_model *m, const int64_t *dims)
{
    int64_t rows = 1;
    for (int i = 0; i < m->g->nparams; i++) {
        const ir_node *p = m->g->params[i];
        if (p->op != IR_OP_INPUT || p->type.rank < 2) continue;
        int64_t shape[IR_MAX_RANK], numel;
        if (!ir_type_shape_at(&p->type, dims, shape, &numel)) continue;
        int64_t r = shape[p->type.rank - 1] ? numel / shape[p->type.rank - 1] : 0;
        if (r > rows) rows = r;
    }
    return rows;
}

rt_status rt_variant_pick(rt_model *m, const int64_t *dims, int *index, char *err, size_t n)
{
    *index = 0;
    if (m->decode_max_rows < 0 || run_rows(m, dims) > m->decode_max_rows) return RT_OK;
    for (int i = 1; i < m->nvars; i++)
        if (m->vars[i]->plan.exact && !memcmp(m->vars[i]->plan.dims, dims, (size_t)m->g->nsyms * sizeof *dims)) {
            *index = i;
            return RT_OK;
        }
    /* full, or nothing to plan with: the large-shape variant serves any dims */
    if (m->nvars > RT_MAX_VARIANTS || !m->plan.plan_variant) return RT_OK;
    rt_variant_plan planned;
    memset(&planned, 0, sizeof planned);
    rt_status st = m->plan.plan_variant(m->plan.planner, m->g, dims, &planned, err, n);
    if (st != RT_OK) {
        rt_variant_plan_free(&planned);
        return st;
    }
    rt_variant *v;
    if ((st = rt_variant_adopt(m, &planned, &v, err, n)) != RT_OK) return st;
    m->vars[m->nvars] = v;
    *index = m->nvars++;
    return RT_OK;
}

rt_status rt_model_prepare(rt_model *m, const int64_t *dims, char *err, size_t n)
{
    int vi;
    RT_TRY(rt_variant_pick(m, dims, &vi, err, n));
    if (!m->ctx->has_device) return rt_variant_compile(m, m->vars[vi], err, n);
    return rt_variant_load(m, m->vars[vi], err, n);
}
