/* runtime/rt_cache.c — kernel cache: memory map in front of a disk directory.
 *
 * The map is open addressing with linear probing on the 128-bit key (already
 * a good hash: the low word picks the slot), grown at half load; it owns a
 * copy of every cubin and hands out copies, so a caller's blob never aliases
 * the cache. Disk entries are validated in full on every read (header,
 * length, key, checksum) before a byte is returned; a corrupt one is deleted
 * only if the path still names the file that was read (a concurrent writer
 * may just have renamed a good entry over it). Writes go to mkstemp files in
 * the entry's directory and are renamed into place. */
#define _POSIX_C_SOURCE 200809L
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include "runtime/rt_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "runtime/rt_util.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

#define STALE_TEMP_SECONDS 3600

static const unsigned char MAGIC[8] = {'K', 'I', 'L', 'N', 'C', 'U', 'B', 'N'};

/* ---- small helpers ---------------------------------------------------------- */

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (56 - 8 * i));
}
static uint32_t get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

/* ---- keys ------------------------------------------------------------------ */

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
static bool parse_entry_name(const char *name, rt_cache_key *k)
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

/* ---- directory resolution -------------------------------------------------- */

static const char *env_get(rt_getenv_fn fn, void *user, const char *name)
{
    const char *v = fn ? fn(user, name) : getenv(name);
    return v && *v ? v : NULL;
}

rt_status rt_cache_resolve_dir(rt_getenv_fn getenv_fn, void *user, char **out)
{
    if (!out) return RT_ERR_INVALID;
    *out = NULL;
    const char *v;
    if ((v = env_get(getenv_fn, user, "KILN_CACHE_DIR"))) *out = rt_strf("%s", v);
    else if ((v = env_get(getenv_fn, user, "XDG_CACHE_HOME"))) *out = rt_strf("%s/kiln", v);
    else if ((v = env_get(getenv_fn, user, "HOME"))) *out = rt_strf("%s/.cache/kiln", v);
    else return RT_ERR_IO;
    return *out ? RT_OK : RT_ERR_NOMEM;
}

/* mkdir -p; 0 or an errno. */
static int mkdirs(const char *path)
{
    char *p = rt_strf("%s", path);
    if (!p) return ENOMEM;
    int err = 0;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char save = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                err = errno;
                break;
            }
            *s = save;
            if (save == '\0') break;
        }
    }
    if (!err) {
        struct stat st;
        if (stat(p, &st) != 0) err = errno;
        else if (!S_ISDIR(st.st_mode)) err = ENOTDIR;
    }
    free(p);
    return err;
}

/* ---- the object ------------------------------------------------------------- */

typedef struct slot {
    rt_cache_key key;
    unsigned char *data; /* NULL = empty slot */
    size_t size;
} slot;

struct rt_cache {
    pthread_mutex_t mu;
    char *root;  /* NULL = memory only; immutable after open */
    char *v1;    /* root/v1 */
    bool fsync;
    rt_warn_fn warn;
    void *warn_user;
    char *pending; /* warnings for take_warnings, '\n'-separated */
    bool warned_write;
    slot *slots;
    size_t cap, count;
    rt_cache_stats st;
    char err[512];
};

/* Under c->mu. */
static void warn_locked(rt_cache *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_locked(rt_cache *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->st.warnings++;
    if (c->warn) {
        c->warn(c->warn_user, msg);
        return;
    }
    size_t old = c->pending ? strlen(c->pending) : 0;
    char *p = realloc(c->pending, old + strlen(msg) + 2);
    if (!p) return; /* the counter still says a warning happened */
    memcpy(p + old, msg, strlen(msg));
    p[old + strlen(msg)] = '\n';
    p[old + strlen(msg) + 1] = '\0';
    c->pending = p;
}

rt_status rt_cache_open(rt_cache **out, const rt_cache_config *cfg)
{
    if (!out) return RT_ERR_INVALID;
    *out = NULL;
    rt_cache *c = calloc(1, sizeof *c);
    if (!c) return RT_ERR_NOMEM;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return RT_ERR_NOMEM;
    }
    rt_cache_config def = {0};
    if (!cfg) cfg = &def;
    c->fsync = cfg->fsync;
    c->warn = cfg->warn;
    c->warn_user = cfg->warn_user;
    if (!cfg->no_disk) {
        char *root = NULL;
        rt_status st = cfg->dir ? ((root = rt_strf("%s", cfg->dir)) ? RT_OK : RT_ERR_NOMEM)
                                : rt_cache_resolve_dir(cfg->getenv, cfg->getenv_user, &root);
        if (st == RT_ERR_NOMEM) {
            rt_cache_close(c);
            return st;
        }
        if (st != RT_OK) {
            warn_locked(c, "kiln cache: no cache directory (set KILN_CACHE_DIR, XDG_CACHE_HOME or "
                           "HOME); caching in memory only");
        } else {
            char *v1 = rt_strf("%s/v1", root);
            if (!v1) {
                free(root);
                rt_cache_close(c);
                return RT_ERR_NOMEM;
            }
            int err = mkdirs(v1);
            if (err) {
                warn_locked(c, "kiln cache: cannot create %s (%s); caching in memory only", v1,
                            strerror(err));
                free(root);
                free(v1);
            } else {
                c->root = root;
                c->v1 = v1;
            }
        }
    }
    *out = c;
    return RT_OK;
}

static void map_free(rt_cache *c)
{
    for (size_t i = 0; i < c->cap; i++) free(c->slots[i].data);
    free(c->slots);
    c->slots = NULL;
    c->cap = c->count = 0;
    c->st.mem_entries = c->st.mem_bytes = 0;
}

void rt_cache_close(rt_cache *c)
{
    if (!c) return;
    map_free(c);
    free(c->root);
    free(c->v1);
    free(c->pending);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

const char *rt_cache_dir(const rt_cache *c) { return c ? c->root : NULL; }
bool rt_cache_disk_enabled(rt_cache *c) { return c && c->root; }
const char *rt_cache_error(rt_cache *c) { return c ? c->err : ""; }

char *rt_cache_take_warnings(rt_cache *c)
{
    if (!c) return NULL;
    pthread_mutex_lock(&c->mu);
    char *p = c->pending;
    c->pending = NULL;
    pthread_mutex_unlock(&c->mu);
    return p;
}

void rt_cache_get_stats(rt_cache *c, rt_cache_stats *s)
{
    if (!c || !s) return;
    pthread_mutex_lock(&c->mu);
    *s = c->st;
    pthread_mutex_unlock(&c->mu);
}

/* ---- the memory map (under c->mu) -------------------------------------------- */

static slot *map_find(rt_cache *c, rt_cache_key k)
{
    if (!c->cap) return NULL;
    for (size_t i = (size_t)k.lo & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
        if (!c->slots[i].data) return NULL;
        if (rt_cache_key_equal(c->slots[i].key, k)) return &c->slots[i];
    }
}

/* Takes ownership of data on success (true). */
static bool map_insert(rt_cache *c, rt_cache_key k, unsigned char *data, size_t size)
{
    if ((c->count + 1) * 2 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        slot *ns = calloc(ncap, sizeof *ns);
        if (!ns) return false;
        for (size_t i = 0; i < c->cap; i++) {
            if (!c->slots[i].data) continue;
            size_t j = (size_t)c->slots[i].key.lo & (ncap - 1);
            while (ns[j].data) j = (j + 1) & (ncap - 1);
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->cap = ncap;
    }
    size_t i = (size_t)k.lo & (c->cap - 1);
    while (c->slots[i].data) i = (i + 1) & (c->cap - 1);
    c->slots[i] = (slot){k, data, size};
    c->count++;
    c->st.mem_entries = c->count;
    c->st.mem_bytes += size;
    return true;
}

static unsigned char *dup_bytes(const unsigned char *p, size_t n)
{
    unsigned char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, p, n);
    d[n] = 0; /* PTX-friendly; not part of the blob */
    return d;
}

/* ---- entry files -------------------------------------------------------------- */

typedef enum { ENTRY_OK, ENTRY_MISSING, ENTRY_CORRUPT, ENTRY_UNREADABLE, ENTRY_NOMEM } entry_state;

typedef struct entry_read {
    entry_state state;
    const char *why; /* for CORRUPT / UNREADABLE */
    dev_t dev;
    ino_t ino;
    rt_blob blob; /* ENTRY_OK: the payload */
} entry_read;

static bool read_full(int fd, unsigned char *p, size_t n)
{
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static bool write_full(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static void encode_header(unsigned char h[RT_CACHE_HEADER_SIZE], rt_cache_key k, const rt_blob *b)
{
    memcpy(h, MAGIC, 8);
    put_le32(h + 8, RT_CACHE_FORMAT_VERSION);
    put_le32(h + 12, 0);
    put_le64(h + 16, b->size);
    put_le64(h + 24, XXH3_64bits(b->data, b->size));
    put_be64(h + 32, k.hi);
    put_be64(h + 40, k.lo);
}

/* Read and validate the entry at path for key k. want_payload false: check
 * only, the payload is freed. */
static void read_entry(const char *path, rt_cache_key k, bool want_payload, entry_read *e)
{
    memset(e, 0, sizeof *e);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        e->state = errno == ENOENT ? ENTRY_MISSING : ENTRY_UNREADABLE;
        e->why = "cannot open";
        return;
    }
    struct stat st;
    unsigned char h[RT_CACHE_HEADER_SIZE];
    if (fstat(fd, &st) != 0) {
        e->state = ENTRY_UNREADABLE;
        e->why = "fstat failed";
        goto out;
    }
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->state = ENTRY_CORRUPT;
    if (!S_ISREG(st.st_mode)) { e->why = "not a regular file"; goto out; }
    if ((uint64_t)st.st_size < RT_CACHE_HEADER_SIZE) { e->why = "shorter than its header"; goto out; }
    if (!read_full(fd, h, sizeof h)) { e->why = "header unreadable"; goto out; }
    if (memcmp(h, MAGIC, 8) != 0) { e->why = "bad magic"; goto out; }
    if (get_le32(h + 8) != RT_CACHE_FORMAT_VERSION || get_le32(h + 12) != 0) {
        e->why = "unknown format version";
        goto out;
    }
    uint64_t len = get_le64(h + 16);
    if (len == 0 || len != (uint64_t)st.st_size - RT_CACHE_HEADER_SIZE) {
        e->why = "length does not match the file (truncated?)";
        goto out;
    }
    if (get_be64(h + 32) != k.hi || get_be64(h + 40) != k.lo) { e->why = "key mismatch"; goto out; }
    if (len > SIZE_MAX - 1) { e->why = "too large"; goto out; }
    unsigned char *buf = malloc((size_t)len + 1);
    if (!buf) {
        e->state = ENTRY_NOMEM;
        goto out;
    }
    if (!read_full(fd, buf, (size_t)len)) {
        free(buf);
        e->why = "payload unreadable";
        goto out;
    }
    buf[len] = 0;
    if (XXH3_64bits(buf, (size_t)len) != get_le64(h + 24)) {
        free(buf);
        e->why = "checksum mismatch";
        goto out;
    }
    e->state = ENTRY_OK;
    if (want_payload) {
        e->blob.data = buf;
        e->blob.size = (size_t)len;
    } else {
        free(buf);
    }
out:
    close(fd);
}

/* Unlink path only if it is still the file we read. */
static bool remove_if_same(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;
    if (lstat(path, &st) != 0 || st.st_dev != dev || st.st_ino != ino) return false;
    return unlink(path) == 0;
}

/* Write an entry for k into dir (which must exist); 0 or an errno. */
static int write_entry(const char *dir, rt_cache_key k, const rt_blob *b, bool do_fsync)
{
    char hex[33];
    rt_cache_key_hex(k, hex);
    char *tmp = rt_strf("%s/.%s.XXXXXX", dir, hex);
    char *final = rt_strf("%s/%s.cubin", dir, hex);
    if (!tmp || !final) {
        free(tmp);
        free(final);
        return ENOMEM;
    }
    int err = 0;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        err = errno;
        goto out;
    }
    unsigned char h[RT_CACHE_HEADER_SIZE];
    encode_header(h, k, b);
    if (!write_full(fd, h, sizeof h) || !write_full(fd, b->data, b->size)) err = errno ? errno : EIO;
    if (!err && fchmod(fd, 0644) != 0) err = errno;
    if (!err && do_fsync && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, final) != 0) err = errno;
    if (err) unlink(tmp);
out:
    free(tmp);
    free(final);
    return err;
}

static char *entry_path(const rt_cache *c, rt_cache_key k, const char *arch)
{
    char hex[33];
    rt_cache_key_hex(k, hex);
    return rt_strf("%s/%s/%s.cubin", c->v1, arch, hex);
}

/* ---- get / put ---------------------------------------------------------------- */

rt_cache_lookup rt_cache_get(rt_cache *c, rt_cache_key key, const char *arch, rt_blob *out)
{
    if (!out) return RT_CACHE_ERROR;
    out->data = NULL;
    out->size = 0;
    if (!c || !rt_nvrtc_arch_valid(arch)) return RT_CACHE_ERROR;

    pthread_mutex_lock(&c->mu);
    slot *s = map_find(c, key);
    if (s) {
        out->data = dup_bytes(s->data, s->size);
        if (out->data) {
            out->size = s->size;
            c->st.mem_hits++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (s) return out->data ? RT_CACHE_HIT_MEMORY : RT_CACHE_ERROR;

    if (c->root) {
        char *path = entry_path(c, key, arch);
        if (!path) return RT_CACHE_ERROR;
        entry_read e;
        read_entry(path, key, true, &e);
        if (e.state == ENTRY_NOMEM) {
            free(path);
            return RT_CACHE_ERROR;
        }
        if (e.state == ENTRY_OK) {
            unsigned char *copy = dup_bytes(e.blob.data, e.blob.size);
            pthread_mutex_lock(&c->mu);
            c->st.disk_hits++;
            if (copy && (map_find(c, key) || !map_insert(c, key, copy, e.blob.size))) free(copy);
            pthread_mutex_unlock(&c->mu);
            free(path);
            *out = e.blob;
            return RT_CACHE_HIT_DISK;
        }
        if (e.state == ENTRY_CORRUPT) {
            bool removed = remove_if_same(path, e.dev, e.ino);
            pthread_mutex_lock(&c->mu);
            c->st.corrupt_removed++;
            warn_locked(c, "kiln cache: %s entry %s (%s)", removed ? "removed corrupt" : "corrupt",
                        path, e.why);
            pthread_mutex_unlock(&c->mu);
        }
        free(path);
    }
    pthread_mutex_lock(&c->mu);
    c->st.misses++;
    pthread_mutex_unlock(&c->mu);
    return RT_CACHE_MISS;
}

rt_status rt_cache_put(rt_cache *c, rt_cache_key key, const char *arch, const rt_blob *blob)
{
    if (!c || !blob || !blob->data || blob->size == 0 || !rt_nvrtc_arch_valid(arch))
        return RT_ERR_INVALID;
    unsigned char *copy = dup_bytes(blob->data, blob->size);
    if (!copy) return RT_ERR_NOMEM;
    pthread_mutex_lock(&c->mu);
    bool ok = true;
    if (map_find(c, key)) free(copy);
    else if (!map_insert(c, key, copy, blob->size)) ok = false;
    pthread_mutex_unlock(&c->mu);
    if (!ok) {
        free(copy);
        return RT_ERR_NOMEM;
    }
    if (!c->root) return RT_OK;

    char *dir = rt_strf("%s/%s", c->v1, arch);
    int err = dir ? mkdirs(dir) : ENOMEM;
    if (!err) err = write_entry(dir, key, blob, c->fsync);
    pthread_mutex_lock(&c->mu);
    if (err) {
        c->st.write_failures++;
        if (!c->warned_write) {
            c->warned_write = true;
            warn_locked(c, "kiln cache: cannot write to %s (%s); further write failures are "
                           "only counted", dir ? dir : c->v1, strerror(err));
        }
    } else {
        c->st.writes++;
    }
    pthread_mutex_unlock(&c->mu);
    free(dir);
    return RT_OK;
}

/* ---- compile through the cache -------------------------------------------------- */

static void count_compiles(rt_cache *c, int n)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->st.compiles += (uint64_t)n;
    pthread_mutex_unlock(&c->mu);
}

/* Look up unit (name, source) for *out; true when it was a hit (out filled).
 * On a key error fills out with the failure and returns true too. */
static bool lookup_unit(rt_cache *c, const char *name, const char *source,
                        const rt_compile_opts *opts, rt_compile_result *out,
                        rt_cache_lookup *how, rt_cache_key *key)
{
    double t0 = rt_now_ms();
    memset(out, 0, sizeof *out);
    *how = RT_CACHE_MISS;
    rt_status st = rt_cache_key_for(source, opts, key);
    if (st != RT_OK) {
        out->status = st;
        out->message = rt_strf("kernel '%s': cannot make its cache key: %s",
                               name ? name : "(unnamed)",
                               st == RT_ERR_INVALID ? "invalid source or options"
                                                    : rt_status_str(st));
        return true;
    }
    const char *arch = opts && opts->arch ? opts->arch : RT_DEFAULT_ARCH;
    rt_cache_lookup r = rt_cache_get(c, *key, arch, &out->code);
    if (r != RT_CACHE_HIT_MEMORY && r != RT_CACHE_HIT_DISK) return false;
    out->log = rt_strf("%s", "");
    if (!out->log) {
        rt_blob_free(&out->code);
        out->status = RT_ERR_NOMEM;
        return true;
    }
    out->status = RT_OK;
    out->ms = rt_now_ms() - t0;
    *how = r;
    return true;
}

rt_status rt_cache_compile(rt_cache *c, const char *name, const char *source,
                           const rt_compile_opts *opts, unsigned flags,
                           rt_compile_result *out, rt_cache_lookup *how)
{
    rt_cache_lookup dummy;
    if (!how) how = &dummy;
    *how = RT_CACHE_MISS;
    if (!out) return RT_ERR_INVALID;
    if (!c || (flags & RT_CACHE_NO_CACHE)) {
        rt_status st = rt_nvrtc_compile(name, source, opts, RT_TARGET_CUBIN, out);
        count_compiles(c, 1);
        return st;
    }
    rt_cache_key key;
    if (lookup_unit(c, name, source, opts, out, how, &key)) return out->status;
    rt_status st = rt_nvrtc_compile(name, source, opts, RT_TARGET_CUBIN, out);
    count_compiles(c, 1);
    if (st == RT_OK) rt_cache_put(c, key, opts && opts->arch ? opts->arch : RT_DEFAULT_ARCH, &out->code);
    return st;
}

typedef struct progress_map {
    rt_progress_fn fn;
    void *user;
    const int *index; /* compile slot -> unit index */
} progress_map;

static void progress_remap(void *user, int done, int total, int index, const rt_compile_result *r)
{
    progress_map *m = user;
    m->fn(m->user, done, total, m->index[index], r);
}

rt_status rt_cache_compile_many(rt_cache *c, int n, const char *const names[],
                                const char *const sources[], const rt_compile_opts *opts,
                                unsigned flags, rt_compile_result out[], rt_cache_lookup how[],
                                int nthreads, rt_progress_fn progress, void *user)
{
    if (n < 0 || (n > 0 && (!sources || !out))) return RT_ERR_INVALID;
    if (n == 0) return RT_OK;
    bool bypass = !c || (flags & RT_CACHE_NO_CACHE);
    int *idx = malloc(sizeof(int) * (size_t)n);
    rt_cache_key *keys = malloc(sizeof(rt_cache_key) * (size_t)n);
    const char **mnames = malloc(sizeof(char *) * (size_t)n);
    const char **msrcs = malloc(sizeof(char *) * (size_t)n);
    rt_compile_result *mout = calloc((size_t)n, sizeof *mout);
    rt_status st = RT_OK;
    if (!idx || !keys || !mnames || !msrcs || !mout) {
        st = RT_ERR_NOMEM;
        goto done;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        rt_cache_lookup h = RT_CACHE_MISS;
        const char *name = names ? names[i] : NULL;
        if (bypass) memset(&out[i], 0, sizeof out[i]);
        if (bypass || !lookup_unit(c, name, sources[i], opts, &out[i], &h, &keys[m])) {
            idx[m] = i;
            mnames[m] = name;
            msrcs[m] = sources[i];
            m++;
        }
        if (how) how[i] = h;
    }
    progress_map pm = {progress, user, idx};
    rt_nvrtc_compile_many(m, mnames, msrcs, opts, RT_TARGET_CUBIN, mout, nthreads,
                          progress ? progress_remap : NULL, &pm);
    count_compiles(c, m);
    const char *arch = opts && opts->arch ? opts->arch : RT_DEFAULT_ARCH;
    for (int j = 0; j < m; j++) {
        out[idx[j]] = mout[j];
        if (!bypass && mout[j].status == RT_OK) rt_cache_put(c, keys[j], arch, &mout[j].code);
    }
    for (int i = 0; i < n; i++)
        if (out[i].status != RT_OK) {
            st = out[i].status;
            break;
        }
done:
    free(idx);
    free(keys);
    free(mnames);
    free(msrcs);
    free(mout);
    return st;
}

/* ---- maintenance ---------------------------------------------------------------- */

static rt_status maint_fail(rt_cache *c, rt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static rt_status maint_fail(rt_cache *c, rt_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return st;
}

/* Calls visit for every file in <v1>/<arch>/ (arch dirs not starting with
 * '.'); visit returns false to stop. */
typedef bool (*visit_fn)(void *user, const char *arch, const char *name, const char *path,
                         const struct stat *st);

static rt_status walk(rt_cache *c, visit_fn visit, void *user)
{
    if (!c) return RT_ERR_INVALID;
    c->err[0] = '\0';
    if (!c->root) return maint_fail(c, RT_ERR_INVALID, "the cache is memory-only");
    DIR *top = opendir(c->v1);
    if (!top) {
        if (errno == ENOENT) return RT_OK;
        return maint_fail(c, RT_ERR_IO, "cannot read %s: %s", c->v1, strerror(errno));
    }
    rt_status st = RT_OK;
    bool stop = false;
    struct dirent *a;
    while (!stop && (a = readdir(top))) {
        if (a->d_name[0] == '.') continue;
        char *adir = rt_strf("%s/%s", c->v1, a->d_name);
        if (!adir) { st = RT_ERR_NOMEM; break; }
        struct stat ast;
        if (lstat(adir, &ast) != 0 || !S_ISDIR(ast.st_mode)) {
            free(adir);
            continue;
        }
        DIR *d = opendir(adir);
        if (!d) {
            st = maint_fail(c, RT_ERR_IO, "cannot read %s: %s", adir, strerror(errno));
            free(adir);
            continue;
        }
        struct dirent *f;
        while (!stop && (f = readdir(d))) {
            if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, "..")) continue;
            char *path = rt_strf("%s/%s", adir, f->d_name);
            if (!path) { st = RT_ERR_NOMEM; stop = true; break; }
            struct stat fst;
            if (lstat(path, &fst) == 0 && !visit(user, a->d_name, f->d_name, path, &fst)) stop = true;
            free(path);
        }
        closedir(d);
        free(adir);
    }
    closedir(top);
    return st;
}

typedef struct list_ctx {
    rt_cache_entry_fn fn;
    void *user;
} list_ctx;

static bool list_visit(void *user, const char *arch, const char *name, const char *path,
                       const struct stat *st)
{
    list_ctx *x = user;
    rt_cache_key k;
    if (name[0] == '.' || !S_ISREG(st->st_mode) || !parse_entry_name(name, &k)) return true;
    char hex[33];
    memcpy(hex, name, 32);
    hex[32] = '\0';
    rt_cache_entry e = {path, arch, hex, (uint64_t)st->st_size, st->st_mtime};
    return x->fn(x->user, &e);
}

rt_status rt_cache_list(rt_cache *c, rt_cache_entry_fn fn, void *user)
{
    if (!fn) return RT_ERR_INVALID;
    list_ctx x = {fn, user};
    return walk(c, list_visit, &x);
}

typedef struct verify_ctx {
    rt_cache_verify_stats *vs;
    time_t now;
    bool nomem;
} verify_ctx;

static bool verify_visit(void *user, const char *arch, const char *name, const char *path,
                         const struct stat *st)
{
    verify_ctx *x = user;
    rt_cache_key k;
    if (name[0] == '.') {
        if (S_ISREG(st->st_mode) && x->now - st->st_mtime > STALE_TEMP_SECONDS && unlink(path) == 0)
            x->vs->stale_temps_removed++;
        return true;
    }
    if (!parse_entry_name(name, &k)) {
        x->vs->other_files++;
        return true;
    }
    entry_read e;
    read_entry(path, k, false, &e);
    if (e.state == ENTRY_NOMEM) {
        x->nomem = true;
        return false;
    }
    if (e.state == ENTRY_OK) {
        x->vs->ok++;
        x->vs->bytes_ok += (uint64_t)st->st_size;
    } else if (e.state == ENTRY_CORRUPT) {
        if (remove_if_same(path, e.dev, e.ino)) x->vs->corrupt_removed++;
    }
    return true;
}

rt_status rt_cache_verify(rt_cache *c, rt_cache_verify_stats *vs)
{
    rt_cache_verify_stats dummy;
    if (!vs) vs = &dummy;
    memset(vs, 0, sizeof *vs);
    verify_ctx x = {vs, time(NULL), false};
    rt_status st = walk(c, verify_visit, &x);
    return x.nomem ? RT_ERR_NOMEM : st;
}

/* rm -r without following links; counts files removed. */
static int remove_tree(const char *path, uint64_t *files)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : errno;
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0) return errno;
        (*files)++;
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) return errno;
    int err = 0;
    struct dirent *f;
    while ((f = readdir(d))) {
        if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, "..")) continue;
        char *sub = rt_strf("%s/%s", path, f->d_name);
        if (!sub) { err = ENOMEM; break; }
        int e = remove_tree(sub, files);
        if (e && !err) err = e;
        free(sub);
    }
    closedir(d);
    if (!err && rmdir(path) != 0 && errno != ENOENT) err = errno;
    return err;
}

rt_status rt_cache_clear(rt_cache *c, uint64_t *removed)
{
    uint64_t dummy = 0;
    if (!removed) removed = &dummy;
    *removed = 0;
    if (!c) return RT_ERR_INVALID;
    c->err[0] = '\0';
    pthread_mutex_lock(&c->mu);
    map_free(c);
    pthread_mutex_unlock(&c->mu);
    if (!c->root) return RT_OK;
    int err = remove_tree(c->v1, removed);
    if (err == ENOMEM) return RT_ERR_NOMEM;
    if (err) return maint_fail(c, RT_ERR_IO, "cannot remove %s: %s", c->v1, strerror(err));
    return RT_OK;
}
