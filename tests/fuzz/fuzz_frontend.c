/* tests/fuzz/fuzz_frontend.c — libFuzzer harness: model text through the
 * compile driver as far as CUDA C, without NVRTC.
 *
 * Each input is a .kiln file. It is parsed, lowered, verified, fused, its
 * memory planned (every dim bound to 3, the large-shape variant) and every
 * kernel group emitted as CUDA C for sm_90a, then once more at exact dims
 * (the decode-shaped templates). Any status is fine; a crash, a sanitizer
 * report or a leak is a defect. The same function replays the committed
 * corpus in the normal test suite (fuzz_replay.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "src/compile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16)) return 0; /* the grammar, not the allocator: large inputs only slow the search */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    kc_options o = {.name = "fuzz.kiln", .text = text};
    FILE *sink = fopen("/dev/null", "w");
    kc_unit *u = NULL;
    char err[1024];
    if (kc_open(&o, sink, &u, err, sizeof err) == RT_OK && kc_parse(u, err, sizeof err) == RT_OK &&
        kc_fuse(u, err, sizeof err) == RT_OK) {
        const ir_graph *g = kc_fused(u);
        int64_t dims[IR_MAX_SYMS];
        for (int i = 0; i < IR_MAX_SYMS; i++) dims[i] = 3;
        if (kc_plan_memory(u, dims, err, sizeof err) == RT_OK) {
            if (sink) kc_print_plan(u, NULL, sink);
            cg_kernel *ks = NULL;
            int nk = 0;
            cg_options co = {0};
            if (cg_emit_all_ex(g, &co, &ks, &nk, err, sizeof err) == 0) cg_kernels_free(ks, nk);
            co.dims = dims;
            if (cg_emit_all_ex(g, &co, &ks, &nk, err, sizeof err) == 0) cg_kernels_free(ks, nk);
        }
    }
    kc_free(u);
    if (sink) fclose(sink);
    free(text);
    return 0;
}
