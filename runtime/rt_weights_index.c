/* runtime/rt_weights_index.c — checkpoints of several safetensors shards
 * (rt_weights_index.h). The shards are memory-mapped and validated by
 * rt_st_open; this file checks the index against them. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_weights_index.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/rt_model_internal.h"

void rt_ckpt_close(rt_ckpt *c)
{
    if (!c) return;
    for (int i = 0; i < c->nshards; i++) rt_st_close(&c->shards[i]);
    free(c->shards);
    free(c->index_path);
    memset(c, 0, sizeof *c);
}

const rt_st_tensor *rt_ckpt_find(const rt_ckpt *c, const char *name, const rt_st_file **shard)
{
    for (int i = 0; i < c->nshards; i++) {
        const rt_st_tensor *t = rt_st_find(&c->shards[i], name);
        if (t) {
            if (shard) *shard = &c->shards[i];
            return t;
        }
    }
    return NULL;
}

static bool plain_file_name(const char *s)
{
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Index of shard `file` in names (added when new); -1 when out of memory. */
static int shard_slot(const char ***names, int *n, int *cap, const char *file)
{
    for (int i = 0; i < *n; i++)
        if (strcmp((*names)[i], file) == 0) return i;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        const char **nv = realloc(*names, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        *names = nv;
        *cap = nc;
    }
    (*names)[*n] = file;
    return (*n)++;
}

rt_status rt_ckpt_parse_index(const char *text, size_t len, const char *name, const char *dir, rt_ckpt *c, char *err,
                              size_t n)
{
    memset(c, 0, sizeof *c);
    if (err && n) err[0] = 0;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: not valid JSON (line %d: %s)", name, je.line, je.text);
    rt_status st = RT_OK;
    const char **files = NULL;
    int nfiles = 0, capfiles = 0;
    json_t *map = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(map)) {
        st = rt_fail(RT_ERR_WEIGHTS, err, n, "%s: no \"weight_map\" object (a checkpoint index maps tensor names to shard files)",
                     name);
        goto out;
    }
    if (json_object_size(map) == 0) {
        st = rt_fail(RT_ERR_WEIGHTS, err, n, "%s: the weight_map is empty", name);
        goto out;
    }
    const char *key;
    json_t *v;
    int problems = 0;
    json_object_foreach(map, key, v) {
        if (!json_is_string(v)) {
            rt_add_line(err, n, "%s: tensor '%s': the shard is not a string", name, key);
            problems++;
        } else if (!plain_file_name(json_string_value(v))) {
            rt_add_line(err, n, "%s: tensor '%s': shard \"%s\" is not a file name in the index's directory", name, key,
                        json_string_value(v));
            problems++;
        } else if (shard_slot(&files, &nfiles, &capfiles, json_string_value(v)) < 0) {
            st = rt_fail(RT_ERR_NOMEM, err, n, "%s: out of memory", name);
            goto out;
        }
    }
    if (problems) {
        st = RT_ERR_WEIGHTS;
        goto out;
    }
    c->shards = calloc((size_t)nfiles, sizeof *c->shards);
    if (!c->shards) {
        st = rt_fail(RT_ERR_NOMEM, err, n, "%s: out of memory", name);
        goto out;
    }
    for (int i = 0; i < nfiles; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        char serr[1024];
        rt_status s = rt_st_open(path, &c->shards[i], serr, sizeof serr);
        if (s != RT_OK) {
            st = rt_fail(s, err, n, "%s: shard %s: %s", name, files[i], serr);
            goto out;
        }
        c->nshards++;
    }
    /* every listed tensor is in its shard */
    json_object_foreach(map, key, v) {
        int s = shard_slot(&files, &nfiles, &capfiles, json_string_value(v));
        if (!rt_st_find(&c->shards[s], key)) {
            const rt_st_file *other = NULL;
            if (rt_ckpt_find(c, key, &other))
                rt_add_line(err, n, "%s: tensor '%s' is listed in %s but is in %s", name, key, files[s], other->path);
            else
                rt_add_line(err, n, "%s: tensor '%s' is listed in %s, which does not hold it", name, key, files[s]);
            problems++;
        }
    }
    /* every tensor of every shard is listed, for that shard */
    for (int s = 0; s < c->nshards; s++) {
        const rt_st_file *f = &c->shards[s];
        for (int i = 0; i < f->n; i++) {
            json_t *e = json_object_get(map, f->t[i].name);
            c->bytes += f->t[i].end - f->t[i].begin;
            if (!e)
                rt_add_line(err, n, "%s: tensor '%s' of %s is not in the weight_map", name, f->t[i].name, files[s]);
            else if (strcmp(json_string_value(e), files[s]) != 0)
                rt_add_line(err, n, "%s: tensor '%s' is in %s and also in %s", name, f->t[i].name, files[s],
                            json_string_value(e));
            else
                continue;
            problems++;
        }
    }
    json_t *meta = json_object_get(root, "metadata"), *total = json_is_object(meta) ? json_object_get(meta, "total_size") : NULL;
    if (total && (!json_is_integer(total) || (uint64_t)json_integer_value(total) != c->bytes)) {
        if (json_is_integer(total))
            rt_add_line(err, n, "%s: metadata.total_size is %lld bytes but the shards hold %llu", name,
                        (long long)json_integer_value(total), (unsigned long long)c->bytes);
        else
            rt_add_line(err, n, "%s: metadata.total_size is not an integer", name);
        problems++;
    }
    if (problems) st = RT_ERR_WEIGHTS;
out:
    free(files);
    json_decref(root);
    if (st != RT_OK) rt_ckpt_close(c);
    return st;
}

static rt_status read_small_file(const char *path, char **text, size_t *len, char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rt_fail(RT_ERR_IO, err, n, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, k = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (k == cap) {
            if (cap >= RT_CKPT_MAX_INDEX) {
                free(buf);
                fclose(f);
                return rt_fail(RT_ERR_WEIGHTS, err, n, "%s: larger than %u MiB, not a checkpoint index", path,
                               RT_CKPT_MAX_INDEX >> 20);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + k, 1, cap - k, f);
        k += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return rt_fail(RT_ERR_NOMEM, err, n, "%s: out of memory", path);
    if (bad) {
        free(buf);
        return rt_fail(RT_ERR_IO, err, n, "%s: read error", path);
    }
    *text = buf;
    *len = k;
    return RT_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

rt_status rt_ckpt_open(const char *path, rt_ckpt *c, char *err, size_t n)
{
    memset(c, 0, sizeof *c);
    if (!path) return rt_fail(RT_ERR_INVALID, err, n, "checkpoint: NULL path");
    struct stat sb;
    if (stat(path, &sb) != 0) return rt_fail(RT_ERR_IO, err, n, "%s: %s", path, strerror(errno));
    char index[4096], dir[4096];
    if (S_ISDIR(sb.st_mode)) {
        snprintf(index, sizeof index, "%s/%s", path, RT_CKPT_INDEX_NAME);
        snprintf(dir, sizeof dir, "%s", path);
        if (stat(index, &sb) != 0) {
            /* no index: the one-file checkpoint */
            snprintf(index, sizeof index, "%s/%s", path, RT_CKPT_SINGLE_NAME);
            if (stat(index, &sb) != 0)
                return rt_fail(RT_ERR_IO, err, n, "%s: neither %s nor %s in this directory", path, RT_CKPT_INDEX_NAME,
                               RT_CKPT_SINGLE_NAME);
            path = index;
        } else {
            path = index;
        }
    } else {
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
    }
    if (!ends_with(path, ".json")) {
        c->shards = calloc(1, sizeof *c->shards);
        if (!c->shards) return rt_fail(RT_ERR_NOMEM, err, n, "%s: out of memory", path);
        rt_status st = rt_st_open(path, &c->shards[0], err, n);
        if (st != RT_OK) {
            rt_ckpt_close(c);
            return st;
        }
        c->nshards = 1;
        for (int i = 0; i < c->shards[0].n; i++) c->bytes += c->shards[0].t[i].end - c->shards[0].t[i].begin;
        return RT_OK;
    }
    char *text = NULL;
    size_t len = 0;
    RT_TRY(read_small_file(path, &text, &len, err, n));
    rt_status st = rt_ckpt_parse_index(text, len, path, dir, c, err, n);
    free(text);
    if (st == RT_OK) {
        c->index_path = strdup(path);
        if (!c->index_path) {
            rt_ckpt_close(c);
            return rt_fail(RT_ERR_NOMEM, err, n, "%s: out of memory", path);
        }
    }
    return st;
}

/* ---- loading into a model ---------------------------------------------------------------- */

static bool not_in_ckpt(const rt_model *m, int param, const void *ckpt)
{
    return !rt_ckpt_find(ckpt, m->g->params[param]->name, NULL);
}

rt_status rt_model_load_checkpoint(rt_model *m, const char *path, unsigned flags, char *err, size_t n)
{
    rt_ckpt c;
    RT_TRY(rt_ckpt_open(path, &c, err, n));
    if (err && n) err[0] = 0;
    rt_status st = RT_OK;
    char *line = malloc(n ? n : 1);
    if (!line) {
        rt_ckpt_close(&c);
        return rt_fail(RT_ERR_NOMEM, err, n, "%s: out of memory", path);
    }
    for (int i = 0; i < c.nshards; i++) {
        rt_status s = rt_model_check_safetensors(m, &c.shards[i], flags | RT_LOAD_ALLOW_MISSING, line, n);
        if (s != RT_OK) {
            rt_add_line(err, n, "%s", line);
            st = s;
        }
    }
    if (!(flags & RT_LOAD_ALLOW_MISSING)) {
        int nmiss = rt_missing_weights(m, not_in_ckpt, &c, line, n);
        if (nmiss) {
            rt_add_line(err, n, "%s: %d weight%s of model %s missing from the checkpoint: %s",
                        c.index_path ? c.index_path : path, nmiss, nmiss > 1 ? "s" : "", m->g->name, line);
            if (st == RT_OK) st = RT_ERR_WEIGHTS;
        }
    }
    free(line);
    if (st == RT_OK) st = rt_model_upload_safetensors_many(m, c.shards, c.nshards, err, n);
    rt_ckpt_close(&c);
    return st;
}
