/* tests/gpu/attention_src.h — builds attention translation units for the
 * tests (tests/codegen/test_attention_nvrtc.c, tests/gpu/test_gpu_attention.c)
 * the way codegen does (codegen/kernels/CONTRACT.md): common.cuh, a
 * hand-written generated part (constants, KilnArgs), then the family's
 * template files (cg_family_templates: attention_common.cuh, the template); and
 * compiles them with NVRTC to sm_90a cubins, several at once on threads
 * (rt_nvrtc_compile_many).
 *
 * Header-only (static functions); include once per test. Templates are read
 * as tests/gpu/nvrtc_unit.h says. */
#ifndef KILN_TESTS_ATTENTION_SRC_H
#define KILN_TESTS_ATTENTION_SRC_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "gpu/nvrtc_unit.h"
#include "runtime/rt_nvrtc.h"

/* KilnArgs as the templates read it: every field 8 bytes (codegen/cg.h). */
typedef struct att_args {
    const void *q;
    void *k, *v, *o;
    const int *pos;
    const void *k_new, *v_new;
    float *ws;
    int *sem;
    long long q_sb, q_ss, q_sh, kn_sb, kn_ss, kn_sh, vn_sb, vn_ss, vn_sh;
    long long B, S, T, H, KV;
    const int *slot; /* the slot table (NULL: row b is cache row b) */
} att_args;

static const char att_struct_text[] =
    "struct KilnArgs {\n"
    "    const kiln_t *q;\n"
    "    kiln_t *k, *v, *o;\n"
    "    const int *pos;\n"
    "    const kiln_t *k_new, *v_new;\n"
    "    float *ws;\n"
    "    int *sem;\n"
    "    long long q_sb, q_ss, q_sh, kn_sb, kn_ss, kn_sh, vn_sb, vn_ss, vn_sh;\n"
    "    long long B, S, T, H, KV;\n"
    "    const int *slot;\n"
    "};\n";

typedef struct att_cfg {
    int decode; /* 0: CG_FAMILY_ATTENTION_PREFILL, 1: CG_FAMILY_ATTENTION_DECODE */
    int bf16;   /* 1: __nv_bfloat16, 0: __half */
    int hd;
    int causal, rope, append;
    int splits;   /* decode: KILN_SPLITS */
    double theta; /* KILN_THETA when rope */
    ir_rope_attrs scaling; /* when rope: frequency scaling (its table as codegen writes it) */
    int window;            /* decode: KILN_ATT_WINDOW (0: none) */
    double softcap;        /* decode: KILN_ATT_SOFTCAP (0: none) */
    int threads;           /* decode: KILN_ATT_THREADS (0: cg_attention_decode_threads(hd, 0)) */
    int cluster;           /* decode: KILN_DEC_CLUSTER (0: 1; else == splits) */
    int warps, stages, minkeys; /* decode: KILN_DEC_WARPS, _STAGES, _MINKEYS (0: the template's) */
    int timing;                 /* decode with a cluster: KILN_DEC_TIMING (milestone stamps in ws) */
    int push;                   /* decode with a cluster: KILN_DEC_PUSH (0: the two-barrier combine) */
    int cols;                   /* with push: KILN_DEC_COLS (one softmax per tile, P V by columns) */
} att_cfg;

/* The decode kernel's shape of c (cg_att_decode_cfg), the template's defaults filled in. */
static inline cg_att_decode_cfg att_decode_shape(const att_cfg *c)
{
    cg_att_decode_cfg d = {.splits = c->splits, .cluster = c->cluster ? c->cluster : 1,
                           .warps = c->warps ? c->warps : cg_attention_decode_warps(c->hd),
                           .threads = c->threads ? c->threads : cg_attention_decode_threads(c->hd, 0),
                           .stages = c->stages ? c->stages : (c->hd > 64 ? 2 : 4), .minkeys = c->minkeys,
                           .qsmem = c->hd > 128, .push = c->cluster > 1 ? c->push : 0,
                           .cols = c->cluster > 1 && c->push ? c->cols : 0};
    return d;
}

/* The decode CTA's threads of c (as cg_gen_attention chooses them when threads is 0). */
static inline int att_decode_threads(const att_cfg *c)
{
    return c->threads ? c->threads : cg_attention_decode_threads(c->hd, 0);
}

static inline int att_cfg_eq(const att_cfg *a, const att_cfg *b)
{
    return a->decode == b->decode && a->bf16 == b->bf16 && a->hd == b->hd &&
           a->causal == b->causal && a->rope == b->rope && a->append == b->append &&
           (!a->decode || a->splits == b->splits) && a->window == b->window && a->softcap == b->softcap &&
           (!a->decode || att_decode_threads(a) == att_decode_threads(b)) &&
           (!a->decode || (a->cluster == b->cluster && a->warps == b->warps && a->stages == b->stages &&
                           a->minkeys == b->minkeys && a->timing == b->timing && a->push == b->push &&
                           a->cols == b->cols)) &&
           (!a->rope || (a->theta == b->theta && ir_rope_attrs_eq(&a->scaling, &b->scaling)));
}

static inline void att_cfg_name(const att_cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s_%s_hd%d%s%s%s", c->decode ? "decode" : "prefill", c->bf16 ? "bf16" : "f16",
             c->hd, c->causal ? "_causal" : "", c->rope ? "_rope" : "", c->append ? "_append" : "");
    if (c->rope && c->scaling.scaling != IR_ROPE_NONE) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "_%s", ir_rope_scaling_name(c->scaling.scaling));
    }
    if (c->decode) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "_s%d_t%d", c->splits, att_decode_threads(c));
        l = strlen(buf);
        if (c->cluster > 1) snprintf(buf + l, n - l, "_cl%d", c->cluster);
        l = strlen(buf);
        if (c->warps || c->stages || c->minkeys)
            snprintf(buf + l, n - l, "_w%dst%dmk%d", c->warps, c->stages, c->minkeys);
        l = strlen(buf);
        if (c->timing) snprintf(buf + l, n - l, "_timing");
        l = strlen(buf);
        if (c->push) snprintf(buf + l, n - l, "_push%d%s", c->push, c->cols ? "_cols" : "");
    }
    if (c->window) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "_w%d", c->window);
    }
    if (c->softcap > 0) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "_cap%g", c->softcap);
    }
}

#define ATT_KERNEL_NAME "kiln_test_k0_attention"

/* The whole translation unit for c, malloc'd; NULL when a file is missing. */
static inline char *att_source(const att_cfg *c)
{
    const char *const *names =
        cg_family_templates(c->decode ? CG_FAMILY_ATTENTION_DECODE : CG_FAMILY_ATTENTION_PREFILL);
    char *common = nu_read_kernel_file("common.cuh");
    char *tmpl[4] = {0};
    int ok = common != NULL, nt = 0;
    for (; nt < 4 && names[nt]; nt++)
        if (!(tmpl[nt] = nu_read_kernel_file(names[nt]))) ok = 0;
    if (!ok) {
        free(common);
        for (int i = 0; i < nt; i++) free(tmpl[i]);
        return NULL;
    }
    nu_buf b = {0};
    nu_printf(&b, "%s\n", common);
    nu_printf(&b, "/* generated part (hand-written for the test) */\n");
    nu_printf(&b, "#define KILN_KERNEL " ATT_KERNEL_NAME "\n");
    nu_printf(&b, "#define KILN_T %s\ntypedef KILN_T kiln_t;\n", c->bf16 ? "__nv_bfloat16" : "__half");
    nu_printf(&b, "#define KILN_HD %d\n", c->hd);
    nu_printf(&b, "#define KILN_SCALE %.9ef\n", 1.0 / sqrt((double)c->hd));
    nu_printf(&b, "#define KILN_CAUSAL %d\n#define KILN_ROPE %d\n#define KILN_APPEND %d\n", c->causal,
              c->rope, c->append);
    if (c->rope) nu_printf(&b, "#define KILN_THETA %.17g\n", c->theta);
    if (c->rope && c->scaling.scaling != IR_ROPE_NONE) { /* as cg_gen_attention writes it */
        int len = cg_attention_rope_source(NULL, 0, c->theta, &c->scaling, c->hd);
        char *t = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (t && cg_attention_rope_source(t, (size_t)len + 1, c->theta, &c->scaling, c->hd) >= 0)
            nu_printf(&b, "%s", t);
        free(t);
    }
    if (c->decode) nu_printf(&b, "#define KILN_SPLITS %d\n", c->splits);
    if (c->decode) { /* as cg_gen_attention writes them */
        cg_att_decode_cfg d = att_decode_shape(c);
        nu_printf(&b, "#define KILN_DEC_WARPS %d\n#define KILN_ATT_THREADS %d\n", d.warps, d.threads);
        nu_printf(&b, "#define KILN_DEC_CLUSTER %d\n#define KILN_DEC_STAGES %d\n", d.cluster, d.stages);
        if (c->minkeys) nu_printf(&b, "#define KILN_DEC_MINKEYS %d\n", c->minkeys);
        nu_printf(&b, "#define KILN_DEC_DYNSMEM %d\n", cg_attention_decode_smem(&d, c->hd) > 0);
        if (c->timing) nu_printf(&b, "#define KILN_DEC_TIMING 1\n");
        if (d.push) nu_printf(&b, "#define KILN_DEC_PUSH %d\n", d.push);
        if (d.cols) nu_printf(&b, "#define KILN_DEC_COLS 1\n");
    }
    if (c->window) nu_printf(&b, "#define KILN_ATT_WINDOW %d\n", c->window);
    if (c->softcap > 0) nu_printf(&b, "#define KILN_ATT_SOFTCAP %.9ef\n", c->softcap);
    nu_printf(&b, "%s\n", att_struct_text);
    for (int i = 0; i < nt; i++) nu_printf(&b, "%s%s", i ? "\n" : "", tmpl[i]);
    free(common);
    for (int i = 0; i < nt; i++) free(tmpl[i]);
    return nu_take(&b);
}

typedef struct att_job {
    att_cfg cfg;
    int verbose_ptxas; /* add --ptxas-options=-v: resource lines in the log */
    /* results */
    int ok;            /* compiled */
    char *log;         /* NVRTC's log (malloc'd, "" when clean); when not
                        * compiled, rt_nvrtc's message (it holds the log) */
    char *cubin;
    size_t cubin_size;
} att_job;

/* KILN_ATT_CUBINS=DIR (test_gpu_attention on the GPU machine, whose time is short): the cubin
 * of a translation unit is DIR/<FNV-1a of its source and options>.cubin, read instead of
 * compiled when there, written when compiled. */
static inline char *att_cubin_path(const char *src, int verbose)
{
    const char *dir = getenv("KILN_ATT_CUBINS");
    if (!dir || !*dir || verbose) return NULL; /* ptxas -v jobs want their log */
    unsigned long long h = 1469598103934665603ull;
    for (const char *c = src; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    size_t n = strlen(dir) + 40;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%016llx.cubin", dir, h);
    return p;
}

static inline int att_cubin_read(const char *path, char **data, size_t *size)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return 0;
    char *buf = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len)) &&
        fread(buf, 1, (size_t)len, f) == (size_t)len) {
        fclose(f);
        *data = buf;
        *size = (size_t)len;
        return 1;
    }
    free(buf);
    fclose(f);
    return 0;
}

static inline void att_cubin_write(const char *path, const char *data, size_t size)
{
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (!f) return;
    if (fwrite(data, 1, size, f) != size) fprintf(stderr, "warning: short write to %s\n", path);
    fclose(f);
}

/* Compile the jobs whose verbose_ptxas is `verbose` with rt_nvrtc_compile_many
 * on nthreads threads (its default when <= 0). */
static inline void att_compile_some(att_job *jobs, int n, int verbose, int nthreads)
{
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    char **names = calloc((size_t)n + 1, sizeof *names), **srcs = calloc((size_t)n + 1, sizeof *srcs);
    rt_compile_result *res = calloc((size_t)n + 1, sizeof *res);
    int m = 0;
    for (int i = 0; idx && names && srcs && res && i < n; i++) {
        att_job *j = &jobs[i];
        if (!!j->verbose_ptxas != !!verbose) continue;
        char name[128];
        att_cfg_name(&j->cfg, name, sizeof name);
        char *src = att_source(&j->cfg);
        if (!src) {
            j->log = strdup("template files not found");
            continue;
        }
        char *cp = att_cubin_path(src, verbose);
        if (att_cubin_read(cp, &j->cubin, &j->cubin_size)) {
            j->ok = 1;
            j->log = strdup("");
            free(cp);
            free(src);
            continue;
        }
        free(cp);
        idx[m] = i;
        names[m] = strdup(name);
        srcs[m++] = src;
    }
    static const char *const vopt[] = {"--ptxas-options=-v"};
    rt_compile_opts opts = {.arch = "sm_90a", .extra = verbose ? vopt : NULL, .nextra = verbose ? 1 : 0};
    if (m > 0)
        rt_nvrtc_compile_many(m, (const char *const *)names, (const char *const *)srcs, &opts,
                              RT_TARGET_CUBIN, res, nthreads, NULL, NULL);
    for (int k = 0; k < m; k++) {
        att_job *j = &jobs[idx[k]];
        rt_compile_result *r = &res[k];
        j->ok = r->status == RT_OK;
        char **keep = j->ok || !r->message ? &r->log : &r->message;
        j->log = *keep;
        *keep = NULL;
        if (j->ok) {
            j->cubin = (char *)r->code.data;
            j->cubin_size = r->code.size;
            r->code.data = NULL;
            char *cp = att_cubin_path(srcs[k], verbose);
            att_cubin_write(cp, j->cubin, j->cubin_size);
            free(cp);
        }
        rt_compile_result_free(r);
        free(names[k]);
        free(srcs[k]);
    }
    free(idx);
    free(names);
    free(srcs);
    free(res);
}

/* Compile every job, on up to nthreads threads (<= 0: rt_nvrtc_compile_many's
 * default). */
static inline void att_compile_all(att_job *jobs, int n, int nthreads)
{
    att_compile_some(jobs, n, 0, nthreads);
    att_compile_some(jobs, n, 1, nthreads);
}

static inline void att_job_free(att_job *j)
{
    free(j->log);
    free(j->cubin);
    j->log = j->cubin = NULL;
}

#endif
