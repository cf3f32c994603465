/* tests/runtime/test_cublas_lazy.c — cuBLAS is loaded when something needs
 * it, not at start: compiling and introspecting a model leave it unloaded
 * (every `kiln` command used to start at about 250 MB because libcublas was
 * linked); asking for it loads it, and its functions answer. */
#include "check.h"
#include "kiln.h"
#include "runtime/rt_cublas.h"

int main(void)
{
    CHECK(!rt_cublas_loaded());
    kiln_context *ctx = NULL;
    kiln_context_options co = {.compile_only = 1, .no_cache = 1};
    CHECK(kiln_context_create(&ctx, &co) == KILN_OK);
    kiln_model *m = NULL;
    kiln_dim maxd[] = {{"B", 2}, {"S", 8}, {"T", 32}};
    kiln_model_options mo = {.max_dims = maxd, .nmax_dims = 3, .lazy = 1};
    CHECK_MSG(kiln_model_compile_file(ctx, "samples/llama3_1b_layer.kiln", &mo, &m) == KILN_OK, "%s", kiln_last_error());
    CHECK(kiln_model_num_kernels(m) > 0);
    kiln_model_free(m);
    kiln_context_free(ctx);
    CHECK_MSG(!rt_cublas_loaded(), "a compile loaded cuBLAS");
    char err[512];
    const rt_cublas_api *b = rt_cublas(err, sizeof err);
    CHECK_MSG(b && rt_cublas_loaded(), "%s", err);
    int major = 0;
    CHECK(b && b->get_property(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS && major == CUBLAS_VER_MAJOR);
    CHECK(b && b->status_name(CUBLAS_STATUS_NOT_INITIALIZED) && b->status_name(CUBLAS_STATUS_NOT_INITIALIZED)[0]);
    return CHECK_DONE();
}
