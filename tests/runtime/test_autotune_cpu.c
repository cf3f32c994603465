/* tests/runtime/test_autotune_cpu.c — autotuning of the Hopper matmul without
 * a GPU (runtime/rt_autotune.h): a fake device and a fake timer (the test
 * hook, rt_tune_hooks), so no candidate is compiled.
 *
 *   - the first compile with autotune times every candidate of the matmul's
 *     problem once, stores the fastest and the kernel runs it ("(autotuned)"
 *     in its configuration); the timer's favourite is not the heuristic's
 *     choice, so the choice is visibly the measurement's;
 *   - a second "process" (a new context, so a new cache object, on the same
 *     directory) times nothing and gets the same configuration;
 *   - a damaged entry (one payload byte flipped) is deleted by the cache's
 *     checksum, measured again and stored again;
 *   - export to one file, import into an empty cache directory: a compile
 *     there times nothing; a damaged export file is refused; an entry whose
 *     fields no longer give its key is rejected;
 *   - without autotune the heuristic's configuration, no timing;
 *   - another device (driver version) does not see the first one's choices;
 *   - cuBLASLt (codegen/cg_lt.c) is the matmul's last candidate: when the
 *     timer likes it best, the stored choice names it ("choice cublasLt"),
 *     the kernel says so (lt.chosen, "cublasLt ... (autotuned)", the times
 *     of both implementations in its note), a second process reads it back,
 *     and an imported entry whose cuBLASLt payload does not parse (a time
 *     of -1) is rejected while a good one is stored. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "check.h"
#include "codegen/cg.h"
#include "runtime/rt_test_util.h"
#include "src/compile.h"

static const char *MODEL = "model tune_mm {\n"
                           "  dims S\n"
                           "  input x : bf16[S, 1024]\n"
                           "  weight w : bf16[2048, 1024]\n"
                           "  output y = linear(x, w)\n"
                           "}\n";

typedef struct fake_timer {
    int calls;
    const char *favourite; /* the configuration text that measures fastest */
} fake_timer;

static double fake_time(void *user, const cg_kernel *k, const ir_graph *g, const int64_t *dims, char *err, size_t n)
{
    fake_timer *t = user;
    t->calls++;
    (void)g;
    (void)dims;
    (void)err;
    (void)n;
    return k->config && strstr(k->config, t->favourite) ? 10.0 : 20.0 + t->calls;
}

static char err[4096];

/* The matmul kernel's configuration after compiling `model` at S = s in cache dir `dir`; its
 * problem must hold `problem`; when `cands` is given, the configurations of its candidates. */
static char *compile_config_of(const char *dir, const char *model, int64_t s, const char *problem, bool autotune,
                               fake_timer *ft, const rt_tune_device *dev, char *cands, size_t ncands);

/* The matmul kernel's configuration after compiling MODEL in cache dir `dir`. */
static char *compile_config(const char *dir, bool autotune, fake_timer *ft, const rt_tune_device *dev)
{
    return compile_config_of(dir, MODEL, 4096, "N=2048 K=1024", autotune, ft, dev, NULL, 0);
}

static char *compile_config_of(const char *dir, const char *model, int64_t s, const char *problem, bool autotune,
                               fake_timer *ft, const rt_tune_device *dev, char *cands, size_t ncands)
{
    rt_ctx_config cc = {.compile_only = true, .arch = "sm_90a", .cache_dir = dir};
    rt_ctx *ctx = NULL;
    rt_status st = rt_ctx_create(&ctx, &cc, err, sizeof err);
    CHECK_MSG(st == RT_OK, "context: %s", err);
    if (st != RT_OK) return NULL;
    const rt_dim_value md[] = {{"S", s > 0 ? s : 1}}; /* s <= 0: the model has no dims */
    kc_model_options o = {.compile = {.name = "tune_mm.kiln", .text = model},
                          .max_dims = s > 0 ? md : NULL,
                          .nmax_dims = s > 0 ? 1 : 0,
                          .run = {.lazy = true},
                          .autotune = autotune,
                          .tune_hooks = {.timer = fake_time, .timer_user = ft, .device = dev}};
    rt_model *m = NULL;
    st = kc_compile_model(ctx, &o, &m, NULL, err, sizeof err);
    CHECK_MSG(st == RT_OK, "compile: %s", err);
    char *cfg = NULL;
    for (int i = 0; m && i < rt_model_num_kernels(m); i++) {
        const cg_kernel *k = rt_model_kernel(m, i);
        if (k->family == CG_FAMILY_MATMUL_WGMMA) {
            cfg = strdup(k->config);
            CHECK_MSG(k->tune_problem && strstr(k->tune_problem, problem), "problem %s", k->tune_problem ? k->tune_problem : "-");
            if (cands && ncands) {
                cands[0] = 0;
                for (int c = 0; c < k->ntune_cands; c++) {
                    const cg_wg_choice *w = &k->tune_cands[c];
                    size_t l = strlen(cands);
                    snprintf(cands + l, ncands - l, "%dx%d s%d split %d; ", w->bm, w->bn, w->stages, w->split);
                }
            }
            /* cuBLASLt: a candidate (plain linear), the last one; chosen exactly when the config says so */
            CHECK(k->lt.why == CG_LT_OK && strstr(k->tune_problem, " lt=none"));
            CHECK(k->tune_cands[k->ntune_cands - 1].impl == CG_IMPL_CUBLASLT);
            CHECK(k->lt.chosen == (strstr(k->config, "cublasLt") != NULL));
            if (k->lt.chosen)
                CHECK_MSG(strstr(k->lt_note, "chosen by timing (10.0 us vs the template's"), "%s", k->lt_note);
            CHECK(k->ntune_cands >= 2);
        }
    }
    CHECK_MSG(cfg, "no matmul_wgmma kernel");
    rt_model_free(m);
    rt_ctx_free(ctx);
    return cfg;
}

/* The one tuning entry under dir (its path, malloc'd), or NULL. */
static char *tune_entry(const char *dir)
{
    char sub[512];
    snprintf(sub, sizeof sub, "%s/v1/sm_90a_tune", dir);
    DIR *d = opendir(sub);
    if (!d) return NULL;
    char *path = NULL;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".cubin") && e->d_name[0] != '.') {
            free(path);
            path = malloc(strlen(sub) + strlen(e->d_name) + 2);
            sprintf(path, "%s/%s", sub, e->d_name);
        }
    closedir(d);
    return path;
}

static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*len + 1);
    if (b && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
        free(b);
        b = NULL;
    }
    if (b) b[*len] = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const char *b, long len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(b, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
}

/* The entries of tuning file path with entry 0's payload replaced by payload, the checksum
 * recomputed (as rt_tune_export computes it), into out. */
static void rewrite_payload(const char *path, const char *payload, const char *out)
{
    json_t *doc = json_load_file(path, 0, NULL);
    json_t *entries = doc ? json_object_get(doc, "entries") : NULL;
    CHECK(json_is_array(entries) && json_array_size(entries) >= 1);
    if (!json_is_array(entries) || !json_array_size(entries)) {
        json_decref(doc);
        return;
    }
    json_t *e0 = json_deep_copy(json_array_get(entries, 0));
    json_object_set_new(e0, "payload", json_string(payload));
    json_array_append_new(entries, e0); /* the good entry stays: one stored, one rejected */
    char *canon = json_dumps(entries, JSON_COMPACT | JSON_SORT_KEYS);
    char sum[17];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)XXH3_64bits(canon, strlen(canon)));
    free(canon);
    json_object_set_new(doc, "checksum", json_string(sum));
    CHECK(json_dump_file(doc, out, JSON_INDENT(1) | JSON_SORT_KEYS) == 0);
    json_decref(doc);
}

/* Whether text s occurs in b[0..len) (the entry's header holds zero bytes). */
static bool has_bytes(const char *b, long len, const char *s)
{
    const size_t n = strlen(s);
    for (long i = 0; i + (long)n <= len; i++)
        if (!memcmp(b + i, s, n)) return true;
    return false;
}

static void test_cublaslt(const rt_tune_device *dev)
{
    char *dir = make_tmpdir(), *dir2 = make_tmpdir();
    fake_timer ft = {0, "cublasLt"};
    char *c1 = compile_config(dir, true, &ft, dev);
    CHECK_MSG(c1 && strstr(c1, "cublasLt none (autotuned)"), "cuBLASLt favoured: %s", c1 ? c1 : "-");
    char *entry = tune_entry(dir);
    long len = 0;
    char *bytes = entry ? slurp(entry, &len) : NULL;
    CHECK_MSG(bytes && has_bytes(bytes, len, "choice cublasLt\nus 10.000\n") && has_bytes(bytes, len, "cand cublasLt 10.000\n"),
              "the stored payload does not name cuBLASLt");
    free(bytes);
    ft.calls = 0;
    char *c2 = compile_config(dir, true, &ft, dev);
    CHECK_MSG(ft.calls == 0 && c2 && c1 && !strcmp(c1, c2), "second process: %d timed, %s", ft.calls, c2 ? c2 : "-");
    /* export; a copy with a second entry whose payload does not parse: that one rejected */
    char file[600], bad[600];
    snprintf(file, sizeof file, "%s/tune.json", dir2);
    snprintf(bad, sizeof bad, "%s/bad.json", dir2);
    rt_cache_config ccfg = {.dir = dir};
    rt_cache *cache = NULL;
    int count = -1, rejected = -1;
    CHECK(rt_cache_open(&cache, &ccfg) == RT_OK);
    CHECK(cache && rt_tune_export(cache, file, &count, err, sizeof err) == RT_OK && count == 1);
    rt_cache_close(cache);
    rewrite_payload(file, "choice cublasLt\nus -1\n", bad);
    char *dir3 = make_tmpdir();
    rt_cache_config c3cfg = {.dir = dir3};
    cache = NULL;
    CHECK(rt_cache_open(&cache, &c3cfg) == RT_OK);
    rt_status st = cache ? rt_tune_import(cache, bad, &count, &rejected, err, sizeof err) : RT_ERR_IO;
    CHECK_MSG(st == RT_OK && count == 1 && rejected == 1, "import: %s (%d stored, %d rejected)", err, count, rejected);
    rt_cache_close(cache);
    ft.calls = 0;
    char *c3 = compile_config(dir3, true, &ft, dev);
    CHECK_MSG(ft.calls == 0 && c3 && c1 && !strcmp(c1, c3), "after import: %d timed, %s", ft.calls, c3 ? c3 : "-");
    free(c1), free(c2), free(c3), free(entry);
    rm_tree(dir), rm_tree(dir2), rm_tree(dir3);
    free(dir), free(dir2), free(dir3);
}

/* Skinny M (32 rows known, one row block): with KILN_CG_WG_EVEN bit 2 (codegen/cg.h) the width that
 * spreads the column blocks evenly over the SMs (codegen's wg_even_pick) is a candidate (else it is
 * not): a plain linear of N = 28672 (the 8B gate/up's columns) in
 * 128 tiles of 224 columns against 448 of 64 (four on the busiest SM); when it times fastest the
 * kernel takes it, from registers (224 output columns: no whole rounds of 64 for the TMA store). */
static void test_even_width(const rt_tune_device *dev)
{
    static const char *wide = "model tune_even {\n"
                              "  input x : bf16[32, 4096]\n"
                              "  weight w : bf16[28672, 4096]\n"
                              "  output y = linear(x, w)\n"
                              "}\n";
    char *dir = make_tmpdir();
    fake_timer ft = {0, "64x224"};
    char cands[1024];
    char *c = compile_config_of(dir, wide, 0, "M=32 N=28672 K=4096", true, &ft, dev, cands, sizeof cands);
    /* 64x224 among the candidates: as the heuristic's (bit 0) or beside it (bit 2); neither, and the
     * autotuner keeps to the widths that have run on a GPU */
    const bool wide_even = (KILN_CG_WG_EVEN & 5) != 0;
    CHECK_MSG((strstr(cands, "64x224 s6 split 1") != NULL) == wide_even, "candidates: %s", cands);
    CHECK_MSG(c && (strstr(c, "64x224") != NULL) == wide_even && strstr(c, "(autotuned)") &&
                  (!wide_even || !strstr(c, "tma-store")),
              "tuned: %s", c ? c : "-");
    /* without autotune: the heuristic's tile, the even one with KILN_CG_WG_EVEN bit 0 */
    char *h = compile_config_of(dir, wide, 0, "M=32 N=28672 K=4096", false, &ft, dev, NULL, 0);
    CHECK_MSG(h && (strstr(h, "64x224") != NULL) == ((KILN_CG_WG_EVEN & 1) != 0), "heuristic: %s", h ? h : "-");
    /* N = 4096 (the 8B O): 64 tiles of 64 split 2 in a cluster (128 CTAs) already spread evenly;
     * the unsplit 64x32 (128 tiles, no exchange) streams as many columns per SM and is a candidate */
    static const char *square = "model tune_even {\n"
                                "  input x : bf16[32, 4096]\n"
                                "  weight w : bf16[4096, 4096]\n"
                                "  output y = linear(x, w)\n"
                                "}\n";
    ft = (fake_timer){0, "no such configuration"};
    char *q = compile_config_of(dir, square, 0, "M=32 N=4096 K=4096", true, &ft, dev, cands, sizeof cands);
    /* the heuristic's first: 64x32 itself with bits 0 and 1 */
    const bool even_heur = (KILN_CG_WG_EVEN & 3) == 3;
    CHECK_MSG(strstr(cands, even_heur ? "64x32 s12 split 1; " : "64x64 s12 split 2; ") == cands &&
                  (strstr(cands, "64x32 s12 split 1") != NULL) == (even_heur || (KILN_CG_WG_EVEN & 4) != 0),
              "candidates: %s", cands);
    free(c), free(h), free(q);
    rm_tree(dir);
    free(dir);
}

int main(void)
{
    char *dir = make_tmpdir(), *dir2 = make_tmpdir();
    CHECK(dir && dir2);
    if (!dir || !dir2) return 1;
    const rt_tune_device dev = {"Fake H200", 90, 132, 13000};
    /* the heuristic picks ping-pong 128x128 at K = 1024; the fake device likes 128x256 */
    fake_timer ft = {0, "128x256"};

    char *heur = compile_config(dir, false, &ft, &dev);
    CHECK(ft.calls == 0);
    CHECK_MSG(heur && !strstr(heur, "autotuned") && !strstr(heur, "128x256"), "heuristic: %s", heur ? heur : "-");

    char *c1 = compile_config(dir, true, &ft, &dev);
    const int ncands = ft.calls;
    CHECK_MSG(ncands >= 2, "candidates timed: %d", ncands);
    CHECK_MSG(c1 && strstr(c1, "128x256") && strstr(c1, "(autotuned)"), "tuned: %s", c1 ? c1 : "-");
    char *entry = tune_entry(dir);
    CHECK_MSG(entry != NULL, "no entry under %s/v1/sm_90a_tune", dir);

    /* a second process: nothing timed, the same choice */
    ft.calls = 0;
    char *c2 = compile_config(dir, true, &ft, &dev);
    CHECK_MSG(ft.calls == 0, "second process timed %d candidates", ft.calls);
    CHECK(c1 && c2 && !strcmp(c1, c2));

    /* a damaged entry: deleted, measured again, stored again */
    long len = 0;
    char *bytes = entry ? slurp(entry, &len) : NULL;
    CHECK(bytes && len > 60);
    if (bytes && len > 60) {
        bytes[len - 3] ^= 0x01; /* in the payload's last candidate line */
        spit(entry, bytes, len);
        ft.calls = 0;
        char *c3 = compile_config(dir, true, &ft, &dev);
        CHECK_MSG(ft.calls == ncands, "after damage: %d timed, want %d", ft.calls, ncands);
        CHECK(c3 && c1 && !strcmp(c3, c1));
        free(c3);
        long len2 = 0;
        char *again = slurp(entry, &len2);
        CHECK_MSG(again && len2 == len && memcmp(again, bytes, (size_t)len) != 0, "the entry was not rewritten");
        free(again);
    }
    free(bytes);

    /* another driver: its own measurement */
    const rt_tune_device dev2 = {"Fake H200", 90, 132, 13010};
    ft.calls = 0;
    char *c4 = compile_config(dir, true, &ft, &dev2);
    CHECK_MSG(ft.calls == ncands, "another driver timed %d, want %d", ft.calls, ncands);
    free(c4);

    /* export, import into an empty cache */
    char file[600], bad[600];
    snprintf(file, sizeof file, "%s/tune.json", dir2);
    snprintf(bad, sizeof bad, "%s/bad.json", dir2);
    rt_cache_config ccfg = {.dir = dir};
    rt_cache *cache = NULL;
    CHECK(rt_cache_open(&cache, &ccfg) == RT_OK);
    int count = -1, rejected = -1;
    rt_status st = rt_tune_export(cache, file, &count, err, sizeof err);
    CHECK_MSG(st == RT_OK, "export: %s", err);
    CHECK_MSG(count == 2, "exported %d entries (two drivers)", count);
    rt_cache_close(cache);

    char *dir3 = make_tmpdir();
    rt_cache_config c3cfg = {.dir = dir3};
    cache = NULL;
    CHECK(rt_cache_open(&cache, &c3cfg) == RT_OK);
    st = rt_tune_import(cache, file, &count, &rejected, err, sizeof err);
    CHECK_MSG(st == RT_OK && count == 2 && rejected == 0, "import: %s (%d, %d rejected)", err, count, rejected);
    /* a damaged file: refused whole */
    char *text = slurp(file, &len);
    CHECK(text != NULL);
    if (text) {
        char *p = strstr(text, "choice ");
        CHECK(p != NULL);
        if (p) p[7] = p[7] == '1' ? '2' : '1';
        spit(bad, text, len);
        st = rt_tune_import(cache, bad, &count, &rejected, err, sizeof err);
        CHECK_MSG(st == RT_ERR_INVALID, "a damaged file was imported (%d)", (int)st);
    }
    free(text);
    rt_cache_close(cache);
    ft.calls = 0;
    char *c5 = compile_config(dir3, true, &ft, &dev);
    CHECK_MSG(ft.calls == 0, "after import timed %d", ft.calls);
    CHECK(c5 && c1 && !strcmp(c5, c1));
    free(c5);

    test_cublaslt(&dev);
    test_even_width(&dev);

    free(heur);
    free(c1);
    free(c2);
    free(entry);
    rm_tree(dir);
    rm_tree(dir2);
    rm_tree(dir3);
    free(dir);
    free(dir2);
    free(dir3);
    return CHECK_DONE();
}
