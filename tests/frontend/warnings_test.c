/* tests/frontend/warnings_test.c — warnings leave the graph intact, -Werror
 * fails the compile, each -Wno-NAME silences only its own kind, and the
 * situations next to each mistake that are fine stay silent. The exact texts
 * are pinned by the corpus (the tests/diag files named NNN_warn_...). */
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

static const char *prelude =
    "model t {\n"
    "  dims B, S, T\n"
    "  const KV = 2, HD = 16\n"
    "  input k : f32[B, S, KV, HD]\n"
    "  input pos : i32[B]\n"
    "  state kc : f32[B, KV, T, HD]\n";

typedef struct result {
    bool graph;
    int errors, warnings;
    int kinds[DIAG_W_COUNT]; /* recorded diagnostics of each kind */
} result;

static result compile(const char *body, diag_options o)
{
    result r = {0};
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    d.opts = o;
    char text[4096];
    snprintf(text, sizeof text, "%s%s\n}\n", prelude, body);
    fe_source src;
    if (fe_source_from_string(&src, "t.kiln", text) == 0) {
        ir_graph *g = fe_compile(&src, NULL, &d);
        r.graph = g != NULL;
        ir_graph_free(g);
        fe_source_free(&src);
    }
    r.errors = d.errors;
    r.warnings = d.warnings;
    for (int i = 0; i < d.count; i++)
        if (d.items[i].warning) r.kinds[d.items[i].warning - 1]++;
    diag_list_free(&d);
    arena_free(&a);
    return r;
}

static const diag_options none = {0};

static void test_flags(void)
{
    diag_options o = {0};
    CHECK(diag_warning_flag(&o, "-Werror") && o.werror);
    CHECK(diag_warning_flag(&o, "-Wno-error") && !o.werror);
    CHECK(diag_warning_flag(&o, "-Wno-stale-state") && o.disabled == 1u << DIAG_W_STALE_STATE);
    CHECK(diag_warning_flag(&o, "-Wno-all") && o.disabled == (1u << DIAG_W_COUNT) - 1);
    CHECK(diag_warning_flag(&o, "-Wunused-value") && !(o.disabled & (1u << DIAG_W_UNUSED_VALUE)));
    CHECK(diag_warning_flag(&o, "-Wall") && o.disabled == 0);
    CHECK(!diag_warning_flag(&o, "-Wbogus") && !diag_warning_flag(&o, "-Wno-") && !diag_warning_flag(&o, "Werror"));
    for (int k = 0; k < DIAG_W_COUNT; k++) {
        char flag[64];
        snprintf(flag, sizeof flag, "-Wno-%s", diag_warning_name((diag_warning)k));
        diag_options p = {0};
        CHECK_MSG(diag_warning_flag(&p, flag) && p.disabled == 1u << k, "%s", flag);
        CHECK(diag_warning_summary((diag_warning)k) != NULL);
    }
    CHECK(diag_warning_name(DIAG_W_COUNT) == NULL);
}

/* Each mistake: warns without failing, fails under -Werror, is silenced by
 * its own -Wno-NAME and by no other. */
static void test_each_kind(void)
{
    static const struct {
        diag_warning kind;
        const char *body;
    } cases[] = {
        {DIAG_W_UNUSED_VALUE, "kc = cache_write(kc, k, pos)\n  y = k * 2.0\n"},
        {DIAG_W_UNUSED_PARAM, "output y = k * 2.0\n"},
        {DIAG_W_STALE_STATE, "kc2 = cache_write(kc, k, pos)\n  output y = attention(k, kc2, kc2, pos)\n"},
        {DIAG_W_ATTENTION_LAYOUT, "kc = cache_write(kc, k, pos)\n  output y = attention(k, k, k, pos)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        diag_warning w = cases[i].kind;
        result r = compile(cases[i].body, none);
        CHECK_MSG(r.graph && r.errors == 0 && r.kinds[w] >= 1, "%s: graph %d, %d errors, %d of its kind",
                  diag_warning_name(w), r.graph, r.errors, r.kinds[w]);
        diag_options werror = {.werror = true};
        result e = compile(cases[i].body, werror);
        CHECK_MSG(!e.graph && e.errors >= 1 && e.warnings == 0, "%s: -Werror", diag_warning_name(w));
        diag_options off = {.disabled = 1u << w};
        result s = compile(cases[i].body, off);
        CHECK_MSG(s.graph && s.kinds[w] == 0, "%s: -Wno", diag_warning_name(w));
        for (int k = 0; k < DIAG_W_COUNT; k++) /* the other flags leave it on */
            if (k != (int)w) {
                diag_options other = {.disabled = 1u << k};
                CHECK(compile(cases[i].body, other).kinds[w] == r.kinds[w]);
            }
    }
}

/* What sits next to each mistake and is fine. */
static void test_silent(void)
{
    const char *fine[] = {
        /* every name read; the state gets its new value */
        "kc = cache_write(kc, k, pos)\n  output y = attention(k, kc, kc, pos)\n",
        /* a cache write through a temporary that is assigned back */
        "kc1 = cache_write(kc, k, pos)\n  kc = cache_write(kc1, k, pos)\n  output y = attention(k, kc, kc, pos)\n",
        /* a name starting with '_' may go unused */
        "_spare = k * 3.0\n  kc = cache_write(kc, k, pos)\n  output y = attention(k, kc, kc, pos)\n",
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        result r = compile(fine[i], none);
        CHECK_MSG(r.graph && r.errors == 0 && r.warnings == 0, "case %zu: %d warnings", i, r.warnings);
    }
    /* after an error no unused-* warnings (a failed statement reads nothing) */
    result r = compile("kc = cache_write(kc, k, pos)\n  output y = nosuch(k, pos)\n", none);
    CHECK(!r.graph && r.errors == 1 && r.warnings == 0);
    /* the value of a state rebound later is still read: no warning for kc2 */
    result s = compile("kc2 = cache_write(kc, k, pos)\n  kc = kc2\n  output y = attention(k, kc, kc, pos)\n", none);
    CHECK(s.graph && s.warnings == 0);
}

/* A state given a value without being read is updated, not unused. */
static void test_write_only_state(void)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src;
    const char *text = "model t {\n  dims B\n  input x : f32[B, 4]\n  state s : f32[B, 4]\n"
                       "  s = x * 2.0\n  output y = x + 1.0\n}\n";
    if (fe_source_from_string(&src, "t.kiln", text) == 0) {
        ir_graph *g = fe_compile(&src, NULL, &d);
        CHECK_MSG(g && d.count == 0, "%d diagnostics", d.count);
        if (d.count) diag_print(&d, stderr, src.text);
        ir_graph_free(g);
        fe_source_free(&src);
    }
    diag_list_free(&d);
    arena_free(&a);
}

int main(void)
{
    test_flags();
    test_write_only_state();
    test_each_kind();
    test_silent();
    return CHECK_DONE();
}
