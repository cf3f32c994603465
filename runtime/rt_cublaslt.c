/* runtime/rt_cublaslt.c — cuBLASLt through dlopen and the matmul plans
 * (runtime/rt_cublaslt.h). */
#include "runtime/rt_cublaslt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_util.h"

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static rt_cublaslt_api api;    /* set once, in load_once */
static char lib_path[512];     /* set once: the path that loaded, "" when none did */
static char lib_why[2048];     /* set once: why none loaded */

static void load_once(void)
{
    static const char *const subs[] = {"lib64", "lib", "targets/x86_64-linux/lib"};
    char cand[40][512];
    int nc = rt_lib_candidates("KILN_CUBLASLT_LIB", "libcublasLt.so", CUBLAS_VER_MAJOR, subs, 3, NULL, NULL, cand, 40);
    const rt_lib_sym syms[] = {
        {"cublasLtCreate", (void **)&api.create},
        {"cublasLtDestroy", (void **)&api.destroy},
        {"cublasLtGetVersion", (void **)&api.get_version},
        {"cublasLtMatmulDescCreate", (void **)&api.desc_create},
        {"cublasLtMatmulDescDestroy", (void **)&api.desc_destroy},
        {"cublasLtMatmulDescSetAttribute", (void **)&api.desc_set},
        {"cublasLtMatrixLayoutCreate", (void **)&api.layout_create},
        {"cublasLtMatrixLayoutDestroy", (void **)&api.layout_destroy},
        {"cublasLtMatrixLayoutSetAttribute", (void **)&api.layout_set},
        {"cublasLtMatmulPreferenceCreate", (void **)&api.pref_create},
        {"cublasLtMatmulPreferenceDestroy", (void **)&api.pref_destroy},
        {"cublasLtMatmulPreferenceSetAttribute", (void **)&api.pref_set},
        {"cublasLtMatmulAlgoGetHeuristic", (void **)&api.heuristic},
        {"cublasLtMatmulAlgoConfigGetAttribute", (void **)&api.algo_config_get},
        {"cublasLtMatmul", (void **)&api.matmul},
    };
    (void)rt_lib_load(cand, nc, syms, (int)(sizeof syms / sizeof syms[0]), lib_path, sizeof lib_path, lib_why,
                      sizeof lib_why);
}

const rt_cublaslt_api *rt_cublaslt(char *err, size_t n)
{
    pthread_once(&lib_once, load_once);
    if (lib_path[0]) return &api;
    rt_fail(RT_ERR_NOT_FOUND, err, n, "cuBLASLt could not be loaded: %s (set KILN_CUBLASLT_LIB)", lib_why);
    return NULL;
}

bool rt_lt_forced(void)
{
    const char *e = getenv("KILN_FORCE_CUBLASLT");
    return e && e[0] == '1';
}

/* ---- plans ------------------------------------------------------------------------------- */

typedef struct lt_shape {
    int64_t m, n, k, batch, lda, ldw, sa, sw;
    uint32_t align[5]; /* bytes: W (cuBLASLt's A), the rows (its B), C, D, the bias */
    uint64_t bias;     /* the bias pointer the heuristic saw */
} lt_shape;

struct rt_lt_plan {
    const rt_cublaslt_api *L;
    lt_shape s;
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulAlgo_t algo;
    size_t ws;          /* the workspace the algorithm needs */
    int algo_id, splitk, reduction;
    rt_lt_plan *next;   /* the kernel's plans for other shapes (graphs captured at them stay valid) */
};
#define LT_MAX_PLANS 32 /* per kernel; the oldest beyond are freed */

static uint32_t align_of(uint64_t p)
{
    uint32_t a = 256;
    while (a > 1 && p % a) a /= 2;
    return a;
}

static uint64_t ptr_at(const cg_kernel *K, const unsigned char *args, int i)
{
    uint64_t v = 0;
    if (i >= 0 && i < K->nargs) memcpy(&v, args + K->args[i].offset, 8);
    return v;
}

static rt_status shape_of(const cg_kernel *K, const int64_t *dims, const unsigned char *args, lt_shape *s, char *err,
                          size_t n)
{
    const cg_lt *lt = &K->lt;
    const ir_dim *d[8] = {&lt->M, &lt->N, &lt->K, &lt->batch, &lt->lda, &lt->ldw, &lt->sa, &lt->sw};
    int64_t v[8];
    for (int i = 0; i < 8; i++)
        if (!ir_dim_value(d[i], dims, &v[i]))
            return rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: a cuBLASLt dim does not evaluate", K->name);
    memset(s, 0, sizeof *s);
    s->m = v[0], s->n = v[1], s->k = v[2], s->batch = v[3], s->lda = v[4], s->ldw = v[5], s->sa = v[6], s->sw = v[7];
    s->align[0] = align_of(ptr_at(K, args, lt->w_arg));
    s->align[1] = align_of(ptr_at(K, args, lt->a_arg));
    s->align[3] = align_of(ptr_at(K, args, lt->out_arg));
    s->align[2] = lt->residual ? align_of(ptr_at(K, args, lt->res_arg)) : s->align[3];
    s->bias = lt->bias ? ptr_at(K, args, lt->bias_arg) : 0;
    s->align[4] = lt->bias ? align_of(s->bias) : 256;
    return RT_OK;
}

static void plan_free_one(rt_lt_plan *p)
{
    const rt_cublaslt_api *L = p->L;
    if (p->la) (void)L->layout_destroy(p->la);
    if (p->lb) (void)L->layout_destroy(p->lb);
    if (p->lc) (void)L->layout_destroy(p->lc);
    if (p->ld) (void)L->layout_destroy(p->ld);
    if (p->op) (void)L->desc_destroy(p->op);
    if (p->h) (void)L->destroy(p->h);
    free(p);
}

void rt_lt_plan_free(rt_lt_plan *p)
{
    while (p) {
        rt_lt_plan *next = p->next;
        plan_free_one(p);
        p = next;
    }
}

static rt_status layout(const rt_cublaslt_api *L, cublasLtMatrixLayout_t *out, cudaDataType t, int64_t rows, int64_t cols,
                        int64_t ld, int64_t batch, int64_t stride, char *err, size_t n)
{
    RT_TRY(RT_CUBLAS_CHECK(L->layout_create(out, t, (uint64_t)rows, (uint64_t)cols, ld), "cuBLASLt layout", err, n));
    if (batch > 1) {
        int32_t b = (int32_t)batch;
        RT_TRY(RT_CUBLAS_CHECK(L->layout_set(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b), "cuBLASLt layout",
                               err, n));
        RT_TRY(RT_CUBLAS_CHECK(L->layout_set(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
                               "cuBLASLt layout", err, n));
    }
    return RT_OK;
}

static rt_status make_plan(rt_lt_plan *p, const cg_kernel *K, char *err, size_t n)
{
    const rt_cublaslt_api *L = p->L;
    const cg_lt *lt = &K->lt;
    const lt_shape *s = &p->s;
    const cudaDataType t = lt->f16 ? CUDA_R_16F : CUDA_R_16BF;
    RT_TRY(RT_CUBLAS_CHECK(L->create(&p->h), "cuBLASLt handle", err, n));
    RT_TRY(RT_CUBLAS_CHECK(L->desc_create(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cuBLASLt matmul", err, n));
    const cublasOperation_t ta = lt->b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    RT_TRY(RT_CUBLAS_CHECK(L->desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "cuBLASLt matmul", err, n));
    RT_TRY(RT_CUBLAS_CHECK(L->desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "cuBLASLt matmul", err, n));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (lt->act == CG_LT_ACT_RELU) epi = lt->bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    else if (lt->act == CG_LT_ACT_GELU_TANH) epi = lt->bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    else if (lt->bias) epi = CUBLASLT_EPILOGUE_BIAS;
    RT_TRY(RT_CUBLAS_CHECK(L->desc_set(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "cuBLASLt matmul", err, n));
    if (lt->bias) { /* the heuristic assumes the alignment of the pointer it sees: the run's (set again per launch) */
        const void *bp = (const void *)(uintptr_t)s->bias;
        RT_TRY(RT_CUBLAS_CHECK(L->desc_set(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp), "cuBLASLt bias",
                               err, n));
    }
    /* W: [N, K] rows of ldw (column-major K x N, transposed) or [K, N] (N x K); the rows: K x M */
    RT_TRY(layout(L, &p->la, t, lt->b_nk ? s->k : s->n, lt->b_nk ? s->n : s->k, s->ldw, s->batch, s->sw, err, n));
    RT_TRY(layout(L, &p->lb, t, s->k, s->m, s->lda, s->batch, s->sa, err, n));
    RT_TRY(layout(L, &p->lc, t, s->n, s->m, s->n, s->batch, s->m * s->n, err, n));
    RT_TRY(layout(L, &p->ld, t, s->n, s->m, s->n, s->batch, s->m * s->n, err, n));
    cublasLtMatmulPreference_t pref = NULL;
    rt_status st = RT_CUBLAS_CHECK(L->pref_create(&pref), "cuBLASLt preference", err, n);
    const uint64_t wsb = CG_LT_WORKSPACE;
    if (st == RT_OK)
        st = RT_CUBLAS_CHECK(L->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb),
                             "cuBLASLt preference", err, n);
    static const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == RT_OK; i++)
        st = RT_CUBLAS_CHECK(L->pref_set(pref, al[i], &s->align[i], sizeof s->align[i]), "cuBLASLt preference", err, n);
    cublasLtMatmulHeuristicResult_t res[8];
    int got = 0;
    if (st == RT_OK)
        st = RT_CUBLAS_CHECK(L->heuristic(p->h, p->op, p->la, p->lb, p->lc, p->ld, pref, 8, res, &got),
                             "cuBLASLt heuristic", err, n);
    if (pref) (void)L->pref_destroy(pref);
    if (st != RT_OK) return st;
    /* deterministic: no split-K, or a reduction in a separate pass (never the in-place one) */
    int pick = -1;
    for (int i = 0; i < got && pick < 0; i++) {
        uint32_t r = 0;
        size_t w = 0;
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > wsb) continue;
        if (L->algo_config_get(&res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &r, sizeof r, &w) ==
                CUBLAS_STATUS_SUCCESS &&
            r == CUBLASLT_REDUCTION_SCHEME_INPLACE)
            continue;
        pick = i;
    }
    if (pick < 0)
        return rt_fail(RT_ERR_CUDA, err, n, "kernel %s: cuBLASLt has no algorithm for M=%lld N=%lld K=%lld batch=%lld",
                       K->name, (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->batch);
    p->algo = res[pick].algo;
    p->ws = res[pick].workspaceSize;
    size_t w = 0;
    (void)L->algo_config_get(&p->algo, CUBLASLT_ALGO_CONFIG_ID, &p->algo_id, sizeof p->algo_id, &w);
    (void)L->algo_config_get(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &p->splitk, sizeof p->splitk, &w);
    (void)L->algo_config_get(&p->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &p->reduction, sizeof p->reduction, &w);
    return RT_OK;
}

rt_status rt_lt_prepare(rt_lt_plan **pp, const cg_kernel *K, const int64_t *dims, const unsigned char *args, char *err,
                        size_t n)
{
    lt_shape s;
    RT_TRY(shape_of(K, dims, args, &s, err, n));
    /* a plan of this shape, for an alignment the pointers have: to the front */
    int count = 0;
    for (rt_lt_plan **q = pp; *q; q = &(*q)->next, count++) {
        rt_lt_plan *p = *q;
        bool same = s.m == p->s.m && s.n == p->s.n && s.k == p->s.k && s.batch == p->s.batch && s.lda == p->s.lda &&
                    s.ldw == p->s.ldw && s.sa == p->s.sa && s.sw == p->s.sw;
        for (int i = 0; i < 5; i++) same &= s.align[i] >= p->s.align[i];
        if (!same) continue;
        *q = p->next;
        p->next = *pp;
        *pp = p;
        return RT_OK;
    }
    if (count >= LT_MAX_PLANS) { /* the oldest goes */
        rt_lt_plan **q = pp;
        while ((*q)->next) q = &(*q)->next;
        rt_lt_plan_free(*q);
        *q = NULL;
    }
    const rt_cublaslt_api *L = rt_cublaslt(err, n);
    if (!L) return RT_ERR_NOT_FOUND;
    rt_lt_plan *p = calloc(1, sizeof *p);
    if (!p) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    p->L = L;
    p->s = s;
    rt_status st = make_plan(p, K, err, n);
    if (st != RT_OK) {
        plan_free_one(p);
        return st;
    }
    p->next = *pp;
    *pp = p;
    return RT_OK;
}

rt_status rt_lt_launch(rt_lt_plan *p, const cg_kernel *K, const unsigned char *args, void *stream, char *err, size_t n)
{
    const rt_cublaslt_api *L = p->L;
    const cg_lt *lt = &K->lt;
    if (p->s.m == 0 || p->s.n == 0 || p->s.batch == 0) return RT_OK; /* nothing to do at these dims */
    const void *a = (const void *)(uintptr_t)ptr_at(K, args, lt->a_arg),
               *w = (const void *)(uintptr_t)ptr_at(K, args, lt->w_arg);
    void *d = (void *)(uintptr_t)ptr_at(K, args, lt->out_arg), *ws = (void *)(uintptr_t)ptr_at(K, args, lt->ws_arg);
    const void *c = lt->residual ? (const void *)(uintptr_t)ptr_at(K, args, lt->res_arg) : d;
    if (lt->bias) {
        const void *bp = (const void *)(uintptr_t)ptr_at(K, args, lt->bias_arg);
        RT_TRY(RT_CUBLAS_CHECK(L->desc_set(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp), "cuBLASLt bias",
                               err, n));
    }
    const float alpha = 1.f, beta = lt->residual ? 1.f : 0.f;
    char who[256];
    snprintf(who, sizeof who, "cuBLASLt matmul of kernel %s", K->name);
    return RT_CUBLAS_CHECK(L->matmul(p->h, p->op, &alpha, w, p->la, a, p->lb, &beta, c, p->lc, d, p->ld, &p->algo,
                                     p->ws ? ws : NULL, p->ws, (cudaStream_t)stream),
                           who, err, n);
}

const char *rt_lt_plan_describe(const rt_lt_plan *p, char *buf, size_t n)
{
    static const char *const red[] = {"none", "in place", "compute type", "", "output type"};
    snprintf(buf, n, "algo %d, split-k %d, reduction %s, workspace %zu bytes", p->algo_id, p->splitk,
             p->reduction >= 0 && p->reduction <= 4 ? red[p->reduction] : "?", p->ws);
    return buf;
}
