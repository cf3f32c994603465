/* src/cache_why.c — `kiln cache why MODEL.kiln`: for every kernel of the
 * model's large-shape variant (and the mma.sync fallback of a wgmma kernel),
 * as `kiln compile --emit=cubin` and the C API compile them for the target,
 * whether the kernel cache holds it and, when not, which input of the key
 * changed against the nearest entry of the same kernel (rt_cache_explain). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>

#include "src/compile.h"

static void explain_one(const cg_kernel *k, const char *label, rt_cache *cache, const rt_compile_opts *copts, FILE *out,
                        int *misses)
{
    rt_cache_explanation x;
    rt_status st = rt_cache_explain(cache, k->name, k->source, copts, &x);
    if (st != RT_OK) {
        fprintf(out, "%-5s %s: cannot tell (%s)\n", label, k->name, rt_status_str(st));
        (*misses)++;
        return;
    }
    if (x.hit) {
        fprintf(out, "%-5s %s: hit (%s/%s)\n", label, k->name, copts->arch ? copts->arch : RT_DEFAULT_ARCH, x.key);
        return;
    }
    (*misses)++;
    if (x.ndiff < 0) {
        fprintf(out, "%-5s %s: miss: no entry of this kernel in the cache (it was never compiled here, or was "
                     "evicted or cleared)\n", label, k->name);
        return;
    }
    char when[64];
    struct tm tm;
    localtime_r(&x.nearest_mtime, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    fprintf(out, "%-5s %s: miss: the nearest entry %s (used %s, %d of this kernel) differs in %s\n", label, k->name,
            x.nearest, when, x.same_kernel, x.ndiff ? x.diff : "nothing recorded (an entry under a key it cannot "
                                                               "have: delete it with `kiln cache verify`)");
}

rt_status kc_cache_why(const kc_unit *u, const cg_target *target, rt_cache *cache, const rt_compile_opts *copts,
                       FILE *out, int *misses, char *err, size_t n)
{
    *misses = 0;
    cg_options co = {.target = target};
    cg_kernel *ks;
    int nk;
    if (!kc_fused(u)) return rt_fail(RT_ERR_INTERNAL, err, n, "cache why: no fused graph");
    if (cg_emit_all_ex(kc_fused(u), &co, &ks, &nk, err, n) != 0) return RT_ERR_INTERNAL;
    for (int i = 0; i < nk; i++) {
        char label[32];
        snprintf(label, sizeof label, "k%d", ks[i].group);
        explain_one(&ks[i], label, cache, copts, out, misses);
        if (ks[i].fallback) {
            snprintf(label, sizeof label, "k%d'", ks[i].group);
            explain_one(ks[i].fallback, label, cache, copts, out, misses);
        }
    }
    cg_kernels_free(ks, nk);
    return RT_OK;
}
