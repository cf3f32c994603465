/* codegen/cg_lt.h — which matmul kernels cuBLASLt can implement (cg_lt.c),
 * for cg_gen_matmul (codegen/cg_family.c). The rules are cg.h's (cg_lt). */
#ifndef KILN_CG_LT_H
#define KILN_CG_LT_H
#include "codegen/cg_impl.h"

/* What cg_gen_matmul knows of a matmul when it asks. */
typedef struct cg_lt_in {
    const ir_node *A, *a, *w, *bias; /* the anchor, its operands (a: after a folded norm), the linear's bias */
    bool norm, swiglu, qkv;
    const ir_node *const *outs;      /* the group's outputs */
    int nouts;
    int b_nk;                        /* W is [N, K] (K contiguous) */
    ir_dim M, N, K, batch, lda, ldw, sa, sw;
} cg_lt_in;

/* The nodes whose fields the runtime reads for cuBLASLt (cg_lt_fields). */
typedef struct cg_lt_nodes {
    const ir_node *bias, *res, *out; /* res: the residual's storage node */
} cg_lt_nodes;

/* Whether cuBLASLt expresses the matmul's whole epilogue: out->why and, for a
 * candidate, its activation, flags and dims; nd the nodes for cg_lt_fields. */
void cg_lt_analyze(cg_gen *gen, const cg_lt_in *in, cg_lt *out, cg_lt_nodes *nd);
/* The operands' KilnArgs fields (once every field is registered); a
 * candidate whose operand has no field of its own becomes CG_LT_FIELDS. */
void cg_lt_fields(cg_gen *gen, const cg_lt_nodes *nd, cg_lt *lt);
/* The epilogue's text for a tuning problem: " lt=bias+relu" (candidates only). */
const char *cg_lt_problem_suffix(cg_gen *gen, const cg_lt *lt);
/* cg_lt_text's line for a matmul kernel being emitted (its family not yet set). */
const char *cg_lt_line(const cg_kernel *k, char *buf, size_t n);

#endif
