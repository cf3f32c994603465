/* tests/api/test_variant_graphs_cpu.c — pass decisions per shape variant
 * without a GPU (compile-only context, lazy kernels: NVRTC never runs):
 * Qwen3's per-head q/k norm is in the QKV epilogue of the large-shape
 * (prefill) variant and a row kernel in a decode variant, which the driver
 * plans from a graph of its own (src/compile.c); an exact variant of more
 * than 16 rows per sequence takes the prefill graph; --disable keeps the row
 * kernels in every variant (--enable's: tests/passes/cases); the fusion report
 * names the decode variants' decisions. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_util.h"
#include "check.h"

#define MODEL "samples/qwen3_8b_layer.kiln"

static const kiln_define small[] = {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "256"}};
static const kiln_dim maxd[] = {{"B", 4}, {"S", 64}, {"T", 128}};
static const kiln_dim decode[] = {{"B", 1}, {"S", 1}, {"T", 128}};
static const kiln_dim rows20[] = {{"B", 1}, {"S", 20}, {"T", 128}};

/* Lines of variant `which` (its header's start) in the model's description: row kernels. */
static int rows_in_variant(const char *desc, const char *which)
{
    const char *v = strstr(desc, which);
    if (!v) return -1;
    const char *end = strstr(v + 1, "\nvariant ");
    int n = 0; /* kernels named kiln_<model>_k<N>_row, then padding */
    for (const char *p = strstr(v, "_row "); p && (!end || p < end); p = strstr(p + 1, "_row ")) n++;
    return n;
}

static kiln_model *compile(kiln_context *ctx, const char *const *dis, int ndis, const char *const *en, int nen,
                           char **report)
{
    kiln_model_options o = {.defines = small, .ndefines = 4, .max_dims = maxd, .nmax_dims = 3, .disabled = dis,
                            .ndisabled = ndis, .enabled = en, .nenabled = nen, .lazy = 1};
    kiln_model *m = NULL;
    CHECK_MSG(kiln_model_compile_file(ctx, MODEL, &o, &m) == KILN_OK, "%s", kiln_last_error());
    if (m && report) *report = strdup(kiln_model_report_json(m) ? kiln_model_report_json(m) : "");
    return m;
}

static void plan_both(kiln_model *m, int want_large, int want_decode, int want_20)
{
    const char *fb = NULL;
    CHECK(kiln_model_fallbacks(m, decode, 3, &fb) == KILN_OK);
    CHECK(kiln_model_fallbacks(m, rows20, 3, &fb) == KILN_OK);
    const char *desc = kiln_model_describe(m);
    CHECK(desc != NULL);
    if (!desc) return;
    int large = rows_in_variant(desc, "variant 0: large-shape"), dec = rows_in_variant(desc, "small-shape for B=1 S=1"),
        r20 = rows_in_variant(desc, "small-shape for B=1 S=20");
    CHECK_MSG(large == want_large && dec == want_decode && r20 == want_20,
              "row kernels: large-shape %d (want %d), decode %d (want %d), S=20 %d (want %d)\n%s", large, want_large, dec,
              want_decode, r20, want_20, desc);
}

int main(void)
{
    char dir[] = "/tmp/kiln_vg_XXXXXX";
    kiln_context *ctx = api_compile_only_context(dir);
    CHECK(ctx != NULL);
    if (!ctx) return CHECK_DONE();
    /* the default: 2 row kernels (h, h2) at prefill and at 20 rows; 4 at decode (+ the head norms) */
    char *rep = NULL;
    kiln_model *m = compile(ctx, NULL, 0, NULL, 0, &rep);
    if (m) plan_both(m, 2, 4, 2);
    CHECK_MSG(rep && strstr(rep, "\"variant_graphs\"") && strstr(rep, "this graph serves the decode variants"),
              "the report names the decode variants' decisions");
    free(rep);
    kiln_model_free(m);
    const char *hn[] = {"epilogue-head-norm"};
    rep = NULL;
    m = compile(ctx, hn, 1, NULL, 0, &rep); /* --disable: row kernels everywhere, one graph */
    if (m) plan_both(m, 4, 4, 4);
    CHECK(rep && !strstr(rep, "\"variant_graphs\""));
    free(rep);
    kiln_model_free(m);
    CHECK(api_compile_only_done(ctx, dir) == 0);
    return CHECK_DONE();
}
