/* runtime/rt_sample.c — the GPU sampler (rt_sample.h). */
#include "runtime/rt_sample.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_cache.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_model_internal.h"

/* The kernels' argument, as codegen/kernels/sample.cuh declares SampleArgs. */
typedef struct sample_args {
    unsigned long long logits, cand_val, cand_idx, out, hist, step, rng, pos, force, force_len, seed;
    long long vocab, ld;
    int rows, nct, k, chunk;
    float temperature, top_p;
    int hist_cap, pos_add, force_cap, pad_;
    unsigned long long hidden, weight, counter;
    long long dmodel;
} sample_args;

#define SAMPLE_THREADS 256

struct rt_sampler {
    rt_sample_config cfg;
    void *stream; /* the context's: runs given no stream go there */
    int k, nct, chunk;
    rt_module *mod;
    rt_kernel partial, combine, head;
    void *cand_val, *cand_idx, *hist, *step, *rng, *counter;
};

void rt_sample_geometry(int64_t vocab, float temperature, int top_k, int *k, int *nct, int *chunk)
{
    int kk = temperature <= 0 ? 1 : top_k <= 0 || top_k > RT_SAMPLE_MAX_K ? RT_SAMPLE_MAX_K : top_k;
    int64_t c = (vocab + RT_SAMPLE_CHUNK_MIN - 1) / RT_SAMPLE_CHUNK_MIN;
    int64_t cmax = RT_SAMPLE_MAX_CANDS / kk;
    if (c > cmax) c = cmax;
    if (c < 1) c = 1;
    int64_t ch = (vocab + c - 1) / c;
    c = (vocab + ch - 1) / ch; /* no empty CTA */
    *k = kk;
    *nct = (int)c;
    *chunk = (int)ch;
}

bool rt_sample_head_geometry(int64_t vocab, int max_rows, int *nct, int *chunk)
{
    int64_t ch = (vocab + RT_HEAD_CTAS - 1) / RT_HEAD_CTAS;
    if (ch < RT_HEAD_CHUNK_MIN) ch = RT_HEAD_CHUNK_MIN;
    int64_t c = (vocab + ch - 1) / ch;
    if (c > RT_HEAD_MAX_NCT) {
        c = RT_HEAD_MAX_NCT;
        ch = (vocab + c - 1) / c;
    }
    if (c < 1) c = 1;
    c = (vocab + ch - 1) / ch; /* no empty CTA */
    *nct = (int)c;
    *chunk = (int)ch;
    return (int64_t)max_rows * ch * 4 <= RT_HEAD_MAX_SMEM;
}

void rt_sampler_free(rt_sampler *s)
{
    if (!s) return;
    void *bufs[] = {s->cand_val, s->cand_idx, s->hist, s->step, s->rng, s->counter};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) (void)cudaFree(bufs[i]);
    rt_module_free(s->mod);
    free(s);
}

rt_status rt_sampler_create(struct rt_ctx *ctx, const char *source, const rt_sample_config *cfg, rt_sampler **out,
                            char *err, size_t n)
{
    *out = NULL;
    if (!source || !cfg || cfg->vocab < 1 || cfg->ld < cfg->vocab || cfg->max_rows < 1 || cfg->hist_cap < 0)
        return rt_fail(RT_ERR_INVALID, err, n, "sampler: bad configuration");
    if (cfg->vocab > (int64_t)1 << 30) return rt_fail(RT_ERR_INVALID, err, n, "sampler: vocabulary over 2^30 tokens");
    rt_sampler *s = calloc(1, sizeof *s);
    if (!s) return rt_fail(RT_ERR_NOMEM, err, n, "sampler: out of memory");
    s->cfg = *cfg;
    s->stream = ctx->stream;
    rt_sample_geometry(cfg->vocab, cfg->temperature, cfg->top_k, &s->k, &s->nct, &s->chunk);
    if (cfg->dmodel > 0) {
        if (cfg->dmodel % 8 || cfg->dmodel > (int64_t)1 << 24) {
            free(s);
            return rt_fail(RT_ERR_INVALID, err, n, "sampler: the fused head needs a width that is a multiple of 8, got %lld",
                           (long long)cfg->dmodel);
        }
        if (!rt_sample_head_geometry(cfg->vocab, cfg->max_rows, &s->nct, &s->chunk)) {
            int chunk = s->chunk;
            free(s);
            return rt_fail(RT_ERR_INVALID, err, n,
                           "sampler: the fused head keeps %d rows x %d logits per CTA, over %d bytes of shared memory",
                           cfg->max_rows, chunk, RT_HEAD_MAX_SMEM);
        }
    }
    rt_compile_opts co = {.arch = ctx->arch};
    rt_compile_result res = {0};
    rt_status st = rt_cache_compile(ctx->cache, "kiln_sample", source, &co, ctx->no_cache ? RT_CACHE_NO_CACHE : 0, &res,
                                    NULL);
    if (st != RT_OK) {
        rt_fail(st, err, n, "sampler kernels: %s", res.message ? res.message : rt_status_str(st));
        rt_compile_result_free(&res);
        rt_sampler_free(s);
        return st;
    }
    /* compiled (and cached) first: a compile-only context fills the cache, then stops here */
    st = ctx->has_device ? rt_module_load(&s->mod, res.code.data, res.code.size, err, n)
                         : (rt_status)rt_fail(RT_ERR_NO_DEVICE, err, n, "sampler: no CUDA device");
    rt_compile_result_free(&res);
    size_t rows = (size_t)cfg->max_rows, cands = rows * (size_t)s->nct * (size_t)s->k;
    if (st == RT_OK) st = rt_module_kernel(s->mod, "kiln_sample_partial", &s->partial, err, n);
    if (st == RT_OK) st = rt_module_kernel(s->mod, "kiln_sample_combine", &s->combine, err, n);
    if (st == RT_OK) st = rt_module_kernel(s->mod, "kiln_sample_head", &s->head, err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc(&s->counter, 4), "sampler counter", err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMemset(s->counter, 0, 4), "sampler counter", err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc(&s->cand_val, cands * 4), "sampler workspace", err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc(&s->cand_idx, cands * 4), "sampler workspace", err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc(&s->step, rows * 4), "sampler steps", err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc(&s->rng, rows * 8), "sampler random state", err, n);
    if (st == RT_OK && cfg->hist_cap)
        st = RT_CUDA_CHECK(cudaMalloc(&s->hist, rows * (size_t)cfg->hist_cap * 4), "sampler history", err, n);
    size_t smem = (size_t)s->chunk * 4, csmem = (size_t)s->nct * (size_t)s->k * 8;
    if (cfg->dmodel <= 0) { /* the two-kernel sampler over logits */
        if (st == RT_OK && smem > 48 * 1024) st = rt_kernel_set_max_smem(&s->partial, smem, err, n);
        if (st == RT_OK && csmem > 48 * 1024) st = rt_kernel_set_max_smem(&s->combine, csmem, err, n);
    }
    size_t hsmem = (size_t)cfg->max_rows * (size_t)s->chunk * 4;
    if (st == RT_OK && cfg->dmodel > 0 && hsmem > 48 * 1024) st = rt_kernel_set_max_smem(&s->head, hsmem, err, n);
    if (st == RT_OK) st = rt_sampler_reset(s, ctx->stream, err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)ctx->stream), "sampler setup", err, n);
    if (st != RT_OK) {
        rt_sampler_free(s);
        return st;
    }
    *out = s;
    return RT_OK;
}

rt_status rt_sampler_reset(rt_sampler *s, void *stream, char *err, size_t n)
{
    size_t rows = (size_t)s->cfg.max_rows;
    RT_TRY(RT_CUDA_CHECK(cudaMemsetAsync(s->step, 0, rows * 4, (cudaStream_t)stream), "sampler reset", err, n));
    RT_TRY(RT_CUDA_CHECK(cudaMemsetAsync(s->rng, 0, rows * 8, (cudaStream_t)stream), "sampler reset", err, n));
    RT_TRY(RT_CUDA_CHECK(cudaMemsetAsync(s->counter, 0, 4, (cudaStream_t)stream), "sampler reset", err, n));
    return RT_OK;
}

rt_status rt_sampler_reset_rows(rt_sampler *s, int row0, int rows, void *stream, char *err, size_t n)
{
    if (row0 < 0 || rows < 1 || row0 + rows > s->cfg.max_rows)
        return rt_fail(RT_ERR_INVALID, err, n, "sampler: rows %d..%d outside its %d rows", row0, row0 + rows - 1,
                       s->cfg.max_rows);
    cudaStream_t st = (cudaStream_t)stream;
    RT_TRY(RT_CUDA_CHECK(cudaMemsetAsync((int *)s->step + row0, 0, (size_t)rows * 4, st), "sampler reset", err, n));
    return RT_CUDA_CHECK(cudaMemsetAsync((unsigned long long *)s->rng + row0, 0, (size_t)rows * 8, st), "sampler reset", err,
                         n);
}

rt_status rt_sampler_run(rt_sampler *s, const void *logits, void *out_ids, int rows, void *stream, char *err, size_t n)
{
    rt_sample_extra none = {0};
    return rt_sampler_run_ex(s, logits, out_ids, rows, &none, stream, err, n);
}

static sample_args make_args(const rt_sampler *s, const void *logits, void *out_ids, int rows, const rt_sample_extra *x)
{
    const size_t r0 = (size_t)x->row0; /* the per-row state of rows row0.. */
    return (sample_args){
        .logits = (unsigned long long)(uintptr_t)logits,
        .cand_val = (unsigned long long)(uintptr_t)s->cand_val,
        .cand_idx = (unsigned long long)(uintptr_t)s->cand_idx,
        .out = (unsigned long long)(uintptr_t)out_ids,
        .hist = s->hist ? (unsigned long long)(uintptr_t)((int *)s->hist + r0 * (size_t)s->cfg.hist_cap) : 0,
        .step = (unsigned long long)(uintptr_t)((int *)s->step + r0),
        .rng = (unsigned long long)(uintptr_t)((unsigned long long *)s->rng + r0),
        .seed = s->cfg.seed,
        .vocab = s->cfg.vocab,
        .ld = s->cfg.ld,
        .rows = rows,
        .nct = s->nct,
        .k = s->k,
        .chunk = s->chunk,
        .temperature = s->cfg.temperature,
        .top_p = s->cfg.top_p,
        .hist_cap = s->cfg.hist_cap,
        .pos = (unsigned long long)(uintptr_t)x->pos,
        .pos_add = x->pos_add,
        .force = (unsigned long long)(uintptr_t)x->force,
        .force_len = (unsigned long long)(uintptr_t)x->force_len,
        .force_cap = x->force_cap,
        .counter = (unsigned long long)(uintptr_t)s->counter,
        .dmodel = s->cfg.dmodel,
    };
}

rt_status rt_sampler_run_ex(rt_sampler *s, const void *logits, void *out_ids, int rows, const rt_sample_extra *x,
                            void *stream, char *err, size_t n)
{
    if (!stream) stream = s->stream;
    if (s->cfg.dmodel > 0) return rt_fail(RT_ERR_INVALID, err, n, "sampler: this one computes the LM head: run_head");
    if (rows < 1 || x->row0 < 0 || x->row0 + rows > s->cfg.max_rows || !logits || !out_ids)
        return rt_fail(RT_ERR_INVALID, err, n, "sampler: rows %d..%d (at most %d) or a NULL pointer", x->row0,
                       x->row0 + rows - 1, s->cfg.max_rows);
    sample_args a = make_args(s, logits, out_ids, rows, x);
    RT_TRY(rt_launch(&s->partial, (rt_dim3){(unsigned)s->nct, (unsigned)rows, 1}, (rt_dim3){SAMPLE_THREADS, 1, 1},
                     (size_t)s->chunk * 4, stream, &a, sizeof a, err, n));
    return rt_launch(&s->combine, (rt_dim3){(unsigned)rows, 1, 1}, (rt_dim3){SAMPLE_THREADS, 1, 1},
                     (size_t)s->nct * (size_t)s->k * 8, stream, &a, sizeof a, err, n);
}

rt_status rt_sampler_run_head(rt_sampler *s, const void *hidden, const void *weight, void *logits, void *out_ids, int rows,
                              const rt_sample_extra *x, void *stream, char *err, size_t n)
{
    if (!stream) stream = s->stream;
    if (s->cfg.dmodel <= 0) return rt_fail(RT_ERR_INVALID, err, n, "sampler: created without the fused head (dmodel 0)");
    if (rows < 1 || x->row0 < 0 || x->row0 + rows > s->cfg.max_rows || !hidden || !weight || !out_ids)
        return rt_fail(RT_ERR_INVALID, err, n, "sampler: rows %d..%d (at most %d) or a NULL pointer", x->row0,
                       x->row0 + rows - 1, s->cfg.max_rows);
    if (((uintptr_t)hidden | (uintptr_t)weight) & 15)
        return rt_fail(RT_ERR_INVALID, err, n, "sampler: the fused head reads 16-byte aligned inputs and weights");
    sample_args a = make_args(s, logits, out_ids, rows, x);
    a.hidden = (unsigned long long)(uintptr_t)hidden;
    a.weight = (unsigned long long)(uintptr_t)weight;
    return rt_launch(&s->head, (rt_dim3){(unsigned)s->nct, 1, 1}, (rt_dim3){SAMPLE_THREADS, 1, 1},
                     (size_t)rows * (size_t)s->chunk * 4, stream, &a, sizeof a, err, n);
}

bool rt_sampler_is_head(const rt_sampler *s) { return s->cfg.dmodel > 0; }

const void *rt_sampler_history(const rt_sampler *s) { return s->hist; }
int rt_sampler_hist_cap(const rt_sampler *s) { return s->cfg.hist_cap; }
int rt_sampler_max_rows(const rt_sampler *s) { return s->cfg.max_rows; }
