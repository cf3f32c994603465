/* tests/gpu/test_gpu_attention.c — the attention templates on the GPU against
 * a float64 CPU reference written from ir/ir.h (ATTENTION, ROPE, CACHE_WRITE).
 *
 * Each case builds its translation unit (common.cuh + a hand-written
 * generated part + attention_common.cuh + the template), compiles it with
 * NVRTC for sm_90a (all cases' kernels at once, on threads), loads it with
 * cudaLibraryLoadData and runs it on fresh random inputs (seed printed;
 * KILN_SEED=N repeats one).
 * q, k_new, v_new are views into one fused QKV buffer [B, S, H+2KV, HD], as
 * the QKV matmul leaves them. Outputs are poisoned (0xFF: NaN) before every
 * launch. Checks per case:
 *   - ‖out − ref‖ / ‖ref‖ < 1e-2 (bf16) or 5e-3 (f16), no NaN (every element
 *     written);
 *   - KILN_APPEND: cache rows o .. o+S-1 (poisoned before) hold the new rows
 *     (v bit-exact, k bit-exact without RoPE, within rounding with it), and
 *     every other cache row is bit-identical to what it was;
 *   - RoPE with llama3 and YaRN frequency scaling (the table codegen writes,
 *     reference frequencies from ir_rope_inv_freq) at positions past the
 *     scaling's original context;
 *   - decode: the launch is run twice (a graph replay's situation) and both
 *     results are checked; the split counters are back to zero after each.
 * Prints one line per case and "N passed, N failed"; exits 77 without a
 * device of compute capability 9.x.
 *
 * KILN_CASES=A-B runs cases A..B only. KILN_BENCH=1 adds timings (KILN_BENCH=2: the timings alone;
 * KILN_DEC_SWEEP=1: decode rows under other kernel shapes, 2: those without the decode table;
 * KILN_ATT_CUBINS=DIR keeps the cubins in DIR, KILN_ATT_PRECOMPILE=1 only fills it, no device
 * needed) (median of 50 launches, CUDA events, after
 * warm-up, rotating input sets so the data is not all in L2): decode
 * B=1 and B=32, H=32, KV=8, HD=128, context 1024 (KV bytes read, GB/s), for a
 * few KILN_SPLITS; prefill B=1, S=2048, H=32, KV=8, HD=128, causal (TFLOP/s,
 * causal FLOPs: 4*HD per visible (query, key) pair per head), plain and with
 * RoPE / APPEND. Each line: the median of single launches between events
 * (includes the host's submission gap for short kernels), then the time per
 * launch of the same 50 launches replayed as a CUDA graph. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "gpu/attention_src.h"
#include "gpu/gpu_test_util.h"
#include "ir/ir.h"

#define PREFILL_BQ 64       /* KILN_BQ default */
#define PREFILL_THREADS 128 /* 2 * KILN_BQ */
#define THETA 500000.0

static float rnd(double v) { return dec(enc((float)v)); }

/* The frequency scalings of the cases (tcase.scaling): none, llama3, YaRN,
 * both with an original context of 256 so that the positions pass it. */
static const ir_rope_attrs scalings[3] = {
    {0},
    {.scaling = IR_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_pos = 256},
    {.scaling = IR_ROPE_YARN, .factor = 4, .original_max_pos = 256, .beta_fast = 32, .beta_slow = 1,
     .mscale = 1.1386294361119891},
};
static const ir_rope_attrs *g_scaling = &scalings[0]; /* of the case being built */

/* rotate-half RoPE of one HD row at position p, in double, rounded (ir ROPE:
 * the frequencies of ir_rope_inv_freq, cos and sin times its mscale) */
static void rope_row(float *x, int hd, long long p)
{
    int half = hd / 2;
    double inv[128], m = ir_rope_mscale(g_scaling);
    ir_rope_inv_freq(THETA, g_scaling, hd, inv);
    for (int i = 0; i < half; i++) {
        double f = inv[i];
        double c = cos((double)p * f) * m, s = sin((double)p * f) * m;
        double x1 = x[i], x2 = x[i + half];
        x[i] = rnd(x1 * c - x2 * s);
        x[i + half] = rnd(x2 * c + x1 * s);
    }
}

/* ---- cases ----------------------------------------------------------------- */

typedef struct tcase {
    int decode, bf16, B, S, H, KV, HD, T, causal, rope, append, splits;
    int use_pos;
    int pos[8];
    int scaling; /* index into scalings[] */
    int window;     /* decode: sliding window (0: none) */
    double softcap; /* decode: logit soft-cap (0: none) */
    int cluster, warps, stages, minkeys, threads; /* decode: the kernel's shape (0: the defaults;
                                                   * cluster > 1: splits == cluster) */
    int push; /* decode with a cluster: KILN_DEC_PUSH (0: the two-barrier combine) */
    int cols; /* with push: KILN_DEC_COLS */
} tcase;

static const tcase cases[] = {
    /* prefill: B=2, H=8 */
    {0, 1, 2, 1, 8, 2, 64, 1, 1, 0, 0, 0, 0, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 17, 8, 8, 128, 17, 0, 0, 0, 0, 0, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 128, 8, 2, 128, 128, 1, 1, 1, 0, 1, {0, 0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 300, 8, 2, 64, 300, 1, 0, 0, 0, 0, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 17, 8, 2, 128, 400, 1, 1, 1, 0, 1, {100, 383}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 300, 8, 8, 64, 1000, 0, 0, 1, 0, 1, {0, 700}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 128, 8, 2, 128, 512, 1, 0, 0, 0, 0, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 2, 128, 8, 2, 128, 300, 1, 1, 1, 0, 1, {50, 172}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 300, 8, 2, 128, 300, 1, 1, 0, 0, 1, {0, 0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 1, 8, 8, 128, 64, 1, 1, 1, 0, 1, {10, 63}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 300, 8, 2, 128, 700, 0, 1, 1, 0, 1, {0, 333}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 300, 8, 8, 64, 1000, 1, 1, 1, 0, 1, {3, 650}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 64, 8, 2, 128, 200, 1, 1, 0, 0, 0, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0}, /* RoPE at s, offset T - S */
    /* decode */
    {1, 1, 1, 1, 8, 2, 128, 4096, 1, 1, 1, 16, 1, {4095}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 1, 8, 2, 128, 4096, 1, 0, 0, 16, 1, {0, 17, 1000, 4095}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 1, 8, 8, 64, 2048, 1, 1, 1, 7, 1, {5, 100, 1500, 2047}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 4, 8, 2, 128, 1024, 1, 0, 1, 8, 1, {0, 3, 500, 1020}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 8, 8, 2, 128, 1024, 1, 1, 1, 16, 1, {777}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 0, 4, 1, 8, 2, 128, 1000, 1, 1, 1, 16, 1, {1, 250, 998, 999}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 1, 8, 8, 64, 333, 0, 0, 0, 1, 0, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 1, 8, 1, 128, 4096, 1, 1, 1, 32, 1, {4000, 12, 2048, 4095}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 3, 8, 8, 64, 512, 0, 1, 1, 5, 1, {0, 1, 200, 509}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 2, 8, 2, 128, 300, 1, 1, 0, 4, 0, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    /* RoPE with frequency scaling, positions past the original context (256) */
    {0, 1, 2, 17, 8, 2, 128, 1000, 1, 1, 1, 0, 1, {300, 900}, 1, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 2, 128, 8, 2, 64, 1000, 1, 1, 1, 0, 1, {250, 700}, 2, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 64, 8, 2, 128, 700, 1, 1, 0, 0, 0, {0}, 2, 0, 0.0, 0, 0, 0, 0, 0, 0, 0}, /* at s, offset T - S */
    {1, 1, 4, 1, 8, 2, 128, 4096, 1, 1, 1, 16, 1, {257, 1000, 3000, 4095}, 1, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 4, 8, 8, 64, 2048, 1, 1, 1, 8, 1, {600, 2000}, 2, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    /* decode head dims 80, 96, 256 (and 16, 112, 192: correct), GQA 1/4/8 and MQA, a position
     * per batch row, lengths not multiples of a tile; form (a): RoPE + cache write fused;
     * form (b): q rotated and the caches already hold the new rows (a pure read) */
    {1, 1, 4, 1, 32, 8, 64, 1100, 1, 1, 1, 32, 1, {1023, 5, 777, 1099}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},      /* 1B: G 4 */
    {1, 1, 4, 1, 32, 8, 64, 1100, 1, 0, 0, 32, 1, {1023, 5, 777, 1099}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 3, 1, 8, 1, 256, 1100, 1, 1, 1, 64, 1, {1023, 0, 1099}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},            /* Gemma: MQA G 8 */
    {1, 0, 3, 1, 8, 1, 256, 1100, 1, 0, 0, 64, 1, {1023, 3, 600}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 3, 1, 32, 32, 96, 1100, 1, 1, 1, 8, 1, {1023, 17, 1098}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},          /* Phi-3: MHA G 1 */
    {1, 0, 3, 1, 32, 32, 96, 1100, 1, 0, 0, 8, 1, {1023, 17, 1098}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 1, 16, 2, 80, 700, 1, 1, 1, 32, 1, {699, 44}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},                  /* G 8 */
    {1, 0, 2, 3, 16, 2, 80, 700, 1, 0, 0, 32, 1, {333, 0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 2, 8, 2, 16, 300, 1, 1, 1, 16, 1, {297, 9}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 1, 8, 2, 112, 300, 1, 0, 0, 16, 1, {260, 31}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 5, 4, 1, 192, 500, 1, 1, 1, 16, 1, {400, 2}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 16, 8, 8, 128, 2100, 1, 1, 1, 16, 1, {2000, 70}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},               /* 16 rows */
    {1, 1, 1, 16, 8, 2, 96, 300, 0, 0, 0, 4, 1, {100}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},                       /* not causal */
    /* sliding window and soft-capping (Gemma-2), form (a) and (b) */
    {1, 1, 3, 1, 8, 4, 256, 5000, 1, 1, 1, 32, 1, {4999, 100, 2500}, 0, 4096, 50.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 3, 1, 8, 4, 256, 5000, 1, 0, 0, 32, 1, {4999, 100, 2500}, 0, 4096, 50.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 0, 2, 4, 8, 2, 128, 1000, 1, 1, 1, 16, 1, {900, 40}, 0, 100, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 3, 8, 2, 64, 1000, 1, 0, 0, 16, 1, {900, 2}, 0, 37, 30.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 2, 1, 8, 8, 96, 1000, 1, 1, 1, 8, 1, {999, 500}, 0, 0, 5.0, 0, 0, 0, 0, 0, 0, 0},
    /* thread-block clusters of the splits (KILN_DEC_CLUSTER): sizes 2..16, both forms, each
     * head dim of the layers, a split count past the keys (short caches: CTAs with no keys),
     * several m-tiles (R > 16), f16, a window and soft-cap, rings streaming long splits */
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 4, 3, 64, 128, 0, 0},          /* 8B */
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 1, 1, 8, 1, {1023}, 0, 0, 0.0, 8, 4, 3, 64, 128, 0, 0},
    {1, 0, 2, 1, 32, 8, 128, 1100, 1, 1, 1, 16, 1, {1099, 100}, 0, 0, 0.0, 16, 4, 2, 64, 128, 0, 0},
    {1, 1, 2, 1, 32, 8, 128, 1100, 1, 0, 0, 16, 1, {30, 1099}, 0, 0, 0.0, 16, 2, 2, 32, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 1100, 1, 1, 1, 8, 1, {1023}, 0, 0, 0.0, 8, 4, 3, 64, 128, 0, 0},            /* 1B */
    {1, 1, 1, 1, 32, 8, 64, 1100, 1, 0, 0, 4, 1, {1023}, 0, 0, 0.0, 4, 4, 4, 64, 128, 0, 0},
    {1, 1, 3, 1, 8, 1, 256, 1100, 1, 1, 1, 8, 1, {1023, 0, 1099}, 0, 0, 0.0, 8, 4, 3, 64, 128, 0, 0},   /* Gemma */
    {1, 0, 3, 1, 8, 1, 256, 1100, 1, 0, 0, 16, 1, {1023, 3, 600}, 0, 0, 0.0, 16, 2, 2, 32, 128, 0, 0},
    {1, 1, 3, 1, 32, 32, 96, 1100, 1, 1, 1, 8, 1, {1023, 17, 1098}, 0, 0, 0.0, 8, 4, 3, 64, 128, 0, 0}, /* Phi-3 */
    {1, 0, 3, 1, 32, 32, 96, 1100, 1, 0, 0, 4, 1, {1023, 17, 1098}, 0, 0, 0.0, 4, 4, 4, 64, 128, 0, 0},
    {1, 1, 4, 1, 8, 2, 128, 4096, 1, 0, 0, 2, 1, {0, 17, 1000, 4095}, 0, 0, 0.0, 2, 4, 4, 64, 128, 0, 0},
    {1, 1, 2, 16, 8, 2, 128, 2100, 1, 1, 1, 4, 1, {2000, 70}, 0, 0, 0.0, 4, 4, 3, 64, 128, 0, 0},      /* 4 m-tiles */
    {1, 0, 2, 3, 16, 2, 80, 700, 1, 0, 0, 8, 1, {333, 0}, 0, 0, 0.0, 8, 2, 3, 32, 64, 0, 0},           /* 2 m-tiles */
    {1, 1, 3, 1, 8, 4, 256, 5000, 1, 1, 1, 8, 1, {4999, 100, 2500}, 0, 4096, 50.0, 8, 4, 3, 64, 128, 0, 0},
    {1, 1, 2, 3, 8, 2, 64, 1000, 1, 0, 0, 16, 1, {900, 2}, 0, 37, 30.0, 16, 4, 2, 64, 128, 0, 0},
    {1, 1, 1, 1, 8, 1, 128, 300, 0, 0, 0, 8, 0, {0}, 0, 0, 0.0, 8, 4, 2, 64, 256, 0, 0},               /* T - S */
    /* the sweep's candidate shapes: clusters of 16 with one key tile per CTA, 8 warps, and
     * without a cluster rings above 47 KB (dynamic shared memory) and one split (the split
     * writes the output: short rows, or KILN_SPLITS 1) */
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 0, 0},
    {1, 1, 2, 1, 32, 8, 64, 1100, 1, 1, 1, 16, 1, {1023, 40}, 0, 0, 0.0, 16, 4, 2, 64, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 1100, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 2, 3, 32, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 1, 1, 16, 1, {1023}, 0, 0, 0.0, 16, 2, 3, 32, 64, 0, 0},
    {1, 1, 2, 1, 32, 8, 128, 1100, 1, 1, 1, 8, 1, {1023, 7}, 0, 0, 0.0, 8, 8, 2, 128, 256, 0, 0},
    {1, 0, 1, 1, 32, 8, 64, 1100, 1, 0, 0, 8, 1, {1099}, 0, 0, 0.0, 8, 8, 2, 128, 256, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 8300, 1, 0, 0, 16, 1, {8191}, 0, 0, 0.0, 16, 8, 2, 128, 256, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 8300, 1, 1, 1, 8, 1, {8200}, 0, 0, 0.0, 8, 8, 3, 128, 256, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 8300, 1, 0, 0, 16, 1, {8191}, 0, 0, 0.0, 16, 4, 4, 64, 128, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 1100, 1, 0, 0, 16, 1, {1023, 5, 64, 1099}, 0, 0, 0.0, 0, 4, 2, 64, 128, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 1100, 1, 1, 1, 1, 1, {1023, 5, 64, 1099}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 0, 4, 1, 32, 8, 128, 1100, 1, 0, 0, 1, 1, {1023, 5, 64, 1099}, 0, 0, 0.0, 0, 4, 3, 0, 128, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 1100, 1, 0, 0, 1, 1, {1023, 0, 600, 1099}, 0, 0, 0.0, 0, 2, 3, 0, 128, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 3000, 1, 1, 1, 4, 1, {2999, 5, 2000, 1099}, 0, 0, 0.0, 0, 4, 3, 0, 128, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 3000, 1, 0, 0, 2, 1, {2999, 5, 2000, 1099}, 0, 0, 0.0, 0, 4, 4, 0, 128, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 3000, 1, 0, 0, 8, 1, {2999, 5, 2000, 1099}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 3000, 1, 1, 1, 2, 1, {2999, 5, 2000, 1099}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 4, 1, 32, 8, 64, 1100, 1, 1, 1, 1, 1, {1023, 5, 64, 1099}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 4, 1, 32, 8, 64, 1100, 1, 0, 0, 1, 1, {1023, 5, 64, 1099}, 0, 0, 0.0, 0, 4, 4, 0, 128, 0, 0},
    {1, 0, 4, 1, 32, 8, 64, 1100, 1, 0, 0, 1, 1, {1023, 5, 64, 1099}, 0, 0, 0.0, 0, 2, 6, 0, 64, 0, 0},
    {1, 1, 4, 1, 32, 8, 64, 1100, 1, 0, 0, 2, 1, {1023, 5, 64, 1099}, 0, 0, 0.0, 0, 4, 3, 0, 128, 0, 0},
    {1, 1, 4, 2, 32, 8, 128, 1100, 1, 1, 1, 1, 1, {1023, 5, 64, 1097}, 0, 0, 0.0, 0, 4, 3, 0, 128, 0, 0},
    {1, 1, 2, 16, 8, 2, 128, 2100, 1, 1, 1, 1, 1, {2000, 70}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},          /* 4 m-tiles */
    /* the partials pushed into the leader's shared memory (KILN_DEC_PUSH, the last field: slots
     * of P >= G*S rows): the layers' shapes in both forms, f16, a ring streaming long splits, a
     * short cache (CTAs with no keys), 12 and 16 rows, head dims 16, 96 and 256 (MQA, q in shared
     * memory), a window with soft-capping, clusters of 16 and 4, extra warps, no positions */
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 0},        /* 8B */
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 1, 1, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 0},
    {1, 0, 2, 1, 32, 8, 64, 1100, 1, 0, 0, 8, 1, {1099, 100}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 0},    /* 1B */
    {1, 1, 1, 1, 32, 8, 64, 1100, 1, 1, 1, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 0},
    {1, 1, 1, 1, 32, 8, 128, 8300, 1, 1, 1, 8, 1, {8200}, 0, 0, 0.0, 8, 8, 3, 128, 256, 4, 0},
    {1, 1, 2, 1, 32, 8, 128, 1100, 1, 0, 0, 8, 1, {30, 1099}, 0, 0, 0.0, 8, 4, 2, 64, 128, 4, 0},
    {1, 1, 2, 3, 8, 2, 64, 1000, 1, 0, 0, 8, 1, {900, 2}, 0, 37, 30.0, 8, 4, 2, 64, 128, 12, 0},
    {1, 1, 2, 2, 16, 2, 96, 700, 1, 1, 1, 8, 1, {698, 44}, 0, 0, 0.0, 8, 4, 3, 64, 128, 16, 0},
    {1, 1, 3, 1, 8, 1, 256, 1100, 1, 1, 1, 8, 1, {1023, 0, 1099}, 0, 0, 0.0, 8, 4, 2, 64, 128, 8, 0},
    {1, 1, 1, 1, 32, 8, 64, 1100, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 4, 0},
    {1, 0, 1, 1, 32, 8, 128, 1100, 1, 0, 0, 8, 1, {700}, 0, 0, 0.0, 8, 8, 2, 128, 256, 16, 0},
    {1, 1, 1, 16, 8, 8, 16, 300, 0, 0, 0, 4, 1, {100}, 0, 0, 0.0, 4, 4, 2, 64, 128, 16, 0},
    {1, 1, 1, 1, 8, 1, 128, 300, 0, 0, 0, 8, 0, {0}, 0, 0, 0.0, 8, 4, 2, 64, 256, 8, 0},
    /* the same with one softmax per key tile and P V split by columns (KILN_DEC_COLS, the last field) */
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 1},        /* 8B */
    {1, 1, 1, 1, 32, 8, 128, 1100, 1, 1, 1, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 1},
    {1, 0, 2, 1, 32, 8, 64, 1100, 1, 0, 0, 8, 1, {1099, 100}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 1},    /* 1B */
    {1, 1, 1, 1, 32, 8, 64, 1100, 1, 1, 1, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 1},
    {1, 1, 1, 1, 32, 8, 128, 8300, 1, 1, 1, 8, 1, {8200}, 0, 0, 0.0, 8, 8, 3, 128, 256, 4, 1},
    {1, 1, 2, 1, 32, 8, 128, 1100, 1, 0, 0, 8, 1, {30, 1099}, 0, 0, 0.0, 8, 4, 2, 64, 128, 4, 1},
    {1, 1, 2, 3, 8, 2, 64, 1000, 1, 0, 0, 8, 1, {900, 2}, 0, 37, 30.0, 8, 4, 2, 64, 128, 12, 1},
    {1, 1, 2, 2, 16, 2, 96, 700, 1, 1, 1, 8, 1, {698, 44}, 0, 0, 0.0, 8, 4, 3, 64, 128, 16, 1},
    {1, 1, 3, 1, 8, 1, 256, 1100, 1, 1, 1, 8, 1, {1023, 0, 1099}, 0, 0, 0.0, 8, 4, 2, 64, 128, 8, 1},
    {1, 1, 1, 1, 32, 8, 64, 1100, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 4, 1},
    {1, 0, 1, 1, 32, 8, 128, 1100, 1, 0, 0, 8, 1, {700}, 0, 0, 0.0, 8, 8, 2, 128, 256, 16, 1},
    {1, 1, 1, 1, 8, 1, 128, 300, 0, 0, 0, 8, 0, {0}, 0, 0, 0.0, 8, 4, 2, 64, 256, 8, 1},
    /* the large-batch rule's shapes (cg_attention_decode_config at B*KV >= 64): B=8 x 8 heads */
    {1, 1, 8, 1, 32, 8, 128, 1100, 1, 0, 0, 4, 1, {1023, 5, 600, 1099, 64, 65, 700, 1000}, 0, 0, 0.0, 0, 4, 3, 32, 128, 0, 0},
    {1, 1, 8, 1, 32, 8, 64, 1100, 1, 1, 1, 4, 1, {1023, 5, 600, 1099, 64, 65, 700, 1000}, 0, 0, 0.0, 0, 4, 4, 64, 128, 0, 0},
    {1, 1, 8, 1, 32, 8, 64, 1100, 1, 0, 0, 4, 1, {1023, 5, 600, 1099, 64, 65, 700, 1000}, 0, 0, 0.0, 0, 4, 4, 64, 128, 0, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static att_cfg case_cfg(const tcase *c)
{
    att_cfg g = {.decode = c->decode, .bf16 = c->bf16, .hd = c->HD, .causal = c->causal,
                 .rope = c->rope, .append = c->append, .splits = c->decode ? c->splits : 16,
                 .theta = THETA, .scaling = scalings[c->scaling], .window = c->window, .softcap = c->softcap,
                 .threads = c->decode ? cg_attention_decode_threads(c->HD, (int64_t)c->B * c->KV) : 0};
    if (c->decode) {
        if (c->threads) g.threads = c->threads;
        g.cluster = c->cluster > 1 ? c->cluster : 0;
        g.warps = c->warps;
        g.stages = c->stages;
        g.minkeys = c->minkeys;
        g.push = c->push;
        g.cols = c->cols;
    }
    return g;
}

/* ---- kernels ----------------------------------------------------------------- */

typedef struct kern {
    att_cfg cfg;
    cudaLibrary_t lib;
    cudaKernel_t fn;
} kern;
static kern kerns[256];
static int nkerns;

static int add_cfg(att_job *jobs, int n, att_cfg c)
{
    for (int i = 0; i < n; i++)
        if (att_cfg_eq(&jobs[i].cfg, &c)) return n;
    memset(&jobs[n], 0, sizeof jobs[n]);
    jobs[n].cfg = c;
    return n + 1;
}

static cudaKernel_t find_kernel(att_cfg c)
{
    for (int i = 0; i < nkerns; i++)
        if (att_cfg_eq(&kerns[i].cfg, &c)) return kerns[i].fn;
    return NULL;
}

static int build_kernels(att_job *jobs, int n)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    att_compile_all(jobs, n, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char name[128];
        att_cfg_name(&jobs[i].cfg, name, sizeof name);
        if (!jobs[i].ok) {
            fprintf(stderr, "compile %s failed:\n%s\n", name, jobs[i].log ? jobs[i].log : "");
            bad++;
            continue;
        }
        kern *k = &kerns[nkerns++];
        k->cfg = jobs[i].cfg;
        CUDA_OK(cudaLibraryLoadData(&k->lib, jobs[i].cubin, NULL, NULL, 0, NULL, NULL, 0));
        CUDA_OK(cudaLibraryGetKernel(&k->fn, k->lib, ATT_KERNEL_NAME));
        if (k->cfg.decode) { /* as the runtime does: the ring's shared memory, clusters above 8 */
            cg_att_decode_cfg d = att_decode_shape(&k->cfg);
            int smem = (int)cg_attention_decode_smem(&d, k->cfg.hd);
            if (smem > 0) /* with the static bytes a ring of 47-48 KB passes the default 48 KB */
                CUDA_OK(cudaKernelSetAttributeForDevice(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem, 0));
            if (d.cluster > 8)
                CUDA_OK(cudaKernelSetAttributeForDevice(k->fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1, 0));
        }
        att_job_free(&jobs[i]);
    }
    printf("compiled %d kernels with NVRTC in %.1f s\n", n,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return bad;
}

/* ---- one case ---------------------------------------------------------------- */

typedef struct dev_bufs {
    uint16_t *qkv, *kc, *vc, *out;
    int *pos, *sem;
    float *ws;
} dev_bufs;

static void fill_args(att_args *a, const tcase *c, const dev_bufs *d)
{
    const long long W = (long long)(c->H + 2 * c->KV) * c->HD; /* fused QKV row */
    memset(a, 0, sizeof *a);
    a->q = d->qkv;
    a->k_new = d->qkv + (long long)c->H * c->HD;
    a->v_new = d->qkv + (long long)(c->H + c->KV) * c->HD;
    a->k = d->kc;
    a->v = d->vc;
    a->o = d->out;
    a->pos = c->use_pos ? d->pos : NULL;
    a->ws = d->ws;
    a->sem = d->sem;
    a->q_sb = a->kn_sb = a->vn_sb = (long long)c->S * W;
    a->q_ss = a->kn_ss = a->vn_ss = W;
    a->q_sh = a->kn_sh = a->vn_sh = c->HD;
    a->B = c->B;
    a->S = c->S;
    a->T = c->T;
    a->H = c->H;
    a->KV = c->KV;
}

/* The launch's status (a cluster that cannot be placed fails here: the bench rows report it). */
static cudaError_t launch_st(cudaKernel_t fn, const tcase *c, att_args *a, cudaStream_t st)
{
    dim3 grid, block;
    size_t smem = 0;
    if (c->decode) {
        att_cfg cfg = case_cfg(c);
        cg_att_decode_cfg d = att_decode_shape(&cfg);
        grid.x = (unsigned)c->splits;
        grid.y = (unsigned)c->KV;
        block.x = (unsigned)d.threads;
        smem = (size_t)cg_attention_decode_smem(&d, c->HD);
    } else {
        grid.x = (unsigned)((c->S + PREFILL_BQ - 1) / PREFILL_BQ);
        grid.y = (unsigned)c->H;
        block.x = PREFILL_THREADS;
    }
    grid.z = (unsigned)c->B;
    block.y = block.z = 1;
    void *args[1] = {a};
    cudaError_t e = cudaLaunchKernel((const void *)fn, grid, block, args, smem, st);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* not left for the next case's launch to read */
        return e;
    }
    return cudaGetLastError();
}

static void launch(cudaKernel_t fn, const tcase *c, att_args *a, cudaStream_t st)
{
    CUDA_OK(launch_st(fn, c, a, st));
}

static double rel_err(const float *x, const double *ref, size_t n, size_t *nans)
{
    double num = 0, den = 0;
    *nans = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) (*nans)++;
        double d = (double)x[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static void run_case(int idx, const tcase *c)
{
    g_bf16 = c->bf16;
    g_scaling = &scalings[c->scaling];
    const int B = c->B, S = c->S, H = c->H, KV = c->KV, HD = c->HD, T = c->T, G = H / KV;
    const long long W = (long long)(H + 2 * KV) * HD;
    const size_t nqkv = (size_t)B * S * W, ncache = (size_t)B * KV * T * HD, nout = (size_t)B * S * H * HD;
    uint16_t *qkv = malloc(nqkv * 2), *kc = malloc(ncache * 2), *vc = malloc(ncache * 2);
    uint16_t *kc2 = malloc(ncache * 2), *vc2 = malloc(ncache * 2), *out = malloc(nout * 2);
    float *outf = malloc(nout * sizeof(float));
    float *qf = malloc(nout * sizeof(float));
    float *kf = malloc(ncache * sizeof(float)), *vf = malloc(ncache * sizeof(float));
    double *ref = malloc(nout * sizeof(double)), *p = malloc((size_t)T * sizeof(double));
    int o[8];
    for (size_t i = 0; i < nqkv; i++) qkv[i] = enc(rng_normal());
    for (size_t i = 0; i < ncache; i++) kc[i] = enc(rng_normal()), vc[i] = enc(rng_normal());
    for (int b = 0; b < B; b++) {
        o[b] = c->use_pos ? c->pos[b] : T - S;
        if (c->append) /* poison the rows the kernel must write */
            for (int kh = 0; kh < KV; kh++)
                for (int s = 0; s < S; s++) {
                    size_t r = (((size_t)b * KV + kh) * T + o[b] + s) * HD;
                    memset(kc + r, 0xff, (size_t)HD * 2);
                    memset(vc + r, 0xff, (size_t)HD * 2);
                }
    }

    /* reference: effective q, k, v as the unfused graph would hold them */
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                float *x = qf + (((size_t)b * S + s) * H + h) * HD;
                for (int d = 0; d < HD; d++) x[d] = dec(qkv[((size_t)b * S + s) * W + (size_t)h * HD + d]);
                if (c->rope) rope_row(x, HD, (c->use_pos ? o[b] : 0) + s); /* ir ROPE */
            }
    for (size_t i = 0; i < ncache; i++) kf[i] = dec(kc[i]), vf[i] = dec(vc[i]);
    if (c->append)
        for (int b = 0; b < B; b++)
            for (int kh = 0; kh < KV; kh++)
                for (int s = 0; s < S; s++) {
                    size_t r = (((size_t)b * KV + kh) * T + o[b] + s) * HD;
                    size_t src = ((size_t)b * S + s) * W + (size_t)(H + kh) * HD;
                    for (int d = 0; d < HD; d++) {
                        kf[r + d] = dec(qkv[src + d]);
                        vf[r + d] = dec(qkv[src + (size_t)KV * HD + d]);
                    }
                    if (c->rope) rope_row(kf + r, HD, o[b] + s);
                }
    const double scale = 1.0 / sqrt((double)HD);
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                const float *q = qf + (((size_t)b * S + s) * H + h) * HD;
                const int kh = h / G, nk = c->causal ? o[b] + s + 1 : o[b] + S;
                /* ir ATTENTION: a window keeps keys j with o + s - j < W; scores soft-capped */
                const int j0 = c->window > 0 && o[b] + s - c->window + 1 > 0 ? o[b] + s - c->window + 1 : 0;
                double m = -INFINITY, sum = 0;
                for (int j = j0; j < nk; j++) {
                    const float *k = kf + (((size_t)b * KV + kh) * T + j) * HD;
                    double dot = 0;
                    for (int d = 0; d < HD; d++) dot += (double)q[d] * k[d];
                    p[j] = dot * scale;
                    if (c->softcap > 0) p[j] = c->softcap * tanh(p[j] / c->softcap);
                    if (p[j] > m) m = p[j];
                }
                for (int j = j0; j < nk; j++) sum += (p[j] = exp(p[j] - m));
                double *r = ref + (((size_t)b * S + s) * H + h) * HD;
                for (int d = 0; d < HD; d++) r[d] = 0;
                for (int j = j0; j < nk; j++) {
                    const float *v = vf + (((size_t)b * KV + kh) * T + j) * HD;
                    for (int d = 0; d < HD; d++) r[d] += p[j] * v[d];
                }
                for (int d = 0; d < HD; d++) r[d] /= sum;
            }

    /* device */
    dev_bufs d = {0};
    size_t nws = c->decode ? (size_t)B * S * H * c->splits * (HD + 2) : 1;
    CUDA_OK(cudaMalloc((void **)&d.qkv, nqkv * 2));
    CUDA_OK(cudaMalloc((void **)&d.kc, ncache * 2));
    CUDA_OK(cudaMalloc((void **)&d.vc, ncache * 2));
    CUDA_OK(cudaMalloc((void **)&d.out, nout * 2));
    CUDA_OK(cudaMalloc((void **)&d.pos, 8 * sizeof(int)));
    CUDA_OK(cudaMalloc((void **)&d.sem, (size_t)B * KV * sizeof(int)));
    CUDA_OK(cudaMalloc((void **)&d.ws, nws * sizeof(float)));
    CUDA_OK(cudaMemcpy(d.qkv, qkv, nqkv * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.kc, kc, ncache * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.vc, vc, ncache * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.pos, c->pos, 8 * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d.sem, 0, (size_t)B * KV * sizeof(int)));
    CUDA_OK(cudaMemset(d.ws, 0xff, nws * sizeof(float)));

    att_cfg cfg = case_cfg(c);
    char name[128];
    att_cfg_name(&cfg, name, sizeof name);
    cudaKernel_t fn = find_kernel(cfg);
    att_args a;
    fill_args(&a, c, &d);
    const double tol = c->bf16 ? 1e-2 : 5e-3;
    const int runs = c->decode ? 2 : 1;
    int ok = fn != NULL;
    double err = NAN;
    size_t nans = 0;
    for (int run = 0; ok && run < runs; run++) {
        CUDA_OK(cudaMemset(d.out, 0xff, nout * 2));
        cudaError_t le = launch_st(fn, c, &a, 0);
        CHECK_MSG(le == cudaSuccess, "case %d (%s): launch failed: %s", idx, name, cudaGetErrorString(le));
        if (le != cudaSuccess) {
            ok = 0;
            break;
        }
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(out, d.out, nout * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < nout; i++) outf[i] = dec(out[i]);
        double e = rel_err(outf, ref, nout, &nans);
        CHECK_MSG(nans == 0, "case %d (%s) run %d: %zu output elements NaN (unwritten?)", idx, name,
                  run, nans);
        CHECK_MSG(e < tol, "case %d (%s) run %d: relative error %.3g >= %.0e", idx, name, run, e, tol);
        if (!(nans == 0 && e < tol)) ok = 0;
        if (run == 0 || e > err) err = e;
        if (c->decode) {
            int sem[256] = {0};
            CUDA_OK(cudaMemcpy(sem, d.sem, (size_t)B * KV * sizeof(int), cudaMemcpyDeviceToHost));
            int nz = 0;
            for (int i = 0; i < B * KV; i++) nz += sem[i] != 0;
            CHECK_MSG(nz == 0, "case %d (%s): %d split counters not reset", idx, name, nz);
            if (nz) ok = 0;
        }
    }
    if (!fn) CHECK_MSG(0, "case %d (%s): no kernel", idx, name);

    /* caches: new rows written (exactly the expected values), nothing else touched */
    long long bad_other = 0, bad_v = 0, bad_k = 0;
    double kerr = 0, kden = 0;
    if (fn) {
        CUDA_OK(cudaMemcpy(kc2, d.kc, ncache * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(vc2, d.vc, ncache * 2, cudaMemcpyDeviceToHost));
        for (int b = 0; b < B; b++)
            for (int kh = 0; kh < KV; kh++)
                for (int j = 0; j < T; j++) {
                    size_t r = (((size_t)b * KV + kh) * T + j) * HD;
                    int isnew = c->append && j >= o[b] && j < o[b] + S;
                    for (int e = 0; e < HD; e++) {
                        if (!isnew) {
                            bad_other += kc2[r + e] != kc[r + e] || vc2[r + e] != vc[r + e];
                            continue;
                        }
                        bad_v += vc2[r + e] != enc(vf[r + e]);
                        float kd = dec(kc2[r + e]);
                        if (!c->rope) bad_k += kc2[r + e] != enc(kf[r + e]);
                        else if (isnan(kd)) bad_k++;
                        kerr += ((double)kd - kf[r + e]) * ((double)kd - kf[r + e]);
                        kden += (double)kf[r + e] * kf[r + e];
                    }
                }
        double krel = sqrt(kerr / (kden > 0 ? kden : 1));
        CHECK_MSG(bad_other == 0, "case %d (%s): %lld cache elements outside the new rows changed", idx,
                  name, bad_other);
        CHECK_MSG(bad_v == 0 && bad_k == 0, "case %d (%s): new cache rows wrong (%lld v, %lld k elements)",
                  idx, name, bad_v, bad_k);
        CHECK_MSG(krel < 4e-3, "case %d (%s): new k rows off by %.3g (relative)", idx, name, krel);
        if (bad_other || bad_v || bad_k || !(krel < 4e-3)) ok = 0;
    }
    printf("%-4s case %2d %-42s B=%d S=%-3d H=%d KV=%d T=%-4d %s rel.err %.2e%s\n", ok ? "ok" : "FAIL",
           idx, name, B, S, H, KV, T, c->use_pos ? "pos" : "T-S", err,
           c->append ? (bad_other || bad_v || bad_k ? ", caches WRONG" : ", caches ok") : "");
    fflush(stdout);

    cudaFree(d.qkv);
    cudaFree(d.kc);
    cudaFree(d.vc);
    cudaFree(d.out);
    cudaFree(d.pos);
    cudaFree(d.sem);
    cudaFree(d.ws);
    free(qkv), free(kc), free(vc), free(kc2), free(vc2), free(out), free(outf), free(qf);
    free(kf), free(vf), free(ref), free(p);
}

/* ---- timing ------------------------------------------------------------------ */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median of 50 launches (ms), each between two events, rotating over nsets
 * argument sets; *graph_ms: the same 50 launches captured in a CUDA graph,
 * replayed, time per launch (no host submission gaps). */
static float time_launches(cudaKernel_t fn, const tcase *c, att_args *sets, int nsets, float *graph_ms)
{
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t ev[51];
    for (int i = 0; i < 51; i++) CUDA_OK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < 10; i++) launch(fn, c, &sets[i % nsets], st); /* warm-up */
    float ms[50];
    for (int i = 0; i < 50; i++) {
        CUDA_OK(cudaEventRecord(ev[0], st));
        launch(fn, c, &sets[i % nsets], st);
        CUDA_OK(cudaEventRecord(ev[1 + i], st));
        CUDA_OK(cudaEventSynchronize(ev[1 + i]));
        CUDA_OK(cudaEventElapsedTime(&ms[i], ev[0], ev[1 + i]));
    }
    qsort(ms, 50, sizeof ms[0], cmp_float);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 50; i++) launch(fn, c, &sets[i % nsets], st);
    CUDA_OK(cudaStreamEndCapture(st, &g));
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    CUDA_OK(cudaGraphLaunch(ge, st)); /* warm-up */
    float gm[5];
    for (int i = 0; i < 5; i++) {
        CUDA_OK(cudaEventRecord(ev[0], st));
        CUDA_OK(cudaGraphLaunch(ge, st));
        CUDA_OK(cudaEventRecord(ev[1], st));
        CUDA_OK(cudaEventSynchronize(ev[1]));
        CUDA_OK(cudaEventElapsedTime(&gm[i], ev[0], ev[1]));
        gm[i] /= 50;
    }
    qsort(gm, 5, sizeof gm[0], cmp_float);
    *graph_ms = gm[2];
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    for (int i = 0; i < 51; i++) cudaEventDestroy(ev[i]);
    cudaStreamDestroy(st);
    return 0.5f * (ms[24] + ms[25]);
}

/* n random elements at dev: a 16M-element random block repeated (the caches of the large
 * rows hold billions of elements) */
static void fill_random(uint16_t *dev, size_t n)
{
    static uint16_t *blk;
    const size_t nb = (size_t)16 << 20;
    if (!blk) {
        blk = malloc(nb * 2);
        for (size_t k = 0; k < nb; k++) blk[k] = enc(rng_normal());
    }
    for (size_t at = 0; at < n; at += nb) {
        size_t m = n - at < nb ? n - at : nb;
        CUDA_OK(cudaMemcpy(dev + at, blk, m * 2, cudaMemcpyHostToDevice));
    }
}

static void bench_one(const tcase *c, const char *tag)
{
    att_cfg cfg = case_cfg(c);
    cudaKernel_t fn = find_kernel(cfg);
    char name[128];
    att_cfg_name(&cfg, name, sizeof name);
    if (!fn) {
        printf("bench %s: no kernel\n", name);
        return;
    }
    g_bf16 = c->bf16;
    const int B = c->B, S = c->S, H = c->H, KV = c->KV, HD = c->HD, T = c->T;
    const long long W = (long long)(H + 2 * KV) * HD;
    const size_t nqkv = (size_t)B * S * W, ncache = (size_t)B * KV * T * HD, nout = (size_t)B * S * H * HD;
    const size_t set_bytes = (nqkv + 2 * ncache) * 2;
    int nsets = (int)((180u << 20) / set_bytes) + 1; /* > 3x the 60 MB L2 in all */
    if (nsets > 32) nsets = 32;
    dev_bufs d[32];
    att_args a[32];
    size_t nws = c->decode ? (size_t)B * S * H * c->splits * (HD + 2) : 1;
    for (int i = 0; i < nsets; i++) {
        memset(&d[i], 0, sizeof d[i]);
        CUDA_OK(cudaMalloc((void **)&d[i].qkv, nqkv * 2));
        CUDA_OK(cudaMalloc((void **)&d[i].kc, ncache * 2));
        CUDA_OK(cudaMalloc((void **)&d[i].vc, ncache * 2));
        fill_random(d[i].qkv, nqkv);
        fill_random(d[i].kc, ncache);
        fill_random(d[i].vc, ncache);
        if (i == 0) {
            CUDA_OK(cudaMalloc((void **)&d[0].out, nout * 2));
            CUDA_OK(cudaMalloc((void **)&d[0].pos, 64 * sizeof(int)));
            CUDA_OK(cudaMalloc((void **)&d[0].sem, (size_t)B * KV * sizeof(int)));
            CUDA_OK(cudaMalloc((void **)&d[0].ws, nws * sizeof(float)));
            int pos[64];
            for (int b = 0; b < 64; b++) pos[b] = c->pos[0];
            CUDA_OK(cudaMemcpy(d[0].pos, pos, 64 * sizeof(int), cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemset(d[0].sem, 0, (size_t)B * KV * sizeof(int)));
        } else {
            d[i].out = d[0].out, d[i].pos = d[0].pos, d[i].sem = d[0].sem, d[i].ws = d[0].ws;
        }
        fill_args(&a[i], c, &d[i]);
    }
    float gms = 0, ms = 0;
    cudaError_t le = launch_st(fn, c, &a[0], 0);
    if (le == cudaSuccess) le = cudaDeviceSynchronize();
    if (le != cudaSuccess) {
        printf("bench %s %s B=%d: launch failed: %s\n", tag, name, B, cudaGetErrorString(le));
        (void)cudaGetLastError();
    } else
        ms = time_launches(fn, c, a, nsets, &gms);
    const int L = c->pos[0] + S; /* every batch at the same position */
    if (le != cudaSuccess) {
    } else if (c->decode && strcmp(tag, "decode")) { /* a sweep row: its shape */
        int lw = c->window > 0 && c->window < L ? c->window : L;
        double bytes = (double)B * KV * lw * HD * 2 * 2;
        printf("bench %s B=%d T=%d H=%d KV=%d hd=%d form=%s splits=%d cluster=%d warps=%d stages=%d threads=%d push=%d: "
               "%.2f us graph, %.2f us single, %.2f TB/s graph\n", tag, B, L, H, KV, HD, c->append ? "a" : "b",
               c->splits, cfg.cluster ? cfg.cluster : 1, att_decode_shape(&cfg).warps, att_decode_shape(&cfg).stages,
               att_decode_threads(&cfg), att_decode_shape(&cfg).push, gms * 1e3, ms * 1e3, bytes / (gms * 1e-3) / 1e12);
    } else if (c->decode) {
        double bytes = (double)B * KV * L * HD * 2 * 2;
        int lw = c->window > 0 && c->window < L ? c->window : L; /* keys read */
        bytes = (double)B * KV * lw * HD * 2 * 2;
        printf("bench %-40s B=%-2d ctx=%d splits=%-2d %7.2f us %7.1f GB/s | graph %7.2f us %7.1f GB/s (KV %.1f MB, %d sets)\n",
               name, B, L, c->splits, ms * 1e3, bytes / (ms * 1e-3) / 1e9, gms * 1e3,
               bytes / (gms * 1e-3) / 1e9, bytes / 1e6, nsets);
        /* the decode table's line (bench/attn/decode_table.py) */
        printf("bench decode B=%d T=%d H=%d KV=%d hd=%d window=%d form=%s splits=%d: %.2f us graph, %.2f us single, "
               "%.1f MB\n", B, L, H, KV, HD, c->window, c->append ? "a" : "b", c->splits, gms * 1e3, ms * 1e3,
               bytes / 1e6);
    } else {
        double pairs = 0;
        for (int s = 0; s < S; s++) pairs += c->causal ? (double)(c->pos[0] + s + 1) : (double)L;
        double flops = 4.0 * HD * H * B * pairs;
        printf("bench %-40s B=%d S=%d %7.1f us %6.1f TFLOP/s | graph %7.1f us %6.1f TFLOP/s (%.1f GFLOP, %d sets)\n",
               name, B, S, ms * 1e3, flops / (ms * 1e-3) / 1e12, gms * 1e3, flops / (gms * 1e-3) / 1e12,
               flops / 1e9, nsets);
    }
    CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < nsets; i++) {
        cudaFree(d[i].qkv);
        cudaFree(d[i].kc);
        cudaFree(d[i].vc);
    }
    cudaFree(d[0].out);
    cudaFree(d[0].pos);
    cudaFree(d[0].sem);
    cudaFree(d[0].ws);
}

/* One launch of c's kernel compiled with KILN_DEC_TIMING (a cluster shape) on a set not in
 * L2: per milestone of attention_decode.cuh, the median and the largest time since each CTA's
 * entry over the CTAs (SM clocks at the device's clock rate), and the spread of the CTAs'
 * entries (globaltimer). "bench timing" lines. */
static void timing_one(const tcase *c, int clock_khz)
{
    att_cfg cfg = case_cfg(c);
    cfg.timing = 1;
    cudaKernel_t fn = find_kernel(cfg);
    char name[128];
    att_cfg_name(&cfg, name, sizeof name);
    if (!fn) {
        printf("bench timing %s: no kernel\n", name);
        return;
    }
    g_bf16 = c->bf16;
    const int B = c->B, S = c->S, H = c->H, KV = c->KV, HD = c->HD, T = c->T;
    const long long W = (long long)(H + 2 * KV) * HD;
    const size_t nqkv = (size_t)B * S * W, ncache = (size_t)B * KV * T * HD, nout = (size_t)B * S * H * HD;
    enum { NSET = 24 };
    dev_bufs d[NSET];
    att_args a[NSET];
    const int ncta = c->splits * KV * B;
    size_t nws = (size_t)B * S * H * c->splits * (HD + 2);
    if (nws < (size_t)ncta * 32) nws = (size_t)ncta * 32;
    for (int i = 0; i < NSET; i++) {
        memset(&d[i], 0, sizeof d[i]);
        CUDA_OK(cudaMalloc((void **)&d[i].qkv, nqkv * 2));
        CUDA_OK(cudaMalloc((void **)&d[i].kc, ncache * 2));
        CUDA_OK(cudaMalloc((void **)&d[i].vc, ncache * 2));
        fill_random(d[i].qkv, nqkv);
        fill_random(d[i].kc, ncache);
        fill_random(d[i].vc, ncache);
        if (i == 0) {
            CUDA_OK(cudaMalloc((void **)&d[0].out, nout * 2));
            CUDA_OK(cudaMalloc((void **)&d[0].pos, 64 * sizeof(int)));
            CUDA_OK(cudaMalloc((void **)&d[0].sem, (size_t)B * KV * sizeof(int)));
            CUDA_OK(cudaMalloc((void **)&d[0].ws, nws * sizeof(float)));
            int pos[64];
            for (int b = 0; b < 64; b++) pos[b] = c->pos[0];
            CUDA_OK(cudaMemcpy(d[0].pos, pos, 64 * sizeof(int), cudaMemcpyHostToDevice));
        } else {
            d[i].out = d[0].out, d[i].pos = d[0].pos, d[i].sem = d[0].sem, d[i].ws = d[0].ws;
        }
        fill_args(&a[i], c, &d[i]);
    }
    unsigned long long *st = malloc((size_t)ncta * 16 * sizeof *st);
    double med[11] = {0}, mx[11] = {0}, spread = 0;
    const int reps = 5;
    for (int r = 0; r < reps; r++) {
        for (int i = 1; i < NSET; i++) launch(fn, c, &a[i], 0); /* set 0 leaves L2 */
        CUDA_OK(cudaDeviceSynchronize());
        launch(fn, c, &a[0], 0);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(st, d[0].ws, (size_t)ncta * 16 * sizeof *st, cudaMemcpyDeviceToHost));
        unsigned long long g0 = ~0ull, g1 = 0;
        for (int k = 0; k < ncta; k++) {
            if (st[k * 16] < g0) g0 = st[k * 16];
            if (st[k * 16] > g1) g1 = st[k * 16];
        }
        spread += (double)(g1 - g0) / reps;
        for (int m = 2; m <= 10; m++) {
            float *v = malloc((size_t)ncta * sizeof *v);
            double big = 0;
            for (int k = 0; k < ncta; k++) {
                v[k] = (float)(st[k * 16 + m] - st[k * 16 + 1]);
                if (v[k] > big) big = v[k];
            }
            qsort(v, (size_t)ncta, sizeof *v, cmp_float);
            med[m] += v[ncta / 2] / reps;
            mx[m] += big / reps;
            free(v);
        }
    }
    /* KILN_DEC_PUSH: "stored" is the push issued; the other CTAs stamp 8-10 then and exit, the
     * leader after its mbarrier wait (8) and its combine (9, 10): their max is the leader's */
    static const char *const what[11] = {"", "", "pos", "issued", "wait", "landed", "keys", "stored", "bar1", "combined", "bar2"};
    printf("bench timing %s B=%d T=%d: entries spread %.2f us; since entry (median / max over CTAs, us):", name, B,
           c->pos[0] + S, spread * 1e-3);
    for (int m = 2; m <= 10; m++) printf(" %s %.2f/%.2f", what[m], med[m] / clock_khz * 1e3, mx[m] / clock_khz * 1e3);
    printf("\n");
    free(st);
    for (int i = 0; i < NSET; i++) {
        cudaFree(d[i].qkv);
        cudaFree(d[i].kc);
        cudaFree(d[i].vc);
    }
    cudaFree(d[0].out);
    cudaFree(d[0].pos);
    cudaFree(d[0].sem);
    cudaFree(d[0].ws);
}

/* The decode table (bench/attn/run.sh): B 1, 8, 32 x cache 1024, 8192, 32768 of the 8B
 * layer's attention (32/8 heads of 128), form (b) (a pure read) and, at B=1, form (a)
 * (RoPE and the cache write fused); the 1B (hd 64), Gemma-2B (8/1 of 256) and Phi-3-mini
 * (32/32 of 96) layers at B=1 x 1024; head dims 96 and 256 at the work of 128 (B=4, cache
 * 4096, heads x hd = 4096); a 4k window over a 32k cache. splits 0: the codegen's shape
 * (cg_attention_decode_config). Then prefill S 2048 from position 0. */
static const tcase benches[] = {
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 1, 1, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 8192, 1, 0, 0, 0, 1, {8191}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 32768, 1, 0, 0, 0, 1, {32767}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 8, 1, 32, 8, 128, 1024, 1, 0, 0, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 8, 1, 32, 8, 128, 8192, 1, 0, 0, 0, 1, {8191}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 8, 1, 32, 8, 128, 32768, 1, 0, 0, 0, 1, {32767}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 0, 0, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 8192, 1, 0, 0, 0, 1, {8191}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 32768, 1, 0, 0, 0, 1, {32767}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 1, 1, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 1, 1, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 8, 1, 256, 1024, 1, 0, 0, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 32, 96, 1024, 1, 0, 0, 0, 1, {1023}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 1, 32, 8, 128, 4096, 1, 0, 0, 0, 1, {4095}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 1, 42, 6, 96, 4096, 1, 0, 0, 0, 1, {4095}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 4, 1, 16, 4, 256, 4096, 1, 0, 0, 0, 1, {4095}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 32768, 1, 0, 0, 0, 1, {32767}, 0, 4096, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 4096, 1, 0, 0, 0, 1, {4095}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 1, 2048, 32, 8, 128, 2048, 1, 0, 0, 0, 1, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 1, 2048, 32, 8, 128, 2048, 1, 1, 1, 0, 1, {0}, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0},
};
#define NBENCH ((int)(sizeof benches / sizeof benches[0]))

/* KILN_BENCH with KILN_DEC_SWEEP=1: decode shapes of the layers at B=1 x 1024 (and B=32 x
 * 1024, B=1 x 8192) under other kernel shapes (clusters, warps, ring stages, the shape
 * before clusters); "bench sweep" lines. Fields after softcap: cluster, warps, stages,
 * minkeys, threads; splits == cluster for a cluster. */
static const tcase sweeps[] = {
    /* B=1 x 1024, 8B: 32/8 x 128: clusters of 8 x 4 warps (the rule before), 8 x 8, 16 x 4, no cluster */
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 4, 3, 64, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 32, 1, {1023}, 0, 0, 0.0, 0, 2, 2, 0, 128, 0, 0},
    /* the partials pushed into the leader (KILN_DEC_PUSH 4): 8B and 1B at B=1 x 1024, clusters of
     * 8 x 8 warps (the rule) and 16 x 4, and B=1 x 8192 */
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 0},
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 4, 0},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 0},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 4, 0},
    {1, 1, 1, 1, 32, 8, 128, 8192, 1, 0, 0, 8, 1, {8191}, 0, 0, 0.0, 8, 8, 3, 128, 256, 4, 0},
    /* and with KILN_DEC_COLS */
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 1},
    {1, 1, 1, 1, 32, 8, 128, 1024, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 4, 1},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 4, 1},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 4, 1},
    {1, 1, 1, 1, 32, 8, 128, 8192, 1, 0, 0, 8, 1, {8191}, 0, 0, 0.0, 8, 8, 3, 128, 256, 4, 1},
    /* B=1 x 1024, 1B: 32/8 x 64: clusters of 8 x 4 warps (the rule before), 8 x 8, 16 x 4, no cluster */
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 4, 3, 64, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 8, 1, {1023}, 0, 0, 0.0, 8, 8, 2, 128, 256, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 16, 1, {1023}, 0, 0, 0.0, 16, 4, 2, 64, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 64, 1024, 1, 0, 0, 32, 1, {1023}, 0, 0, 0.0, 0, 2, 4, 0, 128, 0, 0},
    /* B=1 x 8192, 8B */
    {1, 1, 1, 1, 32, 8, 128, 8192, 1, 0, 0, 8, 1, {8191}, 0, 0, 0.0, 8, 4, 4, 64, 128, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 8192, 1, 0, 0, 8, 1, {8191}, 0, 0, 0.0, 8, 8, 3, 128, 256, 0, 0},
    {1, 1, 1, 1, 32, 8, 128, 8192, 1, 0, 0, 16, 1, {8191}, 0, 0, 0.0, 16, 4, 4, 64, 128, 0, 0},
    /* B=8 x 8192, 8B (no cluster; rings above 47 KB in dynamic shared memory) */
    {1, 1, 8, 1, 32, 8, 128, 8192, 1, 0, 0, 4, 1, {8191}, 0, 0, 0.0, 0, 2, 2, 0, 64, 0, 0},
    {1, 1, 8, 1, 32, 8, 128, 8192, 1, 0, 0, 4, 1, {8191}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 8, 1, 32, 8, 128, 8192, 1, 0, 0, 4, 1, {8191}, 0, 0, 0.0, 0, 4, 3, 0, 128, 0, 0},
    {1, 1, 8, 1, 32, 8, 128, 8192, 1, 0, 0, 8, 1, {8191}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 8, 1, 32, 8, 128, 8192, 1, 0, 0, 2, 1, {8191}, 0, 0, 0.0, 0, 4, 4, 0, 128, 0, 0},
    /* B=32 x 1024, 8B and 1B (no cluster; KILN_SPLITS 1: the split writes the output) */
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 0, 0, 2, 1, {1023}, 0, 0, 0.0, 0, 2, 2, 0, 64, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 0, 0, 1, 1, {1023}, 0, 0, 0.0, 0, 2, 2, 0, 64, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 0, 0, 1, 1, {1023}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 0, 0, 1, 1, {1023}, 0, 0, 0.0, 0, 4, 3, 0, 128, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 0, 0, 2, 1, {1023}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 32, 1, 32, 8, 128, 1024, 1, 0, 0, 2, 1, {1023}, 0, 0, 0.0, 0, 4, 3, 0, 128, 0, 0},
    {1, 1, 32, 1, 32, 8, 64, 1024, 1, 0, 0, 2, 1, {1023}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 32, 1, 32, 8, 64, 1024, 1, 0, 0, 1, 1, {1023}, 0, 0, 0.0, 0, 2, 4, 0, 64, 0, 0},
    {1, 1, 32, 1, 32, 8, 64, 1024, 1, 0, 0, 1, 1, {1023}, 0, 0, 0.0, 0, 4, 4, 0, 128, 0, 0},
    {1, 1, 32, 1, 32, 8, 64, 1024, 1, 0, 0, 1, 1, {1023}, 0, 0, 0.0, 0, 2, 6, 0, 64, 0, 0},
};
#define NSWEEP ((int)(sizeof sweeps / sizeof sweeps[0]))

int main(void)
{
    /* KILN_ATT_PRECOMPILE=1 with KILN_ATT_CUBINS=DIR: compile the run's kernels into DIR and stop
     * (no device needed; the shapes of the decode table for an H200's 132 SMs, 227 KB) */
    const int precompile = getenv("KILN_ATT_PRECOMPILE") && atoi(getenv("KILN_ATT_PRECOMPILE"));
    struct cudaDeviceProp prop;
    if (precompile) {
        memset(&prop, 0, sizeof prop);
        snprintf(prop.name, sizeof prop.name, "(precompile)");
        prop.multiProcessorCount = 132;
        prop.sharedMemPerBlockOptin = 232448;
    } else {
        if (gpu_sm90_or_skip()) return 77;
        CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    }
    const char *bench_env = getenv("KILN_BENCH");
    const int bench = bench_env ? atoi(bench_env) : 0; /* 2: the timings alone */
    const char *seed_env = getenv("KILN_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("device %s, %d SMs; seed %llu (KILN_SEED to repeat)\n", prop.name, prop.multiProcessorCount,
           (unsigned long long)seed);

    /* KILN_CASES=A-B: only cases A..B (the compute-sanitizer runs) */
    int first = 0, last = NCASES - 1;
    const char *only = getenv("KILN_CASES");
    if (only && sscanf(only, "%d-%d", &first, &last) != 2) first = last = atoi(only);
    static att_job jobs[256];
    int n = 0;
    if (bench != 2)
        for (int i = first; i <= last && i < NCASES; i++) n = add_cfg(jobs, n, case_cfg(&cases[i]));
    static tcase bench_rows[NBENCH];
    for (int i = 0; i < NBENCH; i++) {
        bench_rows[i] = benches[i];
        if (bench_rows[i].decode && bench_rows[i].splits == 0) { /* the codegen's shape */
            cg_att_decode_cfg d = cg_attention_decode_config(benches[i].B, benches[i].KV, benches[i].HD, benches[i].T,
                                                             (int64_t)benches[i].H / benches[i].KV * benches[i].S,
                                                             prop.multiProcessorCount, prop.sharedMemPerBlockOptin, true);
            bench_rows[i].splits = d.splits;
            bench_rows[i].cluster = d.cluster;
            bench_rows[i].warps = d.warps;
            bench_rows[i].stages = d.stages;
            bench_rows[i].minkeys = d.minkeys;
            bench_rows[i].threads = d.threads;
            bench_rows[i].push = d.push;
            bench_rows[i].cols = d.cols;
        }
    }
    /* KILN_DEC_SWEEP=2: the sweep without the decode table */
    const int sweep = bench && getenv("KILN_DEC_SWEEP") ? atoi(getenv("KILN_DEC_SWEEP")) : 0;
    if (bench && sweep != 2)
        for (int i = 0; i < NBENCH; i++) n = add_cfg(jobs, n, case_cfg(&bench_rows[i]));
    if (sweep)
        for (int i = 0; i < NSWEEP; i++) {
            n = add_cfg(jobs, n, case_cfg(&sweeps[i]));
            if (sweeps[i].cluster > 1 && !sweeps[i].append) {
                att_cfg t = case_cfg(&sweeps[i]);
                t.timing = 1;
                n = add_cfg(jobs, n, t);
            }
        }
    if (precompile) {
        att_compile_all(jobs, n, 0);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            bad += !jobs[i].ok;
            att_job_free(&jobs[i]);
        }
        printf("precompiled %d kernels, %d failed\n", n, bad);
        return bad ? 1 : 0;
    }
    int bad = build_kernels(jobs, n);
    CHECK_MSG(bad == 0, "%d kernels did not compile", bad);

    if (bench != 2)
        for (int i = first; i <= last && i < NCASES; i++) run_case(i, &cases[i]);
    if (bench && sweep != 2)
        for (int i = 0; i < NBENCH; i++) bench_one(&bench_rows[i], "decode");
    if (sweep)
        for (int i = 0; i < NSWEEP; i++) bench_one(&sweeps[i], "sweep");
    int clock_khz = 0;
    CUDA_OK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    if (sweep)
        for (int i = 0; i < NSWEEP; i++)
            if (sweeps[i].cluster > 1 && !sweeps[i].append) timing_one(&sweeps[i], clock_khz);
    for (int i = 0; i < nkerns; i++) cudaLibraryUnload(kerns[i].lib);
    return CHECK_DONE();
}
