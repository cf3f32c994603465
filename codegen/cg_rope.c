/* codegen/cg_rope.c — the RoPE frequencies of a scaled rope as source text.
 *
 * A rope with frequency scaling (linear, llama3, YaRN) rotates by the
 * frequencies of ir_rope_inv_freq, computed on the host in double. Kernels
 * do not recompute them: the table is written into the generated source with
 * %.17g, which reads back as the same doubles, so the elementwise/row
 * expression (cg_expr.c) and the attention templates' RoPE on load
 * (attention_common.cuh) rotate by exactly the interpreter's angles. A rope
 * without scaling keeps the templates' own theta^(-2i/HD) (the same formula).
 *
 * Partial rotary (ir_rope_attrs.rotary_dims = R < HD): both functions take
 * the head dim and read R from the attrs, so callers stay as they are: the
 * table has R/2 entries, the frequencies of a head of R, and the attention
 * source also says KILN_ROPE_DIMS R. The attention templates rotate whole
 * heads today, so fuse-attention keeps a partial rope out of them; a template
 * that honours KILN_ROPE_DIMS can take it.
 *
 * The attention templates' table is __constant__: each CTA copies it once
 * into shared memory, and compute-sanitizer initcheck reported every read of
 * the module-initialized __device__ table as uninitialized global memory. */
#include <stdarg.h>
#include <stdlib.h>

#include "codegen/cg.h"

static int put(char *buf, size_t n, int off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int put(char *buf, size_t n, int off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf && (size_t)off < n ? buf + off : NULL, buf && (size_t)off < n ? n - (size_t)off : 0,
                      fmt, ap);
    va_end(ap);
    return w < 0 ? off : off + w;
}

int cg_rope_table(char *buf, size_t n, const char *decl, const char *name, double theta, const ir_rope_attrs *r,
                  int64_t hd)
{
    hd = ir_rope_dims(r, hd); /* partial rotary: a table for a head of the rotary dims */
    int64_t half = hd / 2;
    double *inv = malloc((size_t)(half > 0 ? half : 1) * sizeof *inv);
    if (!inv) return -1;
    ir_rope_inv_freq(theta, r, hd, inv);
    int off = put(buf, n, 0, "%s double %s[%lld] = {", decl, name, (long long)half);
    for (int64_t i = 0; i < half; i++) off = put(buf, n, off, "%s%.17g", i ? ", " : "", inv[i]);
    off = put(buf, n, off, "};");
    free(inv);
    return off;
}

int cg_rope_turns_table(char *buf, size_t n, const char *decl, const char *name, double theta, const ir_rope_attrs *r,
                        int64_t hd)
{
    hd = ir_rope_dims(r, hd);
    int64_t half = hd / 2;
    double *inv = malloc((size_t)(half > 0 ? half : 1) * sizeof *inv);
    if (!inv) return -1;
    ir_rope_inv_freq(theta, r, hd, inv);
    int off = put(buf, n, 0, "%s float2 %s[%lld] = {", decl, name, (long long)half);
    for (int64_t i = 0; i < half; i++) {
        const double g = inv[i] / (2.0 * 3.14159265358979323846);
        const float hi = (float)g, lo = (float)(g - (double)hi);
        off = put(buf, n, off, "%s{%.9gf, %.9gf}", i ? ", " : "", hi, lo);
    }
    off = put(buf, n, off, "};");
    free(inv);
    return off;
}

int cg_attention_rope_source(char *buf, size_t n, double theta, const ir_rope_attrs *r, int64_t hd)
{
    int off = put(buf, n, 0, "/* RoPE scaling=%s: the frequencies computed on the host (ir_rope_inv_freq) */\n",
                  ir_rope_scaling_name(r->scaling));
    off = put(buf, n, off, "#define KILN_ROPE_TABLE 1\n#define KILN_ROPE_MSCALE ((float)%.17g)\n", ir_rope_mscale(r));
    if (r->rotary_dims > 0 && r->rotary_dims < hd) /* partial rotary: the table has KILN_ROPE_DIMS / 2 entries */
        off = put(buf, n, off, "#define KILN_ROPE_DIMS %lld\n", (long long)r->rotary_dims);
    int t = cg_rope_table(buf && (size_t)off < n ? buf + off : NULL, buf && (size_t)off < n ? n - (size_t)off : 0,
                          "__constant__", "kiln_rope_inv", theta, r, hd);
    if (t < 0) return -1;
    return put(buf, n, off + t, "\n");
}
