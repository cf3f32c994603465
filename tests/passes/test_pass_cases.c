/* tests/passes/test_pass_cases.c — golden input/expected IR for each pass.
 *
 *   test_pass_cases CASE.kiln
 *
 * CASE.kiln starts with header comments:
 *   # PASS: raise              run the pipeline up to and including this pass
 *   # DIMS: B=2 S=3 T=8        dims for the interpreter equivalence check
 *   # DISABLE: raise-softmax   passes or rules to turn off (optional)
 *   # ENABLE: norm-gemv        rules that are off by default to turn on (optional)
 *   # DEFINE: D=64             -D bindings for the frontend (optional)
 *   # VARIANT: decode          plan the graph the driver plans the decode variants
 *                              with (pass_options.decode_variant; optional)
 * The IR after the pass and the fusion decisions are compared with
 * CASE.expected (KILN_UPDATE_GOLDEN=1 rewrites it), and the interpreter must
 * give the same outputs and states before and after, on random inputs. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pass_harness.h"

typedef struct header {
    char pass[64];
    char *disable[16];
    int ndisable;
    char *enable[16];
    int nenable;
    fe_define defs[16];
    int ndefs;
    char *dims_text;
    bool decode;
} header;

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int c;
    while ((c = fgetc(f)) != EOF) fputc(c, m);
    fclose(m);
    fclose(f);
    return buf;
}

/* Splits "A=1 B=2" / "a b" style lists in place. */
static int split_words(char *s, char **out, int max)
{
    int n = 0;
    for (char *t = strtok(s, " ,\t"); t && n < max; t = strtok(NULL, " ,\t")) out[n++] = t;
    return n;
}

static void parse_header(char *text, header *h)
{
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != '#') continue;
        char *v;
        if ((v = strstr(line, "PASS:"))) sscanf(v + 5, " %63s", h->pass);
        else if ((v = strstr(line, "DIMS:"))) h->dims_text = strdup(v + 5);
        else if ((v = strstr(line, "DISABLE:"))) h->disable[0] = strdup(v + 8);
        else if ((v = strstr(line, "ENABLE:"))) h->enable[0] = strdup(v + 7);
        else if ((v = strstr(line, "DEFINE:"))) h->defs[0].name = strdup(v + 7);
        else if ((v = strstr(line, "VARIANT:"))) h->decode = strstr(v + 8, "decode") != NULL;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_pass_cases CASE.kiln\n");
        return 2;
    }
    const char *path = argv[1];
    char *text = read_all(path);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    header h;
    memset(&h, 0, sizeof h);
    char *copy = strdup(text);
    parse_header(copy, &h);
    char *disable_text = h.disable[0], *define_text = (char *)h.defs[0].name;
    h.disable[0] = NULL;
    char *enable_text = h.enable[0];
    h.enable[0] = NULL;
    if (enable_text) h.nenable = split_words(enable_text, h.enable, 16);
    h.defs[0].name = NULL;
    if (disable_text) h.ndisable = split_words(disable_text, h.disable, 16);
    char *def_words[16];
    int ndw = define_text ? split_words(define_text, def_words, 16) : 0;
    for (int i = 0; i < ndw; i++) {
        char *eq = strchr(def_words[i], '=');
        if (!eq) continue;
        *eq = 0;
        h.defs[h.ndefs++] = (fe_define){def_words[i], eq + 1};
    }
    CHECK_MSG(h.pass[0], "%s has no '# PASS:' header", path);

    ir_graph *before = harness_compile(path, h.defs, h.ndefs);
    ir_graph *g = harness_compile(path, h.defs, h.ndefs);
    CHECK(before && g);
    if (!before || !g) return CHECK_DONE();

    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    pass_report rep;
    pass_report_init(&rep);
    pass_options o = {.disabled = (const char *const *)h.disable, .ndisabled = h.ndisable,
                      .enabled = (const char *const *)h.enable, .nenabled = h.nenable, .decode_variant = h.decode};
    CHECK(pass_options_check(&o, &d));
    pass_ctx ctx = {.opts = &o, .report = &rep, .diags = &d};
    g = harness_run_until(g, h.pass, &ctx);
    diag_print(&d, stderr, NULL);
    CHECK_MSG(g != NULL, "the pipeline failed on %s", path);

    if (g) {
        char *out = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&out, &len);
        ir_print(g, m);
        for (int i = 0; i < rep.count; i++) {
            const pass_decision *dc = &rep.items[i];
            fprintf(m, "decision: %s %s [%s]", dc->taken ? "taken" : "refused", dc->rule, dc->pass ? dc->pass : "");
            for (int j = 0; j < dc->nlines; j++) fprintf(m, "%s%d", j ? "," : " lines ", dc->lines[j]);
            fprintf(m, ": %s", dc->what);
            if (dc->why && dc->why[0]) fprintf(m, " -- %s", dc->why);
            fprintf(m, " (%s)\n", pass_bytes_str(&a, g, &dc->bytes));
        }
        fclose(m);

        char expected_path[1024];
        snprintf(expected_path, sizeof expected_path, "%.*s.expected", (int)(strlen(path) - 5), path);
        if (getenv("KILN_UPDATE_GOLDEN") && !strcmp(getenv("KILN_UPDATE_GOLDEN"), "1")) {
            FILE *f = fopen(expected_path, "w");
            CHECK(f != NULL);
            if (f) {
                fputs(out, f);
                fclose(f);
                printf("updated %s\n", expected_path);
            }
        } else {
            char *want = read_all(expected_path);
            CHECK_MSG(want != NULL, "missing %s (run with KILN_UPDATE_GOLDEN=1)", expected_path);
            if (want && strcmp(want, out) != 0) {
                CHECK_MSG(false, "%s differs from the output:\n%s", expected_path, out);
            } else if (want) {
                CHECK(true);
            }
            free(want);
        }
        free(out);

        /* interpreter equivalence, before vs after */
        int64_t dims[IR_MAX_SYMS];
        for (int i = 0; i < IR_MAX_SYMS; i++) dims[i] = 3;
        if (h.dims_text) {
            char *words[IR_MAX_SYMS];
            int nw = split_words(h.dims_text, words, IR_MAX_SYMS);
            for (int i = 0; i < nw; i++) {
                char *eq = strchr(words[i], '=');
                if (!eq) continue;
                *eq = 0;
                int s = ir_graph_find_sym(before, words[i]);
                CHECK_MSG(s >= 0, "DIMS names unknown dim %s", words[i]);
                if (s >= 0) dims[s] = atoll(eq + 1);
            }
        }
        pass_validation v;
        char err[512];
        int rc = pass_validate(before, g, dims, 42, &v, err, sizeof err);
        CHECK_MSG(rc == 0, "validation failed: %s", err);
        double tol = pass_validate_tolerance(before);
        if (rc == 0)
            CHECK_MSG(v.max_rel_err <= tol, "%s: '%s' differs after the passes: rel err %.3g > %.1g", path,
                      v.worst ? v.worst : "?", v.max_rel_err, tol);
        ir_graph_free(g);
    }
    ir_graph_free(before);
    pass_report_free(&rep);
    diag_list_free(&d);
    arena_free(&a);
    free(h.dims_text);
    free(disable_text);
    free(enable_text);
    free(define_text);
    free(copy);
    free(text);
    return CHECK_DONE();
}
