/* src/kiln_generate.c — the generation API (include/kiln.h, "generation"):
 * the GPU sampler and the generation loop of runtime/rt_wmodel.h, with the
 * sampler's kernels from codegen's template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "runtime/rt_wmodel.h"
#include "src/kiln_generate.h"

#define GEN_ERRLEN 8192

struct kiln_sampler {
    kiln_model *m;
    rt_sampler *rt;
};

struct kiln_server {
    kiln_model *m;
    rt_sampler *smp;
    rt_server *rt;
    int32_t *stop; /* a copy of the options' stop list */
};

static kiln_status make_sampler(kiln_model *m, const kiln_sampling *s, int max_rows, int hist_cap, int64_t vocab,
                                int64_t dmodel, rt_sampler **out)
{
    const char *src = cg_template_text("sample.cuh");
    if (!src) return kiln_model_fail_(m, KILN_ERR_INTERNAL, "the sampler's template is not embedded");
    rt_sample_config cfg = {.vocab = vocab,
                            .ld = vocab,
                            .max_rows = max_rows,
                            .temperature = s ? s->temperature : 0,
                            .top_k = s ? s->top_k : 0,
                            .top_p = s ? s->top_p : 0,
                            .seed = s ? s->seed : 0,
                            .hist_cap = hist_cap,
                            .dmodel = dmodel};
    char err[GEN_ERRLEN] = "";
    rt_status st = rt_model_sampler_create(kiln_model_rt_(m), src, &cfg, out, err, sizeof err);
    return st == RT_OK ? KILN_OK : kiln_model_fail_(m, (kiln_status)st, err);
}

static kiln_status model_vocab(kiln_model *m, const kiln_generate_options *o, int64_t *vocab, int64_t *dmodel)
{
    rt_gen_config cfg = {.ids = o ? o->ids_name : NULL, .pos = o ? o->pos_name : NULL, .logits = o ? o->logits_name : NULL};
    char err[1024] = "";
    rt_status st = rt_gen_check_model(kiln_model_rt_(m), &cfg, vocab, dmodel, err, sizeof err);
    return st == RT_OK ? KILN_OK : kiln_model_fail_(m, (kiln_status)st, err);
}

kiln_status kiln_sampler_create(kiln_model *m, const kiln_sampling *s, int max_rows, kiln_sampler **out)
{
    if (!m || !out || max_rows < 1) {
        if (out) *out = NULL;
        return kiln_model_fail_(m, KILN_ERR_INVALID_ARGUMENT, "kiln_sampler_create: NULL model or out, or max_rows < 1");
    }
    *out = NULL;
    int64_t vocab, dmodel;
    kiln_status ks = model_vocab(m, NULL, &vocab, &dmodel);
    if (ks != KILN_OK) return ks;
    kiln_sampler *k = calloc(1, sizeof *k);
    if (!k) return kiln_model_fail_(m, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    k->m = m;
    ks = make_sampler(m, s, max_rows, 0, vocab, dmodel, &k->rt);
    if (ks != KILN_OK) {
        free(k);
        return ks;
    }
    *out = k;
    return KILN_OK;
}

kiln_status kiln_sampler_run(kiln_sampler *s, const void *logits, int rows, void *ids_out, void *stream)
{
    if (!s) return kiln_model_fail_(NULL, KILN_ERR_INVALID_ARGUMENT, "kiln_sampler_run: NULL sampler");
    char err[1024] = "";
    rt_status st = rt_sampler_run(s->rt, logits, ids_out, rows, stream, err, sizeof err);
    return st == RT_OK ? KILN_OK : kiln_model_fail_(s->m, (kiln_status)st, err);
}

kiln_status kiln_sampler_run_head(kiln_sampler *s, const void *hidden, int rows, void *ids_out, void *logits_out,
                                  void *stream)
{
    if (!s) return kiln_model_fail_(NULL, KILN_ERR_INVALID_ARGUMENT, "kiln_sampler_run_head: NULL sampler");
    const void *w = rt_model_head_weight(kiln_model_rt_(s->m));
    if (!rt_sampler_is_head(s->rt) || !w)
        return kiln_model_fail_(s->m, KILN_ERR_INVALID_ARGUMENT,
                                "kiln_sampler_run_head: the model was not compiled with head_sample, or its LM head weight is "
                                "not bound");
    char err[1024] = "";
    rt_sample_extra none = {0};
    rt_status st = rt_sampler_run_head(s->rt, hidden, w, logits_out, ids_out, rows, &none, stream, err, sizeof err);
    return st == RT_OK ? KILN_OK : kiln_model_fail_(s->m, (kiln_status)st, err);
}

void kiln_sampler_free(kiln_sampler *s)
{
    if (!s) return;
    rt_sampler_free(s->rt);
    free(s);
}

static kiln_status check_options(kiln_model *m, const kiln_generate_options *o, const char *fn)
{
    if (!m || !o || o->max_new < 1 || (o->nstop && !o->stop_ids) || o->nstop < 0 || o->nbuckets < 0 ||
        (o->nbuckets && !o->buckets))
        return kiln_model_fail_(m, KILN_ERR_INVALID_ARGUMENT, fn);
    for (int i = 1; i < o->nbuckets; i++)
        if (o->buckets[i] <= o->buckets[i - 1] || o->buckets[0] < 1)
            return kiln_model_fail_(m, KILN_ERR_INVALID_ARGUMENT, "kiln_generate: buckets must be positive and ascending");
    return KILN_OK;
}

static rt_gen_config gen_config(const kiln_generate_options *o, const int32_t *stop)
{
    return (rt_gen_config){.ids = o->ids_name,
                           .pos = o->pos_name,
                           .logits = o->logits_name,
                           .max_new = o->max_new,
                           .stop = stop,
                           .nstop = o->nstop,
                           .prefill_chunk = o->prefill_chunk,
                           .buckets = o->buckets,
                           .nbuckets = o->nbuckets,
                           .packed = o->packed ? kiln_model_rt_(o->packed) : NULL};
}

/* The sequences running at once (max_live, within max B and nseq) and the sampler for them:
 * rows for their bucket, a history of max_new tokens each. */
static kiln_status serve_sampler(kiln_model *m, const kiln_generate_options *o, int nseq, int *max_live, rt_sampler **smp)
{
    int64_t vocab, dmodel;
    kiln_status ks = model_vocab(m, o, &vocab, &dmodel);
    if (ks != KILN_OK) return ks;
    const ir_graph *g = rt_model_graph(kiln_model_rt_(m));
    int sb = ir_graph_find_sym(g, "B");
    int64_t maxb = sb >= 0 ? rt_model_max_dims(kiln_model_rt_(m))[sb] : 1;
    int live = o->max_live > 0 && o->max_live < maxb ? o->max_live : (int)maxb;
    if (nseq > 0 && live > nseq) live = nseq;
    int miss, rows = rt_gen_bucket(o->buckets, o->nbuckets, live, maxb, &miss);
    if (rows < 0) rows = live;
    *max_live = live;
    return make_sampler(m, &o->sampling, rows, o->max_new, vocab, dmodel, smp);
}

kiln_status kiln_generate(kiln_model *m, int nseq, const int32_t *const *prompts, const int *lens,
                          const kiln_generate_options *o, int32_t *out, int *out_lens, kiln_generate_stats *stats)
{
    if (!prompts || !lens || !out || !out_lens || nseq < 1)
        return kiln_model_fail_(m, KILN_ERR_INVALID_ARGUMENT, "kiln_generate: NULL argument or no sequences");
    kiln_status ks = check_options(m, o, "kiln_generate: NULL argument, max_new < 1, or a bad stop or bucket list");
    if (ks != KILN_OK) return ks;
    rt_gen_config cfg = gen_config(o, o->stop_ids);
    int live;
    rt_sampler *smp = NULL;
    ks = serve_sampler(m, o, nseq, &live, &smp);
    if (ks != KILN_OK) return ks;
    kiln_generate_stats local;
    if (!stats) stats = &local;
    rt_gen_stats rs;
    char *err = malloc(GEN_ERRLEN);
    if (!err) {
        rt_sampler_free(smp);
        return kiln_model_fail_(m, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    err[0] = 0;
    rt_status st =
        rt_generate(kiln_model_rt_(m), smp, &cfg, live, nseq, prompts, lens, out, out_lens, &rs, err, GEN_ERRLEN);
    rt_sampler_free(smp);
    *stats = (kiln_generate_stats){rs.ttft_ms, rs.decode_ms, rs.new_tokens, rs.tokens_per_s, rs.batch, rs.bucket_miss,
                                   rs.prefill_calls, rs.decode_steps};
    ks = st == RT_OK ? KILN_OK : kiln_model_fail_(m, (kiln_status)st, err);
    free(err);
    return ks;
}

/* ---- serving ---- */

static kiln_status server_status(kiln_server *s, rt_status st, const char *err)
{
    return st == RT_OK ? KILN_OK : kiln_model_fail_(s->m, (kiln_status)st, err);
}

kiln_status kiln_server_create(kiln_model *m, const kiln_generate_options *o, kiln_server **out)
{
    if (out) *out = NULL;
    if (!out) return kiln_model_fail_(m, KILN_ERR_INVALID_ARGUMENT, "kiln_server_create: NULL out");
    kiln_status ks = check_options(m, o, "kiln_server_create: NULL argument, max_new < 1, or a bad stop or bucket list");
    if (ks != KILN_OK) return ks;
    kiln_server *s = calloc(1, sizeof *s);
    if (!s || (o->nstop && !(s->stop = malloc((size_t)o->nstop * sizeof *s->stop)))) {
        free(s);
        return kiln_model_fail_(m, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (o->nstop) memcpy(s->stop, o->stop_ids, (size_t)o->nstop * sizeof *s->stop);
    s->m = m;
    int live;
    ks = serve_sampler(m, o, 0, &live, &s->smp);
    if (ks != KILN_OK) {
        kiln_server_free(s);
        return ks;
    }
    rt_gen_config cfg = gen_config(o, s->stop);
    char err[GEN_ERRLEN] = "";
    ks = server_status(s, rt_server_create(kiln_model_rt_(m), s->smp, &cfg, live, &s->rt, err, sizeof err), err);
    if (ks != KILN_OK) {
        kiln_server_free(s);
        return ks;
    }
    *out = s;
    return KILN_OK;
}

kiln_status kiln_server_join(kiln_server *s, int n, const int32_t *const *prompts, const int *lens, int *seqs_out)
{
    if (!s) return kiln_model_fail_(NULL, KILN_ERR_INVALID_ARGUMENT, "kiln_server_join: NULL server");
    char err[GEN_ERRLEN] = "";
    return server_status(s, rt_server_join(s->rt, n, prompts, lens, seqs_out, err, sizeof err), err);
}

kiln_status kiln_server_step(kiln_server *s)
{
    if (!s) return kiln_model_fail_(NULL, KILN_ERR_INVALID_ARGUMENT, "kiln_server_step: NULL server");
    char err[GEN_ERRLEN] = "";
    return server_status(s, rt_server_step(s->rt, err, sizeof err), err);
}

kiln_status kiln_server_tokens(kiln_server *s, int seq, int32_t *out, int cap, int *count, int *finished)
{
    if (!s) return kiln_model_fail_(NULL, KILN_ERR_INVALID_ARGUMENT, "kiln_server_tokens: NULL server");
    char err[GEN_ERRLEN] = "";
    bool done = false;
    kiln_status ks = server_status(s, rt_server_tokens(s->rt, seq, out, cap, count, &done, err, sizeof err), err);
    if (finished) *finished = done;
    return ks;
}

kiln_status kiln_server_leave(kiln_server *s, int seq)
{
    if (!s) return kiln_model_fail_(NULL, KILN_ERR_INVALID_ARGUMENT, "kiln_server_leave: NULL server");
    char err[GEN_ERRLEN] = "";
    return server_status(s, rt_server_leave(s->rt, seq, err, sizeof err), err);
}

int kiln_server_free_slots(const kiln_server *s) { return s ? rt_server_free_slots(s->rt) : 0; }

void kiln_server_free(kiln_server *s)
{
    if (!s) return;
    rt_server_free(s->rt);
    rt_sampler_free(s->smp);
    free(s->stop);
    free(s);
}
