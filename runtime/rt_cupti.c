/* runtime/rt_cupti.c — CUPTI activity records through dlopen
 * (runtime/rt_cupti.h).
 *
 * Process-wide state, both forced by CUPTI: the loaded library's function
 * table (filled once, under pthread_once, never changed after) and the open
 * session that the buffer callbacks deliver into (a pointer behind a mutex).
 * The callbacks are registered once per process, with the library; records
 * that arrive with no session open are dropped with their buffer. */
#define _GNU_SOURCE
#include "runtime/rt_cupti.h"

#include <cupti_activity.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_util.h"
#include "util/arena.h"

#ifndef KILN_CUDA_ROOT
#define KILN_CUDA_ROOT "/usr/local/cuda"
#endif

/* The fields read from kernel records sit in the prefix every version of
 * the record has shared since CUpti_ActivityKernel4, so a newer CUPTI's
 * records read right. */
_Static_assert(offsetof(CUpti_ActivityKernel10, start) == offsetof(CUpti_ActivityKernel4, start), "kernel record");
_Static_assert(offsetof(CUpti_ActivityKernel10, end) == offsetof(CUpti_ActivityKernel4, end), "kernel record");
_Static_assert(offsetof(CUpti_ActivityKernel10, streamId) == offsetof(CUpti_ActivityKernel4, streamId), "kernel record");
_Static_assert(offsetof(CUpti_ActivityKernel10, correlationId) == offsetof(CUpti_ActivityKernel4, correlationId),
               "kernel record");
_Static_assert(offsetof(CUpti_ActivityKernel10, name) == offsetof(CUpti_ActivityKernel4, name), "kernel record");
_Static_assert(offsetof(CUpti_ActivityMemset4, start) == offsetof(CUpti_ActivityMemset, start), "memset record");
_Static_assert(offsetof(CUpti_ActivityMemset4, end) == offsetof(CUpti_ActivityMemset, end), "memset record");
_Static_assert(offsetof(CUpti_ActivityMemset4, correlationId) == offsetof(CUpti_ActivityMemset, correlationId),
               "memset record");

/* ---- the library ------------------------------------------------------------------------------ */

typedef struct cupti_api {
    CUptiResult(CUPTIAPI *enable)(CUpti_ActivityKind);
    CUptiResult(CUPTIAPI *disable)(CUpti_ActivityKind);
    CUptiResult(CUPTIAPI *next)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult(CUPTIAPI *register_cb)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult(CUPTIAPI *flush_all)(uint32_t);
    CUptiResult(CUPTIAPI *dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult(CUPTIAPI *result_string)(CUptiResult, const char **);
} cupti_api;

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static cupti_api api;          /* set once, in load_once */
static char lib_path[512];     /* set once: the path that loaded, "" when none did */
static char lib_why[2048];     /* set once: why none loaded */
static bool callbacks_ok;      /* set once: the buffer callbacks are registered */

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_cupti *session;      /* the open session, behind session_lock */

struct rt_cupti {
    arena a;                   /* kernel names */
    rt_cupti_record *recs;
    int nrecs, cap;
    uint64_t dropped;
    bool oom;
    bool graphs; /* graph-level records (rt_cupti_trace_graphs) instead of kernels and memsets */
};

int rt_cupti_candidates(rt_getenv_fn getenv_fn, void *user, char (*out)[512], int max)
{
    static const char *const subs[] = {"lib64", "extras/CUPTI/lib64", "lib", "targets/x86_64-linux/lib"};
    return rt_lib_candidates("KILN_CUPTI_LIB", "libcupti.so", 13, subs, 4, getenv_fn, user, out, max);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = 4u << 20;
    *buffer = malloc(*size);
    if (!*buffer) *size = 0;
    *max_records = 0;
}

static void add_record(rt_cupti *c, const rt_cupti_record *r)
{
    if (c->nrecs == c->cap) {
        int cap = c->cap ? 2 * c->cap : 1024;
        rt_cupti_record *nr = realloc(c->recs, (size_t)cap * sizeof *nr);
        if (!nr) {
            c->oom = true;
            return;
        }
        c->recs = nr;
        c->cap = cap;
    }
    c->recs[c->nrecs++] = *r;
}

/* Kernel names repeat: keep one copy each (a short list per session). */
static const char *intern(rt_cupti *c, const char *name)
{
    for (int i = c->nrecs - 1; i >= 0 && i >= c->nrecs - 4096; i--)
        if (c->recs[i].name && !strcmp(c->recs[i].name, name)) return c->recs[i].name;
    return arena_strdup(&c->a, name);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    pthread_mutex_lock(&session_lock);
    rt_cupti *c = session;
    CUpti_Activity *rec = NULL;
    while (c && valid && api.next(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            rt_cupti_record r = {RT_CUPTI_KERNEL, k->name ? intern(c, k->name) : NULL, k->start, k->end, k->streamId,
                                 k->correlationId};
            add_record(c, &r);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            rt_cupti_record r = {RT_CUPTI_MEMSET, NULL, m->start, m->end, m->streamId, m->correlationId};
            add_record(c, &r);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
            const CUpti_ActivityGraphTrace2 *gt = (const CUpti_ActivityGraphTrace2 *)rec;
            rt_cupti_record r = {RT_CUPTI_GRAPH, NULL, gt->start, gt->end, gt->streamId, gt->correlationId};
            if (gt->start || gt->end) add_record(c, &r); /* both 0: CUPTI could not time it */
        }
    }
    if (c && api.dropped) {
        size_t d = 0;
        if (api.dropped(ctx, stream, &d) == CUPTI_SUCCESS) c->dropped += d;
    }
    pthread_mutex_unlock(&session_lock);
    free(buffer);
}

static void load_once(void)
{
    char cand[40][512];
    int nc = rt_cupti_candidates(NULL, NULL, cand, 40);
    const rt_lib_sym syms[] = {
        {"cuptiActivityEnable", (void **)&api.enable},
        {"cuptiActivityDisable", (void **)&api.disable},
        {"cuptiActivityGetNextRecord", (void **)&api.next},
        {"cuptiActivityRegisterCallbacks", (void **)&api.register_cb},
        {"cuptiActivityFlushAll", (void **)&api.flush_all},
        {"cuptiActivityGetNumDroppedRecords", (void **)&api.dropped},
        {"cuptiGetResultString", (void **)&api.result_string},
    };
    if (!rt_lib_load(cand, nc, syms, (int)(sizeof syms / sizeof syms[0]), lib_path, sizeof lib_path, lib_why,
                     sizeof lib_why)) {
        size_t used = strlen(lib_why);
        if (!strstr(lib_why, " has no ") && used + 1 < sizeof lib_why)
            snprintf(lib_why + used, sizeof lib_why - used, "; not under any toolkit root either (set KILN_CUPTI_LIB)");
    }
}

const char *rt_cupti_load(char *err, size_t n)
{
    pthread_once(&lib_once, load_once);
    if (lib_path[0]) return lib_path;
    rt_fail(RT_ERR_NOT_FOUND, err, n, "CUPTI could not be loaded: %s", lib_why);
    return NULL;
}

static rt_status cupti_fail(CUptiResult r, const char *call, char *err, size_t n)
{
    const char *s = NULL;
    if (api.result_string) api.result_string(r, &s);
    rt_status st = r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? RT_ERR_INVALID : RT_ERR_CUDA;
    return rt_fail(st, err, n, "%s: %s (CUPTI error %d)%s", call, s ? s : "failed", (int)r,
                   r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? "; profiling needs permission to use GPU counters" : "");
}

#define CUPTI_TRY(call, err, n)                                      \
    do {                                                             \
        CUptiResult r_ = (call);                                     \
        if (r_ != CUPTI_SUCCESS) return cupti_fail(r_, #call, err, n); \
    } while (0)

static void register_once(void)
{
    callbacks_ok = api.register_cb(buffer_requested, buffer_completed) == CUPTI_SUCCESS;
}

static pthread_once_t cb_once = PTHREAD_ONCE_INIT;

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET};

rt_status rt_cupti_open(rt_cupti **out, char *err, size_t n)
{
    *out = NULL;
    if (!rt_cupti_load(err, n)) return RT_ERR_NOT_FOUND;
    pthread_once(&cb_once, register_once);
    if (!callbacks_ok) return rt_fail(RT_ERR_CUDA, err, n, "cuptiActivityRegisterCallbacks failed (%s)", lib_path);
    rt_cupti *c = calloc(1, sizeof *c);
    if (!c) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    arena_init(&c->a);
    pthread_mutex_lock(&session_lock);
    bool busy = session != NULL;
    if (!busy) session = c;
    pthread_mutex_unlock(&session_lock);
    if (busy) {
        arena_free(&c->a);
        free(c);
        return rt_fail(RT_ERR_INVALID, err, n, "another profile is running in this process (CUPTI has one client)");
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        CUptiResult r = api.enable(kinds[i]);
        if (r != CUPTI_SUCCESS) {
            rt_status st = cupti_fail(r, "cuptiActivityEnable", err, n);
            rt_cupti_close(c);
            return st;
        }
    }
    *out = c;
    return RT_OK;
}

rt_status rt_cupti_flush(rt_cupti *c, char *err, size_t n)
{
    CUPTI_TRY(api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), err, n);
    pthread_mutex_lock(&session_lock);
    bool oom = c->oom;
    pthread_mutex_unlock(&session_lock);
    return oom ? rt_fail(RT_ERR_NOMEM, err, n, "out of memory for CUPTI records") : RT_OK;
}

void rt_cupti_clear(rt_cupti *c)
{
    pthread_mutex_lock(&session_lock);
    c->nrecs = 0;
    c->dropped = 0;
    pthread_mutex_unlock(&session_lock);
}

rt_cupti_record *rt_cupti_take(rt_cupti *c, int *count, uint64_t *dropped)
{
    pthread_mutex_lock(&session_lock);
    rt_cupti_record *r = c->recs;
    *count = c->nrecs;
    if (dropped) *dropped = c->dropped;
    c->recs = NULL;
    c->nrecs = c->cap = 0;
    c->dropped = 0;
    pthread_mutex_unlock(&session_lock);
    return r;
}

rt_status rt_cupti_trace_graphs(rt_cupti *c, char *err, size_t n)
{
    if (!c) return rt_fail(RT_ERR_INVALID, err, n, "rt_cupti_trace_graphs: no session");
    if (c->graphs) return RT_OK;
    (void)api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* what the other kinds hold is delivered first */
    const size_t nk = sizeof kinds / sizeof kinds[0];
    for (size_t i = 0; i < nk; i++) (void)api.disable(kinds[i]);
    CUptiResult r = api.enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    if (r != CUPTI_SUCCESS) {
        for (size_t i = 0; i < nk; i++) (void)api.enable(kinds[i]);
        return cupti_fail(r, "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)", err, n);
    }
    c->graphs = true;
    return RT_OK;
}

void rt_cupti_close(rt_cupti *c)
{
    if (!c) return;
    if (c->graphs) (void)api.disable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) (void)api.disable(kinds[i]);
    (void)api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&session_lock);
    if (session == c) session = NULL;
    pthread_mutex_unlock(&session_lock);
    free(c->recs);
    arena_free(&c->a);
    free(c);
}
