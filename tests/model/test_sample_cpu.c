/* tests/model/test_sample_cpu.c — the sampler without a GPU: its launch
 * geometry covers the vocabulary with no empty CTA and stays within the
 * combine's shared memory, and its template compiles with NVRTC for sm_90a
 * with an empty log, exporting its kernels. The fused LM head: its geometry,
 * and head_sample turning the model's head linear into the output head_in
 * (the linear gone from the kernels) or refusing a model without one. */
#include <string.h>

#include "check.h"
#include "kiln.h"
#include "codegen/cg.h"
#include "runtime/rt_nvrtc.h"
#include "runtime/rt_sample.h"
#include "runtime/rt_wmodel.h"

static void geometry(int64_t vocab, float t, int top_k, int want_k)
{
    int k, nct, chunk;
    rt_sample_geometry(vocab, t, top_k, &k, &nct, &chunk);
    CHECK_MSG(k == want_k, "vocab %lld: k %d, want %d", (long long)vocab, k, want_k);
    CHECK_MSG((int64_t)nct * chunk >= vocab && (int64_t)(nct - 1) * chunk < vocab, "vocab %lld: %d x %d", (long long)vocab,
              nct, chunk);
    CHECK(nct * k <= RT_SAMPLE_MAX_CANDS && nct >= 1);
    CHECK_MSG(chunk * 4 <= 227 * 1024, "chunk %d", chunk);
}

/* Bucket selection: the smallest bucket that fits within max B, else the exact size (a miss). */
static void buckets(void)
{
    int miss;
    CHECK(rt_gen_bucket(NULL, 0, 1, 32, &miss) == 1 && !miss);
    CHECK(rt_gen_bucket(NULL, 0, 3, 32, &miss) == 4 && !miss);
    CHECK(rt_gen_bucket(NULL, 0, 17, 32, &miss) == 32 && !miss);
    CHECK(rt_gen_bucket(NULL, 0, 32, 32, &miss) == 32 && !miss);
    CHECK(rt_gen_bucket(NULL, 0, 33, 64, &miss) == 33 && miss);  /* over every bucket */
    CHECK(rt_gen_bucket(NULL, 0, 33, 32, &miss) == -1);           /* over max B */
    CHECK(rt_gen_bucket(NULL, 0, 5, 6, &miss) == 5 && miss);     /* bucket 8 is over max B */
    const int mine[] = {3, 12};
    CHECK(rt_gen_bucket(mine, 2, 1, 16, &miss) == 3 && !miss);
    CHECK(rt_gen_bucket(mine, 2, 4, 16, &miss) == 12 && !miss);
    CHECK(rt_gen_bucket(mine, 2, 13, 16, &miss) == 13 && miss);
    CHECK(rt_gen_bucket(mine, 2, 0, 16, &miss) == -1);
}

static void head_geometry(int64_t vocab, int rows, bool fits)
{
    int nct, chunk;
    bool ok = rt_sample_head_geometry(vocab, rows, &nct, &chunk);
    CHECK_MSG(ok == fits, "vocab %lld, %d rows: fits %d", (long long)vocab, rows, ok);
    CHECK_MSG((int64_t)nct * chunk >= vocab && (int64_t)(nct - 1) * chunk < vocab, "vocab %lld: %d x %d", (long long)vocab,
              nct, chunk);
    CHECK(nct >= 1 && nct <= RT_HEAD_MAX_NCT && (chunk >= RT_HEAD_CHUNK_MIN || nct == 1));
    if (ok) CHECK((int64_t)rows * chunk * 4 <= RT_HEAD_MAX_SMEM);
}

/* head_sample on the 1B sample (two small layers), compile-only: the output
 * is the head's input, the embedding stays a weight, one kernel fewer. */
static void head_split(void)
{
    kiln_context *ctx = NULL;
    kiln_context_options co = {.compile_only = 1};
    if (kiln_context_create(&ctx, &co) != KILN_OK) {
        CHECK_MSG(0, "context: %s", kiln_last_error());
        return;
    }
    kiln_define defs[] = {{"NL", "2"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
    kiln_dim maxd[] = {{"B", 4}, {"S", 8}, {"T", 64}};
    int nk[2] = {0, 0};
    for (int h = 0; h < 2; h++) {
        kiln_model_options mo = {.defines = defs, .ndefines = 6, .max_dims = maxd, .nmax_dims = 3, .lazy = 1,
                                 .head_sample = h};
        kiln_model *m = NULL;
        kiln_status st = kiln_model_compile_file(ctx, "samples/models/llama3_2_1b.kiln", &mo, &m);
        CHECK_MSG(st == KILN_OK, "compile (head_sample %d): %s", h, kiln_last_error());
        if (st != KILN_OK) continue;
        kiln_tensor_info ti;
        CHECK(kiln_model_tensor(m, KILN_OUTPUT, 0, NULL, 0, &ti) == KILN_OK);
        CHECK_MSG(!strcmp(ti.name, h ? "head_in" : "logits") && ti.rank == 3 && ti.shape[2] == (h ? 256 : 512),
                  "output %s [%lld]", ti.name, (long long)ti.shape[2]);
        CHECK(kiln_model_find_tensor(m, "model.embed_tokens.weight", NULL, 0, &ti) == KILN_OK && ti.kind == KILN_WEIGHT);
        nk[h] = kiln_model_num_kernels(m);
        /* identical layers: the second layer's 7 kernels at least are the first one's programs (same name) */
        int distinct = 0;
        for (int i = 0; i < nk[h]; i++) {
            kiln_kernel_info ki, kj;
            CHECK(kiln_model_kernel(m, i, &ki) == KILN_OK);
            bool seen = false;
            for (int j = 0; j < i && !seen; j++) seen = kiln_model_kernel(m, j, &kj) == KILN_OK && !strcmp(ki.name, kj.name);
            distinct += !seen;
        }
        printf("head_sample %d: %d kernels, %d distinct programs\n", h, nk[h], distinct);
        CHECK_MSG(distinct <= nk[h] - 7, "%d kernels, %d distinct (each layer has 7)", nk[h], distinct);
        kiln_model_free(m);
    }
    CHECK_MSG(nk[1] == nk[0] - 1, "kernels: %d with the head, %d without", nk[0], nk[1]);
    const char *nohead = "model m {\n  dims B\n  input x : bf16[B, 8]\n  output y = x * 2.0\n}\n";
    kiln_dim b4[] = {{"B", 4}};
    kiln_model_options mo = {.max_dims = b4, .nmax_dims = 1, .head_sample = 1};
    kiln_model *m = NULL;
    CHECK(kiln_model_compile_string(ctx, "nohead.kiln", nohead, &mo, &m) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(kiln_last_error(), "LM head") != NULL, "%s", kiln_last_error());
    kiln_model_free(m);
    kiln_context_free(ctx);
}

int main(void)
{
    buckets();
    head_geometry(128256, 32, true);
    head_geometry(151936, 32, true);
    head_geometry(512, 4, true);
    head_geometry(1, 1, true);
    head_geometry(4000000, 32, false);
    head_split();
    geometry(128256, 0.0f, 50, 1);   /* greedy: one candidate per CTA */
    geometry(128256, 0.8f, 50, 50);
    geometry(151936, 1.0f, 0, RT_SAMPLE_MAX_K);
    geometry(151936, 1.0f, 1000, RT_SAMPLE_MAX_K);
    geometry(512, 0.7f, 8, 8);
    geometry(1, 0.0f, 0, 1);
    geometry(1000003, 0.0f, 0, 1);

    const char *src = cg_template_text("sample.cuh");
    CHECK(src != NULL);
    if (src) {
        rt_compile_opts co = {.arch = "sm_90a"};
        rt_compile_result r = {0};
        rt_status st = rt_nvrtc_compile("kiln_sample", src, &co, RT_TARGET_CUBIN, &r);
        CHECK_MSG(st == RT_OK, "%s", r.message ? r.message : "?");
        CHECK_MSG(r.log && !r.log[0], "log: %s", r.log ? r.log : "(none)");
        rt_compile_result_free(&r);
    }
    return CHECK_DONE();
}
