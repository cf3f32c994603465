/* kiln.h — the public C API of Kiln: compile a transformer layer written in
 * the Kiln language into fused CUDA kernels and run it on an NVIDIA GPU.
 *
 * The only header a user includes. Plain C11, no CUDA types: streams and
 * device memory are `void *` (a cudaStream_t, a device pointer).
 *
 * The story:
 *
 *   kiln_context *ctx;                       one per device (and thread, if you like)
 *   kiln_context_create(&ctx, NULL);         -> KILN_ERR_NO_DEVICE without a GPU
 *   kiln_model *m;
 *   kiln_dim maxd[] = {{"B", 4}, {"S", 128}, {"T", 1024}};
 *   kiln_model_options mo = {.max_dims = maxd, .nmax_dims = 3};
 *   kiln_model_compile_file(ctx, "llama.kiln", &mo, &m);
 *   kiln_model_load_safetensors(m, "layer0.safetensors");   (or kiln_model_bind_weight)
 *   kiln_model_alloc_states(m);              zeroed KV caches, sized for the max dims
 *   kiln_dim d[] = {{"B", 1}, {"S", 1}, {"T", 1024}};
 *   kiln_tensor_arg in[] = {{"x", x_dev}, {"pos", pos_dev}}, out[] = {{"y", y_dev}};
 *   kiln_model_run(m, d, 3, in, 2, out, 1, NULL);           asynchronous on the stream
 *   ...
 *   kiln_model_free(m); kiln_context_free(ctx);
 *
 * Errors: every call returns a kiln_status; on failure the message (one or
 * more lines, e.g. the model's `file:line:col: error:` diagnostics) is
 * available from kiln_last_error() in the calling thread until its next
 * failing call, and from kiln_model_last_error()/kiln_context_last_error()
 * (the object's last failure). The library never prints, exits or aborts.
 *
 * Threads: no global mutable state (the last error is thread-local). A
 * context may be shared by threads for compiling; a model (and its runs)
 * must be used by one thread at a time. Two contexts in two threads are
 * independent. CUDA graphs are captured in thread-local capture mode.
 *
 * Streams: the context's own stream is non-blocking: it does not wait for
 * work on the legacy default stream (plain cudaMemcpy, cudaMemset). Finish
 * such copies first (cudaStreamSynchronize(cudaStreamLegacy)), or use
 * cudaMemcpyAsync on the model's stream, or pass your stream to the context.
 * Kiln's own uploads (weights, packed weights, zeroed states) are complete
 * when the call that made them returns.
 *
 * Memory: tensors passed to kiln_model_run are device pointers owned by the
 * caller, row-major, of the model's declared dtype, with the shape the
 * declaration takes at the run's dims. Weights bound with
 * kiln_model_bind_weight are borrowed (keep them alive and unchanged; bind
 * again after changing their contents); weights loaded from a file, states,
 * packed weights and the intermediates arena are owned by the model. */
#ifndef KILN_H
#define KILN_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libkiln.so exports what this header declares and nothing else: the library
 * is built with hidden visibility, and the declarations here are default. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define KILN_API_VERSION 1

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_INVALID_ARGUMENT = 1, /* NULL where a value is needed, bad option, dims out of range */
    KILN_ERR_NOT_FOUND = 2,        /* no input/output/weight/state/dim of that name */
    KILN_ERR_MODEL = 3,            /* the model text has errors (diagnostics in the message) */
    KILN_ERR_CODEGEN = 4,          /* a kernel could not be generated or compiled (NVRTC log in the message) */
    KILN_ERR_WEIGHTS = 5,          /* a weight file or a bound weight does not match the model */
    KILN_ERR_MISSING_WEIGHT = 6,   /* a run needs weights that were never bound (listed) */
    KILN_ERR_STATE = 7,            /* states were not allocated, or a state's shape changed */
    KILN_ERR_IO = 8,               /* a file could not be read or written */
    KILN_ERR_NO_DEVICE = 9,        /* no CUDA device or driver */
    KILN_ERR_CUDA = 10,            /* a CUDA call failed (the message names it and the kernel) */
    KILN_ERR_OUT_OF_MEMORY = 11,   /* host or device memory */
    KILN_ERR_INTERNAL = 12,        /* a bug in Kiln: please report it with the message */
} kiln_status;

/* "ok", "invalid argument", ... (static strings). */
const char *kiln_status_str(kiln_status s);

/* The message of the calling thread's last failure ("" when none). Valid
 * until that thread's next failing call into Kiln. */
const char *kiln_last_error(void);

/* "Kiln 0.1.0". */
const char *kiln_version(void);

typedef enum kiln_dtype { KILN_F32 = 0, KILN_F16 = 1, KILN_BF16 = 2, KILN_I32 = 3 } kiln_dtype;
const char *kiln_dtype_name(kiln_dtype t); /* "f32", "f16", "bf16", "i32" */
size_t kiln_dtype_size(kiln_dtype t);

/* ---- context ----------------------------------------------------------------- */

typedef struct kiln_context kiln_context;

typedef struct kiln_context_options {
    int device;               /* CUDA device ordinal (0) */
    void *stream;             /* cudaStream_t for runs with a NULL stream; NULL: the context
                               * creates its own (non-blocking) stream */
    const char *cache_dir;    /* kernel cache root; NULL: $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln,
                               * ~/.cache/kiln */
    int no_cache;             /* 1: compile every kernel, never read or write the cache */
    int no_disk_cache;        /* 1: memory cache only */
    const char *arch;         /* "sm_90a"...; NULL: the device's ("sm_90a" for sm_90); one of
                               * sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a (else
                               * KILN_ERR_INVALID_ARGUMENT) */
    int compile_only;         /* 1: no device needed: models compile (NVRTC), introspect and
                               * validate weight files, but binding, states and runs fail
                               * with KILN_ERR_NO_DEVICE. Arch defaults to sm_90a. */
    int compile_threads;      /* NVRTC threads (0: default) */
} kiln_context_options;

/* opts NULL = defaults. KILN_ERR_NO_DEVICE (with the reason) when there is
 * no usable device and compile_only is 0. *out is NULL on failure. */
kiln_status kiln_context_create(kiln_context **out, const kiln_context_options *opts);
void kiln_context_free(kiln_context *ctx); /* NULL-safe; free its models first */
const char *kiln_context_arch(const kiln_context *ctx);
int kiln_context_has_device(const kiln_context *ctx);
const char *kiln_context_last_error(const kiln_context *ctx);

/* Device memory on the context's device, for callers that have no CUDA of
 * their own (tools, other languages). Copies are synchronous. */
kiln_status kiln_device_alloc(kiln_context *ctx, size_t bytes, void **device_ptr);
kiln_status kiln_device_free(kiln_context *ctx, void *device_ptr); /* NULL-safe */
kiln_status kiln_copy_to_device(kiln_context *ctx, void *device_dst, const void *host_src, size_t bytes);
kiln_status kiln_copy_to_host(kiln_context *ctx, void *host_dst, const void *device_src, size_t bytes);

/* ---- model -------------------------------------------------------------------- */

typedef struct kiln_model kiln_model;

typedef struct kiln_define {
    const char *name;  /* a `const` to override or a `dims` symbol to fix, as `-D NAME=VALUE` */
    const char *value; /* the number, as text */
} kiln_define;

typedef struct kiln_dim {
    const char *name;  /* a `dims` symbol of the model */
    int64_t value;
} kiln_dim;

/* Compile progress: kernel `done` of `total` kernels that NVRTC compiles in
 * this call (kernels found in the cache are not counted), its name and its
 * compile time. Called from a compile thread, never two calls at once. */
typedef void (*kiln_progress_fn)(void *user, int done, int total, const char *kernel, double ms);

typedef struct kiln_model_options {
    const kiln_define *defines;
    int ndefines;
    const char *const *disabled; /* pass or rule names (`kiln passes` lists them) */
    int ndisabled;
    const kiln_dim *max_dims;    /* the largest value of every `dims` symbol: sizes the
                                  * intermediates arena, the workspaces and the states */
    int nmax_dims;
    int no_graphs;               /* 1: launch kernels eagerly, never capture CUDA graphs */
    int max_graphs;              /* CUDA graphs kept per model (0: 16); see kiln_model_run */
    int lazy;                    /* 1: compile kernels at the first run of each shape variant
                                  * instead of in kiln_model_compile_* */
    int decode_max_rows;         /* rows (product of an input's leading dims) up to which a
                                  * run uses small-shape kernels (GEMV, split-KV decode
                                  * attention) specialized for its dims; 0: 32; -1: never */
    const char *const *warning_flags; /* as `kiln check` takes them, applied in order: "-Werror",
                                  * "-Wno-NAME", "-WNAME", "-Wno-all", "-Wall" (NAME: unused-value,
                                  * unused-param, stale-state, attention-layout); none: every
                                  * warning on, none an error. An unknown flag is
                                  * KILN_ERR_INVALID_ARGUMENT; under -Werror a warning fails the
                                  * compile (KILN_ERR_MODEL, "[-Werror=NAME]" in the message) */
    int nwarning_flags;
    kiln_progress_fn progress;   /* called as NVRTC finishes each kernel of this model (at
                                  * compile, or at the first run of a shape variant); NULL: none */
    void *progress_user;         /* its first argument */
    const char *const *enabled;  /* rules that are off by default to turn on (`kiln passes`
                                  * marks them; none today: a rule on by default is accepted) */
    int nenabled;
    int no_pdl;                  /* 1: no programmatic dependent launch: each kernel starts
                                  * when the one before it has finished (on sm_90+ a kernel
                                  * otherwise starts early and prefetches its weights while
                                  * the previous one drains; outputs are the same bits) */
    /* ---- autotuning (issue 9) ---- */
    int autotune;                /* 1: when a variant is planned, time the Hopper matmul's
                                  * candidate configurations on the device (at the variant's
                                  * dims; the large-shape variant at the max dims) and use the
                                  * fastest; choices persist in the kernel cache directory
                                  * (per device, driver, Kiln version and problem) and are
                                  * reused without timing (`kiln tune export|import` moves
                                  * them between machines). The choice is named in the
                                  * kernel's configuration ("... (autotuned)") in
                                  * kiln_model_describe and the profile. 0: the heuristic */
    int head_sample;             /* 1: the LM head goes to the fused sampler (generation models):
                                  * the model's one output, a linear(x, W) of a bf16 weight W
                                  * [V, D], becomes output "head_in" = x, and kiln_generate (or a
                                  * sampler, kiln_sampler_run_head) computes the head with the
                                  * sampling in one kernel; the logits reach memory only when
                                  * asked for */
    int packed;                  /* 1: the model's packed form (README "Packed prefill"): the
                                  * prompts of a run concatenated along one token axis, no
                                  * padding; runs take a sequence table
                                  * (kiln_model_set_packed) */
} kiln_model_options;

/* Compile a model: parse, check, fuse, plan memory at the max dims,
 * generate and compile (through the kernel cache) the kernels of the
 * large-shape variant. Model errors: KILN_ERR_MODEL, the message holds every
 * `file:line:col: error:` diagnostic with its source line and caret. */
kiln_status kiln_model_compile_file(kiln_context *ctx, const char *path, const kiln_model_options *opts,
                                    kiln_model **out);
/* name: the file name diagnostics show. */
kiln_status kiln_model_compile_string(kiln_context *ctx, const char *name, const char *text,
                                      const kiln_model_options *opts, kiln_model **out);
void kiln_model_free(kiln_model *m); /* NULL-safe; waits for the model's work to finish */
const char *kiln_model_last_error(const kiln_model *m);
/* The warnings of the model's compile (a value computed and never used, a
 * parameter never read, a state update bound to another name, an accidental
 * attention layout), one `file:line:col: warning: message [-WNAME]` each
 * with its source line and caret, as `kiln check` prints them; "" when
 * there were none. Valid until kiln_model_free. A compile that fails has no
 * model: its warnings are in the error message with the errors. */
const char *kiln_model_warnings(const kiln_model *m);
const char *kiln_model_name(const kiln_model *m);

/* Compile (if needed) and load the kernels that a run with these dims will
 * use, so the first run does not pay for it. */
kiln_status kiln_model_prepare(kiln_model *m, const kiln_dim *dims, int ndims);

/* ---- introspection ------------------------------------------------------------------ */

typedef enum kiln_tensor_kind { KILN_INPUT = 0, KILN_OUTPUT = 1, KILN_WEIGHT = 2, KILN_STATE = 3 } kiln_tensor_kind;

#define KILN_MAX_RANK 8
typedef struct kiln_tensor_info {
    const char *name;     /* owned by the model */
    kiln_tensor_kind kind;
    kiln_dtype dtype;
    int rank;
    int64_t shape[KILN_MAX_RANK]; /* at the dims asked for */
    size_t bytes;
    const char *type;     /* the declared type, e.g. "bf16[B, S, 2048]" (owned by the model) */
} kiln_tensor_info;

/* The model's `dims` symbols, in declaration order (those not fixed by a define). */
int kiln_model_num_dims(const kiln_model *m);
const char *kiln_model_dim_name(const kiln_model *m, int i);  /* NULL out of range */
int64_t kiln_model_max_dim(const kiln_model *m, int i);       /* -1 out of range */

int kiln_model_num_tensors(const kiln_model *m, kiln_tensor_kind kind);
/* Tensor i of a kind, with its shape at `dims` (NULL/0: the max dims; dims
 * not listed take their max value). */
kiln_status kiln_model_tensor(const kiln_model *m, kiln_tensor_kind kind, int i, const kiln_dim *dims, int ndims,
                              kiln_tensor_info *out);
/* By name (inputs, outputs, weights and states share one namespace). */
kiln_status kiln_model_find_tensor(const kiln_model *m, const char *name, const kiln_dim *dims, int ndims,
                                   kiln_tensor_info *out);

/* Number of kernels of the large-shape variant, and a description of the
 * plan (kernels, memory), as `kiln compile --emit=plan` prints it; the
 * string is owned by the model and valid until the next call. */
int kiln_model_num_kernels(const kiln_model *m);
const char *kiln_model_describe(kiln_model *m);

/* What kernel i of the large-shape variant is (strings owned by the model). */
typedef struct kiln_kernel_info {
    const char *name;     /* kiln_<model>_k<i>_<kind>; a kernel that is the same program as an
                           * earlier one (identical layers) has that one's name */
    const char *kind;     /* the kernel group's kind: "matmul", "attention", "row", ... */
    const char *template_file; /* the template it instantiates: "matmul_wgmma.cuh", "matmul_mma.cuh", ... */
    const char *config;   /* the template's configuration: "wgmma 128x256 s4", "mma.sync 128x128x32 s3", or "" */
    const char *fallback; /* the template launched instead when TMA cannot describe an operand at run
                           * time ("matmul_mma.cuh"), or NULL */
    /* Matmuls: which implementation runs and why, one line: "cublasLt (bias): chosen by timing
     * (X us vs the template's Y us)", "cublasLt: not a candidate: the epilogue holds a SwiGLU
     * gate", ...; NULL for other kernels. When autotuning chose cuBLASLt, template_file is
     * "cublasLt" and config says so ("cublasLt bias (autotuned), ..."). */
    const char *implementation;
} kiln_kernel_info;
kiln_status kiln_model_kernel(const kiln_model *m, int i, kiln_kernel_info *out);

/* ---- weights ----------------------------------------------------------------------------- */

/* Bind a weight to device memory holding it at its declared dtype and shape
 * (at the max dims). Borrowed: the caller keeps it alive. Packed weights
 * (merged Q/K/V, interleaved gate/up, transposes) are computed from it once,
 * before the next run. Unknown names and non-weights are errors. */
kiln_status kiln_model_bind_weight(kiln_model *m, const char *name, const void *device_ptr);
/* The same, checking the caller's dtype and shape against the declaration. */
kiln_status kiln_model_bind_weight_checked(kiln_model *m, const char *name, kiln_dtype dtype, int rank,
                                           const int64_t *shape, const void *device_ptr);

enum {
    KILN_LOAD_IGNORE_UNKNOWN = 1u << 0, /* tensors the model does not declare are skipped, not errors */
    KILN_LOAD_ALLOW_MISSING = 1u << 1,  /* weights absent from the file are left unbound (sharded files) */
};
/* Load weights from a .safetensors file: every entry is validated (dtype,
 * shape against the declaration, offsets inside the file and consistent,
 * no overlaps) before anything is copied to the device. By default a tensor
 * the model does not declare and a declared weight missing from the file are
 * errors (all of them listed). The file is memory-mapped and copied to
 * memory owned by the model. */
kiln_status kiln_model_load_safetensors(kiln_model *m, const char *path);
kiln_status kiln_model_load_safetensors_ex(kiln_model *m, const char *path, unsigned flags);

/* Write host tensors to a .safetensors file (for tools and tests). */
typedef struct kiln_host_tensor {
    const char *name;
    kiln_dtype dtype;
    int rank;
    int64_t shape[KILN_MAX_RANK];
    const void *data; /* host memory, numel * dtype size bytes */
} kiln_host_tensor;
kiln_status kiln_safetensors_write(const char *path, const kiln_host_tensor *tensors, int n);

/* issue 13 (whole models) ------------------------------------------------------------------
 * Load a Hugging Face checkpoint: `path` is a directory (its
 * model.safetensors.index.json with the shards it lists, else its
 * model.safetensors), an index file, or one .safetensors file. The index is
 * checked against the shards before anything is copied (shard names are plain
 * file names beside the index; every listed tensor is in its shard, every
 * shard tensor is listed for that shard; metadata.total_size, when present,
 * matches), then every tensor as kiln_model_load_safetensors checks it, with
 * the weights missing from all shards listed. Tensor names are the model's
 * (a `weight w : T = "model.layers.{i}..."` pattern). flags: KILN_LOAD_*. */
kiln_status kiln_model_load_checkpoint(kiln_model *m, const char *path, unsigned flags);

/* ---- states ----------------------------------------------------------------------------- */

/* Allocate every state for the max dims, zeroed (again: zero them). A state
 * is laid out at the run's dims; dims that appear in a state's shape after
 * its first axis must be given their max value in every run (checked). */
kiln_status kiln_model_alloc_states(kiln_model *m);
kiln_status kiln_model_zero_states(kiln_model *m);
/* The device memory of a state (bytes: its size at the max dims); read or
 * write it with cudaMemcpy in the run's stream order. */
kiln_status kiln_model_state_ptr(kiln_model *m, const char *name, void **device_ptr, size_t *bytes);

/* ---- running ------------------------------------------------------------------------------ */

typedef struct kiln_tensor_arg {
    const char *name;
    void *ptr; /* device memory */
} kiln_tensor_arg;

/* Run the model once, asynchronously in `stream` (NULL: the context's).
 * dims: a value for every `dims` symbol, 1 <= value <= its max. Every input
 * and output must be given; i32 position inputs (pos) stay in device memory
 * and are read there by the kernels, so decode steps with the same dims
 * replay the same CUDA graph.
 *
 * CUDA graphs: the first run with a given set of launch-shape dims captures
 * the kernels into a graph and launches it; later runs with the same dims
 * replay it (a change of input/output pointers updates it in place). At
 * most max_graphs graphs are kept per model; a run with new dims beyond that
 * launches eagerly and counts an eager fallback. */
kiln_status kiln_model_run(kiln_model *m, const kiln_dim *dims, int ndims, const kiln_tensor_arg *inputs,
                           int ninputs, const kiln_tensor_arg *outputs, int noutputs, void *stream);

/* Wait for the model's stream. */
kiln_status kiln_model_sync(kiln_model *m);

/* The slot table of the runs that follow (NULL: none, the default): a device
 * array of int32, entry b the row of every state (the KV caches, allocated
 * with the max B rows) that batch row b reads and writes, so a run of B rows
 * can serve any B of the cache's sequences ("slots") and sequences join and
 * leave without copying caches. Entries must be distinct and in 0 .. max B - 1
 * (not checked: they live on the device); rows of no sequence (padding) must
 * name free slots. The kernels read the array when they run: graph replays see
 * its current contents. Keep it alive while runs use it. A run fails with
 * KILN_ERR_INVALID_ARGUMENT when a kernel reads a state other than through a
 * cache write or an attention (they map rows through the table). */
kiln_status kiln_model_set_slot_table(kiln_model *m, const void *device_slots);

/* A model compiled packed (kiln_model_options.packed; README "Packed prefill") runs N
 * sequences of different lengths as one row of tokens: dims B = N, S = their total; input ids
 * [1, S] holds them one after another; pos [B] each sequence's first position (a chunk of a
 * longer prompt continues its cache there); the states' row of sequence b is b, or slot[b]
 * with a slot table; the logits [B, 1, V] are each sequence's last token's. Every run reads
 * the sequence table at device_table: int32 cu[0..N] (cu[0] = 0, strictly increasing,
 * cu[N] = S) followed by S entries, the sequence of each token (b for cu[b] <= t < cu[b+1]);
 * kiln_packed_table fills it on the host. It stays in device memory (graph replays read its
 * current contents; a new pointer captures new graphs). NULL: none (a packed model's run then
 * fails). */
kiln_status kiln_model_set_packed(kiln_model *m, const void *device_table);
/* The sequence table of nseq sequences of lens[b] tokens (lens[b] >= 1) into table (nseq + 1
 * + total int32); *total gets the tokens. KILN_ERR_INVALID_ARGUMENT for an empty
 * sequence or nseq < 1. */
kiln_status kiln_packed_table(const int *lens, int nseq, int32_t *table, int *total);

typedef struct kiln_counters {
    uint64_t kernels_compiled;  /* NVRTC compiles (cache misses) */
    uint64_t cache_hits_memory; /* kernels found in the context's memory cache */
    uint64_t cache_hits_disk;   /* kernels found in the disk cache */
    uint64_t variants;          /* shape variants generated (large + small-shape ones) */
    uint64_t runs;
    uint64_t launches;          /* kernel launches, eager or captured */
    uint64_t graph_captures;    /* graphs captured and instantiated */
    uint64_t graph_replays;     /* runs that launched an existing graph */
    uint64_t graph_updates;     /* graphs updated for new input/output pointers */
    uint64_t eager_runs;        /* runs launched eagerly (graphs off or unavailable) */
    uint64_t eager_fallbacks;   /* runs launched eagerly because the graph cache was full */
    uint64_t weight_packs;      /* times the packed weights were (re)computed */
    uint64_t tma_fallbacks;     /* Hopper (wgmma + TMA) matmul launches recorded as their mma.sync fallback
                                 * because TMA could not describe an operand (a pointer not 16-byte aligned) */
    uint64_t weight_bytes_released; /* device bytes of weights loaded from files that were freed because
                                 * packed copies (merged Q/K/V, interleaved gate/up) replaced them: such a
                                 * weight exists once on the device, packed; one bound from device memory
                                 * is never freed or overwritten (its packed copy is the one extra) */
    /* ---- the plan cache (issue 13) ---- */
    uint64_t plan_cache_hits;   /* shape variants whose kernels came from the plan cache (a warm start:
                                 * the model text, options, target and Kiln build as a stored plan's) */
    uint64_t codegen_runs;      /* times the compiler generated kernels for the plan's text or a shape
                                 * variant: 0 when everything came from the plan cache */
    uint64_t packed_bytes_device; /* bytes of packed weights computed on the device (merges, slices,
                                 * interleaves, RoPE row pairs, permutes, folded norm gains) */
    uint64_t packed_bytes_host; /* bytes of packed weights computed on the host: values with a bind-time
                                 * op the device path does not do (a cast, an f16 gain fold, ...) */
} kiln_counters;
kiln_status kiln_model_counters(const kiln_model *m, kiln_counters *out);

/* ---- device memory (lang) --------------------------------------------------------------- */

/* Device bytes by kind, at the max dims. Weights bound by the caller are the
 * caller's and not counted; weights loaded from a file add their own bytes. */
typedef struct kiln_memory_info {
    size_t intermediates; /* the intermediates arena (kernel outputs that later kernels read) */
    size_t workspaces;    /* kernel workspaces (split-K partial sums) */
    size_t packed;        /* bind-time weight copies: merged Q/K/V and gate/up, transposes, interleaves */
    size_t states;        /* every state (the KV cache) */
} kiln_memory_info;

typedef enum kiln_memory_kind {
    KILN_MEMORY_PLANNED = 0,   /* what the plan states (kiln_model_describe's "device memory" line):
                                * the large-shape variant, from the compiler's memory plan */
    KILN_MEMORY_REQUIRED = 1,  /* what the runtime allocates for the shape variants it has planned
                                * so far (no device needed: the sizes its allocators use) */
    KILN_MEMORY_ALLOCATED = 2, /* what it holds now (0 before weights are bound, states allocated
                                * and a run made; always 0 on a compile_only context) */
} kiln_memory_kind;
kiln_status kiln_model_memory(const kiln_model *m, kiln_memory_kind kind, kiln_memory_info *out);

/* The kernels of the shape variant a run with these dims uses (dims not
 * listed: their max; planned now when it is new) that run on the generic
 * template instead of their family's, one line each with the reason, as
 * `kiln compile --explain` and `kiln run` print them:
 *   warning: kernel k2 (attention, attention 'a' (line 30)) runs the generic
 *   elementwise template, not the attention one: the templates take bf16 or f16
 * *text is "" when there are none; owned by the model, valid until the next call. */
kiln_status kiln_model_fallbacks(kiln_model *m, const kiln_dim *dims, int ndims, const char **text);

/* ---- profiling -------------------------------------------------------------------------------- */

/* The device's ceilings, measured once per device (a streaming read of 2 GiB
 * for the bandwidth, cuBLAS 8192^3 GEMMs sustained for >= 100 ms for the
 * tensor rates) and kept in the cache directory, keyed by the device name,
 * driver, reported clocks and Kiln version; remeasure: 1 to measure again. */
typedef struct kiln_ceilings {
    double read_bw;               /* bytes/s */
    double bf16_flops, f16_flops; /* FLOP/s */
    char device[256];
    char measured[32];            /* UTC time of the measurement */
    int from_cache;               /* 1: read from the file, 0: measured by this call */
    char path[1024];              /* the file ("" when there is no cache directory) */
    char json[4096];              /* the file's fields as JSON (what `kiln ceilings --json` prints) */
} kiln_ceilings;
kiln_status kiln_context_ceilings(kiln_context *ctx, int remeasure, kiln_ceilings *out);

/* One row of a profile: a kernel timed inside the CUDA-graph replay. */
typedef struct kiln_kernel_profile {
    const char *name;          /* the kernel (strings owned by the model until its next profile) */
    const char *kind;          /* "matmul", "attention", "row", ...; "memset", "other" for work
                                * that is not a Kiln kernel */
    const char *template_name; /* "gemv.cuh" */
    const char *constants;     /* "SPLITK=1 GEMV_COLS=8" */
    const char *lines;         /* the model lines of its ops: "32-36" */
    int group;                 /* kernel group (k<group>); < 0 for rows that are not Kiln kernels */
    int samples;               /* executions timed (one per replay) */
    double median_us, p10_us, p90_us;
    int64_t bytes;             /* compulsory bytes: read (inputs, weights, states, earlier kernels'
                                * buffers, each once) + written */
    int64_t flops;             /* matrix products, 2 per multiply-add */
    double tbps, tflops;       /* achieved at the median */
    double floor_us;           /* max(bytes / bandwidth, FLOPs / rate) */
    int flops_bound;           /* 1: the FLOPs roof binds */
    double pct_floor;          /* floor / median * 100 */
    double share;              /* median / the layer's median */
} kiln_kernel_profile;

typedef struct kiln_profile {
    int runs;                                  /* replays timed */
    int nkernels;
    const kiln_kernel_profile *kernels;        /* sorted by median time, longest first */
    double layer_median_us, layer_p10_us, layer_p90_us;       /* CUDA events around each replay */
    double bubbles_median_us, bubbles_p10_us, bubbles_p90_us; /* replay minus the union of its kernels */
    double layer_floor_us;                     /* the benchmark's: max((weights + attended KV) / bw,
                                                * FLOPs / rate) */
    int layer_flops_bound;
    int64_t layer_bytes, layer_flops;
    double sum_floor_us;                       /* the per-kernel floors summed (intermediates counted) */
    double peak_bw, peak_flops;                /* the ceilings used: bytes/s, FLOP/s */
    const char *text;                          /* the table, as `kiln run --profile` prints it */
} kiln_profile;

typedef struct kiln_profile_options {
    int runs;                  /* replays timed (0: 50), after a few untimed ones */
    double peak_bw;            /* bytes/s; > 0 instead of the measured read bandwidth */
    double peak_flops;         /* FLOP/s; > 0 instead of the measured tensor rate */
    const char *json_path;     /* also write the profile as JSON here (NULL: no) */
    const char *trace_path;    /* ... a Chrome trace (opens in Perfetto) */
    const char *roofline_path; /* ... a roofline SVG */
} kiln_profile_options;

/* Runs the model (as kiln_model_run: the states advance) a few times and then
 * opts->runs times back to back, timing every kernel inside the CUDA-graph
 * replay with CUPTI (loaded at run time: libcupti from the toolkit, or
 * $KILN_CUPTI_LIB; KILN_ERR_NOT_FOUND when it cannot be loaded). Costs use
 * the run's dims and the positions in the inputs. *out stays valid until the
 * model's next profile or its free. */
kiln_status kiln_model_profile(kiln_model *m, const kiln_dim *dims, int ndims, const kiln_tensor_arg *inputs,
                               int ninputs, const kiln_tensor_arg *outputs, int noutputs,
                               const kiln_profile_options *opts, kiln_profile *out);

/* ---- the fusion report ------------------------------------------------------------------ */

/* The compile's fusion report as JSON, as `kiln compile --report=FILE.json`
 * writes it: the kernels with their ops and why each was not fused into a
 * neighbour, every decision taken or refused (pass, rule, lines, bytes
 * saved) and the memory plan at the max dims. Owned by the model. */
const char *kiln_model_report_json(const kiln_model *m);

/* ---- DLPack --------------------------------------------------------------------------------- */

/* Tensors from any framework (PyTorch, CuPy, JAX) without copies, as DLPack
 * describes them (dlpack/dlpack.h: DLManagedTensor since DLPack 0.6,
 * DLManagedTensorVersioned since 1.0; include that header to fill them).
 * A tensor handed to Kiln is borrowed: Kiln reads its fields, never calls its
 * deleter, and the caller keeps it alive for as long as the call needs it
 * (a weight: until rebound or the model is freed). It must be CUDA memory
 * (kDLCUDA or kDLCUDAManaged) on the context's device, of the declared dtype
 * (f32, f16, bf16, i32), with the declared shape at the run's dims, and
 * compact row-major (strides NULL or those of a contiguous tensor). A tensor
 * Kiln hands out is the caller's: call its deleter when done. Versioned
 * entry points return KILN_ERR_INVALID_ARGUMENT in a library built against a
 * DLPack header without DLManagedTensorVersioned (Debian's 0.6). */
struct DLManagedTensor;
struct DLManagedTensorVersioned;

typedef struct kiln_dlpack_arg {
    const char *name;
    struct DLManagedTensor *tensor;             /* one of the two */
    struct DLManagedTensorVersioned *versioned;
} kiln_dlpack_arg;

/* kiln_model_run with DLPack tensors. dims NULL (ndims 0): each dim is read
 * from the tensors, from an axis declared as that dim alone (x : bf16[B, S,
 * D] gives B and S); a dim no tensor gives is an error. */
kiln_status kiln_model_run_dlpack(kiln_model *m, const kiln_dim *dims, int ndims, const kiln_dlpack_arg *inputs,
                                  int ninputs, const kiln_dlpack_arg *outputs, int noutputs, void *stream);
/* kiln_model_bind_weight_checked with the name, dtype, shape and memory of w. */
kiln_status kiln_model_bind_weight_dlpack(kiln_model *m, const kiln_dlpack_arg *w);
/* A state's device memory (at the max dims) as a DLPack tensor that views
 * it; valid while the model and its states live. */
kiln_status kiln_model_state_dlpack(kiln_model *m, const char *name, struct DLManagedTensor **out);
kiln_status kiln_model_state_dlpack_versioned(kiln_model *m, const char *name, struct DLManagedTensorVersioned **out);
/* New device memory (uninitialized) on the context's device as a DLPack
 * tensor; its deleter frees it (the context must still live then). */
kiln_status kiln_tensor_alloc_dlpack(kiln_context *ctx, kiln_dtype dtype, int rank, const int64_t *shape,
                                     struct DLManagedTensor **out);
kiln_status kiln_tensor_alloc_dlpack_versioned(kiln_context *ctx, kiln_dtype dtype, int rank, const int64_t *shape,
                                               struct DLManagedTensorVersioned **out);

/* ---- generation (issue 13) -------------------------------------------------------------
 * A whole model (samples/models/: dims B, S, T; inputs ids i32[B, S] and
 * pos i32[B]; one output logits bf16[B, 1, V], the last new token's) generates
 * tokens with the next token chosen on the GPU. */

typedef struct kiln_sampling {
    float temperature; /* <= 0: greedy (the highest logit; ties to the lower id) */
    int top_k;         /* candidates: 0 = 64, the most; larger values are clamped to 64 */
    float top_p;       /* in (0, 1): the smallest best-first set of the top_k candidates holding
                        * top_p of their probability (top-p over the top-k set, not the whole
                        * vocabulary); otherwise off */
    uint64_t seed;     /* the random stream of row r draws hash(seed, r, draw number) */
} kiln_sampling;

/* The sampler on its own: rows of logits (bf16, vocab per row, device) in,
 * one token per row (i32, device) out. Per-CTA partial top-k over slices of the
 * vocabulary, then one combine per row; the random state lives in device memory
 * and advances on the device. max_rows: the most rows per call. */
typedef struct kiln_sampler kiln_sampler;
kiln_status kiln_sampler_create(kiln_model *m, const kiln_sampling *s, int max_rows, kiln_sampler **out);
/* stream NULL: the context's (where kiln_model_run runs with a NULL stream). */
kiln_status kiln_sampler_run(kiln_sampler *s, const void *logits, int rows, void *ids_out, void *stream);
void kiln_sampler_free(kiln_sampler *s); /* NULL-safe */
/* A sampler of a model compiled with head_sample computes the LM head too:
 * hidden is the model's output head_in (bf16 [rows, D], device); logits_out
 * (bf16 [rows, V]) is written only when not NULL. kiln_sampler_run is for
 * the others. */
kiln_status kiln_sampler_run_head(kiln_sampler *s, const void *hidden, int rows, void *ids_out, void *logits_out,
                                  void *stream);

typedef struct kiln_generate_options {
    kiln_sampling sampling;
    int max_new;                /* new tokens per sequence, at most */
    const int32_t *stop_ids;    /* a sequence ends after one of these (EOS and the user's) */
    int nstop;
    int prefill_chunk;          /* prompt tokens per prefill call (0: the whole prompt, at most max S) */
    const int *buckets;         /* batch sizes calls are padded to, ascending (NULL: 1, 2, 4, 8,
                                 * 16, 32), within the model's max B */
    int nbuckets;
    const char *ids_name, *pos_name, *logits_name; /* NULL: "ids", "pos", "logits" (with head_sample:
                                 * "head_in") */
    int max_live;               /* kiln_generate: sequences running at once (0: the model's max B);
                                 * kiln_server_create: slots to serve (0: max B) */
    kiln_model *packed;         /* NULL, or the same model compiled packed (kiln_model_options.packed;
                                 * the same file, defines and weights; max B at least the model's):
                                 * joining prompts are prefilled in packed calls, all lengths
                                 * together (README "Packed prefill"); it runs on the model's KV
                                 * caches (no kiln_model_alloc_states of its own) */
} kiln_generate_options;

typedef struct kiln_generate_stats {
    double ttft_ms;        /* from the call until every sequence's first new token exists */
    double decode_ms;      /* from then until the last token */
    int64_t new_tokens;    /* tokens returned, all sequences */
    double tokens_per_s;   /* (new_tokens - nseq) / decode time */
    int batch;             /* the batch size the calls ran with (the bucket) */
    int bucket_miss;       /* 1: nseq was over every bucket: the exact size ran */
    int prefill_calls, decode_steps;
} kiln_generate_stats;

/* Generate for nseq prompts (prompts[b]: lens[b] token ids) into out
 * (nseq x max_new, row b's first out_lens[b] valid, up to and including its
 * stop token). The model's states are zeroed first (each call is a new
 * generation). A serving loop over the slot table (kiln_server below): the
 * first max_live prompts join at once (one prefill per distinct prompt length,
 * in prefill_chunk pieces); each decode step is one S = 1 run of the running
 * sequences (a CUDA-graph replay of their batch bucket: positions advance on
 * the device) and the sampler's kernels; a sequence that finishes (max_new
 * tokens, or a stop token: checked every 16 steps) leaves, and the next prompt
 * joins in its slot while the others keep decoding. So nseq may exceed max B. */
kiln_status kiln_generate(kiln_model *m, int nseq, const int32_t *const *prompts, const int *lens,
                          const kiln_generate_options *opts, int32_t *out, int *out_lens,
                          kiln_generate_stats *stats);

/* Serving: sequences that join and leave a running batch. The model's KV
 * caches hold max B slots; a sequence's id is its slot. join prefills new
 * prompts into free slots (one prefill per distinct length; each sequence's
 * first token is sampled then) while the running ones keep their caches; step
 * decodes one token for every running sequence (one batch-bucket graph replay:
 * rows are mapped to slots by a slot table in device memory; padding rows get
 * free slots and write no live one); tokens reads a sequence's tokens so far
 * (a synchronization; *finished: max_new tokens or a stop token); leave frees
 * its slot for the next join. opts as kiln_generate's (max_new: tokens kept per
 * sequence, max_live: at most that many at once). The model's states are
 * zeroed when the server is created; the model runs with a slot table while
 * the server lives (use one server per model at a time). Errors: no free slot
 * (join of more prompts than free slots: nothing joins), a slot id that is
 * not running, a prompt longer than T - max_new + 1, an empty prompt or a
 * token outside the vocabulary. With temperature > 0 a sequence's random
 * stream depends on its batch row, so it draws differently than alone. */
typedef struct kiln_server kiln_server;
kiln_status kiln_server_create(kiln_model *m, const kiln_generate_options *opts, kiln_server **out);
kiln_status kiln_server_join(kiln_server *s, int n, const int32_t *const *prompts, const int *lens, int *seqs_out);
kiln_status kiln_server_step(kiln_server *s);
kiln_status kiln_server_tokens(kiln_server *s, int seq, int32_t *out, int cap, int *count, int *finished);
kiln_status kiln_server_leave(kiln_server *s, int seq);
int kiln_server_free_slots(const kiln_server *s); /* joins possible now */
void kiln_server_free(kiln_server *s);             /* NULL-safe */

/* Declarations go above this line: those below it are not exported. */
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
