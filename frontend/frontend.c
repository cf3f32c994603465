/* frontend/frontend.c — the frontend's entry points: parse, lower, dump.
 *
 * Lifetimes: the AST lives in a scratch arena freed before returning. The
 * locations in diagnostics point at a copy of the file name made in the
 * diag_list's arena (so they outlive the graph and the source); the
 * locations in a returned graph point at a copy in the graph's arena. */
#include <string.h>

#include "frontend/ast.h"
#include "frontend/frontend.h"
#include "frontend/lower.h"

static void relocate(ir_graph *g, const char *file)
{
    g->loc.file = file;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->loc.file) g->nodes[i]->loc.file = file;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].loc.file) g->outputs[i].loc.file = file;
    for (int i = 0; i < g->nstates; i++)
        if (g->states[i].loc.file) g->states[i].loc.file = file;
}

/* Is `name` one of the model's dims? */
static bool is_dim(const fe_model *m, const char *name)
{
    for (int i = 0; name && i < m->nstmts; i++)
        for (int j = 0; m->stmts[i]->kind == FE_S_DIMS && j < m->stmts[i]->names.n; j++)
            if (strcmp(m->stmts[i]->names.v[j].name, name) == 0) return true;
    return false;
}

/* Does a define bind one of the model's dims? */
static bool binds_dims(const fe_model *m, const fe_options *opts)
{
    for (int k = 0; opts && k < opts->ndefines; k++)
        if (is_dim(m, opts->defines[k].name)) return true;
    return false;
}

/* Errors that are not -Werror warnings among the items from count0 on. */
static bool real_errors(const diag_list *d, int count0)
{
    for (int i = count0; i < d->count; i++)
        if (d->items[i].severity == DIAG_ERROR && !d->items[i].warning) return true;
    return false;
}

/* A dim bound by -D turns S into 8 in every shape, and a q of [B, H, S, HD]
 * then fits attention by accident. So with dims bound, the attention-layout
 * warnings come from a second lowering where the dims stay symbolic (only the
 * const defines apply); they are re-reported into d. */
static void layout_warnings_unbound(const fe_model *m, const fe_options *opts, diag_list *d)
{
    arena a, scratch;
    arena_init(&a);
    arena_init(&scratch);
    fe_define *defs = arena_alloc(&scratch, (size_t)(opts->ndefines + 1) * sizeof *defs);
    int nd = 0;
    for (int k = 0; defs && k < opts->ndefines; k++)
        if (!is_dim(m, opts->defines[k].name)) defs[nd++] = opts->defines[k];
    diag_list d2;
    diag_list_init(&d2, &a);
    d2.opts.disabled = ~(1u << DIAG_W_ATTENTION_LAYOUT);
    fe_options o2 = {defs, nd};
    ir_graph *g = NULL;
    if (defs) fe_lower_model(m, &o2, &scratch, &d2, &g, NULL);
    for (int i = 0; i < d2.count; i++)
        if (d2.items[i].warning == DIAG_W_ATTENTION_LAYOUT + 1)
            diag_warn(d, DIAG_W_ATTENTION_LAYOUT, d2.items[i].loc, "%s", d2.items[i].msg);
    ir_graph_free(g);
    diag_list_free(&d2);
    arena_free(&scratch);
    arena_free(&a);
}

ir_graph *fe_compile(const fe_source *src, const fe_options *opts, diag_list *d)
{
    return fe_compile_counted(src, opts, d, NULL);
}

ir_graph *fe_compile_counted(const fe_source *src, const fe_options *opts, diag_list *d, uint64_t *work)
{
    const char *path = src->path ? src->path : "<input>";
    const char *file = arena_strdup(d->arena, path);
    if (!file) {
        diag_error(d, (src_loc){0}, "out of memory");
        return NULL;
    }
    arena scratch;
    arena_init(&scratch);
    int errors0 = d->errors;
    ir_graph *g = NULL;
    fe_model *m = fe_parse(&scratch, d, file, src->text ? src->text : "", src->text ? src->len : 0);
    if (m && d->errors == errors0) {
        unsigned layout = 1u << DIAG_W_ATTENTION_LAYOUT, disabled = d->opts.disabled;
        bool twice = !(disabled & layout) && binds_dims(m, opts);
        int count0 = d->count;
        if (twice) d->opts.disabled |= layout;
        fe_lower_model(m, opts, &scratch, d, &g, work);
        d->opts.disabled = disabled;
        if (twice && !real_errors(d, count0)) layout_warnings_unbound(m, opts, d);
    }
    arena_free(&scratch);
    if (g && d->errors != errors0) {
        ir_graph_free(g);
        g = NULL;
    }
    if (g) {
        const char *gfile = arena_strdup(&g->arena, path);
        if (!gfile) {
            diag_error(d, (src_loc){0}, "out of memory");
            ir_graph_free(g);
            return NULL;
        }
        relocate(g, gfile);
        g->diags = NULL;
    }
    return g;
}

int fe_dump_ast(const fe_source *src, FILE *out, diag_list *d)
{
    const char *path = src->path ? src->path : "<input>";
    const char *file = arena_strdup(d->arena, path);
    if (!file) return -1;
    arena scratch;
    arena_init(&scratch);
    fe_model *m = fe_parse(&scratch, d, file, src->text ? src->text : "", src->text ? src->len : 0);
    if (m) fe_ast_print(m, out);
    arena_free(&scratch);
    return m ? 0 : -1;
}
