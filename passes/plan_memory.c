/* passes/plan_memory.c — liveness and buffer reuse for intermediates.
 *
 * Algorithm: find every value written by one kernel and read by another
 * (looking through views, which share their base's buffer). Its lifetime is
 * [writer kernel, last reader kernel]. Buffers are placed largest first at
 * the lowest offset that does not overlap, in address, any placed buffer
 * whose lifetime overlaps its own. Two lifetimes that only touch — one ends
 * at kernel k, the other starts at k — do not overlap when kernel k is an
 * elementwise or row kernel of the same size that reads the older value
 * element for element (no view remapping its indices): it reads each
 * element before writing it, so the output may take the input's place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "util/vec.h"

/* Kernel k reads v only element for element: every reader in k is an
 * elementwise op or a row op (norm, softmax) over v's own shape, reading v
 * directly rather than through a view that would remap indices. Then the
 * element at index i is read before the same index of the output is
 * written, and k may write its output over v. */
static bool reads_in_step(const ir_graph *g, int k, const ir_node *v)
{
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != k) continue;
        for (int j = 0; j < n->ninputs; j++) {
            const ir_node *in = n->inputs[j];
            if (in != v) {
                while (in->group < 0 && pass_is_view(in)) in = in->inputs[0];
                if (in == v) return false; /* through a view: indices remapped */
                continue;
            }
            bool row = n->op == IR_OP_RMSNORM || n->op == IR_OP_LAYERNORM || n->op == IR_OP_SOFTMAX;
            if (ir_op_class(n->op) != IR_CLASS_ELEMENTWISE && !row) return false;
            if (n->type.rank != v->type.rank) return false;
            for (int d = 0; d < v->type.rank; d++)
                if (!ir_dim_eq(&n->type.dims[d], &v->type.dims[d])) return false;
        }
    }
    return true;
}

static bool in_place_ok(const ir_graph *g, const pass_buffer *a, const pass_buffer *b)
{
    const pass_buffer *early = a->last <= b->first ? a : b, *late = early == a ? b : a;
    if (early->last != late->first || early->bytes != late->bytes) return false;
    ir_group_kind kind = g->groups[late->first].kind;
    if (kind != IR_GROUP_ELEMENTWISE && kind != IR_GROUP_ROW) return false;
    return reads_in_step(g, late->first, early->value);
}

static bool conflict(const ir_graph *g, const pass_buffer *a, const pass_buffer *b)
{
    if (a->last < b->first || b->last < a->first) return false;
    if ((a->last == b->first || b->last == a->first) && in_place_ok(g, a, b)) return false;
    bool addr = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
    return addr;
}

static int cmp_size(const void *x, const void *y)
{
    const pass_buffer *a = *(pass_buffer *const *)x, *b = *(pass_buffer *const *)y;
    if (a->bytes != b->bytes) return a->bytes < b->bytes ? 1 : -1;
    return a->value->id - b->value->id;
}

/* The node whose buffer a value lives in (views alias their base). */
static const ir_node *base_of(const ir_node *n)
{
    while (n->group < 0 && pass_is_view(n)) n = n->inputs[0];
    return n;
}

int pass_plan_memory(const ir_graph *g, const int64_t *dims, pass_memplan *mp, char *err, size_t errlen)
{
    memset(mp, 0, sizeof *mp);
    int n = g->nnodes;
    int *last = malloc(((size_t)n + 1) * sizeof *last);
    bool *external = calloc((size_t)n + 1, sizeof *external);
    bool *bind = pass_bind_time(g);
    int capbufs = 0;
    if (!last || !external || !bind) goto oom;
    for (int i = 0; i < n; i++) last[i] = -1;
    for (int i = 0; i < g->noutputs; i++) external[base_of(g->outputs[i].value)->id] = true;
    for (int i = 0; i < g->nstates; i++) external[base_of(g->states[i].value)->id] = true;
    for (int i = 0; i < n; i++) {
        const ir_node *c = g->nodes[i];
        if (c->group < 0) continue;
        for (int j = 0; j < c->ninputs; j++) {
            const ir_node *p = base_of(c->inputs[j]);
            if (p->group >= 0 && p->group != c->group && c->group > last[p->id]) last[p->id] = c->group;
            /* a norm its GEMVs may compute (passes/fold_norm_gemv.c): they read its input */
            if (p->group >= 0 && g->groups[p->group].fold_into_gemv && g->groups[p->group].anchor == p) {
                const ir_node *x = base_of(p->inputs[0]);
                if (x->group >= 0 && x->group != c->group && c->group > last[x->id]) last[x->id] = c->group;
            }
        }
    }
    const ir_node *v = NULL;
    for (int i = 0; i < n; i++) {
        v = g->nodes[i];
        bool packed = bind[i] && v->op != IR_OP_WEIGHT && v->param < 0;
        bool buffer = v->group >= 0 && last[i] >= 0 && !external[i];
        if (!packed && !buffer) continue;
        bool overflow = false;
        ir_dim b = ir_type_bytes(&v->type, &overflow);
        int64_t bytes = 0;
        if (overflow) goto too_large;
        if (!ir_dim_value(&b, dims, &bytes)) {
            if (!dims) goto unbound;
            goto too_large; /* every dim has a value: the size overflowed */
        }
        if (packed && __builtin_add_overflow(mp->packed, bytes, &mp->packed)) goto too_large;
        if (!buffer) continue;
        if (!VEC_GROW(mp->bufs, mp->nbufs, capbufs, NULL)) goto oom;
        /* 256-byte aligned for vector loads */
        if (__builtin_add_overflow(bytes, 255, &bytes)) goto too_large;
        bytes &= ~(int64_t)255;
        if (__builtin_add_overflow(mp->total, bytes, &mp->total)) goto too_large;
        mp->bufs[mp->nbufs++] = (pass_buffer){v, v->group, last[i], bytes, 0};
    }
    pass_buffer **order = malloc(((size_t)mp->nbufs + 1) * sizeof *order);
    if (!order) goto oom;
    for (int i = 0; i < mp->nbufs; i++) order[i] = &mp->bufs[i];
    qsort(order, (size_t)mp->nbufs, sizeof *order, cmp_size);
    for (int i = 0; i < mp->nbufs; i++) {
        pass_buffer *b = order[i];
        b->offset = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++)
                if (conflict(g, b, order[j])) {
                    b->offset = order[j]->offset + order[j]->bytes;
                    moved = true;
                }
        }
        if (b->offset + b->bytes > mp->peak) mp->peak = b->offset + b->bytes;
    }
    free(order);
    free(last);
    free(external);
    free(bind);
    return 0;
unbound:
    snprintf(err, errlen, "the memory plan needs a value for every dim: bind ");
    for (int i = 0; i < g->nsyms; i++) {
        size_t len = strlen(err);
        snprintf(err + len, errlen > len ? errlen - len : 0, "%s-D %s=N", i ? " " : "", g->syms[i]);
    }
    goto fail;
too_large: {
    /* located at the model line that computes the value */
    arena a;
    arena_init(&a);
    const char *what = pass_describe(&a, v);
    if (v->loc.line > 0)
        snprintf(err, errlen, "%s:%d: the size in bytes of %s does not fit in 64 bits at these dims",
                 v->loc.file ? v->loc.file : g->name, v->loc.line, what ? what : "a value");
    else
        snprintf(err, errlen, "the size in bytes of %s does not fit in 64 bits at these dims", what ? what : "a value");
    arena_free(&a);
    goto fail;
}
oom:
    snprintf(err, errlen, "out of memory");
fail:
    free(last);
    free(external);
    free(bind);
    pass_memplan_free(mp);
    return -1;
}

void pass_memplan_free(pass_memplan *mp)
{
    free(mp->bufs);
    memset(mp, 0, sizeof *mp);
}

void pass_memplan_print(const ir_graph *g, const pass_memplan *mp, FILE *out)
{
    arena a;
    arena_init(&a);
    ir_dim peak = ir_dim_const(mp->peak), total = ir_dim_const(mp->total), packed = ir_dim_const(mp->packed);
    fprintf(out, "memory plan: %d intermediate buffers, peak %s (%s without reuse); packed weights %s\n",
            mp->nbufs, pass_bytes_str(&a, g, &peak),
            pass_bytes_str(&a, g, &total), pass_bytes_str(&a, g, &packed));
    for (int i = 0; i < mp->nbufs; i++) {
        const pass_buffer *b = &mp->bufs[i];
        ir_dim bytes = ir_dim_const(b->bytes);
        fprintf(out, "  buf %-3d %%%-4d %-28s kernels k%d..k%d  offset %-10lld %s\n", i, b->value->id,
                pass_describe(&a, b->value), b->first, b->last, (long long)b->offset,
                pass_bytes_str(&a, g, &bytes));
    }
    arena_free(&a);
}
