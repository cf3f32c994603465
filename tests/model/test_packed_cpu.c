/* tests/model/test_packed_cpu.c — packed variable-length prefill without a GPU.
 *   1. hand-computed: a packed attention layer (cache write + causal
 *      attention, one head of dim 2) over two sequences of 2 and 1 tokens,
 *      the second at position 1 after a cached key: each output against the
 *      softmax worked out by hand, the cache rows written and the others
 *      untouched.
 *   2. the whole two-layer Llama packed (pass_pack_sequences): three
 *      sequences of 3, 1 and 2 tokens at positions 0, 2 and 1 in slots
 *      {2, 0, 3} of 4 give each sequence the logits and cache rows of its
 *      unpacked run alone (B = 1, S = its length), bit for bit; a chunked
 *      prompt (5 tokens: 3 in one packed call beside another prompt, 2 in a
 *      second beside a third) ends with the logits and cache rows of its
 *      one-shot prefill; the fused packed graph matches the packed graph as
 *      written within the passes' tolerance.
 *   3. bad input: offsets not increasing, not from 0, a total that is not the
 *      packed tokens, a count that is not the sequences' dim, a sequence
 *      past the cache, a packed graph run without a table, and models that
 *      do not pack: each a clear error, no crash.
 *   4. codegen (sm_90a) of the fused packed one-layer Llama at a ragged
 *      prefill (wgmma: the register QKV epilogue, attention_wgmma with
 *      KILN_ATT_VARLEN and its attention_prefill fallback) and at a few
 *      tokens (GEMV): every kernel that touches a state or a packed op reads
 *      the table (field cu_q), attention never takes the decode template, and
 *      those kernels and their fallbacks compile with NVRTC. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codegen/cg.h"
#include "runtime/rt_nvrtc.h"
#include "src/compile.h"

#define MODEL "samples/models/llama3_2_1b.kiln"

static kc_unit *open_unit(const char *name, const char *text, const kc_define *defs, int nd, bool packed, bool fuse,
                          char *err, size_t n)
{
    kc_options o = {.name = name, .text = text, .defines = defs, .ndefines = nd, .packed = packed, .keep_written = fuse};
    kc_unit *u = NULL;
    if (kc_open(&o, NULL, &u, err, n) != RT_OK) return NULL;
    if (kc_parse(u, err, n) != RT_OK || (fuse && kc_fuse(u, err, n) != RT_OK)) {
        kc_free(u);
        return NULL;
    }
    return u;
}

static int param_index(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->nparams; i++)
        if (!strcmp(g->params[i]->name, name)) return i;
    return -1;
}

/* ---- 1. by hand ---------------------------------------------------------------------- */

static const char *ATT = "model att {\n"
                         "  dims B, S, T\n"
                         "  input q : f32[B, S, 1, 2]\n"
                         "  input k : f32[B, S, 1, 2]\n"
                         "  input v : f32[B, S, 1, 2]\n"
                         "  input pos : i32[B]\n"
                         "  state kc : f32[B, 1, T, 2]\n"
                         "  state vc : f32[B, 1, T, 2]\n"
                         "  kc, vc = cache_write(kc, vc, k, v, pos)\n"
                         "  output o = attention(q, kc, vc, pos, causal=true)\n"
                         "}\n";

static void by_hand(void)
{
    char err[2048];
    kc_unit *u = open_unit("att.kiln", ATT, NULL, 0, true, false, err, sizeof err);
    CHECK_MSG(u != NULL, "packed att: %s", err);
    if (!u) return;
    const ir_graph *g = kc_written(u);
    /* two sequences: tokens 0, 1 (sequence 0, positions 0, 1) and token 2
     * (sequence 1 at position 1: its cache row 0 holds an earlier key) */
    const int32_t cu[3] = {0, 2, 3};
    const int T = 4;
    int64_t dims[IR_MAX_SYMS] = {2, 3, T};
    ir_tensor p[6];
    memset(p, 0, sizeof p);
    const double L3 = log(3.0) * sqrt(2.0); /* q.k * 1/sqrt(2) = ln 3 */
    float q[6] = {0, 0, (float)L3, 0, (float)L3, 0};
    float k[6] = {1, 0, 0, 0, 0, 0};
    float v[6] = {1, 2, 5, 6, 7, 8};
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *n = g->params[i];
        int64_t shape[IR_MAX_RANK], numel;
        CHECK(ir_type_shape_at(&n->type, dims, shape, &numel) && ir_tensor_alloc(&p[i], n->type.dtype, n->type.rank, shape));
        const char *nm = n->name;
        if (!strcmp(nm, "q")) memcpy(p[i].f, q, sizeof q);
        if (!strcmp(nm, "k")) memcpy(p[i].f, k, sizeof k);
        if (!strcmp(nm, "v")) memcpy(p[i].f, v, sizeof v);
        if (!strcmp(nm, "pos")) {
            p[i].i[0] = 0;
            p[i].i[1] = 1;
        }
        if (!strcmp(nm, "kc") || !strcmp(nm, "vc"))
            for (int64_t j = 0; j < numel; j++) p[i].f[j] = 100.f + (float)j; /* "earlier" rows */
    }
    int ikc = param_index(g, "kc"), ivc = param_index(g, "vc");
    CHECK(ikc >= 0 && ivc >= 0);
    /* sequence 1's cached key (row 1, position 0): [ln3*sqrt2 / ln3*sqrt2 ...] = [1, 0], value [3, 4] */
    p[ikc].f[(1 * T + 0) * 2 + 0] = 1.f;
    p[ikc].f[(1 * T + 0) * 2 + 1] = 0.f;
    p[ivc].f[(1 * T + 0) * 2 + 0] = 3.f;
    p[ivc].f[(1 * T + 0) * 2 + 1] = 4.f;
    ir_tensor out[1];
    int rc = ir_interp_run_packed(g, dims, p, cu, 2, NULL, out, err, sizeof err);
    CHECK_MSG(rc == 0, "packed run: %s", err);
    if (rc == 0) {
        CHECK(out[0].rank == 4 && out[0].shape[0] == 1 && out[0].shape[1] == 3);
        /* token 0: one key (its own) -> v0 = [1, 2] */
        CHECK(fabs(out[0].f[0] - 1.0) < 1e-6 && fabs(out[0].f[1] - 2.0) < 1e-6);
        /* token 1: keys 0 (k [1,0]: score ln 3) and 1 (k 0: score 0) -> 3/4 v0 + 1/4 v1 */
        CHECK_MSG(fabs(out[0].f[2] - (0.75 * 1 + 0.25 * 5)) < 1e-6 && fabs(out[0].f[3] - (0.75 * 2 + 0.25 * 6)) < 1e-6,
                  "token 1: %g %g", out[0].f[2], out[0].f[3]);
        /* token 2 (sequence 1, position 1): its cached key 0 ([1,0], v [3,4]) and its own (0, v [7,8]) */
        CHECK_MSG(fabs(out[0].f[4] - (0.75 * 3 + 0.25 * 7)) < 1e-6 && fabs(out[0].f[5] - (0.75 * 4 + 0.25 * 8)) < 1e-6,
                  "token 2: %g %g", out[0].f[4], out[0].f[5]);
        ir_tensor_free(&out[0]);
        /* cache rows: sequence 0 at row 0 positions 0, 1; sequence 1 at row 1 position 1; the rest as they were */
        for (int r = 0; r < 2; r++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < 2; d++) {
                    int64_t j = ((int64_t)r * T + t) * 2 + d;
                    float want = 100.f + (float)j;
                    if (r == 0 && t < 2) want = k[t * 2 + d];
                    if (r == 1 && t == 0) want = d == 0 ? 1.f : 0.f;
                    if (r == 1 && t == 1) want = k[4 + d];
                    CHECK_MSG(p[ikc].f[j] == want, "kc[%d, 0, %d, %d] = %g, want %g", r, t, d, p[ikc].f[j], want);
                    float wv = 100.f + (float)j;
                    if (r == 0 && t < 2) wv = v[t * 2 + d];
                    if (r == 1 && t == 0) wv = d == 0 ? 3.f : 4.f;
                    if (r == 1 && t == 1) wv = v[4 + d];
                    CHECK_MSG(p[ivc].f[j] == wv, "vc[%d, 0, %d, %d] = %g, want %g", r, t, d, p[ivc].f[j], wv);
                }
    }
    /* bad tables */
    const int32_t flat[3] = {0, 2, 2}, back[3] = {0, 3, 2}, off[3] = {1, 2, 3}, short_[3] = {0, 1, 2};
    CHECK(ir_interp_run_packed(g, dims, p, flat, 2, NULL, out, err, sizeof err) != 0 && strstr(err, "is empty"));
    printf("empty sequence: %s\n", err);
    CHECK(ir_interp_run_packed(g, dims, p, back, 2, NULL, out, err, sizeof err) != 0 && strstr(err, "not greater"));
    printf("offsets not increasing: %s\n", err);
    CHECK(ir_interp_run_packed(g, dims, p, off, 2, NULL, out, err, sizeof err) != 0 && strstr(err, "not 0"));
    CHECK(ir_interp_run_packed(g, dims, p, short_, 2, NULL, out, err, sizeof err) != 0 &&
          strstr(err, "the sequences hold 2 tokens but the packed tokens are 3"));
    printf("total not matching: %s\n", err);
    const int32_t three[4] = {0, 1, 2, 3};
    CHECK(ir_interp_run_packed(g, dims, p, three, 3, NULL, out, err, sizeof err) != 0 &&
          strstr(err, "but the packed run's table has 3"));
    printf("count not matching: %s\n", err);
    CHECK(ir_interp_run_packed(g, dims, p, NULL, 2, NULL, out, err, sizeof err) != 0 && strstr(err, "no sequences"));
    CHECK(ir_interp_run(g, dims, p, out, err, sizeof err) != 0 && strstr(err, "outside a packed run"));
    /* a sequence longer than its cache: sequence 1 at position 3 with 1 token fits T = 4, at 4 it does not */
    int ipos = param_index(g, "pos");
    p[ipos].i[1] = 4;
    CHECK(ir_interp_run_packed(g, dims, p, cu, 2, NULL, out, err, sizeof err) != 0 &&
          strstr(err, "sequence 1: position 4 + 1 new tokens exceeds the cache length 4"));
    printf("past the cache: %s\n", err);
    p[ipos].i[1] = -1;
    CHECK(ir_interp_run_packed(g, dims, p, cu, 2, NULL, out, err, sizeof err) != 0 && strstr(err, "negative"));
    for (int i = 0; i < g->nparams; i++) ir_tensor_free(&p[i]);
    kc_free(u);
}

/* ---- 2. the whole model -------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

typedef struct model_set {
    kc_unit *plain, *packed;
    const ir_graph *gp, *gk; /* plain, packed (as written) */
    ir_tensor *weights;      /* per param of gp (weights only), shared by name */
    ir_tensor *states;       /* per param of gp: the states, NS rows */
    int NS, T, V;
} model_set;

static void fill_weights(model_set *m)
{
    const ir_graph *g = m->gp;
    int64_t dims[IR_MAX_SYMS] = {1, 1, m->T};
    m->weights = calloc((size_t)g->nparams, sizeof *m->weights);
    m->states = calloc((size_t)g->nparams, sizeof *m->states);
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *n = g->params[i];
        if (n->op == IR_OP_INPUT) continue;
        int64_t shape[IR_MAX_RANK], numel;
        CHECK(ir_type_shape_at(&n->type, dims, shape, &numel));
        if (n->op == IR_OP_STATE) shape[0] = m->NS;
        ir_tensor *t = n->op == IR_OP_STATE ? &m->states[i] : &m->weights[i];
        CHECK(ir_tensor_alloc(t, n->type.dtype, n->type.rank, shape));
        int64_t k = ir_tensor_numel(t);
        for (int64_t j = 0; j < k; j++) t->f[j] = n->op == IR_OP_WEIGHT ? 0.2f * frand() : 0.5f * frand();
    }
}

/* params of g (by name from m) for a run: ids / pos given; the states are
 * copies of st (NS rows) */
static void make_params(const model_set *m, const ir_graph *g, const int64_t *dims, const int32_t *ids,
                        const int32_t *pos, ir_tensor *const st, ir_tensor *p)
{
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *n = g->params[i];
        int j = param_index(m->gp, n->name);
        if (n->op == IR_OP_WEIGHT) {
            p[i] = m->weights[j];
            continue;
        }
        if (n->op == IR_OP_STATE) {
            CHECK(ir_tensor_alloc(&p[i], st[j].dtype, st[j].rank, st[j].shape));
            memcpy(p[i].f, st[j].f, (size_t)ir_tensor_numel(&st[j]) * sizeof(float));
            continue;
        }
        int64_t shape[IR_MAX_RANK], numel;
        CHECK(ir_type_shape_at(&n->type, dims, shape, &numel) && ir_tensor_alloc(&p[i], n->type.dtype, n->type.rank, shape));
        memcpy(p[i].i, !strcmp(n->name, "pos") ? pos : ids, (size_t)numel * sizeof(int32_t));
    }
}

static void free_params(const ir_graph *g, ir_tensor *p)
{
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->op != IR_OP_WEIGHT) ir_tensor_free(&p[i]);
}

/* The states of p (params of g) back into st (by name of m->gp). */
static void take_states(const model_set *m, const ir_graph *g, ir_tensor *p, ir_tensor *st)
{
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->op == IR_OP_STATE) {
            int j = param_index(m->gp, g->params[i]->name);
            memcpy(st[j].f, p[i].f, (size_t)ir_tensor_numel(&st[j]) * sizeof(float));
        }
}

static ir_tensor *copy_states(const model_set *m)
{
    ir_tensor *st = calloc((size_t)m->gp->nparams, sizeof *st);
    for (int i = 0; i < m->gp->nparams; i++)
        if (m->gp->params[i]->op == IR_OP_STATE) {
            CHECK(ir_tensor_alloc(&st[i], m->states[i].dtype, m->states[i].rank, m->states[i].shape));
            memcpy(st[i].f, m->states[i].f, (size_t)ir_tensor_numel(&st[i]) * sizeof(float));
        }
    return st;
}

static void free_states(const model_set *m, ir_tensor *st)
{
    for (int i = 0; i < m->gp->nparams; i++) ir_tensor_free(&st[i]);
    free(st);
}

/* One sequence alone through the plain graph: B = 1, its tokens, at pos, on
 * slot `slot` of st (updated). logits: V floats. */
static int run_alone(const model_set *m, const int32_t *ids, int len, int32_t pos, int slot, ir_tensor *st,
                     float *logits)
{
    char err[2048];
    int64_t dims[IR_MAX_SYMS] = {1, len, m->T};
    ir_tensor *p = calloc((size_t)m->gp->nparams, sizeof *p), out[1];
    make_params(m, m->gp, dims, ids, &pos, st, p);
    int32_t sl = slot;
    int rc = ir_interp_run_slots(m->gp, dims, p, &sl, 1, out, err, sizeof err);
    CHECK_MSG(rc == 0, "alone: %s", err);
    if (rc == 0) {
        memcpy(logits, out[0].f, (size_t)m->V * sizeof(float));
        ir_tensor_free(&out[0]);
        take_states(m, m->gp, p, st);
    }
    free_params(m->gp, p);
    free(p);
    return rc;
}

/* The sequences (cu over ids, pos, slots) in one packed run of g on st (updated).
 * logits: nseq x V floats. */
static int run_packed(const model_set *m, const ir_graph *g, const int32_t *ids, const int32_t *cu, int nseq,
                      const int32_t *pos, const int32_t *slots, ir_tensor *st, float *logits)
{
    char err[2048];
    int64_t dims[IR_MAX_SYMS] = {nseq, cu[nseq], m->T};
    ir_tensor *p = calloc((size_t)g->nparams, sizeof *p), out[1];
    make_params(m, g, dims, ids, pos, st, p);
    int rc = ir_interp_run_packed(g, dims, p, cu, nseq, slots, out, err, sizeof err);
    CHECK_MSG(rc == 0, "packed: %s", err);
    if (rc == 0) {
        CHECK(out[0].rank == 3 && out[0].shape[0] == nseq && out[0].shape[1] == 1 && out[0].shape[2] == m->V);
        memcpy(logits, out[0].f, (size_t)nseq * m->V * sizeof(float));
        ir_tensor_free(&out[0]);
        take_states(m, g, p, st);
    }
    free_params(g, p);
    free(p);
    return rc;
}

static bool states_equal(const model_set *m, ir_tensor *a, ir_tensor *b, const char *what)
{
    bool same = true;
    for (int i = 0; i < m->gp->nparams; i++)
        if (m->gp->params[i]->op == IR_OP_STATE && memcmp(a[i].f, b[i].f, (size_t)ir_tensor_numel(&a[i]) * sizeof(float))) {
            fprintf(stderr, "%s: state %s differs\n", what, m->gp->params[i]->name);
            same = false;
        }
    return same;
}

static void whole_model(void)
{
    char err[2048];
    kc_define defs[] = {{"NL", "2"}, {"V", "64"}, {"D", "64"}, {"H", "4"}, {"KV", "2"}, {"F", "128"}};
    model_set m = {.NS = 4, .T = 8, .V = 64};
    m.plain = open_unit(MODEL, NULL, defs, 6, false, false, err, sizeof err);
    CHECK_MSG(m.plain != NULL, "plain: %s", err);
    m.packed = open_unit(MODEL, NULL, defs, 6, true, true, err, sizeof err);
    CHECK_MSG(m.packed != NULL, "packed: %s", err);
    if (!m.plain || !m.packed) {
        kc_free(m.plain);
        kc_free(m.packed);
        return;
    }
    m.gp = kc_written(m.plain);
    m.gk = kc_written(m.packed);
    fill_weights(&m);
    const int V = m.V;

    /* three sequences, ragged, two of them continuing a cache at positions 2 and 1 */
    const int32_t ids[6] = {5, 17, 33, 2, 40, 9}, cu[4] = {0, 3, 4, 6}, pos[3] = {0, 2, 1}, slots[3] = {2, 0, 3};
    float *lp = malloc((size_t)3 * V * sizeof(float)), *la = malloc((size_t)V * sizeof(float));
    ir_tensor *sp = copy_states(&m), *sa = copy_states(&m);
    if (run_packed(&m, m.gk, ids, cu, 3, pos, slots, sp, lp) == 0) {
        for (int n = 0; n < 3; n++) {
            if (run_alone(&m, ids + cu[n], cu[n + 1] - cu[n], pos[n], slots[n], sa, la)) continue;
            CHECK_MSG(!memcmp(la, lp + n * V, (size_t)V * sizeof(float)), "sequence %d: packed logits differ from its run alone", n);
        }
        CHECK_MSG(states_equal(&m, sp, sa, "ragged"), "ragged: cache rows differ from the runs alone");
        /* slot 1 was in no sequence: as it was */
        ir_tensor *s0 = copy_states(&m);
        for (int i = 0; i < m.gp->nparams; i++) {
            if (m.gp->params[i]->op != IR_OP_STATE) continue;
            int64_t w = ir_tensor_numel(&s0[i]) / m.NS;
            CHECK(!memcmp(sp[i].f + w, s0[i].f + w, (size_t)w * sizeof(float)));
        }
        free_states(&m, s0);
    }

    /* the fused packed graph against the packed graph as written */
    float *lf = malloc((size_t)3 * V * sizeof(float));
    ir_tensor *sf = copy_states(&m), *sw = copy_states(&m);
    if (run_packed(&m, kc_fused(m.packed), ids, cu, 3, pos, slots, sf, lf) == 0 &&
        run_packed(&m, m.gk, ids, cu, 3, pos, slots, sw, lp) == 0) {
        double num = 0, den = 0;
        for (int j = 0; j < 3 * V; j++) {
            num += (lf[j] - lp[j]) * (lf[j] - lp[j]);
            den += lp[j] * lp[j];
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        printf("fused packed vs packed as written: relative L2 error of the logits %.3g\n", rel);
        CHECK(rel < 2e-2);
    }
    free_states(&m, sf);
    free_states(&m, sw);
    free(lf);

    /* chunked: prompt A (5 tokens, slot 1) one-shot, against 3 tokens packed with
     * prompt B (2 tokens, slot 0) and then 2 tokens packed with prompt C (1 token
     * at position 4, slot 3) */
    const int32_t A[5] = {7, 21, 3, 60, 11}, Bp[2] = {8, 30}, C = 44;
    ir_tensor *one = copy_states(&m), *chk = copy_states(&m);
    float *lone = malloc((size_t)V * sizeof(float)), *lc = malloc((size_t)2 * V * sizeof(float));
    CHECK(run_alone(&m, A, 5, 0, 1, one, lone) == 0);
    CHECK(run_alone(&m, Bp, 2, 0, 0, one, la) == 0);
    CHECK(run_alone(&m, &C, 1, 4, 3, one, la) == 0);
    const int32_t ids1[5] = {A[0], A[1], A[2], Bp[0], Bp[1]}, cu1[3] = {0, 3, 5}, pos1[2] = {0, 0}, sl1[2] = {1, 0};
    const int32_t ids2[3] = {A[3], A[4], C}, cu2[3] = {0, 2, 3}, pos2[2] = {3, 4}, sl2[2] = {1, 3};
    if (run_packed(&m, m.gk, ids1, cu1, 2, pos1, sl1, chk, lc) == 0 && run_packed(&m, m.gk, ids2, cu2, 2, pos2, sl2, chk, lc) == 0) {
        CHECK_MSG(!memcmp(lone, lc, (size_t)V * sizeof(float)), "chunked: the last chunk's logits differ from the one-shot prefill");
        CHECK_MSG(!memcmp(la, lc + V, (size_t)V * sizeof(float)), "chunked: prompt C's logits differ from its run alone");
        CHECK_MSG(states_equal(&m, one, chk, "chunked"), "chunked: cache rows differ from the one-shot prefill");
    }
    free_states(&m, one);
    free_states(&m, chk);
    free(lone);
    free(lc);

    /* a slot table entry given twice fails as it does unpacked */
    const int32_t dup[3] = {2, 2, 3};
    int64_t dims[IR_MAX_SYMS] = {3, 6, m.T};
    ir_tensor *p = calloc((size_t)m.gk->nparams, sizeof *p), out[1];
    make_params(&m, m.gk, dims, ids, pos, sp, p);
    CHECK(ir_interp_run_packed(m.gk, dims, p, cu, 3, dup, out, err, sizeof err) != 0 && strstr(err, "given twice"));
    free_params(m.gk, p);
    free(p);

    free_states(&m, sp);
    free_states(&m, sa);
    free(lp);
    free(la);
    for (int i = 0; i < m.gp->nparams; i++) {
        ir_tensor_free(&m.weights[i]);
        ir_tensor_free(&m.states[i]);
    }
    free(m.weights);
    free(m.states);
    kc_free(m.plain);
    kc_free(m.packed);
}

/* ---- 3. models that do not pack ------------------------------------------------------ */

static void no_pack(void)
{
    char err[2048];
    /* a per-sequence value broadcast over the tokens */
    const char *bcast = "model m {\n  dims B, S, T\n  input x : f32[B, S, 4]\n  input g : f32[B, 1, 4]\n"
                        "  output y = x * g\n}\n";
    kc_unit *u = open_unit("bcast.kiln", bcast, NULL, 0, true, false, err, sizeof err);
    CHECK(u == NULL && strstr(err, "mixes per-sequence and per-token values"));
    printf("broadcast: %s\n", err);
    /* an axis over B and S */
    const char *flat = "model m {\n  dims B, S, T\n  input x : f32[B, S, 4]\n  input pos : i32[B]\n"
                       "  y = reshape(x, [B * S, 4])\n  output o = rope(reshape(y, [B, S, 2, 2]), pos)\n}\n";
    u = open_unit("flat.kiln", flat, NULL, 0, true, false, err, sizeof err);
    CHECK(u == NULL && strstr(err, "an axis over both B and S"));
    printf("B*S axis: %s\n", err);
    const char *nodims = "model m {\n  dims N\n  input x : f32[N, 4]\n  output y = x * 2\n}\n";
    u = open_unit("nodims.kiln", nodims, NULL, 0, true, false, err, sizeof err);
    CHECK(u == NULL && strstr(err, "no dims B (sequences) and S"));
    kc_define b[] = {{"B", "2"}, {"S", "3"}};
    u = open_unit(MODEL, NULL, b, 2, true, false, err, sizeof err);
    CHECK(u == NULL && strstr(err, "stay unpacked"));
}

/* ---- 4. codegen ---------------------------------------------------------------------- */

static bool has_packed_op(const ir_graph *g, int group)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->group == group && g->nodes[i]->attrs.packed) return true;
    return false;
}

static int check_kernel(const ir_graph *g, const cg_kernel *K, int group)
{
    bool state = false, seqs = false;
    for (int i = 0; i < K->nargs; i++) {
        const cg_arg *a = &K->args[i];
        if (a->kind == CG_ARG_SEQS) seqs = !strcmp(a->field, "cu_q");
        if (a->kind == CG_ARG_STATE || (a->kind == CG_ARG_PARAM && g->params[a->index]->op == IR_OP_STATE)) state = true;
    }
    if (!state && !has_packed_op(g, group)) return 0;
    CHECK_MSG(seqs && K->source && strstr(K->source, "p.cu_q"), "kernel %s: a packed op or a state without the table", K->name);
    CHECK_MSG(K->family != CG_FAMILY_ATTENTION_DECODE, "kernel %s: packed attention took the decode template", K->name);
    if (g->groups[group].anchor->op == IR_OP_ATTENTION)
        CHECK_MSG(K->source && strstr(K->source, "#define KILN_ATT_VARLEN 1"), "kernel %s: attention without VARLEN", K->name);
    rt_compile_opts co = {.arch = "sm_90a"};
    rt_compile_result r = {0};
    rt_status st = rt_nvrtc_compile(K->name, K->source, &co, RT_TARGET_CUBIN, &r);
    CHECK_MSG(st == RT_OK, "kernel %s: %s", K->name, r.message ? r.message : "?");
    rt_compile_result_free(&r);
    return 1;
}

static void codegen(void)
{
    char err[2048];
    kc_define defs[] = {{"NL", "1"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
    kc_options o = {.name = MODEL, .defines = defs, .ndefines = 6, .packed = true};
    kc_unit *u = NULL;
    CHECK(kc_open(&o, NULL, &u, err, sizeof err) == RT_OK);
    if (!u || kc_parse(u, err, sizeof err) != RT_OK || kc_fuse(u, err, sizeof err) != RT_OK) {
        CHECK_MSG(0, "compile: %s", err);
        kc_free(u);
        return;
    }
    const ir_graph *g = kc_fused(u);
    cg_target tg;
    kc_tool_target("sm_90a", &tg);
    int64_t shapes[][3] = {{3, 200, 256}, {3, 6, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        cg_options co = {.dims = shapes[s], .target = &tg};
        cg_kernel *ks = NULL;
        int nk = 0, touched = 0, att = 0;
        CHECK_MSG(cg_emit_all_ex(g, &co, &ks, &nk, err, sizeof err) == 0, "emit: %s", err);
        for (int i = 0; i < nk; i++) {
            touched += check_kernel(g, &ks[i], ks[i].group);
            if (ks[i].fallback) touched += check_kernel(g, ks[i].fallback, ks[i].group);
            att += ks[i].source && strstr(ks[i].source, "#define KILN_ATT_VARLEN 1") != NULL;
        }
        printf("packed B=%lld S=%lld: %d kernels, %d of them (and fallbacks) read the sequence table, compiled\n",
               (long long)shapes[s][0], (long long)shapes[s][1], nk, touched);
        CHECK(touched >= 3 && att == 1); /* the QKV epilogue, attention, the last tokens' norm */
        cg_kernels_free(ks, nk);
    }
    kc_free(u);
}

int main(void)
{
    by_hand();
    whole_model();
    no_pack();
    codegen();
    return CHECK_DONE();
}
