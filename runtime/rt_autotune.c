/* runtime/rt_autotune.c — the tuner: stored choices (verified reads through
 * the kernel cache's entries), measuring candidates, export and import. The
 * format and the rules are in rt_autotune.h; the device timing is in
 * rt_autotune_gpu.c. */
#include "runtime/rt_autotune.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/rt_cublaslt.h"
#include "runtime/rt_model_internal.h"
#include "runtime/rt_util.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

struct rt_tuner {
    rt_ctx *ctx;
    rt_tune_hooks hooks;
    rt_tune_device dev;
    bool have_dev;
    char arch[48]; /* the cache directory of the entries: <arch>_tune */
    rt_tune_stats st;
};

/* The entries' directory for a context arch ("sm_90a" -> "sm_90a_tune"). */
static void tune_arch(const char *arch, char *out, size_t n) { snprintf(out, n, "%s_tune", arch ? arch : "sm_90a"); }

static void device_text(const rt_tune_device *d, char *out, size_t n)
{
    snprintf(out, n, "%s|sm_%d|%d SMs", d->name, d->cc, d->sms);
}

/* The key of (device, driver, Kiln version, problem). */
static rt_status tune_key(const char *arch, const char *devtext, int driver, const char *kiln, const char *problem,
                          rt_cache_key *out)
{
    const char *opts[1] = {devtext};
    rt_cache_key_inputs in = {.format_version = RT_TUNE_FORMAT,
                              .kiln_version = kiln,
                              .nvrtc_major = driver,
                              .nvrtc_minor = 0,
                              .arch = arch,
                              .options = opts,
                              .noptions = 1,
                              .source = problem};
    return rt_cache_key_make(&in, out);
}

rt_status rt_tuner_create(rt_ctx *ctx, const rt_tune_hooks *hooks, rt_tuner **out, char *err, size_t n)
{
    *out = NULL;
    rt_tuner *t = calloc(1, sizeof *t);
    if (!t) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    t->ctx = ctx;
    if (hooks) t->hooks = *hooks;
    if (hooks && hooks->device) {
        t->dev = *hooks->device;
        t->have_dev = true;
    } else {
        t->have_dev = ctx && rt_tune_device_of(ctx, &t->dev);
    }
    tune_arch(ctx ? rt_ctx_arch(ctx) : NULL, t->arch, sizeof t->arch);
    *out = t;
    return RT_OK;
}

void rt_tuner_free(rt_tuner *t) { free(t); }

bool rt_tuner_can_measure(const rt_tuner *t)
{
    return t && t->have_dev && (t->hooks.timer || (t->ctx && rt_ctx_has_device(t->ctx)));
}

void rt_tuner_stats(const rt_tuner *t, rt_tune_stats *out)
{
    if (t) *out = t->st;
    else memset(out, 0, sizeof *out);
}

static rt_cache *tuner_cache(const rt_tuner *t) { return t->ctx ? t->ctx->cache : NULL; }

static rt_status key_of(const rt_tuner *t, const char *problem, rt_cache_key *k)
{
    char dt[200];
    device_text(&t->dev, dt, sizeof dt);
    return tune_key(t->arch, dt, t->dev.driver, KILN_VERSION, problem, k);
}

/* "choice BM BN ST PP EC SPLIT\nus X\n..." or "choice cublasLt\nus X\n..." -> c
 * (its time in c->us, the other implementation's best candidate time in
 * c->other_us), us; false when it does not parse. */
static bool parse_payload(const unsigned char *data, size_t size, cg_wg_choice *c, double *us)
{
    char buf[2048];
    size_t len = size < sizeof buf - 1 ? size : sizeof buf - 1;
    memcpy(buf, data, len);
    buf[len] = 0;
    double t = 0;
    memset(c, 0, sizeof *c);
    if (sscanf(buf, "choice cublasLt\nus %lf", &t) == 1) {
        c->impl = CG_IMPL_CUBLASLT;
        c->bm = c->bn = c->stages = c->split = 1;
    } else {
        int got = sscanf(buf, "choice %d %d %d %d %d %d\nus %lf", &c->bm, &c->bn, &c->stages, &c->pp, &c->ec, &c->split,
                         &t);
        if (got != 7) return false;
    }
    if (c->bm <= 0 || c->bn <= 0 || c->stages <= 0 || c->split <= 0 || !(t > 0)) return false;
    c->us = t;
    /* the candidates' lines: the best time of the other implementation */
    for (const char *l = strstr(buf, "\ncand "); l; l = strstr(l + 1, "\ncand ")) {
        int q[6];
        double ct;
        bool lt = sscanf(l, "\ncand cublasLt %lf", &ct) == 1;
        if (!lt && sscanf(l, "\ncand %d %d %d %d %d %d %lf", &q[0], &q[1], &q[2], &q[3], &q[4], &q[5], &ct) != 7) continue;
        if (ct > 0 && lt != (c->impl == CG_IMPL_CUBLASLT) && (c->other_us <= 0 || ct < c->other_us)) c->other_us = ct;
    }
    if (us) *us = t;
    return true;
}

bool rt_tuner_lookup(rt_tuner *t, const char *problem, cg_wg_choice *out, double *us)
{
    rt_cache *c = t ? tuner_cache(t) : NULL;
    rt_cache_key k;
    if (!c || !t->have_dev || !problem || key_of(t, problem, &k) != RT_OK) return false;
    rt_blob b = {0};
    rt_cache_lookup r = rt_cache_get(c, k, t->arch, &b); /* a corrupt file is deleted there: a miss */
    bool ok = (r == RT_CACHE_HIT_MEMORY || r == RT_CACHE_HIT_DISK) && parse_payload(b.data, b.size, out, us);
    rt_blob_free(&b);
    /* a cuBLASLt choice on a device where the library does not load: measured again (without it) */
    if (ok && out->impl == CG_IMPL_CUBLASLT && !t->hooks.timer && !rt_cublaslt(NULL, 0)) ok = false;
    if (ok) t->st.hits++;
    return ok;
}

static char *manifest_of(const rt_tuner *t, const char *problem)
{
    char dt[200];
    device_text(&t->dev, dt, sizeof dt);
    json_t *m = json_pack("{s:s, s:s, s:s, s:i, s:s}", "kernel", "autotune choice", "kiln", KILN_VERSION, "device", dt,
                          "driver", t->dev.driver, "problem", problem);
    char *s = m ? json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(m);
    return s;
}

rt_status rt_tuner_measure(rt_tuner *t, const char *problem, const cg_kernel *cands, const cg_wg_choice *choice,
                           int ncands, const ir_graph *g, const int64_t *dims, int *best, char *err, size_t n)
{
    *best = -1;
    if (!rt_tuner_can_measure(t)) return RT_OK;
    double *us = calloc((size_t)ncands + 1, sizeof *us);
    if (!us) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    /* on a device, the candidates compile first, in parallel, into the context's cache (the
     * timer then finds them there); a failure here shows again, per candidate, in the timer */
    const char **names = calloc((size_t)ncands + 1, sizeof *names), **srcs = calloc((size_t)ncands + 1, sizeof *srcs);
    rt_compile_result *res = calloc((size_t)ncands + 1, sizeof *res);
    if (names && srcs && res && t->ctx && rt_ctx_has_device(t->ctx) && !t->ctx->no_cache) {
        int nsrc = 0;
        for (int i = 0; i < ncands; i++) {
            if (cands[i].lt.chosen) continue; /* cuBLASLt: nothing to compile */
            names[nsrc] = cands[i].name;
            srcs[nsrc++] = cands[i].source;
        }
        rt_compile_opts co = {.arch = t->ctx->arch};
        (void)rt_cache_compile_many(t->ctx->cache, nsrc, names, srcs, &co, 0, res, NULL, t->ctx->compile_threads, NULL,
                                    NULL);
        for (int i = 0; i < nsrc; i++) rt_compile_result_free(&res[i]);
    }
    free(names);
    free(srcs);
    free(res);
    for (int i = 0; i < ncands; i++) {
        char why[512] = "";
        us[i] = t->hooks.timer ? t->hooks.timer(t->hooks.timer_user, &cands[i], g, dims, why, sizeof why)
                               : rt_tuner_time_gpu(t->ctx, &cands[i], g, dims, why, sizeof why);
        t->st.timed++;
        if (!(us[i] > 0)) {
            us[i] = -1;
            t->st.skipped++;
            continue;
        }
        if (*best < 0 || us[i] < us[*best]) *best = i; /* ties: the earlier candidate */
    }
    /* the test hook (rt_lt_forced): cuBLASLt wins wherever it ran */
    for (int i = 0; i < ncands && rt_lt_forced(); i++)
        if (choice[i].impl == CG_IMPL_CUBLASLT && us[i] > 0) *best = i;
    t->st.measured++;
    rt_status st = RT_OK;
    rt_cache *c = tuner_cache(t);
    if (*best >= 0 && c) {
        /* the payload: the choice, its time, every candidate's */
        size_t cap = 128 + 96 * (size_t)ncands, len = 0;
        char *p = malloc(cap);
        char *man = manifest_of(t, problem);
        rt_cache_key k;
        if (!p || !man) st = rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
        else if ((st = key_of(t, problem, &k)) != RT_OK) rt_fail(st, err, n, "autotune: the key of '%s'", problem);
        if (st == RT_OK) {
            const cg_wg_choice *b = &choice[*best];
            if (b->impl == CG_IMPL_CUBLASLT)
                len += (size_t)snprintf(p + len, cap - len, "choice cublasLt\nus %.3f\n", us[*best]);
            else
                len += (size_t)snprintf(p + len, cap - len, "choice %d %d %d %d %d %d\nus %.3f\n", b->bm, b->bn,
                                        b->stages, b->pp, b->ec, b->split, us[*best]);
            for (int i = 0; i < ncands && len < cap; i++) {
                const cg_wg_choice *q = &choice[i];
                if (q->impl == CG_IMPL_CUBLASLT)
                    len += (size_t)snprintf(p + len, cap - len, "cand cublasLt %.3f\n", us[i]);
                else
                    len += (size_t)snprintf(p + len, cap - len, "cand %d %d %d %d %d %d %.3f\n", q->bm, q->bn,
                                            q->stages, q->pp, q->ec, q->split, us[i]);
            }
            rt_blob blob = {(unsigned char *)p, len < cap ? len : cap - 1};
            st = rt_cache_put_ex(c, k, t->arch, &blob, man);
            if (st != RT_OK) rt_fail(st, err, n, "autotune: storing the choice of '%s'", problem);
        }
        free(p);
        free(man);
    }
    free(us);
    return st;
}

/* ---- export and import --------------------------------------------------------------- */

typedef struct export_ctx {
    rt_cache *c;
    json_t *entries;
    rt_status st;
} export_ctx;

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The key an entry's fields give; false when a field is missing. */
static bool entry_key(const char *arch, json_t *m, rt_cache_key *k)
{
    const char *dev = jstr(m, "device"), *kiln = jstr(m, "kiln"), *prob = jstr(m, "problem");
    json_t *drv = json_object_get(m, "driver");
    return dev && kiln && prob && json_is_integer(drv) &&
           tune_key(arch, dev, (int)json_integer_value(drv), kiln, prob, k) == RT_OK;
}

static bool export_visit(void *user, const rt_cache_entry *e)
{
    export_ctx *x = user;
    const size_t al = strlen(e->arch);
    /* tuning entries only (<arch>_tune), and only those that check */
    if (al < 6 || strcmp(e->arch + al - 5, "_tune") || !e->manifest) return true;
    json_t *m = json_loads(e->manifest, 0, NULL);
    rt_cache_key k;
    char hex[33];
    if (!m || !entry_key(e->arch, m, &k)) {
        json_decref(m);
        return true;
    }
    rt_cache_key_hex(k, hex);
    rt_blob b = {0};
    rt_cache_lookup r = strcmp(hex, e->hex) ? RT_CACHE_MISS : rt_cache_get(x->c, k, e->arch, &b);
    if (r == RT_CACHE_HIT_DISK || r == RT_CACHE_HIT_MEMORY) {
        json_t *pl = json_stringn((const char *)b.data, b.size);
        json_t *o = json_pack("{s:s, s:O, s:O, s:O, s:O, s:o, s:s}", "arch", e->arch, "device",
                              json_object_get(m, "device"), "driver", json_object_get(m, "driver"), "kiln",
                              json_object_get(m, "kiln"), "problem", json_object_get(m, "problem"), "payload", pl,
                              "key", hex);
        if (!o || json_array_append_new(x->entries, o) != 0) x->st = RT_ERR_NOMEM;
    }
    rt_blob_free(&b);
    json_decref(m);
    return x->st == RT_OK;
}

static uint64_t entries_sum(json_t *entries)
{
    char *s = json_dumps(entries, JSON_COMPACT | JSON_SORT_KEYS);
    uint64_t h = s ? XXH3_64bits(s, strlen(s)) : 0;
    free(s);
    return h;
}

rt_status rt_tune_export(rt_cache *c, const char *path, int *count, char *err, size_t n)
{
    if (count) *count = 0;
    export_ctx x = {c, json_array(), RT_OK};
    if (!x.entries) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    rt_status st = rt_cache_disk_enabled(c) ? rt_cache_list(c, export_visit, &x) : RT_OK;
    if (st == RT_OK) st = x.st;
    if (st != RT_OK) {
        json_decref(x.entries);
        return rt_fail(st, err, n, "kiln tune export: reading the cache: %s", rt_status_str(st));
    }
    char sum[17];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)entries_sum(x.entries));
    const int ne = (int)json_array_size(x.entries);
    json_t *doc = json_pack("{s:i, s:o, s:s}", "kiln_tune", (int)RT_TUNE_FORMAT, "entries", x.entries, "checksum", sum);
    char *text = doc ? json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (!text) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    char werr[512];
    int w = rt_write_file(path, text, strlen(text), werr, sizeof werr);
    free(text);
    if (w != 0) return rt_fail(RT_ERR_IO, err, n, "kiln tune export: %s", werr);
    if (count) *count = ne;
    return RT_OK;
}

rt_status rt_tune_import(rt_cache *c, const char *path, int *count, int *rejected, char *err, size_t n)
{
    if (count) *count = 0;
    if (rejected) *rejected = 0;
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) return rt_fail(RT_ERR_IO, err, n, "kiln tune import: %s: %s", path, je.text);
    json_t *entries = json_object_get(doc, "entries");
    const char *sum = jstr(doc, "checksum");
    json_t *ver = json_object_get(doc, "kiln_tune");
    char want[17];
    if (json_is_array(entries)) snprintf(want, sizeof want, "%016llx", (unsigned long long)entries_sum(entries));
    if (!json_is_integer(ver) || json_integer_value(ver) != RT_TUNE_FORMAT || !json_is_array(entries) || !sum ||
        strcmp(sum, want)) {
        json_decref(doc);
        return rt_fail(RT_ERR_INVALID, err, n, "kiln tune import: %s is not a Kiln tuning file of format %u, or its "
                       "checksum does not match (damaged?)", path, RT_TUNE_FORMAT);
    }
    rt_status st = RT_OK;
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        rt_cache_key k;
        char hex[33];
        const char *key = jstr(e, "key"), *payload = jstr(e, "payload"), *ta = jstr(e, "arch");
        const size_t al = ta ? strlen(ta) : 0;
        cg_wg_choice ch;
        bool ok = key && payload && al > 5 && !strcmp(ta + al - 5, "_tune") && rt_nvrtc_arch_valid(ta) &&
                  entry_key(ta, e, &k);
        if (ok) {
            rt_cache_key_hex(k, hex);
            ok = !strcmp(hex, key) && parse_payload((const unsigned char *)payload, strlen(payload), &ch, NULL);
        }
        if (!ok) {
            if (rejected) (*rejected)++;
            continue;
        }
        json_t *m = json_pack("{s:s, s:O, s:O, s:O, s:O}", "kernel", "autotune choice", "kiln", json_object_get(e, "kiln"),
                              "device", json_object_get(e, "device"), "driver", json_object_get(e, "driver"), "problem",
                              json_object_get(e, "problem"));
        char *man = m ? json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(m);
        rt_blob b = {(unsigned char *)payload, strlen(payload)};
        st = man ? rt_cache_put_ex(c, k, ta, &b, man) : RT_ERR_NOMEM;
        free(man);
        if (st != RT_OK) break;
        if (count) (*count)++;
    }
    json_decref(doc);
    return st == RT_OK ? RT_OK : rt_fail(st, err, n, "kiln tune import: storing an entry: %s", rt_status_str(st));
}
