/* tests/api/test_batched_decode_cpu.c — the batched decode variants' graph
 * without a GPU (compile-only context, lazy kernels: NVRTC never runs): the
 * Llama layer rotates q and k and writes the caches in the QKV epilogue at
 * prefill and at B x S < 4 decode rows; from 4 rows (CG_DECODE_BATCHED_ROWS)
 * decode attention does it, and the projection's weight keeps the prefill
 * copy's layout (each rotation pair side by side) so that planning a batched
 * variant adds no weight copy; where attention cannot take the ropes on
 * load (partial rotary, other positions, another theta for k) the batched
 * variants keep the epilogue; --disable=epilogue-rope makes one graph for
 * every variant;
 * the report and the plan name the graph; constant dims choose one graph. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_util.h"
#include "check.h"

#define LLAMA "samples/llama3_8b_layer.kiln"

static const kiln_define small[] = {{"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "256"}};
static const kiln_dim maxd[] = {{"B", 32}, {"S", 64}, {"T", 128}};

static kiln_model *compile(kiln_context *ctx, const char *path, const char *text, const char *const *dis, int ndis)
{
    kiln_model_options o = {.defines = small, .ndefines = 4, .max_dims = maxd, .nmax_dims = 3, .disabled = dis,
                            .ndisabled = ndis, .lazy = 1};
    kiln_model *m = NULL;
    kiln_status st = text ? kiln_model_compile_string(ctx, "partial", text, &o, &m) : kiln_model_compile_file(ctx, path, &o, &m);
    CHECK_MSG(st == KILN_OK, "%s", kiln_last_error());
    return m;
}

static size_t packed(kiln_model *m)
{
    kiln_memory_info mi;
    CHECK(kiln_model_memory(m, KILN_MEMORY_REQUIRED, &mi) == KILN_OK);
    return mi.packed;
}

/* Plans the variant at B, S (T = 128); the packed bytes after. */
static size_t plan(kiln_model *m, int b, int s)
{
    const kiln_dim d[] = {{"B", b}, {"S", s}, {"T", 128}};
    const char *fb = NULL;
    CHECK_MSG(kiln_model_fallbacks(m, d, 3, &fb) == KILN_OK, "%s", kiln_last_error());
    CHECK_MSG(fb && !*fb, "B=%d S=%d: fallbacks: %s", b, s, fb ? fb : "?");
    return packed(m);
}

/* The lines of variant "small-shape for B=<b> S=<s> " in the description (malloc'd). */
static char *variant_text(kiln_model *m, int b, int s)
{
    const char *desc = kiln_model_describe(m);
    char head[64];
    snprintf(head, sizeof head, "small-shape for B=%d S=%d ", b, s);
    const char *v = desc ? strstr(desc, head) : NULL;
    if (!v) return strdup("");
    const char *end = strstr(v + 1, "\nvariant ");
    return strndup(v, end ? (size_t)(end - v) : strlen(v));
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

int main(void)
{
    char dir[] = "/tmp/kiln_bd_XXXXXX";
    kiln_context *ctx = api_compile_only_context(dir);
    CHECK(ctx != NULL);
    if (!ctx) return CHECK_DONE();

    /* the default: a graph of their own for the batched decode variants, one weight copy */
    kiln_model *m = compile(ctx, LLAMA, NULL, NULL, 0);
    if (m) {
        const char *rep = kiln_model_report_json(m);
        CHECK_MSG(rep && strstr(rep, "\"batched decode\"") && strstr(rep, "this graph serves the batched decode variants"),
                  "the report names the batched decode variants' graph and its decisions");
        size_t p0 = packed(m), p20 = plan(m, 1, 20), p1 = plan(m, 1, 1), p3 = plan(m, 3, 1), p8 = plan(m, 8, 1),
               p4 = plan(m, 1, 4);
        CHECK_MSG(p0 > 0 && p20 == p0 && p1 == p0 && p3 == p0 && p8 == p0 && p4 == p0,
                  "packed bytes: large-shape %zu, S=20 %zu, B=1 %zu, B=3 %zu, B=8 %zu, B=1 S=4 %zu: one copy of each", p0,
                  p20, p1, p3, p8, p4);
        char *v1 = variant_text(m, 1, 1), *v3 = variant_text(m, 3, 1), *v8 = variant_text(m, 8, 1),
             *v4 = variant_text(m, 1, 4);
        const char *paired = "rotation pairs side by side for attention's RoPE";
        CHECK_MSG(count(v1, paired) == 0 && count(v3, paired) == 0, "B=1 and B=3 rotate in the epilogue:\n%s\n%s", v1, v3);
        CHECK_MSG(count(v8, paired) == 1 && count(v4, paired) == 1, "B=8 and B=1 S=4 rotate in attention:\n%s\n%s", v8, v4);
        free(v1);
        free(v3);
        free(v8);
        free(v4);
        kiln_model_free(m);
    }

    /* --disable=epilogue-rope: rope in attention everywhere, one graph */
    const char *dis[] = {"epilogue-rope"};
    m = compile(ctx, LLAMA, NULL, dis, 1);
    if (m) {
        const char *rep = kiln_model_report_json(m);
        CHECK(rep && !strstr(rep, "\"variant_graphs\""));
        kiln_model_free(m);
    }

    /* where decode attention cannot take the ropes on load, the batched variants keep them in the
     * epilogue (no graph of their own, no other copy): partial rotary (half the head's dims), the
     * ropes at other positions than the attention's, k rotated with another theta than q */
    FILE *f = fopen(LLAMA, "rb");
    CHECK(f != NULL);
    char text[16384] = {0};
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    CHECK(n > 0 && n < sizeof text - 1);
    static const struct { const char *what, *from[3], *to[3]; } edits[] = {
        {"partial rotary", {"pos, theta=THETA)", "pos, theta=THETA)"}, {"pos, theta=THETA, dims=HD/2)", "pos, theta=THETA, dims=HD/2)"}},
        {"other positions", {"input  pos : i32[B]", "pos, theta=THETA)", "pos, theta=THETA)"},
         {"input  pos : i32[B]\n  input  rp : i32[B]", "rp, theta=THETA)", "rp, theta=THETA)"}},
        {"another theta for k", {"[B, S, KV, HD]), pos, theta=THETA)"}, {"[B, S, KV, HD]), pos, theta=10000.0)"}},
    };
    for (int e = 0; e < (int)(sizeof edits / sizeof edits[0]); e++) {
        char *edited = strdup(text);
        for (int i = 0; i < 3 && edits[e].from[i] && edited; i++) { /* each replaces the first one left */
            char *at = strstr(edited, edits[e].from[i]);
            CHECK_MSG(at != NULL, "%s: '%s' in the sample", edits[e].what, edits[e].from[i]);
            if (!at) break;
            size_t len = strlen(edited) + strlen(edits[e].to[i]) + 1;
            char *next = malloc(len);
            snprintf(next, len, "%.*s%s%s", (int)(at - edited), edited, edits[e].to[i], at + strlen(edits[e].from[i]));
            free(edited);
            edited = next;
        }
        m = edited ? compile(ctx, NULL, edited, NULL, 0) : NULL;
        if (m) {
            const char *rep = kiln_model_report_json(m);
            size_t p1 = plan(m, 1, 1), p8 = plan(m, 8, 1);
            char *v8 = variant_text(m, 8, 1);
            CHECK_MSG(rep && !strstr(rep, "\"batched decode\"") && p8 == p1 && !strstr(v8, "rotation pairs side by side"),
                      "%s: B=8 keeps the epilogue's graph (%zu -> %zu packed bytes):\n%s", edits[e].what, p1, p8, v8);
            free(v8);
            kiln_model_free(m);
        }
        free(edited);
    }
    CHECK(api_compile_only_done(ctx, dir) == 0);
    return CHECK_DONE();
}
