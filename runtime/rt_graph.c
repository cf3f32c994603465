/* runtime/rt_graph.c — the CUDA graph cache (see rt_graph.h).
 *
 * Entries are a small array searched linearly (max_entries is ~16). Capture
 * uses cudaStreamCaptureModeThreadLocal so that CUDA calls made by other
 * threads (another context allocating memory) do not invalidate it. */
#include "runtime/rt_graph.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_err.h"

typedef struct entry {
    int64_t *key;
    int nkey;
    void **ptrs;
    int nptrs;
    cudaGraphExec_t exec;
} entry;

struct rt_graph_cache {
    entry *e;
    int n, max;
};

rt_graph_cache *rt_graph_cache_new(int max_entries)
{
    rt_graph_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->max = max_entries > 0 ? max_entries : 16;
    c->e = calloc((size_t)c->max, sizeof *c->e);
    if (!c->e) {
        free(c);
        return NULL;
    }
    return c;
}

static void entry_free(entry *e)
{
    if (e->exec) (void)cudaGraphExecDestroy(e->exec);
    free(e->key);
    free(e->ptrs);
    memset(e, 0, sizeof *e);
}

void rt_graph_cache_clear(rt_graph_cache *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) entry_free(&c->e[i]);
    c->n = 0;
}

void rt_graph_cache_free(rt_graph_cache *c)
{
    if (!c) return;
    rt_graph_cache_clear(c);
    free(c->e);
    free(c);
}

int rt_graph_cache_size(const rt_graph_cache *c) { return c ? c->n : 0; }

static int cuda_fail(cudaError_t e, const char *what, char *err, size_t n)
{
    return rt_fail(-1, err, n, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Capture the launches into a new graph. Returns 0; -1 when the record
 * failed (its message in err); 1 when CUDA refused or invalidated the
 * capture itself (another thread's legacy-stream work can do that), in
 * which case the caller launches eagerly. */
static int capture(void *stream, rt_record_fn record, void *user, cudaGraph_t *out, char *err, size_t n)
{
    *out = NULL;
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    int rc = record(user, stream, err, n);
    cudaGraph_t g = NULL;
    e = cudaStreamEndCapture(s, &g); /* always end the capture, even after a failure */
    if (rc != 0) {
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return -1;
    }
    if (e != cudaSuccess || !g) {
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return 1;
    }
    *out = g;
    return 0;
}

int rt_graph_run(rt_graph_cache *c, const int64_t *key, int nkey, const void *const *ptrs, int nptrs, void *stream,
                 rt_record_fn record, void *user, rt_graph_how *how, char *err, size_t errlen)
{
    if (!c || !record || !how || nkey < 0 || nptrs < 0) return rt_fail(-1, err, errlen, "rt_graph_run: bad arguments");
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing((cudaStream_t)stream, &cs);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamIsCapturing", err, errlen);
    if (cs != cudaStreamCaptureStatusNone) { /* the caller captures us into its own graph */
        *how = RT_GRAPH_EAGER_CAPTURING;
        return record(user, stream, err, errlen);
    }
    entry *hit = NULL;
    for (int i = 0; i < c->n && !hit; i++)
        if (c->e[i].nkey == nkey && !memcmp(c->e[i].key, key, (size_t)nkey * sizeof *key)) hit = &c->e[i];
    if (!hit && c->n >= c->max) {
        *how = RT_GRAPH_EAGER_FULL;
        return record(user, stream, err, errlen);
    }
    if (hit && hit->nptrs == nptrs && !memcmp(hit->ptrs, ptrs, (size_t)nptrs * sizeof *ptrs)) {
        e = cudaGraphLaunch(hit->exec, (cudaStream_t)stream);
        if (e != cudaSuccess) return cuda_fail(e, "cudaGraphLaunch", err, errlen);
        *how = RT_GRAPH_REPLAYED;
        return 0;
    }
    cudaGraph_t g = NULL;
    int cr = capture(stream, record, user, &g, err, errlen);
    if (cr < 0) return -1;
    if (cr > 0) { /* the capture was refused or invalidated: this run goes eagerly */
        *how = RT_GRAPH_EAGER_CAPTURE_FAILED;
        return record(user, stream, err, errlen);
    }
    void **np = malloc((size_t)(nptrs + 1) * sizeof *np);
    if (!np) {
        (void)cudaGraphDestroy(g);
        return rt_fail(-1, err, errlen, "out of memory");
    }
    if (nptrs) memcpy(np, ptrs, (size_t)nptrs * sizeof *np);
    if (hit) {
        cudaGraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        e = cudaGraphExecUpdate(hit->exec, g, &info);
        if (e != cudaSuccess) { /* the topology changed: instantiate anew */
            (void)cudaGetLastError();
            cudaGraphExec_t ex = NULL;
            e = cudaGraphInstantiate(&ex, g, 0);
            if (e != cudaSuccess) {
                (void)cudaGraphDestroy(g);
                free(np);
                return cuda_fail(e, "cudaGraphInstantiate", err, errlen);
            }
            (void)cudaGraphExecDestroy(hit->exec);
            hit->exec = ex;
        }
        free(hit->ptrs);
        hit->ptrs = np;
        hit->nptrs = nptrs;
        *how = RT_GRAPH_UPDATED;
    } else {
        entry ne;
        memset(&ne, 0, sizeof ne);
        ne.key = malloc((size_t)(nkey + 1) * sizeof *ne.key);
        if (!ne.key) {
            (void)cudaGraphDestroy(g);
            free(np);
            return rt_fail(-1, err, errlen, "out of memory");
        }
        if (nkey) memcpy(ne.key, key, (size_t)nkey * sizeof *key);
        ne.nkey = nkey;
        ne.ptrs = np;
        ne.nptrs = nptrs;
        e = cudaGraphInstantiate(&ne.exec, g, 0);
        if (e != cudaSuccess) {
            (void)cudaGraphDestroy(g);
            free(ne.key);
            free(np);
            return cuda_fail(e, "cudaGraphInstantiate", err, errlen);
        }
        c->e[c->n++] = ne;
        hit = &c->e[c->n - 1];
        *how = RT_GRAPH_CAPTURED;
    }
    (void)cudaGraphDestroy(g);
    e = cudaGraphLaunch(hit->exec, (cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphLaunch", err, errlen);
    return 0;
}
