/* tests/fault/fault.c — the wrappers behind tests/fault/fault.h. Each
 * __wrap_F counts its call, fails it when it is the armed one, else calls
 * __real_F (the linker's --wrap). */
#define _GNU_SOURCE
#include "fault.h"

#include <cuda_runtime_api.h>
#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_int armed_class = -1;
static atomic_uint_fast64_t calls, target;
static atomic_bool fired, nvrtc_blocked;
static atomic_int cuda_error = cudaErrorInvalidValue;
static const char *_Atomic last_call = "";

void fault_arm(fault_class cls, uint64_t n)
{
    atomic_store(&calls, 0);
    atomic_store(&target, n);
    atomic_store(&fired, false);
    atomic_store(&armed_class, (int)cls);
}

uint64_t fault_disarm(void)
{
    atomic_store(&armed_class, -1);
    return atomic_load(&calls);
}

bool fault_fired(void) { return atomic_load(&fired); }
void fault_set_cuda_error(int e) { atomic_store(&cuda_error, e); }
void fault_block_nvrtc(bool on) { atomic_store(&nvrtc_blocked, on); }
const char *fault_last_call(void) { return atomic_load(&last_call); }

const char *fault_class_name(fault_class cls)
{
    static const char *const names[] = {"host allocation", "file operation", "CUDA call"};
    return cls < FAULT_NCLASSES ? names[cls] : "?";
}

/* True when this call of class cls is the one to fail. */
static bool hit(fault_class cls, const char *name)
{
    if (atomic_load(&armed_class) != (int)cls) return false;
    uint64_t k = atomic_fetch_add(&calls, 1) + 1;
    if (k != atomic_load(&target)) return false;
    atomic_store(&fired, true);
    atomic_store(&last_call, name);
    if (getenv("KILN_FAULT_BACKTRACE")) { /* where the armed call came from, for debugging a sweep */
        void *frames[32];
        int nf = backtrace(frames, 32);
        backtrace_symbols_fd(frames, nf, 2);
    }
    return true;
}

/* ---- live allocations: a pointer set (linear probing, backward-shift delete) ---- */

#define SET_BITS 21
#define SET_CAP (1u << SET_BITS)
static void *set[SET_CAP];
#define DEPTH 6
static void *caller[SET_CAP][DEPTH]; /* who allocated it (fault_print_live, after fault_mark) */
static atomic_bool deep;
static uint64_t seq[SET_CAP], nseq;
static int64_t nlive;
static pthread_mutex_t set_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> (64 - SET_BITS)); }

static void track_from(void *p, void *from)
{
    if (!p) return;
    void *bt[DEPTH + 2] = {from};
    int nb = atomic_load(&deep) ? backtrace(bt, DEPTH + 2) : 0;
    pthread_mutex_lock(&set_mu);
    if (nlive < (int64_t)(SET_CAP / 2)) {
        size_t i = slot_of(p);
        while (set[i]) i = (i + 1) & (SET_CAP - 1);
        set[i] = p;
        for (int d = 0; d < DEPTH; d++) caller[i][d] = nb ? (d + 2 < nb ? bt[d + 2] : NULL) : (d ? NULL : from);
        seq[i] = ++nseq;
        nlive++;
    }
    pthread_mutex_unlock(&set_mu);
}
#define track(p) track_from((p), __builtin_extract_return_addr(__builtin_return_address(0)))

uint64_t fault_mark(void)
{
    atomic_store(&deep, true);
    pthread_mutex_lock(&set_mu);
    uint64_t m = nseq;
    pthread_mutex_unlock(&set_mu);
    return m;
}

void fault_print_live(uint64_t since)
{
    pthread_mutex_lock(&set_mu);
    for (size_t i = 0; i < SET_CAP; i++)
        if (set[i] && seq[i] > since) {
            fprintf(stderr, "  live since the mark: %p from\n", set[i]);
            int d = 0;
            while (d < DEPTH && caller[i][d]) d++;
            backtrace_symbols_fd(caller[i], d, 2);
        }
    pthread_mutex_unlock(&set_mu);
}

static void untrack(void *p)
{
    if (!p) return;
    pthread_mutex_lock(&set_mu);
    size_t i = slot_of(p);
    while (set[i] && set[i] != p) i = (i + 1) & (SET_CAP - 1);
    if (set[i]) {
        nlive--;
        set[i] = NULL;
        for (size_t j = (i + 1) & (SET_CAP - 1); set[j]; j = (j + 1) & (SET_CAP - 1)) {
            void *q = set[j], *qc[DEPTH];
            memcpy(qc, caller[j], sizeof qc);
            uint64_t qs = seq[j];
            set[j] = NULL;
            size_t k = slot_of(q);
            while (set[k]) k = (k + 1) & (SET_CAP - 1);
            set[k] = q;
            memcpy(caller[k], qc, sizeof qc);
            seq[k] = qs;
        }
    }
    pthread_mutex_unlock(&set_mu);
}

int64_t fault_live(void)
{
    pthread_mutex_lock(&set_mu);
    int64_t n = nlive;
    pthread_mutex_unlock(&set_mu);
    return n;
}

/* ---- host allocations ---- */

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void __real_free(void *);
char *__real_strdup(const char *);

void *__wrap_malloc(size_t n)
{
    if (hit(FAULT_ALLOC, "malloc")) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __real_malloc(n);
    track(p);
    return p;
}

void *__wrap_calloc(size_t a, size_t b)
{
    if (hit(FAULT_ALLOC, "calloc")) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __real_calloc(a, b);
    track(p);
    return p;
}

void *__wrap_realloc(void *old, size_t n)
{
    if (hit(FAULT_ALLOC, "realloc")) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __real_realloc(old, n);
    if (p || !n) untrack(old);
    track(p);
    return p;
}

void __wrap_free(void *p)
{
    untrack(p);
    __real_free(p);
}

char *__wrap_strdup(const char *s)
{
    if (hit(FAULT_ALLOC, "strdup")) {
        errno = ENOMEM;
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *p = __real_malloc(n);
    if (p) memcpy(p, s, n);
    track(p);
    return p;
}

/* ---- file operations ---- */

#define FILE_FAIL(name, ret)                 \
    do {                                     \
        if (hit(FAULT_FILE, name)) {         \
            errno = EIO;                     \
            return ret;                      \
        }                                    \
    } while (0)

int __real_open(const char *, int, ...);
int __wrap_open(const char *path, int flags, ...)
{
    FILE_FAIL("open", -1);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return __real_open(path, flags, mode);
}

FILE *__real_fopen(const char *, const char *);
FILE *__wrap_fopen(const char *p, const char *m)
{
    FILE_FAIL("fopen", NULL);
    return __real_fopen(p, m);
}

ssize_t __real_read(int, void *, size_t);
ssize_t __wrap_read(int fd, void *b, size_t n)
{
    FILE_FAIL("read", -1);
    return __real_read(fd, b, n);
}

ssize_t __real_write(int, const void *, size_t);
ssize_t __wrap_write(int fd, const void *b, size_t n)
{
    FILE_FAIL("write", -1);
    return __real_write(fd, b, n);
}

size_t __real_fread(void *, size_t, size_t, FILE *);
size_t __wrap_fread(void *b, size_t s, size_t n, FILE *f)
{
    if (hit(FAULT_FILE, "fread")) {
        errno = EIO;
        return 0;
    }
    return __real_fread(b, s, n, f);
}

size_t __real_fwrite(const void *, size_t, size_t, FILE *);
size_t __wrap_fwrite(const void *b, size_t s, size_t n, FILE *f)
{
    if (hit(FAULT_FILE, "fwrite")) {
        errno = EIO;
        return 0;
    }
    return __real_fwrite(b, s, n, f);
}

int __real_fstat(int, struct stat *);
int __wrap_fstat(int fd, struct stat *st)
{
    FILE_FAIL("fstat", -1);
    return __real_fstat(fd, st);
}

int __real_stat(const char *, struct stat *);
int __wrap_stat(const char *p, struct stat *st)
{
    FILE_FAIL("stat", -1);
    return __real_stat(p, st);
}

int __real_lstat(const char *, struct stat *);
int __wrap_lstat(const char *p, struct stat *st)
{
    FILE_FAIL("lstat", -1);
    return __real_lstat(p, st);
}

void *__real_mmap(void *, size_t, int, int, int, off_t);
void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    FILE_FAIL("mmap", MAP_FAILED);
    return __real_mmap(a, n, prot, flags, fd, off);
}

int __real_mkstemp(char *);
int __wrap_mkstemp(char *t)
{
    FILE_FAIL("mkstemp", -1);
    return __real_mkstemp(t);
}

int __real_rename(const char *, const char *);
int __wrap_rename(const char *a, const char *b)
{
    FILE_FAIL("rename", -1);
    return __real_rename(a, b);
}

int __real_link(const char *, const char *);
int __wrap_link(const char *a, const char *b)
{
    FILE_FAIL("link", -1);
    return __real_link(a, b);
}

int __real_unlink(const char *);
int __wrap_unlink(const char *p)
{
    FILE_FAIL("unlink", -1);
    return __real_unlink(p);
}

int __real_mkdir(const char *, mode_t);
int __wrap_mkdir(const char *p, mode_t m)
{
    FILE_FAIL("mkdir", -1);
    return __real_mkdir(p, m);
}

DIR *__real_opendir(const char *);
DIR *__wrap_opendir(const char *p)
{
    FILE_FAIL("opendir", NULL);
    return __real_opendir(p);
}

FILE *__real_open_memstream(char **, size_t *);
FILE *__wrap_open_memstream(char **b, size_t *n)
{
    FILE_FAIL("open_memstream", NULL);
    return __real_open_memstream(b, n);
}

int __real_fsync(int);
int __wrap_fsync(int fd)
{
    FILE_FAIL("fsync", -1);
    return __real_fsync(fd);
}

int __real_futimens(int, const struct timespec *);
int __wrap_futimens(int fd, const struct timespec *t)
{
    FILE_FAIL("futimens", -1);
    return __real_futimens(fd, t);
}

/* ---- CUDA and NVRTC ---- */

#define CUDA_FAIL(name, err)                                   \
    do {                                                       \
        if (hit(FAULT_CUDA, name)) return (cudaError_t)(err);  \
    } while (0)
#define CUDA_WRAP(name, params, args, err)        \
    cudaError_t __real_##name params;             \
    cudaError_t __wrap_##name params              \
    {                                             \
        CUDA_FAIL(#name, err);                    \
        return __real_##name args;                \
    }
#define ERR atomic_load(&cuda_error)

CUDA_WRAP(cudaMalloc, (void **p, size_t n), (p, n), cudaErrorMemoryAllocation)
CUDA_WRAP(cudaMemcpy, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k), ERR)
CUDA_WRAP(cudaMemset, (void *d, int v, size_t n), (d, v, n), ERR)
CUDA_WRAP(cudaMemsetAsync, (void *d, int v, size_t n, cudaStream_t s), (d, v, n, s), ERR)
CUDA_WRAP(cudaStreamCreateWithFlags, (cudaStream_t *s, unsigned f), (s, f), ERR)
CUDA_WRAP(cudaStreamSynchronize, (cudaStream_t s), (s), ERR)
CUDA_WRAP(cudaEventCreate, (cudaEvent_t *e), (e), ERR)
CUDA_WRAP(cudaEventRecord, (cudaEvent_t e, cudaStream_t s), (e, s), ERR)
CUDA_WRAP(cudaLibraryLoadData, (cudaLibrary_t *l, const void *c, enum cudaJitOption *jo, void **jv, unsigned nj,
                                enum cudaLibraryOption *lo, void **lv, unsigned nl),
          (l, c, jo, jv, nj, lo, lv, nl), ERR)
CUDA_WRAP(cudaLibraryGetKernel, (cudaKernel_t *k, cudaLibrary_t l, const char *n), (k, l, n), ERR)
CUDA_WRAP(cudaLaunchKernel, (const void *f, dim3 g, dim3 b, void **a, size_t sm, cudaStream_t s), (f, g, b, a, sm, s), ERR)
CUDA_WRAP(cudaLaunchKernelExC, (const cudaLaunchConfig_t *c, const void *f, void **a), (c, f, a), ERR)
CUDA_WRAP(cudaKernelSetAttributeForDevice, (cudaKernel_t k, enum cudaFuncAttribute a, int v, int d), (k, a, v, d), ERR)
CUDA_WRAP(cudaFuncGetAttributes, (struct cudaFuncAttributes *a, const void *f), (a, f), ERR)
CUDA_WRAP(cudaStreamBeginCapture, (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m), ERR)
CUDA_WRAP(cudaStreamEndCapture, (cudaStream_t s, cudaGraph_t *g), (s, g), ERR)
CUDA_WRAP(cudaGraphInstantiate, (cudaGraphExec_t *e, cudaGraph_t g, unsigned long long f), (e, g, f), ERR)
CUDA_WRAP(cudaGraphLaunch, (cudaGraphExec_t e, cudaStream_t s), (e, s), ERR)
CUDA_WRAP(cudaPointerGetAttributes, (struct cudaPointerAttributes *a, const void *p), (a, p), ERR)
CUDA_WRAP(cudaDeviceGetAttribute, (int *v, enum cudaDeviceAttr a, int d), (v, a, d), ERR)
CUDA_WRAP(cudaGetDeviceProperties, (struct cudaDeviceProp *p, int d), (p, d), ERR)
CUDA_WRAP(cudaSetDevice, (int d), (d), ERR)
CUDA_WRAP(cudaGetDevice, (int *d), (d), ERR)

nvrtcResult __real_nvrtcCompileProgram(nvrtcProgram, int, const char *const *);
nvrtcResult __wrap_nvrtcCompileProgram(nvrtcProgram p, int n, const char *const *o)
{
    if (atomic_load(&nvrtc_blocked)) return NVRTC_ERROR_INTERNAL_ERROR;
    return __real_nvrtcCompileProgram(p, n, o);
}
