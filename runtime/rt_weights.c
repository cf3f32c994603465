/* runtime/rt_weights.c — safetensors reading (validated) and writing.
 *
 * Reading maps the file read-only and parses the JSON header with jansson.
 * Every number read from the file is range-checked before it is used as a
 * size or an offset, so a truncated or hostile file gives a message, never a
 * read outside the mapping. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_weights.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rt_err.h"

static const struct {
    const char *name;
    int size;
    int kiln; /* ir_dtype + 1, or 0 */
} DTYPES[] = {
    {"BF16", 2, IR_BF16 + 1}, {"F16", 2, IR_F16 + 1}, {"F32", 4, IR_F32 + 1}, {"I32", 4, IR_I32 + 1},
    {"F64", 8, 0},  {"I64", 8, 0},  {"U64", 8, 0},  {"U32", 4, 0},      {"I16", 2, 0},
    {"U16", 2, 0},  {"I8", 1, 0},   {"U8", 1, 0},   {"BOOL", 1, 0},     {"F8_E4M3", 1, 0},
    {"F8_E5M2", 1, 0},
};

bool rt_st_dtype_parse(const char *s, ir_dtype *out)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(DTYPES[i].name, s) && DTYPES[i].kiln) {
            *out = (ir_dtype)(DTYPES[i].kiln - 1);
            return true;
        }
    return false;
}

const char *rt_st_dtype_str(ir_dtype t)
{
    switch (t) {
    case IR_BF16: return "BF16";
    case IR_F16: return "F16";
    case IR_F32: return "F32";
    case IR_I32: return "I32";
    default: return "?";
    }
}

static int cmp_begin(const void *a, const void *b)
{
    const rt_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void free_tensors(rt_st_file *f)
{
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    f->t = NULL;
    f->n = 0;
}

/* A non-negative JSON integer. */
static bool get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < 0) return false;
    *out = (uint64_t)x;
    return true;
}

static rt_status parse_entry(const char *nm, const char *key, json_t *v, uint64_t data_len, rt_st_tensor *t, char *err,
                       size_t n)
{
    if (!json_is_object(v)) return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': the header entry is not a JSON object", nm, key);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': missing or non-string \"dtype\"", nm, key);
    if (!json_is_array(sh)) return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': missing or non-array \"shape\"", nm, key);
    if (!json_is_array(off) || json_array_size(off) != 2)
        return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': \"data_offsets\" must be an array of two integers", nm, key);
    const char *ds = json_string_value(dt);
    int found = -1;
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(DTYPES[i].name, ds)) found = (int)i;
    if (found < 0) return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': unknown dtype \"%.20s\"", nm, key, ds);
    snprintf(t->dtype_str, sizeof t->dtype_str, "%s", DTYPES[found].name);
    t->elem_size = DTYPES[found].size;
    t->kiln_dtype = DTYPES[found].kiln != 0;
    t->dtype = t->kiln_dtype ? (ir_dtype)(DTYPES[found].kiln - 1) : IR_F32;
    size_t rank = json_array_size(sh);
    if (rank > RT_ST_MAX_RANK)
        return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': rank %zu is over the limit of %d", nm, key, rank, RT_ST_MAX_RANK);
    t->rank = (int)rank;
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t i = 0; i < rank; i++) {
        uint64_t d;
        if (!get_u64(json_array_get(sh, i), &d))
            return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': shape entry %zu is not a non-negative integer", nm, key, i);
        t->shape[i] = (int64_t)d;
        if (d && numel > UINT64_MAX / d) overflow = true;
        numel *= d;
    }
    if (overflow || numel > UINT64_MAX / (uint64_t)t->elem_size)
        return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': the shape's byte size overflows", nm, key);
    if (!get_u64(json_array_get(off, 0), &t->begin) || !get_u64(json_array_get(off, 1), &t->end))
        return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': \"data_offsets\" must be two non-negative integers", nm, key);
    if (t->begin > t->end)
        return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", nm, key,
                           (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > data_len)
        return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data (%llu bytes; "
                           "the file is truncated or the header is wrong)", nm, key, (unsigned long long)t->begin,
                           (unsigned long long)t->end, (unsigned long long)data_len);
    uint64_t want = numel * (uint64_t)t->elem_size;
    if (t->end - t->begin != want)
        return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s with %llu elements "
                           "needs %llu", nm, key, (unsigned long long)t->begin, (unsigned long long)t->end,
                           (unsigned long long)(t->end - t->begin), t->dtype_str, (unsigned long long)numel,
                           (unsigned long long)want);
    return RT_OK;
}

rt_status rt_st_parse(const void *buf, size_t size, const char *name, rt_st_file *f, char *err, size_t errlen)
{
    const char *nm = name ? name : "safetensors";
    const unsigned char *p = buf;
    memset(f, 0, sizeof *f);
    if (!buf && size) return rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: no data", nm);
    if (size < 8) return rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: %zu bytes: too short for a safetensors file (8-byte header length)", nm, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen > RT_ST_MAX_HEADER)
        return rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: header length %llu is over the limit of %u bytes (not a safetensors file?)", nm,
                           (unsigned long long)hlen, RT_ST_MAX_HEADER);
    if (hlen < 2) return rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: header length %llu is too short for a JSON object", nm, (unsigned long long)hlen);
    if (hlen > size - 8)
        return rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: header length %llu but the file has only %zu bytes after it (truncated?)", nm,
                           (unsigned long long)hlen, size - 8);
    json_error_t je;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root) return rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: the header is not valid JSON: %s (header byte %d)", nm, je.text, je.position);
    rt_status st = RT_OK;
    if (!json_is_object(root)) {
        st = rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: the header is not a JSON object", nm);
        goto out;
    }
    f->data = p + 8 + hlen;
    f->data_len = size - 8 - hlen;
    size_t count = json_object_size(root);
    f->t = calloc(count + 1, sizeof *f->t);
    if (!f->t) {
        st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", nm);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (!strcmp(key, "__metadata__")) continue;
        rt_st_tensor *t = &f->t[f->n];
        if ((st = parse_entry(nm, key, v, f->data_len, t, err, errlen)) != RT_OK) goto out;
        t->name = strdup(key);
        if (!t->name) {
            st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", nm);
            goto out;
        }
        t->data = f->data + t->begin;
        f->n++;
    }
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_begin);
    /* sorted by begin: a tensor overlaps an earlier one iff it starts before
     * the furthest end seen so far (empty tensors overlap nothing) */
    int far = -1;
    for (int i = 0; i < f->n; i++) {
        const rt_st_tensor *t = &f->t[i];
        if (t->end == t->begin) continue;
        if (far >= 0 && t->begin < f->t[far].end) {
            st = rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap in the data", nm,
                        f->t[far].name, (unsigned long long)f->t[far].begin, (unsigned long long)f->t[far].end, t->name,
                        (unsigned long long)t->begin, (unsigned long long)t->end);
            goto out;
        }
        if (far < 0 || t->end > f->t[far].end) far = i;
    }
    /* as the reference implementation: the data is the tensors, back to
     * back from offset 0 (no holes, nothing after the last), and each
     * starts at a multiple of its element size */
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        const rt_st_tensor *t = &f->t[i];
        if (t->begin % (uint64_t)t->elem_size) {
            st = rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: tensor '%s' starts at data offset %llu, not a multiple of its "
                         "element size (%s, %d bytes)", nm, t->name, (unsigned long long)t->begin, t->dtype_str, t->elem_size);
            goto out;
        }
        if (t->begin != at) {
            st = rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: %llu bytes of the data before tensor '%s' [%llu, %llu] belong to no "
                         "tensor (a hole)", nm, (unsigned long long)(t->begin - at), t->name,
                         (unsigned long long)t->begin, (unsigned long long)t->end);
            goto out;
        }
        at = t->end;
    }
    if (at != f->data_len) {
        st = rt_fail(RT_ERR_WEIGHTS, err, errlen, "%s: %llu bytes after the last tensor's data belong to no tensor "
                     "(trailing bytes; the data is %llu bytes)", nm, (unsigned long long)(f->data_len - at),
                     (unsigned long long)f->data_len);
        goto out;
    }
out:
    json_decref(root);
    if (st != RT_OK) free_tensors(f);
    return st;
}

rt_status rt_st_open(const char *path, rt_st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    if (!path) return rt_fail(RT_ERR_INVALID, err, errlen, "safetensors: NULL path");
    /* a FIFO opens without waiting for a writer, then is refused as not a regular file */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return rt_fail(RT_ERR_IO, err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rt_fail(RT_ERR_IO, err, errlen, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rt_fail(RT_ERR_IO, err, errlen, "%s: not a regular file (%s)", path,
                       S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return rt_fail(RT_ERR_IO, err, errlen, "%s: mmap: %s", path, strerror(e));
        }
    }
    close(fd);
    rt_st_file tmp;
    rt_status parsed = rt_st_parse(map ? map : "", size, path, &tmp, err, errlen);
    if (parsed != RT_OK) {
        if (map) munmap(map, size);
        return parsed;
    }
    *f = tmp;
    f->map = map;
    f->map_size = size;
    f->path = strdup(path);
    if (!f->path) {
        rt_st_close(f);
        return rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", path);
    }
    return RT_OK;
}

void rt_st_close(rt_st_file *f)
{
    if (!f) return;
    free_tensors(f);
    if (f->map) munmap(f->map, f->map_size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const rt_st_tensor *rt_st_find(const rt_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

/* ---- writing ------------------------------------------------------------------------ */

static bool write_all(FILE *fp, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, fp) == n;
}

rt_status rt_safetensors_write(const char *path, const rt_st_out *ts, int n, char *err, size_t errlen)
{
    if (!path || (n > 0 && !ts) || n < 0) return rt_fail(RT_ERR_INVALID, err, errlen, "safetensors write: bad arguments");
    json_t *root = json_object();
    uint64_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    char *tmp = NULL, *hdr = NULL;
    FILE *fp = NULL;
    rt_status st = RT_OK;
    if (!root || !bytes) {
        st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", path);
        goto out;
    }
    json_t *meta = json_pack("{s:s}", "format", "pt");
    if (!meta || json_object_set_new(root, "__metadata__", meta) != 0) {
        st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", path);
        goto out;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const rt_st_out *t = &ts[i];
        if (!t->name || !*t->name || !strcmp(t->name, "__metadata__") || t->rank < 0 || t->rank > RT_ST_MAX_RANK ||
            (t->rank > 0 && !t->shape) || (int)t->dtype < 0 || t->dtype >= IR_DTYPE_COUNT) {
            st = rt_fail(RT_ERR_INVALID, err, errlen, "%s: tensor %d: bad name, dtype or shape", path, i);
            goto out;
        }
        if (json_object_get(root, t->name)) {
            st = rt_fail(RT_ERR_INVALID, err, errlen, "%s: tensor '%s' given twice", path, t->name);
            goto out;
        }
        uint64_t numel = 1;
        json_t *shape = json_array();
        if (!shape) {
            st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", path);
            goto out;
        }
        for (int d = 0; d < t->rank; d++) {
            if (t->shape[d] < 0) {
                json_decref(shape);
                st = rt_fail(RT_ERR_INVALID, err, errlen, "%s: tensor '%s': negative dimension", path, t->name);
                goto out;
            }
            numel *= (uint64_t)t->shape[d];
            json_array_append_new(shape, json_integer(t->shape[d]));
        }
        bytes[i] = numel * (uint64_t)ir_dtype_size(t->dtype);
        if (bytes[i] && !t->data) {
            json_decref(shape);
            st = rt_fail(RT_ERR_INVALID, err, errlen, "%s: tensor '%s': NULL data", path, t->name);
            goto out;
        }
        json_t *e = json_pack("{s:s,s:o,s:[I,I]}", "dtype", rt_st_dtype_str(t->dtype), "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + bytes[i]));
        if (!e || json_object_set_new(root, t->name, e) != 0) {
            st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", path);
            goto out;
        }
        off += bytes[i];
    }
    hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!hdr) {
        st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", path);
        goto out;
    }
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    size_t plen = strlen(path) + 32;
    tmp = malloc(plen);
    if (!tmp) {
        st = rt_fail(RT_ERR_NOMEM, err, errlen, "%s: out of memory", path);
        goto out;
    }
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    fp = fopen(tmp, "wb");
    if (!fp) {
        st = rt_fail(RT_ERR_IO, err, errlen, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    bool ok = write_all(fp, len8, 8) && write_all(fp, hdr, hl);
    for (size_t i = hl; ok && i < padded; i++) ok = fputc(' ', fp) != EOF;
    for (int i = 0; ok && i < n; i++) ok = write_all(fp, ts[i].data, (size_t)bytes[i]);
    ok = (fclose(fp) == 0) && ok;
    fp = NULL;
    if (!ok) {
        st = rt_fail(RT_ERR_IO, err, errlen, "%s: write failed: %s", tmp, strerror(errno));
        remove(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        st = rt_fail(RT_ERR_IO, err, errlen, "%s: %s", path, strerror(errno));
        remove(tmp);
        goto out;
    }
out:
    if (fp) fclose(fp);
    free(tmp);
    free(hdr);
    free(bytes);
    json_decref(root);
    return st;
}
