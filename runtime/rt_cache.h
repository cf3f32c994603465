/* runtime/rt_cache.h — the kernel cache: compiled cubins keyed by what made them.
 *
 * Key: XXH3-128 over (cache format version, Kiln version, NVRTC version, arch,
 * the options sorted, the full source), each field length-prefixed. Two
 * option lists that differ only in order give the same key.
 *
 * An rt_cache is an in-memory map (key -> cubin) in front of a disk cache at
 *   <root>/v1/<arch>/<32 hex digits of the key>.cubin
 * where root is cfg->dir, else $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln
 * (when absolute, as the XDG spec says), else $HOME/.cache/kiln. Each file
 * is a 48-byte header, the entry's manifest (JSON: what made its key,
 * rt_cache_manifest.c) and the payload (the cubin):
 *   0  "KILNCUBN"                    8 bytes, the magic
 *   8  format version (2)            u32 little-endian
 *   12 manifest length               u32 little-endian
 *   16 payload length                u64 little-endian
 *   24 checksum                      u64 little-endian: XXH3-64 keyed by the cache's
 *                                    secret over bytes 8-23, the key, manifest, payload
 *   32 the key                       16 bytes, XXH128 canonical (big-endian)
 * Files are written to a unique temp file in the same directory (mkstemp,
 * name starting with '.') and renamed into place, so readers never see a
 * partial entry and several processes may fill one cache at once.
 *
 * Trust (rt_cache_trust.c): the disk cache is used only when the root and
 * every directory under it are the user's and writable by nobody else (else
 * one warning and memory only); directories are created 0700, files 0600;
 * the checksum's secret is <v1>/.secret, so files not written by this cache
 * are never loaded. Entries are opened without following links or blocking,
 * must be regular files of the user's of at most RT_CACHE_MAX_ENTRY bytes.
 *
 * A file with a bad magic or version, a wrong length, another key or a
 * checksum mismatch is corrupt: it is deleted, counted, and reported as a
 * miss, so the caller rebuilds and stores it again; its bytes are never
 * returned. A cache directory that cannot be created gives one warning and
 * the cache then works in memory only. A hit sets the entry's mtime; when
 * the entries exceed KILN_CACHE_MAX_MB (default RT_CACHE_DEFAULT_MAX_MB; 0:
 * no cap) a put deletes the least recently used ones.
 *
 * One rt_cache may be shared by threads: a mutex inside the object guards
 * the map and the counters; disk reads and writes run outside it. */
#ifndef KILN_RT_CACHE_H
#define KILN_RT_CACHE_H
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "runtime/rt_nvrtc.h"

#define RT_CACHE_FORMAT_VERSION 2u
#define RT_CACHE_HEADER_SIZE 48
#define RT_CACHE_SECRET_SIZE 192                 /* bytes of <v1>/.secret */
#define RT_CACHE_MAX_ENTRY (512ull << 20)        /* a larger file is not an entry */
#define RT_CACHE_MAX_MANIFEST (64u << 10)
#define RT_CACHE_DEFAULT_MAX_MB 2048             /* KILN_CACHE_MAX_MB unset */

typedef struct rt_cache rt_cache;

typedef struct rt_cache_key {
    uint64_t hi, lo; /* XXH128_hash_t's high64, low64 */
} rt_cache_key;

/* Everything that goes into a key, spelled out (tests vary each field). */
typedef struct rt_cache_key_inputs {
    unsigned format_version;          /* RT_CACHE_FORMAT_VERSION */
    const char *kiln_version;         /* KILN_VERSION */
    int nvrtc_major, nvrtc_minor;     /* rt_nvrtc_version */
    const char *arch;                 /* "sm_90a" */
    const char *const *options;       /* any order */
    int noptions;
    const char *source;               /* NUL-terminated */
} rt_cache_key_inputs;

/* RT_ERR_NOMEM when sorting the options cannot allocate; RT_ERR_INVALID for
 * NULL strings. */
rt_status rt_cache_key_make(const rt_cache_key_inputs *in, rt_cache_key *out);

/* The key of a cubin compile of `source` with `opts` (NULL = defaults) by
 * this build of Kiln and the loaded NVRTC (rt_nvrtc_key_options). */
rt_status rt_cache_key_for(const char *source, const rt_compile_opts *opts, rt_cache_key *out);

/* 32 lowercase hex digits + NUL: hi then lo, as in the file name. */
void rt_cache_key_hex(rt_cache_key k, char out[33]);
bool rt_cache_key_equal(rt_cache_key a, rt_cache_key b);

/* The default cache root from the environment (see above); empty values
 * count as unset. getenv_fn NULL = the process environment. *out is
 * malloc'd. RT_ERR_IO when none of the variables is set. */
rt_status rt_cache_resolve_dir(rt_getenv_fn getenv_fn, void *user, char **out);

/* Receives each warning (one line, no newline) from inside the cache's
 * lock: it must not call back into the cache. */
typedef void (*rt_warn_fn)(void *user, const char *msg);

typedef struct rt_cache_config {
    const char *dir;       /* cache root; NULL = rt_cache_resolve_dir */
    bool no_disk;          /* memory only (no reads, no writes) */
    bool fsync;            /* fsync each entry before renaming it into place */
    rt_warn_fn warn;       /* NULL: keep warnings for rt_cache_take_warnings */
    void *warn_user;
    rt_getenv_fn getenv;   /* for the default root; NULL = getenv */
    void *getenv_user;
} rt_cache_config;

/* cfg NULL = defaults. Fails only on bad arguments or out of memory; a
 * disk problem is a warning and leaves a memory-only cache. */
rt_status rt_cache_open(rt_cache **out, const rt_cache_config *cfg);
void rt_cache_close(rt_cache *c); /* NULL-safe */

/* The cache root in use, or NULL when the cache is memory-only. */
const char *rt_cache_dir(const rt_cache *c);
bool rt_cache_disk_enabled(rt_cache *c);

/* Warnings not yet taken and not sent to cfg->warn, one per line;
 * malloc'd, NULL when none. */
char *rt_cache_take_warnings(rt_cache *c);

typedef enum rt_cache_lookup {
    RT_CACHE_ERROR = -1, /* bad argument or out of memory */
    RT_CACHE_MISS = 0,
    RT_CACHE_HIT_MEMORY,
    RT_CACHE_HIT_DISK,
} rt_cache_lookup;

/* On a hit, *out receives a malloc'd copy (free with rt_blob_free); on a
 * miss or an error it is empty. A disk hit also fills the memory map. arch
 * must be the arch the key was made with: it selects the directory on disk
 * (the memory map is keyed by the key alone, which already covers it). */
rt_cache_lookup rt_cache_get(rt_cache *c, rt_cache_key key, const char *arch, rt_blob *out);
/* The same; when it found the entry corrupt (and deleted it), why (n bytes)
 * says so, else why is "". */
rt_cache_lookup rt_cache_get_ex(rt_cache *c, rt_cache_key key, const char *arch, rt_blob *out, char *why, size_t n);

/* Store a copy in memory and on disk. A disk failure is counted (and the
 * first one warned about) but not an error: RT_OK unless the arguments are
 * bad or memory runs out. */
rt_status rt_cache_put(rt_cache *c, rt_cache_key key, const char *arch, const rt_blob *blob);
/* The same with the entry's manifest (JSON text; NULL: "{}"), as
 * rt_cache_compile* store it. */
rt_status rt_cache_put_ex(rt_cache *c, rt_cache_key key, const char *arch, const rt_blob *blob, const char *manifest);

typedef struct rt_cache_stats {
    uint64_t mem_hits, disk_hits, misses;
    uint64_t corrupt_removed;  /* corrupt files found (and deleted) by get */
    uint64_t writes;           /* entries written to disk */
    uint64_t write_failures;
    uint64_t compiles;         /* NVRTC compiles run by rt_cache_compile* */
    uint64_t warnings;
    uint64_t mem_entries, mem_bytes;
} rt_cache_stats;
void rt_cache_get_stats(rt_cache *c, rt_cache_stats *s);

/* ---- compile through the cache --------------------------------------------- */

enum {
    RT_CACHE_NO_CACHE = 1u << 0, /* --no-cache: compile, neither read nor store */
};

/* Cubin for (source, opts): key -> get -> on a miss rt_nvrtc_compile + put.
 * c NULL behaves as RT_CACHE_NO_CACHE. *out as from rt_nvrtc_compile; on a
 * hit its log is "" and ms the lookup time. *how (may be NULL) says where the
 * cubin came from (RT_CACHE_MISS = compiled). Returns out->status. */
rt_status rt_cache_compile(rt_cache *c, const char *name, const char *source,
                           const rt_compile_opts *opts, unsigned flags,
                           rt_compile_result *out, rt_cache_lookup *how);

/* The same for n units: all lookups first, then the misses compiled in
 * parallel (rt_nvrtc_compile_many: nthreads, progress as there; progress
 * indices are unit indices and it is called for compiled units only), then
 * stored. how may be NULL. Returns RT_OK or the lowest-indexed failure. */
rt_status rt_cache_compile_many(rt_cache *c, int n, const char *const names[],
                                const char *const sources[], const rt_compile_opts *opts,
                                unsigned flags, rt_compile_result out[], rt_cache_lookup how[],
                                int nthreads, rt_progress_fn progress, void *user);

/* ---- maintenance: `kiln cache ls|verify|clear` ----------------------------- */

typedef struct rt_cache_entry {
    const char *path;     /* full path of the file */
    const char *arch;     /* its <arch> directory */
    const char *hex;      /* the key from the file name */
    uint64_t size;        /* bytes on disk, header included */
    time_t mtime;         /* its last use (hits touch it) */
    const char *manifest; /* what made its key (JSON, rt_cache_manifest.c), NULL when the entry does not check */
    const char *problem;  /* why it does not check, or NULL */
} rt_cache_entry;

/* An entry's manifest in words, for `kiln cache ls`: "KERNEL  Kiln V, NVRTC
 * V, options ...\n   group ...". False when it does not parse. */
bool rt_cache_manifest_describe(const char *manifest, char *out, size_t n);

/* Return false to stop. */
typedef bool (*rt_cache_entry_fn)(void *user, const rt_cache_entry *e);

/* Receives what ls, verify and clear find and do not (or cannot) handle:
 * an untrusted arch directory, an entry that cannot be checked or deleted,
 * a file that is not Kiln's; what says which, in words. */
typedef void (*rt_cache_problem_fn)(void *user, const char *path, const char *what);
void rt_cache_set_problem_fn(rt_cache *c, rt_cache_problem_fn fn, void *user);

/* Every entry file under <root>/v1 (temp files skipped), in directory order,
 * with its manifest. RT_ERR_IO when the root cannot be read; a missing v1
 * tree is no entries. Untrusted arch directories are reported, not read. */
rt_status rt_cache_list(rt_cache *c, rt_cache_entry_fn fn, void *user);

typedef struct rt_cache_verify_stats {
    uint64_t ok, corrupt_removed, stale_temps_removed, other_files;
    uint64_t bytes_ok;
    uint64_t unchecked;   /* entries (or arch directories) that could not be checked: reported */
    uint64_t undeletable; /* corrupt entries or stale temp files that could not be deleted: reported */
} rt_cache_verify_stats;

/* Check every entry (header, length, key vs. file name, checksum), delete
 * the corrupt ones and temp files older than an hour (left by a writer that
 * died); files not named like entries are counted, not touched. Everything
 * it cannot check or delete is counted and reported (the problem fn). */
rt_status rt_cache_verify(rt_cache *c, rt_cache_verify_stats *st);

/* Delete Kiln's files under <root>/v1 — entries and temp files — and the
 * arch directories they leave empty, and empty the memory map; anything
 * else is left and reported. *removed (may be NULL) counts the files
 * deleted. */
rt_status rt_cache_clear(rt_cache *c, uint64_t *removed);

/* `kiln cache why`: for a kernel (name, source, opts as compiled), whether
 * its entry is on disk, and otherwise the entry of the same kernel name that
 * differs in the fewest key inputs (the newest of equals) and how. */
typedef struct rt_cache_explanation {
    char key[33];        /* the key this compile has */
    bool hit;            /* its entry is on disk and checks */
    int same_kernel;     /* entries of the same kernel name with another key */
    int ndiff;           /* key inputs in which the nearest differs; -1: none found */
    char nearest[64];    /* "<arch>/<hex>" */
    time_t nearest_mtime;
    char diff[1024];     /* rt_cache_manifest_diff's words */
} rt_cache_explanation;
rt_status rt_cache_explain(rt_cache *c, const char *name, const char *source, const rt_compile_opts *opts,
                           rt_cache_explanation *x);

/* Why the last maintenance call failed, or "" (owned by c). Not updated
 * by get/put/compile; for use from one thread. */
const char *rt_cache_error(rt_cache *c);

#endif
