/* runtime/rt_wmodel_upload.c — weight uploads through pinned staging buffers
 * (rt_wmodel.h, rt_upload_*).
 *
 * Algorithm: the copies are queued (device address, source, bytes), then cut
 * into pieces of RT_UPLOAD_PIECE bytes that up to RT_UPLOAD_THREADS threads
 * take in order. Each thread owns a stream and two pinned buffers: it reads a
 * piece into one buffer (pread from the file, or a copy from memory) while
 * the DMA engine copies its previous piece from the other buffer to the
 * device. So several reads of the file run at once, each overlapped with the
 * host-to-device copies, and every copy runs at pinned speed. The pinned
 * buffers exist for one rt_upload_run. */
#define _XOPEN_SOURCE 700 /* pread, sysconf */
#include "runtime/rt_wmodel.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt_model_internal.h"

typedef struct rt_upload_job {
    void *dev;
    const void *src; /* fd < 0 */
    int fd;          /* >= 0: read bytes at off from it */
    size_t off, bytes;
    char *who;
} rt_upload_job;

rt_status rt_upload_begin(rt_upload *u, int device, char *err, size_t n)
{
    memset(u, 0, sizeof *u);
    u->device = device;
    (void)err;
    (void)n;
    return RT_OK;
}

rt_status rt_upload_add(rt_upload *u, void *dev, const void *src, int fd, size_t off, size_t bytes, const char *who, char *err,
                        size_t n)
{
    if (!bytes) return RT_OK;
    if (u->njobs == u->capjobs) {
        int cap = u->capjobs ? 2 * u->capjobs : 64;
        rt_upload_job *j = realloc(u->jobs, (size_t)cap * sizeof *j);
        if (!j) return rt_fail(RT_ERR_NOMEM, err, n, "weight upload: out of memory");
        u->jobs = j;
        u->capjobs = cap;
    }
    char *w = strdup(who ? who : "weight upload");
    if (!w) return rt_fail(RT_ERR_NOMEM, err, n, "weight upload: out of memory");
    u->jobs[u->njobs++] = (rt_upload_job){dev, src, fd, off, bytes, w};
    u->total += bytes;
    return RT_OK;
}

typedef struct worker {
    rt_upload *u;
    pthread_mutex_t *mu;
    size_t *next_job, *next_off; /* the cursor over the pieces */
    rt_status st;
    char err[512];
} worker;

/* The next piece: false when none is left (or another thread failed). */
static bool take(worker *w, rt_upload_job **job, size_t *off, size_t *len)
{
    pthread_mutex_lock(w->mu);
    bool got = false;
    rt_upload *u = w->u;
    if (!u->failed && *w->next_job < (size_t)u->njobs) {
        *job = &u->jobs[*w->next_job];
        *off = *w->next_off;
        *len = (*job)->bytes - *off < RT_UPLOAD_PIECE ? (*job)->bytes - *off : RT_UPLOAD_PIECE;
        *w->next_off += *len;
        if (*w->next_off >= (*job)->bytes) {
            ++*w->next_job;
            *w->next_off = 0;
        }
        got = true;
    }
    pthread_mutex_unlock(w->mu);
    return got;
}

static rt_status read_piece(const rt_upload_job *j, size_t off, void *dst, size_t len, char *err, size_t n)
{
    if (j->fd < 0) {
        memcpy(dst, (const char *)j->src + off, len);
        return RT_OK;
    }
    for (size_t done = 0; done < len;) {
        ssize_t r = pread(j->fd, (char *)dst + done, len - done, (off_t)(j->off + off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return rt_fail(RT_ERR_IO, err, n, "%s: read: %s", j->who, r < 0 ? strerror(errno) : "the file ended early");
        done += (size_t)r;
    }
    return RT_OK;
}

static void *work(void *arg)
{
    worker *w = arg;
    rt_upload *u = w->u;
    cudaStream_t s = NULL;
    void *pinned[2] = {NULL, NULL};
    cudaEvent_t done[2] = {NULL, NULL};
    rt_status st = RT_CUDA_CHECK(cudaSetDevice(u->device), "weight upload", w->err, sizeof w->err);
    if (st == RT_OK)
        st = RT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "weight upload stream", w->err, sizeof w->err);
    size_t piece = u->total < RT_UPLOAD_PIECE ? u->total : RT_UPLOAD_PIECE;
    for (int i = 0; i < 2 && st == RT_OK; i++) {
        st = RT_CUDA_CHECK(cudaHostAlloc(&pinned[i], piece, cudaHostAllocDefault), "weight staging buffer", w->err,
                           sizeof w->err);
        if (st == RT_OK)
            st = RT_CUDA_CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming), "weight staging", w->err,
                               sizeof w->err);
    }
    rt_upload_job *j;
    size_t off, len;
    for (int slot = 0; st == RT_OK && take(w, &j, &off, &len); slot ^= 1) {
        /* the buffer's previous copy has finished */
        st = RT_CUDA_CHECK(cudaEventSynchronize(done[slot]), j->who, w->err, sizeof w->err);
        if (st == RT_OK) st = read_piece(j, off, pinned[slot], len, w->err, sizeof w->err);
        if (st == RT_OK)
            st = RT_CUDA_CHECK(cudaMemcpyAsync((char *)j->dev + off, pinned[slot], len, cudaMemcpyHostToDevice, s), j->who,
                               w->err, sizeof w->err);
        if (st == RT_OK) st = RT_CUDA_CHECK(cudaEventRecord(done[slot], s), j->who, w->err, sizeof w->err);
    }
    if (s) {
        rt_status sync = RT_CUDA_CHECK(cudaStreamSynchronize(s), "weight upload", w->err, sizeof w->err);
        if (st == RT_OK) st = sync;
    }
    for (int i = 0; i < 2; i++) {
        if (done[i]) (void)cudaEventDestroy(done[i]);
        if (pinned[i]) (void)cudaFreeHost(pinned[i]);
    }
    if (s) (void)cudaStreamDestroy(s);
    w->st = st;
    if (st != RT_OK) {
        pthread_mutex_lock(w->mu);
        u->failed = true;
        pthread_mutex_unlock(w->mu);
    }
    return NULL;
}

rt_status rt_upload_run(rt_upload *u, char *err, size_t n)
{
    if (!u->njobs) return RT_OK;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)(cpus < 1 ? 1 : cpus > RT_UPLOAD_THREADS ? RT_UPLOAD_THREADS : cpus);
    size_t pieces = (u->total + RT_UPLOAD_PIECE - 1) / RT_UPLOAD_PIECE;
    if ((size_t)nt > pieces) nt = (int)pieces;
    pthread_mutex_t mu;
    if (pthread_mutex_init(&mu, NULL) != 0) return rt_fail(RT_ERR_NOMEM, err, n, "weight upload: no mutex");
    size_t next_job = 0, next_off = 0;
    worker w[RT_UPLOAD_THREADS];
    pthread_t th[RT_UPLOAD_THREADS];
    bool started[RT_UPLOAD_THREADS] = {false};
    for (int i = 0; i < nt; i++) {
        w[i] = (worker){u, &mu, &next_job, &next_off, RT_OK, ""};
        started[i] = i > 0 && pthread_create(&th[i], NULL, work, &w[i]) == 0;
    }
    work(&w[0]); /* this thread is worker 0; a thread that did not start leaves its share to the others */
    rt_status st = RT_OK;
    for (int i = 0; i < nt; i++) {
        if (i > 0 && !started[i]) continue;
        if (i > 0) pthread_join(th[i], NULL);
        if (st == RT_OK && w[i].st != RT_OK) {
            st = w[i].st;
            rt_fail(st, err, n, "%s", w[i].err);
        }
    }
    pthread_mutex_destroy(&mu);
    /* the threads' own device was made current in them; the caller's stays */
    return st;
}

void rt_upload_end(rt_upload *u)
{
    for (int i = 0; i < u->njobs; i++) free(u->jobs[i].who);
    free(u->jobs);
    memset(u, 0, sizeof *u);
}
