/* runtime/rt_pack_dev.c — bind-time values on the device (rt_pack_dev.h).
 *
 * Algorithm: the recursion of rt_pack.c's evaluator over the same node kinds,
 * on device buffers. A weight is read in place (its bound or loaded buffer);
 * a reshape is the same bytes; concat and slice are one 2-D copy per input
 * (rows: the product of the dims before the axis; row bytes: the axis's
 * extent times the dims after it); permute and the row scale are one launch
 * of pack.cuh. Intermediate buffers are freed as soon as their consumer has
 * been queued and the stream has run it. A float32 gain made from weights by
 * other ops (Gemma's 1 + w, under a float32 row scale) is computed on the host
 * from its weights read back, and uploaded: a few KB. */
#include "runtime/rt_pack_dev.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_pack.h"

/* pack.cuh's PackArgs */
typedef struct pack_args {
    unsigned long long src, gain, dst;
    long long numel, cols;
    int dtype, es, rank, pad_;
    long long shape[8], stride[8];
} pack_args;

#define PACK_THREADS 256

typedef struct dval {
    unsigned char *p;
    bool owned;
    int64_t shape[IR_MAX_RANK];
    int64_t numel;
} dval;

typedef struct dctx {
    const ir_graph *g;
    const int64_t *dims;
    rt_pack_dev_weight_fn get;
    void *user;
    const rt_pack_kernels *k;
    cudaStream_t s;
    char *err;
    size_t n;
} dctx;

/* A small float32 vector made from weights by any ops (the gain of a float32 row scale: Gemma's
 * 1 + w): computed on the host (rt_pack_eval) and uploaded, its weights read back first. */
static bool host_vector(const ir_node *nd) { return nd->type.rank == 1 && nd->type.dtype == IR_F32; }

bool rt_pack_dev_supported(const ir_graph *g, int node, bool kernels)
{
    if (!g || node < 0 || node >= g->nnodes) return false;
    const ir_node *nd = g->nodes[node];
    if (nd->op == IR_OP_WEIGHT) return true;
    const ir_node *w = NULL, *gain = NULL;
    if (rt_pack_is_rowscale_f32(nd, &w, &gain)) /* bf16 only: the f16 rounding is the host's */
        return kernels && nd->type.dtype == IR_BF16 && rt_pack_dev_supported(g, w->id, kernels) &&
               (host_vector(gain) || rt_pack_dev_supported(g, gain->id, kernels));
    bool ok;
    if (rt_pack_is_rowscale(nd)) ok = kernels && (nd->type.dtype == IR_BF16 || nd->type.dtype == IR_F32);
    else if (rt_pack_is_movement(nd)) {
        const int es = ir_dtype_size(nd->type.dtype);
        ok = nd->op != IR_OP_PERMUTE || (kernels && (es == 1 || es == 2 || es == 4 || es == 8));
    } else
        ok = false;
    for (int i = 0; ok && i < nd->ninputs; i++) ok = rt_pack_dev_supported(g, nd->inputs[i]->id, kernels);
    return ok;
}

/* Frees an intermediate once the stream's work that reads it is done. */
static void dval_free(dval *v, cudaStream_t s)
{
    if (v->owned && v->p) {
        (void)cudaStreamSynchronize(s);
        (void)cudaFree(v->p);
    }
    v->p = NULL;
    v->owned = false;
}

static rt_status launch(const rt_kernel *k, pack_args *a, const dctx *c)
{
    int64_t blocks = (a->numel + PACK_THREADS - 1) / PACK_THREADS;
    if (blocks > (1 << 20)) blocks = 1 << 20; /* grid-stride beyond */
    if (blocks < 1) return RT_OK;
    return rt_launch(k, (rt_dim3){(unsigned)blocks, 1, 1}, (rt_dim3){PACK_THREADS, 1, 1}, 0, c->s, a, sizeof *a, c->err,
                     c->n);
}

/* A 2-D device copy: rows of width bytes, one plain copy when rows == 1. */
static rt_status copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, const dctx *c)
{
    if (!width || !rows) return RT_OK;
    if (rows == 1 || (dpitch == width && spitch == width))
        return RT_CUDA_CHECK(cudaMemcpyAsync(dst, src, width * rows, cudaMemcpyDeviceToDevice, c->s), "packing weights", c->err,
                             c->n);
    return RT_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, c->s),
                         "packing weights", c->err, c->n);
}

/* rt_pack_eval's weights for a host vector: each weight under it read back from the device. */
typedef struct host_back {
    const dctx *c;
    const ir_graph *g;
    void **buf;
} host_back;

static int host_back_get(void *user, int param, const void **data, char *err, size_t n)
{
    host_back *h = user;
    if (!h->buf[param]) {
        const void *d = NULL;
        RT_TRY(rt_status_of(h->c->get(h->c->user, param, &d, err, n)));
        int64_t shape[IR_MAX_RANK], numel;
        const ir_node *p = h->g->params[param];
        if (!ir_type_shape_at(&p->type, h->c->dims, shape, &numel))
            return rt_fail(RT_ERR_WEIGHTS, err, n, "bind time: weight '%s': the shape does not evaluate", p->name);
        const size_t bytes = (size_t)numel * (size_t)ir_dtype_size(p->type.dtype);
        if (!(h->buf[param] = malloc(bytes + 1))) return rt_fail(RT_ERR_NOMEM, err, n, "bind time: out of memory");
        RT_TRY(RT_CUDA_CHECK(cudaStreamSynchronize(h->c->s), "packing weights", err, n));
        RT_TRY(RT_CUDA_CHECK(cudaMemcpy(h->buf[param], d, bytes, cudaMemcpyDeviceToHost), "reading a gain's weight back",
                             err, n));
    }
    *data = h->buf[param];
    return 0;
}

/* A host vector (host_vector) computed on the host and uploaded into out. */
static rt_status eval_on_host(const dctx *c, const ir_node *nd, dval *out)
{
    host_back h = {c, c->g, calloc((size_t)c->g->nparams + 1, sizeof(void *))};
    if (!h.buf) return rt_fail(RT_ERR_NOMEM, c->err, c->n, "bind time: out of memory");
    void *hv = NULL;
    size_t bytes = 0;
    rt_status st = rt_pack_eval(c->g, c->dims, nd->id, host_back_get, &h, false, &hv, &bytes, c->err, c->n);
    for (int i = 0; i < c->g->nparams; i++) free(h.buf[i]);
    free(h.buf);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc((void **)&out->p, bytes ? bytes : 1), "packing weights", c->err, c->n);
    if (st == RT_OK) {
        out->owned = true;
        st = RT_CUDA_CHECK(cudaMemcpy(out->p, hv, bytes, cudaMemcpyHostToDevice), "packing weights", c->err, c->n);
    }
    free(hv);
    if (st != RT_OK) dval_free(out, c->s);
    return st;
}

static rt_status eval(const dctx *c, const ir_node *nd, dval *out)
{
    memset(out, 0, sizeof *out);
    const size_t es = (size_t)ir_dtype_size(nd->type.dtype);
    if (!ir_type_shape_at(&nd->type, c->dims, out->shape, &out->numel))
        return rt_fail(RT_ERR_WEIGHTS, c->err, c->n, "bind time: %s (line %d): the shape does not evaluate at the given dims",
                       ir_op_name(nd->op), nd->loc.line);
    if (nd->op == IR_OP_WEIGHT) {
        const void *d = NULL;
        RT_TRY(rt_status_of(c->get(c->user, nd->param, &d, c->err, c->n)));
        out->p = (unsigned char *)d;
        return RT_OK;
    }
    if (host_vector(nd) && !rt_pack_dev_supported(c->g, nd->id, c->k != NULL)) return eval_on_host(c, nd, out);
    const ir_node *ops[2] = {NULL, NULL};
    const bool rowscale_f32 = rt_pack_is_rowscale_f32(nd, &ops[0], &ops[1]);
    const int nin = rowscale_f32 ? 2 : nd->ninputs; /* the float32 row scale: its matrix and gain */
    if (nin > 16) return rt_fail(RT_ERR_INVALID, c->err, c->n, "bind time: %d inputs on the device", nin);
    dval in[16];
    memset(in, 0, sizeof in);
    rt_status st = RT_OK;
    for (int i = 0; i < nin && st == RT_OK; i++) st = eval(c, rowscale_f32 ? ops[i] : nd->inputs[i], &in[i]);
    if (st != RT_OK) goto done;
    if (nd->op == IR_OP_RESHAPE) {
        out->p = in[0].p;
        out->owned = in[0].owned;
        in[0].owned = false;
        goto done;
    }
    const size_t bytes = (size_t)out->numel * es;
    RT_TRY_GOTO(st, done, RT_CUDA_CHECK(cudaMalloc((void **)&out->p, bytes ? bytes : 1), "packing weights", c->err, c->n));
    out->owned = true;
    if (rt_pack_is_rowscale(nd) || rowscale_f32) {
        pack_args a = {.src = (uintptr_t)in[0].p, .gain = (uintptr_t)in[1].p, .dst = (uintptr_t)out->p,
                       .numel = out->numel, .cols = out->shape[1],
                       .dtype = rowscale_f32 ? 2 : nd->type.dtype == IR_BF16 ? 0 : 1};
        if (a.cols > 0) st = launch(&c->k->rowscale, &a, c);
    } else if (nd->op == IR_OP_PERMUTE) {
        const int r = nd->type.rank;
        int64_t istride[IR_MAX_RANK], s = 1;
        for (int i = r - 1; i >= 0; i--) {
            istride[i] = s;
            s *= in[0].shape[i];
        }
        pack_args a = {.src = (uintptr_t)in[0].p, .dst = (uintptr_t)out->p, .numel = out->numel, .es = (int)es, .rank = r};
        for (int i = 0; i < r; i++) {
            a.shape[i] = out->shape[i];
            a.stride[i] = istride[nd->attrs.perm[i]];
        }
        st = launch(&c->k->permute, &a, c);
    } else {
        const int axis = nd->attrs.axis;
        size_t outer = 1, inner = es;
        for (int i = 0; i < axis; i++) outer *= (size_t)out->shape[i];
        for (int i = axis + 1; i < nd->type.rank; i++) inner *= (size_t)out->shape[i];
        const size_t oa = (size_t)out->shape[axis];
        if (nd->op == IR_OP_SLICE) {
            int64_t start;
            if (!ir_dim_value(&nd->attrs.start, c->dims, &start)) {
                st = rt_fail(RT_ERR_WEIGHTS, c->err, c->n, "bind time: slice start does not evaluate");
                goto done;
            }
            const size_t ia = (size_t)in[0].shape[axis];
            st = copy2d(out->p, oa * inner, in[0].p + (size_t)start * inner, ia * inner, oa * inner, outer, c);
        } else { /* CONCAT */
            size_t at = 0;
            for (int i = 0; i < nin && st == RT_OK; i++) {
                const size_t ia = (size_t)in[i].shape[axis];
                st = copy2d(out->p + at * inner, oa * inner, in[i].p, ia * inner, ia * inner, outer, c);
                at += ia;
            }
        }
    }
done:
    for (int i = 0; i < nin; i++) dval_free(&in[i], c->s);
    if (st != RT_OK) dval_free(out, c->s);
    return st;
}

rt_status rt_pack_dev_eval(const ir_graph *g, const int64_t *dims, int node, rt_pack_dev_weight_fn get, void *user,
                           const rt_pack_kernels *k, void *stream, void **out, size_t *bytes, char *err, size_t n)
{
    *out = NULL;
    *bytes = 0;
    if (!g || node < 0 || node >= g->nnodes || !get || !rt_pack_dev_supported(g, node, k != NULL))
        return rt_fail(RT_ERR_INVALID, err, n, "rt_pack_dev_eval: %%%d is not packed on the device", node);
    dctx c = {g, dims, get, user, k, (cudaStream_t)stream, err, n};
    dval v;
    RT_TRY(eval(&c, g->nodes[node], &v));
    const size_t total = (size_t)v.numel * (size_t)ir_dtype_size(g->nodes[node]->type.dtype);
    if (!v.owned) { /* a (reshaped) weight: a copy, the weight stays its owner's */
        void *p = NULL;
        RT_TRY(RT_CUDA_CHECK(cudaMalloc(&p, total ? total : 1), "packing weights", err, n));
        rt_status st = copy2d(p, total, v.p, total, total, 1, &c);
        if (st != RT_OK) {
            (void)cudaFree(p);
            return st;
        }
        v.p = p;
    }
    *out = v.p;
    *bytes = total;
    return RT_OK;
}

rt_status rt_pack_dev_interleave_rows(void *dst, const void *src, int64_t half, size_t row_bytes, void *stream, char *err,
                                      size_t n)
{
    dctx c = {.s = (cudaStream_t)stream, .err = err, .n = n};
    const unsigned char *s = src;
    unsigned char *d = dst;
    RT_TRY(copy2d(d, 2 * row_bytes, s, row_bytes, row_bytes, (size_t)half, &c));
    return copy2d(d + row_bytes, 2 * row_bytes, s + (size_t)half * row_bytes, row_bytes, row_bytes, (size_t)half, &c);
}

rt_status rt_pack_dev_rope_pairs(void *val, int64_t rows, size_t row_bytes, int64_t off, int64_t stride, int64_t heads,
                                 int64_t rot, void *stream, char *err, size_t n)
{
    if (!rt_pack_rope_pairs_fit(rows, off, stride, heads, rot))
        return rt_fail(RT_ERR_INTERNAL, err, n, "pairing rotated rows: %lld heads of %lld rows from row %lld (stride %lld) "
                       "do not fit %lld rows", (long long)heads, (long long)rot, (long long)off, (long long)stride,
                       (long long)rows);
    if (!heads) return RT_OK;
    dctx c = {.s = (cudaStream_t)stream, .err = err, .n = n};
    /* every head's rotated rows at once into a scratch copy, then interleaved back */
    const size_t block = (size_t)rot * row_bytes;
    unsigned char *tmp = NULL, *v = val;
    RT_TRY(RT_CUDA_CHECK(cudaMalloc((void **)&tmp, block * (size_t)heads), "pairing rotated rows", err, n));
    rt_status st = copy2d(tmp, block, v + (size_t)off * row_bytes, (size_t)stride * row_bytes, block, (size_t)heads, &c);
    for (int64_t h = 0; h < heads && st == RT_OK; h++)
        st = rt_pack_dev_interleave_rows(v + (size_t)(off + h * stride) * row_bytes, tmp + (size_t)h * block, rot / 2,
                                         row_bytes, stream, err, n);
    rt_status sync = RT_CUDA_CHECK(cudaStreamSynchronize(c.s), "pairing rotated rows", err, n);
    (void)cudaFree(tmp);
    return st != RT_OK ? st : sync;
}
