/* tests/codegen/test_attention_wgmma_nvrtc.c — attention_wgmma.cuh compiles with NVRTC for
 * sm_90a (hand-written generated part, tests/gpu/attention_wgmma_src.h): bf16 and f16, head
 * dims 16..256, causal and not, key tiles 64/128, 3 stages, the window / soft-cap /
 * varlen hooks, and the template's knobs (load order, Q look-ahead, rescale threshold,
 * dynamic scheduler with L2 sections, cache hints). ptxas -v reports no stack frame and no spills for every unit, and no wgmma
 * "Potential Performance Loss" (wgmma serialized: C7514, C7520, ...) for any of them; the PTX holds
 * wgmma.mma_async, cp.async.bulk.tensor and setmaxnreg. Needs no GPU (NVRTC only). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu/attention_wgmma_src.h"
#include "runtime/rt_nvrtc.h"

static const wa_cfg cfgs[] = {
    {1, 128, 1, 128, 2, 0, 0, 0.0, NULL, 0, 0}, {1, 128, 0, 128, 2, 0, 0, 0.0, NULL, 0, 0}, {0, 128, 1, 128, 2, 0, 0, 0.0, NULL, 0, 0},
    {1, 64, 1, 128, 2, 0, 0, 0.0, NULL, 0, 0},  {1, 80, 1, 128, 2, 0, 0, 0.0, NULL, 0, 0},  {1, 96, 1, 128, 2, 0, 0, 0.0, NULL, 0, 0},
    {1, 256, 1, 64, 2, 0, 0, 0.0, NULL, 0, 0},  {0, 256, 0, 64, 2, 0, 0, 0.0, NULL, 0, 0},  {1, 16, 1, 128, 2, 0, 0, 0.0, NULL, 0, 0},
    {1, 112, 1, 64, 3, 0, 0, 0.0, NULL, 0, 0},  {1, 192, 1, 64, 2, 0, 0, 0.0, NULL, 0, 0},  {1, 128, 1, 64, 3, 0, 0, 0.0, NULL, 0, 0},
    {1, 128, 1, 128, 2, 100, 0, 0.0, NULL, 0, 0}, {1, 64, 0, 128, 2, 0, 0, 20.0, NULL, 0, 0}, {1, 128, 1, 128, 2, 0, 1, 0.0, NULL, 0, 0},
    /* the template's knobs (old load order, next Q in L2 or a second buffer, free first/last
     * products, the rescale threshold, the dynamic scheduler with L2 sections, cache hints) */
    {1, 128, 1, 128, 2, 0, 0, 0.0, "#define KILN_ATT_ORDER 0", 0, 0},
    {1, 128, 1, 128, 2, 0, 0, 0.0, "#define KILN_ATT_QPF 1\n#define KILN_ATT_FREE 1", 0, 0},
    {1, 128, 1, 128, 2, 0, 0, 0.0, "#define KILN_ATT_TH 8", 2, 0},
    {1, 128, 1, 128, 3, 0, 1, 0.0, "#define KILN_ATT_SCHED 1\n#define KILN_ATT_L2SEC 33554432\n#define KILN_ATT_HINT 1", 0, 0},
    {0, 256, 1, 64, 2, 0, 0, 0.0, "#define KILN_ATT_SCHED 1\n#define KILN_ATT_TH 8\n#define KILN_ATT_L2SEC 31457280ll", 0, 0},
};
#define N ((int)(sizeof cfgs / sizeof cfgs[0]))

int main(void)
{
    char *names[N], *srcs[N];
    rt_compile_result res[N];
    memset(res, 0, sizeof res);
    for (int i = 0; i < N; i++) {
        names[i] = malloc(32);
        snprintf(names[i], 32, "attw_%d", i);
        srcs[i] = cfg_source(&cfgs[i]);
        CHECK(srcs[i] != NULL);
        if (!srcs[i]) return CHECK_DONE();
    }
    static const char *const vopt[] = {"--ptxas-options=-v"};
    rt_compile_opts opts = {.arch = "sm_90a", .extra = vopt, .nextra = 1};
    rt_nvrtc_compile_many(N, (const char *const *)names, (const char *const *)srcs, &opts, RT_TARGET_CUBIN, res, 0, NULL,
                          NULL);
    for (int i = 0; i < N; i++) {
        const wa_cfg *c = &cfgs[i];
        const char *lg = res[i].log ? res[i].log : "";
        CHECK_MSG(res[i].status == RT_OK, "hd%d bk%d: %s\n%s", c->hd, c->bk, res[i].message ? res[i].message : "", lg);
        CHECK_MSG(strstr(lg, " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") != NULL,
                  "hd%d bk%d st%d: local memory:\n%s", c->hd, c->bk, c->stages, lg);
        CHECK_MSG(strstr(lg, "Performance Loss") == NULL, "hd%d bk%d: wgmma serialized:\n%s", c->hd, c->bk, lg);
        if (getenv("KILN_PTXAS_LOG")) printf("--- %d: hd%d bk%d st%d %s\n%s\n", i, c->hd, c->bk, c->stages, c->extra ? c->extra : "", lg);
        rt_compile_result_free(&res[i]);
        free(names[i]);
        free(srcs[i]);
    }
    /* the PTX of the first configuration */
    rt_compile_result pr;
    memset(&pr, 0, sizeof pr);
    char *src = cfg_source(&cfgs[0]);
    const char *nm = "attw_ptx";
    rt_compile_opts po = {.arch = "sm_90a"};
    rt_nvrtc_compile_many(1, &nm, (const char *const *)&src, &po, RT_TARGET_PTX, &pr, 1, NULL, NULL);
    CHECK(pr.status == RT_OK);
    const char *ptx = pr.code.data ? (const char *)pr.code.data : "";
    CHECK(strstr(ptx, "wgmma.mma_async") != NULL);
    CHECK(strstr(ptx, "cp.async.bulk.tensor.3d") != NULL);
    CHECK(strstr(ptx, "setmaxnreg") != NULL);
    rt_compile_result_free(&pr);
    free(src);
    return CHECK_DONE();
}
