/* runtime/rt_cache_maint.c — `kiln cache ls|verify|clear|why` (rt_cache.h)
 * and the size cap: walk <root>/v1/<arch>/, check entries with the reader
 * the cache itself uses, delete corrupt entries and stale temp files,
 * delete Kiln's own files and nothing else, explain a miss against the
 * nearest entry, evict the least recently used entries.
 *
 * An arch directory that is not trusted (a symbolic link, someone else's,
 * writable by others: rt_cache_trust.c) is used by none of them, as get and
 * put refuse it: reported, never entered. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/rt_cache_internal.h"
#include "runtime/rt_util.h"

#define STALE_TEMP_SECONDS 3600 /* a temp file this old was left by a writer that died */

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

void rt_cache_set_problem_fn(rt_cache *c, rt_cache_problem_fn fn, void *user)
{
    if (!c) return;
    c->problem = fn;
    c->problem_user = user;
}

static void problem(rt_cache *c, const char *path, const char *what)
{
    if (c->problem) c->problem(c->problem_user, path, what);
}

/* Calls visit for every file in <v1>/<arch>/ (arch dirs not starting with
 * '.', trusted); visit returns false to stop. An untrusted arch directory
 * is reported (counted in *untrusted when not NULL) and skipped. */
typedef bool (*visit_fn)(void *user, const char *arch, const char *name, const char *path,
                         const struct stat *st);

static rt_status walk_ex(rt_cache *c, visit_fn visit, void *user, uint64_t *untrusted, bool quiet)
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
        char why[600];
        if (lstat(adir, &ast) != 0 || (!S_ISDIR(ast.st_mode) && !S_ISLNK(ast.st_mode))) {
            if (!quiet) problem(c, adir, "not a directory: not Kiln's, left alone");
            free(adir);
            continue;
        }
        if (!rt_cache_dir_trusted(adir, false, why, sizeof why)) {
            if (untrusted) (*untrusted)++;
            if (!quiet) problem(c, adir, "not trusted (a link, someone else's or writable by others): not used");
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

static rt_status walk(rt_cache *c, visit_fn visit, void *user, uint64_t *untrusted)
{
    return walk_ex(c, visit, user, untrusted, false);
}

/* ".<hex>.XXXXXX": a temp file of rt_cache_file_write (".<32 hex>." and
 * mkstemp's six characters). */
static bool temp_name(const char *name)
{
    if (name[0] != '.') return false;
    size_t h = strspn(name + 1, "0123456789abcdef");
    if (h < 1 || h > 32 || name[1 + h] != '.') return false;
    const char *tail = name + 2 + h;
    return strlen(tail) == 6 && strspn(tail, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == 6;
}

/* ---- ls ----------------------------------------------------------------------------- */

typedef struct list_ctx {
    rt_cache *c;
    rt_cache_entry_fn fn;
    void *user;
} list_ctx;

static bool list_visit(void *user, const char *arch, const char *name, const char *path,
                       const struct stat *st)
{
    list_ctx *list = user;
    rt_cache_key k;
    if (name[0] == '.' || !rt_cache_key_from_name(name, &k)) return true;
    char hex[33];
    memcpy(hex, name, 32);
    hex[32] = '\0';
    rt_cache_file e;
    rt_cache_file_read(path, k, list->c->secret, RT_CACHE_READ_MANIFEST, &e);
    rt_cache_entry ent = {path, arch, hex, (uint64_t)st->st_size, st->st_mtime, e.manifest,
                          e.state == RT_CACHE_FILE_OK ? NULL : e.why ? e.why : "unreadable"};
    bool more = list->fn(list->user, &ent);
    rt_cache_file_free(&e);
    return more;
}

rt_status rt_cache_list(rt_cache *c, rt_cache_entry_fn fn, void *user)
{
    if (!fn) return RT_ERR_INVALID;
    list_ctx list = {c, fn, user};
    return walk(c, list_visit, &list, NULL);
}

/* ---- verify ------------------------------------------------------------------------- */

typedef struct verify_ctx {
    rt_cache *c;
    rt_cache_verify_stats *vs;
    time_t now;
    bool nomem;
} verify_ctx;

static bool verify_visit(void *user, const char *arch, const char *name, const char *path,
                         const struct stat *st)
{
    verify_ctx *verify = user;
    rt_cache_key k;
    if (name[0] == '.') {
        if (S_ISREG(st->st_mode) && verify->now - st->st_mtime > STALE_TEMP_SECONDS && temp_name(name)) {
            if (unlink(path) == 0) verify->vs->stale_temps_removed++;
            else {
                verify->vs->undeletable++;
                problem(verify->c, path, "a stale temp file that cannot be deleted");
            }
        }
        return true;
    }
    if (!rt_cache_key_from_name(name, &k)) {
        verify->vs->other_files++;
        return true;
    }
    rt_cache_file e;
    rt_cache_file_read(path, k, verify->c->secret, 0, &e);
    if (e.state == RT_CACHE_FILE_NOMEM) {
        verify->nomem = true;
        return false;
    }
    char what[300];
    if (e.state == RT_CACHE_FILE_OK) {
        verify->vs->ok++;
        verify->vs->bytes_ok += (uint64_t)st->st_size;
    } else if (e.state == RT_CACHE_FILE_CORRUPT) {
        if (rt_cache_file_remove_if_same(path, e.dev, e.ino)) {
            verify->vs->corrupt_removed++;
            snprintf(what, sizeof what, "corrupt (%s): deleted", e.why);
        } else {
            verify->vs->undeletable++;
            snprintf(what, sizeof what, "corrupt (%s) and cannot be deleted: %s", e.why, strerror(errno));
        }
        problem(verify->c, path, what);
    } else { /* unreadable, or vanished while we looked */
        verify->vs->unchecked++;
        snprintf(what, sizeof what, "cannot be checked (%s)", e.why ? e.why : "gone");
        problem(verify->c, path, what);
    }
    return true;
}

rt_status rt_cache_verify(rt_cache *c, rt_cache_verify_stats *vs)
{
    rt_cache_verify_stats dummy;
    if (!vs) vs = &dummy;
    memset(vs, 0, sizeof *vs);
    verify_ctx verify = {c, vs, time(NULL), false};
    rt_status st = walk(c, verify_visit, &verify, &vs->unchecked);
    return verify.nomem ? RT_ERR_NOMEM : st;
}

/* ---- clear -------------------------------------------------------------------------- */

typedef struct clear_ctx {
    rt_cache *c;
    uint64_t removed, left;
    int err;
} clear_ctx;

static bool clear_visit(void *user, const char *arch, const char *name, const char *path, const struct stat *st)
{
    clear_ctx *cl = user;
    rt_cache_key k;
    bool ours = (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) && (rt_cache_key_from_name(name, &k) || temp_name(name));
    if (!ours) {
        cl->left++;
        problem(cl->c, path, "not Kiln's: left alone");
        return true;
    }
    if (unlink(path) == 0) cl->removed++;
    else if (errno != ENOENT && !cl->err) cl->err = errno;
    return true;
}

rt_status rt_cache_clear(rt_cache *c, uint64_t *removed)
{
    uint64_t dummy = 0;
    if (!removed) removed = &dummy;
    *removed = 0;
    if (!c) return RT_ERR_INVALID;
    c->err[0] = '\0';
    pthread_mutex_lock(&c->mu);
    rt_cache_map_free(c);
    c->scanned = false;
    pthread_mutex_unlock(&c->mu);
    if (!c->root) return RT_OK;
    clear_ctx cl = {c, 0, 0, 0};
    rt_status st = walk(c, clear_visit, &cl, NULL);
    *removed = cl.removed;
    if (st != RT_OK) return st;
    /* the arch directories Kiln made, when nothing else is left in them */
    DIR *top = opendir(c->v1);
    struct dirent *a;
    while (top && (a = readdir(top))) {
        if (a->d_name[0] == '.') continue;
        char *adir = rt_strf("%s/%s", c->v1, a->d_name);
        struct stat ast;
        if (adir && lstat(adir, &ast) == 0 && S_ISDIR(ast.st_mode)) (void)rmdir(adir);
        free(adir);
    }
    if (top) closedir(top);
    if (cl.err == ENOMEM) return RT_ERR_NOMEM;
    if (cl.err) return maint_fail(c, RT_ERR_IO, "cannot remove entries in %s: %s", c->v1, strerror(cl.err));
    return RT_OK;
}

/* ---- why ---------------------------------------------------------------------------- */

typedef struct why_ctx {
    rt_cache *c;
    const char *kernel, *want;
    rt_cache_key key;
    rt_cache_explanation *x;
    bool nomem;
} why_ctx;

static bool why_visit(void *user, const char *arch, const char *name, const char *path, const struct stat *st)
{
    why_ctx *w = user;
    rt_cache_key k;
    if (name[0] == '.' || !rt_cache_key_from_name(name, &k)) return true;
    rt_cache_file e;
    rt_cache_file_read(path, k, w->c->secret, RT_CACHE_READ_MANIFEST, &e);
    if (e.state == RT_CACHE_FILE_NOMEM) {
        w->nomem = true;
        return false;
    }
    if (e.state != RT_CACHE_FILE_OK) return true;
    if (rt_cache_key_equal(k, w->key)) w->x->hit = true;
    json_t *m = json_loads(e.manifest, 0, NULL);
    bool same_kernel = m && !strcmp(json_string_value(json_object_get(m, "kernel")) ? json_string_value(json_object_get(m, "kernel")) : "", w->kernel);
    json_decref(m);
    if (same_kernel && !rt_cache_key_equal(k, w->key)) {
        char diff[sizeof w->x->diff];
        int nd = rt_cache_manifest_diff(e.manifest, w->want, diff, sizeof diff);
        if (nd >= 0 && (w->x->ndiff < 0 || nd < w->x->ndiff || (nd == w->x->ndiff && st->st_mtime > w->x->nearest_mtime))) {
            w->x->ndiff = nd;
            w->x->nearest_mtime = st->st_mtime;
            snprintf(w->x->nearest, sizeof w->x->nearest, "%s/%.32s", arch, name);
            memcpy(w->x->diff, diff, sizeof diff);
        }
        w->x->same_kernel++;
    }
    rt_cache_file_free(&e);
    return true;
}

rt_status rt_cache_explain(rt_cache *c, const char *name, const char *source, const rt_compile_opts *opts,
                           rt_cache_explanation *x)
{
    if (!c || !name || !source || !x) return RT_ERR_INVALID;
    memset(x, 0, sizeof *x);
    x->ndiff = -1;
    why_ctx w = {c, name, NULL, {0, 0}, x, false};
    rt_status st = rt_cache_key_for(source, opts, &w.key);
    if (st != RT_OK) return st;
    rt_cache_key_hex(w.key, x->key);
    char *want = rt_cache_manifest_make(name, source, opts);
    if (!want) return RT_ERR_NOMEM;
    w.want = want;
    st = walk_ex(c, why_visit, &w, NULL, true);
    free(want);
    return w.nomem ? RT_ERR_NOMEM : st;
}

/* ---- the size cap ------------------------------------------------------------------- */

typedef struct cap_entry {
    char *path;
    time_t mtime;
    uint64_t size;
} cap_entry;

typedef struct cap_ctx {
    cap_entry *e;
    size_t n, cap;
    uint64_t total;
    bool nomem;
} cap_ctx;

static bool cap_visit(void *user, const char *arch, const char *name, const char *path, const struct stat *st)
{
    cap_ctx *cc = user;
    rt_cache_key k;
    if (!S_ISREG(st->st_mode) || !rt_cache_key_from_name(name, &k)) return true;
    cc->total += (uint64_t)st->st_size;
    if (cc->n == cc->cap) {
        size_t ncap = cc->cap ? 2 * cc->cap : 64;
        cap_entry *ne = realloc(cc->e, ncap * sizeof *ne);
        if (!ne) {
            cc->nomem = true;
            return false;
        }
        cc->e = ne;
        cc->cap = ncap;
    }
    cc->e[cc->n].path = rt_strf("%s", path);
    if (!cc->e[cc->n].path) {
        cc->nomem = true;
        return false;
    }
    cc->e[cc->n].mtime = st->st_mtime;
    cc->e[cc->n++].size = (uint64_t)st->st_size;
    return true;
}

static int by_age(const void *a, const void *b)
{
    const cap_entry *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

void rt_cache_enforce_cap(rt_cache *c, uint64_t bytes, const char *keep)
{
    pthread_mutex_lock(&c->mu);
    bool need_scan = !c->scanned;
    c->disk_bytes += bytes;
    bool over = c->max_bytes && c->disk_bytes > c->max_bytes;
    pthread_mutex_unlock(&c->mu);
    if (!need_scan && !over) return;
    cap_ctx cc = {0};
    if (walk_ex(c, cap_visit, &cc, NULL, true) == RT_OK && !cc.nomem) {
        uint64_t total = cc.total, goal = c->max_bytes / 10 * 9;
        if (c->max_bytes && total > c->max_bytes) {
            qsort(cc.e, cc.n, sizeof *cc.e, by_age);
            for (size_t i = 0; i < cc.n && total > goal; i++) {
                if (keep && !strcmp(cc.e[i].path, keep)) continue;
                if (unlink(cc.e[i].path) == 0) total -= cc.e[i].size;
            }
        }
        pthread_mutex_lock(&c->mu);
        c->scanned = true;
        c->disk_bytes = total;
        pthread_mutex_unlock(&c->mu);
    }
    for (size_t i = 0; i < cc.n; i++) free(cc.e[i].path);
    free(cc.e);
}
