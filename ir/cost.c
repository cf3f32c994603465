/* ir/cost.c — compulsory bytes and FLOPs of a kernel group (ir/cost.h).
 *
 * Algorithm, for group k:
 *  1. Reads. Every member asks for the values it reads: all of an input, but
 *     only the attended rows of attention's K and V, and nothing of the cache
 *     a cache write stores into. A request is recorded against the value's
 *     root (the first node below the views, which are free) with the node it
 *     came through; requests through the same node keep the largest, requests
 *     through different nodes (slices) add up, capped at the root's size.
 *     Roots inside the group (values computed in registers), constants and
 *     generated masks cost nothing.
 *  2. Writes. A member whose value is used outside the group (directly or
 *     through views), or is a model output or a state's new value, is
 *     written once; a cache write stores S rows per sequence.
 *  3. FLOPs, per member: matrix products only. */
#include "ir/cost.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct cost_read {
    int root, via;
    int64_t bytes;
} cost_read;

typedef struct cost_ctx {
    const ir_graph *g;
    int k;
    const int64_t *dims;
    const int32_t *const *i32;
    cost_read *reads;
    int nreads, cap;
    char *err;
    size_t errlen;
    bool failed;
} cost_ctx;

__attribute__((format(printf, 2, 3))) static void fail(cost_ctx *c, const char *fmt, ...)
{
    if (c->failed) return;
    c->failed = true;
    if (!c->err || !c->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
}

/* A free view: read through by its consumer's indexing. */
static bool is_view(const ir_node *n)
{
    return n->group < 0 && (n->op == IR_OP_RESHAPE || n->op == IR_OP_PERMUTE || n->op == IR_OP_SLICE);
}

static const ir_node *root_of(const ir_node *n)
{
    while (is_view(n)) n = n->inputs[0];
    return n;
}

static int64_t shape_at(cost_ctx *c, const ir_node *n, int64_t *shape)
{
    int64_t numel = 0;
    if (!ir_type_shape_at(&n->type, c->dims, shape, &numel)) {
        fail(c, "cost of kernel k%d: the shape of %%%d does not evaluate at these dims", c->k, n->id);
        return 0;
    }
    return numel;
}

static int64_t bytes_of(cost_ctx *c, const ir_node *n)
{
    int64_t shape[IR_MAX_RANK];
    return shape_at(c, n, shape) * ir_dtype_size(n->type.dtype);
}

/* Weights, or values computed from weights and constants only (bind time). */
static bool from_weights(const ir_node *n)
{
    if (n->op == IR_OP_WEIGHT) return true;
    if (n->group >= 0 || n->ninputs == 0) return false;
    bool weight = false;
    for (int i = 0; i < n->ninputs; i++) {
        const ir_node *x = n->inputs[i];
        if (x->op == IR_OP_CONST) continue;
        if (!from_weights(x)) return false;
        weight = true;
    }
    return weight;
}

static void add_read(cost_ctx *c, const ir_node *via, int64_t bytes)
{
    const ir_node *r = root_of(via);
    if (r->group == c->k || r->op == IR_OP_CONST || r->op == IR_OP_CAUSAL_MASK || bytes <= 0) return;
    for (int i = 0; i < c->nreads; i++)
        if (c->reads[i].root == r->id && c->reads[i].via == via->id) {
            if (bytes > c->reads[i].bytes) c->reads[i].bytes = bytes;
            return;
        }
    if (c->nreads == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        cost_read *nr = realloc(c->reads, (size_t)cap * sizeof *nr);
        if (!nr) {
            fail(c, "out of memory");
            return;
        }
        c->reads = nr;
        c->cap = cap;
    }
    c->reads[c->nreads++] = (cost_read){r->id, via->id, bytes};
}

/* o_b: where sequence b's new rows start. */
static int64_t offset(const cost_ctx *c, const ir_node *pos, int64_t b, int64_t none, int64_t max_o)
{
    if (!pos) return none;
    pos = root_of(pos);
    if (pos->op != IR_OP_INPUT || pos->param < 0 || !c->i32 || !c->i32[pos->param]) return max_o;
    int64_t v = c->i32[pos->param][b];
    return v < 0 ? 0 : v > max_o ? max_o : v;
}

/* The dims attention n works at: B, S, T and the position input. */
typedef struct att_dims {
    int64_t B, S, T, H, HD, HDV;
    const ir_node *pos;
} att_dims;

static bool attention_dims(cost_ctx *c, const ir_node *n, att_dims *d)
{
    int64_t q[IR_MAX_RANK], k[IR_MAX_RANK], v[IR_MAX_RANK];
    shape_at(c, n->inputs[0], q);
    shape_at(c, n->inputs[1], k);
    shape_at(c, n->inputs[2], v);
    if (c->failed) return false;
    *d = (att_dims){q[0], q[1], k[2], q[2], q[3], v[3], n->ninputs > 3 ? n->inputs[3] : NULL};
    return true;
}

/* Keys valid for sequence b: j < o_b + S. */
static int64_t valid_keys(const cost_ctx *c, const att_dims *d, int64_t b)
{
    return offset(c, d->pos, b, d->T - d->S, d->T - d->S) + d->S;
}

/* The first key sequence b's queries attend, its first query at position o:
 * with a sliding window W that query sees keys j > o - W (the later ones
 * fewer below); without one, every key from 0. */
static int64_t first_key(const ir_node *n, int64_t o)
{
    int64_t w = n->attrs.window;
    return w > 0 && o - w + 1 > 0 ? o - w + 1 : 0;
}

/* Query-key pairs of sequence b (new rows from o): causal queries p = o + s
 * see keys up to p, the others up to o + S; a window keeps p - j < W. */
static int64_t attended_pairs(const ir_node *n, int64_t o, int64_t S)
{
    int64_t w = n->attrs.window;
    if (w <= 0) return n->attrs.causal ? S * o + S * (S + 1) / 2 : S * (o + S);
    int64_t pairs = 0;
    for (int64_t s = 0; s < S; s++) {
        int64_t p = o + s, hi = n->attrs.causal ? p + 1 : o + S, lo = p - w + 1 > 0 ? p - w + 1 : 0;
        pairs += hi > lo ? hi - lo : 0;
    }
    return pairs;
}

static int64_t node_flops(cost_ctx *c, const ir_node *n)
{
    int64_t shape[IR_MAX_RANK], xs[IR_MAX_RANK];
    switch (n->op) {
    case IR_OP_MATMUL:
    case IR_OP_LINEAR: {
        int64_t out = shape_at(c, n, shape);
        const ir_node *a = n->inputs[0];
        shape_at(c, a, xs);
        return 2 * out * xs[a->type.rank - 1]; /* K: the last axis of a (and of x) */
    }
    case IR_OP_ATTENTION: {
        att_dims d;
        if (!attention_dims(c, n, &d)) return 0;
        int64_t pairs = 0;
        for (int64_t b = 0; b < d.B; b++) {
            pairs += attended_pairs(n, valid_keys(c, &d, b) - d.S, d.S);
        }
        return 2 * pairs * d.H * (d.HD + d.HDV);
    }
    default: return 0;
    }
}

/* Attention n reads K or V (input i) for its valid keys. */
static void attention_kv_read(cost_ctx *c, const ir_node *n, int i, const att_dims *d)
{
    const ir_node *x = n->inputs[i];
    const ir_node *cw = root_of(x);
    bool fused_write = cw->op == IR_OP_CACHE_WRITE && cw->group == c->k;
    const ir_node *via = fused_write ? cw->inputs[0] : x;
    int64_t rows = 0;
    for (int64_t b = 0; b < d->B; b++) {
        int64_t valid = valid_keys(c, d, b), lo = first_key(n, valid - d->S);
        if (fused_write) {
            /* the cache write's rows [o, o + S) come from its input, not the cache */
            int64_t o = offset(c, cw->ninputs > 2 ? cw->inputs[2] : NULL, b, 0, d->T - d->S);
            int64_t hi = o + d->S < valid ? o + d->S : valid, from = o > lo ? o : lo;
            valid -= hi > from ? hi - from : 0;
        }
        rows += valid > lo ? valid - lo : 0;
    }
    int64_t bytes = bytes_of(c, via);
    if (d->B * d->T > 0) add_read(c, via, bytes / (d->B * d->T) * rows);
}

static void member_reads(cost_ctx *c, const ir_node *n)
{
    if (n->op == IR_OP_ATTENTION) {
        att_dims d;
        if (!attention_dims(c, n, &d)) return;
        add_read(c, n->inputs[0], bytes_of(c, n->inputs[0]));
        attention_kv_read(c, n, 1, &d);
        attention_kv_read(c, n, 2, &d);
        if (d.pos) add_read(c, d.pos, bytes_of(c, d.pos));
        return;
    }
    for (int i = 0; i < n->ninputs; i++) {
        if (n->op == IR_OP_CACHE_WRITE && i == 0) continue; /* stored into, not read */
        add_read(c, n->inputs[i], bytes_of(c, n->inputs[i]));
    }
}

/* Is the value of n (a member of group k, or a free view of one) needed
 * outside group k? */
static bool escapes(const ir_graph *g, int k, const ir_node *n)
{
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value == n) return true;
    for (int i = 0; i < g->nstates; i++)
        if (g->states[i].value == n) return true;
    for (int u = n->id + 1; u < g->nnodes; u++) {
        const ir_node *user = g->nodes[u];
        if (user->group == k) continue;
        bool reads = false;
        for (int j = 0; j < user->ninputs && !reads; j++) reads = user->inputs[j] == n;
        if (!reads) continue;
        if (user->group >= 0) return true;
        if (is_view(user) && escapes(g, k, user)) return true;
    }
    return false;
}

static bool is_state(const ir_graph *g, const ir_node *n)
{
    for (int i = 0; i < g->nstates; i++)
        if (g->states[i].value == n) return true;
    return false;
}

int ir_cost_group(const ir_graph *g, int k, const int64_t *dims, const int32_t *const *i32, ir_cost *out,
                  char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cost_ctx c = {.g = g, .k = k, .dims = dims, .i32 = i32, .err = err, .errlen = errlen};
    if (k < 0 || k >= g->ngroups) {
        fail(&c, "cost: no kernel k%d (the graph has %d)", k, g->ngroups);
        return -1;
    }
    for (int i = 0; i < g->nnodes && !c.failed; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != k) continue;
        member_reads(&c, n);
        out->flops += node_flops(&c, n);
        if (!escapes(g, k, n)) continue;
        int64_t b = bytes_of(&c, n);
        if (n->op == IR_OP_CACHE_WRITE) {
            int64_t cs[IR_MAX_RANK], xs[IR_MAX_RANK];
            shape_at(&c, n, cs);
            shape_at(&c, n->inputs[1], xs);
            if (cs[2] > 0) b = b / cs[2] * xs[1]; /* S of the T rows */
        }
        out->written += b;
        if (n->op == IR_OP_CACHE_WRITE || is_state(g, n)) out->states += b;
    }
    /* requests per root: distinct views add up, at most the whole value */
    for (int i = 0; i < c.nreads && !c.failed; i++) {
        if (c.reads[i].root < 0) continue;
        const ir_node *r = g->nodes[c.reads[i].root];
        int64_t sum = 0;
        for (int j = i; j < c.nreads; j++)
            if (c.reads[j].root == r->id) {
                sum += c.reads[j].bytes;
                if (j > i) c.reads[j].root = -1;
            }
        int64_t whole = bytes_of(&c, r);
        if (sum > whole) sum = whole;
        out->read += sum;
        if (from_weights(r)) out->weights += sum;
        if (r->op == IR_OP_STATE || is_state(g, r)) out->states += sum; /* a state, or its new value in place */
    }
    free(c.reads);
    if (c.failed) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

int ir_cost_layer(const ir_graph *g, const int64_t *dims, const int32_t *const *i32, ir_cost *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof *out);
    cost_ctx c = {.g = g, .k = -1, .dims = dims, .i32 = i32, .err = err, .errlen = errlen};
    for (int i = 0; i < g->nnodes && !c.failed; i++) {
        const ir_node *n = g->nodes[i];
        if (n->op == IR_OP_WEIGHT) out->weights += bytes_of(&c, n);
        out->flops += node_flops(&c, n);
        if (n->op != IR_OP_ATTENTION) continue;
        att_dims d;
        if (!attention_dims(&c, n, &d)) break;
        for (int j = 1; j <= 2; j++) {
            const ir_node *x = root_of(n->inputs[j]);
            if (x->op == IR_OP_CACHE_WRITE) x = root_of(x->inputs[0]);
            if (x->op != IR_OP_STATE) continue;
            int64_t rows = 0;
            for (int64_t b = 0; b < d.B; b++) rows += valid_keys(&c, &d, b);
            int64_t bytes = bytes_of(&c, n->inputs[j]);
            if (d.B * d.T > 0) out->states += bytes / (d.B * d.T) * rows;
        }
    }
    if (c.failed) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->read = out->weights + out->states;
    return 0;
}

ir_floor ir_floor_of(int64_t bytes, int64_t flops, double bandwidth, double rate)
{
    ir_floor f = {0};
    if (bandwidth > 0) f.t_bytes = (double)bytes / bandwidth;
    if (rate > 0) f.t_flops = (double)flops / rate;
    f.flops_bound = f.t_flops > f.t_bytes;
    f.t = f.flops_bound ? f.t_flops : f.t_bytes;
    return f;
}
