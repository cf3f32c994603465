/* ir/cost.h — what a kernel must move and compute: the cost model.
 *
 * For a kernel group of a planned graph (after passes/plan_kernels.c) at
 * concrete dims, the compulsory traffic and work of any implementation:
 *
 *   read     every value the group reads from outside itself, once: inputs,
 *            weights and bind-time (packed) values, states, the buffers of
 *            earlier kernels. A value read through views (reshape, permute,
 *            slice) counts the part the views select; several slices of one
 *            value count once each, at most the whole value.
 *            Attention reads of K and V count the cache rows it attends:
 *            per sequence b the keys j < o_b + S (o_b = pos[b], or T - S
 *            without positions). A cache write fused into the same kernel
 *            supplies its own rows, so only the other attended rows are read
 *            from the cache. A cache write reads nothing of the cache.
 *   written  every value that leaves the group (read by another kernel, a
 *            model output, a state's new value), once; a cache write's value
 *            counts the S rows per sequence it stores (in place).
 *   flops    matrix products only, 2 per multiply-add: matmul and linear
 *            (2*M*N*K per batch), attention (QK^T and PV over the keys each
 *            query sees: causal, query s of sequence b sees o_b + s + 1 keys;
 *            else o_b + S). Elementwise and reduction work is not counted:
 *            a few operations per element, always under the bandwidth roof.
 *
 * Positions: `i32` gives, per graph parameter (g->params index), its host
 * values when it is an i32 input, else NULL (the whole array may be NULL).
 * A pos without values takes o_b = T - S (the whole cache); attention
 * without a pos input has o_b = T - S and a cache write without one o_b = 0
 * (ir/ir.h). Values are clamped to 0 .. T - S.
 *
 * The layer (ir_cost_layer) is the floor the benchmark uses: bytes = every
 * weight + the K and V rows attention reads from states (o_b + S per
 * sequence), flops = every matrix product of the graph. The per-kernel
 * costs also count intermediates; both are reported, named.
 *
 * Plain arithmetic over the IR: no passes, no CUDA. The driver and the
 * runtime (the profiler) both call it. */
#ifndef KILN_IR_COST_H
#define KILN_IR_COST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

typedef struct ir_cost {
    int64_t read, written; /* bytes */
    int64_t weights;       /* of read: weights and bind-time values */
    int64_t states;        /* of read + written: states (KV caches) */
    int64_t flops;
} ir_cost;

static inline int64_t ir_cost_bytes(const ir_cost *c) { return c->read + c->written; }

/* Kernel group k of g at dims (g->nsyms values). Returns 0, or -1 with a
 * message (a dim that does not evaluate, k out of range). */
int ir_cost_group(const ir_graph *g, int k, const int64_t *dims, const int32_t *const *i32, ir_cost *out,
                  char *err, size_t errlen);
/* The layer's benchmark floor quantities (written stays 0). */
int ir_cost_layer(const ir_graph *g, const int64_t *dims, const int32_t *const *i32, ir_cost *out, char *err,
                  size_t errlen);

/* floor = max(bytes / bandwidth, flops / rate), seconds; bandwidth in
 * bytes/s, rate in FLOP/s (a roof <= 0 is left out). */
typedef struct ir_floor {
    double t_bytes, t_flops, t;
    bool flops_bound; /* the FLOPs roof binds */
} ir_floor;
ir_floor ir_floor_of(int64_t bytes, int64_t flops, double bandwidth, double rate);

#endif
