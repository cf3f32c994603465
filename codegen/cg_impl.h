/* codegen/cg_impl.h — shared by the codegen files (not public).
 *
 * cg_expr.c    strings, dims as C, the KilnArgs registry, the expression
 *              emitter (index math, broadcasting, views, every op)
 * cg_family.c  the hooks of each family (elementwise, row, matmul, attention)
 * cg_emit.c    the public API: grouping analysis, heuristics, assembly of the
 *              translation unit, launch rules, writing sources */
#ifndef KILN_CG_IMPL_H
#define KILN_CG_IMPL_H
#include <stdarg.h>

#include "codegen/cg.h"
#include "passes/pass.h"

/* ---- a growable string ------------------------------------------------------ */
typedef struct cg_str {
    char *s;
    size_t len, cap;
    bool oom;
} cg_str;
void cg_str_printf(cg_str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_str_vprintf(cg_str *b, const char *fmt, va_list ap);
void cg_str_append(cg_str *b, const char *s, size_t n);
void cg_str_free(cg_str *b);

/* ---- the generator state of one kernel ------------------------------------- */

typedef struct cg_memo {
    int node;
    const char *key; /* the index it was computed at */
    const char *var;
    int depth;       /* block depth where the local was declared */
} cg_memo;

typedef struct cg_subst {
    int node;
    const char *expr; /* the value of node at the hook's index */
} cg_subst;

/* Where a node's elements live: base + off + sum(coord[i] * stride[i]). */
typedef struct cg_strided {
    const ir_node *base;
    int rank;
    ir_dim stride[IR_MAX_RANK];
    ir_dim off;
} cg_strided;

#define CG_LD_REC 4 /* cg_gen.ld_field, ld_index */

typedef struct cg_gen {
    const ir_graph *g;
    int k;                   /* the group */
    const ir_node *anchor;
    arena *a;                /* the kernel's strings */
    const bool *bind;        /* bind-time nodes */
    const pass_users *users;
    cg_kernel *kern;
    const cg_target *target; /* the GPU: launch rules and heuristics size from it */
    bool no_wgmma;           /* the fallback of a matmul_wgmma kernel: matmul_mma only */
    const int64_t *dims;     /* the variant's dims (cg_options.dims), or NULL */
    const cg_options *opts;  /* the emit's options (tune: cg_options.tune), or NULL */
    /* KilnArgs fields in order (the dims are appended last) */
    cg_arg *args;
    int nargs, capargs;
    bool dim_used[IR_MAX_SYMS];
    /* the function being generated */
    cg_str *body;
    int depth, tmp;
    cg_memo *memo;
    int nmemo, capmemo;
    cg_subst subst[8];
    int nsubst;
    /* errors: the first one wins */
    char *err;
    size_t errlen;
    bool failed;
    bool dim_overflow; /* a size did not fit (ir_dim_times): the kernel fails */
    const char *ld_fn; /* the element load the expressions emit (NULL: kiln_ld) */
    /* the wrapper of the pointer in each element load and store (NULL: none), e.g. "kiln_al<AL>"
     * in row.cuh's hooks (common.cuh kiln_al: the pointer taken as aligned in the checked path) */
    const char *ptr_wrap;
    /* the element loads as the preloading hooks emit them (matmul_wgmma.cuh KILN_WGMMA_EPI_EARLY 2):
     * 0 as ld_fn says; 1 load k also stored in pre[k]; 2 load k read from pre[k]. ld_count: the
     * loads emitted so far (k) */
    int ld_pre, ld_count;
    /* with ld_pre 1, the first CG_LD_REC loads: each one's KilnArgs field and flattened index, and
     * the output's flattened index at columns n and n + 1 (the TMA residual of matmul_wgmma.cuh,
     * KILN_WGMMA_RES_TMA: the epilogue's operand read exactly where the output is written) */
    const char *ld_field[CG_LD_REC], *ld_index[CG_LD_REC], *ld_out[2];
} cg_gen;

bool cg_fail(cg_gen *gen, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Is n an RMSNorm whose row kernel this variant does not launch, its
 * consumers' GEMVs computing it as they load (passes/fold_norm_gemv.c)? */
bool cg_norm_folded(const cg_gen *gen, const ir_node *n);
const char *cg_printf(cg_gen *gen, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A node's dims as a C long long expression over p.dim_<sym> fields. */
const char *cg_dim(cg_gen *gen, const ir_dim *d);
bool cg_dim_one(const ir_dim *d);                 /* the constant 1 */

/* ---- storage and arguments -------------------------------------------------- */
/* Does the kernel compute n itself (a member of the group, not the anchor
 * when the template computes the anchor)? Views are members or free. */
bool cg_is_member(const cg_gen *gen, const ir_node *n);
/* A view read through by indexing (not bind-time, not materialized elsewhere). */
bool cg_is_free_view(const cg_gen *gen, const ir_node *n);
/* The KilnArgs field holding node n's storage; registers it (written: the
 * kernel stores to it). NULL on failure (n has no storage). */
const char *cg_ptr(cg_gen *gen, const ir_node *n, bool written);
/* A named field bound to n's storage (template operands: "a", "w", "q"...). */
const char *cg_ptr_named(cg_gen *gen, const char *field, const ir_node *n, bool written);
/* A named field pointing into s->base's storage at element s->off. */
const char *cg_ptr_strided(cg_gen *gen, const char *field, const cg_strided *s, bool written);
/* A named pointer field that is always NULL. */
void cg_null_ptr(cg_gen *gen, const char *field, const char *ctype);
/* The state row of batch row b (an expression of the hook's KilnArgs p): kiln_slot(p.slot, b),
 * adding the kernel's "slot" field (CG_ARG_SLOTS) the first time. */
const char *cg_slot_row(cg_gen *gen, const char *b);
/* A packed run's sequence table (an expression: "p.cu_q"), adding the kernel's "cu_q"
 * field (CG_ARG_SEQS) the first time. */
const char *cg_seq_table(cg_gen *gen);
/* Packed token tok (an expression: its index along the packed tokens): declares its sequence
 * (returned) and its index in that sequence (*local), locals of the function being emitted;
 * nseq: the sequences' dim. */
const char *cg_packed_token(cg_gen *gen, const char *tok, const ir_dim *nseq, const char **local);
void cg_scalar(cg_gen *gen, const char *field, ir_dim value);
void cg_workspace(cg_gen *gen, const char *field, const char *ctype, ir_dim bytes, bool zeroed);
/* Storage identity: state values resolve to their state parameter. */
const ir_node *cg_storage_node(const cg_gen *gen, const ir_node *n);
/* Is n a group output (used outside the group, an output or a state)? */
bool cg_used_outside(const cg_gen *gen, const ir_node *n);
/* Follows free views from n down to stored data; false when the layout is
 * not affine per axis or n is computed by this kernel. */
bool cg_strided_of(cg_gen *gen, const ir_node *n, cg_strided *out);
/* The same through the views of any kernel's group (none computed at bind time), down to any
 * stored value: how another kernel's value is laid out (the rotation pairs, cg_rope_paired). */
bool cg_strided_in_graph(cg_gen *gen, const ir_node *n, cg_strided *out);
/* n, a view of a weight that bind time would materialize (a transpose, a
 * reshape), as strides over the weight as stored: a template that can read
 * that layout reads the weight in place and no copy is made. */
bool cg_weight_view_of(cg_gen *gen, const ir_node *n, cg_strided *out);

/* ---- indices and values ------------------------------------------------------- */

/* An element of a tensor of type t: its row-major flat index and/or its
 * coordinates, as C expressions valid at the current point of the body.
 * Invariant: flat != NULL, or every c[i] != NULL. */
typedef struct cg_idx {
    const ir_type *t;
    const char *flat;
    const char *c[IR_MAX_RANK];
} cg_idx;

cg_idx cg_idx_flat(const ir_type *t, const char *flat);
const char *cg_idx_coord(cg_gen *gen, const cg_idx *x, int axis);
const char *cg_idx_flatten(cg_gen *gen, const cg_idx *x);
/* The index of an operand of type `to` broadcast to x (numpy rules). */
cg_idx cg_idx_broadcast(cg_gen *gen, const cg_idx *x, const ir_type *to);

/* The value of node n at x as a float C expression (declaring locals in the
 * body as needed). */
const char *cg_value(cg_gen *gen, const ir_node *n, const cg_idx *x);
/* An i32 node's value as a long long expression (positions, ids). */
const char *cg_int_value(cg_gen *gen, const ir_node *n, const cg_idx *x);
/* Stores v as node n's element x into n's storage. */
void cg_store(cg_gen *gen, const ir_node *n, const cg_idx *x, const char *v);

/* Body writing: lines at the current depth; blocks scope the memo. */
void cg_line(cg_gen *gen, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_open(cg_gen *gen, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_close(cg_gen *gen);
/* Starts a new function body (fresh memo, locals, substitutions). */
void cg_begin_fn(cg_gen *gen, cg_str *body);
void cg_set_subst(cg_gen *gen, const ir_node *n, const char *expr);
void cg_clear_subst(cg_gen *gen);
/* cos and sin of the angle `ang` (a double local) into new float locals, as
 * every rope in Kiln rotates (the reduction to [-pi, pi], __sincosf), both
 * times mscale (YaRN's attention factor) when it is not 1. */
void cg_rope_sincos(cg_gen *gen, const char *ang, double mscale, const char **cs, const char **sn);
/* A float literal: %.9g plus 'f' (".0f" for integers), infinities and NaN. */
const char *cg_float_lit(cg_gen *gen, double v);

/* ---- families (cg_family.c) ----------------------------------------------------- */
typedef struct cg_plan {
    cg_family family;
    const char *note;
    /* elementwise: the outputs in order, with the index space size */
    const ir_node *outs[16];
    int nouts;
    /* template constants, as "#define NAME value" lines */
    cg_str defines;
} cg_plan;

/* Each returns false (via cg_fail) when the group does not fit the family. */
bool cg_gen_elementwise(cg_gen *gen, cg_plan *plan, cg_str *hooks);
bool cg_gen_row(cg_gen *gen, cg_plan *plan, cg_str *hooks);
bool cg_gen_matmul(cg_gen *gen, cg_plan *plan, cg_str *hooks, const int64_t *dims);
bool cg_gen_attention(cg_gen *gen, cg_plan *plan, cg_str *hooks, const int64_t *dims);
/* Does gen's group hold a linear whose rotation pairs sit side by side (cg_family.c
 * cg_rope_paired) or a rope reading such a linear's result? */
bool cg_group_paired(cg_gen *gen);
/* codegen/cg_moe.c: an EXPERT_LINEAR or TOPK anchor (cg_moe_anchor) */
bool cg_moe_anchor(const ir_node *anchor);
bool cg_gen_moe(cg_gen *gen, cg_plan *plan, cg_str *hooks);

#endif
