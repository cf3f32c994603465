/* runtime/rt_cache_maint.c — `kiln cache ls|verify|clear` (rt_cache.h):
 * walk <root>/v1/<arch>/, check entries with the reader the cache itself
 * uses, delete corrupt entries and stale temp files, remove the tree. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
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
    list_ctx *list = user;
    rt_cache_key k;
    if (name[0] == '.' || !S_ISREG(st->st_mode) || !rt_cache_key_from_name(name, &k)) return true;
    char hex[33];
    memcpy(hex, name, 32);
    hex[32] = '\0';
    rt_cache_entry e = {path, arch, hex, (uint64_t)st->st_size, st->st_mtime};
    return list->fn(list->user, &e);
}

rt_status rt_cache_list(rt_cache *c, rt_cache_entry_fn fn, void *user)
{
    if (!fn) return RT_ERR_INVALID;
    list_ctx list = {fn, user};
    return walk(c, list_visit, &list);
}

typedef struct verify_ctx {
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
        if (S_ISREG(st->st_mode) && verify->now - st->st_mtime > STALE_TEMP_SECONDS && unlink(path) == 0)
            verify->vs->stale_temps_removed++;
        return true;
    }
    if (!rt_cache_key_from_name(name, &k)) {
        verify->vs->other_files++;
        return true;
    }
    rt_cache_file e;
    rt_cache_file_read(path, k, false, &e);
    if (e.state == RT_CACHE_FILE_NOMEM) {
        verify->nomem = true;
        return false;
    }
    if (e.state == RT_CACHE_FILE_OK) {
        verify->vs->ok++;
        verify->vs->bytes_ok += (uint64_t)st->st_size;
    } else if (e.state == RT_CACHE_FILE_CORRUPT) {
        if (rt_cache_file_remove_if_same(path, e.dev, e.ino)) verify->vs->corrupt_removed++;
    }
    return true;
}

rt_status rt_cache_verify(rt_cache *c, rt_cache_verify_stats *vs)
{
    rt_cache_verify_stats dummy;
    if (!vs) vs = &dummy;
    memset(vs, 0, sizeof *vs);
    verify_ctx verify = {vs, time(NULL), false};
    rt_status st = walk(c, verify_visit, &verify);
    return verify.nomem ? RT_ERR_NOMEM : st;
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
    rt_cache_map_free(c);
    pthread_mutex_unlock(&c->mu);
    if (!c->root) return RT_OK;
    int err = remove_tree(c->v1, removed);
    if (err == ENOMEM) return RT_ERR_NOMEM;
    if (err) return maint_fail(c, RT_ERR_IO, "cannot remove %s: %s", c->v1, strerror(err));
    return RT_OK;
}
