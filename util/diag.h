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

/* The kinds of warning, each with the flag that names it: `-Wno-NAME`
 * silences one, `-Werror` turns them all into errors. The table is the one
 * list: the CLI's help, the option parser and docs/LANGUAGE.md follow it. */
#define DIAG_WARNINGS(X)                                                                          \
    X(UNUSED_VALUE, "unused-value", "a value is computed but reaches no output or state update") \
    X(UNUSED_PARAM, "unused-param", "an input, weight or state is declared but never read")      \
    X(STALE_STATE, "stale-state", "a state's new value is bound to another name, never to the state") \
    X(ATTENTION_LAYOUT, "attention-layout", "attention arguments whose layout fits only by accident")

typedef enum {
#define X(e, name, summary) DIAG_W_##e,
    DIAG_WARNINGS(X)
#undef X
    DIAG_W_COUNT
} diag_warning;

typedef struct diag {
    diag_severity severity;
    src_loc loc;
    const char *msg;
    int warning; /* a warning (an error under -Werror): its diag_warning + 1; else 0 */
} diag;

/* How warnings are reported; zero = every warning on, none an error. */
typedef struct diag_options {
    bool werror;       /* record warnings as errors ("[-Werror=NAME]"), so the compile fails */
    unsigned disabled; /* bit k set: warning k is not reported */
} diag_options;

typedef struct diag_list {
    arena *arena; /* where messages live */
    diag *items;  /* malloc'd; freed by diag_list_free */
    int count, cap;
    int errors;
    int warnings;   /* recorded as warnings (not those -Werror made errors) */
    int max_errors; /* stop recording errors past this (0 = 50) */
    diag_options opts;
} diag_list;

void diag_list_init(diag_list *d, arena *a);
void diag_list_free(diag_list *d);
/* Forget the recorded diagnostics (after printing them). */
void diag_list_clear(diag_list *d);
void diag_add(diag_list *d, diag_severity sev, src_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define diag_error(d, ...) diag_add((d), DIAG_ERROR, __VA_ARGS__)
#define diag_note(d, ...) diag_add((d), DIAG_NOTE, __VA_ARGS__)
/* A warning of kind w: printed as "warning: MESSAGE [-WNAME]", as an error
 * "error: MESSAGE [-Werror=NAME]" under d->opts.werror, or not recorded at
 * all when w is disabled. Returns whether it was recorded (so a note can
 * follow). */
bool diag_warn(diag_list *d, diag_warning w, src_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "unused-value" for DIAG_W_UNUSED_VALUE; NULL out of range. */
const char *diag_warning_name(diag_warning w);
const char *diag_warning_summary(diag_warning w);
/* Applies one command-line flag: "-Werror", "-Wno-error", "-WNAME" or
 * "-Wno-NAME" (NAME from DIAG_WARNINGS, or "all"). Returns false when the
 * flag names no warning. */
bool diag_warning_flag(diag_options *o, const char *flag);

/* Render all diagnostics; `source` (may be NULL) is the text of loc.file,
 * used to print the offending line and a caret. */
void diag_print(const diag_list *d, FILE *out, const char *source);
/* Render one. */
void diag_print_one(const diag *g, FILE *out, const char *source);

#endif
