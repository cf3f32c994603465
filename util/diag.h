/* util/diag.h — source locations and located diagnostics.
 *
 * Every layer reports problems into a diag_list instead of printing or
 * exiting. The frontend renders them as
 *     file:line:col: error: message
 *       <source line>
 *       ^~~~
 * using the source text it kept. */
#ifndef KILN_UTIL_DIAG_H
#define KILN_UTIL_DIAG_H
#include <stdbool.h>
#include <stdio.h>

#include "util/arena.h"

typedef struct src_loc {
    const char *file; /* NULL when the value did not come from a file */
    int line, col;    /* 1-based; 0 = unknown */
    int end_col;      /* last column (inclusive) on the same line; <= col means one char */
} src_loc;

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } diag_severity;

typedef struct diag {
    diag_severity severity;
    src_loc loc;
    const char *msg;
} diag;

typedef struct diag_list {
    arena *arena; /* where messages live */
    diag *items;  /* malloc'd; freed by diag_list_free */
    int count, cap;
    int errors;
    int max_errors; /* stop recording errors past this (0 = 50) */
} diag_list;

void diag_list_init(diag_list *d, arena *a);
void diag_list_free(diag_list *d);
/* Forget the recorded diagnostics (after printing them). */
void diag_list_clear(diag_list *d);
void diag_add(diag_list *d, diag_severity sev, src_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define diag_error(d, ...) diag_add((d), DIAG_ERROR, __VA_ARGS__)
#define diag_note(d, ...) diag_add((d), DIAG_NOTE, __VA_ARGS__)

/* Render all diagnostics; `source` (may be NULL) is the text of loc.file,
 * used to print the offending line and a caret. */
void diag_print(const diag_list *d, FILE *out, const char *source);
/* Render one. */
void diag_print_one(const diag *g, FILE *out, const char *source);

#endif
