/* passes/pass_util.c — the fusion report, use lists, byte counts and the
 * graph rewriter shared by all passes. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "util/vec.h"

void pass_report_init(pass_report *r)
{
    memset(r, 0, sizeof *r);
    arena_init(&r->arena);
}

void pass_report_free(pass_report *r)
{
    free(r->items);
    arena_free(&r->arena);
    memset(r, 0, sizeof *r);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

void pass_decide(pass_ctx *ctx, const ir_graph *g, pass_rule rule, bool taken, ir_dim bytes,
                 ir_node *const *nodes, int nnodes, const char *what, const char *why_fmt, ...)
{
    pass_report *r = ctx->report;
    if (!r) return;
    if (!VEC_GROW(r->items, r->count, r->cap, NULL)) return;
    pass_decision *d = &r->items[r->count++];
    memset(d, 0, sizeof *d);
    d->pass = ctx->pass;
    d->rule = pass_rule_name(rule);
    d->taken = taken;
    d->bytes = bytes;
    d->what = arena_strdup(&r->arena, what);
    va_list ap, ap2;
    va_start(ap, why_fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, why_fmt, ap);
    va_end(ap);
    char *why = len >= 0 ? arena_alloc(&r->arena, (size_t)len + 1) : NULL;
    if (why) vsnprintf(why, (size_t)len + 1, why_fmt, ap2);
    va_end(ap2);
    d->why = why ? why : "";
    for (int i = 0; i < nnodes && d->nlines < 8; i++) {
        int line = nodes[i] ? nodes[i]->loc.line : 0;
        bool dup = line <= 0;
        for (int j = 0; j < d->nlines && !dup; j++) dup = d->lines[j] == line;
        if (!dup) d->lines[d->nlines++] = line;
    }
    qsort(d->lines, (size_t)d->nlines, sizeof d->lines[0], cmp_int);
    (void)g;
}

ir_graph *pass_done(ir_graph *g, pass_ctx *ctx, bool ok)
{
    if (!ok) {
        diag_error(ctx->diags, g->loc, "out of memory");
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* The first size that does not fit, reported at n. */
static ir_dim size_check(pass_ctx *ctx, const ir_node *n, ir_dim r, bool overflow)
{
    if (!overflow) return r;
    if (!ctx->size_overflow) {
        arena a;
        arena_init(&a);
        diag_error(ctx->diags, n->loc, "the size in bytes of %s does not fit in 64 bits", pass_describe(&a, n));
        arena_free(&a);
    }
    ctx->size_overflow = true;
    return ir_dim_const(0);
}

ir_dim pass_size(pass_ctx *ctx, const ir_node *n, int64_t k)
{
    bool overflow = false;
    ir_dim r = ir_dim_times(ir_dim_const(k), ir_type_bytes(&n->type, &overflow), &overflow);
    return size_check(ctx, n, r, overflow);
}

ir_dim pass_size_sum(pass_ctx *ctx, const ir_node *n, ir_dim a, ir_dim b)
{
    bool overflow = false;
    ir_dim r = ir_dim_plus(a, b, &overflow);
    return size_check(ctx, n, r, overflow);
}

bool pass_attrs_eq(const ir_node *a, const ir_node *b)
{
    const ir_attrs *x = &a->attrs, *y = &b->attrs;
    if (x->value != y->value || x->eps != y->eps || x->theta != y->theta || x->scale != y->scale ||
        x->causal != y->causal || x->keepdim != y->keepdim || x->gelu_tanh != y->gelu_tanh ||
        x->axes != y->axes || x->axis != y->axis || !ir_rope_attrs_eq(&x->rope, &y->rope) || x->window != y->window ||
        x->softcap != y->softcap || x->topk != y->topk || x->indices != y->indices || x->packed != y->packed ||
        (x->packed && !ir_dim_eq(&x->nseq, &y->nseq)))
        return false;
    for (int i = 0; i < a->type.rank; i++)
        if (x->perm[i] != y->perm[i]) return false;
    return ir_dim_eq(&x->start, &y->start) && ir_dim_eq(&x->end, &y->end);
}

bool pass_users_build(pass_users *u, const ir_graph *g)
{
    memset(u, 0, sizeof *u);
    int n = g->nnodes;
    u->n = n;
    u->users = calloc((size_t)n + 1, sizeof *u->users);
    u->count = calloc((size_t)n + 1, sizeof *u->count);
    u->is_output = calloc((size_t)n + 1, sizeof *u->is_output);
    int *fill = calloc((size_t)n + 1, sizeof *fill);
    bool ok = u->users && u->count && u->is_output && fill;
    for (int i = 0; ok && i < n; i++)
        for (int j = 0; j < g->nodes[i]->ninputs; j++) {
            int id = g->nodes[i]->inputs[j]->id;
            /* a node reading the same input twice counts once */
            bool dup = false;
            for (int k = 0; k < j; k++) dup |= g->nodes[i]->inputs[k]->id == id;
            if (!dup) u->count[id]++;
        }
    for (int i = 0; ok && i < n; i++)
        if (u->count[i] && !(u->users[i] = malloc((size_t)u->count[i] * sizeof **u->users))) ok = false;
    for (int i = 0; ok && i < n; i++)
        for (int j = 0; j < g->nodes[i]->ninputs; j++) {
            int id = g->nodes[i]->inputs[j]->id;
            bool dup = false;
            for (int k = 0; k < j; k++) dup |= g->nodes[i]->inputs[k]->id == id;
            if (!dup) u->users[id][fill[id]++] = i;
        }
    for (int i = 0; ok && i < g->noutputs; i++) u->is_output[g->outputs[i].value->id] = true;
    for (int i = 0; ok && i < g->nstates; i++) u->is_output[g->states[i].value->id] = true;
    free(fill);
    if (!ok) pass_users_free(u);
    return ok;
}

void pass_users_free(pass_users *u)
{
    if (u->users)
        for (int i = 0; i < u->n; i++) free(u->users[i]);
    free(u->users);
    free(u->count);
    free(u->is_output);
    memset(u, 0, sizeof *u);
}

const char *pass_describe(arena *a, const ir_node *n)
{
    const char *name = ir_op_name(n->op);
    if (n->name && n->param < 0) {
        if (n->loc.line > 0) return arena_printf(a, "%s '%s' (line %d)", name, n->name, n->loc.line);
        return arena_printf(a, "%s '%s'", name, n->name);
    }
    if (n->loc.line > 0) return arena_printf(a, "%s (line %d)", name, n->loc.line);
    return arena_printf(a, "%s %%%d", name, n->id);
}

const char *pass_describe_consumers(arena *a, const ir_graph *g, const pass_users *u, const ir_node *n)
{
    int c = u->count[n->id] + (u->is_output[n->id] ? 1 : 0);
    const char *who = n->name && n->param < 0 ? arena_printf(a, "'%s'", n->name)
                                              : arena_printf(a, "the result of %s", pass_describe(a, n));
    char lines[256];
    size_t off = 0;
    lines[0] = 0;
    for (int i = 0; i < u->count[n->id] && off < sizeof lines - 16; i++) {
        const ir_node *user = g->nodes[u->users[n->id][i]];
        int w = snprintf(lines + off, sizeof lines - off, "%s%d", i ? ", " : "", user->loc.line);
        if (w > 0) off += (size_t)w;
    }
    return arena_printf(a, "%s has %d consumers (lines %s%s)", who, c, lines,
                        u->is_output[n->id] ? ", and it is a model output" : "");
}

bool pass_rw_begin(pass_rewriter *rw, const ir_graph *src, pass_ctx *ctx)
{
    diag_list *d = ctx->diags;
    memset(rw, 0, sizeof *rw);
    rw->src = src;
    rw->ctx = ctx;
    rw->dst = ir_graph_new(src->name);
    rw->map = calloc((size_t)src->nnodes + 1, sizeof *rw->map);
    if (!rw->dst || !rw->map) {
        pass_rw_abort(rw);
        if (d) diag_error(d, (src_loc){0}, "out of memory");
        return false;
    }
    rw->dst->loc = ir_graph_loc(rw->dst, src->loc);
    rw->dst->diags = d;
    for (int i = 0; i < src->nsyms; i++) ir_graph_add_sym(rw->dst, src->syms[i]);
    return true;
}

ir_node *pass_rw_copy(pass_rewriter *rw, const ir_node *n)
{
    ir_node *in[64] = {0};
    ir_node **ins = n->ninputs <= 64 ? in : malloc((size_t)n->ninputs * sizeof *ins);
    if (!ins) return NULL;
    for (int i = 0; i < n->ninputs; i++) ins[i] = rw->map[n->inputs[i]->id];
    ir_node *c = ir_node_copy(rw->dst, n, ins);
    if (ins != in) free(ins);
    rw->map[n->id] = c;
    return c;
}

void pass_rw_abort(pass_rewriter *rw)
{
    ir_graph_free(rw->dst);
    free(rw->map);
    memset(rw, 0, sizeof *rw);
}

ir_graph *pass_rw_finish(pass_rewriter *rw, ir_graph *src)
{
    ir_graph *dst = rw->dst;
    pass_analyses_clear(&rw->ctx->analyses);
    bool ok = true;
    for (int i = 0; i < src->noutputs && ok; i++) {
        ir_node *v = rw->map[src->outputs[i].value->id];
        ok = v && ir_graph_add_output(dst, src->outputs[i].name, v, src->outputs[i].loc) >= 0;
    }
    for (int i = 0; i < src->nstates && ok; i++) {
        ir_node *s = rw->map[src->states[i].state->id], *v = rw->map[src->states[i].value->id];
        ok = s && v && ir_graph_set_state(dst, s, v, src->states[i].loc) >= 0;
    }
    if (!ok) {
        if (dst->diags) diag_error(dst->diags, src->loc, "internal error: a pass lost an output or a state");
        pass_rw_abort(rw);
        ir_graph_free(src);
        return NULL;
    }
    free(rw->map);
    memset(rw, 0, sizeof *rw);
    dst->diags = src->diags;
    ir_graph_free(src);
    return dst;
}

bool pass_is_view(const ir_node *n)
{
    return n->op == IR_OP_RESHAPE || n->op == IR_OP_PERMUTE || n->op == IR_OP_SLICE;
}

const pass_users *pass_analyses_users(pass_analyses *an, const ir_graph *g)
{
    if (an->g != g || an->nnodes != g->nnodes) pass_analyses_clear(an);
    if (!an->have_users) {
        if (!pass_users_build(&an->users, g)) return NULL;
        an->have_users = true;
    }
    an->g = g;
    an->nnodes = g->nnodes;
    return &an->users;
}

const bool *pass_analyses_bind_time(pass_analyses *an, const ir_graph *g)
{
    if (an->g != g || an->nnodes != g->nnodes) pass_analyses_clear(an);
    if (!an->bind && !(an->bind = pass_bind_time(g))) return NULL;
    an->g = g;
    an->nnodes = g->nnodes;
    return an->bind;
}

void pass_analyses_clear(pass_analyses *an)
{
    if (an->have_users) pass_users_free(&an->users);
    free(an->bind);
    memset(an, 0, sizeof *an);
}

/* bind[id]: computed from weights and constants only */
bool *pass_bind_time(const ir_graph *g)
{
    bool *bind = calloc((size_t)g->nnodes + 1, sizeof *bind);
    if (!bind) return NULL;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->op == IR_OP_WEIGHT) {
            bind[i] = true;
        } else if (n->param < 0 && n->ninputs > 0) {
            bool all = true;
            for (int j = 0; j < n->ninputs && all; j++) {
                const ir_node *in = n->inputs[j];
                all = bind[in->id] || in->op == IR_OP_CONST;
            }
            bind[i] = all;
        }
    }
    return bind;
}

