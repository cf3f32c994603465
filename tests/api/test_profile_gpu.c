/* tests/api/test_profile_gpu.c — kiln_model_profile on a GPU (label gpu;
 * exits 77 without a device): a small Llama layer at decode, every kernel
 * timed in every replay, the layer's time covers its kernels, the bubbles
 * are what is left, the files are written, a second profile replaces the
 * first. Ceilings given (no measurement): the floors follow them. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/ir.h"
#include "kiln.h"

static uint64_t seed = 7;
static float randf(void)
{
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((seed >> 40) * (2.0 / 16777216.0) - 1.0);
}

static void *upload(kiln_context *ctx, kiln_dtype t, size_t n, float scale, float offset)
{
    size_t es = kiln_dtype_size(t);
    unsigned char *h = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++) {
        float f = randf() * scale + offset;
        if (t == KILN_BF16) ((uint16_t *)h)[i] = ir_f32_to_bf16_bits(f);
        else if (t == KILN_F32) ((float *)h)[i] = f;
        else ((int32_t *)h)[i] = 3;
    }
    void *d = NULL;
    CHECK(kiln_device_alloc(ctx, n * es, &d) == KILN_OK);
    CHECK(kiln_copy_to_device(ctx, d, h, n * es) == KILN_OK);
    free(h);
    return d;
}

int main(void)
{
    kiln_context *ctx = NULL;
    if (kiln_context_create(&ctx, NULL) == KILN_ERR_NO_DEVICE) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    kiln_dim d[] = {{"B", 1}, {"S", 1}, {"T", 16}};
    kiln_define defs[] = {{"D", "256"}, {"F", "512"}};
    kiln_model_options mo = {.defines = defs, .ndefines = 2, .max_dims = d, .nmax_dims = 3};
    kiln_model *m = NULL;
    CHECK_MSG(kiln_model_compile_file(ctx, "samples/llama3_1b_layer.kiln", &mo, &m) == KILN_OK, "%s", kiln_last_error());
    if (!m) return CHECK_DONE();
    void *bufs[32];
    int nb = 0;
    kiln_tensor_arg in[2], out[1];
    int nin = 0;
    for (int i = 0; i < kiln_model_num_tensors(m, KILN_WEIGHT); i++) {
        kiln_tensor_info t;
        CHECK(kiln_model_tensor(m, KILN_WEIGHT, i, d, 3, &t) == KILN_OK);
        bufs[nb] = upload(ctx, t.dtype, t.bytes / kiln_dtype_size(t.dtype), t.rank == 1 ? 0.5f : 0.06f, t.rank == 1 ? 1 : 0);
        CHECK(kiln_model_bind_weight(m, t.name, bufs[nb++]) == KILN_OK);
    }
    for (int i = 0; i < kiln_model_num_tensors(m, KILN_INPUT); i++) {
        kiln_tensor_info t;
        CHECK(kiln_model_tensor(m, KILN_INPUT, i, d, 3, &t) == KILN_OK);
        bufs[nb] = upload(ctx, t.dtype, t.bytes / kiln_dtype_size(t.dtype), 1, 0); /* pos = 3 */
        in[nin++] = (kiln_tensor_arg){t.name, bufs[nb++]};
    }
    kiln_tensor_info y;
    CHECK(kiln_model_tensor(m, KILN_OUTPUT, 0, d, 3, &y) == KILN_OK);
    CHECK(kiln_device_alloc(ctx, y.bytes, &bufs[nb]) == KILN_OK);
    out[0] = (kiln_tensor_arg){y.name, bufs[nb++]};
    CHECK(kiln_model_alloc_states(m) == KILN_OK);

    kiln_profile_options po = {.runs = 20, .peak_bw = 4e12, .peak_flops = 800e12,
                               .json_path = "/tmp/kiln_test_profile.json", .trace_path = "/tmp/kiln_test_trace.json",
                               .roofline_path = "/tmp/kiln_test_roofline.svg"};
    kiln_profile p;
    kiln_status s = kiln_model_profile(m, d, 3, in, nin, out, 1, &po, &p);
    CHECK_MSG(s == KILN_OK, "%s: %s", kiln_status_str(s), kiln_last_error());
    if (s == KILN_OK) {
        printf("%s", p.text);
        CHECK(p.runs == 20 && p.peak_bw == 4e12 && p.peak_flops == 800e12);
        int kiln_rows = 0;
        double sum = 0;
        for (int i = 0; i < p.nkernels; i++) {
            const kiln_kernel_profile *k = &p.kernels[i];
            if (i) CHECK(k->median_us <= p.kernels[i - 1].median_us); /* sorted by time */
            sum += k->median_us;
            if (k->group < 0) continue;
            kiln_rows++;
            CHECK_MSG(strcmp(k->kind, "row") != 0, "%s: a norm the decode GEMVs compute has no launch", k->name);
            CHECK_MSG(k->samples == 20 && k->median_us > 0 && k->p10_us <= k->median_us && k->median_us <= k->p90_us,
                      "%s: %d samples, %.2f us", k->name, k->samples, k->median_us);
            CHECK(k->bytes > 0 && k->floor_us > 0 && k->lines && k->lines[0] && k->template_name && strstr(k->template_name, ".cuh"));
            CHECK_NEAR(k->floor_us, k->flops_bound ? k->flops / 800e6 : k->bytes / 4e6, 1e-9, 1e-9);
        }
        /* every kernel that launches, once: the two RMSNorms are computed inside the next GEMVs at
         * decode (rule norm-gemv), so they have no launch and no row */
        CHECK_MSG(kiln_rows == kiln_model_num_kernels(m) - 2, "%d rows, %d kernels", kiln_rows, kiln_model_num_kernels(m));
        CHECK_MSG(p.layer_median_us >= 0.9 * sum, "layer %.1f us, kernels %.1f us", p.layer_median_us, sum);
        CHECK(p.bubbles_median_us >= 0 && p.bubbles_median_us <= p.layer_median_us);
        CHECK(p.layer_bytes > 0 && p.layer_floor_us > 0 && p.sum_floor_us >= p.layer_floor_us * 0.5);
        CHECK(strstr(p.text, "bubbles") != NULL);
        FILE *f = fopen("/tmp/kiln_test_roofline.svg", "r");
        CHECK(f != NULL);
        if (f) fclose(f);
    }
    /* a second profile replaces the first */
    po.runs = 5;
    po.json_path = po.trace_path = po.roofline_path = NULL;
    s = kiln_model_profile(m, d, 3, in, nin, out, 1, &po, &p);
    CHECK_MSG(s == KILN_OK && p.runs == 5, "%s", kiln_last_error());
    remove("/tmp/kiln_test_profile.json");
    remove("/tmp/kiln_test_trace.json");
    remove("/tmp/kiln_test_roofline.svg");
    kiln_model_free(m);
    for (int i = 0; i < nb; i++) kiln_device_free(ctx, bufs[i]);
    kiln_context_free(ctx);
    return CHECK_DONE();
}
