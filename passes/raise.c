/* passes/raise.c — recognize fused ops written with primitives.
 *
 * Algorithm: two sweeps, each a match phase over the whole graph followed by
 * a rebuild through a pass_rewriter and DCE.
 *
 *   sweep 1: layernorm, rmsnorm, softmax, gelu (tanh form), silu, linear,
 *            partial rotary;
 *   sweep 2: attention, over the graph sweep 1 produced, so that it sees the
 *            softmax raised in sweep 1 (a softmax still spelled out is
 *            matched too, for when raise-softmax is disabled).
 *
 * Matching visits nodes from the last to the first and tries each enabled
 * pattern with the node as the pattern's root (its final op), in the order
 * above: bigger patterns first, since a layernorm contains an rmsnorm of
 * x - mean(x), and the later of two nested roots is the bigger pattern. A
 * matcher collects the pattern's nodes (root and intermediates) and its
 * inputs (x, w, b, ...). Then:
 *   - an intermediate may have no user outside the pattern and may not be a
 *     model output (the pattern's inputs, e.g. x, may have any users);
 *   - the fused op must produce exactly the root's type (checked with the
 *     builder's own type inference);
 *   - no node may already belong to a pattern decided earlier.
 * Every match is recorded in the fusion report: taken, or refused when the
 * pattern almost matches but cannot be raised (an intermediate used
 * elsewhere, mismatched axes, a missing or misshapen weight, a mask that is
 * not causal_mask, ...), with a reason a user can act on. Refused and taken
 * patterns both mark their nodes, so a pattern is reported once.
 *
 * Rebuild: nodes are copied in order; a taken pattern's root is replaced by
 * the fused op built over the copies of the pattern's inputs, and its
 * intermediates become dead (DCE drops them). Commutative operands of add
 * and mul match in either order; a subexpression written twice (x - mean(x)
 * in two places) matches when both copies are the same computation.
 *
 * Constants (eps, the attention scale) are taken as written in the model
 * (the literal value), so a raised op carries the same attributes as the
 * same op written directly: both routes give the same kernels.
 *
 * attention: the matmul form works on q as [B, H, S, HD]; attention reads
 * q as [B, S, H, HD]. The replacement is
 *     permute(attention(permute(q, [0,2,1,3]), k, v), [0,2,1,3])
 * and raise composes these permutes with adjacent ones on the spot (q
 * usually is permute(reshape(...), [0,2,1,3]) and the result is usually
 * permuted back by the model), so no permute pair is left for a later pass.
 *
 * linear: x @ transpose(w) with w a WEIGHT [N, K] becomes linear(x, w);
 * x @ w with w a WEIGHT [K, N] becomes linear(x, permute(w, [1, 0])) — the
 * permute of a weight is bind-time work, done once when weights are bound.
 *
 * partial rotary (GPT-NeoX, Pythia, Phi-2): concat([rope(slice(x, 0, R)),
 * slice(x, R, HD)], axis=-1), x [B, S, N, HD], becomes rope(x, dims=R) with
 * the rope's theta and scaling: the same values (a rope of the first R dims
 * uses the frequencies of a head of R) in one op instead of two slices, a
 * rope and a concat. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "util/vec.h"

#define MAXN 96

typedef enum { R_NO, R_YES, R_REFUSE } mres;

typedef enum { K_LAYERNORM, K_RMSNORM, K_SOFTMAX, K_GELU, K_SILU, K_LINEAR, K_ROPE, K_ATTENTION, K_COUNT } kind;

static const pass_rule rule_of[K_COUNT] = {PASS_RULE_RAISE_LAYERNORM, PASS_RULE_RAISE_RMSNORM, PASS_RULE_RAISE_SOFTMAX,
                                           PASS_RULE_RAISE_GELU,      PASS_RULE_RAISE_SILU,    PASS_RULE_RAISE_LINEAR,
                                           PASS_RULE_RAISE_PARTIAL_ROTARY, PASS_RULE_RAISE_ATTENTION};

typedef struct match {
    kind k;
    ir_node *root;
    ir_node *nodes[MAXN]; /* the root and the intermediates */
    int n;
    bool overflow;
    ir_node *x, *w, *b, *kk, *v, *wt;
    double eps, scale;
    int axis;
    bool causal, w_kn, no_max, div_form, pow_form, var_form2, scale_div;
    int kperm[4];    /* attention: k = permute(kk, kperm) is [B, KV, T, HD] */
    src_loc kloc;    /* where the model transposes k */
    ir_type ktype;
    const char *why; /* refusal reason */
    double theta;      /* rope: the rope's theta and options, with rotary_dims set */
    ir_rope_attrs rope;
} match;

typedef struct raiser {
    pass_ctx *ctx;
    const ir_graph *g;
    const pass_users *u;
    arena a;
    bool *seen;
    match **plan; /* by root id */
} raiser;

/* ---- small helpers -------------------------------------------------------------- */

static bool in_set(const match *m, const ir_node *n)
{
    for (int i = 0; i < m->n; i++)
        if (m->nodes[i] == n) return true;
    return false;
}

static void add(match *m, ir_node *n)
{
    if (!n || in_set(m, n)) return;
    if (m->n == MAXN) {
        m->overflow = true;
        return;
    }
    m->nodes[m->n++] = n;
}

static bool bin(const ir_node *n, ir_op op, ir_node **a, ir_node **b)
{
    if (n->op != op || n->ninputs != 2) return false;
    *a = n->inputs[0];
    *b = n->inputs[1];
    return true;
}

/* The same computation: the same node, or the same op over the same
 * computations (a subexpression the model writes twice). */
static bool same_value(const ir_node *a, const ir_node *b, int depth)
{
    if (a == b) return true;
    if (depth <= 0 || a->op != b->op || a->param >= 0 || b->param >= 0 || a->ninputs != b->ninputs ||
        !ir_type_eq(&a->type, &b->type) || !pass_attrs_eq(a, b))
        return false;
    for (int i = 0; i < a->ninputs; i++)
        if (!same_value(a->inputs[i], b->inputs[i], depth - 1)) return false;
    return true;
}

/* Adds the nodes of `dup`, a second copy of the pattern nodes `orig`, down
 * to where the copies meet or leave the pattern. */
static void add_dup(match *m, ir_node *dup, const ir_node *orig)
{
    if (dup == orig || !in_set(m, orig) || dup->ninputs != orig->ninputs) return;
    add(m, dup);
    for (int i = 0; i < dup->ninputs; i++) add_dup(m, dup->inputs[i], orig->inputs[i]);
}

/* The value of a scalar constant expression, as written in the model. */
static bool const_num(const ir_node *n, double *v, int depth)
{
    double a, b;
    if (n->op == IR_OP_CONST) {
        *v = n->attrs.value;
        return true;
    }
    if (depth <= 0 || n->type.rank != 0 || n->ninputs < 1 || n->ninputs > 2 ||
        ir_op_class(n->op) != IR_CLASS_ELEMENTWISE || !const_num(n->inputs[0], &a, depth - 1))
        return false;
    if (n->ninputs == 1) {
        switch (n->op) {
        case IR_OP_NEG: *v = -a; return true;
        case IR_OP_SQRT: *v = sqrt(a); return true;
        case IR_OP_RSQRT: *v = 1.0 / sqrt(a); return true;
        case IR_OP_EXP: *v = exp(a); return true;
        case IR_OP_LOG: *v = log(a); return true;
        case IR_OP_TANH: *v = tanh(a); return true;
        case IR_OP_CAST: *v = a; return true;
        default: return false;
        }
    }
    if (!const_num(n->inputs[1], &b, depth - 1)) return false;
    switch (n->op) {
    case IR_OP_ADD: *v = a + b; return true;
    case IR_OP_SUB: *v = a - b; return true;
    case IR_OP_MUL: *v = a * b; return true;
    case IR_OP_DIV: *v = a / b; return true;
    case IR_OP_POW: *v = pow(a, b); return true;
    default: return false;
    }
}

static bool close_to(double v, double want) { return fabs(v - want) <= 1e-6 * fabs(want); }

static int single_axis(uint32_t axes)
{
    if (!axes || (axes & (axes - 1))) return -1;
    int a = 0;
    while (!(axes & 1u)) axes >>= 1, a++;
    return a;
}

static const char *axes_str(arena *a, uint32_t axes)
{
    char buf[96];
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < 32 && off < sizeof buf - 8; i++)
        if (axes & (1u << i)) {
            int w = snprintf(buf + off, sizeof buf - off, "%s%d", off ? ", " : "", i);
            if (w > 0) off += (size_t)w;
        }
    return arena_strdup(a, buf);
}

static const char *shape_str(raiser *r, const ir_type *t)
{
    char buf[256];
    ir_shape_print(t, r->g->syms, buf, sizeof buf);
    return arena_strdup(&r->a, buf);
}

static const char *dim_str(raiser *r, const ir_dim *d)
{
    char buf[128];
    ir_dim_print(d, r->g->syms, buf, sizeof buf);
    return arena_strdup(&r->a, buf);
}

/* A variable name for the formula in a decision. */
static const char *nm(const ir_node *n, const char *dflt) { return n && n->name ? n->name : dflt; }

static mres refuse(raiser *r, match *m, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static mres refuse(raiser *r, match *m, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    m->why = arena_strdup(&r->a, buf);
    return R_REFUSE;
}

/* "'t' (line 14)" or "mul (line 14)" */
static const char *describe(raiser *r, const ir_node *n)
{
    if (n->name && n->param >= 0) return arena_printf(&r->a, "%s '%s'", ir_op_name(n->op), n->name);
    if (n->name) {
        if (n->loc.line > 0) return arena_printf(&r->a, "'%s' (line %d)", n->name, n->loc.line);
        return arena_printf(&r->a, "'%s'", n->name);
    }
    return pass_describe(&r->a, n);
}

static bool is_vec(const ir_node *w, const ir_dim *d)
{
    return w->type.rank == 1 && ir_dim_eq(&w->type.dims[0], d);
}

static const ir_dim *last_dim(const ir_node *x) { return &x->type.dims[x->type.rank - 1]; }

/* t = x*x or pow(x, 2) */
static bool square_of(ir_node *t, ir_node **base, bool *is_pow)
{
    ir_node *a, *b;
    double e;
    if (bin(t, IR_OP_MUL, &a, &b) && same_value(a, b, 6)) {
        *base = a;
        *is_pow = false;
        return true;
    }
    if (bin(t, IR_OP_POW, &a, &b) && const_num(b, &e, 4) && e == 2) {
        *base = a;
        *is_pow = true;
        return true;
    }
    return false;
}

static void permuted(const ir_type *in, const int *perm, ir_type *out)
{
    *out = *in;
    for (int i = 0; i < in->rank; i++) out->dims[i] = in->dims[perm[i]];
}

/* ---- norms ---------------------------------------------------------------------- */

/* mean over the last axis with keepdim; a mean over other axes is a
 * refusal (the caller has matched everything else). */
static mres mean_last(raiser *r, match *m, ir_node *mean, const char *op)
{
    const ir_node *in = mean->inputs[0];
    int last = in->type.rank - 1;
    add(m, mean);
    if (last >= 0 && mean->attrs.axes == (1u << last)) return R_YES;
    return refuse(r, m, "the mean at line %d is over axis %s; %s normalizes over the last axis (%d)",
                  mean->loc.line, axes_str(&r->a, mean->attrs.axes), op, last);
}

/* den = rsqrt(v + eps) (sqrt for the division form); *var = v. */
static bool denominator(match *m, ir_node *den, bool div_form, ir_node **var)
{
    ir_node *s, *a, *b;
    double eps;
    if (den->op != (div_form ? IR_OP_SQRT : IR_OP_RSQRT)) return false;
    s = den->inputs[0];
    if (!bin(s, IR_OP_ADD, &a, &b)) return false;
    if (!const_num(b, &eps, 4)) {
        ir_node *t = a;
        a = b;
        b = t;
        if (!const_num(b, &eps, 4)) return false;
    }
    add(m, den);
    add(m, s);
    m->eps = eps;
    *var = a;
    return true;
}

/* The ways N can be a value scaled by a normalizer: form 0, N = v * f (either
 * order); form 1, N = v / g. Fills cand[i] = {v, f or g}; returns how many. */
static int scaled_candidates(ir_node *N, int form, ir_node *cand[2][2])
{
    ir_node *a, *b;
    int nc = 0;
    if (form == 0 && bin(N, IR_OP_MUL, &a, &b)) {
        cand[nc][0] = a, cand[nc++][1] = b;
        cand[nc][0] = b, cand[nc++][1] = a;
    }
    if (form == 1 && bin(N, IR_OP_DIV, &a, &b)) cand[nc][0] = a, cand[nc++][1] = b;
    return nc;
}

/* N = x * rsqrt(mean(x*x) + eps) or x / sqrt(mean(x*x) + eps) */
static mres rms_core(raiser *r, match *m, ir_node *N, ir_node **x_out)
{
    for (int form = 0; form < 2; form++) {
        ir_node *cand[2][2];
        int nc = scaled_candidates(N, form, cand);
        for (int c = 0; c < nc; c++) {
            ir_node *x = cand[c][0], *den = cand[c][1], *var, *base;
            bool is_pow;
            int save = m->n;
            if (!denominator(m, den, form == 1, &var) || var->op != IR_OP_MEAN || !var->attrs.keepdim ||
                !square_of(var->inputs[0], &base, &is_pow) || !same_value(base, x, 6) || x->type.rank < 1) {
                m->n = save;
                continue;
            }
            add(m, var->inputs[0]);
            add(m, N);
            m->div_form = form == 1;
            m->pow_form = is_pow;
            *x_out = x;
            return mean_last(r, m, var, "rmsnorm");
        }
    }
    return R_NO;
}

static mres match_rmsnorm(raiser *r, match *m, ir_node *n)
{
    ir_node *a, *b, *x;
    if (bin(n, IR_OP_MUL, &a, &b))
        for (int i = 0; i < 2; i++) {
            ir_node *N = i ? b : a, *w = i ? a : b;
            int save = m->n;
            mres res = rms_core(r, m, N, &x);
            if (res == R_NO) {
                m->n = save;
                continue;
            }
            add(m, n);
            m->x = x;
            m->w = w;
            if (res == R_REFUSE) return res;
            if (!is_vec(w, last_dim(x)))
                return refuse(r, m, "the gain %s is %s; rmsnorm needs a [%s] vector over the last axis of %s",
                              describe(r, w), shape_str(r, &w->type), dim_str(r, last_dim(x)),
                              shape_str(r, &x->type));
            return R_YES;
        }
    mres res = rms_core(r, m, n, &x);
    if (res != R_YES) return res;
    m->x = x;
    return refuse(r, m, "rmsnorm takes a gain weight w: [%s] and this expression has none; the compiler does not "
                        "invent weights: multiply by a weight (of ones for none) or call rmsnorm(x, w)",
                  dim_str(r, last_dim(x)));
}

/* N = (x - mean(x)) * rsqrt(var + eps) or (x - mean(x)) / sqrt(var + eps),
 * var = mean((x - mean(x))^2) or mean(x^2) - mean(x)^2. */
static mres ln_core(raiser *r, match *m, ir_node *N, ir_node **x_out)
{
    for (int form = 0; form < 2; form++) {
        ir_node *cand[2][2];
        int nc = scaled_candidates(N, form, cand);
        for (int c = 0; c < nc; c++) {
            ir_node *d = cand[c][0], *den = cand[c][1], *var, *x, *mu, *base, *ms, *mm, *mb;
            bool is_pow, p2;
            int save = m->n;
            if (!denominator(m, den, form == 1, &var) || !bin(d, IR_OP_SUB, &x, &mu) || mu->op != IR_OP_MEAN ||
                !mu->attrs.keepdim || !same_value(mu->inputs[0], x, 6) || x->type.rank < 1) {
                m->n = save;
                continue;
            }
            add(m, d);
            add(m, N);
            ir_node *mean2;
            if (var->op == IR_OP_MEAN && var->attrs.keepdim && square_of(var->inputs[0], &base, &is_pow) &&
                same_value(base, d, 8)) {
                mean2 = var;
                add(m, var->inputs[0]);
                add_dup(m, base, d);
                m->var_form2 = false;
            } else if (bin(var, IR_OP_SUB, &ms, &mm) && ms->op == IR_OP_MEAN && ms->attrs.keepdim &&
                       square_of(ms->inputs[0], &base, &is_pow) && same_value(base, x, 6) &&
                       square_of(mm, &mb, &p2) && same_value(mb, mu, 6)) {
                mean2 = ms;
                add(m, var);
                add(m, ms->inputs[0]);
                add(m, mm);
                m->var_form2 = true;
            } else {
                m->n = save;
                continue;
            }
            m->div_form = form == 1;
            m->pow_form = is_pow;
            *x_out = x;
            mres res = mean_last(r, m, mu, "layernorm");
            if (res == R_YES) res = mean_last(r, m, mean2, "layernorm");
            if (m->var_form2) add_dup(m, mb, mu);
            return res;
        }
    }
    return R_NO;
}

static mres match_layernorm(raiser *r, match *m, ir_node *n)
{
    ir_node *a, *b, *x, *M = n, *bias = NULL;
    for (int i = 0; i < 2; i++) {
        if (n->op == IR_OP_ADD) {
            if (!bin(n, IR_OP_ADD, &a, &b)) return R_NO;
            M = i ? b : a;
            bias = i ? a : b;
        } else if (i) {
            break;
        }
        ir_node *p, *q;
        if (!bin(M, IR_OP_MUL, &p, &q)) continue;
        for (int j = 0; j < 2; j++) {
            ir_node *N = j ? q : p, *w = j ? p : q;
            int save = m->n;
            mres res = ln_core(r, m, N, &x);
            if (res == R_NO || (bias && !is_vec(bias, last_dim(x)))) {
                /* a bias that is not a [D] vector (a residual, say) stays an add */
                m->n = save;
                continue;
            }
            add(m, M);
            add(m, n);
            m->x = x;
            m->w = w;
            m->b = bias;
            if (res == R_REFUSE) return res;
            if (!is_vec(w, last_dim(x)))
                return refuse(r, m, "the gain %s is %s; layernorm needs a [%s] vector over the last axis of %s",
                              describe(r, w), shape_str(r, &w->type), dim_str(r, last_dim(x)),
                              shape_str(r, &x->type));
            return R_YES;
        }
    }
    if (n->op == IR_OP_ADD) return R_NO;
    mres res = ln_core(r, m, n, &x);
    if (res != R_YES) return res;
    m->x = x;
    return refuse(r, m, "layernorm takes a gain weight w: [%s] and this expression has none; the compiler does not "
                        "invent weights: multiply by a weight (of ones for none) or call layernorm(x, w, b)",
                  dim_str(r, last_dim(x)));
}

/* ---- softmax --------------------------------------------------------------------- */

/* exp(x - max(x, a)) / sum(exp(x - max(x, a)), a), or exp(x) / sum(exp(x), a) */
static mres match_softmax(raiser *r, match *m, ir_node *n)
{
    ir_node *e, *s, *x2 = NULL, *mx = NULL;
    if (!bin(n, IR_OP_DIV, &e, &s) || e->op != IR_OP_EXP || s->op != IR_OP_SUM || !s->attrs.keepdim ||
        !same_value(s->inputs[0], e, 8))
        return R_NO;
    ir_node *z = e->inputs[0], *x = z;
    int sa = single_axis(s->attrs.axes);
    add(m, n);
    add(m, e);
    add(m, s);
    m->no_max = true;
    if (bin(z, IR_OP_SUB, &x2, &mx) && mx->op == IR_OP_REDUCE_MAX && mx->attrs.keepdim &&
        same_value(mx->inputs[0], x2, 6)) {
        x = x2;
        m->no_max = false;
        add(m, z);
        add(m, mx);
    }
    add_dup(m, s->inputs[0], e);
    m->x = x;
    m->axis = sa;
    if (!m->no_max) {
        int ma = single_axis(mx->attrs.axes);
        if (ma < 0 || sa < 0 || ma != sa)
            return refuse(r, m, "the max is taken over axis %s but the sum over axis %s; softmax normalizes "
                                "along one axis: use the same axis in both",
                          axes_str(&r->a, mx->attrs.axes), axes_str(&r->a, s->attrs.axes));
    }
    if (sa < 0)
        return refuse(r, m, "the sum is over axes %s; softmax normalizes along one axis",
                      axes_str(&r->a, s->attrs.axes));
    return R_YES;
}

/* ---- activations --------------------------------------------------------------------- */

static mres match_silu(raiser *r, match *m, ir_node *n)
{
    ir_node *a, *b;
    (void)r;
    if (!bin(n, IR_OP_MUL, &a, &b)) return R_NO;
    for (int i = 0; i < 2; i++) {
        ir_node *x = i ? b : a, *sg = i ? a : b;
        if (sg->op == IR_OP_SIGMOID && same_value(sg->inputs[0], x, 6)) {
            add(m, n);
            add(m, sg);
            m->x = x;
            return R_YES;
        }
    }
    return R_NO;
}

#define MAXF 8

/* Flattens a product: factors (down to nodes equal to `stop`, which are
 * atoms) and the product of the constant factors. Products and integer
 * powers (2, 3) inside are pattern nodes. */
static bool flatten(match *m, ir_node *n, const ir_node *stop, ir_node **f, int *nf, double *c, int depth)
{
    ir_node *a, *b;
    double v;
    if (stop && same_value(n, stop, 6)) {
        if (*nf == MAXF) return false;
        f[(*nf)++] = n;
        return true;
    }
    if (const_num(n, &v, 4)) {
        *c *= v;
        return true;
    }
    if (depth > 0 && bin(n, IR_OP_MUL, &a, &b)) {
        add(m, n);
        return flatten(m, a, stop, f, nf, c, depth - 1) && flatten(m, b, stop, f, nf, c, depth - 1);
    }
    if (depth > 0 && stop && bin(n, IR_OP_POW, &a, &b) && const_num(b, &v, 4) && (v == 2 || v == 3)) {
        add(m, n);
        for (int k = 0; k < (int)v; k++)
            if (!flatten(m, a, stop, f, nf, c, depth - 1)) return false;
        return true;
    }
    if (*nf == MAXF) return false;
    f[(*nf)++] = n;
    return true;
}

/* t = 1 + tanh(u) */
static bool one_plus_tanh(ir_node *t, ir_node **th)
{
    ir_node *a, *b;
    double v;
    if (!bin(t, IR_OP_ADD, &a, &b)) return false;
    for (int i = 0; i < 2; i++) {
        ir_node *one = i ? b : a, *tt = i ? a : b;
        if (tt->op == IR_OP_TANH && const_num(one, &v, 4) && v == 1) {
            *th = tt;
            return true;
        }
    }
    return false;
}

/* 0.5 * x * (1 + tanh(c * (x + k * x^3))), c = sqrt(2/pi), k = 0.044715, in
 * any order and association of the products. */
static mres gelu_with(raiser *r, match *m, ir_node *n, ir_node *T, ir_node *th);

static mres match_gelu(raiser *r, match *m, ir_node *n)
{
    ir_node *f[MAXF], *th = NULL;
    int nf = 0;
    double c = 1;
    if (n->op != IR_OP_MUL) return R_NO;
    match scratch = *m;
    if (!flatten(&scratch, n, NULL, f, &nf, &c, 8)) return R_NO;
    /* x may itself be a product holding another 1 + tanh(...): try each */
    for (int i = 0; i < nf; i++) {
        if (!one_plus_tanh(f[i], &th)) continue;
        match t = *m;
        mres res = gelu_with(r, &t, n, f[i], th);
        if (res != R_NO) {
            *m = t;
            return res;
        }
    }
    return R_NO;
}

static mres gelu_with(raiser *r, match *m, ir_node *n, ir_node *T, ir_node *th)
{
    ir_node *f[MAXF];
    int nf = 0;
    double c = 1;
    match scratch = *m;
    /* the tanh's argument: c * (p + q) with one of p, q the cubic term in the other */
    ir_node *uf[MAXF], *p, *q, *x = NULL, *cube_node = NULL;
    int nu = 0;
    double cu = 1;
    if (!flatten(&scratch, th->inputs[0], NULL, uf, &nu, &cu, 8) || nu != 1 || !bin(uf[0], IR_OP_ADD, &p, &q))
        return R_NO;
    double ck = 1;
    for (int i = 0; i < 2 && !x; i++) {
        ir_node *cand = i ? q : p, *cube = i ? p : q, *cf[MAXF];
        int nc = 0;
        double k = 1;
        match s2 = *m;
        if (!flatten(&s2, cube, cand, cf, &nc, &k, 8) || nc != 3) continue;
        bool ok = true;
        for (int j = 0; j < 3; j++) ok &= same_value(cf[j], cand, 6);
        if (ok) x = cand, ck = k, cube_node = cube;
    }
    if (!x) return R_NO;
    /* now collect the pattern's nodes for real, with x an atom */
    if (!flatten(m, n, x, f, &nf, &c, 8) || nf != 2) return R_NO;
    if (!((f[0] == T && same_value(f[1], x, 6)) || (f[1] == T && same_value(f[0], x, 6)))) return R_NO;
    nu = 0;
    cu = 1;
    ir_node *S = uf[0];
    add(m, T);
    add(m, th);
    flatten(m, th->inputs[0], x, uf, &nu, &cu, 8);
    add(m, S);
    ir_node *cf[MAXF];
    int nc = 0;
    double k = 1;
    flatten(m, cube_node, x, cf, &nc, &k, 8);
    m->x = x;
    if (m->overflow) return R_NO;
    if (!close_to(c, 0.5) || !close_to(cu, 0.79788456080286535588) || !close_to(ck, 0.044715))
        return refuse(r, m,
                      "the constants are %.10g, %.10g and %.10g; gelu's tanh form uses 0.5, sqrt(2/pi) = "
                      "0.7978845608 and 0.044715 (within a relative 1e-6)",
                      c, cu, ck);
    return R_YES;
}

/* ---- linear --------------------------------------------------------------------------- */

/* concat([rope(slice(x, 3, 0, R)), slice(x, 3, R, HD)], axis=3) */
static mres match_partial_rope(raiser *r, match *m, ir_node *n)
{
    (void)r;
    if (n->op != IR_OP_CONCAT || n->ninputs != 2 || n->type.rank != 4 || n->attrs.axis != 3) return R_NO;
    ir_node *ro = n->inputs[0], *rest = n->inputs[1];
    if (ro->op != IR_OP_ROPE || ro->attrs.rope.rotary_dims || rest->op != IR_OP_SLICE || rest->attrs.axis != 3)
        return R_NO;
    ir_node *lo = ro->inputs[0];
    if (lo->op != IR_OP_SLICE || lo->attrs.axis != 3 || lo->inputs[0] != rest->inputs[0]) return R_NO;
    ir_node *x = lo->inputs[0];
    int64_t s0, e0, s1, e1, hd;
    if (!ir_dim_is_const(&lo->attrs.start, &s0) || !ir_dim_is_const(&lo->attrs.end, &e0) ||
        !ir_dim_is_const(&rest->attrs.start, &s1) || !ir_dim_is_const(&rest->attrs.end, &e1) ||
        !ir_dim_is_const(&x->type.dims[3], &hd))
        return R_NO;
    if (s0 != 0 || s1 != e0 || e1 != hd || e0 <= 0 || e0 >= hd || e0 % 2) return R_NO;
    add(m, n);
    add(m, ro);
    add(m, lo);
    add(m, rest);
    m->x = x;
    m->w = ro->ninputs > 1 ? ro->inputs[1] : NULL; /* pos */
    m->theta = ro->attrs.theta;
    m->rope = ro->attrs.rope;
    m->rope.rotary_dims = e0;
    return R_YES;
}

static bool is_transpose2(const ir_node *t)
{
    return t->op == IR_OP_PERMUTE && t->type.rank == 2 && t->attrs.perm[0] == 1 && t->attrs.perm[1] == 0;
}

static mres match_linear(raiser *r, match *m, ir_node *n)
{
    ir_node *mm = n, *bias = NULL, *a, *b;
    if (bin(n, IR_OP_ADD, &a, &b)) {
        mm = NULL;
        for (int i = 0; i < 2 && !mm; i++) {
            ir_node *p = i ? b : a, *q = i ? a : b;
            if (p->op == IR_OP_MATMUL && p->type.rank >= 2 && is_vec(q, last_dim(p)) &&
                ir_type_eq(&n->type, &p->type) && r->u->count[p->id] == 1 && !r->u->is_output[p->id])
                mm = p, bias = q;
        }
        if (!mm) return R_NO;
    }
    if (mm->op != IR_OP_MATMUL) return R_NO;
    ir_node *x = mm->inputs[0], *wt = mm->inputs[1];
    if (is_transpose2(wt) && wt->inputs[0]->op == IR_OP_WEIGHT) {
        m->w = wt->inputs[0];
        m->wt = wt;
        m->w_kn = false;
    } else if (wt->op == IR_OP_WEIGHT && wt->type.rank == 2) {
        m->w = wt;
        m->w_kn = true;
    } else {
        return R_NO;
    }
    add(m, n);
    add(m, mm);
    m->x = x;
    m->b = bias;
    return R_YES;
}

/* ---- attention ------------------------------------------------------------------------ */

/* q @ transpose(k) [* s | / s]: fills q, k and the scale; R_NO when L is
 * not a product of q and k at all. */
static mres scores(raiser *r, match *m, ir_node *L, ir_node **q)
{
    ir_node *a, *b, *qk = L;
    double s = 1;
    m->scale_div = false;
    if (bin(L, IR_OP_MUL, &a, &b)) {
        ir_node *c = NULL;
        if (a->op == IR_OP_MATMUL) qk = a, c = b;
        else if (b->op == IR_OP_MATMUL) qk = b, c = a;
        else return R_NO;
        add(m, L);
        if (!const_num(c, &s, 4))
            return refuse(r, m, "the scores are scaled by %s, which is not a constant; attention takes a constant scale",
                          describe(r, c));
    } else if (bin(L, IR_OP_DIV, &a, &b) && a->op == IR_OP_MATMUL) {
        qk = a;
        add(m, L);
        if (!const_num(b, &s, 4))
            return refuse(r, m, "the scores are divided by %s, which is not a constant; attention takes a constant scale",
                          describe(r, b));
        s = 1.0 / s;
        m->scale_div = true;
    }
    if (qk->op != IR_OP_MATMUL) return R_NO;
    add(m, qk);
    *q = qk->inputs[0];
    m->scale = s;
    ir_node *kt = qk->inputs[1];
    if (qk->type.rank != 4 || (*q)->type.rank != 4 || kt->type.rank != 4)
        return refuse(r, m, "the scores %s are not [B, H, S, T]; attention works on 4-d q, k and v",
                      shape_str(r, &qk->type));
    if (kt->op != IR_OP_PERMUTE)
        return refuse(r, m, "the keys %s are not a transpose (a permute) of a [B, KV, T, HD] k; attention reads k "
                            "in that layout",
                      describe(r, kt));
    /* kt = permute(base, P) = transpose(permute(base, Q)), Q = P with its last two entries swapped */
    m->kk = kt->inputs[0];
    m->kloc = kt->loc;
    m->kperm[0] = kt->attrs.perm[0];
    m->kperm[1] = kt->attrs.perm[1];
    m->kperm[2] = kt->attrs.perm[3];
    m->kperm[3] = kt->attrs.perm[2];
    permuted(&m->kk->type, m->kperm, &m->ktype);
    if (!(s > 0) || !isfinite(s))
        return refuse(r, m, "the scale %g is not positive; attention takes a positive scale", s);
    return R_YES;
}

static mres match_attention(raiser *r, match *m, ir_node *n)
{
    ir_node *P, *v, *L, *q = NULL;
    if (!bin(n, IR_OP_MATMUL, &P, &v) || P->type.rank != 4 || v->type.rank != 4) return R_NO;
    if (P->op == IR_OP_SOFTMAX) {
        L = P->inputs[0];
        m->axis = P->attrs.axis;
        add(m, P);
    } else {
        if (match_softmax(r, m, P) != R_YES) return R_NO;
        L = m->x;
    }
    add(m, n);
    ir_node *a, *b, *mask = NULL, *S = L;
    mres res = R_NO;
    if (bin(L, IR_OP_ADD, &a, &b)) {
        int save = m->n;
        for (int i = 0; i < 2 && res == R_NO; i++) {
            m->n = save;
            S = i ? b : a;
            mask = i ? a : b;
            res = scores(r, m, S, &q);
        }
        if (res == R_NO) return R_NO;
        add(m, L);
    } else {
        res = scores(r, m, L, &q);
        if (res == R_NO) return R_NO;
    }
    m->x = q;
    m->v = v;
    if (res == R_REFUSE) return res;
    if (m->axis != 3)
        return refuse(r, m, "the softmax is over axis %d of the scores [B, H, S, T]; attention normalizes over the "
                            "keys (axis 3)",
                      m->axis);
    m->causal = false;
    if (mask) {
        const ir_type *st = &S->type;
        if (mask->op != IR_OP_CAUSAL_MASK)
            return refuse(r, m, "the mask added to the scores is %s, not causal_mask(S, T); attention applies only "
                                "causal masking",
                          describe(r, mask));
        if (!ir_dim_eq(&mask->type.dims[0], &st->dims[2]) || !ir_dim_eq(&mask->type.dims[1], &st->dims[3]))
            return refuse(r, m, "the mask is causal_mask(%s, %s) but the scores are %s; attention's causal mask is "
                                "causal_mask(S, T) over the last two axes",
                          dim_str(r, &mask->type.dims[0]), dim_str(r, &mask->type.dims[1]),
                          shape_str(r, st));
        m->causal = true;
    }
    const ir_type *qt = &q->type, *kt = &m->ktype, *vt = &v->type;
    int64_t one;
    bool kv1 = ir_dim_is_const(&kt->dims[1], &one) && one == 1;
    if (!ir_dim_eq(&qt->dims[0], &kt->dims[0]) || !ir_dim_eq(&qt->dims[0], &vt->dims[0]))
        return refuse(r, m, "the batch sizes of q %s, k %s and v %s differ; attention does not broadcast the batch",
                      shape_str(r, qt), shape_str(r, kt), shape_str(r, vt));
    if (!ir_dim_eq(&qt->dims[1], &kt->dims[1]) && !kv1)
        return refuse(r, m, "q has %s heads but k has %s; grouped-query attention needs the attention op (the "
                            "matmul form broadcasts only one KV head)",
                      dim_str(r, &qt->dims[1]), dim_str(r, &kt->dims[1]));
    if (!ir_dim_eq(&vt->dims[1], &kt->dims[1]) || !ir_dim_eq(&vt->dims[2], &kt->dims[2]))
        return refuse(r, m, "v %s does not have k's heads and keys %s; attention reads k and v with the same layout",
                      shape_str(r, vt), shape_str(r, kt));
    return R_YES;
}

/* ---- checks, decisions ---------------------------------------------------------------- */

/* Refusal reason when an intermediate escapes the pattern, else NULL. */
static const char *escapes(raiser *r, const match *m)
{
    for (int i = 0; i < m->n; i++) {
        const ir_node *t = m->nodes[i];
        if (t == m->root || t->op == IR_OP_CONST) continue;
        if (r->u->is_output[t->id])
            return arena_printf(&r->a, "the intermediate %s is also a model output; the fused op does not produce it",
                                describe(r, t));
        for (int j = 0; j < r->u->count[t->id]; j++) {
            const ir_node *user = r->g->nodes[r->u->users[t->id][j]];
            if (in_set(m, user)) continue;
            return arena_printf(&r->a,
                                "the intermediate %s is also used at line %d (by %s); the fused op does not produce "
                                "it: compute it separately or drop that use",
                                describe(r, t), user->loc.line, pass_describe(&r->a, user));
        }
    }
    return NULL;
}

static const int perm_bshd[4] = {0, 2, 1, 3};
static const int perm_t2[2] = {1, 0};

/* Does the fused op give exactly the root's type? */
static bool fits(raiser *r, const match *m)
{
    ir_attrs at;
    memset(&at, 0, sizeof at);
    ir_type t;
    memset(&t, 0, sizeof t);
    ir_node *in[4] = {m->x, m->w, m->b, NULL};
    ir_node fake1, fake2;
    ir_op op;
    int n = 1;
    switch (m->k) {
    case K_RMSNORM: op = IR_OP_RMSNORM, n = 2, at.eps = m->eps; break;
    case K_LAYERNORM: op = IR_OP_LAYERNORM, n = m->b ? 3 : 2, at.eps = m->eps; break;
    case K_SOFTMAX: op = IR_OP_SOFTMAX, at.axis = m->axis; break;
    case K_SILU: op = IR_OP_SILU; break;
    case K_GELU: op = IR_OP_GELU, at.gelu_tanh = true; break;
    case K_ROPE: op = IR_OP_ROPE, n = m->w ? 2 : 1, at.theta = m->theta, at.rope = m->rope; break;
    case K_LINEAR:
        op = IR_OP_LINEAR;
        n = m->b ? 3 : 2;
        if (m->w_kn) {
            fake1 = *m->w;
            permuted(&m->w->type, perm_t2, &fake1.type);
            in[1] = &fake1;
        }
        break;
    case K_ATTENTION:
        op = IR_OP_ATTENTION;
        n = 3;
        at.scale = m->scale;
        at.causal = m->causal;
        fake1 = *m->x;
        permuted(&m->x->type, perm_bshd, &fake1.type);
        fake2 = *m->kk;
        fake2.type = m->ktype;
        in[0] = &fake1;
        in[1] = &fake2;
        in[2] = m->v;
        break;
    default: return false;
    }
    if (!ir_infer_type(r->g, op, n, in, &at, &t, NULL, m->root->loc)) return false;
    if (m->k == K_ATTENTION) {
        ir_type t2 = t;
        permuted(&t2, perm_bshd, &t);
    }
    return ir_type_eq(&t, &m->root->type);
}

static ir_dim saved_bytes(raiser *r, const match *m)
{
    ir_dim total = ir_dim_const(0);
    for (int i = 0; i < m->n; i++) {
        const ir_node *t = m->nodes[i];
        if (t == m->root || t->op == IR_OP_CONST) continue;
        total = pass_size_sum(r->ctx, t, total, pass_size(r->ctx, t, 2));
    }
    return total;
}

static const char *lines_str(raiser *r, const match *m)
{
    int lo = 0, hi = 0;
    for (int i = 0; i < m->n; i++) {
        int l = m->nodes[i]->loc.line;
        if (l <= 0) continue;
        if (!lo || l < lo) lo = l;
        if (l > hi) hi = l;
    }
    if (!lo) return "";
    if (lo == hi) return arena_printf(&r->a, " (line %d)", lo);
    return arena_printf(&r->a, " (lines %d-%d)", lo, hi);
}

static const char *formula(raiser *r, const match *m)
{
    arena *a = &r->a;
    const char *x = nm(m->x, "x"), *w = nm(m->w, "w"), *b = nm(m->b, "b");
    switch (m->k) {
    case K_RMSNORM: {
        const char *sq = m->pow_form ? arena_printf(a, "pow(%s, 2)", x) : arena_printf(a, "%s*%s", x, x);
        const char *core = m->div_form ? arena_printf(a, "%s / sqrt(mean(%s) + eps)", x, sq)
                                       : arena_printf(a, "%s * rsqrt(mean(%s) + eps)", x, sq);
        return m->w ? arena_printf(a, "%s * %s", core, w) : core;
    }
    case K_LAYERNORM: {
        const char *var = m->var_form2 ? arena_printf(a, "mean(%s^2) - mean(%s)^2", x, x)
                                       : arena_printf(a, "mean((%s - mean(%s))^2)", x, x);
        const char *core = m->div_form ? arena_printf(a, "(%s - mean(%s)) / sqrt(%s + eps)", x, x, var)
                                       : arena_printf(a, "(%s - mean(%s)) * rsqrt(%s + eps)", x, x, var);
        if (!m->w) return core;
        return m->b ? arena_printf(a, "%s * %s + %s", core, w, b) : arena_printf(a, "%s * %s", core, w);
    }
    case K_SOFTMAX:
        return m->no_max ? arena_printf(a, "exp(%s) / sum(exp(%s))", x, x)
                         : arena_printf(a, "exp(%s - max(%s)) / sum(exp(%s - max(%s)))", x, x, x, x);
    case K_SILU: return arena_printf(a, "%s * sigmoid(%s)", x, x);
    case K_GELU: return arena_printf(a, "0.5 * %s * (1 + tanh(0.7978845608 * (%s + 0.044715 * %s^3)))", x, x, x);
    case K_LINEAR: {
        const char *mm = m->w_kn ? arena_printf(a, "%s @ %s", x, w) : arena_printf(a, "%s @ transpose(%s)", x, w);
        return m->b ? arena_printf(a, "%s + %s", mm, b) : mm;
    }
    case K_ROPE:
        return arena_printf(a, "concat([rope(slice(%s, 0, %lld)), slice(%s, %lld, %s)])", x, (long long)m->rope.rotary_dims,
                            x, (long long)m->rope.rotary_dims, dim_str(r, &m->x->type.dims[3]));
    case K_ATTENTION:
        return arena_printf(a, "softmax(%s @ transpose(%s)%s%s) @ %s", nm(m->x, "q"), nm(m->kk, "k"),
                            m->scale == 1 ? "" : m->scale_div ? " / s" : " * s", m->causal ? " + causal_mask" : "",
                            nm(m->v, "v"));
    default: return "?";
    }
}

static const char *const fused_name[K_COUNT] = {"layernorm", "rmsnorm", "softmax", "gelu(tanh)", "silu", "linear",
                                                "rope(dims=R)", "attention"};

static int count_intermediates(const match *m)
{
    int c = 0;
    for (int i = 0; i < m->n; i++) c += m->nodes[i] != m->root && m->nodes[i]->op != IR_OP_CONST;
    return c;
}

static void decide(raiser *r, match *m, bool taken)
{
    const char *what = arena_printf(&r->a, "raise %s%s to %s", formula(r, m), lines_str(r, m), fused_name[m->k]);
    pass_rule rule = rule_of[m->k];
    ir_dim bytes = saved_bytes(r, m);
    if (m->k == K_LINEAR && m->wt && r->u->count[m->wt->id] == 1 && !r->u->is_output[m->wt->id])
        bytes = pass_size_sum(r->ctx, m->wt, bytes, pass_size(r->ctx, m->wt, 2));
    if (!taken) {
        pass_decide(r->ctx, r->g, rule, false, bytes, m->nodes, m->n, what, "%s", m->why ? m->why : "");
        return;
    }
    int k = count_intermediates(m);
    const char *saves = k ? arena_printf(&r->a, "%d intermediate%s no longer written to and read back from memory",
                                         k, k == 1 ? " is" : "s are")
                          : "one op instead of a product and a separate add";
    switch (m->k) {
    case K_RMSNORM:
    case K_LAYERNORM:
        pass_decide(r->ctx, r->g, rule, true, bytes, m->nodes, m->n, what,
                    "one row kernel with eps=%g as written; %s%s", m->eps, saves,
                    m->var_form2 ? "; the variance is computed as mean((x - mean(x))^2), which equals "
                                   "mean(x^2) - mean(x)^2 and does not cancel catastrophically"
                                 : "");
        break;
    case K_SOFTMAX:
        pass_decide(r->ctx, r->g, rule, true, bytes, m->nodes, m->n, what, "one row kernel over axis %d; %s%s",
                    m->axis, saves,
                    m->no_max ? "; softmax subtracts the row max before exp, which is mathematically equal and "
                                "cannot overflow"
                              : "");
        break;
    case K_LINEAR:
        if (m->w_kn)
            pass_decide(r->ctx, r->g, rule, true, bytes, m->nodes, m->n, what,
                        "the weight '%s' is stored [K, N] and linear reads [N, K]: it is transposed once when "
                        "weights are bound (bind-time work, no cost per call)%s%s",
                        nm(m->w, "w"), m->b ? "; the bias is added in the matmul's epilogue; " : "",
                        m->b ? saves : "");
        else
            pass_decide(r->ctx, r->g, rule, true, bytes, m->nodes, m->n, what,
                        "the matmul reads the weight '%s' in its stored [N, K] layout, no transposed copy%s%s",
                        nm(m->w, "w"), m->b ? "; the bias is added in the matmul's epilogue; " : "",
                        m->b ? saves : "");
        break;
    case K_ROPE:
        pass_decide(r->ctx, r->g, rule, true, bytes, m->nodes, m->n, what,
                    "one rope over whole heads that rotates the first %lld dims by the frequencies of a head of %lld "
                    "and passes the rest through (dims=%lld); %s",
                    (long long)m->rope.rotary_dims, (long long)m->rope.rotary_dims, (long long)m->rope.rotary_dims, saves);
        break;
    case K_ATTENTION:
        pass_decide(r->ctx, r->g, rule, true, bytes, m->nodes, m->n, what,
                    "one attention kernel (scale=%g%s); %s; q is read as [B, S, H, HD] and the result permuted "
                    "back to [B, H, S, HD], permutes that fold into their neighbours",
                    m->scale, m->causal ? ", causal" : "", saves);
        break;
    default:
        pass_decide(r->ctx, r->g, rule, true, bytes, m->nodes, m->n, what, "one elementwise op; %s", saves);
        break;
    }
}

typedef mres (*matcher)(raiser *r, match *m, ir_node *n);
static const matcher matchers[K_COUNT] = {match_layernorm, match_rmsnorm, match_softmax,      match_gelu,
                                          match_silu,      match_linear,  match_partial_rope, match_attention};

/* Tries the patterns of this sweep with n as the root. */
static bool try_root(raiser *r, ir_node *n, kind first, kind last)
{
    for (int k = first; k <= (int)last; k++) {
        if (!pass_rule_enabled(r->ctx, rule_of[k])) continue;
        match m;
        memset(&m, 0, sizeof m);
        m.k = (kind)k;
        m.root = n;
        mres res = matchers[k](r, &m, n);
        if (res == R_NO || m.overflow) continue;
        bool clash = false;
        for (int i = 0; i < m.n; i++) clash |= r->seen[m.nodes[i]->id];
        if (clash) continue;
        if (res == R_YES && !fits(r, &m)) continue;
        if (res == R_YES) {
            const char *why = escapes(r, &m);
            if (why) {
                m.why = why;
                res = R_REFUSE;
            }
        }
        for (int i = 0; i < m.n; i++) r->seen[m.nodes[i]->id] = true;
        decide(r, &m, res == R_YES);
        if (res == R_YES) {
            match *p = arena_alloc(&r->a, sizeof *p);
            if (!p) return false;
            *p = m;
            r->plan[n->id] = p;
        }
        return true;
    }
    return true;
}

/* ---- rebuilding ---------------------------------------------------------------------- */

typedef struct made {
    ir_node **v;
    int n, cap;
} made;

static bool remember(made *mk, ir_node *n)
{
    if (!VEC_GROW(mk->v, mk->n, mk->cap, NULL)) return false;
    mk->v[mk->n++] = n;
    return true;
}

static bool was_made(const made *mk, const ir_node *n)
{
    for (int i = 0; i < mk->n; i++)
        if (mk->v[i] == n) return true;
    return false;
}

/* permute(x, perm), composed with x when x is itself a permute; the
 * identity gives x back. */
static ir_node *permute_c(ir_graph *dst, ir_node *x, const int *perm, src_loc loc)
{
    int r = x->type.rank, p[IR_MAX_RANK];
    ir_node *base = x->op == IR_OP_PERMUTE ? x->inputs[0] : x;
    bool ident = true;
    for (int i = 0; i < r; i++) {
        p[i] = base == x ? perm[i] : x->attrs.perm[perm[i]];
        ident &= p[i] == i;
    }
    return ident ? base : ir_permute(dst, base, p, loc);
}

static ir_node *build(pass_rewriter *rw, const match *m, made *mk)
{
    ir_graph *d = rw->dst;
    src_loc loc = m->root->loc;
    ir_node *x = pass_rw_get(rw, m->x);
    ir_node *w = m->w ? pass_rw_get(rw, m->w) : NULL, *b = m->b ? pass_rw_get(rw, m->b) : NULL, *out = NULL;
    switch (m->k) {
    case K_RMSNORM: out = ir_rmsnorm(d, x, w, m->eps, loc); break;
    case K_LAYERNORM: out = ir_layernorm(d, x, w, b, m->eps, loc); break;
    case K_SOFTMAX: out = ir_softmax(d, x, m->axis, loc); break;
    case K_SILU: out = ir_unary(d, IR_OP_SILU, x, loc); break;
    case K_GELU: out = ir_gelu(d, x, true, loc); break;
    case K_ROPE: out = ir_rope_scaled(d, x, w, m->theta, &m->rope, loc); break;
    case K_LINEAR:
        if (m->w_kn) w = ir_permute(d, w, perm_t2, m->w->loc);
        out = ir_linear(d, x, w, b, loc);
        break;
    case K_ATTENTION: {
        ir_node *q = permute_c(d, x, perm_bshd, loc);
        ir_node *k = permute_c(d, pass_rw_get(rw, m->kk), m->kperm, m->kloc);
        ir_node *att = q && k ? ir_attention(d, q, k, pass_rw_get(rw, m->v), NULL, m->scale, m->causal, loc) : NULL;
        out = att ? ir_permute(d, att, perm_bshd, loc) : NULL;
        if (out && !remember(mk, out)) out = NULL;
        break;
    }
    default: break;
    }
    if (out && m->root->name) out->name = arena_strdup(&d->arena, m->root->name);
    return out;
}

static ir_graph *fail(pass_ctx *ctx, ir_graph *g, pass_rewriter *rw, const ir_node *n)
{
    diag_error(ctx->diags, n ? n->loc : g->loc, "internal error: raise could not rebuild %s",
               n ? ir_op_name(n->op) : "the graph");
    if (rw) pass_rw_abort(rw);
    ir_graph_free(g);
    return NULL;
}

/* One sweep: match the patterns first..last, rebuild, DCE. */
static ir_graph *sweep(ir_graph *g, pass_ctx *ctx, kind first, kind last)
{
    bool any = false;
    for (int k = first; k <= (int)last; k++) any |= pass_rule_enabled(ctx, rule_of[k]);
    if (!any) return g;
    raiser r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.g = g;
    arena_init(&r.a);
    r.seen = calloc((size_t)g->nnodes + 1, sizeof *r.seen);
    r.plan = calloc((size_t)g->nnodes + 1, sizeof *r.plan);
    bool ok = r.seen && r.plan && (r.u = pass_users_of(ctx, g));
    int taken = 0;
    for (int i = g->nnodes - 1; ok && i >= 0; i--) {
        ir_node *n = g->nodes[i];
        if (n->param >= 0 || n->ninputs == 0 || r.seen[i]) continue;
        ok = try_root(&r, n, first, last);
        taken += r.plan[i] != NULL;
    }
    if (!ok) diag_error(ctx->diags, g->loc, "out of memory");
    pass_rewriter rw;
    made mk = {0};
    const ir_node *bad = NULL;
    if (ok && taken > 0 && (ok = pass_rw_begin(&rw, g, ctx))) {
        for (int i = 0; i < g->nnodes && !bad; i++) {
            const ir_node *n = g->nodes[i];
            ir_node *c;
            if (r.plan[i]) {
                c = build(&rw, r.plan[i], &mk);
                rw.map[i] = c;
            } else if (n->op == IR_OP_PERMUTE && was_made(&mk, pass_rw_get(&rw, n->inputs[0]))) {
                /* a permute right after one raise made: compose them */
                c = permute_c(rw.dst, pass_rw_get(&rw, n->inputs[0]), n->attrs.perm, n->loc);
                if (c && c->op == IR_OP_PERMUTE && c->name == NULL && n->name)
                    c->name = arena_strdup(&rw.dst->arena, n->name);
                rw.map[i] = c;
            } else {
                c = pass_rw_copy(&rw, n);
            }
            if (!c) bad = n;
        }
    }
    free(mk.v);
    free(r.seen);
    free(r.plan);
    arena_free(&r.a);
    if (!ok) {
        ir_graph_free(g);
        return NULL;
    }
    if (taken == 0) return g;
    if (bad) return fail(ctx, g, &rw, bad);
    g = pass_rw_finish(&rw, g);
    return g ? pass_dce(g, ctx) : NULL;
}

ir_graph *pass_raise(ir_graph *g, pass_ctx *ctx)
{
    g = sweep(g, ctx, K_LAYERNORM, K_ROPE);
    if (g) g = sweep(g, ctx, K_ATTENTION, K_ATTENTION);
    return g;
}
