/* src/compile.h — the compile driver: the one place that turns model text
 * into what the runtime runs.
 *
 *   text ─front end─▶ graph as written ─passes─▶ fused graph ─▶ memory plan
 *        ─▶ fusion report ─▶ codegen of each shape variant ─▶ rt_plan
 *
 * The C API (src/kiln.c) calls kc_compile_model; the command line
 * (tools/kiln.c, tools/kiln_run.c) opens a kc_unit and takes the steps it
 * needs (dumps, reports, kernels written to a directory). Nobody else calls
 * the front end, the passes or codegen's emitters: the runtime receives an
 * rt_plan (runtime/rt_plan.h) and, for shape variants it plans lazily, the
 * planner this driver hands it (the rule: runtime/rt_variant.c).
 *
 * Codegen gets a target description (cg_target): the device's
 * (rt_ctx_target) when the model is compiled for a context with a device,
 * else cg_target_default for the arch (codegen/cg.h lists the defaults).
 *
 * Status codes are the runtime's rt_status (runtime/rt_err.h: the public
 * kiln_status values). Diagnostics (errors and warnings with their source lines) are
 * printed to the unit's diag_out when it has one; without, a failing step
 * renders them into its err buffer and the warnings of steps that succeed
 * are kept (kc_compile_model hands them out). Units share nothing: threads may
 * compile at once. */
#ifndef KILN_SRC_COMPILE_H
#define KILN_SRC_COMPILE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/cg.h"
#include "ir/ir.h"
#include "runtime/rt_autotune.h"
#include "runtime/rt_cache.h"
#include "runtime/rt_emit.h"
#include "runtime/rt_model.h"
#include "util/diag.h"

typedef struct kc_define {
    const char *name;  /* a `dims` symbol to bind, or a `const` to override */
    const char *value; /* text of a number */
} kc_define;

typedef struct kc_options {
    const char *name;            /* the file to read when text is NULL; else the name diagnostics show */
    const char *text;
    const kc_define *defines;
    int ndefines;
    const char *const *disabled; /* passes or rules to turn off (`kiln passes`) */
    int ndisabled;
    const char *const *enabled;  /* rules that are off by default to turn on (--enable) */
    int nenabled;
    const char *print_before, *print_after; /* IR dumps (--print-ir-*), to dump */
    bool print_after_all;
    FILE *dump;                  /* NULL: stderr */
    bool report;                 /* collect the fusion report (--explain, --report) */
    bool keep_written;           /* keep the graph as written next to the fused one (--verify) */
    diag_options warnings;       /* -Werror, -Wno-NAME (zero: every warning on, none an error) */
    bool head_sample;            /* the LM head goes to the fused sampler: the output that is
                                  * linear(x, W) of a weight W [V, D] becomes output head_in = x
                                  * (the plan names W: rt_plan.head_weight) */
    bool packed;                 /* the model's packed form (passes/pack_sequences.c): the
                                  * prompts of a run concatenated along one token axis */
} kc_options;

/* One model going through the driver. */
typedef struct kc_unit kc_unit;

/* Reads the source (RT_ERR_IO when unreadable). o is copied; its strings
 * must outlive the unit. diag_out may be NULL. */
rt_status kc_open(const kc_options *o, FILE *diag_out, kc_unit **out, char *err, size_t n);
void kc_free(kc_unit *u);

/* `--emit=ast`: the syntax tree to out (RT_ERR_MODEL on syntax errors). */
rt_status kc_dump_ast(kc_unit *u, FILE *out, char *err, size_t n);
/* Parses, lowers and verifies: the graph as written (RT_ERR_MODEL with
 * diagnostics; RT_ERR_INTERNAL when the verifier rejects it). */
rt_status kc_parse(kc_unit *u, char *err, size_t n);
/* Runs the pass pipeline (RT_ERR_INVALID for bad --disable names,
 * RT_ERR_INTERNAL when a pass fails). */
rt_status kc_fuse(kc_unit *u, char *err, size_t n);
/* Plans memory at max_dims (NULL: every dim must be a number); the plan's
 * packed bytes are the weight copies the runtime makes at bind time
 * (cg_bind_copies). max_dims must outlive the unit. */
rt_status kc_plan_memory(kc_unit *u, const int64_t *max_dims, char *err, size_t n);

/* The graph as written (after kc_parse; after kc_fuse only with
 * keep_written) and the fused graph (after kc_fuse). NULL when absent. */
const ir_graph *kc_written(const kc_unit *u);
const ir_graph *kc_fused(const kc_unit *u);

/* The kernels, a warning for each on the generic template (with the
 * template's reason), the template each kernel instantiates for target (NULL:
 * cg_target_default(NULL)), the memory plan and each bind-time weight copy
 * (after kc_plan_memory). */
void kc_print_plan(const kc_unit *u, const cg_target *target, FILE *out);
/* The device memory the plan states (its "device memory at the max dims"
 * line): the large-shape variant for target (NULL: the default) at the max
 * dims; rt_model_memory says the same of a model made from the plan. */
rt_status kc_memory(const kc_unit *u, const cg_target *target, rt_memory *out, char *err, size_t n);
/* The template section alone: per kernel group its family and
 * configuration, e.g. "k1   matmul (wgmma 128x256 s4), mma.sync fallback"
 * (the large-shape variant, or the dims' constants when the model has none). */
void kc_print_templates(const kc_unit *u, const cg_target *target, FILE *out);
/* The fusion report (kc_options.report): for people (with the generic-
 * template warnings), and as JSON (with the memory plan when there is one). */
void kc_print_report(const kc_unit *u, FILE *out);
/* `--emit=dot`: the fused graph with the report's refusals for Graphviz
 * (passes/report_dot.c). */
void kc_print_dot(const kc_unit *u, FILE *out);
rt_status kc_write_report_json(const kc_unit *u, const char *path, char *err, size_t n);

/* `--verify`: the interpreter on the graph as written and the fused graph,
 * on the same random inputs at dims. */
typedef struct kc_validation {
    int compared;       /* outputs and states */
    double max_rel_err;
    const char *worst;  /* the output or state with it */
    double tolerance;   /* what the model's dtypes allow */
} kc_validation;
rt_status kc_validate(const kc_unit *u, const int64_t *dims, kc_validation *res, char *err, size_t n);

/* The target for kernels compiled for arch (NULL: sm_90a) by a tool: the
 * device's when there is one of that arch, else cg_target_default(arch). */
void kc_tool_target(const char *arch, cg_target *out);
/* `--emit=cuda`: DIR/<kernel>.cu and DIR/kernels.txt (the large-shape
 * variant). Returns the number of kernels, or -1 with a message. */
int kc_write_sources(const kc_unit *u, const char *dir, const cg_target *target, char *err, size_t n);
/* `--emit=ptx|cubin`: the large-shape variant's kernels compiled and
 * written (runtime/rt_emit.h). Returns the number of kernels, or -1, or
 * RT_EMIT_ERR_WRITE when a file could not be written (none are left). */
int kc_write_compiled(const kc_unit *u, const char *dir, const cg_target *target, const rt_emit_options *o,
                      rt_emit_result *res, char *err, size_t n);

/* `kiln cache why`: for each kernel of the large-shape variant (and each
 * fallback) compiled with copts, "hit" or the key input that changed
 * against the nearest cache entry of the same kernel, one line each to out;
 * *misses counts the kernels not in the cache. */
rt_status kc_cache_why(const kc_unit *u, const cg_target *target, rt_cache *cache, const rt_compile_opts *copts,
                       FILE *out, int *misses, char *err, size_t n);

/* `kiln passes`: the pipeline, its passes and rules, in order. */
void kc_print_passes(FILE *out);
/* For `kiln run`: the exclusive bound of valid values of i32 parameter p
 * of g at dims (`unlimited` where nothing bounds it), and the error a
 * compiled model may have against g. */
int64_t kc_i32_bound(const ir_graph *g, const ir_node *p, const int64_t *dims, int64_t unlimited);
double kc_tolerance(const ir_graph *g);

/* ---- the whole way, for the C API ---- */

typedef struct kc_model_options {
    kc_options compile;          /* report, dumps and keep_written are ignored */
    const rt_dim_value *max_dims;
    int nmax_dims;
    rt_model_config run;
    char **report_json;          /* not NULL: receives the fusion report as JSON with the
                                  * memory plan (malloc'd; NULL when the compile fails) */
    bool autotune;               /* time the Hopper matmul's candidate configurations when a
                                  * variant is planned (runtime/rt_autotune.h), reuse stored ones */
    rt_tune_hooks tune_hooks;    /* tests: a fake timer and device (zero: the device) */
} kc_model_options;

/* Parses, fuses, plans memory at the max dims, plans the large-shape
 * variant with the context's target, and makes the runtime model, handing
 * it the planner for decode-shaped variants. On success *warnings (when
 * warnings is not NULL) is the text of the compile's warnings, as
 * `kiln check` prints them, malloc'd, or NULL when there were none;
 * compile.warnings chooses which (-Werror makes them errors: the compile
 * fails with them in err). */
rt_status kc_compile_model(rt_ctx *ctx, const kc_model_options *o, rt_model **out, char **warnings, char *err,
                           size_t n);

#endif
