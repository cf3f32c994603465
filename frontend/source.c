/* frontend/source.c — loading model text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "util/vec.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *r = malloc(n + 1);
    if (r) memcpy(r, s, n + 1);
    return r;
}

int fe_source_read(fe_source *src, const char *path, diag_list *d)
{
    memset(src, 0, sizeof *src);
    src_loc where = {path, 0, 0, 0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        diag_error(d, where, "cannot open: %s", strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) goto oom;
    for (;;) {
        if (cap - len < 2) {
            if (cap > ((size_t)1 << 30)) {
                diag_error(d, where, "file too large");
                free(buf);
                fclose(f);
                return -1;
            }
            if (!vec_reserve((void **)&buf, &cap, cap * 2, 1, NULL)) goto oom;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) break;
    }
    if (ferror(f)) {
        diag_error(d, where, "read error: %s", strerror(errno));
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
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
    fclose(f);
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
