/* runtime/rt_cache_file.c — the kernel cache's on-disk entries
 * (<root>/v1/<arch>/<hex>.cubin; the header is laid out in rt_cache.h).
 *
 * An entry is validated in full on every read (a regular file of the user's,
 * header, lengths, key, the checksum keyed by the cache's secret) before a
 * byte is returned; a corrupt one is deleted only if the
 * path still names the file that was read (a concurrent writer may just
 * have renamed a good entry over it). Writes go to mkstemp files in the
 * entry's directory (names starting with '.') and are renamed into place,
 * so readers never see a partial entry. */
#define _POSIX_C_SOURCE 200809L
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "runtime/rt_cache_internal.h"
#include "runtime/rt_util.h"

static const unsigned char MAGIC[8] = {'K', 'I', 'L', 'N', 'C', 'U', 'B', 'N'};

/* mkdir -p, each directory it creates 0700; 0 or an errno. */
int rt_cache_mkdirs(const char *path)
{
    char *p = rt_strf("%s", path);
    if (!p) return ENOMEM;
    int err = 0;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char save = *s;
            *s = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST) {
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

/* Reads or writes all n bytes, retrying short transfers and EINTR. */
static bool transfer_full(int fd, unsigned char *p, size_t n, bool writing)
{
    while (n) {
        ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}
static bool read_full(int fd, unsigned char *p, size_t n) { return transfer_full(fd, p, n, false); }
static bool write_full(int fd, const unsigned char *p, size_t n)
{
    return transfer_full(fd, (unsigned char *)p, n, true); /* write() only reads the bytes */
}

/* The checksum: XXH3-64 keyed by the cache's secret over the header's
 * version and lengths, the key, the manifest and the payload. Only a writer
 * that read the secret can make one that matches. */
static uint64_t entry_sum(const unsigned char h[RT_CACHE_HEADER_SIZE], const unsigned char *secret,
                          const unsigned char *manifest, size_t mlen, const unsigned char *payload, size_t plen)
{
    XXH3_state_t s;
    XXH3_INITSTATE(&s);
    (void)XXH3_64bits_reset_withSecret(&s, secret, RT_CACHE_SECRET_SIZE);
    XXH3_64bits_update(&s, h + 8, 16);
    XXH3_64bits_update(&s, h + 32, 16);
    XXH3_64bits_update(&s, manifest, mlen);
    XXH3_64bits_update(&s, payload, plen);
    return XXH3_64bits_digest(&s);
}

static void encode_header(unsigned char h[RT_CACHE_HEADER_SIZE], rt_cache_key k, const unsigned char *secret,
                          const char *manifest, size_t mlen, const rt_blob *b)
{
    memcpy(h, MAGIC, 8);
    put_le32(h + 8, RT_CACHE_FORMAT_VERSION);
    put_le32(h + 12, (uint32_t)mlen);
    put_le64(h + 16, b->size);
    put_be64(h + 32, k.hi);
    put_be64(h + 40, k.lo);
    put_le64(h + 24, entry_sum(h, secret, (const unsigned char *)manifest, mlen, b->data, b->size));
}

void rt_cache_file_free(rt_cache_file *e)
{
    if (!e) return;
    rt_blob_free(&e->blob);
    free(e->manifest);
    e->manifest = NULL;
}

void rt_cache_file_read(const char *path, rt_cache_key k, const unsigned char *secret, unsigned flags,
                        rt_cache_file *e)
{
    memset(e, 0, sizeof *e);
    /* no links followed, and a FIFO or device opens without waiting for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        struct stat lst;
        if (errno == ELOOP && lstat(path, &lst) == 0) { /* a link where an entry belongs: not Kiln's */
            e->state = RT_CACHE_FILE_CORRUPT;
            e->why = "a symbolic link, not a file";
            e->dev = lst.st_dev;
            e->ino = lst.st_ino;
            return;
        }
        e->state = errno == ENOENT ? RT_CACHE_FILE_MISSING : RT_CACHE_FILE_UNREADABLE;
        e->why = "cannot open";
        return;
    }
    struct stat st;
    unsigned char h[RT_CACHE_HEADER_SIZE];
    unsigned char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        e->state = RT_CACHE_FILE_UNREADABLE;
        e->why = "fstat failed";
        goto out;
    }
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->size = (uint64_t)st.st_size;
    e->state = RT_CACHE_FILE_CORRUPT;
    if (!S_ISREG(st.st_mode)) { e->why = "not a regular file"; goto out; }
    if (st.st_uid != geteuid()) {
        e->state = RT_CACHE_FILE_UNREADABLE; /* not ours to load, nor to delete */
        e->why = "owned by another user";
        goto out;
    }
    if ((uint64_t)st.st_size < RT_CACHE_HEADER_SIZE) { e->why = "shorter than its header"; goto out; }
    if ((uint64_t)st.st_size > RT_CACHE_MAX_ENTRY) { e->why = "larger than any entry"; goto out; }
    errno = 0;
    if (!read_full(fd, h, sizeof h)) {
        /* an I/O error is not corruption: the entry may be fine, and stays */
        if (errno) e->state = RT_CACHE_FILE_UNREADABLE;
        e->why = "header unreadable";
        goto out;
    }
    if (memcmp(h, MAGIC, 8) != 0) { e->why = "bad magic"; goto out; }
    if (get_le32(h + 8) != RT_CACHE_FORMAT_VERSION) { e->why = "unknown format version"; goto out; }
    uint64_t mlen = get_le32(h + 12), len = get_le64(h + 16);
    if (mlen > RT_CACHE_MAX_MANIFEST || len == 0 || len > (uint64_t)st.st_size ||
        mlen + len != (uint64_t)st.st_size - RT_CACHE_HEADER_SIZE) {
        e->why = "length does not match the file (truncated?)";
        goto out;
    }
    if (get_be64(h + 32) != k.hi || get_be64(h + 40) != k.lo) { e->why = "key mismatch"; goto out; }
    /* manifest, NUL, payload, NUL: both usable as text */
    buf = malloc((size_t)(mlen + len) + 2);
    if (!buf) {
        e->state = RT_CACHE_FILE_NOMEM;
        goto out;
    }
    unsigned char *man = buf, *pay = buf + mlen + 1;
    errno = 0;
    if (!read_full(fd, man, (size_t)mlen) || !read_full(fd, pay, (size_t)len)) {
        if (errno) e->state = RT_CACHE_FILE_UNREADABLE;
        e->why = "payload unreadable";
        goto out;
    }
    man[mlen] = 0;
    pay[len] = 0;
    if (entry_sum(h, secret, man, (size_t)mlen, pay, (size_t)len) != get_le64(h + 24)) {
        e->why = "checksum mismatch (damaged, or not written by this cache)";
        goto out;
    }
    e->state = RT_CACHE_FILE_OK;
    if (flags & RT_CACHE_READ_MANIFEST) e->manifest = rt_strf("%s", (const char *)man);
    if (flags & RT_CACHE_READ_PAYLOAD) {
        e->blob.data = rt_cache_bytes_dup(pay, (size_t)len);
        e->blob.size = e->blob.data ? (size_t)len : 0;
    }
    if (((flags & RT_CACHE_READ_MANIFEST) && !e->manifest) || ((flags & RT_CACHE_READ_PAYLOAD) && !e->blob.data)) {
        rt_cache_file_free(e);
        e->state = RT_CACHE_FILE_NOMEM;
    }
    if (e->state == RT_CACHE_FILE_OK && (flags & RT_CACHE_READ_TOUCH)) (void)futimens(fd, NULL);
out:
    free(buf);
    close(fd);
}

/* Unlink path only if it is still the file we read. */
bool rt_cache_file_remove_if_same(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;
    if (lstat(path, &st) != 0 || st.st_dev != dev || st.st_ino != ino) return false;
    return unlink(path) == 0;
}

/* Write an entry for k into dir (which must exist); 0 or an errno. */
int rt_cache_file_write(const char *dir, rt_cache_key k, const unsigned char *secret, const char *manifest,
                        const rt_blob *b, bool do_fsync, uint64_t *bytes)
{
    if (!manifest) manifest = "{}";
    size_t mlen = strlen(manifest);
    if (mlen > RT_CACHE_MAX_MANIFEST || b->size + mlen + RT_CACHE_HEADER_SIZE > RT_CACHE_MAX_ENTRY) return EFBIG;
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
    int fd = mkstemp(tmp); /* 0600 */
    if (fd < 0) {
        err = errno;
        goto out;
    }
    unsigned char h[RT_CACHE_HEADER_SIZE];
    encode_header(h, k, secret, manifest, mlen, b);
    errno = 0;
    if (!write_full(fd, h, sizeof h) || !write_full(fd, (const unsigned char *)manifest, mlen) ||
        !write_full(fd, b->data, b->size))
        err = errno ? errno : EIO;
    if (!err && do_fsync && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, final) != 0) err = errno;
    if (err) unlink(tmp);
    else if (bytes) *bytes = RT_CACHE_HEADER_SIZE + mlen + b->size;
out:
    free(tmp);
    free(final);
    return err;
}

char *rt_cache_file_path(const rt_cache *c, rt_cache_key k, const char *arch)
{
    char hex[33];
    rt_cache_key_hex(k, hex);
    return rt_strf("%s/%s/%s.cubin", c->v1, arch, hex);
}
