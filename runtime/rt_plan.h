/* runtime/rt_plan.h — what the runtime runs: a model's plan, made by the
 * compile driver above it (src/compile.h) and handed to rt_model_create.
 *
 * The runtime never parses text and never calls a pass; everything it needs
 * from compilation is in these types:
 *
 *   rt_plan          the fused graph (the runtime reads its params, outputs,
 *                    states and bind-time nodes; it never rewrites it), the
 *                    max dims, a text description, the shape variants planned
 *                    up front, and the planner the runtime calls for a
 *                    variant it has not got (the rule: runtime/rt_variant.c).
 *   rt_variant_plan  one shape variant, a complete plan: its kernels
 *                    (codegen's cg_kernel: source, launch rule, KilnArgs
 *                    fields), the offset of every intermediate in the
 *                    intermediates arena and the arena's size, and the packed
 *                    (bind-time) values its kernels read.
 *
 * Every buffer is planned at the max dims: every size is a polynomial in the
 * dims with non-negative coefficients, so the offsets hold for any smaller
 * dims. Offsets and sizes in the arena are multiples of RT_ARENA_ALIGN. */
#ifndef KILN_RT_PLAN_H
#define KILN_RT_PLAN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/cg.h"
#include "ir/ir.h"
#include "runtime/rt_err.h"

#define RT_ARENA_ALIGN 256
#define RT_ALIGN_UP(x) (((size_t)(x) + (RT_ARENA_ALIGN - 1)) & ~(size_t)(RT_ARENA_ALIGN - 1))

/* A value computed once when the weights are bound (runtime/rt_pack.h):
 * bind-time node `node`, rows interleaved when half > 0
 * (CG_XFORM_INTERLEAVE_ROWS: gate and up side by side), then the rotation
 * pairs of each of pairs[0..npairs) made adjacent rows (CG_XFORM_ROPE_PAIRS:
 * the QKV epilogue's rope). */
enum { RT_MAX_ROPE_PAIRS = 8 };
typedef struct rt_rope_pairs {
    int64_t off, stride, heads, rot;
} rt_rope_pairs;
typedef struct rt_packed_value {
    int node;
    int64_t half;
    int npairs;
    rt_rope_pairs pairs[RT_MAX_ROPE_PAIRS];
} rt_packed_value;

/* The same value in the same layout. */
static inline bool rt_packed_value_eq(const rt_packed_value *a, const rt_packed_value *b)
{
    if (a->node != b->node || a->half != b->half || a->npairs != b->npairs) return false;
    for (int i = 0; i < a->npairs; i++)
        if (a->pairs[i].off != b->pairs[i].off || a->pairs[i].stride != b->pairs[i].stride ||
            a->pairs[i].heads != b->pairs[i].heads || a->pairs[i].rot != b->pairs[i].rot)
            return false;
    return true;
}

typedef struct rt_variant_plan {
    bool exact;                 /* planned for exactly `dims` (decode-shaped kernels);
                                 * false: the large-shape variant, right for any dims */
    int64_t dims[IR_MAX_SYMS];  /* exact: the dims it was planned for */
    cg_kernel *kernels;         /* in launch order; freed with cg_kernels_free */
    int nkernels;
    int64_t *node_offset;       /* per graph node: byte offset in the arena, -1 = none */
    size_t arena_bytes;         /* the arena this variant needs */
    rt_packed_value *packed;    /* the packed values its kernels read, each once */
    int npacked;
    int *arg_packed;            /* for each kernel in order, for each of its args in order:
                                 * the index in packed the arg reads, or -1 */
    const ir_graph *graph;      /* the graph its kernels were emitted from: NULL, the plan's;
                                 * else one with the plan graph's nodes, grouped for this
                                 * variant (the decode variants' pass decisions: src/compile.c),
                                 * owned by the planner */
    bool from_plan_cache;       /* its kernels came from the plan cache (rt_plan_cache.h) */
    int codegen_runs;           /* times codegen went over the graph to plan it (0: from the cache) */
} rt_variant_plan;

void rt_variant_plan_free(rt_variant_plan *v);

/* The graph whose groups variant v's kernels are (plan_graph unless v has its own). */
static inline const ir_graph *rt_variant_graph(const rt_variant_plan *v, const ir_graph *plan_graph)
{
    return v->graph ? v->graph : plan_graph;
}

/* Plans the variant for exactly these dims (g->nsyms values) into *out
 * (exact = true). Returns RT_OK, or a status with a message. */
typedef rt_status (*rt_plan_variant_fn)(void *planner, const ir_graph *g, const int64_t *dims, rt_variant_plan *out,
                                  char *err, size_t n);

/* Device bytes by kind, at the max dims: the intermediates arena, kernel
 * workspaces (split-K partial sums), packed (bind-time) weight copies and
 * states. The plan states them (the driver: from its memory plan and
 * kernels); the runtime computes them from what it allocates with
 * (runtime/rt_memory.c, rt_model_memory). */
typedef struct rt_memory {
    size_t intermediates, workspaces, packed, states;
} rt_memory;

typedef struct rt_plan {
    ir_graph *graph;             /* the fused graph */
    char *name;                  /* the model's path, as messages name it */
    int64_t max_dims[IR_MAX_SYMS];
    char *text;                  /* the kernel groups and the memory plan as text */
    rt_memory memory;            /* the device memory the text states */
    rt_variant_plan *variants;   /* planned up front; [0] is the large-shape variant */
    int nvariants;
    rt_plan_variant_fn plan_variant; /* NULL: only the variants above */
    void *planner;
    void (*planner_free)(void *planner);
    bool head;                   /* the LM head is left to the fused sampler (kc_options.head_sample):
                                  * output head_in is its input, param head_weight its weight */
    int head_weight;
    int codegen_runs;            /* times codegen went over the graph for the text and memory
                                  * figures (0: they came from the plan cache) */
    const char *pack_source;     /* the device packing kernels (codegen/kernels/pack.cuh, static
                                  * text, not freed); NULL: permutes and row scales pack on the host */
} rt_plan;

/* Frees everything a plan holds (NULL-safe); the struct itself is the caller's. */
void rt_plan_free(rt_plan *p);

#endif
