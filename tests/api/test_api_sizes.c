/* tests/api/test_api_sizes.c — sizes that overflow 64 bits, through the C
 * API (compile_only, no GPU): each is a located error, never a size of 0 or
 * a wrapped one (an arena too small means kernels writing past it).
 *   - a declared shape whose bytes overflow (constant, and symbolic: a
 *     coefficient alone overflows) is a model error at its line;
 *   - symbolic dims bound by max dims so that a declared tensor's bytes
 *     overflow: the compile fails, naming the value;
 *   - an intermediate (a broadcast add of [N, 1] and [1, N]) that overflows
 *     at the max dims: the memory plan fails, naming the line. */
#include <string.h>

#include "check.h"
#include "kiln.h"

static kiln_context *ctx;

static kiln_status compile(const char *text, int64_t maxb, kiln_model **m)
{
    kiln_dim maxd[] = {{"B", maxb}};
    kiln_model_options mo = {.max_dims = maxd, .nmax_dims = 1, .lazy = 1};
    *m = NULL;
    return kiln_model_compile_string(ctx, "sizes.kiln", text, &mo, m);
}

int main(void)
{
    kiln_context_options co = {.compile_only = 1, .no_cache = 1};
    CHECK(kiln_context_create(&ctx, &co) == KILN_OK);
    kiln_model *m;
    /* declared, constant */
    CHECK(compile("model s {\n  dims B\n  input x : f32[9223372036854775807, 9223372036854775807]\n  output y = x * 2.0\n}\n",
                  2, &m) == KILN_ERR_MODEL);
    CHECK_MSG(strstr(kiln_last_error(), "sizes.kiln:3:13: error: f32[9223372036854775807, 9223372036854775807]: the "
                                        "tensor's size in bytes does not fit in 64 bits"), "%s", kiln_last_error());
    /* declared, symbolic: the coefficient alone overflows */
    CHECK(compile("model s {\n  dims B\n  input x : f32[B, 4611686018427387904]\n  output y = x * 2.0\n}\n", 2, &m) ==
          KILN_ERR_MODEL);
    CHECK_MSG(strstr(kiln_last_error(), "sizes.kiln:3:13: error: f32[B, 4611686018427387904]"), "%s", kiln_last_error());
    /* declared, overflowing only at the max dims */
    const char *bybound = "model s {\n  dims B\n  input x : f32[B, 4611686018427387]\n  output y = x * 2.0\n}\n";
    CHECK(compile(bybound, 100, &m) == KILN_OK && m);
    kiln_model_free(m);
    kiln_status st = compile(bybound, 40000, &m);
    CHECK_MSG(st != KILN_OK && !m && strstr(kiln_last_error(), "line 3") && strstr(kiln_last_error(), "64 bits"),
              "%s: %s", kiln_status_str(st), kiln_last_error());
    /* an intermediate overflowing at the max dims */
    const char *inter = "model s {\n  dims B\n  input a : f32[B, 1]\n  input b : f32[1, B]\n  output y = a + b\n}\n";
    CHECK(compile(inter, 1000, &m) == KILN_OK && m);
    kiln_model_free(m);
    st = compile(inter, 3037000500, &m);
    CHECK_MSG(st != KILN_OK && !m && strstr(kiln_last_error(), "line 5"), "%s: %s", kiln_status_str(st), kiln_last_error());
    kiln_context_free(ctx);
    return CHECK_DONE();
}
