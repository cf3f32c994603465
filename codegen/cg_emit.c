/* codegen/cg_emit.c — codegen's public entry points (codegen/cg.h).
 *
 * For kernel group k: pick the family from the group's kind and anchor
 * (matmul -> matmul_wgmma/matmul/gemv, attention -> attention prefill/decode, row -> row,
 * a gather anchored by expert_linear or topk -> moe, everything else -> elementwise),
 * generate its hooks and constants
 * (cg_family.c), and assemble the translation unit
 *
 *     common.cuh | generated part | <family>.cuh
 *
 * (attention: common.cuh | generated part | attention_common.cuh | <family>.cuh;
 * cg_family_templates lists the files after the generated part).
 *
 * When a group does not fit its family's template (a reduction over a
 * non-last axis, a matmul operand whose layout is not strided, ...), the
 * generic fallback computes each output element in kiln_elem of the
 * elementwise template, with loops for reductions and matmuls: correct,
 * slow, and recorded in the kernel's note.
 *
 * A matmul_wgmma kernel (Hopper, TMA operands) carries a second kernel, its
 * mma.sync fallback (cg_kernel.fallback, build_fallback), for launches whose
 * base pointers TMA cannot describe. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_impl.h"

typedef struct cg_embedded {
    const char *name;
    const char *text;
    size_t len;
} cg_embedded;
extern const cg_embedded cg_embedded_templates[]; /* build/gen/codegen/cg_templates.c */
extern const int cg_embedded_count;

const char *cg_template_text(const char *name)
{
    for (int i = 0; i < cg_embedded_count; i++)
        if (!strcmp(cg_embedded_templates[i].name, name)) return cg_embedded_templates[i].text;
    return NULL;
}

const char *cg_family_name(cg_family f)
{
    switch (f) {
    case CG_FAMILY_ELEMENTWISE: return "elementwise";
    case CG_FAMILY_ROW: return "row";
    case CG_FAMILY_MATMUL: return "matmul";
    case CG_FAMILY_GEMV: return "gemv";
    case CG_FAMILY_ATTENTION_PREFILL: return "attention_prefill";
    case CG_FAMILY_ATTENTION_DECODE: return "attention_decode";
    case CG_FAMILY_MATMUL_WGMMA: return "matmul_wgmma";
    case CG_FAMILY_ATTENTION_WGMMA: return "attention_wgmma";
    case CG_FAMILY_MOE: return "moe";
    case CG_FAMILY_GEMV_MMA: return "gemv_mma";
    }
    return "?";
}

const char *cg_family_template(cg_family f)
{
    switch (f) {
    case CG_FAMILY_ELEMENTWISE: return "elementwise.cuh";
    case CG_FAMILY_ROW: return "row.cuh";
    case CG_FAMILY_MATMUL: return "matmul_mma.cuh";
    case CG_FAMILY_GEMV: return "gemv.cuh";
    case CG_FAMILY_ATTENTION_PREFILL: return "attention_prefill.cuh";
    case CG_FAMILY_ATTENTION_DECODE: return "attention_decode.cuh";
    case CG_FAMILY_MATMUL_WGMMA: return "matmul_wgmma.cuh";
    case CG_FAMILY_ATTENTION_WGMMA: return "attention_wgmma.cuh";
    case CG_FAMILY_MOE: return "moe.cuh";
    case CG_FAMILY_GEMV_MMA: return "gemv_mma.cuh";
    }
    return "?";
}

const char *const *cg_family_templates(cg_family f)
{
    static const char *const elementwise[] = {"elementwise.cuh", NULL};
    static const char *const row[] = {"row.cuh", NULL};
    static const char *const matmul[] = {"matmul_mma.cuh", NULL};
    static const char *const gemv[] = {"gemv.cuh", NULL};
    static const char *const prefill[] = {"attention_common.cuh", "attention_prefill.cuh", NULL};
    static const char *const decode[] = {"attention_common.cuh", "attention_decode.cuh", NULL};
    static const char *const wgmma[] = {"matmul_wgmma.cuh", NULL};
    /* the attention helpers, then the wgmma/TMA/mbarrier helpers of matmul_wgmma.cuh (its
     * kernel left out: the generated part defines KILN_WGMMA_NO_KERNEL) */
    static const char *const att_wgmma[] = {"attention_common.cuh", "matmul_wgmma.cuh", "attention_wgmma.cuh", NULL};
    static const char *const moe[] = {"gemv.cuh", "moe.cuh", NULL}; /* gemv.cuh: its traits and loads (KILN_GEMV_MMA 1) */
    /* gemv.cuh's element traits and loads (KILN_GEMV_MMA 1: not its kernel), then the kernel */
    static const char *const gemv_mma[] = {"gemv.cuh", "gemv_mma.cuh", NULL};
    switch (f) {
    case CG_FAMILY_ELEMENTWISE: return elementwise;
    case CG_FAMILY_ROW: return row;
    case CG_FAMILY_MATMUL: return matmul;
    case CG_FAMILY_GEMV: return gemv;
    case CG_FAMILY_ATTENTION_PREFILL: return prefill;
    case CG_FAMILY_ATTENTION_DECODE: return decode;
    case CG_FAMILY_MATMUL_WGMMA: return wgmma;
    case CG_FAMILY_ATTENTION_WGMMA: return att_wgmma;
    case CG_FAMILY_MOE: return moe;
    case CG_FAMILY_GEMV_MMA: return gemv_mma;
    }
    static const char *const none[] = {NULL};
    return none;
}

typedef struct cg_priv {
    arena a;
    cg_str source, generated;
} cg_priv;

void *cg_kernel_storage(cg_kernel *k, size_t bytes)
{
    if (!k->priv_) {
        cg_priv *p = calloc(1, sizeof *p);
        if (!p) return NULL;
        arena_init(&p->a);
        k->priv_ = p;
    }
    return arena_alloc(&((cg_priv *)k->priv_)->a, bytes ? bytes : 1);
}

void cg_kernel_free(cg_kernel *k)
{
    if (!k) return;
    cg_priv *p = k->priv_;
    if (p) {
        cg_str_free(&p->source);
        cg_str_free(&p->generated);
        arena_free(&p->a);
        free(p);
    }
    free(k->args);
    free(k->xforms);
    if (k->fallback) {
        cg_kernel_free(k->fallback);
        free(k->fallback);
    }
    memset(k, 0, sizeof *k);
}

void cg_kernels_free(cg_kernel *ks, int n)
{
    if (!ks) return;
    for (int i = 0; i < n; i++) cg_kernel_free(&ks[i]);
    free(ks);
}

static const char *ctype_of(ir_dtype t)
{
    switch (t) {
    case IR_F32: return "float";
    case IR_F16: return "__half";
    case IR_BF16: return "__nv_bfloat16";
    default: return "int";
    }
}

static const char *template_text(const cg_options *o, const char *name)
{
    const char *t = o && o->template_lookup ? o->template_lookup(o->template_user, name) : NULL;
    return t ? t : cg_template_text(name);
}

/* "kiln_<model>_k<k>_<kind>", with anything but [A-Za-z0-9_] as '_'. */
static const char *kernel_name(arena *a, const ir_graph *g, int k)
{
    char *s = arena_printf(a, "kiln_%s_k%d_%s", g->name ? g->name : "model", k, ir_group_kind_name(g->groups[k].kind));
    for (char *c = s; c && *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            *c = '_';
    return s;
}

/* Generates out (whose priv_ holds the arena) with the family of the group's
 * kind, or the generic elementwise kernel. */
static int build(const ir_graph *g, int k, const cg_options *opts, const bool *bind, const pass_users *users,
                 bool generic, bool no_wgmma, cg_kernel *out, char *err, size_t errlen)
{
    cg_priv *priv = out->priv_;
    cg_gen gen;
    memset(&gen, 0, sizeof gen);
    gen.g = g;
    gen.k = k;
    gen.anchor = g->groups[k].anchor;
    gen.a = &priv->a;
    gen.bind = bind;
    gen.users = users;
    gen.kern = out;
    gen.no_wgmma = no_wgmma;
    gen.dims = opts ? opts->dims : NULL;
    gen.opts = opts;
    cg_target default_target;
    if (opts && opts->target) gen.target = opts->target;
    else {
        cg_target_default(NULL, &default_target);
        gen.target = &default_target;
    }
    gen.err = err;
    gen.errlen = errlen;
    cg_plan plan;
    memset(&plan, 0, sizeof plan);
    cg_str hooks = {0};
    const char *kind = ir_group_kind_name(g->groups[k].kind);
    const int64_t *dims = opts ? opts->dims : NULL;
    bool ok;
    if (generic && cg_group_paired(&gen)) /* the generic kernel knows only the values' own layouts */
        ok = cg_fail(&gen, "its values' rotation pairs are side by side (the projection's weight rows paired for "
                           "decode attention's RoPE), which only the templates read");
    else if (generic) ok = cg_gen_elementwise(&gen, &plan, &hooks);
    else if (g->groups[k].kind == IR_GROUP_MATMUL) ok = cg_gen_matmul(&gen, &plan, &hooks, dims);
    else if (g->groups[k].kind == IR_GROUP_ATTENTION) ok = cg_gen_attention(&gen, &plan, &hooks, dims);
    else if (g->groups[k].kind == IR_GROUP_ROW) ok = cg_gen_row(&gen, &plan, &hooks);
    else if (g->groups[k].kind == IR_GROUP_GATHER && cg_moe_anchor(gen.anchor)) ok = cg_gen_moe(&gen, &plan, &hooks);
    else ok = cg_gen_elementwise(&gen, &plan, &hooks);
    if (gen.dim_overflow)
        ok = cg_fail(&gen, "a size in the kernel of %s (line %d) does not fit in 64 bits", ir_op_name(gen.anchor->op),
                     gen.anchor->loc.line);
    ok = ok && !gen.failed && !hooks.oom && !plan.defines.oom;

    if (ok) {
        /* the model's dims used by the hooks' index math, last */
        for (int i = 0; i < g->nsyms; i++)
            if (gen.dim_used[i]) cg_scalar(&gen, arena_printf(gen.a, "dim_%s", g->syms[i]), ir_dim_sym(i));
        ok = !gen.failed;
    }
    if (ok) {
        out->family = plan.family;
        out->pdl = plan.family == CG_FAMILY_GEMV || plan.family == CG_FAMILY_GEMV_MMA || plan.family == CG_FAMILY_ROW ||
                   plan.family == CG_FAMILY_ELEMENTWISE || plan.family == CG_FAMILY_ATTENTION_DECODE ||
                   plan.family == CG_FAMILY_MATMUL_WGMMA || plan.family == CG_FAMILY_MOE;
        out->args = gen.args;
        out->nargs = gen.nargs;
        gen.args = NULL;
        for (int i = 0; i < out->nargs; i++) out->args[i].offset = 8 * (size_t)i;
        out->args_size = 8 * (size_t)out->nargs;
        /* the maps, then KilnArgs: both Hopper templates' parameters hold
         * 3 maps whether or not each is used (the matmul's output map only
         * with the TMA store); with more than 3 (the QKV epilogue's q and
         * caches, the TMA residual's) 5 */
        out->param_prefix = out->ntmaps ? 128 * (size_t)(out->ntmaps > 3 ? CG_MAX_TMAPS : 3) : 0;
        out->param_size = out->ntmaps ? (out->param_prefix + out->args_size + 63) / 64 * 64 : out->args_size;

        const ir_node *A = gen.anchor;
        ir_dtype t = (A->op == IR_OP_MATMUL || A->op == IR_OP_LINEAR || A->op == IR_OP_ATTENTION)
                         ? A->inputs[0]->type.dtype
                         : A->type.dtype;
        if (plan.family == CG_FAMILY_ROW) t = A->inputs[0]->type.dtype;
        cg_str *gs = &priv->generated;
        cg_str_printf(gs, "// ---- generated by kiln codegen: kernel k%d of model %s ----\n", k, g->name ? g->name : "?");
        cg_str_printf(gs, "// group kind %s, anchor %%%d %s (line %d); family %s\n", kind, A->id, ir_op_name(A->op),
                      A->loc.line, cg_family_name(plan.family));
        if (generic) cg_str_printf(gs, "// generic fallback: the group does not fit the %s template\n", kind);
        cg_str_printf(gs, "#define KILN_KERNEL %s\n", out->name);
        cg_str_printf(gs, "#define KILN_T %s\ntypedef KILN_T kiln_t;\n", ctype_of(t));
        if (plan.defines.s) cg_str_append(gs, plan.defines.s, plan.defines.len);
        cg_str_printf(gs, "\nstruct KilnArgs {\n");
        for (int i = 0; i < out->nargs; i++) {
            const cg_arg *a = &out->args[i];
            const char *ct = a->ctype;
            size_t l = strlen(ct);
            cg_str_printf(gs, "    %s%s%s;\n", ct, l && ct[l - 1] == '*' ? "" : " ", a->field);
        }
        if (out->nargs == 0) cg_str_printf(gs, "    long long unused_;\n");
        cg_str_printf(gs, "};\n\n");
        if (hooks.s) cg_str_append(gs, hooks.s, hooks.len);

        const char *const *names = cg_family_templates(plan.family);
        const char *missing = template_text(opts, "common.cuh") ? NULL : "common.cuh";
        for (int i = 0; names[i] && !missing; i++)
            if (!template_text(opts, names[i])) missing = names[i];
        if (missing) {
            snprintf(err, errlen, "kernel k%d: template %s is not available in this build", k, missing);
            ok = false;
        } else {
            const char *common = template_text(opts, "common.cuh");
            cg_str *s = &priv->source;
            cg_str_append(s, common, strlen(common));
            cg_str_append(s, "\n", 1);
            if (gs->s) cg_str_append(s, gs->s, gs->len);
            cg_str_append(s, "\n", 1);
            for (int i = 0; names[i]; i++) {
                const char *tmpl = template_text(opts, names[i]);
                if (i) cg_str_append(s, "\n", 1);
                cg_str_append(s, tmpl, strlen(tmpl));
            }
            if (s->oom || gs->oom) {
                snprintf(err, errlen, "out of memory");
                ok = false;
            } else {
                out->source = s->s;
                out->source_len = s->len;
                out->generated = gs->s;
            }
        }
    }
    free(gen.args);
    free(gen.memo);
    cg_str_free(&hooks);
    cg_str_free(&plan.defines);
    return ok ? 0 : -1;
}

/* The matmul_mma kernel of a matmul_wgmma group (cg_kernel.fallback): the
 * same generator without the Hopper template, named <name>_mma; its KilnArgs
 * must be the primary's field for field (the runtime fills them once). */
static int build_fallback(const ir_graph *g, int k, const cg_options *opts, const bool *bind, const pass_users *users,
                          cg_kernel *out, char *err, size_t errlen)
{
    cg_kernel *fb = calloc(1, sizeof *fb);
    cg_priv *priv = calloc(1, sizeof *priv);
    if (!fb || !priv) {
        free(fb);
        free(priv);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    arena_init(&priv->a);
    fb->priv_ = priv;
    fb->group = k;
    fb->kind = out->kind;
    fb->name = arena_printf(&priv->a, out->family == CG_FAMILY_ATTENTION_WGMMA ? "%s_prefill" : "%s_mma", out->name);
    int rc = build(g, k, opts, bind, users, false, true, fb, err, errlen);
    cg_family want = out->family == CG_FAMILY_MATMUL_WGMMA ? CG_FAMILY_MATMUL : CG_FAMILY_ATTENTION_PREFILL;
    if (rc != 0 && out->family == CG_FAMILY_ATTENTION_WGMMA) { /* a head dim only the wgmma template takes */
        cg_kernel_free(fb);
        free(fb);
        return 0;
    }
    if (rc == 0 && (fb->family != want || fb->nargs != out->nargs)) {
        snprintf(err, errlen, "kernel k%d: the fallback of the wgmma kernel has other arguments", k);
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < fb->nargs; i++)
        if (strcmp(fb->args[i].field, out->args[i].field) || fb->args[i].kind != out->args[i].kind) {
            snprintf(err, errlen, "kernel k%d: the mma.sync fallback's field %d differs", k, i);
            rc = -1;
        }
    if (rc != 0) {
        cg_kernel_free(fb);
        free(fb);
        return -1;
    }
    out->fallback = fb;
    return 0;
}

/* Kernel k, with the analyses of g cached in an (shared by the kernels of
 * one cg_emit_all_ex). */
static int emit_kernel(const ir_graph *g, int k, const cg_options *opts, pass_analyses *an, cg_kernel *out, char *err,
                       size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!g || k < 0 || k >= g->ngroups) {
        snprintf(err, errlen, "no kernel group %d", k);
        return -1;
    }
    const bool *bind = pass_analyses_bind_time(an, g);
    const pass_users *users = pass_analyses_users(an, g);
    if (!bind || !users) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    char why[512], why2[512];
    for (int attempt = 0; attempt < 2; attempt++) {
        cg_priv *priv = calloc(1, sizeof *priv);
        if (!priv) {
            snprintf(err, errlen, "out of memory");
            break;
        }
        arena_init(&priv->a);
        out->priv_ = priv;
        out->group = k;
        out->kind = ir_group_kind_name(g->groups[k].kind);
        out->name = kernel_name(&priv->a, g, k);
        char *msg = attempt == 0 ? why : why2;
        msg[0] = 0;
        rc = build(g, k, opts, bind, users, attempt == 1, false, out, msg, sizeof why);
        if (rc == 0 && (out->family == CG_FAMILY_MATMUL_WGMMA || out->family == CG_FAMILY_ATTENTION_WGMMA))
            rc = build_fallback(g, k, opts, bind, users, out, msg, sizeof why);
        if (rc == 0) {
            if (attempt == 1) out->note = arena_printf(&priv->a, "generic fallback: %s", why);
            break;
        }
        cg_kernel_free(out);
        ir_group_kind gk = g->groups[k].kind;
        const char *kind = ir_group_kind_name(gk);
        /* the template families fall back to the generic kernel */
        if (attempt == 0 &&
            (gk == IR_GROUP_MATMUL || gk == IR_GROUP_ROW || gk == IR_GROUP_ATTENTION ||
             (gk == IR_GROUP_GATHER && cg_moe_anchor(g->groups[k].anchor))) &&
            strcmp(why, "out of memory"))
            continue;
        if (attempt == 0) snprintf(err, errlen, "kernel k%d (%s): %s", k, kind, why);
        else snprintf(err, errlen, "kernel k%d (%s): %s; the generic fallback failed too: %s", k, kind, why, why2);
        break;
    }
    if (rc != 0) memset(out, 0, sizeof *out);
    return rc;
}

int cg_emit_kernel_ex(const ir_graph *g, int k, const cg_options *opts, cg_kernel *out, char *err, size_t errlen)
{
    pass_analyses an = {0};
    int rc = emit_kernel(g, k, opts, &an, out, err, errlen);
    pass_analyses_clear(&an);
    return rc;
}

int cg_emit_kernel(const ir_graph *g, int k, cg_kernel *out, char *err, size_t errlen)
{
    return cg_emit_kernel_ex(g, k, NULL, out, err, errlen);
}

int cg_emit_all_ex(const ir_graph *g, const cg_options *opts, cg_kernel **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    cg_kernel *ks = calloc((size_t)g->ngroups + 1, sizeof *ks);
    if (!ks) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pass_analyses an = {0};
    for (int k = 0; k < g->ngroups; k++)
        if (emit_kernel(g, k, opts, &an, &ks[k], err, errlen) != 0) {
            pass_analyses_clear(&an);
            cg_kernels_free(ks, k);
            return -1;
        }
    pass_analyses_clear(&an);
    *out = ks;
    *n = g->ngroups;
    return 0;
}

int cg_emit_all(const ir_graph *g, cg_kernel **out, int *n, char *err, size_t errlen)
{
    return cg_emit_all_ex(g, NULL, out, n, err, errlen);
}

/* ---- launch rules ----------------------------------------------------------------- */

bool cg_arg_eval(const cg_arg *a, const int64_t *dims, int64_t *value) { return ir_dim_value(&a->dim, dims, value); }

const char *cg_kernel_label(const cg_kernel *k, char *buf, size_t n)
{
    const char *fam = k->family == CG_FAMILY_MATMUL_WGMMA           ? "matmul"
                      : k->family == CG_FAMILY_ATTENTION_WGMMA ? "attention_prefill"
                                                               : cg_family_name(k->family);
    if (k->config) snprintf(buf, n, "%s (%s)", fam, k->config);
    else snprintf(buf, n, "%s", fam);
    return buf;
}

bool cg_launch_eval(const cg_kernel *k, const int64_t *dims, unsigned grid[3], unsigned *block, size_t *smem,
                    char *err, size_t errlen)
{
    static const int64_t limit[3] = {2147483647LL, 65535, 65535};
    for (int i = 0; i < 3; i++) {
        const cg_grid_dim *gd = &k->launch.grid[i];
        int64_t v, v2 = 1;
        if (!ir_dim_value(&gd->n, dims, &v) || (gd->div2 > 0 && !ir_dim_value(&gd->n2, dims, &v2))) {
            snprintf(err, errlen, "%s: grid dimension %d needs a value for every dim", k->name, i);
            return false;
        }
        int64_t div = gd->div > 0 ? gd->div : 1;
        v = v <= 0 ? 0 : (v + div - 1) / div;
        if (gd->div2 > 0) v *= v2 <= 0 ? 0 : (v2 + gd->div2 - 1) / gd->div2;
        if (gd->cap > 0 && v > gd->cap) v = gd->cap;
        if (v > limit[i]) {
            snprintf(err, errlen, "%s: grid dimension %d is %lld, over CUDA's limit", k->name, i, (long long)v);
            return false;
        }
        grid[i] = (unsigned)v;
    }
    *block = (unsigned)k->launch.block;
    *smem = (size_t)k->launch.smem;
    return true;
}

/* ---- descriptions and files ------------------------------------------------------------ */

static const char *dim_str(const ir_graph *g, const ir_dim *d, char *buf, size_t n)
{
    ir_dim_print(d, g->syms, buf, n);
    return buf;
}

void cg_kernel_describe(const ir_graph *g, const cg_kernel *k, FILE *out)
{
    char b1[128], b2[128];
    fprintf(out, "kernel %s\n  group k%d (%s), family %s, template %s%s%s%s\n", k->name, k->group, k->kind,
            cg_family_name(k->family), cg_family_template(k->family), k->config ? " (" : "",
            k->config ? k->config : "", k->config ? ")" : "");
    if (k->note) fprintf(out, "  note: %s\n", k->note);
    if (k->fallback)
        fprintf(out, "  fallback: %s (%s) when an operand is not TMA-describable at run time\n", k->fallback->name,
                k->fallback->config ? k->fallback->config : cg_family_template(k->fallback->family));
    static const char *const operand_names[] = {"A", "W", "q", "k", "v", "output", "residual"};
    for (int i = 0; i < k->ntmaps; i++) {
        const cg_tmap *t = &k->tmaps[i];
        char b3[128], b4[128], b5[128];
        fprintf(out, "  tensor map %d (+%d): %s of field %s, %s, K %s, rows %s, ld %s, batch %s stride %s, box %d rows\n", i,
                128 * i, operand_names[t->operand], k->args[t->arg].field, ir_dtype_name(t->dtype),
                dim_str(g, &t->K, b1, sizeof b1), dim_str(g, &t->rows, b2, sizeof b2), dim_str(g, &t->ld, b3, sizeof b3),
                dim_str(g, &t->batch, b4, sizeof b4), dim_str(g, &t->batch_stride, b5, sizeof b5), t->box_rows);
    }
    fprintf(out, "  launch: grid (");
    for (int i = 0; i < 3; i++) {
        const cg_grid_dim *gd = &k->launch.grid[i];
        fprintf(out, "%s", i ? ", " : "");
        if (gd->div > 1) fprintf(out, "ceil((%s) / %lld)", dim_str(g, &gd->n, b1, sizeof b1), (long long)gd->div);
        else fprintf(out, "%s", dim_str(g, &gd->n, b1, sizeof b1));
        if (gd->div2 > 0) fprintf(out, " * ceil((%s) / %lld)", dim_str(g, &gd->n2, b1, sizeof b1), (long long)gd->div2);
        if (gd->cap > 0) fprintf(out, " max %lld", (long long)gd->cap);
    }
    fprintf(out, "), block %d, shared memory %lld bytes", k->launch.block, (long long)k->launch.smem);
    if (k->launch.cluster > 1)
        fprintf(out, ", clusters of %d CTAs along %s", k->launch.cluster, k->launch.cluster_y ? "y" : "x");
    fprintf(out, "\n");
    if (k->param_prefix)
        fprintf(out, "  parameter %s (%zu bytes): the tensor maps, then KilnArgs at +%zu\n",
                k->family == CG_FAMILY_ATTENTION_WGMMA ? "KilnAttTmaArgs" : "KilnTmaArgs", k->param_size, k->param_prefix);
    fprintf(out, "  KilnArgs (%zu bytes):\n", k->args_size);
    for (int i = 0; i < k->nargs; i++) {
        const cg_arg *a = &k->args[i];
        fprintf(out, "    +%-4zu %-8s %-26s ", a->offset, a->field, a->ctype);
        const ir_node *n = a->node >= 0 && a->node < g->nnodes ? g->nodes[a->node] : NULL;
        switch (a->kind) {
        case CG_ARG_PARAM: fprintf(out, "= %s %s", ir_op_name(g->params[a->index]->op), g->params[a->index]->name); break;
        case CG_ARG_OUTPUT: fprintf(out, "= output %s", g->outputs[a->index].name); break;
        case CG_ARG_STATE: fprintf(out, "= state %s (in place)", g->states[a->index].state->name); break;
        case CG_ARG_PACKED: fprintf(out, "= packed weight %%%d", a->node); break;
        case CG_ARG_INTERMEDIATE: fprintf(out, "= buffer of %%%d", a->node); break;
        case CG_ARG_WORKSPACE:
            fprintf(out, "= workspace of %s bytes%s", dim_str(g, &a->dim, b1, sizeof b1), a->zeroed ? ", zeroed" : "");
            break;
        case CG_ARG_SCALAR: fprintf(out, "= %s", dim_str(g, &a->dim, b1, sizeof b1)); break;
        case CG_ARG_NULL: fprintf(out, "= NULL"); break;
        case CG_ARG_SLOTS: fprintf(out, "= the run's slot table (NULL: none)"); break;
        case CG_ARG_SEQS: fprintf(out, "= the packed run's sequence table"); break;
        }
        if (n && a->elem_offset.nterms) fprintf(out, " + %s elements", dim_str(g, &a->elem_offset, b2, sizeof b2));
        if (a->written) fprintf(out, " (written)");
        fprintf(out, "\n");
    }
    for (int i = 0; i < k->nxforms; i++)
        fprintf(out, "  bind time: interleave the rows of %%%d (row 2j = j, row 2j+1 = %s + j)\n", k->xforms[i].node,
                dim_str(g, &k->xforms[i].half, b1, sizeof b1));
}

int cg_write_sources(const ir_graph *g, const char *dir, const cg_options *opts, char *err, size_t errlen)
{
    cg_kernel *ks;
    int n;
    if (cg_emit_all_ex(g, opts, &ks, &n, err, errlen) != 0) return -1;
    int rc = n;
    char *path = NULL;
    FILE *list = NULL;
    size_t plen = strlen(dir) + 300;
    path = malloc(plen);
    if (!path) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto done;
    }
    snprintf(path, plen, "%s/kernels.txt", dir);
    list = fopen(path, "w");
    if (!list) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = -1;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        for (const cg_kernel *k = &ks[i]; k; k = k->fallback) { /* a wgmma kernel's fallback too */
            snprintf(path, plen, "%s/%s.cu", dir, k->name);
            FILE *f = fopen(path, "w");
            if (!f) {
                snprintf(err, errlen, "%s: %s", path, strerror(errno));
                rc = -1;
                goto done;
            }
            bool ok = fwrite(k->source, 1, k->source_len, f) == k->source_len;
            ok = (fclose(f) == 0) && ok;
            if (!ok) {
                snprintf(err, errlen, "%s: write failed", path);
                rc = -1;
                goto done;
            }
        }
        cg_kernel_describe(g, &ks[i], list);
    }
done:
    if (list && fclose(list) != 0 && rc >= 0) {
        snprintf(err, errlen, "%s/kernels.txt: write failed", dir);
        rc = -1;
    }
    free(path);
    cg_kernels_free(ks, n);
    return rc;
}
