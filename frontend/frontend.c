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

ir_graph *fe_compile(const fe_source *src, const fe_options *opts, diag_list *d)
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
    if (m && d->errors == errors0) fe_lower_model(m, opts, &scratch, d, &g);
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
