/* runtime/rt_model.h — a planned model and its execution on the GPU.
 *
 * The runtime runs plans; it does not parse or call passes. The compile
 * driver (src/compile.h) turns text into an rt_plan (runtime/rt_plan.h) and
 * hands it to rt_model_create, which compiles the kernels of the variants
 * planned up front with NVRTC through the context's kernel cache (parallel,
 * disk-cached) and loads them, unless the config is lazy.
 *
 * Shape variants (runtime/rt_variant.c): a run picks a variant by its dims;
 * a variant not planned yet comes from the planner the plan carries.
 *
 * Run: per kernel, KilnArgs filled from the binding of each field (params,
 * outputs, states, packed weights, arena + planned offset, workspaces from a
 * per-model scratch with zeroed ones cleared by cudaMemsetAsync first,
 * scalars from the dims), launch shape from cg_launch_eval, rt_launch. The
 * launches go through the CUDA graph cache (rt_graph.h) unless disabled.
 *
 * The files: rt_context.c (context, device memory), rt_model.c (the model,
 * its description, dims), rt_variant.c (shape variants), rt_bind.c (weights,
 * packing, states), rt_run.c (running, CUDA graphs); their shared types are
 * in rt_model_internal.h.
 *
 * Status: rt_status (runtime/rt_err.h), the public kiln_status values one
 * for one, so the API layer passes them through. Every function takes
 * (err, n): a message on failure, naming the kernel or the tensor. */
#ifndef KILN_RT_MODEL_H
#define KILN_RT_MODEL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/cg.h"
#include "ir/ir.h"
#include "runtime/rt_err.h"
#include "runtime/rt_plan.h"

/* Exact (decode-shaped) variants a model keeps besides the large-shape one. */
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

rt_status rt_ctx_create(rt_ctx **out, const rt_ctx_config *cfg, char *err, size_t n);
void rt_ctx_free(rt_ctx *c);
const char *rt_ctx_arch(const rt_ctx *c);
bool rt_ctx_has_device(const rt_ctx *c);
int rt_ctx_device(const rt_ctx *c); /* the CUDA device ordinal */
/* The GPU codegen targets: the device's numbers (cudaGetDeviceProperties:
 * SM count, opt-in shared memory per block, L2) with the context's arch, or
 * cg_target_default(arch) for a compile_only context. */
void rt_ctx_target(const rt_ctx *c, cg_target *out);
/* The context's kernel cache (NULL with no_cache): the plan cache lives in it too. */
struct rt_cache *rt_ctx_kernel_cache(const rt_ctx *c);
/* Device memory for callers without CUDA of their own (the kiln tool, other
 * languages): allocate, free, and synchronous copies on the context's device.
 * Return RT_OK or an RT_ERR_* with a message. */
rt_status rt_ctx_alloc(rt_ctx *c, size_t bytes, void **ptr, char *err, size_t n);
rt_status rt_ctx_free_mem(rt_ctx *c, void *ptr, char *err, size_t n);
rt_status rt_ctx_copy(rt_ctx *c, void *dst, const void *src, size_t bytes, bool to_device, char *err, size_t n);

/* ---- model ---------------------------------------------------------------------- */

typedef struct rt_model rt_model;

typedef struct rt_dim_value {
    const char *name;
    int64_t value;
} rt_dim_value;

typedef struct rt_model_config {
    bool no_graphs;
    int max_graphs;      /* 0: 16 */
    bool lazy;           /* compile kernels at the first run of each variant */
    int decode_max_rows; /* 0: 32; < 0: never (see rt_variant.c) */
    /* Called after each kernel NVRTC compiles for the model (cache hits are
     * not compiles), serialized, from a compile thread; NULL: none. */
    void (*progress)(void *user, int done, int total, const char *kernel, double ms);
    void *progress_user;
    bool no_pdl;         /* launch every kernel after the previous one has finished (no
                          * programmatic dependent launch; see rt_run.c) */
} rt_model_config;

/* A model running plan (taken over: freed by the model, or by this call when
 * it fails). cfg may be NULL (the defaults). */
rt_status rt_model_create(rt_ctx *ctx, rt_plan *plan, const rt_model_config *cfg, rt_model **out, char *err, size_t n);
void rt_model_free(rt_model *m);

const ir_graph *rt_model_graph(const rt_model *m);
const int64_t *rt_model_max_dims(const rt_model *m);
int rt_model_num_kernels(const rt_model *m);
/* Kernel i of the large-shape variant, or NULL out of range. */
const cg_kernel *rt_model_kernel(const rt_model *m, int i);
/* The declared type as text ("bf16[B, S, 2048]"): i < nparams a parameter,
 * else output i - nparams. */
const char *rt_model_type_text(const rt_model *m, int i);
/* The kernels and the memory plan, as text (malloc'd). */
char *rt_model_describe(const rt_model *m);

/* dims as (name, value) pairs -> values per symbol; missing ones take the
 * max when fill_max, else are an error. Checks 1 <= value <= max. */
rt_status rt_model_resolve_dims(const rt_model *m, const rt_dim_value *dims, int ndims, bool fill_max, int64_t *out,
                          char *err, size_t n);

/* Weights. param: index in the graph's params. */
int rt_model_find_param(const rt_model *m, const char *name);
rt_status rt_model_bind_weight(rt_model *m, const char *name, int has_type, ir_dtype dtype, int rank, const int64_t *shape,
                         const void *dev, char *err, size_t n);
enum { RT_LOAD_IGNORE_UNKNOWN = 1u << 0, RT_LOAD_ALLOW_MISSING = 1u << 1 };
rt_status rt_model_load_safetensors(rt_model *m, const char *path, unsigned flags, char *err, size_t n);
/* Validate a parsed file against the model (no device needed): every
 * mismatch, one per line. Used by load and by tests. */
struct rt_st_file;
rt_status rt_model_check_safetensors(const rt_model *m, const struct rt_st_file *f, unsigned flags, char *err, size_t n);
/* Copy the file's tensors that are weights of the model to the device (after
 * rt_model_check_safetensors). */
rt_status rt_model_upload_safetensors(rt_model *m, const struct rt_st_file *f, char *err, size_t n);
/* The tensors of nfiles checked files (a checkpoint's shards) in one upload
 * (rt_wmodel.h: threads, pinned buffers): on failure none of them is bound. */
rt_status rt_model_upload_safetensors_many(rt_model *m, const struct rt_st_file *files, int nfiles, char *err, size_t n);
/* A Hugging Face checkpoint (rt_weights_index.h: a directory, an index or one
 * file): the index checked against its shards, every shard's tensors checked
 * against the model as rt_model_check_safetensors does, the weights missing
 * from all shards listed (unless RT_LOAD_ALLOW_MISSING), then the upload. */
rt_status rt_model_load_checkpoint(rt_model *m, const char *path, unsigned flags, char *err, size_t n);

/* States. */
rt_status rt_model_alloc_states(rt_model *m, char *err, size_t n);
rt_status rt_model_zero_states(rt_model *m, char *err, size_t n);
rt_status rt_model_state_ptr(rt_model *m, const char *name, void **ptr, size_t *bytes, char *err, size_t n);

/* Run. inputs/outputs: (name, device pointer). stream NULL: the context's. */
typedef struct rt_tensor_ptr {
    const char *name;
    void *ptr;
} rt_tensor_ptr;
rt_status rt_model_prepare(rt_model *m, const int64_t *dims, char *err, size_t n);
rt_status rt_model_run(rt_model *m, const int64_t *dims, const rt_tensor_ptr *inputs, int ninputs,
                 const rt_tensor_ptr *outputs, int noutputs, void *stream, char *err, size_t n);
rt_status rt_model_sync(rt_model *m, char *err, size_t n);
/* The slot table of the runs that follow: dev_slots, a device array of int32
 * (entry b: the state row that batch row b reads and writes, 0 <= it < the
 * states' allocated rows, distinct per live sequence) that the kernels read
 * when they run, so a graph replay sees the table's current contents; NULL:
 * none (batch row b is state row b, as before). The pointer is part of a
 * graph's key. A run with a table fails when a kernel reads a state other than
 * through a cache write or an attention. The caller keeps the array alive. */
void rt_model_set_slots(rt_model *m, const int32_t *dev_slots);
/* dst runs on src's state buffers (each of dst's states is one of src's, by name and
 * size; its own, if any, are freed): a packed model prefilling the caches its unpacked
 * model decodes from. They stay src's (freed with src, which must outlive dst's runs). */
rt_status rt_model_borrow_states(rt_model *dst, const rt_model *src, char *err, size_t n);
/* A packed model's sequence table (device memory, read by the kernels at run time; its
 * pointer is part of the graph key, as the slot table's): int32 cu[0..N] then, for each of
 * the cu[N] packed tokens, its sequence. NULL: none. */
void rt_model_set_seqs(rt_model *m, const int32_t *dev_seqs);
const int32_t *rt_model_slots(const rt_model *m);

typedef struct rt_model_counters {
    uint64_t kernels_compiled, cache_hits_memory, cache_hits_disk, variants;
    uint64_t runs, launches, graph_captures, graph_replays, graph_updates, eager_runs, eager_fallbacks;
    uint64_t weight_packs;
    uint64_t weight_bytes_released; /* device bytes of file-loaded weights freed: packed copies replaced them */
    uint64_t tma_fallbacks; /* wgmma launches recorded as their mma.sync fallback (operands TMA cannot describe) */
    uint64_t plan_cache_hits; /* variants whose kernels came from the plan cache */
    uint64_t codegen_runs;    /* times codegen went over the graph (the plan text, each variant) */
    uint64_t packed_bytes_device, packed_bytes_host; /* packed values computed on the device / the host */
} rt_model_counters;
void rt_model_get_counters(const rt_model *m, rt_model_counters *c);

/* Device memory (runtime/rt_memory.c). need: what the allocators ask for at
 * the max dims for the variants planned so far (no device needed); held:
 * what is allocated now. Either may be NULL. */
rt_status rt_model_memory(const rt_model *m, rt_memory *need, rt_memory *held, char *err, size_t n);
/* The generic-template warnings of the variant a run at dims uses (planned
 * now when new: cg_fallback_print's lines), printed to out; *count of them. */
rt_status rt_model_fallbacks(rt_model *m, const int64_t *dims, FILE *out, int *count, char *err, size_t n);
/* The figures the plan states (rt_plan.memory). */
const rt_memory *rt_model_planned_memory(const rt_model *m);
/* The workspace bytes kernel k needs at dims (its CG_ARG_WORKSPACE
 * arguments, each aligned), and the most any of ks needs; false when a size
 * does not evaluate. */
/* A kernel's workspace bytes at dims, of its scratch (zeroed false) or of its
 * counters (zeroed true: left zeroed by the kernel, in the counters region). */
bool rt_kernel_workspace(const cg_kernel *k, const int64_t *dims, bool zeroed, size_t *need);
/* Of kernels run one after the other: the largest scratch (shared) and the sum
 * of their counters (each kernel has its own). */
bool rt_kernels_workspace(const cg_kernel *ks, int nk, const int64_t *dims, size_t *scratch, size_t *counters);
/* What the arena and workspace allocations are for a need (never 0 bytes). */
size_t rt_arena_size(size_t need);
size_t rt_workspace_size(size_t need);
/* The bytes allocated for the scratch and the counters region together. */
size_t rt_workspaces_size(size_t scratch, size_t counters);
/* The bytes of packed value v at the max dims; false when they do not evaluate. */
bool rt_packed_bytes(const ir_graph *g, const int64_t *maxd, rt_packed_value v, size_t *bytes);

#endif
