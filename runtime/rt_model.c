/* runtime/rt_model.c — compile a model, bind its weights, run it (rt_model.h).
 *
 * Ownership: a model owns its graph, memory plan, shape variants (emitted
 * kernels, loaded modules), device memory (the intermediates arena, the
 * workspace scratch, states, packed weights, weights loaded from files) and
 * its CUDA graphs. Every path frees what it allocated; every CUDA call is
 * checked and its failure comes back as a status and a message naming the
 * call and, for launches, the kernel. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_model.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "frontend/frontend.h"
#include "passes/pass.h"
#include "runtime/rt_cache.h"
#include "runtime/rt_err.h"
#include "runtime/rt_graph.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_pack.h"
#include "runtime/rt_weights.h"

#define ALIGN 256
#define ALIGN_UP(x) (((x) + (ALIGN - 1)) & ~(size_t)(ALIGN - 1))

/* Append a line to err (several problems in one message). */
__attribute__((format(printf, 3, 4))) static void add_line(char *err, size_t n, const char *fmt, ...)
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

static bool no_device_error(cudaError_t e)
{
    return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInitializationError ||
           e == cudaErrorDevicesUnavailable || e == cudaErrorSystemDriverMismatch || e == cudaErrorStubLibrary ||
           e == cudaErrorCompatNotSupportedOnDevice;
}

static int cuda_status(cudaError_t e)
{
    if (e == cudaErrorMemoryAllocation) return RTM_ERR_NOMEM;
    return no_device_error(e) ? RTM_ERR_NO_DEVICE : RTM_ERR_CUDA;
}

#define CUDA_TRY(call, what, ...)                                                                               \
    do {                                                                                                        \
        cudaError_t e_ = (call);                                                                                \
        if (e_ != cudaSuccess) {                                                                                \
            (void)cudaGetLastError();                                                                           \
            char w_[256];                                                                                       \
            snprintf(w_, sizeof w_, what, __VA_ARGS__);                                                         \
            return rt_fail(cuda_status(e_), err, n, "%s: %s (%s)", w_, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
        }                                                                                                       \
    } while (0)

static int lstatus(rt_lstatus s)
{
    switch (s) {
    case RT_LAUNCH_OK: return RTM_OK;
    case RT_LAUNCH_ERR_NOMEM: return RTM_ERR_NOMEM;
    case RT_LAUNCH_ERR_NO_DEVICE: return RTM_ERR_NO_DEVICE;
    case RT_LAUNCH_ERR_INVALID:
    case RT_LAUNCH_ERR_NOT_FOUND: return RTM_ERR_INTERNAL;
    default: return RTM_ERR_CUDA;
    }
}

/* ---- context ------------------------------------------------------------------------ */

struct rt_ctx {
    int device;
    bool has_device, own_stream;
    void *stream;
    char arch[32];
    rt_cache *cache;
    bool no_cache;
    int compile_threads;
};

static void quiet_warn(void *user, const char *msg)
{
    (void)user;
    (void)msg;
}

int rt_ctx_create(rt_ctx **out, const rt_ctx_config *cfg, char *err, size_t n)
{
    *out = NULL;
    rt_ctx_config def;
    memset(&def, 0, sizeof def);
    if (!cfg) cfg = &def;
    if (cfg->arch && !rt_nvrtc_arch_valid(cfg->arch))
        return rt_fail(RTM_ERR_INVALID, err, n, "arch \"%s\" is not a GPU architecture name like sm_90a", cfg->arch);
    if (cfg->device < 0) return rt_fail(RTM_ERR_INVALID, err, n, "device ordinal %d is negative", cfg->device);
    rt_ctx *c = calloc(1, sizeof *c);
    if (!c) return rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
    c->device = cfg->device;
    c->no_cache = cfg->no_cache;
    c->compile_threads = cfg->compile_threads;
    snprintf(c->arch, sizeof c->arch, "%s", cfg->arch ? cfg->arch : RT_DEFAULT_ARCH);
    int st = RTM_OK;
    if (!cfg->compile_only) {
        char why[512];
        if (!rt_device_available(why, sizeof why)) {
            st = rt_fail(RTM_ERR_NO_DEVICE, err, n, "%s (a context with compile_only set can still compile models)", why);
            goto bad;
        }
        int count = 0;
        cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess || cfg->device >= count) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "device %d does not exist (%d CUDA devices)", cfg->device, count);
            goto bad;
        }
        e = cudaSetDevice(cfg->device);
        if (e != cudaSuccess) {
            st = rt_fail(cuda_status(e), err, n, "cudaSetDevice(%d): %s", cfg->device, cudaGetErrorString(e));
            goto bad;
        }
        if (!cfg->arch) {
            int major = 0, minor = 0;
            if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cfg->device) != cudaSuccess ||
                cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cfg->device) != cudaSuccess) {
                st = rt_fail(RTM_ERR_CUDA, err, n, "cannot read the compute capability of device %d", cfg->device);
                goto bad;
            }
            /* sm_90 -> sm_90a: Kiln's Hopper kernels use the arch-specific features */
            snprintf(c->arch, sizeof c->arch, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
        }
        c->has_device = true;
        if (cfg->stream) {
            c->stream = cfg->stream;
        } else {
            cudaStream_t s = NULL;
            e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
            if (e != cudaSuccess) {
                st = rt_fail(cuda_status(e), err, n, "cudaStreamCreateWithFlags: %s", cudaGetErrorString(e));
                goto bad;
            }
            c->stream = s;
            c->own_stream = true;
        }
    }
    if (!cfg->no_cache) {
        rt_cache_config cc = {.dir = cfg->cache_dir, .no_disk = cfg->no_disk_cache, .warn = quiet_warn};
        if (rt_cache_open(&c->cache, &cc) != RT_OK) {
            st = rt_fail(RTM_ERR_NOMEM, err, n, "cannot open the kernel cache");
            goto bad;
        }
    }
    *out = c;
    return RTM_OK;
bad:
    rt_ctx_free(c);
    return st;
}

void rt_ctx_free(rt_ctx *c)
{
    if (!c) return;
    if (c->own_stream && c->stream) {
        (void)cudaSetDevice(c->device);
        (void)cudaStreamSynchronize((cudaStream_t)c->stream);
        (void)cudaStreamDestroy((cudaStream_t)c->stream);
    }
    rt_cache_close(c->cache);
    free(c);
}

const char *rt_ctx_arch(const rt_ctx *c) { return c ? c->arch : NULL; }
bool rt_ctx_has_device(const rt_ctx *c) { return c && c->has_device; }

/* ---- model ------------------------------------------------------------------------------ */

typedef struct rt_kvar {
    bool small;
    int64_t dims[IR_MAX_SYMS]; /* small: the dims it was generated for */
    cg_kernel *ks;
    int nk;
    rt_blob *cubins;           /* until loaded */
    rt_module **mods;
    rt_kernel *kern;
    bool compiled, loaded;
} rt_kvar;

typedef struct rt_product {
    int node;
    int64_t half; /* > 0: rows interleaved (CG_XFORM_INTERLEAVE_ROWS) */
    void *dev;
    size_t bytes;
    bool valid;
} rt_product;

struct rt_model {
    rt_ctx *ctx;
    arena a;
    ir_graph *g;
    char *name;
    int64_t maxd[IR_MAX_SYMS];
    pass_memplan mp;
    int64_t *node_off; /* per node: offset in the arena, -1 = none */
    size_t arena_need, arena_bytes, scratch_bytes;
    void *arena_dev, *scratch_dev;
    void **wptr;       /* per param: weights: the bound device pointer */
    bool *wowned;
    void **sptr;       /* per param: states: the device buffer */
    size_t *sbytes;
    bool states_ready;
    int nstate_params;
    rt_product *prods;
    int nprods, capprods;
    rt_kvar *vars[RT_MAX_VARIANTS + 1];
    int nvars;
    rt_graph_cache *graphs;
    bool no_graphs, lazy;
    int decode_max_rows;
    rt_model_counters cnt;
    const char **types; /* per param, then per output: declared type text */
};

const ir_graph *rt_model_graph(const rt_model *m) { return m ? m->g : NULL; }
const int64_t *rt_model_max_dims(const rt_model *m) { return m ? m->maxd : NULL; }
int rt_model_num_kernels(const rt_model *m) { return m && m->nvars ? m->vars[0]->nk : 0; }

const char *rt_model_type_text(const rt_model *m, int i)
{
    return m && i >= 0 && i < m->g->nparams + m->g->noutputs ? m->types[i] : NULL;
}

static void var_free(rt_kvar *v)
{
    if (!v) return;
    if (v->cubins)
        for (int i = 0; i < v->nk; i++) rt_blob_free(&v->cubins[i]);
    free(v->cubins);
    if (v->mods)
        for (int i = 0; i < v->nk; i++) rt_module_free(v->mods[i]);
    free(v->mods);
    free(v->kern);
    cg_kernels_free(v->ks, v->nk);
    free(v);
}

static bool use_device(const rt_model *m, const char *what, int *st, char *err, size_t n)
{
    if (!m->ctx->has_device) {
        *st = rt_fail(RTM_ERR_NO_DEVICE, err, n, "%s: no CUDA device (the context was created compile_only)", what);
        return false;
    }
    cudaError_t e = cudaSetDevice(m->ctx->device);
    if (e != cudaSuccess) {
        *st = rt_fail(cuda_status(e), err, n, "%s: cudaSetDevice(%d): %s", what, m->ctx->device, cudaGetErrorString(e));
        return false;
    }
    return true;
}

void rt_model_free(rt_model *m)
{
    if (!m) return;
    if (m->ctx && m->ctx->has_device) {
        (void)cudaSetDevice(m->ctx->device);
        if (m->ctx->stream) (void)cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
    }
    rt_graph_cache_free(m->graphs);
    for (int i = 0; i < m->nvars; i++) var_free(m->vars[i]);
    if (m->g && m->wptr)
        for (int i = 0; i < m->g->nparams; i++) {
            if (m->wowned[i] && m->wptr[i]) (void)cudaFree(m->wptr[i]);
            if (m->sptr[i]) (void)cudaFree(m->sptr[i]);
        }
    for (int i = 0; i < m->nprods; i++)
        if (m->prods[i].dev) (void)cudaFree(m->prods[i].dev);
    if (m->arena_dev) (void)cudaFree(m->arena_dev);
    if (m->scratch_dev) (void)cudaFree(m->scratch_dev);
    free(m->prods);
    free(m->wptr);
    free(m->wowned);
    free(m->sptr);
    free(m->sbytes);
    free(m->node_off);
    free(m->types);
    pass_memplan_free(&m->mp);
    if (m->g) ir_graph_free(m->g);
    free(m->name);
    arena_free(&m->a);
    free(m);
}

int rt_model_find_param(const rt_model *m, const char *name)
{
    for (int i = 0; i < m->g->nparams; i++)
        if (m->g->params[i]->name && !strcmp(m->g->params[i]->name, name)) return i;
    return -1;
}

static const char *kind_word(const ir_node *p)
{
    return p->op == IR_OP_INPUT ? "an input" : p->op == IR_OP_STATE ? "a state" : "a weight";
}

/* "wq : bf16[2048, 2048] (llama.kiln:21)" */
static void describe_decl(const rt_model *m, int param, char *buf, size_t n)
{
    const ir_node *p = m->g->params[param];
    /* the model's path, not p->loc.file: after rewriting passes a node's
     * loc.file may point into the arena of a graph already freed */
    snprintf(buf, n, "%s : %s (%s:%d)", p->name, m->types[param], m->name, p->loc.line);
}

/* A text rendering of diagnostics (with source lines and carets). */
static void render_diags(const diag_list *d, const char *source, char *err, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        snprintf(err, n, "%s", d->count ? d->items[0].msg : "error");
        return;
    }
    diag_print(d, f, source);
    fclose(f);
    while (len && buf[len - 1] == '\n') buf[--len] = 0;
    snprintf(err, n, "%s", buf ? buf : "");
    free(buf);
}

int rt_model_resolve_dims(const rt_model *m, const rt_dim_value *dims, int ndims, bool fill_max, int64_t *out,
                          char *err, size_t n)
{
    const ir_graph *g = m->g;
    bool given[IR_MAX_SYMS] = {false};
    for (int i = 0; i < g->nsyms; i++) out[i] = fill_max ? m->maxd[i] : -1;
    if (ndims > 0 && !dims) return rt_fail(RTM_ERR_INVALID, err, n, "dims: NULL array with %d entries", ndims);
    for (int i = 0; i < ndims; i++) {
        if (!dims[i].name) return rt_fail(RTM_ERR_INVALID, err, n, "dims: entry %d has no name", i);
        int s = ir_graph_find_sym(g, dims[i].name);
        if (s < 0) {
            char list[256] = "";
            for (int j = 0; j < g->nsyms; j++) add_line(list, sizeof list, "%s", g->syms[j]);
            for (char *c = list; *c; c++)
                if (*c == '\n') *c = ' ';
            return rt_fail(RTM_ERR_NOT_FOUND, err, n, "dims: model %s has no dim '%s' (its dims: %s)", g->name,
                           dims[i].name, g->nsyms ? list : "none");
        }
        if (given[s]) return rt_fail(RTM_ERR_INVALID, err, n, "dims: '%s' given twice", dims[i].name);
        given[s] = true;
        if (dims[i].value < 1 || dims[i].value > m->maxd[s])
            return rt_fail(RTM_ERR_INVALID, err, n, "dims: %s=%lld is outside 1..%lld (its max, set when compiling)",
                           dims[i].name, (long long)dims[i].value, (long long)m->maxd[s]);
        out[s] = dims[i].value;
    }
    for (int s = 0; s < g->nsyms; s++)
        if (out[s] < 0) return rt_fail(RTM_ERR_INVALID, err, n, "dims: no value for '%s'", g->syms[s]);
    return RTM_OK;
}

/* ---- shape variants ---------------------------------------------------------------------- */

/* Reserve arena space for intermediates the plan did not place (values a
 * kernel stores that no later kernel reads). */
static int reserve_unplanned(rt_model *m, const rt_kvar *v, char *err, size_t n)
{
    for (int k = 0; k < v->nk; k++)
        for (int i = 0; i < v->ks[k].nargs; i++) {
            const cg_arg *a = &v->ks[k].args[i];
            if (a->kind != CG_ARG_INTERMEDIATE || a->node < 0 || a->node >= m->g->nnodes) continue;
            if (m->node_off[a->node] >= 0) continue;
            ir_dim b = pass_bytes(&m->g->nodes[a->node]->type);
            int64_t bytes;
            if (!ir_dim_is_const(&b, &bytes) && !ir_dim_eval(&b, m->maxd, &bytes))
                return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: the size of %%%d does not evaluate", v->ks[k].name, a->node);
            m->node_off[a->node] = (int64_t)m->arena_need;
            m->arena_need += ALIGN_UP((size_t)bytes);
        }
    return RTM_OK;
}

static int var_compile(rt_model *m, rt_kvar *v, char *err, size_t n)
{
    if (v->compiled) return RTM_OK;
    int nk = v->nk;
    const char **names = calloc((size_t)nk + 1, sizeof *names), **srcs = calloc((size_t)nk + 1, sizeof *srcs);
    rt_compile_result *res = calloc((size_t)nk + 1, sizeof *res);
    rt_cache_lookup *how = calloc((size_t)nk + 1, sizeof *how);
    v->cubins = calloc((size_t)nk + 1, sizeof *v->cubins);
    int st = RTM_OK;
    if (!names || !srcs || !res || !how || !v->cubins) {
        st = rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
        goto out;
    }
    for (int i = 0; i < nk; i++) {
        names[i] = v->ks[i].name;
        srcs[i] = v->ks[i].source;
    }
    rt_compile_opts co = {.arch = m->ctx->arch};
    rt_status rs = rt_cache_compile_many(m->ctx->cache, nk, names, srcs, &co, m->ctx->no_cache ? RT_CACHE_NO_CACHE : 0,
                                         res, how, m->ctx->compile_threads, NULL, NULL);
    for (int i = 0; i < nk; i++) {
        if (res[i].status != RT_OK) continue;
        if (how[i] == RT_CACHE_HIT_MEMORY) m->cnt.cache_hits_memory++;
        else if (how[i] == RT_CACHE_HIT_DISK) m->cnt.cache_hits_disk++;
        else m->cnt.kernels_compiled++;
    }
    if (rs != RT_OK) {
        for (int i = 0; i < nk; i++)
            if (res[i].status != RT_OK) {
                st = rt_fail(res[i].status == RT_ERR_NOMEM ? RTM_ERR_NOMEM : RTM_ERR_CODEGEN, err, n,
                             "NVRTC failed for kernel %s (%s, group k%d): %s", v->ks[i].name,
                             cg_family_name(v->ks[i].family), v->ks[i].group,
                             res[i].message ? res[i].message : rt_status_str(res[i].status));
                break;
            }
        if (st == RTM_OK) st = rt_fail(RTM_ERR_CODEGEN, err, n, "NVRTC: %s", rt_status_str(rs));
        goto out;
    }
    for (int i = 0; i < nk; i++) {
        v->cubins[i] = res[i].code;
        memset(&res[i].code, 0, sizeof res[i].code);
    }
    v->compiled = true;
out:
    if (res)
        for (int i = 0; i < nk; i++) rt_compile_result_free(&res[i]);
    free(res);
    free(how);
    free(names);
    free(srcs);
    return st;
}

static int var_load(rt_model *m, rt_kvar *v, char *err, size_t n)
{
    if (v->loaded) return RTM_OK;
    int st = var_compile(m, v, err, n);
    if (st != RTM_OK) return st;
    if (!use_device(m, "loading kernels", &st, err, n)) return st;
    v->mods = calloc((size_t)v->nk + 1, sizeof *v->mods);
    v->kern = calloc((size_t)v->nk + 1, sizeof *v->kern);
    if (!v->mods || !v->kern) return rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
    char le[512];
    for (int i = 0; i < v->nk; i++) {
        const cg_kernel *k = &v->ks[i];
        rt_lstatus ls = rt_module_load(&v->mods[i], v->cubins[i].data, v->cubins[i].size, le, sizeof le);
        if (ls == RT_LAUNCH_OK) ls = rt_module_kernel(v->mods[i], k->name, &v->kern[i], le, sizeof le);
        if (ls == RT_LAUNCH_OK && v->kern[i].param_size != k->args_size) {
            return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: KilnArgs is %zu bytes on the host but %zu in the cubin",
                           k->name, k->args_size, v->kern[i].param_size);
        }
        if (ls == RT_LAUNCH_OK && k->launch.smem > 48 * 1024)
            ls = rt_kernel_set_max_smem(&v->kern[i], (size_t)k->launch.smem, le, sizeof le);
        if (ls != RT_LAUNCH_OK) return rt_fail(lstatus(ls), err, n, "loading kernel %s: %s", k->name, le);
    }
    for (int i = 0; i < v->nk; i++) rt_blob_free(&v->cubins[i]);
    v->loaded = true;
    return RTM_OK;
}

/* The product (bind-time value) a kernel argument reads, registering it. */
static rt_product *product_for(rt_model *m, int node, int64_t half, bool create)
{
    for (int i = 0; i < m->nprods; i++)
        if (m->prods[i].node == node && m->prods[i].half == half) return &m->prods[i];
    if (!create) return NULL;
    if (m->nprods == m->capprods) {
        int cap = m->capprods ? 2 * m->capprods : 8;
        rt_product *np = realloc(m->prods, (size_t)cap * sizeof *np);
        if (!np) return NULL;
        m->prods = np;
        m->capprods = cap;
    }
    rt_product *p = &m->prods[m->nprods++];
    memset(p, 0, sizeof *p);
    p->node = node;
    p->half = half;
    return p;
}

/* The interleave half a kernel applies to node (0 = none). */
static int64_t xform_half(const rt_model *m, const cg_kernel *k, int node)
{
    for (int i = 0; i < k->nxforms; i++)
        if (k->xforms[i].node == node && k->xforms[i].kind == CG_XFORM_INTERLEAVE_ROWS) {
            int64_t h;
            if (ir_dim_is_const(&k->xforms[i].half, &h) || ir_dim_eval(&k->xforms[i].half, m->maxd, &h)) return h;
        }
    return 0;
}

static int var_new(rt_model *m, bool small, const int64_t *dims, rt_kvar **out, char *err, size_t n)
{
    *out = NULL;
    rt_kvar *v = calloc(1, sizeof *v);
    if (!v) return rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
    v->small = small;
    if (small) memcpy(v->dims, dims, (size_t)m->g->nsyms * sizeof *dims);
    cg_options o = {.dims = small ? v->dims : NULL};
    char ce[2048];
    if (cg_emit_all_ex(m->g, &o, &v->ks, &v->nk, ce, sizeof ce) != 0) {
        free(v);
        return rt_fail(RTM_ERR_CODEGEN, err, n, "codegen (%s variant) of model %s: %s", small ? "small-shape" : "large-shape",
                       m->g->name, ce);
    }
    int st = reserve_unplanned(m, v, err, n);
    /* register the packed values its kernels read */
    for (int k = 0; k < v->nk && st == RTM_OK; k++)
        for (int i = 0; i < v->ks[k].nargs; i++) {
            const cg_arg *a = &v->ks[k].args[i];
            int64_t half = a->node >= 0 ? xform_half(m, &v->ks[k], a->node) : 0;
            bool need = a->kind == CG_ARG_PACKED || (a->kind == CG_ARG_PARAM && half > 0);
            if (!need) continue;
            rt_product *p = product_for(m, a->node, half, true);
            if (!p) st = rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
        }
    if (st != RTM_OK) {
        var_free(v);
        return st;
    }
    m->cnt.variants++;
    *out = v;
    return RTM_OK;
}

/* Rows of the run: the largest product of an input's leading dims. */
static int64_t run_rows(const rt_model *m, const int64_t *dims)
{
    int64_t rows = 1;
    for (int i = 0; i < m->g->nparams; i++) {
        const ir_node *p = m->g->params[i];
        if (p->op != IR_OP_INPUT || p->type.rank < 2) continue;
        int64_t shape[IR_MAX_RANK], numel;
        if (!rt_type_shape(&p->type, dims, shape, &numel)) continue;
        int64_t r = shape[p->type.rank - 1] ? numel / shape[p->type.rank - 1] : 0;
        if (r > rows) rows = r;
    }
    return rows;
}

/* The variant a run with these dims uses (created on first use). */
static int pick_variant(rt_model *m, const int64_t *dims, int *index, char *err, size_t n)
{
    *index = 0;
    if (m->decode_max_rows < 0 || run_rows(m, dims) > m->decode_max_rows) return RTM_OK;
    for (int i = 1; i < m->nvars; i++)
        if (!memcmp(m->vars[i]->dims, dims, (size_t)m->g->nsyms * sizeof *dims)) {
            *index = i;
            return RTM_OK;
        }
    if (m->nvars > RT_MAX_VARIANTS) return RTM_OK; /* full: the large-shape variant serves any dims */
    rt_kvar *v;
    int st = var_new(m, true, dims, &v, err, n);
    if (st != RTM_OK) return st;
    m->vars[m->nvars] = v;
    *index = m->nvars++;
    return RTM_OK;
}

/* ---- compile ------------------------------------------------------------------------------- */

int rt_model_compile(rt_ctx *ctx, const char *name, const char *text, const rt_model_config *cfg, rt_model **out,
                     char *err, size_t n)
{
    *out = NULL;
    if (!ctx || !name || !cfg) return rt_fail(RTM_ERR_INVALID, err, n, "rt_model_compile: NULL argument");
    rt_model *m = calloc(1, sizeof *m);
    if (!m) return rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
    arena_init(&m->a);
    m->ctx = ctx;
    m->no_graphs = cfg->no_graphs;
    m->lazy = cfg->lazy;
    m->decode_max_rows = cfg->decode_max_rows == 0 ? 32 : cfg->decode_max_rows;
    m->name = strdup(name);
    int st = RTM_OK;
    arena da;
    arena_init(&da);
    diag_list d;
    diag_list_init(&d, &da);
    fe_source src;
    memset(&src, 0, sizeof src);
    fe_define *defs = NULL;
    if (!m->name) {
        st = rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
        goto out;
    }
    if (text ? fe_source_from_string(&src, name, text) != 0 : fe_source_read(&src, name, &d) != 0) {
        if (d.count) render_diags(&d, NULL, err, n);
        else rt_fail(0, err, n, "%s: cannot read the model", name);
        st = text ? RTM_ERR_NOMEM : RTM_ERR_IO;
        goto out;
    }
    defs = calloc((size_t)cfg->ndefines + 1, sizeof *defs);
    if (!defs) {
        st = rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
        goto out;
    }
    for (int i = 0; i < cfg->ndefines; i++) {
        if (!cfg->define_names[i] || !cfg->define_values[i]) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "define %d: NULL name or value", i);
            goto out;
        }
        defs[i].name = cfg->define_names[i];
        defs[i].value = cfg->define_values[i];
    }
    fe_options fo = {defs, cfg->ndefines};
    m->g = fe_compile(&src, &fo, &d);
    if (!m->g) {
        render_diags(&d, src.text, err, n);
        st = RTM_ERR_MODEL;
        goto out;
    }
    diag_list_clear(&d);
    /* max dims */
    for (int i = 0; i < cfg->nmax_dims; i++) {
        const rt_dim_value *dv = &cfg->max_dims[i];
        if (!dv->name) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "max dims: entry %d has no name", i);
            goto out;
        }
        int s = ir_graph_find_sym(m->g, dv->name);
        if (s < 0) {
            bool defined = false;
            for (int j = 0; j < cfg->ndefines; j++) defined |= !strcmp(cfg->define_names[j], dv->name);
            if (defined) continue; /* fixed by a define: nothing to size */
            st = rt_fail(RTM_ERR_NOT_FOUND, err, n, "max dims: model %s has no dim '%s'", m->g->name, dv->name);
            goto out;
        }
        if (dv->value < 1) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "max dims: %s=%lld must be at least 1", dv->name, (long long)dv->value);
            goto out;
        }
        m->maxd[s] = dv->value;
    }
    for (int s = 0; s < m->g->nsyms; s++)
        if (m->maxd[s] < 1) {
            st = rt_fail(RTM_ERR_INVALID, err, n,
                         "max dims: no value for dim '%s' of model %s: give every dim its largest value (it sizes "
                         "the buffers), e.g. %s=%d", m->g->syms[s], m->g->name, m->g->syms[s], 16);
            goto out;
        }
    /* the pipeline */
    pass_options po = {.disabled = cfg->disabled, .ndisabled = cfg->ndisabled};
    if (cfg->ndisabled && !cfg->disabled) {
        st = rt_fail(RTM_ERR_INVALID, err, n, "disabled: NULL array");
        goto out;
    }
    for (int i = 0; i < cfg->ndisabled; i++)
        if (!cfg->disabled[i]) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "disabled: entry %d is NULL", i);
            goto out;
        }
    if (!pass_options_check(&po, &d)) {
        render_diags(&d, NULL, err, n);
        st = RTM_ERR_INVALID;
        goto out;
    }
    pass_ctx pc = {.opts = &po, .report = NULL, .diags = &d};
    m->g = pass_run_pipeline(m->g, &pc);
    if (!m->g) {
        render_diags(&d, src.text, err, n);
        st = RTM_ERR_INTERNAL;
        goto out;
    }
    char pe[512];
    if (pass_plan_memory(m->g, m->maxd, &m->mp, pe, sizeof pe) != 0) {
        st = rt_fail(RTM_ERR_INTERNAL, err, n, "memory plan: %s", pe);
        goto out;
    }
    int np = m->g->nparams;
    m->node_off = malloc(((size_t)m->g->nnodes + 1) * sizeof *m->node_off);
    m->wptr = calloc((size_t)np + 1, sizeof *m->wptr);
    m->wowned = calloc((size_t)np + 1, sizeof *m->wowned);
    m->sptr = calloc((size_t)np + 1, sizeof *m->sptr);
    m->sbytes = calloc((size_t)np + 1, sizeof *m->sbytes);
    m->types = calloc((size_t)(np + m->g->noutputs) + 1, sizeof *m->types);
    m->graphs = rt_graph_cache_new(cfg->max_graphs > 0 ? cfg->max_graphs : 16);
    if (!m->node_off || !m->wptr || !m->wowned || !m->sptr || !m->sbytes || !m->types || !m->graphs) {
        st = rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
        goto out;
    }
    for (int i = 0; i < m->g->nnodes; i++) m->node_off[i] = -1;
    for (int i = 0; i < m->mp.nbufs; i++) m->node_off[m->mp.bufs[i].value->id] = m->mp.bufs[i].offset;
    m->arena_need = ALIGN_UP((size_t)m->mp.peak);
    for (int i = 0; i < np + m->g->noutputs; i++) {
        const ir_type *t = i < np ? &m->g->params[i]->type : &m->g->outputs[i - np].value->type;
        char tb[256];
        ir_type_print(t, m->g->syms, tb, sizeof tb);
        m->types[i] = arena_strdup(&m->a, tb);
        if (i < np && m->g->params[i]->op == IR_OP_STATE) m->nstate_params++;
    }
    /* the large-shape variant: generated now (codegen errors show at compile) */
    rt_kvar *v;
    st = var_new(m, false, NULL, &v, err, n);
    if (st != RTM_OK) goto out;
    m->vars[m->nvars++] = v;
    if (!m->lazy) {
        st = var_compile(m, v, err, n);
        if (st == RTM_OK && ctx->has_device) st = var_load(m, v, err, n);
    }
out:
    free(defs);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&da);
    if (st != RTM_OK) {
        rt_model_free(m);
        return st;
    }
    *out = m;
    return RTM_OK;
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
    pass_kernels_print(m->g, f);
    fputc('\n', f);
    pass_memplan_print(m->g, &m->mp, f);
    for (int i = 0; i < m->nvars; i++) {
        const rt_kvar *v = m->vars[i];
        fprintf(f, "variant %d: %s", i, v->small ? "small-shape for" : "large-shape");
        for (int s = 0; v->small && s < m->g->nsyms; s++) fprintf(f, " %s=%lld", m->g->syms[s], (long long)v->dims[s]);
        fprintf(f, "%s\n", v->loaded ? " (loaded)" : v->compiled ? " (compiled)" : "");
        for (int k = 0; k < v->nk; k++)
            fprintf(f, "  %-40s %s%s%s\n", v->ks[k].name, cg_family_name(v->ks[k].family), v->ks[k].note ? "  " : "",
                    v->ks[k].note ? v->ks[k].note : "");
    }
    fclose(f);
    return buf;
}

/* ---- weights ----------------------------------------------------------------------------- */

static void invalidate_packs(rt_model *m)
{
    for (int i = 0; i < m->nprods; i++) m->prods[i].valid = false;
}

static int weight_bytes(const rt_model *m, int param, int64_t *shape, size_t *bytes)
{
    const ir_node *p = m->g->params[param];
    int64_t numel;
    if (!rt_type_shape(&p->type, m->maxd, shape, &numel)) return -1;
    *bytes = (size_t)numel * (size_t)ir_dtype_size(p->type.dtype);
    return 0;
}

static void shape_str(int rank, const int64_t *shape, char *buf, size_t n)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && o < n; i++) o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

static void set_weight(rt_model *m, int param, void *dev, bool owned)
{
    if (m->wowned[param] && m->wptr[param] && m->wptr[param] != dev) (void)cudaFree(m->wptr[param]);
    m->wptr[param] = dev;
    m->wowned[param] = owned;
    invalidate_packs(m);
    rt_graph_cache_clear(m->graphs); /* the graphs hold the old pointer */
}

int rt_model_bind_weight(rt_model *m, const char *name, int has_type, ir_dtype dtype, int rank, const int64_t *shape,
                         const void *dev, char *err, size_t n)
{
    int p = rt_model_find_param(m, name);
    if (p < 0) {
        char list[512] = "";
        for (int i = 0; i < m->g->nparams; i++)
            if (m->g->params[i]->op == IR_OP_WEIGHT) {
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", l ? ", " : "", m->g->params[i]->name);
            }
        return rt_fail(RTM_ERR_NOT_FOUND, err, n, "bind weight: model %s has no weight '%s' (its weights: %s)", m->g->name,
                       name, list[0] ? list : "none");
    }
    char decl[512];
    describe_decl(m, p, decl, sizeof decl);
    if (m->g->params[p]->op != IR_OP_WEIGHT)
        return rt_fail(RTM_ERR_INVALID, err, n, "bind weight: '%s' is %s of the model, not a weight: %s", name,
                       kind_word(m->g->params[p]), decl);
    int64_t want[IR_MAX_RANK];
    size_t bytes;
    if (weight_bytes(m, p, want, &bytes) != 0)
        return rt_fail(RTM_ERR_INTERNAL, err, n, "bind weight: the shape of %s does not evaluate", decl);
    if (has_type) {
        const ir_node *w = m->g->params[p];
        if (dtype != w->type.dtype)
            return rt_fail(RTM_ERR_WEIGHTS, err, n, "bind weight '%s': dtype %s but the model declares %s", name,
                           ir_dtype_name(dtype), decl);
        bool same = rank == w->type.rank && (rank == 0 || shape);
        for (int i = 0; same && i < rank; i++) same = shape[i] == want[i];
        if (!same) {
            char got[256];
            if (rank < 0 || rank > IR_MAX_RANK || (rank && !shape)) snprintf(got, sizeof got, "(rank %d)", rank);
            else shape_str(rank, shape, got, sizeof got);
            return rt_fail(RTM_ERR_WEIGHTS, err, n, "bind weight '%s': shape %s but the model declares %s", name, got, decl);
        }
    }
    if (!dev && bytes) return rt_fail(RTM_ERR_INVALID, err, n, "bind weight '%s': NULL device pointer", name);
    int st;
    if (!use_device(m, "bind weight", &st, err, n)) return st;
    if (dev) { /* a host pointer here would be read by kernels as garbage: catch it */
        struct cudaPointerAttributes pa;
        cudaError_t ce = cudaPointerGetAttributes(&pa, dev);
        (void)cudaGetLastError();
        /* With HMM a kernel could even read pageable host memory, over the
         * bus, on every call: weights must live on the device. */
        if (ce != cudaSuccess || (pa.type != cudaMemoryTypeDevice && pa.type != cudaMemoryTypeManaged))
            return rt_fail(RTM_ERR_INVALID, err, n,
                           "bind weight '%s': %p is host memory, not device memory; copy the weight to the device first "
                           "(or use kiln_model_load_safetensors)", name, dev);
    }
    set_weight(m, p, (void *)dev, false);
    return RTM_OK;
}

int rt_model_check_safetensors(const rt_model *m, const rt_st_file *f, unsigned flags, char *err, size_t n)
{
    if (err && n) err[0] = 0;
    int problems = 0, st = RTM_OK;
    const char *path = f->path ? f->path : "safetensors";
    for (int i = 0; i < f->n; i++) {
        const rt_st_tensor *t = &f->t[i];
        int p = rt_model_find_param(m, t->name);
        if (p < 0) {
            if (flags & RT_LOAD_IGNORE_UNKNOWN) continue;
            add_line(err, n, "%s: tensor '%s' is not a weight of model %s", path, t->name, m->g->name);
            problems++;
            continue;
        }
        char decl[512];
        describe_decl(m, p, decl, sizeof decl);
        if (m->g->params[p]->op != IR_OP_WEIGHT) {
            add_line(err, n, "%s: tensor '%s' is %s of the model, not a weight: %s", path, t->name,
                     kind_word(m->g->params[p]), decl);
            problems++;
            continue;
        }
        const ir_node *w = m->g->params[p];
        if (!t->kiln_dtype || t->dtype != w->type.dtype) {
            add_line(err, n, "%s: tensor '%s': dtype %s but the model declares %s", path, t->name, t->dtype_str, decl);
            problems++;
            continue;
        }
        int64_t want[IR_MAX_RANK];
        size_t bytes;
        if (weight_bytes(m, p, want, &bytes) != 0) {
            add_line(err, n, "%s: tensor '%s': the declared shape does not evaluate: %s", path, t->name, decl);
            problems++;
            continue;
        }
        bool same = t->rank == w->type.rank;
        for (int d = 0; same && d < t->rank; d++) same = t->shape[d] == want[d];
        if (!same) {
            char got[256];
            shape_str(t->rank, t->shape, got, sizeof got);
            add_line(err, n, "%s: tensor '%s': shape %s but the model declares %s", path, t->name, got, decl);
            problems++;
        }
    }
    if (problems) st = RTM_ERR_WEIGHTS;
    if (!(flags & RT_LOAD_ALLOW_MISSING)) {
        char missing[1024] = "";
        int nmiss = 0;
        for (int i = 0; i < m->g->nparams; i++) {
            const ir_node *w = m->g->params[i];
            if (w->op != IR_OP_WEIGHT || rt_st_find(f, w->name)) continue;
            char decl[512];
            describe_decl(m, i, decl, sizeof decl);
            size_t l = strlen(missing);
            snprintf(missing + l, sizeof missing - l, "%s%s", l ? "; " : "", decl);
            nmiss++;
        }
        if (nmiss) {
            add_line(err, n, "%s: %d weight%s of model %s missing from the file: %s", path, nmiss, nmiss > 1 ? "s" : "",
                     m->g->name, missing);
            if (st == RTM_OK) st = RTM_ERR_WEIGHTS;
        }
    }
    return st;
}

int rt_model_load_safetensors(rt_model *m, const char *path, unsigned flags, char *err, size_t n)
{
    rt_st_file f;
    if (rt_st_open(path, &f, err, n) != 0) {
        /* unreadable file vs bad contents */
        FILE *fp = fopen(path, "rb");
        if (!fp) return RTM_ERR_IO;
        fclose(fp);
        return RTM_ERR_WEIGHTS;
    }
    int st = rt_model_check_safetensors(m, &f, flags, err, n);
    if (st != RTM_OK) goto out;
    if (!use_device(m, "load weights", &st, err, n)) goto out;
    for (int i = 0; i < f.n; i++) {
        const rt_st_tensor *t = &f.t[i];
        int p = rt_model_find_param(m, t->name);
        if (p < 0) continue;
        size_t bytes = (size_t)(t->end - t->begin);
        void *dev = NULL;
        cudaError_t e = cudaMalloc(&dev, bytes ? bytes : 1);
        if (e == cudaSuccess) e = cudaMemcpy(dev, t->data, bytes, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            if (dev) (void)cudaFree(dev);
            st = rt_fail(cuda_status(e), err, n, "%s: tensor '%s': copying %zu bytes to the device: %s", path, t->name, bytes,
                         cudaGetErrorString(e));
            goto out;
        }
        set_weight(m, p, dev, true);
    }
    {
        cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy); /* the copies are done before any run reads them */
        if (e != cudaSuccess) st = rt_fail(cuda_status(e), err, n, "%s: copying weights: %s", path, cudaGetErrorString(e));
    }
out:
    rt_st_close(&f);
    return st;
}

/* Host bytes of weights for packing: copied from the device once per pack. */
typedef struct pack_src {
    rt_model *m;
    void **host;
} pack_src;

static int pack_get(void *user, int param, const void **data, char *err, size_t n)
{
    pack_src *ps = user;
    rt_model *m = ps->m;
    if (!ps->host[param]) {
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        if (weight_bytes(m, param, shape, &bytes) != 0) return rt_fail(-1, err, n, "weight shape does not evaluate");
        if (!m->wptr[param]) return rt_fail(-1, err, n, "weight '%s' is not bound", m->g->params[param]->name);
        ps->host[param] = malloc(bytes + 1);
        if (!ps->host[param]) return rt_fail(-1, err, n, "out of memory");
        cudaError_t e = cudaMemcpy(ps->host[param], m->wptr[param], bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return rt_fail(-1, err, n, "reading weight '%s' from the device: %s", m->g->params[param]->name,
                           cudaGetErrorString(e));
        }
    }
    *data = ps->host[param];
    return 0;
}

static int compute_packs(rt_model *m, char *err, size_t n)
{
    bool any = false;
    for (int i = 0; i < m->nprods; i++) any |= !m->prods[i].valid;
    if (!any) return RTM_OK;
    void **host = calloc((size_t)m->g->nparams + 1, sizeof *host);
    if (!host) return rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
    pack_src ps = {m, host};
    int st = RTM_OK;
    /* earlier runs may still read the packed buffers */
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
    if (e != cudaSuccess) {
        st = rt_fail(cuda_status(e), err, n, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
        goto out;
    }
    for (int i = 0; i < m->nprods && st == RTM_OK; i++) {
        rt_product *p = &m->prods[i];
        if (p->valid) continue;
        void *val = NULL;
        size_t bytes = 0;
        char pe[1024];
        if (rt_pack_eval(m->g, m->maxd, p->node, pack_get, &ps, false, &val, &bytes, pe, sizeof pe) != 0) {
            st = rt_fail(RTM_ERR_WEIGHTS, err, n, "packing weights (%%%d): %s", p->node, pe);
            break;
        }
        if (p->half > 0) {
            const ir_node *nd = m->g->nodes[p->node];
            int64_t shape[IR_MAX_RANK], numel;
            rt_type_shape(&nd->type, m->maxd, shape, &numel);
            if (nd->type.rank < 1 || shape[0] != 2 * p->half) {
                free(val);
                st = rt_fail(RTM_ERR_INTERNAL, err, n, "interleave of %%%d: %lld rows, not 2 x %lld", p->node,
                             nd->type.rank ? (long long)shape[0] : 0LL, (long long)p->half);
                break;
            }
            void *iv = malloc(bytes + 1);
            if (!iv) {
                free(val);
                st = rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
                break;
            }
            rt_pack_interleave_rows(iv, val, p->half, bytes / (size_t)shape[0]);
            free(val);
            val = iv;
        }
        if (p->dev && p->bytes != bytes) {
            (void)cudaFree(p->dev);
            p->dev = NULL;
            rt_graph_cache_clear(m->graphs);
        }
        if (!p->dev) {
            e = cudaMalloc(&p->dev, bytes ? bytes : 1);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                p->dev = NULL;
                free(val);
                st = rt_fail(cuda_status(e), err, n, "cudaMalloc of %zu bytes for packed weights: %s", bytes,
                             cudaGetErrorString(e));
                break;
            }
            rt_graph_cache_clear(m->graphs);
        }
        p->bytes = bytes;
        e = cudaMemcpy(p->dev, val, bytes, cudaMemcpyHostToDevice);
        free(val);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            st = rt_fail(cuda_status(e), err, n, "uploading packed weights: %s", cudaGetErrorString(e));
            break;
        }
        p->valid = true;
    }
    if (st == RTM_OK) {
        /* the uploads ran on the legacy stream: finish them before kernels read them */
        e = cudaStreamSynchronize(cudaStreamLegacy);
        if (e != cudaSuccess) st = rt_fail(cuda_status(e), err, n, "uploading packed weights: %s", cudaGetErrorString(e));
        else m->cnt.weight_packs++;
    }
out:
    for (int i = 0; i < m->g->nparams; i++) free(host[i]);
    free(host);
    return st;
}

/* ---- states ------------------------------------------------------------------------------ */

int rt_model_alloc_states(rt_model *m, char *err, size_t n)
{
    int st;
    if (!use_device(m, "alloc states", &st, err, n)) return st;
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
    if (e != cudaSuccess) return rt_fail(cuda_status(e), err, n, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
    for (int i = 0; i < m->g->nparams; i++) {
        if (m->g->params[i]->op != IR_OP_STATE) continue;
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        if (weight_bytes(m, i, shape, &bytes) != 0)
            return rt_fail(RTM_ERR_INTERNAL, err, n, "state '%s': the shape does not evaluate", m->g->params[i]->name);
        if (!m->sptr[i]) {
            e = cudaMalloc(&m->sptr[i], bytes ? bytes : 1);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                m->sptr[i] = NULL;
                return rt_fail(cuda_status(e), err, n, "cudaMalloc of %zu bytes for state '%s': %s", bytes,
                               m->g->params[i]->name, cudaGetErrorString(e));
            }
            m->sbytes[i] = bytes;
            rt_graph_cache_clear(m->graphs);
        }
        e = cudaMemset(m->sptr[i], 0, m->sbytes[i]);
        if (e != cudaSuccess) return rt_fail(cuda_status(e), err, n, "cudaMemset of state '%s': %s", m->g->params[i]->name, cudaGetErrorString(e));
    }
    /* the memsets ran on the legacy stream, which the model's non-blocking
     * stream does not wait for: finish them (not cudaDeviceSynchronize, which
     * would also wait for, and could disturb, other threads' captures) */
    e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess) return rt_fail(cuda_status(e), err, n, "zeroing states: %s", cudaGetErrorString(e));
    m->states_ready = true;
    return RTM_OK;
}

int rt_model_zero_states(rt_model *m, char *err, size_t n)
{
    if (!m->states_ready && m->nstate_params)
        return rt_fail(RTM_ERR_STATE, err, n, "zero states: the states of model %s are not allocated (kiln_model_alloc_states)", m->g->name);
    return rt_model_alloc_states(m, err, n);
}

int rt_model_state_ptr(rt_model *m, const char *name, void **ptr, size_t *bytes, char *err, size_t n)
{
    int p = rt_model_find_param(m, name);
    if (p < 0 || m->g->params[p]->op != IR_OP_STATE)
        return rt_fail(p < 0 ? RTM_ERR_NOT_FOUND : RTM_ERR_INVALID, err, n, "model %s has no state '%s'%s", m->g->name, name,
                       p >= 0 ? " (it is not a state)" : "");
    if (!m->sptr[p])
        return rt_fail(RTM_ERR_STATE, err, n, "state '%s' is not allocated: call kiln_model_alloc_states first", name);
    if (ptr) *ptr = m->sptr[p];
    if (bytes) *bytes = m->sbytes[p];
    return RTM_OK;
}

/* ---- running ------------------------------------------------------------------------------- */

typedef struct run_ctx {
    rt_model *m;
    rt_kvar *v;
    const int64_t *dims;
    void **in;   /* per param (inputs) */
    void **out;  /* per output */
    int status;  /* of a failed record */
} run_ctx;

static bool eval_dim(const ir_dim *d, const int64_t *dims, int64_t *v)
{
    return ir_dim_is_const(d, v) || ir_dim_eval(d, dims, v);
}

/* Workspace bytes a kernel needs at dims. */
static bool kernel_scratch(const cg_kernel *k, const int64_t *dims, size_t *need)
{
    size_t s = 0;
    for (int i = 0; i < k->nargs; i++) {
        if (k->args[i].kind != CG_ARG_WORKSPACE) continue;
        int64_t b;
        if (!cg_arg_eval(&k->args[i], dims, &b) || b < 0) return false;
        s += ALIGN_UP((size_t)b);
    }
    *need = s;
    return true;
}

static int record_kernels(run_ctx *rc, void *stream, char *err, size_t n);

/* rt_record_fn: 0, or -1 with the status kept in rc->status. */
static int record(void *user, void *stream, char *err, size_t n)
{
    run_ctx *rc = user;
    rc->status = record_kernels(rc, stream, err, n);
    return rc->status == RTM_OK ? 0 : -1;
}

static int record_kernels(run_ctx *rc, void *stream, char *err, size_t n)
{
    rt_model *m = rc->m;
    const ir_graph *g = m->g;
    rt_kvar *v = rc->v;
    unsigned char buf[8 * 256];
    for (int k = 0; k < v->nk; k++) {
        const cg_kernel *K = &v->ks[k];
        if (K->args_size > sizeof buf) return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: %zu bytes of KilnArgs", K->name, K->args_size);
        memset(buf, 0, K->args_size ? K->args_size : 8);
        size_t ws_off = 0;
        for (int i = 0; i < K->nargs; i++) {
            const cg_arg *a = &K->args[i];
            char *p = NULL;
            uint64_t val = 0;
            bool is_ptr = true;
            switch (a->kind) {
            case CG_ARG_PARAM: {
                const ir_node *pn = g->params[a->index];
                int64_t half = xform_half(m, K, a->node);
                if (half > 0) {
                    rt_product *pr = product_for(m, a->node, half, false);
                    p = pr ? pr->dev : NULL;
                } else if (pn->op == IR_OP_INPUT) p = rc->in[a->index];
                else if (pn->op == IR_OP_WEIGHT) p = m->wptr[a->index];
                else p = m->sptr[a->index];
                break;
            }
            case CG_ARG_OUTPUT: p = rc->out[a->index]; break;
            case CG_ARG_STATE: p = m->sptr[g->states[a->index].state->param]; break;
            case CG_ARG_PACKED: {
                rt_product *pr = product_for(m, a->node, xform_half(m, K, a->node), false);
                p = pr ? pr->dev : NULL;
                break;
            }
            case CG_ARG_INTERMEDIATE:
                if (a->node >= 0 && m->node_off[a->node] >= 0) p = (char *)m->arena_dev + m->node_off[a->node];
                break;
            case CG_ARG_WORKSPACE: {
                int64_t b = 0;
                if (!cg_arg_eval(a, rc->dims, &b) || b < 0)
                    return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: workspace %s does not evaluate", K->name, a->field);
                p = (char *)m->scratch_dev + ws_off;
                ws_off += ALIGN_UP((size_t)b);
                if (a->zeroed && b > 0) {
                    cudaError_t e = cudaMemsetAsync(p, 0, (size_t)b, (cudaStream_t)stream);
                    if (e != cudaSuccess) {
                        (void)cudaGetLastError();
                        return rt_fail(cuda_status(e), err, n, "kernel %s: cudaMemsetAsync of workspace %s: %s", K->name,
                                       a->field, cudaGetErrorString(e));
                    }
                }
                break;
            }
            case CG_ARG_SCALAR: {
                int64_t x;
                if (!cg_arg_eval(a, rc->dims, &x))
                    return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: scalar %s does not evaluate", K->name, a->field);
                val = (uint64_t)x;
                is_ptr = false;
                break;
            }
            case CG_ARG_NULL: break;
            }
            if (is_ptr && a->kind != CG_ARG_NULL) {
                if (!p)
                    return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: field %s (%%%d) has no storage", K->name, a->field, a->node);
                if (a->elem_offset.nterms && a->node >= 0) {
                    int64_t off;
                    if (!eval_dim(&a->elem_offset, rc->dims, &off))
                        return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: offset of %s does not evaluate", K->name, a->field);
                    p += off * ir_dtype_size(g->nodes[a->node]->type.dtype);
                }
                val = (uint64_t)(uintptr_t)p;
            }
            if (a->offset + 8 > K->args_size) return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: field %s outside KilnArgs", K->name, a->field);
            memcpy(buf + a->offset, &val, 8);
        }
        unsigned grid[3], block;
        size_t smem;
        char le[512];
        if (!cg_launch_eval(K, rc->dims, grid, &block, &smem, le, sizeof le))
            return rt_fail(RTM_ERR_INVALID, err, n, "kernel %s: %s", K->name, le);
        if (!grid[0] || !grid[1] || !grid[2]) continue; /* nothing to do at these dims */
        rt_dim3 gd = {grid[0], grid[1], grid[2]}, bd = {block, 1, 1};
        rt_lstatus ls = rt_launch(&v->kern[k], gd, bd, smem, stream, buf, K->args_size, le, sizeof le);
        if (ls != RT_LAUNCH_OK) return rt_fail(lstatus(ls), err, n, "kernel %s (k%d, %s): %s", K->name, k, cg_family_name(K->family), le);
        m->cnt.launches++;
    }
    return RTM_OK;
}

static int ensure_memory(rt_model *m, const rt_kvar *v, const int64_t *dims, char *err, size_t n)
{
    size_t scratch = 0;
    for (int k = 0; k < v->nk; k++) {
        size_t s;
        if (!kernel_scratch(&v->ks[k], dims, &s))
            return rt_fail(RTM_ERR_INTERNAL, err, n, "kernel %s: a workspace size does not evaluate", v->ks[k].name);
        if (s > scratch) scratch = s;
    }
    if (m->arena_need > m->arena_bytes || !m->arena_dev) {
        (void)cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
        if (m->arena_dev) (void)cudaFree(m->arena_dev);
        m->arena_dev = NULL;
        m->arena_bytes = 0;
        size_t b = m->arena_need ? m->arena_need : ALIGN;
        CUDA_TRY(cudaMalloc(&m->arena_dev, b), "cudaMalloc of %zu bytes for the intermediates arena", b);
        m->arena_bytes = b;
        rt_graph_cache_clear(m->graphs);
    }
    if (scratch > m->scratch_bytes || !m->scratch_dev) {
        (void)cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
        if (m->scratch_dev) (void)cudaFree(m->scratch_dev);
        m->scratch_dev = NULL;
        m->scratch_bytes = 0;
        size_t b = scratch > ALIGN ? scratch : ALIGN;
        CUDA_TRY(cudaMalloc(&m->scratch_dev, b), "cudaMalloc of %zu bytes for kernel workspaces", b);
        CUDA_TRY(cudaMemset(m->scratch_dev, 0, b), "cudaMemset of %zu bytes of workspace", b);
        m->scratch_bytes = b;
        rt_graph_cache_clear(m->graphs);
    }
    return RTM_OK;
}

int rt_model_prepare(rt_model *m, const int64_t *dims, char *err, size_t n)
{
    int vi, st = pick_variant(m, dims, &vi, err, n);
    if (st != RTM_OK) return st;
    if (!m->ctx->has_device) return var_compile(m, m->vars[vi], err, n);
    return var_load(m, m->vars[vi], err, n);
}

/* Dims inside a state's shape (past its first axis) fix its layout. */
static int check_state_dims(const rt_model *m, const int64_t *dims, char *err, size_t n)
{
    for (int i = 0; i < m->g->nparams; i++) {
        const ir_node *p = m->g->params[i];
        if (p->op != IR_OP_STATE) continue;
        for (int ax = 1; ax < p->type.rank; ax++)
            for (int t = 0; t < p->type.dims[ax].nterms; t++)
                for (int s = 0; s < m->g->nsyms; s++)
                    if (p->type.dims[ax].t[t].exp[s] && dims[s] != m->maxd[s])
                        return rt_fail(RTM_ERR_STATE, err, n,
                                       "dims: %s=%lld but state %s : %s was allocated for %s=%lld; a dim inside a state's "
                                       "shape (after its first axis) must take its max value in every run",
                                       m->g->syms[s], (long long)dims[s], p->name, m->types[i], m->g->syms[s],
                                       (long long)m->maxd[s]);
    }
    return RTM_OK;
}

int rt_model_run(rt_model *m, const int64_t *dims, const rt_tensor_ptr *inputs, int ninputs,
                 const rt_tensor_ptr *outputs, int noutputs, void *stream, char *err, size_t n)
{
    const ir_graph *g = m->g;
    int st = RTM_OK;
    if ((ninputs && !inputs) || (noutputs && !outputs) || ninputs < 0 || noutputs < 0)
        return rt_fail(RTM_ERR_INVALID, err, n, "run: NULL inputs or outputs array");
    void **in = calloc((size_t)g->nparams + 1, sizeof *in), **out = calloc((size_t)g->noutputs + 1, sizeof *out);
    void **ptrs = calloc((size_t)(g->nparams + g->noutputs) + 1, sizeof *ptrs);
    int64_t key[IR_MAX_SYMS + 1];
    if (!in || !out || !ptrs) {
        st = rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
        goto done;
    }
    for (int i = 0; i < ninputs; i++) {
        if (!inputs[i].name) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "run: input %d has no name", i);
            goto done;
        }
        int p = rt_model_find_param(m, inputs[i].name);
        if (p < 0 || g->params[p]->op != IR_OP_INPUT) {
            st = rt_fail(p < 0 ? RTM_ERR_NOT_FOUND : RTM_ERR_INVALID, err, n, "run: model %s has no input '%s'%s", g->name,
                         inputs[i].name, p >= 0 ? (g->params[p]->op == IR_OP_WEIGHT ? " (it is a weight: bind it)" : " (it is a state)") : "");
            goto done;
        }
        if (in[p]) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "run: input '%s' given twice", inputs[i].name);
            goto done;
        }
        if (!inputs[i].ptr) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "run: input '%s': NULL device pointer", inputs[i].name);
            goto done;
        }
        in[p] = inputs[i].ptr;
    }
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->op == IR_OP_INPUT && !in[i]) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "run: input '%s' : %s not given", g->params[i]->name, m->types[i]);
            goto done;
        }
    for (int i = 0; i < noutputs; i++) {
        int o = -1;
        for (int j = 0; outputs[i].name && j < g->noutputs; j++)
            if (!strcmp(g->outputs[j].name, outputs[i].name)) o = j;
        if (o < 0) {
            st = rt_fail(RTM_ERR_NOT_FOUND, err, n, "run: model %s has no output '%s'", g->name,
                         outputs[i].name ? outputs[i].name : "(null)");
            goto done;
        }
        if (out[o] || !outputs[i].ptr) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "run: output '%s' %s", outputs[i].name, out[o] ? "given twice" : "has a NULL pointer");
            goto done;
        }
        out[o] = outputs[i].ptr;
    }
    for (int j = 0; j < g->noutputs; j++)
        if (!out[j]) {
            st = rt_fail(RTM_ERR_INVALID, err, n, "run: output '%s' : %s not given", g->outputs[j].name,
                         m->types[g->nparams + j]);
            goto done;
        }
    /* weights and states */
    int missing = 0;
    char list[1024] = "";
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->op == IR_OP_WEIGHT && !m->wptr[i]) {
            char decl[512];
            describe_decl(m, i, decl, sizeof decl);
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", l ? "; " : "", decl);
            missing++;
        }
    if (missing) {
        st = rt_fail(RTM_ERR_MISSING_WEIGHT, err, n, "run: %d weight%s of model %s not bound: %s", missing,
                     missing > 1 ? "s" : "", g->name, list);
        goto done;
    }
    if (m->nstate_params && !m->states_ready) {
        st = rt_fail(RTM_ERR_STATE, err, n, "run: the states of model %s are not allocated: call kiln_model_alloc_states", g->name);
        goto done;
    }
    if ((st = check_state_dims(m, dims, err, n)) != RTM_OK) goto done;
    if (!use_device(m, "run", &st, err, n)) goto done;
    int vi;
    if ((st = pick_variant(m, dims, &vi, err, n)) != RTM_OK) goto done;
    rt_kvar *v = m->vars[vi];
    if ((st = var_load(m, v, err, n)) != RTM_OK) goto done;
    if ((st = compute_packs(m, err, n)) != RTM_OK) goto done;
    if ((st = ensure_memory(m, v, dims, err, n)) != RTM_OK) goto done;
    if (!stream) stream = m->ctx->stream;
    run_ctx rc = {m, v, dims, in, out, RTM_OK};
    m->cnt.runs++;
    if (m->no_graphs) {
        st = record_kernels(&rc, stream, err, n);
        if (st == RTM_OK) m->cnt.eager_runs++;
        goto done;
    }
    /* key: the variant and every dim (positions are in device memory, not dims) */
    key[0] = vi;
    for (int s = 0; s < g->nsyms; s++) key[1 + s] = dims[s];
    int np = 0;
    for (int i = 0; i < g->nparams; i++)
        if (in[i]) ptrs[np++] = in[i];
    for (int j = 0; j < g->noutputs; j++) ptrs[np++] = out[j];
    rt_graph_how how;
    char ge[1024];
    if (rt_graph_run(m->graphs, key, 1 + g->nsyms, (const void *const *)ptrs, np, stream, record, &rc, &how, ge,
                     sizeof ge) != 0) {
        st = rc.status != RTM_OK ? rc.status : RTM_ERR_CUDA;
        rt_fail(st, err, n, "run of model %s: %s", g->name, ge);
        goto done;
    }
    switch (how) {
    case RT_GRAPH_REPLAYED: m->cnt.graph_replays++; m->cnt.launches += (uint64_t)v->nk; break;
    case RT_GRAPH_CAPTURED: m->cnt.graph_captures++; break;
    case RT_GRAPH_UPDATED: m->cnt.graph_updates++; break;
    case RT_GRAPH_EAGER_FULL: m->cnt.eager_fallbacks++; m->cnt.eager_runs++; break;
    case RT_GRAPH_EAGER_CAPTURING: m->cnt.eager_runs++; break;
    case RT_GRAPH_EAGER_CAPTURE_FAILED: m->cnt.eager_fallbacks++; m->cnt.eager_runs++; break;
    }
done:
    free(in);
    free(out);
    free(ptrs);
    return st;
}

int rt_model_sync(rt_model *m, char *err, size_t n)
{
    int st;
    if (!use_device(m, "sync", &st, err, n)) return st;
    CUDA_TRY(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), "cudaStreamSynchronize (model %s)", m->g->name);
    return RTM_OK;
}

void rt_model_get_counters(const rt_model *m, rt_model_counters *c) { *c = m->cnt; }

/* ---- device memory for callers without CUDA ------------------------------------ */

int rt_ctx_alloc(rt_ctx *c, size_t bytes, void **ptr, char *err, size_t n)
{
    *ptr = NULL;
    if (!c->has_device) return rt_fail(RTM_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *ptr = NULL;
        return rt_fail(e == cudaErrorMemoryAllocation ? RTM_ERR_NOMEM : RTM_ERR_CUDA, err, n,
                       "cudaMalloc(%zu bytes): %s", bytes, cudaGetErrorString(e));
    }
    return RTM_OK;
}

int rt_ctx_free_mem(rt_ctx *c, void *ptr, char *err, size_t n)
{
    if (!ptr) return RTM_OK;
    if (!c->has_device) return rt_fail(RTM_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = cudaFree(ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt_fail(RTM_ERR_CUDA, err, n, "cudaFree: %s", cudaGetErrorString(e));
    }
    return RTM_OK;
}

int rt_ctx_copy(rt_ctx *c, void *dst, const void *src, size_t bytes, bool to_device, char *err, size_t n)
{
    if (!c->has_device) return rt_fail(RTM_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt_fail(RTM_ERR_CUDA, err, n, "cudaMemcpy (%zu bytes, %s): %s", bytes,
                       to_device ? "to the device" : "to the host", cudaGetErrorString(e));
    }
    return RTM_OK;
}
