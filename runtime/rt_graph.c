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

static rt_status record_eagerly(rt_record_fn record, void *user, void *stream, char *err, size_t n)
{
    int rc = record(user, stream, err, n);
    return rt_status_of(rc);
}

typedef enum capture_result {
    CAPTURED,      /* *out holds the new graph */
    RECORD_FAILED, /* the record failed: its status in *st, its message in err */
    REFUSED,       /* CUDA refused or invalidated the capture (another thread's
                    * legacy-stream work can do that): the caller launches eagerly */
} capture_result;

/* Capture the launches into a new graph. The capture calls are probes: their
 * failure is an answer (REFUSED), so their messages are not kept. */
static capture_result capture(void *stream, rt_record_fn record, void *user, cudaGraph_t *out, rt_status *st,
                              char *err, size_t n)
{
    *out = NULL;
    cudaStream_t s = (cudaStream_t)stream;
    if (RT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), NULL, NULL, 0) != RT_OK)
        return REFUSED;
    int rc = record(user, stream, err, n);
    cudaGraph_t g = NULL;
    /* always end the capture, even after a failure */
    rt_status ended = RT_CUDA_CHECK(cudaStreamEndCapture(s, &g), NULL, NULL, 0);
    if (ended != RT_OK) { /* a failed end may leave the stream capturing: nothing could run on it */
        enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        for (int tries = 0; tries < 2 && RT_CUDA_CHECK(cudaStreamIsCapturing(s, &cs), NULL, NULL, 0) == RT_OK &&
                            cs != cudaStreamCaptureStatusNone;
             tries++) {
            cudaGraph_t dropped = NULL;
            if (RT_CUDA_CHECK(cudaStreamEndCapture(s, &dropped), NULL, NULL, 0) == RT_OK && dropped)
                (void)cudaGraphDestroy(dropped);
        }
    }
    if (rc != 0 || ended != RT_OK || !g) {
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        if (rc == 0) return REFUSED;
        *st = rt_status_of(rc);
        return RECORD_FAILED;
    }
    *out = g;
    return CAPTURED;
}

rt_status rt_graph_run(rt_graph_cache *c, const int64_t *key, int nkey, const void *const *ptrs, int nptrs,
                       void *stream, rt_record_fn record, void *user, rt_graph_how *how, char *err, size_t errlen)
{
    if (!c || !record || !how || nkey < 0 || nptrs < 0)
        return rt_fail(RT_ERR_INVALID, err, errlen, "rt_graph_run: bad arguments");
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    RT_CUDA_TRY(cudaStreamIsCapturing((cudaStream_t)stream, &cs), err, errlen);
    if (cs != cudaStreamCaptureStatusNone) { /* the caller captures us into its own graph */
        *how = RT_GRAPH_EAGER_CAPTURING;
        return record_eagerly(record, user, stream, err, errlen);
    }
    entry *hit = NULL;
    for (int i = 0; i < c->n && !hit; i++)
        if (c->e[i].nkey == nkey && !memcmp(c->e[i].key, key, (size_t)nkey * sizeof *key)) hit = &c->e[i];
    if (!hit && c->n >= c->max) {
        *how = RT_GRAPH_EAGER_FULL;
        return record_eagerly(record, user, stream, err, errlen);
    }
    if (hit && hit->nptrs == nptrs && !memcmp(hit->ptrs, ptrs, (size_t)nptrs * sizeof *ptrs)) {
        RT_CUDA_TRY(cudaGraphLaunch(hit->exec, (cudaStream_t)stream), err, errlen);
        *how = RT_GRAPH_REPLAYED;
        return RT_OK;
    }
    cudaGraph_t g = NULL;
    rt_status st = RT_OK;
    switch (capture(stream, record, user, &g, &st, err, errlen)) {
    case CAPTURED: break;
    case RECORD_FAILED: return st;
    case REFUSED: /* this run goes eagerly */
        *how = RT_GRAPH_EAGER_CAPTURE_FAILED;
        return record_eagerly(record, user, stream, err, errlen);
    }
    void **np = malloc((size_t)(nptrs + 1) * sizeof *np);
    if (!np) {
        (void)cudaGraphDestroy(g);
        return rt_fail(RT_ERR_NOMEM, err, errlen, "rt_graph_run: out of memory");
    }
    if (nptrs) memcpy(np, ptrs, (size_t)nptrs * sizeof *np);
    if (hit) {
        cudaGraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        /* refused when the topology changed (a probe): instantiate anew */
        if (RT_CUDA_CHECK(cudaGraphExecUpdate(hit->exec, g, &info), NULL, NULL, 0) != RT_OK) {
            cudaGraphExec_t ex = NULL;
            st = RT_CUDA_CHECK(cudaGraphInstantiate(&ex, g, 0), NULL, err, errlen);
            if (st != RT_OK) {
                (void)cudaGraphDestroy(g);
                free(np);
                return st;
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
            return rt_fail(RT_ERR_NOMEM, err, errlen, "rt_graph_run: out of memory");
        }
        if (nkey) memcpy(ne.key, key, (size_t)nkey * sizeof *key);
        ne.nkey = nkey;
        ne.ptrs = np;
        ne.nptrs = nptrs;
        st = RT_CUDA_CHECK(cudaGraphInstantiate(&ne.exec, g, 0), NULL, err, errlen);
        if (st != RT_OK) {
            (void)cudaGraphDestroy(g);
            free(ne.key);
            free(np);
            return st;
        }
        c->e[c->n++] = ne;
        hit = &c->e[c->n - 1];
        *how = RT_GRAPH_CAPTURED;
    }
    (void)cudaGraphDestroy(g);
    RT_CUDA_TRY(cudaGraphLaunch(hit->exec, (cudaStream_t)stream), err, errlen);
    return RT_OK;
}
