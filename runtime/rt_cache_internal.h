/* runtime/rt_cache_internal.h — what the kernel cache's files share. Callers
 * use rt_cache.h; this header is for the cache's own files, one per thing
 * the cache owns:
 *   rt_cache.c        the object: open and close, warnings, statistics, get
 *                     and put, compiling through the cache
 *   rt_cache_key.c    the key (XXH3-128 over what made a cubin) and the entry
 *                     file name it gives
 *   rt_cache_map.c    the memory map
 *   rt_cache_file.c   the on-disk entry: header, checksum, temp file and
 *                     rename, corrupt entries deleted only if unchanged
 *   rt_cache_maint.c  the maintenance commands: ls, verify, clear */
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
    rt_blob blob; /* RT_CACHE_FILE_OK: the payload */
} rt_cache_file;

/* Read and validate the entry at path for key k (header, length, key,
 * checksum). want_payload false: check only, the payload is freed. */
void rt_cache_file_read(const char *path, rt_cache_key k, bool want_payload, rt_cache_file *e);
/* Write an entry for k into dir (which must exist) through a temp file
 * renamed into place; 0 or an errno. */
int rt_cache_file_write(const char *dir, rt_cache_key k, const rt_blob *b, bool do_fsync);
/* Unlink path only if it is still the file that was read (dev, ino). */
bool rt_cache_file_remove_if_same(const char *path, dev_t dev, ino_t ino);
/* <v1>/<arch>/<hex>.cubin, malloc'd. */
char *rt_cache_file_path(const rt_cache *c, rt_cache_key k, const char *arch);
/* mkdir -p; 0 or an errno. */
int rt_cache_mkdirs(const char *path);

#endif
