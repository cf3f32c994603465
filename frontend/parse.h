/* frontend/parse.h — state shared by the lexer (lexer.l) and the grammar
 * (parser.y). Internal to the frontend. One fe_parser per parse: nothing is
 * global, so two threads may parse at once. */
#ifndef KILN_FRONTEND_PARSE_H
#define KILN_FRONTEND_PARSE_H
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>

#include "frontend/ast.h"

typedef struct fe_parser {
    arena *arena;
    diag_list *diags;
    const char *file;
    const char *text;
    size_t len;
    void *scanner; /* yyscan_t */
    fe_model *model;
    int errors;    /* lexical and syntax errors seen */
    bool oom;
    jmp_buf *fatal; /* where the scanner's fatal errors (out of memory) return */

    /* lexer position (1-based) of the next character */
    int line, col;

    /* the token filter between flex and bison (error recovery) */
    int last_tok;          /* kind of the last token handed to bison, 0 = none */
    int last_end_line;     /* where it ended */
    int last_end_col;
    bool last_first_on_line;
    bool last_sync;        /* the last token may start a statement after an error */
    bool skipping;         /* discarding tokens after a syntax error */
    const char *last_text; /* identifier text of the last token (for messages) */
    bool opened;           /* the model's '{' was seen */
    const char *model_name;
} fe_parser;

/* Location of the current token for the lexer. */
src_loc fe_parser_loc(const fe_parser *p, int line, int col, int end_col);
/* Clip a multi-line extent to its first line: the last non-blank column
 * before any comment on `line`. */
int fe_parser_line_end(const fe_parser *p, int line);

#endif
