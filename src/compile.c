/* src/compile.c — the compile driver (compile.h). The only file that calls
 * the front end, the pass pipeline and codegen's emitters on behalf of the
 * API and the tools. */
#define _POSIX_C_SOURCE 200809L
#include "src/compile.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "frontend/frontend.h"
#include "passes/pass.h"
#include "runtime/rt_err.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_plan_cache.h"
#include "util/arena.h"
#include "util/diag.h"

/* The graphs that sets of shape variants plan with pass decisions of their own
 * (fuse_variants): the fused graph's nodes, other groups. DECODE: the decode
 * variants (a per-head q/k norm stays a row kernel); BATCHED: the decode
 * variants of at least CG_DECODE_BATCHED_ROWS query rows in all (RoPE and the
 * cache write in decode attention). */
enum { KC_VG_DECODE, KC_VG_BATCHED, KC_NVG };
typedef struct kc_vgraph {
    ir_graph *fused;       /* owned; NULL: none, or the planner took it */
    const ir_graph *graph; /* fused, or the planner's once it took it */
    pass_report report;
    pass_memplan mp;
} kc_vgraph;

struct kc_unit {
    kc_options o;
    FILE *diag_out;
    arena da;
    diag_list d;
    fe_source src;
    fe_define *defs;
    ir_graph *written, *fused;
    pass_report report;
    pass_memplan mp;
    /* the graphs of variants with pass decisions of their own (fuse_variants) */
    kc_vgraph vg[KC_NVG];
    const int64_t *max_dims; /* what the memory plan was made at (NULL: constant dims) */
    const cg_target *target; /* the kernels' target for the plan text (NULL: the default) */
    bool have_plan;
    int head_param; /* head_sample: the LM head's weight (a param index), else -1 */
    char *warnings; /* without diag_out: the rendered warnings of the steps that succeeded */
};

/* The diagnostics so far as text (with source lines and carets when text is
 * given); malloc'd, NULL when out of memory. */
static char *render_diags(const kc_unit *u, const char *text)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    diag_print(&u->d, f, text);
    fclose(f);
    while (len && buf[len - 1] == '\n') buf[--len] = 0;
    return buf;
}

/* Appends the warnings of a step that succeeded (a unit without diag_out
 * keeps them for kc_compile_model's caller). */
static void keep_warnings(kc_unit *u, const char *text)
{
    char *w = render_diags(u, text);
    if (!w || !*w) {
        free(w);
        return;
    }
    size_t old = u->warnings ? strlen(u->warnings) : 0, add = strlen(w);
    char *all = realloc(u->warnings, old + add + 2);
    if (all) {
        if (old) all[old++] = '\n';
        memcpy(all + old, w, add + 1);
        u->warnings = all;
    }
    free(w);
}

/* Diagnostics so far: printed, or (when failed and there is no diag_out)
 * rendered into err with their source lines and carets, or (when it did not
 * fail and there is no diag_out) kept as the unit's warnings; then cleared. */
static void flush_diags(kc_unit *u, bool with_source, bool failed, char *err, size_t n)
{
    const char *text = with_source ? u->src.text : NULL;
    if (u->diag_out) {
        diag_print(&u->d, u->diag_out, text);
    } else if (failed && err && n) {
        char *buf = render_diags(u, text);
        if (!buf) snprintf(err, n, "%s", u->d.count ? u->d.items[0].msg : "error");
        else snprintf(err, n, "%s", buf);
        free(buf);
    } else if (!failed && u->d.count) {
        keep_warnings(u, text);
    }
    diag_list_clear(&u->d);
}

rt_status kc_open(const kc_options *o, FILE *diag_out, kc_unit **out, char *err, size_t n)
{
    *out = NULL;
    if (!o || !o->name) return rt_fail(RT_ERR_INVALID, err, n, "compile: no model name");
    if (o->ndefines < 0 || (o->ndefines && !o->defines)) return rt_fail(RT_ERR_INVALID, err, n, "defines: NULL array");
    kc_unit *u = calloc(1, sizeof *u);
    if (u) u->head_param = -1;
    if (!u) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    u->o = *o;
    u->diag_out = diag_out;
    arena_init(&u->da);
    diag_list_init(&u->d, &u->da);
    u->d.opts = o->warnings;
    pass_report_init(&u->report);
    for (int i = 0; i < KC_NVG; i++) pass_report_init(&u->vg[i].report);
    rt_status st = RT_OK;
    if (o->text ? fe_source_from_string(&u->src, o->name, o->text) != 0 : fe_source_read(&u->src, o->name, &u->d) != 0) {
        if (u->d.count) flush_diags(u, false, true, err, n);
        else rt_fail(0, err, n, "%s: cannot read the model", o->name);
        st = o->text ? RT_ERR_NOMEM : RT_ERR_IO;
        goto bad;
    }
    u->defs = calloc((size_t)o->ndefines + 1, sizeof *u->defs);
    if (!u->defs) {
        st = rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        goto bad;
    }
    for (int i = 0; i < o->ndefines; i++) {
        if (!o->defines[i].name || !o->defines[i].value) {
            st = rt_fail(RT_ERR_INVALID, err, n, "define %d: NULL name or value", i);
            goto bad;
        }
        u->defs[i] = (fe_define){o->defines[i].name, o->defines[i].value};
    }
    *out = u;
    return RT_OK;
bad:
    kc_free(u);
    return st;
}

void kc_free(kc_unit *u)
{
    if (!u) return;
    pass_memplan_free(&u->mp);
    pass_report_free(&u->report);
    for (int i = 0; i < KC_NVG; i++) {
        pass_memplan_free(&u->vg[i].mp);
        pass_report_free(&u->vg[i].report);
        ir_graph_free(u->vg[i].fused);
    }
    free(u->warnings);
    ir_graph_free(u->written);
    ir_graph_free(u->fused);
    free(u->defs);
    fe_source_free(&u->src);
    diag_list_free(&u->d);
    arena_free(&u->da);
    free(u);
}

const ir_graph *kc_written(const kc_unit *u) { return u->written; }
const ir_graph *kc_fused(const kc_unit *u) { return u->fused; }

rt_status kc_dump_ast(kc_unit *u, FILE *out, char *err, size_t n)
{
    int rc = fe_dump_ast(&u->src, out, &u->d);
    flush_diags(u, true, rc != 0, err, n);
    return rc != 0 ? RT_ERR_MODEL : RT_OK;
}

/* The graph as written (its packed form when compiled packed), diagnostics to d. */
static ir_graph *lower(kc_unit *u, diag_list *d)
{
    fe_options fo = {u->defs, u->o.ndefines};
    ir_graph *g = fe_compile(&u->src, &fo, d);
    return g && u->o.packed ? pass_pack_sequences(g, d) : g;
}

rt_status kc_parse(kc_unit *u, char *err, size_t n)
{
    u->written = lower(u, &u->d);
    flush_diags(u, true, !u->written, err, n);
    if (!u->written) return RT_ERR_MODEL;
    if (ir_verify(u->written, &u->d) != 0) { /* fe_compile verified already: this is a bug */
        flush_diags(u, true, true, err, n);
        return RT_ERR_INTERNAL;
    }
    return RT_OK;
}

/* head_sample: the one output that is linear(x, W) of a weight W [V, D],
 * with x bf16 [..., D], becomes output head_in = x; the linear goes with DCE
 * and the sampler computes it (runtime/rt_sample.h, kiln_sample_head). */
static rt_status split_head(kc_unit *u, ir_graph *g, char *err, size_t n)
{
    int found = -1;
    for (int i = 0; i < g->noutputs; i++) {
        const ir_node *v = g->outputs[i].value;
        if (v->op != IR_OP_LINEAR || v->ninputs != 2 || v->inputs[1]->op != IR_OP_WEIGHT || v->inputs[1]->type.rank != 2 ||
            v->inputs[0]->type.dtype != IR_BF16 || v->inputs[1]->type.dtype != IR_BF16)
            continue;
        if (found >= 0)
            return rt_fail(RT_ERR_INVALID, err, n, "head_sample: model %s has two outputs that are linears of a weight (%s, %s)",
                           g->name, g->outputs[found].name, g->outputs[i].name);
        found = i;
    }
    if (found < 0 || g->noutputs != 1)
        return rt_fail(RT_ERR_INVALID, err, n,
                       "head_sample: model %s needs one output, a linear(x, W) of a bf16 weight W [V, D] (the LM head)",
                       g->name);
    ir_node *lin = g->outputs[found].value;
    u->head_param = lin->inputs[1]->param;
    g->outputs[found].value = lin->inputs[0];
    g->outputs[found].name = "head_in";
    return RT_OK;
}

/* Does g hold a decision the decode variants take otherwise: a per-head
 * norm in a matmul's epilogue (rule epilogue-head-norm)? */
static bool decides_per_variant(const ir_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *m = g->nodes[i];
        if (m->op == IR_OP_RMSNORM && m->group >= 0 && g->groups[m->group].anchor != m &&
            g->groups[m->group].anchor->op == IR_OP_LINEAR)
            return true;
    }
    return false;
}

/* The same nodes (ops, inputs, types) in the same order: the variants'
 * kernels name nodes by id, and the runtime binds and packs by the plan's graph. */
static bool same_nodes(const ir_graph *a, const ir_graph *b)
{
    if (a->nnodes != b->nnodes || a->nparams != b->nparams || a->noutputs != b->noutputs || a->nstates != b->nstates)
        return false;
    for (int i = 0; i < a->nnodes; i++) {
        const ir_node *x = a->nodes[i], *y = b->nodes[i];
        if (x->op != y->op || x->ninputs != y->ninputs || !ir_type_eq(&x->type, &y->type)) return false;
        for (int j = 0; j < x->ninputs; j++)
            if (x->inputs[j]->id != y->inputs[j]->id) return false;
    }
    for (int i = 0; i < a->noutputs; i++)
        if (a->outputs[i].value->id != b->outputs[i].value->id) return false;
    for (int i = 0; i < a->nstates; i++)
        if (a->states[i].value->id != b->states[i].value->id) return false;
    return true;
}

static rt_status split_head(kc_unit *u, ir_graph *g, char *err, size_t n);

/* The pipeline once more on the model as written, for the decode variants
 * (pass_options.decode_variant: cg_decode_variant's dims), or only the
 * batched ones (pass_options.decode_batched). Into *out; NULL (and no error)
 * when it fails. */
static void fuse_for_decode(kc_unit *u, const pass_options *base, bool batched, pass_report *report, ir_graph **out)
{
    *out = NULL;
    diag_list d2; /* the fused graph's warnings again: not kept */
    diag_list_init(&d2, &u->da);
    fe_options fo = {u->defs, u->o.ndefines};
    ir_graph *g = fe_compile(&u->src, &fo, &d2);
    char err[256];
    if (g && u->o.head_sample && split_head(u, g, err, sizeof err) != RT_OK) {
        ir_graph_free(g);
        g = NULL;
    }
    pass_options o = *base;
    o.print_after = o.print_before = NULL;
    o.print_after_all = false;
    o.decode_variant = true;
    o.decode_batched = batched;
    pass_ctx c = {.opts = &o, .report = report, .diags = &d2};
    if (g) g = pass_run_pipeline(g, &c);
    diag_list_free(&d2);
    *out = g;
}

/* Does g hold a decision the batched decode variants take otherwise: a rope
 * or cache write in a matmul's epilogue (rules epilogue-rope, epilogue-cache-write)? */
static bool decides_per_batch(const ir_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *m = g->nodes[i];
        if ((m->op == IR_OP_ROPE || m->op == IR_OP_CACHE_WRITE) && m->group >= 0 &&
            g->groups[m->group].anchor->op == IR_OP_LINEAR)
            return true;
    }
    return false;
}

static bool same_groups(const ir_graph *a, const ir_graph *b)
{
    if (a->ngroups != b->ngroups) return false;
    for (int i = 0; i < a->nnodes && i < b->nnodes; i++)
        if (a->nodes[i]->group != b->nodes[i]->group) return false;
    return true;
}

static void vgraph_clear(kc_vgraph *v)
{
    ir_graph_free(v->fused);
    v->fused = NULL;
    v->graph = NULL;
    pass_report_free(&v->report);
    pass_report_init(&v->report);
}

/* Which graph a variant of main at dims takes: KC_VG_BATCHED or KC_VG_DECODE
 * (where graphs[] has it), or -1 for main. */
static int variant_graph_of(const ir_graph *const graphs[KC_NVG], const ir_graph *main, const int64_t *dims)
{
    if (!cg_decode_variant(main, dims)) return -1;
    int64_t rows;
    if (graphs[KC_VG_BATCHED] && cg_decode_rows(main, dims, &rows) && rows >= CG_DECODE_BATCHED_ROWS) return KC_VG_BATCHED;
    return graphs[KC_VG_DECODE] ? KC_VG_DECODE : -1;
}

/* The pass decisions per variant: where the fused graph holds one the decode
 * variants take otherwise (decides_per_variant: a per-head norm in the QKV
 * epilogue) or the batched decode variants do (decides_per_batch: RoPE and the
 * cache write in it), the pipeline runs again for them (fuse_for_decode),
 * each graph kept only when its nodes are the fused graph's and its groups
 * are not (nor an earlier one's). Where the dims that choose are constants,
 * the graph every variant takes replaces the fused one; otherwise they are
 * kept beside it (u->vg, planned by plan_variant). The driver decides which
 * graph a variant takes (variant_graph_of): the runtime only runs plans. */
static void fuse_variants(kc_unit *u, const pass_options *base)
{
    for (int i = 0; i < KC_NVG; i++) vgraph_clear(&u->vg[i]);
    for (int i = 0; i < KC_NVG; i++) {
        if (i == KC_VG_DECODE ? !decides_per_variant(u->fused) : !decides_per_batch(u->fused)) continue;
        kc_vgraph *v = &u->vg[i];
        ir_graph *g = NULL;
        fuse_for_decode(u, base, i == KC_VG_BATCHED, u->o.report ? &v->report : NULL, &g);
        bool own = g && same_nodes(u->fused, g) && !same_groups(u->fused, g); /* else nothing of its own */
        for (int j = 0; own && j < i; j++) own = !u->vg[j].fused || !same_groups(u->vg[j].fused, g);
        if (!own) {
            ir_graph_free(g);
            vgraph_clear(v);
            continue;
        }
        v->fused = g;
        v->graph = g;
    }
    if (!cg_decode_variant(u->fused, NULL)) return; /* prefill variants too: every graph stays */
    /* only decode variants: where their rows are known, one graph serves them all */
    int64_t rows;
    bool known = cg_decode_rows(u->fused, NULL, &rows);
    const ir_graph *graphs[KC_NVG] = {u->vg[KC_VG_DECODE].fused, u->vg[KC_VG_BATCHED].fused};
    int take = known ? variant_graph_of(graphs, u->fused, NULL) : graphs[KC_VG_DECODE] ? KC_VG_DECODE : -1;
    for (int i = 0; known && i < KC_NVG; i++)
        if (i != take) vgraph_clear(&u->vg[i]);
    if (take < 0) return;
    ir_graph_free(u->fused);
    u->fused = u->vg[take].fused;
    pass_report_free(&u->report);
    u->report = u->vg[take].report;
    pass_report_init(&u->vg[take].report);
    u->vg[take].fused = NULL;
    u->vg[take].graph = NULL;
}

rt_status kc_fuse(kc_unit *u, char *err, size_t n)
{
    const kc_options *o = &u->o;
    if (!u->written) return rt_fail(RT_ERR_INTERNAL, err, n, "compile: nothing parsed to fuse");
    if (o->ndisabled && !o->disabled) return rt_fail(RT_ERR_INVALID, err, n, "disabled: NULL array");
    for (int i = 0; i < o->ndisabled; i++)
        if (!o->disabled[i]) return rt_fail(RT_ERR_INVALID, err, n, "disabled: entry %d is NULL", i);
    if (o->nenabled && !o->enabled) return rt_fail(RT_ERR_INVALID, err, n, "enabled: NULL array");
    for (int i = 0; i < o->nenabled; i++)
        if (!o->enabled[i]) return rt_fail(RT_ERR_INVALID, err, n, "enabled: entry %d is NULL", i);
    pass_options pass_opts = {.disabled = o->disabled,
                       .ndisabled = o->ndisabled,
                       .enabled = o->enabled,
                       .nenabled = o->nenabled,
                       .print_after = o->print_after,
                       .print_before = o->print_before,
                       .print_after_all = o->print_after_all,
                       .dump = o->dump ? o->dump : stderr};
    if (!pass_options_check(&pass_opts, &u->d)) {
        flush_diags(u, false, true, err, n);
        return RT_ERR_INVALID;
    }
    ir_graph *g = u->written;
    u->head_param = -1;
    if (o->head_sample) {
        rt_status hs = split_head(u, g, err, n);
        if (hs != RT_OK) return hs;
    }
    u->written = NULL;
    if (o->keep_written) { /* the unfused graph, for the interpreter to compare against */
        diag_list d2;
        diag_list_init(&d2, &u->da);
        u->written = lower(u, &d2);
        diag_list_free(&d2);
    }
    pass_ctx pass_context = {.opts = &pass_opts, .report = o->report ? &u->report : NULL, .diags = &u->d};
    u->fused = pass_run_pipeline(g, &pass_context);
    if (u->fused) fuse_variants(u, &pass_opts);
    flush_diags(u, true, !u->fused, err, n);
    return u->fused ? RT_OK : RT_ERR_INTERNAL;
}

/* The memory plan's packed bytes: the weight copies as the runtime makes
 * them (codegen's kernels say which). */
static void count_copies(kc_unit *u)
{
    int64_t copies = 0;
    char copy_err[512];
    if (cg_bind_copies(u->fused, NULL, u->max_dims, &copies, NULL, copy_err, sizeof copy_err) >= 0) u->mp.packed = copies;
}

/* The memory plan; with_copies: its packed bytes too (a codegen run). */
static rt_status plan_memory(kc_unit *u, const int64_t *max_dims, bool with_copies, char *err, size_t n)
{
    if (!u->fused) return rt_fail(RT_ERR_INTERNAL, err, n, "compile: no fused graph to plan");
    pass_memplan_free(&u->mp);
    memset(&u->mp, 0, sizeof u->mp);
    u->max_dims = max_dims;
    u->have_plan = pass_plan_memory(u->fused, max_dims, &u->mp, err, n) == 0;
    if (!u->have_plan) return RT_ERR_INTERNAL;
    for (int i = 0; i < KC_NVG; i++) {
        kc_vgraph *v = &u->vg[i];
        pass_memplan_free(&v->mp);
        memset(&v->mp, 0, sizeof v->mp);
        if (v->fused && pass_plan_memory(v->fused, max_dims, &v->mp, err, n) != 0) return RT_ERR_INTERNAL;
    }
    if (with_copies) count_copies(u);
    return RT_OK;
}

rt_status kc_plan_memory(kc_unit *u, const int64_t *max_dims, char *err, size_t n)
{
    return plan_memory(u, max_dims, true, err, n);
}

/* The kernels on the generic template, each with the template's reason. */
static void print_fallbacks(const kc_unit *u, FILE *out)
{
    char err[512];
    cg_options co = {.target = u->target};
    /* into the plan itself: the library never prints (include/kiln.h) */
    if (cg_fallbacks_print(u->fused, &co, out, err, sizeof err) < 0) fprintf(out, "warning: the generic-template report failed: %s\n", err);
}

/* The template section for kernels ks (one per group, in order). */
static void print_templates(const cg_kernel *ks, int n, const cg_target *t, FILE *out)
{
    fprintf(out, "kernel templates (%s, %d SMs):\n", t->arch, t->sm_count);
    for (int k = 0; k < n; k++) {
        char label[128];
        fprintf(out, "  k%-3d %s%s%s\n", k, cg_kernel_label(&ks[k], label, sizeof label),
                ks[k].fallback ? ", mma.sync fallback" : "", ks[k].note ? " (generic: the template does not fit)" : "");
        if (ks[k].lt_note) fprintf(out, "       %s\n", ks[k].lt_note); /* which implementation, and why (codegen/cg_lt.c) */
    }
}

void kc_print_templates(const kc_unit *u, const cg_target *target, FILE *out)
{
    cg_target def;
    if (!target) {
        cg_target_default(NULL, &def);
        target = &def;
    }
    cg_options co = {.target = target};
    cg_kernel *ks;
    int nk;
    char err[512];
    if (cg_emit_all_ex(u->fused, &co, &ks, &nk, err, sizeof err) != 0) {
        fprintf(out, "kernel templates: codegen failed: %s\n", err);
        return;
    }
    print_templates(ks, nk, target, out);
    cg_kernels_free(ks, nk);
}

static rt_status plan_memory_figures(const kc_unit *u, const cg_kernel *ks, int nk, rt_memory *mem, char *err, size_t n);
static void print_memory_figures(const kc_unit *u, const rt_memory *mem, FILE *out);

rt_status kc_memory(const kc_unit *u, const cg_target *target, rt_memory *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    if (!u->have_plan) return rt_fail(RT_ERR_INTERNAL, err, n, "compile: no memory plan");
    cg_target def;
    if (!target) {
        cg_target_default(NULL, &def);
        target = &def;
    }
    cg_options co = {.target = target}; /* the large-shape variant, as make_plan plans it */
    cg_kernel *ks;
    int nk;
    if (cg_emit_all_ex(u->fused, &co, &ks, &nk, err, n) != 0) return RT_ERR_COMPILE;
    rt_status st = plan_memory_figures(u, ks, nk, out, err, n);
    cg_kernels_free(ks, nk);
    return st;
}

void kc_print_plan(const kc_unit *u, const cg_target *target, FILE *out)
{
    pass_kernels_print(u->fused, out);
    print_fallbacks(u, out);
    fputc('\n', out);
    kc_print_templates(u, target, out);
    fputc('\n', out);
    pass_memplan_print(u->fused, &u->mp, out);
    int64_t copies;
    char err[512];
    cg_options co = {.target = u->target};
    cg_bind_copies(u->fused, &co, u->max_dims, &copies, out, err, sizeof err);
    rt_memory mem;
    if (kc_memory(u, target, &mem, err, sizeof err) == RT_OK) print_memory_figures(u, &mem, out);
    else fprintf(out, "device memory: not known at these dims (%s)\n", err);
}

/* The variant graphs for the report, into v[KC_NVG]; how many. */
static int variant_reports(const kc_unit *u, pass_report_variant *v)
{
    int nv = 0;
    const bool batched = u->vg[KC_VG_BATCHED].graph != NULL;
    if (u->vg[KC_VG_DECODE].graph)
        v[nv++] = (pass_report_variant){
            "decode",
            batched ? "at most 16 query rows per sequence, the decode rule (CG_GEMV_MAX_ROWS), and fewer than 4 in all "
                      "(CG_DECODE_BATCHED_ROWS), planned for their exact dims; every other run takes another graph"
                    : "at most 16 query rows per sequence, the decode rule (CG_GEMV_MAX_ROWS), planned for their exact "
                      "dims; every other run takes the graph above",
            &u->vg[KC_VG_DECODE].report, u->vg[KC_VG_DECODE].graph};
    if (batched)
        v[nv++] = (pass_report_variant){"batched decode",
                                        "at most 16 query rows per sequence, the decode rule (CG_GEMV_MAX_ROWS), and at "
                                        "least 4 in all (B x S, CG_DECODE_BATCHED_ROWS), planned for their exact dims; "
                                        "every other run takes another graph",
                                        &u->vg[KC_VG_BATCHED].report, u->vg[KC_VG_BATCHED].graph};
    return nv;
}

void kc_print_report(const kc_unit *u, FILE *out)
{
    pass_report_print(&u->report, u->fused, out);
    print_fallbacks(u, out);
    pass_report_variant v[KC_NVG];
    int nv = variant_reports(u, v);
    for (int i = 0; i < nv; i++) pass_report_print_variant(&u->report, &v[i], out);
}

void kc_print_dot(const kc_unit *u, FILE *out) { pass_report_dot(&u->report, u->fused, out); }

rt_status kc_write_report_json(const kc_unit *u, const char *path, char *err, size_t n)
{
    pass_report_variant v[KC_NVG];
    int nv = variant_reports(u, v);
    return pass_report_write_json(&u->report, u->fused, u->have_plan ? &u->mp : NULL, v, nv, path, err, n) == 0
               ? RT_OK
               : RT_ERR_IO;
}

rt_status kc_validate(const kc_unit *u, const int64_t *dims, kc_validation *res, char *err, size_t n)
{
    memset(res, 0, sizeof *res);
    if (!u->written || !u->fused) return rt_fail(RT_ERR_INTERNAL, err, n, "validate: the graph as written was not kept");
    pass_validation v;
    if (pass_validate(u->written, u->fused, dims, 1, &v, err, n) != 0) return RT_ERR_INTERNAL;
    res->compared = v.compared;
    res->max_rel_err = v.max_rel_err;
    res->worst = v.worst;
    res->tolerance = pass_validate_tolerance(u->written);
    return RT_OK;
}

void kc_print_passes(FILE *out)
{
    int n;
    const pass_info *p = pass_pipeline(&n);
    fprintf(out, "passes, in pipeline order (--disable=NAME turns one off):\n");
    for (int i = 0; i < n; i++) {
        fprintf(out, "  %-20s %s%s\n", p[i].name, p[i].summary, p[i].required ? " (required)" : "");
        for (const char *const *r = p[i].rules; r && *r; r++) {
            bool off = false;
            for (int k = 0; k < PASS_RULE_COUNT; k++)
                off |= !strcmp(pass_rule_name((pass_rule)k), *r) && pass_rule_off_by_default((pass_rule)k);
            fprintf(out, "      rule %s%s\n", *r, off ? " (off unless --enable names it)" : "");
        }
    }
}

int64_t kc_i32_bound(const ir_graph *g, const ir_node *p, const int64_t *dims, int64_t unlimited)
{
    return pass_i32_bound(g, p, dims, unlimited);
}
double kc_tolerance(const ir_graph *g) { return pass_validate_tolerance(g); }

/* ---- kernels ------------------------------------------------------------------------ */

void kc_tool_target(const char *arch, cg_target *out)
{
    rt_ctx_config cc = {.no_cache = true};
    rt_ctx *ctx = NULL;
    char err[512];
    cg_target_default(arch, out);
    if (!rt_device_available(err, sizeof err) || rt_ctx_create(&ctx, &cc, err, sizeof err) != RT_OK) return;
    if (!strcmp(rt_ctx_arch(ctx), out->arch)) rt_ctx_target(ctx, out); /* the device is of that arch */
    rt_ctx_free(ctx);
}

int kc_write_sources(const kc_unit *u, const char *dir, const cg_target *target, char *err, size_t n)
{
    cg_options co = {.target = target};
    return cg_write_sources(u->fused, dir, &co, err, n);
}

int kc_write_compiled(const kc_unit *u, const char *dir, const cg_target *target, const rt_emit_options *o,
                      rt_emit_result *res, char *err, size_t n)
{
    cg_options co = {.target = target};
    cg_kernel *ks;
    int nk;
    if (res) memset(res, 0, sizeof *res);
    if (cg_emit_all_ex(u->fused, &co, &ks, &nk, err, n) != 0) return -1;
    int rc = rt_write_compiled(u->fused, ks, nk, dir, o, res, err, n);
    cg_kernels_free(ks, nk);
    return rc;
}

/* ---- shape variants -------------------------------------------------------------------- */

/* What the driver keeps to plan variants after the model is made: the
 * runtime calls plan_exact_variant through rt_plan.plan_variant. */
typedef struct kc_planner {
    cg_target target;
    int64_t max_dims[IR_MAX_SYMS];
    int64_t *node_offset; /* the memory plan: per node, -1 = none */
    int nnodes;
    size_t arena_bytes;
    rt_tuner *tuner;      /* autotuning on: the stored choices and the timing; else NULL */
    rt_cache *cache;      /* the plan cache (the context's kernel cache); NULL: none */
    rt_cache_key key;     /* the plan's key (rt_plan_cache_key) when cache is set */
    const char *name;     /* the model, for the cache's manifests */
    /* the variant graphs (kc_unit.vg's, owned here) and their memory plans;
     * NULL: the plan's graph serves those variants */
    ir_graph *vgraph[KC_NVG];
    int64_t *vg_offset[KC_NVG];
    size_t vg_arena_bytes[KC_NVG];
} kc_planner;

static void planner_free(void *p)
{
    kc_planner *planner = p;
    if (!planner) return;
    rt_tuner_free(planner->tuner);
    free(planner->node_offset);
    for (int i = 0; i < KC_NVG; i++) {
        free(planner->vg_offset[i]);
        ir_graph_free(planner->vgraph[i]);
    }
    free(planner);
}

/* The layout kernel k reads node in: its bind-time layout changes (half 0
 * and no pairs: as computed). */
static rt_packed_value xform_value(const kc_planner *planner, const cg_kernel *k, int node)
{
    rt_packed_value v = {node, 0, 0, {{0}}};
    for (int i = 0; i < k->nxforms; i++) {
        const cg_xform *x = &k->xforms[i];
        if (x->node != node) continue;
        int64_t h;
        if (x->kind == CG_XFORM_INTERLEAVE_ROWS && !v.half && ir_dim_value(&x->half, planner->max_dims, &h)) v.half = h;
        if (x->kind == CG_XFORM_ROPE_PAIRS && v.npairs < RT_MAX_ROPE_PAIRS)
            v.pairs[v.npairs++] = (rt_rope_pairs){x->off, x->stride, x->heads, x->rot};
    }
    /* by row (the segments do not overlap): the same layout whichever kernel named it, so that
     * variants whose QKV epilogue or decode attention rotates share one copy */
    for (int i = 1; i < v.npairs; i++)
        for (int j = i; j > 0 && v.pairs[j].off < v.pairs[j - 1].off; j--) {
            rt_rope_pairs t = v.pairs[j];
            v.pairs[j] = v.pairs[j - 1];
            v.pairs[j - 1] = t;
        }
    return v;
}

/* Arena space for intermediates the memory plan did not place (values a
 * kernel stores that no later kernel reads): appended to *arena_bytes, their
 * offsets into node_offset. */
static rt_status reserve_unplanned(const int64_t *max_dims, const ir_graph *g, const cg_kernel *ks, int nk,
                                   int64_t *node_offset, size_t *arena_bytes, char *err, size_t n)
{
    for (int k = 0; k < nk; k++)
        for (int i = 0; i < ks[k].nargs; i++) {
            const cg_arg *a = &ks[k].args[i];
            if (a->kind != CG_ARG_INTERMEDIATE || a->node < 0 || a->node >= g->nnodes) continue;
            if (node_offset[a->node] >= 0) continue;
            const ir_node *node = g->nodes[a->node];
            bool overflow = false;
            ir_dim b = ir_type_bytes(&node->type, &overflow);
            int64_t bytes;
            if (overflow || !ir_dim_value(&b, max_dims, &bytes))
                return rt_fail(RT_ERR_MODEL, err, n,
                               "kernel %s: the size of %%%d (line %d) does not fit in 64 bits at the maximum dims",
                               ks[k].name, a->node, node->loc.line);
            node_offset[a->node] = (int64_t)*arena_bytes;
            *arena_bytes += RT_ALIGN_UP(bytes);
        }
    return RT_OK;
}

/* Memory plan mp's offsets per node of g (-1: none) and its arena size. */
static void memplan_offsets(const ir_graph *g, const pass_memplan *mp, int64_t *node_offset, size_t *arena_bytes)
{
    for (int i = 0; i < g->nnodes; i++) node_offset[i] = -1;
    for (int i = 0; i < mp->nbufs; i++) node_offset[mp->bufs[i].value->id] = mp->bufs[i].offset;
    *arena_bytes = RT_ALIGN_UP(mp->peak);
}

/* The memory plan's offsets per node (-1: none) and its arena size. */
static void planned_offsets(const kc_unit *u, int64_t *node_offset, size_t *arena_bytes)
{
    memplan_offsets(u->fused, &u->mp, node_offset, arena_bytes);
}

/* The device memory the plan states for the large-shape variant ks at the
 * max dims: the memory plan's arena with the values it did not place, the
 * kernels' workspaces, the weight copies (cg_bind_copies) and the states. */
static rt_status plan_memory_figures(const kc_unit *u, const cg_kernel *ks, int nk, rt_memory *mem, char *err, size_t n)
{
    memset(mem, 0, sizeof *mem);
    const ir_graph *g = u->fused;
    int64_t *off = malloc(((size_t)g->nnodes + 1) * sizeof *off);
    if (!off) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    size_t arena_bytes;
    planned_offsets(u, off, &arena_bytes);
    rt_status st = reserve_unplanned(u->max_dims, g, ks, nk, off, &arena_bytes, err, n);
    free(off);
    if (st != RT_OK) return st;
    mem->intermediates = rt_arena_size(arena_bytes);
    size_t ws;
    size_t cnt = 0;
    if (!rt_kernels_workspace(ks, nk, u->max_dims, &ws, &cnt))
        return rt_fail(RT_ERR_MODEL, err, n, "a workspace size does not evaluate");
    mem->workspaces = rt_workspaces_size(ws, cnt);
    mem->packed = (size_t)u->mp.packed;
    for (int i = 0; i < g->nparams; i++) {
        if (g->params[i]->op != IR_OP_STATE) continue;
        bool overflow = false;
        ir_dim b = ir_type_bytes(&g->params[i]->type, &overflow);
        int64_t bytes;
        if (overflow || !ir_dim_value(&b, u->max_dims, &bytes))
            return rt_fail(RT_ERR_MODEL, err, n, "state '%s': the size does not evaluate", g->params[i]->name);
        mem->states += (size_t)bytes;
    }
    return RT_OK;
}

static void print_memory_figures(const kc_unit *u, const rt_memory *mem, FILE *out)
{
    arena a;
    arena_init(&a);
    ir_dim d[5] = {ir_dim_const((int64_t)mem->intermediates), ir_dim_const((int64_t)mem->workspaces),
                   ir_dim_const((int64_t)mem->packed), ir_dim_const((int64_t)mem->states),
                   ir_dim_const((int64_t)(mem->intermediates + mem->workspaces + mem->packed + mem->states))};
    fprintf(out, "device memory at the max dims: %s = intermediates arena %s + workspaces %s + packed weights %s + states %s\n",
            pass_bytes_str(&a, u->fused, &d[4]), pass_bytes_str(&a, u->fused, &d[0]), pass_bytes_str(&a, u->fused, &d[1]),
            pass_bytes_str(&a, u->fused, &d[2]), pass_bytes_str(&a, u->fused, &d[3]));
    arena_free(&a);
}

/* The packed values the kernels read, each once, and per argument which. */
static rt_status list_packed(const kc_planner *planner, rt_variant_plan *v, char *err, size_t n)
{
    int nargs = 0;
    for (int k = 0; k < v->nkernels; k++) nargs += v->kernels[k].nargs;
    v->arg_packed = malloc(((size_t)nargs + 1) * sizeof *v->arg_packed);
    v->packed = malloc(((size_t)nargs + 1) * sizeof *v->packed);
    if (!v->arg_packed || !v->packed) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    int *slot = v->arg_packed;
    for (int k = 0; k < v->nkernels; k++)
        for (int i = 0; i < v->kernels[k].nargs; i++, slot++) {
            const cg_arg *a = &v->kernels[k].args[i];
            rt_packed_value pv = xform_value(planner, &v->kernels[k], a->node);
            bool changed = pv.half > 0 || pv.npairs > 0;
            *slot = -1;
            if (a->kind != CG_ARG_PACKED && !(a->kind == CG_ARG_PARAM && changed)) continue;
            for (int j = 0; j < v->npacked && *slot < 0; j++)
                if (rt_packed_value_eq(&v->packed[j], &pv)) *slot = j;
            if (*slot < 0) {
                v->packed[v->npacked] = pv;
                *slot = v->npacked++;
            }
        }
    return RT_OK;
}

/* Autotuning's answers to codegen (cg_options.tune): the stored choice, or
 * while candidates are emitted the one being timed. */
typedef struct tune_answer {
    rt_tuner *tuner;
    const char *problem; /* forced: this problem gets `choice` */
    cg_wg_choice choice;
} tune_answer;

static bool tune_answer_fn(void *user, const char *problem, cg_wg_choice *out)
{
    tune_answer *t = user;
    if (t->problem && !strcmp(problem, t->problem)) {
        *out = t->choice;
        return true;
    }
    return rt_tuner_lookup(t->tuner, problem, out, NULL);
}

/* Times the candidates of every kernel whose problem has no stored choice
 * (each candidate: the group emitted again with that configuration), at the
 * variant's dims or, for the large-shape variant, the max dims. True in
 * *measured when a choice was stored (the variant is then emitted again). */
static rt_status autotune_kernels(const kc_planner *planner, const ir_graph *g, const cg_options *base,
                                  const rt_variant_plan *v, bool *measured, char *err, size_t n)
{
    *measured = false;
    const int64_t *tdims = base->dims ? base->dims : planner->max_dims;
    for (int i = 0; i < v->nkernels; i++) {
        const cg_kernel *k = &v->kernels[i];
        cg_wg_choice have;
        if (!k->tune_problem || k->tuned || k->ntune_cands < 2) continue;
        if (rt_tuner_lookup(planner->tuner, k->tune_problem, &have, NULL)) { /* another kernel's measurement */
            *measured = true;
            continue;
        }
        cg_kernel cands[CG_MAX_TUNE_CANDS];
        cg_wg_choice choice[CG_MAX_TUNE_CANDS];
        int nc = 0;
        rt_status st = RT_OK;
        for (int c = 0; c < k->ntune_cands && st == RT_OK; c++) {
            tune_answer force = {planner->tuner, k->tune_problem, k->tune_cands[c]};
            cg_options o = *base;
            o.tune = tune_answer_fn;
            o.tune_user = &force;
            char cerr[1024];
            memset(&cands[nc], 0, sizeof cands[nc]);
            if (cg_emit_kernel_ex(g, k->group, &o, &cands[nc], cerr, sizeof cerr) != 0) continue; /* not this one */
            if (!cands[nc].tuned) {
                cg_kernel_free(&cands[nc]);
                continue;
            }
            choice[nc++] = k->tune_cands[c];
        }
        int best = -1;
        if (nc > 0) st = rt_tuner_measure(planner->tuner, k->tune_problem, cands, choice, nc, g, tdims, &best, err, n);
        for (int c = 0; c < nc; c++) cg_kernel_free(&cands[c]);
        if (st != RT_OK) return st;
        if (best >= 0) *measured = true;
    }
    return RT_OK;
}

/* ---- identical kernels (identical layers) ---- */

/* src[0..len) in a canonical form for comparing kernels: the two comment
 * lines naming the group, and the kernel's name on its KILN_KERNEL line,
 * dropped; every identifier t<digits> (a KilnArgs field, named by its node)
 * renumbered by first appearance. Two kernels with equal canonical forms are
 * the same program up to that renaming (bijective, consistent), so one
 * compiled kernel serves both with each one's own KilnArgs (the same layout:
 * checked by the caller). NULL when out of memory. */
static char *canonical_source(const char *src, size_t len)
{
    char *out = malloc(len + 1);
    long *ids = NULL;
    int nids = 0, cap = 0;
    if (!out) return NULL;
    size_t o = 0;
    static const char m1[] = "// ---- generated by kiln codegen", m2[] = "// group kind", m3[] = "#define KILN_KERNEL ";
    for (size_t i = 0; i < len;) {
        bool line_start = i == 0 || src[i - 1] == '\n';
        if (line_start && (!strncmp(src + i, m1, sizeof m1 - 1) || !strncmp(src + i, m2, sizeof m2 - 1) ||
                           !strncmp(src + i, m3, sizeof m3 - 1))) {
            while (i < len && src[i] != '\n') i++;
            continue;
        }
        char c = src[i];
        bool word_start = i == 0 || !(src[i - 1] == '_' || (src[i - 1] >= '0' && src[i - 1] <= '9') ||
                                      (src[i - 1] >= 'a' && src[i - 1] <= 'z') || (src[i - 1] >= 'A' && src[i - 1] <= 'Z'));
        if (c == 't' && word_start && i + 1 < len && src[i + 1] >= '0' && src[i + 1] <= '9') {
            size_t j = i + 1;
            long v = 0;
            while (j < len && src[j] >= '0' && src[j] <= '9' && v < 100000000) v = v * 10 + (src[j++] - '0');
            char nx = j < len ? src[j] : 0;
            if (!(nx == '_' || (nx >= '0' && nx <= '9') || (nx >= 'a' && nx <= 'z') || (nx >= 'A' && nx <= 'Z'))) {
                int k = 0;
                while (k < nids && ids[k] != v) k++;
                if (k == nids) {
                    if (nids == cap) {
                        cap = cap ? 2 * cap : 32;
                        long *grown = realloc(ids, (size_t)cap * sizeof *ids);
                        if (!grown) {
                            free(ids);
                            free(out);
                            return NULL;
                        }
                        ids = grown;
                    }
                    ids[nids++] = v;
                }
                /* "t" + the local number: never longer than the original */
                int w = snprintf(out + o, len + 1 - o, "t%d", k);
                if (w > 0 && (size_t)w <= j - i) {
                    o += (size_t)w;
                    i = j;
                    continue;
                }
            }
        }
        out[o++] = src[i++];
    }
    out[o] = 0;
    free(ids);
    return out;
}

static bool same_layout(const cg_kernel *a, const cg_kernel *b)
{
    if (a->family != b->family || a->nargs != b->nargs || a->args_size != b->args_size || a->param_size != b->param_size ||
        a->param_prefix != b->param_prefix || a->ntmaps != b->ntmaps || !a->fallback != !b->fallback)
        return false;
    for (int i = 0; i < a->nargs; i++)
        if (a->args[i].offset != b->args[i].offset) return false;
    return true;
}

/* Kernels of one variant that are the same program (the groups of identical
 * layers): the later ones take the first one's source and name (its fallback's
 * too), so the kernel cache compiles and stores one, and the runtime compiles
 * a source once per variant. Each keeps its own arguments. Returns how many
 * kernels share another's code. */
static int share_identical_kernels(cg_kernel *ks, int nk)
{
    char **canon = calloc((size_t)nk + 1, sizeof *canon), **fcanon = calloc((size_t)nk + 1, sizeof *fcanon);
    uint64_t *hash = calloc((size_t)nk + 1, sizeof *hash);
    int shared = 0;
    if (!canon || !fcanon || !hash) goto out;
    for (int i = 0; i < nk; i++) {
        canon[i] = canonical_source(ks[i].source, ks[i].source_len);
        if (ks[i].fallback) fcanon[i] = canonical_source(ks[i].fallback->source, ks[i].fallback->source_len);
        if (!canon[i] || (ks[i].fallback && !fcanon[i])) continue;
        hash[i] = XXH3_64bits(canon[i], strlen(canon[i]));
        for (int j = 0; j < i; j++) {
            if (!canon[j] || hash[j] != hash[i] || !same_layout(&ks[i], &ks[j]) || strcmp(canon[i], canon[j])) continue;
            if (ks[i].fallback && (!fcanon[j] || !same_layout(ks[i].fallback, ks[j].fallback) || strcmp(fcanon[i], fcanon[j])))
                continue;
            ks[i].source = ks[j].source;
            ks[i].source_len = ks[j].source_len;
            ks[i].name = ks[j].name;
            if (ks[i].fallback) {
                ks[i].fallback->source = ks[j].fallback->source;
                ks[i].fallback->source_len = ks[j].fallback->source_len;
                ks[i].fallback->name = ks[j].fallback->name;
            }
            shared++;
            break;
        }
    }
out:
    for (int i = 0; canon && i < nk; i++) free(canon[i]);
    for (int i = 0; fcanon && i < nk; i++) free(fcanon[i]);
    free(canon);
    free(fcanon);
    free(hash);
    return shared;
}

static rt_status finish_variant(const kc_planner *planner, const ir_graph *g, rt_variant_plan *v, char *err, size_t n);

/* One variant: exact dims, or NULL for the large-shape variant (its plan
 * cache entry is make_plan's). A decode variant (cg_decode_variant) takes its
 * variant graph when there is one (variant_graph_of): its own pass decisions. */
static rt_status plan_variant(const kc_planner *planner, const ir_graph *plan_graph, const int64_t *dims,
                              rt_variant_plan *v, char *err, size_t n)
{
    memset(v, 0, sizeof *v);
    const ir_graph *g = plan_graph;
    const int vgi = dims ? variant_graph_of((const ir_graph *const *)planner->vgraph, plan_graph, dims) : -1;
    if (vgi >= 0) v->graph = g = planner->vgraph[vgi];
    v->exact = dims != NULL;
    if (dims) memcpy(v->dims, dims, (size_t)g->nsyms * sizeof *dims);
    cg_options o = {.dims = dims ? v->dims : NULL, .target = &planner->target};
    tune_answer answer = {planner->tuner, NULL, {0}};
    if (planner->tuner) {
        o.tune = tune_answer_fn;
        o.tune_user = &answer;
    }
    char codegen_err[2048];
    rt_cache_key vkey = {0};
    if (planner->cache && dims) { /* the large-shape variant's entry is make_plan's */
        vkey = rt_plan_cache_variant_key(planner->key, v->dims, g->nsyms);
        char why[1024];
        rt_cache_lookup how = rt_plan_cache_get(planner->cache, vkey, planner->target.arch, g, &v->kernels, &v->nkernels,
                                                why, sizeof why);
        v->from_plan_cache = how == RT_CACHE_HIT_MEMORY || how == RT_CACHE_HIT_DISK;
    }
    if (v->from_plan_cache) return finish_variant(planner, g, v, err, n);
    v->codegen_runs++;
    if (cg_emit_all_ex(g, &o, &v->kernels, &v->nkernels, codegen_err, sizeof codegen_err) != 0)
        return rt_fail(RT_ERR_COMPILE, err, n, "codegen (%s variant) of model %s: %s", dims ? "small-shape" : "large-shape",
                       g->name, codegen_err);
    bool measured = false;
    if (planner->tuner && rt_tuner_can_measure(planner->tuner)) {
        rt_status st = autotune_kernels(planner, g, &o, v, &measured, err, n);
        if (st != RT_OK) return st;
    }
    if (measured) { /* again, with the choices now stored */
        cg_kernels_free(v->kernels, v->nkernels);
        v->kernels = NULL;
        v->nkernels = 0;
        v->codegen_runs++;
        if (cg_emit_all_ex(g, &o, &v->kernels, &v->nkernels, codegen_err, sizeof codegen_err) != 0)
            return rt_fail(RT_ERR_COMPILE, err, n, "codegen (autotuned variant) of model %s: %s", g->name, codegen_err);
    }
    (void)share_identical_kernels(v->kernels, v->nkernels);
    if (planner->cache && dims) {
        char what[256];
        snprintf(what, sizeof what, "plan %s (a shape variant)", planner->name ? planner->name : g->name);
        (void)rt_plan_cache_put(planner->cache, vkey, planner->target.arch, what, NULL, v->kernels, v->nkernels);
    }
    return finish_variant(planner, g, v, err, n);
}

/* The rest of a variant once it has its kernels: the arena offsets, the
 * values no plan placed, the packed values. */
static rt_status finish_variant(const kc_planner *planner, const ir_graph *g, rt_variant_plan *v, char *err, size_t n)
{
    int vgi = -1;
    for (int i = 0; i < KC_NVG; i++)
        if (v->graph && v->graph == planner->vgraph[i]) vgi = i;
    v->node_offset = malloc(((size_t)planner->nnodes + 1) * sizeof *v->node_offset);
    if (!v->node_offset) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    memcpy(v->node_offset, vgi >= 0 ? planner->vg_offset[vgi] : planner->node_offset,
           (size_t)planner->nnodes * sizeof *v->node_offset);
    v->arena_bytes = vgi >= 0 ? planner->vg_arena_bytes[vgi] : planner->arena_bytes;
    rt_status st = reserve_unplanned(planner->max_dims, g, v->kernels, v->nkernels, v->node_offset, &v->arena_bytes, err, n);
    return st == RT_OK ? list_packed(planner, v, err, n) : st;
}

static rt_status plan_exact_variant(void *planner, const ir_graph *g, const int64_t *dims, rt_variant_plan *out,
                                    char *err, size_t n)
{
    return plan_variant(planner, g, dims, out, err, n);
}

/* The max dims by symbol, checked. */
static rt_status resolve_max_dims(const kc_model_options *o, const ir_graph *g, int64_t *maxd, char *err, size_t n)
{
    for (int i = 0; i < IR_MAX_SYMS; i++) maxd[i] = 0;
    if (o->nmax_dims < 0 || (o->nmax_dims && !o->max_dims)) return rt_fail(RT_ERR_INVALID, err, n, "max dims: NULL array");
    for (int i = 0; i < o->nmax_dims; i++) {
        const rt_dim_value *dv = &o->max_dims[i];
        if (!dv->name) return rt_fail(RT_ERR_INVALID, err, n, "max dims: entry %d has no name", i);
        int s = ir_graph_find_sym(g, dv->name);
        if (s < 0) {
            bool defined = false;
            for (int j = 0; j < o->compile.ndefines; j++) defined |= !strcmp(o->compile.defines[j].name, dv->name);
            if (defined) continue; /* fixed by a define: nothing to size */
            return rt_fail(RT_ERR_NOT_FOUND, err, n, "max dims: model %s has no dim '%s'", g->name, dv->name);
        }
        if (dv->value < 1)
            return rt_fail(RT_ERR_INVALID, err, n, "max dims: %s=%lld must be at least 1", dv->name, (long long)dv->value);
        maxd[s] = dv->value;
    }
    for (int s = 0; s < g->nsyms; s++)
        if (maxd[s] < 1)
            return rt_fail(RT_ERR_INVALID, err, n,
                           "max dims: no value for dim '%s' of model %s: give every dim its largest value (it sizes "
                           "the buffers), e.g. %s=%d", g->syms[s], g->name, g->syms[s], 16);
    return RT_OK;
}

/* Every parameter's and output's size at the max dims fits in 64 bits (the
 * runtime computes them at any dims up to the max; the memory plan checks
 * the intermediates). */
static bool fits_at(const ir_type *t, const int64_t *maxd)
{
    int64_t numel;
    return ir_type_shape_at(t, maxd, NULL, &numel) && numel <= INT64_MAX / ir_dtype_size(t->dtype);
}

static rt_status check_sizes(const ir_graph *g, const int64_t *maxd, char *err, size_t n)
{
    for (int i = 0; i < g->nparams + g->noutputs; i++) {
        const ir_node *v = i < g->nparams ? g->params[i] : g->outputs[i - g->nparams].value;
        const char *name = i < g->nparams ? v->name : g->outputs[i - g->nparams].name;
        src_loc loc = i < g->nparams ? v->loc : g->outputs[i - g->nparams].loc;
        if (!fits_at(&v->type, maxd))
            return rt_fail(RT_ERR_INVALID, err, n, "%s:%d:%d: %s '%s' (line %d): its size at the max dims does not fit in 64 "
                           "bits: lower the max dims", loc.file ? loc.file : g->name, loc.line, loc.col,
                           i < g->nparams ? "parameter" : "output", name ? name : "?", loc.line);
    }
    return RT_OK;
}

/* Appends a plan-cache line to the unit's warnings: the entry was corrupt
 * or unusable (why), so the model compiles in full. */
static void plan_cache_warning(kc_unit *u, const char *why)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "warning: kiln plan cache: %s; compiled in full and stored again", why);
    size_t old = u->warnings ? strlen(u->warnings) : 0, add = strlen(msg);
    char *all = realloc(u->warnings, old + add + 2);
    if (!all) return;
    if (old) all[old++] = '\n';
    memcpy(all + old, msg, add + 1);
    u->warnings = all;
}

/* The plan cache's entry (read before the passes ran) decoded against the
 * fused graph: its large-shape kernels into v, its text and memory figures
 * into plan; false when they do not decode or fit (said in the warnings). */
static bool plan_from_cache(kc_unit *u, const rt_blob *entry, rt_plan_cache_head *head, rt_plan *plan,
                            rt_variant_plan *v)
{
    char why[1024];
    if (!rt_plan_cache_decode(entry->data, entry->size, u->fused, NULL, &v->kernels, &v->nkernels, why, sizeof why)) {
        plan_cache_warning(u, why);
        return false;
    }
    plan->text = head->text;
    head->text = NULL;
    plan->memory = head->mem;
    u->mp.packed = (int64_t)head->mem.packed; /* as plan_memory_figures states it */
    v->from_plan_cache = true;
    return true;
}

/* The plan of a fused, memory-planned unit (the caller moves the fused graph
 * into it). cache: the plan cache under key (NULL: none; then the memory
 * plan's copies were counted already); entry, head: its entry when one was
 * found (NULL: none), used when it fits. */
static rt_status make_plan(kc_unit *u, const cg_target *target, const int64_t *maxd, rt_tuner *tuner, rt_cache *cache,
                           rt_cache_key key, const rt_blob *entry, rt_plan_cache_head *head, rt_plan *plan, char *err,
                           size_t n)
{
    memset(plan, 0, sizeof *plan);
    const ir_graph *g = u->fused;
    kc_planner *planner = calloc(1, sizeof *planner);
    if (!planner) rt_tuner_free(tuner);
    plan->planner = planner;
    plan->planner_free = planner_free;
    plan->name = strdup(u->o.name);
    plan->variants = calloc(1, sizeof *plan->variants);
    if (!planner || !plan->name || !plan->variants) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    plan->nvariants = 1; /* rt_plan_free frees what variant 0 holds from here on */
    u->target = target;
    planner->cache = cache;
    planner->key = key;
    planner->name = plan->name;
    planner->target = *target;
    bool hit = entry && plan_from_cache(u, entry, head, plan, &plan->variants[0]);
    if (!hit) {
        if (cache) { /* the copies kc_compile_model left for a miss */
            count_copies(u);
            plan->codegen_runs++;
        }
        size_t tlen = 0;
        FILE *f = open_memstream(&plan->text, &tlen);
        if (!f) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        kc_print_plan(u, target, f);
        fclose(f);
        plan->codegen_runs++;
    }
    planner->tuner = tuner;
    memcpy(planner->max_dims, maxd, sizeof planner->max_dims);
    memcpy(plan->max_dims, maxd, sizeof plan->max_dims);
    planner->nnodes = g->nnodes;
    planner->node_offset = malloc(((size_t)g->nnodes + 1) * sizeof *planner->node_offset);
    if (!planner->node_offset) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    planned_offsets(u, planner->node_offset, &planner->arena_bytes);
    for (int i = 0; i < KC_NVG; i++) { /* the variant graphs go with the planner */
        kc_vgraph *vg = &u->vg[i];
        if (!vg->fused) continue;
        planner->vg_offset[i] = malloc(((size_t)g->nnodes + 1) * sizeof *planner->vg_offset[i]);
        if (!planner->vg_offset[i]) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        memplan_offsets(vg->fused, &vg->mp, planner->vg_offset[i], &planner->vg_arena_bytes[i]);
        planner->vgraph[i] = vg->fused;
        vg->fused = NULL;
    }
    /* the large-shape variant now (codegen errors show at compile); the
     * decode-shaped ones when a run first needs them */
    rt_status st = hit ? finish_variant(planner, g, &plan->variants[0], err, n)
                       : plan_variant(planner, g, NULL, &plan->variants[0], err, n);
    if (st != RT_OK) return st;
    if (!hit) st = plan_memory_figures(u, plan->variants[0].kernels, plan->variants[0].nkernels, &plan->memory, err, n);
    if (st != RT_OK) return st;
    plan->plan_variant = plan_exact_variant;
    plan->head = u->head_param >= 0;
    plan->head_weight = u->head_param;
    return RT_OK;
}

/* The plan cache's key: everything the plan is a function of besides the
 * build (rt_plan_cache_key adds the Kiln version and build identity): the
 * model's name and text, the defines, the passes and rules turned off or
 * on, the LM head's split, the max dims and the target. */
static rt_status plan_key(const kc_unit *u, int nsyms, const int64_t *maxd, const cg_target *t, rt_cache_key *key)
{
    char *desc = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&desc, &len);
    if (!f) return RT_ERR_NOMEM;
    const kc_options *o = &u->o;
    fprintf(f, "name %zu %s\ntext %zu\n", strlen(o->name), o->name, u->src.len);
    bool failed = fwrite(u->src.text, 1, u->src.len, f) != u->src.len;
    fprintf(f, "\ndefines %d\n", o->ndefines);
    for (int i = 0; i < o->ndefines; i++)
        fprintf(f, "%zu %s %zu %s\n", strlen(o->defines[i].name), o->defines[i].name, strlen(o->defines[i].value),
                o->defines[i].value);
    fprintf(f, "disabled %d\n", o->ndisabled);
    for (int i = 0; i < o->ndisabled; i++) fprintf(f, "%zu %s\n", strlen(o->disabled[i]), o->disabled[i]);
    fprintf(f, "enabled %d\n", o->nenabled);
    for (int i = 0; i < o->nenabled; i++) fprintf(f, "%zu %s\n", strlen(o->enabled[i]), o->enabled[i]);
    fprintf(f, "head_sample %d\npacked %d\nmax dims %d", o->head_sample ? 1 : 0, o->packed ? 1 : 0, nsyms);
    for (int s = 0; s < nsyms; s++) fprintf(f, " %lld", (long long)maxd[s]);
    fprintf(f, "\ntarget %s %d %lld %lld\n", t->arch, t->sm_count, (long long)t->smem_per_block, (long long)t->l2_bytes);
    /* a write that failed leaves a description without part of the model: no key (no plan cache) */
    failed = failed || ferror(f) != 0;
    if (fclose(f) != 0 || failed || !desc) {
        free(desc);
        return RT_ERR_NOMEM;
    }
    char err[256];
    rt_status st = rt_plan_cache_key(desc, len, t->arch, key, err, sizeof err);
    free(desc);
    return st;
}

rt_status kc_compile_model(rt_ctx *ctx, const kc_model_options *o, rt_model **out, char **warnings, char *err,
                           size_t n)
{
    *out = NULL;
    if (warnings) *warnings = NULL;
    if (!ctx || !o) return rt_fail(RT_ERR_INVALID, err, n, "compile: NULL argument");
    kc_options co = o->compile;
    if (o->report_json) *o->report_json = NULL;
    co.report = o->report_json != NULL;
    co.keep_written = false;
    co.print_before = co.print_after = NULL;
    co.print_after_all = false;
    kc_unit *u;
    rt_status st = kc_open(&co, NULL, &u, err, n);
    if (st != RT_OK) return st;
    int64_t maxd[IR_MAX_SYMS];
    rt_plan plan;
    memset(&plan, 0, sizeof plan);
    rt_blob entry = {0};
    rt_plan_cache_head head = {0};
    bool have_entry = false;
    if ((st = kc_parse(u, err, n)) != RT_OK) goto out;
    if ((st = resolve_max_dims(o, u->written, maxd, err, n)) != RT_OK) goto out;
    if ((st = check_sizes(u->written, maxd, err, n)) != RT_OK) goto out;
    cg_target target;
    rt_ctx_target(ctx, &target);
    /* the plan cache (not with autotuning: the choices it stores change the
     * kernels): the entry is read now, its kernels decoded once the passes ran */
    rt_cache *cache = o->autotune ? NULL : rt_ctx_kernel_cache(ctx);
    rt_cache_key key = {0};
    if (cache && plan_key(u, u->written->nsyms, maxd, &target, &key) != RT_OK) cache = NULL;
    if (cache) {
        char why[1024];
        rt_cache_lookup how = rt_cache_get_ex(cache, key, target.arch, &entry, why, sizeof why);
        have_entry = (how == RT_CACHE_HIT_MEMORY || how == RT_CACHE_HIT_DISK) &&
                     rt_plan_cache_decode(entry.data, entry.size, NULL, &head, NULL, NULL, why, sizeof why);
        if (have_entry && o->report_json && !head.report) {
            have_entry = false;
            snprintf(why, sizeof why, "an entry without the fusion report");
        }
        if (!have_entry && why[0]) plan_cache_warning(u, why);
    }
    if ((st = kc_fuse(u, err, n)) != RT_OK) goto out;
    char plan_err[512];
    if (plan_memory(u, maxd, !cache, plan_err, sizeof plan_err) != RT_OK) {
        st = rt_fail(RT_ERR_INTERNAL, err, n, "memory plan: %s", plan_err);
        goto out;
    }
    rt_tuner *tuner = NULL;
    if (o->autotune && (st = rt_tuner_create(ctx, &o->tune_hooks, &tuner, err, n)) != RT_OK) goto out;
    if ((st = make_plan(u, &target, maxd, tuner, cache, key, have_entry ? &entry : NULL, &head, &plan, err, n)) != RT_OK)
        goto out; /* the plan owns the tuner */
    bool hit = plan.variants[0].from_plan_cache;
    if (o->report_json) { /* with the memory plan's copies: counted, or from the plan cache */
        pass_report_variant dv[KC_NVG];
        int ndv = variant_reports(u, dv);
        *o->report_json = hit ? head.report : pass_report_json_text(&u->report, u->fused, &u->mp, dv, ndv);
        if (hit) head.report = NULL;
        if (!*o->report_json) {
            st = rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
            goto out;
        }
    }
    if (cache && !hit) {
        char what[256];
        snprintf(what, sizeof what, "plan %s", plan.name);
        rt_plan_cache_head h = {plan.text, o->report_json ? *o->report_json : NULL, plan.memory};
        (void)rt_plan_cache_put(cache, key, target.arch, what, &h, plan.variants[0].kernels, plan.variants[0].nkernels);
    }
    plan.graph = u->fused;
    u->fused = NULL;
    plan.pack_source = cg_template_text("pack.cuh");
    st = rt_model_create(ctx, &plan, &o->run, out, err, n); /* takes the plan */
    if (st == RT_OK && warnings) {
        *warnings = u->warnings;
        u->warnings = NULL;
    }
out:
    if (st != RT_OK && o->report_json) {
        free(*o->report_json);
        *o->report_json = NULL;
    }
    rt_plan_free(&plan);
    rt_blob_free(&entry);
    rt_plan_cache_head_free(&head);
    kc_free(u);
    return st;
}
