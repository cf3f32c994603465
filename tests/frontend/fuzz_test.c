/* tests/frontend/fuzz_test.c — the frontend never crashes, leaks or accepts
 * garbage silently: every sample is truncated, byte-flipped, spliced and
 * token-shuffled a few thousand times (deterministic seed), and each mutant
 * is compiled, dumped and its diagnostics rendered. Run it under
 * -DKILN_SANITIZE=ON to catch memory errors. The invariant checked: a NULL
 * graph comes with at least one error, a graph with none (and it verifies),
 * and no "internal error" is ever reported. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static const char interesting[] = "()[]{},;:=+-*/@#\n 0123456789.eE_xyzBSTD\t\"'$\x80\xff";

/* One mutant of `in` (len bytes) into out (capacity cap); returns its length. */
static size_t mutate(const char *in, size_t len, char *out, size_t cap)
{
    size_t n = len < cap ? len : cap - 1;
    memcpy(out, in, n);
    int rounds = 1 + (int)below(4);
    for (int r = 0; r < rounds; r++) {
        switch (below(6)) {
        case 0: /* truncate */
            n = below(n + 1);
            break;
        case 1: /* flip a byte */
            if (n) out[below(n)] = interesting[below(sizeof interesting - 1)];
            break;
        case 2: /* random byte */
            if (n) out[below(n)] = (char)(next() & 0xff);
            break;
        case 3: { /* delete a range */
            if (!n) break;
            size_t a = below(n), l = below(32);
            if (a + l > n) l = n - a;
            memmove(out + a, out + a + l, n - a - l);
            n -= l;
            break;
        }
        case 4: { /* copy a range somewhere else */
            if (!n) break;
            size_t a = below(n), l = below(64), at = below(n);
            if (a + l > n) l = n - a;
            if (n + l >= cap) break;
            char tmp[64];
            memcpy(tmp, out + a, l);
            memmove(out + at + l, out + at, n - at);
            memcpy(out + at, tmp, l);
            n += l;
            break;
        }
        case 5: { /* duplicate a whole line */
            if (!n) break;
            size_t a = below(n);
            while (a > 0 && out[a - 1] != '\n') a--;
            size_t e = a;
            while (e < n && out[e] != '\n') e++;
            size_t l = e - a + (e < n);
            if (n + l >= cap) break;
            memmove(out + a + l, out + a, n - a);
            n += l;
            break;
        }
        }
    }
    out[n] = '\0';
    return n;
}

static int run(const char *text, size_t len, int with_defines)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src = {0};
    src.path = "fuzz.kiln";
    src.text = (char *)text;
    src.len = len;
    fe_define defs[] = {{"B", "2"}, {"EPS", "1e-6"}, {"T", "x"}};
    fe_options o = {defs, with_defines ? 1 + (int)below(3) : 0};
    ir_graph *g = fe_compile(&src, &o, &d);
    int bad = 0;
    if (g && d.errors) bad = 1;
    if (!g && !d.errors) bad = 1;
    for (int i = 0; i < d.count; i++)
        if (strstr(d.items[i].msg, "internal error")) bad = 1;
    if (g) {
        if (ir_verify(g, NULL) != 0) bad = 1;
        ir_graph_free(g);
    }
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (f) {
        diag_print(&d, f, text);
        fe_dump_ast(&src, f, &d);
        fclose(f);
    }
    free(buf);
    diag_list_free(&d);
    arena_free(&a);
    return bad;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (buf) buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Every function with many argument patterns, well-formed or not: each
 * either compiles or reports an error (never a silent failure or a crash). */
static void sweep_builtins(void)
{
    static const char *fns[] = {
        "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "relu", "neg", "gelu", "add",
        "sub", "mul", "div", "pow", "max", "min", "cast", "sum", "mean", "softmax", "rmsnorm",
        "layernorm", "matmul", "linear", "reshape", "transpose", "permute", "slice", "concat",
        "split", "embedding", "rope", "attention", "cache_write", "causal_mask", "nosuch",
    };
    static const char *args[] = {
        "", "x", "x, x", "x, w", "[]", "[x]", "[x, x]", "x, []", "x, [B]", "x, [-1]", "x, [0, 1, 2]",
        "x, 1", "x, -1", "x, 0, 2", "x, axis=[]", "x, axis=5", "x, axis=1, keepdim=true",
        "x, f32", "x, dtype=i32", "true", "x, true", "x, eps=x", "x, w, eps=-1.0", "ids",
        "emb, ids", "q4", "q4, pos", "q4, kc, vc", "q4, kc, vc, pos, causal=true, scale=0.0",
        "kc, k4", "kc, vc, k4, k4, pos", "kc, kc, kc, kc, kc, kc", "S, S", "S, 0", "B * S, 2",
        "x, [B, S, 2, 32]", "x, [B, -1, 16]", "x, axis=2, start=0, end=64", "x, 2, 70",
        "x, [32, 32]", "x, 3", "[x, w], axis=0", "x, x=x", "x, tanh=true", "1.5", "x @ x",
        "x, [0, 0, 1]", "s4, 0, 1", "pos, 2",
    };
    static const char *pre =
        "model t {\n dims B, S, T\n const D = 64, HD = 16\n input x : f32[B, S, D]\n"
        " input ids : i32[B, S]\n input pos : i32[B]\n input q4 : f32[B, S, 4, HD]\n"
        " input k4 : f32[B, S, 2, HD]\n input s4 : f32[B, 4, S, S]\n weight w : f32[D]\n"
        " weight emb : f32[100, D]\n state kc : f32[B, 2, T, HD]\n state vc : f32[B, 2, T, HD]\n";
    int bad = 0;
    char text[2048];
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        for (size_t j = 0; j < sizeof args / sizeof args[0]; j++) {
            for (int form = 0; form < 3; form++) {
                if (form == 0)
                    snprintf(text, sizeof text, "%s output y = %s(%s)\n}\n", pre, fns[i], args[j]);
                else if (form == 1)
                    snprintf(text, sizeof text, "%s a, b = %s(%s)\n output y = a\n}\n", pre, fns[i], args[j]);
                else
                    snprintf(text, sizeof text, "%s output y = x + %s(%s) * 2.0\n}\n", pre, fns[i], args[j]);
                if (run(text, strlen(text), 0)) {
                    if (!bad) fprintf(stderr, "sweep broke an invariant:\n%s\n", text);
                    bad++;
                }
            }
        }
    CHECK_MSG(bad == 0, "%d bad calls in the sweep", bad);
}

int main(int argc, char **argv)
{
    sweep_builtins();
    const char *files[] = {"samples/llama3_8b_layer.kiln", "samples/gpt2_block.kiln",
                           "tests/frontend/golden/small.kiln"};
    int iters = argc > 1 ? atoi(argv[1]) : 1500;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t len;
        char *text = slurp(files[i], &len);
        CHECK_MSG(text != NULL, "cannot read %s", files[i]);
        if (!text) continue;
        size_t cap = len + 4096;
        char *m = malloc(cap);
        int bad = 0;
        CHECK(run(text, len, 0) == 0);
        for (int k = 0; k < iters && m; k++) {
            size_t n = mutate(text, len, m, cap);
            if (run(m, n, k % 7 == 0)) {
                if (!bad) fprintf(stderr, "%s: mutant %d broke an invariant:\n%s\n", files[i], k, m);
                bad++;
            }
        }
        CHECK_MSG(bad == 0, "%s: %d bad mutants", files[i], bad);
        free(m);
        free(text);
    }
    return CHECK_DONE();
}
