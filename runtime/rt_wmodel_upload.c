/* runtime/rt_wmodel_upload.c — weight uploads through pinned staging buffers
 * (rt_wmodel.h, rt_upload_*).
 *
 * Algorithm: up to RT_UPLOAD_THREADS threads start at rt_upload_begin and
 * make their pinned buffers while the caller allocates the device buffers
 * and queues the copies (device address, source, bytes); the threads take the
 * queue's pieces of RT_UPLOAD_PIECE bytes in order as they come. Each thread
 * owns a stream and two pinned buffers: it reads a piece into one buffer
 * (pread from the file, or a copy from memory) while the DMA engine copies its
 * previous piece from the other buffer to the device. So several reads of the
 * file run at once, each overlapped with the host-to-device copies, every
 * copy runs at pinned speed, and the set-up (pinning, cudaMalloc) overlaps
 * the transfers. The pinned buffers exist for one upload. */
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

/* One thread's state (rt_upload.workers). */
typedef struct rt_upload_worker {
    rt_upload *u;
    pthread_t th;
    bool started;
    rt_status st;
    char err[512];
} rt_upload_worker;

/* The next piece, waiting for one while the queue is open: false when none
 * is left (the queue closed and drained, or a thread failed). */
static bool take(rt_upload *u, rt_upload_job *job, size_t *off, size_t *len)
{
    pthread_mutex_lock(&u->mu);
    while (!u->failed && u->next_job >= u->njobs && !u->closed) pthread_cond_wait(&u->cv, &u->mu);
    bool got = !u->failed && u->next_job < u->njobs;
    if (got) {
        *job = u->jobs[u->next_job]; /* a copy: the queue may grow (realloc) meanwhile */
        *off = u->next_off;
        *len = job->bytes - *off < u->piece ? job->bytes - *off : u->piece;
        u->next_off += *len;
        if (u->next_off >= job->bytes) {
            u->next_job++;
            u->next_off = 0;
        }
    }
    pthread_mutex_unlock(&u->mu);
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
    rt_upload_worker *w = arg;
    rt_upload *u = w->u;
    cudaStream_t s = NULL;
    void *pinned[2] = {NULL, NULL};
    cudaEvent_t done[2] = {NULL, NULL};
    rt_status st = RT_CUDA_CHECK(cudaSetDevice(u->device), "weight upload", w->err, sizeof w->err);
    if (st == RT_OK)
        st = RT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "weight upload stream", w->err, sizeof w->err);
    for (int i = 0; i < 2 && st == RT_OK; i++) {
        st = RT_CUDA_CHECK(cudaHostAlloc(&pinned[i], u->piece, cudaHostAllocDefault), "weight staging buffer", w->err,
                           sizeof w->err);
        if (st == RT_OK)
            st = RT_CUDA_CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming), "weight staging", w->err,
                               sizeof w->err);
    }
    rt_upload_job j;
    size_t off, len;
    for (int slot = 0; st == RT_OK && take(u, &j, &off, &len); slot ^= 1) {
        /* the buffer's previous copy has finished */
        st = RT_CUDA_CHECK(cudaEventSynchronize(done[slot]), j.who, w->err, sizeof w->err);
        if (st == RT_OK) st = read_piece(&j, off, pinned[slot], len, w->err, sizeof w->err);
        if (st == RT_OK)
            st = RT_CUDA_CHECK(cudaMemcpyAsync((char *)j.dev + off, pinned[slot], len, cudaMemcpyHostToDevice, s), j.who,
                               w->err, sizeof w->err);
        if (st == RT_OK) st = RT_CUDA_CHECK(cudaEventRecord(done[slot], s), j.who, w->err, sizeof w->err);
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
        pthread_mutex_lock(&u->mu);
        u->failed = true;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
    }
    return NULL;
}

rt_status rt_upload_begin(rt_upload *u, int device, size_t total, char *err, size_t n)
{
    memset(u, 0, sizeof *u);
    u->device = device;
    u->piece = total < RT_UPLOAD_PIECE ? total : RT_UPLOAD_PIECE;
    if (!total) return RT_OK;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)(cpus < 1 ? 1 : cpus > RT_UPLOAD_THREADS ? RT_UPLOAD_THREADS : cpus);
    size_t pieces = (total + RT_UPLOAD_PIECE - 1) / RT_UPLOAD_PIECE;
    if ((size_t)nt > pieces) nt = (int)pieces;
    if (pthread_mutex_init(&u->mu, NULL) != 0) return rt_fail(RT_ERR_NOMEM, err, n, "weight upload: no mutex");
    if (pthread_cond_init(&u->cv, NULL) != 0) {
        pthread_mutex_destroy(&u->mu);
        return rt_fail(RT_ERR_NOMEM, err, n, "weight upload: no condition variable");
    }
    u->sync_ready = true;
    u->workers = calloc((size_t)nt, sizeof *u->workers);
    if (!u->workers) return rt_fail(RT_ERR_NOMEM, err, n, "weight upload: out of memory");
    u->nworkers = nt;
    /* the threads start now: their pinned buffers are made while the caller allocates and queues */
    for (int i = 0; i < nt; i++) {
        u->workers[i] = (rt_upload_worker){.u = u, .st = RT_OK};
        u->workers[i].started = pthread_create(&u->workers[i].th, NULL, work, &u->workers[i]) == 0;
        u->nstarted += u->workers[i].started;
    }
    return RT_OK;
}

rt_status rt_upload_add(rt_upload *u, void *dev, const void *src, int fd, size_t off, size_t bytes, const char *who, char *err,
                        size_t n)
{
    if (!bytes) return RT_OK;
    if (!u->sync_ready) return rt_fail(RT_ERR_INTERNAL, err, n, "weight upload: %s: more bytes than rt_upload_begin was told", who);
    char *w = strdup(who ? who : "weight upload");
    if (!w) return rt_fail(RT_ERR_NOMEM, err, n, "weight upload: out of memory");
    pthread_mutex_lock(&u->mu);
    rt_status st = RT_OK;
    if (u->njobs == u->capjobs) {
        size_t cap = u->capjobs ? 2 * u->capjobs : 64;
        rt_upload_job *j = realloc(u->jobs, cap * sizeof *j);
        if (!j) st = rt_fail(RT_ERR_NOMEM, err, n, "weight upload: out of memory");
        else {
            u->jobs = j;
            u->capjobs = cap;
        }
    }
    if (st == RT_OK) {
        u->jobs[u->njobs++] = (rt_upload_job){dev, src, fd, off, bytes, w};
        u->total += bytes;
        pthread_cond_signal(&u->cv);
    } else
        free(w);
    pthread_mutex_unlock(&u->mu);
    return st;
}

rt_status rt_upload_run(rt_upload *u, char *err, size_t n)
{
    if (!u->sync_ready) return RT_OK; /* nothing to copy */
    pthread_mutex_lock(&u->mu);
    u->closed = true;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    /* no thread started: this one does the copies */
    rt_upload_worker self = {.u = u, .st = RT_OK};
    if (!u->nstarted) work(&self);
    rt_status st = self.st;
    if (st != RT_OK) rt_fail(st, err, n, "%s", self.err);
    for (int i = 0; i < u->nworkers; i++) {
        rt_upload_worker *w = &u->workers[i];
        if (!w->started) continue;
        pthread_join(w->th, NULL);
        w->started = false;
        if (st == RT_OK && w->st != RT_OK) {
            st = w->st;
            rt_fail(st, err, n, "%s", w->err);
        }
    }
    u->nstarted = 0;
    /* the threads' own device was made current in them; the caller's stays */
    return st;
}

void rt_upload_end(rt_upload *u)
{
    if (u->sync_ready) { /* threads still running (run not called): stop and join them */
        pthread_mutex_lock(&u->mu);
        u->failed = true; /* no further piece is taken */
        u->closed = true;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        for (int i = 0; i < u->nworkers; i++)
            if (u->workers[i].started) pthread_join(u->workers[i].th, NULL);
        pthread_cond_destroy(&u->cv);
        pthread_mutex_destroy(&u->mu);
    }
    for (size_t i = 0; i < u->njobs; i++) free(u->jobs[i].who);
    free(u->jobs);
    free(u->workers);
    memset(u, 0, sizeof *u);
}
