/* runtime/rt_cache_file.c — the kernel cache's on-disk entries
 * (<root>/v1/<arch>/<hex>.cubin; the header is laid out in rt_cache.h).
 *
 * An entry is validated in full on every read (header, length, key,
 * checksum) before a byte is returned; a corrupt one is deleted only if the
 * path still names the file that was read (a concurrent writer may just
 * have renamed a good entry over it). Writes go to mkstemp files in the
 * entry's directory (names starting with '.') and are renamed into place,
 * so readers never see a partial entry. */
#define _POSIX_C_SOURCE 200809L
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

/* mkdir -p; 0 or an errno. */
int rt_cache_mkdirs(const char *path)
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
void rt_cache_file_read(const char *path, rt_cache_key k, bool want_payload, rt_cache_file *e)
{
    memset(e, 0, sizeof *e);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        e->state = errno == ENOENT ? RT_CACHE_FILE_MISSING : RT_CACHE_FILE_UNREADABLE;
        e->why = "cannot open";
        return;
    }
    struct stat st;
    unsigned char h[RT_CACHE_HEADER_SIZE];
    if (fstat(fd, &st) != 0) {
        e->state = RT_CACHE_FILE_UNREADABLE;
        e->why = "fstat failed";
        goto out;
    }
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->state = RT_CACHE_FILE_CORRUPT;
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
        e->state = RT_CACHE_FILE_NOMEM;
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
    e->state = RT_CACHE_FILE_OK;
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
bool rt_cache_file_remove_if_same(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;
    if (lstat(path, &st) != 0 || st.st_dev != dev || st.st_ino != ino) return false;
    return unlink(path) == 0;
}

/* Write an entry for k into dir (which must exist); 0 or an errno. */
int rt_cache_file_write(const char *dir, rt_cache_key k, const rt_blob *b, bool do_fsync)
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

char *rt_cache_file_path(const rt_cache *c, rt_cache_key k, const char *arch)
{
    char hex[33];
    rt_cache_key_hex(k, hex);
    return rt_strf("%s/%s/%s.cubin", c->v1, arch, hex);
}
