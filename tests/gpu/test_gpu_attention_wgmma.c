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
 * KILN_BENCH=1 adds timings (CUDA events, median of 20 launches after warm-up, 3 input sets
 * in rotation): the prefill table of bench/attn (causal, 32 query / 8 KV heads, hd 128 at
 * S 512..8192, B 4 at 4096, hd 96 and 256 at equal total work) and a sweep of key tiles and
 * stages at S 4096; one line per row, "bench attn ..." with TFLOP/s (causal FLOPs: 4 * HD per
 * visible (query, key) pair per head); KILN_BENCH=3: the B=4 S=4096 rows alone, the cheap inputs
 * against normal random ones, 2 and 3 stages. KILN_CASES=i,j,... runs only those cases. Exit 77 without a device of compute capability 9.x. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

#define C(bf, hd, ca, bk, st) {bf, hd, ca, bk, st, 0, 0, 0.0}
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
    {{1, 128, 1, 128, 2, 100, 0, 0.0}, 2, 300, 8, 2, 300, 0, {0}, {0}, 0},   /* sliding window */
    {{1, 64, 0, 128, 2, 0, 0, 20.0}, 2, 200, 8, 2, 200, 0, {0}, {0}, 0},     /* soft-cap */
    {{1, 128, 1, 128, 2, 0, 1, 0.0}, 3, 0, 8, 2, 600, 1, {0, 7, 300}, {100, 1, 257}, 0},  /* varlen */
    {{1, 96, 0, 64, 2, 0, 1, 0.0}, 3, 0, 8, 8, 400, 0, {0}, {64, 130, 5}, 0},             /* varlen, T - len */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- kernels ------------------------------------------------------------------ */

typedef struct wkern {
    wa_cfg cfg;
    rt_module *mod;
    rt_kernel k;
} wkern;
static wkern kerns[64];
static int nkerns;

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
    static const char *const vopt[] = {"--ptxas-options=-v"};
    rt_compile_opts opts = {.arch = "sm_90a", .extra = vopt, .nextra = 1};
    rt_nvrtc_compile_many(n, (const char *const *)names, (const char *const *)srcs, &opts, RT_TARGET_CUBIN, res, 0,
                          NULL, NULL);
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
            printf("kernel hd%d bk%d st%d causal%d win%d cap%g varlen%d %s: %s\n", c->hd, c->bk, c->stages, c->causal,
                   c->window, c->softcap, c->varlen, c->bf16 ? "bf16" : "f16",
                   strstr(lg, "Performance Loss") ? "wgmma serialized (ptxas C75xx)" : "wgmma pipelined");
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

static void run_case(const wcase *w, int idx)
{
    const wa_cfg *c = &w->cfg;
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
    const rt_kernel *k = find(c);
    CHECK_MSG(k != NULL, "case %d: no kernel", idx);
    if (!k) {
        prob_free(&P);
        return;
    }
    CUDA_OK(cudaMemset(P.dout, 0xFF, P.nout * 2));
    CHECK(launch(k, c, &P, w->grid, 0) == 0);
    CUDA_OK(cudaDeviceSynchronize());
    uint16_t *ho = malloc(P.nout * 2);
    CUDA_OK(cudaMemcpy(ho, P.dout, P.nout * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0, *ref = malloc(sizeof(double) * (size_t)P.HD);
    long long nonfinite = 0, nan_expected_missing = 0;
    for (int b = 0; b < P.B; b++) {
        int len = P.varlen ? P.cu[b + 1] - P.cu[b] : P.S;
        for (int s = 0; s < len; s++)
            for (int h = 0; h < P.H; h++) {
                long long row = P.varlen ? P.cu[b] + s : (long long)b * P.S + s;
                const uint16_t *o = ho + (row * P.H + h) * P.HD;
                if (!reference(&P, c, b, s, h, ref)) {
                    for (int e = 0; e < P.HD; e++)
                        if (!isnan(dec(o[e]))) nan_expected_missing++;
                    continue;
                }
                for (int e = 0; e < P.HD; e++) {
                    double g = dec(o[e]);
                    if (!isfinite(g)) nonfinite++;
                    else {
                        num += (g - ref[e]) * (g - ref[e]);
                        den += ref[e] * ref[e];
                    }
                }
            }
    }
    double rel = den > 0 ? sqrt(num / den) : 0, tol = c->bf16 ? 1e-2 : 5e-3;
    printf("case %2d: hd%d bk%d st%d %s%s%s%s B=%d S=%d H=%d KV=%d T=%d: rel %.3g, nonfinite %lld\n", idx, c->hd, c->bk,
           c->stages, c->causal ? "causal " : "", c->window ? "window " : "", c->softcap > 0 ? "softcap " : "",
           c->varlen ? "varlen " : "", P.B, P.S, P.H, P.KV, P.T, rel, nonfinite);
    CHECK_MSG(rel < tol && nonfinite == 0 && nan_expected_missing == 0, "case %d: rel %.3g nonfinite %lld nan-missing %lld",
              idx, rel, nonfinite, nan_expected_missing);
    free(ho);
    free(ref);
    prob_free(&P);
}

/* ---- bench -------------------------------------------------------------------- */

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void bench_row_data(const char *label, const wa_cfg *c, int B, int S, int H, int KV, int random);
static void bench_row(const char *label, const wa_cfg *c, int B, int S, int H, int KV)
{
    bench_row_data(label, c, B, S, H, KV, 0);
}

/* random 1: normal random inputs (as `kiln run --random`), 0: the cheap deterministic ones */
static void bench_row_data(const char *label, const wa_cfg *c, int B, int S, int H, int KV, int random)
{
    const rt_kernel *k = find(c);
    if (!k) return;
    g_bf16 = c->bf16;
    prob P[3];
    for (int i = 0; i < 3; i++) {
        memset(&P[i], 0, sizeof P[i]);
        P[i].B = B;
        P[i].S = S;
        P[i].H = H;
        P[i].KV = KV;
        P[i].T = S;
        P[i].HD = c->hd;
        prob_alloc(&P[i], random);
    }
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) launch(k, c, &P[i], 0, 0);
    float t[20];
    for (int r = 0; r < 20; r++) {
        CUDA_OK(cudaEventRecord(e0, 0));
        launch(k, c, &P[r % 3], 0, 0);
        CUDA_OK(cudaEventRecord(e1, 0));
        CUDA_OK(cudaEventSynchronize(e1));
        CUDA_OK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    CUDA_OK(cudaGetLastError());
    qsort(t, 20, sizeof t[0], cmp_f);
    double pairs = c->causal ? (double)S * (S + 1) / 2 : (double)S * S;
    double flops = 4.0 * c->hd * pairs * H * B;
    printf("bench attn %s B=%d S=%d H=%d KV=%d hd=%d bk=%d st=%d causal=%d: %.1f us (p10 %.1f p90 %.1f), %.1f TFLOP/s\n",
           label, B, S, H, KV, c->hd, c->bk, c->stages, c->causal, t[10] * 1e3, t[2] * 1e3, t[18] * 1e3,
           flops / (t[10] * 1e-3) / 1e12);
    for (int i = 0; i < 3; i++) prob_free(&P[i]);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

int main(void)
{
    if (gpu_sm90_or_skip()) return 77;
    const char *seed = getenv("KILN_SEED");
    rng_state = seed ? strtoull(seed, NULL, 10) : 0x5eedull;
    printf("seed %llu\n", (unsigned long long)rng_state);
    int bench = getenv("KILN_BENCH") ? atoi(getenv("KILN_BENCH")) : 0; /* 3: the B=4 S=4096 rows alone */
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
    wa_cfg list[64];
    int n = 0;
    for (int i = 0; i < NCASES; i++)
        if (sel[i]) want(list, &n, cases[i].cfg);
    static const wa_cfg bcfg[] = {C(1, 128, 1, 128, 2), C(1, 128, 1, 128, 3), C(1, 128, 1, 64, 4), C(1, 128, 1, 112, 2),
                                  C(1, 128, 1, 96, 2),  C(1, 96, 1, 128, 2), C(1, 96, 1, 64, 3),  C(1, 256, 1, 64, 2),
                                  C(1, 256, 1, 80, 2),  C(1, 256, 1, 48, 3), C(1, 128, 0, 128, 2)};
    if (bench)
        for (int i = 0; i < (int)(sizeof bcfg / sizeof bcfg[0]); i++) want(list, &n, bcfg[i]);
    CHECK(build(list, n) == 0);
    for (int i = 0; i < NCASES; i++)
        if (sel[i]) run_case(&cases[i], i);
    if (bench == 3) { /* B=4 S=4096 only: the cheap inputs against random ones, 2 and 3 stages */
        for (int r = 0; r < 2; r++) {
            bench_row_data(r ? "b4-random" : "b4-cheap", &bcfg[0], 4, 4096, 32, 8, r);
            bench_row_data(r ? "b4-random" : "b4-cheap", &bcfg[1], 4, 4096, 32, 8, r);
        }
    } else if (bench) {
        static const int Ss[] = {512, 2048, 4096, 8192};
        for (int i = 0; i < 4; i++) bench_row("table", &bcfg[0], 1, Ss[i], 32, 8);
        bench_row("table", &bcfg[0], 4, 4096, 32, 8);
        bench_row("table-hd96", &bcfg[5], 4, 4096, 42, 6); /* 42 * 96 ~ 4096 */
        bench_row("table-hd256", &bcfg[7], 4, 4096, 16, 4);
        bench_row("table-noncausal", &bcfg[10], 1, 4096, 32, 8);
        for (int i = 0; i < (int)(sizeof bcfg / sizeof bcfg[0]) - 1; i++) {
            int H = bcfg[i].hd == 128 ? 32 : bcfg[i].hd == 96 ? 42 : 16, KV = bcfg[i].hd == 256 ? 4 : 8;
            if (H == 42) KV = 6;
            bench_row("sweep", &bcfg[i], 4, 4096, H, KV);
        }
    }
    for (int i = 0; i < nkerns; i++) rt_module_free(kerns[i].mod);
    return CHECK_DONE();
}
