/* runtime/rt_run.c — running a model: arguments checked, the variant picked
 * (rt_variant.c), packed weights brought up to date, device memory sized,
 * then every kernel's KilnArgs filled and launched, eagerly or through the
 * CUDA graph cache (rt_graph.h) (rt_model.h).
 *
 * Hopper matmuls (cg_kernel.ntmaps > 0, matmul_wgmma.cuh): each time a launch
 * is recorded — an eager run, a graph capture, the re-capture of a graph
 * update for new pointers — the tensor maps are encoded from the pointers
 * just put in KilnArgs, into the parameter's prefix (KilnTmaArgs). When TMA
 * cannot describe an operand (rt_tmap_describable: a base pointer that is
 * not 16-byte aligned; codegen proved the strides), the group's mma.sync
 * kernel (cg_kernel.fallback) is launched instead with the same KilnArgs,
 * and counted (tma_fallbacks).
 *
 * A matmul that autotuning gave to cuBLASLt (cg_kernel.lt.chosen) launches
 * a cuBLASLt matmul instead of its kernel, with the pointers of the same
 * KilnArgs and the "lt_ws" workspace of the scratch region; its plan (the
 * heuristic's algorithm) is made before the run records anything (outside
 * any capture) the first time the kernel runs at a shape, and kept in the
 * variant (runtime/rt_cublaslt.h).
 *
 * Programmatic dependent launch: a kernel whose template waits on the one
 * before it (cg_kernel.pdl) is launched with programmatic stream
 * serialization (captured into the graph as a programmatic edge), so its
 * CTAs start and prefetch their weights while the previous kernel drains;
 * off with rt_model_config.no_pdl and for kernels compiled before sm_90.
 *
 * No memsets: a zeroed workspace (the split-K / split-KV counters) lives in
 * the counters region at its kernel's offset, zeroed once when allocated and
 * put back to zero by the last CTA of each launch; a failed run marks the
 * region dirty and the next run zeroes it (on the stream, outside any graph)
 * before launching. Other workspaces share the scratch region. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_cublaslt.h"
#include "runtime/rt_model_internal.h"
#include "runtime/rt_tmap.h"

typedef struct run_ctx {
    rt_model *m;
    rt_variant *v;
    const int64_t *dims;
    void **in;   /* per param (inputs) */
    void **out;  /* per output */
    rt_status status; /* of a failed record */
} run_ctx;

/* The device pointer of a packed value a kernel argument reads (packed_index
 * in the variant's plan), or NULL. */
static void *packed_ptr(const rt_model *m, const rt_variant *v, int packed_index)
{
    return packed_index >= 0 ? m->packed[v->pack_slot[packed_index]].dev : NULL;
}

/* Fills KilnArgs (buf) of kernel K whose args' packed indices are packed_of. */
static rt_status fill_args(run_ctx *run, const cg_kernel *K, const int *packed_of, unsigned char *buf, size_t cnt_off,
                           char *err, size_t n)
{
    rt_model *m = run->m;
    const ir_graph *g = m->g;
    const rt_variant *v = run->v;
    size_t ws_off = 0;
    memset(buf, 0, K->args_size ? K->args_size : 8);
    for (int i = 0; i < K->nargs; i++) {
        const cg_arg *a = &K->args[i];
        char *p = NULL;
        uint64_t val = 0;
        bool is_ptr = true;
        switch (a->kind) {
        case CG_ARG_PARAM: {
            const ir_node *pn = g->params[a->index];
            if (packed_of[i] >= 0) p = packed_ptr(m, v, packed_of[i]); /* a weight read interleaved */
            else if (pn->op == IR_OP_INPUT) p = run->in[a->index];
            else if (pn->op == IR_OP_WEIGHT) p = m->weight_ptr[a->index];
            else p = m->state_ptr[a->index];
            break;
        }
        case CG_ARG_OUTPUT: p = run->out[a->index]; break;
        case CG_ARG_STATE: p = m->state_ptr[g->states[a->index].state->param]; break;
        case CG_ARG_PACKED: p = packed_ptr(m, v, packed_of[i]); break;
        case CG_ARG_INTERMEDIATE:
            if (a->node >= 0 && v->plan.node_offset[a->node] >= 0) p = (char *)m->arena_dev + v->plan.node_offset[a->node];
            break;
        case CG_ARG_WORKSPACE: {
            int64_t b = 0;
            if (!cg_arg_eval(a, run->dims, &b) || b < 0)
                return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: workspace %s does not evaluate", K->name, a->field);
            if (a->zeroed) { /* counters: this kernel's own, left zeroed by it */
                p = (char *)m->counters_dev + cnt_off;
                cnt_off += RT_ALIGN_UP(b);
            } else {
                p = (char *)m->scratch_dev + ws_off;
                ws_off += RT_ALIGN_UP(b);
            }
            break;
        }
        case CG_ARG_SCALAR: {
            int64_t x;
            if (!cg_arg_eval(a, run->dims, &x))
                return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: scalar %s does not evaluate", K->name, a->field);
            val = (uint64_t)x;
            is_ptr = false;
            break;
        }
        case CG_ARG_NULL: break;
        case CG_ARG_SLOTS: val = (uint64_t)(uintptr_t)m->slots; is_ptr = false; break; /* NULL: none */
        case CG_ARG_SEQS: val = (uint64_t)(uintptr_t)m->seqs; is_ptr = false; break; /* checked: not NULL */
        }
        if (is_ptr && a->kind != CG_ARG_NULL) {
            if (!p) return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: field %s (%%%d) has no storage", K->name, a->field, a->node);
            if (a->elem_offset.nterms && a->node >= 0) {
                int64_t off;
                if (!ir_dim_value(&a->elem_offset, run->dims, &off))
                    return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: offset of %s does not evaluate", K->name, a->field);
                p += off * ir_dtype_size(g->nodes[a->node]->type.dtype);
            }
            val = (uint64_t)(uintptr_t)p;
        }
        if (a->offset + 8 > K->args_size)
            return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: field %s outside KilnArgs", K->name, a->field);
        memcpy(buf + a->offset, &val, 8);
    }
    return RT_OK;
}

/* The tensor maps of a wgmma kernel (cg_kernel.tmaps) into the parameter's
 * prefix, from the pointers fill_args put in its KilnArgs (args). *ok false
 * (RT_OK returned) when TMA cannot describe an operand: the caller launches
 * the fallback. */
rt_status rt_encode_tmaps(const cg_kernel *K, const int64_t *dims, const int64_t *state_dims, unsigned char *param,
                          const unsigned char *args, bool *ok, char *err, size_t n)
{
    rt_tmap_operand ops[CG_MAX_TMAPS];
    *ok = true;
    for (int i = 0; i < K->ntmaps; i++) {
        const cg_tmap *t = &K->tmaps[i];
        int64_t v[5];
        const ir_dim *d[5] = {&t->K, &t->rows, &t->ld, &t->batch, &t->batch_stride};
        for (int j = 0; j < 5; j++)
            if (!ir_dim_value(d[j], t->state_rows && j == 3 ? state_dims : dims, &v[j]))
                return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: tensor map %d does not evaluate", K->name, i);
        uint64_t base;
        memcpy(&base, args + K->args[t->arg].offset, 8);
        ops[i] = (rt_tmap_operand){(const void *)(uintptr_t)base, t->dtype == IR_F16, v[0], v[1], v[2], v[3], v[4],
                                   t->box_rows};
        if (!rt_tmap_describable(&ops[i])) *ok = false;
    }
    for (int i = 0; *ok && i < K->ntmaps; i++) {
        char who[512];
        rt_status st = rt_tmap_encode((rt_tmap *)(param + 128 * (size_t)i), &ops[i], who, sizeof who);
        if (st != RT_OK) return rt_fail(st, err, n, "kernel %s: tensor map %d: %s", K->name, i, who);
    }
    return RT_OK;
}

static rt_status record_kernels(run_ctx *run, void *stream, char *err, size_t n)
{
    rt_model *m = run->m;
    rt_variant *v = run->v;
    /* the kernel's one parameter: [tensor maps (wgmma)] KilnArgs; 64-byte
     * aligned for the maps */
    _Alignas(64) unsigned char param[8 * 256 + 128 * CG_MAX_TMAPS];
    const int *packed_of = v->plan.arg_packed;
    size_t cnt_off = 0; /* this kernel's counters in m->counters_dev */
    v->launched = 0;
    for (int k = 0; k < v->plan.nkernels; packed_of += v->plan.kernels[k++].nargs) {
        const cg_kernel *K = &v->plan.kernels[k];
        if (K->param_size > sizeof param || K->param_prefix + K->args_size > sizeof param)
            return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: %zu bytes of parameter", K->name, K->param_size);
        memset(param, 0, K->param_size);
        unsigned char *buf = param + K->param_prefix;
        RT_TRY(fill_args(run, K, packed_of, buf, cnt_off, err, n));
        size_t cnt;
        if (!rt_kernel_workspace(K, run->dims, true, &cnt))
            return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: a counter size does not evaluate", K->name);
        cnt_off += cnt;
        if (K->lt.chosen) { /* autotuning gave this matmul to cuBLASLt (runtime/rt_cublaslt.h) */
            if (!v->lt && !(v->lt = calloc((size_t)v->plan.nkernels, sizeof *v->lt)))
                return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
            RT_TRY(rt_lt_prepare(&v->lt[k], K, run->dims, buf, err, n));
            RT_TRY(rt_lt_launch(v->lt[k], K, buf, stream, err, n));
            m->cnt.launches++;
            v->launched++;
            continue;
        }
        const rt_kernel *kern = &v->kern[k];
        const void *arg = param;
        size_t arg_size = K->param_size;
        if (K->ntmaps) { /* maps hold the pointers: encoded whenever the launch is recorded */
            bool ok;
            RT_TRY(rt_encode_tmaps(K, run->dims, m->maxd, param, buf, &ok, err, n));
            if (!ok) {
                if (!K->fallback)
                    return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: an operand TMA cannot describe and no fallback",
                                   K->name);
                kern = &v->kern[v->plan.nkernels + k];
                K = K->fallback;
                arg = buf;
                arg_size = K->args_size;
                m->cnt.tma_fallbacks++;
            }
        }
        unsigned grid[3], block;
        size_t smem;
        char launch_err[512];
        if (!cg_launch_eval(K, run->dims, grid, &block, &smem, launch_err, sizeof launch_err))
            return rt_fail(RT_ERR_INVALID, err, n, "kernel %s: %s", K->name, launch_err);
        if (!grid[0] || !grid[1] || !grid[2]) continue; /* nothing to do at these dims */
        rt_dim3 gd = {grid[0], grid[1], grid[2]}, bd = {block, 1, 1};
        unsigned flags = m->pdl && K->pdl ? RT_LAUNCH_PDL : 0;
        rt_status ls = rt_launch_ex(kern, gd, bd, smem, stream, arg, arg_size, flags, launch_err, sizeof launch_err);
        if (ls != RT_OK)
            return rt_fail(rt_kernel_status(ls), err, n, "kernel %s (k%d, %s): %s", K->name, k, cg_family_name(K->family), launch_err);
        m->cnt.launches++;
        v->launched++;
    }
    return RT_OK;
}

/* The cuBLASLt plans of the variant's kernels that run cuBLASLt, made for these dims and
 * pointers before any capture (the heuristic and the handle are host work a capture need
 * not see); record_kernels then finds them ready. */
static rt_status prepare_lt(run_ctx *run, char *err, size_t n)
{
    rt_variant *v = run->v;
    _Alignas(64) unsigned char buf[8 * 256];
    const int *packed_of = v->plan.arg_packed;
    for (int k = 0; k < v->plan.nkernels; packed_of += v->plan.kernels[k++].nargs) {
        const cg_kernel *K = &v->plan.kernels[k];
        if (!K->lt.chosen) continue;
        if (K->args_size > sizeof buf) return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: KilnArgs too large", K->name);
        if (!v->lt && !(v->lt = calloc((size_t)v->plan.nkernels, sizeof *v->lt)))
            return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        RT_TRY(fill_args(run, K, packed_of, buf, 0, err, n));
        RT_TRY(rt_lt_prepare(&v->lt[k], K, run->dims, buf, err, n));
    }
    return RT_OK;
}

/* rt_record_fn: 0, or -1 with the status kept in run->status. */
static int record(void *user, void *stream, char *err, size_t n)
{
    run_ctx *run = user;
    run->status = record_kernels(run, stream, err, n);
    return run->status == RT_OK ? 0 : -1;
}

/* The intermediates arena and the workspace scratch, large enough for v at dims. */
/* Grows one device buffer of the model to hold need bytes (allocating size
 * bytes, need rounded up), waiting for the stream first: graphs captured with
 * the old pointer are dropped. zero: the buffer starts zeroed (counters). */
static rt_status grow_buffer(rt_model *m, void **dev, size_t *bytes, size_t need, size_t size, bool zero, const char *what,
                             char *err, size_t n)
{
    if (need <= *bytes && *dev) return RT_OK;
    (void)cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
    if (*dev) (void)cudaFree(*dev);
    *dev = NULL;
    *bytes = 0;
    char who[96];
    snprintf(who, sizeof who, "%s (%zu bytes)", what, size);
    RT_TRY(RT_CUDA_CHECK(cudaMalloc(dev, size), who, err, n));
    if (zero) RT_TRY(RT_CUDA_CHECK(cudaMemset(*dev, 0, size), who, err, n));
    *bytes = size;
    rt_graph_cache_clear(m->graphs);
    return RT_OK;
}

static rt_status ensure_memory(rt_model *m, const rt_variant *v, const int64_t *dims, char *err, size_t n)
{
    size_t scratch = 0, counters = 0; /* sized as rt_model_memory accounts them (rt_memory.c) */
    if (!rt_kernels_workspace(v->plan.kernels, v->plan.nkernels, dims, &scratch, &counters))
        return rt_fail(RT_ERR_INTERNAL, err, n, "a workspace size of the variant does not evaluate");
    RT_TRY(grow_buffer(m, &m->arena_dev, &m->arena_bytes, m->arena_need, rt_arena_size(m->arena_need), false,
                       "the intermediates arena", err, n));
    RT_TRY(grow_buffer(m, &m->scratch_dev, &m->scratch_bytes, scratch, rt_workspace_size(scratch), false,
                       "kernel workspaces", err, n));
    void *const before = m->counters_dev;
    RT_TRY(grow_buffer(m, &m->counters_dev, &m->counters_bytes, counters, rt_workspace_size(counters), true,
                       "kernel counters", err, n));
    if (m->counters_dev != before) m->counters_dirty = false; /* fresh and zeroed */
    return RT_OK;
}

/* Dims inside a state's shape (past its first axis) fix its layout. */
static rt_status check_state_dims(const rt_model *m, const int64_t *dims, char *err, size_t n)
{
    for (int i = 0; i < m->g->nparams; i++) {
        const ir_node *p = m->g->params[i];
        if (p->op != IR_OP_STATE) continue;
        for (int ax = 1; ax < p->type.rank; ax++)
            for (int t = 0; t < p->type.dims[ax].nterms; t++)
                for (int s = 0; s < m->g->nsyms; s++)
                    if (p->type.dims[ax].t[t].exp[s] && dims[s] != m->maxd[s])
                        return rt_fail(RT_ERR_STATE, err, n,
                                       "dims: %s=%lld but state %s : %s was allocated for %s=%lld; a dim inside a state's "
                                       "shape (after its first axis) must take its max value in every run",
                                       m->g->syms[s], (long long)dims[s], p->name, m->types[i], m->g->syms[s],
                                       (long long)m->maxd[s]);
    }
    return RT_OK;
}

/* The run's inputs and outputs by parameter / output index. */
static rt_status bind_tensors(const rt_model *m, const rt_tensor_ptr *inputs, int ninputs, const rt_tensor_ptr *outputs,
                        int noutputs, void **in, void **out, char *err, size_t n)
{
    const ir_graph *g = m->g;
    for (int i = 0; i < ninputs; i++) {
        if (!inputs[i].name) return rt_fail(RT_ERR_INVALID, err, n, "run: input %d has no name", i);
        int p = rt_model_find_param(m, inputs[i].name);
        if (p < 0 || g->params[p]->op != IR_OP_INPUT)
            return rt_fail(p < 0 ? RT_ERR_NOT_FOUND : RT_ERR_INVALID, err, n, "run: model %s has no input '%s'%s", g->name,
                           inputs[i].name,
                           p >= 0 ? (g->params[p]->op == IR_OP_WEIGHT ? " (it is a weight: bind it)" : " (it is a state)") : "");
        if (in[p]) return rt_fail(RT_ERR_INVALID, err, n, "run: input '%s' given twice", inputs[i].name);
        if (!inputs[i].ptr) return rt_fail(RT_ERR_INVALID, err, n, "run: input '%s': NULL device pointer", inputs[i].name);
        in[p] = inputs[i].ptr;
    }
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->op == IR_OP_INPUT && !in[i])
            return rt_fail(RT_ERR_INVALID, err, n, "run: input '%s' : %s not given", g->params[i]->name, m->types[i]);
    for (int i = 0; i < noutputs; i++) {
        int o = -1;
        for (int j = 0; outputs[i].name && j < g->noutputs; j++)
            if (!strcmp(g->outputs[j].name, outputs[i].name)) o = j;
        if (o < 0)
            return rt_fail(RT_ERR_NOT_FOUND, err, n, "run: model %s has no output '%s'", g->name,
                           outputs[i].name ? outputs[i].name : "(null)");
        if (out[o] || !outputs[i].ptr)
            return rt_fail(RT_ERR_INVALID, err, n, "run: output '%s' %s", outputs[i].name,
                           out[o] ? "given twice" : "has a NULL pointer");
        out[o] = outputs[i].ptr;
    }
    for (int j = 0; j < g->noutputs; j++)
        if (!out[j])
            return rt_fail(RT_ERR_INVALID, err, n, "run: output '%s' : %s not given", g->outputs[j].name,
                           m->types[g->nparams + j]);
    return RT_OK;
}

static bool not_bound(const rt_model *m, int param, const void *user)
{
    (void)user;
    return !m->weight_ptr[param] && !m->weight_released[param]; /* released: packed, in its file */
}

/* With a slot table every kernel that touches a state must map its rows
 * (a "slot" field, CG_ARG_SLOTS: cache writes and attention do): a kernel that
 * reads a state another way (a generic kernel over it) would read row b. */
static rt_status check_slot_kernels(const rt_model *m, const rt_variant *v, char *err, size_t n)
{
    const ir_graph *g = m->g;
    for (int k = 0; k < v->plan.nkernels; k++) {
        const cg_kernel *K = &v->plan.kernels[k];
        const char *state = NULL;
        bool slots = false;
        for (int i = 0; i < K->nargs; i++) {
            const cg_arg *a = &K->args[i];
            if (a->kind == CG_ARG_SLOTS) slots = true;
            else if (a->kind == CG_ARG_STATE) state = g->states[a->index].state->name;
            else if (a->kind == CG_ARG_PARAM && g->params[a->index]->op == IR_OP_STATE) state = g->params[a->index]->name;
        }
        if (state && !slots)
            return rt_fail(RT_ERR_INVALID, err, n,
                           "run with a slot table: kernel %s reads state %s by batch row (only cache writes and attention "
                           "map a state's rows through the table)",
                           K->name, state);
    }
    return RT_OK;
}

void rt_model_set_slots(rt_model *m, const int32_t *dev_slots) { m->slots = dev_slots; }
void rt_model_set_seqs(rt_model *m, const int32_t *dev_seqs) { m->seqs = dev_seqs; }

/* A kernel over packed sequences reads the table: it must be there. */
static rt_status check_seqs(const rt_model *m, const rt_variant *v, char *err, size_t n)
{
    for (int k = 0; k < v->plan.nkernels && !m->seqs; k++)
        for (int i = 0; i < v->plan.kernels[k].nargs; i++)
            if (v->plan.kernels[k].args[i].kind == CG_ARG_SEQS)
                return rt_fail(RT_ERR_INVALID, err, n,
                               "run of packed model %s without a sequence table (kiln_model_set_packed): kernel %s reads it",
                               m->g->name, v->plan.kernels[k].name);
    return RT_OK;
}
const int32_t *rt_model_slots(const rt_model *m) { return m->slots; }

static void count_graph_run(rt_model *m, const rt_variant *v, rt_graph_how how)
{
    switch (how) {
    case RT_GRAPH_REPLAYED: m->cnt.graph_replays++; m->cnt.launches += (uint64_t)v->launched; break;
    case RT_GRAPH_CAPTURED: m->cnt.graph_captures++; break;
    case RT_GRAPH_UPDATED: m->cnt.graph_updates++; break;
    case RT_GRAPH_EAGER_FULL: m->cnt.eager_fallbacks++; m->cnt.eager_runs++; break;
    case RT_GRAPH_EAGER_CAPTURING: m->cnt.eager_runs++; break;
    case RT_GRAPH_EAGER_CAPTURE_FAILED: m->cnt.eager_fallbacks++; m->cnt.eager_runs++; break;
    }
}

rt_status rt_model_run(rt_model *m, const int64_t *dims, const rt_tensor_ptr *inputs, int ninputs,
                       const rt_tensor_ptr *outputs, int noutputs, void *stream, char *err, size_t n)
{
    const ir_graph *g = m->g;
    rt_status st = RT_OK;
    if ((ninputs && !inputs) || (noutputs && !outputs) || ninputs < 0 || noutputs < 0)
        return rt_fail(RT_ERR_INVALID, err, n, "run: NULL inputs or outputs array");
    void **in = calloc((size_t)g->nparams + 1, sizeof *in), **out = calloc((size_t)g->noutputs + 1, sizeof *out);
    void **ptrs = calloc((size_t)(g->nparams + g->noutputs) + 3, sizeof *ptrs);
    int64_t key[IR_MAX_SYMS + 1];
    if (!in || !out || !ptrs) {
        st = rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        goto done;
    }
    if ((st = bind_tensors(m, inputs, ninputs, outputs, noutputs, in, out, err, n)) != RT_OK) goto done;
    char list[1024];
    int missing = rt_missing_weights(m, not_bound, NULL, list, sizeof list);
    if (missing) {
        st = rt_fail(RT_ERR_MISSING_WEIGHT, err, n, "run: %d weight%s of model %s not bound: %s", missing,
                     missing > 1 ? "s" : "", g->name, list);
        goto done;
    }
    if (m->nstate_params && !m->states_ready) {
        st = rt_fail(RT_ERR_STATE, err, n, "run: the states of model %s are not allocated: call kiln_model_alloc_states", g->name);
        goto done;
    }
    if ((st = check_state_dims(m, dims, err, n)) != RT_OK) goto done;
    if (!rt_model_use_device(m, "run", &st, err, n)) goto done;
    int vi;
    if ((st = rt_variant_pick(m, dims, &vi, err, n)) != RT_OK) goto done;
    rt_variant *v = m->vars[vi];
    if (m->slots && (st = check_slot_kernels(m, v, err, n)) != RT_OK) goto done;
    if ((st = check_seqs(m, v, err, n)) != RT_OK) goto done;
    if ((st = rt_variant_load(m, v, err, n)) != RT_OK) goto done;
    if ((st = rt_model_restore_weights(m, v, err, n)) != RT_OK) goto done;
    if ((st = rt_model_update_packs(m, err, n)) != RT_OK) goto done;
    if ((st = ensure_memory(m, v, dims, err, n)) != RT_OK) goto done;
    if (!stream) stream = m->ctx->stream;
    if (m->counters_dirty) { /* a failed run may have left counters part-way */
        if ((st = RT_CUDA_CHECK(cudaMemsetAsync(m->counters_dev, 0, m->counters_bytes, (cudaStream_t)stream),
                                "kernel counters after a failed run", err, n)) != RT_OK)
            goto done;
        m->counters_dirty = false;
    }
    run_ctx run = {m, v, dims, in, out, RT_OK};
    if ((st = prepare_lt(&run, err, n)) != RT_OK) goto done;
    m->cnt.runs++;
    if (m->no_graphs) {
        st = record_kernels(&run, stream, err, n);
        if (st == RT_OK) m->cnt.eager_runs++;
        goto done;
    }
    /* key: the variant and every dim (positions are in device memory, not dims) */
    key[0] = vi;
    for (int s = 0; s < g->nsyms; s++) key[1 + s] = dims[s];
    int nptrs = 0;
    for (int i = 0; i < g->nparams; i++)
        if (in[i]) ptrs[nptrs++] = in[i];
    for (int j = 0; j < g->noutputs; j++) ptrs[nptrs++] = out[j];
    ptrs[nptrs++] = (void *)m->slots; /* a new table (or none) re-records the launches that read it */
    ptrs[nptrs++] = (void *)m->seqs;
    rt_graph_how how;
    char graph_err[1024];
    if (rt_graph_run(m->graphs, key, 1 + g->nsyms, (const void *const *)ptrs, nptrs, stream, record, &run, &how, graph_err,
                     sizeof graph_err) != 0) {
        st = run.status != RT_OK ? run.status : RT_ERR_CUDA;
        rt_fail(st, err, n, "run of model %s: %s", g->name, graph_err);
        goto done;
    }
    count_graph_run(m, v, how);
done:
    if (st != RT_OK) m->counters_dirty = true;
    free(in);
    free(out);
    free(ptrs);
    return st;
}

rt_status rt_model_sync(rt_model *m, char *err, size_t n)
{
    rt_status st;
    if (!rt_model_use_device(m, "sync", &st, err, n)) return st;
    char who[256];
    snprintf(who, sizeof who, "model %s", m->g->name);
    return RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), who, err, n);
}

void rt_model_get_counters(const rt_model *m, rt_model_counters *c) { *c = m->cnt; }
