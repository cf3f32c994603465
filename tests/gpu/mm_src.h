/* tests/gpu/mm_src.h — builds matmul translation units for the tests
 * (tests/codegen/test_matmul_nvrtc.c, tests/codegen/test_matmul_wgmma_nvrtc.c,
 * tests/gpu/test_gpu_matmul.c) the way codegen does
 * (codegen/kernels/CONTRACT.md): common.cuh, a hand-written generated part
 * (constants, KilnArgs, kiln_epilogue2), then the template (matmul_mma.cuh,
 * gemv.cuh, gemv.cuh + gemv_mma.cuh, or matmul_wgmma.cuh); compiled with rt_nvrtc to
 * sm_90a cubins.
 *
 * Header-only (static functions); include once per test. Templates are read
 * as tests/gpu/nvrtc_unit.h says. */
#ifndef KILN_TESTS_MM_SRC_H
#define KILN_TESTS_MM_SRC_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/nvrtc_unit.h"
#include "runtime/rt_nvrtc.h"

enum { MM_BF16, MM_F16, MM_F32 };
enum { MM_KIND_MMA, MM_KIND_GEMV, MM_KIND_WGMMA, MM_KIND_GMMA };
enum { MM_EPI_STORE, MM_EPI_BIAS_RES };

/* KilnArgs as the test's generated part declares it: every field 8 bytes. */
typedef struct mm_args {
    const void *a;
    const void *w;
    void *out;
    const void *bias; /* [N] (bias+residual epilogue) */
    const void *res;  /* like out (bias+residual epilogue) */
    float *ws;        /* gemv split-K workspace */
    int *sem;         /* gemv split-K counters */
    long long sa, sw, lda, ldw, M, N, K, batch, so, ldo;
} mm_args;

static const char mm_struct_text[] =
    "struct KilnArgs {\n"
    "    const kiln_t *a;\n"
    "    const kiln_t *w;\n"
    "    kiln_t *out;\n"
    "    const kiln_t *bias;\n"
    "    const kiln_t *res;\n"
    "    float *ws;\n"
    "    int *sem;\n"
    "    long long sa, sw, lda, ldw, M, N, K, batch, so, ldo;\n"
    "};\n";

/* The two epilogues: a plain store, and out = acc + bias[n] + res[b][m][n]. */
static const char mm_epi_store_text[] =
    "__device__ __forceinline__ void kiln_epilogue2(const KilnArgs &p, long long b, long long m,\n"
    "                                               long long n, float v0, float v1, bool has1)\n"
    "{\n"
    "    kiln_t *o = p.out + b * p.so + m * p.ldo + n;\n"
    "    kiln_st(o, v0);\n"
    "    if (has1) kiln_st(o + 1, v1);\n"
    "}\n";
/* matmul_wgmma.cuh's value hook (the TMA-store epilogue): the same values. */
static const char mm_val_store_text[] =
    "__device__ __forceinline__ float2 kiln_epilogue_val(const KilnArgs &p, long long b, long long m,\n"
    "                                                   long long n, float v0, float v1, bool has1)\n"
    "{\n"
    "    (void)p; (void)b; (void)m; (void)n; (void)has1;\n"
    "    return make_float2(v0, v1);\n"
    "}\n";
static const char mm_val_bias_res_text[] =
    "__device__ __forceinline__ float2 kiln_epilogue_val(const KilnArgs &p, long long b, long long m,\n"
    "                                                   long long n, float v0, float v1, bool has1)\n"
    "{\n"
    "    const long long i = b * p.so + m * p.ldo + n;\n"
    "    v0 += kiln_ld(p.bias + n) + kiln_ld(p.res + i);\n"
    "    if (has1) v1 += kiln_ld(p.bias + n + 1) + kiln_ld(p.res + i + 1);\n"
    "    return make_float2(v0, v1);\n"
    "}\n";
/* ... its warm-up hook (matmul_wgmma.cuh KILN_WGMMA_EPI_EARLY): the same loads as L2 prefetches */
static const char mm_warm_bias_res_text[] =
    "#define KILN_HAS_EPILOGUE_WARM 1\n"
    "__device__ __forceinline__ float2 kiln_epilogue_warm(const KilnArgs &p, long long b, long long m,\n"
    "                                                    long long n, float v0, float v1, bool has1)\n"
    "{\n"
    "    const long long i = b * p.so + m * p.ldo + n;\n"
    "    v0 += kiln_ld_warm(p.bias + n) + kiln_ld_warm(p.res + i);\n"
    "    if (has1) v1 += kiln_ld_warm(p.bias + n + 1) + kiln_ld_warm(p.res + i + 1);\n"
    "    return make_float2(v0, v1);\n"
    "}\n";
/* ... its preloading pair (matmul_wgmma.cuh KILN_WGMMA_EPI_EARLY 2): the residual loaded at the
 * tile's start (2 floats per call), the bias at the end (a hook may still load there) */
static const char mm_pre_bias_res_text[] =
    "#define KILN_HAS_EPILOGUE_PRE 1\n"
    "#define KILN_EPI_NPRE 2\n"
    "__device__ __forceinline__ float2 kiln_epilogue_pre(const KilnArgs &p, long long b, long long m, long long n,\n"
    "                                                   float v0, float v1, bool has1, float (&pre)[KILN_EPI_NPRE])\n"
    "{\n"
    "    const long long i = b * p.so + m * p.ldo + n;\n"
    "    pre[0] = kiln_ld(p.res + i);\n"
    "    if (has1) pre[1] = kiln_ld(p.res + i + 1);\n"
    "    return make_float2(v0, v1);\n"
    "}\n"
    "__device__ __forceinline__ float2 kiln_epilogue_post(const KilnArgs &p, long long b, long long m, long long n,\n"
    "                                                    float v0, float v1, bool has1, const float (&pre)[KILN_EPI_NPRE])\n"
    "{\n"
    "    (void)b; (void)m;\n"
    "    v0 += kiln_ld(p.bias + n) + pre[0];\n"
    "    if (has1) v1 += kiln_ld(p.bias + n + 1) + pre[1];\n"
    "    return make_float2(v0, v1);\n"
    "}\n";
/* ... and the residual's address at the output's index (matmul_wgmma.cuh KILN_WGMMA_RES_REGS) */
static const char mm_res_at_text[] =
    "__device__ __forceinline__ const void *kiln_res_at(const KilnArgs &p, long long b, long long m, long long n)\n"
    "{\n"
    "    return p.res + (b * p.so + m * p.ldo + n);\n"
    "}\n";
static const char mm_epi_bias_res_text[] =
    "__device__ __forceinline__ void kiln_epilogue2(const KilnArgs &p, long long b, long long m,\n"
    "                                               long long n, float v0, float v1, bool has1)\n"
    "{\n"
    "    const long long i = b * p.so + m * p.ldo + n;\n"
    "    kiln_st(p.out + i, v0 + kiln_ld(p.bias + n) + kiln_ld(p.res + i));\n"
    "    if (has1) kiln_st(p.out + i + 1, v1 + kiln_ld(p.bias + n + 1) + kiln_ld(p.res + i + 1));\n"
    "}\n";

typedef struct mm_cfg {
    int kind;  /* MM_KIND_* */
    int dt;    /* MM_BF16 / MM_F16 / MM_F32 */
    int nk;    /* KILN_B_NK */
    int epi;   /* MM_EPI_* */
    /* matmul_mma; matmul_wgmma uses bm, bn, stages, and wm = ping-pong
     * consumers (0/1), wn = CTAs per cluster along M (1/2) */
    int bm, bn, bk, wm, wn, stages;
    /* gemv (bm > 0: at most bm CTAs along N); matmul_wgmma: cols = output columns staged by the TMA-store
     * epilogue (0: the epilogue from registers), splitk = split-K factor */
    int cols, splitk, maxm;
    int norm; /* gemv, gemv_mma: KILN_GEMV_NORM; wgmma, mma: KILN_MATMUL_NORM (A is x; the result
               * scaled by 1/rms of its row) */
    /* matmul_wgmma keeps its decode-sized options in bk: bit 0 KILN_WGMMA_W_EARLY, bit 1
     * KILN_WGMMA_W_EVICT_FIRST, bit 2 KILN_WGMMA_EPI_EARLY (with the bias + residual epilogue: its
     * warm-up hook), bit 3 KILN_WGMMA_W_L2 at two rings of K steps, bit 4 KILN_WGMMA_EPI_EARLY 2
     * (with the bias + residual epilogue: its preloading pair), bit 5 KILN_WGMMA_TAIL, bit 6
     * KILN_WGMMA_RES_TMA (the bias + residual epilogue: the residual by TMA into the staging, its
     * map after the output's; the preloading pair's kiln_epilogue_post adds it), bit 7
     * KILN_WGMMA_RES_REGS (with bit 6: the later rounds' residual in registers, through kiln_res_at) */
    /* gemv_mma (MM_KIND_GMMA) keeps KILN_GMMA_NT in maxm, KILN_GMMA_MT in cols, KILN_GMMA_WARPS
     * in wm, KILN_GMMA_UNROLL in stages, the grid cap along N in bm (0: none), and splitk */
    /* gemv also (0 = the template's default): stages = KILN_GEMV_UNROLL, wm = KILN_GEMV_MINB
     * (CTAs per SM), wn 1 = KILN_GEMV_PIPE 0 (no column-block pipelining), bn = KILN_GEMV_DEFER
     * (-1: 0, the CTA-wide reduction after every column block), ck = KILN_GEMV_RING (0: off) */
    int ck; /* matmul_wgmma: KILN_WGMMA_CLUSTER_K (split-K in a cluster of ck CTAs along y; 0, 1: none) */
} mm_cfg;

static inline const char *mm_dt_name(int dt)
{
    return dt == MM_BF16 ? "bf16" : dt == MM_F16 ? "f16" : "f32";
}
static inline const char *mm_dt_ctype(int dt)
{
    return dt == MM_BF16 ? "__nv_bfloat16" : dt == MM_F16 ? "__half" : "float";
}
static inline size_t mm_dt_size(int dt) { return dt == MM_F32 ? 4 : 2; }

static inline void mm_cfg_name(const mm_cfg *c, char *buf, size_t n)
{
    if (c->kind == MM_KIND_WGMMA)
        snprintf(buf, n, "wgmma_%s_%s_%s_%dx%d_s%d%s_c%d_tma%d_sk%d%s%.0d%s%.0d%s", mm_dt_name(c->dt), c->nk ? "nk" : "kn",
                 c->epi ? "biasres" : "store", c->bm, c->bn, c->stages, c->wm ? "_pp" : "", c->wn, c->cols,
                 c->splitk > 1 ? c->splitk : 1, c->ck > 1 ? "_ck" : "", c->ck > 1 ? c->ck : 0, c->bk ? "_o" : "", c->bk,
                 c->norm ? "_norm" : "");
    else if (c->kind == MM_KIND_GMMA)
        snprintf(buf, n, "gmma_%s_%s_nt%d_mt%d_w%d_u%d_sk%d%s%s%.0d", mm_dt_name(c->dt),
                 c->epi ? "biasres" : "store", c->maxm, c->cols, c->wm, c->stages, c->splitk, c->norm ? "_norm" : "",
                 c->bm ? "_grid" : "", c->bm);
    else if (c->kind == MM_KIND_MMA)
        snprintf(buf, n, "mma_%s_%s_%s_%dx%dx%d_w%dx%d_s%d%s", mm_dt_name(c->dt), c->nk ? "nk" : "kn",
                 c->epi ? "biasres" : "store", c->bm, c->bn, c->bk, c->wm, c->wn, c->stages, c->norm ? "_norm" : "");
    else
        snprintf(buf, n, "gemv_%s_%s_%s_c%d_sk%d_m%d%s%s%.0d%s%.0d%s%.0d%s%s%.0d", mm_dt_name(c->dt), c->nk ? "nk" : "kn",
                 c->epi ? "biasres" : "store", c->cols, c->splitk, c->maxm, c->norm ? "_norm" : "",
                 c->bm ? "_grid" : "", c->bm, c->stages ? "_u" : "", c->stages, c->wm ? "_minb" : "", c->wm,
                 c->wn ? "_nopipe" : "", c->bn < 0 ? "_dfr0" : c->bn ? "_dfr" : "", c->bn > 0 ? c->bn : 0);
    if (c->kind == MM_KIND_GEMV && c->ck > 0) {
        size_t l = strlen(buf);
        snprintf(buf + l, n > l ? n - l : 0, "_ring%d", c->ck);
    }
}

/* Launch shape per CONTRACT.md (grid x, y, z; block; dynamic shared memory).
 * mm_grid is for matmul_mma and gemv: matmul_wgmma's persistent grid depends
 * on how many CTAs fit (tests/gpu/test_gpu_matmul.c launch_cfg). */
static inline int mm_threads(const mm_cfg *c)
{
    return c->kind == MM_KIND_MMA ? 32 * c->wm * c->wn : c->kind == MM_KIND_WGMMA ? 384 : c->kind == MM_KIND_GMMA ? 32 * c->wm : 256;
}
/* gemv_mma.cuh's dynamic shared memory for K (its gmma_smem_bytes) */
static inline size_t mm_gmma_smem(const mm_cfg *c, long long K)
{
    const long long kper = ((K + c->splitk - 1) / c->splitk + 31) / 32 * 32;
    return (size_t)(8 * c->maxm) * (size_t)(((kper + 63) / 64 * 64 + 32) * 2 + 4);
}
/* gemv_mma.cuh's tiles of 16*MT columns (its split-K counters) */
static inline long long mm_gmma_tiles(const mm_cfg *c, long long N) { return (N + 16 * c->cols - 1) / (16 * c->cols); }
static inline size_t mm_smem_bytes(const mm_cfg *c)
{
    if (c->kind == MM_KIND_WGMMA) /* matmul_wgmma.cuh KWG_SMEM_TOTAL + KWG_SMEM_RED + KWG_SMEM_RES */
        return (size_t)c->stages * (size_t)(c->bm + c->bn) * 64 * 2 + 1024 + (size_t)c->stages * 16 + 32 +
               ((c->bk & 64) ? 16 : 0) +
               (size_t)(c->wm ? 2 : 1) * (size_t)c->bm * (size_t)c->cols * 2 +
               (c->ck > 1 ? (size_t)(c->ck - 1) * (size_t)(c->bm / 64) * 128 * (size_t)(c->bn / 8 + (c->norm ? 1 : 0)) * 16 + 32
                          : 0);
    if (c->kind == MM_KIND_GEMV) /* gemv.cuh KILN_GEMV_RING: ring slots of 16 bytes per thread and column */
        return c->ck > 0 ? (size_t)c->ck * (size_t)c->cols * 256 * 16 : 0;
    if (c->kind != MM_KIND_MMA) return 0;
    if (c->dt == MM_F32) return (size_t)(c->bk * (c->bm + 4) + c->bk * (c->bn + 4)) * 4;
    size_t b = c->nk ? (size_t)c->bn * (c->bk + 8) : (size_t)c->bk * (c->bn + 8);
    return (size_t)c->stages * ((size_t)c->bm * (c->bk + 8) + b) * 2;
}
static inline void mm_grid(const mm_cfg *c, long long M, long long N, long long batch, unsigned g[3])
{
    if (c->kind == MM_KIND_MMA) {
        g[0] = (unsigned)((N + c->bn - 1) / c->bn);
        g[1] = (unsigned)((M + c->bm - 1) / c->bm);
    } else if (c->kind == MM_KIND_GMMA) { /* warps take tiles; bm > 0 caps the CTAs along N */
        g[0] = (unsigned)((mm_gmma_tiles(c, N) + c->wm - 1) / c->wm);
        if (c->bm > 0 && g[0] > (unsigned)c->bm) g[0] = (unsigned)c->bm;
        g[1] = (unsigned)c->splitk;
    } else { /* gemv: bm > 0 caps the CTAs along N (each then walks several column blocks) */
        g[0] = (unsigned)((N + c->cols - 1) / c->cols);
        if (c->bm > 0 && g[0] > (unsigned)c->bm) g[0] = (unsigned)c->bm;
        g[1] = (unsigned)c->splitk;
    }
    g[2] = (unsigned)batch;
}

/* The translation unit of c with kernel name `kname`, malloc'd; NULL when a
 * file is missing. */
static inline char *mm_source(const mm_cfg *c, const char *kname)
{
    char *common = nu_read_kernel_file("common.cuh");
    char *tmpl = nu_read_kernel_file(c->kind == MM_KIND_MMA     ? "matmul_mma.cuh"
                                     : c->kind == MM_KIND_WGMMA ? "matmul_wgmma.cuh"
                                                                : "gemv.cuh");
    char *tmpl2 = c->kind == MM_KIND_GMMA ? nu_read_kernel_file("gemv_mma.cuh") : NULL;
    if (!common || !tmpl || (c->kind == MM_KIND_GMMA && !tmpl2)) {
        free(common);
        free(tmpl);
        free(tmpl2);
        return NULL;
    }
    nu_buf b = {0};
    nu_printf(&b, "%s\n", common);
    nu_printf(&b, "/* generated part (hand-written for the test) */\n");
    nu_printf(&b, "#define KILN_KERNEL %s\n", kname);
    nu_printf(&b, "#define KILN_T %s\ntypedef KILN_T kiln_t;\n", mm_dt_ctype(c->dt));
    nu_printf(&b, "#define KILN_B_NK %d\n", c->nk);
    if (c->kind == MM_KIND_WGMMA)
        nu_printf(&b,
                  "#define KILN_BM %d\n#define KILN_BN %d\n#define KILN_STAGES %d\n#define KILN_WGMMA_PINGPONG %d\n"
                  "#define KILN_CLUSTER_M %d\n#define KILN_WGMMA_F16 %d\n",
                  c->bm, c->bn, c->stages, c->wm, c->wn, c->dt == MM_F16);
    if (c->kind == MM_KIND_WGMMA && c->cols > 0)
        nu_printf(&b, "#define KILN_WGMMA_TMA_STORE 1\n#define KILN_WGMMA_EPI_COLS %d\n", c->cols);
    if ((c->kind == MM_KIND_WGMMA || c->kind == MM_KIND_MMA) && c->norm)
        nu_printf(&b, "#define KILN_MATMUL_NORM 1\n#define KILN_EPS 1e-5f\n");
    if (c->kind == MM_KIND_WGMMA)
        nu_printf(&b,
                  "#define KILN_WGMMA_W_EARLY %d\n#define KILN_WGMMA_W_EVICT_FIRST %d\n#define KILN_WGMMA_EPI_EARLY %d\n"
                  "#define KILN_WGMMA_W_L2 %d\n#define KILN_WGMMA_TAIL %d\n#define KILN_WGMMA_RES_TMA %d\n"
                  "#define KILN_WGMMA_RES_REGS %d\n",
                  c->bk & 1, (c->bk >> 1) & 1, (c->bk & 16) ? 2 : (c->bk >> 2) & 1, (c->bk & 8) ? 2 * c->stages : 0,
                  (c->bk >> 5) & 1, (c->bk >> 6) & 1, (c->bk >> 7) & 1);
    if (c->kind == MM_KIND_WGMMA && c->ck > 1) nu_printf(&b, "#define KILN_WGMMA_CLUSTER_K %d\n", c->ck);
    if (c->kind == MM_KIND_WGMMA && c->splitk > 1) nu_printf(&b, "#define KILN_SPLITK %d\n", c->splitk);
    else if (c->kind == MM_KIND_MMA)
        nu_printf(&b,
                  "#define KILN_BM %d\n#define KILN_BN %d\n#define KILN_BK %d\n#define KILN_WARPS_M %d\n"
                  "#define KILN_WARPS_N %d\n#define KILN_STAGES %d\n",
                  c->bm, c->bn, c->bk, c->wm, c->wn, c->stages);
    else if (c->kind == MM_KIND_GMMA)
        nu_printf(&b,
                  "#define KILN_GEMV_MMA 1\n#define KILN_GMMA_NT %d\n#define KILN_GMMA_MT %d\n#define KILN_GMMA_WARPS %d\n"
                  "#define KILN_GMMA_UNROLL %d\n#define KILN_SPLITK %d\n%s",
                  c->maxm, c->cols, c->wm, c->stages, c->splitk,
                  c->norm ? "#define KILN_GEMV_NORM 1\n#define KILN_EPS 1e-5f\n" : "");
    else {
        nu_printf(&b, "#define KILN_GEMV_COLS %d\n#define KILN_SPLITK %d\n#define KILN_GEMV_MAXM %d\n%s", c->cols,
                  c->splitk, c->maxm, c->norm ? "#define KILN_GEMV_NORM 1\n#define KILN_EPS 1e-5f\n" : "");
        if (c->stages) nu_printf(&b, "#define KILN_GEMV_UNROLL %d\n", c->stages);
        if (c->wm) nu_printf(&b, "#define KILN_GEMV_MINB %d\n", c->wm);
        if (c->wn) nu_printf(&b, "#define KILN_GEMV_PIPE 0\n");
        if (c->bn) nu_printf(&b, "#define KILN_GEMV_DEFER %d\n", c->bn < 0 ? 0 : c->bn);
        if (c->ck) nu_printf(&b, "#define KILN_GEMV_RING %d\n", c->ck);
    }
    nu_printf(&b, "%s", mm_struct_text);
    nu_printf(&b, "%s", c->epi == MM_EPI_BIAS_RES ? mm_epi_bias_res_text : mm_epi_store_text);
    if (c->kind == MM_KIND_WGMMA && c->cols > 0)
        nu_printf(&b, "%s", c->epi == MM_EPI_BIAS_RES ? mm_val_bias_res_text : mm_val_store_text);
    if (c->kind == MM_KIND_WGMMA && c->cols > 0 && (c->bk & 4) && !(c->bk & 16) && c->epi == MM_EPI_BIAS_RES)
        nu_printf(&b, "%s", mm_warm_bias_res_text);
    if (c->kind == MM_KIND_WGMMA && c->cols > 0 && (c->bk & 80) && c->epi == MM_EPI_BIAS_RES)
        nu_printf(&b, "%s", mm_pre_bias_res_text);
    if (c->kind == MM_KIND_WGMMA && (c->bk & 128)) nu_printf(&b, "%s", mm_res_at_text);
    nu_printf(&b, "%s", tmpl);
    if (tmpl2) nu_printf(&b, "%s", tmpl2);
    free(common);
    free(tmpl);
    free(tmpl2);
    return nu_take(&b);
}

/* Compile the n configurations (kernel i is named "kiln_test_mm<i>") in
 * parallel. out[i] as rt_nvrtc_compile gives it (target CUBIN, sm_90a);
 * a unit whose files are missing gets RT_ERR_IO. ptxas_v: add
 * --ptxas-options=-v (resource lines in the log). Returns the number of
 * failures. */
static inline int mm_compile_all(const mm_cfg *cfgs, int n, int ptxas_v, rt_compile_result *out)
{
    char **names = calloc((size_t)n, sizeof *names);
    char **srcs = calloc((size_t)n, sizeof *srcs);
    int bad = 0;
    if (!names || !srcs) {
        free(names);
        free(srcs);
        return n;
    }
    for (int i = 0; i < n; i++) {
        names[i] = malloc(32);
        if (names[i]) snprintf(names[i], 32, "kiln_test_mm%d", i);
        srcs[i] = names[i] ? mm_source(&cfgs[i], names[i]) : NULL;
        if (!srcs[i]) bad = 1;
    }
    int fails = 0;
    if (bad) {
        for (int i = 0; i < n; i++) {
            memset(&out[i], 0, sizeof out[i]);
            out[i].status = RT_ERR_IO;
            fails++;
        }
    } else {
        rt_compile_opts opts = {0};
        static const char *const vopt[] = {"--ptxas-options=-v"};
        opts.arch = "sm_90a";
        if (ptxas_v) {
            opts.extra = vopt;
            opts.nextra = 1;
        }
        rt_nvrtc_compile_many(n, (const char *const *)names, (const char *const *)srcs, &opts,
                              RT_TARGET_CUBIN, out, 0, NULL, NULL);
        for (int i = 0; i < n; i++)
            if (out[i].status != RT_OK) fails++;
    }
    for (int i = 0; i < n; i++) {
        free(names[i]);
        free(srcs[i]);
    }
    free(names);
    free(srcs);
    return fails;
}

#endif
