/* runtime/rt_wmodel_gen.c — token generation over a whole model (rt_wmodel.h). */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_wmodel.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/rt_model_internal.h"

static const int DEFAULT_BUCKETS[] = {1, 2, 4, 8, 16, 32};

int rt_gen_bucket(const int *buckets, int nbuckets, int nseq, int64_t max_b, int *miss)
{
    if (!buckets) {
        buckets = DEFAULT_BUCKETS;
        nbuckets = (int)(sizeof DEFAULT_BUCKETS / sizeof DEFAULT_BUCKETS[0]);
    }
    *miss = 0;
    if (nseq < 1 || nseq > max_b) return -1;
    for (int i = 0; i < nbuckets; i++)
        if (buckets[i] >= nseq && buckets[i] <= max_b) return buckets[i];
    *miss = 1;
    return nseq;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static const char *or_default(const char *s, const char *d) { return s ? s : d; }

static int find_sym(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->nsyms; i++)
        if (!strcmp(g->syms[i], name)) return i;
    return -1;
}

rt_status rt_gen_check_model(const rt_model *m, const rt_gen_config *cfg, int64_t *vocab, int64_t *dmodel, char *err,
                             size_t n)
{
    const ir_graph *g = m->g;
    const bool head = m->plan.head;
    const char *ids = or_default(cfg->ids, "ids"), *pos = or_default(cfg->pos, "pos"),
               *logits = or_default(cfg->logits, head ? "head_in" : "logits");
    const char *dims[] = {"B", "S", "T"};
    for (int i = 0; i < 3; i++)
        if (find_sym(g, dims[i]) < 0)
            return rt_fail(RT_ERR_INVALID, err, n, "generate: model %s has no dim %s (a generation model has dims B, S, T)",
                           g->name, dims[i]);
    int ni = 0;
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *p = g->params[i];
        if (p->op != IR_OP_INPUT) continue;
        ni++;
        if (strcmp(p->name, ids) && strcmp(p->name, pos))
            return rt_fail(RT_ERR_INVALID, err, n, "generate: model %s has an input '%s' besides %s and %s", g->name, p->name,
                           ids, pos);
        if (p->type.dtype != IR_I32)
            return rt_fail(RT_ERR_INVALID, err, n, "generate: input '%s' must be i32", p->name);
    }
    if (ni != 2 || rt_model_find_param(m, ids) < 0 || rt_model_find_param(m, pos) < 0)
        return rt_fail(RT_ERR_INVALID, err, n, "generate: model %s needs the inputs %s : i32[B, S] and %s : i32[B]", g->name,
                       ids, pos);
    const char *want = head ? "[B, 1, D] (the LM head's input: compiled with head_sample)" : "[B, 1, V]";
    if (g->noutputs != 1 || strcmp(g->outputs[0].name, logits))
        return rt_fail(RT_ERR_INVALID, err, n, "generate: model %s needs exactly one output, %s %s", g->name, logits, want);
    const ir_type *t = &g->outputs[0].value->type;
    int64_t shape[IR_MAX_RANK];
    if (t->dtype != IR_BF16 || t->rank < 2 || !ir_type_shape_at(t, m->maxd, shape, NULL))
        return rt_fail(RT_ERR_INVALID, err, n, "generate: output %s must be bf16 %s", logits, want);
    *vocab = shape[t->rank - 1];
    *dmodel = 0;
    if (head) {
        int64_t ws[IR_MAX_RANK];
        const ir_type *wt = &g->params[m->plan.head_weight]->type;
        if (!ir_type_shape_at(wt, m->maxd, ws, NULL) || wt->rank != 2 || ws[1] != shape[t->rank - 1])
            return rt_fail(RT_ERR_INVALID, err, n, "generate: the LM head's weight %s does not take the %lld-wide %s",
                           g->params[m->plan.head_weight]->name, (long long)shape[t->rank - 1], logits);
        *dmodel = ws[1];
        *vocab = ws[0];
    }
    return RT_OK;
}

typedef struct gen_bufs {
    int32_t *ids_pre, *ids_step, *pos, *force, *force_len;
    void *logits;
} gen_bufs;

static void free_bufs(gen_bufs *b)
{
    void *p[] = {b->ids_pre, b->ids_step, b->pos, b->force, b->force_len, b->logits};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) (void)cudaFree(p[i]);
}

static bool is_stop(const rt_gen_config *cfg, int32_t t)
{
    for (int i = 0; i < cfg->nstop; i++)
        if (cfg->stop[i] == t) return true;
    return false;
}

/* Tokens of row b generated so far (out of hist), its count; stopped when it
 * holds a stop token. */
static int row_tokens(const rt_gen_config *cfg, const int32_t *hist, int cap, int b, int first, int steps, int32_t *out,
                      bool *stopped)
{
    int k = 0;
    *stopped = false;
    for (int s = first; s < steps && s < cap && k < cfg->max_new; s++) {
        int32_t t = hist[(size_t)b * (size_t)cap + (size_t)s];
        if (out) out[k] = t;
        k++;
        if (is_stop(cfg, t)) {
            *stopped = true;
            break;
        }
    }
    return k;
}

/* One sampler step over the model's output: logits, or (head_w) the LM head's input. */
static rt_status sample(rt_sampler *smp, const void *head_w, const void *model_out, void *ids, int rows,
                        const rt_sample_extra *x, void *stream, char *err, size_t n)
{
    if (head_w) return rt_sampler_run_head(smp, model_out, head_w, NULL, ids, rows, x, stream, err, n);
    return rt_sampler_run_ex(smp, model_out, ids, rows, x, stream, err, n);
}

rt_status rt_generate(rt_model *m, rt_sampler *smp, const rt_gen_config *cfg, int nseq, const int32_t *const *prompts,
                      const int *len, int32_t *out, int *out_len, rt_gen_stats *stats, char *err, size_t n)
{
    memset(stats, 0, sizeof *stats);
    int64_t vocab, dmodel;
    RT_TRY(rt_gen_check_model(m, cfg, &vocab, &dmodel, err, n));
    if (rt_sampler_is_head(smp) != (dmodel > 0))
        return rt_fail(RT_ERR_INVALID, err, n, "generate: the model %s the LM head to the sampler, the sampler %s",
                       dmodel > 0 ? "leaves" : "computes", rt_sampler_is_head(smp) ? "computes it too" : "does not");
    const void *head_w = dmodel > 0 ? m->weight_ptr[m->plan.head_weight] : NULL;
    int64_t out_w = dmodel > 0 ? dmodel : vocab; /* the model output's width: the head's input or the logits */
    const ir_graph *g = m->g;
    int sb = find_sym(g, "B"), ss = find_sym(g, "S"), stt = find_sym(g, "T");
    int64_t maxb = m->maxd[sb], maxs = m->maxd[ss], maxt = m->maxd[stt];
    if (nseq < 1 || !prompts || !len || !out || !out_len || cfg->max_new < 1)
        return rt_fail(RT_ERR_INVALID, err, n, "generate: no prompts, or max_new < 1");
    int lmin = 0, lmax = 0;
    for (int b = 0; b < nseq; b++) {
        if (len[b] < 1 || !prompts[b]) return rt_fail(RT_ERR_INVALID, err, n, "generate: prompt %d is empty", b);
        for (int j = 0; j < len[b]; j++)
            if (prompts[b][j] < 0 || prompts[b][j] >= vocab)
                return rt_fail(RT_ERR_INVALID, err, n, "generate: prompt %d: token %d is %d, outside the vocabulary of %lld",
                               b, j, prompts[b][j], (long long)vocab);
        lmin = b == 0 || len[b] < lmin ? len[b] : lmin;
        lmax = len[b] > lmax ? len[b] : lmax;
    }
    if ((int64_t)lmax + cfg->max_new - 1 > maxt)
        return rt_fail(RT_ERR_INVALID, err, n,
                       "generate: the longest prompt (%d tokens) and %d new tokens need %lld cache positions; the model's "
                       "max T is %lld",
                       lmax, cfg->max_new, (long long)lmax + cfg->max_new - 1, (long long)maxt);
    int miss;
    int batch = rt_gen_bucket(cfg->buckets, cfg->nbuckets, nseq, maxb, &miss);
    if (batch < 0)
        return rt_fail(RT_ERR_INVALID, err, n, "generate: %d sequences, but the model's max B is %lld", nseq, (long long)maxb);
    int hist_need = (lmax - lmin) + cfg->max_new, cap = rt_sampler_hist_cap(smp);
    if (cap < hist_need)
        return rt_fail(RT_ERR_INVALID, err, n, "generate: the sampler keeps %d tokens per row, %d are needed", cap, hist_need);
    int chunk = cfg->prefill_chunk > 0 ? cfg->prefill_chunk : lmin;
    if (chunk > maxs) chunk = (int)maxs;
    if (chunk > lmin) chunk = lmin;
    int fcap = lmax - lmin > 0 ? lmax - lmin : 1;
    stats->batch = batch;
    stats->bucket_miss = miss;

    cudaStream_t stream = (cudaStream_t)m->ctx->stream;
    gen_bufs d = {0};
    int32_t *host = NULL, *hist = NULL;
    rt_status st = RT_OK;
    size_t rows = (size_t)batch;
    size_t host_n = rows * (size_t)(chunk > fcap ? chunk : fcap) + rows;
    host = calloc(host_n, sizeof *host);
    hist = calloc(rows * (size_t)cap, sizeof *hist);
    if (!host || !hist) {
        st = rt_fail(RT_ERR_NOMEM, err, n, "generate: out of memory");
        goto out;
    }
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMalloc((void **)&d.ids_pre, rows * (size_t)chunk * 4), "generate", err, n));
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMalloc((void **)&d.ids_step, rows * 4), "generate", err, n));
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMalloc((void **)&d.pos, rows * 4), "generate", err, n));
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMalloc((void **)&d.force, rows * (size_t)fcap * 4), "generate", err, n));
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMalloc((void **)&d.force_len, rows * 4), "generate", err, n));
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMalloc(&d.logits, rows * (size_t)out_w * 2), "generate", err, n));
    /* the prompts' tails as forced tokens */
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < fcap; j++)
            host[(size_t)b * (size_t)fcap + (size_t)j] = b < nseq && lmin + j < len[b] ? prompts[b][lmin + j] : 0;
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMemcpy(d.force, host, rows * (size_t)fcap * 4, cudaMemcpyHostToDevice), "generate", err, n));
    for (int b = 0; b < batch; b++) host[b] = b < nseq ? len[b] - lmin : 0;
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMemcpy(d.force_len, host, rows * 4, cudaMemcpyHostToDevice), "generate", err, n));
    RT_TRY_GOTO(st, out, rt_model_zero_states(m, err, n));
    RT_TRY_GOTO(st, out, rt_sampler_reset(smp, stream, err, n));
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
    const char *ids_name = or_default(cfg->ids, "ids"), *pos_name = or_default(cfg->pos, "pos"),
               *logits_name = or_default(cfg->logits, dmodel > 0 ? "head_in" : "logits");
    int64_t dims[IR_MAX_SYMS];
    for (int i = 0; i < g->nsyms; i++) dims[i] = m->maxd[i];
    dims[sb] = batch;
    rt_tensor_ptr outs[] = {{logits_name, d.logits}};

    double t0 = now_ms();
    /* prefill: the common prompt, in chunks */
    for (int off = 0; off < lmin; off += chunk) {
        int c = lmin - off < chunk ? lmin - off : chunk;
        for (int b = 0; b < batch; b++)
            for (int j = 0; j < c; j++) host[(size_t)b * (size_t)c + (size_t)j] = b < nseq ? prompts[b][off + j] : 0;
        RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMemcpyAsync(d.ids_pre, host, rows * (size_t)c * 4, cudaMemcpyHostToDevice, stream),
                                           "generate", err, n));
        for (int b = 0; b < batch; b++) host[rows * (size_t)c + (size_t)b] = off;
        RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMemcpyAsync(d.pos, host + rows * (size_t)c, rows * 4, cudaMemcpyHostToDevice, stream),
                                           "generate", err, n));
        /* the pageable copies are staged before they return, but the next chunk reuses host: wait */
        RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
        dims[ss] = c;
        rt_tensor_ptr ins[] = {{ids_name, d.ids_pre}, {pos_name, d.pos}};
        RT_TRY_GOTO(st, out, rt_model_run(m, dims, ins, 2, outs, 1, NULL, err, n));
        stats->prefill_calls++;
        if (off + c == lmin) {
            rt_sample_extra x = {d.pos, c, d.force, d.force_len, fcap};
            RT_TRY_GOTO(st, out, sample(smp, head_w, d.logits, d.ids_step, batch, &x, stream, err, n));
        }
    }
    /* decode: one S = 1 call per step for the whole batch */
    dims[ss] = 1;
    rt_tensor_ptr ins[] = {{ids_name, d.ids_step}, {pos_name, d.pos}};
    rt_sample_extra x = {d.pos, 1, d.force, d.force_len, fcap};
    int steps = 1; /* sampler steps done: the history holds this many tokens per row */
    int first_all = lmax - lmin; /* the step whose token is every sequence's first new one */
    double tt = -1;
    if (first_all == 0) {
        RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
        tt = now_ms();
    }
    int total_steps = (lmax - lmin) + cfg->max_new;
    while (steps < total_steps) {
        RT_TRY_GOTO(st, out, rt_model_run(m, dims, ins, 2, outs, 1, NULL, err, n));
        RT_TRY_GOTO(st, out, sample(smp, head_w, d.logits, d.ids_step, batch, &x, stream, err, n));
        steps++;
        stats->decode_steps++;
        if (tt < 0 && steps > first_all) {
            RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
            tt = now_ms();
        }
        if (cfg->nstop && steps % RT_GEN_STOP_EVERY == 0) {
            RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMemcpyAsync(hist, rt_sampler_history(smp), rows * (size_t)cap * 4,
                                                               cudaMemcpyDeviceToHost, stream), "generate", err, n));
            RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
            bool all = true;
            for (int b = 0; b < nseq && all; b++) {
                bool stopped;
                row_tokens(cfg, hist, cap, b, len[b] - lmin, steps, NULL, &stopped);
                all = stopped;
            }
            if (all) break;
        }
    }
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaMemcpyAsync(hist, rt_sampler_history(smp), rows * (size_t)cap * 4,
                                                       cudaMemcpyDeviceToHost, stream), "generate", err, n));
    RT_TRY_GOTO(st, out, RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
    double t1 = now_ms();
    for (int b = 0; b < nseq; b++) {
        bool stopped;
        out_len[b] = row_tokens(cfg, hist, cap, b, len[b] - lmin, steps, out + (size_t)b * (size_t)cfg->max_new, &stopped);
        stats->new_tokens += out_len[b];
    }
    stats->ttft_ms = tt - t0;
    stats->decode_ms = t1 - tt;
    stats->tokens_per_s = stats->decode_ms > 0 ? (double)(stats->new_tokens - nseq) / (stats->decode_ms / 1e3) : 0;
out:
    free_bufs(&d);
    free(host);
    free(hist);
    return st;
}

rt_status rt_model_sampler_create(rt_model *m, const char *source, const rt_sample_config *cfg, rt_sampler **out,
                                  char *err, size_t n)
{
    return rt_sampler_create(m->ctx, source, cfg, out, err, n);
}

const void *rt_model_head_weight(const rt_model *m)
{
    return m->plan.head ? m->weight_ptr[m->plan.head_weight] : NULL;
}
