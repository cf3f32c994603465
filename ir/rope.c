/* ir/rope.c — RoPE frequencies with the scalings of Hugging Face configs.
 *
 * Every consumer of a ROPE node's frequencies (the interpreter, the
 * elementwise/row code generator, the attention templates' RoPE on load) takes
 * them from ir_rope_inv_freq, computed once on the host in double, so a kernel
 * rotates by exactly the interpreter's angles. The formulas, for pair i of a
 * head of HD elements, f_i = theta^(-2i/HD) and wavelength w_i = 2 pi / f_i:
 *
 *   linear:  f_i / factor.
 *   llama3:  (Llama-3.1 / 3.2 `rope_scaling`; L = original_max_pos)
 *            w_i < L / high_freq_factor:  f_i            (high frequencies kept)
 *            w_i > L / low_freq_factor:   f_i / factor   (low frequencies scaled)
 *            otherwise, with s = (L / w_i - low_freq_factor) / (high_freq_factor - low_freq_factor):
 *                                         (1 - s) f_i / factor + s f_i
 *   yarn:    with d(r) = HD ln(L / (2 pi r)) / (2 ln theta), lo = max(floor(d(beta_fast)), 0),
 *            hi = min(ceil(d(beta_slow)), HD - 1) (no rounding with no_truncate; hi += 0.001
 *            when lo == hi), ramp_i = clamp((i - lo) / (hi - lo), 0, 1):
 *            f_i / factor * ramp_i + f_i * (1 - ramp_i); cos and sin times mscale.
 *
 * Partial rotary (rotary_dims = R): the pairs are (i, i + R/2) for i < R/2
 * and HD above is R (callers pass ir_rope_dims as hd); the rest of the head
 * passes through. */
#include <math.h>
#include <string.h>

#include "ir/ir.h"

#define KILN_PI 3.14159265358979323846

static const char *const scaling_names[] = {"none", "linear", "llama3", "yarn"};

const char *ir_rope_scaling_name(ir_rope_scaling s)
{
    return (int)s >= 0 && (int)s < 4 ? scaling_names[s] : NULL;
}

bool ir_rope_scaling_parse(const char *name, ir_rope_scaling *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, scaling_names[i]) == 0) {
            *out = (ir_rope_scaling)i;
            return true;
        }
    return false;
}

static bool pos_finite(double v) { return v > 0 && isfinite(v); }

int64_t ir_rope_dims(const ir_rope_attrs *r, int64_t hd) { return r && r->rotary_dims > 0 ? r->rotary_dims : hd; }

const char *ir_rope_check(const ir_rope_attrs *r)
{
    if (r->rotary_dims < 0 || r->rotary_dims % 2) return "dims (the rotary dims) must be a positive even number";
    switch (r->scaling) {
    case IR_ROPE_NONE: return NULL;
    case IR_ROPE_LINEAR: return pos_finite(r->factor) ? NULL : "factor must be positive";
    case IR_ROPE_LLAMA3:
        if (!pos_finite(r->factor)) return "factor must be positive";
        if (!pos_finite(r->original_max_pos)) return "original_max_pos must be positive";
        if (!pos_finite(r->low_freq_factor) || !pos_finite(r->high_freq_factor))
            return "low_freq_factor and high_freq_factor must be positive";
        if (!(r->high_freq_factor > r->low_freq_factor)) return "high_freq_factor must exceed low_freq_factor";
        return NULL;
    case IR_ROPE_YARN:
        if (!pos_finite(r->factor)) return "factor must be positive";
        if (!pos_finite(r->original_max_pos)) return "original_max_pos must be positive";
        if (!pos_finite(r->beta_fast) || !pos_finite(r->beta_slow)) return "beta_fast and beta_slow must be positive";
        if (!pos_finite(r->mscale)) return "the attention factor (mscale) must be positive";
        return NULL;
    }
    return "unknown scaling";
}

bool ir_rope_attrs_eq(const ir_rope_attrs *a, const ir_rope_attrs *b)
{
    return a->scaling == b->scaling && a->factor == b->factor && a->low_freq_factor == b->low_freq_factor &&
           a->high_freq_factor == b->high_freq_factor && a->original_max_pos == b->original_max_pos &&
           a->beta_fast == b->beta_fast && a->beta_slow == b->beta_slow && a->no_truncate == b->no_truncate &&
           a->mscale == b->mscale && a->rotary_dims == b->rotary_dims;
}

double ir_rope_mscale(const ir_rope_attrs *r)
{
    return r && r->scaling == IR_ROPE_YARN ? r->mscale : 1.0;
}

double ir_rope_yarn_mscale(double factor, double mscale)
{
    return factor <= 1 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

/* YaRN's d(r): the pair index whose wavelength fits r rotations in L. */
static double yarn_dim(double rotations, double hd, double theta, double L)
{
    return hd * log(L / (rotations * 2.0 * KILN_PI)) / (2.0 * log(theta));
}

void ir_rope_inv_freq(double theta, const ir_rope_attrs *r, int64_t hd, double *inv)
{
    int64_t half = hd / 2;
    for (int64_t i = 0; i < half; i++) inv[i] = pow(theta, -2.0 * (double)i / (double)hd);
    if (!r) return;
    switch (r->scaling) {
    case IR_ROPE_NONE: return;
    case IR_ROPE_LINEAR:
        for (int64_t i = 0; i < half; i++) inv[i] /= r->factor;
        return;
    case IR_ROPE_LLAMA3: {
        double L = r->original_max_pos, lo = r->low_freq_factor, hi = r->high_freq_factor;
        for (int64_t i = 0; i < half; i++) {
            double w = 2.0 * KILN_PI / inv[i];
            if (w < L / hi) continue;
            if (w > L / lo) {
                inv[i] /= r->factor;
                continue;
            }
            double s = (L / w - lo) / (hi - lo);
            inv[i] = (1.0 - s) * inv[i] / r->factor + s * inv[i];
        }
        return;
    }
    case IR_ROPE_YARN: {
        double lo = yarn_dim(r->beta_fast, (double)hd, theta, r->original_max_pos);
        double hi = yarn_dim(r->beta_slow, (double)hd, theta, r->original_max_pos);
        if (!r->no_truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        if (lo < 0) lo = 0;
        if (hi > (double)(hd - 1)) hi = (double)(hd - 1);
        if (lo == hi) hi += 0.001;
        for (int64_t i = 0; i < half; i++) {
            double ramp = ((double)i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            inv[i] = inv[i] / r->factor * ramp + inv[i] * (1.0 - ramp);
        }
        return;
    }
    }
}
