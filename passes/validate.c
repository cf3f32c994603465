/* passes/validate.c — translation validation: does the compiled graph
 * compute what the model says?
 *
 * Both graphs run on the reference interpreter over the same random inputs:
 * floats uniform in [-1, 1); i32 inputs drawn from the range their uses
 * allow (a position p needs p + S <= T in attention and cache_write; an id
 * must be below the embedding table's row count). States start from the
 * same random contents in both runs. Outputs and new state values are
 * compared by name as ||a - b|| / ||a||. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

static uint64_t next_u64(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool eval(const ir_dim *d, const int64_t *dims, int64_t *v) { return ir_dim_eval(d, dims, v); }

int64_t pass_i32_bound(const ir_graph *g, const ir_node *p, const int64_t *dims, int64_t unlimited)
{
    int64_t hi = unlimited, t, s;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        for (int j = 0; j < n->ninputs; j++) {
            if (n->inputs[j] != p) continue;
            int64_t b = -1;
            if (n->op == IR_OP_ATTENTION && j == 3 && eval(&n->inputs[1]->type.dims[2], dims, &t) &&
                eval(&n->inputs[0]->type.dims[1], dims, &s))
                b = t - s + 1;
            else if (n->op == IR_OP_CACHE_WRITE && j == 2 && eval(&n->inputs[0]->type.dims[2], dims, &t) &&
                     eval(&n->inputs[1]->type.dims[1], dims, &s))
                b = t - s + 1;
            else if (n->op == IR_OP_EMBEDDING && j == 1 && eval(&n->inputs[0]->type.dims[0], dims, &t))
                b = t;
            if (b >= 0 && b < hi) hi = b;
        }
    }
    return hi;
}

static bool alloc_for(const ir_node *p, const int64_t *dims, ir_tensor *t)
{
    int64_t shape[IR_MAX_RANK];
    for (int i = 0; i < p->type.rank; i++)
        if (!eval(&p->type.dims[i], dims, &shape[i]) || shape[i] < 0) return false;
    return ir_tensor_alloc(t, p->type.dtype, p->type.rank, shape);
}

static bool copy_tensor(const ir_tensor *src, ir_tensor *dst)
{
    if (!ir_tensor_alloc(dst, src->dtype, src->rank, src->shape)) return false;
    size_t n = (size_t)ir_tensor_numel(src);
    if (src->f) memcpy(dst->f, src->f, n * sizeof *src->f);
    if (src->i) memcpy(dst->i, src->i, n * sizeof *src->i);
    return true;
}

static int find_param(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->nparams; i++)
        if (!strcmp(g->params[i]->name, name)) return i;
    return -1;
}

int pass_validate(const ir_graph *a, const ir_graph *b, const int64_t *dims, uint64_t seed,
                  pass_validation *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    int rc = -1;
    int np = a->nparams;
    ir_tensor *pa = calloc((size_t)np + 1, sizeof *pa), *pb = calloc((size_t)np + 1, sizeof *pb);
    ir_tensor *oa = calloc((size_t)a->noutputs + 1, sizeof *oa), *ob = calloc((size_t)b->noutputs + 1, sizeof *ob);
    if (!pa || !pb || !oa || !ob) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (b->nparams != np) {
        snprintf(err, errlen, "the graphs have %d and %d parameters", np, b->nparams);
        goto out;
    }
    /* random parameters for graph a, shared with graph b (states copied) */
    for (int i = 0; i < np; i++) {
        const ir_node *p = a->params[i];
        if (!alloc_for(p, dims, &pa[i])) {
            snprintf(err, errlen, "cannot allocate parameter '%s' at these dims", p->name);
            goto out;
        }
        int64_t n = ir_tensor_numel(&pa[i]);
        if (p->type.dtype == IR_I32) {
            int64_t hi = pass_i32_bound(a, p, dims, 16);
            if (hi <= 0) {
                snprintf(err, errlen, "no valid value for i32 input '%s' at these dims", p->name);
                goto out;
            }
            for (int64_t k = 0; k < n; k++) pa[i].i[k] = (int32_t)(next_u64(&seed) % (uint64_t)hi);
        } else {
            for (int64_t k = 0; k < n; k++) {
                float u = (float)((next_u64(&seed) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
                pa[i].f[k] = ir_round_to(p->type.dtype, u);
            }
        }
    }
    for (int i = 0; i < np; i++) {
        int j = find_param(b, a->params[i]->name);
        if (j < 0 || !ir_type_eq(&a->params[i]->type, &b->params[j]->type)) {
            snprintf(err, errlen, "parameter '%s' is missing or retyped after compilation", a->params[i]->name);
            goto out;
        }
        if (a->params[i]->op == IR_OP_STATE) {
            if (!copy_tensor(&pa[i], &pb[j])) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
        } else {
            pb[j] = pa[i]; /* shared, read-only; freed once through pa */
        }
    }
    if (ir_interp_run(a, dims, pa, oa, err, errlen) != 0) goto out;
    if (ir_interp_run(b, dims, pb, ob, err, errlen) != 0) goto out;
    for (int i = 0; i < a->noutputs; i++) {
        int j = 0;
        while (j < b->noutputs && strcmp(b->outputs[j].name, a->outputs[i].name)) j++;
        if (j == b->noutputs) {
            snprintf(err, errlen, "output '%s' is missing after compilation", a->outputs[i].name);
            goto out;
        }
        double e = ir_tensor_rel_err(&oa[i], &ob[j]);
        res->compared++;
        if (e > res->max_rel_err || !res->worst) {
            res->max_rel_err = e;
            res->worst = a->outputs[i].name;
        }
    }
    for (int i = 0; i < a->nstates; i++) {
        const ir_node *s = a->states[i].state;
        int j = find_param(b, s->name);
        double e = ir_tensor_rel_err(&pa[s->param], &pb[j]);
        res->compared++;
        if (e > res->max_rel_err || !res->worst) {
            res->max_rel_err = e;
            res->worst = s->name;
        }
    }
    rc = 0;
out:
    for (int i = 0; pb && i < np; i++)
        if (b->params[i]->op == IR_OP_STATE) ir_tensor_free(&pb[i]);
    for (int i = 0; pa && i < np; i++) ir_tensor_free(&pa[i]);
    for (int i = 0; oa && i < a->noutputs; i++) ir_tensor_free(&oa[i]);
    for (int i = 0; ob && i < b->noutputs; i++) ir_tensor_free(&ob[i]);
    free(pa);
    free(pb);
    free(oa);
    free(ob);
    return rc;
}

double pass_validate_tolerance(const ir_graph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->type.dtype == IR_BF16 || g->nodes[i]->type.dtype == IR_F16) return 3e-2;
    return 1e-4;
}
