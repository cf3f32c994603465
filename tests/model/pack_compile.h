/* tests/model/pack_compile.h — the packing tests' compile: a model file (or
 * text under a path's name) through the front end and the whole pass
 * pipeline; diagnostics printed when it fails. */
#ifndef KILN_TESTS_PACK_COMPILE_H
#define KILN_TESTS_PACK_COMPILE_H
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/pass.h"

static ir_graph *pack_compile(const char *path, const char *text, const fe_define *defs, int ndefs, diag_list *d)
{
    fe_source src;
    if (text) fe_source_from_string(&src, path, text);
    else if (fe_source_read(&src, path, d) != 0) return NULL;
    fe_options fo = {defs, ndefs};
    ir_graph *g = fe_compile(&src, &fo, d);
    pass_options po = {0};
    pass_ctx pc = {.opts = &po, .diags = d};
    if (g) g = pass_run_pipeline(g, &pc);
    if (!g) diag_print(d, stderr, src.text);
    fe_source_free(&src);
    return g;
}
#endif
