/* tests/codegen/test_cg_target.c — codegen sizes kernels for its target
 * (cg_target), and the driver gives it the documented default without a
 * device.
 *
 * The Llama-3.2-1B layer (through the compile driver, src/compile.h) is
 * emitted at decode dims (B=1, S=1) for targets that differ only in the SM
 * count: the GEMV's split-K (KILN_SPLITK), the decode attention's split-KV
 * count (KILN_SPLITS) and the elementwise grid cap (8 CTAs per SM) follow
 * it. No target in the options is the sm_90a default, byte for byte; the
 * defaults are the documented numbers; a compile_only context and a tool
 * without a device hand codegen the default for their arch. CPU only. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codegen/cg.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_model.h"
#include "src/compile.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

/* The value of `#define NAME v` in the kernel's generated part; -1 if none. */
static long define_value(const cg_kernel *k, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "#define %s ", name);
    const char *p = strstr(k->generated, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

typedef struct emitted {
    cg_kernel *ks;
    int n;
    long splitk, splits; /* the largest in any GEMV / decode attention kernel */
    bool caps_follow;    /* every elementwise kernel's grid cap is 8 * SMs */
} emitted;

static bool emit(const ir_graph *g, const int64_t *dims, const cg_target *t, emitted *e)
{
    memset(e, 0, sizeof *e);
    cg_options o = {.dims = dims, .target = t};
    char err[1024];
    if (cg_emit_all_ex(g, &o, &e->ks, &e->n, err, sizeof err) != 0) {
        fprintf(stderr, "codegen: %s\n", err);
        return false;
    }
    int sms = t ? t->sm_count : 132;
    e->caps_follow = true;
    for (int i = 0; i < e->n; i++) {
        const cg_kernel *k = &e->ks[i];
        long sk = define_value(k, "KILN_SPLITK"), ss = define_value(k, "KILN_SPLITS");
        if (k->family == CG_FAMILY_GEMV && sk > e->splitk) e->splitk = sk;
        if (k->family == CG_FAMILY_ATTENTION_DECODE && ss > e->splits) e->splits = ss;
        if (k->family == CG_FAMILY_ELEMENTWISE && k->launch.grid[0].cap != 8 * (int64_t)sms) e->caps_follow = false;
    }
    return true;
}

static void test_defaults(void)
{
    cg_target t;
    cg_target_default(NULL, &t);
    CHECK(!strcmp(t.arch, "sm_90a") && t.sm_count == 132 && t.smem_per_block == 232448 && t.l2_bytes == 60ll << 20);
    cg_target_default("sm_90", &t);
    CHECK(!strcmp(t.arch, "sm_90") && t.sm_count == 132);
    cg_target_default("sm_80", &t);
    CHECK(t.sm_count == 108 && t.smem_per_block == 166912 && t.l2_bytes == 40ll << 20);
    cg_target_default("sm_120", &t);
    CHECK(!strcmp(t.arch, "sm_120") && t.sm_count == 132);
}

static void test_without_device(void)
{
    /* a compile_only context: the default for its arch */
    rt_ctx *ctx = NULL;
    char err[512];
    rt_ctx_config cc = {.arch = "sm_80", .compile_only = true, .no_cache = true};
    CHECK(rt_ctx_create(&ctx, &cc, err, sizeof err) == RT_OK);
    cg_target got, want;
    rt_ctx_target(ctx, &got);
    cg_target_default("sm_80", &want);
    CHECK(!memcmp(&got, &want, sizeof got));
    rt_ctx_free(ctx);
    /* a tool (kiln compile) on a machine without a GPU: the default */
    if (!rt_device_available(err, sizeof err)) {
        kc_tool_target("sm_90a", &got);
        cg_target_default("sm_90a", &want);
        CHECK(!memcmp(&got, &want, sizeof got));
    }
}

static void test_reacts_to_sm_count(void)
{
    kc_options o = {.name = KILN_SOURCE_DIR "/samples/llama3_1b_layer.kiln"};
    kc_unit *u = NULL;
    char err[2048];
    CHECK_MSG(kc_open(&o, stderr, &u, err, sizeof err) == RT_OK, "%s", err);
    if (!u) return;
    CHECK(kc_parse(u, err, sizeof err) == RT_OK && kc_fuse(u, err, sizeof err) == RT_OK);
    const ir_graph *g = kc_fused(u);
    if (!g) {
        kc_free(u);
        return;
    }
    int64_t dims[IR_MAX_SYMS];
    for (int i = 0; i < g->nsyms; i++) dims[i] = 1;
    int t_sym = ir_graph_find_sym(g, "T");
    if (t_sym >= 0) dims[t_sym] = 1024;

    cg_target def, few, many;
    cg_target_default("sm_90a", &def);
    few = many = def;
    few.sm_count = 1;
    many.sm_count = 4096;
    emitted none, e_def, e_few, e_many;
    CHECK(emit(g, dims, NULL, &none) && emit(g, dims, &def, &e_def) && emit(g, dims, &few, &e_few) &&
          emit(g, dims, &many, &e_many));
    /* no target: the sm_90a default, byte for byte */
    CHECK(none.n == e_def.n);
    for (int i = 0; i < none.n && i < e_def.n; i++) CHECK(!strcmp(none.ks[i].source, e_def.ks[i].source));
    /* split-K and split-KV grow with the SMs they have to fill */
    printf("split-K: %ld (1 SM), %ld (132), %ld (4096); split-KV: %ld, %ld, %ld\n", e_few.splitk, e_def.splitk,
           e_many.splitk, e_few.splits, e_def.splits, e_many.splits);
    CHECK(e_few.splitk == 1 && e_many.splitk > e_few.splitk);
    CHECK(e_few.splits == 1 && e_def.splits > e_few.splits);
    CHECK(none.caps_follow && e_def.caps_follow && e_few.caps_follow && e_many.caps_follow);
    cg_kernels_free(none.ks, none.n);
    cg_kernels_free(e_def.ks, e_def.n);
    cg_kernels_free(e_few.ks, e_few.n);
    cg_kernels_free(e_many.ks, e_many.n);
    kc_free(u);
}

int main(void)
{
    test_defaults();
    test_without_device();
    test_reacts_to_sm_count();
    return CHECK_DONE();
}
