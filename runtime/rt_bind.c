/* runtime/rt_bind.c — what a model reads besides its inputs: weights (bound
 * device pointers or loaded from safetensors), the packed (bind-time) values
 * computed from them, and states (rt_model.h).
 *
 * Packed weights do not double the memory of weights loaded from a file: once
 * the packed copies are made, a file-loaded weight that no kernel of any
 * variant reads directly but a packed copy does is freed (released); the
 * packed copy is then its only form on the device. A pack made later (a new
 * variant's layout, a rebind of another weight) and a variant that reads the
 * weight directly read it again from its file. A weight bound from device
 * memory is the user's: never freed, never written; its packed copy is the one
 * extra. Packing itself stays one function of the original values
 * (rt_pack_eval over the bind-time node), whatever the passes put there. */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "runtime/rt_model_internal.h"
#include "runtime/rt_pack.h"
#include "runtime/rt_weights.h"
#include "runtime/rt_wmodel.h"

/* ---- weights ----------------------------------------------------------------------------- */

int rt_missing_weights(const rt_model *m, bool (*missing)(const rt_model *m, int param, const void *user),
                       const void *user, char *list, size_t n)
{
    int count = 0;
    if (n) list[0] = 0;
    for (int i = 0; i < m->g->nparams; i++) {
        if (m->g->params[i]->op != IR_OP_WEIGHT || !missing(m, i, user)) continue;
        char decl[512];
        rt_model_describe_param(m, i, decl, sizeof decl);
        size_t l = strlen(list);
        snprintf(list + l, n - l, "%s%s", l ? "; " : "", decl);
        count++;
    }
    return count;
}

static void invalidate_packs(rt_model *m)
{
    for (int i = 0; i < m->npacked; i++) m->packed[i].valid = false;
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
    if (m->weight_owned[param] && m->weight_ptr[param] && m->weight_ptr[param] != dev) (void)cudaFree(m->weight_ptr[param]);
    m->weight_ptr[param] = dev;
    m->weight_owned[param] = owned;
    m->weight_released[param] = false;
    free(m->weight_src[param]);
    m->weight_src[param] = NULL;
    invalidate_packs(m);
    rt_graph_cache_clear(m->graphs); /* the graphs hold the old pointer */
}

rt_status rt_model_bind_weight(rt_model *m, const char *name, int has_type, ir_dtype dtype, int rank, const int64_t *shape,
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
        return rt_fail(RT_ERR_NOT_FOUND, err, n, "bind weight: model %s has no weight '%s' (its weights: %s)", m->g->name,
                       name, list[0] ? list : "none");
    }
    char decl[512];
    rt_model_describe_param(m, p, decl, sizeof decl);
    if (m->g->params[p]->op != IR_OP_WEIGHT)
        return rt_fail(RT_ERR_INVALID, err, n, "bind weight: '%s' is %s of the model, not a weight: %s", name,
                       rt_param_kind_word(m->g->params[p]), decl);
    int64_t want[IR_MAX_RANK];
    size_t bytes;
    if (rt_model_param_bytes(m, p, want, &bytes) != 0)
        return rt_fail(RT_ERR_INTERNAL, err, n, "bind weight: the shape of %s does not evaluate", decl);
    if (has_type) {
        const ir_node *w = m->g->params[p];
        if (dtype != w->type.dtype)
            return rt_fail(RT_ERR_WEIGHTS, err, n, "bind weight '%s': dtype %s but the model declares %s", name,
                           ir_dtype_name(dtype), decl);
        bool same = rank == w->type.rank && (rank == 0 || shape);
        for (int i = 0; same && i < rank; i++) same = shape[i] == want[i];
        if (!same) {
            char got[256];
            if (rank < 0 || rank > IR_MAX_RANK || (rank && !shape)) snprintf(got, sizeof got, "(rank %d)", rank);
            else shape_str(rank, shape, got, sizeof got);
            return rt_fail(RT_ERR_WEIGHTS, err, n, "bind weight '%s': shape %s but the model declares %s", name, got, decl);
        }
    }
    if (!dev && bytes) return rt_fail(RT_ERR_INVALID, err, n, "bind weight '%s': NULL device pointer", name);
    rt_status st;
    if (!rt_model_use_device(m, "bind weight", &st, err, n)) return st;
    if (dev) { /* a host pointer here would be read by kernels as garbage: catch it */
        struct cudaPointerAttributes pa;
        rt_status probe = RT_CUDA_CHECK(cudaPointerGetAttributes(&pa, dev), NULL, NULL, 0);
        /* With HMM a kernel could even read pageable host memory, over the
         * bus, on every call: weights must live on the device. */
        if (probe != RT_OK || (pa.type != cudaMemoryTypeDevice && pa.type != cudaMemoryTypeManaged))
            return rt_fail(RT_ERR_INVALID, err, n,
                           "bind weight '%s': %p is host memory, not device memory; copy the weight to the device first "
                           "(or use kiln_model_load_safetensors)", name, dev);
    }
    set_weight(m, p, (void *)dev, false);
    return RT_OK;
}

static bool not_in_file(const rt_model *m, int param, const void *file)
{
    return !rt_st_find(file, m->g->params[param]->name);
}

rt_status rt_model_check_safetensors(const rt_model *m, const rt_st_file *f, unsigned flags, char *err, size_t n)
{
    if (err && n) err[0] = 0;
    int problems = 0;
    rt_status st = RT_OK;
    const char *path = f->path ? f->path : "safetensors";
    for (int i = 0; i < f->n; i++) {
        const rt_st_tensor *t = &f->t[i];
        int p = rt_model_find_param(m, t->name);
        if (p < 0) {
            if (flags & RT_LOAD_IGNORE_UNKNOWN) continue;
            rt_add_line(err, n, "%s: tensor '%s' is not a weight of model %s", path, t->name, m->g->name);
            problems++;
            continue;
        }
        char decl[512];
        rt_model_describe_param(m, p, decl, sizeof decl);
        if (m->g->params[p]->op != IR_OP_WEIGHT) {
            rt_add_line(err, n, "%s: tensor '%s' is %s of the model, not a weight: %s", path, t->name,
                        rt_param_kind_word(m->g->params[p]), decl);
            problems++;
            continue;
        }
        const ir_node *w = m->g->params[p];
        if (!t->kiln_dtype || t->dtype != w->type.dtype) {
            rt_add_line(err, n, "%s: tensor '%s': dtype %s but the model declares %s", path, t->name, t->dtype_str, decl);
            problems++;
            continue;
        }
        int64_t want[IR_MAX_RANK];
        size_t bytes;
        if (rt_model_param_bytes(m, p, want, &bytes) != 0) {
            rt_add_line(err, n, "%s: tensor '%s': the declared shape does not evaluate: %s", path, t->name, decl);
            problems++;
            continue;
        }
        bool same = t->rank == w->type.rank;
        for (int d = 0; same && d < t->rank; d++) same = t->shape[d] == want[d];
        if (!same) {
            char got[256];
            shape_str(t->rank, t->shape, got, sizeof got);
            rt_add_line(err, n, "%s: tensor '%s': shape %s but the model declares %s", path, t->name, got, decl);
            problems++;
        }
    }
    if (problems) st = RT_ERR_WEIGHTS;
    if (!(flags & RT_LOAD_ALLOW_MISSING)) {
        char missing[1024];
        int nmiss = rt_missing_weights(m, not_in_file, f, missing, sizeof missing);
        if (nmiss) {
            rt_add_line(err, n, "%s: %d weight%s of model %s missing from the file: %s", path, nmiss, nmiss > 1 ? "s" : "",
                        m->g->name, missing);
            if (st == RT_OK) st = RT_ERR_WEIGHTS;
        }
    }
    return st;
}

rt_status rt_model_upload_safetensors_many(rt_model *m, const rt_st_file *files, int nfiles, char *err, size_t n)
{
    rt_status st;
    if (!rt_model_use_device(m, "load weights", &st, err, n)) return st;
    const int np = m->g->nparams;
    int *fds = malloc(((size_t)nfiles + 1) * sizeof *fds);
    int *file_of = malloc(((size_t)np + 1) * sizeof *file_of);
    void **devs = calloc((size_t)np + 1, sizeof *devs); /* the buffers this call allocates */
    if (!fds || !file_of || !devs) {
        free(fds);
        free(file_of);
        free(devs);
        return rt_fail(RT_ERR_NOMEM, err, n, "load weights: out of memory");
    }
    for (int i = 0; i < nfiles; i++) fds[i] = -1;
    size_t total = 0;
    for (int i = 0; i < nfiles; i++)
        for (int k = 0; k < files[i].n; k++)
            if (rt_model_find_param(m, files[i].t[k].name) >= 0) total += (size_t)(files[i].t[k].end - files[i].t[k].begin);
    rt_upload up;
    st = rt_upload_begin(&up, m->ctx->device, total, err, n); /* the copying threads start */
    for (int i = 0; i < nfiles && st == RT_OK; i++) {
        const rt_st_file *f = &files[i];
        const char *path = f->path ? f->path : "safetensors";
        /* a mapped file is read with pread (threads reading a mapping fault on its pages one by one) */
        if (f->map && f->path) fds[i] = open(f->path, O_RDONLY | O_CLOEXEC);
        for (int k = 0; k < f->n && st == RT_OK; k++) {
            const rt_st_tensor *t = &f->t[k];
            int p = rt_model_find_param(m, t->name);
            if (p < 0 || devs[p]) continue; /* the checks allow neither a non-weight nor a tensor in two files */
            size_t bytes = (size_t)(t->end - t->begin);
            char who[512];
            snprintf(who, sizeof who, "%s: tensor '%s' (%zu bytes)", path, t->name, bytes);
            st = RT_CUDA_CHECK(cudaMalloc(&devs[p], bytes ? bytes : 1), who, err, n);
            if (st != RT_OK) {
                devs[p] = NULL;
                break;
            }
            file_of[p] = i;
            size_t off = fds[i] >= 0 ? (size_t)((const unsigned char *)t->data - (const unsigned char *)f->map) : 0;
            st = rt_upload_add(&up, devs[p], t->data, fds[i], off, bytes, who, err, n);
        }
    }
    if (st == RT_OK) st = rt_upload_run(&up, err, n);
    rt_upload_end(&up); /* after a failure: stops the threads once their copies in flight are done */
    for (int i = 0; i < nfiles; i++)
        if (fds[i] >= 0) close(fds[i]);
    for (int p = 0; p < np; p++) {
        if (!devs[p]) continue;
        if (st != RT_OK) { /* nothing of a failed load is bound */
            (void)cudaFree(devs[p]);
            continue;
        }
        set_weight(m, p, devs[p], true);
        /* the file, to read the weight again once released (NULL: never released) */
        m->weight_src[p] = files[file_of[p]].path ? realpath(files[file_of[p]].path, NULL) : NULL;
    }
    free(fds);
    free(file_of);
    free(devs);
    return st;
}

rt_status rt_model_upload_safetensors(rt_model *m, const rt_st_file *f, char *err, size_t n)
{
    return rt_model_upload_safetensors_many(m, f, 1, err, n);
}

rt_status rt_model_load_safetensors(rt_model *m, const char *path, unsigned flags, char *err, size_t n)
{
    rt_st_file f;
    rt_status st = rt_st_open(path, &f, err, n); /* RT_ERR_IO: unreadable; RT_ERR_WEIGHTS: bad contents */
    if (st != RT_OK) return st;
    st = rt_model_check_safetensors(m, &f, flags, err, n);
    if (st == RT_OK) st = rt_model_upload_safetensors(m, &f, err, n);
    rt_st_close(&f);
    return st;
}

/* ---- packed values ------------------------------------------------------------------------ */

/* Whether bind-time node nd reads weight param (through its inputs). */
static bool node_reads(const ir_node *nd, int param)
{
    if (nd->op == IR_OP_WEIGHT) return nd->param == param;
    for (int i = 0; i < nd->ninputs; i++)
        if (node_reads(nd->inputs[i], param)) return true;
    return false;
}

/* Whether a kernel of v (or its fallback: the same arguments) reads weight
 * param itself rather than a packed copy. */
static bool reads_directly(const rt_model *m, const rt_variant *v, int param)
{
    const int *packed_of = v->plan.arg_packed;
    for (int k = 0; k < v->plan.nkernels; packed_of += v->plan.kernels[k++].nargs) {
        const cg_kernel *K = &v->plan.kernels[k];
        for (int i = 0; i < K->nargs; i++)
            if (K->args[i].kind == CG_ARG_PARAM && K->args[i].index == param && packed_of[i] < 0) return true;
    }
    (void)m;
    return false;
}

/* Frees weight p when it was loaded from a file, no kernel of any variant
 * reads it itself, a packed copy reads it and every packed copy that reads it
 * is made (see the top of this file). */
static rt_status release_weight(rt_model *m, int p, char *err, size_t n)
{
    if (m->g->params[p]->op != IR_OP_WEIGHT || !m->weight_owned[p] || !m->weight_src[p] || !m->weight_ptr[p] ||
        m->weight_released[p])
        return RT_OK;
    bool direct = false, packed = false, pending = false;
    for (int i = 0; i < m->nvars && !direct; i++) direct = reads_directly(m, m->vars[i], p);
    for (int i = 0; i < m->npacked && !pending; i++)
        if (node_reads(m->g->nodes[m->packed[i].value.node], p)) {
            packed = true;
            pending = !m->packed[i].valid; /* a copy still to make reads it */
        }
    if (direct || !packed || pending) return RT_OK;
    int64_t shape[IR_MAX_RANK];
    size_t bytes;
    if (rt_model_param_bytes(m, p, shape, &bytes) != 0)
        return rt_fail(RT_ERR_INTERNAL, err, n, "weight '%s': the shape does not evaluate", m->g->params[p]->name);
    char who[512];
    snprintf(who, sizeof who, "releasing weight '%s' (packed)", m->g->params[p]->name);
    /* the packing work queued on the stream may still read it */
    RT_TRY(RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), who, err, n));
    RT_TRY(RT_CUDA_CHECK(cudaFree(m->weight_ptr[p]), who, err, n));
    m->weight_ptr[p] = NULL;
    m->weight_released[p] = true;
    m->cnt.weight_bytes_released += bytes;
    return RT_OK;
}

/* After the packs are made: frees the file-loaded weights that only packed
 * copies read (see the top of this file). */
static rt_status release_packed_weights(rt_model *m, char *err, size_t n)
{
    for (int p = 0; p < m->g->nparams; p++) RT_TRY(release_weight(m, p, err, n));
    return RT_OK;
}

/* Host bytes of weights for packing: copied from the device once per pack. */
typedef struct pack_source {
    rt_model *m;
    void **host;
} pack_source;

/* Weight `param`'s bytes from the file it was loaded from, to dst (host or
 * device memory: copied with cudaMemcpy). */
static rt_status read_from_file(rt_model *m, int param, void *dst, size_t bytes, char *err, size_t n)
{
    const char *name = m->g->params[param]->name;
    if (!m->weight_src[param]) return rt_fail(RT_ERR_WEIGHTS, err, n, "weight '%s': no file to read it from", name);
    rt_st_file f;
    rt_status st = rt_st_open(m->weight_src[param], &f, err, n);
    if (st != RT_OK) return st;
    const rt_st_tensor *t = rt_st_find(&f, name);
    if (!t || (size_t)(t->end - t->begin) != bytes || !t->kiln_dtype || t->dtype != m->g->params[param]->type.dtype)
        st = rt_fail(RT_ERR_WEIGHTS, err, n,
                     "weight '%s' was released once packed and is needed again, but %s no longer holds it as loaded",
                     name, m->weight_src[param]);
    else {
        char who[512];
        snprintf(who, sizeof who, "reading weight '%s' again from %s", name, m->weight_src[param]);
        st = RT_CUDA_CHECK(cudaMemcpy(dst, t->data, bytes, cudaMemcpyDefault), who, err, n);
    }
    rt_st_close(&f);
    return st;
}

static int pack_get(void *user, int param, const void **data, char *err, size_t n)
{
    pack_source *source = user;
    rt_model *m = source->m;
    if (!source->host[param]) {
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        if (rt_model_param_bytes(m, param, shape, &bytes) != 0) return rt_fail(-1, err, n, "weight shape does not evaluate");
        if (m->weight_released[param]) { /* from its file */
            source->host[param] = malloc(bytes + 1);
            if (!source->host[param]) return rt_fail(-1, err, n, "out of memory");
            rt_status st = read_from_file(m, param, source->host[param], bytes, err, n);
            if (st != RT_OK) return st;
            *data = source->host[param];
            return 0;
        }
        if (!m->weight_ptr[param]) return rt_fail(-1, err, n, "weight '%s' is not bound", m->g->params[param]->name);
        source->host[param] = malloc(bytes + 1);
        if (!source->host[param]) return rt_fail(-1, err, n, "out of memory");
        char who[256];
        snprintf(who, sizeof who, "reading weight '%s' from the device", m->g->params[param]->name);
        if (RT_CUDA_CHECK(cudaMemcpy(source->host[param], m->weight_ptr[param], bytes, cudaMemcpyDeviceToHost), who, err, n))
            return -1;
    }
    *data = source->host[param];
    return 0;
}

/* The host value of one packed buffer: the bind-time node, interleaved when
 * asked. *val is malloc'd. */
static rt_status pack_value(rt_model *m, const rt_packed_value *value, pack_source *source, void **val, size_t *bytes, char *err,
                      size_t n)
{
    char pack_err[1024];
    if (rt_pack_eval(m->g, m->maxd, value->node, pack_get, source, false, val, bytes, pack_err, sizeof pack_err) != 0)
        return rt_fail(RT_ERR_WEIGHTS, err, n, "packing weights (%%%d): %s", value->node, pack_err);
    const ir_node *nd = m->g->nodes[value->node];
    int64_t shape[IR_MAX_RANK];
    for (int i = 0; i < value->npairs; i++) {
        const rt_rope_pairs *q = &value->pairs[i];
        if (!ir_type_shape_at(&nd->type, m->maxd, shape, NULL) || nd->type.rank < 1 || shape[0] <= 0 ||
            !rt_pack_rope_pairs(*val, shape[0], *bytes / (size_t)shape[0], q->off, q->stride, q->heads, q->rot)) {
            free(*val);
            *val = NULL;
            return rt_fail(RT_ERR_INTERNAL, err, n, "pairing the rotated rows of %%%d (%lld heads of %lld rows from row %lld)",
                           value->node, (long long)q->heads, (long long)q->rot, (long long)q->off);
        }
    }
    if (value->half <= 0) return RT_OK;
    if (!ir_type_shape_at(&nd->type, m->maxd, shape, NULL) || nd->type.rank < 1 || shape[0] != 2 * value->half) {
        free(*val);
        *val = NULL;
        return rt_fail(RT_ERR_INTERNAL, err, n, "interleave of %%%d: %lld rows, not 2 x %lld", value->node,
                       nd->type.rank ? (long long)shape[0] : 0LL, (long long)value->half);
    }
    void *iv = malloc(*bytes + 1);
    if (!iv) {
        free(*val);
        *val = NULL;
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    rt_pack_interleave_rows(iv, *val, value->half, *bytes / (size_t)shape[0]);
    free(*val);
    *val = iv;
    return RT_OK;
}

/* ---- packing on the device (rt_pack_dev.h) ---- */

/* Device bytes of weights for packing: bound or loaded ones in place;
 * released ones read again from their files into temporaries (dev). */
typedef struct dev_source {
    rt_model *m;
    void **dev;
} dev_source;

static int dev_get(void *user, int param, const void **data, char *err, size_t n)
{
    dev_source *source = user;
    rt_model *m = source->m;
    if (!m->weight_released[param]) {
        if (!m->weight_ptr[param]) return rt_fail(RT_ERR_WEIGHTS, err, n, "weight '%s' is not bound", m->g->params[param]->name);
        *data = m->weight_ptr[param];
        return 0;
    }
    if (!source->dev[param]) {
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        if (rt_model_param_bytes(m, param, shape, &bytes) != 0) return rt_fail(-1, err, n, "weight shape does not evaluate");
        char who[512];
        snprintf(who, sizeof who, "weight '%s' (%zu bytes), read again from its file for packing", m->g->params[param]->name,
                 bytes);
        RT_TRY(RT_CUDA_CHECK(cudaMalloc(&source->dev[param], bytes ? bytes : 1), who, err, n));
        rt_status st = read_from_file(m, param, source->dev[param], bytes, err, n);
        if (st != RT_OK) {
            (void)cudaFree(source->dev[param]);
            source->dev[param] = NULL;
            return st;
        }
    }
    *data = source->dev[param];
    return 0;
}

/* The kernels of pack.cuh, compiled (through the kernel cache) and loaded at
 * the first pack that needs them; false (RT_OK) when the plan gave no source. */
static rt_status pack_kernels(rt_model *m, bool *have, char *err, size_t n)
{
    *have = m->pack_mod != NULL;
    if (*have || !m->pack_source) return RT_OK;
    rt_ctx *ctx = m->ctx;
    rt_compile_opts co = {.arch = ctx->arch};
    rt_compile_result res = {0};
    rt_cache_lookup how = RT_CACHE_MISS;
    rt_status st = rt_cache_compile(ctx->cache, "kiln_pack", m->pack_source, &co, ctx->no_cache ? RT_CACHE_NO_CACHE : 0,
                                    &res, &how);
    if (st != RT_OK) {
        rt_fail(st, err, n, "weight packing kernels: %s", res.message ? res.message : rt_status_str(st));
        rt_compile_result_free(&res);
        return st;
    }
    if (how == RT_CACHE_MISS) m->cnt.kernels_compiled++;
    st = rt_module_load(&m->pack_mod, res.code.data, res.code.size, err, n);
    rt_compile_result_free(&res);
    if (st == RT_OK) st = rt_module_kernel(m->pack_mod, "kiln_pack_rowscale", &m->pack_k.rowscale, err, n);
    if (st == RT_OK) st = rt_module_kernel(m->pack_mod, "kiln_pack_permute", &m->pack_k.permute, err, n);
    if (st != RT_OK) {
        rt_module_free(m->pack_mod);
        m->pack_mod = NULL;
        return rt_kernel_status(st);
    }
    *have = true;
    return RT_OK;
}

/* One packed value computed on the device into a new buffer *val (*bytes),
 * ready when the model's stream reaches this point. */
static rt_status pack_value_dev(rt_model *m, const rt_packed_value *value, dev_source *source, bool kernels, void **val,
                                size_t *bytes, char *err, size_t n)
{
    void *stream = m->ctx->stream;
    char pack_err[1024];
    rt_status st = rt_pack_dev_eval(m->g, m->maxd, value->node, dev_get, source, kernels ? &m->pack_k : NULL, stream, val,
                                    bytes, pack_err, sizeof pack_err);
    if (st != RT_OK) return rt_fail(st, err, n, "packing weights on the device (%%%d): %s", value->node, pack_err);
    const ir_node *nd = m->g->nodes[value->node];
    int64_t shape[IR_MAX_RANK];
    bool shaped = ir_type_shape_at(&nd->type, m->maxd, shape, NULL) && nd->type.rank >= 1 && shape[0] > 0;
    for (int i = 0; i < value->npairs && st == RT_OK; i++) {
        const rt_rope_pairs *q = &value->pairs[i];
        if (!shaped) st = rt_fail(RT_ERR_INTERNAL, err, n, "pairing the rotated rows of %%%d: no rows", value->node);
        else
            st = rt_pack_dev_rope_pairs(*val, shape[0], *bytes / (size_t)shape[0], q->off, q->stride, q->heads, q->rot,
                                        stream, err, n);
    }
    if (st == RT_OK && value->half > 0) {
        void *iv = NULL;
        if (!shaped || shape[0] != 2 * value->half)
            st = rt_fail(RT_ERR_INTERNAL, err, n, "interleave of %%%d: %lld rows, not 2 x %lld", value->node,
                         shaped ? (long long)shape[0] : 0LL, (long long)value->half);
        if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc(&iv, *bytes ? *bytes : 1), "packing weights", err, n);
        if (st == RT_OK) st = rt_pack_dev_interleave_rows(iv, *val, value->half, *bytes / (size_t)shape[0], stream, err, n);
        rt_status sync = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream), "packing weights", err, n);
        if (st == RT_OK) st = sync;
        (void)cudaFree(*val);
        *val = iv;
        if (st != RT_OK && iv) {
            (void)cudaFree(iv);
            *val = NULL;
        }
    }
    if (st != RT_OK && *val) {
        (void)cudaStreamSynchronize((cudaStream_t)stream);
        (void)cudaFree(*val);
        *val = NULL;
    }
    return st;
}

/* Installs the device buffer val (bytes) as p's value: the buffer itself, or
 * copied into p's buffer when that has the size already (graphs hold it). */
static rt_status pack_adopt(rt_model *m, rt_packed_buffer *p, void *val, size_t bytes, char *err, size_t n)
{
    cudaStream_t s = (cudaStream_t)m->ctx->stream;
    rt_status st = RT_OK;
    if (p->dev && p->bytes == bytes) {
        st = RT_CUDA_CHECK(cudaMemcpyAsync(p->dev, val, bytes, cudaMemcpyDeviceToDevice, s), "packed weights", err, n);
        rt_status sync = RT_CUDA_CHECK(cudaStreamSynchronize(s), "packed weights", err, n);
        (void)cudaFree(val);
        if (st == RT_OK) st = sync;
    } else {
        if (p->dev) (void)cudaFree(p->dev);
        p->dev = val;
        rt_graph_cache_clear(m->graphs);
    }
    if (st != RT_OK) return st;
    p->bytes = bytes;
    p->valid = true;
    return RT_OK;
}

/* Uploads val into buffer p (reallocated when its size changed). */
static rt_status pack_upload(rt_model *m, rt_packed_buffer *p, const void *val, size_t bytes, char *err, size_t n)
{
    if (p->dev && p->bytes != bytes) {
        (void)cudaFree(p->dev);
        p->dev = NULL;
        rt_graph_cache_clear(m->graphs);
    }
    char who[64];
    snprintf(who, sizeof who, "packed weights (%%%d, %zu bytes)", p->value.node, bytes);
    if (!p->dev) {
        rt_status st = RT_CUDA_CHECK(cudaMalloc(&p->dev, bytes ? bytes : 1), who, err, n);
        if (st != RT_OK) {
            p->dev = NULL;
            return st;
        }
        rt_graph_cache_clear(m->graphs);
    }
    p->bytes = bytes;
    RT_TRY(RT_CUDA_CHECK(cudaMemcpy(p->dev, val, bytes, cudaMemcpyHostToDevice), who, err, n));
    p->valid = true;
    return RT_OK;
}

rt_status rt_model_update_packs(rt_model *m, char *err, size_t n)
{
    bool any = false;
    for (int i = 0; i < m->npacked; i++) any |= !m->packed[i].valid;
    if (!any) return RT_OK;
    void **host = calloc((size_t)m->g->nparams + 1, sizeof *host);
    void **dev = calloc((size_t)m->g->nparams + 1, sizeof *dev);
    if (!host || !dev) {
        free(host);
        free(dev);
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    pack_source source = {m, host};
    dev_source dsource = {m, dev};
    /* earlier runs may still read the packed buffers */
    rt_status st = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), "packing weights", err, n);
    bool kernels = false;
    for (int i = 0; i < m->npacked && st == RT_OK && !kernels; i++) /* the kernels only when a value needs them */
        if (!m->packed[i].valid && !rt_pack_dev_supported(m->g, m->packed[i].value.node, false) &&
            rt_pack_dev_supported(m->g, m->packed[i].value.node, true))
            st = pack_kernels(m, &kernels, err, n);
    for (int i = 0; i < m->npacked && st == RT_OK; i++) {
        rt_packed_buffer *p = &m->packed[i];
        if (p->valid) continue;
        void *val = NULL;
        size_t bytes = 0;
        /* on the device wherever every node under the value allows it; the host otherwise */
        const bool on_dev = rt_pack_dev_supported(m->g, p->value.node, kernels);
        st = on_dev ? pack_value_dev(m, &p->value, &dsource, kernels, &val, &bytes, err, n)
                    : pack_value(m, &p->value, &source, &val, &bytes, err, n);
        size_t accounted = 0; /* the size rt_model_memory states (rt_memory.c) */
        if (st == RT_OK && (!rt_packed_bytes(m->g, m->maxd, p->value, &accounted) || accounted != bytes))
            st = rt_fail(RT_ERR_INTERNAL, err, n, "packed value %%%d: %zu bytes evaluated, %zu accounted", p->value.node,
                         bytes, accounted);
        if (on_dev) {
            if (st == RT_OK) {
                st = pack_adopt(m, p, val, bytes, err, n);
                val = NULL;
            }
            if (val) {
                (void)cudaStreamSynchronize((cudaStream_t)m->ctx->stream);
                (void)cudaFree(val);
            }
            if (st == RT_OK) m->cnt.packed_bytes_device += bytes;
            /* released as soon as their last packed copy is made: loading never holds every
             * weight twice (device packing reads the weights in place) */
            for (int w = 0; w < m->g->nparams && st == RT_OK; w++)
                if (m->g->params[w]->op == IR_OP_WEIGHT && node_reads(m->g->nodes[p->value.node], w))
                    st = release_weight(m, w, err, n);
        } else {
            if (st == RT_OK) st = pack_upload(m, p, val, bytes, err, n);
            free(val);
            if (st == RT_OK) m->cnt.packed_bytes_host += bytes;
        }
    }
    /* the device work is done before the temporaries go and kernels read the values */
    rt_status sync = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), "packing weights", err, n);
    if (st == RT_OK) st = sync;
    for (int i = 0; i < m->g->nparams; i++)
        if (dev[i]) (void)cudaFree(dev[i]);
    free(dev);
    if (st == RT_OK) {
        /* the uploads ran on the legacy stream: finish them before kernels read them */
        st = RT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy), "uploading packed weights", err, n);
        if (st == RT_OK) m->cnt.weight_packs++;
    }
    for (int i = 0; i < m->g->nparams; i++) free(host[i]);
    free(host);
    if (st == RT_OK) st = release_packed_weights(m, err, n);
    return st;
}

rt_status rt_model_restore_weights(rt_model *m, const rt_variant *v, char *err, size_t n)
{
    for (int p = 0; p < m->g->nparams; p++) {
        if (!m->weight_released[p] || !reads_directly(m, v, p)) continue;
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        if (rt_model_param_bytes(m, p, shape, &bytes) != 0)
            return rt_fail(RT_ERR_INTERNAL, err, n, "weight '%s': the shape does not evaluate", m->g->params[p]->name);
        void *dev = NULL;
        char who[512];
        snprintf(who, sizeof who, "weight '%s' (%zu bytes), read again for a kernel that reads it directly",
                 m->g->params[p]->name, bytes);
        RT_TRY(RT_CUDA_CHECK(cudaMalloc(&dev, bytes ? bytes : 1), who, err, n));
        rt_status st = read_from_file(m, p, dev, bytes, err, n);
        if (st != RT_OK) {
            (void)cudaFree(dev);
            return st;
        }
        m->weight_ptr[p] = dev;
        m->weight_released[p] = false;
        m->cnt.weight_bytes_released -= bytes;
        rt_graph_cache_clear(m->graphs);
    }
    return RT_OK;
}

/* ---- states ------------------------------------------------------------------------------ */

/* dst's states become src's buffers (by name, of the same bytes): a packed model prefills the
 * caches its unpacked model decodes from. */
rt_status rt_model_borrow_states(rt_model *dst, const rt_model *src, char *err, size_t n)
{
    if (!src->states_ready) return rt_fail(RT_ERR_STATE, err, n, "borrow states: model %s has no states allocated", src->g->name);
    for (int i = 0; i < dst->g->nparams; i++) {
        const ir_node *p = dst->g->params[i];
        if (p->op != IR_OP_STATE) continue;
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        int j = rt_model_find_param(src, p->name);
        if (j < 0 || src->g->params[j]->op != IR_OP_STATE || rt_model_param_bytes(dst, i, shape, &bytes) != 0 ||
            bytes != src->state_bytes[j])
            return rt_fail(RT_ERR_INVALID, err, n, "borrow states: model %s's state %s is not one of model %s's of %zu bytes",
                           dst->g->name, p->name, src->g->name, j >= 0 ? src->state_bytes[j] : (size_t)0);
    }
    if (!dst->states_borrowed && dst->ctx->has_device) /* its own, if any, go */
        (void)cudaStreamSynchronize((cudaStream_t)dst->ctx->stream);
    for (int i = 0; i < dst->g->nparams; i++)
        if (dst->g->params[i]->op == IR_OP_STATE) {
            int j = rt_model_find_param(src, dst->g->params[i]->name);
            if (!dst->states_borrowed && dst->state_ptr[i]) (void)cudaFree(dst->state_ptr[i]);
            dst->state_ptr[i] = src->state_ptr[j];
            dst->state_bytes[i] = src->state_bytes[j];
        }
    dst->states_borrowed = true;
    dst->states_ready = true;
    rt_graph_cache_clear(dst->graphs);
    return RT_OK;
}

rt_status rt_model_alloc_states(rt_model *m, char *err, size_t n)
{
    rt_status st;
    if (m->states_borrowed) return rt_fail(RT_ERR_STATE, err, n, "alloc states: model %s uses another model's states", m->g->name);
    if (!rt_model_use_device(m, "alloc states", &st, err, n)) return st;
    RT_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), err, n);
    for (int i = 0; i < m->g->nparams; i++) {
        const ir_node *p = m->g->params[i];
        if (p->op != IR_OP_STATE) continue;
        int64_t shape[IR_MAX_RANK];
        size_t bytes;
        if (rt_model_param_bytes(m, i, shape, &bytes) != 0)
            return rt_fail(RT_ERR_INTERNAL, err, n, "state '%s': the shape does not evaluate", p->name);
        char who[256];
        snprintf(who, sizeof who, "state '%s' (%zu bytes)", p->name, bytes);
        if (!m->state_ptr[i]) {
            st = RT_CUDA_CHECK(cudaMalloc(&m->state_ptr[i], bytes ? bytes : 1), who, err, n);
            if (st != RT_OK) {
                m->state_ptr[i] = NULL;
                return st;
            }
            m->state_bytes[i] = bytes;
            rt_graph_cache_clear(m->graphs);
        }
        RT_TRY(RT_CUDA_CHECK(cudaMemset(m->state_ptr[i], 0, m->state_bytes[i]), who, err, n));
    }
    /* the memsets ran on the legacy stream, which the model's non-blocking
     * stream does not wait for: finish them (not cudaDeviceSynchronize, which
     * would also wait for, and could disturb, other threads' captures) */
    RT_TRY(RT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy), "zeroing states", err, n));
    m->states_ready = true;
    return RT_OK;
}

rt_status rt_model_zero_states(rt_model *m, char *err, size_t n)
{
    if (!m->states_ready && m->nstate_params)
        return rt_fail(RT_ERR_STATE, err, n, "zero states: the states of model %s are not allocated (kiln_model_alloc_states)",
                       m->g->name);
    return rt_model_alloc_states(m, err, n);
}

rt_status rt_model_state_ptr(rt_model *m, const char *name, void **ptr, size_t *bytes, char *err, size_t n)
{
    int p = rt_model_find_param(m, name);
    if (p < 0 || m->g->params[p]->op != IR_OP_STATE)
        return rt_fail(p < 0 ? RT_ERR_NOT_FOUND : RT_ERR_INVALID, err, n, "model %s has no state '%s'%s", m->g->name, name,
                       p >= 0 ? " (it is not a state)" : "");
    if (!m->state_ptr[p])
        return rt_fail(RT_ERR_STATE, err, n, "state '%s' is not allocated: call kiln_model_alloc_states first", name);
    if (ptr) *ptr = m->state_ptr[p];
    if (bytes) *bytes = m->state_bytes[p];
    return RT_OK;
}
