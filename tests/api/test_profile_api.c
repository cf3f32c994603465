/* tests/api/test_profile_api.c — kiln_model_profile and kiln_context_ceilings
 * without a GPU: misuse comes back as a status and a message; on a
 * compile_only context both say that there is no device. */
#include <string.h>

#include "check.h"
#include "kiln.h"

int main(void)
{
    kiln_context *ctx = NULL;
    kiln_context_options co = {.compile_only = 1};
    CHECK(kiln_context_create(&ctx, &co) == KILN_OK);
    kiln_dim maxd[] = {{"B", 1}, {"S", 1}, {"T", 8}};
    kiln_define defs[] = {{"D", "64"}, {"F", "128"}};
    kiln_model_options mo = {.defines = defs, .ndefines = 2, .max_dims = maxd, .nmax_dims = 3, .lazy = 1};
    kiln_model *m = NULL;
    CHECK_MSG(kiln_model_compile_file(ctx, "samples/llama3_1b_layer.kiln", &mo, &m) == KILN_OK, "%s", kiln_last_error());
    kiln_profile p;
    kiln_ceilings c;
    CHECK(kiln_model_profile(NULL, maxd, 3, NULL, 0, NULL, 0, NULL, &p) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_profile(m, maxd, 3, NULL, 0, NULL, 0, NULL, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_profile(m, maxd, 3, NULL, 2, NULL, 0, NULL, &p) == KILN_ERR_INVALID_ARGUMENT);
    kiln_profile_options bad = {.runs = -1};
    CHECK(kiln_model_profile(m, maxd, 3, NULL, 0, NULL, 0, &bad, &p) == KILN_ERR_INVALID_ARGUMENT &&
          strstr(kiln_last_error(), "runs"));
    kiln_dim toobig[] = {{"B", 2}, {"S", 1}, {"T", 8}};
    CHECK(kiln_model_profile(m, toobig, 3, NULL, 0, NULL, 0, NULL, &p) == KILN_ERR_INVALID_ARGUMENT);
    kiln_status s = kiln_model_profile(m, maxd, 3, NULL, 0, NULL, 0, NULL, &p);
    CHECK_MSG(s == KILN_ERR_NO_DEVICE && strstr(kiln_last_error(), "profile"), "%s: %s", kiln_status_str(s),
              kiln_last_error());
    CHECK(p.nkernels == 0 && p.kernels == NULL);
    CHECK(kiln_context_ceilings(NULL, 0, &c) == KILN_ERR_INVALID_ARGUMENT);
    s = kiln_context_ceilings(ctx, 0, &c);
    CHECK_MSG(s == KILN_ERR_NO_DEVICE && strstr(kiln_last_error(), "ceilings"), "%s", kiln_last_error());
    kiln_model_free(m);
    kiln_context_free(ctx);
    return CHECK_DONE();
}
