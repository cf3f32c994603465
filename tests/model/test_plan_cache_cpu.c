/* tests/model/test_plan_cache_cpu.c — the plan cache (runtime/rt_plan_cache.h)
 * without a GPU, counting work rather than timing it: a second compile of
 * the same model in a new context (a warm start) runs codegen 0 times and
 * gives the same plan text, kernels, fusion report and decode-variant
 * report as the cold one; a change of the model text, a define, a pass, the
 * head split or the max dims is a miss (codegen runs); corrupt entries are
 * deleted, the compile falls back to a full one with a warning and stores
 * the entry again; an untrusted cache directory keeps nothing on disk. The
 * payload coder: a round trip keeps every kernel field, every truncation
 * and a graph the kernels do not fit are refused with a reason.
 * Compile-only contexts with lazy kernels: NVRTC never runs. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kiln.h"
#include "codegen/cg.h"
#include "runtime/rt_plan_cache.h"
#include "src/compile.h"

#define MODEL "samples/models/llama3_2_1b.kiln"

static const kiln_define small[] = {{"NL", "2"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
static const kiln_dim maxd[] = {{"B", 2}, {"S", 4}, {"T", 64}};
static const kiln_dim decode[] = {{"B", 1}, {"S", 1}, {"T", 64}};

typedef struct variation {
    const kiln_define *defs;
    int ndefs;
    const kiln_dim *dims;
    const char *const *disabled;
    int ndisabled;
    int head_sample;
    const char *text; /* compile this text instead of the file */
} variation;

static kiln_context *context(const char *dir)
{
    kiln_context_options co = {.cache_dir = dir, .compile_only = 1};
    kiln_context *ctx = NULL;
    CHECK_MSG(kiln_context_create(&ctx, &co) == KILN_OK, "%s", kiln_last_error());
    return ctx;
}

static kiln_model *compile(kiln_context *ctx, const variation *v, kiln_counters *c)
{
    kiln_model_options o = {.defines = v->defs ? v->defs : small,
                            .ndefines = v->defs ? v->ndefs : 6,
                            .max_dims = v->dims ? v->dims : maxd,
                            .nmax_dims = 3,
                            .disabled = v->disabled,
                            .ndisabled = v->ndisabled,
                            .head_sample = v->head_sample,
                            .lazy = 1};
    kiln_model *m = NULL;
    kiln_status st = v->text ? kiln_model_compile_string(ctx, MODEL, v->text, &o, &m) : kiln_model_compile_file(ctx, MODEL, &o, &m);
    CHECK_MSG(st == KILN_OK, "%s", kiln_last_error());
    if (m) CHECK(kiln_model_counters(m, c) == KILN_OK);
    return m;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

/* What a compile gives, to compare a warm start with. */
typedef struct seen {
    char *plan, *report, *fallbacks, *names;
    int nkernels;
} seen;

static void look(kiln_model *m, seen *s)
{
    s->plan = dup_or_empty(kiln_model_describe(m));
    s->report = dup_or_empty(kiln_model_report_json(m));
    s->nkernels = kiln_model_num_kernels(m);
    size_t len = 0;
    FILE *f = open_memstream(&s->names, &len);
    for (int i = 0; i < s->nkernels; i++) {
        kiln_kernel_info ki;
        CHECK(kiln_model_kernel(m, i, &ki) == KILN_OK);
        fprintf(f, "%s %s %s %s\n", ki.name, ki.kind, ki.template_file, ki.config ? ki.config : "");
    }
    fclose(f);
    const char *fb = NULL;
    CHECK(kiln_model_fallbacks(m, decode, 3, &fb) == KILN_OK); /* plans the decode variant */
    s->fallbacks = dup_or_empty(fb);
}

static void same(const seen *a, const seen *b)
{
    CHECK(!strcmp(a->plan, b->plan));
    CHECK(!strcmp(a->report, b->report) && strlen(a->report) > 100);
    CHECK(!strcmp(a->names, b->names) && a->nkernels == b->nkernels && a->nkernels > 5);
    CHECK(!strcmp(a->fallbacks, b->fallbacks));
}

static void forget(seen *s)
{
    free(s->plan);
    free(s->report);
    free(s->fallbacks);
    free(s->names);
}

/* Every entry file under dir/v1/sm_90a: with one byte flipped (flip), or counted. */
static int entries(const char *dir, bool flip)
{
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/v1/sm_90a", dir);
    DIR *d = opendir(sub);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        count++;
        if (!flip) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
        FILE *f = fopen(path, "r+b");
        CHECK(f != NULL);
        if (!f) continue;
        fseek(f, 100, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 100, SEEK_SET);
        fputc(c ^ 0x5a, f);
        fclose(f);
    }
    closedir(d);
    return count;
}

/* Cold then warm (a new context on the same directory): the warm one runs
 * no codegen and gives the same plan. Returns the cold compile's codegen runs. */
static uint64_t cold_then_warm(const char *dir, const variation *v)
{
    kiln_context *c1 = context(dir), *c2 = context(dir);
    kiln_counters cold, warm;
    kiln_model *m1 = compile(c1, v, &cold), *m2 = compile(c2, v, &warm);
    CHECK_MSG(cold.plan_cache_hits == 0 && cold.codegen_runs >= 2, "cold: %llu hits, %llu codegen runs",
              (unsigned long long)cold.plan_cache_hits, (unsigned long long)cold.codegen_runs);
    CHECK_MSG(warm.plan_cache_hits == 1 && warm.codegen_runs == 0, "warm: %llu hits, %llu codegen runs",
              (unsigned long long)warm.plan_cache_hits, (unsigned long long)warm.codegen_runs);
    seen a, b;
    look(m1, &a);
    look(m2, &b);
    same(&a, &b);
    kiln_model_counters(m1, &cold);
    kiln_model_counters(m2, &warm);
    /* the decode variant: planned by codegen cold, from the cache warm */
    CHECK(cold.variants == 2 && cold.plan_cache_hits == 0 && cold.codegen_runs >= 3);
    CHECK_MSG(warm.variants == 2 && warm.plan_cache_hits == 2 && warm.codegen_runs == 0, "warm decode: %llu hits, %llu runs",
              (unsigned long long)warm.plan_cache_hits, (unsigned long long)warm.codegen_runs);
    CHECK(warm.kernels_compiled == 0 && cold.kernels_compiled == 0); /* lazy: nothing compiled */
    forget(&a);
    forget(&b);
    uint64_t runs = cold.codegen_runs;
    kiln_model_free(m1);
    kiln_model_free(m2);
    kiln_context_free(c1);
    kiln_context_free(c2);
    return runs;
}

static void warm_starts(const char *dir)
{
    variation base = {0};
    CHECK(cold_then_warm(dir, &base) > 0);
    int n = entries(dir, false);
    CHECK_MSG(n == 2, "%d entries (the plan and the decode variant)", n);

    /* each input of the key: a miss, then a hit */
    const kiln_define eps[] = {{"NL", "2"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}, {"EPS", "1e-6"}};
    variation d = {.defs = eps, .ndefs = 7};
    cold_then_warm(dir, &d);
    const kiln_dim t128[] = {{"B", 2}, {"S", 4}, {"T", 128}};
    variation md = {.dims = t128};
    cold_then_warm(dir, &md);
    const char *const off[] = {"fuse-epilogue"};
    variation dis = {.disabled = off, .ndisabled = 1};
    cold_then_warm(dir, &dis);
    variation hs = {.head_sample = 1};
    cold_then_warm(dir, &hs);
    FILE *f = fopen(MODEL, "rb");
    CHECK(f != NULL);
    char *text = calloc(1, 1 << 20);
    size_t len = f ? fread(text, 1, (1 << 20) - 64, f) : 0;
    if (f) fclose(f);
    strcpy(text + len, "\n# one more comment line\n");
    variation tx = {.text = text};
    cold_then_warm(dir, &tx);
    free(text);
    n = entries(dir, false);
    CHECK_MSG(n == 12, "%d entries: 6 plans with their decode variants", n);
}

static void corrupt(const char *dir)
{
    variation base = {0};
    int n = entries(dir, true);
    CHECK(n == 12);
    kiln_context *c = context(dir);
    kiln_counters k;
    kiln_model *m = compile(c, &base, &k);
    const char *w = m ? kiln_model_warnings(m) : "";
    CHECK_MSG(strstr(w, "kiln plan cache") && strstr(w, "corrupt") && strstr(w, "compiled in full"), "warnings: %s", w);
    CHECK(k.plan_cache_hits == 0 && k.codegen_runs > 0);
    seen a;
    if (m) look(m, &a);
    kiln_model_counters(m, &k);
    CHECK(k.plan_cache_hits == 0); /* the decode variant's entry was corrupt too */
    kiln_model_free(m);
    kiln_context_free(c);
    /* stored again: the next start is warm, with the same plan */
    c = context(dir);
    m = compile(c, &base, &k);
    CHECK(k.plan_cache_hits == 1 && k.codegen_runs == 0);
    CHECK(m && !strstr(kiln_model_warnings(m), "plan cache"));
    seen b;
    if (m) look(m, &b);
    kiln_model_counters(m, &k);
    CHECK(k.plan_cache_hits == 2 && k.codegen_runs == 0);
    same(&a, &b);
    forget(&a);
    forget(&b);
    kiln_model_free(m);
    kiln_context_free(c);
}

/* A directory others may write: the cache keeps nothing on disk, so every start is cold. */
static void untrusted(const char *parent)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/open", parent);
    CHECK(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
    variation base = {0};
    for (int i = 0; i < 2; i++) {
        kiln_context *c = context(dir);
        kiln_counters k;
        kiln_model *m = compile(c, &base, &k);
        CHECK(k.plan_cache_hits == 0 && k.codegen_runs > 0);
        kiln_model_free(m);
        kiln_context_free(c);
    }
    CHECK(entries(dir, false) == 0);
}

/* The coder on a small model's kernels. */
static void coder(void)
{
    char err[2048];
    kc_define defs[6];
    for (int i = 0; i < 6; i++) defs[i] = (kc_define){small[i].name, small[i].value};
    kc_options o = {.name = MODEL, .defines = defs, .ndefines = 6};
    kc_unit *u = NULL, *u1 = NULL;
    CHECK(kc_open(&o, NULL, &u, err, sizeof err) == RT_OK);
    CHECK(kc_parse(u, err, sizeof err) == RT_OK && kc_fuse(u, err, sizeof err) == RT_OK);
    defs[0].value = "1";
    CHECK(kc_open(&o, NULL, &u1, err, sizeof err) == RT_OK);
    CHECK(kc_parse(u1, err, sizeof err) == RT_OK && kc_fuse(u1, err, sizeof err) == RT_OK);
    const ir_graph *g = kc_fused(u), *g1 = kc_fused(u1);
    int64_t dims[IR_MAX_SYMS] = {2, 4, 64};
    cg_options co = {.dims = dims};
    cg_kernel *ks = NULL;
    int nk = 0;
    CHECK(cg_emit_all_ex(g, &co, &ks, &nk, err, sizeof err) == 0 && nk > 5);
    /* kernel 3 shares kernel 1's program, as share_identical_kernels leaves them */
    const char *own_src = ks[3].source, *own_name = ks[3].name;
    size_t own_len = ks[3].source_len;
    ks[3].source = ks[1].source;
    ks[3].source_len = ks[1].source_len;
    ks[3].name = ks[1].name;
    rt_plan_cache_head h = {"plan text", "{\"report\": 1}", {1, 2, 3, 4}}, back;
    rt_blob b;
    CHECK(rt_plan_cache_encode(&h, ks, nk, &b) == RT_OK);
    cg_kernel *out = NULL;
    int nout = 0;
    CHECK_MSG(rt_plan_cache_decode(b.data, b.size, g, &back, &out, &nout, err, sizeof err), "%s", err);
    CHECK(nout == nk && !strcmp(back.text, "plan text") && !strcmp(back.report, "{\"report\": 1}") && back.mem.packed == 3);
    for (int i = 0; i < nk && i < nout; i++) {
        const cg_kernel *x = &ks[i], *y = &out[i];
        CHECK(!strcmp(x->name, y->name) && x->source_len == y->source_len && !memcmp(x->source, y->source, x->source_len));
        CHECK(!strcmp(x->kind, y->kind) && x->family == y->family && x->group == y->group && x->nargs == y->nargs);
        CHECK(!memcmp(&x->launch, &y->launch, sizeof x->launch) && x->pdl == y->pdl && x->nxforms == y->nxforms);
        CHECK(x->args_size == y->args_size && x->param_size == y->param_size && x->ntmaps == y->ntmaps);
        const char *xg = i == 3 ? ks[1].generated : x->generated; /* a shared kernel reads its program's */
        CHECK(!xg == !y->generated && (!xg || !strcmp(xg, y->generated)));
        CHECK(!x->config == !y->config && (!x->config || !strcmp(x->config, y->config)));
        CHECK(!x->fallback == !y->fallback);
        for (int a = 0; a < x->nargs && a < y->nargs; a++)
            CHECK(!strcmp(x->args[a].field, y->args[a].field) && !strcmp(x->args[a].ctype, y->args[a].ctype) &&
                  x->args[a].kind == y->args[a].kind && x->args[a].node == y->args[a].node &&
                  ir_dim_eq(&x->args[a].dim, &y->args[a].dim));
    }
    CHECK(nout > 3 && out[3].source == out[1].source && out[3].name == out[1].name && out[3].generated == out[1].generated);
    rt_plan_cache_head_free(&back);
    cg_kernels_free(out, nout);
    /* every truncation is refused with a reason */
    int refused = 0, tried = 0;
    for (size_t cut = 0; cut < b.size; cut += b.size / 97 + 1, tried++) {
        err[0] = 0;
        bool ok = rt_plan_cache_decode(b.data, cut, g, &back, &out, &nout, err, sizeof err);
        refused += !ok && err[0] && !out && nout == 0;
        if (ok) {
            rt_plan_cache_head_free(&back);
            cg_kernels_free(out, nout);
        }
    }
    CHECK_MSG(refused == tried, "%d of %d truncations refused", refused, tried);
    /* a graph the kernels do not fit (one layer: fewer nodes and groups) */
    CHECK(!rt_plan_cache_decode(b.data, b.size, g1, &back, &out, &nout, err, sizeof err) && strstr(err, "kernel"));
    /* the head alone (before the passes) */
    CHECK(rt_plan_cache_decode(b.data, b.size, NULL, &back, NULL, NULL, err, sizeof err) && !strcmp(back.text, "plan text"));
    rt_plan_cache_head_free(&back);
    /* a variant's entry has no head: refused where a plan's is wanted */
    rt_blob vb;
    CHECK(rt_plan_cache_encode(NULL, ks, nk, &vb) == RT_OK);
    CHECK(!rt_plan_cache_decode(vb.data, vb.size, g, &back, &out, &nout, err, sizeof err) && strstr(err, "plan text"));
    CHECK(rt_plan_cache_decode(vb.data, vb.size, g, NULL, &out, &nout, err, sizeof err) && nout == nk);
    cg_kernels_free(out, nout);
    rt_blob_free(&vb);
    /* a changed length, and bytes that are not an entry */
    b.data[12] ^= 1;
    CHECK(!rt_plan_cache_decode(b.data, b.size, g, &back, &out, &nout, err, sizeof err) && strstr(err, "does not decode"));
    memcpy(b.data, "KILNCUBN", 8);
    CHECK(!rt_plan_cache_decode(b.data, b.size, g, &back, &out, &nout, err, sizeof err) && strstr(err, "not a plan"));
    rt_blob_free(&b);
    ks[3].source = own_src;
    ks[3].source_len = own_len;
    ks[3].name = own_name;
    cg_kernels_free(ks, nk);
    kc_free(u);
    kc_free(u1);
}

int main(void)
{
    char dir[] = "/tmp/kiln-plan-cache-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char cache[1100];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    warm_starts(cache);
    corrupt(cache);
    untrusted(dir);
    coder();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
