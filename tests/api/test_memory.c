/* tests/api/test_memory.c — the plan's memory figures are the bytes the
 * runtime allocates (kiln_model_memory).
 *
 * Without arguments (no GPU needed, a compile_only context): for every
 * sample and the CLI's test models, at their full sizes, the figures the plan
 * states (KILN_MEMORY_PLANNED: the compiler's memory plan, codegen's
 * bind-time copies, the states' declared types) equal what the runtime's
 * allocators will ask for (KILN_MEMORY_REQUIRED: the arena its variants
 * need, its packed buffers, its states, its kernels' workspaces), field by
 * field, and kiln_model_describe prints them.
 *
 * With `gpu` (label gpu, exit 77 without a device): each shrunk sample gets
 * weights bound, states allocated and one run at the max dims (the
 * large-shape variant): the device memory it then holds
 * (KILN_MEMORY_ALLOCATED) equals the plan's figures exactly; after a decode
 * run (a variant of its own) it equals the runtime's account again, and the
 * plan's packed and state figures still hold. */
#include "api_util.h"

#include "check.h"

static const char *const FULL_MODELS[] = {
    "samples/llama3_8b_layer.kiln", "samples/llama3_1_8b_layer.kiln", "samples/llama3_1b_layer.kiln",
    "samples/gpt2_block.kiln",      "tests/cli/phi3_gate_up.kiln",    "tests/cli/pythia_partial_rotary.kiln",
    "samples/pythia_1_4b_layer.kiln", "samples/gemma2_2b_layer.kiln", "samples/qwen3_8b_layer.kiln",
    "samples/mixtral_8x7b_layer.kiln", "samples/qwen_moe_layer.kiln",
};
#define NFULL ((int)(sizeof FULL_MODELS / sizeof FULL_MODELS[0]))

static int same(const kiln_memory_info *a, const kiln_memory_info *b)
{
    return a->intermediates == b->intermediates && a->workspaces == b->workspaces && a->packed == b->packed &&
           a->states == b->states;
}

static void show(const char *what, const char *path, const kiln_memory_info *m)
{
    fprintf(stderr, "  %-9s %s: intermediates %zu, workspaces %zu, packed %zu, states %zu\n", what, path,
            m->intermediates, m->workspaces, m->packed, m->states);
}

static void check_same(const char *path, const char *a_name, const kiln_memory_info *a, const char *b_name,
                       const kiln_memory_info *b)
{
    CHECK_MSG(same(a, b), "%s: %s and %s memory differ", path, a_name, b_name);
    if (!same(a, b)) {
        show(a_name, path, a);
        show(b_name, path, b);
    }
}

static void test_compile_only(void)
{
    kiln_context_options co = {.compile_only = 1};
    kiln_context *ctx = NULL;
    CHECK_MSG(kiln_context_create(&ctx, &co) == KILN_OK, "%s", kiln_last_error());
    if (!ctx) return;
    static const kiln_dim md[] = {{"B", 2}, {"S", 16}, {"T", 64}};
    for (int i = 0; i < NFULL; i++) {
        if (access(FULL_MODELS[i], R_OK) != 0) {
            CHECK_MSG(0, "%s: missing", FULL_MODELS[i]);
            continue;
        }
        kiln_model_options o = {.max_dims = md, .nmax_dims = 3, .lazy = 1};
        kiln_model *m = NULL;
        kiln_status st = kiln_model_compile_file(ctx, FULL_MODELS[i], &o, &m);
        if (st != KILN_OK && api_contains(kiln_last_error(), "has no dim 'T'")) { /* a model without a cache */
            o.nmax_dims = 2;
            st = kiln_model_compile_file(ctx, FULL_MODELS[i], &o, &m);
        }
        CHECK_MSG(st == KILN_OK, "%s: %s", FULL_MODELS[i], kiln_last_error());
        if (!m) continue;
        kiln_memory_info plan, need, held;
        CHECK(kiln_model_memory(m, KILN_MEMORY_PLANNED, &plan) == KILN_OK);
        CHECK(kiln_model_memory(m, KILN_MEMORY_REQUIRED, &need) == KILN_OK);
        CHECK(kiln_model_memory(m, KILN_MEMORY_ALLOCATED, &held) == KILN_OK);
        check_same(FULL_MODELS[i], "planned", &plan, "required", &need);
        CHECK(held.intermediates == 0 && held.workspaces == 0 && held.packed == 0 && held.states == 0);
        CHECK(plan.intermediates > 0);
        /* every state of these models is a KV cache: [B, KV, T, HD] each */
        kiln_tensor_info ti;
        size_t states = 0;
        for (int s = 0; s < kiln_model_num_tensors(m, KILN_STATE); s++)
            if (kiln_model_tensor(m, KILN_STATE, s, NULL, 0, &ti) == KILN_OK) states += ti.bytes;
        CHECK_MSG(plan.states == states, "%s: states %zu, tensors %zu", FULL_MODELS[i], plan.states, states);
        const char *d = kiln_model_describe(m);
        CHECK_MSG(api_contains(d, "device memory at the max dims:"), "%s: no memory line in\n%s", FULL_MODELS[i], d);
        kiln_model_free(m);
    }
    /* Phi-3's fused gate_up weight is copied once, interleaved: 2 x 8192 x 3072 bf16 */
    kiln_model_options o = {.max_dims = md, .nmax_dims = 2, .lazy = 1};
    kiln_model *m = NULL;
    if (kiln_model_compile_file(ctx, "tests/cli/phi3_gate_up.kiln", &o, &m) == KILN_OK) {
        kiln_memory_info plan;
        CHECK(kiln_model_memory(m, KILN_MEMORY_PLANNED, &plan) == KILN_OK);
        CHECK_MSG(plan.packed == (size_t)2 * 8192 * 3072 * 2, "phi3 packed %zu", plan.packed);
        kiln_model_free(m);
    }
    CHECK(kiln_model_memory(NULL, KILN_MEMORY_PLANNED, NULL) == KILN_ERR_INVALID_ARGUMENT);
    kiln_context_free(ctx);
}

/* ---- on a device ---- */

typedef struct dev_model {
    kiln_model *m;
    void *bufs[64];
    int nbufs;
} dev_model;

static void *dev_zeros(kiln_context *ctx, size_t bytes)
{
    void *d = NULL, *h = calloc(1, bytes ? bytes : 1);
    if (h && kiln_device_alloc(ctx, bytes ? bytes : 1, &d) == KILN_OK)
        CHECK(kiln_copy_to_device(ctx, d, h, bytes ? bytes : 1) == KILN_OK);
    free(h);
    return d;
}

/* One run at dims (B, S): zero inputs (positions 0), fresh outputs. */
static int run_at(kiln_context *ctx, dev_model *dm, int64_t B, int64_t S, int has_cache)
{
    kiln_dim d[3] = {{"B", B}, {"S", S}, {"T", 64}};
    int nd = has_cache ? 3 : 2;
    kiln_tensor_arg in[8], out[8];
    int nin = kiln_model_num_tensors(dm->m, KILN_INPUT), nout = kiln_model_num_tensors(dm->m, KILN_OUTPUT);
    if (nin > 8 || nout > 8) return 0;
    kiln_tensor_info ti;
    for (int i = 0; i < nin; i++) {
        if (kiln_model_tensor(dm->m, KILN_INPUT, i, d, nd, &ti) != KILN_OK) return 0;
        in[i] = (kiln_tensor_arg){ti.name, dev_zeros(ctx, ti.bytes)};
        dm->bufs[dm->nbufs++] = in[i].ptr;
    }
    for (int i = 0; i < nout; i++) {
        if (kiln_model_tensor(dm->m, KILN_OUTPUT, i, d, nd, &ti) != KILN_OK) return 0;
        out[i] = (kiln_tensor_arg){ti.name, dev_zeros(ctx, ti.bytes)};
        dm->bufs[dm->nbufs++] = out[i].ptr;
    }
    kiln_status st = kiln_model_run(dm->m, d, nd, in, nin, out, nout, NULL);
    CHECK_MSG(st == KILN_OK, "run B=%lld S=%lld: %s", (long long)B, (long long)S, kiln_model_last_error(dm->m));
    return st == KILN_OK && kiln_model_sync(dm->m) == KILN_OK;
}

static void test_device(kiln_context *ctx)
{
    static const kiln_dim md[] = {{"B", 2}, {"S", 32}, {"T", 64}}; /* 64 rows: the large-shape variant */
    for (int i = 0; i < API_NSAMPLES; i++) {
        const api_sample *s = &API_SAMPLES[i];
        kiln_model_options o = {.defines = s->defines, .ndefines = s->ndefines, .max_dims = md,
                                .nmax_dims = s->has_cache ? 3 : 2};
        dev_model dm = {0};
        kiln_status st = kiln_model_compile_file(ctx, s->path, &o, &dm.m);
        CHECK_MSG(st == KILN_OK, "%s: %s", s->path, kiln_last_error());
        if (!dm.m) continue;
        kiln_tensor_info ti;
        for (int w = 0; w < kiln_model_num_tensors(dm.m, KILN_WEIGHT) && dm.nbufs < 48; w++) {
            if (kiln_model_tensor(dm.m, KILN_WEIGHT, w, NULL, 0, &ti) != KILN_OK) continue;
            void *p = dev_zeros(ctx, ti.bytes);
            dm.bufs[dm.nbufs++] = p;
            CHECK(kiln_model_bind_weight(dm.m, ti.name, p) == KILN_OK);
        }
        CHECK(kiln_model_alloc_states(dm.m) == KILN_OK);
        kiln_memory_info plan, need, held;
        if (run_at(ctx, &dm, 2, 32, s->has_cache)) {
            CHECK(kiln_model_memory(dm.m, KILN_MEMORY_PLANNED, &plan) == KILN_OK);
            CHECK(kiln_model_memory(dm.m, KILN_MEMORY_REQUIRED, &need) == KILN_OK);
            CHECK(kiln_model_memory(dm.m, KILN_MEMORY_ALLOCATED, &held) == KILN_OK);
            check_same(s->path, "planned", &plan, "allocated", &held);
            check_same(s->path, "required", &need, "allocated", &held);
        }
        if (run_at(ctx, &dm, 1, 1, s->has_cache)) { /* the decode-shaped variant */
            CHECK(kiln_model_memory(dm.m, KILN_MEMORY_REQUIRED, &need) == KILN_OK);
            CHECK(kiln_model_memory(dm.m, KILN_MEMORY_ALLOCATED, &held) == KILN_OK);
            check_same(s->path, "required", &need, "allocated", &held);
            CHECK(held.packed == plan.packed && held.states == plan.states);
        }
        kiln_model_free(dm.m);
        for (int b = 0; b < dm.nbufs; b++) kiln_device_free(ctx, dm.bufs[b]);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "gpu")) {
        kiln_context *ctx = NULL;
        kiln_status st = kiln_context_create(&ctx, NULL);
        if (st == KILN_ERR_NO_DEVICE) {
            printf("no CUDA device: skipped (%s)\n", kiln_last_error());
            return 77;
        }
        CHECK_MSG(st == KILN_OK, "%s", kiln_last_error());
        if (ctx) test_device(ctx);
        kiln_context_free(ctx);
        return CHECK_DONE();
    }
    test_compile_only();
    return CHECK_DONE();
}
