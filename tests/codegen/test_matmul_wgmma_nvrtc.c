/* tests/codegen/test_matmul_wgmma_nvrtc.c — the Hopper matmul template
 * (codegen/kernels/matmul_wgmma.cuh) compiles with NVRTC for sm_90a, with the
 * hand-written generated part of tests/gpu/mm_src.h: cooperative and ping-pong
 * consumers, tiles 128x256 / 256x128 / 64x256 / 128x128 / 64x128 / 64x64, clusters of 1 and 2,
 * bf16 and f16, both test epilogues, from registers and through shared memory
 * and TMA stores, split-K, the decode-sized options (W early, evict-first, the
 * epilogue's operands early, in registers from a tile's start, the tile's end without a round
 * trip). For each: an empty NVRTC log, the kernel's
 * name in the cubin, ptxas -v reporting no stack frame and no spills, and the
 * PTX holding wgmma.mma_async (the asynchronous warpgroup MMA), the TMA copy
 * (cp.async.bulk.tensor), setmaxnreg and griddepcontrol (programmatic dependent
 * launch: wait and launch_dependents). Where `cuobjdump` runs (it needs
 * nvdisasm; $KILN_CUOBJDUMP names another one), the cubin's SASS must hold
 * HGMMA, the tensor-core instruction wgmma becomes; elsewhere that check is
 * skipped with a note. Needs no GPU and no driver. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "gpu/mm_src.h"
#include "ptxas_log.h"

#define WG(dt, epi, bm, bn, st, pp, cm) {MM_KIND_WGMMA, dt, 1, epi, bm, bn, 0, pp, cm, st, 0, 0, 0, 0, 0}
static const mm_cfg cfgs[] = {
    WG(MM_BF16, MM_EPI_STORE, 128, 256, 4, 0, 1),    WG(MM_BF16, MM_EPI_BIAS_RES, 128, 256, 4, 0, 2),
    WG(MM_BF16, MM_EPI_STORE, 256, 128, 4, 0, 2),    WG(MM_BF16, MM_EPI_STORE, 64, 256, 5, 1, 2),
    WG(MM_BF16, MM_EPI_BIAS_RES, 128, 128, 6, 1, 1), WG(MM_F16, MM_EPI_STORE, 128, 256, 3, 0, 1),
    /* the TMA-store epilogue (staged columns), split-K (factor) */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 128, 256, 0, 0, 1, 4, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 256, 0, 1, 1, 4, 128, 4, 0, 0, 0},
    {MM_KIND_WGMMA, MM_F16, 1, MM_EPI_STORE, 64, 256, 0, 1, 1, 5, 0, 3, 0, 0, 0},
    /* skinny M: the 64x128 tile with the residual staged, the 64x64 tile (12 stages) */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 128, 0, 1, 1, 8, 128, 2, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 0, 1, 1, 12, 64, 2, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 0, 1, 1, 12, 0, 1, 0, 0, 0},
    /* the decode-sized options in bk (W early, W evict-first, the epilogue's operands early, W into L2) */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 128, 15, 1, 1, 8, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 7, 1, 1, 12, 64, 2, 0, 0, 0},
    /* split-K in a cluster (last field): skinny tiles with the options, the folded norm, registers,
     * cooperative tiles */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 128, 7, 1, 1, 6, 128, 1, 0, 0, 2},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 3, 1, 1, 10, 64, 1, 0, 0, 4},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_STORE, 64, 128, 3, 1, 1, 6, 128, 1, 0, 1, 2},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 0, 1, 1, 10, 0, 1, 0, 1, 4},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 128, 128, 0, 0, 1, 4, 128, 1, 0, 0, 2},
    /* the epilogue's operands in registers from the tile's start (bk 16) and the tile's end without
     * a round trip (bk 32: the st.async exchange, the folded norm's sums too) */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 128, 51, 1, 1, 6, 128, 1, 0, 0, 2},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 51, 1, 1, 12, 64, 1, 0, 0, 2},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_STORE, 64, 128, 51, 1, 1, 6, 128, 1, 0, 1, 2},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 128, 51, 1, 1, 8, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 64, 35, 1, 1, 10, 0, 1, 0, 1, 4},
    /* the residual by TMA into the staging (bk 64): cooperative 128x256 (the 8B O and down), ping-pong
     * 128x128, f16 */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 128, 256, 64, 0, 1, 4, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 128, 128, 64, 1, 1, 5, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_F16, 1, MM_EPI_BIAS_RES, 128, 256, 64, 0, 1, 4, 64, 1, 0, 0, 0},
    /* ... with the later rounds' residual in registers (bk 192): cooperative 128x256 (one round of
     * 128 columns in registers) and 256x128 (two m64 blocks, 64 columns), f16 at 64 columns a round
     * (three rounds: too many for the registers, so all by TMA) */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 128, 256, 192, 0, 1, 4, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 256, 128, 192, 0, 1, 4, 64, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_F16, 1, MM_EPI_BIAS_RES, 128, 256, 192, 0, 1, 4, 64, 1, 0, 0, 0},
    /* ... ping-pong 128x128 at 64 columns a round (two m64 blocks, one later round: a GELU-type
     * epilogue's staging) */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 128, 128, 192, 1, 1, 5, 64, 1, 0, 0, 0},
    /* clusters of two along M (the W box multicast) with the TMA-store epilogue: ping-pong 128x128
     * (the plain store: with the bias + residual epilogue it spills 160 bytes), cooperative 128x256,
     * f16 256x128 */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_STORE, 128, 128, 0, 1, 2, 5, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_STORE, 128, 256, 0, 0, 2, 4, 128, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_F16, 1, MM_EPI_BIAS_RES, 256, 128, 0, 0, 2, 4, 64, 1, 0, 0, 0},
    /* the other widths: 48, 224 and 16 from registers, f16 192 through the TMA store, 32 under the
     * workspace's split, 112 under the cluster's */
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 48, 3, 1, 1, 12, 0, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_STORE, 64, 224, 0, 1, 1, 6, 0, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_F16, 1, MM_EPI_BIAS_RES, 64, 192, 0, 1, 1, 6, 64, 1, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 32, 0, 1, 1, 12, 0, 2, 0, 0, 0},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_STORE, 64, 112, 35, 1, 1, 6, 0, 1, 0, 0, 2},
    {MM_KIND_WGMMA, MM_BF16, 1, MM_EPI_BIAS_RES, 64, 16, 1, 1, 1, 12, 0, 1, 0, 0, 0},
};
enum { NCFG = (int)(sizeof cfgs / sizeof cfgs[0]) };

static int has_bytes(const void *p, size_t n, const char *s)
{
    const unsigned char *b = p;
    size_t l = strlen(s);
    for (size_t i = 0; i + l <= n; i++)
        if (memcmp(b + i, s, l) == 0) return 1;
    return 0;
}

/* HGMMA lines in the SASS of `code` by cuobjdump; -1 when cuobjdump does not run here. */
static int sass_hgmma(const rt_blob *code)
{
    char path[] = "/tmp/kiln_wgmma_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "wb");
    int ok = f && fwrite(code->data, 1, code->size, f) == code->size;
    if (f) fclose(f);
    int count = -1;
    if (ok) {
        const char *tool = getenv("KILN_CUOBJDUMP") ? getenv("KILN_CUOBJDUMP") : "cuobjdump";
        char cmd[1024], line[512];
        snprintf(cmd, sizeof cmd, "'%s' --dump-sass '%s' 2>/dev/null", tool, path);
        FILE *p = popen(cmd, "r");
        if (p) {
            int n = 0, lines = 0;
            while (fgets(line, sizeof line, p)) {
                lines++;
                if (strstr(line, "HGMMA")) n++;
            }
            if (pclose(p) == 0 && lines > 0) count = n;
        }
    }
    unlink(path);
    return count;
}

/* KILN_WGMMA_RES_REGS (bk bit 7) is on where matmul_wgmma.cuh's kwg_rr says: later rounds whose
 * columns, times the consumer's m64 blocks, are at most 128 */
static int rr_expected(const mm_cfg *c)
{
    const int mw = c->wm ? c->bm / 64 : c->bm / 128;
    return (c->bk & 128) && c->cols > 0 && c->bn > c->cols && mw * (c->bn - c->cols) <= 128;
}

/* Whether the PTX of c differs from that of the same configuration without bit 7 (both under the
 * kernel name `name`); -1 when either does not compile */
static int rr_changes_ptx(const mm_cfg *c, const char *name, const rt_blob *with)
{
    mm_cfg twin = *c;
    twin.bk &= ~128;
    char *src = mm_source(&twin, name);
    if (!src) return -1;
    rt_compile_opts o = {0};
    o.arch = "sm_90a";
    rt_compile_result r;
    const char *const nm[1] = {name};
    const char *const sr[1] = {src};
    rt_nvrtc_compile_many(1, nm, sr, &o, RT_TARGET_PTX, &r, 0, NULL, NULL);
    const int d = r.status != RT_OK ? -1 : r.code.size != with->size || memcmp(r.code.data, with->data, with->size) != 0;
    rt_compile_result_free(&r);
    free(src);
    return d;
}

int main(void)
{
    char *names[NCFG], *srcs[NCFG];
    for (int i = 0; i < NCFG; i++) {
        names[i] = malloc(32);
        CHECK(names[i] != NULL);
        snprintf(names[i], 32, "kiln_test_wgmma%d", i);
        srcs[i] = mm_source(&cfgs[i], names[i]);
        CHECK_MSG(srcs[i] != NULL, "cannot assemble unit %d (codegen/kernels missing?)", i);
        if (!srcs[i]) return CHECK_DONE();
    }
    static const char *const vopt[] = {"--ptxas-options=-v"};
    rt_compile_opts copts = {0}, popts = {0};
    copts.arch = popts.arch = "sm_90a";
    copts.extra = vopt;
    copts.nextra = 1;
    rt_compile_result cub[NCFG], ptx[NCFG];
    rt_nvrtc_compile_many(NCFG, (const char *const *)names, (const char *const *)srcs, &copts, RT_TARGET_CUBIN, cub,
                          0, NULL, NULL);
    rt_nvrtc_compile_many(NCFG, (const char *const *)names, (const char *const *)srcs, &popts, RT_TARGET_PTX, ptx, 0,
                          NULL, NULL);
    for (int i = 0; i < NCFG; i++) {
        char name[128];
        mm_cfg_name(&cfgs[i], name, sizeof name);
        const rt_compile_result *c = &cub[i], *p = &ptx[i];
        int ok = c->status == RT_OK && p->status == RT_OK, regs = -1;
        CHECK_MSG(c->status == RT_OK, "%s did not compile to a cubin: %s", name,
                  c->message ? c->message : rt_status_str(c->status));
        CHECK_MSG(p->status == RT_OK, "%s did not compile to PTX: %s", name,
                  p->message ? p->message : rt_status_str(p->status));
        if (ok) {
            CHECK_MSG(p->log && p->log[0] == 0, "%s: NVRTC log not empty:\n%s", name, p->log ? p->log : "(null)");
            CHECK_MSG(has_bytes(c->code.data, c->code.size, names[i]), "%s: cubin lacks kernel %s", name, names[i]);
            CHECK_MSG(c->log && ptxas_no_spills(c->log, names[i], &regs), "%s: ptxas reports a stack frame or spills:\n%s",
                      name, c->log ? c->log : "(null)");
            CHECK_MSG(c->log && !strstr(c->log, "warning"), "%s: ptxas warning (setmaxnreg ignored?):\n%s", name,
                      c->log);
            CHECK_MSG(has_bytes(p->code.data, p->code.size, "wgmma.mma_async"), "%s: no wgmma.mma_async in PTX", name);
            CHECK_MSG(has_bytes(p->code.data, p->code.size, "cp.async.bulk.tensor"), "%s: no TMA copy in PTX", name);
            CHECK_MSG(has_bytes(p->code.data, p->code.size, "setmaxnreg"), "%s: no setmaxnreg in PTX", name);
            CHECK_MSG(has_bytes(p->code.data, p->code.size, "griddepcontrol.wait") &&
                          has_bytes(p->code.data, p->code.size, "griddepcontrol.launch_dependents"),
                      "%s: no programmatic dependent launch (griddepcontrol) in PTX", name);
            if (cfgs[i].cols > 0)
                CHECK_MSG(has_bytes(p->code.data, p->code.size, "cp.async.bulk.tensor.3d.global.shared::cta"),
                          "%s: no TMA store in PTX", name);
            /* bit 7 changes the kernel exactly where the registers take the later rounds */
            if (cfgs[i].bk & 128)
                CHECK_MSG(rr_changes_ptx(&cfgs[i], names[i], &p->code) == rr_expected(&cfgs[i]),
                          "%s: KILN_WGMMA_RES_REGS %s the PTX", name,
                          rr_expected(&cfgs[i]) ? "does not change" : "changes");
            const int hg = sass_hgmma(&c->code);
            if (hg < 0) printf("note %s: cuobjdump did not run here; SASS not checked\n", name);
            else CHECK_MSG(hg > 0, "%s: no HGMMA in the cubin's SASS", name);
        }
        printf("%-4s %-40s %3d regs  cubin %6.0f ms  %zu bytes\n", ok ? "ok" : "FAIL", name, regs, c->ms, c->code.size);
        rt_compile_result_free(&cub[i]);
        rt_compile_result_free(&ptx[i]);
        free(names[i]);
        free(srcs[i]);
    }
    return CHECK_DONE();
}
