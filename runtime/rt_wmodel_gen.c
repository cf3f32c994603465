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

rt_status rt_generate(rt_model *m, rt_sampler *smp, const rt_gen_config *cfg, int max_live, int nseq,
                      const int32_t *const *prompts, const int *len, int32_t *out, int *out_len, rt_gen_stats *stats,
                      char *err, size_t n)
{
    memset(stats, 0, sizeof *stats);
    if (nseq < 1 || !prompts || !len || !out || !out_len || cfg->max_new < 1)
        return rt_fail(RT_ERR_INVALID, err, n, "generate: no prompts, or max_new < 1");
    int64_t vocab, dmodel;
    RT_TRY(rt_gen_check_model(m, cfg, &vocab, &dmodel, err, n));
    int64_t maxt = m->maxd[find_sym(m->g, "T")];
    for (int b = 0; b < nseq; b++) { /* every prompt checked before any runs */
        if (len[b] < 1 || !prompts[b]) return rt_fail(RT_ERR_INVALID, err, n, "generate: prompt %d is empty", b);
        for (int j = 0; j < len[b]; j++)
            if (prompts[b][j] < 0 || prompts[b][j] >= vocab)
                return rt_fail(RT_ERR_INVALID, err, n, "generate: prompt %d: token %d is %d, outside the vocabulary of %lld",
                               b, j, prompts[b][j], (long long)vocab);
        if ((int64_t)len[b] + cfg->max_new - 1 > maxt)
            return rt_fail(RT_ERR_INVALID, err, n,
                           "generate: prompt %d (%d tokens) and %d new tokens need %lld cache positions; the model's max T "
                           "is %lld",
                           b, len[b], cfg->max_new, (long long)len[b] + cfg->max_new - 1, (long long)maxt);
    }
    rt_server *s = NULL;
    int64_t maxb = m->maxd[find_sym(m->g, "B")];
    if (max_live <= 0 || max_live > maxb) max_live = (int)maxb;
    if (max_live > nseq) max_live = nseq;
    RT_TRY(rt_server_create(m, smp, cfg, max_live, &s, err, n));
    int *seq_of = malloc((size_t)nseq * sizeof *seq_of), *seqs = malloc((size_t)max_live * sizeof *seqs);
    rt_status st = seq_of && seqs ? RT_OK : rt_fail(RT_ERR_NOMEM, err, n, "generate: out of memory");
    double t0 = now_ms(), tt = -1;
    int next = 0, since_poll = 0;
    while (st == RT_OK) {
        /* the finished sequences leave: their tokens are read first */
        bool poll = cfg->nstop && since_poll >= RT_GEN_STOP_EVERY;
        for (int q = 0; q < next && st == RT_OK; q++) {
            int seq = seq_of[q];
            if (seq < 0 || (!poll && !rt_server_done(s, seq))) continue;
            bool done = false;
            st = rt_server_tokens(s, seq, out + (size_t)q * (size_t)cfg->max_new, cfg->max_new, &out_len[q], &done, err, n);
            if (st == RT_OK && done) {
                st = rt_server_leave(s, seq, err, n);
                seq_of[q] = -1;
                stats->new_tokens += out_len[q];
            }
        }
        if (poll) since_poll = 0;
        /* the next prompts join in the free slots */
        int k = rt_server_free_slots(s);
        if (k > nseq - next) k = nseq - next;
        if (st == RT_OK && k > 0) {
            st = rt_server_join(s, k, prompts + next, len + next, seqs, err, n);
            for (int i = 0; st == RT_OK && i < k; i++) seq_of[next + i] = seqs[i];
            if (st == RT_OK) next += k;
            if (st == RT_OK && tt < 0) { /* the first wave's first tokens */
                st = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), "generate", err, n);
                tt = now_ms();
            }
            if (cfg->nstop) since_poll = RT_GEN_STOP_EVERY; /* a first token may be a stop token */
            continue;
        }
        if (st != RT_OK || rt_server_live(s) == 0) break;
        st = rt_server_step(s, err, n);
        since_poll++;
    }
    double t1 = now_ms();
    rt_server_stats ss;
    rt_server_get_stats(s, &ss);
    stats->batch = ss.batch;
    stats->bucket_miss = ss.bucket_miss;
    stats->prefill_calls = ss.prefill_calls;
    stats->decode_steps = ss.decode_steps;
    stats->ttft_ms = tt - t0;
    stats->decode_ms = t1 - tt;
    stats->tokens_per_s = stats->decode_ms > 0 ? (double)(stats->new_tokens - nseq) / (stats->decode_ms / 1e3) : 0;
    rt_server_free(s);
    free(seq_of);
    free(seqs);
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
