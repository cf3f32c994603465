/* passes/report.c — the fusion report for people (--explain) and for tools
 * (--report=FILE.json). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

const char *pass_bytes_str(arena *a, const ir_graph *g, const ir_dim *bytes)
{
    int64_t v;
    if (!ir_dim_is_const(bytes, &v)) {
        char buf[256];
        ir_dim_print(bytes, g->syms, buf, sizeof buf);
        return arena_printf(a, "%s bytes", buf);
    }
    if (v < 1024) return arena_printf(a, "%lld B", (long long)v);
    if (v < 1024 * 1024) return arena_printf(a, "%.1f KiB", v / 1024.0);
    if (v < 1024LL * 1024 * 1024) return arena_printf(a, "%.1f MiB", v / (1024.0 * 1024));
    return arena_printf(a, "%.2f GiB", v / (1024.0 * 1024 * 1024));
}

static const char *lines_str(arena *a, const pass_decision *d)
{
    if (d->nlines == 0) return "";
    char buf[128];
    size_t off = 0;
    for (int i = 0; i < d->nlines; i++) {
        int w = snprintf(buf + off, sizeof buf - off, "%s%d", i ? ", " : "", d->lines[i]);
        if (w > 0 && (size_t)w < sizeof buf - off) off += (size_t)w;
    }
    return arena_printf(a, " (line%s %s)", d->nlines > 1 ? "s" : "", buf);
}

/* "linear (line 17) + slice, silu, mul" */
const char *pass_kernel_describe(arena *a, const ir_graph *g, int k)
{
    const ir_node *anchor = g->groups[k].anchor;
    char buf[512];
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != k || n == anchor) continue;
        int w = snprintf(buf + off, sizeof buf - off, "%s%s", off ? ", " : "", ir_op_name(n->op));
        if (w > 0 && (size_t)w < sizeof buf - off) off += (size_t)w;
    }
    return arena_printf(a, "%s%s%s", pass_describe(a, anchor), off ? " + " : "", buf);
}

/* ---- why a kernel stands alone ----------------------------------------------- */

/* The kernel that computes n's data (through ungrouped views); -1 for a
 * parameter or a value no kernel computes. */
static int kernel_of(const ir_node *n)
{
    while (n->group < 0 && pass_is_view(n) && n->ninputs > 0) n = n->inputs[0];
    return n->group;
}

/* What keeps a kernel of kind `kind` from taking in a neighbour. */
static const char *kind_rule(ir_group_kind kind)
{
    switch (kind) {
    case IR_GROUP_MATMUL: return "reads its operands from memory (matmuls take epilogues, no prologues)";
    case IR_GROUP_ATTENTION: return "takes in only a rope or a cache write whose result it reads directly";
    case IR_GROUP_ROW: return "takes in elementwise work only (reduction-prologue, residual-norm)";
    case IR_GROUP_ELEMENTWISE: return "joins elementwise ops only (elementwise-chain)";
    default: return "runs alone (only elementwise ops fuse)";
    }
}

/* Why kernel k is not fused into a neighbour, or NULL for matmul and
 * attention kernels (what joins them, or is refused, is in the decisions). */
static const char *standalone_why(arena *a, const ir_graph *g, int k)
{
    ir_group_kind kind = g->groups[k].kind;
    const ir_node *A = g->groups[k].anchor;
    if (kind == IR_GROUP_MATMUL || kind == IR_GROUP_ATTENTION) return NULL;
    /* the kernels it reads from and the kernels that read it */
    bool *reads = calloc((size_t)g->ngroups + 1, sizeof *reads), *read_by = calloc((size_t)g->ngroups + 1, sizeof *read_by);
    if (!reads || !read_by) {
        free(reads);
        free(read_by);
        return NULL;
    }
    int nread_by = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group < 0 && !pass_is_view(n)) continue;
        int kn = n->group >= 0 ? n->group : -1;
        for (int j = 0; j < n->ninputs; j++) {
            int kp = kernel_of(n->inputs[j]);
            if (kn == k && kp >= 0 && kp != k) reads[kp] = true;
            if (kn >= 0 && kn != k && kp == k && !read_by[kn]) {
                read_by[kn] = true;
                nread_by++;
            }
        }
    }
    char buf[1024];
    size_t off = 0;
#define ADD(...)                                                                          \
    do {                                                                                  \
        int w_ = snprintf(buf + off, sizeof buf - off, __VA_ARGS__);                      \
        if (w_ > 0) off = (size_t)w_ < sizeof buf - off ? off + (size_t)w_ : sizeof buf - 1; \
    } while (0)
    ir_fusion_class cls = ir_op_class(A->op);
    if (cls == IR_CLASS_INJECTIVE)
        ADD("a %s is not elementwise (an element reads other places of its input), so no fusion rule joins it",
            ir_op_name(A->op));
    else if (kind == IR_GROUP_ROW)
        ADD("a %s is a reduction over rows", ir_op_name(A->op));
    else if (kind == IR_GROUP_CACHE_WRITE)
        ADD("attention-cache-write fuses a cache write only into the attention that reads the cache it writes");
    else
        ADD("%s", nread_by > 1 ? "its result is read by several kernels, and a value joins a consumer only when it "
                                 "has no other"
                               : "no neighbour took it in");
    if (A->op == IR_OP_ROPE && A->attrs.rope.rotary_dims)
        ADD("; it is a partial rotary rope (dims=%lld), which the attention templates do not apply (attention-rope "
            "refuses it)", (long long)A->attrs.rope.rotary_dims);
    else if (A->op == IR_OP_ROPE)
        ADD("; attention-rope takes a rope only when attention reads its result directly (through views)");
    int listed = 0;
    for (int j = 0; j < g->ngroups; j++)
        if (read_by[j] && listed < 4) {
            ADD("; read by k%d, %s, which %s", j, pass_describe(a, g->groups[j].anchor), kind_rule(g->groups[j].kind));
            listed++;
        }
    listed = 0;
    for (int j = 0; j < g->ngroups; j++)
        if (reads[j] && listed < 2 && (g->groups[j].kind == IR_GROUP_MATMUL || g->groups[j].kind == IR_GROUP_ATTENTION)) {
            ADD("; reads k%d, %s, whose epilogue takes elementwise ops only", j, pass_describe(a, g->groups[j].anchor));
            listed++;
        }
    if (!nread_by) ADD("; its result is a model output or state");
#undef ADD
    free(reads);
    free(read_by);
    return arena_strdup(a, buf);
}

static void standalone_print(arena *a, const ir_graph *g, FILE *out)
{
    bool any = false;
    for (int k = 0; k < g->ngroups; k++) {
        const char *why = standalone_why(a, g, k);
        if (!why) continue;
        if (!any) fprintf(out, "\nkernels not fused into a neighbour, and why:\n");
        any = true;
        fprintf(out, "  k%-3d %s: %s\n", k, pass_kernel_describe(a, g, k), why);
    }
}

void pass_kernels_print(const ir_graph *g, FILE *out)
{
    arena a;
    arena_init(&a);
    fprintf(out, "kernels (%d):\n", g->ngroups);
    for (int k = 0; k < g->ngroups; k++)
        fprintf(out, "  k%-3d %-12s %s\n", k, ir_group_kind_name(g->groups[k].kind), pass_kernel_describe(&a, g, k));
    arena_free(&a);
}

/* Is there a decision in r like d (the same rule, ops, outcome and reason)? */
static bool has_decision(const pass_report *r, const pass_decision *d)
{
    for (int i = 0; r && i < r->count; i++) {
        const pass_decision *e = &r->items[i];
        if (e->taken == d->taken && !strcmp(e->rule, d->rule) && !strcmp(e->what, d->what) &&
            !strcmp(e->why ? e->why : "", d->why ? d->why : ""))
            return true;
    }
    return false;
}

static void decision_print(arena *a, const ir_graph *g, const pass_decision *d, FILE *out)
{
    int64_t v;
    bool none = ir_dim_is_const(&d->bytes, &v) && v == 0;
    fprintf(out, "  %-8s %s%s: %s\n", d->taken ? "taken" : "refused", d->rule, lines_str(a, d), d->what);
    if (d->why && d->why[0]) fprintf(out, "           %s\n", d->why);
    if (!none)
        fprintf(out, "           %s %s of HBM traffic per call\n", d->taken ? "saves" : "would save",
                pass_bytes_str(a, g, &d->bytes));
}

void pass_report_print_variant(const pass_report *base, const pass_report_variant *v, FILE *out)
{
    arena a;
    arena_init(&a);
    int differ = 0;
    for (int i = 0; i < v->report->count; i++) differ += !has_decision(base, &v->report->items[i]);
    fprintf(out, "\n%s variants (%s): a graph of their own\n\n", v->name, v->when);
    pass_kernels_print(v->graph, out);
    fprintf(out, "\ntheir decisions where the above differ (%d):\n", differ);
    for (int i = 0; i < v->report->count; i++)
        if (!has_decision(base, &v->report->items[i])) decision_print(&a, v->graph, &v->report->items[i], out);
    arena_free(&a);
}

void pass_report_print(const pass_report *r, const ir_graph *g, FILE *out)
{
    arena a;
    arena_init(&a);
    int taken = 0;
    for (int i = 0; i < r->count; i++) taken += r->items[i].taken;
    fprintf(out, "fusion report for model %s\n\n", g->name);
    pass_kernels_print(g, out);
    standalone_print(&a, g, out);
    fprintf(out, "\ndecisions (%d taken, %d refused):\n", taken, r->count - taken);
    for (int i = 0; i < r->count; i++) decision_print(&a, g, &r->items[i], out);
    arena_free(&a);
}

static json_t *bytes_json(const ir_graph *g, const ir_dim *b)
{
    int64_t v;
    if (ir_dim_is_const(b, &v)) return json_integer(v);
    char buf[256];
    ir_dim_print(b, g->syms, buf, sizeof buf);
    return json_string(buf);
}

static json_t *node_json(const ir_node *n)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(n->id));
    json_object_set_new(o, "op", json_string(ir_op_name(n->op)));
    if (n->name) json_object_set_new(o, "name", json_string(n->name));
    json_object_set_new(o, "line", json_integer(n->loc.line));
    return o;
}

static json_t *kernels_json(const ir_graph *g)
{
    json_t *kernels = json_array();
    for (int k = 0; k < g->ngroups; k++) {
        json_t *o = json_object(), *ops = json_array();
        json_object_set_new(o, "id", json_integer(k));
        json_object_set_new(o, "kind", json_string(ir_group_kind_name(g->groups[k].kind)));
        json_object_set_new(o, "anchor", node_json(g->groups[k].anchor));
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i]->group == k) json_array_append_new(ops, node_json(g->nodes[i]));
        json_object_set_new(o, "ops", ops);
        arena a;
        arena_init(&a);
        const char *why = standalone_why(&a, g, k);
        if (why) json_object_set_new(o, "why_not_fused", json_string(why));
        arena_free(&a);
        json_array_append_new(kernels, o);
    }
    return kernels;
}

/* r's decisions (those base lacks when base is given). */
static json_t *decisions_json(const pass_report *r, const pass_report *base, const ir_graph *g)
{
    json_t *decisions = json_array();
    for (int i = 0; i < r->count; i++) {
        const pass_decision *d = &r->items[i];
        if (base && has_decision(base, d)) continue;
        json_t *o = json_object(), *lines = json_array();
        json_object_set_new(o, "pass", json_string(d->pass ? d->pass : ""));
        json_object_set_new(o, "rule", json_string(d->rule));
        json_object_set_new(o, "taken", json_boolean(d->taken));
        json_object_set_new(o, "what", json_string(d->what));
        json_object_set_new(o, "why", json_string(d->why ? d->why : ""));
        for (int j = 0; j < d->nlines; j++) json_array_append_new(lines, json_integer(d->lines[j]));
        json_object_set_new(o, "lines", lines);
        json_object_set_new(o, "bytes_saved", bytes_json(g, &d->bytes));
        json_array_append_new(decisions, o);
    }
    return decisions;
}

static json_t *report_json(const pass_report *r, const ir_graph *g, const pass_memplan *mp, const pass_report_variant *v,
                           int nv)
{
    json_t *root = json_object();
    json_object_set_new(root, "model", json_string(g->name));
    json_object_set_new(root, "kernels", kernels_json(g));
    json_object_set_new(root, "decisions", decisions_json(r, NULL, g));
    if (nv > 0) { /* the variant graphs: their kernels and the decisions they take otherwise */
        json_t *vs = json_array();
        for (int i = 0; i < nv; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "variants", json_string(v[i].name));
            json_object_set_new(o, "when", json_string(v[i].when));
            json_object_set_new(o, "kernels", kernels_json(v[i].graph));
            json_object_set_new(o, "decisions", decisions_json(v[i].report, r, v[i].graph));
            json_array_append_new(vs, o);
        }
        json_object_set_new(root, "variant_graphs", vs);
    }
    if (mp) {
        json_t *m = json_object(), *bufs = json_array();
        json_object_set_new(m, "peak_bytes", json_integer(mp->peak));
        json_object_set_new(m, "total_bytes_without_reuse", json_integer(mp->total));
        json_object_set_new(m, "packed_weight_bytes", json_integer(mp->packed));
        for (int i = 0; i < mp->nbufs; i++) {
            json_t *b = json_object();
            json_object_set_new(b, "value", node_json(mp->bufs[i].value));
            json_object_set_new(b, "first_kernel", json_integer(mp->bufs[i].first));
            json_object_set_new(b, "last_kernel", json_integer(mp->bufs[i].last));
            json_object_set_new(b, "offset", json_integer(mp->bufs[i].offset));
            json_object_set_new(b, "bytes", json_integer(mp->bufs[i].bytes));
            json_array_append_new(bufs, b);
        }
        json_object_set_new(m, "buffers", bufs);
        json_object_set_new(root, "memory", m);
    }
    return root;
}

char *pass_report_json_text(const pass_report *r, const ir_graph *g, const pass_memplan *mp,
                            const pass_report_variant *v, int nv)
{
    json_t *root = report_json(r, g, mp, v, nv);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    return text;
}

int pass_report_write_json(const pass_report *r, const ir_graph *g, const pass_memplan *mp,
                           const pass_report_variant *v, int nv, const char *path, char *err, size_t errlen)
{
    json_t *root = report_json(r, g, mp, v, nv);
    int rc = root ? json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : -1;
    json_decref(root);
    if (rc != 0) {
        snprintf(err, errlen, "cannot write the report to '%s'", path);
        return -1;
    }
    return 0;
}
