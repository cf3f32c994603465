#define _POSIX_C_SOURCE 200809L
/* tests/codegen/test_cg_samples.c — every kernel of every sample compiles.
 *
 * For each sample (samples/NAME.kiln): the full pipeline, then every kernel group is
 * emitted twice (the text must be identical: it is its own cache key) in two
 * variants — no dim values (prefill: tensor-core matmul, prefill attention)
 * and decode dims (B=1, S=1: GEMV, split-KV attention) — and every kernel is
 * compiled by NVRTC for sm_90a (runtime/rt_nvrtc.h, in parallel) with ptxas
 * -v: a log holding nothing but ptxas's report (no errors, no warnings) and
 * no stack frame or spills in any kernel. The Hopper matmul kernels
 * (matmul_wgmma, chosen for bf16 prefill projections) and their mma.sync
 * fallbacks are compiled too. Also checks the launch rules evaluate, the
 * KilnArgs layout (8 bytes a field), and cg_write_sources.
 * KILN_TEST_SAMPLES=SUBSTRING runs only the samples whose names contain it
 * (for iterating; ctest runs them all). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ptxas_log.h"
#include "codegen/cg.h"
#include "frontend/frontend.h"
#include "passes/pass.h"
#include "runtime/rt_nvrtc.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

static ir_graph *compile_sample(const char *path)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src = {0};
    ir_graph *g = NULL;
    if (fe_source_read(&src, path, &d) == 0) {
        fe_options o = {0};
        g = fe_compile(&src, &o, &d);
        if (g) {
            pass_options po = {0};
            pass_ctx ctx = {.opts = &po, .diags = &d};
            g = pass_run_pipeline(g, &ctx);
        }
    }
    if (!g) diag_print(&d, stderr, src.text);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);
    return g;
}

static int nwgmma; /* kernels of the Hopper template, over all samples */
/* ... of them with the QKV epilogue: through shared memory and TMA stores, or from registers */
static int nqkv_tma, nqkv_regs, nres_tma;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Emits all kernels of g (variant dims or NULL), checks determinism and
 * structure, appends them to the compile list. */
static void emit_variant(const ir_graph *g, const char *sample, const int64_t *dims, cg_kernel **all, int *nall)
{
    cg_options o = {0};
    o.dims = dims;
    cg_kernel *ks = NULL, *again = NULL;
    int n = 0, n2 = 0;
    char err[1024];
    int rc = cg_emit_all_ex(g, &o, &ks, &n, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", sample, err);
    if (rc != 0) return;
    rc = cg_emit_all_ex(g, &o, &again, &n2, err, sizeof err);
    CHECK(rc == 0 && n2 == n);
    for (int i = 0; rc == 0 && i < n; i++) {
        CHECK_MSG(!strcmp(ks[i].source, again[i].source), "%s: kernel %d text differs between two emits", sample, i);
        CHECK(!strcmp(ks[i].name, again[i].name));
    }
    cg_kernels_free(again, n2);
    CHECK(n == g->ngroups);
    int64_t bind[IR_MAX_SYMS];
    for (int i = 0; i < g->nsyms; i++) {
        bind[i] = dims ? dims[i] : 64;
    }
    for (int i = 0; i < n; i++) {
        cg_kernel *k = &ks[i];
        char want[256];
        snprintf(want, sizeof want, "kiln_%s_k%d_", g->name, i);
        CHECK_MSG(!strncmp(k->name, want, strlen(want)), "%s: name %s", sample, k->name);
        CHECK(strstr(k->source, k->generated) != NULL);
        CHECK(k->args_size == 8 * (size_t)k->nargs);
        for (int a = 0; a < k->nargs; a++) CHECK(k->args[a].offset == 8 * (size_t)a);
        unsigned grid[3], block;
        size_t smem;
        CHECK_MSG(cg_launch_eval(k, bind, grid, &block, &smem, err, sizeof err), "%s: %s", sample, err);
        /* a norm its decode GEMVs compute is an empty launch (passes/fold_norm_gemv.c) */
        const bool folded = k->config && !strncmp(k->config, "not launched", 12);
        CHECK_MSG(block >= 32 && block <= 1024 && (grid[0] >= 1 || folded), "%s: %s grid %u block %u", sample, k->name,
                  grid[0], block);
        printf("  %-40s %-18s grid (%u, %u, %u) block %u%s%s\n", k->name, cg_family_name(k->family), grid[0], grid[1],
               grid[2], block, k->note ? "  note: " : "", k->note ? k->note : "");
    }
    for (int i = 0; i < n; i++)
        if (ks[i].family == CG_FAMILY_MATMUL_WGMMA) {
            /* A, W, [the TMA-store output, [its residual]]; the QKV epilogue's: A, W, q, one or two caches
             * (640-byte prefix, as with the residual's map) */
            const bool qkv = ks[i].ntmaps > 2 && ks[i].tmaps[2].operand == CG_TMAP_Q;
            const bool res = ks[i].ntmaps == 4 && ks[i].tmaps[3].operand == CG_TMAP_RES;
            CHECK(!res || (ks[i].tmaps[2].operand == CG_TMAP_OUT && ks[i].tmaps[3].box_rows == 64 &&
                           strstr(ks[i].generated, "#define KILN_WGMMA_RES_TMA 1") != NULL));
            CHECK((ks[i].ntmaps >= 2 && ks[i].ntmaps <= 5) && ks[i].param_size > ks[i].args_size && ks[i].fallback);
            CHECK(ks[i].param_prefix == (qkv || res ? 640u : 384u));
            CHECK(!qkv || (ks[i].tmaps[2].operand == CG_TMAP_Q && ks[i].tmaps[3].operand == CG_TMAP_K &&
                           ks[i].tmaps[2].box_rows == 64 && ks[i].tmaps[3].box_rows == 64));
            const bool epi = strstr(ks[i].generated, "kiln_qkv_turns") != NULL;
            CHECK((strstr(ks[i].generated, "#define KILN_WGMMA_QKV 1") != NULL) == qkv);
            /* the TMA epilogue at the large-shape variant (M unknown): the cooperative 128x256 tile,
             * 4 stages, where N >= 4096, else ping-pong 128x128, 5 stages; the register one: 64-row tiles */
            int64_t wn = 0;
            const bool wide = qkv && ir_dim_is_const(&ks[i].tmaps[1].rows, &wn) && wn >= 4096;
            CHECK_MSG(!qkv || (epi && ks[i].config &&
                               !strncmp(ks[i].config, wide ? "wgmma 128x256 s4 tma-store" : "wgmma 128x128 s5 ping-pong tma-store",
                                        wide ? 26 : 36)),
                      "%s: %s %s (N %lld)", sample, ks[i].name, ks[i].config ? ks[i].config : "-", (long long)wn);
            CHECK(qkv || !epi || (ks[i].config && !strncmp(ks[i].config, "wgmma 64x128 s8 ping-pong", 25)));
            nqkv_tma += qkv;
            nres_tma += res;
            nqkv_regs += epi && !qkv;
            nwgmma++;
        }
    cg_kernel *na = realloc(*all, (size_t)(*nall + n) * sizeof *na);
    if (!na) {
        CHECK(na != NULL);
        cg_kernels_free(ks, n);
        return;
    }
    *all = na;
    memcpy(na + *nall, ks, (size_t)n * sizeof *ks);
    *nall += n;
    free(ks); /* the kernels now live in *all */
}

static void check_write_sources(const ir_graph *g)
{
    char dir[] = "/tmp/kiln_cg_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char err[512];
    int n = cg_write_sources(g, dir, NULL, err, sizeof err);
    CHECK_MSG(n == g->ngroups, "cg_write_sources: %s", err);
    DIR *d = opendir(dir);
    int files = 0;
    struct dirent *e;
    char path[1024];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        files++;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
    int nfb = 0; /* the fallbacks of wgmma kernels are written too */
    cg_kernel *ks;
    int nk;
    if (cg_emit_all_ex(g, NULL, &ks, &nk, err, sizeof err) == 0) {
        for (int i = 0; i < nk; i++) nfb += ks[i].fallback != NULL;
        cg_kernels_free(ks, nk);
    }
    CHECK_MSG(files == g->ngroups + nfb + 1, "%d files written", files);
}

int main(void)
{
    const char *sdir = KILN_SOURCE_DIR "/samples";
    DIR *d = opendir(sdir);
    CHECK(d != NULL);
    if (!d) return CHECK_DONE();
    char *names[64];
    int nnames = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nnames < 64) {
        size_t l = strlen(e->d_name);
        const char *only = getenv("KILN_TEST_SAMPLES"); /* a substring to pick samples while iterating */
        if (only && *only && !strstr(e->d_name, only)) continue;
        if (l > 5 && !strcmp(e->d_name + l - 5, ".kiln")) names[nnames++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nnames, sizeof *names, cmp_str);
    CHECK(nnames >= (getenv("KILN_TEST_SAMPLES") && *getenv("KILN_TEST_SAMPLES") ? 1 : 3));

    cg_kernel *all = NULL;
    int nall = 0;
    for (int i = 0; i < nnames; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", sdir, names[i]);
        ir_graph *g = compile_sample(path);
        CHECK_MSG(g != NULL, "%s does not compile", names[i]);
        if (!g) continue;
        printf("%s: %d kernels\n", names[i], g->ngroups);
        emit_variant(g, names[i], NULL, &all, &nall);
        int64_t dec[IR_MAX_SYMS];
        for (int s = 0; s < g->nsyms; s++) dec[s] = !strcmp(g->syms[s], "T") ? 4096 : 1;
        printf(" decode variant (every dim 1, T 4096):\n");
        emit_variant(g, names[i], dec, &all, &nall);
        if (i == 0) check_write_sources(g);
        ir_graph_free(g);
    }

    /* compile everything in parallel; each log must be empty */
    const char **knames = calloc(2 * (size_t)nall + 1, sizeof *knames);
    const char **srcs = calloc(2 * (size_t)nall + 1, sizeof *srcs);
    rt_compile_result *res = calloc(2 * (size_t)nall + 1, sizeof *res);
    if (knames && srcs && res) {
        /* kernels whose text is the same in both variants compile once */
        int nu = 0;
        const cg_kernel **which = calloc(2 * (size_t)nall + 1, sizeof *which);
        for (int i = 0; which && i < 2 * nall; i++) {
            const cg_kernel *k = i < nall ? &all[i] : all[i - nall].fallback;
            if (!k) continue;
            bool dup = false;
            for (int j = 0; j < nu && !dup; j++) dup = !strcmp(k->source, which[j]->source);
            if (dup) continue;
            knames[nu] = k->name;
            srcs[nu] = k->source;
            which[nu++] = k;
        }
        static const char *const vopt[] = {"--ptxas-options=-v"};
        rt_compile_opts o = {0};
        o.extra = vopt;
        o.nextra = 1;
        rt_nvrtc_compile_many(nu, knames, srcs, &o, RT_TARGET_CUBIN, res, 0, NULL, NULL);
        double ms = 0;
        for (int i = 0; i < nu; i++) {
            const cg_kernel *k = which[i];
            int regs = -1;
            CHECK_MSG(res[i].status == RT_OK, "%s (%s): %s", k->name, cg_family_name(k->family),
                      res[i].message ? res[i].message : "?");
            CHECK_MSG(res[i].log && ptxas_info_only(res[i].log), "%s: NVRTC log has more than ptxas's report:\n%s",
                      k->name, res[i].log ? res[i].log : "(none)");
            CHECK_MSG(res[i].status != RT_OK || (res[i].log && ptxas_no_spills(res[i].log, k->name, &regs)),
                      "%s: ptxas reports a stack frame or spills:\n%s", k->name, res[i].log ? res[i].log : "(none)");
            ms += res[i].ms;
            rt_compile_result_free(&res[i]);
        }
        printf("compiled %d distinct kernels for sm_90a (%.0f ms of NVRTC time), %d of the Hopper template\n", nu, ms,
               nwgmma);
        CHECK(nwgmma >= 4); /* the 8B layer's four projections at prefill, at least */
        /* the Llama layers (head dims 64, 128, scaled RoPE) take the TMA epilogue, Pythia's
         * partial rotary the register one */
        printf("QKV epilogues at prefill: %d through TMA stores, %d from registers\n", nqkv_tma, nqkv_regs);
        if (!getenv("KILN_TEST_SAMPLES")) CHECK(nqkv_tma >= 3 && nqkv_regs >= 1);
        /* the residual by TMA (KILN_CG_WG_RES_TMA): at least the 8B, 1B and Qwen3 layers' O and down */
        printf("residuals by TMA at prefill: %d\n", nres_tma);
        if (!getenv("KILN_TEST_SAMPLES")) CHECK(nres_tma >= 6);
        free(which);
    }
    free(knames);
    free(srcs);
    free(res);
    cg_kernels_free(all, nall);
    for (int i = 0; i < nnames; i++) free(names[i]);
    return CHECK_DONE();
}
