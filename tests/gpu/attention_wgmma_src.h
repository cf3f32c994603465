/* tests/gpu/attention_wgmma_src.h — builds attention_wgmma.cuh translation units for the
 * tests (tests/codegen/test_attention_wgmma_nvrtc.c, tests/gpu/test_gpu_attention_wgmma.c)
 * as codegen does: common.cuh, a hand-written generated part (constants, KilnArgs with the
 * KILN_ATT_VARLEN field cu_q, the slot table, the dynamic scheduler's counter `sched`), then
 * cg_family_templates(CG_FAMILY_ATTENTION_WGMMA). Header-only (static functions); templates
 * are read as tests/gpu/nvrtc_unit.h says; a `base` configuration reads them from
 * $KILN_BASE_SOURCE_DIR/codegen/kernels instead (another checkout: the kernel before a change,
 * timed in the same process). */
#ifndef KILN_TESTS_ATTENTION_WGMMA_SRC_H
#define KILN_TESTS_ATTENTION_WGMMA_SRC_H
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "gpu/nvrtc_unit.h"
#include "runtime/rt_tmap.h"

#define KNAME "kiln_test_k0_attention"

/* KilnArgs as the template reads it (every field 8 bytes), cu_q last (KILN_ATT_VARLEN). */
typedef struct wa_args {
    const void *q;
    void *k, *v, *o;
    const int *pos;
    const void *k_new, *v_new;
    long long q_sb, q_ss, q_sh, kn_sb, kn_ss, kn_sh, vn_sb, vn_ss, vn_sh;
    long long B, S, T, H, KV;
    const int *cu_q;
    const int *slot; /* the slot table (NULL: row b is cache row b) */
    int *sched;      /* KILN_ATT_SCHED 1: the tile counter (zero before a launch, left zero) */
} wa_args;
static const char wa_struct[] = "struct KilnArgs {\n"
                                "    const kiln_t *q;\n"
                                "    kiln_t *k, *v, *o;\n"
                                "    const int *pos;\n"
                                "    const kiln_t *k_new, *v_new;\n"
                                "    long long q_sb, q_ss, q_sh, kn_sb, kn_ss, kn_sh, vn_sb, vn_ss, vn_sh;\n"
                                "    long long B, S, T, H, KV;\n"
                                "    const int *cu_q;\n"
                                "    const int *slot;\n"
                                "    int *sched;\n"
                                "};\n";
typedef struct wa_param {
    rt_tmap q, k, v;
    wa_args p;
} wa_param;

/* extra: more #define lines (the template's other knobs: KILN_ATT_ORDER, _QPF, _FREE, _TH,
 * _SCHED, _L2SEC, _HINT), NULL for none; qbuf: KILN_ATT_QBUF (0: the template's default, 1);
 * base: the templates of $KILN_BASE_SOURCE_DIR (extra and qbuf unused). */
typedef struct wa_cfg {
    int bf16, hd, causal, bk, stages, window, varlen;
    double softcap;
    const char *extra;
    int qbuf, base;
} wa_cfg;

static inline int cfg_eq(const wa_cfg *a, const wa_cfg *b)
{
    const char *x = a->extra ? a->extra : "", *y = b->extra ? b->extra : "";
    return a->bf16 == b->bf16 && a->hd == b->hd && a->causal == b->causal && a->bk == b->bk &&
           a->stages == b->stages && a->window == b->window && a->varlen == b->varlen && a->softcap == b->softcap &&
           !strcmp(x, y) && (a->qbuf ? a->qbuf : 1) == (b->qbuf ? b->qbuf : 1) && a->base == b->base;
}
/* KILN_ATT_SMEM of attention_wgmma.cuh (base: the formula before KILN_ATT_QBUF and the
 * scheduler's ring, which asks no more) */
static inline size_t cfg_smem(const wa_cfg *c)
{
    size_t na = (size_t)(c->hd + 63) / 64, qb = c->qbuf > 1 ? 2 : 1, st = (size_t)c->stages;
    size_t tiles = 2 * qb * na * 64 * 128 + 2 * st * na * (size_t)c->bk * 128 + 1024;
    return c->base ? tiles + (4 + 4 * st) * 8 : tiles + (4 * qb + 4 * st + 4) * 8 + 16;
}

static inline char *cfg_source(const wa_cfg *c)
{
    const char *const *names = cg_family_templates(CG_FAMILY_ATTENTION_WGMMA);
    char *common = nu_read_kernel_file("common.cuh");
    if (!common) return NULL;
    nu_buf b = {0};
    nu_printf(&b, "%s\n", common);
    free(common);
    nu_printf(&b, "#define KILN_KERNEL " KNAME "\n#define KILN_T %s\ntypedef KILN_T kiln_t;\n",
              c->bf16 ? "__nv_bfloat16" : "__half");
    nu_printf(&b, "#define KILN_HD %d\n#define KILN_SCALE %.9ef\n#define KILN_CAUSAL %d\n", c->hd, 1.0 / sqrt((double)c->hd),
              c->causal);
    nu_printf(&b, "#define KILN_ROPE 0\n#define KILN_APPEND 0\n#define KILN_WGMMA_NO_KERNEL 1\n#define KILN_WGMMA_F16 %d\n",
              c->bf16 ? 0 : 1);
    nu_printf(&b, "#define KILN_ATT_BK %d\n#define KILN_ATT_STAGES %d\n", c->bk, c->stages);
    if (!c->base && c->qbuf) nu_printf(&b, "#define KILN_ATT_QBUF %d\n", c->qbuf);
    if (!c->base && c->extra) nu_printf(&b, "%s\n", c->extra);
    if (c->window) nu_printf(&b, "#define KILN_ATT_WINDOW %d\n", c->window);
    if (c->softcap > 0) nu_printf(&b, "#define KILN_ATT_SOFTCAP %.9g\n", c->softcap);
    if (c->varlen) nu_printf(&b, "#define KILN_ATT_VARLEN 1\n");
    nu_printf(&b, "%s\n", wa_struct);
    for (int i = 0; names[i]; i++) {
        char *t = c->base ? nu_read_kernel_file_in(getenv("KILN_BASE_SOURCE_DIR"), names[i]) : nu_read_kernel_file(names[i]);
        if (!t) {
            free(nu_take(&b));
            return NULL;
        }
        nu_printf(&b, "%s\n", t);
        free(t);
    }
    return nu_take(&b);
}

#endif
