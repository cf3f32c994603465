/* runtime/rt_emit.c — see rt_emit.h. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_emit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_err.h"
#include "runtime/rt_util.h"

typedef struct progress_ctx {
    const rt_emit_options *o;
    const cg_kernel *ks;
} progress_ctx;

static void on_progress(void *user, int done, int total, int index, const rt_compile_result *r)
{
    progress_ctx *p = user;
    if (p->o->progress) p->o->progress(p->o->user, done, total, p->ks[index].name, r->ms);
}

void rt_emit_result_free(rt_emit_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free(r->kernels[i].name);
        free(r->kernels[i].log);
    }
    free(r->kernels);
    memset(r, 0, sizeof *r);
}

int rt_write_compiled(const ir_graph *g, const cg_kernel *ks, int n, const char *dir, const rt_emit_options *o,
                      rt_emit_result *out, char *err, size_t errlen)
{
    double t0 = rt_now_ms();
    if (out) memset(out, 0, sizeof *out);
    int rc = n;
    bool ptx = o->target == RT_TARGET_PTX;
    size_t plen = strlen(dir) + 300;
    char *path = malloc(plen);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    const char **srcs = calloc((size_t)n + 1, sizeof *srcs);
    rt_compile_result *res = calloc((size_t)n + 1, sizeof *res);
    rt_cache_lookup *how = calloc((size_t)n + 1, sizeof *how);
    FILE *list = NULL;
    if (!path || !names || !srcs || !res || !how) {
        rc = rt_fail(-1, err, errlen, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        names[i] = ks[i].name;
        srcs[i] = ks[i].source;
    }
    progress_ctx pc = {o, ks};
    rt_status st = ptx ? rt_nvrtc_compile_many(n, names, srcs, o->copts, RT_TARGET_PTX, res, 0, on_progress, &pc)
                       : rt_cache_compile_many(o->cache, n, names, srcs, o->copts, o->cache ? 0 : RT_CACHE_NO_CACHE,
                                               res, how, 0, on_progress, &pc);
    if (st != RT_OK) {
        rc = rt_fail(-1, err, errlen, "compile: %s", rt_status_str(st));
        for (int i = 0; i < n; i++)
            if (res[i].status != RT_OK) {
                const ir_node *anchor = g->groups[ks[i].group].anchor;
                rt_fail(-1, err, errlen, "kernel k%d (%s, from line %d of the model) did not compile: %s", ks[i].group,
                        ks[i].kind, anchor->loc.line, res[i].message ? res[i].message : rt_status_str(res[i].status));
                break;
            }
        goto done;
    }
    /* each file whole or not at all (rt_write_file); on a failure the files
     * this call wrote are removed again */
    char *listing = NULL;
    size_t listing_len = 0;
    if (!(list = open_memstream(&listing, &listing_len))) {
        rc = rt_fail(-1, err, errlen, "out of memory");
        goto done;
    }
    int written = 0;
    for (int i = 0; i < n; i++) {
        snprintf(path, plen, "%s/%s.%s", dir, ks[i].name, ptx ? "ptx" : "cubin");
        size_t len = ptx ? strlen((const char *)res[i].code.data) : res[i].code.size;
        if (rt_write_file(path, res[i].code.data, len, err, errlen) != 0) {
            rc = RT_EMIT_ERR_WRITE;
            break;
        }
        written++;
        cg_kernel_describe(g, &ks[i], list);
    }
    bool listed = fclose(list) == 0;
    list = NULL;
    if (rc >= 0) {
        snprintf(path, plen, "%s/kernels.txt", dir);
        if (!listed) rc = rt_fail(-1, err, errlen, "out of memory");
        else if (rt_write_file(path, listing, listing_len, err, errlen) != 0) rc = RT_EMIT_ERR_WRITE;
    }
    free(listing);
    if (rc < 0) {
        for (int i = 0; i < written; i++) {
            snprintf(path, plen, "%s/%s.%s", dir, ks[i].name, ptx ? "ptx" : "cubin");
            (void)remove(path);
        }
        goto done;
    }
    if (out && (out->kernels = calloc((size_t)n + 1, sizeof *out->kernels))) {
        out->n = n;
        for (int i = 0; i < n; i++) {
            out->kernels[i].name = strdup(ks[i].name);
            out->kernels[i].group = ks[i].group;
            out->kernels[i].ms = res[i].ms;
            out->kernels[i].how = ptx ? RT_CACHE_MISS : how[i];
            out->kernels[i].log = strdup(res[i].log ? res[i].log : "");
        }
    }
done:
    for (int i = 0; res && i < n; i++) rt_compile_result_free(&res[i]);
    free(res);
    free(how);
    free(srcs);
    free(names);
    free(path);
    if (out) out->total_ms = rt_now_ms() - t0;
    return rc;
}
