/* tests/passes/test_cost.c — the cost model (ir/cost.h) of every kernel of
 * the samples, against bytes and FLOPs worked out by hand from the model
 * text. Each literal carries its arithmetic; none comes from the model.
 *
 * Llama-3-8B layer: D = 4096, H = 32, KV = 8, HD = 128, F = 14336, bf16 (2
 * bytes). One K or V cache row of one sequence: KV * HD * 2 = 2048 bytes.
 * Kernels after the pipeline: k0 rmsnorm (its gain folded into the next weights), k1 QKV linear (packed weight
 * [6144, 4096]) + rope + cache writes in its epilogue, k2 attention, k3 O linear + residual,
 * k4 rmsnorm, k5 gate/up linear (packed [28672, 4096]) + SwiGLU, k6 down
 * linear + residual. */
#include <string.h>

#include "check.h"
#include "ir/cost.h"
#include "pass_harness.h"

typedef struct want {
    const char *kind;
    int64_t read, written, weights, states, flops;
} want;

static ir_graph *compile_sample(const char *path)
{
    ir_graph *g = harness_compile(path, NULL, 0);
    if (!g) return NULL;
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    pass_options o = {0};
    pass_ctx ctx = {.opts = &o, .diags = &d};
    g = harness_run_until(g, NULL, &ctx);
    diag_print(&d, stderr, NULL);
    diag_list_free(&d);
    arena_free(&a);
    return g;
}

static void check_kernels(const char *what, const ir_graph *g, const int64_t *dims, const int32_t *const *i32,
                          const want *w, int nw)
{
    CHECK_MSG(g->ngroups == nw, "%s: %d kernels, expected %d", what, g->ngroups, nw);
    for (int k = 0; k < g->ngroups && k < nw; k++) {
        ir_cost c;
        char err[256] = "";
        CHECK_MSG(ir_cost_group(g, k, dims, i32, &c, err, sizeof err) == 0, "%s k%d: %s", what, k, err);
        CHECK_MSG(!strcmp(ir_group_kind_name(g->groups[k].kind), w[k].kind), "%s k%d is %s, expected %s", what, k,
                  ir_group_kind_name(g->groups[k].kind), w[k].kind);
        CHECK_MSG(c.read == w[k].read, "%s k%d read %lld, expected %lld", what, k, (long long)c.read, (long long)w[k].read);
        CHECK_MSG(c.written == w[k].written, "%s k%d written %lld, expected %lld", what, k, (long long)c.written,
                  (long long)w[k].written);
        CHECK_MSG(c.weights == w[k].weights, "%s k%d weights %lld, expected %lld", what, k, (long long)c.weights,
                  (long long)w[k].weights);
        CHECK_MSG(c.states == w[k].states, "%s k%d states %lld, expected %lld", what, k, (long long)c.states,
                  (long long)w[k].states);
        CHECK_MSG(c.flops == w[k].flops, "%s k%d flops %lld, expected %lld", what, k, (long long)c.flops,
                  (long long)w[k].flops);
    }
}

static int64_t sum_floors_ns(const ir_graph *g, const int64_t *dims, const int32_t *const *i32, double bw, double rate)
{
    double t = 0;
    for (int k = 0; k < g->ngroups; k++) {
        ir_cost c;
        if (ir_cost_group(g, k, dims, i32, &c, NULL, 0) != 0) return -1;
        t += ir_floor_of(ir_cost_bytes(&c), c.flops, bw, rate).t;
    }
    return (int64_t)(t * 1e9 + 0.5);
}

/* The 8B layer at decode: B=1, S=1, T=1024, pos = 1023 (the new token
 * attends to 1024 keys, as the benchmark's "ctx 1024"). */
static void llama8b_decode(const ir_graph *g)
{
    int64_t dims[3] = {1, 1, 1024};
    int32_t pos[1] = {1023};
    const int32_t *i32[16] = {NULL, pos}; /* params: x, pos, ... */
    const want w[] = {
        /* rmsnorm: x 4096*2 read (its gain ln1 is folded into the QKV weight: norm-gain); h 4096*2 written */
        {"row", 8192, 8192, 0, 0, 0},
        /* QKV + rope + cache writes: h 8192 + packed weight 6144*4096*2 = 50331648 + pos 4; the
         * rotated q 4096*2 and one new row of each cache (2048) written; 2*6144*4096 */
        {"matmul", 8192 + 50331648 + 4, 8192 + 2 * 2048, 50331648, 2 * 2048, 50331648},
        /* q 8192 + pos 4; each cache: 1024 attended rows 1024 * 2048 = 2097152 read; a 4096*2
         * written. FLOPs: 2 * 1024 keys * 32 heads * (128 + 128) */
        {"attention", 8192 + 4 + 2 * 2097152, 8192, 0, 2 * 2097152, 16777216},
        /* O: a 8192 + wo 4096*4096*2 = 33554432 + residual x 8192; x1 8192; 2*4096*4096 */
        {"matmul", 8192 + 33554432 + 8192, 8192, 33554432, 0, 33554432},
        {"row", 8192, 8192, 0, 0, 0},
        /* gate/up: h2 8192 + 28672*4096*2 = 234881024; silu(g)*u 14336*2 = 28672; 2*28672*4096 */
        {"matmul", 8192 + 234881024, 28672, 234881024, 0, 234881024},
        /* down: 28672 + wd 4096*14336*2 = 117440512 + residual x1 8192; y 8192; 2*4096*14336 */
        {"matmul", 28672 + 117440512 + 8192, 8192, 117440512, 0, 117440512},
    };
    check_kernels("8b decode", g, dims, i32, w, 7);

    /* the benchmark's floor: weights (4096*2*2 + 4096*4096*2*2 + 1024*4096*2*2 + 14336*4096*2*3 =
     * 436224000) + attended K and V (2 * 1024 rows * 2048 = 4194304); FLOPs = the projections
     * 2*(6144 + 4096 + 28672 + 14336)*4096 = 436207616 + attention 16777216 */
    ir_cost l;
    CHECK(ir_cost_layer(g, dims, i32, &l, NULL, 0) == 0);
    CHECK(l.weights == 436224000);
    CHECK(l.states == 4194304);
    CHECK(l.read == 436224000 + 4194304);
    CHECK(l.flops == 436207616 + 16777216);
    /* at 4 TB/s and 800 TFLOP/s: the layer is bytes-bound, 440418304 / 4e12 s = 110104.576 ns */
    ir_floor lf = ir_floor_of(l.read, l.flops, 4e12, 800e12);
    CHECK(!lf.flops_bound);
    CHECK_NEAR(lf.t * 1e9, 110104.576, 1e-6, 0);
    /* every kernel is bytes-bound; the sum of bytes over the 7 kernels is
     * 24576 + 50352132 + 4202500 + 8192 + 33579008 + 24576 + 234918912 + 117485568 = 440595464, less the two
     * norms' gains folded into the next weights (2 * 8192): 440579080 */
    CHECK(sum_floors_ns(g, dims, i32, 4e12, 800e12) == 110145); /* 440579080 / 4e12 s, rounded */

    /* without positions: the whole cache is attended (o = T - S = 1023), the same here */
    ir_cost c2;
    CHECK(ir_cost_group(g, 2, dims, NULL, &c2, NULL, 0) == 0 && c2.read == 8192 + 4 + 2 * 2097152);

    /* two sequences at positions 99 and 511: 100 and 512 attended keys read from each cache;
     * q 2 * 8192, pos 2 * 4; a 2 * 8192 written (the new rows: k1's epilogue) */
    int64_t dims2[3] = {2, 1, 1024};
    int32_t pos2[2] = {99, 511};
    const int32_t *i32b[16] = {NULL, pos2};
    ir_cost c3;
    CHECK(ir_cost_group(g, 2, dims2, i32b, &c3, NULL, 0) == 0);
    CHECK(c3.read == 2 * 8192 + 8 + 2 * (100 + 512) * 2048);
    CHECK(c3.written == 2 * 8192);
    CHECK(c3.flops == 2 * (100 + 512) * 32 * 256); /* 2 FLOPs * keys * heads * (HD + HD) */
    ir_cost l3;
    CHECK(ir_cost_layer(g, dims2, i32b, &l3, NULL, 0) == 0 && l3.states == 2 * (100 + 512) * 2048);
    /* out-of-range positions are clamped to T - S: 1 and 1024 attended keys */
    int32_t pos3[2] = {-5, 5000};
    const int32_t *i32c[16] = {NULL, pos3};
    CHECK(ir_cost_group(g, 2, dims2, i32c, &c3, NULL, 0) == 0 && c3.read == 2 * 8192 + 8 + 2 * (1 + 1024) * 2048);
}

/* The 8B layer at prefill: B=1, S=2048, T=2048, pos = 0. */
static void llama8b_prefill(const ir_graph *g)
{
    int64_t dims[3] = {1, 2048, 2048};
    int32_t pos[1] = {0};
    const int32_t *i32[16] = {NULL, pos};
    const int64_t act = 2048LL * 4096 * 2; /* one [1, 2048, 4096] bf16 activation: 16777216 */
    const want w[] = {
        {"row", act, act, 0, 0, 0}, /* the gain folded into the QKV weight (norm-gain) */
        /* QKV + rope + cache writes: + pos 4; the rotated q (act) and 2048 rows * 2048 bytes of each
         * cache written; 2*2048*6144*4096 */
        {"matmul", act + 50331648 + 4, act + 2 * 4194304, 50331648, 2 * 4194304, 103079215104LL},
        /* q + pos 4 + 2048 rows * 2048 bytes of each cache read; causal FLOPs:
         * 2048*2049/2 = 2098176 (query, key) pairs * 32 heads * 2 * 256 */
        {"attention", act + 4 + 2 * 4194304, act, 0, 2 * 4194304, 34376515584LL},
        {"matmul", act + 33554432 + act, act, 33554432, 0, 68719476736LL},
        {"row", act, act, 0, 0, 0},
        /* gate/up out 2048*14336*2 = 58720256; 2*2048*28672*4096 */
        {"matmul", act + 234881024, 58720256, 234881024, 0, 481036337152LL},
        {"matmul", 58720256 + 117440512 + act, act, 117440512, 0, 240518168576LL},
    };
    check_kernels("8b prefill", g, dims, i32, w, 7);

    /* the benchmark's floor: 0.928 TFLOP, FLOPs-bound at 800 TFLOP/s */
    ir_cost l;
    CHECK(ir_cost_layer(g, dims, i32, &l, NULL, 0) == 0);
    CHECK(l.weights == 436224000);
    CHECK(l.states == 2 * 2048 * 2048); /* K and V, 2048 attended rows of 2048 bytes */
    CHECK(l.flops == 103079215104LL + 34376515584LL + 68719476736LL + 481036337152LL + 240518168576LL);
    ir_floor lf = ir_floor_of(l.read, l.flops, 4e12, 800e12);
    CHECK(lf.flops_bound);
    CHECK_NEAR(lf.t * 1e6, 927729713152.0 / 800e12 * 1e6, 1e-9, 0);
    /* per kernel at 4 TB/s and 800 TFLOP/s: rmsnorms bytes-bound (33554432 B: 8388.608 ns each),
     * attention flops-bound (42970.64448 ns), the matmuls flops-bound: 128849.01888, 85899.34592,
     * 601295.42144, 300647.71072 ns */
    int64_t want_ns = (int64_t)(8388.608 * 2 + 42970.64448 + 128849.01888 + 85899.34592 + 601295.42144 +
                                300647.71072 + 0.5);
    CHECK(sum_floors_ns(g, dims, i32, 4e12, 800e12) == want_ns);
}

/* The 1B layer at decode, as the benchmark's 1b-decode: D = 2048, H = 32, KV = 8, HD = 64,
 * F = 8192; a cache row of one sequence is 8 * 64 * 2 = 1024 bytes. */
static void llama1b_decode(const ir_graph *g)
{
    int64_t dims[3] = {1, 1, 1024};
    int32_t pos[1] = {1023};
    const int32_t *i32[16] = {NULL, pos};
    const want w[] = {
        {"row", 4096, 4096, 0, 0, 0}, /* the gain folded into the QKV weight (norm-gain) */
        /* QKV + rope + cache writes: packed (2048 + 512 + 512) * 2048 * 2 = 12582912 + pos 4; q 2048 * 2
         * and one row of each cache (1024) written */
        {"matmul", 4096 + 12582912 + 4, 4096 + 2 * 1024, 12582912, 2 * 1024, 12582912},
        /* q 4096 + pos 4 + 1024 rows of each cache read (1048576); 2 * 1024 keys * 32 * 128 */
        {"attention", 4096 + 4 + 2 * 1048576, 4096, 0, 2 * 1048576, 8388608},
        {"matmul", 4096 + 8388608 + 4096, 4096, 8388608, 0, 8388608},
        {"row", 4096, 4096, 0, 0, 0},
        /* gate/up 16384 * 2048 * 2 = 67108864; silu(g)*u 8192 * 2 */
        {"matmul", 4096 + 67108864, 16384, 67108864, 0, 67108864},
        {"matmul", 16384 + 33554432 + 4096, 4096, 33554432, 0, 33554432},
    };
    check_kernels("1b decode", g, dims, i32, w, 7);
    ir_cost l;
    CHECK(ir_cost_layer(g, dims, i32, &l, NULL, 0) == 0);
    /* 121.6 MB of weights (2 * 4096 + 8388608 * 2 + 2097152 * 2 + 33554432 * 3) and 2 MB of KV */
    CHECK(l.weights == 121643008 && l.states == 2 * 1024 * 1024);
}

/* GPT-2 block, f32, no cache: B=1, S=128. Attention reads K and V slices
 * of the QKV buffer whole (T = S, no positions: o = 0). */
static void gpt2(const ir_graph *g)
{
    int64_t dims[2] = {1, 128};
    const int64_t act = 128LL * 768 * 4; /* 393216 */
    const want w[] = {
        /* layernorm: x (its w and b are folded into the QKV weight and bias: norm-gain) */
        {"row", act, act, 0, 0, 0},
        /* qkv: h + w_qkv (transposed at bind time) 768*2304*4 = 7077888 + b 2304*4; out 128*2304*4 */
        {"matmul", act + 7077888 + 9216, 1179648, 7077888 + 9216, 0, 2LL * 128 * 2304 * 768},
        /* attention: the three slices = the whole QKV buffer; causal 128*129/2 = 8256 pairs * 12
         * heads * 2 * (64 + 64) */
        {"attention", 1179648, act, 0, 0, 8256LL * 12 * 256},
        {"matmul", act + 768 * 768 * 4 + 3072 + act, act, 768 * 768 * 4 + 3072, 0, 2LL * 128 * 768 * 768},
        {"row", act, act, 0, 0, 0},
        /* fc + gelu: out 128*3072*4 = 1572864 */
        {"matmul", act + 768 * 3072 * 4 + 3072 * 4, 1572864, 768 * 3072 * 4 + 3072 * 4, 0, 2LL * 128 * 3072 * 768},
        {"matmul", 1572864 + 3072 * 768 * 4 + 3072 + act, act, 3072 * 768 * 4 + 3072, 0, 2LL * 128 * 768 * 3072},
    };
    check_kernels("gpt2", g, dims, NULL, w, 7);
    ir_cost l;
    CHECK(ir_cost_layer(g, dims, NULL, &l, NULL, 0) == 0);
    CHECK(l.states == 0); /* no KV cache */
    /* weights: 4 norm vectors 4*3072, 768*2304 + 768*768 + 2*768*3072 matrices and biases
     * 2304 + 768 + 3072 + 768, all * 4 bytes */
    CHECK(l.weights == 4 * 3072 + 4LL * (768 * 2304 + 768 * 768 + 2 * 768 * 3072) + 4LL * (2304 + 768 + 3072 + 768));
}

/* Gemma-2-2B's local layer: a sliding window of 4096 keys; KV = 4, HD = 256,
 * so one K or V cache row of a sequence is 4 * 256 * 2 = 2048 bytes. */
static void gemma2_window(const ir_graph *g)
{
    int k = -1;
    for (int i = 0; i < g->ngroups; i++)
        if (!strcmp(ir_group_kind_name(g->groups[i].kind), "attention")) k = i;
    CHECK(k >= 0);
    if (k < 0) return;
    /* decode over a 32k cache at position 32767: the window's 4096 keys of each cache,
     * 2 * 4096 * 2048 = 16777216 bytes; FLOPs 2 * 4096 keys * 8 heads * (256 + 256) = 33554432 */
    int64_t dims[3] = {1, 1, 32768};
    int32_t pos[1] = {32767};
    const int32_t *i32[16] = {NULL, pos};
    ir_cost c;
    CHECK(ir_cost_group(g, k, dims, i32, &c, NULL, 0) == 0);
    CHECK_MSG(c.states == 16777216, "window decode states %lld", (long long)c.states);
    CHECK_MSG(c.flops == 33554432, "window decode flops %lld", (long long)c.flops);
    /* at position 1000 the window does not bind: 1001 keys, 2 * 1001 * 2048 = 4100096 bytes,
     * 2 * 1001 * 8 * 512 = 8200192 FLOPs */
    pos[0] = 1000;
    CHECK(ir_cost_group(g, k, dims, i32, &c, NULL, 0) == 0);
    CHECK_MSG(c.states == 4100096, "window decode at 1000: states %lld", (long long)c.states);
    CHECK_MSG(c.flops == 8200192, "window decode at 1000: flops %lld", (long long)c.flops);
    /* prefill of 8192 tokens from position 0: query p sees min(p + 1, 4096) keys, in all
     * 4096 * 4097 / 2 + 4096 * 4096 = 25167872 pairs; 2 * 25167872 * 8 * 512 = 206175207424 */
    int64_t pdims[3] = {1, 8192, 8192};
    pos[0] = 0;
    CHECK(ir_cost_group(g, k, pdims, i32, &c, NULL, 0) == 0);
    CHECK_MSG(c.flops == 206175207424LL, "window prefill flops %lld", (long long)c.flops);
}

int main(void)
{
    ir_graph *g = compile_sample("samples/llama3_8b_layer.kiln");
    CHECK(g != NULL);
    if (g) {
        llama8b_decode(g);
        llama8b_prefill(g);
        ir_cost c;
        char err[256];
        CHECK(ir_cost_group(g, 7, (int64_t[3]){1, 1, 1}, NULL, &c, err, sizeof err) == -1 && strstr(err, "k7"));
        ir_graph_free(g);
    }
    g = compile_sample("samples/llama3_1b_layer.kiln");
    CHECK(g != NULL);
    if (g) {
        llama1b_decode(g);
        ir_graph_free(g);
    }
    g = compile_sample("samples/gemma2_2b_layer.kiln");
    CHECK(g != NULL);
    if (g) {
        gemma2_window(g);
        ir_graph_free(g);
    }
    g = compile_sample("samples/gpt2_block.kiln");
    CHECK(g != NULL);
    if (g) {
        gpt2(g);
        ir_graph_free(g);
    }
    return CHECK_DONE();
}
