/* tools/kiln_generate.c — `kiln generate MODEL.kiln --weights DIR ...`:
 * token generation through include/kiln.h (kiln_generate).
 *
 *   kiln generate MODEL.kiln --weights DIR|INDEX|FILE (--prompt-ids 1,2,3 | --batch-file F)
 *       [--max-new N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
 *       [--stop ID,ID...] [--prefill-chunk C] [--buckets 1,2,4,...] [--max-seq T]
 *       [--slots N] [--fused-head] [--packed] [-D NAME=VALUE]...
 *
 * The LM head is the model's own kernel, its logits sampled by the two-kernel
 * sampler; --fused-head runs the head in the sampler's one kernel instead
 * (head_sample: the logits never reach memory; slower today at every batch
 * size measured, see the README).
 *
 * --batch-file F: one prompt per line, token ids separated by commas or
 * blanks; blank lines and lines starting with '#' are skipped. Prints one
 * line of generated ids per prompt (stdout), then the timing on stderr.
 * --slots N: the KV caches hold N sequences (the model's max B; default: the
 * prompts, rounded up to a power of two, or the largest bucket): with more
 * prompts than slots, a finished sequence's slot takes the next prompt while
 * the others keep decoding (kiln_generate's serving loop).
 * --packed: the prompts that join together are prefilled in packed calls (the model
 * compiled packed too, kiln_generate_options.packed: all lengths in one call, no padding;
 * its weights are loaded a second time, its packed copies its own). */
#define _POSIX_C_SOURCE 200809L
#include "tools/kiln_generate.h"
#include "tools/kiln_run.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln.h"

enum { EX_OK = 0, EX_MODEL = 1, EX_USAGE = 64, EX_NOINPUT = 66, EX_UNAVAILABLE = 69, EX_SOFTWARE = 70 };

#define MAX_SEQS 1024
#define MAX_DEFINES 64

static const char usage[] =
    "usage: kiln generate MODEL.kiln --weights DIR (--prompt-ids 1,2,3 | --batch-file F)\n"
    "           [--max-new N] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "           [--stop ID,...] [--prefill-chunk C] [--buckets 1,2,4,...] [--max-seq T] [--slots N] [--fused-head] [--packed]\n"
    "           [-D NAME=V]\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln generate: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return EX_USAGE;
}

/* "1,2,3" or "1 2 3" -> ints; -1 on a bad entry. */
static int parse_ids(const char *s, int32_t **out, int *n)
{
    int cap = 16, k = 0;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    if (!v) return -1;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > 0x7fffffff) {
            free(v);
            return -1;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *nv);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *out = v;
    *n = k;
    return 0;
}

static bool num_arg(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !(x >= lo && x <= hi)) return false;
    *out = x;
    return true;
}

int kiln_generate_command(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL, *prompt = NULL, *batch_file = NULL;
    kiln_generate_options go = {.max_new = 64};
    int32_t *stops = NULL, *buckets32 = NULL;
    int nstops = 0, nb = 0;
    bool fused_head = false, packed = false;
    double max_seq = 0, slots = 0;
    kiln_define defs[MAX_DEFINES];
    int ndefs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
#define NEED_VALUE() do { if (!v) return usage_error("%s needs a value", a); i++; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return EX_OK;
        } else if (!strcmp(a, "--weights")) {
            NEED_VALUE();
            weights = v;
        } else if (!strcmp(a, "--prompt-ids")) {
            NEED_VALUE();
            prompt = v;
        } else if (!strcmp(a, "--batch-file")) {
            NEED_VALUE();
            batch_file = v;
        } else if (!strcmp(a, "--max-new")) {
            NEED_VALUE();
            if (!num_arg(v, 1, 1e7, &x) || x != (int)x) return usage_error("--max-new expects a positive integer, got '%s'", v);
            go.max_new = (int)x;
        } else if (!strcmp(a, "--temperature")) {
            NEED_VALUE();
            if (!num_arg(v, 0, 1e6, &x)) return usage_error("--temperature expects a number >= 0, got '%s'", v);
            go.sampling.temperature = (float)x;
        } else if (!strcmp(a, "--top-k")) {
            NEED_VALUE();
            if (!num_arg(v, 0, 1e9, &x) || x != (int)x) return usage_error("--top-k expects an integer >= 0, got '%s'", v);
            go.sampling.top_k = (int)x;
        } else if (!strcmp(a, "--top-p")) {
            NEED_VALUE();
            if (!num_arg(v, 0, 1, &x)) return usage_error("--top-p expects a number in [0, 1], got '%s'", v);
            go.sampling.top_p = (float)x;
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (!*v || *end || errno) return usage_error("--seed expects an unsigned integer, got '%s'", v);
            go.sampling.seed = s;
        } else if (!strcmp(a, "--stop")) {
            NEED_VALUE();
            free(stops);
            if (parse_ids(v, &stops, &nstops) != 0) return usage_error("--stop expects token ids, got '%s'", v);
        } else if (!strcmp(a, "--prefill-chunk")) {
            NEED_VALUE();
            if (!num_arg(v, 0, 1e9, &x) || x != (int)x) return usage_error("--prefill-chunk expects an integer, got '%s'", v);
            go.prefill_chunk = (int)x;
        } else if (!strcmp(a, "--buckets")) {
            NEED_VALUE();
            free(buckets32);
            if (parse_ids(v, &buckets32, &nb) != 0 || nb == 0) return usage_error("--buckets expects sizes, got '%s'", v);
        } else if (!strcmp(a, "--slots")) {
            NEED_VALUE();
            if (!num_arg(v, 1, 1 << 20, &slots) || slots != (int)slots)
                return usage_error("--slots expects a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--fused-head")) {
            fused_head = true;
        } else if (!strcmp(a, "--packed")) {
            packed = true;
        } else if (!strcmp(a, "--max-seq")) {
            NEED_VALUE();
            if (!num_arg(v, 1, 1e9, &max_seq) || max_seq != (int)max_seq)
                return usage_error("--max-seq expects a positive integer, got '%s'", v);
        } else if (!strcmp(a, "-D")) {
            NEED_VALUE();
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || ndefs == MAX_DEFINES) return usage_error("-D expects NAME=VALUE, got '%s'", v);
            char *name = strndup(v, (size_t)(eq - v));
            defs[ndefs++] = (kiln_define){name, eq + 1};
        } else if (a[0] == '-') {
            return usage_error("unknown option '%s'", a);
        } else if (!model) {
            model = a;
        } else {
            return usage_error("more than one model file ('%s')", a);
        }
#undef NEED_VALUE
    }
    if (!model) return usage_error("no model file%s", "");
    if (!weights) return usage_error("--weights is required%s", "");
    if (!prompt == !batch_file) return usage_error("give one of --prompt-ids and --batch-file%s", "");

    /* prompts */
    int32_t *pv[MAX_SEQS];
    int plen[MAX_SEQS], nseq = 0, early_rc = 0; /* early_rc: a bad batch file (what was read is freed at done) */
    if (prompt) {
        if (parse_ids(prompt, &pv[0], &plen[0]) != 0 || plen[0] == 0)
            return usage_error("--prompt-ids expects token ids, got '%s'", prompt);
        nseq = 1;
    } else {
        FILE *f = fopen(batch_file, "r");
        if (!f) {
            fprintf(stderr, "kiln generate: %s: %s\n", batch_file, strerror(errno));
            return EX_NOINPUT;
        }
        char *line = NULL;
        size_t cap = 0;
        int lineno = 0;
        while (getline(&line, &cap, f) >= 0) {
            lineno++;
            const char *p = line;
            while (*p == ' ' || *p == '\t') p++;
            if (*p == '#' || *p == '\n' || *p == '\r' || !*p) continue;
            if (nseq == MAX_SEQS) {
                fprintf(stderr, "kiln generate: %s: more than %d prompts\n", batch_file, MAX_SEQS);
                early_rc = EX_USAGE;
                break;
            }
            if (parse_ids(p, &pv[nseq], &plen[nseq]) != 0) {
                fprintf(stderr, "kiln generate: %s:%d: not a list of token ids\n", batch_file, lineno);
                early_rc = EX_USAGE;
                break;
            }
            nseq++;
        }
        free(line);
        fclose(f);
        if (!early_rc && !nseq) {
            fprintf(stderr, "kiln generate: %s: no prompts\n", batch_file);
            early_rc = EX_USAGE;
        }
    }
    kiln_context *ctx = NULL;
    kiln_model *m = NULL, *pm = NULL;
    int rc = early_rc;
    int32_t *out = NULL;
    int *out_len = NULL;
    if (rc) goto done;
    int lmax = 0;
    for (int b = 0; b < nseq; b++) lmax = plen[b] > lmax ? plen[b] : lmax;
    int bmax = nseq;
    if (nb) {
        go.buckets = (const int *)buckets32;
        go.nbuckets = nb;
        for (int i = 0; i < nb; i++) bmax = buckets32[i] > bmax ? buckets32[i] : bmax;
    } else {
        int p2 = 1;
        while (p2 < nseq) p2 *= 2;
        bmax = p2;
    }
    if (slots > 0) bmax = (int)slots; /* the caches' slots: more prompts wait for a free one */
    go.max_live = bmax;
    go.stop_ids = stops;
    go.nstop = nstops;

    kiln_status st = kiln_context_create(&ctx, NULL);
    if (st != KILN_OK) {
        fprintf(stderr, "kiln generate: %s\n", kiln_last_error());
        rc = st == KILN_ERR_NO_DEVICE ? EX_UNAVAILABLE : EX_SOFTWARE;
        goto done;
    }
    int64_t tmax = max_seq > 0 ? (int64_t)max_seq : lmax + go.max_new;
    int64_t smax = go.prefill_chunk > 0 && go.prefill_chunk < lmax ? go.prefill_chunk : lmax;
    kiln_dim maxd[] = {{"B", bmax}, {"S", smax}, {"T", tmax}};
    kiln_model_options mo = {.defines = defs, .ndefines = ndefs, .max_dims = maxd, .nmax_dims = 3, .lazy = 1,
                             .progress = isatty(2) ? kiln_tool_progress : NULL, .head_sample = fused_head};
    st = kiln_model_compile_file(ctx, model, &mo, &m);
    if (st != KILN_OK) {
        fprintf(stderr, "%s\n", kiln_last_error());
        rc = st == KILN_ERR_MODEL ? EX_MODEL : st == KILN_ERR_IO ? EX_NOINPUT : EX_SOFTWARE;
        goto done;
    }
    if ((st = kiln_model_load_checkpoint(m, weights, 0)) != KILN_OK || (st = kiln_model_alloc_states(m)) != KILN_OK) {
        fprintf(stderr, "kiln generate: %s\n", kiln_last_error());
        rc = st == KILN_ERR_IO ? EX_NOINPUT : EX_SOFTWARE;
        goto done;
    }
    if (packed) { /* a packed call holds a chunk of each joining prompt: at most bmax of them */
        int64_t sum = 0;
        for (int b = 0; b < nseq; b++) sum += plen[b];
        kiln_dim maxk[] = {{"B", bmax}, {"S", sum < bmax * smax ? sum : bmax * smax}, {"T", tmax}};
        kiln_model_options mk = mo;
        mk.max_dims = maxk;
        mk.packed = 1;
        if ((st = kiln_model_compile_file(ctx, model, &mk, &pm)) != KILN_OK || (st = kiln_model_load_checkpoint(pm, weights, 0)) != KILN_OK) {
            fprintf(stderr, "kiln generate: --packed: %s\n", kiln_last_error());
            rc = st == KILN_ERR_MODEL ? EX_MODEL : st == KILN_ERR_IO ? EX_NOINPUT : EX_SOFTWARE;
            goto done;
        }
        go.packed = pm;
    }
    out = calloc((size_t)nseq * (size_t)go.max_new, sizeof *out);
    out_len = calloc((size_t)nseq, sizeof *out_len);
    if (!out || !out_len) {
        rc = EX_SOFTWARE;
        goto done;
    }
    kiln_generate_stats gs;
    st = kiln_generate(m, nseq, (const int32_t *const *)pv, plen, &go, out, out_len, &gs);
    if (st != KILN_OK) {
        fprintf(stderr, "kiln generate: %s\n", kiln_last_error());
        rc = st == KILN_ERR_INVALID_ARGUMENT ? EX_USAGE : EX_SOFTWARE;
        goto done;
    }
    for (int b = 0; b < nseq; b++) {
        for (int j = 0; j < out_len[b]; j++) printf("%s%d", j ? "," : "", out[(size_t)b * (size_t)go.max_new + j]);
        printf("\n");
    }
    fprintf(stderr,
            "generated %lld tokens for %d sequence%s (batch %d%s): time to first token %.2f ms, decode %.1f tokens/s "
            "(%d steps in %.2f ms)\n",
            (long long)gs.new_tokens, nseq, nseq == 1 ? "" : "s", gs.batch, gs.bucket_miss ? ", outside the buckets" : "",
            gs.ttft_ms, gs.tokens_per_s, gs.decode_steps, gs.decode_ms);
done:
    free(out);
    free(out_len);
    kiln_model_free(pm); /* it runs on m's caches: first */
    kiln_model_free(m);
    kiln_context_free(ctx);
    for (int b = 0; b < nseq; b++) free(pv[b]);
    for (int i = 0; i < ndefs; i++) free((char *)defs[i].name);
    free(stops);
    free(buckets32);
    return rc;
}
