/* codegen/cg.h — kernel groups to CUDA C++ source text.
 *
 * For each kernel group of a planned graph (passes/plan_kernels.c) codegen
 * produces one translation unit, in this order (codegen/kernels/CONTRACT.md):
 *
 *   common.cuh            types, loads/stores, math helpers
 *   the generated part    #defines (KILN_KERNEL, KILN_T, tiles...), the
 *                         KilnArgs struct, the family's __device__ hooks
 *   the family template   codegen/kernels/<family>.cuh, the __global__ kernel
 *                         (attention: attention_common.cuh, then the template;
 *                         cg_family_templates lists the files)
 *
 * plus what the runtime needs to run it: the kernel name, the family, the
 * launch rule (grid/block/shared memory as functions of the model's dims) and
 * the KilnArgs fields in order with what each one binds to. Codegen never
 * calls CUDA; it produces text. NVRTC compiles it (runtime/rt_nvrtc.h).
 *
 * Everything is deterministic: the same graph gives byte-identical text, so
 * the text is its own cache key.
 *
 * KilnArgs layout: every field is 8 bytes (a device pointer or a long long),
 * field i at byte offset 8*i; args_size = 8*nargs. The runtime fills a byte
 * buffer of that size and launches with it as the single kernel parameter
 * (matmul_wgmma: after the tensor maps it encodes, cg_kernel.param_prefix). */
#ifndef KILN_CG_H
#define KILN_CG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"

typedef enum cg_family {
    CG_FAMILY_ELEMENTWISE,      /* elementwise.cuh: elementwise, gather, copy, cache-write, fallbacks */
    CG_FAMILY_ROW,              /* row.cuh: norms, softmax, last-axis reductions */
    CG_FAMILY_MATMUL,           /* matmul_mma.cuh: tensor cores (mma.sync), large M */
    CG_FAMILY_GEMV,             /* gemv.cuh: small M, split-K */
    CG_FAMILY_ATTENTION_PREFILL,/* attention_prefill.cuh */
    CG_FAMILY_ATTENTION_DECODE, /* attention_decode.cuh: split-KV */
    CG_FAMILY_MATMUL_WGMMA,     /* matmul_wgmma.cuh: Hopper (sm_90a) wgmma + TMA, large M */
    CG_FAMILY_ATTENTION_WGMMA,  /* attention_wgmma.cuh: Hopper (sm_90a) prefill, wgmma + TMA */
    CG_FAMILY_MOE,              /* moe.cuh: the router and the grouped expert matmul (cg_moe.c) */
    CG_FAMILY_GEMV_MMA,         /* gemv.cuh + gemv_mma.cuh: 17..64 rows, tensor-core GEMV, split-K */
} cg_family;

const char *cg_family_name(cg_family f);     /* "elementwise", "row", "matmul", ... */
const char *cg_family_template(cg_family f); /* "elementwise.cuh", ... */
/* The template files that follow the generated part in f's translation unit,
 * in order, NULL-terminated; the last is cg_family_template(f). Everything
 * that assembles a unit (codegen, tests) goes through this list:
 *   common.cuh | generated part | cg_family_templates(f)[0] | [1] ... */
const char *const *cg_family_templates(cg_family f);

/* RoPE with frequency scaling (codegen/cg_rope.c). The table of
 * ir_rope_inv_freq as "DECL double NAME[HD/2] = {...};" with %.17g values
 * (the device reads the host's doubles exactly); snprintf-style: returns the
 * length (buf may be NULL), -1 when out of memory. */
int cg_rope_table(char *buf, size_t n, const char *decl, const char *name, double theta, const ir_rope_attrs *r,
                  int64_t hd);
/* The same frequencies in turns (f / 2 pi) as "DECL float2 NAME[R/2] = {...};",
 * each split in a float and the float of its remainder ({hi, lo}), for a
 * rotation in float arithmetic: frac(p * (hi + lo)) with fmaf keeps the
 * angle of a position below 2^24 to about 1e-7 of a turn (the QKV epilogue,
 * where a double per element would cost registers the accumulators hold). */
int cg_rope_turns_table(char *buf, size_t n, const char *decl, const char *name, double theta, const ir_rope_attrs *r,
                        int64_t hd);
/* What the attention templates read for a scaled rope on load: KILN_ROPE_TABLE,
 * KILN_ROPE_MSCALE (YaRN's attention factor) and the table kiln_rope_inv. */
int cg_attention_rope_source(char *buf, size_t n, double theta, const ir_rope_attrs *r, int64_t hd);

/* The most rows (the product of a linear's leading dims) a GEMV serves
 * (gemv.cuh) on targets other than sm_90a (cg_gemv_max_rows); more take the
 * tensor-core templates. Also the "decode" bound of decode attention's query
 * rows on every target (README, "The decode rule"). */
#define CG_GEMV_MAX_ROWS 16
/* On sm_90a the most rows a linear takes the GEMV at: above, the Hopper matmul's skinny tiles are faster (README, "The
 * decode rule"). Other targets keep the GEMV to CG_GEMV_MAX_ROWS. */
#define CG_GEMV_HOPPER_MAX_ROWS 2
/* On sm_90a the most rows at which a norm is folded into the linears that read
 * it: the GEMV up to CG_GEMV_HOPPER_MAX_ROWS, above it (from the next bound,
 * and not into a QKV epilogue: cg_norm_folded) the Hopper matmul's skinny tiles (matmul_wgmma.cuh KILN_MATMUL_NORM: the sums of squares from
 * the A tiles in shared memory; its mma.sync fallback reads them from memory).
 * Larger row counts keep the row kernel. Other targets fold where the GEMV
 * runs (CG_GEMV_MAX_ROWS). */
#define CG_NORM_FOLD_HOPPER_MAX_ROWS 64
/* ... and from this many rows: from 3 to 16 rows the skinny tiles with the
 * sums of squares were slower than with the norm's kernel (README, "The
 * decode rule"), so there the norm keeps its kernel. */
#define CG_NORM_FOLD_HOPPER_MIN_ROWS 17
/* KILN_CG_WG_EVEN (codegen/cg_family.c, wg_even_pick): at skinny M with one row block, the tile width
 * of matmul_wgmma.cuh's that spreads the weight's column blocks evenly over the SMs. Bit 0: codegen
 * takes it where it leaves the busiest SM fewer weight columns to stream than the configuration
 * otherwise chosen (the 8B layer at B = 32: QKV 64x48 and gate/up 64x224, 128 tiles each, against
 * 96 CTAs and 224 tiles); bit 1: also where it leaves as many but the other splits K (the 8B O and
 * down 64x32 unsplit against 64x64 split 2 in a cluster); bit 2: `--autotune` times it among the
 * skinny candidates. A build-time knob, off until those kernels have run on a GPU and been timed
 * (bench/device/call_probe.sh; docs/MATMUL.md, "The W stream at skinny M"). */
#ifndef KILN_CG_WG_EVEN
#define KILN_CG_WG_EVEN 0
#endif
/* The most rows the tensor-core GEMV (gemv_mma.cuh) serves (from 17). Above:
 * the Hopper / mma.sync templates. 16 (no rows): gemv_mma.cuh is not routed, because on the H200 it
 * reads the weights slower than the skinny wgmma configuration at every
 * projection of the Llama layers from 17 to 64 rows (README, "Matmul table");
 * 64 routes it (its tests pass, tests/gpu/test_gpu_matmul). */
#define CG_GEMV_MMA_MAX_ROWS 16

/* The warps of a decode attention CTA that take keys (attention_decode.cuh: KILN_DEC_WARPS,
 * 16 keys each of a tile) at head dim hd, and the CTA's threads (KILN_ATT_THREADS) for bkv
 * (sequences times KV heads; <= 0: not known): at a small batch extra warps that issue loads
 * and combine, as cg_gen_attention launches it. */
int cg_attention_decode_warps(int64_t hd);
int cg_attention_decode_threads(int64_t hd, int64_t bkv);
/* The grid's splits of a decode attention (KILN_SPLITS) for b sequences of kv KV heads on
 * sm_count SMs: the kernel uses at most that many, fewer on a short cache. */
int cg_attention_decode_splits(int64_t b, int64_t kv, int sm_count);

/* A decode attention kernel's shape (attention_decode.cuh's KILN_SPLITS, KILN_DEC_CLUSTER,
 * KILN_DEC_WARPS, KILN_ATT_THREADS, KILN_DEC_STAGES, KILN_DEC_MINKEYS, KILN_DEC_QSMEM,
 * KILN_DEC_PUSH). cluster 1: partials through the workspace, the last CTA combines; cluster ==
 * splits: the splits of a (KV head, sequence) are one thread-block cluster combining in
 * distributed shared memory (no workspace): push 0, two cluster barriers around a combine
 * spread over the CTAs; push P > 0 (the query rows per KV head, G*S <= P), the CTAs push their
 * partials into the leader's shared memory and the leader alone combines. */
typedef struct cg_att_decode_cfg {
    int splits, cluster, warps, threads, stages, minkeys, qsmem, push;
    int cols; /* with push: 1, one softmax per key tile for the CTA and P V split by columns (KILN_DEC_COLS) */
} cg_att_decode_cfg;
/* The shape codegen launches for b sequences of kv KV heads at head dim hd with a cache of t
 * rows (<= 0: not known) and rows query rows per KV head and sequence (G*S; <= 0: not known)
 * on sm_count SMs with smem_limit bytes of shared memory per CTA; clusters: the target has
 * thread-block clusters (sm_90). b or kv <= 0: not known. */
cg_att_decode_cfg cg_attention_decode_config(int64_t b, int64_t kv, int64_t hd, int64_t t, int64_t rows,
                                             int sm_count, int64_t smem_limit, bool clusters);
/* Its dynamic shared memory in bytes (attention_decode.cuh's formula; 0 without a cluster and
 * a ring of at most 47 KB: static shared memory only, else KILN_DEC_DYNSMEM). */
int64_t cg_attention_decode_smem(const cg_att_decode_cfg *c, int64_t hd);

/* What one KilnArgs field binds to. */
typedef enum cg_arg_kind {
    CG_ARG_PARAM,        /* pointer: model parameter g->params[index] (input, weight, state) */
    CG_ARG_OUTPUT,       /* pointer: the caller's buffer of g->outputs[index] */
    CG_ARG_STATE,        /* pointer: the buffer of state g->states[index] (its new value is
                          * written in place: cache writes) */
    CG_ARG_PACKED,       /* pointer: a bind-time value (merged / interleaved weights), node */
    CG_ARG_INTERMEDIATE, /* pointer: the memory plan's buffer for node (pass_buffer.value) */
    CG_ARG_WORKSPACE,    /* pointer: scratch of `dim` bytes (evaluated at run time) */
    CG_ARG_SCALAR,       /* long long: the value of `dim` for the run's dims */
    CG_ARG_NULL,         /* pointer: always NULL (an optional operand this group lacks) */
    CG_ARG_SLOTS,        /* const int *: the run's slot table (slot[b]: the state row of batch
                          * row b), NULL when the run has none (row b is state row b); field
                          * "slot", read through kiln_slot (common.cuh) by every access of a
                          * state's rows: cache writes and attention */
    CG_ARG_SEQS,         /* const int *: a packed run's sequence table (field "cu_q";
                          * kiln_seq_of, common.cuh): int32 cu[0..N], then the sequence of
                          * each packed token; read by the packed ops (ir/ir.h, "Packed
                          * sequences"); a packed model runs only with one */
} cg_arg_kind;

typedef struct cg_arg {
    cg_arg_kind kind;
    const char *field;  /* KilnArgs field name */
    const char *ctype;  /* its CUDA type, e.g. "const __nv_bfloat16 *", "long long" */
    int node;           /* pointer kinds but WORKSPACE: the node whose storage it is (-1 else) */
    int index;          /* PARAM / OUTPUT / STATE: the index; else -1 */
    bool written;       /* pointer: the kernel stores through it */
    bool zeroed;        /* WORKSPACE: must hold zeros when the kernel starts */
    ir_dim dim;         /* SCALAR: value; WORKSPACE: bytes */
    ir_dim elem_offset; /* pointer kinds: the field points this many elements
                         * past the start of the storage (a slice read in place) */
    size_t offset;      /* byte offset in KilnArgs (8 * position) */
} cg_arg;

/* One grid dimension: min(ceil(n / div) * ceil(n2 / div2), cap); the second
 * factor only when div2 > 0 (a persistent grid over a 2-D tile space);
 * cap 0 = no cap. */
typedef struct cg_grid_dim {
    ir_dim n;
    int64_t div;
    int64_t cap;
    ir_dim n2;
    int64_t div2;
} cg_grid_dim;

typedef struct cg_launch {
    cg_grid_dim grid[3];
    int block;          /* threads per CTA */
    int64_t smem;       /* dynamic shared memory bytes */
    int cluster;        /* CTAs per thread-block cluster fixed by the kernel (__cluster_dims__),
                         * 0: none; above 8 the runtime allows non-portable cluster sizes */
    bool cluster_y;     /* ... along y (matmul_wgmma's split-K in a cluster), else along x */
} cg_launch;

/* A bind-time layout change the runtime must apply to a packed value before
 * this kernel reads it. INTERLEAVE_ROWS: rows of the value (axis 0, `half`*2
 * rows) are reordered so that new row 2j = old row j and new row 2j+1 = old
 * row half+j (SwiGLU: gate and up columns side by side in one output tile).
 * ROPE_PAIRS: in each of `heads` blocks of rows starting at row off + h *
 * stride, the first `rot` rows are reordered so that new row 2i = old row i
 * and new row 2i+1 = old row rot/2 + i (a rotation pair of RoPE side by side:
 * the QKV epilogue rotates adjacent output columns); other rows stay. */
typedef enum cg_xform_kind { CG_XFORM_INTERLEAVE_ROWS, CG_XFORM_ROPE_PAIRS } cg_xform_kind;
typedef struct cg_xform {
    cg_xform_kind kind;
    int node;           /* the packed (bind-time) value, or a weight parameter */
    ir_dim half;        /* INTERLEAVE_ROWS */
    int64_t off, stride, heads, rot; /* ROPE_PAIRS */
} cg_xform;

/* A TMA tensor map the runtime encodes into the kernel's parameter when it
 * records a launch (matmul_wgmma.cuh: A, W; attention_wgmma.cuh: q, k, v;
 * runtime/rt_tmap.h): a K-major operand
 * of `batch` matrices of rows x K elements, row r of batch b at
 * base + b*batch_stride + r*ld, where base is the pointer the runtime put in
 * KilnArgs field `arg` (offsets applied). The dims evaluate with the call's
 * dims (ir_dim_value). Map i sits at byte 128*i of the parameter. OUT: the
 * output of the TMA-store epilogue (K = its row length, 64 x 64 boxes). */
/* CG_TMAP_RES: the epilogue's residual, read by TMA (matmul_wgmma.cuh KILN_WGMMA_RES_TMA) */
typedef enum cg_tmap_operand { CG_TMAP_A, CG_TMAP_W, CG_TMAP_Q, CG_TMAP_K, CG_TMAP_V, CG_TMAP_OUT, CG_TMAP_RES } cg_tmap_operand;
typedef struct cg_tmap {
    cg_tmap_operand operand;
    int arg;            /* index in cg_kernel.args of the base pointer */
    ir_dtype dtype;     /* IR_BF16 or IR_F16 */
    ir_dim K, rows, ld, batch, batch_stride; /* elements */
    int box_rows;       /* rows per TMA box: BM (A), BN / cluster size (W), 64 (OUT) */
    bool state_rows;    /* a state (a KV cache): `batch` evaluates at the model's max dims, the
                         * rows the state is allocated with, since a slot table may address
                         * any of them */
} cg_tmap;

#define CG_MAX_TMAPS 5 /* matmul_wgmma: A, W, output (QKV epilogue: q, two caches); attention_wgmma: q, k, v */

/* A configuration of the Hopper matmul template (matmul_wgmma.cuh): tile
 * bm x bn, ring stages, ping-pong consumers (pp), output columns staged by
 * the TMA-store epilogue at a time (ec; unused without it), split-K factor. */
typedef struct cg_wg_choice {
    int bm, bn, stages, pp, ec, split;
    /* the implementation: CG_IMPL_TEMPLATE (the configuration above) or
     * CG_IMPL_CUBLASLT (the fields above unused) */
    int impl;
    /* a stored choice (rt_tuner_lookup): its time and the best time of the
     * other implementation (cuBLASLt's for a template choice, the best
     * template configuration's for cuBLASLt), microseconds; 0: not measured */
    double us, other_us;
} cg_wg_choice;
#define CG_IMPL_TEMPLATE 0
#define CG_IMPL_CUBLASLT 1
#define CG_MAX_TUNE_CANDS 10 /* the template's configurations (one slot fewer) and cuBLASLt */

/* cuBLASLt as an implementation of a matmul kernel (codegen/cg_lt.c,
 * runtime/rt_cublaslt.h). A matmul whose whole epilogue cuBLASLt expresses
 * is a candidate that autotuning times beside the Hopper template's
 * configurations: bf16 or f16 operands of one type and an output of that
 * type, W as [N, K] or [K, N] with a contiguous axis, batched strides, and
 * an epilogue of at most a bias (the linear's, [N] contiguous, the output's
 * type), a residual added as beta * C (C: a stored tensor of the output's
 * shape, type and contiguous layout) and then one activation (ReLU, or GELU
 * in its tanh form: cuBLASLt's GELU). Anything else (SwiGLU, the QKV
 * rope/cache-write epilogue, a folded norm, another op, an activation
 * before the residual) is not: `why` says which (cg_lt_why_text). Dims are
 * elements, cuBLASLt's column-major view of the row-major operands is the
 * runtime's (rt_cublaslt.c). */
typedef enum cg_lt_act { CG_LT_ACT_NONE, CG_LT_ACT_RELU, CG_LT_ACT_GELU_TANH } cg_lt_act;
typedef enum cg_lt_why {
    CG_LT_OK = 0,        /* a candidate */
    CG_LT_NOT_TUNED,     /* not a Hopper-template matmul (autotuning times only those) */
    CG_LT_DTYPE,         /* operands not bf16/f16 of one type, or an output of another type */
    CG_LT_SWIGLU,
    CG_LT_QKV,           /* the rope / cache-write epilogue */
    CG_LT_NORM,          /* a folded RMSNorm */
    CG_LT_OUTPUTS,       /* more than one output, or an intermediate used outside */
    CG_LT_OP,            /* an epilogue op cuBLASLt has no form of (cg_lt.op) */
    CG_LT_GELU_ERF,      /* GELU in its erf form (cuBLASLt's is the tanh form) */
    CG_LT_ACT_ORDER,     /* a residual added after the activation (cuBLASLt adds C before it) */
    CG_LT_LAYOUT,        /* a bias, residual or output layout cuBLASLt cannot take */
    CG_LT_FIELDS,        /* an operand has no pointer field of its own */
} cg_lt_why;
typedef struct cg_lt {
    cg_lt_why why;
    int op;              /* CG_LT_OP: the ir_op */
    bool chosen;         /* the tuner chose it: the runtime launches cuBLASLt, not the kernel */
    bool f16, b_nk, bias, residual;
    cg_lt_act act;
    int a_arg, w_arg, bias_arg, res_arg, out_arg, ws_arg; /* indices in cg_kernel.args, -1: none */
    ir_dim M, N, K, batch, lda, ldw, sa, sw; /* elements; the output and C: ld N, batch stride M*N */
    double us, other_us; /* a stored choice's times (cg_wg_choice.us, other_us); 0: not measured */
} cg_lt;
/* The bytes of workspace a cuBLASLt matmul gets (the kernel's "lt_ws" field). */
#define CG_LT_WORKSPACE (32 * 1024 * 1024)
/* The epilogue cuBLASLt would run, "bias+gelu_tanh", "none" (for the text). */
const char *cg_lt_epilogue_name(const cg_lt *lt, char *buf, size_t n);

typedef struct cg_kernel {
    int group;              /* index in g->groups */
    const char *kind;       /* the group's kind ("matmul", "row", ...) */
    cg_family family;
    const char *name;       /* kiln_<model>_k<group>_<kind> */
    const char *source;     /* the whole translation unit, NUL-terminated */
    size_t source_len;
    const char *generated;  /* the generated part alone (for tests and --emit) */
    const char *note;       /* why a fallback was taken, or NULL */
    cg_arg *args;
    int nargs;
    size_t args_size;       /* bytes of KilnArgs: 8 * nargs */
    /* The kernel's one by-value parameter: KilnArgs alone (param_prefix 0,
     * param_size args_size), or for matmul_wgmma KilnTmaArgs = {ntmaps
     * tensor maps, KilnArgs}: KilnArgs at byte param_prefix (384), the whole
     * rounded up to 64 bytes. */
    size_t param_prefix, param_size;
    cg_tmap tmaps[CG_MAX_TMAPS];
    int ntmaps;
    /* The template and its configuration, for reports and introspection:
     * "wgmma 128x256 s4", "mma.sync 128x128x32 s3", "gemv 8 cols split-k 4";
     * NULL for families with no configuration to name. */
    const char *config;
    /* matmul_wgmma, autotuning (runtime/rt_autotune.h): the problem this
     * kernel's configuration answers ("matmul_wgmma bf16 M=sym N=6144 K=4096
     * batch=1 out=tma swiglu=0 heavy=0"), NULL for kernels with nothing to
     * tune; its rows (M times batch, to evaluate at the dims it is timed at);
     * the configurations worth timing, [0] the heuristic's; whether
     * cg_options.tune chose this kernel's configuration. */
    const char *tune_problem;
    ir_dim tune_rows;
    cg_wg_choice tune_cands[CG_MAX_TUNE_CANDS];
    int ntune_cands;
    bool tuned;
    /* matmul kernels: cuBLASLt as an implementation (a candidate or why not;
     * lt.chosen: the runtime launches cuBLASLt instead of this kernel) */
    cg_lt lt;
    const char *lt_note;    /* matmul kernels: cg_lt_text's line (which implementation, and why); else NULL */
    /* matmul_wgmma: the same group as a matmul_mma kernel (same KilnArgs
     * fields in the same order), launched instead when an operand is not
     * TMA-describable at run time (rt_tmap_describable: a base pointer not
     * 16-byte aligned). NULL for every other kernel. */
    struct cg_kernel *fallback;
    cg_launch launch;
    /* The template waits on the kernel before it (kiln_pdl_wait, common.cuh) before it
     * touches memory an earlier kernel may write, so the runtime may launch it with
     * programmatic stream serialization (sm_90+): gemv, row, elementwise, decode
     * attention and the Hopper matmul (its mma.sync fallback is not). The other
     * templates launch after the previous kernel has finished. */
    bool pdl;
    cg_xform *xforms;       /* bind-time layout changes of this kernel's weights */
    int nxforms;
    void *priv_;            /* storage; freed by cg_kernel_free */
    /* (a new pointer field: runtime/rt_plan_cache.c writes and reads it) */
} cg_kernel;

/* Why k is or is not a cuBLASLt candidate, and which implementation runs, as
 * one line ("cublasLt: chosen by timing (X us vs the template's Y us)",
 * "cublasLt: not a candidate: the epilogue holds SwiGLU", ...) into buf;
 * NULL for a kernel that is not a matmul. */
const char *cg_lt_text(const cg_kernel *k, char *buf, size_t n);

/* The GPU a kernel is generated for. Launch rules and heuristics size
 * themselves from it (the elementwise grid cap, the GEMV's split-K, the
 * decode attention's split-KV count); codegen never asks CUDA for it. The
 * compile driver (src/compile.h) passes the device's numbers
 * (rt_ctx_target) when there is a device, else cg_target_default(arch). */
typedef struct cg_target {
    char arch[32];          /* "sm_90a" */
    int sm_count;           /* streaming multiprocessors */
    int64_t smem_per_block; /* opt-in maximum of dynamic shared memory per block, bytes */
    int64_t l2_bytes;       /* L2 cache, bytes */
} cg_target;

/* The most rows a linear takes the GEMV at on target t (CG_GEMV_HOPPER_MAX_ROWS
 * on sm_90a, else CG_GEMV_MAX_ROWS). */
int cg_gemv_max_rows(const cg_target *t);
/* The most rows at which a norm is folded into the linears that read it on
 * target t (CG_NORM_FOLD_HOPPER_MAX_ROWS on sm_90a, else CG_GEMV_MAX_ROWS). */
int cg_norm_fold_max_rows(const cg_target *t);
/* The decode rule for attention (CG_GEMV_MAX_ROWS; never a packed attention): split-KV decode attention
 * takes at most that many query rows per sequence. */
bool cg_attention_is_decode(const ir_node *attention, const int64_t *dims);
/* Is a variant of g at dims (NULL: any dims) a decode variant: g has an
 * attention and each one's query rows per sequence are decode rows at those
 * dims (cg_attention_is_decode)? The compile driver plans such variants with
 * their own pass decisions (src/compile.c). */
bool cg_decode_variant(const ir_graph *g, const int64_t *dims);
/* Batched decode: a decode variant of at least this many query rows in all (B x S of the
 * attention's q) takes a graph of its own where RoPE and the cache write are done by decode
 * attention instead of the QKV projection's epilogue (pass_options.decode_batched; README,
 * "RoPE and the cache write in decode attention at B > 1": measured faster from 4 rows up,
 * 0.6-1.3 us slower at one). */
#define CG_DECODE_BATCHED_ROWS 4
/* The query rows in all (B x S of each attention's q, the largest) of a decode variant of g at
 * dims, into *rows; false when g has no attention or a value is not known at dims. */
bool cg_decode_rows(const ir_graph *g, const int64_t *dims, int64_t *rows);

/* The documented default description for arch (NULL: "sm_90a"), used in CI
 * and by `kiln compile` without a GPU:
 *   sm_90, sm_90a  NVIDIA H200 (an H100 has the same SMs and shared memory):
 *                  132 SMs, 232448 B of opt-in shared memory per block
 *                  (227 KiB), 60 MiB of L2
 *   sm_80          NVIDIA A100: 108 SMs, 166912 B (163 KiB), 40 MiB of L2
 *   any other      the sm_90a numbers, with arch set to the name given */
void cg_target_default(const char *arch, cg_target *out);

/* The archs Kiln generates kernels for (the templates need sm_80's
 * mma.sync, ldmatrix and cp.async; sm_90a adds wgmma and TMA), as one line:
 * "sm_80, sm_86, ...". cg_target_known says whether arch is one of them. */
const char *cg_target_archs(void);
bool cg_target_known(const char *arch);

/* Options; NULL means the defaults. */
typedef struct cg_options {
    /* Autotuning: asked for the configuration of each matmul_wgmma kernel by
     * its problem (cg_kernel.tune_problem); true with *out set: use it (an
     * illegal one is ignored: the heuristic's stands); NULL: the heuristic. */
    bool (*tune)(void *user, const char *problem, cg_wg_choice *out);
    void *tune_user;
    /* Values of the model's dims (g->nsyms of them) for the launch shapes
     * this variant serves, or NULL: the large-shape variant (tensor-core
     * matmul, prefill attention) where a dim is symbolic. With values, small
     * shapes pick the GEMV and decode templates (see cg_heuristics in
     * cg_emit.c). */
    const int64_t *dims;
    /* The GPU; NULL: cg_target_default("sm_90a"). */
    const cg_target *target;
    /* Look up a template's text by file name before the built-in ones
     * (tests use it to supply stubs); may be NULL or return NULL. */
    const char *(*template_lookup)(void *user, const char *name);
    void *template_user;
} cg_options;

/* Emits kernel group k of g (a graph after the whole pipeline: groups
 * planned). Returns 0, or -1 with a message in err (out is then empty). */
int cg_emit_kernel(const ir_graph *g, int k, cg_kernel *out, char *err, size_t errlen);
int cg_emit_kernel_ex(const ir_graph *g, int k, const cg_options *opts, cg_kernel *out, char *err,
                      size_t errlen);
void cg_kernel_free(cg_kernel *k);
/* bytes of storage owned by k and freed with it by cg_kernel_free, for a
 * kernel built from a stored description rather than emitted (the plan
 * cache, runtime/rt_plan_cache.h); NULL when out of memory. */
void *cg_kernel_storage(cg_kernel *k, size_t bytes);

/* Every group, in kernel order: *out is a malloc'd array of *n kernels,
 * freed with cg_kernels_free. Returns 0, or -1 with a message in err. */
int cg_emit_all(const ir_graph *g, cg_kernel **out, int *n, char *err, size_t errlen);
int cg_emit_all_ex(const ir_graph *g, const cg_options *opts, cg_kernel **out, int *n, char *err,
                   size_t errlen);
void cg_kernels_free(cg_kernel *ks, int n);
/* One "warning: kernel kN (...) runs the generic ... template ...: REASON" line
 * per kernel of g that falls back to the generic template (codegen/cg_report.c),
 * for the reports. Returns how many, or -1 (codegen failed; err says why). */
int cg_fallbacks_print(const ir_graph *g, const cg_options *opts, FILE *out, char *err, size_t errlen);
/* That line for one kernel of g (the runtime prints those of the variant a
 * run uses); returns 1, or 0 when k is on its family's template. */
int cg_fallback_print(const ir_graph *g, const cg_kernel *k, FILE *out);
/* The copies of weights the runtime makes when they are bound, for g's
 * kernels: each packed value a kernel reads (merged Q/K/V, transposes) and
 * each weight read with its rows interleaved, once per (value, layout), as
 * the runtime keys them. Sets *bytes (at dims, NULL when all constant) and
 * prints one "  bind-time copy: ..." line each to out (may be NULL).
 * Returns how many, or -1 (err says why). */
int cg_bind_copies(const ir_graph *g, const cg_options *opts, const int64_t *dims, int64_t *bytes, FILE *out,
                   char *err, size_t errlen);

/* The launch shape for concrete dims (g->nsyms values). False (with a
 * message) when a dim does not evaluate or a grid dimension exceeds CUDA's
 * limits. */
bool cg_launch_eval(const cg_kernel *k, const int64_t *dims, unsigned grid[3], unsigned *block,
                    size_t *smem, char *err, size_t errlen);
/* The value of a SCALAR or WORKSPACE argument for concrete dims. */
bool cg_arg_eval(const cg_arg *a, const int64_t *dims, int64_t *value);
/* "matmul (wgmma 128x256 s4)": the family and the configuration, into buf. */
const char *cg_kernel_label(const cg_kernel *k, char *buf, size_t n);

/* `kiln compile --emit=cuda -o DIR`: writes DIR/<name>.cu for every kernel
 * and every fallback (DIR must exist) and DIR/kernels.txt listing, per kernel, its family,
 * launch rule and arguments. Returns the number of kernels written, or -1
 * with a message. opts may be NULL. */
int cg_write_sources(const ir_graph *g, const char *dir, const cg_options *opts, char *err,
                     size_t errlen);
/* The description written to kernels.txt, for one kernel. */
void cg_kernel_describe(const ir_graph *g, const cg_kernel *k, FILE *out);

/* Built-in template text (codegen/kernels/<name>, embedded at build time),
 * or NULL. */
const char *cg_template_text(const char *name);

#endif
