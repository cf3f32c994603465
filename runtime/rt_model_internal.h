/* runtime/rt_model_internal.h — the types and helpers that the files of
 * rt_model.h share (rt_context.c, rt_model.c, rt_variant.c, rt_bind.c,
 * rt_run.c). Nothing outside runtime/ includes it.
 *
 * Ownership: a model owns its plan (graph, variant plans, planner), its
 * variants' compiled and loaded kernels, its device memory (the
 * intermediates arena, the workspace scratch, states, packed weights,
 * weights loaded from files) and its CUDA graphs. */
#ifndef KILN_RT_MODEL_INTERNAL_H
#define KILN_RT_MODEL_INTERNAL_H
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "runtime/rt_cache.h"
#include "runtime/rt_err.h"
#include "runtime/rt_graph.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_model.h"
#include "runtime/rt_pack_dev.h"
#include "util/arena.h"

struct rt_ctx {
    int device;
    bool has_device, own_stream;
    void *stream;
    char arch[32];
    cg_target target;
    rt_cache *cache;
    bool no_cache;
    int compile_threads;
};

/* One shape variant: its plan and its kernels, compiled then loaded. The
 * arrays below hold 2 * plan.nkernels entries: [i] kernel i, [nkernels + i]
 * its fallback (cg_kernel.fallback: the mma.sync kernel of a wgmma one;
 * empty when it has none). */
typedef struct rt_variant {
    rt_variant_plan plan;
    int *pack_slot;  /* per plan.packed entry: its index in the model's packed buffers */
    rt_blob *cubins; /* compiled, until loaded */
    rt_module **mods;
    rt_kernel *kern;
    struct rt_lt_plan **lt; /* per kernel: the cuBLASLt plan of one whose lt.chosen (made when first recorded) */
    bool compiled, loaded;
    int launched;    /* kernels the last recording launched (empty grids are skipped) */
} rt_variant;

/* The device buffer of one packed (bind-time) value. */
typedef struct rt_packed_buffer {
    rt_packed_value value;
    void *dev;
    size_t bytes;
    bool valid;
} rt_packed_buffer;

struct rt_model {
    rt_ctx *ctx;
    arena a;
    rt_plan plan;
    const ir_graph *g;   /* plan.graph */
    const int64_t *maxd; /* plan.max_dims */
    size_t arena_need, arena_bytes, scratch_bytes;
    void *arena_dev, *scratch_dev;
    /* The kernels' counters (zeroed workspaces, rt_run.c): zeroed when allocated, left
     * zeroed by the kernels; counters_dirty after a failed run: zeroed before the next. */
    void *counters_dev;
    size_t counters_bytes;
    bool counters_dirty;
    bool pdl;            /* programmatic dependent launch (kernels compiled for sm_90+, not no_pdl) */
    void **weight_ptr;   /* per param: weights: the bound device pointer */
    bool *weight_owned;
    /* Weights loaded from a file (rt_bind.c): the file (weight_src, for reading
     * one again), and released when no kernel of any variant reads it but a
     * packed copy does: its device copy is freed once the packed copies are
     * made (the copies replace it), and read again from the file when a pack
     * or a new variant needs it. Weights the user binds are never released. */
    char **weight_src;
    bool *weight_released;
    void **state_ptr;    /* per param: states: the device buffer */
    bool states_borrowed; /* state_ptr are another model's (rt_model_borrow_states): never freed or zeroed here */
    size_t *state_bytes;
    bool states_ready;
    int nstate_params;
    rt_packed_buffer *packed;
    int npacked, cappacked;
    /* packing on the device (rt_pack_dev.h): the kernels' source (plan.pack_source),
     * their module once loaded, and the kernels */
    const char *pack_source;
    rt_module *pack_mod;
    rt_pack_kernels pack_k;
    rt_variant *vars[RT_MAX_VARIANTS + 1];
    int nvars;
    rt_graph_cache *graphs;
    bool no_graphs, lazy;
    int decode_max_rows;
    void (*progress)(void *user, int done, int total, const char *kernel, double ms); /* rt_model_config */
    void *progress_user;
    rt_model_counters cnt;
    /* The slot table runs read (rt_model_set_slots): a device array of int32, one state row
     * per batch row; NULL: none (batch row b is state row b). */
    const int32_t *slots;
    /* A packed model's sequence table (rt_model_set_seqs; CG_ARG_SEQS): int32 cu[0..N], then the
     * sequence of each packed token; NULL: none (a packed model does not run without one). */
    const int32_t *seqs;
    const char **types;  /* per param, then per output: declared type text */
};

/* ---- the device (rt_context.c) ---- */

/* A loader/launcher status (rt_launch.h) as a model reports it: a bad
 * argument or a kernel missing from its module is Kiln's bug there. */
rt_status rt_kernel_status(rt_status s);

/* The model's device made current; false with *st and a message when the
 * context has none or it fails. CUDA calls in these files go through
 * RT_CUDA_CHECK / RT_CUDA_TRY (rt_err.h). */
bool rt_model_use_device(const rt_model *m, const char *what, rt_status *st, char *err, size_t n);

/* ---- the model (rt_model.c) ---- */

/* Append a line to err (several problems in one message). */
void rt_add_line(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "an input", "a state", "a weight" */
const char *rt_param_kind_word(const ir_node *p);
/* "wq : bf16[2048, 2048] (llama.kiln:21)" */
void rt_model_describe_param(const rt_model *m, int param, char *buf, size_t n);
/* The shape of parameter `param` at the max dims and its bytes; -1 when it
 * does not evaluate. */
int rt_model_param_bytes(const rt_model *m, int param, int64_t *shape, size_t *bytes);

/* ---- shape variants (rt_variant.c) ---- */

/* Takes *vp into a new variant of m (registering its packed values). */
rt_status rt_variant_adopt(rt_model *m, rt_variant_plan *vp, rt_variant **out, char *err, size_t n);
void rt_variant_free(rt_variant *v);
rt_status rt_variant_compile(rt_model *m, rt_variant *v, char *err, size_t n);
rt_status rt_variant_load(rt_model *m, rt_variant *v, char *err, size_t n);
/* The tensor maps of a wgmma kernel (cg_kernel.tmaps) at dims into the
 * parameter's prefix, from the pointers in its KilnArgs (args); a map of a
 * state's rows (cg_tmap.state_rows) takes its batch at state_dims (the dims
 * the states are allocated at); *ok false (RT_OK returned) when TMA cannot
 * describe an operand (rt_run.c). */
rt_status rt_encode_tmaps(const cg_kernel *K, const int64_t *dims, const int64_t *state_dims, unsigned char *param,
                          const unsigned char *args, bool *ok, char *err, size_t n);
/* The index in m->vars of the variant a run with these dims uses, planned
 * on first use. */
rt_status rt_variant_pick(rt_model *m, const int64_t *dims, int *index, char *err, size_t n);

/* ---- weights, packing and states (rt_bind.c) ---- */

/* The weights for which missing(m, param, user) holds, as "decl; decl":
 * returns how many. */
int rt_missing_weights(const rt_model *m, bool (*missing)(const rt_model *m, int param, const void *user),
                       const void *user, char *list, size_t n);
/* Computes and uploads the packed values not valid yet, then releases the
 * weights loaded from files that only packed copies read. */
rt_status rt_model_update_packs(rt_model *m, char *err, size_t n);
/* Reads back from its file every released weight a kernel of v reads directly. */
rt_status rt_model_restore_weights(rt_model *m, const rt_variant *v, char *err, size_t n);

#endif
