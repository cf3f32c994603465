/* tests/gpu/test_gpu_attention_wgmma.c — codegen/kernels/attention_wgmma.cuh (Hopper
 * prefill attention) on the GPU against a float64 CPU reference (ir/ir.h ATTENTION: softmax
 * of scale * q.k over the visible keys, times v), through runtime/rt_nvrtc, rt_tmap and
 * rt_launch as the runtime launches it (one parameter: three tensor maps, then KilnArgs).
 *
 * Units are built as codegen builds them (common.cuh, a hand-written generated part,
 * cg_family_templates(CG_FAMILY_ATTENTION_WGMMA)), compiled for sm_90a all at once on threads.
 * q is a strided view (rows of a fused [B, S, H + 2KV, HD] buffer), caches [B, KV, T, HD],
 * output [B, S, H, HD] (varlen: [total, H, HD]) poisoned (0xFF: NaN) before every launch.
 * Cases: causal and not, GQA ratios 1, 4, 8 and MQA, head dims 16..256, bf16 and f16, lengths
 * that are not multiples of the tiles, a query offset per sequence (chunked prefill; cache rows
 * past the valid keys hold random values), no positions (offset T - S), an invalid offset (NaN
 * rows), packed variable-length sequences (KILN_ATT_VARLEN), the sliding-window and soft-cap
 * hooks, key tiles of 64 and 128 and 3 stages, and grids smaller than the tile count
 * (persistent loop). Checks: ‖out − ref‖/‖ref‖ < 1e-2 (bf16) / 5e-3 (f16), every stored row
 * finite (or NaN where the offset is invalid).
 *
 * KILN_BENCH=1 adds timings (CUDA events around each launch, median of 20 after warm-up, 3
 * sets of random inputs in rotation): the prefill table of bench/attn (causal, 32 query / 8 KV
 * heads, hd 128 at S 512..8192, B 4 at 4096, hd 96 and 256 at equal total work, not causal at
 * 4096) with the template's defaults, "bench attn <row> ...: us (p10, p90), TFLOP/s" (causal
 * FLOPs: 4 * HD per visible (query, key) pair per head). KILN_BENCH=2 adds the sweep of the
 * template's knobs (groups[]: variants of each head dim / mask, timed interleaved on the
 * group's shapes, "bench attn sweep-<row>/<variant> ..."), each variant first checked on the
 * group's cases (and the combined knobs on the varlen / window / soft-cap cases); variant
 * "base" is the template of the checkout at $KILN_BASE_SOURCE_DIR (the kernel before a change,
 * in the same process). KILN_SWEEP=1: those checks without timings; KILN_VARIANT=name: only
 * that variant's; KILN_CASES=i,j,...: only those of cases[]. The dynamic scheduler's counter
 * must be zero after every launch (checked). Exit 77 without a device of compute capability 9.x. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "check.h"
#include "gpu/attention_wgmma_src.h"
#include "gpu/gpu_test_util.h"
#include "ir/ir.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_nvrtc.h"
#include "runtime/rt_tmap.h"


/* ---- numbers --------------------------------------------------------------- */

/* ---- cases ------------------------------------------------------------------- */

typedef struct wcase {
    wa_cfg cfg;
    int B, S, H, KV, T;
    int use_pos, pos[4];
    int lens[4]; /* varlen: query rows of each sequence */
    int grid;    /* 0: min(tiles, SMs) */
} wcase;

#define C(bf, hd, ca, bk, st) {bf, hd, ca, bk, st, 0, 0, 0.0, NULL, 0, 0}
static const wcase cases[] = {
    {C(1, 128, 1, 128, 2), 2, 300, 8, 2, 300, 0, {0}, {0}, 0},
    {C(1, 128, 0, 128, 2), 2, 300, 8, 2, 300, 0, {0}, {0}, 0},
    {C(1, 128, 1, 128, 2), 2, 200, 8, 8, 700, 1, {0, 455}, {0}, 0},  /* MHA, query offsets */
    {C(1, 128, 1, 128, 2), 2, 129, 8, 1, 300, 1, {40, 171}, {0}, 0}, /* MQA */
    {C(1, 64, 1, 128, 2), 2, 257, 8, 1, 257, 0, {0}, {0}, 0},
    {C(1, 64, 0, 128, 2), 1, 65, 8, 8, 100, 0, {0}, {0}, 0},         /* offset T - S */
    {C(1, 80, 1, 128, 2), 2, 190, 8, 2, 190, 0, {0}, {0}, 0},
    {C(1, 96, 1, 128, 2), 2, 333, 8, 1, 333, 0, {0}, {0}, 0},
    {C(1, 96, 0, 128, 2), 2, 100, 8, 2, 400, 1, {3, 300}, {0}, 0},
    {C(1, 256, 1, 64, 2), 2, 200, 8, 1, 200, 0, {0}, {0}, 0},
    {C(1, 256, 0, 64, 2), 1, 150, 8, 2, 300, 1, {150}, {0}, 0},
    {C(1, 16, 1, 128, 2), 2, 100, 8, 2, 100, 0, {0}, {0}, 0},
    {C(1, 112, 1, 64, 3), 2, 170, 8, 1, 170, 0, {0}, {0}, 0},
    {C(1, 192, 1, 64, 2), 1, 130, 8, 2, 130, 0, {0}, {0}, 0},
    {C(0, 128, 1, 128, 2), 2, 300, 8, 2, 300, 0, {0}, {0}, 0},       /* f16 */
    {C(0, 64, 0, 64, 3), 2, 100, 8, 4, 160, 1, {60, 1}, {0}, 0},
    {C(1, 128, 1, 64, 3), 2, 500, 8, 2, 500, 0, {0}, {0}, 3},        /* 3 CTAs: persistent loop */
    {C(1, 128, 1, 128, 2), 2, 64, 8, 2, 100, 1, {30, -3}, {0}, 0},   /* invalid offset: NaN rows */
    {{1, 128, 1, 128, 2, 100, 0, 0.0, NULL, 0, 0}, 2, 300, 8, 2, 300, 0, {0}, {0}, 0},   /* sliding window */
    {{1, 64, 0, 128, 2, 0, 0, 20.0, NULL, 0, 0}, 2, 200, 8, 2, 200, 0, {0}, {0}, 0},     /* soft-cap */
    {{1, 128, 1, 128, 2, 0, 1, 0.0, NULL, 0, 0}, 3, 0, 8, 2, 600, 1, {0, 7, 300}, {100, 1, 257}, 0},  /* varlen */
    {{1, 96, 0, 64, 2, 0, 1, 0.0, NULL, 0, 0}, 3, 0, 8, 8, 400, 0, {0}, {64, 130, 5}, 0},             /* varlen, T - len */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- kernels ------------------------------------------------------------------ */

typedef struct wkern {
    wa_cfg cfg;
    rt_module *mod;
    rt_kernel k;
} wkern;
static wkern kerns[160];
static int nkerns;
static int *g_sched; /* KILN_ATT_SCHED 1: the tile counter every launch shares (zero, left zero) */

static void want(wa_cfg *list, int *n, wa_cfg c)
{
    for (int i = 0; i < *n; i++)
        if (cfg_eq(&list[i], &c)) return;
    list[(*n)++] = c;
}

static int build(const wa_cfg *cfgs, int n)
{
    char **names = calloc((size_t)n, sizeof *names), **srcs = calloc((size_t)n, sizeof *srcs);
    rt_compile_result *res = calloc((size_t)n, sizeof *res);
    for (int i = 0; i < n; i++) {
        names[i] = malloc(64);
        snprintf(names[i], 64, "attw_%d", i);
        srcs[i] = cfg_source(&cfgs[i]);
        if (!srcs[i]) return -1;
    }
    if (!n) {
        free(names);
        free(srcs);
        free(res);
        return 0;
    }
    static const char *const vopt[] = {"--ptxas-options=-v"};
    rt_compile_opts opts = {.arch = "sm_90a", .extra = vopt, .nextra = 1};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN); /* the sweep builds ~90 units: every core */
    rt_nvrtc_compile_many(n, (const char *const *)names, (const char *const *)srcs, &opts, RT_TARGET_CUBIN, res,
                          cpus > 1 ? (int)cpus : 0, NULL, NULL);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const wa_cfg *c = &cfgs[i];
        char err[512];
        if (res[i].status != RT_OK) {
            fprintf(stderr, "compile hd%d bk%d: %s\n%s\n", c->hd, c->bk, res[i].message ? res[i].message : "",
                    res[i].log ? res[i].log : "");
            bad++;
        } else {
            const char *lg = res[i].log ? res[i].log : "";
            const char *sp = strstr(lg, "bytes spill stores");
            printf("kernel hd%d bk%d st%d causal%d win%d cap%g varlen%d %s%s qbuf%d [%s]: %s, %.12s spill stores\n", c->hd,
                   c->bk, c->stages, c->causal, c->window, c->softcap, c->varlen, c->bf16 ? "bf16" : "f16",
                   c->base ? " BASE" : "", c->qbuf, c->extra ? c->extra : "",
                   strstr(lg, "Performance Loss") ? "wgmma serialized (ptxas C75xx)" : "wgmma pipelined",
                   sp && sp - lg > 12 ? sp - 12 : "?");
            wkern *k = &kerns[nkerns++];
            k->cfg = *c;
            if (rt_module_load(&k->mod, res[i].code.data, res[i].code.size, err, sizeof err) != RT_OK ||
                rt_module_kernel(k->mod, KNAME, &k->k, err, sizeof err) != RT_OK ||
                rt_kernel_set_max_smem(&k->k, cfg_smem(c), err, sizeof err) != RT_OK) {
                fprintf(stderr, "load: %s\n", err);
                bad++;
                nkerns--;
            }
        }
        rt_compile_result_free(&res[i]);
        free(names[i]);
        free(srcs[i]);
    }
    free(names);
    free(srcs);
    free(res);
    return bad ? -1 : 0;
}

static const rt_kernel *find(const wa_cfg *c)
{
    for (int i = 0; i < nkerns; i++)
        if (cfg_eq(&kerns[i].cfg, c)) return &kerns[i].k;
    return NULL;
}

/* ---- one problem on the device ------------------------------------------------ */

typedef struct prob {
    int B, S, H, KV, T, HD, total;
    int use_pos, pos[4], varlen, cu[5];
    long long q_ss, q_sb;
    uint16_t *hq, *hk, *hv; /* host copies */
    void *dq, *dk, *dv, *dout;
    int *dpos, *dcu;
    size_t nq, nkv, nout;
} prob;

static void prob_alloc(prob *P, int fill_host)
{
    P->q_ss = (long long)(P->H + 2 * P->KV) * P->HD;
    P->q_sb = (long long)P->S * P->q_ss;
    int rows = P->varlen ? P->total : P->B * P->S;
    P->nq = (size_t)rows * P->q_ss;
    P->nkv = (size_t)P->B * P->KV * P->T * P->HD;
    P->nout = (size_t)rows * P->H * P->HD;
    P->hq = malloc(P->nq * 2);
    P->hk = malloc(P->nkv * 2);
    P->hv = malloc(P->nkv * 2);
    if (fill_host) {
        for (size_t i = 0; i < P->nq; i++) P->hq[i] = enc(rng_normal());
        for (size_t i = 0; i < P->nkv; i++) P->hk[i] = enc(rng_normal());
        for (size_t i = 0; i < P->nkv; i++) P->hv[i] = enc(rng_normal());
    } else { /* bench: cheap deterministic values */
        for (size_t i = 0; i < P->nq; i++) P->hq[i] = enc((float)((int)(i * 2654435761u % 2001) - 1000) * 1e-3f);
        for (size_t i = 0; i < P->nkv; i++) P->hk[i] = enc((float)((int)(i * 2246822519u % 2001) - 1000) * 1e-3f);
        for (size_t i = 0; i < P->nkv; i++) P->hv[i] = enc((float)((int)(i * 3266489917u % 2001) - 1000) * 1e-3f);
    }
    CUDA_OK(cudaMalloc(&P->dq, P->nq * 2));
    CUDA_OK(cudaMalloc(&P->dk, P->nkv * 2));
    CUDA_OK(cudaMalloc(&P->dv, P->nkv * 2));
    CUDA_OK(cudaMalloc(&P->dout, P->nout * 2));
    CUDA_OK(cudaMalloc((void **)&P->dpos, 16));
    CUDA_OK(cudaMalloc((void **)&P->dcu, 32));
    CUDA_OK(cudaMemcpy(P->dq, P->hq, P->nq * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(P->dk, P->hk, P->nkv * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(P->dv, P->hv, P->nkv * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(P->dpos, P->pos, 16, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(P->dcu, P->cu, 20, cudaMemcpyHostToDevice));
}

static void prob_free(prob *P)
{
    free(P->hq);
    free(P->hk);
    free(P->hv);
    cudaFree(P->dq);
    cudaFree(P->dk);
    cudaFree(P->dv);
    cudaFree(P->dout);
    cudaFree(P->dpos);
    cudaFree(P->dcu);
}

static long long tiles_of(const prob *P)
{
    int G = P->H / P->KV, nqb = (P->S + 63) / 64;
    return (long long)P->B * P->KV * ((nqb * G + 1) / 2);
}

static int launch(const rt_kernel *k, const wa_cfg *c, const prob *P, int grid, cudaStream_t s)
{
    wa_param w;
    memset(&w, 0, sizeof w);
    wa_args *a = &w.p;
    a->q = P->dq;
    a->k = P->dk;
    a->v = P->dv;
    a->o = P->dout;
    a->pos = P->use_pos ? P->dpos : NULL;
    a->q_sb = P->varlen ? 0 : P->q_sb;
    a->q_ss = P->q_ss;
    a->q_sh = P->HD;
    a->B = P->B;
    a->S = P->S;
    a->T = P->T;
    a->H = P->H;
    a->KV = P->KV;
    a->cu_q = P->varlen ? P->dcu : NULL;
    a->sched = g_sched;
    int f16 = !c->bf16;
    rt_tmap_operand oq = {P->dq, f16, (long long)P->H * P->HD, P->varlen ? P->total : P->S, P->q_ss,
                          P->varlen ? 1 : P->B, P->varlen ? (long long)P->total * P->q_ss : P->q_sb, 64};
    rt_tmap_operand ok = {P->dk, f16, P->HD, P->T, P->HD, (long long)P->B * P->KV, (long long)P->T * P->HD, c->bk};
    rt_tmap_operand ov = ok;
    ov.base = P->dv;
    char err[512];
    if (rt_tmap_encode(&w.q, &oq, err, sizeof err) != RT_OK || rt_tmap_encode(&w.k, &ok, err, sizeof err) != RT_OK ||
        rt_tmap_encode(&w.v, &ov, err, sizeof err) != RT_OK) {
        fprintf(stderr, "tmap: %s\n", err);
        return -1;
    }
    long long tiles = tiles_of(P);
    int sms = 132;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    unsigned g = (unsigned)(grid > 0 ? grid : (tiles < sms ? tiles : sms));
    size_t psize = (sizeof w + 63) / 64 * 64;
    if (rt_launch(k, (rt_dim3){g, 1, 1}, (rt_dim3){384, 1, 1}, cfg_smem(c), s, &w, psize, err, sizeof err) != RT_OK) {
        fprintf(stderr, "launch: %s\n", err);
        return -1;
    }
    return 0;
}

/* float64 reference of query row (b, s, h) into ref[HD]; returns 0 when the offset is invalid */
static int reference(const prob *P, const wa_cfg *c, int b, int s, int h, double *ref)
{
    int len = P->varlen ? P->cu[b + 1] - P->cu[b] : P->S;
    int off = P->use_pos ? P->pos[b] : P->T - len, L = off + len, HD = P->HD, G = P->H / P->KV, kvh = h / G;
    if (off < 0 || L > P->T) return 0;
    long long row = P->varlen ? P->cu[b] + s : (long long)b * P->S + s;
    const uint16_t *q = P->hq + row * P->q_ss + (long long)h * HD;
    double scale = 1.0 / sqrt((double)HD), mx = -INFINITY;
    double *sc = malloc(sizeof(double) * (size_t)L);
    for (int j = 0; j < L; j++) {
        int vis = (!c->causal || j <= off + s) && (!c->window || off + s - j < c->window);
        if (!vis) {
            sc[j] = -INFINITY;
            continue;
        }
        const uint16_t *k = P->hk + (((long long)b * P->KV + kvh) * P->T + j) * HD;
        double d = 0;
        for (int e = 0; e < HD; e++) d += (double)dec(q[e]) * dec(k[e]);
        d *= scale;
        if (c->softcap > 0) d = c->softcap * tanh(d / c->softcap);
        sc[j] = d;
        if (d > mx) mx = d;
    }
    double sum = 0;
    for (int e = 0; e < HD; e++) ref[e] = 0;
    for (int j = 0; j < L; j++) {
        if (sc[j] == -INFINITY) continue;
        double p = exp(sc[j] - mx);
        sum += p;
        const uint16_t *v = P->hv + (((long long)b * P->KV + kvh) * P->T + j) * HD;
        for (int e = 0; e < HD; e++) ref[e] += p * dec(v[e]);
    }
    for (int e = 0; e < HD; e++) ref[e] = sum > 0 ? ref[e] / sum : 0;
    free(sc);
    return 1;
}

/* The float64 reference of a case's rows, split over threads: each takes the next block of
 * 16 query rows (all heads) until none is left. */
typedef struct ref_job {
    const prob *P;
    const wa_cfg *c;
    double *ref;
    int rows; /* B * S (varlen: the total) */
    int next; /* the next row block (atomic) */
} ref_job;

static void *ref_worker(void *arg)
{
    ref_job *j = arg;
    const prob *P = j->P;
    for (;;) {
        int r0 = __atomic_fetch_add(&j->next, 16, __ATOMIC_RELAXED);
        if (r0 >= j->rows) break;
        for (int row = r0; row < r0 + 16 && row < j->rows; row++) {
            int b = 0, s = row;
            if (P->varlen) {
                while (b + 1 < P->B && row >= P->cu[b + 1]) b++;
                s = row - P->cu[b];
            } else {
                b = row / P->S;
                s = row % P->S;
            }
            for (int h = 0; h < P->H; h++) {
                double *r = j->ref + ((long long)row * P->H + h) * P->HD;
                if (!reference(P, j->c, b, s, h, r))
                    for (int e = 0; e < P->HD; e++) r[e] = NAN;
            }
        }
    }
    return NULL;
}

/* Case w under each of the n configurations (the same head dim, dtype, mask and hooks; other
 * tiles, stages or knobs): one problem, one float64 reference, a launch and a check per
 * configuration; tags[i] names configuration i in the output (NULL: none). */
static void run_case_n(const wcase *w, const wa_cfg *cfgs, const char *const *tags, int n, int idx)
{
    const wa_cfg *c = &cfgs[0];
    g_bf16 = c->bf16;
    prob P;
    memset(&P, 0, sizeof P);
    P.B = w->B;
    P.H = w->H;
    P.KV = w->KV;
    P.T = w->T;
    P.HD = c->hd;
    P.use_pos = w->use_pos;
    memcpy(P.pos, w->pos, sizeof P.pos);
    P.varlen = c->varlen;
    P.S = w->S;
    if (P.varlen) {
        P.S = 0;
        for (int b = 0; b < P.B; b++) {
            P.cu[b + 1] = P.cu[b] + w->lens[b];
            if (w->lens[b] > P.S) P.S = w->lens[b];
        }
        P.total = P.cu[P.B];
    }
    prob_alloc(&P, 1);
    /* the reference of every stored row (NaN where the offset is invalid), on every core */
    double *ref = malloc(sizeof(double) * P.nout);
    ref_job job = {&P, c, ref, P.varlen ? P.total : P.B * P.S, 0};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = ncpu < 1 ? 1 : ncpu > 32 ? 32 : (int)ncpu;
    pthread_t th[32];
    int started = 0;
    while (started < nth - 1 && pthread_create(&th[started], NULL, ref_worker, &job) == 0) started++;
    ref_worker(&job);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    uint16_t *ho = malloc(P.nout * 2);
    for (int ci = 0; ci < n; ci++) {
        const wa_cfg *cc = &cfgs[ci];
        const char *tag = tags ? tags[ci] : NULL;
        const rt_kernel *k = find(cc);
        CHECK_MSG(k != NULL, "case %d%s%s: no kernel", idx, tag ? " " : "", tag ? tag : "");
        if (!k) continue;
        CUDA_OK(cudaMemset(P.dout, 0xFF, P.nout * 2));
        CHECK(launch(k, cc, &P, w->grid, 0) == 0);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(ho, P.dout, P.nout * 2, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        long long nonfinite = 0, nan_expected_missing = 0;
        for (int b = 0; b < P.B; b++) {
            int len = P.varlen ? P.cu[b + 1] - P.cu[b] : P.S;
            for (int s = 0; s < len; s++)
                for (int h = 0; h < P.H; h++) {
                    long long row = P.varlen ? P.cu[b] + s : (long long)b * P.S + s;
                    const uint16_t *o = ho + (row * P.H + h) * P.HD;
                    const double *r = ref + (row * P.H + h) * P.HD;
                    for (int e = 0; e < P.HD; e++) {
                        double g = dec(o[e]);
                        if (isnan(r[e])) nan_expected_missing += !isnan(g);
                        else if (!isfinite(g)) nonfinite++;
                        else {
                            num += (g - r[e]) * (g - r[e]);
                            den += r[e] * r[e];
                        }
                    }
                }
        }
        double rel = den > 0 ? sqrt(num / den) : 0, tol = cc->bf16 ? 1e-2 : 5e-3;
        printf("case %2d%s%s: hd%d bk%d st%d %s%s%s%s B=%d S=%d H=%d KV=%d T=%d: rel %.3g, nonfinite %lld\n", idx,
               tag ? " " : "", tag ? tag : "", cc->hd, cc->bk, cc->stages, cc->causal ? "causal " : "",
               cc->window ? "window " : "", cc->softcap > 0 ? "softcap " : "", cc->varlen ? "varlen " : "", P.B, P.S,
               P.H, P.KV, P.T, rel, nonfinite);
        CHECK_MSG(rel < tol && nonfinite == 0 && nan_expected_missing == 0,
                  "case %d%s%s: rel %.3g nonfinite %lld nan-missing %lld", idx, tag ? " " : "", tag ? tag : "", rel,
                  nonfinite, nan_expected_missing);
    }
    free(ho);
    free(ref);
    prob_free(&P);
}

static void run_case(const wcase *w, const wa_cfg *c, int idx, const char *tag)
{
    run_case_n(w, c, &tag, 1, idx);
}

/* ---- variants of the template's knobs -------------------------------------------- */

/* One configuration of attention_wgmma.cuh's knobs (or the base checkout's template):
 * bk, stages 0: the group's default (128 and 2; 64 above head dim 128). */
typedef struct variant {
    const char *name, *extra;
    int qbuf, bk, stages, base;
} variant;

#define O1 "#define KILN_ATT_ORDER 1\n"
#define SCHED_L2(mb) "#define KILN_ATT_SCHED 1\n#define KILN_ATT_L2SEC " #mb "*1048576ll\n"
#define COMBO O1 "#define KILN_ATT_TH 8\n" SCHED_L2(32) "#define KILN_ATT_HINT 1\n"
#define R56 "#define KILN_ATT_PREG 56\n#define KILN_ATT_CREG 224\n"
static const variant V128[] = { /* head dim 128 */
    {"base", NULL, 0, 0, 0, 1},
    {"o0", "#define KILN_ATT_ORDER 0\n", 0, 0, 0, 0},
    {"o1", O1, 0, 0, 0, 0},
    {"o1-r56", O1 R56, 0, 0, 0, 0},
    {"o1-st3", O1, 0, 0, 3, 0},
    {"o1-qpf", O1 "#define KILN_ATT_QPF 1\n", 0, 0, 0, 0},
    {"o1-qb2", O1, 2, 0, 0, 0},
    {"o1-free", O1 "#define KILN_ATT_FREE 1\n", 0, 0, 0, 0},
    {"o1-th8", O1 "#define KILN_ATT_TH 8\n", 0, 0, 0, 0},
    {"o1-hint", O1 "#define KILN_ATT_HINT 1\n", 0, 0, 0, 0},
    {"o1-dyn", O1 "#define KILN_ATT_SCHED 1\n", 0, 0, 0, 0},
    {"o1-dyn-l2s32", O1 SCHED_L2(32), 0, 0, 0, 0},
    {"combo", COMBO, 0, 0, 0, 0},
    {"combo-qpf", COMBO "#define KILN_ATT_QPF 1\n", 0, 0, 0, 0},
    {"combo-qb2", COMBO, 2, 0, 0, 0},
    {"combo-st3", COMBO, 0, 0, 3, 0},
    {"combo-qpf-free", COMBO "#define KILN_ATT_QPF 1\n#define KILN_ATT_FREE 1\n", 0, 0, 0, 0},
};
static const variant V96[] = { /* head dim 96 (column blocks padded to 128) */
    {"base", NULL, 0, 0, 0, 1},
    {"o0", "#define KILN_ATT_ORDER 0\n", 0, 0, 0, 0},
    {"o1", O1, 0, 0, 0, 0},
    {"o1-th8", O1 "#define KILN_ATT_TH 8\n", 0, 0, 0, 0},
    {"combo", COMBO, 0, 0, 0, 0},
    {"combo-qpf", COMBO "#define KILN_ATT_QPF 1\n", 0, 0, 0, 0},
    {"combo-qb2", COMBO, 2, 0, 0, 0},
    {"combo-st3", COMBO, 0, 0, 3, 0},
};
static const variant V256[] = { /* head dim 256 (no second Q buffer: it does not fit) */
    {"base", NULL, 0, 0, 0, 1},
    {"o1", O1, 0, 0, 0, 0},
    {"o1-th8", O1 "#define KILN_ATT_TH 8\n", 0, 0, 0, 0},
    {"combo", COMBO, 0, 0, 0, 0},
    {"o1-bk80", O1, 0, 80, 0, 0},
    {"combo-bk80", COMBO, 0, 80, 0, 0},
    {"combo-bk48-st3", COMBO, 0, 48, 3, 0},
};
static const variant VNC[] = { /* not causal, head dim 128: key tiles of 176 too (FlashAttention-3's) */
    {"base", NULL, 0, 0, 0, 1},
    {"o1", O1, 0, 0, 0, 0},
    {"combo", COMBO, 0, 0, 0, 0},
    {"combo-qpf", COMBO "#define KILN_ATT_QPF 1\n", 0, 0, 0, 0},
    {"o1-bk176", O1, 0, 176, 0, 0},
    {"combo-bk176", COMBO, 0, 176, 0, 0},
};
#define NV(a) ((int)(sizeof a / sizeof a[0]))

static wa_cfg apply(wa_cfg c, const variant *v)
{
    c.extra = v->extra;
    c.qbuf = v->qbuf;
    c.base = v->base;
    if (v->bk) c.bk = v->bk;
    if (v->stages) c.stages = v->stages;
    return c;
}

/* The sweep's groups: shapes (label, B, S, H, KV) of one head dim and mask, the variants
 * timed on them, and the correctness cases (indices of cases[], re-run with each variant's
 * knobs on the group's head dim and mask) that vouch for each variant first. */
typedef struct shape {
    const char *label;
    int B, S, H, KV;
} shape;
typedef struct group {
    int hd, causal;
    const variant *v;
    int nv;
    shape sh[5];
    int nsh;
    int checks[6];
    int nchecks;
} group;
static const group groups[] = {
    {128, 1, V128, NV(V128),
     {{"table", 4, 4096, 32, 8}, {"table", 1, 2048, 32, 8}, {"table", 1, 8192, 32, 8}, {"table", 1, 4096, 32, 8},
      {"table", 1, 512, 32, 8}},
     5, {0, 2, 3, 16, 17}, 5},
    {96, 1, V96, NV(V96), {{"table-hd96", 4, 4096, 42, 6}}, 1, {7, 8, 16}, 3},
    {256, 1, V256, NV(V256), {{"table-hd256", 4, 4096, 16, 4}}, 1, {9, 10, 16}, 3},
    {128, 0, VNC, NV(VNC), {{"table-noncausal", 1, 4096, 32, 8}}, 1, {1, 5, 16}, 3},
};
#define NGROUPS ((int)(sizeof groups / sizeof groups[0]))
/* the hooks (varlen, window, soft-cap) with the combined knobs */
static const int hook_cases[] = {18, 19, 20, 21};
static const variant VHOOK[] = {{"combo", COMBO, 0, 0, 0, 0},
                                {"combo-qpf", COMBO "#define KILN_ATT_QPF 1\n", 0, 0, 0, 0},
                                {"combo-qb2", COMBO, 2, 0, 0, 0}};

/* KILN_VARIANT=name: only the variants of that name (the compute-sanitizer runs) */
static int picked(const variant *v, int have_base)
{
    const char *only = getenv("KILN_VARIANT");
    if (v->base && !have_base) return 0;
    return !only || !strcmp(only, v->name);
}

/* case w with head dim hd and mask `causal` (the other fields as w has them) */
static wcase recase(const wcase *w, int hd, int causal)
{
    wcase x = *w;
    x.cfg.hd = hd;
    x.cfg.causal = causal;
    x.cfg.bk = hd > 128 ? 64 : 128;
    x.cfg.stages = 2;
    return x;
}

/* ---- bench -------------------------------------------------------------------- */

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* n values of roughly unit normal spread (the sum of four uniform 16-bit parts of a
 * xorshift64* draw), fast enough for the bench's gigabyte of inputs */
static void fill_fast(uint16_t *h, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t r = x * 0x2545F4914F6CDD1Dull;
        float u = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) + (float)((r >> 32) & 0xffff) + (float)(r >> 48);
        h[i] = enc((u - 131070.f) * (1.f / 37837.f)); /* sd of the sum: 65535 * sqrt(4 / 12) */
    }
}

/* The bench's inputs: 3 sets of device buffers big enough for every shape, random (never
 * zeros), each shape a view of them (KILN_BENCH_CHEAP=1: the old cheap values instead). */
typedef struct bench_mem {
    void *q[3], *k[3], *v[3], *o;
    size_t nq, nkv, no;
} bench_mem;

static int bench_mem_alloc(bench_mem *m)
{
    memset(m, 0, sizeof *m);
    m->nq = (size_t)4 * 4096 * (32 + 16) * 128; /* the largest: B=4, S=4096, 32 + 2 x 8 heads of 128 */
    m->nkv = (size_t)4 * 8 * 4096 * 128;
    m->no = (size_t)4 * 4096 * 32 * 128;
    size_t nh = m->nq > m->nkv ? m->nq : m->nkv;
    uint16_t *h = malloc(nh * 2);
    if (!h) return -1;
    for (int i = 0; i < 3; i++) {
        if (cudaMalloc(&m->q[i], m->nq * 2) != cudaSuccess || cudaMalloc(&m->k[i], m->nkv * 2) != cudaSuccess ||
            cudaMalloc(&m->v[i], m->nkv * 2) != cudaSuccess) {
            free(h);
            return -1;
        }
        fill_fast(h, m->nq, 3 * i + 1);
        CUDA_OK(cudaMemcpy(m->q[i], h, m->nq * 2, cudaMemcpyHostToDevice));
        fill_fast(h, m->nkv, 3 * i + 2);
        CUDA_OK(cudaMemcpy(m->k[i], h, m->nkv * 2, cudaMemcpyHostToDevice));
        fill_fast(h, m->nkv, 3 * i + 3);
        CUDA_OK(cudaMemcpy(m->v[i], h, m->nkv * 2, cudaMemcpyHostToDevice));
    }
    free(h);
    if (cudaMalloc(&m->o, m->no * 2) != cudaSuccess) return -1;
    return 0;
}

static void bench_mem_free(bench_mem *m)
{
    for (int i = 0; i < 3; i++) {
        cudaFree(m->q[i]);
        cudaFree(m->k[i]);
        cudaFree(m->v[i]);
    }
    cudaFree(m->o);
}

/* shape sh as set i of the bench's inputs (q rows of a fused [B, S, H + 2 KV, HD] buffer) */
static prob bench_prob(const bench_mem *m, int i, int B, int S, int H, int KV, int hd)
{
    prob P;
    memset(&P, 0, sizeof P);
    P.B = B;
    P.S = S;
    P.H = H;
    P.KV = KV;
    P.T = S;
    P.HD = hd;
    P.q_ss = (long long)(H + 2 * KV) * hd;
    P.q_sb = (long long)S * P.q_ss;
    P.dq = m->q[i];
    P.dk = m->k[i];
    P.dv = m->v[i];
    P.dout = m->o;
    return P;
}

/* Times every variant of vs on one shape, interleaved (20 rounds, each launching every
 * variant once on the next input set), CUDA events around each launch; prints a line per
 * variant: "bench attn <label>/<variant> B=.. S=.. ...: us (p10, p90), TFLOP/s". */
static void bench_shape(const bench_mem *m, const char *label, const wa_cfg *c0, const variant *vs, int nv, int B,
                        int S, int H, int KV)
{
    enum { R = 20 };
    float t[32][R];
    const rt_kernel *k[32];
    wa_cfg cf[32];
    if ((size_t)B * S * (H + 2 * KV) * c0->hd > m->nq || (size_t)B * KV * S * c0->hd > m->nkv ||
        (size_t)B * S * H * c0->hd > m->no || nv > 32) {
        fprintf(stderr, "bench %s: shape too big for the bench buffers\n", label);
        return;
    }
    g_bf16 = c0->bf16;
    for (int v = 0; v < nv; v++) {
        cf[v] = apply(*c0, &vs[v]);
        k[v] = find(&cf[v]);
    }
    prob P[3];
    for (int i = 0; i < 3; i++) P[i] = bench_prob(m, i, B, S, H, KV, c0->hd);
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    for (int v = 0; v < nv; v++)
        if (k[v])
            for (int i = 0; i < 3; i++) launch(k[v], &cf[v], &P[i], 0, 0);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < nv; v++) {
            if (!k[v]) continue;
            CUDA_OK(cudaEventRecord(e0, 0));
            launch(k[v], &cf[v], &P[(r + v) % 3], 0, 0);
            CUDA_OK(cudaEventRecord(e1, 0));
            CUDA_OK(cudaEventSynchronize(e1));
            CUDA_OK(cudaEventElapsedTime(&t[v][r], e0, e1));
        }
    CUDA_OK(cudaGetLastError());
    double pairs = c0->causal ? (double)S * (S + 1) / 2 : (double)S * S;
    double flops = 4.0 * c0->hd * pairs * H * B;
    for (int v = 0; v < nv; v++) {
        if (!k[v]) {
            printf("bench attn %s/%s: no kernel\n", label, vs[v].name);
            continue;
        }
        qsort(t[v], R, sizeof t[v][0], cmp_f);
        printf("bench attn %s%s%s B=%d S=%d H=%d KV=%d hd=%d bk=%d st=%d causal=%d: %.1f us (p10 %.1f p90 %.1f), %.1f "
               "TFLOP/s\n",
               label, vs[v].name[0] ? "/" : "", vs[v].name, B, S, H, KV, c0->hd, cf[v].bk, cf[v].stages, c0->causal, t[v][R / 2] * 1e3,
               t[v][R / 10] * 1e3, t[v][(R * 9) / 10] * 1e3, flops / (t[v][R / 2] * 1e-3) / 1e12);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

/* The table rows (label without a variant: the template's defaults), as bench/attn/table.py reads them */
static const variant VDEF[] = {{"", NULL, 0, 0, 0, 0}};

int main(void)
{
    if (gpu_sm90_or_skip()) return 77;
    const char *seed = getenv("KILN_SEED");
    rng_state = seed ? strtoull(seed, NULL, 10) : 0x5eedull;
    printf("seed %llu\n", (unsigned long long)rng_state);
    /* KILN_BENCH=1: the table rows after the cases; 2: and the sweep of the knobs (its
     * variants' correctness cases first); KILN_SWEEP=1 (without KILN_BENCH): the sweep's
     * correctness cases alone. KILN_BASE_SOURCE_DIR: the base checkout for variant "base". */
    int bench = getenv("KILN_BENCH") ? atoi(getenv("KILN_BENCH")) : 0;
    int sweep = bench >= 2 || (getenv("KILN_SWEEP") && atoi(getenv("KILN_SWEEP")));
    int have_base = getenv("KILN_BASE_SOURCE_DIR") != NULL;
    /* KILN_CASES=i,j,...: only those cases (the compute-sanitizer runs) */
    int sel[NCASES];
    const char *only = getenv("KILN_CASES");
    for (int i = 0; i < NCASES; i++) {
        sel[i] = !only;
        if (only) {
            char key[16];
            snprintf(key, sizeof key, ",%d,", i);
            char list_s[256];
            snprintf(list_s, sizeof list_s, ",%s,", only);
            sel[i] = strstr(list_s, key) != NULL;
        }
    }
    static wa_cfg list[160];
    int n = 0;
    for (int i = 0; i < NCASES; i++)
        if (sel[i]) want(list, &n, cases[i].cfg);
    /* the knobs' own cases: every variant of a group on the group's check cases, the combined
     * knobs on the hooks */
    for (int gi = 0; sweep && gi < NGROUPS; gi++) {
        const group *gr = &groups[gi];
        for (int v = 0; v < gr->nv; v++) {
            if (!picked(&gr->v[v], have_base)) continue;
            for (int j = 0; j < gr->nchecks; j++) {
                wcase x = recase(&cases[gr->checks[j]], gr->hd, gr->causal);
                if (cases[gr->checks[j]].cfg.varlen) continue;
                want(list, &n, apply(x.cfg, &gr->v[v]));
            }
            for (int si = 0; bench >= 2 && si < gr->nsh; si++) {
                wa_cfg c0 = C(1, gr->hd, gr->causal, gr->hd > 128 ? 64 : 128, 2);
                want(list, &n, apply(c0, &gr->v[v]));
            }
        }
    }
    for (int j = 0; sweep && j < (int)(sizeof hook_cases / sizeof hook_cases[0]); j++)
        for (int v = 0; v < NV(VHOOK); v++)
            if (picked(&VHOOK[v], have_base)) want(list, &n, apply(cases[hook_cases[j]].cfg, &VHOOK[v]));
    static const wa_cfg bcfg[] = {C(1, 128, 1, 128, 2), C(1, 96, 1, 128, 2), C(1, 256, 1, 64, 2), C(1, 128, 0, 128, 2)};
    if (bench)
        for (int i = 0; i < (int)(sizeof bcfg / sizeof bcfg[0]); i++) want(list, &n, bcfg[i]);
    CUDA_OK(cudaMalloc((void **)&g_sched, 64));
    CUDA_OK(cudaMemset(g_sched, 0, 64));
    CHECK(build(list, n) == 0);
    for (int i = 0; i < NCASES; i++)
        if (sel[i]) run_case(&cases[i], &cases[i].cfg, i, NULL);
    for (int gi = 0; sweep && gi < NGROUPS; gi++) {
        const group *gr = &groups[gi];
        static char tagbuf[32][96];
        static const char *tags[32];
        wa_cfg cs[32];
        for (int j = 0; j < gr->nchecks; j++) {
            if (cases[gr->checks[j]].cfg.varlen) continue;
            wcase x = recase(&cases[gr->checks[j]], gr->hd, gr->causal);
            int m = 0;
            for (int v = 0; v < gr->nv && m < 32; v++) {
                if (!picked(&gr->v[v], have_base)) continue;
                snprintf(tagbuf[m], sizeof tagbuf[m], "[hd%d%s %s]", gr->hd, gr->causal ? "" : " non-causal",
                         gr->v[v].name);
                tags[m] = tagbuf[m];
                cs[m++] = apply(x.cfg, &gr->v[v]);
            }
            if (m) run_case_n(&x, cs, tags, m, gr->checks[j]);
        }
    }
    for (int j = 0; sweep && j < (int)(sizeof hook_cases / sizeof hook_cases[0]); j++) {
        static const char *tags[NV(VHOOK)];
        wa_cfg cs[NV(VHOOK)];
        int m = 0;
        for (int v = 0; v < NV(VHOOK); v++) {
            if (!picked(&VHOOK[v], have_base)) continue;
            tags[m] = VHOOK[v].name;
            cs[m++] = apply(cases[hook_cases[j]].cfg, &VHOOK[v]);
        }
        if (m) run_case_n(&cases[hook_cases[j]], cs, tags, m, hook_cases[j]);
    }
    { /* the dynamic scheduler's counter is back to zero after every launch */
        int z[16];
        CUDA_OK(cudaMemcpy(z, g_sched, sizeof z, cudaMemcpyDeviceToHost));
        int nz = 0;
        for (int i = 0; i < 16; i++) nz += z[i] != 0;
        printf("scheduler counter after the cases: %d %s\n", z[0], nz ? "NOT ZERO" : "(zero)");
        CHECK_MSG(nz == 0, "the dynamic scheduler's counter was left at %d", z[0]);
    }
    if (bench) {
        bench_mem m;
        if (bench_mem_alloc(&m) != 0) {
            CHECK_MSG(0, "bench: out of device memory");
        } else {
            static const int Ss[] = {512, 2048, 4096, 8192};
            for (int i = 0; i < 4; i++) bench_shape(&m, "table", &bcfg[0], VDEF, 1, 1, Ss[i], 32, 8);
            bench_shape(&m, "table", &bcfg[0], VDEF, 1, 4, 4096, 32, 8);
            bench_shape(&m, "table-hd96", &bcfg[1], VDEF, 1, 4, 4096, 42, 6); /* 42 * 96 ~ 4096 */
            bench_shape(&m, "table-hd256", &bcfg[2], VDEF, 1, 4, 4096, 16, 4);
            bench_shape(&m, "table-noncausal", &bcfg[3], VDEF, 1, 1, 4096, 32, 8);
            for (int gi = 0; bench >= 2 && gi < NGROUPS; gi++) {
                const group *gr = &groups[gi];
                wa_cfg c0 = C(1, gr->hd, gr->causal, gr->hd > 128 ? 64 : 128, 2);
                for (int si = 0; si < gr->nsh; si++) {
                    char lab[64];
                    snprintf(lab, sizeof lab, "sweep-%s", gr->sh[si].label);
                    bench_shape(&m, lab, &c0, gr->v, gr->nv, gr->sh[si].B, gr->sh[si].S, gr->sh[si].H, gr->sh[si].KV);
                }
            }
            bench_mem_free(&m);
        }
    }
    cudaFree(g_sched);
    for (int i = 0; i < nkerns; i++) rt_module_free(kerns[i].mod);
    return CHECK_DONE();
}
