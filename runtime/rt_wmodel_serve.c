/* runtime/rt_wmodel_serve.c — sequences joining and leaving a running batch
 * through the slot table (rt_wmodel.h, "serving").
 *
 * The model's states hold nslots = max B cache slots. A sequence that joins
 * takes a slot and a batch row (rt_slots), is prefilled alone or with the
 * others joining at the same length (one call per length and chunk, B padded
 * to a bucket when free slots allow, its rows mapped to their slots by a
 * table of their own), and its first token is sampled into its row. A step is
 * one S = 1 call over rows 0 .. R - 1 (R: the last used row + 1, padded to a
 * bucket) whose table maps each row to its slot, and rows without a running
 * sequence to free slots, so they write no live slot. The tables, the ids and
 * the positions live in device memory: the host uploads the table and the
 * positions (which it tracks exactly) only when the batch changes, so steps
 * between changes replay one graph and copy nothing. A sequence leaving frees
 * its slot and row; nothing is copied between slots. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_model_internal.h"
#include "runtime/rt_wmodel.h"

struct rt_server {
    rt_model *m;
    rt_sampler *smp;
    rt_gen_config cfg;
    int64_t vocab, out_w, maxb, maxs, maxt;
    int sb, ss;
    const void *head_w;
    const char *ids_name, *pos_name, *out_name;
    int max_live, max_rows, chunk;
    rt_slots t;
    int rows;        /* rows of the table on the device (0: none uploaded) */
    bool dirty;      /* the table or an idle row's position must be uploaded */
    int32_t *table_h, *pos_h; /* per row */
    int *ngen;       /* per slot: tokens generated so far */
    bool *done;      /* per slot: max_new tokens or a stop token */
    int32_t *host;   /* staging for uploads (pageable: copied before the call returns) */
    int32_t *hist_h; /* one row of the sampler's history */
    int32_t *d_slot, *d_ids, *d_pos;   /* steps: per row */
    int32_t *d_jslot, *d_jids, *d_jpos; /* joins: per prefill row, [rows, chunk] ids */
    void *d_out, *d_jout;
    /* packed prefill (cfg.packed): its sequence table, ids, positions, slots, output */
    rt_model *pk;
    int pb, ps;     /* its dims B and S */
    int64_t kmaxs;  /* its max S: the tokens of one packed call */
    int32_t *d_ktab, *d_kids, *d_kpos, *d_kslot, *khost;
    void *d_kout;
    rt_server_stats st;
};

void rt_server_free(rt_server *s)
{
    if (!s) return;
    if (s->m && s->m->ctx->has_device) (void)cudaStreamSynchronize((cudaStream_t)s->m->ctx->stream);
    void *d[] = {s->d_slot, s->d_ids, s->d_pos, s->d_jslot, s->d_jids, s->d_jpos, s->d_out, s->d_jout,
                 s->d_ktab, s->d_kids, s->d_kpos, s->d_kslot, s->d_kout};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i]) (void)cudaFree(d[i]);
    if (s->m) rt_model_set_slots(s->m, NULL);
    if (s->pk) {
        rt_model_set_slots(s->pk, NULL);
        rt_model_set_seqs(s->pk, NULL);
    }
    free(s->khost);
    rt_slots_free(&s->t);
    free(s->table_h);
    free(s->pos_h);
    free(s->ngen);
    free(s->done);
    free(s->host);
    free(s->hist_h);
    free(s);
}

rt_status rt_server_create(rt_model *m, rt_sampler *smp, const rt_gen_config *cfg, int max_live, rt_server **out,
                           char *err, size_t n)
{
    *out = NULL;
    int64_t vocab, dmodel;
    RT_TRY(rt_gen_check_model(m, cfg, &vocab, &dmodel, err, n));
    if (rt_sampler_is_head(smp) != (dmodel > 0))
        return rt_fail(RT_ERR_INVALID, err, n, "generate: the model %s the LM head to the sampler, the sampler %s",
                       dmodel > 0 ? "leaves" : "computes", rt_sampler_is_head(smp) ? "computes it too" : "does not");
    if (cfg->max_new < 1) return rt_fail(RT_ERR_INVALID, err, n, "generate: max_new < 1");
    const ir_graph *g = m->g;
    int sb = ir_graph_find_sym(g, "B"), ss = ir_graph_find_sym(g, "S"), stt = ir_graph_find_sym(g, "T");
    int64_t maxb = m->maxd[sb];
    if (max_live <= 0 || max_live > maxb) max_live = (int)maxb;
    int miss;
    int max_rows = rt_gen_bucket(cfg->buckets, cfg->nbuckets, max_live, maxb, &miss);
    if (max_rows < 0) max_rows = max_live;
    if (rt_sampler_max_rows(smp) < max_rows)
        return rt_fail(RT_ERR_INVALID, err, n, "generate: the sampler has %d rows, a step may run %d",
                       rt_sampler_max_rows(smp), max_rows);
    if (rt_sampler_hist_cap(smp) < cfg->max_new)
        return rt_fail(RT_ERR_INVALID, err, n, "generate: the sampler keeps %d tokens per row, %d are needed",
                       rt_sampler_hist_cap(smp), cfg->max_new);
    rt_server *s = calloc(1, sizeof *s);
    if (!s) return rt_fail(RT_ERR_NOMEM, err, n, "generate: out of memory");
    s->m = m;
    s->smp = smp;
    s->cfg = *cfg;
    s->vocab = vocab;
    s->out_w = dmodel > 0 ? dmodel : vocab;
    s->head_w = dmodel > 0 ? m->weight_ptr[m->plan.head_weight] : NULL;
    s->maxb = maxb;
    s->maxs = m->maxd[ss];
    s->maxt = m->maxd[stt];
    s->sb = sb;
    s->ss = ss;
    s->ids_name = cfg->ids ? cfg->ids : "ids";
    s->pos_name = cfg->pos ? cfg->pos : "pos";
    s->out_name = cfg->logits ? cfg->logits : dmodel > 0 ? "head_in" : "logits";
    s->max_live = max_live;
    s->max_rows = max_rows;
    s->chunk = cfg->prefill_chunk > 0 && cfg->prefill_chunk < s->maxs ? cfg->prefill_chunk : (int)s->maxs;
    s->st.batch = max_rows;
    s->st.bucket_miss = miss;
    size_t nb = (size_t)maxb, jn = nb * (size_t)s->chunk;
    rt_status st = RT_OK;
    if (rt_slots_init(&s->t, (int)maxb) != 0) st = rt_fail(RT_ERR_NOMEM, err, n, "generate: out of memory");
    s->table_h = calloc(nb, sizeof *s->table_h);
    s->pos_h = calloc(nb, sizeof *s->pos_h);
    s->ngen = calloc(nb, sizeof *s->ngen);
    s->done = calloc(nb, sizeof *s->done);
    s->host = calloc(jn + nb, sizeof *s->host);
    s->hist_h = calloc((size_t)rt_sampler_hist_cap(smp) + 1, sizeof *s->hist_h);
    if (st == RT_OK && (!s->table_h || !s->pos_h || !s->ngen || !s->done || !s->host || !s->hist_h))
        st = rt_fail(RT_ERR_NOMEM, err, n, "generate: out of memory");
    if (st == RT_OK && !rt_model_use_device(m, "generate", &st, err, n)) goto out;
    struct {
        void **p;
        size_t bytes;
    } bufs[] = {{(void **)&s->d_slot, nb * 4}, {(void **)&s->d_ids, nb * 4},   {(void **)&s->d_pos, nb * 4},
                {(void **)&s->d_jslot, nb * 4}, {(void **)&s->d_jids, jn * 4}, {(void **)&s->d_jpos, nb * 4},
                {&s->d_out, nb * (size_t)s->out_w * 2}, {&s->d_jout, nb * (size_t)s->out_w * 2}};
    for (size_t i = 0; st == RT_OK && i < sizeof bufs / sizeof bufs[0]; i++) {
        st = RT_CUDA_CHECK(cudaMalloc(bufs[i].p, bufs[i].bytes), "generate buffers", err, n);
        if (st == RT_OK) st = RT_CUDA_CHECK(cudaMemset(*bufs[i].p, 0, bufs[i].bytes), "generate buffers", err, n);
    }
    if (st == RT_OK && cfg->packed) { /* packed prefill: the packed model on these caches */
        rt_model *pk = cfg->packed;
        int64_t v2, d2;
        s->pb = ir_graph_find_sym(pk->g, "B");
        s->ps = ir_graph_find_sym(pk->g, "S");
        st = rt_gen_check_model(pk, cfg, &v2, &d2, err, n);
        if (st == RT_OK && (s->pb < 0 || s->ps < 0 || v2 != vocab || d2 != dmodel || pk->maxd[s->pb] < maxb))
            st = rt_fail(RT_ERR_INVALID, err, n, "generate: the packed model %s does not match model %s (vocabulary, output or max B)",
                         pk->g->name, g->name);
        if (st == RT_OK) st = rt_model_borrow_states(pk, m, err, n);
        if (st == RT_OK) {
            s->pk = pk;
            s->kmaxs = pk->maxd[s->ps];
            size_t kt = nb + 1 + (size_t)s->kmaxs;
            s->khost = calloc(kt + (size_t)s->kmaxs + 2 * nb, sizeof *s->khost);
            if (!s->khost) st = rt_fail(RT_ERR_NOMEM, err, n, "generate: out of memory");
            struct {
                void **p;
                size_t bytes;
            } kb[] = {{(void **)&s->d_ktab, kt * 4}, {(void **)&s->d_kids, (size_t)s->kmaxs * 4}, {(void **)&s->d_kpos, nb * 4},
                      {(void **)&s->d_kslot, nb * 4}, {&s->d_kout, nb * (size_t)s->out_w * 2}};
            for (size_t i = 0; st == RT_OK && i < sizeof kb / sizeof kb[0]; i++) {
                st = RT_CUDA_CHECK(cudaMalloc(kb[i].p, kb[i].bytes), "generate buffers", err, n);
                if (st == RT_OK) st = RT_CUDA_CHECK(cudaMemset(*kb[i].p, 0, kb[i].bytes), "generate buffers", err, n);
            }
        }
    }
    /* a fresh start: zeroed caches (not needed for correctness: a sequence writes every cache
     * position before it reads it) and sampler */
    if (st == RT_OK) st = rt_model_zero_states(m, err, n);
    if (st == RT_OK) st = rt_sampler_reset(smp, m->ctx->stream, err, n);
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)m->ctx->stream), "generate", err, n);
out:
    if (st != RT_OK) {
        rt_server_free(s);
        return st;
    }
    *out = s;
    return RT_OK;
}

/* One sampler call over `rows` rows of model output `outp` for the sampler's rows row0.. */
static rt_status sample(rt_server *s, const void *outp, void *ids, int rows, const rt_sample_extra *x, char *err, size_t n)
{
    void *stream = s->m->ctx->stream;
    if (s->head_w) return rt_sampler_run_head(s->smp, outp, s->head_w, NULL, ids, rows, x, stream, err, n);
    return rt_sampler_run_ex(s->smp, outp, ids, rows, x, stream, err, n);
}

static rt_status run_model(rt_server *s, int rows, int c, const int32_t *table, void *ids, void *pos, void *outp,
                           char *err, size_t n)
{
    int64_t dims[IR_MAX_SYMS];
    for (int i = 0; i < s->m->g->nsyms; i++) dims[i] = s->m->maxd[i];
    dims[s->sb] = rows;
    dims[s->ss] = c;
    rt_tensor_ptr ins[] = {{s->ids_name, ids}, {s->pos_name, pos}}, outs[] = {{s->out_name, outp}};
    rt_model_set_slots(s->m, table);
    rt_status st = rt_model_run(s->m, dims, ins, 2, outs, 1, NULL, err, n);
    rt_model_set_slots(s->m, NULL);
    return st;
}

static rt_status upload(rt_server *s, void *dev, const int32_t *src, size_t count, char *err, size_t n)
{
    return RT_CUDA_CHECK(cudaMemcpyAsync(dev, src, count * 4, cudaMemcpyHostToDevice, (cudaStream_t)s->m->ctx->stream),
                         "generate", err, n);
}

/* Sequence i's first token from row j of a prefill's output. */
static rt_status first_token(rt_server *s, const void *outp, int j, int len, int slot, int row, char *err, size_t n)
{
    cudaStream_t stream = (cudaStream_t)s->m->ctx->stream;
    RT_TRY(rt_sampler_reset_rows(s->smp, row, 1, stream, err, n));
    rt_sample_extra x = {.row0 = row};
    RT_TRY(sample(s, (const char *)outp + (size_t)j * (size_t)s->out_w * 2, s->d_ids + row, 1, &x, err, n));
    s->pos_h[row] = len; /* the first new token's position */
    s->ngen[slot] = 1;
    s->done[slot] = s->cfg.max_new <= 1;
    return RT_OK;
}

/* Prefill of k sequences of one length L (slots[i], rows[i]) and their first tokens. */
static rt_status prefill_group(rt_server *s, int k, const int32_t *const *prompts, int L, const int *slots,
                               const int *rows, char *err, size_t n)
{
    cudaStream_t stream = (cudaStream_t)s->m->ctx->stream;
    /* padded to a bucket when there are free slots for the padding rows */
    int miss, b = rt_gen_bucket(s->cfg.buckets, s->cfg.nbuckets, k, s->maxb, &miss);
    if (b < 0 || s->t.nslots - s->t.live < b - k) b = k;
    int32_t *tab = s->host; /* the prefill's table: the sequences' slots, then free ones */
    for (int i = 0; i < k; i++) tab[i] = slots[i];
    for (int i = k, f = 0; i < b; i++) {
        while (s->t.slot_row[f] >= 0) f++;
        tab[i] = f++;
    }
    RT_TRY(upload(s, s->d_jslot, tab, (size_t)b, err, n));
    RT_TRY(RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
    for (int off = 0; off < L; off += s->chunk) {
        int c = L - off < s->chunk ? L - off : s->chunk;
        for (int r = 0; r < b; r++)
            for (int j = 0; j < c; j++) s->host[(size_t)r * (size_t)c + (size_t)j] = r < k ? prompts[r][off + j] : 0;
        for (int r = 0; r < b; r++) s->host[(size_t)b * (size_t)c + (size_t)r] = off;
        RT_TRY(upload(s, s->d_jids, s->host, (size_t)b * (size_t)c, err, n));
        RT_TRY(upload(s, s->d_jpos, s->host + (size_t)b * (size_t)c, (size_t)b, err, n));
        RT_TRY(RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n)); /* host is reused next */
        RT_TRY(run_model(s, b, c, s->d_jslot, s->d_jids, s->d_jpos, s->d_jout, err, n));
        s->st.prefill_calls++;
    }
    for (int i = 0; i < k; i++) RT_TRY(first_token(s, s->d_jout, i, L, slots[i], rows[i], err, n));
    s->dirty = true;
    return RT_OK;
}

/* Packed prefill of k prompts (slots seqs[i], rows[i]): round r packs chunk r (prefill_chunk
 * tokens, or all) of every prompt that has one, each at its own position, as many sequences
 * per call as the packed model's max S holds; a prompt's last chunk's logits give its first
 * token. So prompts of different lengths cost one call per round, no padding. */
static rt_status prefill_packed(rt_server *s, int k, const int32_t *const *prompts, const int *lens, const int *seqs,
                                const int *rows, char *err, size_t n)
{
    cudaStream_t stream = (cudaStream_t)s->m->ctx->stream;
    int c = s->cfg.prefill_chunk > 0 ? s->cfg.prefill_chunk : 0, maxlen = 0;
    for (int i = 0; i < k; i++) maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    if (c <= 0 || c > maxlen) c = maxlen;
    if (c > s->kmaxs) c = (int)s->kmaxs; /* one sequence's chunk fits a call */
    int64_t nb = s->maxb;
    int32_t *tab = s->khost, *ids = tab + nb + 1 + s->kmaxs, *pos = ids + s->kmaxs, *sl = pos + nb;
    int *who = malloc((size_t)k * sizeof *who);
    if (!who) return rt_fail(RT_ERR_NOMEM, err, n, "join: out of memory");
    rt_status st = RT_OK;
    for (int off = 0; off < maxlen && st == RT_OK; off += c) {
        int i = 0;
        while (st == RT_OK) {
            int b = 0, total = 0;
            for (; i < k; i++) { /* the next prompts with a chunk at off that fit this call */
                if (lens[i] <= off) continue;
                int take = lens[i] - off < c ? lens[i] - off : c;
                if (total + take > s->kmaxs) break;
                memcpy(ids + total, prompts[i] + off, (size_t)take * sizeof *ids);
                tab[b + 1] = total + take; /* cu, completed below */
                pos[b] = off;
                sl[b] = seqs[i];
                who[b++] = i;
                total += take;
            }
            if (b == 0) break;
            tab[0] = 0;
            for (int j = 0, t = 0; j < b; j++) /* the sequence of each token, after cu[0..b] */
                for (; t < tab[j + 1]; t++) tab[b + 1 + t] = j;
            st = upload(s, s->d_ktab, tab, (size_t)(b + 1 + total), err, n);
            if (st == RT_OK) st = upload(s, s->d_kids, ids, (size_t)total, err, n);
            if (st == RT_OK) st = upload(s, s->d_kpos, pos, (size_t)b, err, n);
            if (st == RT_OK) st = upload(s, s->d_kslot, sl, (size_t)b, err, n);
            if (st == RT_OK) st = RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n); /* host is reused next */
            if (st != RT_OK) break;
            int64_t dims[IR_MAX_SYMS];
            for (int d = 0; d < s->pk->g->nsyms; d++) dims[d] = s->pk->maxd[d];
            dims[s->pb] = b;
            dims[s->ps] = total;
            rt_tensor_ptr ins[] = {{s->ids_name, s->d_kids}, {s->pos_name, s->d_kpos}}, outs[] = {{s->out_name, s->d_kout}};
            rt_model_set_slots(s->pk, s->d_kslot);
            rt_model_set_seqs(s->pk, s->d_ktab);
            st = rt_model_run(s->pk, dims, ins, 2, outs, 1, NULL, err, n);
            rt_model_set_slots(s->pk, NULL);
            rt_model_set_seqs(s->pk, NULL);
            s->st.prefill_calls++;
            for (int j = 0; j < b && st == RT_OK; j++) /* prompts whose last chunk this was */
                if (lens[who[j]] <= off + c) st = first_token(s, s->d_kout, j, lens[who[j]], seqs[who[j]], rows[who[j]], err, n);
        }
    }
    free(who);
    s->dirty = true;
    return st;
}

rt_status rt_server_join(rt_server *s, int k, const int32_t *const *prompts, const int *lens, int *seqs, char *err,
                         size_t n)
{
    if (k < 1 || !prompts || !lens || !seqs) return rt_fail(RT_ERR_INVALID, err, n, "join: no prompts");
    if (s->t.live + k > s->max_live)
        return rt_fail(RT_ERR_INVALID, err, n, "join: %d sequence%s and %d running, but there %s %d slot%s", k,
                       k > 1 ? "s" : "", s->t.live, s->max_live > 1 ? "are" : "is", s->max_live,
                       s->max_live > 1 ? "s" : "");
    for (int i = 0; i < k; i++) {
        if (lens[i] < 1 || !prompts[i]) return rt_fail(RT_ERR_INVALID, err, n, "join: prompt %d is empty", i);
        if ((int64_t)lens[i] + s->cfg.max_new - 1 > s->maxt)
            return rt_fail(RT_ERR_INVALID, err, n,
                           "join: prompt %d (%d tokens) and %d new tokens need %lld cache positions; the model's max T is "
                           "%lld",
                           i, lens[i], s->cfg.max_new, (long long)lens[i] + s->cfg.max_new - 1, (long long)s->maxt);
        for (int j = 0; j < lens[i]; j++)
            if (prompts[i][j] < 0 || prompts[i][j] >= s->vocab)
                return rt_fail(RT_ERR_INVALID, err, n, "join: prompt %d: token %d is %d, outside the vocabulary of %lld", i,
                               j, prompts[i][j], (long long)s->vocab);
    }
    int *rows = malloc((size_t)k * 2 * sizeof *rows), *grp = malloc((size_t)k * sizeof *grp);
    const int32_t **gp = malloc((size_t)k * sizeof *gp);
    if (!rows || !grp || !gp) {
        free(rows), free(grp), free(gp);
        return rt_fail(RT_ERR_NOMEM, err, n, "join: out of memory");
    }
    int *gslots = rows + k;
    for (int i = 0; i < k; i++) seqs[i] = rt_slots_open(&s->t, &rows[i]); /* checked above: a slot each */
    rt_status st = RT_OK;
    if (s->pk) st = prefill_packed(s, k, prompts, lens, seqs, rows, err, n);
    /* else one prefill per prompt length, in order of first appearance */
    for (int i = 0; i < k && st == RT_OK && !s->pk; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = lens[j] == lens[i];
        if (seen) continue;
        int g = 0;
        for (int j = i; j < k; j++)
            if (lens[j] == lens[i]) gp[g] = prompts[j], gslots[g] = seqs[j], grp[g++] = rows[j];
        st = prefill_group(s, g, gp, lens[i], gslots, grp, err, n);
    }
    if (st != RT_OK)
        for (int i = 0; i < k; i++) rt_slots_close(&s->t, seqs[i]), seqs[i] = -1;
    free(rows);
    free(grp);
    free(gp);
    return st;
}

static rt_status check_seq(const rt_server *s, int seq, const char *what, char *err, size_t n)
{
    if (seq < 0 || seq >= s->t.nslots || rt_slots_row(&s->t, seq) < 0)
        return rt_fail(RT_ERR_INVALID, err, n, "%s: %d is not a running sequence (slot ids are 0..%d; %d running)", what, seq,
                       s->t.nslots - 1, s->t.live);
    return RT_OK;
}

rt_status rt_server_leave(rt_server *s, int seq, char *err, size_t n)
{
    RT_TRY(check_seq(s, seq, "leave", err, n));
    rt_slots_close(&s->t, seq);
    s->done[seq] = false;
    s->ngen[seq] = 0;
    s->dirty = true;
    return RT_OK;
}

rt_status rt_server_step(rt_server *s, char *err, size_t n)
{
    if (s->t.live == 0) return rt_fail(RT_ERR_INVALID, err, n, "step: no sequence is running");
    int miss, R = rt_gen_bucket(s->cfg.buckets, s->cfg.nbuckets, rt_slots_rows(&s->t), s->maxb, &miss);
    if (R < 0 || R > s->max_rows) R = rt_slots_rows(&s->t);
    if (s->dirty || R != s->rows) {
        if (rt_slots_table(&s->t, R, s->table_h) != 0) return rt_fail(RT_ERR_INTERNAL, err, n, "step: no slot table for %d rows", R);
        for (int r = 0; r < R; r++) { /* rows without a running sequence restart at position 0 */
            int slot = s->t.row_slot[r];
            if (slot < 0 || s->done[slot]) s->pos_h[r] = 0;
        }
        RT_TRY(upload(s, s->d_slot, s->table_h, (size_t)R, err, n));
        RT_TRY(upload(s, s->d_pos, s->pos_h, (size_t)R, err, n));
        s->rows = R;
        s->dirty = false;
    }
    RT_TRY(run_model(s, R, 1, s->d_slot, s->d_ids, s->d_pos, s->d_out, err, n));
    rt_sample_extra x = {.pos = s->d_pos, .pos_add = 1};
    RT_TRY(sample(s, s->d_out, s->d_ids, R, &x, err, n));
    s->st.decode_steps++;
    for (int r = 0; r < R; r++) {
        s->pos_h[r]++;
        int slot = s->t.row_slot[r];
        if (slot >= 0 && !s->done[slot]) {
            s->ngen[slot]++;
            if (s->ngen[slot] >= s->cfg.max_new) s->done[slot] = true;
        }
        if ((slot < 0 || s->done[slot]) && s->pos_h[r] >= s->maxt - 1) s->dirty = true; /* an idle row at the end */
    }
    return RT_OK;
}

static bool is_stop(const rt_gen_config *cfg, int32_t t)
{
    for (int i = 0; i < cfg->nstop; i++)
        if (cfg->stop[i] == t) return true;
    return false;
}

rt_status rt_server_tokens(rt_server *s, int seq, int32_t *out, int cap, int *count, bool *done, char *err, size_t n)
{
    RT_TRY(check_seq(s, seq, "tokens", err, n));
    int row = rt_slots_row(&s->t, seq), hc = rt_sampler_hist_cap(s->smp), have = s->ngen[seq];
    cudaStream_t stream = (cudaStream_t)s->m->ctx->stream;
    RT_TRY(RT_CUDA_CHECK(cudaMemcpyAsync(s->hist_h, (const int32_t *)rt_sampler_history(s->smp) + (size_t)row * (size_t)hc,
                                         (size_t)have * 4, cudaMemcpyDeviceToHost, stream),
                         "generate", err, n));
    RT_TRY(RT_CUDA_CHECK(cudaStreamSynchronize(stream), "generate", err, n));
    int k = 0;
    for (; k < have; k++) {
        if (out && k < cap) out[k] = s->hist_h[k];
        if (is_stop(&s->cfg, s->hist_h[k])) {
            s->done[seq] = true;
            k++;
            break;
        }
    }
    if (count) *count = k;
    if (done) *done = s->done[seq];
    return RT_OK;
}

int rt_server_live(const rt_server *s) { return s->t.live; }
int rt_server_free_slots(const rt_server *s) { return s->max_live - s->t.live; }
bool rt_server_done(const rt_server *s, int seq)
{
    return seq >= 0 && seq < s->t.nslots && rt_slots_row(&s->t, seq) >= 0 && s->done[seq];
}
void rt_server_get_stats(const rt_server *s, rt_server_stats *st) { *st = s->st; }
