/* runtime/rt_pack.c — bind-time values on the host (see rt_pack.h).
 *
 * Algorithm: evaluate the node recursively. Data movement (reshape, permute,
 * concat, slice) is done on raw bytes, so it is exact for every dtype and
 * needs no conversion; a weight is read in place. The first node that is not
 * data movement is evaluated by the reference interpreter on a copy of the
 * subgraph of its ancestors (weights as parameters, constants as they are),
 * which is the definition of what the node computes. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "runtime/rt_pack.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_err.h"

/* ---- conversions (ir/types.c has the scalar ones) ---------------------------------- */

void rt_to_f32(ir_dtype t, const void *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case IR_F32: memcpy(&dst[i], (const char *)src + 4 * i, 4); break;
        case IR_BF16: {
            uint16_t b;
            memcpy(&b, (const char *)src + 2 * i, 2);
            dst[i] = ir_bf16_bits_to_f32(b);
            break;
        }
        case IR_F16: {
            uint16_t b;
            memcpy(&b, (const char *)src + 2 * i, 2);
            dst[i] = ir_f16_bits_to_f32(b);
            break;
        }
        default: {
            int32_t v;
            memcpy(&v, (const char *)src + 4 * i, 4);
            dst[i] = (float)v;
        }
        }
    }
}

void rt_from_f32(ir_dtype t, const float *src, void *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case IR_F32: memcpy((char *)dst + 4 * i, &src[i], 4); break;
        case IR_BF16: {
            uint16_t b = ir_f32_to_bf16_bits(src[i]);
            memcpy((char *)dst + 2 * i, &b, 2);
            break;
        }
        case IR_F16: {
            uint16_t b = ir_f32_to_f16_bits(src[i]);
            memcpy((char *)dst + 2 * i, &b, 2);
            break;
        }
        default: {
            int32_t v = (int32_t)src[i];
            memcpy((char *)dst + 4 * i, &v, 4);
        }
        }
    }
}

void rt_pack_interleave_rows(void *dst, const void *src, int64_t half, size_t row_bytes)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (int64_t j = 0; j < half; j++) {
        memcpy(d + (size_t)(2 * j) * row_bytes, s + (size_t)j * row_bytes, row_bytes);
        memcpy(d + (size_t)(2 * j + 1) * row_bytes, s + (size_t)(half + j) * row_bytes, row_bytes);
    }
}

bool rt_pack_rope_pairs_fit(int64_t rows, int64_t off, int64_t stride, int64_t heads, int64_t rot)
{
    return !(rot <= 0 || rot % 2 || off < 0 || stride < rot || heads < 0 || (heads && off + (heads - 1) * stride + rot > rows));
}

bool rt_pack_rope_pairs(void *val, int64_t rows, size_t row_bytes, int64_t off, int64_t stride, int64_t heads,
                        int64_t rot)
{
    if (!rt_pack_rope_pairs_fit(rows, off, stride, heads, rot)) return false;
    unsigned char *tmp = malloc((size_t)rot * row_bytes + 1), *v = val;
    if (!tmp) return false;
    for (int64_t h = 0; h < heads; h++) {
        unsigned char *base = v + (size_t)(off + h * stride) * row_bytes;
        memcpy(tmp, base, (size_t)rot * row_bytes);
        rt_pack_interleave_rows(base, tmp, rot / 2, row_bytes);
    }
    free(tmp);
    return true;
}

/* ---- evaluation ------------------------------------------------------------------- */

typedef struct val {
    unsigned char *p;
    bool owned;
    int rank;
    int64_t shape[IR_MAX_RANK];
    int64_t numel;
} val;

typedef struct ctx {
    const ir_graph *g;
    const int64_t *dims;
    rt_pack_weight_fn get;
    void *user;
    bool force_interp;
    char *err;
    size_t errlen;
} ctx;

static void val_free(val *v)
{
    if (v->owned) free(v->p);
    v->p = NULL;
    v->owned = false;
}

static rt_status interp_node(ctx *c, const ir_node *n, val *out);

/* Rows [r0, r1) of a row scale: out row r = in row r times gv, each product
 * rounded once (a whole model's folded gains are gigabytes: the rows are
 * split over threads). */
typedef struct rowscale_job {
    ir_dtype t;
    size_t es;
    int64_t cols, r0, r1;
    const unsigned char *in;
    const float *gv;
    unsigned char *out;
    bool oom;
} rowscale_job;

static void *rowscale_rows(void *arg)
{
    rowscale_job *j = arg;
    float *row = malloc((size_t)j->cols * sizeof *row + 1);
    if (!row) {
        j->oom = true;
        return NULL;
    }
    for (int64_t r = j->r0; r < j->r1; r++) {
        rt_to_f32(j->t, j->in + (size_t)(r * j->cols) * j->es, row, j->cols);
        for (int64_t k = 0; k < j->cols; k++) row[k] *= j->gv[k];
        rt_from_f32(j->t, row, j->out + (size_t)(r * j->cols) * j->es, j->cols);
    }
    free(row);
    return NULL;
}

/* The row scale over up to 16 threads (one per 64 rows at least); false when out of memory. */
static bool rowscale_all(ir_dtype t, size_t es, int64_t rows, int64_t cols, const unsigned char *in, const float *gv,
                         unsigned char *out)
{
    enum { MAX_THREADS = 16 };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)(cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : cpus);
    if (rows / 64 < nt) nt = (int)(rows / 64 > 0 ? rows / 64 : 1);
    rowscale_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int i = 0; i < nt; i++) {
        jobs[i] = (rowscale_job){t, es, cols, rows * i / nt, rows * (i + 1) / nt, in, gv, out, false};
        started[i] = i > 0 && pthread_create(&th[i], NULL, rowscale_rows, &jobs[i]) == 0;
    }
    for (int i = 0; i < nt; i++)
        if (!started[i]) rowscale_rows(&jobs[i]); /* job 0, and any a thread did not take */
    bool ok = true;
    for (int i = 0; i < nt; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        ok &= !jobs[i].oom;
    }
    return ok;
}

bool rt_pack_is_rowscale(const ir_node *n)
{
    return n->op == IR_OP_MUL && n->ninputs == 2 && n->type.rank == 2 && n->type.dtype != IR_I32 &&
           ir_type_same_shape(&n->inputs[0]->type, &n->type) && n->inputs[1]->type.rank == 1 &&
           ir_dim_eq(&n->inputs[1]->type.dims[0], &n->type.dims[1]) && n->inputs[0]->type.dtype == n->type.dtype &&
           n->inputs[1]->type.dtype == n->type.dtype;
}

bool rt_pack_is_rowscale_f32(const ir_node *n, const ir_node **w, const ir_node **gain)
{
    if (n->op != IR_OP_CAST || n->type.rank != 2 || (n->type.dtype != IR_BF16 && n->type.dtype != IR_F16)) return false;
    const ir_node *m = n->inputs[0];
    if (m->op != IR_OP_MUL || m->ninputs != 2 || m->type.dtype != IR_F32 || !ir_type_same_shape(&m->type, &n->type))
        return false;
    const ir_node *c = m->inputs[0], *g = m->inputs[1];
    if (c->op != IR_OP_CAST || c->inputs[0]->type.dtype != n->type.dtype || !ir_type_same_shape(&c->type, &n->type) ||
        c->type.dtype != IR_F32 || g->type.rank != 1 || g->type.dtype != IR_F32 || !ir_dim_eq(&g->type.dims[0], &n->type.dims[1]))
        return false;
    if (w) *w = c->inputs[0];
    if (gain) *gain = g;
    return true;
}

bool rt_pack_is_movement(const ir_node *n)
{
    if (n->op != IR_OP_RESHAPE && n->op != IR_OP_PERMUTE && n->op != IR_OP_CONCAT && n->op != IR_OP_SLICE) return false;
    for (int i = 0; i < n->ninputs; i++)
        if (n->inputs[i]->type.dtype != n->type.dtype) return false;
    return true;
}

static rt_status set_shape(ctx *c, const ir_node *n, val *v)
{
    v->rank = n->type.rank;
    if (!ir_type_shape_at(&n->type, c->dims, v->shape, &v->numel))
        return rt_fail(RT_ERR_WEIGHTS, c->err, c->errlen, "bind time: %s (line %d): the shape does not evaluate at the given dims",
                           ir_op_name(n->op), n->loc.line);
    return RT_OK;
}

static rt_status eval(ctx *c, const ir_node *n, val *out)
{
    memset(out, 0, sizeof *out);
    size_t es = (size_t)ir_dtype_size(n->type.dtype);
    if (n->op == IR_OP_WEIGHT) {
        RT_TRY(set_shape(c, n, out));
        const void *d = NULL;
        RT_TRY(rt_status_of(c->get(c->user, n->param, &d, c->err, c->errlen)));
        out->p = (unsigned char *)d;
        return RT_OK;
    }
    const ir_node *ops[2] = {NULL, NULL};
    const bool rowscale_f32 = rt_pack_is_rowscale_f32(n, &ops[0], &ops[1]);
    const bool rowscale = rt_pack_is_rowscale(n) || rowscale_f32;
    const bool movement = rt_pack_is_movement(n) || rowscale;
    if (!movement || c->force_interp) return interp_node(c, n, out);
    RT_TRY(set_shape(c, n, out));
    val in[16];
    memset(in, 0, sizeof in);
    int nin = rowscale_f32 ? 2 : n->ninputs; /* the float32 row scale: its matrix and gain */
    if (nin > 16) return interp_node(c, n, out);
    for (int i = 0; i < nin; i++) {
        rt_status status = eval(c, rowscale_f32 ? ops[i] : n->inputs[i], &in[i]);
        if (status != RT_OK) {
            for (int j = 0; j < i; j++) val_free(&in[j]);
            return status;
        }
    }
    rt_status status = RT_OK;
    if (n->op == IR_OP_RESHAPE) {
        out->p = in[0].p;
        out->owned = in[0].owned;
        in[0].owned = false;
        goto done;
    }
    out->p = malloc((size_t)out->numel * es + 1);
    out->owned = true;
    if (!out->p) {
        status = rt_fail(RT_ERR_NOMEM, c->err, c->errlen, "bind time: out of memory");
        goto done;
    }
    if (rowscale) {
        const int64_t cols = out->shape[1], rows = cols ? out->numel / cols : 0;
        float *gv = malloc((size_t)cols * sizeof *gv + 1);
        if (gv) rt_to_f32(rowscale_f32 ? IR_F32 : n->type.dtype, in[1].p, gv, cols);
        if (!gv || !rowscale_all(n->type.dtype, es, rows, cols, in[0].p, gv, out->p)) {
            free(gv);
            status = rt_fail(RT_ERR_NOMEM, c->err, c->errlen, "bind time: out of memory");
            goto done;
        }
        free(gv);
    } else if (n->op == IR_OP_PERMUTE) {
        int r = out->rank;
        int64_t istride[IR_MAX_RANK], ostride_in[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
        int64_t s = 1;
        for (int i = r - 1; i >= 0; i--) {
            istride[i] = s;
            s *= in[0].shape[i];
        }
        for (int i = 0; i < r; i++) ostride_in[i] = istride[n->attrs.perm[i]];
        int64_t off = 0;
        for (int64_t e = 0; e < out->numel; e++) {
            memcpy(out->p + (size_t)e * es, in[0].p + (size_t)off * es, es);
            for (int i = r - 1; i >= 0; i--) { /* odometer over the output's index */
                idx[i]++;
                off += ostride_in[i];
                if (idx[i] < out->shape[i]) break;
                off -= ostride_in[i] * idx[i];
                idx[i] = 0;
            }
        }
    } else {
        int axis = n->attrs.axis;
        int64_t outer = 1, inner = (int64_t)es;
        for (int i = 0; i < axis; i++) outer *= out->shape[i];
        for (int i = axis + 1; i < out->rank; i++) inner *= out->shape[i];
        if (n->op == IR_OP_SLICE) {
            int64_t st;
            if (!ir_dim_value(&n->attrs.start, c->dims, &st)) {
                status = rt_fail(RT_ERR_WEIGHTS, c->err, c->errlen, "bind time: slice start does not evaluate");
                goto done;
            }
            int64_t ia = in[0].shape[axis], oa = out->shape[axis];
            for (int64_t o = 0; o < outer; o++)
                memcpy(out->p + (size_t)(o * oa * inner), in[0].p + (size_t)((o * ia + st) * inner), (size_t)(oa * inner));
        } else { /* CONCAT */
            int64_t oa = out->shape[axis], at = 0;
            for (int64_t o = 0; o < outer; o++) {
                at = 0;
                for (int i = 0; i < nin; i++) {
                    int64_t ia = in[i].shape[axis];
                    memcpy(out->p + (size_t)((o * oa + at) * inner), in[i].p + (size_t)(o * ia * inner), (size_t)(ia * inner));
                    at += ia;
                }
            }
        }
    }
done:
    for (int i = 0; i < nin; i++) val_free(&in[i]);
    if (status != RT_OK) val_free(out);
    return status;
}

/* The reference interpreter on the subgraph of n's ancestors. */
static rt_status interp_node(ctx *c, const ir_node *n, val *out)
{
    const ir_graph *g = c->g;
    rt_status status = RT_ERR_INTERNAL; /* every failure below sets its own */
    bool *need = calloc((size_t)n->id + 1, sizeof *need);
    ir_node **map = calloc((size_t)n->id + 1, sizeof *map);
    ir_graph *sub = ir_graph_new(g->name ? g->name : "bind");
    ir_tensor *params = NULL, result;
    memset(&result, 0, sizeof result);
    bool have_result = false;
    if (!need || !map || !sub) {
        status = rt_fail(RT_ERR_NOMEM, c->err, c->errlen, "bind time: out of memory");
        goto out;
    }
    for (int i = 0; i < g->nsyms; i++) ir_graph_add_sym(sub, g->syms[i]);
    need[n->id] = true;
    for (int i = n->id; i >= 0; i--)
        if (need[i])
            for (int j = 0; j < g->nodes[i]->ninputs; j++) need[g->nodes[i]->inputs[j]->id] = true;
    for (int i = 0; i <= n->id; i++) {
        if (!need[i]) continue;
        const ir_node *s = g->nodes[i];
        if (s->op == IR_OP_INPUT || s->op == IR_OP_STATE) {
            status = rt_fail(RT_ERR_INTERNAL, c->err, c->errlen, "bind time: %%%d depends on %s '%s', which is not a weight", n->id,
                        ir_op_name(s->op), s->name ? s->name : "?");
            goto out;
        }
        ir_node *ins[64];
        if (s->ninputs > 64) {
            status = rt_fail(RT_ERR_INTERNAL, c->err, c->errlen, "bind time: too many inputs");
            goto out;
        }
        for (int j = 0; j < s->ninputs; j++) ins[j] = map[s->inputs[j]->id];
        map[i] = ir_node_copy(sub, s, ins);
        if (!map[i]) {
            status = rt_fail(RT_ERR_INTERNAL, c->err, c->errlen, "bind time: cannot copy %s (line %d) into the bind-time graph", ir_op_name(s->op),
                        s->loc.line);
            goto out;
        }
    }
    if (ir_graph_add_output(sub, "packed", map[n->id], n->loc) < 0) {
        status = rt_fail(RT_ERR_NOMEM, c->err, c->errlen, "bind time: out of memory");
        goto out;
    }
    params = calloc((size_t)sub->nparams + 1, sizeof *params);
    if (!params) {
        status = rt_fail(RT_ERR_NOMEM, c->err, c->errlen, "bind time: out of memory");
        goto out;
    }
    for (int j = 0; j < sub->nparams; j++) {
        const ir_node *p = sub->params[j];
        int orig = -1;
        for (int k = 0; k < g->nparams; k++)
            if (g->params[k]->op == IR_OP_WEIGHT && p->name && g->params[k]->name && !strcmp(g->params[k]->name, p->name))
                orig = k;
        int64_t shape[IR_MAX_RANK], numel;
        if (orig < 0 || !ir_type_shape_at(&p->type, c->dims, shape, &numel)) {
            status = rt_fail(RT_ERR_WEIGHTS, c->err, c->errlen, "bind time: weight '%s' not found or shape does not evaluate", p->name ? p->name : "?");
            goto out;
        }
        if (!ir_tensor_alloc(&params[j], p->type.dtype, p->type.rank, shape)) {
            status = rt_fail(RT_ERR_NOMEM, c->err, c->errlen, "bind time: out of memory");
            goto out;
        }
        const void *d = NULL;
        if ((status = rt_status_of(c->get(c->user, orig, &d, c->err, c->errlen))) != RT_OK) goto out;
        if (p->type.dtype == IR_I32) memcpy(params[j].i, d, (size_t)numel * 4);
        else rt_to_f32(p->type.dtype, d, params[j].f, numel);
    }
    char ierr[512];
    if (ir_interp_run(sub, c->dims, params, &result, ierr, sizeof ierr) != 0) {
        status = rt_fail(RT_ERR_WEIGHTS, c->err, c->errlen, "bind time: %s (line %d): %s", ir_op_name(n->op), n->loc.line, ierr);
        goto out;
    }
    have_result = true;
    if ((status = set_shape(c, n, out)) != RT_OK) goto out;
    size_t es = (size_t)ir_dtype_size(n->type.dtype);
    out->p = malloc((size_t)out->numel * es + 1);
    out->owned = true;
    if (!out->p) {
        status = rt_fail(RT_ERR_NOMEM, c->err, c->errlen, "bind time: out of memory");
        goto out;
    }
    if (n->type.dtype == IR_I32) memcpy(out->p, result.i, (size_t)out->numel * 4);
    else rt_from_f32(n->type.dtype, result.f, out->p, out->numel);
    status = RT_OK;
out:
    if (have_result) ir_tensor_free(&result);
    if (params)
        for (int j = 0; j < sub->nparams; j++) ir_tensor_free(&params[j]);
    free(params);
    if (sub) ir_graph_free(sub);
    free(need);
    free(map);
    if (status != RT_OK) val_free(out);
    return status;
}

rt_status rt_pack_eval(const ir_graph *g, const int64_t *dims, int node, rt_pack_weight_fn get, void *user,
                       bool force_interp, void **out, size_t *bytes, char *err, size_t errlen)
{
    *out = NULL;
    *bytes = 0;
    if (!g || node < 0 || node >= g->nnodes || !get) return rt_fail(RT_ERR_INVALID, err, errlen, "rt_pack_eval: bad arguments");
    ctx c = {g, dims, get, user, force_interp, err, errlen};
    val v;
    RT_TRY(eval(&c, g->nodes[node], &v));
    size_t n = (size_t)v.numel * (size_t)ir_dtype_size(g->nodes[node]->type.dtype);
    if (!v.owned) { /* a reshaped weight: copy it */
        unsigned char *p = malloc(n + 1);
        if (!p) return rt_fail(RT_ERR_NOMEM, err, errlen, "bind time: out of memory");
        memcpy(p, v.p, n);
        v.p = p;
    }
    *out = v.p;
    *bytes = n;
    return RT_OK;
}
