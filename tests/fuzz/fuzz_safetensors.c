/* tests/fuzz/fuzz_safetensors.c — libFuzzer harness: the safetensors
 * reader (rt_st_parse) and the check of a parsed file against a model
 * (rt_model_check_safetensors), without a device.
 *
 * Each input is a whole .safetensors file. The model (below) is compiled
 * once on a compile_only context with lazy kernels (no NVRTC); its weights
 * cover every dtype Kiln takes and ranks 1 to 3 (h, e and k are never
 * read: a warning, not an error), so inputs that parse
 * reach the name, kind, dtype, shape and missing-weight checks. When a file
 * parses, every tensor is looked up and its bytes read (the reader promised
 * they lie inside the buffer), and the check runs with and without the
 * ignore-unknown / allow-missing flags. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_model.h"
#include "runtime/rt_weights.h"
#include "src/compile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char MODEL[] =
    "model st {\n"
    "  dims B\n"
    "  const D = 4\n"
    "  input x : f32[B, D]\n"
    "  state s : f32[B, D]\n"
    "  weight w : f32[D, D]\n"
    "  weight b : f32[D]\n"
    "  weight h : bf16[2, 2, 2]\n"
    "  weight e : f16[2]\n"
    "  weight k : i32[3]\n"
    "  s = s + x\n"
    "  output y = linear(x, w) + b\n"
    "}\n";

static rt_ctx *ctx;
static rt_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[2048];
    rt_ctx_config cc = {.compile_only = true, .no_cache = true};
    if (rt_ctx_create(&ctx, &cc, err, sizeof err) != RT_OK) {
        fprintf(stderr, "fuzz_safetensors: context: %s\n", err);
        abort();
    }
    rt_dim_value maxd[] = {{"B", 2}};
    kc_model_options o = {.compile = {.name = "st.kiln", .text = MODEL}, .max_dims = maxd, .nmax_dims = 1,
                          .run = {.lazy = true}};
    if (kc_compile_model(ctx, &o, &model, NULL, err, sizeof err) != RT_OK) {
        fprintf(stderr, "fuzz_safetensors: model: %s\n", err);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so ASan sees any read past the end */
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    rt_st_file f;
    char err[4096];
    if (rt_st_parse(buf, size, "fuzz.safetensors", &f, err, sizeof err) == RT_OK) {
        unsigned sum = 0;
        for (int i = 0; i < f.n; i++) {
            const rt_st_tensor *t = rt_st_find(&f, f.t[i].name);
            if (!t || t->end < t->begin || t->end > f.data_len) abort();
            for (uint64_t b = 0; b < t->end - t->begin; b++) sum += t->data[b];
        }
        (void)sum;
        for (unsigned flags = 0; flags < 4; flags++) (void)rt_model_check_safetensors(model, &f, flags, err, sizeof err);
        rt_st_close(&f);
    }
    free(buf);
    return 0;
}
