/* tools/kiln.c — the `kiln` command line. It parses arguments, calls the
 * library and maps results to exit codes; the logic lives in the library.
 *
 * Exit codes (sysexits.h style): 0 success; 1 errors in the model file;
 * 64 usage error; 66 input file unreadable; 70 internal error; 73 output
 * file not writable. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/ir.h"
#include "runtime/rt_info.h"

enum { EX_OK = 0, EX_MODEL = 1, EX_USAGE = 64, EX_NOINPUT = 66, EX_SOFTWARE = 70, EX_CANTCREAT = 73 };

static const char usage_text[] =
    "usage: kiln <command> [options] FILE\n"
    "\n"
    "commands:\n"
    "  check FILE               parse and type-check a model; print diagnostics\n"
    "  compile FILE             compile a model and write what --emit selects\n"
    "\n"
    "options:\n"
    "  --emit=ast|ir            what `compile` writes (default: ir)\n"
    "  -o OUT                   write to OUT instead of standard output\n"
    "  -D NAME=VALUE            bind a `dims` size or override a `const` (repeatable)\n"
    "  -h, --help               show this help\n"
    "  --version                show the versions of Kiln and its CUDA components\n"
    "\n"
    "exit status: 0 ok, 1 errors in the model, 64 usage, 66 unreadable input,\n"
    "             70 internal error, 73 unwritable output\n";

typedef struct cli {
    const char *cmd;
    const char *file;
    const char *emit;
    const char *out;
    fe_define defines[64];
    int ndefines;
} cli;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'kiln --help'.\n");
    return EX_USAGE;
}

static int add_define(cli *c, char *spec)
{
    char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) return usage_error("-D expects NAME=VALUE, got '%s'", spec);
    if (c->ndefines == (int)(sizeof c->defines / sizeof c->defines[0]))
        return usage_error("too many -D options (at most 64)%s", "");
    *eq = 0;
    c->defines[c->ndefines++] = (fe_define){spec, eq + 1};
    return EX_OK;
}

/* Parses argv into c; returns EX_OK, EX_USAGE, or -1 when help/version was
 * printed and the program should exit 0. */
static int parse_args(int argc, char **argv, cli *c)
{
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help")) {
            fputs(usage_text, stdout);
            return -1;
        } else if (!strcmp(a, "--version")) {
            char v[256];
            rt_versions(v, sizeof v);
            printf("kiln %s (%s)\n", KILN_VERSION, v);
            return -1;
        } else if (!strncmp(a, "--emit=", 7)) {
            c->emit = a + 7;
        } else if (!strcmp(a, "--emit")) {
            if (++i == argc) return usage_error("%s needs a value", a);
            c->emit = argv[i];
        } else if (!strcmp(a, "-o")) {
            if (++i == argc) return usage_error("%s needs a file name", a);
            c->out = argv[i];
        } else if (!strcmp(a, "-D")) {
            if (++i == argc) return usage_error("%s needs NAME=VALUE", a);
            if (add_define(c, argv[i]) != EX_OK) return EX_USAGE;
        } else if (!strncmp(a, "-D", 2)) {
            if (add_define(c, a + 2) != EX_OK) return EX_USAGE;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (!c->cmd) {
            c->cmd = a;
        } else if (!c->file) {
            c->file = a;
        } else {
            return usage_error("unexpected argument '%s'", a);
        }
    }
    if (!c->cmd) return usage_error("no command given%s", "");
    if (strcmp(c->cmd, "check") && strcmp(c->cmd, "compile"))
        return usage_error("unknown command '%s'", c->cmd);
    if (!c->file) return usage_error("'%s' needs a model file", c->cmd);
    if (!c->emit) c->emit = "ir";
    if (strcmp(c->emit, "ir") && strcmp(c->emit, "ast"))
        return usage_error("--emit must be ast or ir, not '%s'", c->emit);
    if (!strcmp(c->cmd, "check") && c->out) return usage_error("'check' writes no output file%s", "");
    return EX_OK;
}

static FILE *open_out(const cli *c, int *status)
{
    if (!c->out || !strcmp(c->out, "-")) return stdout;
    FILE *f = fopen(c->out, "w");
    if (!f) {
        fprintf(stderr, "kiln: cannot write '%s': %s\n", c->out, strerror(errno));
        *status = EX_CANTCREAT;
    }
    return f;
}

static int close_out(const cli *c, FILE *f)
{
    int bad = ferror(f);
    if (f != stdout) bad |= fclose(f);
    else bad |= fflush(f);
    if (bad) {
        fprintf(stderr, "kiln: error writing '%s'\n", c->out ? c->out : "standard output");
        return EX_CANTCREAT;
    }
    return EX_OK;
}

static int run(const cli *c)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src = {0};
    int status = EX_OK;

    if (fe_source_read(&src, c->file, &d) != 0) {
        diag_print(&d, stderr, NULL);
        status = EX_NOINPUT;
        goto done;
    }
    if (!strcmp(c->cmd, "compile") && !strcmp(c->emit, "ast")) {
        FILE *out = open_out(c, &status);
        if (!out) goto done;
        int rc = fe_dump_ast(&src, out, &d);
        int cs = close_out(c, out);
        diag_print(&d, stderr, src.text);
        status = rc != 0 ? EX_MODEL : cs;
        goto done;
    }
    fe_options opts = {c->defines, c->ndefines};
    ir_graph *g = fe_compile(&src, &opts, &d);
    diag_print(&d, stderr, src.text);
    diag_list_clear(&d);
    if (!g) {
        status = EX_MODEL;
        goto done;
    }
    if (ir_verify(g, &d) != 0) { /* fe_compile verified already: this is a bug */
        diag_print(&d, stderr, src.text);
        ir_graph_free(g);
        status = EX_SOFTWARE;
        goto done;
    }
    if (!strcmp(c->cmd, "compile")) {
        FILE *out = open_out(c, &status);
        if (out) {
            ir_print(g, out);
            status = close_out(c, out);
        }
    }
    ir_graph_free(g);
done:
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);
    return status;
}

int main(int argc, char **argv)
{
    cli c;
    memset(&c, 0, sizeof c);
    int rc = parse_args(argc, argv, &c);
    if (rc == -1) return EX_OK;
    if (rc != EX_OK) return rc;
    return run(&c);
}
