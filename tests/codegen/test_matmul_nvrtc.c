/* tests/codegen/test_matmul_nvrtc.c — the matmul templates (matmul_mma.cuh,
 * gemv.cuh, gemv_mma.cuh) compile with NVRTC for sm_90a, with a hand-written generated part
 * (tests/gpu/mm_src.h), with an empty log: bf16, f16 and f32, both B layouts,
 * both test epilogues, several tile configurations (matmul_mma) and column /
 * split-K / row-block configurations (gemv), and tile / warp / unroll / split-K
 * configurations of the tensor-core GEMV (gemv_mma). Each cubin must hold the kernel's
 * name; the GEMVs also with the folded RMSNorm. A few configurations are compiled again with ptxas -v: no stack frame,
 * no spills. Needs no GPU and no driver (NVRTC only). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gpu/mm_src.h"

static const mm_cfg cfgs[] = {
    /* kind dt nk epi  bm bn bk wm wn st  cols sk maxm norm */
    {MM_KIND_MMA, MM_BF16, 1, MM_EPI_STORE, 128, 128, 32, 2, 2, 4, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_BF16, 0, MM_EPI_BIAS_RES, 128, 128, 32, 2, 2, 4, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 32, 2, 2, 3, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_BF16, 0, MM_EPI_STORE, 128, 256, 32, 2, 4, 3, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_BF16, 1, MM_EPI_STORE, 128, 128, 64, 2, 4, 2, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_F16, 1, MM_EPI_STORE, 128, 64, 64, 2, 2, 3, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_F16, 0, MM_EPI_BIAS_RES, 64, 128, 32, 2, 2, 2, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_F32, 1, MM_EPI_STORE, 64, 64, 16, 2, 2, 1, 0, 0, 0, 0, 0},
    {MM_KIND_MMA, MM_F32, 0, MM_EPI_BIAS_RES, 64, 128, 32, 2, 2, 1, 0, 0, 0, 0, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 8, 1, 1, 0, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 0, 0, 0, 8, 4, 16, 0, 0},
    {MM_KIND_GEMV, MM_BF16, 0, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 8, 1, 4, 0, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 16, 2, 2, 0, 0},
    {MM_KIND_GEMV, MM_F16, 1, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 4, 3, 4, 0, 0},
    {MM_KIND_GEMV, MM_F32, 1, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 4, 2, 4, 0, 0},
    {MM_KIND_GEMV, MM_F32, 0, MM_EPI_BIAS_RES, 0, 0, 0, 0, 0, 0, 8, 1, 16, 0, 0},
    /* the folded RMSNorm (KILN_GEMV_NORM) */
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 8, 1, 1, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 0, 0, 0, 8, 4, 16, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 16, 2, 1, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 0, MM_EPI_STORE, 0, 0, 0, 0, 0, 0, 8, 3, 4, 1, 0},
    /* the tensor-core GEMV (gemv_mma.cuh; mm_src.h: nt in maxm, mt in cols, warps in wm, unroll
     * in stages), with and without the folded norm, split-K on and off */
    {MM_KIND_GMMA, MM_BF16, 1, MM_EPI_STORE, 0, 0, 0, 8, 0, 4, 1, 4, 4, 0, 0},
    {MM_KIND_GMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 8, 0, 2, 1, 1, 8, 1, 0},
    {MM_KIND_GMMA, MM_F16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 4, 0, 2, 2, 3, 3, 1, 0},
    {MM_KIND_GMMA, MM_BF16, 1, MM_EPI_STORE, 0, 0, 0, 16, 0, 2, 1, 8, 4, 1, 0},
    {MM_KIND_GMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 8, 0, 4, 2, 2, 4, 0, 0},
    /* the widths gemv_choose picks besides 8 and 8 at two rows, at two CTAs per SM
     * (KILN_GEMV_MINB 2, registers capped at 128: no spills), the norm on and a residual
     * epilogue, with the column-block pipelining; unroll 2 (one CTA per SM); no pipelining
     * (mm_src.h: wm = KILN_GEMV_MINB, wn 1 = KILN_GEMV_PIPE 0, stages = KILN_GEMV_UNROLL) */
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 0, 0, 6, 1, 1, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 0, 0, 4, 1, 2, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 0, 0, 8, 1, 2, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 0, 0, 6, 2, 2, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 1, 0, 2, 8, 1, 1, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 1, 0, 8, 1, 2, 1, 0},
    /* the deferred reduction (KILN_GEMV_DEFER, on by default above) at 10 and 12 columns, which fit
     * two CTAs per SM with it (KILN_CG_GEMV_WIDE), and the general path forced (mm_src.h: bn -1) */
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 0, 0, 10, 1, 1, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 0, 0, 12, 1, 1, 1, 0},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, -1, 0, 2, 0, 0, 8, 1, 2, 1, 0},
    /* the weights through a ring of slots in shared memory (KILN_GEMV_RING; mm_src.h: in ck) at two
     * CTAs per SM: 8 columns with the norm, 6 with the residual at two rows, 3 and 2 slots */
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_STORE, 0, 0, 0, 2, 0, 0, 8, 1, 1, 1, 3},
    {MM_KIND_GEMV, MM_BF16, 1, MM_EPI_BIAS_RES, 0, 0, 0, 2, 0, 0, 6, 1, 2, 0, 2},
};
enum { NCFG = (int)(sizeof cfgs / sizeof cfgs[0]) };

/* Checked again with ptxas -v (indices into cfgs). */
static const int vcfgs[] = {0, 3, 9, 10, 16, 17, 18, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35};
enum { NV = (int)(sizeof vcfgs / sizeof vcfgs[0]) };

static int has_bytes(const unsigned char *p, size_t n, const char *s)
{
    size_t l = strlen(s);
    for (size_t i = 0; i + l <= n; i++)
        if (memcmp(p + i, s, l) == 0) return 1;
    return 0;
}

int main(void)
{
    rt_compile_result out[NCFG], vout[NV];
    mm_compile_all(cfgs, NCFG, 0, out);
    for (int i = 0; i < NCFG; i++) {
        char name[128], kname[32];
        mm_cfg_name(&cfgs[i], name, sizeof name);
        snprintf(kname, sizeof kname, "kiln_test_mm%d", i);
        const rt_compile_result *r = &out[i];
        int ok = r->status == RT_OK;
        CHECK_MSG(ok, "%s did not compile: %s", name, r->message ? r->message : rt_status_str(r->status));
        if (ok) {
            CHECK_MSG(r->log && r->log[0] == 0, "%s: NVRTC log not empty:\n%s", name, r->log ? r->log : "(null)");
            CHECK_MSG(r->code.size > 0 && has_bytes(r->code.data, r->code.size, kname),
                      "%s: cubin lacks kernel %s", name, kname);
        }
        printf("%-4s %-44s %6.0f ms  %zu bytes\n", ok ? "ok" : "FAIL", name, r->ms, r->code.size);
    }

    mm_cfg vc[NV];
    for (int i = 0; i < NV; i++) vc[i] = cfgs[vcfgs[i]];
    mm_compile_all(vc, NV, 1, vout);
    for (int i = 0; i < NV; i++) {
        char name[128];
        mm_cfg_name(&vc[i], name, sizeof name);
        const rt_compile_result *r = &vout[i];
        CHECK_MSG(r->status == RT_OK, "%s (ptxas -v) did not compile: %s", name,
                  r->message ? r->message : rt_status_str(r->status));
        if (r->status != RT_OK || !r->log) continue;
        int regs = -1, frame = -1, st = -1, ld = -1;
        const char *u = strstr(r->log, "Used ");
        if (u) sscanf(u, "Used %d registers", &regs);
        const char *f = strstr(r->log, "bytes stack frame");
        if (f) {
            /* "ptxas . N bytes stack frame, S bytes spill stores, L bytes spill loads" */
            const char *num = f;
            while (num > r->log && num[-1] == ' ') num--;
            while (num > r->log && num[-1] >= '0' && num[-1] <= '9') num--;
            sscanf(num, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &frame, &st, &ld);
        }
        CHECK_MSG(frame == 0 && st == 0 && ld == 0, "%s: local memory (stack %d, spill stores %d, loads %d):\n%s",
                  name, frame, st, ld, r->log);
        printf("%-4s %-44s %d registers, stack %d, spills %d/%d\n", frame == 0 && st == 0 && ld == 0 ? "ok" : "FAIL",
               name, regs, frame, st, ld);
    }
    for (int i = 0; i < NCFG; i++) rt_compile_result_free(&out[i]);
    for (int i = 0; i < NV; i++) rt_compile_result_free(&vout[i]);
    return CHECK_DONE();
}
