/* runtime/rt_model.c — a model made from a plan: creation, its description,
 * its parameters and dims (rt_model.h). Variants are in rt_variant.c,
 * weights, packing and states in rt_bind.c, runs in rt_run.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_model_internal.h"

void rt_add_line(char *err, size_t n, const char *fmt, ...)
{
    if (!err || !n) return;
    size_t len = strlen(err);
    if (len + 1 >= n) return;
    if (len) err[len++] = '\n', err[len] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + len, n - len, fmt, ap);
    va_end(ap);
}

const ir_graph *rt_model_graph(const rt_model *m) { return m ? m->g : NULL; }
const int64_t *rt_model_max_dims(const rt_model *m) { return m ? m->maxd : NULL; }
int rt_model_num_kernels(const rt_model *m) { return m && m->nvars ? m->vars[0]->plan.nkernels : 0; }
const cg_kernel *rt_model_kernel(const rt_model *m, int i)
{
    return i >= 0 && i < rt_model_num_kernels(m) ? &m->vars[0]->plan.kernels[i] : NULL;
}

const char *rt_model_type_text(const rt_model *m, int i)
{
    return m && i >= 0 && i < m->g->nparams + m->g->noutputs ? m->types[i] : NULL;
}

rt_status rt_model_create(rt_ctx *ctx, rt_plan *plan, const rt_model_config *cfg, rt_model **out, char *err, size_t n)
{
    *out = NULL;
    rt_model_config def = {0};
    if (!cfg) cfg = &def;
    if (!ctx || !plan || !plan->graph || plan->nvariants < 1 || plan->variants[0].exact) {
        rt_plan_free(plan);
        return rt_fail(RT_ERR_INVALID, err, n, "rt_model_create: no context, or a plan without its large-shape variant");
    }
    rt_model *m = calloc(1, sizeof *m);
    if (!m) {
        rt_plan_free(plan);
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    arena_init(&m->a);
    m->ctx = ctx;
    m->plan = *plan;
    memset(plan, 0, sizeof *plan);
    m->g = m->plan.graph;
    m->maxd = m->plan.max_dims;
    m->cnt.codegen_runs = (uint64_t)m->plan.codegen_runs;
    m->pack_source = m->plan.pack_source;
    m->no_graphs = cfg->no_graphs;
    m->lazy = cfg->lazy;
    m->decode_max_rows = cfg->decode_max_rows == 0 ? 32 : cfg->decode_max_rows;
    m->progress = cfg->progress;
    m->progress_user = cfg->progress_user;
    {   /* griddepcontrol is in kernels compiled for sm_90 and later */
        const char *arch = ctx->arch;
        int num = strncmp(arch, "sm_", 3) == 0 ? atoi(arch + 3) : 0;
        m->pdl = !cfg->no_pdl && num >= 90;
    }
    const ir_graph *g = m->g;
    int np = g->nparams;
    rt_status st = RT_OK;
    m->weight_ptr = calloc((size_t)np + 1, sizeof *m->weight_ptr);
    m->weight_owned = calloc((size_t)np + 1, sizeof *m->weight_owned);
    m->weight_src = calloc((size_t)np + 1, sizeof *m->weight_src);
    m->weight_released = calloc((size_t)np + 1, sizeof *m->weight_released);
    m->state_ptr = calloc((size_t)np + 1, sizeof *m->state_ptr);
    m->state_bytes = calloc((size_t)np + 1, sizeof *m->state_bytes);
    m->types = calloc((size_t)(np + g->noutputs) + 1, sizeof *m->types);
    m->graphs = rt_graph_cache_new(cfg->max_graphs > 0 ? cfg->max_graphs : 16);
    if (!m->weight_ptr || !m->weight_owned || !m->weight_src || !m->weight_released || !m->state_ptr || !m->state_bytes || !m->types || !m->graphs) {
        st = rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        goto out;
    }
    for (int i = 0; i < np + g->noutputs; i++) {
        const ir_type *t = i < np ? &g->params[i]->type : &g->outputs[i - np].value->type;
        char tb[256];
        ir_type_print(t, g->syms, tb, sizeof tb);
        m->types[i] = arena_strdup(&m->a, tb);
        if (i < np && g->params[i]->op == IR_OP_STATE) m->nstate_params++;
    }
    /* the variants planned up front; the plan keeps none of them */
    for (int i = 0; i < m->plan.nvariants && st == RT_OK; i++) {
        if (m->nvars > RT_MAX_VARIANTS) {
            rt_variant_plan_free(&m->plan.variants[i]);
            continue;
        }
        rt_variant *v;
        st = rt_variant_adopt(m, &m->plan.variants[i], &v, err, n);
        if (st == RT_OK) m->vars[m->nvars++] = v;
    }
    free(m->plan.variants);
    m->plan.variants = NULL;
    m->plan.nvariants = 0;
    if (st == RT_OK && !m->lazy) {
        st = rt_variant_compile(m, m->vars[0], err, n);
        if (st == RT_OK && ctx->has_device) st = rt_variant_load(m, m->vars[0], err, n);
    }
out:
    if (st != RT_OK) {
        rt_model_free(m);
        return st;
    }
    *out = m;
    return RT_OK;
}

void rt_model_free(rt_model *m)
{
    if (!m) return;
    if (m->ctx && m->ctx->has_device) {
        (void)cudaSetDevice(m->ctx->device);
        if (m->ctx->stream) (void)cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
    }
    rt_graph_cache_free(m->graphs);
    for (int i = 0; i < m->nvars; i++) rt_variant_free(m->vars[i]);
    /* any of these arrays may be missing when rt_model_create ran out of memory */
    if (m->g)
        for (int i = 0; i < m->g->nparams; i++) {
            if (m->weight_ptr && m->weight_owned && m->weight_owned[i] && m->weight_ptr[i]) (void)cudaFree(m->weight_ptr[i]);
            if (m->state_ptr && m->state_ptr[i] && !m->states_borrowed) (void)cudaFree(m->state_ptr[i]);
            if (m->weight_src) free(m->weight_src[i]);
        }
    for (int i = 0; i < m->npacked; i++)
        if (m->packed[i].dev) (void)cudaFree(m->packed[i].dev);
    rt_module_free(m->pack_mod);
    if (m->arena_dev) (void)cudaFree(m->arena_dev);
    if (m->scratch_dev) (void)cudaFree(m->scratch_dev);
    if (m->counters_dev) (void)cudaFree(m->counters_dev);
    free(m->packed);
    free(m->weight_ptr);
    free(m->weight_owned);
    free(m->weight_src);
    free(m->weight_released);
    free(m->state_ptr);
    free(m->state_bytes);
    free(m->types);
    rt_plan_free(&m->plan);
    arena_free(&m->a);
    free(m);
}

int rt_model_find_param(const rt_model *m, const char *name)
{
    for (int i = 0; i < m->g->nparams; i++)
        if (m->g->params[i]->name && !strcmp(m->g->params[i]->name, name)) return i;
    return -1;
}

const char *rt_param_kind_word(const ir_node *p)
{
    return p->op == IR_OP_INPUT ? "an input" : p->op == IR_OP_STATE ? "a state" : "a weight";
}

void rt_model_describe_param(const rt_model *m, int param, char *buf, size_t n)
{
    const ir_node *p = m->g->params[param];
    /* the model's path, not p->loc.file: after rewriting passes a node's
     * loc.file may point into the arena of a graph already freed */
    snprintf(buf, n, "%s : %s (%s:%d)", p->name, m->types[param], m->plan.name ? m->plan.name : m->g->name,
             p->loc.line);
}

int rt_model_param_bytes(const rt_model *m, int param, int64_t *shape, size_t *bytes)
{
    const ir_node *p = m->g->params[param];
    int64_t numel;
    if (!ir_type_shape_at(&p->type, m->maxd, shape, &numel)) return -1;
    *bytes = (size_t)numel * (size_t)ir_dtype_size(p->type.dtype);
    return 0;
}

rt_status rt_model_resolve_dims(const rt_model *m, const rt_dim_value *dims, int ndims, bool fill_max, int64_t *out,
                          char *err, size_t n)
{
    const ir_graph *g = m->g;
    bool given[IR_MAX_SYMS] = {false};
    for (int i = 0; i < g->nsyms; i++) out[i] = fill_max ? m->maxd[i] : -1;
    if (ndims > 0 && !dims) return rt_fail(RT_ERR_INVALID, err, n, "dims: NULL array with %d entries", ndims);
    for (int i = 0; i < ndims; i++) {
        if (!dims[i].name) return rt_fail(RT_ERR_INVALID, err, n, "dims: entry %d has no name", i);
        int s = ir_graph_find_sym(g, dims[i].name);
        if (s < 0) {
            char list[256] = "";
            for (int j = 0; j < g->nsyms; j++) rt_add_line(list, sizeof list, "%s", g->syms[j]);
            for (char *c = list; *c; c++)
                if (*c == '\n') *c = ' ';
            return rt_fail(RT_ERR_NOT_FOUND, err, n, "dims: model %s has no dim '%s' (its dims: %s)", g->name,
                           dims[i].name, g->nsyms ? list : "none");
        }
        if (given[s]) return rt_fail(RT_ERR_INVALID, err, n, "dims: '%s' given twice", dims[i].name);
        given[s] = true;
        if (dims[i].value < 1 || dims[i].value > m->maxd[s])
            return rt_fail(RT_ERR_INVALID, err, n, "dims: %s=%lld is outside 1..%lld (its max, set when compiling)",
                           dims[i].name, (long long)dims[i].value, (long long)m->maxd[s]);
        out[s] = dims[i].value;
    }
    for (int s = 0; s < g->nsyms; s++)
        if (out[s] < 0) return rt_fail(RT_ERR_INVALID, err, n, "dims: no value for '%s'", g->syms[s]);
    return RT_OK;
}

char *rt_model_describe(const rt_model *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    fprintf(f, "model %s (max dims", m->g->name);
    for (int i = 0; i < m->g->nsyms; i++) fprintf(f, " %s=%lld", m->g->syms[i], (long long)m->maxd[i]);
    fprintf(f, ")\n");
    if (m->plan.text) fputs(m->plan.text, f);
    for (int i = 0; i < m->nvars; i++) {
        const rt_variant *v = m->vars[i];
        const rt_variant_plan *vp = &v->plan;
        fprintf(f, "variant %d: %s", i, vp->exact ? "small-shape for" : "large-shape");
        for (int s = 0; vp->exact && s < m->g->nsyms; s++) fprintf(f, " %s=%lld", m->g->syms[s], (long long)vp->dims[s]);
        fprintf(f, "%s\n", v->loaded ? " (loaded)" : v->compiled ? " (compiled)" : "");
        for (int k = 0; k < vp->nkernels; k++) {
            const cg_kernel *K = &vp->kernels[k];
            char label[128];
            fprintf(f, "  %-40s %s%s%s%s\n", K->name, cg_kernel_label(K, label, sizeof label),
                    K->fallback && !K->lt.chosen ? ", mma.sync fallback" : "", K->note ? "  " : "", K->note ? K->note : "");
        }
    }
    fclose(f);
    return buf;
}
