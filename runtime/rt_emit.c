/* runtime/rt_emit.c — see rt_emit.h. */
#include "runtime/rt_emit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rt_write_compiled(const ir_graph *g, const char *dir, rt_target target, const cg_options *opts,
                      const rt_compile_opts *copts, char *err, size_t errlen)
{
    cg_kernel *ks;
    int n;
    if (cg_emit_all_ex(g, opts, &ks, &n, err, errlen) != 0) return -1;
    int rc = n;
    size_t plen = strlen(dir) + 300;
    char *path = malloc(plen);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    const char **srcs = calloc((size_t)n + 1, sizeof *srcs);
    rt_compile_result *res = calloc((size_t)n + 1, sizeof *res);
    FILE *list = NULL;
    if (!path || !names || !srcs || !res) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        names[i] = ks[i].name;
        srcs[i] = ks[i].source;
    }
    if (rt_nvrtc_compile_many(n, names, srcs, copts, target, res, 0, NULL, NULL) != RT_OK) {
        for (int i = 0; i < n; i++)
            if (res[i].status != RT_OK) {
                snprintf(err, errlen, "%s", res[i].message ? res[i].message : rt_status_str(res[i].status));
                break;
            }
        rc = -1;
        goto done;
    }
    snprintf(path, plen, "%s/kernels.txt", dir);
    if (!(list = fopen(path, "w"))) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = -1;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        snprintf(path, plen, "%s/%s.%s", dir, ks[i].name, target == RT_TARGET_PTX ? "ptx" : "cubin");
        FILE *f = fopen(path, target == RT_TARGET_PTX ? "w" : "wb");
        bool ok = f && fwrite(res[i].code.data, 1, res[i].code.size, f) == res[i].code.size;
        if (f) ok = (fclose(f) == 0) && ok;
        if (!ok) {
            snprintf(err, errlen, "%s: %s", path, f ? "write failed" : strerror(errno));
            rc = -1;
            goto done;
        }
        cg_kernel_describe(g, &ks[i], list);
    }
done:
    if (list && fclose(list) != 0 && rc >= 0) {
        snprintf(err, errlen, "%s/kernels.txt: write failed", dir);
        rc = -1;
    }
    for (int i = 0; res && i < n; i++) rt_compile_result_free(&res[i]);
    free(res);
    free(srcs);
    free(names);
    free(path);
    cg_kernels_free(ks, n);
    return rc;
}
