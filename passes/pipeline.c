/* passes/pipeline.c — the pipeline, spelled out in one list, and the
 * driver that runs it: the verifier after every pass, IR dumps before and
 * after passes on request, and --disable for passes and fusion rules. */
#include <string.h>

#include "passes/pass.h"

/* The rule names of each pass, from passes/rules.def. */
#define RULE_NAME(e, name, summary) name,
static const char *const rules_canonicalize[] = {PASS_RULES_CANONICALIZE(RULE_NAME) NULL};
static const char *const rules_raise[] = {PASS_RULES_RAISE(RULE_NAME) NULL};
static const char *const rules_norm_gain[] = {PASS_RULES_FOLD_NORM_GAIN(RULE_NAME) NULL};
static const char *const rules_merge[] = {PASS_RULES_MERGE_LINEARS(RULE_NAME) NULL};
static const char *const rules_epilogue[] = {PASS_RULES_FUSE_EPILOGUE(RULE_NAME) NULL};
static const char *const rules_residual_norm[] = {PASS_RULES_FUSE_RESIDUAL_NORM(RULE_NAME) NULL};
static const char *const rules_qkv_epilogue[] = {PASS_RULES_FUSE_QKV_EPILOGUE(RULE_NAME) NULL};
static const char *const rules_attention[] = {PASS_RULES_FUSE_ATTENTION(RULE_NAME) NULL};
static const char *const rules_moe[] = {PASS_RULES_FUSE_MOE(RULE_NAME) NULL};
static const char *const rules_elementwise[] = {PASS_RULES_FUSE_ELEMENTWISE(RULE_NAME) NULL};
static const char *const rules_fold_norm[] = {PASS_RULES_FOLD_NORM_GEMV(RULE_NAME) NULL};
#undef RULE_NAME

static const struct {
    const char *name, *summary;
} rule_table[PASS_RULE_COUNT] = {
#define RULE_ROW(e, name, summary) [PASS_RULE_##e] = {name, summary},
    PASS_RULES_ALL(RULE_ROW)
#undef RULE_ROW
};

const char *pass_rule_name(pass_rule r) { return (unsigned)r < PASS_RULE_COUNT ? rule_table[r].name : "?"; }
const char *pass_rule_summary(pass_rule r) { return (unsigned)r < PASS_RULE_COUNT ? rule_table[r].summary : "?"; }

/* The order matters: patterns are raised before anything is merged, merged
 * linears exist before epilogues are fused into them, and every fusion has
 * run before kernels are planned. */
static const pass_info pipeline[] = {
    {"canonicalize", pass_canonicalize, "fold constants, collapse reshape/permute chains, drop identities", rules_canonicalize, false},
    {"raise", pass_raise, "recognize rmsnorm, layernorm, softmax, attention, linear written with primitives", rules_raise, false},
    {"cse", pass_cse, "merge identical computations", NULL, false},
    {"dce", pass_dce, "drop values nothing uses", NULL, false},
    {"fold-norm-gain", pass_fold_norm_gain, "fold a norm's gain (and a LayerNorm's bias) into the weights of the linears that read it", rules_norm_gain, false},
    {"merge-linears", pass_merge_linears, "merge linears that share an input (Q/K/V, gate/up)", rules_merge, false},
    {"fuse-epilogue", pass_fuse_epilogue, "fuse bias, scale, activation, residual and SwiGLU into matmul epilogues", rules_epilogue, false},
    {"fuse-residual-norm", pass_fuse_residual_norm, "fuse a residual add and the norm after it into one row kernel", rules_residual_norm, false},
    {"fuse-qkv-epilogue", pass_fuse_qkv_epilogue, "rotate Q/K and write the KV cache in the QKV matmul's epilogue", rules_qkv_epilogue, false},
    {"fuse-attention", pass_fuse_attention, "fuse RoPE and the KV-cache write into attention", rules_attention, false},
    {"fuse-moe", pass_fuse_moe, "group the router, the gated expert FFN and the combine of a mixture of experts", rules_moe, false},
    {"fuse-elementwise", pass_fuse_elementwise, "fuse elementwise chains and reduction prologues/epilogues", rules_elementwise, false},
    {"plan-kernels", pass_plan_kernels, "group every remaining op into a kernel", NULL, true},
    {"fold-norm-gemv", pass_fold_norm_gemv, "mark RMSNorms that decode GEMVs compute as they load", rules_fold_norm, false},
};

const pass_info *pass_pipeline(int *count)
{
    *count = (int)(sizeof pipeline / sizeof pipeline[0]);
    return pipeline;
}

static const pass_info *find_pass_of_rule(const char *name, bool *is_pass)
{
    int n;
    const pass_info *p = pass_pipeline(&n);
    for (int i = 0; i < n; i++) {
        if (!strcmp(p[i].name, name)) {
            *is_pass = true;
            return &p[i];
        }
        for (const char *const *r = p[i].rules; r && *r; r++)
            if (!strcmp(*r, name)) {
                *is_pass = false;
                return &p[i];
            }
    }
    return NULL;
}

bool pass_name_known(const char *name)
{
    bool is_pass;
    return find_pass_of_rule(name, &is_pass) != NULL;
}

bool pass_options_check(const pass_options *o, diag_list *d)
{
    bool ok = true;
    const char *names[] = {o->print_after, o->print_before};
    for (int i = 0; i < 2; i++) {
        bool is_pass = false;
        if (names[i] && (!find_pass_of_rule(names[i], &is_pass) || !is_pass)) {
            diag_error(d, (src_loc){0}, "no pass named '%s' (see kiln passes)", names[i]);
            ok = false;
        }
    }
    for (int i = 0; i < o->ndisabled; i++) {
        bool is_pass = false;
        const pass_info *p = find_pass_of_rule(o->disabled[i], &is_pass);
        if (!p) {
            diag_error(d, (src_loc){0}, "--disable: no pass or rule named '%s' (see kiln passes)", o->disabled[i]);
            ok = false;
        } else if (is_pass && p->required) {
            diag_error(d, (src_loc){0}, "--disable: pass '%s' is required and cannot be disabled", p->name);
            ok = false;
        }
    }
    for (int i = 0; i < o->nenabled; i++) {
        bool known = false;
        /* any rule: naming one that is on by default changes nothing (the
         * rules once off by default stay accepted) */
        for (int r = 0; r < PASS_RULE_COUNT; r++) known |= !strcmp(pass_rule_name((pass_rule)r), o->enabled[i]);
        if (!known) {
            diag_error(d, (src_loc){0}, "--enable: '%s' is not a rule (see kiln passes)", o->enabled[i]);
            ok = false;
        }
    }
    return ok;
}

/* Rules that are off unless --enable names them (none today: the list ends
 * with PASS_RULE_COUNT). epilogue-head-norm was one until the driver planned
 * the decode variants with a graph of their own (pass_options.decode_variant). */
static const pass_rule off_by_default[] = {PASS_RULE_COUNT};

bool pass_rule_off_by_default(pass_rule rule)
{
    for (size_t i = 0; off_by_default[i] != PASS_RULE_COUNT; i++)
        if (off_by_default[i] == rule) return true;
    return false;
}

bool pass_enabled(const pass_ctx *ctx, const char *pass)
{
    const pass_options *o = ctx->opts;
    if (!o) return true;
    for (int i = 0; i < o->ndisabled; i++)
        if (!strcmp(o->disabled[i], pass) || (ctx->pass && !strcmp(o->disabled[i], ctx->pass))) return false;
    return true;
}

bool pass_rule_named_enabled(const pass_ctx *ctx, pass_rule rule)
{
    const pass_options *o = ctx->opts;
    for (int i = 0; o && i < o->nenabled; i++)
        if (!strcmp(o->enabled[i], pass_rule_name(rule))) return true;
    return false;
}

bool pass_rule_enabled(const pass_ctx *ctx, pass_rule rule)
{
    if (!pass_enabled(ctx, pass_rule_name(rule))) return false;
    return !pass_rule_off_by_default(rule) || pass_rule_named_enabled(ctx, rule);
}

static void dump(const pass_ctx *ctx, const char *when, const char *pass, const ir_graph *g)
{
    FILE *out = ctx->opts && ctx->opts->dump ? ctx->opts->dump : stderr;
    fprintf(out, "// ----- IR %s %s -----\n", when, pass);
    ir_print(g, out);
}

ir_graph *pass_run_one(const pass_info *p, ir_graph *g, pass_ctx *ctx)
{
    const ir_graph *before = g;
    ctx->pass = p->name;
    g->diags = ctx->diags;
    g = p->run(g, ctx);
    /* a rebuilt graph (or none) invalidates what was computed on the old one */
    if (g != before) pass_analyses_clear(&ctx->analyses);
    if (ctx->size_overflow) { /* reported where the size was computed */
        ctx->size_overflow = false;
        ir_graph_free(g);
        pass_analyses_clear(&ctx->analyses);
        return NULL;
    }
    if (g && ir_verify(g, ctx->diags) != 0) {
        diag_error(ctx->diags, g->loc, "internal error: the IR verifier failed after pass '%s'", p->name);
        ir_graph_free(g);
        pass_analyses_clear(&ctx->analyses);
        g = NULL;
    }
    return g;
}

ir_graph *pass_run_pipeline(ir_graph *g, pass_ctx *ctx)
{
    int n;
    const pass_info *p = pass_pipeline(&n);
    const pass_options *o = ctx->opts;
    for (int i = 0; i < n && g; i++) {
        ctx->pass = p[i].name;
        if (!p[i].required && !pass_enabled(ctx, p[i].name)) continue;
        if (o && o->print_before && !strcmp(o->print_before, p[i].name)) dump(ctx, "before", p[i].name, g);
        g = pass_run_one(&p[i], g, ctx);
        if (g && o && (o->print_after_all || (o->print_after && !strcmp(o->print_after, p[i].name))))
            dump(ctx, "after", p[i].name, g);
    }
    ctx->pass = NULL;
    pass_analyses_clear(&ctx->analyses);
    return g;
}
