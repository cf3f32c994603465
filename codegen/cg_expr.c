/* codegen/cg_expr.c — the expression emitter.
 *
 * Every generated hook computes the values of some group members at one
 * element index and stores some of them. cg_value(n, idx) returns a float C
 * expression for node n at idx, emitting the statements it needs into the
 * current body:
 *
 *   - a substituted node (the anchor's value handed to a hook by the
 *     template) is its expression;
 *   - CONST is a literal (%.9g, rounded to its dtype), CAUSAL_MASK is
 *     computed from the indices;
 *   - a view (reshape, permute, slice) read through by indexing remaps the
 *     index: reshape keeps the flat index, permute and slice map coordinates;
 *   - a member of the group is computed inline from its inputs, each read at
 *     its own broadcast index (numpy rules: trailing axes aligned, an axis of
 *     constant size 1 reads coordinate 0); reductions, softmax, norms and
 *     matmuls become loops, gathers become index math;
 *   - anything else is loaded from its storage (a KilnArgs pointer).
 *
 * Indices are pure long long expressions (flat index and/or coordinates over
 * the dims in KilnArgs, p.dim_<sym>); long ones are hoisted into locals.
 * Values are float locals, memoized per (node, index) within the block that
 * declared them, so a value used twice is computed once. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_impl.h"
#include "util/vec.h"

/* ---- strings -------------------------------------------------------------- */

void cg_str_append(cg_str *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (n > SIZE_MAX - b->len - 1 || !vec_reserve((void **)&b->s, &b->cap, b->len + n + 1, 1, NULL)) {
        b->oom = true;
        return;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void cg_str_vprintf(cg_str *b, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        b->oom = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        cg_str_append(b, small, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (!big) {
            b->oom = true;
        } else {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            cg_str_append(b, big, (size_t)n);
            free(big);
        }
    }
    va_end(ap2);
}

void cg_str_printf(cg_str *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cg_str_vprintf(b, fmt, ap);
    va_end(ap);
}

void cg_str_free(cg_str *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

bool cg_fail(cg_gen *gen, const char *fmt, ...)
{
    if (!gen->failed) {
        gen->failed = true;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(gen->err, gen->errlen, fmt, ap);
        va_end(ap);
    }
    return false;
}

const char *cg_printf(cg_gen *gen, const char *fmt, ...)
{
    cg_str s = {0};
    va_list ap;
    va_start(ap, fmt);
    cg_str_vprintf(&s, fmt, ap);
    va_end(ap);
    char *r = s.oom ? NULL : arena_strdup(gen->a, s.s ? s.s : "");
    cg_str_free(&s);
    if (!r) {
        cg_fail(gen, "out of memory");
        return "0";
    }
    return r;
}

const char *cg_float_lit(cg_gen *gen, double v)
{
    if (isnan(v)) return "KILN_NAN";
    if (isinf(v)) return v > 0 ? "KILN_INF" : "(-KILN_INF)";
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", v);
    bool frac = strpbrk(buf, ".eE") != NULL;
    return cg_printf(gen, "%s%s%sf%s", v < 0 ? "(" : "", buf, frac ? "" : ".0", v < 0 ? ")" : "");
}

/* ---- dims ------------------------------------------------------------------ */

bool cg_dim_one(const ir_dim *d)
{
    int64_t v;
    return ir_dim_is_const(d, &v) && v == 1;
}

const char *cg_dim(cg_gen *gen, const ir_dim *d)
{
    int64_t v;
    if (ir_dim_is_const(d, &v)) return cg_printf(gen, "%lldLL", (long long)v);
    cg_str s = {0};
    /* parenthesized unless a bare symbol: it goes into products and quotients */
    int nfactors = d->t[0].coef != 1;
    for (int i = 0; i < IR_MAX_SYMS; i++) nfactors += d->t[0].exp[i];
    bool paren = d->nterms > 1 || nfactors > 1;
    if (paren) cg_str_append(&s, "(", 1);
    for (int t = 0; t < d->nterms; t++) {
        const ir_dim_term *term = &d->t[t];
        int64_t c = term->coef;
        if (t > 0) cg_str_append(&s, c < 0 ? " - " : " + ", 3);
        else if (c < 0) cg_str_append(&s, "-", 1);
        if (c < 0) c = -c;
        bool first = true;
        if (c != 1) {
            cg_str_printf(&s, "%lldLL", (long long)c);
            first = false;
        }
        for (int i = 0; i < gen->g->nsyms && i < IR_MAX_SYMS; i++)
            for (int e = 0; e < term->exp[i]; e++) {
                cg_str_printf(&s, "%sp.dim_%s", first ? "" : " * ", gen->g->syms[i]);
                first = false;
                gen->dim_used[i] = true;
            }
        if (first) cg_str_append(&s, "1LL", 3);
    }
    if (paren) cg_str_append(&s, ")", 1);
    const char *r = s.oom ? NULL : arena_strdup(gen->a, s.s);
    cg_str_free(&s);
    if (!r) {
        cg_fail(gen, "out of memory");
        return "0";
    }
    return r;
}

/* ---- body writing ------------------------------------------------------------ */

static void indent(cg_gen *gen)
{
    for (int i = 0; i < gen->depth + 1; i++) cg_str_append(gen->body, "    ", 4);
}

void cg_line(cg_gen *gen, const char *fmt, ...)
{
    indent(gen);
    va_list ap;
    va_start(ap, fmt);
    cg_str_vprintf(gen->body, fmt, ap);
    va_end(ap);
    cg_str_append(gen->body, "\n", 1);
}

void cg_open(cg_gen *gen, const char *fmt, ...)
{
    indent(gen);
    va_list ap;
    va_start(ap, fmt);
    cg_str_vprintf(gen->body, fmt, ap);
    va_end(ap);
    cg_str_append(gen->body, " {\n", 3);
    gen->depth++;
}

void cg_close(cg_gen *gen)
{
    while (gen->nmemo > 0 && gen->memo[gen->nmemo - 1].depth >= gen->depth) gen->nmemo--;
    gen->depth--;
    indent(gen);
    cg_str_append(gen->body, "}\n", 2);
}

void cg_begin_fn(cg_gen *gen, cg_str *body)
{
    gen->body = body;
    gen->depth = 0;
    gen->tmp = 0;
    gen->nmemo = 0;
    gen->nsubst = 0;
}

void cg_set_subst(cg_gen *gen, const ir_node *n, const char *expr)
{
    for (int i = 0; i < gen->nsubst; i++)
        if (gen->subst[i].node == n->id) {
            gen->subst[i].expr = expr;
            return;
        }
    if (gen->nsubst < (int)(sizeof gen->subst / sizeof gen->subst[0]))
        gen->subst[gen->nsubst++] = (cg_subst){n->id, expr};
    else
        cg_fail(gen, "internal error: too many substitutions");
    gen->nmemo = 0; /* values computed before may have used the old binding */
}

void cg_clear_subst(cg_gen *gen)
{
    gen->nsubst = 0;
    gen->nmemo = 0;
}

/* ---- storage and arguments ------------------------------------------------------ */

static const char *ctype_of(ir_dtype t)
{
    switch (t) {
    case IR_F32: return "float";
    case IR_F16: return "__half";
    case IR_BF16: return "__nv_bfloat16";
    case IR_I32: return "int";
    default: return "float";
    }
}

bool cg_is_member(const cg_gen *gen, const ir_node *n) { return n->group == gen->k; }

bool cg_is_free_view(const cg_gen *gen, const ir_node *n)
{
    return pass_is_view(n) && !gen->bind[n->id] && (n->group < 0 || n->group == gen->k);
}

const ir_node *cg_storage_node(const cg_gen *gen, const ir_node *n)
{
    for (int i = 0; i < gen->g->nstates; i++)
        if (gen->g->states[i].value == n) return gen->g->states[i].state;
    return n;
}

static bool binding_of(cg_gen *gen, const ir_node *n, cg_arg_kind *kind, int *index)
{
    const ir_graph *g = gen->g;
    *index = -1;
    if (n->param >= 0) {
        *kind = CG_ARG_PARAM;
        *index = n->param;
        return true;
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value == n) {
            *kind = CG_ARG_OUTPUT;
            *index = i;
            return true;
        }
    for (int i = 0; i < g->nstates; i++)
        if (g->states[i].value == n) {
            *kind = CG_ARG_STATE;
            *index = i;
            return true;
        }
    if (gen->bind[n->id]) {
        *kind = CG_ARG_PACKED;
        return true;
    }
    if (n->group >= 0) {
        *kind = CG_ARG_INTERMEDIATE;
        return true;
    }
    return cg_fail(gen, "internal error: %%%d (%s) has no storage and no kernel", n->id, ir_op_name(n->op));
}

static cg_arg *new_arg(cg_gen *gen)
{
    if (!VEC_GROW(gen->args, gen->nargs, gen->capargs, NULL)) {
        cg_fail(gen, "out of memory");
        return NULL;
    }
    cg_arg *a = &gen->args[gen->nargs++];
    memset(a, 0, sizeof *a);
    a->node = -1;
    a->index = -1;
    return a;
}

static const char *ptr_ctype(cg_gen *gen, const ir_node *n, bool written)
{
    return cg_printf(gen, "%s%s *", written ? "" : "const ", ctype_of(n->type.dtype));
}

const char *cg_ptr_named(cg_gen *gen, const char *field, const ir_node *n, bool written)
{
    for (int i = 0; i < gen->nargs; i++)
        if (!strcmp(gen->args[i].field, field)) {
            if (gen->args[i].node != n->id) {
                cg_fail(gen, "internal error: field %s bound twice", field);
                return NULL;
            }
            if (written && !gen->args[i].written) {
                gen->args[i].written = true;
                gen->args[i].ctype = ptr_ctype(gen, n, true);
            }
            return gen->args[i].field;
        }
    cg_arg_kind kind = CG_ARG_NULL;
    int index;
    if (!binding_of(gen, n, &kind, &index)) return NULL;
    cg_arg *a = new_arg(gen);
    if (!a) return NULL;
    a->kind = kind;
    a->field = arena_strdup(gen->a, field);
    a->ctype = ptr_ctype(gen, n, written);
    a->node = n->id;
    a->index = index;
    a->written = written;
    return a->field;
}

const char *cg_ptr(cg_gen *gen, const ir_node *n, bool written)
{
    char name[32];
    snprintf(name, sizeof name, "t%d", n->id);
    return cg_ptr_named(gen, name, n, written);
}

const char *cg_ptr_strided(cg_gen *gen, const char *field, const cg_strided *s, bool written)
{
    const char *f = cg_ptr_named(gen, field, s->base, written);
    if (f)
        for (int i = 0; i < gen->nargs; i++)
            if (!strcmp(gen->args[i].field, field)) gen->args[i].elem_offset = s->off;
    return f;
}

void cg_null_ptr(cg_gen *gen, const char *field, const char *ctype)
{
    cg_arg *a = new_arg(gen);
    if (!a) return;
    a->kind = CG_ARG_NULL;
    a->field = arena_strdup(gen->a, field);
    a->ctype = ctype;
}

/* The run's table field of a kind (const int *), added the first time; false when out of memory. */
static bool table_field(cg_gen *gen, cg_arg_kind kind, const char *field)
{
    for (int i = 0; i < gen->nargs; i++)
        if (gen->args[i].kind == kind) return true;
    cg_arg *a = new_arg(gen);
    if (!a) return false;
    a->kind = kind;
    a->field = field;
    a->ctype = "const int *";
    return true;
}

const char *cg_slot_row(cg_gen *gen, const char *b)
{
    if (!table_field(gen, CG_ARG_SLOTS, "slot")) return "0LL";
    return cg_printf(gen, "kiln_slot(p.slot, %s)", b);
}

const char *cg_seq_table(cg_gen *gen)
{
    return table_field(gen, CG_ARG_SEQS, "cu_q") ? "p.cu_q" : "((const int *)0)";
}

void cg_scalar(cg_gen *gen, const char *field, ir_dim value)
{
    cg_arg *a = new_arg(gen);
    if (!a) return;
    a->kind = CG_ARG_SCALAR;
    a->field = arena_strdup(gen->a, field);
    a->ctype = "long long";
    a->dim = value;
}

void cg_workspace(cg_gen *gen, const char *field, const char *ctype, ir_dim bytes, bool zeroed)
{
    cg_arg *a = new_arg(gen);
    if (!a) return;
    a->kind = CG_ARG_WORKSPACE;
    a->field = arena_strdup(gen->a, field);
    a->ctype = ctype;
    a->dim = bytes;
    a->written = true;
    a->zeroed = zeroed;
}

bool cg_used_outside(const cg_gen *gen, const ir_node *n)
{
    const pass_users *u = gen->users;
    if (u->is_output[n->id]) return true;
    for (int i = 0; i < u->count[n->id]; i++) {
        const ir_node *c = gen->g->nodes[u->users[n->id][i]];
        if (c->group == gen->k) continue;
        if (c->group < 0 && cg_is_free_view(gen, c)) {
            if (cg_used_outside(gen, c)) return true;
            continue;
        }
        return true;
    }
    return false;
}

/* ---- strided layouts through views -------------------------------------------------- */

static bool sample_value(const cg_gen *gen, const ir_dim *d, int64_t *v)
{
    int64_t syms[IR_MAX_SYMS];
    for (int i = 0; i < IR_MAX_SYMS; i++) syms[i] = 1000 + 37 * i;
    (void)gen;
    return ir_dim_eval(d, syms, v);
}

static bool reshape_strides(cg_gen *gen, const ir_type *it, const cg_strided *in, const ir_type *ot,
                            cg_strided *out)
{
    int ia[IR_MAX_RANK], ni = 0, oa[IR_MAX_RANK], no = 0;
    for (int i = 0; i < it->rank; i++)
        if (!cg_dim_one(&it->dims[i])) ia[ni++] = i;
    for (int j = 0; j < ot->rank; j++) {
        out->stride[j] = ir_dim_const(0);
        if (!cg_dim_one(&ot->dims[j])) oa[no++] = j;
    }
    int i = 0, j = 0;
    while (i < ni && j < no) {
        int i0 = i, j0 = j;
        ir_dim pi = it->dims[ia[i++]], po = ot->dims[oa[j++]];
        while (!ir_dim_eq(&pi, &po)) {
            int64_t vi, vo;
            if (!sample_value(gen, &pi, &vi) || !sample_value(gen, &po, &vo)) return false;
            if (vi < vo) {
                if (i >= ni || !ir_dim_mul(pi, it->dims[ia[i++]], &pi)) return false;
            } else {
                if (j >= no || !ir_dim_mul(po, ot->dims[oa[j++]], &po)) return false;
            }
        }
        /* the input axes ia[i0..i) must be one contiguous run */
        for (int t = i0; t + 1 < i; t++) {
            ir_dim want;
            if (!ir_dim_mul(in->stride[ia[t + 1]], it->dims[ia[t + 1]], &want)) return false;
            if (!ir_dim_eq(&want, &in->stride[ia[t]])) return false;
        }
        out->stride[oa[j - 1]] = in->stride[ia[i - 1]];
        for (int t = j - 2; t >= j0; t--)
            if (!ir_dim_mul(out->stride[oa[t + 1]], ot->dims[oa[t + 1]], &out->stride[oa[t]])) return false;
    }
    return i == ni && j == no;
}

/* weight_views: follow views computed at bind time too, down to a weight
 * (cg_weight_view_of); any_group: views of any kernel's group (not computed
 * at bind time), down to any stored value (cg_strided_in_graph); else only
 * free views, down to any stored value. */
static bool strided_of_ex(cg_gen *gen, const ir_node *n, cg_strided *out, bool weight_views, bool any_group)
{
    memset(out, 0, sizeof *out);
    const bool view = weight_views ? pass_is_view(n) && (n->group < 0 || n->group == gen->k)
                      : any_group  ? pass_is_view(n) && !gen->bind[n->id]
                                   : cg_is_free_view(gen, n);
    if (view) {
        cg_strided in;
        if (!strided_of_ex(gen, n->inputs[0], &in, weight_views, any_group)) return false;
        const ir_type *it = &n->inputs[0]->type;
        *out = in;
        out->rank = n->type.rank;
        switch (n->op) {
        case IR_OP_SLICE: {
            ir_dim d;
            if (n->attrs.packed) return false; /* rows of each sequence: through the table */
            if (!ir_dim_mul(n->attrs.start, in.stride[n->attrs.axis], &d)) return false;
            if (!ir_dim_add(in.off, d, &out->off)) return false;
            return true;
        }
        case IR_OP_PERMUTE:
            for (int i = 0; i < n->type.rank; i++) out->stride[i] = in.stride[n->attrs.perm[i]];
            return true;
        case IR_OP_RESHAPE: return reshape_strides(gen, it, &in, &n->type, out);
        default: return false;
        }
    }
    if (weight_views && n->op != IR_OP_WEIGHT) return false;
    if (!any_group && cg_is_member(gen, n) && n != gen->anchor) return false;
    out->base = n;
    out->rank = n->type.rank;
    out->off = ir_dim_const(0);
    ir_dim s = ir_dim_const(1);
    for (int i = n->type.rank - 1; i >= 0; i--) {
        out->stride[i] = s;
        if (!ir_dim_mul(s, n->type.dims[i], &s)) return false;
    }
    return true;
}

static bool strided_of(cg_gen *gen, const ir_node *n, cg_strided *out, bool weight_views)
{
    return strided_of_ex(gen, n, out, weight_views, false);
}

bool cg_strided_of(cg_gen *gen, const ir_node *n, cg_strided *out) { return strided_of(gen, n, out, false); }

bool cg_strided_in_graph(cg_gen *gen, const ir_node *n, cg_strided *out) { return strided_of_ex(gen, n, out, false, true); }

bool cg_weight_view_of(cg_gen *gen, const ir_node *n, cg_strided *out)
{
    return pass_is_view(n) && gen->bind[n->id] && strided_of(gen, n, out, true);
}

/* ---- indices ------------------------------------------------------------------- */

static const char *hoist(cg_gen *gen, const char *e)
{
    if (strlen(e) < 100) return e;
    const char *v = cg_printf(gen, "i%d", gen->tmp++);
    cg_line(gen, "const long long %s = %s;", v, e);
    return v;
}

cg_idx cg_idx_flat(const ir_type *t, const char *flat)
{
    cg_idx x;
    memset(&x, 0, sizeof x);
    x.t = t;
    x.flat = flat;
    return x;
}

const char *cg_idx_coord(cg_gen *gen, const cg_idx *x, int axis)
{
    if (x->c[axis]) return x->c[axis];
    const ir_type *t = x->t;
    if (cg_dim_one(&t->dims[axis])) return "0";
    ir_dim stride = ir_type_numel(t, axis + 1, t->rank, &gen->dim_overflow);
    bool unit = cg_dim_one(&stride);
    if (axis == 0) {
        if (unit) return x->flat;
        return hoist(gen, cg_printf(gen, "(%s / %s)", x->flat, cg_dim(gen, &stride)));
    }
    if (unit) return hoist(gen, cg_printf(gen, "(%s %% %s)", x->flat, cg_dim(gen, &t->dims[axis])));
    return hoist(gen, cg_printf(gen, "(%s / %s %% %s)", x->flat, cg_dim(gen, &stride),
                                cg_dim(gen, &t->dims[axis])));
}

const char *cg_idx_flatten(cg_gen *gen, const cg_idx *x)
{
    if (x->flat) return x->flat;
    const ir_type *t = x->t;
    if (t->rank == 0) return "0";
    const char *e = NULL;
    for (int i = 0; i < t->rank; i++) {
        if (cg_dim_one(&t->dims[i])) continue;
        if (!e) e = x->c[i];
        else e = cg_printf(gen, "(%s * %s + %s)", e, cg_dim(gen, &t->dims[i]), x->c[i]);
    }
    return hoist(gen, e ? e : "0");
}

cg_idx cg_idx_broadcast(cg_gen *gen, const cg_idx *x, const ir_type *to)
{
    cg_idx r;
    if (ir_type_same_shape(x->t, to)) {
        r = *x;
        r.t = to;
        return r;
    }
    r = cg_idx_flat(to, NULL);
    if (to->rank == 0) {
        r.flat = "0";
        return r;
    }
    int shift = x->t->rank - to->rank;
    if (shift < 0) {
        cg_fail(gen, "internal error: broadcast to a smaller rank");
        r.flat = "0";
        return r;
    }
    for (int j = 0; j < to->rank; j++)
        r.c[j] = cg_dim_one(&to->dims[j]) ? "0" : cg_idx_coord(gen, x, j + shift);
    return r;
}

static const char *idx_key(cg_gen *gen, const cg_idx *x)
{
    if (x->flat) return x->flat;
    cg_str s = {0};
    for (int i = 0; i < x->t->rank; i++) cg_str_printf(&s, "%s%s", i ? "," : "", x->c[i]);
    const char *r = arena_strdup(gen->a, s.s ? s.s : "");
    cg_str_free(&s);
    return r ? r : "";
}

/* ---- values ------------------------------------------------------------------------ */

static const char *memo_find(cg_gen *gen, const ir_node *n, const char *key)
{
    for (int i = gen->nmemo - 1; i >= 0; i--)
        if (gen->memo[i].node == n->id && !strcmp(gen->memo[i].key, key)) return gen->memo[i].var;
    return NULL;
}

static void memo_add(cg_gen *gen, const ir_node *n, const char *key, const char *var)
{
    if (!VEC_GROW(gen->memo, gen->nmemo, gen->capmemo, NULL)) {
        cg_fail(gen, "out of memory");
        return;
    }
    gen->memo[gen->nmemo++] = (cg_memo){n->id, key, var, gen->depth};
}

static const char *new_var(cg_gen *gen, const char *prefix)
{
    return cg_printf(gen, "%s%d", prefix, gen->tmp++);
}

const char *cg_packed_token(cg_gen *gen, const char *tok, const ir_dim *nseq, const char **local)
{
    const char *cu = cg_seq_table(gen), *seq = new_var(gen, "sq");
    *local = new_var(gen, "ls");
    cg_line(gen, "const long long %s = kiln_seq_of(%s, %s, %s);", seq, cu, cg_dim(gen, nseq), tok);
    cg_line(gen, "const long long %s = %s - %s[%s];", *local, tok, cu, seq);
    return seq;
}

/* A float local holding e. */
static const char *def_float(cg_gen *gen, const char *e)
{
    const char *v = new_var(gen, "f");
    cg_line(gen, "const float %s = %s;", v, e);
    return v;
}

/* The index of a view's input for element x of the view. */
static cg_idx view_input_idx(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_type *it = &n->inputs[0]->type;
    cg_idx r = cg_idx_flat(it, NULL);
    switch (n->op) {
    case IR_OP_RESHAPE: r.flat = cg_idx_flatten(gen, x); break;
    case IR_OP_PERMUTE:
        for (int i = 0; i < n->type.rank; i++) r.c[n->attrs.perm[i]] = cg_idx_coord(gen, x, i);
        break;
    case IR_OP_SLICE:
        for (int i = 0; i < n->type.rank; i++) r.c[i] = cg_idx_coord(gen, x, i);
        if (n->attrs.packed) { /* row q of the result: sequence q's tokens from start = S - back */
            ir_dim S = n->inputs[0]->type.dims[1], back;
            int64_t c;
            if (!ir_dim_sub(S, n->attrs.start, &back) || !ir_dim_is_const(&back, &c)) {
                cg_fail(gen, "a packed slice takes the tokens from S - c (c a constant) of each sequence");
                r.flat = "0";
                break;
            }
            const char *q = cg_idx_coord(gen, x, 0);
            r.c[0] = "0LL";
            r.c[1] = cg_printf(gen, "((long long)%s[%s + 1] - %lldLL + %s)", cg_seq_table(gen), q, (long long)c,
                               cg_idx_coord(gen, x, 1));
        } else if (n->attrs.start.nterms != 0)
            r.c[n->attrs.axis] = cg_printf(gen, "(%s + %s)", r.c[n->attrs.axis], cg_dim(gen, &n->attrs.start));
        break;
    default: cg_fail(gen, "internal error: not a view"); r.flat = "0";
    }
    return r;
}

/* Coordinates of node n's input `in` for a reduction over `axes` of in:
 * reduced axes get loop variables loop[j]. */
static cg_idx reduce_input_idx(cg_gen *gen, const cg_idx *x, const ir_type *it, uint32_t axes, bool keepdim,
                               const char *const *loop)
{
    cg_idx r = cg_idx_flat(it, NULL);
    int o = 0;
    for (int j = 0; j < it->rank; j++) {
        if (axes & (1u << j)) {
            r.c[j] = loop[j];
            if (keepdim) o++;
        } else {
            r.c[j] = cg_idx_coord(gen, x, o++);
        }
    }
    return r;
}

/* Opens one loop per reduced axis; fills loop[j]. Returns how many opened. */
static int open_loops(cg_gen *gen, const ir_type *it, uint32_t axes, const char **loop)
{
    int opened = 0;
    for (int j = 0; j < it->rank; j++) {
        loop[j] = NULL;
        if (!(axes & (1u << j))) continue;
        loop[j] = new_var(gen, "r");
        cg_open(gen, "for (long long %s = 0; %s < %s; %s++)", loop[j], loop[j], cg_dim(gen, &it->dims[j]), loop[j]);
        opened++;
    }
    return opened;
}

static void close_loops(cg_gen *gen, int n)
{
    while (n-- > 0) cg_close(gen);
}

static const char *load(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const char *f = cg_ptr(gen, n, false);
    if (!f) return "0.0f";
    if (gen->ld_pre == 1) {
        const char *ix = cg_idx_flatten(gen, x);
        if (gen->ld_count < CG_LD_REC) gen->ld_field[gen->ld_count] = f, gen->ld_index[gen->ld_count] = ix;
        return cg_printf(gen, "(pre[%d] = kiln_ld(p.%s + %s))", gen->ld_count++, f, ix);
    }
    if (gen->ld_pre == 2) return cg_printf(gen, "pre[%d]", gen->ld_count++);
    if (gen->ptr_wrap) /* kiln_ldv: a plain integer load the compiler may merge with its neighbours */
        return cg_printf(gen, "%s(%s(p.%s) + %s)", gen->ld_fn ? gen->ld_fn : "kiln_ldv", gen->ptr_wrap, f,
                         cg_idx_flatten(gen, x));
    return cg_printf(gen, "%s(p.%s + %s)", gen->ld_fn ? gen->ld_fn : "kiln_ld", f, cg_idx_flatten(gen, x));
}

/* An elementwise op over operand expressions v: the op table's CUDA
 * expression, or the two whose form depends on attributes and dtypes. */
static const char *elementwise(cg_gen *gen, const ir_node *n, const char *const *v)
{
    const char *fmt = ir_op_cuda(n->op);
    if (fmt) return n->ninputs == 2 ? cg_printf(gen, fmt, v[0], v[1]) : cg_printf(gen, fmt, v[0]);
    switch (n->op) {
    case IR_OP_GELU: return cg_printf(gen, "%s(%s)", n->attrs.gelu_tanh ? "kiln_gelu_tanh" : "kiln_gelu", v[0]);
    case IR_OP_CAST:
        switch (n->type.dtype) {
        case IR_BF16: return cg_printf(gen, "kiln_round_bf16(%s)", v[0]);
        case IR_F16: return cg_printf(gen, "kiln_round_f16(%s)", v[0]);
        case IR_I32: return cg_printf(gen, "truncf(%s)", v[0]);
        default: return v[0];
        }
    default: cg_fail(gen, "internal error: %s has no CUDA expression", ir_op_name(n->op)); return "0.0f";
    }
}

static const char *compute_reduce(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *in = n->inputs[0];
    const ir_type *it = &in->type;
    const char *acc = new_var(gen, "acc");
    bool mx = n->op == IR_OP_REDUCE_MAX;
    cg_line(gen, "float %s = %s;", acc, mx ? "-KILN_INF" : "0.0f");
    const char *loop[IR_MAX_RANK];
    int opened = open_loops(gen, it, n->attrs.axes, loop);
    cg_idx ix = reduce_input_idx(gen, x, it, n->attrs.axes, n->attrs.keepdim, loop);
    const char *v = cg_value(gen, in, &ix);
    if (mx) cg_line(gen, "%s = fmaxf(%s, %s);", acc, acc, v);
    else cg_line(gen, "%s += %s;", acc, v);
    close_loops(gen, opened);
    if (n->op == IR_OP_MEAN) {
        ir_dim count = ir_dim_const(1);
        for (int j = 0; j < it->rank; j++)
            if (n->attrs.axes & (1u << j)) count = ir_dim_times(count, it->dims[j], &gen->dim_overflow);
        return cg_printf(gen, "(%s / (float)%s)", acc, cg_dim(gen, &count));
    }
    return acc;
}

/* Softmax, rmsnorm and layernorm along one axis, as loops. */
static const char *compute_along_axis(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *in = n->inputs[0];
    const ir_type *it = &in->type;
    int axis = n->op == IR_OP_SOFTMAX ? n->attrs.axis : it->rank - 1;
    const char *loop[IR_MAX_RANK];
    const char *here = cg_value(gen, in, x);
    const char *len = cg_dim(gen, &it->dims[axis]);
    if (n->op == IR_OP_SOFTMAX) {
        const char *m = new_var(gen, "mx"), *s = new_var(gen, "sum");
        cg_line(gen, "float %s = -KILN_INF;", m);
        open_loops(gen, it, 1u << axis, loop);
        cg_idx ix = reduce_input_idx(gen, x, it, 1u << axis, true, loop);
        cg_line(gen, "%s = fmaxf(%s, %s);", m, m, cg_value(gen, in, &ix));
        cg_close(gen);
        cg_line(gen, "float %s = 0.0f;", s);
        open_loops(gen, it, 1u << axis, loop);
        ix = reduce_input_idx(gen, x, it, 1u << axis, true, loop);
        cg_line(gen, "%s += expf(%s - %s);", s, cg_value(gen, in, &ix), m);
        cg_close(gen);
        return cg_printf(gen, "(expf(%s - %s) / %s)", here, m, s);
    }
    /* the gain (none: folded into the weights that read the norm) */
    cg_idx wi = cg_idx_flat(n->ninputs > 1 ? &n->inputs[1]->type : &n->type, NULL);
    wi.c[0] = cg_idx_coord(gen, x, axis);
    const char *w = n->ninputs > 1 ? cg_value(gen, n->inputs[1], &wi) : "1.0f";
    const char *eps = cg_float_lit(gen, n->attrs.eps);
    if (n->op == IR_OP_RMSNORM) {
        const char *ss = new_var(gen, "ss");
        cg_line(gen, "float %s = 0.0f;", ss);
        open_loops(gen, it, 1u << axis, loop);
        cg_idx ix = reduce_input_idx(gen, x, it, 1u << axis, true, loop);
        const char *v = cg_value(gen, in, &ix);
        cg_line(gen, "%s += %s * %s;", ss, v, v);
        cg_close(gen);
        return cg_printf(gen, "(%s * rsqrtf(%s / (float)%s + %s) * %s)", here, ss, len, eps, w);
    }
    /* layernorm: two passes */
    const char *mean = new_var(gen, "mean"), *var = new_var(gen, "var");
    cg_line(gen, "float %s = 0.0f;", mean);
    open_loops(gen, it, 1u << axis, loop);
    cg_idx ix = reduce_input_idx(gen, x, it, 1u << axis, true, loop);
    cg_line(gen, "%s += %s;", mean, cg_value(gen, in, &ix));
    cg_close(gen);
    cg_line(gen, "%s /= (float)%s;", mean, len);
    cg_line(gen, "float %s = 0.0f;", var);
    open_loops(gen, it, 1u << axis, loop);
    ix = reduce_input_idx(gen, x, it, 1u << axis, true, loop);
    const char *v = cg_value(gen, in, &ix);
    cg_line(gen, "%s += (%s - %s) * (%s - %s);", var, v, mean, v, mean);
    cg_close(gen);
    const char *r = cg_printf(gen, "((%s - %s) * rsqrtf(%s / (float)%s + %s) * %s)", here, mean, var, len, eps, w);
    if (n->ninputs > 2) r = cg_printf(gen, "(%s + %s)", r, cg_value(gen, n->inputs[2], &wi));
    return r;
}

static const char *compute_matmul(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *a = n->inputs[0], *b = n->inputs[1];
    int ro = n->type.rank;
    const char *kk = new_var(gen, "kk");
    const char *acc = new_var(gen, "acc");
    cg_idx ia = cg_idx_flat(&a->type, NULL), ib = cg_idx_flat(&b->type, NULL);
    ir_dim K;
    if (n->op == IR_OP_LINEAR) {
        int ra = a->type.rank;
        for (int j = 0; j < ra - 1; j++) ia.c[j] = cg_idx_coord(gen, x, j);
        ia.c[ra - 1] = kk;
        ib.c[0] = cg_idx_coord(gen, x, ro - 1);
        ib.c[1] = kk;
        K = a->type.dims[ra - 1];
    } else {
        int ra = a->type.rank, rb = b->type.rank;
        for (int j = 0; j < ra - 2; j++)
            ia.c[j] = cg_dim_one(&a->type.dims[j]) ? "0" : cg_idx_coord(gen, x, j + ro - ra);
        for (int j = 0; j < rb - 2; j++)
            ib.c[j] = cg_dim_one(&b->type.dims[j]) ? "0" : cg_idx_coord(gen, x, j + ro - rb);
        ia.c[ra - 2] = cg_idx_coord(gen, x, ro - 2);
        ia.c[ra - 1] = kk;
        ib.c[rb - 2] = kk;
        ib.c[rb - 1] = cg_idx_coord(gen, x, ro - 1);
        K = a->type.dims[ra - 1];
    }
    cg_line(gen, "float %s = 0.0f;", acc);
    cg_open(gen, "for (long long %s = 0; %s < %s; %s++)", kk, kk, cg_dim(gen, &K), kk);
    const char *av = cg_value(gen, a, &ia), *bv = cg_value(gen, b, &ib);
    cg_line(gen, "%s += %s * %s;", acc, av, bv);
    cg_close(gen);
    if (n->op == IR_OP_LINEAR && n->ninputs > 2) {
        cg_idx bi = cg_idx_flat(&n->inputs[2]->type, NULL);
        bi.c[0] = cg_idx_coord(gen, x, ro - 1);
        return cg_printf(gen, "(%s + %s)", acc, cg_value(gen, n->inputs[2], &bi));
    }
    return acc;
}

static const char *compute_concat(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    int axis = n->attrs.axis;
    const char *c = cg_idx_coord(gen, x, axis);
    const char *v = new_var(gen, "f");
    cg_line(gen, "float %s;", v);
    ir_dim off = ir_dim_const(0);
    for (int i = 0; i < n->ninputs; i++) {
        const ir_node *in = n->inputs[i];
        ir_dim end = ir_dim_plus(off, in->type.dims[axis], &gen->dim_overflow);
        if (i + 1 < n->ninputs) cg_open(gen, "%sif (%s < %s)", i ? "else " : "", c, cg_dim(gen, &end));
        else if (i > 0) cg_open(gen, "else");
        else cg_open(gen, "%s", "");
        cg_idx ix = cg_idx_flat(&in->type, NULL);
        for (int j = 0; j < n->type.rank; j++) ix.c[j] = cg_idx_coord(gen, x, j);
        if (off.nterms) ix.c[axis] = cg_printf(gen, "(%s - %s)", c, cg_dim(gen, &off));
        cg_line(gen, "%s = %s;", v, cg_value(gen, in, &ix));
        cg_close(gen);
        off = end;
    }
    return v;
}

static const char *compute_embedding(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *t = n->inputs[0], *ids = n->inputs[1];
    int r = n->type.rank;
    cg_idx ii = cg_idx_flat(&ids->type, NULL);
    for (int j = 0; j < ids->type.rank; j++) ii.c[j] = cg_idx_coord(gen, x, j);
    if (ids->type.rank == 0) ii.flat = "0";
    const char *row = new_var(gen, "row");
    const char *V = cg_dim(gen, &t->type.dims[0]);
    cg_line(gen, "long long %s = %s;", row, cg_int_value(gen, ids, &ii));
    cg_line(gen, "%s = %s < 0 ? 0 : %s >= %s ? %s - 1 : %s; /* out-of-range ids read a valid row */", row, row,
            row, V, V, row);
    cg_idx ti = cg_idx_flat(&t->type, NULL);
    ti.c[0] = row;
    ti.c[1] = cg_idx_coord(gen, x, r - 1);
    return cg_value(gen, t, &ti);
}

static const char *rope_angle(cg_gen *gen, const ir_node *n, const ir_node *pos, const cg_idx *x, const char *pair,
                              ir_dim hd, const char **cs, const char **sn)
{
    const char *pexpr;
    const char *s = cg_idx_coord(gen, x, 1), *b = NULL;
    if (n->attrs.packed) { /* token s of the packed row: its sequence and its index there */
        if (!pos) {
            cg_fail(gen, "rope: a packed rope needs positions");
            return "0.0";
        }
        b = cg_packed_token(gen, s, &pos->type.dims[0], &s);
    }
    if (pos) {
        cg_idx pi = cg_idx_flat(&pos->type, NULL);
        pi.c[0] = b ? b : cg_idx_coord(gen, x, 0);
        pexpr = cg_printf(gen, "(%s + %s)", cg_int_value(gen, pos, &pi), s);
    } else {
        pexpr = s;
    }
    const char *ang = new_var(gen, "ang");
    const ir_rope_attrs *r = &n->attrs.rope;
    if (r->scaling == IR_ROPE_NONE) {
        cg_line(gen, "const double %s = (double)%s * pow(%.17g, -2.0 * (double)%s / (double)%s);", ang, pexpr,
                n->attrs.theta, pair, cg_dim(gen, &hd));
    } else {
        /* the host's frequencies (codegen/cg_rope.c), a table in the function */
        int64_t hdv;
        if (!ir_dim_is_const(&hd, &hdv) || hdv <= 0) {
            cg_fail(gen, "rope: scaling=%s needs a constant head dimension", ir_rope_scaling_name(r->scaling));
            return ang;
        }
        const char *tab = new_var(gen, "rope_inv");
        int len = cg_rope_table(NULL, 0, "static const", tab, n->attrs.theta, r, hdv);
        char *text = len >= 0 ? arena_alloc(gen->a, (size_t)len + 1) : NULL;
        if (!text || cg_rope_table(text, (size_t)len + 1, "static const", tab, n->attrs.theta, r, hdv) < 0) {
            cg_fail(gen, "out of memory");
            return ang;
        }
        cg_line(gen, "%s", text);
        cg_line(gen, "const double %s = (double)%s * %s[%s];", ang, pexpr, tab, pair);
    }
    cg_rope_sincos(gen, ang, ir_rope_mscale(r), cs, sn);
    return ang;
}

void cg_rope_sincos(cg_gen *gen, const char *ang, double mscale, const char **cs, const char **sn)
{
    *cs = new_var(gen, "c");
    *sn = new_var(gen, "s");
    /* as the attention templates rotate (attention_common.cuh, rope8): the
     * angle reduced to [-pi, pi] in double, then the float sincos intrinsic,
     * which has no slow path (double cos/sin of a large argument needs a
     * stack frame for its argument reduction) */
    const char *turns = new_var(gen, "turns"), *red = new_var(gen, "red");
    cg_line(gen, "const double %s = rint(%s * 0.15915494309189533577);", turns, ang);
    cg_line(gen, "const float %s = (float)fma(-%s, 6.2831853071795864769, %s);", red, turns, ang);
    cg_line(gen, "float %s, %s;", *cs, *sn);
    cg_line(gen, "__sincosf(%s, &%s, &%s);", red, *sn, *cs);
    if (mscale != 1.0) { /* YaRN: cos and sin times the attention factor */
        cg_line(gen, "%s *= (float)%.17g;", *cs, mscale);
        cg_line(gen, "%s *= (float)%.17g;", *sn, mscale);
    }
}

static const char *compute_rope(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *in = n->inputs[0], *pos = n->ninputs > 1 ? n->inputs[1] : NULL;
    /* partial rotary: the first R dims rotate as a head of R, the rest pass through */
    int64_t R = n->attrs.rope.rotary_dims;
    ir_dim hd = R ? ir_dim_const(R) : n->type.dims[3], half;
    if (!ir_dim_div(hd, ir_dim_const(2), &half)) {
        cg_fail(gen, "rope: head dimension is not known to be even");
        return "0.0f";
    }
    const char *i = cg_idx_coord(gen, x, 3), *h = cg_dim(gen, &half);
    const char *pair = new_var(gen, "j");
    if (R) cg_line(gen, "const long long %s = %s < %s ? %s : %s < %lldLL ? %s - %s : 0;", pair, i, h, i, i, (long long)R, i, h);
    else cg_line(gen, "const long long %s = %s < %s ? %s : %s - %s;", pair, i, h, i, i, h);
    const char *cs = "0.0f", *sn = "0.0f";
    rope_angle(gen, n, pos, x, pair, hd, &cs, &sn);
    cg_idx a = cg_idx_flat(&in->type, NULL), b = a;
    for (int j = 0; j < 3; j++) a.c[j] = b.c[j] = cg_idx_coord(gen, x, j);
    a.c[3] = pair;
    b.c[3] = cg_printf(gen, "(%s + %s)", pair, h);
    const char *x1 = cg_value(gen, in, &a), *x2 = cg_value(gen, in, &b);
    const char *rot =
        cg_printf(gen, "(%s < %s ? %s * %s - %s * %s : %s * %s + %s * %s)", i, h, x1, cs, x2, sn, x2, cs, x1, sn);
    if (!R) return rot;
    return cg_printf(gen, "(%s < %lldLL ? %s : %s)", i, (long long)R, rot, cg_value(gen, in, x));
}

/* cache_write(c, x[, pos]) as a value: new rows from x, the rest from c. */
static const char *compute_cache_write(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *c = n->inputs[0], *xs = n->inputs[1], *pos = n->ninputs > 2 ? n->inputs[2] : NULL;
    if (n->attrs.packed) {
        cg_fail(gen, "cache_write: a packed cache write as a value (not in place) has no kernel");
        return "0.0f";
    }
    const char *b = cg_idx_coord(gen, x, 0), *h = cg_idx_coord(gen, x, 1), *t = cg_idx_coord(gen, x, 2),
               *d = cg_idx_coord(gen, x, 3);
    const char *o = "0LL";
    if (pos) {
        cg_idx pi = cg_idx_flat(&pos->type, NULL);
        pi.c[0] = b;
        o = cg_int_value(gen, pos, &pi);
    }
    const char *s = new_var(gen, "s"), *v = new_var(gen, "f");
    cg_line(gen, "const long long %s = %s - %s;", s, t, o);
    cg_line(gen, "float %s;", v);
    cg_open(gen, "if (%s >= 0 && %s < %s)", s, s, cg_dim(gen, &xs->type.dims[1]));
    cg_idx xi = cg_idx_flat(&xs->type, NULL);
    xi.c[0] = b;
    xi.c[1] = s;
    xi.c[2] = h;
    xi.c[3] = d;
    cg_line(gen, "%s = %s;", v, cg_value(gen, xs, &xi));
    cg_close(gen);
    cg_open(gen, "else");
    cg_line(gen, "%s = %s;", v, cg_value(gen, c, x));
    cg_close(gen);
    return v;
}

/* attention as loops (the generic fallback): for output element (b, s, h, d),
 * one pass for the max score, one for the softmax-weighted sum of v. */
static const char *compute_attention(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *q = n->inputs[0], *k = n->inputs[1], *v = n->inputs[2];
    const ir_node *pos = n->ninputs > 3 ? n->inputs[3] : NULL;
    if (n->attrs.packed) {
        cg_fail(gen, "attention: packed sequences take the attention templates, not the generic kernel");
        return "0.0f";
    }
    const char *b = cg_idx_coord(gen, x, 0), *s = cg_idx_coord(gen, x, 1), *h = cg_idx_coord(gen, x, 2),
               *d = cg_idx_coord(gen, x, 3);
    const char *S = cg_dim(gen, &q->type.dims[1]), *T = cg_dim(gen, &k->type.dims[2]);
    const char *grp = cg_printf(gen, "(%s / %s)", cg_dim(gen, &q->type.dims[2]), cg_dim(gen, &k->type.dims[1]));
    const char *o = new_var(gen, "o"), *lim = new_var(gen, "lim"), *kh = new_var(gen, "kh");
    if (pos) {
        cg_idx pi = cg_idx_flat(&pos->type, NULL);
        pi.c[0] = b;
        cg_line(gen, "const long long %s = %s;", o, cg_int_value(gen, pos, &pi));
    } else {
        cg_line(gen, "const long long %s = %s - %s;", o, T, S);
    }
    if (n->attrs.causal) cg_line(gen, "long long %s = %s + %s + 1;", lim, o, s);
    else cg_line(gen, "long long %s = %s + %s;", lim, o, S);
    cg_line(gen, "if (%s > %s) %s = %s;", lim, T, lim, T);
    const char *j0 = "0LL";
    if (n->attrs.window > 0) { /* sliding window: keys less than W behind the query */
        j0 = new_var(gen, "j0");
        cg_line(gen, "long long %s = %s + %s - %lldLL + 1;", j0, o, s, (long long)n->attrs.window);
        cg_line(gen, "if (%s < 0) %s = 0;", j0, j0);
    }
    cg_line(gen, "const long long %s = %s / %s;", kh, h, grp);
    const char *mx = new_var(gen, "mx"), *sum = new_var(gen, "sum"), *acc = new_var(gen, "acc");
    const char *scale = cg_float_lit(gen, n->attrs.scale);
    cg_line(gen, "float %s = -KILN_INF, %s = 0.0f, %s = 0.0f;", mx, sum, acc);
    for (int pass = 0; pass < 2; pass++) {
        const char *j = new_var(gen, "r"), *e = new_var(gen, "r"), *dot = new_var(gen, "dot");
        cg_open(gen, "for (long long %s = %s; %s < %s; %s++)", j, j0, j, lim, j);
        cg_line(gen, "float %s = 0.0f;", dot);
        cg_open(gen, "for (long long %s = 0; %s < %s; %s++)", e, e, cg_dim(gen, &q->type.dims[3]), e);
        cg_idx qi = cg_idx_flat(&q->type, NULL), ki = cg_idx_flat(&k->type, NULL);
        qi.c[0] = b, qi.c[1] = s, qi.c[2] = h, qi.c[3] = e;
        ki.c[0] = b, ki.c[1] = kh, ki.c[2] = j, ki.c[3] = e;
        const char *qv = cg_value(gen, q, &qi), *kv = cg_value(gen, k, &ki);
        cg_line(gen, "%s += %s * %s;", dot, qv, kv);
        cg_close(gen);
        cg_line(gen, "%s *= %s;", dot, scale);
        if (n->attrs.softcap > 0) { /* logit soft-capping */
            const char *cap = cg_float_lit(gen, n->attrs.softcap);
            cg_line(gen, "%s = %s * tanhf(%s / %s);", dot, cap, dot, cap);
        }
        if (pass == 0) {
            cg_line(gen, "%s = fmaxf(%s, %s);", mx, mx, dot);
        } else {
            cg_idx vi = cg_idx_flat(&v->type, NULL);
            vi.c[0] = b, vi.c[1] = kh, vi.c[2] = j, vi.c[3] = d;
            const char *w = new_var(gen, "w");
            cg_line(gen, "const float %s = expf(%s - %s);", w, dot, mx);
            cg_line(gen, "%s += %s;", sum, w);
            cg_line(gen, "%s += %s * %s;", acc, w, cg_value(gen, v, &vi));
        }
        cg_close(gen);
    }
    return cg_printf(gen, "(%s / %s)", acc, sum);
}

/* topk as loops (generic): element j of a row is the value (or index) whose
 * rank in the row, larger first and ties by lower index, is j (ir/ir.h). */
static const char *compute_topk(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *in = n->inputs[0];
    int r = in->type.rank;
    const char *slot = cg_idx_coord(gen, x, r - 1), *E = cg_dim(gen, &in->type.dims[r - 1]);
    const char *res = new_var(gen, "top"), *i = new_var(gen, "r"), *q = new_var(gen, "r"), *rank = new_var(gen, "rank");
    cg_idx xi = cg_idx_flat(&in->type, NULL), xq = xi;
    for (int j = 0; j < r - 1; j++) xi.c[j] = xq.c[j] = cg_idx_coord(gen, x, j);
    xi.c[r - 1] = i;
    xq.c[r - 1] = q;
    cg_line(gen, "float %s = 0.0f;", res);
    cg_open(gen, "for (long long %s = 0; %s < %s; %s++)", i, i, E, i);
    const char *vi = cg_value(gen, in, &xi);
    cg_line(gen, "long long %s = 0;", rank);
    cg_open(gen, "for (long long %s = 0; %s < %s; %s++)", q, q, E, q);
    const char *vq = cg_value(gen, in, &xq);
    cg_line(gen, "%s += (%s > %s) || (%s == %s && %s < %s);", rank, vq, vi, vq, vi, q, i);
    cg_close(gen);
    cg_line(gen, "if (%s == %s) %s = %s;", rank, slot, res, n->attrs.indices ? cg_printf(gen, "(float)%s", i) : vi);
    cg_close(gen);
    return res;
}

/* expert_linear as loops (generic): out[..., j, o] = sum_k x_j[k] w[idx[..., j], o, k]. */
static const char *compute_expert_linear(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    const ir_node *in = n->inputs[0], *w = n->inputs[1], *idx = n->inputs[2];
    int r = idx->type.rank;
    bool per_slot = in->type.rank == r + 1;
    cg_idx ii = cg_idx_flat(&idx->type, NULL), xi = cg_idx_flat(&in->type, NULL), wi = cg_idx_flat(&w->type, NULL);
    for (int j = 0; j < r; j++) ii.c[j] = cg_idx_coord(gen, x, j);
    const char *e = new_var(gen, "e"), *kk = new_var(gen, "kk"), *acc = new_var(gen, "acc");
    cg_line(gen, "const long long %s = %s;", e, cg_int_value(gen, idx, &ii));
    for (int j = 0; j < (per_slot ? r : r - 1); j++) xi.c[j] = cg_idx_coord(gen, x, j);
    xi.c[in->type.rank - 1] = kk;
    wi.c[0] = e;
    wi.c[1] = cg_idx_coord(gen, x, r);
    wi.c[2] = kk;
    cg_line(gen, "float %s = 0.0f;", acc);
    cg_open(gen, "for (long long %s = 0; %s < %s; %s++)", kk, kk, cg_dim(gen, &w->type.dims[2]), kk);
    const char *xv = cg_value(gen, in, &xi), *wv = cg_value(gen, w, &wi);
    cg_line(gen, "%s += %s * %s;", acc, xv, wv);
    cg_close(gen);
    return acc;
}

static const char *compute(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    ir_fusion_class cls = ir_op_class(n->op);
    if (cls == IR_CLASS_ELEMENTWISE) {
        const char *v[2];
        for (int i = 0; i < n->ninputs && i < 2; i++) {
            cg_idx ix = cg_idx_broadcast(gen, x, &n->inputs[i]->type);
            v[i] = cg_value(gen, n->inputs[i], &ix);
        }
        return elementwise(gen, n, v);
    }
    switch (n->op) {
    case IR_OP_SUM:
    case IR_OP_MEAN:
    case IR_OP_REDUCE_MAX: return compute_reduce(gen, n, x);
    case IR_OP_SOFTMAX:
    case IR_OP_RMSNORM:
    case IR_OP_LAYERNORM: return compute_along_axis(gen, n, x);
    case IR_OP_MATMUL:
    case IR_OP_LINEAR: return compute_matmul(gen, n, x);
    case IR_OP_CONCAT: return compute_concat(gen, n, x);
    case IR_OP_EMBEDDING: return compute_embedding(gen, n, x);
    case IR_OP_ROPE: return compute_rope(gen, n, x);
    case IR_OP_CACHE_WRITE: return compute_cache_write(gen, n, x);
    case IR_OP_ATTENTION: return compute_attention(gen, n, x);
    case IR_OP_TOPK: return compute_topk(gen, n, x);
    case IR_OP_EXPERT_LINEAR: return compute_expert_linear(gen, n, x);
    default:
        cg_fail(gen, "%s (line %d) cannot be computed inside a generated hook", ir_op_name(n->op), n->loc.line);
        return "0.0f";
    }
}

const char *cg_value(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    if (gen->failed) return "0.0f";
    for (int i = 0; i < gen->nsubst; i++)
        if (gen->subst[i].node == n->id) return gen->subst[i].expr;
    if (n->op == IR_OP_CONST) {
        double v = n->attrs.value;
        if (ir_dtype_is_float(n->type.dtype)) v = ir_round_to(n->type.dtype, (float)v);
        return cg_float_lit(gen, v);
    }
    if (n->op == IR_OP_CAUSAL_MASK) {
        const char *i = cg_idx_coord(gen, x, 0), *j = cg_idx_coord(gen, x, 1);
        ir_dim off;
        if (!ir_dim_sub(n->type.dims[1], n->type.dims[0], &off)) {
            cg_fail(gen, "causal mask: dimension expression too large");
            return "0.0f";
        }
        return cg_printf(gen, "(%s <= %s + %s ? 0.0f : -KILN_INF)", j, i, cg_dim(gen, &off));
    }
    if (cg_is_free_view(gen, n)) {
        cg_idx ix = view_input_idx(gen, n, x);
        return cg_value(gen, n->inputs[0], &ix);
    }
    const char *key = idx_key(gen, x);
    const char *hit = memo_find(gen, n, key);
    if (hit) return hit;
    const char *v;
    if (cg_is_member(gen, n) && !gen->bind[n->id]) v = def_float(gen, compute(gen, n, x));
    else v = def_float(gen, load(gen, n, x));
    memo_add(gen, n, key, v);
    return v;
}

const char *cg_int_value(cg_gen *gen, const ir_node *n, const cg_idx *x)
{
    if (cg_is_free_view(gen, n)) {
        cg_idx ix = view_input_idx(gen, n, x);
        return cg_int_value(gen, n->inputs[0], &ix);
    }
    if (n->type.dtype != IR_I32 || (cg_is_member(gen, n) && !gen->bind[n->id]) || n->op == IR_OP_CONST)
        return cg_printf(gen, "(long long)%s", cg_value(gen, n, x));
    const char *f = cg_ptr(gen, n, false);
    if (!f) return "0LL";
    return cg_printf(gen, "(long long)p.%s[%s]", f, cg_idx_flatten(gen, x));
}

void cg_store(cg_gen *gen, const ir_node *n, const cg_idx *x, const char *v)
{
    const char *f = cg_ptr(gen, n, true);
    if (!f) return;
    if (gen->ptr_wrap)
        cg_line(gen, "kiln_stv(%s(p.%s) + %s, %s);", gen->ptr_wrap, f, cg_idx_flatten(gen, x), v);
    else
        cg_line(gen, "kiln_st(p.%s + %s, %s);", f, cg_idx_flatten(gen, x), v);
}
