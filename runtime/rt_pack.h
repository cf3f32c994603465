/* runtime/rt_pack.h — bind-time values on the host: packed weights.
 *
 * The passes leave nodes that depend on weights and constants only
 * (pass_bind_time): concat of the Q/K/V or gate/up weights (merge-linears),
 * permute of a weight read as `x @ w` (raise), a cast or a scaled weight the
 * user wrote. They are computed once when the weights are bound, here, on the
 * host: RESHAPE, PERMUTE, CONCAT and SLICE by dedicated copy code (exact,
 * bytes in and bytes out, any dtype); anything else by running the reference
 * interpreter on the bind-time subgraph that produces the node. Then codegen's
 * bind-time layout changes (cg_xform: CG_XFORM_INTERLEAVE_ROWS) are applied.
 *
 * Also the host dtype conversions the runtime and tests share. */
#ifndef KILN_RT_PACK_H
#define KILN_RT_PACK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/rt_err.h"

/* The host bytes of weight parameter `param` (index in g->params) at its
 * declared type for the dims: *data stays valid until rt_pack_eval returns.
 * Returns 0 (RT_OK), or an rt_status with a message (any other non-zero
 * value counts as RT_ERR_INTERNAL: rt_status_of). */
typedef int (*rt_pack_weight_fn)(void *user, int param, const void **data, char *err, size_t n);

/* Evaluate bind-time node `node` of g for the dims (g->nsyms values). *out
 * receives a malloc'd buffer of *bytes bytes (the node's dtype, row-major).
 * force_interp: use the interpreter even where copy code exists (tests).
 * Returns RT_OK, or with a message RT_ERR_WEIGHTS (a weight missing, a shape
 * or the interpreter failing), the callback's status, RT_ERR_NOMEM,
 * RT_ERR_INVALID (bad arguments) or RT_ERR_INTERNAL (node is not bind-time). */
rt_status rt_pack_eval(const ir_graph *g, const int64_t *dims, int node, rt_pack_weight_fn get, void *user,
                       bool force_interp, void **out, size_t *bytes, char *err, size_t errlen);

/* CG_XFORM_INTERLEAVE_ROWS: dst row 2j = src row j, dst row 2j+1 = src row
 * half + j, for j < half; rows of row_bytes bytes. src has 2*half rows
 * (a rank-1 value is rows of one element). dst and src must not overlap. */
void rt_pack_interleave_rows(void *dst, const void *src, int64_t half, size_t row_bytes);

/* CG_XFORM_ROPE_PAIRS, in place on val (rows of row_bytes bytes): in each of
 * `heads` blocks starting at row off + h * stride, the first rot rows are
 * interleaved as rt_pack_interleave_rows does with half rot / 2. False when a
 * block reaches past `rows`, rot is not even and positive, or memory runs out. */
bool rt_pack_rope_pairs(void *val, int64_t rows, size_t row_bytes, int64_t off, int64_t stride, int64_t heads,
                        int64_t rot);

/* Whether rt_pack_rope_pairs accepts these rows. */
bool rt_pack_rope_pairs_fit(int64_t rows, int64_t off, int64_t stride, int64_t heads, int64_t rot);

/* The node kinds packing does without the interpreter: data movement
 * (reshape, permute, concat, slice, every input of the node's dtype), and a
 * row scale (a [R, C] matrix times a [C] vector of its dtype, not i32: a
 * norm's gain folded into a weight, passes/fold_norm_gain.c; each product
 * rounded once, as the interpreter does). */
bool rt_pack_is_movement(const ir_node *n);
bool rt_pack_is_rowscale(const ir_node *n);
/* A row scale in float32 rounded once to a narrower float type T: cast(mul(cast(W, f32), g), T)
 * with W a [R, C] matrix of T and g a [C] float32 vector (a float32 gain folded into a T weight,
 * passes/fold_norm_gain.c: Gemma's 1 + w): each product in float32 (exact operands, one rounding),
 * then one rounding to T, as the interpreter computes it. *w and *gain: the operands. */
bool rt_pack_is_rowscale_f32(const ir_node *n, const ir_node **w, const ir_node **gain);

/* n elements of dtype t at src to floats (i32 converted by value), and back
 * (bf16/f16 through ir_f32_to_bf16_bits and friends, ir/ir.h). */
void rt_to_f32(ir_dtype t, const void *src, float *dst, int64_t n);
void rt_from_f32(ir_dtype t, const float *src, void *dst, int64_t n);

#endif
