/* runtime/rt_model.h — a compiled model and its execution on the GPU.
 *
 * Compile: fe_compile -> pass_run_pipeline -> pass_plan_memory at the max
 * dims (one arena of intermediates, allocated once: every buffer's size is a
 * polynomial in the dims with non-negative coefficients, so the offsets
 * planned at the max dims hold for any smaller dims) -> codegen of the
 * large-shape variant (cg_emit_all_ex, symbolic dims) -> NVRTC through the
 * context's kernel cache (parallel, disk-cached).
 *
 * Shape variants: a run whose rows (the product of the leading dims of its
 * largest input) are at most decode_max_rows uses kernels generated for its
 * exact dims (cg_options.dims: GEMV, split-KV decode attention); others use
 * the large-shape variant. Small-shape variants are generated on first use
 * and kept (at most RT_MAX_VARIANTS; beyond that the large-shape variant
 * serves, correct for any dims).
 *
 * Run: per kernel, KilnArgs filled from the binding of each field (params,
 * outputs, states, packed weights, arena + planned offset, workspaces from a
 * per-model scratch with zeroed ones cleared by cudaMemsetAsync first,
 * scalars from the dims), launch shape from cg_launch_eval, rt_launch. The
 * launches go through the CUDA graph cache (rt_graph.h) unless disabled.
 *
 * Status codes are the public kiln_status values (include/kiln.h), so the
 * API layer passes them through. Every function takes (err, n): a message on
 * failure, naming the kernel or the tensor. */
#ifndef KILN_RT_MODEL_H
#define KILN_RT_MODEL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

enum {
    RTM_OK = 0,
    RTM_ERR_INVALID = 1,
    RTM_ERR_NOT_FOUND = 2,
    RTM_ERR_MODEL = 3,
    RTM_ERR_CODEGEN = 4,
    RTM_ERR_WEIGHTS = 5,
    RTM_ERR_MISSING_WEIGHT = 6,
    RTM_ERR_STATE = 7,
    RTM_ERR_IO = 8,
    RTM_ERR_NO_DEVICE = 9,
    RTM_ERR_CUDA = 10,
    RTM_ERR_NOMEM = 11,
    RTM_ERR_INTERNAL = 12,
};

#define RT_MAX_VARIANTS 16

/* ---- context ------------------------------------------------------------------ */

typedef struct rt_ctx rt_ctx;

typedef struct rt_ctx_config {
    int device;
    void *stream;
    const char *cache_dir;
    bool no_cache, no_disk_cache;
    const char *arch;
    bool compile_only;
    int compile_threads;
} rt_ctx_config;

int rt_ctx_create(rt_ctx **out, const rt_ctx_config *cfg, char *err, size_t n);
void rt_ctx_free(rt_ctx *c);
const char *rt_ctx_arch(const rt_ctx *c);
bool rt_ctx_has_device(const rt_ctx *c);
/* Device memory for callers without CUDA of their own (the kiln tool, other
 * languages): allocate, free, and synchronous copies on the context's device.
 * Return RTM_OK or an RTM_ERR_* with a message. */
int rt_ctx_alloc(rt_ctx *c, size_t bytes, void **ptr, char *err, size_t n);
int rt_ctx_free_mem(rt_ctx *c, void *ptr, char *err, size_t n);
int rt_ctx_copy(rt_ctx *c, void *dst, const void *src, size_t bytes, bool to_device, char *err, size_t n);

/* ---- model ---------------------------------------------------------------------- */

typedef struct rt_model rt_model;

typedef struct rt_dim_value {
    const char *name;
    int64_t value;
} rt_dim_value;

typedef struct rt_model_config {
    const char *const *define_names, *const *define_values;
    int ndefines;
    const char *const *disabled;
    int ndisabled;
    const rt_dim_value *max_dims;
    int nmax_dims;
    bool no_graphs;
    int max_graphs;
    bool lazy;
    int decode_max_rows; /* 0: 16; < 0: never */
} rt_model_config;

/* text NULL: read the file at name. */
int rt_model_compile(rt_ctx *ctx, const char *name, const char *text, const rt_model_config *cfg, rt_model **out,
                     char *err, size_t n);
void rt_model_free(rt_model *m);

const ir_graph *rt_model_graph(const rt_model *m);
const int64_t *rt_model_max_dims(const rt_model *m);
int rt_model_num_kernels(const rt_model *m);
/* The declared type as text ("bf16[B, S, 2048]"): i < nparams a parameter,
 * else output i - nparams. */
const char *rt_model_type_text(const rt_model *m, int i);
/* The kernels and the memory plan, as text (malloc'd). */
char *rt_model_describe(const rt_model *m);

/* dims as (name, value) pairs -> values per symbol; missing ones take the
 * max when fill_max, else are an error. Checks 1 <= value <= max. */
int rt_model_resolve_dims(const rt_model *m, const rt_dim_value *dims, int ndims, bool fill_max, int64_t *out,
                          char *err, size_t n);

/* Weights. param: index in the graph's params. */
int rt_model_find_param(const rt_model *m, const char *name);
int rt_model_bind_weight(rt_model *m, const char *name, int has_type, ir_dtype dtype, int rank, const int64_t *shape,
                         const void *dev, char *err, size_t n);
enum { RT_LOAD_IGNORE_UNKNOWN = 1u << 0, RT_LOAD_ALLOW_MISSING = 1u << 1 };
int rt_model_load_safetensors(rt_model *m, const char *path, unsigned flags, char *err, size_t n);
/* Validate a parsed file against the model (no device needed): every
 * mismatch, one per line. Used by load and by tests. */
struct rt_st_file;
int rt_model_check_safetensors(const rt_model *m, const struct rt_st_file *f, unsigned flags, char *err, size_t n);

/* Packed (bind-time) values on the host, as the runtime uploads them: node's
 * value (with the interleave xform when half > 0) from host weights given by
 * get (see rt_pack.h). For tests. */

/* States. */
int rt_model_alloc_states(rt_model *m, char *err, size_t n);
int rt_model_zero_states(rt_model *m, char *err, size_t n);
int rt_model_state_ptr(rt_model *m, const char *name, void **ptr, size_t *bytes, char *err, size_t n);

/* Run. inputs/outputs: (name, device pointer). stream NULL: the context's. */
typedef struct rt_tensor_ptr {
    const char *name;
    void *ptr;
} rt_tensor_ptr;
int rt_model_prepare(rt_model *m, const int64_t *dims, char *err, size_t n);
int rt_model_run(rt_model *m, const int64_t *dims, const rt_tensor_ptr *inputs, int ninputs,
                 const rt_tensor_ptr *outputs, int noutputs, void *stream, char *err, size_t n);
int rt_model_sync(rt_model *m, char *err, size_t n);

typedef struct rt_model_counters {
    uint64_t kernels_compiled, cache_hits_memory, cache_hits_disk, variants;
    uint64_t runs, launches, graph_captures, graph_replays, graph_updates, eager_runs, eager_fallbacks;
    uint64_t weight_packs;
} rt_model_counters;
void rt_model_get_counters(const rt_model *m, rt_model_counters *c);

#endif
