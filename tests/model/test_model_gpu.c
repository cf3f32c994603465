/* tests/model/test_model_gpu.c — whole models on a GPU against Hugging Face
 * transformers (label gpu; exits 77 without a device or without the
 * reference, which tests/model/hf_reference.py writes on the GPU machine).
 *
 *   test_model_gpu MODEL.kiln CKPT_DIR REF.json [NAME=VALUE defines...]
 *
 * CKPT_DIR: save_pretrained of a random-weight LlamaForCausalLM /
 * Qwen2ForCausalLM (sharded: an index and several shards). REF.json (written
 * by hf_reference.py): a prompt, the teacher-forced logits of transformers
 * (the prompt's last position, then 32 steps, fed transformers' own greedy
 * tokens), each step's tolerance (3e-2 of its largest |logit|) and top-2
 * margin, and transformers' greedy continuations of a few prompts.
 *   1. teacher forcing: one prefill of the prompt (B=1, S=len) then 32 decode
 *      steps (S=1, one CUDA graph replayed), each fed the reference's token;
 *      every step's logits within the tolerance (max |diff|) and relative L2
 *      error < 3e-2; the GPU sampler's greedy token equals the reference's
 *      wherever its top-2 margin exceeds twice the tolerance.
 *   2. kiln_generate, greedy: the prompt alone; the prompt with prefill in
 *      chunks of 3; the prompt padded to a batch bucket of 2; three prompts of
 *      different lengths in one batch (each length prefilled on its own into
 *      its slot, then decoded together in bucket 4 with one padded row), and
 *      the same three through 2 slots (the third prompt joins when a sequence
 *      leaves): every sequence's tokens equal
 *      transformers' greedy ones, except that a step whose top-2 margin is
 *      under twice the tolerance may go either way (random weights make
 *      near-ties), which ends the comparison.
 *   3. sampling: temperature/top-k/top-p with a seed gives the same tokens
 *      twice, tokens inside the vocabulary; a stop token ends the sequence.
 *   4. the fused LM head (head_sample): teacher forcing again with the head in
 *      the sampler's kernel (its optional logits output within the tolerance of
 *      transformers', its token their argmax and transformers' greedy one
 *      where the margin allows); kiln_generate's ragged batch gives the unfused
 *      sampler's tokens wherever those match transformers'; a seeded sampled
 *      run reports how many tokens equal the unfused sampler's.
 *   5. the slot table: a server (kiln_server_*) where the three prompts join
 *      at different steps, one leaves and joins again in the freed slot while
 *      the others decode: each one's tokens equal transformers' greedy ones
 *      (as in 2); a prefill into slot 2 then decode steps of two other rows
 *      (one of them padding) leave slot 2's rows of every KV cache bit for bit
 *      as they were, and write slot 1 and 3; the errors: no free slot, a slot
 *      id not running, a prompt longer than T allows.
 * KILN_MODEL_SLOTS_ONLY=1: section 5 only (for compute-sanitizer).
 * KILN_MODEL_WARM=1: compile-only, prepares every shape the test runs (fills
 * the kernel cache; no device needed) and exits. */
#include "api/api_util.h"

#include <cuda_runtime_api.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>

#include "check.h"

#define STEPS 33
#define MAXT 64

static kiln_context *ctx;

typedef struct ref {
    int vocab, plen, prompt[64];
    int greedy[STEPS];
    float *logits; /* STEPS x vocab */
    float atol[STEPS], margin[STEPS];
    int nseq, lens[4], prompts[4][64], cont[4][STEPS];
    float cmargin[4][STEPS], catol[4][STEPS];
} ref;

static int ints(json_t *a, int *out, int max)
{
    int n = (int)json_array_size(a);
    for (int i = 0; i < n && i < max; i++) out[i] = (int)json_integer_value(json_array_get(a, (size_t)i));
    return n;
}

static void floats(json_t *a, float *out, int max)
{
    for (int i = 0; i < (int)json_array_size(a) && i < max; i++) out[i] = (float)json_number_value(json_array_get(a, (size_t)i));
}

static int load_ref(const char *path, ref *r)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) return -1;
    r->vocab = (int)json_integer_value(json_object_get(j, "vocab"));
    r->plen = ints(json_object_get(j, "prompt"), r->prompt, 64);
    ints(json_object_get(j, "greedy"), r->greedy, STEPS);
    floats(json_object_get(j, "atol"), r->atol, STEPS);
    floats(json_object_get(j, "margin"), r->margin, STEPS);
    json_t *ls = json_object_get(j, "logits");
    r->logits = calloc((size_t)STEPS * (size_t)r->vocab, sizeof(float));
    for (int s = 0; s < STEPS; s++) floats(json_array_get(ls, (size_t)s), r->logits + (size_t)s * (size_t)r->vocab, r->vocab);
    json_t *ps = json_object_get(j, "prompts");
    r->nseq = (int)json_array_size(ps);
    for (int b = 0; b < r->nseq && b < 4; b++) {
        json_t *p = json_array_get(ps, (size_t)b);
        r->lens[b] = ints(json_object_get(p, "prompt"), r->prompts[b], 64);
        ints(json_object_get(p, "greedy"), r->cont[b], STEPS);
        floats(json_object_get(p, "margin"), r->cmargin[b], STEPS);
        floats(json_object_get(p, "atol"), r->catol[b], STEPS);
    }
    json_decref(j);
    return 0;
}

static float bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}


/* Tokens against transformers' greedy ones: equal at every step whose top-2
 * margin exceeds twice the tolerance; at a near-tie either token may win, and
 * when they differ the continuations diverge, so the comparison stops there.
 * Returns the steps compared. */
static int compare_greedy(const char *what, const int32_t *got, int ngot, const int *want, const float *margin,
                          const float *atol, int nwant)
{
    int k = 0;
    for (; k < nwant && k < ngot; k++) {
        bool near = margin[k] <= 2 * atol[k];
        if (got[k] == want[k]) continue;
        CHECK_MSG(near, "%s: token %d is %d, transformers' greedy %d (margin %.4f)", what, k, got[k], want[k], margin[k]);
        break;
    }
    printf("%s: %d of %d tokens equal to transformers' greedy%s\n", what, k, nwant,
           k < nwant ? " (then a near-tie went the other way)" : "");
    return k;
}

/* Every state's bytes (the KV caches of all layers), in one host buffer. */
static size_t states_bytes(kiln_model *m, uint8_t *dst)
{
    size_t total = 0;
    int ns = kiln_model_num_tensors(m, KILN_STATE);
    for (int i = 0; i < ns; i++) {
        kiln_tensor_info ti;
        void *p;
        size_t bytes;
        if (kiln_model_tensor(m, KILN_STATE, i, NULL, 0, &ti) != KILN_OK ||
            kiln_model_state_ptr(m, ti.name, &p, &bytes) != KILN_OK)
            return 0;
        if (dst) CHECK(kiln_copy_to_host(ctx, dst + total, p, bytes) == KILN_OK);
        total += bytes;
    }
    return total;
}

/* Whether slot `slot`'s rows (of nslots) are equal in two snapshots of the states. */
static bool slot_equal(kiln_model *m, const uint8_t *a, const uint8_t *b, int slot, int nslots)
{
    size_t off = 0;
    int ns = kiln_model_num_tensors(m, KILN_STATE);
    for (int i = 0; i < ns; i++) {
        kiln_tensor_info ti;
        void *p;
        size_t bytes;
        if (kiln_model_tensor(m, KILN_STATE, i, NULL, 0, &ti) != KILN_OK ||
            kiln_model_state_ptr(m, ti.name, &p, &bytes) != KILN_OK)
            return false;
        size_t row = bytes / (size_t)nslots;
        if (memcmp(a + off + row * (size_t)slot, b + off + row * (size_t)slot, row)) return false;
        off += bytes;
    }
    return true;
}

/* 5. the slot table (see the top of the file). */
static void slot_tests(kiln_model *m, const ref *r, const int32_t *const *pp, int V)
{
    (void)V;
    const int NS = 4; /* max B */
    kiln_generate_options go = {.max_new = STEPS};
    kiln_server *s = NULL;
    CHECK_MSG(kiln_server_create(m, &go, &s) == KILN_OK, "server: %s", kiln_last_error());
    if (!s) return;
    /* joins at different steps, a leave and a join into the freed slot */
    int seq[4] = {-1, -1, -1, -1}, joined_at[4] = {0}, steps = 0;
    int32_t toks[4][STEPS];
    int ntok[4] = {0}, again = -1;
    CHECK(kiln_server_join(s, 1, pp, r->lens, &seq[0]) == KILN_OK);
    for (; steps < 4 * STEPS && kiln_server_free_slots(s) < NS; steps++) {
        if (steps == 4) { CHECK(kiln_server_join(s, 1, pp + 1, r->lens + 1, &seq[1]) == KILN_OK); joined_at[1] = steps; }
        if (steps == 9) { CHECK(kiln_server_join(s, 1, pp + 2, r->lens + 2, &seq[2]) == KILN_OK); joined_at[2] = steps; }
        for (int b = 0; b < 4; b++) {
            int fin = 0, cnt = 0;
            if (seq[b] < 0) continue;
            int32_t tk[STEPS];
            CHECK(kiln_server_tokens(s, seq[b], tk, STEPS, &cnt, &fin) == KILN_OK);
            if (!fin) continue;
            memcpy(toks[b], tk, sizeof tk);
            ntok[b] = cnt;
            CHECK(kiln_server_leave(s, seq[b]) == KILN_OK);
            if (b == 0) { /* prompt 0 again, in the slot it freed, while 1 and 2 decode */
                CHECK(kiln_server_join(s, 1, pp, r->lens, &seq[3]) == KILN_OK);
                again = seq[3];
                CHECK_MSG(again == seq[0], "rejoin: slot %d, the freed one was %d", again, seq[0]);
                joined_at[3] = steps;
            }
            seq[b] = -1;
        }
        if (kiln_server_free_slots(s) < NS) CHECK_MSG(kiln_server_step(s) == KILN_OK, "step: %s", kiln_last_error());
    }
    for (int b = 0; b < 4; b++) {
        char what[96];
        snprintf(what, sizeof what, "server: prompt %d joined at step %d%s", b == 3 ? 0 : b, joined_at[b],
                 b == 3 ? ", again in the freed slot" : "");
        CHECK_MSG(ntok[b] == STEPS, "%s: %d tokens", what, ntok[b]);
        int pi = b == 3 ? 0 : b;
        compare_greedy(what, toks[b], ntok[b], r->cont[pi], r->cmargin[pi], r->catol[pi], STEPS);
    }
    /* errors */
    int bad = -1;
    CHECK(kiln_server_leave(s, 7) != KILN_OK && strstr(kiln_last_error(), "not a running sequence"));
    CHECK(kiln_server_step(s) != KILN_OK); /* nothing runs */
    int32_t longp[MAXT + 1] = {0};
    const int32_t *lp = longp;
    int ll = MAXT;
    CHECK(kiln_server_join(s, 1, &lp, &ll, &bad) != KILN_OK && strstr(kiln_last_error(), "max T"));
    const int32_t *four[5] = {pp[0], pp[0], pp[0], pp[0], pp[0]};
    int fl[5] = {r->lens[0], r->lens[0], r->lens[0], r->lens[0], r->lens[0]}, fs[5];
    CHECK(kiln_server_join(s, 5, four, fl, fs) != KILN_OK && strstr(kiln_last_error(), "slot"));
    CHECK(kiln_server_free_slots(s) == NS);
    kiln_server_free(s);

    /* padding rows and other sequences write no live slot */
    size_t total = states_bytes(m, NULL);
    uint8_t *before = malloc(total), *after = malloc(total);
    void *dslot, *ids, *pos, *lg;
    CHECK(kiln_device_alloc(ctx, 16, &dslot) == KILN_OK && kiln_device_alloc(ctx, 64 * 4, &ids) == KILN_OK &&
          kiln_device_alloc(ctx, 16, &pos) == KILN_OK && kiln_device_alloc(ctx, (size_t)NS * V * 2, &lg) == KILN_OK);
    CHECK(kiln_model_zero_states(m) == KILN_OK);
    int32_t tab[4] = {2, 0, 0, 0}, p0[4] = {0, 0, 0, 0};
    CHECK(kiln_copy_to_device(ctx, dslot, tab, 16) == KILN_OK && kiln_copy_to_device(ctx, pos, p0, 16) == KILN_OK);
    CHECK(kiln_copy_to_device(ctx, ids, pp[0], (size_t)r->lens[0] * 4) == KILN_OK);
    CHECK(kiln_model_set_slot_table(m, dslot) == KILN_OK);
    kiln_dim d1[] = {{"B", 1}, {"S", r->lens[0]}, {"T", MAXT}};
    kiln_tensor_arg ia[] = {{"ids", ids}, {"pos", pos}}, oa[] = {{"logits", lg}};
    CHECK_MSG(kiln_model_run(m, d1, 3, ia, 2, oa, 1, NULL) == KILN_OK, "prefill into slot 2: %s", kiln_last_error());
    CHECK(kiln_model_sync(m) == KILN_OK);
    if (before && after && total) {
        states_bytes(m, before);
        CHECK_MSG(!slot_equal(m, before, (uint8_t *)memset(after, 0, total), 2, NS) && slot_equal(m, before, after, 0, NS) &&
                      slot_equal(m, before, after, 1, NS) && slot_equal(m, before, after, 3, NS),
                  "a prefill with table [2] must write slot 2 only");
        int32_t t2[4] = {1, 3, 0, 0}, ps[4] = {3, 5, 0, 0}, id2[4] = {7, 0, 0, 0};
        CHECK(kiln_copy_to_device(ctx, dslot, t2, 16) == KILN_OK && kiln_copy_to_device(ctx, pos, ps, 16) == KILN_OK &&
              kiln_copy_to_device(ctx, ids, id2, 16) == KILN_OK);
        kiln_dim d2[] = {{"B", 2}, {"S", 1}, {"T", MAXT}};
        for (int k = 0; k < 3; k++) /* captured, then replayed: the table is read from device memory */
            CHECK_MSG(kiln_model_run(m, d2, 3, ia, 2, oa, 1, NULL) == KILN_OK, "decode rows in slots 1, 3: %s", kiln_last_error());
        CHECK(kiln_model_sync(m) == KILN_OK);
        states_bytes(m, after);
        CHECK_MSG(slot_equal(m, before, after, 2, NS) && slot_equal(m, before, after, 0, NS),
                  "decode rows mapped to slots 1 and 3 (one of them padding) changed slot 2 or 0");
        CHECK_MSG(!slot_equal(m, before, after, 1, NS) && !slot_equal(m, before, after, 3, NS),
                  "decode rows mapped to slots 1 and 3 did not write them");
    }
    CHECK(kiln_model_set_slot_table(m, NULL) == KILN_OK);
    free(before);
    free(after);
    kiln_device_free(ctx, dslot);
    kiln_device_free(ctx, ids);
    kiln_device_free(ctx, pos);
    kiln_device_free(ctx, lg);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test_model_gpu MODEL.kiln CKPT_DIR REF.json [NAME=VALUE...]\n");
        return 77;
    }
    const char *model = argv[1], *ckpt = argv[2], *refp = argv[3];
    kiln_define defs[16];
    int nd = 0;
    for (int i = 4; i < argc && nd < 16; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) continue;
        *eq = 0;
        defs[nd++] = (kiln_define){argv[i], eq + 1};
    }
    bool warm = getenv("KILN_MODEL_WARM") && !strcmp(getenv("KILN_MODEL_WARM"), "1");
    kiln_context_options co = {.compile_only = warm};
    kiln_status cs = kiln_context_create(&ctx, &co);
    if (cs == KILN_ERR_NO_DEVICE) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    if (cs != KILN_OK) {
        fprintf(stderr, "context: %s\n", kiln_last_error());
        return 1;
    }
    kiln_dim maxd[] = {{"B", 4}, {"S", 16}, {"T", MAXT}};
    kiln_model_options mo = {.defines = defs, .ndefines = nd, .max_dims = maxd, .nmax_dims = 3, .lazy = 1};
    kiln_model *m = NULL;
    if (kiln_model_compile_file(ctx, model, &mo, &m) != KILN_OK) {
        fprintf(stderr, "compile: %s\n", kiln_last_error());
        return 1;
    }
    ref r = {0};
    if (warm) {
        /* the shapes of the test below, for the kernel cache */
        int sets[][2] = {{1, 8}, {1, 1}, {1, 3}, {1, 2}, {2, 8}, {2, 1}, {4, 1}, {2, 3}, /* {2, 3}: samples/embed */
                         {1, 5}, {1, 11}, {2, 1}};                                          /* per-length prefills */
        for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
            kiln_dim d[] = {{"B", sets[i][0]}, {"S", sets[i][1]}, {"T", MAXT}};
            kiln_status st = kiln_model_prepare(m, d, 3);
            printf("prepare B=%d S=%d: %s\n", sets[i][0], sets[i][1], st == KILN_OK ? "ok" : kiln_last_error());
        }
        kiln_sampler *ks = NULL;
        kiln_sampling sv[] = {{0}, {.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 7}};
        for (int i = 0; i < 2; i++) /* the sampler's kernels into the cache (then: no device) */
            printf("sampler: %s\n", kiln_sampler_create(m, &sv[i], 4, &ks) == KILN_ERR_NO_DEVICE ? "compiled" : kiln_last_error());
        kiln_counters c;
        kiln_model_counters(m, &c);
        printf("compiled %llu, disk hits %llu\n", (unsigned long long)c.kernels_compiled, (unsigned long long)c.cache_hits_disk);
        kiln_model_free(m);
        mo.head_sample = 1; /* section 4's model */
        if (kiln_model_compile_file(ctx, model, &mo, &m) == KILN_OK) {
            int hsets[][2] = {{1, 8}, {1, 1}, {1, 5}, {1, 11}, {4, 1}};
            for (size_t i = 0; i < sizeof hsets / sizeof hsets[0]; i++) {
                kiln_dim d[] = {{"B", hsets[i][0]}, {"S", hsets[i][1]}, {"T", MAXT}};
                kiln_status st = kiln_model_prepare(m, d, 3);
                printf("head_sample: prepare B=%d S=%d: %s\n", hsets[i][0], hsets[i][1], st == KILN_OK ? "ok" : kiln_last_error());
            }
            kiln_model_free(m);
        } else printf("head_sample compile: %s\n", kiln_last_error());
        kiln_context_free(ctx);
        return 0;
    }
    if (load_ref(refp, &r) != 0) {
        printf("no reference %s: skipped\n", refp);
        return 77;
    }
    kiln_status ls = kiln_model_load_checkpoint(m, ckpt, 0);
    CHECK_MSG(ls == KILN_OK, "load %s: %s", ckpt, kiln_last_error());
    if (ls != KILN_OK) return CHECK_DONE();
    CHECK(kiln_model_alloc_states(m) == KILN_OK);
    if (getenv("KILN_MODEL_SLOTS_ONLY")) { /* section 5 alone (a sanitizer run) */
        const int32_t *sp[4];
        static int32_t sbuf[4][64];
        for (int b = 0; b < r.nseq; b++) {
            for (int j = 0; j < r.lens[b]; j++) sbuf[b][j] = r.prompts[b][j];
            sp[b] = sbuf[b];
        }
        slot_tests(m, &r, sp, r.vocab);
        free(r.logits);
        kiln_model_free(m);
        kiln_context_free(ctx);
        return CHECK_DONE();
    }

    /* 1. teacher forcing */
    int V = r.vocab;
    void *ids, *pos, *logits, *tok;
    CHECK(kiln_device_alloc(ctx, 4 * 64, &ids) == KILN_OK && kiln_device_alloc(ctx, 4 * 4, &pos) == KILN_OK &&
          kiln_device_alloc(ctx, (size_t)4 * V * 2, &logits) == KILN_OK && kiln_device_alloc(ctx, 16, &tok) == KILN_OK);
    kiln_sampler *greedy = NULL;
    kiln_sampling gs = {0};
    CHECK_MSG(kiln_sampler_create(m, &gs, 4, &greedy) == KILN_OK, "%s", kiln_last_error());
    uint16_t *hl = malloc((size_t)V * 2), *unfused = malloc((size_t)STEPS * (size_t)V * 2);
    int checked = 0;
    for (int s = 0; s < STEPS; s++) {
        int S = s == 0 ? r.plen : 1;
        int32_t in[64];
        int32_t p = s == 0 ? 0 : r.plen + s - 1;
        if (s == 0) memcpy(in, r.prompt, (size_t)r.plen * 4);
        else in[0] = r.greedy[s - 1];
        CHECK(kiln_copy_to_device(ctx, ids, in, (size_t)S * 4) == KILN_OK);
        CHECK(kiln_copy_to_device(ctx, pos, &p, 4) == KILN_OK);
        kiln_dim d[] = {{"B", 1}, {"S", S}, {"T", MAXT}};
        kiln_tensor_arg ia[] = {{"ids", ids}, {"pos", pos}}, oa[] = {{"logits", logits}};
        kiln_status rs = kiln_model_run(m, d, 3, ia, 2, oa, 1, NULL);
        CHECK_MSG(rs == KILN_OK, "step %d: %s", s, kiln_last_error());
        CHECK(kiln_sampler_run(greedy, logits, 1, tok, NULL) == KILN_OK);
        CHECK(kiln_model_sync(m) == KILN_OK);
        CHECK(kiln_copy_to_host(ctx, hl, logits, (size_t)V * 2) == KILN_OK);
        memcpy(unfused + (size_t)s * (size_t)V, hl, (size_t)V * 2);
        int32_t t;
        CHECK(kiln_copy_to_host(ctx, &t, tok, 4) == KILN_OK);
        const float *want = r.logits + (size_t)s * (size_t)V;
        double num = 0, den = 0, maxdiff = 0;
        int am = 0;
        for (int v = 0; v < V; v++) {
            double g = bf2f(hl[v]), e = want[v];
            num += (g - e) * (g - e);
            den += e * e;
            if (fabs(g - e) > maxdiff) maxdiff = fabs(g - e);
            if (bf2f(hl[v]) > bf2f(hl[am])) am = v;
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        CHECK_MSG(maxdiff <= r.atol[s] && rel < 3e-2, "step %d: max |diff| %.4g (tolerance %.4g), rel L2 %.3g", s, maxdiff,
                  r.atol[s], rel);
        CHECK_MSG(t == am, "step %d: the sampler's greedy token %d, the logits' argmax %d", s, t, am);
        if (r.margin[s] > 2 * r.atol[s]) {
            checked++;
            CHECK_MSG(t == r.greedy[s], "step %d: greedy token %d, transformers' %d (margin %.4f)", s, t, r.greedy[s],
                      r.margin[s]);
        }
        if (s == 0 || s == STEPS - 1) printf("step %d: max |diff| %.4g, rel L2 %.3g\n", s, maxdiff, rel);
    }
    printf("teacher forcing: %d steps, %d greedy tokens compared (margin over twice the tolerance)\n", STEPS, checked);
    kiln_counters c;
    kiln_model_counters(m, &c);
    printf("counters: compiled %llu, disk hits %llu, captures %llu, replays %llu, weight bytes released %llu\n",
           (unsigned long long)c.kernels_compiled, (unsigned long long)c.cache_hits_disk,
           (unsigned long long)c.graph_captures, (unsigned long long)c.graph_replays,
           (unsigned long long)c.weight_bytes_released);
    /* merged Q/K/V and interleaved gate/up replace the loaded originals: 2 layers x (q, k, v, gate, up) of the small
     * model (D 256, KV 2 x HD 64, F 512), bf16; Qwen2 adds its Q/K/V biases */
    CHECK_MSG(c.weight_bytes_released >= 2ull * 2 * (256 * 256 + 2 * 128 * 256 + 2 * 512 * 256),
              "weight bytes released: %llu", (unsigned long long)c.weight_bytes_released);
    CHECK(c.graph_replays >= STEPS - 3);
    kiln_sampler_free(greedy);

    /* 2. kiln_generate, greedy */
    int32_t out[4 * STEPS];
    int olen[4];
    kiln_generate_stats st;
    const int32_t *pp[4];
    int32_t pbuf[4][64];
    for (int b = 0; b < r.nseq; b++) {
        for (int j = 0; j < r.lens[b]; j++) pbuf[b][j] = r.prompts[b][j];
        pp[b] = pbuf[b];
    }
    kiln_generate_options go = {.max_new = STEPS};
    int32_t greedy_unfused[4 * STEPS], sampled_unfused[STEPS];
    int greedy_len[4] = {0};
    if (kiln_generate(m, 1, pp, r.lens, &go, out, olen, &st) == KILN_OK) {
        CHECK(olen[0] == STEPS && st.batch == 1);
        compare_greedy("generate", out, olen[0], r.cont[0], r.cmargin[0], r.catol[0], STEPS);
        printf("generate: ttft %.2f ms, %.1f tokens/s, %d steps\n", st.ttft_ms, st.tokens_per_s, st.decode_steps);
    } else CHECK_MSG(0, "generate: %s", kiln_last_error());
    go.prefill_chunk = 3;
    if (kiln_generate(m, 1, pp, r.lens, &go, out, olen, &st) == KILN_OK) {
        CHECK(st.prefill_calls == (r.lens[0] + 2) / 3);
        compare_greedy("generate, prefill in chunks of 3", out, olen[0], r.cont[0], r.cmargin[0], r.catol[0], STEPS);
    } else CHECK_MSG(0, "generate chunked: %s", kiln_last_error());
    go.prefill_chunk = 0;
    int b2[] = {2};
    go.buckets = b2;
    go.nbuckets = 1;
    if (kiln_generate(m, 1, pp, r.lens, &go, out, olen, &st) == KILN_OK) {
        CHECK(st.batch == 2);
        compare_greedy("generate, padded to a bucket of 2", out, olen[0], r.cont[0], r.cmargin[0], r.catol[0], STEPS);
    } else CHECK_MSG(0, "generate bucket 2: %s", kiln_last_error());
    go.buckets = NULL;
    go.nbuckets = 0;
    if (kiln_generate(m, r.nseq, pp, r.lens, &go, out, olen, &st) == KILN_OK) {
        CHECK(st.batch == 4);
        memcpy(greedy_unfused, out, sizeof greedy_unfused);
        memcpy(greedy_len, olen, sizeof greedy_len);
        for (int b = 0; b < r.nseq; b++) {
            char what[64];
            snprintf(what, sizeof what, "generate, ragged batch, sequence %d (%d tokens)", b, r.lens[b]);
            compare_greedy(what, out + b * STEPS, olen[b], r.cont[b], r.cmargin[b], r.catol[b], STEPS);
        }
        printf("ragged batch of %d: ttft %.2f ms, %.1f tokens/s\n", r.nseq, st.ttft_ms, st.tokens_per_s);
        /* one prefill per distinct length; decode steps for the longest-running sequence only */
        CHECK_MSG(st.prefill_calls == 3 && st.decode_steps == STEPS - 1, "ragged: %d prefills, %d decode steps",
                  st.prefill_calls, st.decode_steps);
    } else CHECK_MSG(0, "generate ragged: %s", kiln_last_error());
    go.max_live = 2; /* two slots: the third prompt waits for the first to finish */
    if (kiln_generate(m, r.nseq, pp, r.lens, &go, out, olen, &st) == KILN_OK) {
        CHECK(st.batch == 2);
        for (int b = 0; b < r.nseq; b++) {
            char what[80];
            snprintf(what, sizeof what, "generate, 2 slots for 3 prompts, sequence %d", b);
            compare_greedy(what, out + b * STEPS, olen[b], r.cont[b], r.cmargin[b], r.catol[b], STEPS);
        }
        CHECK_MSG(st.decode_steps == 2 * (STEPS - 1), "2 slots: %d decode steps", st.decode_steps);
    } else CHECK_MSG(0, "generate in 2 slots: %s", kiln_last_error());
    go.max_live = 0;

    /* 5. the slot table */
    slot_tests(m, &r, pp, V);

    /* 3. sampling */
    go.sampling = (kiln_sampling){.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 7};
    int32_t out2[4 * STEPS];
    int olen2[4];
    if (kiln_generate(m, 1, pp, r.lens, &go, out, olen, &st) == KILN_OK &&
        kiln_generate(m, 1, pp, r.lens, &go, out2, olen2, &st) == KILN_OK) {
        CHECK(olen[0] == STEPS && olen2[0] == STEPS && !memcmp(out, out2, sizeof(int32_t) * STEPS));
        memcpy(sampled_unfused, out, sizeof sampled_unfused);
        bool inside = true, varied = false;
        for (int k = 0; k < STEPS; k++) {
            inside &= out[k] >= 0 && out[k] < V;
            varied |= k && out[k] != out[0];
        }
        CHECK(inside && varied);
        int32_t stop = out[5];
        go.stop_ids = &stop;
        go.nstop = 1;
        CHECK(kiln_generate(m, 1, pp, r.lens, &go, out2, olen2, &st) == KILN_OK);
        int first = 0;
        while (out[first] != stop) first++;
        CHECK_MSG(olen2[0] == first + 1 && out2[first] == stop, "stop token: %d tokens, want %d", olen2[0], first + 1);
    } else CHECK_MSG(0, "sampling: %s", kiln_last_error());

    /* 4. the fused LM head (head_sample): the same model with the head in the sampler's kernel */
    kiln_model *fm = NULL;
    mo.head_sample = 1;
    CHECK_MSG(kiln_model_compile_file(ctx, model, &mo, &fm) == KILN_OK, "compile head_sample: %s", kiln_last_error());
    if (fm && kiln_model_load_checkpoint(fm, ckpt, 0) == KILN_OK && kiln_model_alloc_states(fm) == KILN_OK) {
        kiln_tensor_info hi;
        CHECK(kiln_model_find_tensor(fm, "head_in", NULL, 0, &hi) == KILN_OK);
        int D = (int)hi.shape[2];
        void *hidden = NULL;
        CHECK(kiln_device_alloc(ctx, (size_t)4 * D * 2, &hidden) == KILN_OK);
        kiln_sampler *fs = NULL;
        CHECK_MSG(kiln_sampler_create(fm, &gs, 4, &fs) == KILN_OK, "%s", kiln_last_error());
        CHECK(kiln_sampler_run(fs, logits, 1, tok, NULL) != KILN_OK); /* it computes the head: run_head */
        double worst = 0;
        int same_bits = 0, fchecked = 0;
        for (int s = 0; s < STEPS && fs; s++) {
            int S = s == 0 ? r.plen : 1;
            int32_t in[64];
            int32_t p = s == 0 ? 0 : r.plen + s - 1;
            if (s == 0) memcpy(in, r.prompt, (size_t)r.plen * 4);
            else in[0] = r.greedy[s - 1];
            CHECK(kiln_copy_to_device(ctx, ids, in, (size_t)S * 4) == KILN_OK);
            CHECK(kiln_copy_to_device(ctx, pos, &p, 4) == KILN_OK);
            kiln_dim d[] = {{"B", 1}, {"S", S}, {"T", MAXT}};
            kiln_tensor_arg ia[] = {{"ids", ids}, {"pos", pos}}, oa[] = {{"head_in", hidden}};
            CHECK_MSG(kiln_model_run(fm, d, 3, ia, 2, oa, 1, NULL) == KILN_OK, "fused step %d: %s", s, kiln_last_error());
            CHECK(kiln_sampler_run_head(fs, hidden, 1, tok, logits, NULL) == KILN_OK);
            CHECK(kiln_model_sync(fm) == KILN_OK);
            CHECK(kiln_copy_to_host(ctx, hl, logits, (size_t)V * 2) == KILN_OK);
            int32_t t;
            CHECK(kiln_copy_to_host(ctx, &t, tok, 4) == KILN_OK);
            const float *want = r.logits + (size_t)s * (size_t)V;
            const uint16_t *uf = unfused + (size_t)s * (size_t)V;
            double maxdiff = 0, maxu = 0;
            int am = 0;
            for (int v = 0; v < V; v++) {
                double g = bf2f(hl[v]);
                if (fabs(g - want[v]) > maxdiff) maxdiff = fabs(g - want[v]);
                if (fabs(g - bf2f(uf[v])) > maxu) maxu = fabs(g - bf2f(uf[v]));
                same_bits += hl[v] == uf[v];
                if (bf2f(hl[v]) > bf2f(hl[am])) am = v;
            }
            if (maxu > worst) worst = maxu;
            CHECK_MSG(maxdiff <= r.atol[s], "fused step %d: max |diff| %.4g against transformers (tolerance %.4g)", s,
                      maxdiff, r.atol[s]);
            CHECK_MSG(t == am, "fused step %d: the fused sampler's token %d, its logits' argmax %d", s, t, am);
            if (r.margin[s] > 2 * r.atol[s]) {
                fchecked++;
                CHECK_MSG(t == r.greedy[s], "fused step %d: greedy token %d, transformers' %d", s, t, r.greedy[s]);
            }
        }
        printf("fused head, teacher forcing: %d greedy tokens compared; logits against the unfused head: max |diff| %.4g, "
               "%.1f%% identical bits\n", fchecked, worst, 100.0 * same_bits / ((double)STEPS * V));
        kiln_sampler_free(fs);
        kiln_device_free(ctx, hidden);
        /* generation: the fused sampler gives the unfused one's tokens (greedy; and sampled, same seed) */
        go.sampling = (kiln_sampling){0};
        go.stop_ids = NULL;
        go.nstop = 0;
        if (kiln_generate(fm, r.nseq, pp, r.lens, &go, out, olen, &st) == KILN_OK) {
            CHECK(st.batch == 4);
            for (int b = 0; b < r.nseq; b++) {
                char what[80];
                snprintf(what, sizeof what, "fused head, ragged batch, sequence %d", b);
                int k = compare_greedy(what, out + b * STEPS, olen[b], r.cont[b], r.cmargin[b], r.catol[b], STEPS);
                int same = 0;
                while (same < olen[b] && same < greedy_len[b] && out[b * STEPS + same] == greedy_unfused[b * STEPS + same]) same++;
                CHECK_MSG(same >= k, "fused head, sequence %d: equal to the unfused sampler for %d tokens, to transformers for %d",
                          b, same, k);
            }
        } else CHECK_MSG(0, "fused generate: %s", kiln_last_error());
        go.sampling = (kiln_sampling){.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 7};
        if (kiln_generate(fm, 1, pp, r.lens, &go, out, olen, &st) == KILN_OK) {
            int same = 0;
            while (same < STEPS && out[same] == sampled_unfused[same]) same++;
            printf("fused head, sampled (seed 7): %d of %d tokens equal to the unfused sampler's\n", same, STEPS);
            CHECK(olen[0] == STEPS && same >= 1);
        } else CHECK_MSG(0, "fused sampling: %s", kiln_last_error());
    } else CHECK_MSG(0, "fused head model: %s", kiln_last_error());
    kiln_model_free(fm);

    free(hl);
    free(unfused);
    free(r.logits);
    kiln_device_free(ctx, ids);
    kiln_device_free(ctx, pos);
    kiln_device_free(ctx, logits);
    kiln_device_free(ctx, tok);
    kiln_model_free(m);
    kiln_context_free(ctx);
    return CHECK_DONE();
}
