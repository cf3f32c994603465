/* frontend/lower.c — AST to IR.
 *
 * Statements are lowered in order; every name must be defined before it is
 * used. Expressions are evaluated in one of three ways, chosen by where they
 * appear:
 *   - as a compile-time number (const values, keyword options):  fe_eval_num
 *   - as a dimension, a polynomial over `dims` (shapes, reshape, slice
 *     bounds, causal_mask sizes):                               fe_eval_dim
 *   - as a tensor (everything else):                             fe_eval_tensor
 * A tensor expression whose leaves are all numbers and consts is folded to
 * one scalar CONST node.
 *
 * Errors: each problem is reported once, at the expression responsible. A
 * failed expression yields NULL, and NULL propagates silently (the builder
 * returns NULL for NULL inputs; a variable bound to NULL is "poisoned" and
 * its uses stay quiet), so one mistake never produces a cascade. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/lower.h"
#include "util/vec.h"

/* ---- symbols ---------------------------------------------------------------- */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of name in a table of cap (a power of two) slots whose keys are
 * key(i): the one holding it, or the empty one where it would go. */
#define PROBE(l, cap, name, occupied, key, out)                                     \
    do {                                                                          \
        size_t mask_ = (size_t)(cap) - 1, i_ = (size_t)name_hash(name) & mask_;   \
        for (;; i_ = (i_ + 1) & mask_) {                                          \
            (l)->work++;                                                          \
            if (!(occupied) || strcmp((key), (name)) == 0) break;                 \
        }                                                                         \
        (out) = i_;                                                               \
    } while (0)

static const void *map_get(fe_lower *l, const fe_name_map *m, const char *name, bool *found)
{
    *found = false;
    if (!m->cap) return NULL;
    size_t i;
    PROBE(l, m->cap, name, m->keys[i_], m->keys[i_], i);
    if (!m->keys[i]) return NULL;
    *found = true;
    return m->vals[i];
}

/* Sets name -> val unless name is there already (first wins). */
static bool map_put(fe_lower *l, fe_name_map *m, const char *name, const void *val)
{
    if (2 * (m->n + 1) > m->cap) {
        int ncap = m->cap ? 2 * m->cap : 64;
        fe_name_map g = {arena_alloc(l->a, (size_t)ncap * sizeof *g.keys), arena_alloc(l->a, (size_t)ncap * sizeof *g.vals),
                         ncap, 0};
        if (!g.keys || !g.vals) return false;
        for (int k = 0; k < m->cap; k++)
            if (m->keys[k]) {
                size_t i;
                PROBE(l, g.cap, m->keys[k], g.keys[i_], g.keys[i_], i);
                g.keys[i] = m->keys[k];
                g.vals[i] = m->vals[k];
                g.n++;
            }
        *m = g;
    }
    size_t i;
    PROBE(l, m->cap, name, m->keys[i_], m->keys[i_], i);
    if (!m->keys[i]) {
        m->keys[i] = name;
        m->vals[i] = val;
        m->n++;
    }
    return true;
}

/* The latest symbol named name, hidden (a layer instance's, out of scope) or
 * not: a name inside a layer block is new to it, so nothing visible hides
 * behind a hidden one. */
static fe_sym *latest_sym(fe_lower *l, const char *name)
{
    if (!l->sym_cap) return NULL;
    size_t i;
    PROBE(l, l->sym_cap, name, l->sym_index[i_], l->syms[l->sym_index[i_] - 1].name, i);
    return l->sym_index[i] ? &l->syms[l->sym_index[i] - 1] : NULL;
}

fe_sym *fe_lookup(fe_lower *l, const char *name)
{
    fe_sym *s = latest_sym(l, name);
    return s && !s->hidden ? s : NULL;
}

/* Points name's slot at sym idx (the latest definition of a name wins, as
 * a backwards scan would find it), growing the table at half load. */
static bool index_sym(fe_lower *l, int idx)
{
    if (2 * l->nsyms > l->sym_cap) {
        int ncap = l->sym_cap ? 2 * l->sym_cap : 64;
        int *t = arena_alloc(l->a, (size_t)ncap * sizeof *t);
        if (!t) return false;
        int *old = l->sym_index, ocap = l->sym_cap;
        l->sym_index = t;
        l->sym_cap = ncap;
        for (int k = 0; k < ocap; k++)
            if (old[k]) {
                size_t i;
                PROBE(l, l->sym_cap, l->syms[old[k] - 1].name, l->sym_index[i_], l->syms[l->sym_index[i_] - 1].name, i);
                l->sym_index[i] = old[k];
            }
    }
    size_t i;
    PROBE(l, l->sym_cap, l->syms[idx].name, l->sym_index[i_], l->syms[l->sym_index[i_] - 1].name, i);
    l->sym_index[i] = idx + 1;
    return true;
}

static fe_sym *add_sym(fe_lower *l, const char *name, fe_sym_kind kind, src_loc loc)
{
    if (!VEC_GROW(l->syms, l->nsyms, l->cap, l->a)) {
        diag_error(l->d, loc, "out of memory");
        return NULL;
    }
    fe_sym *s = &l->syms[l->nsyms++];
    memset(s, 0, sizeof *s);
    s->name = name;
    s->kind = kind;
    s->loc = loc;
    s->sym = -1;
    if (!index_sym(l, l->nsyms - 1)) {
        l->nsyms--;
        diag_error(l->d, loc, "out of memory");
        return NULL;
    }
    return s;
}

static const char *kind_name(const fe_sym *s)
{
    switch (s->kind) {
    case FE_SYM_DIM: return "dim";
    case FE_SYM_CONST: return "const";
    case FE_SYM_PARAM:
        return s->param_kind == IR_OP_INPUT ? "input" : s->param_kind == IR_OP_STATE ? "state" : "weight";
    case FE_SYM_VAR: return "variable";
    case FE_SYM_OUTPUT: return "output";
    }
    return "name";
}

static void redefinition(fe_lower *l, const fe_sym *prev, const char *name, src_loc loc)
{
    diag_error(l->d, loc, "redefinition of '%s'", name);
    diag_note(l->d, prev->loc, "'%s' was first defined here", name);
}

static bool is_dtype_name(const char *name)
{
    ir_dtype t;
    return ir_dtype_parse(name, &t);
}

/* A new name; false (with an error) when it is taken. */
static bool check_new_name(fe_lower *l, const char *name, src_loc loc)
{
    fe_sym *prev = fe_lookup(l, name);
    if (prev) {
        redefinition(l, prev, name, loc);
        return false;
    }
    if (is_dtype_name(name)) {
        diag_error(l->d, loc, "'%s' is a dtype name and cannot be used as a name", name);
        fe_sym *s = add_sym(l, name, FE_SYM_VAR, loc); /* poisoned: uses stay quiet */
        if (s) s->poison = true;
        return false;
    }
    return true;
}

/* Is `name` defined by a later statement? Returns its location. The
 * statements' names are indexed once, on the first unknown name. */
static bool defined_later(fe_lower *l, const char *name, src_loc *where)
{
    if (!l->later.cap) {
        for (int i = 0; i < l->m->nstmts; i++) {
            const fe_stmt *s = l->m->stmts[i];
            for (int j = 0; j < s->names.n; j++)
                if (!map_put(l, &l->later, s->names.v[j].name, &s->names.v[j].loc)) return false;
            for (int j = 0; j < s->consts.n; j++)
                if (!map_put(l, &l->later, s->consts.v[j].name.name, &s->consts.v[j].name.loc)) return false;
        }
        if (!l->later.cap && !map_put(l, &l->later, "", NULL)) return false; /* built: no names at all */
    }
    bool found;
    const src_loc *loc = map_get(l, &l->later, name, &found);
    if (!found || !loc) return false;
    *where = *loc;
    return true;
}

/* "did you mean": the nearest symbol, searched once per distinct unknown
 * name and for at most FE_SUGGEST_MAX names. */
static const char *suggestion(fe_lower *l, const char *name)
{
    bool found;
    const char *best = map_get(l, &l->suggested, name, &found);
    if (found) return best;
    if (l->nsuggest >= FE_SUGGEST_MAX) return NULL;
    l->nsuggest++;
    int best_d = 1000;
    for (int i = 0; i < l->nsyms; i++) {
        l->work++;
        if (!l->syms[i].hidden && fe_suggest_consider(name, l->syms[i].name, &best_d)) best = l->syms[i].name;
    }
    (void)map_put(l, &l->suggested, name, best);
    return best;
}

void fe_unknown_name(fe_lower *l, const char *name, src_loc loc)
{
    src_loc where;
    if (defined_later(l, name, &where)) {
        diag_error(l->d, loc, "'%s' is used before its definition", name);
        diag_note(l->d, where, "'%s' is defined here", name);
        return;
    }
    if (fe_is_builtin(name)) {
        diag_error(l->d, loc, "'%s' is a function; call it as %s(...)", name, name);
        return;
    }
    fe_sym *hid = latest_sym(l, name);
    if (hid && hid->hidden) {
        diag_error(l->d, loc, "'%s' belongs to a layer block and is not visible after it", name);
        diag_note(l->d, hid->loc,
                  "'%s' is defined here; to carry a value out of the layers, define it before the block "
                  "and assign it inside",
                  name);
        return;
    }
    const char *best = suggestion(l, name);
    if (best)
        diag_error(l->d, loc, "unknown name '%s'; did you mean '%s'?", name, best);
    else
        diag_error(l->d, loc, "unknown name '%s'", name);
}

/* ---- printing helpers -------------------------------------------------------- */

const char *fe_type_str(fe_lower *l, const ir_type *t)
{
    char buf[512];
    ir_type_print(t, l->g->syms, buf, sizeof buf);
    return arena_strdup(l->a, buf);
}

const char *fe_dim_str(fe_lower *l, const ir_dim *d)
{
    char buf[256];
    ir_dim_print(d, l->g->syms, buf, sizeof buf);
    return arena_strdup(l->a, buf);
}

static void fmt_num(const fe_num *n, char *buf, size_t len)
{
    if (n->is_int) snprintf(buf, len, "%lld", (long long)n->i);
    else snprintf(buf, len, "%g", n->f);
}

/* ---- compile-time numbers ------------------------------------------------------ */

static fe_num num_int(int64_t v) { return (fe_num){true, v, (double)v}; }
static fe_num num_float(double v) { return (fe_num){false, 0, v}; }

bool fe_eval_num(fe_lower *l, const fe_expr *e, fe_num *out)
{
    switch (e->kind) {
    case FE_E_NUM:
        *out = e->is_int ? num_int(e->ival) : num_float(e->fval);
        return true;
    case FE_E_NAME: {
        fe_sym *s = fe_lookup(l, e->text);
        if (!s) {
            fe_unknown_name(l, e->text, e->loc);
            return false;
        }
        if (s->poison) return false;
        if (s->kind == FE_SYM_CONST) {
            *out = s->num;
            return s->ok;
        }
        if (s->kind == FE_SYM_DIM)
            diag_error(l->d, e->loc,
                       "'%s' is a dim (a size known at run time); a compile-time number is needed here",
                       e->text);
        else
            diag_error(l->d, e->loc, "'%s' is a tensor; a compile-time number is needed here",
                       e->text);
        return false;
    }
    case FE_E_BOOL:
        diag_error(l->d, e->loc, "expected a number, got '%s'", e->bval ? "true" : "false");
        return false;
    case FE_E_LIST:
        diag_error(l->d, e->loc, "expected a number, got a list");
        return false;
    case FE_E_STRING:
        diag_error(l->d, e->loc, "expected a number, got the string \"%s\"", e->text);
        return false;
    case FE_E_CALL:
        diag_error(l->d, e->loc, "'%s(...)' is not a compile-time number; only + - * / over numbers and consts are",
                   e->text);
        return false;
    case FE_E_NEG: {
        fe_num a;
        if (!fe_eval_num(l, e->lhs, &a)) return false;
        if (a.is_int) {
            if (a.i == INT64_MIN) {
                diag_error(l->d, e->loc, "integer overflow in constant expression");
                return false;
            }
            *out = num_int(-a.i);
        } else {
            *out = num_float(-a.f);
        }
        return true;
    }
    case FE_E_BINOP: {
        fe_num a, b;
        bool oka = fe_eval_num(l, e->lhs, &a);
        bool okb = fe_eval_num(l, e->rhs, &b);
        if (!oka || !okb) return false;
        if (e->op == '@') {
            diag_error(l->d, e->op_loc, "'@' (matrix product) needs tensors, not numbers");
            return false;
        }
        if (e->op == '/' && ((b.is_int && b.i == 0) || (!b.is_int && b.f == 0))) {
            diag_error(l->d, e->op_loc, "division by zero in constant expression");
            return false;
        }
        if (a.is_int && b.is_int) {
            int64_t r = 0;
            bool ovf = false;
            switch (e->op) {
            case '+': ovf = __builtin_add_overflow(a.i, b.i, &r); break;
            case '-': ovf = __builtin_sub_overflow(a.i, b.i, &r); break;
            case '*': ovf = __builtin_mul_overflow(a.i, b.i, &r); break;
            case '/':
                if (a.i == INT64_MIN && b.i == -1) ovf = true;
                else if (a.i % b.i == 0) r = a.i / b.i;
                else {
                    /* not exact: the quotient is a real number */
                    *out = num_float((double)a.i / (double)b.i);
                    return true;
                }
                break;
            }
            if (ovf) {
                diag_error(l->d, e->op_loc, "integer overflow in constant expression");
                return false;
            }
            *out = num_int(r);
            return true;
        }
        double r = 0;
        switch (e->op) {
        case '+': r = a.f + b.f; break;
        case '-': r = a.f - b.f; break;
        case '*': r = a.f * b.f; break;
        case '/': r = a.f / b.f; break;
        }
        if (!isfinite(r)) {
            diag_error(l->d, e->op_loc, "constant expression overflows");
            return false;
        }
        *out = num_float(r);
        return true;
    }
    }
    return false;
}

/* Only numbers and consts (no tensors): such an expression folds. */
static bool is_numeric(fe_lower *l, const fe_expr *e)
{
    switch (e->kind) {
    case FE_E_NUM: return true;
    case FE_E_NAME: {
        fe_sym *s = fe_lookup(l, e->text);
        return s && s->kind == FE_SYM_CONST;
    }
    case FE_E_NEG: return is_numeric(l, e->lhs);
    case FE_E_BINOP: return e->op != '@' && is_numeric(l, e->lhs) && is_numeric(l, e->rhs);
    default: return false;
    }
}

/* ---- dimensions ------------------------------------------------------------------ */

static const char *dim_hint = "a dimension is an integer expression over dims and consts";

bool fe_eval_dim(fe_lower *l, const fe_expr *e, ir_dim *out)
{
    switch (e->kind) {
    case FE_E_NUM:
        if (!e->is_int) {
            diag_error(l->d, e->loc, "a dimension must be an integer, not '%s'", e->text);
            return false;
        }
        *out = ir_dim_const(e->ival);
        return true;
    case FE_E_NAME: {
        fe_sym *s = fe_lookup(l, e->text);
        if (!s) {
            fe_unknown_name(l, e->text, e->loc);
            return false;
        }
        if (s->poison) return false;
        if (s->kind == FE_SYM_DIM) {
            *out = s->bound ? ir_dim_const(s->bound_value) : ir_dim_sym(s->sym);
            return s->bound || s->sym >= 0;
        }
        if (s->kind == FE_SYM_CONST) {
            if (!s->ok) return false;
            if (!s->num.is_int) {
                diag_error(l->d, e->loc, "a dimension must be an integer, but const '%s' is %g",
                           e->text, s->num.f);
                return false;
            }
            *out = ir_dim_const(s->num.i);
            return true;
        }
        diag_error(l->d, e->loc, "'%s' is a tensor, not a size; %s", e->text, dim_hint);
        return false;
    }
    case FE_E_NEG: {
        ir_dim a;
        if (!fe_eval_dim(l, e->lhs, &a)) return false;
        if (!ir_dim_sub(ir_dim_const(0), a, out)) {
            diag_error(l->d, e->loc, "dimension expression overflows");
            return false;
        }
        return true;
    }
    case FE_E_BINOP: {
        ir_dim a, b;
        bool oka = fe_eval_dim(l, e->lhs, &a);
        bool okb = fe_eval_dim(l, e->rhs, &b);
        if (!oka || !okb) return false;
        bool ok = false;
        switch (e->op) {
        case '+': ok = ir_dim_add(a, b, out); break;
        case '-': ok = ir_dim_sub(a, b, out); break;
        case '*': ok = ir_dim_mul(a, b, out); break;
        case '/': {
            int64_t bv;
            if (ir_dim_is_const(&b, &bv) && bv == 0) {
                diag_error(l->d, e->op_loc, "division by zero in a dimension");
                return false;
            }
            ok = ir_dim_div(a, b, out);
            if (!ok) {
                diag_error(l->d, e->op_loc, "'%s' is not divisible by '%s'; division in a dimension must be exact",
                           fe_dim_str(l, &a), fe_dim_str(l, &b));
                return false;
            }
            break;
        }
        case '@':
            diag_error(l->d, e->op_loc, "'@' (matrix product) is not allowed in a dimension");
            return false;
        }
        if (!ok) {
            diag_error(l->d, e->op_loc, "dimension expression too large or too complex");
            return false;
        }
        return true;
    }
    case FE_E_BOOL:
    case FE_E_LIST:
    case FE_E_STRING:
    case FE_E_CALL:
        diag_error(l->d, e->loc, "expected a dimension; %s", dim_hint);
        return false;
    }
    return false;
}

/* A declared shape: [dim, ...]; false after an error (reported). */
static bool eval_type(fe_lower *l, const fe_type *t, ir_type *out)
{
    memset(out, 0, sizeof *out);
    bool ok = true;
    if (!ir_dtype_parse(t->dtype.name, &out->dtype)) {
        const char *names[] = {"f32", "f16", "bf16", "i32"};
        const char *best = NULL;
        int best_d = 1000;
        for (int i = 0; i < 4; i++)
            if (fe_suggest_consider(t->dtype.name, names[i], &best_d)) best = names[i];
        if (best)
            diag_error(l->d, t->dtype.loc, "unknown dtype '%s'; did you mean '%s'?", t->dtype.name, best);
        else
            diag_error(l->d, t->dtype.loc, "unknown dtype '%s' (expected f32, f16, bf16 or i32)",
                       t->dtype.name);
        ok = false;
    }
    if (t->dims.n > IR_MAX_RANK) {
        diag_error(l->d, t->dims.v[IR_MAX_RANK]->loc, "too many dimensions: a tensor has at most %d",
                   IR_MAX_RANK);
        return false;
    }
    out->rank = t->dims.n;
    for (int i = 0; i < t->dims.n; i++) {
        if (!fe_eval_dim(l, t->dims.v[i], &out->dims[i])) {
            ok = false;
            continue;
        }
        int64_t v;
        if (ir_dim_is_const(&out->dims[i], &v) && v < 0) {
            diag_error(l->d, t->dims.v[i]->loc, "a dimension cannot be negative (it is %lld)",
                       (long long)v);
            ok = false;
        }
    }
    if (ok) { /* its byte size must fit: every later size of the model is computed from it */
        bool overflow = false;
        (void)ir_type_bytes(out, &overflow);
        if (overflow) {
            diag_error(l->d, t->loc, "%s: the tensor's size in bytes does not fit in 64 bits", fe_type_str(l, out));
            ok = false;
        }
    }
    return ok;
}

/* ---- tensors ------------------------------------------------------------------------- */

/* A scalar CONST for a numeric expression. An integer next to an i32 tensor
 * becomes an i32 constant; anything else is a weakly typed f32 scalar that
 * the builder converts to the other operand's dtype. */
static ir_node *numeric_const(fe_lower *l, const fe_expr *e, const ir_node *other)
{
    fe_num n;
    if (!fe_eval_num(l, e, &n)) return NULL;
    ir_dtype dt = IR_F32;
    if (other && other->type.dtype == IR_I32 && n.is_int) dt = IR_I32;
    return ir_const(l->g, n.f, dt, e->loc);
}

static ir_op binop_ir(char op)
{
    switch (op) {
    case '+': return IR_OP_ADD;
    case '-': return IR_OP_SUB;
    case '*': return IR_OP_MUL;
    case '/': return IR_OP_DIV;
    default: return IR_OP_MATMUL;
    }
}

ir_node *fe_binary(fe_lower *l, ir_op op, const fe_expr *a, const fe_expr *b, src_loc loc)
{
    bool na = is_numeric(l, a), nb = is_numeric(l, b);
    ir_node *x, *y;
    if (na && !nb) {
        y = fe_eval_tensor(l, b);
        x = numeric_const(l, a, y);
    } else if (nb && !na) {
        x = fe_eval_tensor(l, a);
        y = numeric_const(l, b, x);
    } else {
        x = fe_eval_tensor(l, a);
        y = fe_eval_tensor(l, b);
    }
    if (!x || !y) return NULL;
    return ir_binary(l->g, op, x, y, loc);
}

static ir_node *name_tensor(fe_lower *l, const fe_expr *e)
{
    fe_sym *s = fe_lookup(l, e->text);
    if (!s) {
        if (is_dtype_name(e->text))
            diag_error(l->d, e->loc, "'%s' is a dtype, not a tensor", e->text);
        else
            fe_unknown_name(l, e->text, e->loc);
        return NULL;
    }
    if (s->poison) return NULL;
    s->uses++;
    switch (s->kind) {
    case FE_SYM_DIM:
        diag_error(l->d, e->loc, "'%s' is a dim (a size), not a tensor", e->text);
        return NULL;
    case FE_SYM_CONST: return numeric_const(l, e, NULL);
    case FE_SYM_OUTPUT:
        if (!s->assigned) {
            diag_error(l->d, e->loc, "output '%s' is used before it is assigned", e->text);
            return NULL;
        }
        return s->value;
    case FE_SYM_PARAM:
    case FE_SYM_VAR: return s->value;
    }
    return NULL;
}

/* An expression with exactly one value. */
ir_node *fe_eval_tensor(fe_lower *l, const fe_expr *e)
{
    if (is_numeric(l, e)) return numeric_const(l, e, NULL);
    switch (e->kind) {
    case FE_E_NUM: return numeric_const(l, e, NULL);
    case FE_E_NAME: return name_tensor(l, e);
    case FE_E_BOOL:
        diag_error(l->d, e->loc, "'%s' is not a tensor (booleans are options such as causal=true)",
                   e->bval ? "true" : "false");
        return NULL;
    case FE_E_LIST:
        diag_error(l->d, e->loc, "a list is not a tensor (lists are arguments such as shapes and axes)");
        return NULL;
    case FE_E_STRING:
        diag_error(l->d, e->loc, "a string is not a tensor (strings are options such as scaling=\"llama3\")");
        return NULL;
    case FE_E_NEG: {
        ir_node *x = fe_eval_tensor(l, e->lhs);
        return x ? ir_unary(l->g, IR_OP_NEG, x, e->loc) : NULL;
    }
    case FE_E_BINOP:
        if (e->op == '@') {
            if (is_numeric(l, e->lhs) || is_numeric(l, e->rhs)) {
                diag_error(l->d, e->op_loc, "'@' (matrix product) needs two tensors; use '*' to scale");
                return NULL;
            }
            ir_node *a = fe_eval_tensor(l, e->lhs);
            ir_node *b = fe_eval_tensor(l, e->rhs);
            return a && b ? ir_matmul(l->g, a, b, e->op_loc) : NULL;
        }
        return fe_binary(l, binop_ir(e->op), e->lhs, e->rhs, e->op_loc);
    case FE_E_CALL: {
        fe_vals r = fe_eval_call(l, e);
        if (r.n == 1) return r.v[0];
        if (r.n > 1)
            diag_error(l->d, e->loc,
                       "'%s' returns %d values here; assign them to %d names (a, b = %s(...))",
                       e->text, r.n, r.n, e->text);
        return NULL;
    }
    }
    return NULL;
}

/* ---- statements -------------------------------------------------------------------- */

/* Inside a layer instance a value's node is named NAME.INDEX (h.0, h.1, ...). */
static void name_node(fe_lower *l, ir_node *n, const char *name)
{
    if (!n || n->name || n->param >= 0) return;
    n->name = l->layer >= 0 ? arena_printf(&l->g->arena, "%s.%d", name, l->layer)
                            : arena_strdup(&l->g->arena, name);
}

static int find_define(fe_lower *l, const char *name)
{
    if (!l->opts) return -1;
    for (int i = l->opts->ndefines - 1; i >= 0; i--)
        if (l->opts->defines[i].name && strcmp(l->opts->defines[i].name, name) == 0) return i;
    return -1;
}

static const src_loc no_loc = {NULL, 0, 0, 0};

static void lower_dims(fe_lower *l, const fe_stmt *s)
{
    for (int i = 0; i < s->names.n; i++) {
        const fe_name *n = &s->names.v[i];
        if (!check_new_name(l, n->name, n->loc)) continue;
        fe_sym *sym = add_sym(l, n->name, FE_SYM_DIM, n->loc);
        if (!sym) return;
        sym->sym = ir_graph_add_sym(l->g, n->name);
        if (sym->sym < 0) {
            if (!l->too_many_dims)
                diag_error(l->d, n->loc, "too many dims: a model has at most %d", IR_MAX_SYMS);
            l->too_many_dims = true;
            continue;
        }
        int di = find_define(l, n->name);
        if (di >= 0) {
            l->define_used[di] = true;
            if (l->define_bad[di]) continue;
            const fe_num *v = &l->define_num[di];
            const fe_define *def = &l->opts->defines[di];
            if (!v->is_int || v->i <= 0) {
                diag_error(l->d, no_loc, "-D %s=%s: dim '%s' needs a positive integer", def->name,
                           def->value ? def->value : "", n->name);
                continue;
            }
            sym->bound = true;
            sym->bound_value = v->i;
        }
    }
}

static void lower_consts(fe_lower *l, const fe_stmt *s)
{
    for (int i = 0; i < s->consts.n; i++) {
        const fe_constdef *c = &s->consts.v[i];
        fe_num v = {0};
        bool ok;
        int di = find_define(l, c->name.name);
        if (di >= 0) {
            l->define_used[di] = true;
            ok = !l->define_bad[di];
            v = l->define_num[di];
        } else {
            ok = fe_eval_num(l, c->value, &v);
        }
        if (!check_new_name(l, c->name.name, c->name.loc)) continue;
        fe_sym *sym = add_sym(l, c->name.name, FE_SYM_CONST, c->name.loc);
        if (!sym) return;
        sym->num = v;
        sym->ok = ok;
    }
}

/* The tensor name of a parameter: its pattern with `{INDEX}` replaced by the
 * layer's index, or (without a pattern) its own name, NAME.INDEX inside a
 * layer. NULL after an error. */
static const char *param_tensor_name(fe_lower *l, const fe_stmt *s)
{
    const char *name = s->names.v[0].name;
    if (!s->tensor) return l->layer >= 0 ? arena_printf(l->a, "%s.%d", name, l->layer) : name;
    if (!*s->tensor) {
        diag_error(l->d, s->tensor_loc, "the tensor name of '%s' is empty", name);
        return NULL;
    }
    char *out = arena_alloc(l->a, strlen(s->tensor) * 2 + 32);
    if (!out) return NULL;
    size_t k = 0;
    bool indexed = false;
    for (const char *c = s->tensor; *c;) {
        if (*c != '{' && *c != '}') {
            out[k++] = *c++;
            continue;
        }
        const char *close = *c == '{' ? strchr(c, '}') : NULL;
        size_t len = close ? (size_t)(close - c - 1) : 0;
        if (!close) {
            diag_error(l->d, s->tensor_loc, "unmatched '%c' in the tensor name \"%s\"", *c, s->tensor);
            return NULL;
        }
        if (l->layer < 0) {
            diag_error(l->d, s->tensor_loc,
                       "'%.*s' in the tensor name of '%s': a placeholder is only valid inside a layer block",
                       (int)(len + 2), c, name);
            return NULL;
        }
        if (len != strlen(l->layer_index) || strncmp(c + 1, l->layer_index, len) != 0) {
            diag_error(l->d, s->tensor_loc, "unknown placeholder '%.*s' in the tensor name; the layer index is '{%s}'",
                       (int)(len + 2), c, l->layer_index);
            return NULL;
        }
        k += (size_t)sprintf(out + k, "%d", l->layer);
        indexed = true;
        c = close + 1;
    }
    out[k] = '\0';
    if (l->layer >= 0 && !indexed) {
        diag_error(l->d, s->tensor_loc,
                   "the tensor name of '%s' has no '{%s}': every layer would read the same tensor (declare a "
                   "shared %s outside the layer block)",
                   name, l->layer_index, s->param_kind == IR_OP_WEIGHT ? "weight" : "parameter");
        return NULL;
    }
    return out;
}

static void lower_param(fe_lower *l, const fe_stmt *s)
{
    const fe_name *n = &s->names.v[0];
    ir_type t;
    bool ok = eval_type(l, s->type, &t);
    if (!check_new_name(l, n->name, n->loc)) return;
    fe_sym *sym = add_sym(l, n->name, FE_SYM_PARAM, n->loc);
    if (!sym) return;
    sym->param_kind = s->param_kind;
    const char *tname = param_tensor_name(l, s);
    if (!tname) sym->poison = true;
    if (!ok || !tname) return;
    bool taken;
    intptr_t oi = (intptr_t)map_get(l, &l->tensors, tname, &taken);
    if (taken) {
        const fe_sym *o = &l->syms[oi - 1];
        diag_error(l->d, s->tensor ? s->tensor_loc : n->loc, "tensor name '%s' is taken by %s '%s'", tname,
                   kind_name(o), o->name);
        diag_note(l->d, o->loc, "'%s' is declared here (to share a tensor, use '%s' itself)", o->name, o->name);
        sym->poison = true;
        return;
    }
    if (!map_put(l, &l->tensors, tname, (const void *)(intptr_t)(sym - l->syms + 1))) {
        sym->poison = true;
        return;
    }
    sym->param = ir_param(l->g, s->param_kind, tname, &t, n->loc);
    sym->value = sym->param;
}

/* The STATE parameter that a chain of cache writes starting at n updates
 * (NULL when n is not such a chain). */
static const ir_node *written_state(const ir_node *n)
{
    while (n && n->op == IR_OP_CACHE_WRITE) n = n->inputs[0];
    return n && n->op == IR_OP_STATE ? n : NULL;
}

/* Remember a variable bound to a cache write of a state (see fe_state_write). */
static void note_state_write(fe_lower *l, int var, const ir_node *v)
{
    const ir_node *st = v && v->op == IR_OP_CACHE_WRITE ? written_state(v) : NULL;
    if (!st) return;
    if (!VEC_GROW(l->writes, l->nwrites, l->capwrites, l->a)) return; /* a missed warning, not a wrong graph */
    l->writes[l->nwrites++] = (fe_state_write){var, v, st};
}

/* Bind the value of `name` (a target of an assignment or an output). */
static void bind(fe_lower *l, const fe_name *n, ir_node *v)
{
    fe_sym *s = fe_lookup(l, n->name);
    if (!s) {
        if (is_dtype_name(n->name)) {
            diag_error(l->d, n->loc, "'%s' is a dtype name and cannot be used as a name", n->name);
            v = NULL;
        }
        s = add_sym(l, n->name, FE_SYM_VAR, n->loc);
        if (!s) return;
        s->poison = is_dtype_name(n->name); /* defined anyway so that its uses stay quiet */
        s->value = v;
        name_node(l, v, n->name);
        note_state_write(l, (int)(s - l->syms), v);
        return;
    }
    switch (s->kind) {
    case FE_SYM_DIM:
    case FE_SYM_CONST:
        diag_error(l->d, n->loc, "cannot assign to %s '%s'", kind_name(s), n->name);
        diag_note(l->d, s->loc, "'%s' is declared here", n->name);
        return;
    case FE_SYM_PARAM:
        if (s->param_kind != IR_OP_STATE) {
            diag_error(l->d, n->loc, "cannot assign to %s '%s'; only a state can be given a new value",
                       kind_name(s), n->name);
            diag_note(l->d, s->loc, "'%s' is declared here", n->name);
            return;
        }
        if (v && s->param && !ir_type_eq(&v->type, &s->param->type)) {
            diag_error(l->d, n->loc, "new value of state '%s' has type %s, but the state is %s",
                       n->name, fe_type_str(l, &v->type), fe_type_str(l, &s->param->type));
            v = NULL;
        }
        s->value = v;
        s->rebound = true;
        s->rebind_loc = n->loc;
        name_node(l, v, n->name);
        return;
    case FE_SYM_VAR:
        if (l->layer >= 0 && (int)(s - l->syms) < l->layer_sym0) {
            /* a value of the enclosing model carried through the layers */
            s->value = v;
            name_node(l, v, n->name);
            return;
        }
        redefinition(l, s, n->name, n->loc);
        return;
    case FE_SYM_OUTPUT:
        if (l->layer >= 0) {
            diag_error(l->d, n->loc, "output '%s' cannot be assigned inside a layer block; assign a value "
                       "there and the output after the block", n->name);
            s->assigned = true; /* not also "never assigned" */
            return;
        }
        if (s->assigned) {
            diag_error(l->d, n->loc, "output '%s' is assigned twice", n->name);
            diag_note(l->d, s->assign_loc, "first assigned here");
            return;
        }
        s->assigned = true;
        s->assign_loc = n->loc;
        if (v && s->has_type && !ir_type_eq(&v->type, &s->type)) {
            diag_error(l->d, n->loc, "output '%s' is declared %s but its value is %s", n->name,
                       fe_type_str(l, &s->type), fe_type_str(l, &v->type));
            v = NULL;
        }
        s->value = v;
        name_node(l, v, n->name);
        return;
    }
}

static void lower_output(fe_lower *l, const fe_stmt *s)
{
    const fe_name *n = &s->names.v[0];
    ir_type t;
    bool has_type = s->type != NULL, type_ok = true;
    if (has_type) type_ok = eval_type(l, s->type, &t);
    ir_node *v = s->value ? fe_eval_tensor(l, s->value) : NULL;
    if (!check_new_name(l, n->name, n->loc)) return;
    fe_sym *sym = add_sym(l, n->name, FE_SYM_OUTPUT, n->loc);
    if (!sym) return;
    sym->has_type = has_type && type_ok;
    if (sym->has_type) sym->type = t;
    if (has_type && !type_ok) sym->assigned = true; /* don't also complain it's unassigned */
    if (s->value) {
        sym->assigned = false;
        bind(l, n, v);
    }
}

static void lower_assign(fe_lower *l, const fe_stmt *s)
{
    int nt = s->names.n;
    /* the same name twice in one tuple */
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(s->names.v[i].name, s->names.v[j].name) == 0) {
                diag_error(l->d, s->names.v[i].loc, "'%s' appears twice on the left of '='",
                           s->names.v[i].name);
                return;
            }
    if (nt == 1) {
        ir_node *v = fe_eval_tensor(l, s->value);
        bind(l, &s->names.v[0], v);
        return;
    }
    fe_vals r = {0, NULL};
    if (s->value->kind == FE_E_CALL) {
        r = fe_eval_call(l, s->value);
    } else {
        ir_node *v = fe_eval_tensor(l, s->value);
        if (v) {
            diag_error(l->d, s->value->loc, "%d names are assigned but the expression has one value",
                       nt);
        }
    }
    if (r.n > 0 && r.n != nt) {
        diag_error(l->d, s->value->loc, "%d names are assigned but '%s' returns %d value%s", nt,
                   s->value->text, r.n, r.n == 1 ? "" : "s");
        r.n = 0;
    }
    for (int i = 0; i < nt; i++) bind(l, &s->names.v[i], r.n ? r.v[i] : NULL);
}

static void lower_stmt(fe_lower *l, const fe_stmt *s);

/* layer i < N { stmts }: the statements lowered N times, i = 0 .. N-1. Names
 * defined inside are the instance's own; a value of the enclosing model
 * assigned inside is carried from one instance to the next (and holds the
 * last one's value after the block). */
static void lower_layer(fe_lower *l, const fe_stmt *s)
{
    const fe_name *ix = &s->names.v[0];
    if (l->layer >= 0) {
        diag_error(l->d, s->loc, "layer blocks cannot nest");
        return;
    }
    fe_num cnt;
    if (!fe_eval_num(l, s->count, &cnt)) return;
    if (!cnt.is_int || cnt.i < 1 || cnt.i > FE_MAX_LAYERS) {
        diag_error(l->d, s->count->loc, "a layer block's count must be an integer from 1 to %d, not %s",
                   FE_MAX_LAYERS, fe_num_str(l, &cnt));
        return;
    }
    if (!check_new_name(l, ix->name, ix->loc)) return;
    int errors0 = l->d->errors;
    for (int64_t i = 0; i < cnt.i && l->d->errors == errors0; i++) {
        l->layer = (int)i;
        l->layer_index = ix->name;
        l->layer_sym0 = l->nsyms;
        fe_sym *is = add_sym(l, ix->name, FE_SYM_CONST, ix->loc);
        if (!is) break;
        is->num = num_int(i);
        is->ok = true;
        for (int j = 0; s->body && j < s->body->nstmts; j++) lower_stmt(l, s->body->stmts[j]);
        /* the instance's names go out of scope; warnings speak of the first one */
        for (int j = l->layer_sym0; j < l->nsyms; j++) {
            l->syms[j].hidden = true;
            if (i > 0) l->syms[j].warned = true;
        }
        l->layer = -1;
    }
}

static void lower_stmt(fe_lower *l, const fe_stmt *s)
{
    switch (s->kind) {
    case FE_S_DIMS:
        if (l->layer >= 0) {
            diag_error(l->d, s->loc, "dims are declared by the model, not inside a layer block");
            return;
        }
        lower_dims(l, s);
        break;
    case FE_S_CONST: lower_consts(l, s); break;
    case FE_S_PARAM: lower_param(l, s); break;
    case FE_S_OUTPUT:
        if (l->layer >= 0) {
            diag_error(l->d, s->loc, "outputs are declared by the model, not inside a layer block");
            return;
        }
        lower_output(l, s);
        break;
    case FE_S_ASSIGN: lower_assign(l, s); break;
    case FE_S_LAYER: lower_layer(l, s); break;
    }
}

/* ---- defines ------------------------------------------------------------------------ */

static bool parse_define_value(const char *text, fe_num *out)
{
    if (!text || !*text) return false;
    char *end;
    errno = 0;
    long long i = strtoll(text, &end, 10);
    if (*end == '\0' && errno == 0) {
        *out = num_int(i);
        return true;
    }
    errno = 0;
    double f = strtod(text, &end);
    if (*end != '\0' || errno == ERANGE || !isfinite(f)) return false;
    *out = num_float(f);
    return true;
}

static void check_defines(fe_lower *l)
{
    if (!l->opts) return;
    for (int i = 0; i < l->opts->ndefines; i++) {
        const fe_define *def = &l->opts->defines[i];
        const char *name = def->name ? def->name : "";
        if (!parse_define_value(def->value, &l->define_num[i])) {
            diag_error(l->d, no_loc, "-D %s=%s: the value must be a number", name,
                       def->value ? def->value : "");
            l->define_bad[i] = true;
        }
        for (int j = i + 1; j < l->opts->ndefines; j++)
            if (l->opts->defines[j].name && strcmp(l->opts->defines[j].name, name) == 0) {
                diag_error(l->d, no_loc, "-D %s is given more than once", name);
                break;
            }
    }
}

static void check_unused_defines(fe_lower *l)
{
    if (!l->opts) return;
    for (int i = 0; i < l->opts->ndefines; i++) {
        const fe_define *def = &l->opts->defines[i];
        if (l->define_used[i]) continue;
        bool dup = false;
        for (int j = i + 1; j < l->opts->ndefines; j++)
            if (def->name && l->opts->defines[j].name && strcmp(l->opts->defines[j].name, def->name) == 0)
                dup = true;
        if (dup) continue; /* reported as given twice; the last one was used */
        const char *name = def->name ? def->name : "";
        fe_sym *s = fe_lookup(l, name);
        if (s) {
            diag_error(l->d, no_loc, "-D %s=%s: '%s' is %s %s, not a dim or a const", name,
                       def->value ? def->value : "", name,
                       s->kind == FE_SYM_OUTPUT || (s->kind == FE_SYM_PARAM && s->param_kind == IR_OP_INPUT)
                           ? "an" : "a",
                       kind_name(s));
            continue;
        }
        const char *best = NULL;
        int best_d = 1000;
        for (int j = 0; j < l->nsyms; j++)
            if ((l->syms[j].kind == FE_SYM_DIM || l->syms[j].kind == FE_SYM_CONST) &&
                fe_suggest_consider(name, l->syms[j].name, &best_d))
                best = l->syms[j].name;
        if (best)
            diag_error(l->d, no_loc, "-D %s=%s: model '%s' has no dim or const named '%s'; did you mean '%s'?",
                       name, def->value ? def->value : "", l->g->name, name, best);
        else
            diag_error(l->d, no_loc, "-D %s=%s: model '%s' has no dim or const named '%s'", name,
                       def->value ? def->value : "", l->g->name, name);
    }
}

/* ---- the model ------------------------------------------------------------------------ */

static void finish(fe_lower *l, int errors0)
{
    /* outputs in declaration order */
    for (int i = 0; i < l->nsyms; i++) {
        fe_sym *s = &l->syms[i];
        if (s->kind != FE_SYM_OUTPUT) continue;
        if (!s->assigned) {
            diag_error(l->d, s->loc, "output '%s' is declared but never assigned", s->name);
            continue;
        }
        if (s->value) {
            if (ir_graph_add_output(l->g, s->name, s->value, s->loc) < 0)
                diag_error(l->d, s->loc, "out of memory");
        } else if (l->d->errors == errors0) {
            /* every failure reports; this guards the guarantee that a NULL
             * graph always comes with an error */
            diag_error(l->d, s->loc, "internal error: output '%s' has no value (please report)",
                       s->name);
        }
    }
    /* state updates, in declaration order; a state assigned its own value is no update */
    for (int i = 0; i < l->nsyms; i++) {
        fe_sym *s = &l->syms[i];
        if (s->kind == FE_SYM_PARAM && s->param_kind == IR_OP_STATE && s->rebound && s->value &&
            s->value != s->param)
            ir_graph_set_state(l->g, s->param, s->value, s->rebind_loc);
    }
}

/* ---- warnings ---------------------------------------------------------------------- */

/* The mistakes a model can make without an error, checked once it lowered
 * cleanly (after an error, a statement that failed early leaves names looking
 * unread). A name that starts with '_' is never reported as unused. */
static void warn_unused(fe_lower *l)
{
    /* a state's new value bound to another name and never to the state */
    for (int i = 0; i < l->nwrites; i++) {
        const fe_state_write *w = &l->writes[i];
        fe_sym *st = NULL;
        bool found;
        intptr_t si = (intptr_t)map_get(l, &l->tensors, w->state->name, &found);
        if (found && l->syms[si - 1].param == w->state) st = &l->syms[si - 1];
        if (!st || st->warned) continue;
        const ir_node *fin = st->rebound && st->value ? st->value : st->param;
        bool reaches = false;
        for (const ir_node *n = fin; n && n->op == IR_OP_CACHE_WRITE; n = n->inputs[0])
            reaches |= n == w->node;
        if (reaches) continue;
        fe_sym *var = &l->syms[w->var];
        var->warned = true;
        if (diag_warn(l->d, DIAG_W_STALE_STATE, var->loc,
                      "'%s' is the new value of state '%s', but '%s' is never given it: the cache write is "
                      "lost when the call returns and the next call reads the old '%s' (assign the result "
                      "to '%s' itself)",
                      var->name, st->name, st->name, st->name, st->name))
            diag_note(l->d, st->loc, "state '%s' is declared here", st->name);
    }
    for (int i = 0; i < l->nsyms; i++) {
        fe_sym *s = &l->syms[i];
        if (s->uses || s->poison || s->warned || s->name[0] == '_') continue;
        if (s->kind == FE_SYM_VAR && s->value)
            diag_warn(l->d, DIAG_W_UNUSED_VALUE, s->loc,
                      "'%s' is computed but never used: it reaches no output or state update (to "
                      "return it, write 'output %s = ...')",
                      s->name, s->name);
        else if (s->kind == FE_SYM_PARAM && s->param_kind == IR_OP_STATE) {
            if (!s->rebound) /* a state only written is updated, not unused */
                diag_warn(l->d, DIAG_W_UNUSED_PARAM, s->loc, "state '%s' is declared but never read or updated",
                          s->name);
        } else if (s->kind == FE_SYM_PARAM)
            diag_warn(l->d, DIAG_W_UNUSED_PARAM, s->loc, "%s '%s' is declared but never read",
                      kind_name(s), s->name);
    }
}

/* Lowers m into a new graph. Returns 0, or -1 when errors were reported
 * (then *out is NULL). */
int fe_lower_model(const fe_model *m, const fe_options *opts, arena *scratch, diag_list *d,
                   ir_graph **out, uint64_t *work)
{
    *out = NULL;
    int errors0 = d->errors;
    ir_graph *g = ir_graph_new(m->name.name);
    if (!g) {
        diag_error(d, m->loc, "out of memory");
        return -1;
    }
    g->loc = m->loc;
    g->diags = d;
    fe_lower l = {0};
    l.g = g;
    l.d = d;
    l.a = scratch;
    l.m = m;
    l.opts = opts;
    int nd = opts ? opts->ndefines : 0;
    if (nd > 0) {
        l.define_used = arena_alloc(scratch, (size_t)nd * sizeof *l.define_used);
        l.define_bad = arena_alloc(scratch, (size_t)nd * sizeof *l.define_bad);
        l.define_num = arena_alloc(scratch, (size_t)nd * sizeof *l.define_num);
        if (!l.define_used || !l.define_bad || !l.define_num) {
            diag_error(d, m->loc, "out of memory");
            ir_graph_free(g);
            return -1;
        }
    }
    check_defines(&l);
    l.layer = -1;
    for (int i = 0; i < m->nstmts; i++) lower_stmt(&l, m->stmts[i]);
    finish(&l, errors0);
    check_unused_defines(&l);
    if (work) *work += l.work;
    if (d->errors == errors0 && g->noutputs == 0 && g->nstates == 0)
        diag_error(d, m->name.loc, "model '%s' has no outputs", g->name);
    /* kernels and their files are named kiln_<model>_k<N>_<kind>: the name must
     * leave room for the rest in a file system's 255-byte names */
    if (g->name && strlen(g->name) > FE_MODEL_NAME_MAX)
        diag_error(d, m->name.loc, "the model name is %zu bytes long; at most %d fit in the names of its kernel files",
                   strlen(g->name), FE_MODEL_NAME_MAX);
    if (d->errors == errors0 && ir_verify(g, d) != 0)
        diag_error(d, m->loc, "internal error: the lowered graph does not verify");
    if (d->errors == errors0) warn_unused(&l);
    g->diags = NULL;
    if (d->errors != errors0) {
        ir_graph_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

const char *fe_num_str(fe_lower *l, const fe_num *n)
{
    char buf[64];
    fmt_num(n, buf, sizeof buf);
    return arena_strdup(l->a, buf);
}
