/* runtime/rt_cache_trust.c — whom the kernel cache trusts (README, "the
 * cache"): the user alone. Whoever can write the cache decides which GPU
 * code Kiln loads, so the disk cache is used only when its root and every
 * directory under it belong to the user and are not writable by group or
 * others (else one warning, and the cache works in memory: ssh treats its
 * keys the same way); the directories Kiln creates are 0700, its files
 * 0600. Each entry's checksum is keyed by a random secret kept in the
 * cache (<v1>/.secret, 0600), so a file that another program wrote or
 * re-headed, or that was copied from another cache, is never loaded. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rt_cache_internal.h"
#include "runtime/rt_util.h"

bool rt_cache_dir_trusted(const char *path, bool follow, char *why, size_t n)
{
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) != 0) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        return false;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(why, n, "%s is a symbolic link", path);
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, n, "%s is not a directory", path);
        return false;
    }
    if (st.st_uid != geteuid()) {
        snprintf(why, n, "%s is owned by uid %u, not by you", path, (unsigned)st.st_uid);
        return false;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, n, "%s is writable by %s (mode %03o)", path, st.st_mode & S_IWOTH ? "everyone" : "its group",
                 (unsigned)(st.st_mode & 0777));
        return false;
    }
    return true;
}

/* The secret file at path: a regular 0600-or-stricter file of the user's
 * holding exactly RT_CACHE_SECRET_SIZE bytes. */
static int read_secret(const char *path, unsigned char *secret, char *why, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return errno;
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) != 0) err = errno;
    else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
             st.st_size != RT_CACHE_SECRET_SIZE) {
        snprintf(why, n, "%s is not a %d-byte file readable by you alone", path, RT_CACHE_SECRET_SIZE);
        err = EPERM;
    } else {
        size_t got = 0;
        while (got < RT_CACHE_SECRET_SIZE) {
            ssize_t r = read(fd, secret + got, RT_CACHE_SECRET_SIZE - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                err = r < 0 ? errno : EIO;
                break;
            }
            got += (size_t)r;
        }
    }
    close(fd);
    if (err && !why[0]) snprintf(why, n, "%s: %s", path, strerror(err));
    return err;
}

int rt_cache_secret_load(const char *v1, unsigned char secret[RT_CACHE_SECRET_SIZE], char *why, size_t n)
{
    why[0] = 0;
    char *path = rt_strf("%s/%s", v1, RT_CACHE_SECRET_NAME);
    char *tmp = rt_strf("%s/%s.XXXXXX", v1, RT_CACHE_SECRET_NAME);
    if (!path || !tmp) {
        free(path);
        free(tmp);
        return ENOMEM;
    }
    int err = read_secret(path, secret, why, n);
    if (err == ENOENT) {
        /* a new cache: random bytes into a temp file, linked into place (a
         * concurrent creator's secret wins; both then read the one file) */
        why[0] = 0;
        unsigned char fresh[RT_CACHE_SECRET_SIZE];
        size_t got = 0;
        while (got < sizeof fresh) {
            ssize_t r = getrandom(fresh + got, sizeof fresh - got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) break;
            got += (size_t)r;
        }
        int fd = got == sizeof fresh ? mkstemp(tmp) : -1;
        err = fd < 0 ? (got == sizeof fresh ? errno : EIO) : 0;
        if (fd >= 0) {
            if (write(fd, fresh, sizeof fresh) != (ssize_t)sizeof fresh) err = errno ? errno : EIO;
            if (close(fd) != 0 && !err) err = errno;
            if (!err && link(tmp, path) != 0 && errno != EEXIST) err = errno;
            unlink(tmp);
        }
        if (!err) err = read_secret(path, secret, why, n);
        else snprintf(why, n, "cannot create %s: %s", path, strerror(err));
    }
    free(path);
    free(tmp);
    return err;
}

bool rt_cache_arch_dir_ok(rt_cache *c, const char *dir)
{
    char why[600];
    struct stat st;
    if (lstat(dir, &st) != 0) return errno == ENOENT;            /* put creates it */
    if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) return false; /* put fails to create it, and says so */
    if (rt_cache_dir_trusted(dir, false, why, sizeof why)) return true;
    pthread_mutex_lock(&c->mu);
    if (!c->warned_untrusted) {
        c->warned_untrusted = true;
        rt_cache_warn_locked(c, "kiln cache: not using %s (%s): only directories of your own that nobody else can "
                             "write are trusted", dir, why);
    }
    pthread_mutex_unlock(&c->mu);
    return false;
}
