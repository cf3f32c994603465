/* tests/frontend/diag_corpus.c — golden diagnostics.
 *
 * For each model file given (or every tests/diag/NNN_name.kiln when none is), runs
 * fe_compile, renders the diagnostics with diag_print and compares them with
 * the file next to it with the extension .expected. A corpus file must fail
 * to compile, or compile with at least one warning. A line
 * `# defines: NAME=VALUE ...` in the file passes -D options; a line
 * `# options: -Werror -Wno-NAME ...` sets the warning flags (as `kiln check`
 * takes them). With KILN_UPDATE_GOLDEN=1 the .expected files are rewritten.
 * Run from the source root so that the paths in the messages are relative. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

/* "# options: -Werror -Wno-unused-value" -> o; false on an unknown flag */
static bool parse_options(const char *text, diag_options *o)
{
    const char *at = strstr(text, "# options:");
    if (!at) return true;
    at += strlen("# options:");
    char line[256];
    size_t n = strcspn(at, "\n");
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, at, n);
    line[n] = '\0';
    for (char *tok = strtok(line, " \t"); tok; tok = strtok(NULL, " \t"))
        if (!diag_warning_flag(o, tok)) {
            fprintf(stderr, "unknown option '%s'\n", tok);
            return false;
        }
    return true;
}

/* "# defines: A=1 B=x" -> defines (pointing into a copy of the line) */
static int parse_defines(const char *text, char *store, size_t storelen, fe_define *defs, int max)
{
    const char *at = strstr(text, "# defines:");
    if (!at) return 0;
    at += strlen("# defines:");
    size_t n = strcspn(at, "\n");
    if (n >= storelen) n = storelen - 1;
    memcpy(store, at, n);
    store[n] = '\0';
    int nd = 0;
    for (char *tok = strtok(store, " \t"); tok && nd < max; tok = strtok(NULL, " \t")) {
        char *eq = strchr(tok, '=');
        if (eq) {
            *eq = '\0';
            defs[nd++] = (fe_define){tok, eq + 1};
        } else {
            defs[nd++] = (fe_define){tok, NULL};
        }
    }
    return nd;
}

static int run_one(const char *path, int update)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src;
    int rc = 0;
    char *out = NULL;
    size_t outlen = 0;
    FILE *mem = open_memstream(&out, &outlen);
    if (!mem) return 1;
    if (fe_source_read(&src, path, &d) != 0) {
        diag_print(&d, stderr, NULL);
        fclose(mem);
        free(out);
        diag_list_free(&d);
        arena_free(&a);
        return 1;
    }
    char store[512];
    fe_define defs[16];
    int nd = parse_defines(src.text, store, sizeof store, defs, 16);
    fe_options opts = {defs, nd};
    if (!parse_options(src.text, &d.opts)) rc = 1;
    ir_graph *g = fe_compile(&src, &opts, &d);
    diag_print(&d, mem, src.text);
    fclose(mem);
    if (g) {
        if (d.warnings == 0) {
            fprintf(stderr, "%s: compiled without errors or warnings; a corpus file must fail or warn\n",
                    path);
            rc = 1;
        }
        if (d.errors) {
            fprintf(stderr, "%s: a graph came back with %d errors\n", path, d.errors);
            rc = 1;
        }
        ir_graph_free(g);
    } else if (d.errors == 0) {
        fprintf(stderr, "%s: fe_compile returned NULL without reporting an error\n", path);
        rc = 1;
    }
    char exp_path[1024];
    snprintf(exp_path, sizeof exp_path, "%.*s.expected", (int)(strlen(path) - 5), path);
    if (update) {
        FILE *f = fopen(exp_path, "wb");
        if (!f || fwrite(out, 1, outlen, f) != outlen) rc = 1;
        if (f) fclose(f);
        printf("updated %s\n", exp_path);
    } else {
        char *want = slurp(exp_path);
        if (!want) {
            fprintf(stderr, "%s: missing (run with KILN_UPDATE_GOLDEN=1)\n--- got:\n%s", exp_path, out);
            rc = 1;
        } else if (strcmp(want, out) != 0) {
            fprintf(stderr, "%s: diagnostics differ\n--- expected:\n%s--- got:\n%s", path, want, out);
            rc = 1;
        }
        free(want);
    }
    free(out);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *u = getenv("KILN_UPDATE_GOLDEN");
    int update = u && *u && strcmp(u, "0") != 0;
    int fails = 0, total = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++, total++) fails += run_one(argv[i], update) != 0;
    } else {
        DIR *dir = opendir("tests/diag");
        if (!dir) {
            perror("tests/diag");
            return 1;
        }
        char *names[1024];
        int n = 0;
        struct dirent *e;
        while ((e = readdir(dir)) && n < 1024) {
            size_t len = strlen(e->d_name);
            if (len > 5 && strcmp(e->d_name + len - 5, ".kiln") == 0) {
                names[n] = malloc(len + 16);
                if (names[n]) snprintf(names[n++], len + 16, "tests/diag/%s", e->d_name);
            }
        }
        closedir(dir);
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        for (int i = 0; i < n; i++, total++) {
            fails += run_one(names[i], update) != 0;
            free(names[i]);
        }
    }
    printf("%d files, %d failed\n", total, fails);
    return fails ? 1 : 0;
}
