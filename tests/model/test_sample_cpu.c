/* tests/model/test_sample_cpu.c — the sampler without a GPU: its launch
 * geometry covers the vocabulary with no empty CTA and stays within the
 * combine's shared memory, and its template compiles with NVRTC for sm_90a
 * with an empty log, exporting both kernels. */
#include <string.h>

#include "check.h"
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

int main(void)
{
    buckets();
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
