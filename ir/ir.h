/* ir/ir.h — Kiln's intermediate representation.
 *
 * A graph is a list of nodes in topological (creation) order, owned by one
 * arena. Every node has exactly one result: a tensor type (dtype + shape of
 * symbolic dimension expressions). Ops that the language writes with several
 * results (split, cache_write of K and V) are lowered to one node per result.
 *
 * Semantics of every op (the interpreter in ir/interp.c is their definition in
 * code; docs/LANGUAGE.md is the user's copy):
 *
 *   INPUT/WEIGHT/STATE  a parameter of the model, named; STATE is persistent
 *                       and may be given a new value (graph->states).
 *   CONST               a scalar (rank 0) of attrs.value. Weakly typed: in a
 *                       binary op with a tensor it takes the tensor's dtype.
 *   CAUSAL_MASK         [Sq, Sk], m[i][j] = 0 if j <= i + (Sk - Sq), else -inf.
 *                       Weakly typed like CONST.
 *   ADD SUB MUL DIV MAX MIN POW   binary, numpy broadcasting (align trailing
 *                       axes; a dim of 1 stretches). Operands share a dtype.
 *   NEG EXP LOG SQRT RSQRT TANH SIGMOID RELU  the usual unary functions.
 *   SILU                x * sigmoid(x).
 *   GELU                attrs.gelu_tanh ? 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))
 *                                       : 0.5x(1+erf(x/sqrt 2)).
 *   CAST                convert to the result dtype (round to nearest even;
 *                       float -> i32 truncates toward zero).
 *   SUM MEAN REDUCE_MAX reduce over the axes in attrs.axes (bit i = axis i);
 *                       attrs.keepdim keeps them as size 1.
 *   SOFTMAX             along attrs.axis: exp(x - max) / sum(exp(x - max)).
 *   RMSNORM(x[, w])     over the last axis: x / sqrt(mean(x^2) + eps) * w,
 *                       w: [D]; without w (a gain folded into the weights
 *                       that read it, passes/fold_norm_gain.c) w = 1.
 *   LAYERNORM(x[, w[, b]]) over the last axis: (x - mean) / sqrt(var + eps) * w
 *                       + b, var the biased variance; no w: 1, no b: 0.
 *   MATMUL(a, b)        a [..., M, K] @ b [..., K, N] -> [..., M, N]; both rank
 *                       >= 2; batch axes broadcast.
 *   LINEAR(x, w[, b])   x [..., K], w [N, K] (PyTorch nn.Linear layout), b [N]
 *                       -> [..., N] = x @ w^T + b.
 *   RESHAPE             same elements, row-major, new shape (the result type).
 *   PERMUTE             out.dims[i] = in.dims[attrs.perm[i]].
 *   SLICE               along attrs.axis, elements [start, end).
 *   CONCAT              along attrs.axis; other axes equal.
 *   EMBEDDING(t, ids)   t [V, D], ids i32 [...] -> [..., D]: rows of t.
 *   ROPE(x[, pos])      x [B, S, N, HD], HD even, pos i32 [B]. Row x[b,s,n,:]
 *                       sits at position p = pos[b] + s (p = s without pos).
 *                       Rotate-half (Llama): for i < HD/2,
 *                       f = theta^(-2i/HD), c = cos(p f), s = sin(p f),
 *                       out[i] = x[i] c - x[i+HD/2] s,
 *                       out[i+HD/2] = x[i+HD/2] c + x[i] s.
 *                       attrs.rope scales the frequencies (ir_rope_inv_freq:
 *                       linear, llama3, YaRN) and, for YaRN, multiplies both
 *                       outputs by attrs.rope.mscale. Partial rotary
 *                       (attrs.rope.rotary_dims = R < HD): the above with HD
 *                       replaced by R on x[..., :R]; x[..., R:] passes through.
 *   ATTENTION(q, k, v[, pos])  q [B, S, H, HD]; k, v [B, KV, T, HD] (cache
 *                       layout); H % KV == 0 and query head h reads KV head
 *                       h / (H / KV). Query s of batch b sits at position
 *                       o + s, o = pos[b] (o = T - S without pos). Keys j <
 *                       o + S are valid; with attrs.causal only j <= o + s.
 *                       softmax(q.k * attrs.scale) over valid keys, times v.
 *                       -> [B, S, H, HD]. o + S > T is a run-time error.
 *                       attrs.window = W > 0 (sliding window: Mistral v0.1,
 *                       Gemma-2): a key j is valid only when p - j < W, p =
 *                       o + s the query's position. attrs.softcap = C > 0
 *                       (Gemma-2's logit soft-capping): each scaled score x
 *                       becomes C tanh(x / C) before the softmax.
 *   CACHE_WRITE(c, x[, pos])  c [B, KV, T, HD], x [B, S, KV, HD]: the value of
 *                       c with c[b, h, o + s, :] = x[b, s, h, :], o = pos[b]
 *                       (0 without pos). o + S > T is a run-time error.
 *   Packed sequences (attrs.packed; passes/pack_sequences.c makes them): the
 *   tokens of N sequences concatenated along axis 1 of a [1, S, ...] value
 *   (no padding), sequence n being tokens cu[n] <= t < cu[n+1] of the run's
 *   table cu[0..N] (ir_interp_run_packed; cu[0] = 0, increasing, cu[N] = S).
 *   Token t of sequence n has the local index s = t - cu[n] and sits at
 *   position pos[n] + s (pos i32 [N]); so:
 *   ROPE packed         x [1, S, NH, HD], pos [N]: row t rotated at its position.
 *   CACHE_WRITE packed  c [N, KV, T, HD], x [1, S, KV, HD]: c[n, h, pos[n]+s, :]
 *                       = x[0, t, h, :] (pos[n] + len_n > T: an error).
 *   ATTENTION packed    q [1, S, H, HD], k, v [N, KV, T, HD]: query t of
 *                       sequence n attends to row n of k/v as a sequence of
 *                       len_n queries at offset pos[n] (no key of another
 *                       sequence; pos[n] + len_n > T: an error).
 *   SLICE packed        axis 1 of x [1, S, ...] -> [nseq, end - start, ...]:
 *                       row n is tokens [start, end) of sequence n, S in start
 *                       and end meaning len_n (start = S - 1: its last token).
 *   TOPK(x)             along the last axis (E), the attrs.topk largest values,
 *                       largest first, [..., k]; with attrs.indices their
 *                       indices (i32) instead. Equal values: the lower index
 *                       first (so the indices are a deterministic function).
 *   EXPERT_LINEAR(x, w, idx)  w [E, N, K] (one nn.Linear weight per expert),
 *                       idx i32 [..., k] (the chosen experts): out [..., k, N],
 *                       out[..., j, :] = w[idx[..., j]] @ x_j, where x_j is
 *                       x[..., :] when x is [..., K] (every slot reads the
 *                       same row) or x[..., j, :] when x is [..., k, K]. An
 *                       index outside [0, E) is a run-time error.
 */
#ifndef KILN_IR_H
#define KILN_IR_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/arena.h"
#include "util/diag.h"

#define IR_MAX_RANK 8
#define IR_MAX_SYMS 16
#define IR_DIM_TERMS 6

/* ---- op table ---------------------------------------------------------- */

typedef enum {
#define IR_OP(e, name, lo, hi, cls, comm, kind, cuda) IR_OP_##e,
#include "ir/ops.def"
#undef IR_OP
    IR_OP_COUNT
} ir_op;

typedef enum {
    IR_CLASS_SOURCE,      /* parameters, constants, generated masks */
    IR_CLASS_ELEMENTWISE, /* out[i] = f(in[i]...) with broadcasting */
    IR_CLASS_BROADCAST,   /* reserved: pure broadcasts (none yet) */
    IR_CLASS_INJECTIVE,   /* each output element reads a few input elements */
    IR_CLASS_REDUCTION,
    IR_CLASS_MATMUL,
    IR_CLASS_ATTENTION,
    IR_CLASS_OPAQUE,
} ir_fusion_class;

/* The kinds of kernel group: which template family a kernel uses. */
typedef enum {
    IR_GROUP_ELEMENTWISE, /* a pure elementwise kernel */
    IR_GROUP_ROW,         /* a reduction (norm, softmax, sum) over rows, with prologue/epilogue */
    IR_GROUP_MATMUL,      /* a matmul with its epilogue */
    IR_GROUP_ATTENTION,   /* attention, with RoPE and the cache write fused */
    IR_GROUP_COPY,        /* a view (reshape, permute, slice) that must be materialized */
    IR_GROUP_GATHER,      /* concat, embedding, rope on their own */
    IR_GROUP_CACHE_WRITE, /* a KV-cache write on its own */
    IR_GROUP_KIND_COUNT
} ir_group_kind;

/* "elementwise", "row", "matmul", "attention", "copy", "gather", "cache-write" */
const char *ir_group_kind_name(ir_group_kind k);

const char *ir_op_name(ir_op op);
int ir_op_min_inputs(ir_op op);
int ir_op_max_inputs(ir_op op); /* -1 = variadic */
ir_fusion_class ir_op_class(ir_op op);
const char *ir_class_name(ir_fusion_class c);
/* op(a, b) == op(b, a) (add, mul, max, min). */
bool ir_op_commutative(ir_op op);
/* The kind of kernel op anchors when it is a kernel of its own. */
ir_group_kind ir_op_kernel_kind(ir_op op);
/* The CUDA expression of an elementwise op (a format, one %s per operand),
 * or NULL (see ir/ops.def). */
const char *ir_op_cuda(ir_op op);

/* ---- dtypes ------------------------------------------------------------ */

typedef enum { IR_F32, IR_F16, IR_BF16, IR_I32, IR_DTYPE_COUNT } ir_dtype;

const char *ir_dtype_name(ir_dtype t);
bool ir_dtype_parse(const char *s, ir_dtype *out);
int ir_dtype_size(ir_dtype t);
static inline bool ir_dtype_is_float(ir_dtype t) { return t != IR_I32; }

/* Round a float to the nearest bf16 / f16 value (round to nearest even). */
float ir_round_bf16(float x);
float ir_round_f16(float x);
float ir_round_to(ir_dtype t, float x);
/* Storage bits <-> float. The f32 -> bits direction rounds to nearest even
 * (so bits_to_f32(f32_to_bits(x)) == ir_round_*(x), overflow to inf, f16
 * subnormals kept); NaN becomes a quiet NaN (bf16: the top bits of x with
 * the quiet bit set; f16: 0x7e00). bits -> f32 is exact. */
uint16_t ir_f32_to_bf16_bits(float x);
float ir_bf16_bits_to_f32(uint16_t b);
uint16_t ir_f32_to_f16_bits(float x);
float ir_f16_bits_to_f32(uint16_t h);

/* ---- symbolic dimensions ----------------------------------------------- */

/* A dimension is a polynomial with integer coefficients over the model's
 * `dims` symbols, kept in a canonical form (terms sorted, like terms merged,
 * zero terms dropped) so that equal expressions compare equal. */
typedef struct ir_dim_term {
    int64_t coef;
    uint8_t exp[IR_MAX_SYMS]; /* exponent of each symbol */
} ir_dim_term;

typedef struct ir_dim {
    int nterms; /* 0 terms = the constant 0 */
    ir_dim_term t[IR_DIM_TERMS];
} ir_dim;

ir_dim ir_dim_const(int64_t v);
ir_dim ir_dim_sym(int sym);
/* Arithmetic; false when the result does not fit (too many terms, overflow)
 * or, for division, is not exact (divisor must divide every term). */
bool ir_dim_add(ir_dim a, ir_dim b, ir_dim *out);
bool ir_dim_sub(ir_dim a, ir_dim b, ir_dim *out);
bool ir_dim_mul(ir_dim a, ir_dim b, ir_dim *out);
bool ir_dim_div(ir_dim a, ir_dim b, ir_dim *out);
bool ir_dim_eq(const ir_dim *a, const ir_dim *b);
bool ir_dim_is_const(const ir_dim *a, int64_t *v);
/* Value for concrete symbol values; false on overflow. */
bool ir_dim_eval(const ir_dim *a, const int64_t *syms, int64_t *v);
/* The constant, or the value for these symbol values (syms may be NULL: then
 * only a constant has a value); false on overflow. */
bool ir_dim_value(const ir_dim *a, const int64_t *syms, int64_t *v);
/* Size arithmetic with one overflow rule: the first product or sum that
 * does not fit (ir_dim_mul/ir_dim_add fail) sets *overflow, and every later
 * one with *overflow set returns the constant 0 without computing. A caller
 * runs a whole computation and tests *overflow once, where it can say which
 * value of the model it was sizing (a located error, never a size of 0). */
ir_dim ir_dim_times(ir_dim a, ir_dim b, bool *overflow);
ir_dim ir_dim_plus(ir_dim a, ir_dim b, bool *overflow);
/* "B", "4096", "B*S", "S + T", "2*B*S". Returns chars written (snprintf). */
int ir_dim_print(const ir_dim *a, const char *const *syms, char *buf, size_t n);

/* ---- types --------------------------------------------------------------- */

typedef struct ir_type {
    ir_dtype dtype;
    int rank;
    ir_dim dims[IR_MAX_RANK];
} ir_type;

bool ir_type_eq(const ir_type *a, const ir_type *b);
/* Same rank and equal dims (the dtypes may differ). */
bool ir_type_same_shape(const ir_type *a, const ir_type *b);
/* The shape at these dims (dims may be NULL for a constant shape) and its
 * element count; shape and numel may be NULL. False when a dim does not
 * evaluate, is negative, or the count overflows int64. */
bool ir_type_shape_at(const ir_type *t, const int64_t *dims, int64_t *shape, int64_t *numel);
/* The same, saying what failed: IR_SHAPE_UNBOUND (dim *bad does not
 * evaluate: unbound or overflow), IR_SHAPE_NEGATIVE (dim *bad is negative),
 * IR_SHAPE_OVERFLOW (the element count; shape is complete). bad may be NULL. */
typedef enum { IR_SHAPE_OK, IR_SHAPE_UNBOUND, IR_SHAPE_NEGATIVE, IR_SHAPE_OVERFLOW } ir_shape_status;
ir_shape_status ir_type_eval_shape(const ir_type *t, const int64_t *dims, int64_t *shape, int64_t *numel, int *bad);
/* Elements of dims [from, to) and bytes (numel * dtype size) of t, by the
 * rule of ir_dim_times. */
ir_dim ir_type_numel(const ir_type *t, int from, int to, bool *overflow);
ir_dim ir_type_bytes(const ir_type *t, bool *overflow);
/* "bf16[B, S, 4096]" */
int ir_type_print(const ir_type *t, const char *const *syms, char *buf, size_t n);
int ir_shape_print(const ir_type *t, const char *const *syms, char *buf, size_t n);

/* ---- nodes and graphs ---------------------------------------------------- */

/* RoPE frequency scaling, as the `rope_scaling` of a Hugging Face config. */
typedef enum {
    IR_ROPE_NONE = 0, /* f_i = theta^(-2i/HD) */
    IR_ROPE_LINEAR,   /* f_i / factor (position interpolation) */
    IR_ROPE_LLAMA3,   /* Llama-3.1/3.2: low frequencies / factor, high kept, a smooth band between */
    IR_ROPE_YARN,     /* YaRN: a ramp between f_i / factor and f_i, outputs times mscale */
} ir_rope_scaling;

typedef struct ir_rope_attrs {
    ir_rope_scaling scaling;
    double factor;                            /* LINEAR, LLAMA3, YARN */
    double low_freq_factor, high_freq_factor; /* LLAMA3 */
    double original_max_pos;                  /* LLAMA3, YARN: the context the model was trained at */
    double beta_fast, beta_slow;              /* YARN: the ramp's ends, in rotations */
    bool no_truncate;                         /* YARN: keep the ramp's ends unrounded */
    double mscale;                            /* YARN: attention factor, resolved (1 otherwise) */
    int64_t rotary_dims;                      /* partial rotary (GPT-NeoX, Pythia, Phi-2): only the first
                                               * rotary_dims of each head rotate, by the frequencies of a
                                               * head that size; 0: every dim (the builder stores HD as 0) */
} ir_rope_attrs;

typedef struct ir_attrs {
    double value;     /* CONST */
    double eps;       /* RMSNORM, LAYERNORM */
    double theta;     /* ROPE */
    ir_rope_attrs rope; /* ROPE */
    double scale;     /* ATTENTION (always resolved, never 0) */
    bool causal;      /* ATTENTION */
    int64_t topk;     /* TOPK: how many */
    bool indices;     /* TOPK: the result is the indices (i32), not the values */
    int64_t window;   /* ATTENTION: sliding window, keys j with p - j < window (0: every key) */
    double softcap;   /* ATTENTION: scores become softcap * tanh(score / softcap) (0: none) */
    bool keepdim;     /* SUM, MEAN, REDUCE_MAX */
    bool gelu_tanh;   /* GELU */
    uint32_t axes;    /* SUM, MEAN, REDUCE_MAX: bit i = reduce axis i */
    int axis;         /* SOFTMAX, SLICE, CONCAT (non-negative) */
    int perm[IR_MAX_RANK]; /* PERMUTE */
    ir_dim start, end;     /* SLICE */
    bool packed;      /* ROPE, ATTENTION, CACHE_WRITE, SLICE: over packed sequences (below) */
    ir_dim nseq;      /* SLICE with packed: the number of sequences (its result's axis 0) */
} ir_attrs;

typedef struct ir_node ir_node;
struct ir_node {
    int id;          /* dense, creation order; printed as %id */
    ir_op op;
    int ninputs;
    ir_node **inputs;
    ir_type type;
    ir_attrs attrs;
    src_loc loc;      /* where in the model file it came from */
    const char *name; /* parameter name, or the variable it was assigned to; may be NULL */
    int param;        /* INPUT/WEIGHT/STATE: index in graph->params; else -1 */
    int group;        /* kernel group (graph->groups) after fusion; -1 = none */
};

typedef struct ir_output {
    const char *name;
    ir_node *value;
    src_loc loc;
} ir_output;

typedef struct ir_state_update {
    ir_node *state; /* the STATE parameter */
    ir_node *value; /* its value after the call */
    src_loc loc;
} ir_state_update;

/* A kernel group: the nodes one generated kernel computes. The anchor is
 * the op whose template the kernel uses (a matmul, attention, reduction, or
 * an elementwise op for a pure elementwise kernel); the other members are
 * its fused prologue and epilogue. Set by the fusion passes. */
typedef struct ir_group {
    ir_node *anchor;
    ir_group_kind kind;
    /* A row kernel of one RMSNorm whose consumers are all linears
     * (passes/fold_norm_gemv.c): in a variant where those linears are GEMVs
     * (at most CG_GEMV_MAX_ROWS rows) they normalize their input themselves
     * and this kernel is not launched. */
    bool fold_into_gemv;
} ir_group;

typedef struct ir_graph {
    arena arena;
    const char *name;
    src_loc loc;
    int nsyms;
    const char *syms[IR_MAX_SYMS];
    ir_node **nodes;
    int nnodes, cap_nodes;
    ir_node **params; /* INPUT, STATE and WEIGHT nodes in declaration order */
    int nparams, cap_params;
    ir_output *outputs;
    int noutputs, cap_outputs;
    ir_state_update *states;
    int nstates, cap_states;
    ir_group *groups;
    int ngroups, cap_groups;
    diag_list *diags; /* where the builder and verifier report; may be NULL */
    const char *file; /* the model file's name, owned by the arena (see ir_graph_loc) */
} ir_graph;

ir_graph *ir_graph_new(const char *name);
void ir_graph_free(ir_graph *g);
/* loc with its file name copied into g's arena, so that it outlives the
 * graph it came from (passes rebuild graphs and free the old ones). */
src_loc ir_graph_loc(ir_graph *g, src_loc loc);
/* Adds a `dims` symbol; returns its index or -1 (too many / duplicate). */
int ir_graph_add_sym(ir_graph *g, const char *name);
int ir_graph_find_sym(const ir_graph *g, const char *name);
int ir_graph_add_output(ir_graph *g, const char *name, ir_node *value, src_loc loc);
int ir_graph_set_state(ir_graph *g, ir_node *state, ir_node *value, src_loc loc);
/* Starts a kernel group anchored at `anchor` (which joins it); returns its
 * index or -1 when out of memory. */
int ir_graph_add_group(ir_graph *g, ir_node *anchor, ir_group_kind kind);
/* Drops group k, which no node may be in any more (its anchor moved to
 * another group); the groups after it move down by one, their nodes with them. */
void ir_graph_remove_group(ir_graph *g, int k);
/* Number of uses of each node (by other nodes, outputs and state updates);
 * `uses` has g->nnodes entries indexed by node id. */
void ir_graph_count_uses(const ir_graph *g, int *uses);

/* ---- builder --------------------------------------------------------------
 * Each constructor infers the result type. On a type or shape error it
 * reports a diagnostic at `loc` into g->diags and returns NULL; passing NULL
 * inputs returns NULL silently (an earlier error was reported). */

ir_node *ir_param(ir_graph *g, ir_op kind, const char *name, const ir_type *type, src_loc loc);
ir_node *ir_const(ir_graph *g, double value, ir_dtype dtype, src_loc loc);
ir_node *ir_causal_mask(ir_graph *g, ir_dim q, ir_dim k, ir_dtype dtype, src_loc loc);
ir_node *ir_unary(ir_graph *g, ir_op op, ir_node *x, src_loc loc);
ir_node *ir_gelu(ir_graph *g, ir_node *x, bool tanh_approx, src_loc loc);
ir_node *ir_binary(ir_graph *g, ir_op op, ir_node *a, ir_node *b, src_loc loc);
ir_node *ir_cast(ir_graph *g, ir_node *x, ir_dtype to, src_loc loc);
/* axes: bit mask over x's axes (already non-negative). */
ir_node *ir_reduce(ir_graph *g, ir_op op, ir_node *x, uint32_t axes, bool keepdim, src_loc loc);
ir_node *ir_softmax(ir_graph *g, ir_node *x, int axis, src_loc loc);
/* w may be NULL (no gain); a layernorm's b needs its w */
ir_node *ir_rmsnorm(ir_graph *g, ir_node *x, ir_node *w, double eps, src_loc loc);
ir_node *ir_layernorm(ir_graph *g, ir_node *x, ir_node *w, ir_node *b, double eps, src_loc loc);
ir_node *ir_matmul(ir_graph *g, ir_node *a, ir_node *b, src_loc loc);
ir_node *ir_linear(ir_graph *g, ir_node *x, ir_node *w, ir_node *bias, src_loc loc);
ir_node *ir_reshape(ir_graph *g, ir_node *x, int rank, const ir_dim *dims, src_loc loc);
ir_node *ir_permute(ir_graph *g, ir_node *x, const int *perm, src_loc loc);
ir_node *ir_slice(ir_graph *g, ir_node *x, int axis, ir_dim start, ir_dim end, src_loc loc);
ir_node *ir_concat(ir_graph *g, int n, ir_node *const *xs, int axis, src_loc loc);
ir_node *ir_embedding(ir_graph *g, ir_node *table, ir_node *ids, src_loc loc);
ir_node *ir_rope(ir_graph *g, ir_node *x, ir_node *pos, double theta, src_loc loc);
/* With frequency scaling (r may be NULL: none); r is checked (ir_rope_check). */
ir_node *ir_rope_scaled(ir_graph *g, ir_node *x, ir_node *pos, double theta, const ir_rope_attrs *r,
                        src_loc loc);

/* ---- RoPE frequencies (ir/rope.c) --------------------------------------------- */

/* "none", "linear", "llama3", "yarn"; NULL out of range. */
const char *ir_rope_scaling_name(ir_rope_scaling s);
bool ir_rope_scaling_parse(const char *name, ir_rope_scaling *out);
/* NULL when r is valid for its kind, else what is wrong (a static string). */
const char *ir_rope_check(const ir_rope_attrs *r);
bool ir_rope_attrs_eq(const ir_rope_attrs *a, const ir_rope_attrs *b);
/* The inverse frequency of every pair i < hd/2, in double: the one table
 * the interpreter and every kernel that applies RoPE use. */
void ir_rope_inv_freq(double theta, const ir_rope_attrs *r, int64_t hd, double *inv);
/* The dims of a head of hd that rotate (rotary_dims, or hd when 0); the
 * frequency table has ir_rope_dims / 2 entries, computed for a head of that size. */
int64_t ir_rope_dims(const ir_rope_attrs *r, int64_t hd);
/* The factor cos and sin are multiplied by (YaRN's attention factor; 1 otherwise). */
double ir_rope_mscale(const ir_rope_attrs *r);
/* YaRN's default attention factor for a scale factor and mscale:
 * 0.1 * mscale * ln(factor) + 1 (1 when factor <= 1). */
double ir_rope_yarn_mscale(double factor, double mscale);
/* scale <= 0 selects the default 1/sqrt(HD). */
ir_node *ir_attention(ir_graph *g, ir_node *q, ir_node *k, ir_node *v, ir_node *pos,
                      double scale, bool causal, src_loc loc);
/* With a sliding window (window > 0) and soft-capping (softcap > 0); 0, 0 is ir_attention. */
ir_node *ir_attention_ex(ir_graph *g, ir_node *q, ir_node *k, ir_node *v, ir_node *pos, double scale, bool causal,
                         int64_t window, double softcap, src_loc loc);
ir_node *ir_cache_write(ir_graph *g, ir_node *cache, ir_node *x, ir_node *pos, src_loc loc);
/* The k largest values of x along its last axis, or their indices. */
ir_node *ir_topk(ir_graph *g, ir_node *x, int64_t k, bool indices, src_loc loc);
ir_node *ir_expert_linear(ir_graph *g, ir_node *x, ir_node *w, ir_node *idx, src_loc loc);

/* A copy of n (op, attrs, name, location, and the declared part of its type)
 * over new inputs in g; the type is re-inferred. Passes rebuild graphs with
 * it. Parameters are copied by name and type. */
ir_node *ir_node_copy(ir_graph *g, const ir_node *n, ir_node *const *inputs);

/* Generic constructor used by passes and the verifier: checks arity and
 * infers the type from op, inputs and attrs. */
ir_node *ir_node_new(ir_graph *g, ir_op op, int ninputs, ir_node *const *inputs,
                     const ir_attrs *attrs, src_loc loc);
/* Infer the result type of op over inputs; false (with a diagnostic into
 * `d`, which may be NULL) when they do not fit. For RESHAPE/CAST/CONST/
 * CAUSAL_MASK and parameters, whose type is not a function of the inputs,
 * `out` must hold the declared type on entry and is only checked. */
bool ir_infer_type(const ir_graph *g, ir_op op, int ninputs, ir_node *const *inputs,
                   const ir_attrs *attrs, ir_type *out, diag_list *d, src_loc loc);

/* ---- verifier and printer ------------------------------------------------ */

/* Checks structure (ids, topological order, arity, uses of parameters) and
 * re-infers every type. Returns the number of problems found (reported into
 * d, which may be NULL). */
int ir_verify(const ir_graph *g, diag_list *d);

/* Stable text form, e.g.
 *   %5 = rmsnorm(%0, %1) {eps=1e-05} : bf16[B, S, 4096]   ; h  @12:6          */
void ir_print(const ir_graph *g, FILE *out);

/* ---- reference interpreter (ir/interp.c) --------------------------------- */

typedef struct ir_tensor {
    ir_dtype dtype;
    int rank;
    int64_t shape[IR_MAX_RANK];
    float *f;   /* float dtypes: values, already rounded to dtype */
    int32_t *i; /* IR_I32 */
} ir_tensor;

int64_t ir_tensor_numel(const ir_tensor *t);
/* Same rank and extents (the dtypes may differ). */
bool ir_tensor_same_shape(const ir_tensor *a, const ir_tensor *b);
/* Allocates zeroed storage; false on overflow or out of memory. */
bool ir_tensor_alloc(ir_tensor *t, ir_dtype dtype, int rank, const int64_t *shape);
void ir_tensor_free(ir_tensor *t);
/* ||ref - got|| / ||ref|| over all elements (f64; i32 values as numbers),
 * 0 when they are equal. Infinity when the shapes' rank or element count
 * differ, when one is NaN where the other is not, or when an infinity is not
 * matched by the same infinity (matched ones are skipped). */
double ir_tensor_rel_err(const ir_tensor *ref, const ir_tensor *got);

/* Runs g for the symbol values `dims` (g->nsyms of them).
 * params: one tensor per g->params, in order, with the shapes their declared
 *   types take at `dims` (checked). STATE tensors are overwritten with their
 *   new values when the graph updates them.
 * outputs: one per g->outputs; allocated here, freed by the caller with
 *   ir_tensor_free.
 * Float math is f32; reductions, matmuls and attention accumulate in f64;
 * every node's result is rounded to its dtype (bf16/f16 where the graph
 * stores them). Returns 0, or -1 with a message in err. */
int ir_interp_run(const ir_graph *g, const int64_t *dims, ir_tensor *params,
                  ir_tensor *outputs, char *err, size_t errlen);

/* ir_interp_run with a slot table (the runtime's rt_model_set_slots): each
 * STATE tensor holds any number of rows (its first axis; the other axes as at
 * dims), and batch row b of the run reads and writes its row slots[b] (nslots
 * = the dim of the states' first axis at dims, entries distinct and in range,
 * else an error); rows no slot names stay as they are. */
int ir_interp_run_slots(const ir_graph *g, const int64_t *dims, ir_tensor *params, const int32_t *slots, int nslots,
                        ir_tensor *outputs, char *err, size_t errlen);

/* A run of a packed graph (attrs.packed ops): cu[0..nseq] the sequences'
 * cumulative token offsets (cu[0] = 0, strictly increasing: no empty
 * sequence; cu[nseq] = the packed tokens, axis 1 of the packed values; nseq =
 * the sequences' dim, axis 0 of pos, the states and the packed slices), each
 * checked with an error naming the entry. slots: NULL, or the slot table of
 * ir_interp_run_slots (one slot per sequence). */
int ir_interp_run_packed(const ir_graph *g, const int64_t *dims, ir_tensor *params, const int32_t *cu, int nseq,
                         const int32_t *slots, ir_tensor *outputs, char *err, size_t errlen);

/* One element of an elementwise op exactly as the interpreter computes it
 * (constant folding, passes/canonicalize.c, uses the same code).
 * ir_eval_scalar: float math. a (and b, for ADD SUB MUL DIV MAX MIN POW) are
 * operand values as stored (f32/bf16/f16 values, or i32 values); b is ignored
 * by the unary ops (NEG EXP LOG SQRT RSQRT TANH SIGMOID SILU GELU RELU CAST;
 * GELU takes the tanh form when gelu_tanh). The math is f64 and *out the
 * result as dtype t stores it: rounded to f32 and then to bf16/f16, or
 * truncated and saturated to i32 (NaN -> 0). False (and *out NaN) for any
 * other op. i32 op i32 -> i32 arithmetic is ir_eval_i32's (and i32 NEG
 * wraps: 0u - x). */
bool ir_eval_scalar(ir_op op, bool gelu_tanh, double a, double b, ir_dtype t, double *out);
/* Binary i32 ops: wrap like two's complement, division truncates. NULL, or
 * the run-time error the interpreter reports ("integer division by zero",
 * "integer 0 raised to a negative power", "not a binary op"). */
const char *ir_eval_i32(ir_op op, int32_t a, int32_t b, int32_t *out);

#endif
