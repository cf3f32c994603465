/* src/kiln_dlpack.c — the C API's DLPack entry points (include/kiln.h,
 * "DLPack"): tensors checked against the model's declarations and handed to
 * kiln_model_run / kiln_model_bind_weight_checked; states and new device
 * memory handed out as DLManagedTensor (and DLManagedTensorVersioned where
 * the DLPack header has it). Built on the public API alone. */
#define _POSIX_C_SOURCE 200809L
#include <dlpack/dlpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/api.h"

#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
#define KILN_DLPACK_VERSIONED 1
#endif

static const DLTensor *arg_tensor(const kiln_dlpack_arg *a)
{
    if (a->tensor) return &a->tensor->dl_tensor;
#ifdef KILN_DLPACK_VERSIONED
    if (a->versioned) return &a->versioned->dl_tensor;
#endif
    return NULL;
}

static bool from_dl(DLDataType t, kiln_dtype *out)
{
    if (t.lanes != 1) return false;
    if (t.code == kDLFloat && t.bits == 32) *out = KILN_F32;
    else if (t.code == kDLFloat && t.bits == 16) *out = KILN_F16;
    else if (t.code == kDLBfloat && t.bits == 16) *out = KILN_BF16;
    else if (t.code == kDLInt && t.bits == 32) *out = KILN_I32;
    else return false;
    return true;
}

static DLDataType to_dl(kiln_dtype d)
{
    DLDataType t = {kDLFloat, 32, 1};
    if (d == KILN_F16) t.bits = 16;
    else if (d == KILN_BF16) t.code = kDLBfloat, t.bits = 16;
    else if (d == KILN_I32) t.code = kDLInt;
    return t;
}

static void shape_str(const int64_t *shape, int rank, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* The dims each tensor gives: an axis declared as a dim alone. */
static kiln_status infer_dims(kiln_model *m, const kiln_dlpack_arg *args, int nargs, const char **from, kiln_dim *dims)
{
    int nd = kiln_model_num_dims(m);
    for (int a = 0; a < nargs; a++) {
        const DLTensor *t = arg_tensor(&args[a]);
        kiln_tensor_info info;
        if (!t || kiln_model_find_tensor(m, args[a].name, NULL, 0, &info) != KILN_OK) continue; /* reported later */
        const char *p = strchr(info.type, '[');
        for (int axis = 0; p && *p && *p != ']' && axis < t->ndim; axis++) {
            p++;
            while (*p == ' ') p++;
            size_t len = strcspn(p, ",]");
            size_t tl = len;
            while (tl && p[tl - 1] == ' ') tl--;
            for (int d = 0; d < nd; d++) {
                const char *name = kiln_model_dim_name(m, d);
                if (strlen(name) != tl || strncmp(p, name, tl)) continue;
                if (from[d] && dims[d].value != t->shape[axis])
                    return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "dims: '%s' gives %s=%lld, but '%s' gives %s=%lld",
                                    from[d], name, (long long)dims[d].value, args[a].name, name,
                                    (long long)t->shape[axis]);
                dims[d] = (kiln_dim){name, t->shape[axis]};
                from[d] = args[a].name;
            }
            p += len;
        }
    }
    return KILN_OK;
}

/* t against the declaration of `name` at dims: its dtype, shape, layout and
 * device; *ptr: its first element. */
static kiln_status check_tensor(kiln_model *m, const char *call, const kiln_dlpack_arg *a, const kiln_dim *dims,
                                int ndims, kiln_tensor_info *info, void **ptr)
{
    const DLTensor *t = arg_tensor(a);
    if (!a->name || !t)
        return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: a tensor without a name or a DLPack tensor", call);
#ifndef KILN_DLPACK_VERSIONED
    if (a->versioned && !a->tensor)
        return api_fail(KILN_ERR_INVALID_ARGUMENT, m,
                        "%s: '%s': this Kiln was built with a DLPack header without DLManagedTensorVersioned", call,
                        a->name);
#endif
    kiln_status st = kiln_model_find_tensor(m, a->name, dims, ndims, info);
    if (st != KILN_OK) return st;
    kiln_dtype dt;
    if (!from_dl(t->dtype, &dt) || dt != info->dtype)
        return api_fail(KILN_ERR_INVALID_ARGUMENT, m,
                        "%s: '%s' has DLPack dtype (code %d, %d bits, %d lanes), but the model declares %s", call,
                        a->name, t->dtype.code, t->dtype.bits, t->dtype.lanes, info->type);
    bool same = t->ndim == info->rank && t->shape;
    for (int i = 0; same && i < info->rank; i++) same = t->shape[i] == info->shape[i];
    if (!same) {
        char got[256] = "?", want[256];
        if (t->shape && t->ndim >= 0 && t->ndim <= KILN_MAX_RANK) shape_str(t->shape, t->ndim, got, sizeof got);
        shape_str(info->shape, info->rank, want, sizeof want);
        return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: '%s' has shape %s, but the model declares %s: %s at these dims",
                        call, a->name, got, info->type, want);
    }
    if (t->strides) {
        int64_t expect = 1;
        for (int i = info->rank - 1; i >= 0; i--) {
            if (info->shape[i] != 1 && t->strides[i] != expect)
                return api_fail(KILN_ERR_INVALID_ARGUMENT, m,
                                "%s: '%s' is not contiguous (stride %lld on axis %d, row-major needs %lld): make it "
                                "contiguous first", call, a->name, (long long)t->strides[i], i, (long long)expect);
            expect *= info->shape[i];
        }
    }
    int dev = api_context_device(api_model_context(m));
    if (t->device.device_type != kDLCUDA && t->device.device_type != kDLCUDAManaged)
        return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: '%s' is not CUDA memory (DLPack device type %d)", call,
                        a->name, (int)t->device.device_type);
    if (t->device.device_id != dev)
        return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: '%s' is on CUDA device %d, the model's context on %d", call,
                        a->name, t->device.device_id, dev);
    *ptr = (char *)t->data + t->byte_offset;
    return KILN_OK;
}

kiln_status kiln_model_run_dlpack(kiln_model *m, const kiln_dim *dims, int ndims, const kiln_dlpack_arg *inputs,
                                  int ninputs, const kiln_dlpack_arg *outputs, int noutputs, void *stream)
{
    const char *call = "kiln_model_run_dlpack";
    if (!m) return api_fail(KILN_ERR_INVALID_ARGUMENT, NULL, "%s: NULL model", call);
    if (ninputs < 0 || noutputs < 0 || (ninputs && !inputs) || (noutputs && !outputs) || ndims < 0 || (ndims && !dims))
        return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: a count without its array", call);
    kiln_dim inferred[64];
    if (!ndims) {
        int nd = kiln_model_num_dims(m);
        const char *from[64] = {0};
        if (nd > 64) return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: too many dims to infer", call);
        kiln_status st = infer_dims(m, inputs, ninputs, from, inferred);
        if (st == KILN_OK) st = infer_dims(m, outputs, noutputs, from, inferred);
        if (st != KILN_OK) return st;
        for (int d = 0; d < nd; d++)
            if (!from[d])
                return api_fail(KILN_ERR_INVALID_ARGUMENT, m,
                                "%s: no tensor has an axis declared as %s alone: give the dims", call,
                                kiln_model_dim_name(m, d));
        dims = inferred;
        ndims = nd;
    }
    kiln_tensor_arg *args = calloc((size_t)ninputs + (size_t)noutputs + 1, sizeof *args);
    if (!args) return api_fail(KILN_ERR_OUT_OF_MEMORY, m, "%s: out of memory", call);
    kiln_status st = KILN_OK;
    for (int i = 0; i < ninputs + noutputs && st == KILN_OK; i++) {
        const kiln_dlpack_arg *a = i < ninputs ? &inputs[i] : &outputs[i - ninputs];
        kiln_tensor_info info;
        st = check_tensor(m, call, a, dims, ndims, &info, &args[i].ptr);
        args[i].name = a->name;
        if (st == KILN_OK && (i < ninputs) != (info.kind == KILN_INPUT))
            st = api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: '%s' is not an %s of the model", call, a->name,
                          i < ninputs ? "input" : "output");
    }
    if (st == KILN_OK) st = kiln_model_run(m, dims, ndims, args, ninputs, args + ninputs, noutputs, stream);
    free(args);
    return st;
}

kiln_status kiln_model_bind_weight_dlpack(kiln_model *m, const kiln_dlpack_arg *w)
{
    const char *call = "kiln_model_bind_weight_dlpack";
    if (!m || !w) return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: NULL argument", call);
    kiln_tensor_info info;
    void *ptr;
    kiln_status st = check_tensor(m, call, w, NULL, 0, &info, &ptr);
    if (st != KILN_OK) return st;
    return kiln_model_bind_weight_checked(m, w->name, info.dtype, info.rank, info.shape, ptr);
}

/* ---- tensors handed out ---- */

typedef struct owned {
    DLManagedTensor mt;
#ifdef KILN_DLPACK_VERSIONED
    DLManagedTensorVersioned vt;
#endif
    int64_t shape[KILN_MAX_RANK];
    kiln_context *ctx; /* frees mem */
    void *mem;
} owned;

static void owned_free(owned *o)
{
    if (o->mem) kiln_device_free(o->ctx, o->mem);
    free(o);
}

static void delete_mt(DLManagedTensor *self) { owned_free(self->manager_ctx); }
#ifdef KILN_DLPACK_VERSIONED
static void delete_vt(DLManagedTensorVersioned *self) { owned_free(self->manager_ctx); }
#endif

/* A tensor over ptr, device memory of dtype and shape. */
static owned *make_owned(kiln_context *ctx, void *ptr, bool own, kiln_dtype dtype, int rank, const int64_t *shape)
{
    owned *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    memcpy(o->shape, shape, sizeof *shape * (size_t)rank);
    o->ctx = ctx;
    o->mem = own ? ptr : NULL;
    DLTensor t = {.data = ptr, .device = {kDLCUDA, api_context_device(ctx)}, .ndim = rank, .dtype = to_dl(dtype),
                  .shape = o->shape, .strides = NULL, .byte_offset = 0};
    o->mt = (DLManagedTensor){.dl_tensor = t, .manager_ctx = o, .deleter = delete_mt};
#ifdef KILN_DLPACK_VERSIONED
    o->vt = (DLManagedTensorVersioned){.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .manager_ctx = o,
                                       .deleter = delete_vt, .flags = 0, .dl_tensor = t};
#endif
    return o;
}

static kiln_status state_owned(kiln_model *m, const char *call, const char *name, owned **out)
{
    *out = NULL;
    if (!m || !name) return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "%s: NULL argument", call);
    kiln_tensor_info info;
    kiln_status st = kiln_model_find_tensor(m, name, NULL, 0, &info);
    if (st != KILN_OK) return st;
    if (info.kind != KILN_STATE) return api_fail(KILN_ERR_NOT_FOUND, m, "%s: '%s' is not a state", call, name);
    void *ptr;
    size_t bytes;
    if ((st = kiln_model_state_ptr(m, name, &ptr, &bytes)) != KILN_OK) return st;
    if (!(*out = make_owned(api_model_context(m), ptr, false, info.dtype, info.rank, info.shape)))
        return api_fail(KILN_ERR_OUT_OF_MEMORY, m, "%s: out of memory", call);
    return KILN_OK;
}

static kiln_status alloc_owned(kiln_context *ctx, const char *call, kiln_dtype dtype, int rank, const int64_t *shape,
                               owned **out)
{
    *out = NULL;
    if (!ctx || rank < 0 || rank > KILN_MAX_RANK || (rank && !shape) || !kiln_dtype_size(dtype))
        return api_fail(KILN_ERR_INVALID_ARGUMENT, NULL, "%s: bad context, dtype or rank", call);
    size_t bytes = kiln_dtype_size(dtype);
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || (shape[i] && bytes > SIZE_MAX / (size_t)shape[i]))
            return api_fail(KILN_ERR_INVALID_ARGUMENT, NULL, "%s: shape out of range", call);
        bytes *= (size_t)shape[i];
    }
    void *mem = NULL;
    kiln_status st = kiln_device_alloc(ctx, bytes ? bytes : 1, &mem);
    if (st != KILN_OK) return st;
    if (!(*out = make_owned(ctx, mem, true, dtype, rank, shape))) {
        kiln_device_free(ctx, mem);
        return api_fail(KILN_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", call);
    }
    return KILN_OK;
}

kiln_status kiln_model_state_dlpack(kiln_model *m, const char *name, DLManagedTensor **out)
{
    if (!out) return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "kiln_model_state_dlpack: NULL out");
    owned *o;
    kiln_status st = state_owned(m, "kiln_model_state_dlpack", name, &o);
    *out = o ? &o->mt : NULL;
    return st;
}

kiln_status kiln_tensor_alloc_dlpack(kiln_context *ctx, kiln_dtype dtype, int rank, const int64_t *shape,
                                     DLManagedTensor **out)
{
    if (!out) return api_fail(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_tensor_alloc_dlpack: NULL out");
    owned *o;
    kiln_status st = alloc_owned(ctx, "kiln_tensor_alloc_dlpack", dtype, rank, shape, &o);
    *out = o ? &o->mt : NULL;
    return st;
}

#ifdef KILN_DLPACK_VERSIONED
kiln_status kiln_model_state_dlpack_versioned(kiln_model *m, const char *name, DLManagedTensorVersioned **out)
{
    if (!out) return api_fail(KILN_ERR_INVALID_ARGUMENT, m, "kiln_model_state_dlpack_versioned: NULL out");
    owned *o;
    kiln_status st = state_owned(m, "kiln_model_state_dlpack_versioned", name, &o);
    *out = o ? &o->vt : NULL;
    return st;
}

kiln_status kiln_tensor_alloc_dlpack_versioned(kiln_context *ctx, kiln_dtype dtype, int rank, const int64_t *shape,
                                               DLManagedTensorVersioned **out)
{
    if (!out) return api_fail(KILN_ERR_INVALID_ARGUMENT, NULL, "kiln_tensor_alloc_dlpack_versioned: NULL out");
    owned *o;
    kiln_status st = alloc_owned(ctx, "kiln_tensor_alloc_dlpack_versioned", dtype, rank, shape, &o);
    *out = o ? &o->vt : NULL;
    return st;
}
#else
static const char no_versioned[] = "%s: this Kiln was built with a DLPack header without DLManagedTensorVersioned";

kiln_status kiln_model_state_dlpack_versioned(kiln_model *m, const char *name, struct DLManagedTensorVersioned **out)
{
    if (out) *out = NULL;
    return api_fail(KILN_ERR_INVALID_ARGUMENT, m, no_versioned, "kiln_model_state_dlpack_versioned");
}

kiln_status kiln_tensor_alloc_dlpack_versioned(kiln_context *ctx, kiln_dtype dtype, int rank, const int64_t *shape,
                                               struct DLManagedTensorVersioned **out)
{
    if (out) *out = NULL;
    return api_fail(KILN_ERR_INVALID_ARGUMENT, NULL, no_versioned, "kiln_tensor_alloc_dlpack_versioned");
}
#endif
