/* tests/frontend/ast_golden.c — the AST dump of tests/frontend/golden/small.kiln
 * equals small.ast (KILN_UPDATE_GOLDEN=1 rewrites it). Also checks that the
 * small model compiles. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

static const char *in_path = "tests/frontend/golden/small.kiln";
static const char *ast_path = "tests/frontend/golden/small.ast";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

int main(void)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src;
    if (fe_source_read(&src, in_path, &d) != 0) {
        diag_print(&d, stderr, NULL);
        return 1;
    }
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK(fe_dump_ast(&src, f, &d) == 0);
    fclose(f);
    const char *u = getenv("KILN_UPDATE_GOLDEN");
    if (u && *u && strcmp(u, "0") != 0) {
        FILE *g = fopen(ast_path, "wb");
        CHECK(g && fwrite(out, 1, len, g) == len);
        if (g) fclose(g);
        printf("updated %s\n", ast_path);
    } else {
        char *want = slurp(ast_path);
        CHECK_MSG(want && strcmp(want, out) == 0, "AST dump differs\n--- expected:\n%s--- got:\n%s",
                  want ? want : "(missing)\n", out);
        free(want);
    }
    free(out);

    ir_graph *g = fe_compile(&src, NULL, &d);
    CHECK(g != NULL);
    if (!g) diag_print(&d, stderr, src.text);
    if (g) {
        CHECK(g->noutputs == 2 && g->nstates == 1);
        ir_graph_free(g);
    }
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);
    return CHECK_DONE();
}
