/* runtime/rt_cache_manifest.c — what made a cache entry's key, recorded in
 * the entry (rt_cache_file.c stores it between the header and the payload,
 * under the checksum) so that `kiln cache ls` can say what an entry is and
 * `kiln cache why` which input of the key changed since it was made.
 *
 * A manifest is one JSON object:
 *   {"kernel": "kiln_m_k1_matmul", "group": "group kind matmul, anchor ... (line 32); family ...",
 *    "format": 2, "kiln": "0.1.0", "nvrtc": "13.0", "arch": "sm_90a",
 *    "options": [the NVRTC options of the key, sorted],
 *    "source": {"bytes": N, "xxh3": "<32 hex>",
 *               "sections": [{"name": "codegen/kernels/common.cuh", "xxh3": "<16 hex>"}, ...]},
 *    "created": unix seconds}
 * The sections split the source where each embedded template begins (its
 * "// codegen/kernels/NAME" first line) and where the generated part begins
 * ("// group ..."), so a changed source is explained as the template or the
 * model lines that changed. Every key input is in it; the key itself is not
 * recomputed from it (the full source is not kept). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "runtime/rt_cache.h"
#include "runtime/rt_cache_internal.h"
#include "runtime/rt_util.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Appends the section [from, to) named name (its length bounded) to arr. */
static int add_section(json_t *arr, const char *name, size_t namelen, const char *from, const char *to)
{
    char nm[128], hex[17];
    snprintf(nm, sizeof nm, "%.*s", (int)(namelen < 120 ? namelen : 120), name);
    snprintf(hex, sizeof hex, "%016" PRIx64, XXH3_64bits(from, (size_t)(to - from)));
    return json_array_append_new(arr, json_pack("{s:s, s:s}", "name", nm, "xxh3", hex));
}

/* The sections of source and its "// group ..." line (into group). */
static json_t *sections(const char *source, char *group, size_t gn)
{
    json_t *arr = json_array();
    if (!arr) return NULL;
    const char *start = source, *name = "prologue";
    size_t namelen = strlen(name);
    group[0] = 0;
    for (const char *line = source; line && *line;) {
        const char *next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        bool tmpl = !strncmp(line, "// codegen/kernels/", 19), gen = !strncmp(line, "// group ", 9);
        if (tmpl || gen) {
            if (line > start && add_section(arr, name, namelen, start, line) != 0) goto fail;
            start = line;
            if (tmpl) {
                name = line + 3;
                namelen = strcspn(name, " \n");
            } else {
                name = "generated";
                namelen = 9;
                if (!group[0]) snprintf(group, gn, "%.*s", (int)strcspn(line + 3, "\n"), line + 3);
            }
        }
        line = next;
    }
    if (add_section(arr, name, namelen, start, source + strlen(source)) != 0) goto fail;
    return arr;
fail:
    json_decref(arr);
    return NULL;
}

char *rt_cache_manifest_make(const char *name, const char *source, const rt_compile_opts *opts)
{
    if (!source) return NULL;
    int n = rt_nvrtc_key_options(opts, RT_TARGET_CUBIN, NULL, 0);
    if (n < 0) return NULL;
    const char **argv = malloc(sizeof(char *) * ((size_t)n + 1));
    if (!argv) return NULL;
    rt_nvrtc_key_options(opts, RT_TARGET_CUBIN, argv, n);
    qsort(argv, (size_t)n, sizeof *argv, cmp_str);
    int maj = 0, min = 0;
    char nvrtc[32] = "unknown", group[512], hex[33];
    if (rt_nvrtc_version(&maj, &min) == RT_OK) snprintf(nvrtc, sizeof nvrtc, "%d.%d", maj, min);
    XXH128_hash_t h = XXH3_128bits(source, strlen(source));
    snprintf(hex, sizeof hex, "%016" PRIx64 "%016" PRIx64, h.high64, h.low64);
    json_t *opt = json_array(), *sec = sections(source, group, sizeof group);
    for (int i = 0; opt && i < n; i++)
        if (json_array_append_new(opt, json_string(argv[i])) != 0) {
            json_decref(opt);
            opt = NULL;
        }
    free(argv);
    char *out = NULL;
    if (opt && sec) {
        json_t *m = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:o, s:{s:I, s:s, s:o}, s:I}", "kernel",
                              name ? name : "", "group", group, "format", (int)RT_CACHE_FORMAT_VERSION, "kiln",
                              KILN_VERSION, "nvrtc", nvrtc, "arch", opts && opts->arch ? opts->arch : RT_DEFAULT_ARCH,
                              "options", opt, "source", "bytes", (json_int_t)strlen(source), "xxh3", hex,
                              "sections", sec, "created", (json_int_t)time(NULL));
        opt = sec = NULL; /* json_pack's "o" took them, even on failure */
        if (m) {
            char *text = json_dumps(m, JSON_COMPACT);
            if (text && strlen(text) <= RT_CACHE_MAX_MANIFEST) out = rt_strf("%s", text);
            free(text);
            json_decref(m);
        }
    }
    json_decref(opt);
    json_decref(sec);
    return out;
}

/* ---- explaining a difference -------------------------------------------------------- */

static const char *str_of(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "?";
}

/* Appends to out (bounded). */
static void add(char *out, size_t n, const char *fmt, const char *a, const char *b)
{
    size_t len = strlen(out);
    if (len + 1 < n) snprintf(out + len, n - len, fmt, a, b);
}

static bool in_array(json_t *arr, const char *s, const char *field)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        const char *t = field ? json_string_value(json_object_get(v, field)) : json_string_value(v);
        if (t && !strcmp(t, s)) return true;
    }
    return false;
}

/* The options one list has and the other lacks. */
static void diff_options(json_t *have, json_t *want, char *out, size_t n)
{
    size_t i;
    json_t *v;
    json_array_foreach(want, i, v) if (json_is_string(v) && !in_array(have, json_string_value(v), NULL))
        add(out, n, " +%s%s", json_string_value(v), "");
    json_array_foreach(have, i, v) if (json_is_string(v) && !in_array(want, json_string_value(v), NULL))
        add(out, n, " -%s%s", json_string_value(v), "");
}

/* The sections (by name) whose hash changed, appeared or went. */
static void diff_sections(json_t *have, json_t *want, char *out, size_t n)
{
    size_t i, j;
    json_t *v, *w;
    json_array_foreach(want, i, v) {
        const char *name = str_of(v, "name");
        bool found = false;
        const char *what = !strcmp(name, "generated") ? "the code generated from the model" : name;
        json_array_foreach(have, j, w) if (!strcmp(name, str_of(w, "name"))) {
            found = true;
            if (strcmp(str_of(v, "xxh3"), str_of(w, "xxh3"))) add(out, n, " %s changed%s", what, "");
        }
        if (!found) add(out, n, " %s added%s", what, "");
    }
    json_array_foreach(have, j, w) if (!in_array(want, str_of(w, "name"), "name"))
        add(out, n, " %s removed%s", str_of(w, "name"), "");
}

int rt_cache_manifest_diff(const char *have_text, const char *want_text, char *out, size_t n)
{
    if (n) out[0] = 0;
    json_t *have = have_text ? json_loads(have_text, 0, NULL) : NULL, *want = want_text ? json_loads(want_text, 0, NULL) : NULL;
    int diffs = -1;
    if (json_is_object(have) && json_is_object(want)) {
        diffs = 0;
        static const char *const scalar[][2] = {
            {"kiln", "Kiln version"}, {"nvrtc", "NVRTC version"}, {"arch", "arch"}};
        if (json_integer_value(json_object_get(have, "format")) != json_integer_value(json_object_get(want, "format"))) {
            add(out, n, "%scache format%s;", "", "");
            diffs++;
        }
        for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++)
            if (strcmp(str_of(have, scalar[i][0]), str_of(want, scalar[i][0]))) {
                add(out, n, "%s %s", scalar[i][1], str_of(have, scalar[i][0]));
                add(out, n, " -> %s%s;", str_of(want, scalar[i][0]), "");
                diffs++;
            }
        json_t *ho = json_object_get(have, "options"), *wo = json_object_get(want, "options");
        if (!json_equal(ho, wo)) {
            add(out, n, "%soptions%s", out[0] ? " " : "", "");
            diff_options(ho, wo, out, n);
            add(out, n, "%s%s;", "", "");
            diffs++;
        }
        json_t *hs = json_object_get(have, "source"), *ws = json_object_get(want, "source");
        if (strcmp(str_of(hs, "xxh3"), str_of(ws, "xxh3"))) {
            add(out, n, "%sthe source:%s", out[0] ? " " : "", "");
            diff_sections(json_object_get(hs, "sections"), json_object_get(ws, "sections"), out, n);
            add(out, n, "%s%s;", "", "");
            diffs++;
        }
        size_t len = strlen(out);
        if (len && out[len - 1] == ';') out[len - 1] = 0;
    }
    json_decref(have);
    json_decref(want);
    return diffs;
}

bool rt_cache_manifest_describe(const char *manifest, char *out, size_t n)
{
    if (n) out[0] = 0;
    json_t *m = manifest ? json_loads(manifest, 0, NULL) : NULL;
    if (!json_is_object(m)) {
        json_decref(m);
        return false;
    }
    const char *k = str_of(m, "kernel");
    add(out, n, "%s  Kiln %s", k[0] && strcmp(k, "?") ? k : "(no kernel name)", str_of(m, "kiln"));
    add(out, n, ", NVRTC %s, options%s", str_of(m, "nvrtc"), "");
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(m, "options"), i, o) if (json_is_string(o)) add(out, n, " %s%s", json_string_value(o), "");
    const char *g = str_of(m, "group");
    if (g[0] && strcmp(g, "?")) add(out, n, "\n             %s%s", g, "");
    json_decref(m);
    return true;
}
