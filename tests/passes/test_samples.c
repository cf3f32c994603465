/* tests/passes/test_samples.c — every sample, through the whole pipeline:
 *
 *   test_samples MODEL.kiln "B=1 S=3 T=8" "D=512 F=1024" MAX_KERNELS
 *
 * 1. After every pass the interpreter gives the unfused graph's outputs and
 *    states on random inputs (translation validation, pass by pass).
 * 2. The final plan has at most MAX_KERNELS kernels (0: no limit).
 * 3. With each pass and each fusion rule disabled in turn, the pipeline
 *    still succeeds and still computes the same function.
 * The -D defines shrink a layer's constants (hidden size, FFN size) so the
 * interpreter runs in seconds; the structure of the layer is unchanged. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pass_harness.h"

static int split(char *s, char **out, int max)
{
    int n = 0;
    for (char *t = strtok(s, " "); t && n < max; t = strtok(NULL, " ")) out[n++] = t;
    return n;
}

static void validate(const ir_graph *before, const ir_graph *g, const int64_t *dims, const char *what)
{
    pass_validation v;
    char err[512];
    int rc = pass_validate(before, g, dims, 7, &v, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", what, err);
    double tol = pass_validate_tolerance(before);
    if (rc == 0)
        CHECK_MSG(v.max_rel_err <= tol, "%s: '%s' differs: rel err %.3g > %.1g", what, v.worst, v.max_rel_err, tol);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: test_samples MODEL.kiln DIMS DEFINES MAX_KERNELS\n");
        return 2;
    }
    char *dw[IR_MAX_SYMS], *fw[16];
    int nd = split(argv[2], dw, IR_MAX_SYMS), nf = split(argv[3], fw, 16);
    fe_define defs[16];
    for (int i = 0; i < nf; i++) {
        char *eq = strchr(fw[i], '=');
        if (!eq) return 2;
        *eq = 0;
        defs[i] = (fe_define){fw[i], eq + 1};
    }
    int max_kernels = atoi(argv[4]);
    ir_graph *before = harness_compile(argv[1], defs, nf);
    CHECK(before != NULL);
    if (!before) return CHECK_DONE();
    int64_t dims[IR_MAX_SYMS] = {0};
    for (int i = 0; i < nd; i++) {
        char *eq = strchr(dw[i], '=');
        if (!eq) return 2;
        *eq = 0;
        int s = ir_graph_find_sym(before, dw[i]);
        CHECK_MSG(s >= 0, "unknown dim %s", dw[i]);
        if (s >= 0) dims[s] = atoll(eq + 1);
    }

    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    int npasses;
    const pass_info *p = pass_pipeline(&npasses);

    /* 1 + 2: pass by pass */
    {
        ir_graph *g = harness_compile(argv[1], defs, nf);
        pass_options o = {0};
        pass_ctx ctx = {.opts = &o, .diags = &d};
        for (int i = 0; i < npasses && g; i++) {
            ctx.pass = p[i].name;
            g = pass_run_one(&p[i], g, &ctx); /* the pass manager's step: it drops analyses of a rebuilt graph */
            CHECK_MSG(g != NULL, "pass %s failed", p[i].name);
            if (!g) break;
            CHECK_MSG(ir_verify(g, &d) == 0, "verifier after %s", p[i].name);
            char what[128];
            snprintf(what, sizeof what, "%s after %s", argv[1], p[i].name);
            validate(before, g, dims, what);
        }
        pass_analyses_clear(&ctx.analyses); /* the passes ran one by one, not through the pipeline */
        if (g) {
            printf("%s: %d kernels\n", argv[1], g->ngroups);
            if (max_kernels > 0)
                CHECK_MSG(g->ngroups <= max_kernels, "%d kernels, want at most %d", g->ngroups, max_kernels);
            pass_memplan mp;
            char err[256];
            CHECK_MSG(pass_plan_memory(g, dims, &mp, err, sizeof err) == 0, "memory plan: %s", err);
            printf("  peak intermediates %lld bytes (%lld without reuse)\n", (long long)mp.peak, (long long)mp.total);
            CHECK(mp.peak <= mp.total);
            pass_memplan_free(&mp);
        }
        ir_graph_free(g);
    }

    /* 3: each pass and each rule off in turn */
    for (int i = 0; i < npasses; i++) {
        if (p[i].required) continue;
        const char *names[16];
        int nn = 0;
        names[nn++] = p[i].name;
        for (const char *const *r = p[i].rules; r && *r && nn < 16; r++)
            if (strcmp(*r, p[i].name)) names[nn++] = *r;
        for (int j = 0; j < nn; j++) {
            ir_graph *g = harness_compile(argv[1], defs, nf);
            pass_options o = {.disabled = &names[j], .ndisabled = 1};
            pass_ctx ctx = {.opts = &o, .diags = &d};
            g = g ? pass_run_pipeline(g, &ctx) : NULL;
            CHECK_MSG(g != NULL, "pipeline with --disable=%s failed", names[j]);
            if (g) {
                char what[128];
                snprintf(what, sizeof what, "%s --disable=%s (%d kernels)", argv[1], names[j], g->ngroups);
                validate(before, g, dims, what);
                printf("  --disable=%-22s %d kernels\n", names[j], g->ngroups);
            }
            ir_graph_free(g);
        }
    }
    diag_print(&d, stderr, NULL);
    ir_graph_free(before);
    diag_list_free(&d);
    arena_free(&a);
    return CHECK_DONE();
}
