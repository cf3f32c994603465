/* tests/passes/pass_harness.c — see pass_harness.h. */
#include "pass_harness.h"

#include <string.h>

ir_graph *harness_compile(const char *path, const fe_define *defs, int ndefs)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src = {0};
    ir_graph *g = NULL;
    if (fe_source_read(&src, path, &d) == 0) {
        fe_options o = {defs, ndefs};
        g = fe_compile(&src, &o, &d);
    }
    diag_print(&d, stderr, src.text);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);
    return g;
}

ir_graph *harness_run_until(ir_graph *g, const char *last, pass_ctx *ctx)
{
    int n;
    const pass_info *p = pass_pipeline(&n);
    for (int i = 0; i < n && g; i++) {
        ctx->pass = p[i].name;
        if (p[i].required || pass_enabled(ctx, p[i].name)) {
            g = pass_run_one(&p[i], g, ctx);
            if (!g) fprintf(stderr, "pass %s failed\n", p[i].name);
        }
        if (last && !strcmp(last, p[i].name)) break;
    }
    ctx->pass = NULL;
    pass_analyses_clear(&ctx->analyses);
    return g;
}

