/* src/kiln.c — the public C API (include/kiln.h) over the compile driver
 * (src/compile.h) and runtime/rt_model.
 *
 * This layer checks arguments, converts the public structs, and keeps the
 * error messages: the calling thread's last one (thread-local storage, the
 * only mutable state outside objects) and each object's last one. */
#define _POSIX_C_SOURCE 200809L
#include "kiln.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/rt_model.h"
#include "runtime/rt_profile.h"
#include "runtime/rt_weights.h"
#include "src/api.h"
#include "src/compile.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

_Static_assert((int)KILN_ERR_INVALID_ARGUMENT == (int)RT_ERR_INVALID && (int)KILN_ERR_NOT_FOUND == (int)RT_ERR_NOT_FOUND &&
                   (int)KILN_ERR_MODEL == (int)RT_ERR_MODEL && (int)KILN_ERR_CODEGEN == (int)RT_ERR_COMPILE &&
                   (int)KILN_ERR_WEIGHTS == (int)RT_ERR_WEIGHTS && (int)KILN_ERR_MISSING_WEIGHT == (int)RT_ERR_MISSING_WEIGHT &&
                   (int)KILN_ERR_STATE == (int)RT_ERR_STATE && (int)KILN_ERR_IO == (int)RT_ERR_IO &&
                   (int)KILN_ERR_NO_DEVICE == (int)RT_ERR_NO_DEVICE && (int)KILN_ERR_CUDA == (int)RT_ERR_CUDA &&
                   (int)KILN_ERR_OUT_OF_MEMORY == (int)RT_ERR_NOMEM && (int)KILN_ERR_INTERNAL == (int)RT_ERR_INTERNAL,
               "kiln_status and rt_status (runtime/rt_err.h) must agree");
_Static_assert(KILN_F32 == (int)IR_F32 && KILN_F16 == (int)IR_F16 && KILN_BF16 == (int)IR_BF16 &&
                   KILN_I32 == (int)IR_I32 && KILN_MAX_RANK == IR_MAX_RANK,
               "kiln_dtype must match ir_dtype");

#define ERRLEN 8192

static _Thread_local char tl_error[ERRLEN];

struct kiln_context {
    rt_ctx *rt;
    char error[ERRLEN];
};

struct kiln_model {
    kiln_context *ctx;
    rt_model *rt;
    char *describe;
    rt_profile prof;            /* the last profile (kiln_model_profile) */
    kiln_kernel_profile *prof_rows;
    char *prof_text;
    char *warnings; /* the compile's warnings (NULL: none) */
    char *fallbacks; /* the last kiln_model_fallbacks text */
    char *report_json; /* the fusion report (kiln_model_report_json) */
    char error[ERRLEN];
};

/* Record a failure: the thread's message and the object's (may be NULL). */
static kiln_status set_error(kiln_status s, char *obj, const char *msg)
{
    if (s == KILN_OK) return s;
    snprintf(tl_error, sizeof tl_error, "%s", msg && *msg ? msg : kiln_status_str(s));
    if (obj) snprintf(obj, ERRLEN, "%s", tl_error);
    return s;
}

__attribute__((format(printf, 3, 4))) static kiln_status errorf(kiln_status s, char *obj, const char *fmt, ...)
{
    char buf[ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return set_error(s, obj, buf);
}

const char *kiln_status_str(kiln_status s)
{
    switch (s) {
    case KILN_OK: return "ok";
    case KILN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case KILN_ERR_NOT_FOUND: return "not found";
    case KILN_ERR_MODEL: return "error in the model";
    case KILN_ERR_CODEGEN: return "kernel generation or compilation failed";
    case KILN_ERR_WEIGHTS: return "weights do not match the model";
    case KILN_ERR_MISSING_WEIGHT: return "weights not bound";
    case KILN_ERR_STATE: return "states not allocated or reshaped";
    case KILN_ERR_IO: return "input/output error";
    case KILN_ERR_NO_DEVICE: return "no CUDA device";
    case KILN_ERR_CUDA: return "CUDA error";
    case KILN_ERR_OUT_OF_MEMORY: return "out of memory";
    case KILN_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *kiln_last_error(void) { return tl_error; }
const char *kiln_version(void) { return "Kiln " KILN_VERSION; }

const char *kiln_dtype_name(kiln_dtype t)
{
    return (int)t >= 0 && (int)t < IR_DTYPE_COUNT ? ir_dtype_name((ir_dtype)t) : "?";
}

size_t kiln_dtype_size(kiln_dtype t)
{
    return (int)t >= 0 && (int)t < IR_DTYPE_COUNT ? (size_t)ir_dtype_size((ir_dtype)t) : 0;
}

/* ---- context -------------------------------------------------------------------- */

kiln_status kiln_context_create(kiln_context **out, const kiln_context_options *opts)
{
    if (!out) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_context_create: NULL out");
    *out = NULL;
    if (opts && opts->arch && !cg_target_known(opts->arch))
        return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_context_create: arch %s: Kiln's kernels target %s",
                      opts->arch, cg_target_archs());
    kiln_context *c = calloc(1, sizeof *c);
    if (!c) return errorf(KILN_ERR_OUT_OF_MEMORY, NULL, "kiln_context_create: out of memory");
    rt_ctx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (opts) {
        cfg.device = opts->device;
        cfg.stream = opts->stream;
        cfg.cache_dir = opts->cache_dir;
        cfg.no_cache = opts->no_cache != 0;
        cfg.no_disk_cache = opts->no_disk_cache != 0;
        cfg.arch = opts->arch;
        cfg.compile_only = opts->compile_only != 0;
        cfg.compile_threads = opts->compile_threads;
    }
    char err[ERRLEN];
    rt_status st = rt_ctx_create(&c->rt, &cfg, err, sizeof err);
    if (st != RT_OK) {
        free(c);
        return set_error((kiln_status)st, NULL, err);
    }
    *out = c;
    return KILN_OK;
}

void kiln_context_free(kiln_context *ctx)
{
    if (!ctx) return;
    rt_ctx_free(ctx->rt);
    free(ctx);
}

const char *kiln_context_arch(const kiln_context *ctx) { return ctx ? rt_ctx_arch(ctx->rt) : NULL; }
int kiln_context_has_device(const kiln_context *ctx) { return ctx && rt_ctx_has_device(ctx->rt); }
const char *kiln_context_last_error(const kiln_context *ctx) { return ctx ? ctx->error : ""; }

kiln_status kiln_device_alloc(kiln_context *ctx, size_t bytes, void **device_ptr)
{
    if (!ctx || !device_ptr) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_device_alloc: NULL argument");
    char err[ERRLEN];
    rt_status st = rt_ctx_alloc(ctx->rt, bytes, device_ptr, err, sizeof err);
    return st == RT_OK ? KILN_OK : set_error((kiln_status)st, ctx->error, err);
}

kiln_status kiln_device_free(kiln_context *ctx, void *device_ptr)
{
    if (!ctx) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_device_free: NULL context");
    char err[ERRLEN];
    rt_status st = rt_ctx_free_mem(ctx->rt, device_ptr, err, sizeof err);
    return st == RT_OK ? KILN_OK : set_error((kiln_status)st, ctx->error, err);
}

static kiln_status copy(kiln_context *ctx, void *dst, const void *src, size_t bytes, bool to_device)
{
    if (!ctx || ((!dst || !src) && bytes))
        return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_copy_to_%s: NULL argument", to_device ? "device" : "host");
    if (!bytes) return KILN_OK;
    char err[ERRLEN];
    rt_status st = rt_ctx_copy(ctx->rt, dst, src, bytes, to_device, err, sizeof err);
    return st == RT_OK ? KILN_OK : set_error((kiln_status)st, ctx->error, err);
}

kiln_status kiln_copy_to_device(kiln_context *ctx, void *device_dst, const void *host_src, size_t bytes)
{
    return copy(ctx, device_dst, host_src, bytes, true);
}

kiln_status kiln_copy_to_host(kiln_context *ctx, void *host_dst, const void *device_src, size_t bytes)
{
    return copy(ctx, host_dst, device_src, bytes, false);
}

/* ---- model ------------------------------------------------------------------------ */

static kiln_status compile(kiln_context *ctx, const char *name, const char *text, const kiln_model_options *opts,
                           kiln_model **out)
{
    if (!out) return errorf(KILN_ERR_INVALID_ARGUMENT, ctx ? ctx->error : NULL, "kiln_model_compile: NULL out");
    *out = NULL;
    if (!ctx) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_model_compile: NULL context");
    if (!name) return errorf(KILN_ERR_INVALID_ARGUMENT, ctx->error, "kiln_model_compile: NULL %s", text ? "name" : "path");
    kiln_model_options def;
    memset(&def, 0, sizeof def);
    if (!opts) opts = &def;
    if (opts->ndefines < 0 || opts->ndisabled < 0 || opts->nmax_dims < 0 || (opts->ndefines && !opts->defines) ||
        (opts->ndisabled && !opts->disabled) || (opts->nmax_dims && !opts->max_dims) || opts->nwarning_flags < 0 ||
        (opts->nwarning_flags && !opts->warning_flags) || opts->nenabled < 0 || (opts->nenabled && !opts->enabled))
        return errorf(KILN_ERR_INVALID_ARGUMENT, ctx->error, "kiln_model_compile: a count without its array");
    diag_options wopts = {0};
    for (int i = 0; i < opts->nwarning_flags; i++)
        if (!opts->warning_flags[i] || !diag_warning_flag(&wopts, opts->warning_flags[i]))
            return errorf(KILN_ERR_INVALID_ARGUMENT, ctx->error,
                          "kiln_model_compile: warning flag %d (%s) is not -Werror, -Wno-error, -W[no-]all or "
                          "-W[no-]NAME of a warning (unused-value, unused-param, stale-state, attention-layout)",
                          i, opts->warning_flags[i] ? opts->warning_flags[i] : "NULL");
    kc_define *defines = calloc((size_t)opts->ndefines + 1, sizeof *defines);
    rt_dim_value *max_dims = calloc((size_t)opts->nmax_dims + 1, sizeof *max_dims);
    kiln_model *m = calloc(1, sizeof *m);
    char *err = malloc(ERRLEN);
    if (!defines || !max_dims || !m || !err) {
        free(defines);
        free(max_dims);
        free(m);
        free(err);
        return errorf(KILN_ERR_OUT_OF_MEMORY, ctx->error, "kiln_model_compile: out of memory");
    }
    for (int i = 0; i < opts->ndefines; i++) defines[i] = (kc_define){opts->defines[i].name, opts->defines[i].value};
    for (int i = 0; i < opts->nmax_dims; i++) max_dims[i] = (rt_dim_value){opts->max_dims[i].name, opts->max_dims[i].value};
    kc_model_options mo = {.compile = {.name = name,
                                       .text = text,
                                       .defines = defines,
                                       .ndefines = opts->ndefines,
                                       .disabled = opts->disabled,
                                       .ndisabled = opts->ndisabled,
                                       .warnings = wopts,
                                       .enabled = opts->enabled,
                                       .nenabled = opts->nenabled,
                                       .head_sample = opts->head_sample != 0,
                                       .packed = opts->packed != 0},
                           .max_dims = max_dims,
                           .nmax_dims = opts->nmax_dims,
                           .run = {.no_graphs = opts->no_graphs != 0,
                                   .max_graphs = opts->max_graphs,
                                   .lazy = opts->lazy != 0,
                                   .decode_max_rows = opts->decode_max_rows,
                                   .progress = opts->progress,
                                   .progress_user = opts->progress_user,
                                   .no_pdl = opts->no_pdl != 0},
                           .report_json = &m->report_json,
                           .autotune = opts->autotune != 0};
    rt_status st = kc_compile_model(ctx->rt, &mo, &m->rt, &m->warnings, err, ERRLEN);
    free(defines);
    free(max_dims);
    kiln_status ks = (kiln_status)st;
    if (st != RT_OK) {
        set_error(ks, ctx->error, err);
        free(m);
    } else {
        m->ctx = ctx;
        *out = m;
    }
    free(err);
    return ks;
}

kiln_status kiln_model_compile_file(kiln_context *ctx, const char *path, const kiln_model_options *opts,
                                    kiln_model **out)
{
    return compile(ctx, path, NULL, opts, out);
}

kiln_status kiln_model_compile_string(kiln_context *ctx, const char *name, const char *text,
                                      const kiln_model_options *opts, kiln_model **out)
{
    if (!text) {
        if (out) *out = NULL;
        return errorf(KILN_ERR_INVALID_ARGUMENT, ctx ? ctx->error : NULL, "kiln_model_compile_string: NULL text");
    }
    return compile(ctx, name ? name : "<string>", text, opts, out);
}

void kiln_model_free(kiln_model *m)
{
    if (!m) return;
    rt_model_free(m->rt);
    free(m->describe);
    rt_profile_free(&m->prof);
    free(m->prof_rows);
    free(m->prof_text);
    free(m->warnings);
    free(m->fallbacks);
    free(m->report_json);
    free(m);
}

const char *kiln_model_last_error(const kiln_model *m) { return m ? m->error : ""; }
const char *kiln_model_warnings(const kiln_model *m) { return m && m->warnings ? m->warnings : ""; }
const char *kiln_model_name(const kiln_model *m) { return m ? rt_model_graph(m->rt)->name : NULL; }
const char *kiln_model_report_json(const kiln_model *m) { return m && m->report_json ? m->report_json : ""; }

kiln_status api_fail(kiln_status s, kiln_model *m, const char *fmt, ...)
{
    char buf[ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return set_error(s, m ? m->error : NULL, buf);
}

int api_context_device(const kiln_context *ctx) { return ctx ? rt_ctx_device(ctx->rt) : 0; }
kiln_context *api_model_context(const kiln_model *m) { return m ? m->ctx : NULL; }

#define NEED_MODEL(m, fn)                                                                  \
    do {                                                                                   \
        if (!(m)) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "%s: NULL model", fn);   \
    } while (0)

/* Public dims -> values per symbol. */
static kiln_status resolve_dims(kiln_model *m, const kiln_dim *dims, int ndims, bool fill_max, int64_t *out)
{
    if (ndims < 0 || (ndims > 0 && !dims)) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "dims: NULL array with %d entries", ndims);
    rt_dim_value dv[IR_MAX_SYMS * 2];
    if (ndims > (int)(sizeof dv / sizeof dv[0]))
        return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "dims: %d entries (the model has %d dims)", ndims,
                      rt_model_graph(m->rt)->nsyms);
    for (int i = 0; i < ndims; i++) dv[i] = (rt_dim_value){dims[i].name, dims[i].value};
    char err[1024];
    rt_status st = rt_model_resolve_dims(m->rt, dv, ndims, fill_max, out, err, sizeof err);
    return set_error((kiln_status)st, m->error, err);
}

kiln_status kiln_model_prepare(kiln_model *m, const kiln_dim *dims, int ndims)
{
    NEED_MODEL(m, "kiln_model_prepare");
    int64_t d[IR_MAX_SYMS];
    kiln_status s = resolve_dims(m, dims, ndims, false, d);
    if (s != KILN_OK) return s;
    char err[ERRLEN];
    return set_error((kiln_status)rt_model_prepare(m->rt, d, err, sizeof err), m->error, err);
}

kiln_status kiln_model_fallbacks(kiln_model *m, const kiln_dim *dims, int ndims, const char **text)
{
    NEED_MODEL(m, "kiln_model_fallbacks");
    if (!text) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_fallbacks: NULL text");
    *text = "";
    int64_t d[IR_MAX_SYMS];
    kiln_status s = resolve_dims(m, dims, ndims, true, d);
    if (s != KILN_OK) return s;
    free(m->fallbacks);
    m->fallbacks = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&m->fallbacks, &len);
    if (!f) return errorf(KILN_ERR_OUT_OF_MEMORY, m->error, "kiln_model_fallbacks: out of memory");
    char err[ERRLEN];
    int count;
    rt_status st = rt_model_fallbacks(m->rt, d, f, &count, err, sizeof err);
    fclose(f);
    if (st != RT_OK) return set_error((kiln_status)st, m->error, err);
    *text = m->fallbacks ? m->fallbacks : "";
    return KILN_OK;
}

int kiln_model_num_dims(const kiln_model *m) { return m ? rt_model_graph(m->rt)->nsyms : 0; }

const char *kiln_model_dim_name(const kiln_model *m, int i)
{
    if (!m || i < 0 || i >= rt_model_graph(m->rt)->nsyms) return NULL;
    return rt_model_graph(m->rt)->syms[i];
}

int64_t kiln_model_max_dim(const kiln_model *m, int i)
{
    if (!m || i < 0 || i >= rt_model_graph(m->rt)->nsyms) return -1;
    return rt_model_max_dims(m->rt)[i];
}

static ir_op kind_op(kiln_tensor_kind k)
{
    return k == KILN_INPUT ? IR_OP_INPUT : k == KILN_WEIGHT ? IR_OP_WEIGHT : IR_OP_STATE;
}

int kiln_model_num_tensors(const kiln_model *m, kiln_tensor_kind kind)
{
    if (!m) return 0;
    const ir_graph *g = rt_model_graph(m->rt);
    if (kind == KILN_OUTPUT) return g->noutputs;
    if (kind != KILN_INPUT && kind != KILN_WEIGHT && kind != KILN_STATE) return 0;
    int n = 0;
    for (int i = 0; i < g->nparams; i++) n += g->params[i]->op == kind_op(kind);
    return n;
}

static kiln_status fill_info(kiln_model *m, const ir_type *t, const char *name, kiln_tensor_kind kind,
                             const int64_t *dims, kiln_tensor_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = name;
    out->kind = kind;
    out->dtype = (kiln_dtype)t->dtype;
    out->rank = t->rank;
    int64_t numel;
    if (!ir_type_shape_at(t, dims, out->shape, &numel))
        return errorf(KILN_ERR_INTERNAL, m->error, "tensor '%s': shape does not evaluate", name);
    out->bytes = (size_t)numel * (size_t)ir_dtype_size(t->dtype);
    return KILN_OK;
}

kiln_status kiln_model_tensor(const kiln_model *cm, kiln_tensor_kind kind, int i, const kiln_dim *dims, int ndims,
                              kiln_tensor_info *out)
{
    kiln_model *m = (kiln_model *)cm;
    NEED_MODEL(m, "kiln_model_tensor");
    if (!out) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_tensor: NULL out");
    int64_t d[IR_MAX_SYMS];
    kiln_status s = resolve_dims(m, dims, ndims, true, d);
    if (s != KILN_OK) return s;
    const ir_graph *g = rt_model_graph(m->rt);
    if (kind == KILN_OUTPUT) {
        if (i < 0 || i >= g->noutputs)
            return errorf(KILN_ERR_NOT_FOUND, m->error, "kiln_model_tensor: no output %d (%d outputs)", i, g->noutputs);
        s = fill_info(m, &g->outputs[i].value->type, g->outputs[i].name, kind, d, out);
        if (s == KILN_OK) out->type = rt_model_type_text(m->rt, g->nparams + i);
        return s;
    }
    if (kind != KILN_INPUT && kind != KILN_WEIGHT && kind != KILN_STATE)
        return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_tensor: bad kind %d", (int)kind);
    int k = 0;
    for (int p = 0; p < g->nparams; p++) {
        if (g->params[p]->op != kind_op(kind)) continue;
        if (k++ == i) {
            s = fill_info(m, &g->params[p]->type, g->params[p]->name, kind, d, out);
            if (s == KILN_OK) out->type = rt_model_type_text(m->rt, p);
            return s;
        }
    }
    return errorf(KILN_ERR_NOT_FOUND, m->error, "kiln_model_tensor: no tensor %d of that kind (%d of them)", i, k);
}

kiln_status kiln_model_find_tensor(const kiln_model *cm, const char *name, const kiln_dim *dims, int ndims,
                                   kiln_tensor_info *out)
{
    kiln_model *m = (kiln_model *)cm;
    NEED_MODEL(m, "kiln_model_find_tensor");
    if (!name || !out) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_find_tensor: NULL argument");
    const ir_graph *g = rt_model_graph(m->rt);
    for (kiln_tensor_kind k = KILN_INPUT; k <= KILN_STATE; k++) {
        int n = kiln_model_num_tensors(m, k);
        for (int i = 0; i < n; i++) {
            kiln_tensor_info t;
            kiln_status s = kiln_model_tensor(m, k, i, dims, ndims, &t);
            if (s != KILN_OK) return s;
            if (!strcmp(t.name, name)) {
                *out = t;
                return KILN_OK;
            }
        }
    }
    return errorf(KILN_ERR_NOT_FOUND, m->error, "model %s has no input, output, weight or state '%s'", g->name, name);
}

int kiln_model_num_kernels(const kiln_model *m) { return m ? rt_model_num_kernels(m->rt) : 0; }

kiln_status kiln_model_kernel(const kiln_model *m, int i, kiln_kernel_info *out)
{
    if (!m || !out) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_model_kernel: NULL argument");
    const cg_kernel *k = rt_model_kernel(m->rt, i);
    if (!k)
        return errorf(KILN_ERR_NOT_FOUND, NULL, "kiln_model_kernel: no kernel %d (the model has %d)", i,
                      rt_model_num_kernels(m->rt));
    out->name = k->name;
    out->kind = k->kind;
    out->template_file = k->lt.chosen ? "cublasLt" : cg_family_template(k->family);
    out->config = k->config ? k->config : "";
    out->fallback = k->fallback && !k->lt.chosen ? cg_family_template(k->fallback->family) : NULL;
    out->implementation = k->lt_note;
    return KILN_OK;
}

const char *kiln_model_describe(kiln_model *m)
{
    if (!m) return "";
    free(m->describe);
    m->describe = rt_model_describe(m->rt);
    return m->describe ? m->describe : "";
}

/* ---- device memory ------------------------------------------------------------------ */

kiln_status kiln_model_memory(const kiln_model *m, kiln_memory_kind kind, kiln_memory_info *out)
{
    if (!m || !out) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_model_memory: NULL argument");
    memset(out, 0, sizeof *out);
    rt_memory mem;
    char err[512];
    if (kind == KILN_MEMORY_PLANNED) mem = *rt_model_planned_memory(m->rt);
    else if (kind == KILN_MEMORY_REQUIRED || kind == KILN_MEMORY_ALLOCATED) {
        rt_status st = kind == KILN_MEMORY_REQUIRED ? rt_model_memory(m->rt, &mem, NULL, err, sizeof err)
                                                   : rt_model_memory(m->rt, NULL, &mem, err, sizeof err);
        if (st != RT_OK) return errorf((kiln_status)st, NULL, "kiln_model_memory: %s", err);
    } else
        return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_model_memory: kind %d is not a kiln_memory_kind", (int)kind);
    *out = (kiln_memory_info){mem.intermediates, mem.workspaces, mem.packed, mem.states};
    return KILN_OK;
}

/* ---- weights ------------------------------------------------------------------------ */

kiln_status kiln_model_bind_weight(kiln_model *m, const char *name, const void *device_ptr)
{
    NEED_MODEL(m, "kiln_model_bind_weight");
    if (!name) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_bind_weight: NULL name");
    char err[ERRLEN];
    return set_error((kiln_status)rt_model_bind_weight(m->rt, name, 0, IR_F32, 0, NULL, device_ptr, err, sizeof err),
                     m->error, err);
}

kiln_status kiln_model_bind_weight_checked(kiln_model *m, const char *name, kiln_dtype dtype, int rank,
                                           const int64_t *shape, const void *device_ptr)
{
    NEED_MODEL(m, "kiln_model_bind_weight_checked");
    if (!name) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_bind_weight_checked: NULL name");
    if ((int)dtype < 0 || (int)dtype >= IR_DTYPE_COUNT)
        return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_bind_weight_checked: bad dtype %d", (int)dtype);
    char err[ERRLEN];
    return set_error((kiln_status)rt_model_bind_weight(m->rt, name, 1, (ir_dtype)dtype, rank, shape, device_ptr, err,
                                                       sizeof err),
                     m->error, err);
}

/* A weight file (load: rt_model_load_safetensors or rt_model_load_checkpoint) with KILN_LOAD_* flags. */
static kiln_status load_weights(kiln_model *m, const char *fn, const char *path, unsigned flags,
                                rt_status (*load)(rt_model *, const char *, unsigned, char *, size_t))
{
    NEED_MODEL(m, fn);
    if (!path) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "%s: NULL path", fn);
    if (flags & ~(unsigned)(KILN_LOAD_IGNORE_UNKNOWN | KILN_LOAD_ALLOW_MISSING))
        return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "%s: unknown flags 0x%x", fn, flags);
    unsigned rf = ((flags & KILN_LOAD_IGNORE_UNKNOWN) ? RT_LOAD_IGNORE_UNKNOWN : 0) |
                  ((flags & KILN_LOAD_ALLOW_MISSING) ? RT_LOAD_ALLOW_MISSING : 0);
    char *err = malloc(ERRLEN);
    if (!err) return errorf(KILN_ERR_OUT_OF_MEMORY, m->error, "out of memory");
    err[0] = 0;
    kiln_status s = set_error((kiln_status)load(m->rt, path, rf, err, ERRLEN), m->error, err);
    free(err);
    return s;
}

kiln_status kiln_model_load_safetensors_ex(kiln_model *m, const char *path, unsigned flags)
{
    return load_weights(m, "kiln_model_load_safetensors", path, flags, rt_model_load_safetensors);
}

kiln_status kiln_model_load_safetensors(kiln_model *m, const char *path)
{
    return kiln_model_load_safetensors_ex(m, path, 0);
}

/* issue 13: Hugging Face checkpoints (one file or an index with shards) */
kiln_status kiln_model_load_checkpoint(kiln_model *m, const char *path, unsigned flags)
{
    return load_weights(m, "kiln_model_load_checkpoint", path, flags, rt_model_load_checkpoint);
}

kiln_status kiln_safetensors_write(const char *path, const kiln_host_tensor *tensors, int n)
{
    if (!path || n < 0 || (n > 0 && !tensors))
        return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_safetensors_write: NULL path or tensors");
    rt_st_out *o = calloc((size_t)n + 1, sizeof *o);
    if (!o) return errorf(KILN_ERR_OUT_OF_MEMORY, NULL, "kiln_safetensors_write: out of memory");
    for (int i = 0; i < n; i++) {
        if ((int)tensors[i].dtype < 0 || (int)tensors[i].dtype >= IR_DTYPE_COUNT) {
            free(o);
            return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_safetensors_write: tensor %d: bad dtype", i);
        }
        o[i] = (rt_st_out){tensors[i].name, (ir_dtype)tensors[i].dtype, tensors[i].rank, tensors[i].shape, tensors[i].data};
    }
    char err[1024];
    rt_status st = rt_safetensors_write(path, o, n, err, sizeof err);
    free(o);
    if (st != RT_OK) return set_error((kiln_status)st, NULL, err);
    return KILN_OK;
}

/* ---- states ---------------------------------------------------------------------------- */

kiln_status kiln_model_alloc_states(kiln_model *m)
{
    NEED_MODEL(m, "kiln_model_alloc_states");
    char err[ERRLEN];
    return set_error((kiln_status)rt_model_alloc_states(m->rt, err, sizeof err), m->error, err);
}

kiln_status kiln_model_zero_states(kiln_model *m)
{
    NEED_MODEL(m, "kiln_model_zero_states");
    char err[ERRLEN];
    return set_error((kiln_status)rt_model_zero_states(m->rt, err, sizeof err), m->error, err);
}

kiln_status kiln_model_state_ptr(kiln_model *m, const char *name, void **device_ptr, size_t *bytes)
{
    NEED_MODEL(m, "kiln_model_state_ptr");
    if (!name || !device_ptr) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_state_ptr: NULL argument");
    *device_ptr = NULL;
    char err[ERRLEN];
    return set_error((kiln_status)rt_model_state_ptr(m->rt, name, device_ptr, bytes, err, sizeof err), m->error, err);
}

/* ---- running ---------------------------------------------------------------------------------- */

kiln_status kiln_model_run(kiln_model *m, const kiln_dim *dims, int ndims, const kiln_tensor_arg *inputs, int ninputs,
                           const kiln_tensor_arg *outputs, int noutputs, void *stream)
{
    NEED_MODEL(m, "kiln_model_run");
    if (ninputs < 0 || noutputs < 0 || (ninputs && !inputs) || (noutputs && !outputs))
        return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_run: a count without its array");
    int64_t d[IR_MAX_SYMS];
    kiln_status s = resolve_dims(m, dims, ndims, false, d);
    if (s != KILN_OK) return s;
    _Static_assert(sizeof(kiln_tensor_arg) == sizeof(rt_tensor_ptr), "kiln_tensor_arg layout");
    char *err = malloc(ERRLEN);
    if (!err) return errorf(KILN_ERR_OUT_OF_MEMORY, m->error, "out of memory");
    err[0] = 0;
    s = set_error((kiln_status)rt_model_run(m->rt, d, (const rt_tensor_ptr *)inputs, ninputs,
                                            (const rt_tensor_ptr *)outputs, noutputs, stream, err, ERRLEN),
                  m->error, err);
    free(err);
    return s;
}

kiln_status kiln_model_sync(kiln_model *m)
{
    NEED_MODEL(m, "kiln_model_sync");
    char err[1024];
    return set_error((kiln_status)rt_model_sync(m->rt, err, sizeof err), m->error, err);
}

kiln_status kiln_model_set_packed(kiln_model *m, const void *device_table)
{
    NEED_MODEL(m, "kiln_model_set_packed");
    rt_model_set_seqs(m->rt, device_table);
    return KILN_OK;
}

kiln_status kiln_packed_table(const int *lens, int nseq, int32_t *table, int *total)
{
    if (!lens || !table || !total || nseq < 1) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_packed_table: no lengths, table or total, or nseq %d < 1", nseq);
    int t = 0;
    table[0] = 0;
    for (int b = 0; b < nseq; b++) {
        if (lens[b] < 1) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_packed_table: sequence %d has %d tokens", b, lens[b]);
        table[b + 1] = t += lens[b];
    }
    for (int b = 0, k = 0; b < nseq; b++)
        for (int i = 0; i < lens[b]; i++) table[nseq + 1 + k++] = b;
    *total = t;
    return KILN_OK;
}

kiln_status kiln_model_set_slot_table(kiln_model *m, const void *device_slots)
{
    NEED_MODEL(m, "kiln_model_set_slot_table");
    rt_model_set_slots(m->rt, device_slots);
    return KILN_OK;
}

kiln_status kiln_model_counters(const kiln_model *m, kiln_counters *out)
{
    if (!m || !out) return errorf(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_model_counters: NULL argument");
    rt_model_counters c;
    rt_model_get_counters(m->rt, &c);
    memset(out, 0, sizeof *out);
    out->kernels_compiled = c.kernels_compiled;
    out->cache_hits_memory = c.cache_hits_memory;
    out->cache_hits_disk = c.cache_hits_disk;
    out->variants = c.variants;
    out->runs = c.runs;
    out->launches = c.launches;
    out->graph_captures = c.graph_captures;
    out->graph_replays = c.graph_replays;
    out->graph_updates = c.graph_updates;
    out->eager_runs = c.eager_runs;
    out->eager_fallbacks = c.eager_fallbacks;
    out->weight_packs = c.weight_packs;
    out->tma_fallbacks = c.tma_fallbacks;
    out->weight_bytes_released = c.weight_bytes_released;
    out->packed_bytes_device = c.packed_bytes_device;
    out->packed_bytes_host = c.packed_bytes_host;
    out->plan_cache_hits = c.plan_cache_hits;
    out->codegen_runs = c.codegen_runs;
    return KILN_OK;
}

/* ---- profiling -------------------------------------------------------------------------------- */

kiln_status kiln_context_ceilings(kiln_context *ctx, int remeasure, kiln_ceilings *out)
{
    if (!ctx || !out) return errorf(KILN_ERR_INVALID_ARGUMENT, ctx ? ctx->error : NULL, "kiln_context_ceilings: NULL argument");
    memset(out, 0, sizeof *out);
    rt_ceilings c;
    bool from_file = false;
    char *path = NULL, err[1024] = "";
    kiln_status s = (kiln_status)rt_ctx_ceilings(ctx->rt, NULL, remeasure != 0, &c, &from_file, &path, err, sizeof err);
    if (s != KILN_OK) return set_error(s, ctx->error, err);
    out->read_bw = c.read_bw;
    out->bf16_flops = c.bf16_rate;
    out->f16_flops = c.f16_rate;
    snprintf(out->device, sizeof out->device, "%s", c.device);
    snprintf(out->measured, sizeof out->measured, "%s", c.measured);
    out->from_cache = from_file;
    snprintf(out->path, sizeof out->path, "%s", path ? path : "");
    char *js = rt_ceilings_json(&c);
    snprintf(out->json, sizeof out->json, "%s", js ? js : "{}");
    free(js);
    free(path);
    return KILN_OK;
}

/* The profile as public rows, and the table as text. */
static kiln_status publish_profile(kiln_model *m, kiln_profile *out)
{
    rt_profile *p = &m->prof;
    m->prof_rows = calloc((size_t)p->nk + 1, sizeof *m->prof_rows);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!m->prof_rows || !f) {
        if (f) fclose(f);
        free(text);
        return errorf(KILN_ERR_OUT_OF_MEMORY, m->error, "out of memory");
    }
    rt_profile_print(p, f);
    fclose(f);
    m->prof_text = text;
    for (int i = 0; i < p->nk; i++) {
        const rt_prof_kernel *k = &p->k[i];
        kiln_kernel_profile *r = &m->prof_rows[i];
        double us = k->median_us, bytes = (double)ir_cost_bytes(&k->cost);
        *r = (kiln_kernel_profile){k->name, k->kind, k->tmpl, k->constants, k->lines, k->group, k->samples,
                                   k->median_us, k->p10_us, k->p90_us, ir_cost_bytes(&k->cost), k->cost.flops,
                                   us > 0 ? bytes / (us * 1e6) : 0, us > 0 ? k->cost.flops / (us * 1e6) : 0,
                                   k->floor.t * 1e6, k->floor.flops_bound, us > 0 ? 100 * k->floor.t * 1e6 / us : 0,
                                   p->layer_median_us > 0 ? us / p->layer_median_us : 0};
    }
    *out = (kiln_profile){p->runs, p->nk, m->prof_rows, p->layer_median_us, p->layer_p10_us, p->layer_p90_us,
                          p->bubbles_median_us, p->bubbles_p10_us, p->bubbles_p90_us, p->layer_floor.t * 1e6,
                          p->layer_floor.flops_bound, ir_cost_bytes(&p->layer), p->layer.flops, p->sum_floor_us,
                          p->bw, p->rate, m->prof_text};
    return KILN_OK;
}

kiln_status kiln_model_profile(kiln_model *m, const kiln_dim *dims, int ndims, const kiln_tensor_arg *inputs,
                               int ninputs, const kiln_tensor_arg *outputs, int noutputs,
                               const kiln_profile_options *opts, kiln_profile *out)
{
    NEED_MODEL(m, "kiln_model_profile");
    if (!out || ninputs < 0 || noutputs < 0 || (ninputs && !inputs) || (noutputs && !outputs))
        return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_profile: NULL output or a count without its array");
    kiln_profile_options def;
    memset(&def, 0, sizeof def);
    if (!opts) opts = &def;
    if (opts->runs < 0) return errorf(KILN_ERR_INVALID_ARGUMENT, m->error, "kiln_model_profile: runs %d < 0", opts->runs);
    memset(out, 0, sizeof *out);
    int64_t d[IR_MAX_SYMS];
    kiln_status s = resolve_dims(m, dims, ndims, false, d);
    if (s != KILN_OK) return s;
    rt_profile_free(&m->prof);
    free(m->prof_rows);
    free(m->prof_text);
    m->prof_rows = NULL;
    m->prof_text = NULL;
    rt_profile_opts ro = {.runs = opts->runs, .peak_bw = opts->peak_bw, .peak_flops = opts->peak_flops};
    char *err = malloc(ERRLEN);
    if (!err) return errorf(KILN_ERR_OUT_OF_MEMORY, m->error, "out of memory");
    err[0] = 0;
    s = (kiln_status)rt_model_profile(m->rt, d, (const rt_tensor_ptr *)inputs, ninputs, (const rt_tensor_ptr *)outputs,
                                      noutputs, &ro, &m->prof, err, ERRLEN);
    if (s == KILN_OK && opts->json_path && rt_profile_write_json(&m->prof, opts->json_path, err, ERRLEN) != 0) s = KILN_ERR_IO;
    if (s == KILN_OK && opts->trace_path && rt_profile_write_trace(&m->prof, opts->trace_path, err, ERRLEN) != 0) s = KILN_ERR_IO;
    if (s == KILN_OK && opts->roofline_path && rt_profile_write_svg(&m->prof, opts->roofline_path, err, ERRLEN) != 0)
        s = KILN_ERR_IO;
    if (s == KILN_OK) s = publish_profile(m, out);
    else set_error(s, m->error, err);
    free(err);
    return s;
}

/* issue 13: what src/kiln_generate.c needs of a model (src/kiln_generate.h) */
rt_model *kiln_model_rt_(kiln_model *m) { return m->rt; }
kiln_status kiln_model_fail_(kiln_model *m, kiln_status s, const char *msg) { return set_error(s, m ? m->error : NULL, msg); }
