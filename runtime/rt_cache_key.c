/* runtime/rt_cache_key.c — the kernel cache key (rt_cache.h): XXH3-128 over
 * the cache format version, the Kiln version, the NVRTC version, the arch,
 * the options sorted and the full source, each field length-prefixed; and
 * the entry file name the key gives ("<32 hex digits>.cubin", hi then lo). */
#define _POSIX_C_SOURCE 200809L
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include "runtime/rt_cache.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/rt_cache_internal.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

/* Length-prefixed, so ("ab","c") and ("a","bc") differ. */
static void feed(XXH3_state_t *s, const void *p, size_t n)
{
    unsigned char len[8];
    put_le64(len, n);
    XXH3_128bits_update(s, len, sizeof len);
    if (n) XXH3_128bits_update(s, p, n);
}
static void feed_str(XXH3_state_t *s, const char *str) { feed(s, str, strlen(str)); }
static void feed_u32(XXH3_state_t *s, uint32_t v)
{
    unsigned char b[4];
    put_le32(b, v);
    feed(s, b, 4);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

rt_status rt_cache_key_make(const rt_cache_key_inputs *in, rt_cache_key *out)
{
    if (!in || !out || !in->kiln_version || !in->arch || !in->source || in->noptions < 0 ||
        (in->noptions > 0 && !in->options))
        return RT_ERR_INVALID;
    for (int i = 0; i < in->noptions; i++)
        if (!in->options[i]) return RT_ERR_INVALID;
    const char **sorted = malloc(sizeof(char *) * ((size_t)in->noptions + 1));
    if (!sorted) return RT_ERR_NOMEM;
    for (int i = 0; i < in->noptions; i++) sorted[i] = in->options[i];
    qsort(sorted, (size_t)in->noptions, sizeof *sorted, cmp_str);

    XXH3_state_t s;
    XXH3_INITSTATE(&s);
    if (XXH3_128bits_reset(&s) != XXH_OK) {
        free(sorted);
        return RT_ERR_INVALID;
    }
    feed_str(&s, "kiln-kernel-cache");
    feed_u32(&s, in->format_version);
    feed_str(&s, in->kiln_version);
    feed_u32(&s, (uint32_t)in->nvrtc_major);
    feed_u32(&s, (uint32_t)in->nvrtc_minor);
    feed_str(&s, in->arch);
    feed_u32(&s, (uint32_t)in->noptions);
    for (int i = 0; i < in->noptions; i++) feed_str(&s, sorted[i]);
    feed_str(&s, in->source);
    XXH128_hash_t h = XXH3_128bits_digest(&s);
    free(sorted);
    out->hi = h.high64;
    out->lo = h.low64;
    return RT_OK;
}

rt_status rt_cache_key_for(const char *source, const rt_compile_opts *opts, rt_cache_key *out)
{
    if (!source || !out) return RT_ERR_INVALID;
    int n = rt_nvrtc_key_options(opts, RT_TARGET_CUBIN, NULL, 0);
    if (n < 0) return RT_ERR_INVALID;
    const char **argv = malloc(sizeof(char *) * ((size_t)n + 1));
    if (!argv) return RT_ERR_NOMEM;
    rt_nvrtc_key_options(opts, RT_TARGET_CUBIN, argv, n);
    rt_cache_key_inputs in = {.format_version = RT_CACHE_FORMAT_VERSION,
                              .kiln_version = KILN_VERSION,
                              .arch = opts && opts->arch ? opts->arch : RT_DEFAULT_ARCH,
                              .options = argv,
                              .noptions = n,
                              .source = source};
    rt_status st = rt_nvrtc_version(&in.nvrtc_major, &in.nvrtc_minor);
    if (st == RT_OK) st = rt_cache_key_make(&in, out);
    free(argv);
    return st;
}

void rt_cache_key_hex(rt_cache_key k, char out[33])
{
    snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, k.hi, k.lo);
}

bool rt_cache_key_equal(rt_cache_key a, rt_cache_key b) { return a.hi == b.hi && a.lo == b.lo; }

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* "<32 lowercase hex>.cubin" -> key. */
bool rt_cache_key_from_name(const char *name, rt_cache_key *k)
{
    if (strlen(name) != 32 + 6 || strcmp(name + 32, ".cubin") != 0) return false;
    uint64_t w[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        int v = hexval(name[i]);
        if (v < 0) return false;
        w[i / 16] = (w[i / 16] << 4) | (uint64_t)v;
    }
    k->hi = w[0];
    k->lo = w[1];
    return true;
}
