/* runtime/rt_memory.c — the device memory a model allocates, computed by the
 * functions its allocators size their buffers with (rt_run.c: the
 * intermediates arena, the kernel workspaces and the counters region; rt_bind.c: packed weights
 * and states), so that an account taken without a device (a compile-only
 * context) says exactly what a device would be asked for. The compile
 * driver's plan states the same four figures from the memory plan and the
 * kernels (src/compile.c, kc_memory); tests compare the two for every
 * sample, and on a GPU compare both with what was allocated. Weights bound
 * by the caller, or loaded from a file, are the caller's bytes and are not
 * counted. rt_model_fallbacks lives here too: what a run at some dims gets
 * (the variant's generic-template kernels). */
#include <string.h>

#include "runtime/rt_model_internal.h"

bool rt_kernel_workspace(const cg_kernel *k, const int64_t *dims, bool zeroed, size_t *need)
{
    size_t s = 0;
    for (int i = 0; i < k->nargs; i++) {
        if (k->args[i].kind != CG_ARG_WORKSPACE || k->args[i].zeroed != zeroed) continue;
        int64_t b;
        if (!cg_arg_eval(&k->args[i], dims, &b) || b < 0) return false;
        s += RT_ALIGN_UP(b);
    }
    *need = s;
    return true;
}

bool rt_kernels_workspace(const cg_kernel *ks, int nk, const int64_t *dims, size_t *scratch, size_t *counters)
{
    size_t most = 0, sum = 0;
    for (int k = 0; k < nk; k++) {
        size_t s, c;
        if (!rt_kernel_workspace(&ks[k], dims, false, &s) || !rt_kernel_workspace(&ks[k], dims, true, &c)) return false;
        if (s > most) most = s;
        sum += c;
    }
    *scratch = most;
    *counters = sum;
    return true;
}

size_t rt_arena_size(size_t need) { return need ? need : RT_ARENA_ALIGN; }

size_t rt_workspace_size(size_t need) { return need > RT_ARENA_ALIGN ? need : RT_ARENA_ALIGN; }

size_t rt_workspaces_size(size_t scratch, size_t counters)
{
    return rt_workspace_size(scratch) + rt_workspace_size(counters);
}

bool rt_packed_bytes(const ir_graph *g, const int64_t *maxd, rt_packed_value v, size_t *bytes)
{
    if (v.node < 0 || v.node >= g->nnodes) return false;
    const ir_node *nd = g->nodes[v.node];
    int64_t numel;
    if (!ir_type_shape_at(&nd->type, maxd, NULL, &numel)) return false;
    *bytes = (size_t)numel * (size_t)ir_dtype_size(nd->type.dtype);
    return true;
}

rt_status rt_model_memory(const rt_model *m, rt_memory *need, rt_memory *held, char *err, size_t n)
{
    rt_memory nd = {0}, hd = {0};
    nd.intermediates = rt_arena_size(m->arena_need);
    size_t scratch = 0, counters = 0;
    for (int i = 0; i < m->nvars; i++) { /* each variant at the max dims: the largest a run asks for */
        const rt_variant_plan *v = &m->vars[i]->plan;
        size_t s, c;
        if (!rt_kernels_workspace(v->kernels, v->nkernels, v->exact ? v->dims : m->maxd, &s, &c))
            return rt_fail(RT_ERR_INTERNAL, err, n, "a workspace size of a variant does not evaluate");
        if (s > scratch) scratch = s;
        if (c > counters) counters = c;
    }
    nd.workspaces = rt_workspaces_size(scratch, counters);
    for (int i = 0; i < m->npacked; i++) {
        size_t b;
        if (!rt_packed_bytes(m->g, m->maxd, m->packed[i].value, &b))
            return rt_fail(RT_ERR_INTERNAL, err, n, "the size of packed value %%%d does not evaluate", m->packed[i].value.node);
        nd.packed += b;
        if (m->packed[i].dev) hd.packed += m->packed[i].bytes;
    }
    for (int i = 0; i < m->g->nparams; i++) {
        if (m->g->params[i]->op != IR_OP_STATE) continue;
        int64_t shape[IR_MAX_RANK];
        size_t b;
        if (rt_model_param_bytes(m, i, shape, &b) != 0)
            return rt_fail(RT_ERR_INTERNAL, err, n, "state '%s': the shape does not evaluate", m->g->params[i]->name);
        nd.states += b;
        if (m->state_ptr[i]) hd.states += m->state_bytes[i];
    }
    hd.intermediates = m->arena_dev ? m->arena_bytes : 0;
    hd.workspaces = (m->scratch_dev ? m->scratch_bytes : 0) + (m->counters_dev ? m->counters_bytes : 0);
    if (need) *need = nd;
    if (held) *held = hd;
    return RT_OK;
}

const rt_memory *rt_model_planned_memory(const rt_model *m) { return &m->plan.memory; }

rt_status rt_model_fallbacks(rt_model *m, const int64_t *dims, FILE *out, int *count, char *err, size_t n)
{
    int vi;
    *count = 0;
    rt_status st = rt_variant_pick(m, dims, &vi, err, n); /* plans the variant when it is new */
    if (st != RT_OK) return st;
    const rt_variant_plan *v = &m->vars[vi]->plan;
    for (int k = 0; k < v->nkernels; k++) *count += cg_fallback_print(m->g, &v->kernels[k], out);
    return RT_OK;
}
