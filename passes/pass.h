/* passes/pass.h — the pass manager's contract, the fusion report, and the
 * helpers every pass shares.
 *
 * A pass takes ownership of a graph and returns the graph to use next: the
 * same one modified in place (fusion passes only annotate kernel groups), or
 * a rebuilt one (rewriting passes copy the graph through a pass_rewriter and
 * free the old one). On failure it returns NULL after freeing its input and
 * reporting into ctx->diags. The pipeline runs the verifier after each pass.
 *
 * Fusion decisions — taken or refused — go into the report with the rule
 * that decided them, the source lines involved and the HBM bytes saved. */
#ifndef KILN_PASS_H
#define KILN_PASS_H
#include <stdbool.h>
#include <stdio.h>

#include "ir/ir.h"
#include "passes/rules.def"

/* ---- fusion rules (passes/rules.def) --------------------------------------- */

typedef enum {
#define PASS_RULE_ENUM(e, name, summary) PASS_RULE_##e,
    PASS_RULES_ALL(PASS_RULE_ENUM)
#undef PASS_RULE_ENUM
    PASS_RULE_COUNT
} pass_rule;

const char *pass_rule_name(pass_rule r);    /* "epilogue-residual" */
const char *pass_rule_summary(pass_rule r); /* one line on what it does */

/* ---- the fusion report ---------------------------------------------------- */

typedef struct pass_decision {
    const char *pass;    /* the pass that decided */
    const char *rule;    /* the rule, e.g. "epilogue-residual" (a --disable name) */
    bool taken;
    const char *what;    /* "fuse add (line 24) into the epilogue of linear (line 24)" */
    const char *why;     /* taken: what it buys; refused: what blocks it, in words a user can act on */
    int lines[8];        /* source lines of the ops involved, ascending, unique */
    int nlines;
    ir_dim bytes;        /* HBM bytes per call saved (taken) or that would be saved (refused) */
} pass_decision;

typedef struct pass_report {
    arena arena;
    pass_decision *items;
    int count, cap;
} pass_report;

void pass_report_init(pass_report *r);
void pass_report_free(pass_report *r);

/* ---- analyses ---------------------------------------------------------------- */

/* Users of every node: users[id] lists the nodes that read it; is_output[id]
 * says whether it is a graph output or a state's new value. */
typedef struct pass_users {
    int **users;    /* users[id][0..count[id]) = user node ids, ascending */
    int *count;
    bool *is_output;
    int n;
} pass_users;
bool pass_users_build(pass_users *u, const ir_graph *g);
void pass_users_free(pass_users *u);
/* bind[id] is true for nodes computed from weights and constants only:
 * done once when weights are bound. malloc'd, g->nnodes entries. */
bool *pass_bind_time(const ir_graph *g);

/* The analyses passes and codegen share, computed on demand and cached for
 * one graph. The pass manager owns the ones in a pass_ctx: it drops them when
 * a pass returns a rebuilt graph, and when the pipeline ends. Fusion passes
 * only annotate kernel groups, which neither analysis reads, so the ones
 * computed by a fusion pass serve the next. Zero-initialized = empty. */
typedef struct pass_analyses {
    const ir_graph *g; /* the graph they describe; NULL when none is cached */
    int nnodes;
    bool have_users;
    pass_users users;
    bool *bind;
} pass_analyses;

/* The users / bind-time flags of g (cached); NULL when out of memory. */
const pass_users *pass_analyses_users(pass_analyses *an, const ir_graph *g);
const bool *pass_analyses_bind_time(pass_analyses *an, const ir_graph *g);
/* Drops what is cached. */
void pass_analyses_clear(pass_analyses *an);

/* ---- options and context --------------------------------------------------- */

typedef struct pass_options {
    const char *const *disabled; /* pass or rule names (--disable=NAME) */
    int ndisabled;
    const char *const *enabled;  /* rules that are off by default, turned on (--enable=NAME) */
    int nenabled;
    const char *print_after;     /* --print-ir-after=PASS */
    const char *print_before;    /* --print-ir-before=PASS */
    bool print_after_all;        /* --print-ir-after-all */
    FILE *dump;                  /* where IR dumps go (stderr when NULL) */
    bool decode_variant;         /* the graph is planned for the decode variants only (the
                                  * driver's choice by the decode rule: src/compile.c);
                                  * false: the large-shape (prefill) variant, any dims */
    bool decode_batched;         /* with decode_variant: only the decode variants of at least
                                  * CG_DECODE_BATCHED_ROWS query rows in all (batched decode),
                                  * where RoPE and the cache write go to decode attention */
} pass_options;

typedef struct pass_ctx {
    const pass_options *opts;
    pass_report *report;         /* may be NULL */
    diag_list *diags;
    const char *pass;            /* the pass now running (set by the pipeline) */
    pass_analyses analyses;      /* owned by the pass manager (pass_run_one) */
    bool size_overflow;          /* a size did not fit (pass_size): reported; the pass fails */
} pass_ctx;

/* What a pass asks of the pass manager: the users and bind-time flags of g,
 * cached in ctx; NULL when out of memory (the pass reports it). */
static inline const pass_users *pass_users_of(pass_ctx *ctx, const ir_graph *g)
{
    return pass_analyses_users(&ctx->analyses, g);
}
static inline const bool *pass_bind_time_of(pass_ctx *ctx, const ir_graph *g)
{
    return pass_analyses_bind_time(&ctx->analyses, g);
}

typedef ir_graph *(*pass_fn)(ir_graph *g, pass_ctx *ctx);

typedef struct pass_info {
    const char *name;
    pass_fn run;
    const char *summary;
    const char *const *rules;    /* NULL-terminated rule names it decides with; may be NULL */
    bool required;               /* cannot be disabled (planning) */
} pass_info;

/* The pipeline, in order (passes/pipeline.c). */
const pass_info *pass_pipeline(int *count);
/* Is this a known pass or rule name? */
bool pass_name_known(const char *name);
/* Checks the options (unknown names, disabling a required pass); reports
 * into d and returns false on a problem. */
bool pass_options_check(const pass_options *o, diag_list *d);
/* Runs every pass in order, with the verifier after each. Consumes g.
 * Drops ctx's cached analyses at the end. */
ir_graph *pass_run_pipeline(ir_graph *g, pass_ctx *ctx);
/* Runs one pass (enabled or not: the caller decides) and the verifier after
 * it; drops the cached analyses when the pass rebuilt the graph. Consumes g.
 * A caller that runs passes one by one calls pass_analyses_clear at the end. */
ir_graph *pass_run_one(const pass_info *p, ir_graph *g, pass_ctx *ctx);
/* Is the pass of this name enabled (not named by --disable)? */
bool pass_enabled(const pass_ctx *ctx, const char *pass);
/* Is the rule off unless named by --enable (pass_rule_off_by_default)? */
bool pass_rule_off_by_default(pass_rule rule);
/* Is the rule (or the pass running it) enabled? */
bool pass_rule_enabled(const pass_ctx *ctx, pass_rule rule);
/* Does --enable name the rule (on in every variant, where a rule decides per
 * variant: epilogue-head-norm)? */
bool pass_rule_named_enabled(const pass_ctx *ctx, pass_rule rule);

/* Records a decision. nodes: the ops involved (their lines are collected). */
void pass_decide(pass_ctx *ctx, const ir_graph *g, pass_rule rule, bool taken, ir_dim bytes,
                 ir_node *const *nodes, int nnodes, const char *what, const char *why_fmt, ...)
    __attribute__((format(printf, 9, 10)));

/* ---- helpers ------------------------------------------------------------- */

/* How a pass that annotates g in place ends: g, or — when !ok — NULL after
 * reporting "out of memory" and freeing g. */
ir_graph *pass_done(ir_graph *g, pass_ctx *ctx, bool ok);

/* k times the bytes of n's result (numel * dtype size), symbolic. A size
 * that does not fit in 64 bits is a located error: reported once at n's line
 * into ctx->diags, and the pass manager fails the pass (the size is 0 until
 * then, never used). */
ir_dim pass_size(pass_ctx *ctx, const ir_node *n, int64_t k);
/* a + b, two sizes about n, by the same rule. */
ir_dim pass_size_sum(pass_ctx *ctx, const ir_node *n, ir_dim a, ir_dim b);
/* a and b have equal attributes (every field of ir_attrs; perm up to a's rank). */
bool pass_attrs_eq(const ir_node *a, const ir_node *b);

/* A phrase like "t7 has 2 consumers (lines 14, 19)" for refusals. */
const char *pass_describe_consumers(arena *a, const ir_graph *g, const pass_users *u, const ir_node *n);
/* "add (line 24)" */
const char *pass_describe(arena *a, const ir_node *n);

/* RESHAPE, PERMUTE and SLICE: read through indexing by the consuming
 * kernel, never a kernel of their own unless they are a model output. */
bool pass_is_view(const ir_node *n);
/* Rebuilding a graph: copy nodes in order, rewriting some on the way. */
typedef struct pass_rewriter {
    const ir_graph *src;
    ir_graph *dst;
    ir_node **map; /* src node id -> node in dst */
    pass_ctx *ctx;
} pass_rewriter;

/* Reports into ctx->diags. */
bool pass_rw_begin(pass_rewriter *rw, const ir_graph *src, pass_ctx *ctx);
/* Copies n over its mapped inputs; records the mapping. */
ir_node *pass_rw_copy(pass_rewriter *rw, const ir_node *n);
/* The dst node standing for src node n. */
static inline ir_node *pass_rw_get(const pass_rewriter *rw, const ir_node *n) { return rw->map[n->id]; }
/* Maps outputs and state updates into dst; frees the rewriter and src
 * (ownership passes to the result) and drops ctx's cached analyses, which
 * described src. NULL (both graphs freed) on failure. */
ir_graph *pass_rw_finish(pass_rewriter *rw, ir_graph *src);
void pass_rw_abort(pass_rewriter *rw);

/* ---- the passes (one file each) --------------------------------------------- */
ir_graph *pass_canonicalize(ir_graph *g, pass_ctx *ctx);
/* Not in the pipeline: the packed form of a model as written (passes/pack_sequences.c;
 * the driver runs it first when the model is compiled packed). Frees g; NULL with
 * errors in d. */
ir_graph *pass_pack_sequences(ir_graph *g, diag_list *d);
ir_graph *pass_raise(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_dce(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_cse(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fold_norm_gain(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_merge_linears(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fuse_epilogue(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fuse_residual_norm(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fuse_qkv_epilogue(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fuse_attention(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fuse_moe(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fuse_elementwise(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_plan_kernels(ir_graph *g, pass_ctx *ctx);
ir_graph *pass_fold_norm_gemv(ir_graph *g, pass_ctx *ctx);

/* ---- memory plan (passes/plan_memory.c) ----------------------------------------
 * Every value that crosses from one kernel to another gets a buffer in one
 * arena of intermediates. Buffers whose lifetimes (first writer .. last
 * reader, in kernel order) do not overlap share memory; an elementwise or row
 * kernel may write its output over an input of the same size that it reads
 * for the last time (in place). Model outputs live in the caller's buffers,
 * a state's new value in the state itself (cache writes are in place), and
 * bind-time values (packed weights) with the weights. */

typedef struct pass_buffer {
    const ir_node *value; /* the node whose result the buffer holds */
    int first, last;      /* kernels: the writer, the last reader */
    int64_t bytes, offset;
} pass_buffer;

typedef struct pass_memplan {
    pass_buffer *bufs;
    int nbufs;
    int64_t peak;          /* bytes of the intermediates arena */
    int64_t total;         /* what they would take without reuse */
    int64_t packed;        /* bytes of bind-time values (packed weights) */
} pass_memplan;

/* dims: a value per graph symbol (may be NULL when every dim is a number).
 * Returns 0, or -1 with a message naming the unbound dims, or — when a size
 * does not fit in 64 bits — one located at the model line of the value. */
int pass_plan_memory(const ir_graph *g, const int64_t *dims, pass_memplan *mp, char *err, size_t errlen);
void pass_memplan_free(pass_memplan *mp);
void pass_memplan_print(const ir_graph *g, const pass_memplan *mp, FILE *out);

/* ---- the report, rendered (passes/report.c) --------------------------------------- */

/* The kernels in execution order, one line each: kind, anchor, fused ops. */
void pass_kernels_print(const ir_graph *g, FILE *out);
/* For people: kernels, then every decision with its rule, lines and bytes. */
void pass_report_print(const pass_report *r, const ir_graph *g, FILE *out);
/* A graph a set of variants plans with its own pass decisions (the compile
 * driver's decode and batched decode variants: src/compile.c): its name
 * ("decode"), when a variant takes it, its report and graph. */
typedef struct pass_report_variant {
    const char *name, *when;
    const pass_report *report;
    const ir_graph *graph;
} pass_report_variant;
/* v's kernels and the decisions of v's report that base lacks. */
void pass_report_print_variant(const pass_report *base, const pass_report_variant *v, FILE *out);
/* For tools: the same as JSON (jansson), with the kernels and differing
 * decisions of each of v[0..nv) under "variant_graphs" when nv > 0. mp may be
 * NULL. Returns 0 or -1 with a message. */
int pass_report_write_json(const pass_report *r, const ir_graph *g, const pass_memplan *mp,
                           const pass_report_variant *v, int nv, const char *path, char *err, size_t errlen);
/* The same JSON as text (malloc'd; NULL when out of memory). */
char *pass_report_json_text(const pass_report *r, const ir_graph *g, const pass_memplan *mp,
                            const pass_report_variant *v, int nv);
/* Kernel k as the report names it: "rmsnorm 'h' (line 31) + add". */
const char *pass_kernel_describe(arena *a, const ir_graph *g, int k);
/* The fused graph for Graphviz (`kiln compile --emit=dot`, passes/report_dot.c):
 * a cluster per kernel, edges between kernels labelled with the bytes they
 * carry at the bound dims, and each refused fusion of r a dashed red edge
 * labelled with its rule and reason. */
void pass_report_dot(const pass_report *r, const ir_graph *g, FILE *out);
/* "12.0 MiB" for a number of bytes; "8192*B*S bytes" when symbolic. */
const char *pass_bytes_str(arena *a, const ir_graph *g, const ir_dim *bytes);

/* ---- translation validation (passes/validate.c) ----------------------------- */

typedef struct pass_validation {
    double max_rel_err;     /* largest ||a - b|| / ||a|| over outputs and states */
    const char *worst;      /* name of that output or state (static storage of graph a) */
    int compared;           /* outputs + states compared */
} pass_validation;

/* Runs `before` and `after` on the same random inputs (seeded) for the
 * given dims and compares every output and state by name. i32 inputs get
 * values valid for their uses (positions fit the cache, ids fit the table).
 * Returns 0, or -1 with a message (interpreter error, interface mismatch). */
/* Exclusive upper bound for the values of i32 parameter p at these dims:
 * a position p needs p + S <= T where attention or cache_write reads it, an
 * id must be below the embedding table's rows; `unlimited` when nothing
 * limits it. */
int64_t pass_i32_bound(const ir_graph *g, const ir_node *p, const int64_t *dims, int64_t unlimited);

/* The error to accept between a model and its compiled form: 1e-4 for f32
 * graphs; 3e-2 when bf16/f16 values are stored (a fused op rounds once where
 * the primitives rounded at every step). */
double pass_validate_tolerance(const ir_graph *g);
int pass_validate(const ir_graph *before, const ir_graph *after, const int64_t *dims, uint64_t seed,
                  pass_validation *res, char *err, size_t errlen);

#endif
