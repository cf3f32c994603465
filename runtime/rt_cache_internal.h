/* runtime/rt_cache_internal.h — what the kernel cache's files share. Callers
 * use rt_cache.h; this header is for the cache's own files, one per thing
 * the cache owns:
 *   rt_cache.c        the object: open and close, warnings, statistics, get
 *                     and put, compiling through the cache
 *   rt_cache_key.c    the key (XXH3-128 over what made a cubin) and the entry
 *                     file name it gives
 *   rt_cache_map.c    the memory map
 *   rt_cache_file.c   the on-disk entry: header, keyed checksum, temp file
 *                     and rename, corrupt entries deleted only if unchanged
 *   rt_cache_trust.c  who the cache trusts: directory ownership and modes,
 *                     the cache's secret
 *   rt_cache_manifest.c  what made an entry's key, recorded with it, and
 *                     how two of them differ (`kiln cache why`)
 *   rt_cache_maint.c  the maintenance commands: ls, verify, clear, why, and
 *                     the size cap's eviction */
#ifndef KILN_RT_CACHE_INTERNAL_H
#define KILN_RT_CACHE_INTERNAL_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "runtime/rt_cache.h"

/* ---- little- and big-endian fields of the key and the header -------------- */

static inline void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (56 - 8 * i));
}
static inline uint32_t get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

/* ---- the object (rt_cache.c) ------------------------------------------------- */

typedef struct rt_cache_slot {
    rt_cache_key key;
    unsigned char *data; /* NULL = empty slot */
    size_t size;
} rt_cache_slot;

struct rt_cache {
    pthread_mutex_t mu;
    char *root;  /* NULL = memory only; immutable after open */
    char *v1;    /* root/v1 */
    unsigned char secret[RT_CACHE_SECRET_SIZE]; /* keys the entries' checksums (rt_cache_trust.c) */
    uint64_t max_bytes;   /* the size cap (KILN_CACHE_MAX_MB); 0: none */
    bool scanned;         /* disk_bytes was counted once */
    uint64_t disk_bytes;  /* entries on disk, as this process knows them */
    bool warned_untrusted;
    rt_cache_problem_fn problem; /* maintenance reports (rt_cache_set_problem_fn) */
    void *problem_user;
    bool fsync;
    rt_warn_fn warn;
    void *warn_user;
    char *pending; /* warnings for take_warnings, '\n'-separated */
    bool warned_write;
    rt_cache_slot *slots;
    size_t cap, count;
    rt_cache_stats st;
    char err[512];
};

/* The cache's files that are not entries. */
#define RT_CACHE_SECRET_NAME ".secret"

/* Records a warning (to cfg->warn or the pending list), under c->mu. */
void rt_cache_warn_locked(rt_cache *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the key's file name (rt_cache_key.c) --------------------------------------- */

/* "<32 lowercase hex>.cubin" -> key; false for any other name. */
bool rt_cache_key_from_name(const char *name, rt_cache_key *k);

/* ---- the memory map (rt_cache_map.c), all under c->mu ------------------------------ */

rt_cache_slot *rt_cache_map_find(rt_cache *c, rt_cache_key k);
/* Takes ownership of data on success (true). */
bool rt_cache_map_insert(rt_cache *c, rt_cache_key k, unsigned char *data, size_t size);
/* Empties the map. */
void rt_cache_map_free(rt_cache *c);
/* A malloc'd copy of n bytes plus a NUL (PTX-friendly; not part of the blob). */
unsigned char *rt_cache_bytes_dup(const unsigned char *p, size_t n);

/* ---- entry files (rt_cache_file.c) ------------------------------------------------ */

/* What reading an entry file found. */
typedef enum rt_cache_file_state {
    RT_CACHE_FILE_OK,
    RT_CACHE_FILE_MISSING,
    RT_CACHE_FILE_CORRUPT,    /* to be deleted and rebuilt, never loaded */
    RT_CACHE_FILE_UNREADABLE, /* left alone: it may be fine for its owner */
    RT_CACHE_FILE_NOMEM,
} rt_cache_file_state;

typedef struct rt_cache_file {
    rt_cache_file_state state;
    const char *why; /* for CORRUPT / UNREADABLE */
    dev_t dev;
    ino_t ino;
    uint64_t size;   /* bytes on disk */
    rt_blob blob;    /* RT_CACHE_FILE_OK: the payload */
    char *manifest;  /* RT_CACHE_FILE_OK with want_manifest: its NUL-terminated JSON */
} rt_cache_file;

enum {
    RT_CACHE_READ_PAYLOAD = 1u << 0,  /* keep the payload in blob */
    RT_CACHE_READ_MANIFEST = 1u << 1, /* keep the manifest */
    RT_CACHE_READ_TOUCH = 1u << 2,    /* a use: set the file's mtime (the size cap evicts the oldest) */
};

/* Read and validate the entry at path for key k (a regular file owned by
 * the user, at most RT_CACHE_MAX_ENTRY bytes; header, lengths, key,
 * checksum keyed by secret). Opened without following links or blocking.
 * flags: RT_CACHE_READ_*; what is not kept is freed. Free e with
 * rt_cache_file_free. */
void rt_cache_file_read(const char *path, rt_cache_key k, const unsigned char *secret, unsigned flags,
                        rt_cache_file *e);
void rt_cache_file_free(rt_cache_file *e);
/* Write an entry for k with its manifest (JSON text, may be NULL: "{}")
 * into dir (which must exist) through a 0600 temp file renamed into place;
 * 0 or an errno. *bytes (may be NULL) gets the file's size. */
int rt_cache_file_write(const char *dir, rt_cache_key k, const unsigned char *secret, const char *manifest,
                        const rt_blob *b, bool do_fsync, uint64_t *bytes);
/* Unlink path only if it is still the file that was read (dev, ino). */
bool rt_cache_file_remove_if_same(const char *path, dev_t dev, ino_t ino);
/* <v1>/<arch>/<hex>.cubin, malloc'd. */
char *rt_cache_file_path(const rt_cache *c, rt_cache_key k, const char *arch);
/* mkdir -p, each directory it creates 0700; 0 or an errno. */
int rt_cache_mkdirs(const char *path);

/* ---- trust (rt_cache_trust.c) ------------------------------------------------------ */

/* True when path is a directory owned by the user and not writable by group
 * or others; follow: stat (the root may be a link), else lstat (a link
 * under the root is not trusted). Otherwise false with the reason in why. */
bool rt_cache_dir_trusted(const char *path, bool follow, char *why, size_t n);
/* Reads <v1>/.secret, creating it (random, 0600) when absent; 0 or an errno
 * with the reason in why. */
int rt_cache_secret_load(const char *v1, unsigned char secret[RT_CACHE_SECRET_SIZE], char *why, size_t n);
/* The arch directory <v1>/<arch> before get or put uses it: trusted, or a
 * warning (once per cache) and false. Call without c->mu. */
bool rt_cache_arch_dir_ok(rt_cache *c, const char *dir);

/* ---- manifests (rt_cache_manifest.c) ---------------------------------------------- */

/* The manifest of a compile (JSON text, malloc'd, NULL when out of memory):
 * the kernel's name, its group line, the format, Kiln and NVRTC versions,
 * the arch, the options (sorted), the source's length and hash, and a hash
 * per section of the source (each embedded template, the generated part). */
char *rt_cache_manifest_make(const char *name, const char *source, const rt_compile_opts *opts);
/* How many key inputs differ between an entry's manifest (have) and a
 * compile's (want), described in out ("Kiln version 0.1.0 -> 0.1.1;
 * options +-lineinfo; source codegen/kernels/gemv.cuh changed"); -1 when
 * either does not parse. */
int rt_cache_manifest_diff(const char *have, const char *want, char *out, size_t n);

/* ---- the size cap (rt_cache_maint.c) ---------------------------------------------- */

/* After put wrote an entry of `bytes` (keep: its path): counts the cache
 * once, and when it exceeds the cap deletes the least recently used entries
 * until it is under nine tenths of it. */
void rt_cache_enforce_cap(rt_cache *c, uint64_t bytes, const char *keep);

#endif
