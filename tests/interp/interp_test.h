/* tests/interp/interp_test.h — small helpers shared by the interpreter tests:
 * types from literal dims, tensors from literal data, a graph with a
 * diagnostics list, and one-call runs. Every test file includes check.h
 * first. */
#ifndef KILN_TESTS_INTERP_TEST_H
#define KILN_TESTS_INTERP_TEST_H
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/ir.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define NOLOC ((src_loc){NULL, 0, 0, 0})
/* A dim argument to ty(): a constant >= 0, or SYM(i) for symbol i. */
#define SYM(i) (-(i)-1)
#define SHAPE(...) ((int64_t[]){__VA_ARGS__})
#define FLOATS(...) ((float[]){__VA_ARGS__})
#define INTS(...) ((int32_t[]){__VA_ARGS__})

static inline ir_dim dm(int64_t v) { return v < 0 ? ir_dim_sym((int)(-v - 1)) : ir_dim_const(v); }

static inline ir_type ty(ir_dtype dt, int rank, ...)
{
    ir_type t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) t.dims[i] = dm(va_arg(ap, int));
    va_end(ap);
    return t;
}

/* A graph that reports builder errors into its own diagnostics list. */
typedef struct tgraph {
    ir_graph *g;
    diag_list d;
} tgraph;

static inline void tg_init(tgraph *t, const char *name)
{
    t->g = ir_graph_new(name);
    diag_list_init(&t->d, &t->g->arena);
    t->g->diags = &t->d;
}

static inline void tg_free(tgraph *t)
{
    diag_list_free(&t->d);
    ir_graph_free(t->g);
}

/* Prints the builder's diagnostics (if any) and says whether there were none. */
static inline bool tg_ok(tgraph *t)
{
    for (int i = 0; i < t->d.count; i++) fprintf(stderr, "builder: %s\n", t->d.items[i].msg);
    return t->d.errors == 0;
}

static inline ir_node *in_(tgraph *t, const char *name, ir_type ty_)
{
    return ir_param(t->g, IR_OP_INPUT, name, &ty_, NOLOC);
}
static inline ir_node *wt_(tgraph *t, const char *name, ir_type ty_)
{
    return ir_param(t->g, IR_OP_WEIGHT, name, &ty_, NOLOC);
}
static inline ir_node *st_(tgraph *t, const char *name, ir_type ty_)
{
    return ir_param(t->g, IR_OP_STATE, name, &ty_, NOLOC);
}

/* Tensor of `dt` with values copied from data (rounded to dt); NULL data = zeros. */
static inline ir_tensor tf(ir_dtype dt, int rank, const int64_t *shape, const float *data)
{
    ir_tensor x;
    if (!ir_tensor_alloc(&x, dt, rank, shape)) {
        fprintf(stderr, "ir_tensor_alloc failed\n");
        abort();
    }
    int64_t n = ir_tensor_numel(&x);
    for (int64_t k = 0; data && k < n; k++) x.f[k] = ir_round_to(dt, data[k]);
    return x;
}

static inline ir_tensor ti(int rank, const int64_t *shape, const int32_t *data)
{
    ir_tensor x;
    if (!ir_tensor_alloc(&x, IR_I32, rank, shape)) {
        fprintf(stderr, "ir_tensor_alloc failed\n");
        abort();
    }
    int64_t n = ir_tensor_numel(&x);
    for (int64_t k = 0; data && k < n; k++) x.i[k] = data[k];
    return x;
}

static inline void free_tensors(ir_tensor *ts, int n)
{
    for (int i = 0; i < n; i++) ir_tensor_free(&ts[i]);
}

/* Checks shape and every value of a float tensor against `want`. */
#define CHECK_TENSOR(t, rank_, shape_, want, atol, rtol)                       \
    do {                                                                       \
        const ir_tensor *t_ = &(t);                                            \
        const int64_t *s_ = (shape_);                                          \
        const float *w_ = (want);                                              \
        bool shp_ = t_->rank == (rank_);                                       \
        for (int i_ = 0; shp_ && i_ < t_->rank; i_++) shp_ = t_->shape[i_] == s_[i_]; \
        CHECK_MSG(shp_, "shape of %s", #t);                                    \
        if (shp_) {                                                            \
            int64_t n_ = ir_tensor_numel(t_);                                  \
            for (int64_t k_ = 0; k_ < n_; k_++) {                              \
                double a_ = t_->f[k_], b_ = w_[k_];                            \
                bool ok_ = (isinf(b_) || isnan(b_)) ? (a_ == b_ || (isnan(a_) && isnan(b_))) \
                                                     : fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_); \
                CHECK_MSG(ok_, "%s[%lld] = %.9g, expected %.9g", #t, (long long)k_, a_, b_); \
            }                                                                  \
        }                                                                      \
    } while (0)

#define CHECK_ERR(rc, err, substr)                                             \
    do {                                                                       \
        CHECK_MSG((rc) == -1, "expected an error containing \"%s\"", substr);  \
        CHECK_MSG(strstr((err), (substr)) != NULL, "error \"%s\" lacks \"%s\"", (err), substr); \
    } while (0)

#endif
