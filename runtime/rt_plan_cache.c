/* runtime/rt_plan_cache.c — the plan cache (rt_plan_cache.h): keys from the
 * build identity and the driver's description, kernels to bytes and back.
 *
 * The payload, all integers little-endian as this build stores them:
 *   "KILNPLAN" u32 RT_PLAN_CACHE_VERSION, u32 sizeof(cg_kernel)
 *   u8 has_head [str text, str report, 4 x u64 memory figures]
 *   u32 nk, then per kernel: u32 share (0: its own source; j+1: kernel j's
 *   source and name, by pointer) and the kernel (below)
 * A kernel: the cg_kernel bytes, then its strings (kind; name, source and
 * generated part unless shared: a kernel that shares another's program reads
 * that one's generated part, the code that runs; note, config,
 * tune_problem, lt_note), nargs cg_arg bytes
 * with each one's field and ctype, nxforms cg_xform bytes, u8 has_fallback
 * and the fallback the same way. A str is u64 length (UINT64_MAX: NULL) and
 * its bytes. Pointers in the copied structs are never read: each is replaced
 * by what was decoded for it.
 *
 * Stored, that payload is zero-run coded (the structs are mostly unused
 * terms of symbolic dims): "KILNPLZ0", u64 the payload's length, then bytes
 * where 0x00 is followed by a varint count of zeros and any other byte
 * stands for itself. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include "runtime/rt_plan_cache.h"

#include <elf.h>
#include <jansson.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/rt_err.h"
#include "runtime/rt_util.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

/* ---- the build identity ---- */

typedef struct build_id {
    const void *addr;   /* an address inside libkiln */
    char path[4096];    /* the object holding it ("" : the executable) */
    unsigned char id[64];
    size_t len;         /* of id; 0: no build-id note */
    bool found;
} build_id;

static int find_object(struct dl_phdr_info *info, size_t size, void *user)
{
    (void)size;
    build_id *b = user;
    uintptr_t a = (uintptr_t)b->addr;
    bool inside = false;
    for (int i = 0; i < info->dlpi_phnum && !inside; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        inside = ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz;
    }
    if (!inside) return 0;
    b->found = true;
    snprintf(b->path, sizeof b->path, "%s", info->dlpi_name ? info->dlpi_name : "");
    for (int i = 0; i < info->dlpi_phnum && !b->len; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            size_t nsz = (nh->n_namesz + 3u) & ~3u, dsz = (nh->n_descsz + 3u) & ~3u;
            const unsigned char *name = p + sizeof *nh, *desc = name + nsz;
            if (desc + dsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) && nh->n_descsz > 0 &&
                nh->n_descsz <= sizeof b->id) {
                memcpy(b->id, desc, nh->n_descsz);
                b->len = nh->n_descsz;
                break;
            }
            p = desc + dsz;
        }
    }
    return 1;
}

/* The identity of the binary that holds this code: its build-id, else the
 * hash of the file. */
static rt_status build_identity(XXH3_state_t *s, char *err, size_t n)
{
    build_id b;
    memset(&b, 0, sizeof b);
    b.addr = (const void *)&rt_plan_cache_key;
    dl_iterate_phdr(find_object, &b);
    if (!b.found) return rt_fail(RT_ERR_NOT_FOUND, err, n, "the plan cache: cannot find the binary that holds Kiln");
    if (b.len) {
        XXH3_128bits_update(s, "build-id", 8);
        XXH3_128bits_update(s, b.id, b.len);
        return RT_OK;
    }
    FILE *f = fopen(b.path[0] ? b.path : "/proc/self/exe", "rb");
    if (!f) return rt_fail(RT_ERR_NOT_FOUND, err, n, "the plan cache: no build-id and %s cannot be read", b.path[0] ? b.path : "the executable");
    XXH3_128bits_update(s, "file", 4);
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) XXH3_128bits_update(s, buf, got);
    bool bad = ferror(f);
    fclose(f);
    return bad ? rt_fail(RT_ERR_NOT_FOUND, err, n, "the plan cache: the binary cannot be read") : RT_OK;
}

static void feed(XXH3_state_t *s, const void *p, size_t len)
{
    uint64_t l = len;
    XXH3_128bits_update(s, &l, sizeof l);
    if (len) XXH3_128bits_update(s, p, len);
}

rt_status rt_plan_cache_key(const char *desc, size_t len, const char *arch, rt_cache_key *out, char *err, size_t n)
{
    XXH3_state_t s;
    XXH3_INITSTATE(&s);
    if (XXH3_128bits_reset(&s) != XXH_OK) return rt_fail(RT_ERR_INTERNAL, err, n, "xxhash reset failed");
    feed(&s, "kiln-plan-cache", 15);
    uint32_t v = RT_PLAN_CACHE_VERSION;
    feed(&s, &v, sizeof v);
    feed(&s, KILN_VERSION, strlen(KILN_VERSION));
    RT_TRY(build_identity(&s, err, n));
    feed(&s, arch, strlen(arch));
    feed(&s, desc, len);
    XXH128_hash_t h = XXH3_128bits_digest(&s);
    out->hi = h.high64;
    out->lo = h.low64;
    return RT_OK;
}

rt_cache_key rt_plan_cache_variant_key(rt_cache_key base, const int64_t *dims, int nsyms)
{
    XXH3_state_t s;
    XXH3_INITSTATE(&s);
    XXH3_128bits_reset(&s);
    feed(&s, "kiln-plan-variant", 17);
    feed(&s, &base, sizeof base);
    feed(&s, dims, (size_t)nsyms * sizeof *dims);
    XXH128_hash_t h = XXH3_128bits_digest(&s);
    return (rt_cache_key){h.high64, h.low64};
}

/* ---- writing ---- */

typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *p, size_t len)
{
    if (b->oom) return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + len) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, len);
    b->len += len;
}
static void put_u8(wbuf *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_strn(wbuf *b, const char *s, size_t len)
{
    if (!s) {
        put_u64(b, UINT64_MAX);
        return;
    }
    put_u64(b, len);
    put(b, s, len);
}
static void put_str(wbuf *b, const char *s) { put_strn(b, s, s ? strlen(s) : 0); }

/* Every pointer of cg_kernel (and cg_arg) is written as what it points to
 * and set again when read (take_kernel): a new pointer field needs both. */
static void put_kernel(wbuf *b, const cg_kernel *k, bool shared)
{
    put(b, k, sizeof *k);
    put_str(b, k->kind);
    if (!shared) {
        put_str(b, k->name);
        put_strn(b, k->source, k->source_len);
        put_str(b, k->generated);
    }
    put_str(b, k->note);
    put_str(b, k->config);
    put_str(b, k->tune_problem);
    put_str(b, k->lt_note);
    for (int i = 0; i < k->nargs; i++) {
        put(b, &k->args[i], sizeof k->args[i]);
        put_str(b, k->args[i].field);
        put_str(b, k->args[i].ctype);
    }
    if (k->nxforms > 0) put(b, k->xforms, (size_t)k->nxforms * sizeof *k->xforms);
    put_u8(b, k->fallback != NULL);
    if (k->fallback) put_kernel(b, k->fallback, shared);
}

void rt_plan_cache_head_free(rt_plan_cache_head *h)
{
    if (!h) return;
    free(h->text);
    free(h->report);
    memset(h, 0, sizeof *h);
}

/* ---- the zero-run code ---- */

static bool zrun_encode(const unsigned char *p, size_t len, wbuf *z)
{
    put(z, "KILNPLZ0", 8);
    put_u64(z, len);
    for (size_t i = 0; i < len && !z->oom;) {
        if (p[i]) {
            size_t j = i;
            while (j < len && p[j]) j++;
            put(z, p + i, j - i);
            i = j;
            continue;
        }
        size_t j = i;
        while (j < len && !p[j]) j++;
        uint64_t run = j - i;
        unsigned char v[11];
        int nv = 0;
        v[nv++] = 0;
        do {
            v[nv++] = (unsigned char)((run & 0x7f) | (run > 0x7f ? 0x80 : 0));
            run >>= 7;
        } while (run);
        put(z, v, (size_t)nv);
        i = j;
    }
    return !z->oom;
}

/* The payload of a stored entry (malloc'd, *n bytes), or NULL with why. */
static unsigned char *zrun_decode(const unsigned char *p, size_t len, size_t *n, char *why, size_t wn)
{
    uint64_t raw;
    if (len < 16 || memcmp(p, "KILNPLZ0", 8)) {
        snprintf(why, wn, "not a plan cache entry");
        return NULL;
    }
    memcpy(&raw, p + 8, 8);
    if (raw > RT_CACHE_MAX_ENTRY * 64ull) {
        snprintf(why, wn, "a payload of %llu bytes", (unsigned long long)raw);
        return NULL;
    }
    unsigned char *out = malloc((size_t)raw + 1);
    if (!out) {
        snprintf(why, wn, "out of memory");
        return NULL;
    }
    size_t o = 0, i = 16;
    while (i < len) {
        if (p[i]) {
            if (o >= raw) break;
            out[o++] = p[i++];
            continue;
        }
        uint64_t run = 0;
        int shift = 0;
        i++;
        while (i < len && shift < 63) {
            run |= (uint64_t)(p[i] & 0x7f) << shift;
            shift += 7;
            if (!(p[i++] & 0x80)) break;
        }
        if (run > raw - o) break;
        memset(out + o, 0, (size_t)run);
        o += (size_t)run;
    }
    if (i != len || o != raw) {
        free(out);
        snprintf(why, wn, "the zero-run code does not decode");
        return NULL;
    }
    *n = o;
    return out;
}

rt_status rt_plan_cache_encode(const rt_plan_cache_head *head, const cg_kernel *ks, int nk, rt_blob *out)
{
    memset(out, 0, sizeof *out);
    wbuf b = {0};
    put(&b, "KILNPLAN", 8);
    put_u32(&b, RT_PLAN_CACHE_VERSION);
    put_u32(&b, (uint32_t)sizeof(cg_kernel));
    put_u8(&b, head != NULL);
    if (head) {
        put_str(&b, head->text);
        put_str(&b, head->report);
        put_u64(&b, head->mem.intermediates);
        put_u64(&b, head->mem.workspaces);
        put_u64(&b, head->mem.packed);
        put_u64(&b, head->mem.states);
    }
    put_u32(&b, (uint32_t)nk);
    for (int i = 0; i < nk; i++) {
        uint32_t share = 0;
        for (int j = 0; j < i && !share; j++)
            if (ks[i].source == ks[j].source && ks[i].name == ks[j].name && !ks[i].fallback == !ks[j].fallback &&
                (!ks[i].fallback || (ks[i].fallback->source == ks[j].fallback->source &&
                                     ks[i].fallback->name == ks[j].fallback->name)))
                share = (uint32_t)j + 1;
        put_u32(&b, share);
        put_kernel(&b, &ks[i], share != 0);
    }
    wbuf z = {0};
    if (b.oom || !zrun_encode(b.p, b.len, &z)) {
        free(b.p);
        free(z.p);
        return RT_ERR_NOMEM;
    }
    free(b.p);
    out->data = z.p;
    out->size = z.len;
    return RT_OK;
}

/* ---- reading ---- */

typedef struct rbuf {
    const unsigned char *p, *end;
    bool bad;
    char *why;
    size_t n;
} rbuf;

static bool take(rbuf *r, void *dst, size_t len, const char *what)
{
    if (r->bad) return false;
    if ((size_t)(r->end - r->p) < len) {
        r->bad = true;
        snprintf(r->why, r->n, "the entry ends inside %s", what);
        return false;
    }
    memcpy(dst, r->p, len);
    r->p += len;
    return true;
}

static void fail(rbuf *r, const char *fmt, int a, int b)
{
    if (r->bad) return;
    r->bad = true;
    snprintf(r->why, r->n, fmt, a, b);
}

/* A string into k's storage (or malloc'd when k is NULL); *out NULL for a
 * stored NULL; *len its length. */
static bool take_str(rbuf *r, cg_kernel *k, const char **out, size_t *len, const char *what)
{
    uint64_t l;
    *out = NULL;
    if (!take(r, &l, 8, what)) return false;
    if (l == UINT64_MAX) return true;
    if (l > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        snprintf(r->why, r->n, "the entry ends inside %s", what);
        return false;
    }
    char *s = k ? cg_kernel_storage(k, (size_t)l + 1) : malloc((size_t)l + 1);
    if (!s) {
        r->bad = true;
        snprintf(r->why, r->n, "out of memory");
        return false;
    }
    memcpy(s, r->p, (size_t)l);
    s[l] = 0;
    r->p += l;
    if (len) *len = (size_t)l;
    *out = s;
    return true;
}

static bool arg_fits(const cg_arg *a, const ir_graph *g)
{
    if (a->node < -1 || a->node >= g->nnodes) return false;
    switch (a->kind) {
    case CG_ARG_PARAM: return a->index >= 0 && a->index < g->nparams;
    case CG_ARG_OUTPUT: return a->index >= 0 && a->index < g->noutputs;
    case CG_ARG_STATE: return a->index >= 0 && a->index < g->nstates;
    case CG_ARG_PACKED:
    case CG_ARG_INTERMEDIATE: return a->node >= 0;
    case CG_ARG_WORKSPACE:
    case CG_ARG_SCALAR:
    case CG_ARG_NULL:
    case CG_ARG_SLOTS:
    case CG_ARG_SEQS: return true;
    }
    return false;
}

/* One kernel into *k (zeroed first); shared: source and name from `from`. */
static void take_kernel(rbuf *r, cg_kernel *k, const cg_kernel *from, const ir_graph *g, int idx)
{
    if (!take(r, k, sizeof *k, "a kernel")) {
        memset(k, 0, sizeof *k);
        return;
    }
    /* what the bytes held for pointers is meaningless here */
    k->kind = k->name = k->source = k->generated = k->note = k->config = k->tune_problem = k->lt_note = NULL;
    k->args = NULL;
    k->xforms = NULL;
    k->fallback = NULL;
    k->priv_ = NULL;
    int nargs = k->nargs, nx = k->nxforms;
    size_t source_len = k->source_len;
    k->nargs = k->nxforms = 0;
    if (nargs < 0 || nargs > 4096 || nx < 0 || nx > 4096 || k->ntmaps < 0 || k->ntmaps > CG_MAX_TMAPS ||
        k->group < 0 || k->group >= g->ngroups || (unsigned)k->family > (unsigned)CG_FAMILY_MOE) {
        fail(r, "kernel %d: a count, family or group out of range (group %d)", idx, k->group);
        return;
    }
    take_str(r, k, &k->kind, NULL, "a kernel's kind");
    if (from) {
        k->name = from->name;
        k->source = from->source;
        k->source_len = from->source_len;
        k->generated = from->generated;
    } else {
        take_str(r, k, &k->name, NULL, "a kernel's name");
        take_str(r, k, &k->source, &k->source_len, "a kernel's source");
        take_str(r, k, &k->generated, NULL, "a kernel's generated part");
    }
    if (!r->bad && (!k->name || !k->source || k->source_len != source_len)) fail(r, "kernel %d: no name or source", idx, 0);
    take_str(r, k, &k->note, NULL, "a kernel's note");
    take_str(r, k, &k->config, NULL, "a kernel's configuration");
    take_str(r, k, &k->tune_problem, NULL, "a kernel's tuning problem");
    take_str(r, k, &k->lt_note, NULL, "a kernel's cuBLASLt note");
    if (r->bad) return;
    k->args = calloc((size_t)nargs + 1, sizeof *k->args);
    k->xforms = calloc((size_t)nx + 1, sizeof *k->xforms);
    if (!k->args || !k->xforms) {
        fail(r, "out of memory", 0, 0);
        return;
    }
    for (int i = 0; i < nargs && !r->bad; i++) {
        cg_arg *a = &k->args[i];
        if (!take(r, a, sizeof *a, "an argument")) break;
        a->field = a->ctype = NULL;
        k->nargs = i + 1;
        take_str(r, k, &a->field, NULL, "an argument's field");
        take_str(r, k, &a->ctype, NULL, "an argument's type");
        if (!r->bad && (!a->field || !a->ctype || a->offset != 8 * (size_t)i || !arg_fits(a, g)))
            fail(r, "kernel %d: argument %d does not fit the model", idx, i);
    }
    if (nx > 0 && take(r, k->xforms, (size_t)nx * sizeof *k->xforms, "a layout change")) k->nxforms = nx;
    for (int i = 0; i < k->nxforms && !r->bad; i++)
        if (k->xforms[i].node < 0 || k->xforms[i].node >= g->nnodes) fail(r, "kernel %d: layout change %d out of range", idx, i);
    for (int i = 0; i < k->ntmaps && !r->bad; i++)
        if (k->tmaps[i].arg < 0 || k->tmaps[i].arg >= k->nargs) fail(r, "kernel %d: tensor map %d out of range", idx, i);
    uint8_t fb = 0;
    if (r->bad || !take(r, &fb, 1, "a kernel")) return;
    if (!fb) {
        if (from && from->fallback) fail(r, "kernel %d: shares a kernel with a fallback but has none", idx, 0);
        return;
    }
    if (from && !from->fallback) {
        fail(r, "kernel %d: shares a kernel without a fallback", idx, 0);
        return;
    }
    k->fallback = calloc(1, sizeof *k->fallback);
    if (!k->fallback) {
        fail(r, "out of memory", 0, 0);
        return;
    }
    take_kernel(r, k->fallback, from ? from->fallback : NULL, g, idx);
}

static bool decode_payload(const unsigned char *p, size_t len, const ir_graph *g, rt_plan_cache_head *head,
                           cg_kernel **ks, int *nk, char *why, size_t n);

bool rt_plan_cache_decode(const unsigned char *p, size_t len, const ir_graph *g, rt_plan_cache_head *head,
                          cg_kernel **ks, int *nk, char *why, size_t n)
{
    char dummy[8];
    if (!why || !n) {
        why = dummy;
        n = sizeof dummy;
    }
    if (ks) {
        *ks = NULL;
        *nk = 0;
    }
    if (head) memset(head, 0, sizeof *head);
    size_t raw = 0;
    unsigned char *q = zrun_decode(p, len, &raw, why, n);
    if (!q) return false;
    bool ok = decode_payload(q, raw, g, head, ks, nk, why, n);
    free(q);
    return ok;
}

/* The decoded head to *head (when asked for), else freed. */
static void give_head(rt_plan_cache_head *head, const char *t, const char *rep, const uint64_t m[4])
{
    if (head) {
        *head = (rt_plan_cache_head){(char *)t, (char *)rep, {(size_t)m[0], (size_t)m[1], (size_t)m[2], (size_t)m[3]}};
        return;
    }
    free((void *)t);
    free((void *)rep);
}

static bool decode_payload(const unsigned char *p, size_t len, const ir_graph *g, rt_plan_cache_head *head,
                           cg_kernel **ks, int *nk, char *why, size_t n)
{
    rbuf r = {p, p + len, false, why, n};
    if (ks) {
        *ks = NULL;
        *nk = 0;
    }
    if (head) memset(head, 0, sizeof *head);
    char magic[8];
    uint32_t ver = 0, ksize = 0, count = 0;
    uint8_t has_head = 0;
    take(&r, magic, 8, "the header");
    take(&r, &ver, 4, "the header");
    take(&r, &ksize, 4, "the header");
    take(&r, &has_head, 1, "the header");
    if (!r.bad && (memcmp(magic, "KILNPLAN", 8) || ver != RT_PLAN_CACHE_VERSION || ksize != sizeof(cg_kernel)))
        fail(&r, "not a plan of this build (version %d, kernel size %d)", (int)ver, (int)ksize);
    if (!r.bad && head && !has_head) fail(&r, "an entry without the plan text", 0, 0);
    const char *t = NULL, *rep = NULL;
    uint64_t m[4] = {0};
    if (has_head) {
        take_str(&r, NULL, &t, NULL, "the plan text");
        take_str(&r, NULL, &rep, NULL, "the report");
        take(&r, m, sizeof m, "the memory figures");
        if (!r.bad && !t) fail(&r, "an entry without the plan text", 0, 0);
    }
    if (!r.bad && !ks) { /* the head alone */
        give_head(head, t, rep, m);
        why[0] = 0;
        return true;
    }
    take(&r, &count, 4, "the kernel count");
    if (!r.bad && (count == 0 || count > 1000000 || count > (size_t)(r.end - r.p) / sizeof(cg_kernel)))
        fail(&r, "a kernel count of %d", (int)count, 0);
    cg_kernel *out = r.bad ? NULL : calloc(count, sizeof *out);
    if (!r.bad && !out) fail(&r, "out of memory", 0, 0);
    int done = 0;
    for (uint32_t i = 0; i < count && !r.bad; i++, done++) {
        uint32_t share = 0;
        if (!take(&r, &share, 4, "a kernel")) break;
        if (share > i) {
            fail(&r, "kernel %d shares a later kernel (%d)", (int)i, (int)share - 1);
            break;
        }
        take_kernel(&r, &out[i], share ? &out[share - 1] : NULL, g, (int)i);
    }
    if (!r.bad && r.p != r.end) fail(&r, "%d bytes after the last kernel", (int)(r.end - r.p), 0);
    if (r.bad) {
        if (out) cg_kernels_free(out, done + (done < (int)count));
        give_head(NULL, t, rep, m);
        return false;
    }
    give_head(head, t, rep, m);
    *ks = out;
    *nk = (int)count;
    why[0] = 0;
    return true;
}

/* ---- through the kernel cache ---- */

rt_status rt_plan_cache_put(rt_cache *c, rt_cache_key key, const char *arch, const char *what,
                            const rt_plan_cache_head *head, const cg_kernel *ks, int nk)
{
    rt_blob b;
    rt_status st = rt_plan_cache_encode(head, ks, nk, &b);
    if (st != RT_OK) return st;
    json_t *m = json_pack("{s:s, s:s, s:s, s:s}", "kernel", what ? what : "plan", "group",
                          head ? "kiln plan cache: the plan and its large-shape kernels" : "kiln plan cache: a shape variant's kernels",
                          "kiln", KILN_VERSION, "arch", arch);
    char *manifest = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    st = rt_cache_put_ex(c, key, arch, &b, manifest);
    free(manifest);
    rt_blob_free(&b);
    return st;
}

rt_cache_lookup rt_plan_cache_get(rt_cache *c, rt_cache_key key, const char *arch, const ir_graph *g, cg_kernel **ks,
                                  int *nk, char *why, size_t n)
{
    *ks = NULL;
    *nk = 0;
    if (why && n) why[0] = 0;
    rt_blob b = {0};
    rt_cache_lookup how = rt_cache_get_ex(c, key, arch, &b, why, n);
    if (how != RT_CACHE_HIT_MEMORY && how != RT_CACHE_HIT_DISK) return how;
    bool ok = rt_plan_cache_decode(b.data, b.size, g, NULL, ks, nk, why, n);
    rt_blob_free(&b);
    return ok ? how : RT_CACHE_MISS;
}
