/* tests/gpu/attention_src.h — builds attention translation units for the
 * tests (tests/codegen/test_attention_nvrtc.c, tests/gpu/test_gpu_attention.c)
 * the way codegen does (codegen/kernels/CONTRACT.md): common.cuh, a
 * hand-written generated part (constants, KilnArgs), then the family's
 * template files (cg_family_templates: attention_common.cuh, the template); and
 * compiles them with NVRTC to sm_90a cubins, several at once on threads.
 *
 * Header-only (static functions); include once per test. Templates are read
 * from $KILN_SOURCE_DIR/codegen/kernels, else from KILN_SOURCE_DIR (a
 * compile-time define), else ./codegen/kernels. */
#ifndef KILN_TESTS_ATTENTION_SRC_H
#define KILN_TESTS_ATTENTION_SRC_H
#include <math.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/cg.h"

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
    "};\n";

typedef struct att_cfg {
    int decode; /* 0: CG_FAMILY_ATTENTION_PREFILL, 1: CG_FAMILY_ATTENTION_DECODE */
    int bf16;   /* 1: __nv_bfloat16, 0: __half */
    int hd;
    int causal, rope, append;
    int splits;   /* decode: KILN_SPLITS */
    double theta; /* KILN_THETA when rope */
} att_cfg;

static inline int att_cfg_eq(const att_cfg *a, const att_cfg *b)
{
    return a->decode == b->decode && a->bf16 == b->bf16 && a->hd == b->hd &&
           a->causal == b->causal && a->rope == b->rope && a->append == b->append &&
           (!a->decode || a->splits == b->splits) && (!a->rope || a->theta == b->theta);
}

static inline void att_cfg_name(const att_cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s_%s_hd%d%s%s%s", c->decode ? "decode" : "prefill", c->bf16 ? "bf16" : "f16",
             c->hd, c->causal ? "_causal" : "", c->rope ? "_rope" : "", c->append ? "_append" : "");
    if (c->decode) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "_s%d", c->splits);
    }
}

static inline char *att_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static inline char *att_read_kernel_file(const char *name)
{
    char path[4096];
    const char *env = getenv("KILN_SOURCE_DIR");
    char *s = NULL;
    if (env) {
        snprintf(path, sizeof path, "%s/codegen/kernels/%s", env, name);
        s = att_read_text(path);
    }
#ifdef KILN_SOURCE_DIR
    if (!s) {
        snprintf(path, sizeof path, "%s/codegen/kernels/%s", KILN_SOURCE_DIR, name);
        s = att_read_text(path);
    }
#endif
    if (!s) {
        snprintf(path, sizeof path, "codegen/kernels/%s", name);
        s = att_read_text(path);
    }
    if (!s) fprintf(stderr, "cannot read codegen/kernels/%s (set KILN_SOURCE_DIR)\n", name);
    return s;
}

/* Growable string. */
typedef struct att_buf {
    char *s;
    size_t len, cap;
} att_buf;
static inline void att_printf(att_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->len + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) return;
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

#define ATT_KERNEL_NAME "kiln_test_k0_attention"

/* The whole translation unit for c, malloc'd; NULL when a file is missing. */
static inline char *att_source(const att_cfg *c)
{
    const char *const *names =
        cg_family_templates(c->decode ? CG_FAMILY_ATTENTION_DECODE : CG_FAMILY_ATTENTION_PREFILL);
    char *common = att_read_kernel_file("common.cuh");
    char *tmpl[4] = {0};
    int ok = common != NULL, nt = 0;
    for (; nt < 4 && names[nt]; nt++)
        if (!(tmpl[nt] = att_read_kernel_file(names[nt]))) ok = 0;
    if (!ok) {
        free(common);
        for (int i = 0; i < nt; i++) free(tmpl[i]);
        return NULL;
    }
    att_buf b = {0};
    att_printf(&b, "%s\n", common);
    att_printf(&b, "/* generated part (hand-written for the test) */\n");
    att_printf(&b, "#define KILN_KERNEL " ATT_KERNEL_NAME "\n");
    att_printf(&b, "#define KILN_T %s\ntypedef KILN_T kiln_t;\n", c->bf16 ? "__nv_bfloat16" : "__half");
    att_printf(&b, "#define KILN_HD %d\n", c->hd);
    att_printf(&b, "#define KILN_SCALE %.9ef\n", 1.0 / sqrt((double)c->hd));
    att_printf(&b, "#define KILN_CAUSAL %d\n#define KILN_ROPE %d\n#define KILN_APPEND %d\n", c->causal,
               c->rope, c->append);
    if (c->rope) att_printf(&b, "#define KILN_THETA %.17g\n", c->theta);
    if (c->decode) att_printf(&b, "#define KILN_SPLITS %d\n", c->splits);
    att_printf(&b, "%s\n", att_struct_text);
    for (int i = 0; i < nt; i++) att_printf(&b, "%s%s", i ? "\n" : "", tmpl[i]);
    free(common);
    for (int i = 0; i < nt; i++) free(tmpl[i]);
    return b.s;
}

static inline const char *att_include_dir(void)
{
    static char buf[4096];
    const char *e = getenv("KILN_CUDA_INCLUDE");
    if (e) return e;
    e = getenv("CUDA_HOME");
    if (e) {
        snprintf(buf, sizeof buf, "%s/include", e);
        return buf;
    }
    return "/usr/local/cuda/include";
}

typedef struct att_job {
    att_cfg cfg;
    int verbose_ptxas; /* add --ptxas-options=-v: resource lines in the log */
    /* results */
    int ok;            /* compiled */
    char *log;         /* NVRTC's log (malloc'd, "" when clean) */
    char *cubin;
    size_t cubin_size;
} att_job;

static inline void att_job_run(att_job *j)
{
    char *src = att_source(&j->cfg);
    char name[128], inc[4200];
    att_cfg_name(&j->cfg, name, sizeof name);
    if (!src) {
        j->log = strdup("template files not found");
        return;
    }
    snprintf(inc, sizeof inc, "-I%s", att_include_dir());
    const char *opts[5] = {"-arch=sm_90a", "-std=c++17", "-default-device", inc,
                           "--ptxas-options=-v"};
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL) != NVRTC_SUCCESS) {
        free(src);
        j->log = strdup("nvrtcCreateProgram failed");
        return;
    }
    nvrtcResult r = nvrtcCompileProgram(prog, j->verbose_ptxas ? 5 : 4, opts);
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    j->log = calloc(n + 1, 1);
    if (j->log && n) nvrtcGetProgramLog(prog, j->log);
    if (j->log && n && j->log[n - 1] == 0) n--;
    if (j->log && n == 0) j->log[0] = 0;
    if (r == NVRTC_SUCCESS && nvrtcGetCUBINSize(prog, &j->cubin_size) == NVRTC_SUCCESS) {
        j->cubin = malloc(j->cubin_size);
        if (j->cubin && nvrtcGetCUBIN(prog, j->cubin) == NVRTC_SUCCESS) j->ok = 1;
    }
    nvrtcDestroyProgram(&prog);
    free(src);
}

typedef struct att_pool {
    att_job *jobs;
    int n, next;
    pthread_mutex_t mu;
} att_pool;

static inline void *att_worker(void *arg)
{
    att_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) return NULL;
        att_job_run(&p->jobs[i]);
    }
}

/* Compile every job, on up to nthreads threads (<= 0: one per CPU). */
static inline void att_compile_all(att_job *jobs, int n, int nthreads)
{
    att_pool p = {jobs, n, 0, PTHREAD_MUTEX_INITIALIZER};
    if (nthreads <= 0) {
        long c = 4;
#ifdef _SC_NPROCESSORS_ONLN
        c = sysconf(_SC_NPROCESSORS_ONLN);
#endif
        nthreads = c > 0 ? (int)c : 4;
    }
    if (nthreads > n) nthreads = n;
    if (nthreads > 32) nthreads = 32;
    pthread_t th[32];
    int started = 0;
    for (int i = 1; i < nthreads; i++)
        if (pthread_create(&th[started], NULL, att_worker, &p) == 0) started++;
    att_worker(&p);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

static inline void att_job_free(att_job *j)
{
    free(j->log);
    free(j->cubin);
    j->log = j->cubin = NULL;
}

#endif
