/* bf16/f16 storage bits <-> float (ir_f32_to_bf16_bits and friends, ir/types.c)
 * against ir_round_bf16 / ir_round_f16: every bit pattern of both formats,
 * every tie between two neighbours (and one float ulp either side of it), a
 * sweep over the float bit patterns, and the edges (zeros, infinities, NaN,
 * overflow, f16 subnormals). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "ir/ir.h"

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float ffrom(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

typedef struct fmt {
    const char *name;
    uint16_t (*enc)(float);
    float (*dec)(uint16_t);
    float (*round)(float);
    uint16_t exp_mask; /* all-ones exponent: inf / NaN */
} fmt;

static bool is_nan_bits(const fmt *f, uint16_t h)
{
    return (h & f->exp_mask) == f->exp_mask && (h & (uint16_t)(~f->exp_mask & 0x7fffu)) != 0;
}

static bool is_inf_bits(const fmt *f, uint16_t h) { return (h & 0x7fffu) == f->exp_mask; }

static void check_format(const fmt *f)
{
    /* every bit pattern: decode then encode is the identity (NaN stays NaN),
     * and every finite decoded value is already rounded */
    int bad_id = 0, bad_nan = 0, bad_rounded = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = f->dec((uint16_t)h);
        if (is_nan_bits(f, (uint16_t)h)) {
            if (!isnan(v) || !is_nan_bits(f, f->enc(v))) bad_nan++;
            continue;
        }
        if (f->enc(v) != h) bad_id++;
        if (fbits(f->round(v)) != fbits(v)) bad_rounded++;
    }
    CHECK_MSG(bad_id == 0, "%s: %d patterns do not survive decode+encode", f->name, bad_id);
    CHECK_MSG(bad_nan == 0, "%s: %d NaN patterns do not stay NaN", f->name, bad_nan);
    CHECK_MSG(bad_rounded == 0, "%s: %d decoded values change under rounding", f->name, bad_rounded);

    /* ties between neighbours h and h+1 (same sign, both finite) go to the
     * even one; one float ulp off the tie goes to the nearer one */
    int bad_tie = 0, bad_near = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t a = (uint16_t)h, b = (uint16_t)(h + 1);
        if ((a & 0x7fffu) == 0x7fffu || is_nan_bits(f, a) || is_inf_bits(f, a) || is_inf_bits(f, b) ||
            is_nan_bits(f, b))
            continue;
        double va = f->dec(a), vb = f->dec(b);
        float mid = (float)((va + vb) / 2); /* exact: one more bit than the format */
        uint16_t even = (a & 1) ? b : a;
        if (f->enc(mid) != even || fbits(f->dec(f->enc(mid))) != fbits(f->round(mid))) bad_tie++;
        float toward_a = nextafterf(mid, (float)va), toward_b = nextafterf(mid, (float)vb);
        if (f->enc(toward_a) != a || f->enc(toward_b) != b) bad_near++;
        if (fbits(f->dec(f->enc(toward_a))) != fbits(f->round(toward_a)) ||
            fbits(f->dec(f->enc(toward_b))) != fbits(f->round(toward_b)))
            bad_near++;
    }
    CHECK_MSG(bad_tie == 0, "%s: %d ties not rounded to even", f->name, bad_tie);
    CHECK_MSG(bad_near == 0, "%s: %d values next to a tie rounded the wrong way", f->name, bad_near);

    /* a sweep over all float bit patterns (odd stride: every exponent, many
     * low-bit patterns): encode then decode equals ir_round_*, bit for bit */
    int bad_sweep = 0, bad_sweep_nan = 0;
    uint32_t first_bad = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 257) {
        float x = ffrom((uint32_t)u);
        uint16_t h = f->enc(x);
        if (isnan(x)) {
            if (!is_nan_bits(f, h) || !isnan(f->dec(h))) bad_sweep_nan++;
        } else if (fbits(f->dec(h)) != fbits(f->round(x))) {
            if (!bad_sweep++) first_bad = (uint32_t)u;
        }
    }
    CHECK_MSG(bad_sweep == 0, "%s: %d swept values differ from rounding (first 0x%08x)", f->name, bad_sweep,
              first_bad);
    CHECK_MSG(bad_sweep_nan == 0, "%s: %d NaNs not encoded as NaN", f->name, bad_sweep_nan);
}

int main(void)
{
    const fmt bf16 = {"bf16", ir_f32_to_bf16_bits, ir_bf16_bits_to_f32, ir_round_bf16, 0x7f80};
    const fmt f16 = {"f16", ir_f32_to_f16_bits, ir_f16_bits_to_f32, ir_round_f16, 0x7c00};
    check_format(&bf16);
    check_format(&f16);

    /* bf16 edges */
    CHECK(ir_f32_to_bf16_bits(1.0f) == 0x3f80 && ir_f32_to_bf16_bits(-2.0f) == 0xc000);
    CHECK(ir_f32_to_bf16_bits(0.0f) == 0x0000 && ir_f32_to_bf16_bits(-0.0f) == 0x8000);
    CHECK(ir_f32_to_bf16_bits(INFINITY) == 0x7f80 && ir_f32_to_bf16_bits(-INFINITY) == 0xff80);
    CHECK(ir_f32_to_bf16_bits(FLT_MAX) == 0x7f80);                /* overflows to inf */
    CHECK(ir_f32_to_bf16_bits(ffrom(0x7f7f8000u)) == 0x7f80);     /* tie above the largest: even = inf */
    CHECK(ir_f32_to_bf16_bits(ffrom(0x7f7f7fffu)) == 0x7f7f);
    CHECK(ir_f32_to_bf16_bits(ffrom(0x00008000u)) == 0x0000);     /* float subnormals: ties to even */
    CHECK(ir_f32_to_bf16_bits(ffrom(0x00018000u)) == 0x0002);
    CHECK(ir_f32_to_bf16_bits(ffrom(0x00008001u)) == 0x0001);
    CHECK(ir_f32_to_bf16_bits(NAN) == 0x7fc0);
    CHECK(ir_f32_to_bf16_bits(ffrom(0x7f800001u)) == 0x7fc0);     /* signalling NaN: quieted, not inf */
    CHECK(ir_f32_to_bf16_bits(ffrom(0xffc00000u)) == 0xffc0);     /* sign kept */
    CHECK(ir_bf16_bits_to_f32(0x3f80) == 1.0f && ir_bf16_bits_to_f32(0xff80) == -INFINITY);
    CHECK(isnan(ir_bf16_bits_to_f32(0x7fc0)) && isnan(ir_bf16_bits_to_f32(0xffff)));
    CHECK(fbits(ir_bf16_bits_to_f32(0x8000)) == 0x80000000u);

    /* f16 edges */
    CHECK(ir_f32_to_f16_bits(1.0f) == 0x3c00 && ir_f32_to_f16_bits(-2.0f) == 0xc000);
    CHECK(ir_f32_to_f16_bits(0.0f) == 0x0000 && ir_f32_to_f16_bits(-0.0f) == 0x8000);
    CHECK(ir_f32_to_f16_bits(65504.0f) == 0x7bff && ir_f32_to_f16_bits(65519.99f) == 0x7bff);
    CHECK(ir_f32_to_f16_bits(65520.0f) == 0x7c00 && ir_f32_to_f16_bits(-1e6f) == 0xfc00);
    CHECK(ir_f32_to_f16_bits(INFINITY) == 0x7c00 && ir_f32_to_f16_bits(-INFINITY) == 0xfc00);
    CHECK(ir_f32_to_f16_bits(ldexpf(1.0f, -14)) == 0x0400);       /* smallest normal */
    CHECK(ir_f32_to_f16_bits(ldexpf(1.0f, -24)) == 0x0001);       /* smallest subnormal */
    CHECK(ir_f32_to_f16_bits(ldexpf(1.0f, -25)) == 0x0000);       /* tie with 0: even */
    CHECK(ir_f32_to_f16_bits(nextafterf(ldexpf(1.0f, -25), 1.0f)) == 0x0001);
    CHECK(ir_f32_to_f16_bits(ldexpf(3.0f, -25)) == 0x0002);       /* tie 1|2: even */
    CHECK(ir_f32_to_f16_bits(ldexpf(-1023.5f, -24)) == 0x8400); /* tie 0x3ff|0x400: even */
    CHECK(ir_f32_to_f16_bits(1e-10f) == 0x0000 && ir_f32_to_f16_bits(-1e-10f) == 0x8000);
    CHECK(ir_f32_to_f16_bits(FLT_MIN / 4) == 0x0000);             /* float subnormal input */
    CHECK(ir_f32_to_f16_bits(NAN) == 0x7e00 && ir_f32_to_f16_bits(-NAN) == 0x7e00);
    CHECK(ir_f16_bits_to_f32(0x3c00) == 1.0f && ir_f16_bits_to_f32(0x7bff) == 65504.0f);
    CHECK(ir_f16_bits_to_f32(0x0001) == ldexpf(1.0f, -24) && ir_f16_bits_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    CHECK(ir_f16_bits_to_f32(0xfc00) == -INFINITY && isnan(ir_f16_bits_to_f32(0x7e00)));
    CHECK(isnan(ir_f16_bits_to_f32(0xfc01)) && fbits(ir_f16_bits_to_f32(0x8000)) == 0x80000000u);
    return CHECK_DONE();
}
