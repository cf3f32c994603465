/* frontend/source.c — loading model text. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/frontend.h"
#include "util/vec.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *r = malloc(n + 1);
    if (r) memcpy(r, s, n + 1);
    return r;
}

/* A model file is a regular file of at most FE_MAX_SOURCE bytes: a FIFO, a
 * device (/dev/zero) or a directory is refused before anything is read,
 * and opening never waits for a writer. */
#define FE_MAX_SOURCE ((size_t)1 << 30)

int fe_source_read(fe_source *src, const char *path, diag_list *d)
{
    memset(src, 0, sizeof *src);
    src_loc where = {path, 0, 0, 0};
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        diag_error(d, where, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        diag_error(d, where, "cannot open: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        diag_error(d, where, "not a regular file (%s)", S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > FE_MAX_SOURCE) {
        diag_error(d, where, "file too large (%lld bytes; a model file has at most %zu)", (long long)st.st_size, FE_MAX_SOURCE);
        close(fd);
        return -1;
    }
    /* the size may change while we read: read to EOF, never past the limit */
    size_t cap = (size_t)st.st_size + 2, len = 0;
    char *buf = malloc(cap);
    if (!buf) goto oom;
    for (;;) {
        if (cap - len < 2) {
            if (cap > FE_MAX_SOURCE) {
                diag_error(d, where, "file too large (it grew while read; a model file has at most %zu bytes)", FE_MAX_SOURCE);
                free(buf);
                close(fd);
                return -1;
            }
            if (!vec_reserve((void **)&buf, &cap, cap * 2, 1, NULL)) goto oom;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            diag_error(d, where, "read error: %s", strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (n == 0) break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    src->path = dup_str(path);
    if (!src->path) {
        free(buf);
        diag_error(d, where, "out of memory");
        return -1;
    }
    src->text = buf;
    src->len = len;
    return 0;
oom:
    free(buf);
    close(fd);
    diag_error(d, where, "out of memory");
    return -1;
}

int fe_source_from_string(fe_source *src, const char *name, const char *text)
{
    memset(src, 0, sizeof *src);
    src->path = dup_str(name ? name : "<string>");
    src->text = dup_str(text);
    if (!src->path || !src->text) {
        fe_source_free(src);
        return -1;
    }
    src->len = strlen(text);
    return 0;
}

void fe_source_free(fe_source *src)
{
    free(src->path);
    free(src->text);
    memset(src, 0, sizeof *src);
}
