/* tests/model/test_packed_gpu.c — packed variable-length prefill on a GPU
 * (label gpu; exits 77 without a device).
 *
 *   test_packed_gpu MODEL.kiln [NAME=VALUE defines...]
 *
 * The model is compiled twice, as written (max B 4, S 48) and packed
 * (kiln_model_options.packed, max B 4, S 96), both bound to the same random
 * bf16 weights (device memory, borrowed by both); each has its own zeroed
 * KV caches of 4 slots.
 *   1. ragged: prompts of 40, 17, 9 and 1 tokens into slots {2, 0, 3, 1},
 *      once per prompt unpadded through the model as written (B = 1, S = its
 *      length, a slot table [slot]) and once all together in one packed run
 *      (B = 4, S = 67, table cu = {0, 40, 57, 66, 67}): each prompt's logits
 *      (the packed run's row b) within 2e-2 of the largest |logit| of the
 *      unpadded one, and every cache row within 2e-2 of the largest |value|;
 *      both report how many cache bytes are equal.
 *   2. chunked: a 30-token prompt prefilled one-shot into slot 1, against 18
 *      of its tokens packed with a 5-token prompt (slot 0) and then its other
 *      12 (at position 18) packed with the 2-token second chunk (position 5,
 *      slot 3) of a prompt whose first 5 tokens ran packed alone (B = 1): the last chunk's logits and all
 *      cache rows as one-shot, within the same tolerances (the table's
 *      pointer stays, its contents change between the calls).
 *   3. a packed run without a table fails with a message.
 *   4. kiln_generate, greedy, on three prompts of 11, 5 and 8 tokens: with
 *      the packed model (kiln_generate_options.packed) one prefill call
 *      instead of three, and each prompt's first token as without it; the
 *      tokens that agree before the first difference are printed (random
 *      weights make near-ties).
 * KILN_PACKED_ONE=1: section 1's packed run only (for compute-sanitizer).
 * KILN_MODEL_WARM=1: compile-only, prepares both models' shapes (fills the
 * kernel cache; no device needed) and exits. */
#include "api/api_util.h"
#include "ir/ir.h"

#include <math.h>
#include <stdbool.h>

#include "check.h"

#define MAXT 128
#define NSLOT 4

static kiln_context *ctx;

static float bf2f(uint16_t h) { return ir_bf16_bits_to_f32(h); }
static uint16_t f2bf(float f) { return ir_f32_to_bf16_bits(f); }

typedef struct weights {
    int n;
    const char *name[512];
    void *dev[512];
} weights;

/* random bf16 weights (scaled by 1/sqrt(fan-in)) for every weight of m */
static int make_weights(kiln_model *m, weights *w)
{
    uint64_t seed = 12345;
    w->n = kiln_model_num_tensors(m, KILN_WEIGHT);
    for (int i = 0; i < w->n && i < 512; i++) {
        kiln_tensor_info ti;
        if (kiln_model_tensor(m, KILN_WEIGHT, i, NULL, 0, &ti) != KILN_OK || ti.dtype != KILN_BF16) return -1;
        size_t numel = ti.bytes / 2;
        uint16_t *h = malloc(ti.bytes);
        if (!h) return -1;
        double scale = ti.rank == 1 ? 0.0 : 1.0 / sqrt((double)ti.shape[ti.rank - 1]);
        for (size_t j = 0; j < numel; j++) {
            double r = (double)(api_rand(&seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
            h[j] = f2bf(ti.rank == 1 ? (float)(1.0 + 0.1 * r) : (float)(r * scale * 1.7));
        }
        w->name[i] = ti.name;
        if (kiln_device_alloc(ctx, ti.bytes, &w->dev[i]) != KILN_OK || kiln_copy_to_device(ctx, w->dev[i], h, ti.bytes) != KILN_OK) {
            free(h);
            return -1;
        }
        free(h);
    }
    return 0;
}

static int bind_weights(kiln_model *m, const weights *w)
{
    for (int i = 0; i < w->n; i++)
        if (kiln_model_bind_weight(m, w->name[i], w->dev[i]) != KILN_OK) {
            fprintf(stderr, "bind %s: %s\n", w->name[i], kiln_last_error());
            return -1;
        }
    return 0;
}

/* every state's bytes, in one host buffer (NULL: the size) */
static size_t states_bytes(kiln_model *m, uint8_t *dst)
{
    size_t total = 0;
    int ns = kiln_model_num_tensors(m, KILN_STATE);
    for (int i = 0; i < ns; i++) {
        kiln_tensor_info ti;
        void *p;
        size_t bytes;
        if (kiln_model_tensor(m, KILN_STATE, i, NULL, 0, &ti) != KILN_OK || kiln_model_state_ptr(m, ti.name, &p, &bytes) != KILN_OK)
            return 0;
        if (dst) CHECK(kiln_copy_to_host(ctx, dst + total, p, bytes) == KILN_OK);
        total += bytes;
    }
    return total;
}

/* the two models' caches: within tol of the largest |value|; prints the equal bytes */
static void compare_states(const char *what, kiln_model *a, kiln_model *b)
{
    size_t na = states_bytes(a, NULL), nb = states_bytes(b, NULL);
    CHECK_MSG(na == nb && na > 0, "%s: state sizes %zu and %zu", what, na, nb);
    if (na != nb || !na) return;
    uint8_t *x = malloc(na), *y = malloc(nb);
    states_bytes(a, x);
    states_bytes(b, y);
    const uint16_t *u = (const uint16_t *)x, *v = (const uint16_t *)y;
    double amax = 0, dmax = 0;
    size_t eq = 0;
    for (size_t i = 0; i < na / 2; i++) {
        float p = bf2f(u[i]), q = bf2f(v[i]);
        amax = fmax(amax, fabs(p));
        dmax = fmax(dmax, fabs((double)p - q));
        eq += u[i] == v[i];
    }
    printf("%s: caches %zu of %zu values equal, largest |diff| %.4g (largest |value| %.4g)\n", what, eq, na / 2, dmax, amax);
    CHECK_MSG(dmax <= 2e-2 * amax && amax > 0, "%s: cache rows differ by %.4g", what, dmax);
    free(x);
    free(y);
}

static void compare_logits(const char *what, const uint16_t *want, const uint16_t *got, int V)
{
    double amax = 0, dmax = 0;
    int eq = 0;
    for (int j = 0; j < V; j++) {
        amax = fmax(amax, fabs(bf2f(want[j])));
        dmax = fmax(dmax, fabs((double)bf2f(want[j]) - bf2f(got[j])));
        eq += want[j] == got[j];
    }
    printf("%s: logits %d of %d equal, largest |diff| %.4g (largest |logit| %.4g)\n", what, eq, V, dmax, amax);
    CHECK_MSG(dmax <= 2e-2 * amax && amax > 0, "%s: logits differ by %.4g", what, dmax);
}

typedef struct dev {
    void *ids, *pos, *slots, *table, *logits;
} dev;

/* One unpadded prompt through the model as written: B = 1 into slot `slot` at `pos`. */
static int run_plain(kiln_model *m, dev *d, const int32_t *ids, int len, int pos, int slot, uint16_t *logits, int V)
{
    int32_t s = slot, p = pos;
    CHECK(kiln_copy_to_device(ctx, d->ids, ids, (size_t)len * 4) == KILN_OK && kiln_copy_to_device(ctx, d->pos, &p, 4) == KILN_OK &&
          kiln_copy_to_device(ctx, d->slots, &s, 4) == KILN_OK);
    CHECK(kiln_model_set_slot_table(m, d->slots) == KILN_OK);
    kiln_dim dm[] = {{"B", 1}, {"S", len}, {"T", MAXT}};
    kiln_tensor_arg ia[] = {{"ids", d->ids}, {"pos", d->pos}}, oa[] = {{"logits", d->logits}};
    kiln_status st = kiln_model_run(m, dm, 3, ia, 2, oa, 1, NULL);
    CHECK_MSG(st == KILN_OK, "plain run (S=%d): %s", len, kiln_last_error());
    if (st != KILN_OK || kiln_model_sync(m) != KILN_OK) return -1;
    CHECK(kiln_copy_to_host(ctx, logits, d->logits, (size_t)V * 2) == KILN_OK);
    return 0;
}

/* n prompts in one packed run: lens, positions, slots. logits: n x V. */
static int run_packed(kiln_model *m, dev *d, const int32_t *ids, const int *lens, int n, const int32_t *pos,
                      const int32_t *slots, uint16_t *logits, int V)
{
    int32_t table[NSLOT + 1 + 128];
    int total = 0;
    CHECK(kiln_packed_table(lens, n, table, &total) == KILN_OK);
    CHECK(kiln_copy_to_device(ctx, d->ids, ids, (size_t)total * 4) == KILN_OK &&
          kiln_copy_to_device(ctx, d->pos, pos, (size_t)n * 4) == KILN_OK &&
          kiln_copy_to_device(ctx, d->slots, slots, (size_t)n * 4) == KILN_OK &&
          kiln_copy_to_device(ctx, d->table, table, (size_t)(n + 1 + total) * 4) == KILN_OK);
    CHECK(kiln_model_set_slot_table(m, d->slots) == KILN_OK && kiln_model_set_packed(m, d->table) == KILN_OK);
    kiln_dim dm[] = {{"B", n}, {"S", total}, {"T", MAXT}};
    kiln_tensor_arg ia[] = {{"ids", d->ids}, {"pos", d->pos}}, oa[] = {{"logits", d->logits}};
    kiln_status st = kiln_model_run(m, dm, 3, ia, 2, oa, 1, NULL);
    CHECK_MSG(st == KILN_OK, "packed run (B=%d S=%d): %s", n, total, kiln_last_error());
    if (st != KILN_OK || kiln_model_sync(m) != KILN_OK) return -1;
    CHECK(kiln_copy_to_host(ctx, logits, d->logits, (size_t)n * V * 2) == KILN_OK);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_packed_gpu MODEL.kiln [NAME=VALUE...]\n");
        return 77;
    }
    kiln_define defs[16];
    int nd = 0;
    for (int i = 2; i < argc && nd < 16; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) continue;
        *eq = 0;
        defs[nd++] = (kiln_define){argv[i], eq + 1};
    }
    bool warm = getenv("KILN_MODEL_WARM") && !strcmp(getenv("KILN_MODEL_WARM"), "1");
    bool one = getenv("KILN_PACKED_ONE") && !strcmp(getenv("KILN_PACKED_ONE"), "1");
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
    kiln_dim maxp[] = {{"B", NSLOT}, {"S", 48}, {"T", MAXT}}, maxk[] = {{"B", NSLOT}, {"S", 96}, {"T", MAXT}};
    kiln_model_options mp = {.defines = defs, .ndefines = nd, .max_dims = maxp, .nmax_dims = 3, .lazy = 1};
    kiln_model_options mk = mp;
    mk.max_dims = maxk;
    mk.packed = 1;
    kiln_model *P = NULL, *K = NULL;
    if (kiln_model_compile_file(ctx, argv[1], &mp, &P) != KILN_OK || kiln_model_compile_file(ctx, argv[1], &mk, &K) != KILN_OK) {
        fprintf(stderr, "compile: %s\n", kiln_last_error());
        return 1;
    }
    /* the shapes below */
    const int plain_s[] = {40, 17, 9, 1, 30, 5, 2, 11, 8};
    const int packed_bs[][2] = {{4, 67}, {2, 23}, {1, 5}, {2, 14}, {3, 24}};
    if (warm) {
        for (size_t i = 0; i < sizeof plain_s / sizeof plain_s[0]; i++) {
            kiln_dim d[] = {{"B", 1}, {"S", plain_s[i]}, {"T", MAXT}};
            printf("prepare B=1 S=%d: %s\n", plain_s[i], kiln_model_prepare(P, d, 3) == KILN_OK ? "ok" : kiln_last_error());
        }
        for (size_t i = 0; i < sizeof packed_bs / sizeof packed_bs[0]; i++) {
            kiln_dim d[] = {{"B", packed_bs[i][0]}, {"S", packed_bs[i][1]}, {"T", MAXT}};
            printf("prepare packed B=%d S=%d: %s\n", packed_bs[i][0], packed_bs[i][1],
                   kiln_model_prepare(K, d, 3) == KILN_OK ? "ok" : kiln_last_error());
        }
        /* `kiln generate --packed` in tests/model/packed_device.sh: the packed model at T 64 (max S
         * 24: the three prompts), whole and in chunks of 3 */
        kiln_dim maxg[] = {{"B", NSLOT}, {"S", 24}, {"T", 64}};
        kiln_model_options mg = mk;
        mg.max_dims = maxg;
        kiln_model *G = NULL;
        if (kiln_model_compile_file(ctx, argv[1], &mg, &G) == KILN_OK) {
            const int gs[][2] = {{3, 24}, {3, 9}, {3, 8}, {2, 5}, {1, 2}};
            for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
                kiln_dim d[] = {{"B", gs[i][0]}, {"S", gs[i][1]}, {"T", 64}};
                printf("prepare packed B=%d S=%d T=64: %s\n", gs[i][0], gs[i][1], kiln_model_prepare(G, d, 3) == KILN_OK ? "ok" : kiln_last_error());
            }
            kiln_model_free(G);
        }
        kiln_dim d4[] = {{"B", 4}, {"S", 1}, {"T", MAXT}}; /* generate's decode steps: bucket 4 */
        printf("prepare B=4 S=1: %s\n", kiln_model_prepare(P, d4, 3) == KILN_OK ? "ok" : kiln_last_error());
        kiln_sampler *ks = NULL;
        kiln_sampling sv = {0};
        printf("sampler: %s\n", kiln_sampler_create(P, &sv, 4, &ks) == KILN_ERR_NO_DEVICE ? "compiled" : kiln_last_error());
        kiln_model_free(P);
        kiln_model_free(K);
        kiln_context_free(ctx);
        return 0;
    }
    weights w = {0};
    kiln_tensor_info lt;
    int V = 0;
    if (make_weights(P, &w) != 0 || bind_weights(P, &w) != 0 || bind_weights(K, &w) != 0 ||
        kiln_model_alloc_states(P) != KILN_OK || kiln_model_alloc_states(K) != KILN_OK ||
        kiln_model_find_tensor(P, "logits", NULL, 0, &lt) != KILN_OK) {
        fprintf(stderr, "setup: %s\n", kiln_last_error());
        return 1;
    }
    V = (int)lt.shape[lt.rank - 1];
    dev d;
    CHECK(kiln_device_alloc(ctx, 128 * 4, &d.ids) == KILN_OK && kiln_device_alloc(ctx, 64, &d.pos) == KILN_OK &&
          kiln_device_alloc(ctx, 64, &d.slots) == KILN_OK && kiln_device_alloc(ctx, (NSLOT + 1 + 128) * 4, &d.table) == KILN_OK &&
          kiln_device_alloc(ctx, (size_t)NSLOT * V * 2, &d.logits) == KILN_OK);
    uint16_t *lp = malloc((size_t)NSLOT * V * 2), *la = malloc((size_t)V * 2), *lb = malloc((size_t)NSLOT * V * 2);
    uint64_t seed = 99;
    int32_t ids[128];
    for (int i = 0; i < 128; i++) ids[i] = (int32_t)(api_rand(&seed) % (uint64_t)V);

    /* 1. ragged */
    const int lens[4] = {40, 17, 9, 1};
    const int32_t pos0[4] = {0, 0, 0, 0}, slots[4] = {2, 0, 3, 1};
    if (run_packed(K, &d, ids, lens, 4, pos0, slots, lp, V) == 0 && !one) {
        int off = 0;
        for (int b = 0; b < 4; b++) {
            char what[64];
            snprintf(what, sizeof what, "ragged: prompt %d (%d tokens, slot %d)", b, lens[b], slots[b]);
            if (run_plain(P, &d, ids + off, lens[b], 0, slots[b], la, V) == 0) compare_logits(what, la, lp + (size_t)b * V, V);
            off += lens[b];
        }
        compare_states("ragged", P, K);
    }
    if (one) goto done;

    /* 2. chunked */
    CHECK(kiln_model_zero_states(P) == KILN_OK && kiln_model_zero_states(K) == KILN_OK);
    const int32_t *A = ids, *Bp = ids + 30, *C = ids + 35;
    uint16_t *lone = malloc((size_t)V * 2), *lc = malloc((size_t)V * 2);
    CHECK(run_plain(P, &d, A, 30, 0, 1, lone, V) == 0);
    CHECK(run_plain(P, &d, Bp, 5, 0, 0, la, V) == 0);
    CHECK(run_plain(P, &d, C, 5, 0, 3, la, V) == 0);
    CHECK(run_plain(P, &d, C + 5, 2, 5, 3, lc, V) == 0); /* C's second chunk, unpacked */
    int32_t ids1[23], ids2[14];
    memcpy(ids1, A, 18 * 4);
    memcpy(ids1 + 18, Bp, 5 * 4);
    const int l1[2] = {18, 5};
    const int32_t p1[2] = {0, 0}, s1[2] = {1, 0};
    CHECK(run_packed(K, &d, ids1, l1, 2, p1, s1, lp, V) == 0);
    /* C's first chunk (5 tokens, slot 3) on its own through the packed model (B = 1) */
    const int l0[1] = {5};
    const int32_t p0[1] = {0}, s0[1] = {3};
    int32_t table0[1 + 1 + 5];
    int t0 = 0;
    CHECK(kiln_packed_table(l0, 1, table0, &t0) == KILN_OK && t0 == 5);
    {
        /* through the packed model too: B = 1, S = 5 */
        CHECK(kiln_copy_to_device(ctx, d.ids, C, 5 * 4) == KILN_OK && kiln_copy_to_device(ctx, d.pos, p0, 4) == KILN_OK &&
              kiln_copy_to_device(ctx, d.slots, s0, 4) == KILN_OK && kiln_copy_to_device(ctx, d.table, table0, sizeof table0) == KILN_OK);
        kiln_dim dm[] = {{"B", 1}, {"S", 5}, {"T", MAXT}};
        kiln_tensor_arg ia[] = {{"ids", d.ids}, {"pos", d.pos}}, oa[] = {{"logits", d.logits}};
        CHECK_MSG(kiln_model_run(K, dm, 3, ia, 2, oa, 1, NULL) == KILN_OK && kiln_model_sync(K) == KILN_OK,
                  "packed B=1: %s", kiln_last_error());
    }
    memcpy(ids2, A + 18, 12 * 4);
    memcpy(ids2 + 12, C + 5, 2 * 4);
    const int l2[2] = {12, 2};
    const int32_t p2[2] = {18, 5}, s2[2] = {1, 3};
    if (run_packed(K, &d, ids2, l2, 2, p2, s2, lb, V) == 0) {
        compare_logits("chunked: the 30-token prompt's last chunk against its one-shot prefill", lone, lb, V);
        compare_logits("chunked: the 7-token prompt's second chunk against its chunks unpacked", lc, lb + V, V);
        compare_states("chunked", P, K);
    }
    /* 3. without a table */
    CHECK(kiln_model_set_packed(K, NULL) == KILN_OK);
    {
        kiln_dim dm[] = {{"B", 2}, {"S", 14}, {"T", MAXT}};
        kiln_tensor_arg ia[] = {{"ids", d.ids}, {"pos", d.pos}}, oa[] = {{"logits", d.logits}};
        CHECK(kiln_model_run(K, dm, 3, ia, 2, oa, 1, NULL) != KILN_OK && strstr(kiln_last_error(), "sequence table"));
        printf("without a table: %s\n", kiln_last_error());
    }
    free(lone);
    free(lc);

    /* 4. kiln_generate with and without packed prefill */
    {
        const int gl[3] = {11, 5, 8};
        const int32_t *gp[3] = {ids + 40, ids + 60, ids + 70};
        enum { NEW = 12 };
        int32_t o1[3 * NEW], o2[3 * NEW];
        int n1[3], n2[3];
        kiln_generate_stats gs1, gs2;
        kiln_generate_options go = {.max_new = NEW};
        CHECK_MSG(kiln_generate(P, 3, gp, gl, &go, o1, n1, &gs1) == KILN_OK, "generate: %s", kiln_last_error());
        go.packed = K;
        CHECK_MSG(kiln_generate(P, 3, gp, gl, &go, o2, n2, &gs2) == KILN_OK, "generate packed: %s", kiln_last_error());
        printf("generate: prefill calls %d unpacked, %d packed\n", gs1.prefill_calls, gs2.prefill_calls);
        CHECK(gs1.prefill_calls == 3 && gs2.prefill_calls == 1);
        for (int b = 0; b < 3; b++) {
            int same = 0;
            while (same < NEW && o1[b * NEW + same] == o2[b * NEW + same]) same++;
            printf("generate: prompt %d (%d tokens): %d of %d greedy tokens as unpacked before the first difference\n", b, gl[b],
                   same, NEW);
            CHECK_MSG(same >= 1 && n1[b] == NEW && n2[b] == NEW, "prompt %d: the packed prefill's first token differs", b);
        }
    }
done:
    free(lp);
    free(la);
    free(lb);
    kiln_device_free(ctx, d.ids);
    kiln_device_free(ctx, d.pos);
    kiln_device_free(ctx, d.slots);
    kiln_device_free(ctx, d.table);
    kiln_device_free(ctx, d.logits);
    kiln_model_free(P);
    kiln_model_free(K);
    for (int i = 0; i < w.n; i++) kiln_device_free(ctx, w.dev[i]);
    kiln_context_free(ctx);
    return CHECK_DONE();
}
