/* runtime/rt_cache.c — the kernel cache object: open and close, warnings,
 * statistics, get and put (the memory map in front of the disk), and
 * compiling through the cache. The key, the map, the entry files and the
 * maintenance commands live in their own files (rt_cache_internal.h lists
 * them).
 *
 * One mutex guards the map, the counters and the warnings; disk reads and
 * writes run outside it. The map owns a copy of every cubin and hands out
 * copies, so a caller's blob never aliases the cache. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_cache.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/rt_cache_internal.h"
#include "runtime/rt_util.h"

/* ---- directory resolution -------------------------------------------------- */

rt_status rt_cache_resolve_dir(rt_getenv_fn getenv_fn, void *user, char **out)
{
    if (!out) return RT_ERR_INVALID;
    *out = NULL;
    const char *v;
    if ((v = rt_env_get(getenv_fn, user, "KILN_CACHE_DIR"))) *out = rt_strf("%s", v);
    /* the XDG spec: a relative XDG_CACHE_HOME is invalid and is ignored */
    else if ((v = rt_env_get(getenv_fn, user, "XDG_CACHE_HOME")) && v[0] == '/') *out = rt_strf("%s/kiln", v);
    else if ((v = rt_env_get(getenv_fn, user, "HOME"))) *out = rt_strf("%s/.cache/kiln", v);
    else return RT_ERR_IO;
    return *out ? RT_OK : RT_ERR_NOMEM;
}

/* ---- the object ------------------------------------------------------------- */

void rt_cache_warn_locked(rt_cache *c, const char *fmt, ...)
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

/* The root (followed if a link) and v1 and every directory in it (never
 * followed): the user's, and writable by nobody else. */
static bool trusted_tree(const char *root, const char *v1, char *why, size_t n)
{
    if (!rt_cache_dir_trusted(root, true, why, n) || !rt_cache_dir_trusted(v1, false, why, n)) return false;
    DIR *d = opendir(v1);
    if (!d) {
        snprintf(why, n, "cannot read %s: %s", v1, strerror(errno));
        return false;
    }
    bool ok = true;
    struct dirent *a;
    while (ok && (a = readdir(d))) {
        if (a->d_name[0] == '.') continue;
        char *sub = rt_strf("%s/%s", v1, a->d_name);
        struct stat st;
        if (!sub) ok = false, snprintf(why, n, "out of memory");
        else if (lstat(sub, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)))
            ok = rt_cache_dir_trusted(sub, false, why, n);
        free(sub);
    }
    closedir(d);
    return ok;
}

/* KILN_CACHE_MAX_MB (0: no cap), else the default. */
static uint64_t max_bytes(rt_cache *c, const rt_cache_config *cfg)
{
    const char *v = rt_env_get(cfg->getenv, cfg->getenv_user, "KILN_CACHE_MAX_MB");
    uint64_t mb = RT_CACHE_DEFAULT_MAX_MB;
    if (v) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || x > (UINT64_MAX >> 20))
            rt_cache_warn_locked(c, "kiln cache: KILN_CACHE_MAX_MB=%s is not a number of MiB; using %d", v,
                                 RT_CACHE_DEFAULT_MAX_MB);
        else mb = x;
    }
    return mb << 20;
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
            rt_cache_warn_locked(c, "kiln cache: no cache directory (set KILN_CACHE_DIR, XDG_CACHE_HOME or "
                           "HOME); caching in memory only");
        } else {
            char *v1 = rt_strf("%s/v1", root);
            if (!v1) {
                free(root);
                rt_cache_close(c);
                return RT_ERR_NOMEM;
            }
            int err = rt_cache_mkdirs(v1);
            char why[700] = "";
            if (err) snprintf(why, sizeof why, "cannot create %s (%s)", v1, strerror(err));
            else if (!trusted_tree(root, v1, why, sizeof why)) err = EPERM;
            else if ((err = rt_cache_secret_load(v1, c->secret, why, sizeof why)) == ENOMEM) {
                free(root);
                free(v1);
                rt_cache_close(c);
                return RT_ERR_NOMEM;
            }
            if (err) {
                rt_cache_warn_locked(c, "kiln cache: %s; caching in memory only", why);
                free(root);
                free(v1);
            } else {
                c->root = root;
                c->v1 = v1;
                c->max_bytes = max_bytes(c, cfg);
            }
        }
    }
    *out = c;
    return RT_OK;
}

void rt_cache_close(rt_cache *c)
{
    if (!c) return;
    rt_cache_map_free(c);
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

/* ---- get / put ---------------------------------------------------------------- */

rt_cache_lookup rt_cache_get(rt_cache *c, rt_cache_key key, const char *arch, rt_blob *out)
{
    return rt_cache_get_ex(c, key, arch, out, NULL, 0);
}

rt_cache_lookup rt_cache_get_ex(rt_cache *c, rt_cache_key key, const char *arch, rt_blob *out, char *why, size_t whyn)
{
    if (why && whyn) why[0] = 0;
    if (!out) return RT_CACHE_ERROR;
    out->data = NULL;
    out->size = 0;
    if (!c || !rt_nvrtc_arch_valid(arch)) return RT_CACHE_ERROR;

    pthread_mutex_lock(&c->mu);
    rt_cache_slot *s = rt_cache_map_find(c, key);
    if (s) {
        out->data = rt_cache_bytes_dup(s->data, s->size);
        if (out->data) {
            out->size = s->size;
            c->st.mem_hits++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (s) return out->data ? RT_CACHE_HIT_MEMORY : RT_CACHE_ERROR;

    if (c->root) {
        char *path = rt_cache_file_path(c, key, arch);
        char *dir = rt_strf("%s/%s", c->v1, arch);
        if (!path || !dir) {
            free(path);
            free(dir);
            return RT_CACHE_ERROR;
        }
        bool usable = rt_cache_arch_dir_ok(c, dir);
        free(dir);
        rt_cache_file e;
        memset(&e, 0, sizeof e);
        e.state = RT_CACHE_FILE_MISSING;
        if (usable) rt_cache_file_read(path, key, c->secret, RT_CACHE_READ_PAYLOAD | RT_CACHE_READ_TOUCH, &e);
        if (e.state == RT_CACHE_FILE_NOMEM) {
            free(path);
            return RT_CACHE_ERROR;
        }
        if (e.state == RT_CACHE_FILE_OK) {
            unsigned char *copy = rt_cache_bytes_dup(e.blob.data, e.blob.size);
            pthread_mutex_lock(&c->mu);
            c->st.disk_hits++;
            if (copy && (rt_cache_map_find(c, key) || !rt_cache_map_insert(c, key, copy, e.blob.size))) free(copy);
            pthread_mutex_unlock(&c->mu);
            free(path);
            *out = e.blob;
            return RT_CACHE_HIT_DISK;
        }
        if (e.state == RT_CACHE_FILE_CORRUPT) {
            bool removed = rt_cache_file_remove_if_same(path, e.dev, e.ino);
            pthread_mutex_lock(&c->mu);
            c->st.corrupt_removed++;
            rt_cache_warn_locked(c, "kiln cache: %s entry %s (%s)", removed ? "removed corrupt" : "corrupt",
                        path, e.why);
            if (why && whyn) snprintf(why, whyn, "%s entry %s (%s)", removed ? "removed corrupt" : "corrupt", path, e.why);
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
    return rt_cache_put_ex(c, key, arch, blob, NULL);
}

rt_status rt_cache_put_ex(rt_cache *c, rt_cache_key key, const char *arch, const rt_blob *blob, const char *manifest)
{
    if (!c || !blob || !blob->data || blob->size == 0 || !rt_nvrtc_arch_valid(arch))
        return RT_ERR_INVALID;
    unsigned char *copy = rt_cache_bytes_dup(blob->data, blob->size);
    if (!copy) return RT_ERR_NOMEM;
    pthread_mutex_lock(&c->mu);
    bool ok = true;
    if (rt_cache_map_find(c, key)) free(copy);
    else if (!rt_cache_map_insert(c, key, copy, blob->size)) ok = false;
    pthread_mutex_unlock(&c->mu);
    if (!ok) {
        free(copy);
        return RT_ERR_NOMEM;
    }
    if (!c->root) return RT_OK;

    char *dir = rt_strf("%s/%s", c->v1, arch);
    int err = dir ? rt_cache_mkdirs(dir) : ENOMEM;
    uint64_t bytes = 0;
    if (!err && !rt_cache_arch_dir_ok(c, dir)) err = EPERM;
    if (!err) err = rt_cache_file_write(dir, key, c->secret, manifest, blob, c->fsync, &bytes);
    pthread_mutex_lock(&c->mu);
    if (err) {
        c->st.write_failures++;
        if (!c->warned_write) {
            c->warned_write = true;
            rt_cache_warn_locked(c, "kiln cache: cannot write to %s (%s); further write failures are "
                           "only counted", dir ? dir : c->v1, strerror(err));
        }
    } else {
        c->st.writes++;
    }
    pthread_mutex_unlock(&c->mu);
    if (!err) {
        char *path = rt_cache_file_path(c, key, arch);
        rt_cache_enforce_cap(c, bytes, path);
        free(path);
    }
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

/* A compile's result, stored with its manifest (what made its key). */
static void put_compiled(rt_cache *c, rt_cache_key key, const char *name, const char *source, const rt_compile_opts *opts,
                         const rt_blob *code)
{
    char *manifest = rt_cache_manifest_make(name, source, opts);
    rt_cache_put_ex(c, key, opts && opts->arch ? opts->arch : RT_DEFAULT_ARCH, code, manifest);
    free(manifest);
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
    if (st == RT_OK) put_compiled(c, key, name, source, opts, &out->code);
    return st;
}

typedef struct progress_map {
    rt_progress_fn fn;
    void *user;
    const int *unit; /* compile slot (a miss) -> unit index */
} progress_map;

static void progress_remap(void *user, int done, int total, int index, const rt_compile_result *r)
{
    progress_map *remap = user;
    remap->fn(remap->user, done, total, remap->unit[index], r);
}

rt_status rt_cache_compile_many(rt_cache *c, int n, const char *const names[],
                                const char *const sources[], const rt_compile_opts *opts,
                                unsigned flags, rt_compile_result out[], rt_cache_lookup how[],
                                int nthreads, rt_progress_fn progress, void *user)
{
    if (n < 0 || (n > 0 && (!sources || !out))) return RT_ERR_INVALID;
    if (n == 0) return RT_OK;
    bool bypass = !c || (flags & RT_CACHE_NO_CACHE);
    int *miss_unit = malloc(sizeof(int) * (size_t)n);
    rt_cache_key *miss_keys = malloc(sizeof(rt_cache_key) * (size_t)n);
    const char **miss_names = malloc(sizeof(char *) * (size_t)n);
    const char **miss_sources = malloc(sizeof(char *) * (size_t)n);
    rt_compile_result *miss_out = calloc((size_t)n, sizeof *miss_out);
    rt_status st = RT_OK;
    if (!miss_unit || !miss_keys || !miss_names || !miss_sources || !miss_out) {
        st = RT_ERR_NOMEM;
        goto done;
    }
    int nmiss = 0;
    for (int i = 0; i < n; i++) {
        rt_cache_lookup found = RT_CACHE_MISS;
        const char *name = names ? names[i] : NULL;
        if (bypass) memset(&out[i], 0, sizeof out[i]);
        if (bypass || !lookup_unit(c, name, sources[i], opts, &out[i], &found, &miss_keys[nmiss])) {
            miss_unit[nmiss] = i;
            miss_names[nmiss] = name;
            miss_sources[nmiss] = sources[i];
            nmiss++;
        }
        if (how) how[i] = found;
    }
    progress_map remap = {progress, user, miss_unit};
    rt_nvrtc_compile_many(nmiss, miss_names, miss_sources, opts, RT_TARGET_CUBIN, miss_out, nthreads,
                          progress ? progress_remap : NULL, &remap);
    count_compiles(c, nmiss);
    for (int j = 0; j < nmiss; j++) {
        out[miss_unit[j]] = miss_out[j];
        if (!bypass && miss_out[j].status == RT_OK)
            put_compiled(c, miss_keys[j], miss_names[j], miss_sources[j], opts, &miss_out[j].code);
    }
    for (int i = 0; i < n; i++)
        if (out[i].status != RT_OK) {
            st = out[i].status;
            break;
        }
done:
    free(miss_unit);
    free(miss_keys);
    free(miss_names);
    free(miss_sources);
    free(miss_out);
    return st;
}
