/* frontend/builtins.c — the functions of the language.
 *
 * Each builtin has a signature (parameter names, kinds, which are required)
 * and a lowering to ir builder calls. A call binds its arguments first
 * (positional in order, then keywords by name), reporting arity problems,
 * unknown or repeated keywords and missing arguments at the call; then the
 * handler evaluates each argument in the way its kind says (tensor, number,
 * axis, dtype, shape, ...) and reports problems at that argument. The
 * semantics of every function are in docs/LANGUAGE.md. */
#include <math.h>
#include <string.h>

#include "frontend/lower.h"

#define MAXP 16

typedef enum {
    P_TENSOR,  /* a tensor expression (numbers become scalar constants) */
    P_NUM,     /* a compile-time number */
    P_BOOL,    /* true / false */
    P_DTYPE,   /* f32 f16 bf16 i32 */
    P_AXIS,    /* an integer axis, negative from the end */
    P_AXES,    /* an axis or a list of axes */
    P_SHAPE,   /* a list of dimensions, one may be -1 */
    P_PERM,    /* a list of axes */
    P_TENSORS, /* a list of tensors */
    P_DIM,     /* one dimension */
    P_SIZES,   /* a list of dimensions or a number of equal parts */
    P_NAME,    /* a name from a fixed set, bare or quoted (rope's scaling=llama3 or "llama3") */
} pkind;

typedef struct pspec {
    const char *name;
    pkind kind;
    bool required;
} pspec;

typedef struct builtin builtin;
typedef fe_vals (*handler)(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv);

struct builtin {
    const char *name;
    const char *usage; /* shown in argument errors */
    handler fn;
    ir_op op;
    int nparams;
    pspec p[MAXP];
};

/* ---- results ---------------------------------------------------------------- */

static fe_vals one(fe_lower *l, ir_node *n)
{
    fe_vals r = {1, arena_alloc(l->a, sizeof(ir_node *))};
    if (!r.v) return (fe_vals){0, NULL};
    r.v[0] = n;
    return r;
}

static fe_vals many(fe_lower *l, int n)
{
    fe_vals r = {n, arena_alloc(l->a, (size_t)(n > 0 ? n : 1) * sizeof(ir_node *))};
    if (!r.v) return (fe_vals){0, NULL};
    return r;
}

static const fe_vals none = {0, NULL};

/* ---- argument evaluation ------------------------------------------------------ */

static bool arg_num(fe_lower *l, const fe_expr *e, double dflt, double *out)
{
    if (!e) {
        *out = dflt;
        return true;
    }
    fe_num n;
    if (!fe_eval_num(l, e, &n)) return false;
    *out = n.f;
    return true;
}

static bool arg_bool(fe_lower *l, const builtin *b, int i, const fe_expr *e, bool dflt, bool *out)
{
    if (!e) {
        *out = dflt;
        return true;
    }
    if (e->kind != FE_E_BOOL) {
        diag_error(l->d, e->loc, "%s: '%s' must be true or false", b->name, b->p[i].name);
        return false;
    }
    *out = e->bval;
    return true;
}

static bool arg_int(fe_lower *l, const builtin *b, int i, const fe_expr *e, int64_t *out)
{
    fe_num n;
    if (!fe_eval_num(l, e, &n)) return false;
    if (!n.is_int) {
        diag_error(l->d, e->loc, "%s: '%s' must be an integer, not %g", b->name, b->p[i].name, n.f);
        return false;
    }
    *out = n.i;
    return true;
}

/* Normalize an axis of x (negative counts from the end). */
static bool norm_axis(fe_lower *l, const builtin *b, src_loc at, int64_t a, const ir_node *x,
                      int *out)
{
    int r = x->type.rank;
    if (a < -r || a >= r) {
        diag_error(l->d, at, "%s: axis %lld is out of range for %s (rank %d)", b->name,
                   (long long)a, fe_type_str(l, &x->type), r);
        return false;
    }
    *out = (int)(a < 0 ? a + r : a);
    return true;
}

/* `call` locates the error when the default axis does not fit. */
static bool arg_axis(fe_lower *l, const builtin *b, int i, const fe_expr *e, int64_t dflt,
                     const ir_node *x, const fe_expr *call, int *out)
{
    int64_t a = dflt;
    if (e && !arg_int(l, b, i, e, &a)) return false;
    return norm_axis(l, b, e ? e->loc : call->loc, a, x, out);
}

/* P_AXES: an integer or a list; absent = every axis. */
static bool arg_axes(fe_lower *l, const builtin *b, int i, const fe_expr *e, const ir_node *x,
                     uint32_t *mask)
{
    *mask = 0;
    if (!e) {
        for (int k = 0; k < x->type.rank; k++) *mask |= 1u << k;
        return true;
    }
    const fe_expr *const *items = (const fe_expr *const *)&e;
    int n = 1;
    if (e->kind == FE_E_LIST) {
        items = (const fe_expr *const *)e->items.v;
        n = e->items.n;
        if (n == 0) {
            diag_error(l->d, e->loc, "%s: the list of axes is empty", b->name);
            return false;
        }
    }
    for (int k = 0; k < n; k++) {
        int64_t a;
        int ax;
        if (!arg_int(l, b, i, items[k], &a) || !norm_axis(l, b, items[k]->loc, a, x, &ax)) return false;
        if (*mask & (1u << ax)) {
            diag_error(l->d, items[k]->loc, "%s: axis %d is listed twice", b->name, ax);
            return false;
        }
        *mask |= 1u << ax;
    }
    return true;
}

static bool arg_dtype(fe_lower *l, const builtin *b, const fe_expr *e, ir_dtype *out)
{
    if (e->kind == FE_E_NAME && ir_dtype_parse(e->text, out)) return true;
    const char *names[] = {"f32", "f16", "bf16", "i32"};
    const char *best = NULL;
    int best_d = 1000;
    if (e->kind == FE_E_NAME)
        for (int k = 0; k < 4; k++)
            if (fe_suggest_consider(e->text, names[k], &best_d)) best = names[k];
    if (best)
        diag_error(l->d, e->loc, "%s: unknown dtype '%s'; did you mean '%s'?", b->name, e->text, best);
    else
        diag_error(l->d, e->loc, "%s: expected a dtype (f32, f16, bf16 or i32)", b->name);
    return false;
}

/* The items of a list argument; false (reported) when it is not a list.
 * An empty list has n == 0 and items NULL. */
static bool list_items(fe_lower *l, const builtin *b, int i, const fe_expr *e,
                       const fe_expr *const **items, int *n)
{
    if (e->kind != FE_E_LIST) {
        diag_error(l->d, e->loc, "%s: '%s' must be a list [...]", b->name, b->p[i].name);
        return false;
    }
    *n = e->items.n;
    *items = (const fe_expr *const *)e->items.v;
    return true;
}

/* ---- binding ------------------------------------------------------------------------ */

static void list_params(const builtin *b, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < b->nparams && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", b->p[i].name);
}

static bool bind_args(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    for (int i = 0; i < MAXP; i++) argv[i] = NULL;
    const fe_args *args = &call->args;
    int npos = 0;
    bool ok = true, seen_kw = false;
    for (int i = 0; i < args->n; i++) {
        const fe_arg *a = &args->v[i];
        if (!a->name) {
            if (seen_kw) {
                diag_error(l->d, a->value->loc, "%s: positional argument after keyword arguments",
                           b->name);
                return false;
            }
            if (npos >= b->nparams) {
                int given = 0;
                for (int k = 0; k < args->n; k++) given += !args->v[k].name;
                int req = 0;
                for (int k = 0; k < b->nparams; k++) req += b->p[k].required;
                diag_error(l->d, a->value->loc, "%s takes %s%d argument%s, got %d (usage: %s)",
                           b->name, req == b->nparams ? "" : "at most ", b->nparams,
                           b->nparams == 1 ? "" : "s", given, b->usage);
                return false;
            }
            argv[npos++] = a->value;
            continue;
        }
        seen_kw = true;
        int k;
        for (k = 0; k < b->nparams; k++)
            if (strcmp(b->p[k].name, a->name) == 0) break;
        if (k == b->nparams) {
            char names[256];
            list_params(b, names, sizeof names);
            const char *best = NULL;
            int best_d = 1000;
            for (int j = 0; j < b->nparams; j++)
                if (fe_suggest_consider(a->name, b->p[j].name, &best_d)) best = b->p[j].name;
            if (best)
                diag_error(l->d, a->name_loc, "%s has no argument '%s'; did you mean '%s'? (arguments: %s)",
                           b->name, a->name, best, names);
            else
                diag_error(l->d, a->name_loc, "%s has no argument '%s' (arguments: %s)", b->name,
                           a->name, names);
            ok = false;
            continue;
        }
        if (argv[k]) {
            diag_error(l->d, a->name_loc, "%s: argument '%s' is given twice", b->name, a->name);
            ok = false;
            continue;
        }
        argv[k] = a->value;
    }
    if (!ok) return false;
    char missing[256];
    size_t off = 0;
    int nmissing = 0;
    missing[0] = '\0';
    for (int k = 0; k < b->nparams; k++)
        if (b->p[k].required && !argv[k] && off < sizeof missing) {
            off += (size_t)snprintf(missing + off, sizeof missing - off, "%s'%s'",
                                    nmissing ? ", " : "", b->p[k].name);
            nmissing++;
        }
    if (nmissing) {
        diag_error(l->d, call->loc, "%s: missing argument%s %s (usage: %s)", b->name,
                   nmissing > 1 ? "s" : "", missing, b->usage);
        return false;
    }
    return true;
}

/* Evaluate the P_TENSOR arguments; false when any failed. */
static bool tensors(fe_lower *l, const builtin *b, const fe_expr **argv, ir_node **t)
{
    bool ok = true;
    for (int k = 0; k < b->nparams; k++) {
        t[k] = NULL;
        if (b->p[k].kind != P_TENSOR || !argv[k]) continue;
        t[k] = fe_eval_tensor(l, argv[k]);
        if (!t[k]) ok = false;
    }
    return ok;
}

/* ---- handlers ----------------------------------------------------------------------- */

static fe_vals h_unary(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    return one(l, ir_unary(l->g, b->op, t[0], call->loc));
}

static fe_vals h_binary(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    return one(l, fe_binary(l, b->op, argv[0], argv[1], call->loc));
}

static fe_vals h_gelu(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    bool approx;
    bool ok = tensors(l, b, argv, t);
    if (!arg_bool(l, b, 1, argv[1], false, &approx) || !ok) return one(l, NULL);
    return one(l, ir_gelu(l->g, t[0], approx, call->loc));
}

static fe_vals h_cast(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    ir_dtype dt;
    bool ok = tensors(l, b, argv, t);
    if (!arg_dtype(l, b, argv[1], &dt) || !ok) return one(l, NULL);
    return one(l, ir_cast(l->g, t[0], dt, call->loc));
}

static fe_vals h_reduce(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    uint32_t axes;
    bool keep;
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    if (!arg_axes(l, b, 1, argv[1], t[0], &axes) || !arg_bool(l, b, 2, argv[2], false, &keep))
        return one(l, NULL);
    if (b->op == IR_OP_MIN) { /* min(x, axis) = -max(-x, axis) */
        ir_node *n = ir_unary(l->g, IR_OP_NEG, t[0], call->loc);
        n = ir_reduce(l->g, IR_OP_REDUCE_MAX, n, axes, keep, call->loc);
        return one(l, ir_unary(l->g, IR_OP_NEG, n, call->loc));
    }
    return one(l, ir_reduce(l->g, b->op, t[0], axes, keep, call->loc));
}

static fe_vals h_softmax(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    int axis;
    if (!tensors(l, b, argv, t) || !arg_axis(l, b, 1, argv[1], -1, t[0], call, &axis)) return one(l, NULL);
    return one(l, ir_softmax(l->g, t[0], axis, call->loc));
}

static fe_vals h_norm(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    double eps;
    int ie = b->op == IR_OP_RMSNORM ? 2 : 3;
    bool ok = tensors(l, b, argv, t);
    if (!arg_num(l, argv[ie], 1e-5, &eps) || !ok) return one(l, NULL);
    if (!(eps >= 0)) {
        diag_error(l->d, argv[ie]->loc, "%s: eps must not be negative", b->name);
        return one(l, NULL);
    }
    if (b->op == IR_OP_RMSNORM) return one(l, ir_rmsnorm(l->g, t[0], t[1], eps, call->loc));
    return one(l, ir_layernorm(l->g, t[0], t[1], t[2], eps, call->loc));
}

static fe_vals h_matmul(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    return one(l, ir_matmul(l->g, t[0], t[1], call->loc));
}

static fe_vals h_linear(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    return one(l, ir_linear(l->g, t[0], t[1], t[2], call->loc));
}

static fe_vals h_reshape(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    bool ok = tensors(l, b, argv, t);
    int n;
    const fe_expr *const *items;
    if (!list_items(l, b, 1, argv[1], &items, &n)) return one(l, NULL);
    if (n > IR_MAX_RANK) {
        diag_error(l->d, items[IR_MAX_RANK]->loc, "reshape: too many dimensions (at most %d)",
                   IR_MAX_RANK);
        return one(l, NULL);
    }
    ir_dim dims[IR_MAX_RANK];
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (!fe_eval_dim(l, items[i], &dims[i])) {
            ok = false;
            continue;
        }
        int64_t v;
        if (ir_dim_is_const(&dims[i], &v) && v < 0) {
            if (v == -1 && infer < 0) {
                infer = i;
                continue;
            }
            diag_error(l->d, items[i]->loc,
                       v == -1 ? "reshape: only one dimension may be -1"
                               : "reshape: a dimension cannot be negative");
            ok = false;
        }
    }
    if (!ok || !t[0]) return one(l, NULL);
    if (infer >= 0) {
        ir_dim total = ir_dim_const(1), known = ir_dim_const(1);
        bool fit = true;
        for (int i = 0; i < t[0]->type.rank; i++) fit = fit && ir_dim_mul(total, t[0]->type.dims[i], &total);
        for (int i = 0; i < n; i++)
            if (i != infer) fit = fit && ir_dim_mul(known, dims[i], &known);
        int64_t kv;
        if (!fit || (ir_dim_is_const(&known, &kv) && kv == 0) || !ir_dim_div(total, known, &dims[infer])) {
            diag_error(l->d, items[infer]->loc,
                       "reshape: cannot infer -1: %s elements of %s are not a multiple of %s",
                       fe_dim_str(l, &total), fe_type_str(l, &t[0]->type), fe_dim_str(l, &known));
            return one(l, NULL);
        }
    }
    return one(l, ir_reshape(l->g, t[0], n, dims, call->loc));
}

static fe_vals h_transpose(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    ir_node *x = t[0];
    int r = x->type.rank, a0, a1;
    if (!argv[1] && !argv[2]) {
        if (r < 2) {
            diag_error(l->d, call->loc, "transpose: %s has fewer than two axes",
                       fe_type_str(l, &x->type));
            return one(l, NULL);
        }
        a0 = r - 2;
        a1 = r - 1;
    } else if (!argv[1] || !argv[2]) {
        diag_error(l->d, call->loc, "transpose: give both axes to swap, or none (usage: %s)", b->usage);
        return one(l, NULL);
    } else {
        int64_t v0, v1;
        if (!arg_int(l, b, 1, argv[1], &v0) || !norm_axis(l, b, argv[1]->loc, v0, x, &a0) ||
            !arg_int(l, b, 2, argv[2], &v1) || !norm_axis(l, b, argv[2]->loc, v1, x, &a1))
            return one(l, NULL);
    }
    int perm[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[a0] = a1;
    perm[a1] = a0;
    return one(l, ir_permute(l->g, x, perm, call->loc));
}

static fe_vals h_permute(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    ir_node *x = t[0];
    int n;
    const fe_expr *const *items;
    if (!list_items(l, b, 1, argv[1], &items, &n)) return one(l, NULL);
    if (n != x->type.rank) {
        diag_error(l->d, argv[1]->loc, "permute: %d axes given for %s, which has %d", n,
                   fe_type_str(l, &x->type), x->type.rank);
        return one(l, NULL);
    }
    int perm[IR_MAX_RANK];
    uint32_t seen = 0;
    for (int i = 0; i < n; i++) {
        int64_t v;
        if (!arg_int(l, b, 1, items[i], &v) || !norm_axis(l, b, items[i]->loc, v, x, &perm[i]))
            return one(l, NULL);
        if (seen & (1u << perm[i])) {
            diag_error(l->d, items[i]->loc, "permute: axis %d is listed twice", perm[i]);
            return one(l, NULL);
        }
        seen |= 1u << perm[i];
    }
    return one(l, ir_permute(l->g, x, perm, call->loc));
}

static fe_vals h_slice(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    int axis;
    if (!arg_axis(l, b, 1, argv[1], 0, t[0], call, &axis)) return one(l, NULL);
    ir_dim start = ir_dim_const(0), end = t[0]->type.dims[axis];
    bool ok = true;
    if (argv[2] && !fe_eval_dim(l, argv[2], &start)) ok = false;
    if (argv[3] && !fe_eval_dim(l, argv[3], &end)) ok = false;
    if (!ok) return one(l, NULL);
    return one(l, ir_slice(l->g, t[0], axis, start, end, call->loc));
}

static fe_vals h_concat(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    int n;
    const fe_expr *const *items;
    if (!list_items(l, b, 0, argv[0], &items, &n)) return one(l, NULL);
    if (n == 0) {
        diag_error(l->d, argv[0]->loc, "concat: the list of tensors is empty");
        return one(l, NULL);
    }
    ir_node **xs = arena_alloc(l->a, (size_t)n * sizeof *xs);
    if (!xs) return one(l, NULL);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        xs[i] = fe_eval_tensor(l, items[i]);
        if (!xs[i]) ok = false;
    }
    int axis;
    if (!ok || !arg_axis(l, b, 1, argv[1], -1, xs[0], call, &axis)) return one(l, NULL);
    return one(l, ir_concat(l->g, n, xs, axis, call->loc));
}

static fe_vals h_split(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return none;
    ir_node *x = t[0];
    int axis;
    if (!arg_axis(l, b, 2, argv[2], -1, x, call, &axis)) return none;
    const ir_dim *len = &x->type.dims[axis];
    const fe_expr *se = argv[1];
    int n;
    ir_dim sizes[64];
    if (se->kind == FE_E_LIST) {
        n = se->items.n;
        if (n < 1 || n > 64) {
            diag_error(l->d, se->loc, "split: give between 1 and 64 sizes");
            return none;
        }
        for (int i = 0; i < n; i++)
            if (!fe_eval_dim(l, se->items.v[i], &sizes[i])) return none;
        ir_dim total = ir_dim_const(0);
        for (int i = 0; i < n; i++)
            if (!ir_dim_add(total, sizes[i], &total)) {
                diag_error(l->d, se->loc, "split: sizes too complex");
                return none;
            }
        if (!ir_dim_eq(&total, len)) {
            diag_error(l->d, se->loc, "split: the sizes add up to %s, but axis %d of %s is %s",
                       fe_dim_str(l, &total), axis, fe_type_str(l, &x->type), fe_dim_str(l, len));
            return none;
        }
    } else {
        int64_t parts;
        if (!arg_int(l, b, 1, se, &parts)) return none;
        if (parts < 1 || parts > 64) {
            diag_error(l->d, se->loc, "split: the number of parts must be between 1 and 64");
            return none;
        }
        ir_dim part;
        if (!ir_dim_div(*len, ir_dim_const(parts), &part)) {
            diag_error(l->d, se->loc, "split: axis %d of %s (%s) does not divide into %lld equal parts",
                       axis, fe_type_str(l, &x->type), fe_dim_str(l, len), (long long)parts);
            return none;
        }
        n = (int)parts;
        for (int i = 0; i < n; i++) sizes[i] = part;
    }
    fe_vals r = many(l, n);
    if (!r.v) return none;
    ir_dim start = ir_dim_const(0);
    for (int i = 0; i < n; i++) {
        ir_dim end;
        if (!ir_dim_add(start, sizes[i], &end)) {
            diag_error(l->d, se->loc, "split: sizes too complex");
            return none;
        }
        r.v[i] = ir_slice(l->g, x, axis, start, end, call->loc);
        start = end;
    }
    return r;
}

static fe_vals h_embedding(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    return one(l, ir_embedding(l->g, t[0], t[1], call->loc));
}

/* vals, idx = topk(x, k): the k largest along the last axis and their indices */
static fe_vals h_topk(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    int64_t k = 0;
    bool ok = tensors(l, b, argv, t);
    if (!arg_int(l, b, 1, argv[1], &k)) return many(l, 2);
    if (!ok) return many(l, 2);
    if (k < 1) {
        diag_error(l->d, argv[1]->loc, "topk: k=%lld must be at least 1", (long long)k);
        return many(l, 2);
    }
    fe_vals r = many(l, 2);
    if (!r.v) return none;
    r.v[0] = ir_topk(l->g, t[0], k, false, call->loc);
    r.v[1] = r.v[0] ? ir_topk(l->g, t[0], k, true, call->loc) : NULL;
    return r;
}

static fe_vals h_expert_linear(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (!tensors(l, b, argv, t)) return one(l, NULL);
    return one(l, ir_expert_linear(l->g, t[0], t[1], t[2], call->loc));
}

/* rope's options after theta, in the table's order (argv[3 + i]). */
enum {
    R_SCALING = 3, R_FACTOR, R_LOW, R_HIGH, R_ORIG, R_BETA_FAST, R_BETA_SLOW, R_TRUNCATE,
    R_ATTN_FACTOR, R_MSCALE, R_MSCALE_ALL, R_DIMS,
};

/* The scalings each option of rope applies to (bit = ir_rope_scaling). */
static unsigned rope_option_kinds(int i)
{
    const unsigned lin = 1u << IR_ROPE_LINEAR, l3 = 1u << IR_ROPE_LLAMA3, y = 1u << IR_ROPE_YARN;
    switch (i) {
    case R_FACTOR: return lin | l3 | y;
    case R_LOW:
    case R_HIGH: return l3;
    case R_ORIG: return l3 | y;
    default: return y; /* beta_fast .. mscale_all_dim */
    }
}

static fe_vals h_rope(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    double theta = 0;
    bool ok = tensors(l, b, argv, t);
    if (!arg_num(l, argv[2], 10000.0, &theta)) ok = false;
    ir_rope_attrs r = {0};
    const fe_expr *se = argv[R_SCALING];
    /* a bare name or a string, as a config's rope_type: scaling=llama3, scaling="llama3" */
    bool named = se && (se->kind == FE_E_NAME || se->kind == FE_E_STRING);
    if (se && !(named && ir_rope_scaling_parse(se->text, &r.scaling))) {
        const char *best = NULL;
        int best_d = 1000;
        if (named) {
            for (int k = 0; k < 4; k++)
                if (fe_suggest_consider(se->text, ir_rope_scaling_name((ir_rope_scaling)k), &best_d))
                    best = ir_rope_scaling_name((ir_rope_scaling)k);
            if (best)
                diag_error(l->d, se->loc, "rope: unknown scaling '%s'; did you mean '%s'? (none, linear, llama3, yarn)",
                           se->text, best);
            else
                diag_error(l->d, se->loc, "rope: unknown scaling '%s' (none, linear, llama3, yarn)", se->text);
            return one(l, NULL);
        } else {
            diag_error(l->d, se->loc, "rope: 'scaling' must be one of none, linear, llama3, yarn");
            return one(l, NULL);
        }
    }
    for (int i = R_FACTOR; i <= R_MSCALE_ALL; i++)
        if (argv[i] && !(rope_option_kinds(i) & (1u << r.scaling))) {
            diag_error(l->d, argv[i]->loc, "rope: '%s' does not apply to scaling=%s", b->p[i].name,
                       ir_rope_scaling_name(r.scaling));
            return one(l, NULL);
        }
    double mscale = 0, mscale_all = 0, attn = 0;
    bool truncate = true;
    if (!arg_num(l, argv[R_FACTOR], 0, &r.factor) || !arg_num(l, argv[R_LOW], 1, &r.low_freq_factor) ||
        !arg_num(l, argv[R_HIGH], 4, &r.high_freq_factor) || !arg_num(l, argv[R_ORIG], 0, &r.original_max_pos) ||
        !arg_num(l, argv[R_BETA_FAST], 32, &r.beta_fast) || !arg_num(l, argv[R_BETA_SLOW], 1, &r.beta_slow) ||
        !arg_bool(l, b, R_TRUNCATE, argv[R_TRUNCATE], true, &truncate) ||
        !arg_num(l, argv[R_ATTN_FACTOR], 0, &attn) || !arg_num(l, argv[R_MSCALE], 0, &mscale) ||
        !arg_num(l, argv[R_MSCALE_ALL], 0, &mscale_all) || !ok)
        return one(l, NULL);
    r.no_truncate = !truncate;
    if (argv[R_DIMS]) { /* partial rotary: the first R dims of each head */
        int64_t R;
        if (!arg_int(l, b, R_DIMS, argv[R_DIMS], &R)) return one(l, NULL);
        if (R <= 0 || R % 2) {
            diag_error(l->d, argv[R_DIMS]->loc, "rope: dims=%lld must be a positive even number of rotary dims",
                       (long long)R);
            return one(l, NULL);
        }
        r.rotary_dims = R;
    }
    if (r.scaling != IR_ROPE_NONE && !argv[R_FACTOR]) {
        diag_error(l->d, call->loc, "rope: scaling=%s needs factor=", ir_rope_scaling_name(r.scaling));
        return one(l, NULL);
    }
    if ((r.scaling == IR_ROPE_LLAMA3 || r.scaling == IR_ROPE_YARN) && !argv[R_ORIG]) {
        diag_error(l->d, call->loc, "rope: scaling=%s needs original_max_pos= (the context the model was trained at)",
                   ir_rope_scaling_name(r.scaling));
        return one(l, NULL);
    }
    if (r.scaling == IR_ROPE_YARN) {
        /* as Hugging Face resolves it: attention_factor, else the ratio of
         * the two mscales, else 0.1 ln(factor) + 1 */
        if (argv[R_ATTN_FACTOR] && (argv[R_MSCALE] || argv[R_MSCALE_ALL])) {
            diag_error(l->d, argv[R_ATTN_FACTOR]->loc,
                       "rope: give attention_factor or mscale and mscale_all_dim, not both");
            return one(l, NULL);
        }
        if ((argv[R_MSCALE] != NULL) != (argv[R_MSCALE_ALL] != NULL)) {
            diag_error(l->d, (argv[R_MSCALE] ? argv[R_MSCALE] : argv[R_MSCALE_ALL])->loc,
                       "rope: mscale and mscale_all_dim go together");
            return one(l, NULL);
        }
        if (argv[R_ATTN_FACTOR]) r.mscale = attn;
        else if (argv[R_MSCALE] && mscale != 0 && mscale_all != 0)
            r.mscale = ir_rope_yarn_mscale(r.factor, mscale) / ir_rope_yarn_mscale(r.factor, mscale_all);
        else r.mscale = ir_rope_yarn_mscale(r.factor, 1.0);
    }
    return one(l, ir_rope_scaled(l->g, t[0], t[1], theta, &r, call->loc));
}

/* Head counts are model constants; a run-time size on a head axis means a
 * tensor in another layout that the shape rules could not tell apart (q as
 * [B, H, S, HD] when S is a dim passes them: H % KV cannot be checked). */
static void warn_attention_layout(fe_lower *l, const fe_expr **argv, ir_node *const *t)
{
    static const char *const names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        int axis = i == 0 ? 2 : 1;
        const ir_dim *hd = &t[i]->type.dims[axis];
        if (ir_dim_is_const(hd, NULL)) continue;
        if (i == 0)
            diag_warn(l->d, DIAG_W_ATTENTION_LAYOUT, argv[i]->loc,
                      "attention: the head axis of q (axis 2) is '%s', a run-time size: q is read as "
                      "[B, S, H, HD]; is %s in another layout? (a [B, H, S, HD] q needs "
                      "permute(q, [0, 2, 1, 3]))",
                      fe_dim_str(l, hd), fe_type_str(l, &t[i]->type));
        else
            diag_warn(l->d, DIAG_W_ATTENTION_LAYOUT, argv[i]->loc,
                      "attention: the head axis of %s (axis 1) is '%s', a run-time size: %s is read in the "
                      "cache layout [B, KV, T, HD]; is %s in another layout? (a [B, T, KV, HD] %s needs "
                      "permute(%s, [0, 2, 1, 3]))",
                      names[i], fe_dim_str(l, hd), names[i], fe_type_str(l, &t[i]->type), names[i], names[i]);
    }
}

static fe_vals h_attention(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    bool causal;
    double scale;
    bool ok = tensors(l, b, argv, t);
    if (!arg_bool(l, b, 4, argv[4], false, &causal)) ok = false;
    if (!arg_num(l, argv[5], 0, &scale)) ok = false;
    if (!ok) return one(l, NULL);
    if (argv[5] && !(scale > 0)) {
        diag_error(l->d, argv[5]->loc, "attention: scale must be positive");
        return one(l, NULL);
    }
    int64_t window = 0;
    double softcap = 0;
    if (argv[6] && !arg_int(l, b, 6, argv[6], &window)) return one(l, NULL);
    if (argv[6] && window <= 0) {
        diag_error(l->d, argv[6]->loc, "attention: window=%lld must be positive (the keys within that many positions "
                                       "of the query, itself included)", (long long)window);
        return one(l, NULL);
    }
    if (!arg_num(l, argv[7], 0, &softcap)) return one(l, NULL);
    if (argv[7] && !(softcap > 0 && isfinite(softcap))) {
        diag_error(l->d, argv[7]->loc, "attention: softcap must be positive (scores become softcap * tanh(score / softcap))");
        return one(l, NULL);
    }
    ir_node *n = ir_attention_ex(l->g, t[0], t[1], t[2], t[3], scale, causal, window, softcap, call->loc);
    if (n) warn_attention_layout(l, argv, t);
    return one(l, n);
}

static fe_vals h_cache_write(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_node *t[MAXP];
    if (b->nparams == 3) {
        if (!tensors(l, b, argv, t)) return one(l, NULL);
        return one(l, ir_cache_write(l->g, t[0], t[1], t[2], call->loc));
    }
    if (!tensors(l, b, argv, t)) return many(l, 2); /* two NULLs: the error is reported */
    fe_vals r = many(l, 2);
    if (!r.v) return none;
    r.v[0] = ir_cache_write(l->g, t[0], t[2], t[4], call->loc);
    /* the V write would most likely repeat the K write's error */
    r.v[1] = r.v[0] ? ir_cache_write(l->g, t[1], t[3], t[4], call->loc) : NULL;
    return r;
}

static fe_vals h_causal_mask(fe_lower *l, const builtin *b, const fe_expr *call, const fe_expr **argv)
{
    ir_dim q, k;
    bool okq = fe_eval_dim(l, argv[0], &q);
    bool okk = fe_eval_dim(l, argv[1], &k);
    if (!okq || !okk) return one(l, NULL);
    return one(l, ir_causal_mask(l->g, q, k, IR_F32, call->loc));
}

/* ---- the table ------------------------------------------------------------------------ */

#define T(n) {n, P_TENSOR, true}
#define OT(n) {n, P_TENSOR, false}

#define UNARY(nm, OP) {nm, nm "(x)", h_unary, IR_OP_##OP, 1, {T("x")}}
#define BINARY(nm, OP) {nm, nm "(a, b)", h_binary, IR_OP_##OP, 2, {T("a"), T("b")}}

static const builtin builtins[] = {
    UNARY("exp", EXP),
    UNARY("log", LOG),
    UNARY("sqrt", SQRT),
    UNARY("rsqrt", RSQRT),
    UNARY("tanh", TANH),
    UNARY("sigmoid", SIGMOID),
    UNARY("silu", SILU),
    UNARY("relu", RELU),
    UNARY("neg", NEG),
    {"gelu", "gelu(x, tanh=false)", h_gelu, IR_OP_GELU, 2, {T("x"), {"tanh", P_BOOL, false}}},
    BINARY("add", ADD),
    BINARY("sub", SUB),
    BINARY("mul", MUL),
    BINARY("div", DIV),
    BINARY("pow", POW),
    /* max/min: the elementwise form; the reduction form is chosen in
     * fe_eval_call when there is only one positional argument */
    BINARY("max", MAX),
    BINARY("min", MIN),
    {"cast", "cast(x, dtype)", h_cast, IR_OP_CAST, 2, {T("x"), {"dtype", P_DTYPE, true}}},
    {"sum", "sum(x, axis=all, keepdim=false)", h_reduce, IR_OP_SUM, 3,
     {T("x"), {"axis", P_AXES, false}, {"keepdim", P_BOOL, false}}},
    {"mean", "mean(x, axis=all, keepdim=false)", h_reduce, IR_OP_MEAN, 3,
     {T("x"), {"axis", P_AXES, false}, {"keepdim", P_BOOL, false}}},
    {"softmax", "softmax(x, axis=-1)", h_softmax, IR_OP_SOFTMAX, 2, {T("x"), {"axis", P_AXIS, false}}},
    {"rmsnorm", "rmsnorm(x, w, eps=1e-5)", h_norm, IR_OP_RMSNORM, 3,
     {T("x"), T("w"), {"eps", P_NUM, false}}},
    {"layernorm", "layernorm(x, w, b, eps=1e-5)", h_norm, IR_OP_LAYERNORM, 4,
     {T("x"), T("w"), OT("b"), {"eps", P_NUM, false}}},
    {"matmul", "matmul(a, b)", h_matmul, IR_OP_MATMUL, 2, {T("a"), T("b")}},
    {"linear", "linear(x, w, b)", h_linear, IR_OP_LINEAR, 3, {T("x"), T("w"), OT("b")}},
    {"reshape", "reshape(x, [dims])", h_reshape, IR_OP_RESHAPE, 2, {T("x"), {"shape", P_SHAPE, true}}},
    {"transpose", "transpose(x) or transpose(x, axis0, axis1)", h_transpose, IR_OP_PERMUTE, 3,
     {T("x"), {"axis0", P_AXIS, false}, {"axis1", P_AXIS, false}}},
    {"permute", "permute(x, [axes])", h_permute, IR_OP_PERMUTE, 2, {T("x"), {"perm", P_PERM, true}}},
    {"slice", "slice(x, axis, start=0, end=size)", h_slice, IR_OP_SLICE, 4,
     {T("x"), {"axis", P_AXIS, true}, {"start", P_DIM, false}, {"end", P_DIM, false}}},
    {"concat", "concat([x, ...], axis=-1)", h_concat, IR_OP_CONCAT, 2,
     {{"xs", P_TENSORS, true}, {"axis", P_AXIS, false}}},
    {"split", "split(x, [sizes] or parts, axis=-1)", h_split, IR_OP_SLICE, 3,
     {T("x"), {"sizes", P_SIZES, true}, {"axis", P_AXIS, false}}},
    {"embedding", "embedding(table, ids)", h_embedding, IR_OP_EMBEDDING, 2, {T("table"), T("ids")}},
    {"topk", "vals, idx = topk(x, k)", h_topk, IR_OP_TOPK, 2, {T("x"), {"k", P_NUM, true}}},
    {"expert_linear", "expert_linear(x, w, idx)", h_expert_linear, IR_OP_EXPERT_LINEAR, 3,
     {T("x"), T("w"), T("idx")}},
    {"rope",
     "rope(x, pos, theta=10000.0, scaling=none|linear|llama3|yarn, factor, low_freq_factor=1, "
     "high_freq_factor=4, original_max_pos, beta_fast=32, beta_slow=1, truncate=true, attention_factor, "
     "mscale, mscale_all_dim, dims=head_dim)",
     h_rope, IR_OP_ROPE, 15,
     {T("x"), OT("pos"), {"theta", P_NUM, false}, {"scaling", P_NAME, false}, {"factor", P_NUM, false},
      {"low_freq_factor", P_NUM, false}, {"high_freq_factor", P_NUM, false},
      {"original_max_pos", P_NUM, false}, {"beta_fast", P_NUM, false}, {"beta_slow", P_NUM, false},
      {"truncate", P_BOOL, false}, {"attention_factor", P_NUM, false}, {"mscale", P_NUM, false},
      {"mscale_all_dim", P_NUM, false}, {"dims", P_NUM, false}}},
    {"attention", "attention(q, k, v, pos, causal=false, scale=1/sqrt(head_dim), window=all, softcap=none)",
     h_attention, IR_OP_ATTENTION, 8,
     {T("q"), T("k"), T("v"), OT("pos"), {"causal", P_BOOL, false}, {"scale", P_NUM, false}, {"window", P_NUM, false},
      {"softcap", P_NUM, false}}},
    /* cache_write: the one-cache form; the two-cache form is chosen in
     * fe_eval_call when there are four or more positional arguments */
    {"cache_write", "cache_write(cache, x, pos) or cache_write(kc, vc, k, v, pos)", h_cache_write,
     IR_OP_CACHE_WRITE, 3, {T("cache"), T("x"), OT("pos")}},
    {"causal_mask", "causal_mask(Sq, Sk)", h_causal_mask, IR_OP_CAUSAL_MASK, 2,
     {{"Sq", P_DIM, true}, {"Sk", P_DIM, true}}},
};

static const builtin reduce_max = {"max", "max(a, b) or max(x, axis=all, keepdim=false)", h_reduce,
                                   IR_OP_REDUCE_MAX, 3,
                                   {T("x"), {"axis", P_AXES, false}, {"keepdim", P_BOOL, false}}};
static const builtin reduce_min = {"min", "min(a, b) or min(x, axis=all, keepdim=false)", h_reduce,
                                   IR_OP_MIN, 3,
                                   {T("x"), {"axis", P_AXES, false}, {"keepdim", P_BOOL, false}}};
static const builtin cache_write2 = {"cache_write",
                                     "cache_write(cache, x, pos) or cache_write(kc, vc, k, v, pos)",
                                     h_cache_write, IR_OP_CACHE_WRITE, 5,
                                     {T("kc"), T("vc"), T("k"), T("v"), OT("pos")}};

#define NBUILTINS ((int)(sizeof builtins / sizeof builtins[0]))

bool fe_is_builtin(const char *name)
{
    for (int i = 0; i < NBUILTINS; i++)
        if (strcmp(builtins[i].name, name) == 0) return true;
    return false;
}

const char *fe_suggest_builtin(const char *name)
{
    const char *best = NULL;
    int best_d = 1000;
    for (int i = 0; i < NBUILTINS; i++)
        if (fe_suggest_consider(name, builtins[i].name, &best_d)) best = builtins[i].name;
    return best;
}

fe_vals fe_eval_call(fe_lower *l, const fe_expr *call)
{
    const builtin *b = NULL;
    for (int i = 0; i < NBUILTINS; i++)
        if (strcmp(builtins[i].name, call->text) == 0) {
            b = &builtins[i];
            break;
        }
    if (!b) {
        const char *best = fe_suggest_builtin(call->text);
        fe_sym *s = fe_lookup(l, call->text);
        if (s && s->kind != FE_SYM_DIM && s->kind != FE_SYM_CONST)
            diag_error(l->d, call->op_loc, "'%s' is a tensor, not a function", call->text);
        else if (best)
            diag_error(l->d, call->op_loc, "unknown function '%s'; did you mean '%s'?", call->text, best);
        else
            diag_error(l->d, call->op_loc, "unknown function '%s'", call->text);
        return none;
    }
    int npos = 0;
    for (int i = 0; i < call->args.n; i++) npos += !call->args.v[i].name;
    if ((b->op == IR_OP_MAX || b->op == IR_OP_MIN) && npos < 2) {
        bool has_b = false;
        for (int i = 0; i < call->args.n; i++)
            if (call->args.v[i].name && (strcmp(call->args.v[i].name, "a") == 0 ||
                                         strcmp(call->args.v[i].name, "b") == 0))
                has_b = true;
        if (!has_b) b = b->op == IR_OP_MAX ? &reduce_max : &reduce_min;
    }
    if (b->op == IR_OP_CACHE_WRITE && npos >= 4) b = &cache_write2;
    const fe_expr *argv[MAXP];
    if (!bind_args(l, b, call, argv)) return b == &cache_write2 ? many(l, 2) : none;
    return b->fn(l, b, call, argv);
}
