/* frontend/frontend.h — model text to IR.
 *
 * The lexer (lexer.l) and grammar (parser.y) are reentrant flex/bison with
 * locations; they build an AST (ast.h) that lower.c turns into an ir_graph,
 * reporting located diagnostics (file:line:col, source line, caret). */
#ifndef KILN_FRONTEND_H
#define KILN_FRONTEND_H
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"
#include "util/diag.h"

typedef struct fe_define {
    const char *name; /* a `dims` symbol to bind, or a `const` to override */
    const char *value; /* text of a number */
} fe_define;

typedef struct fe_options {
    const fe_define *defines;
    int ndefines;
} fe_options;

/* A loaded source file; text is NUL-terminated. */
typedef struct fe_source {
    char *path;
    char *text;
    size_t len;
} fe_source;

/* Reads a file. Returns 0, or -1 with an error (path: strerror) in d. */
int fe_source_read(fe_source *src, const char *path, diag_list *d);
int fe_source_from_string(fe_source *src, const char *name, const char *text);
void fe_source_free(fe_source *src);

/* Parses and lowers. Returns the graph (verified) or NULL when any error was
 * reported into d. The graph's diags pointer is reset to NULL on return.
 * opts may be NULL. Every diagnostic carries a location whose file name is a
 * copy in d's arena (it outlives src and the graph); the graph's node
 * locations point at a copy in the graph's own arena. No global state: any
 * number of threads may compile at once. The language and its diagnostics
 * are described in docs/LANGUAGE.md. */
ir_graph *fe_compile(const fe_source *src, const fe_options *opts, diag_list *d);
/* The same, adding the lowering's name-lookup work (name comparisons and
 * suggestion candidates) to *work: tests check that it grows linearly with
 * the model. */
ir_graph *fe_compile_counted(const fe_source *src, const fe_options *opts, diag_list *d, uint64_t *work);

/* Parses only and prints the AST (a stable, indented S-expression form, one
 * statement per line ending with its @line:col; see docs/LANGUAGE.md).
 * Returns 0, or -1 when there were syntax errors (reported into d; nothing
 * is printed then). */
int fe_dump_ast(const fe_source *src, FILE *out, diag_list *d);

#endif
