/* ir/dim.c — symbolic dimensions as canonical integer polynomials.
 *
 * Algorithm: a dim is a sum of terms coef * prod(sym_i ^ exp_i). After every
 * operation the terms are normalized: like terms (same exponent vector) are
 * merged, zero terms dropped, and the rest sorted by total degree (highest
 * first), then by exponent vector (earlier symbols first). Two expressions
 * are equal iff their normal forms are identical, so B*S*4096 and
 * B*S*32*128 compare equal. Division is allowed only when exact. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

enum { TMP_TERMS = IR_DIM_TERMS * IR_DIM_TERMS };

static int degree(const ir_dim_term *t)
{
    int d = 0;
    for (int i = 0; i < IR_MAX_SYMS; i++) d += t->exp[i];
    return d;
}

static int term_cmp(const void *pa, const void *pb)
{
    const ir_dim_term *a = pa, *b = pb;
    int da = degree(a), db = degree(b);
    if (da != db) return db - da;
    for (int i = 0; i < IR_MAX_SYMS; i++)
        if (a->exp[i] != b->exp[i]) return (int)b->exp[i] - (int)a->exp[i];
    return 0;
}

/* Normalize n terms of tmp into out; false if they do not fit. */
static bool normalize(ir_dim_term *tmp, int n, ir_dim *out)
{
    qsort(tmp, (size_t)n, sizeof *tmp, term_cmp);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && memcmp(tmp[m - 1].exp, tmp[i].exp, sizeof tmp[i].exp) == 0) {
            if (__builtin_add_overflow(tmp[m - 1].coef, tmp[i].coef, &tmp[m - 1].coef)) return false;
        } else {
            tmp[m++] = tmp[i];
        }
    }
    int k = 0; /* drop terms that cancelled */
    for (int i = 0; i < m; i++)
        if (tmp[i].coef != 0) tmp[k++] = tmp[i];
    m = k;
    if (m > IR_DIM_TERMS) return false;
    memset(out, 0, sizeof *out);
    out->nterms = m;
    memcpy(out->t, tmp, (size_t)m * sizeof *tmp);
    return true;
}

ir_dim ir_dim_const(int64_t v)
{
    ir_dim d;
    memset(&d, 0, sizeof d);
    if (v != 0) {
        d.nterms = 1;
        d.t[0].coef = v;
    }
    return d;
}

ir_dim ir_dim_sym(int sym)
{
    ir_dim d;
    memset(&d, 0, sizeof d);
    if (sym >= 0 && sym < IR_MAX_SYMS) {
        d.nterms = 1;
        d.t[0].coef = 1;
        d.t[0].exp[sym] = 1;
    }
    return d;
}

static bool add_scaled(ir_dim a, ir_dim b, int64_t sign, ir_dim *out)
{
    ir_dim_term tmp[2 * IR_DIM_TERMS];
    int n = 0;
    for (int i = 0; i < a.nterms; i++) tmp[n++] = a.t[i];
    for (int i = 0; i < b.nterms; i++) {
        tmp[n] = b.t[i];
        if (__builtin_mul_overflow(tmp[n].coef, sign, &tmp[n].coef)) return false;
        n++;
    }
    return normalize(tmp, n, out);
}

bool ir_dim_add(ir_dim a, ir_dim b, ir_dim *out) { return add_scaled(a, b, 1, out); }
bool ir_dim_sub(ir_dim a, ir_dim b, ir_dim *out) { return add_scaled(a, b, -1, out); }

bool ir_dim_mul(ir_dim a, ir_dim b, ir_dim *out)
{
    ir_dim_term tmp[TMP_TERMS];
    int n = 0;
    for (int i = 0; i < a.nterms; i++)
        for (int j = 0; j < b.nterms; j++) {
            ir_dim_term t;
            if (__builtin_mul_overflow(a.t[i].coef, b.t[j].coef, &t.coef)) return false;
            for (int s = 0; s < IR_MAX_SYMS; s++) {
                unsigned e = (unsigned)a.t[i].exp[s] + b.t[j].exp[s];
                if (e > 255) return false;
                t.exp[s] = (uint8_t)e;
            }
            tmp[n++] = t;
        }
    return normalize(tmp, n, out);
}

bool ir_dim_div(ir_dim a, ir_dim b, ir_dim *out)
{
    if (b.nterms == 0) return false; /* division by zero */
    if (ir_dim_eq(&a, &b)) {
        *out = ir_dim_const(1);
        return true;
    }
    if (b.nterms != 1) return false; /* only monomial divisors */
    const ir_dim_term *d = &b.t[0];
    ir_dim_term tmp[IR_DIM_TERMS];
    for (int i = 0; i < a.nterms; i++) {
        if (a.t[i].coef % d->coef != 0) return false;
        tmp[i].coef = a.t[i].coef / d->coef;
        for (int s = 0; s < IR_MAX_SYMS; s++) {
            if (a.t[i].exp[s] < d->exp[s]) return false;
            tmp[i].exp[s] = (uint8_t)(a.t[i].exp[s] - d->exp[s]);
        }
    }
    return normalize(tmp, a.nterms, out);
}

bool ir_dim_eq(const ir_dim *a, const ir_dim *b)
{
    if (a->nterms != b->nterms) return false;
    for (int i = 0; i < a->nterms; i++) {
        if (a->t[i].coef != b->t[i].coef) return false;
        if (memcmp(a->t[i].exp, b->t[i].exp, sizeof a->t[i].exp) != 0) return false;
    }
    return true;
}

bool ir_dim_is_const(const ir_dim *a, int64_t *v)
{
    if (a->nterms == 0) {
        if (v) *v = 0;
        return true;
    }
    if (a->nterms == 1 && degree(&a->t[0]) == 0) {
        if (v) *v = a->t[0].coef;
        return true;
    }
    return false;
}

bool ir_dim_eval(const ir_dim *a, const int64_t *syms, int64_t *v)
{
    int64_t sum = 0;
    for (int i = 0; i < a->nterms; i++) {
        int64_t t = a->t[i].coef;
        for (int s = 0; s < IR_MAX_SYMS; s++)
            for (int e = 0; e < a->t[i].exp[s]; e++)
                if (__builtin_mul_overflow(t, syms[s], &t)) return false;
        if (__builtin_add_overflow(sum, t, &sum)) return false;
    }
    *v = sum;
    return true;
}

bool ir_dim_value(const ir_dim *a, const int64_t *syms, int64_t *v)
{
    return ir_dim_is_const(a, v) || (syms && ir_dim_eval(a, syms, v));
}

int ir_dim_print(const ir_dim *a, const char *const *syms, char *buf, size_t n)
{
    size_t off = 0;
#define PUT(...)                                                                \
    do {                                                                        \
        int w_ = snprintf(buf + (off < n ? off : n), off < n ? n - off : 0, __VA_ARGS__); \
        if (w_ > 0) off += (size_t)w_;                                          \
    } while (0)
    if (n) buf[0] = 0;
    if (a->nterms == 0) PUT("0");
    for (int i = 0; i < a->nterms; i++) {
        const ir_dim_term *t = &a->t[i];
        int64_t c = t->coef;
        if (i > 0) {
            PUT(c < 0 ? " - " : " + ");
            if (c < 0) c = -c;
        }
        bool any = false;
        if (c != 1 || degree(t) == 0) {
            if (c == -1 && degree(t) > 0) PUT("-");
            else {
                PUT("%lld", (long long)c);
                any = true;
            }
        }
        for (int s = 0; s < IR_MAX_SYMS; s++)
            for (int e = 0; e < t->exp[s]; e++) {
                PUT("%s%s", any ? "*" : "", syms && syms[s] ? syms[s] : "?");
                any = true;
            }
    }
#undef PUT
    return (int)off;
}

ir_dim ir_dim_times(ir_dim a, ir_dim b, bool *overflow)
{
    ir_dim r;
    if (*overflow || !ir_dim_mul(a, b, &r)) {
        *overflow = true;
        return ir_dim_const(0);
    }
    return r;
}

ir_dim ir_dim_plus(ir_dim a, ir_dim b, bool *overflow)
{
    ir_dim r;
    if (*overflow || !ir_dim_add(a, b, &r)) {
        *overflow = true;
        return ir_dim_const(0);
    }
    return r;
}
