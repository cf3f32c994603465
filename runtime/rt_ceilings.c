/* runtime/rt_ceilings.c — measure the device's read bandwidth and tensor
 * rate, and keep them per device (runtime/rt_ceilings.h). */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_ceilings.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "runtime/rt_cache.h"
#include "runtime/rt_cache_internal.h"
#include "runtime/rt_cublas.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_nvrtc.h"
#include "runtime/rt_profile.h"
#include "runtime/rt_util.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

#define CEIL_FORMAT 1
#define READ_BYTES (2LL << 30)
#define GEMM_N 8192
#define GEMM_MIN_MS 100.0

/* ---- the key and the file ---------------------------------------------------------------- */

rt_status rt_ceilings_key(int device, rt_ceilings *c, char *err, size_t n)
{
    memset(c, 0, sizeof *c);
    struct cudaDeviceProp prop;
    RT_CUDA_TRY(cudaGetDeviceProperties(&prop, device), err, n);
    snprintf(c->device, sizeof c->device, "%s", prop.name);
    RT_CUDA_TRY(cudaDriverGetVersion(&c->driver), err, n);
    RT_CUDA_TRY(cudaDeviceGetAttribute(&c->sm_clock_khz, cudaDevAttrClockRate, device), err, n);
    RT_CUDA_TRY(cudaDeviceGetAttribute(&c->mem_clock_khz, cudaDevAttrMemoryClockRate, device), err, n);
    snprintf(c->kiln, sizeof c->kiln, "%s", KILN_VERSION);
    return RT_OK;
}

static bool same_key(const rt_ceilings *a, const rt_ceilings *b)
{
    return !strcmp(a->device, b->device) && a->driver == b->driver && a->sm_clock_khz == b->sm_clock_khz &&
           a->mem_clock_khz == b->mem_clock_khz && !strcmp(a->kiln, b->kiln);
}

char *rt_ceilings_path(const char *root, const rt_ceilings *key)
{
    char name[256];
    size_t j = 0;
    for (const char *s = key->device; *s && j + 1 < sizeof name; s++)
        name[j++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ? *s : '_';
    name[j] = 0;
    char *k = rt_strf("%s|%d|%d|%d|%s", key->device, key->driver, key->sm_clock_khz, key->mem_clock_khz, key->kiln);
    if (!k) return NULL;
    unsigned long long h = (unsigned long long)XXH3_64bits(k, strlen(k));
    free(k);
    return rt_strf("%s/ceilings/%s-%016llx.json", root, name, h);
}

static json_t *to_json(const rt_ceilings *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "format", json_integer(CEIL_FORMAT));
    json_object_set_new(o, "device", json_string(c->device));
    json_object_set_new(o, "driver", json_integer(c->driver));
    json_object_set_new(o, "sm_clock_khz", json_integer(c->sm_clock_khz));
    json_object_set_new(o, "mem_clock_khz", json_integer(c->mem_clock_khz));
    json_object_set_new(o, "kiln", json_string(c->kiln));
    json_object_set_new(o, "read_bw", json_real(c->read_bw));
    json_object_set_new(o, "bf16_rate", json_real(c->bf16_rate));
    json_object_set_new(o, "f16_rate", json_real(c->f16_rate));
    json_object_set_new(o, "read_bytes", json_integer(c->read_bytes));
    json_object_set_new(o, "gemm_n", json_integer(c->gemm_n));
    json_object_set_new(o, "gemm_iters", json_integer(c->gemm_iters));
    json_object_set_new(o, "gemm_ms", json_real(c->gemm_ms));
    json_object_set_new(o, "measured", json_string(c->measured));
    return o;
}

#define DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))

/* XXH3-64 of the object's canonical text (the checksum field left out). */
static bool checksum(json_t *o, char hex[17])
{
    json_t *copy = json_copy(o);
    if (!copy) return false;
    json_object_del(copy, "checksum");
    char *text = json_dumps(copy, DUMP_FLAGS);
    json_decref(copy);
    if (!text) return false;
    snprintf(hex, 17, "%016llx", (unsigned long long)XXH3_64bits(text, strlen(text)));
    free(text);
    return true;
}

char *rt_ceilings_json(const rt_ceilings *c)
{
    json_t *o = to_json(c);
    char *s = o ? json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    return s;
}

static bool get_str(json_t *o, const char *k, char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(o, k));
    if (!s || strlen(s) >= n) return false;
    snprintf(out, n, "%s", s);
    return true;
}

static bool get_int(json_t *o, const char *k, int64_t *v)
{
    json_t *x = json_object_get(o, k);
    if (!json_is_integer(x)) return false;
    *v = json_integer_value(x);
    return true;
}

static bool get_real(json_t *o, const char *k, double *v)
{
    json_t *x = json_object_get(o, k);
    if (!json_is_number(x)) return false;
    *v = json_number_value(x);
    return true;
}

rt_status rt_ceilings_read(const char *path, const rt_ceilings *key, rt_ceilings *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0) return rt_fail(RT_ERR_NOT_FOUND, err, n, "%s: no such file", path);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o) return rt_fail(RT_ERR_IO, err, n, "%s: not JSON (%s, line %d)", path, je.text, je.line);
    rt_status rs = RT_OK;
    char want[17], *why = NULL;
    const char *have = json_string_value(json_object_get(o, "checksum"));
    int64_t fmt = 0, drv = 0, smc = 0, mc = 0, rb = 0, gn = 0, gi = 0;
    if (!have || !checksum(o, want) || strcmp(have, want)) why = "its checksum does not match its contents";
    else if (!get_int(o, "format", &fmt) || fmt != CEIL_FORMAT) why = "another format version";
    else if (!get_str(o, "device", out->device, sizeof out->device) || !get_int(o, "driver", &drv) ||
             !get_int(o, "sm_clock_khz", &smc) || !get_int(o, "mem_clock_khz", &mc) ||
             !get_str(o, "kiln", out->kiln, sizeof out->kiln) || !get_real(o, "read_bw", &out->read_bw) ||
             !get_real(o, "bf16_rate", &out->bf16_rate) || !get_real(o, "f16_rate", &out->f16_rate) ||
             !get_int(o, "read_bytes", &rb) || !get_int(o, "gemm_n", &gn) || !get_int(o, "gemm_iters", &gi) ||
             !get_real(o, "gemm_ms", &out->gemm_ms) || !get_str(o, "measured", out->measured, sizeof out->measured))
        why = "a field is missing or of the wrong type";
    else if (!(out->read_bw > 0) || !(out->bf16_rate > 0) || !(out->f16_rate > 0))
        why = "a ceiling is not a positive number";
    json_decref(o);
    out->driver = (int)drv, out->sm_clock_khz = (int)smc, out->mem_clock_khz = (int)mc;
    out->read_bytes = rb, out->gemm_n = (int)gn, out->gemm_iters = (int)gi;
    if (!why && key && !same_key(out, key)) why = "it was measured for another device, driver, clock or Kiln version";
    if (why) {
        rs = rt_fail(RT_ERR_IO, err, n, "%s: %s", path, why);
        memset(out, 0, sizeof *out);
    }
    return rs;
}

rt_status rt_ceilings_write(const char *path, const rt_ceilings *c, char *err, size_t n)
{
    char *dir = rt_strf("%s", path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) *slash = 0;
    int e = !dir ? ENOMEM : slash && slash != dir ? rt_cache_mkdirs(dir) : 0;
    free(dir);
    if (e) return rt_fail(RT_ERR_IO, err, n, "%s: cannot create its directory: %s", path, strerror(e));
    json_t *o = to_json(c);
    char sum[17];
    if (!o || !checksum(o, sum)) {
        json_decref(o);
        return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    }
    json_object_set_new(o, "checksum", json_string(sum));
    char *tmp = rt_strf("%s.%ld.tmp", path, (long)getpid());
    int rc = tmp ? json_dump_file(o, tmp, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : -1;
    json_decref(o);
    if (rc != 0 || rename(tmp, path) != 0) {
        int en = errno;
        if (tmp) (void)remove(tmp);
        free(tmp);
        return rt_fail(RT_ERR_IO, err, n, "%s: cannot write: %s", path, strerror(en));
    }
    free(tmp);
    return RT_OK;
}

/* ---- measuring ---------------------------------------------------------------------------------- */

/* Header-free, so it compiles in milliseconds. Each kernel takes one
 * by-value struct (runtime/rt_launch.h). */
static const char *const ceil_src =
    "struct CeilArgs { unsigned long long p; long long n; unsigned long long out; int mode; };\n"
    "__device__ __forceinline__ unsigned mix(unsigned long long i) {\n"
    "    unsigned long long z = i * 0x9e3779b97f4a7c15ull;\n"
    "    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
    "    return (unsigned)((z ^ (z >> 31)) >> 16);\n"
    "}\n"
    "/* mode 0: random bits in 32-bit words; 1: bf16 in [-1, 1); 2: f16 in [-1, 1) */\n"
    "extern \"C\" __global__ void kiln_ceil_fill(CeilArgs a) {\n"
    "    long long stride = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n; i += stride) {\n"
    "        unsigned r = mix((unsigned long long)i);\n"
    "        if (a.mode == 0) { ((unsigned *)a.p)[i] = r; continue; }\n"
    "        float f = (float)(r & 0xffffu) * (2.0f / 65536.0f) - 1.0f;\n"
    "        unsigned short h;\n"
    "        if (a.mode == 1) asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "        else asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "        ((unsigned short *)a.p)[i] = h;\n"
    "    }\n"
    "}\n"
    "/* a.n 16-byte words; four loads in flight per thread */\n"
    "extern \"C\" __global__ void kiln_ceil_read(CeilArgs a) {\n"
    "    const uint4 *p = (const uint4 *)a.p;\n"
    "    long long s = (long long)gridDim.x * blockDim.x, i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    unsigned acc = 0;\n"
    "    for (; i + 3 * s < a.n; i += 4 * s) {\n"
    "        uint4 x = __ldcs(p + i), y = __ldcs(p + i + s), z = __ldcs(p + i + 2 * s), w = __ldcs(p + i + 3 * s);\n"
    "        acc ^= x.x ^ x.y ^ x.z ^ x.w ^ y.x ^ y.y ^ y.z ^ y.w ^ z.x ^ z.y ^ z.z ^ z.w ^ w.x ^ w.y ^ w.z ^ w.w;\n"
    "    }\n"
    "    for (; i < a.n; i += s) { uint4 x = __ldcs(p + i); acc ^= x.x ^ x.y ^ x.z ^ x.w; }\n"
    "    if (acc == 0x9e3779b9u) ((unsigned *)a.out)[0] = acc; /* keeps the loads; almost never true */\n"
    "}\n";

const char *rt_ceilings_source(void) { return ceil_src; }

typedef struct ceil_args {
    unsigned long long p;
    long long n;
    unsigned long long out;
    int mode, pad_;
} ceil_args;

typedef struct meas {
    rt_module *mod;
    rt_kernel fill, read;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    int sms;
    void *buf, *out;
    const rt_cublas_api *cb; /* loaded for the GEMMs */
    cublasHandle_t blas;
    void *a, *b, *c;
} meas;

static rt_status fill(meas *m, void *p, long long count, int mode, char *err, size_t n)
{
    ceil_args a = {(unsigned long long)(uintptr_t)p, count, 0, mode, 0};
    return rt_launch(&m->fill, (rt_dim3){(unsigned)m->sms * 8, 1, 1}, (rt_dim3){256, 1, 1}, 0, m->s, &a, sizeof a,
                     err, n);
}

static rt_status elapsed(meas *m, float *ms, char *err, size_t n)
{
    RT_CUDA_TRY(cudaEventSynchronize(m->e1), err, n);
    RT_CUDA_TRY(cudaEventElapsedTime(ms, m->e0, m->e1), err, n);
    return RT_OK;
}

static rt_status measure_read(meas *m, rt_ceilings *out, char *err, size_t n)
{
    RT_CUDA_TRY(cudaMalloc(&m->buf, (size_t)READ_BYTES), err, n);
    RT_CUDA_TRY(cudaMalloc(&m->out, 16), err, n);
    RT_TRY(fill(m, m->buf, READ_BYTES / 4, 0, err, n));
    ceil_args a = {(unsigned long long)(uintptr_t)m->buf, READ_BYTES / 16, (unsigned long long)(uintptr_t)m->out, 0, 0};
    double t[20];
    for (int i = -3; i < 20; i++) {
        RT_CUDA_TRY(cudaEventRecord(m->e0, m->s), err, n);
        RT_TRY(rt_launch(&m->read, (rt_dim3){(unsigned)m->sms * 8, 1, 1}, (rt_dim3){256, 1, 1}, 0, m->s, &a, sizeof a,
                         err, n));
        RT_CUDA_TRY(cudaEventRecord(m->e1, m->s), err, n);
        float ms;
        RT_TRY(elapsed(m, &ms, err, n));
        if (i >= 0) t[i] = ms;
    }
    out->read_bytes = READ_BYTES;
    out->read_bw = READ_BYTES / (rt_percentile(t, 20, 50) * 1e-3);
    return RT_OK;
}

static rt_status gemm(meas *m, cudaDataType_t type, int count, char *err, size_t n)
{
    const float one = 1, zero = 0;
    for (int i = 0; i < count; i++)
        RT_CUBLAS_TRY(m->cb->gemm_ex(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, m->a, type, GEMM_N,
                                   m->b, type, GEMM_N, &zero, m->c, type, GEMM_N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      err, n);
    return RT_OK;
}

/* GEMMs back to back for >= 100 ms, three times; the median rate. */
static rt_status measure_gemm(meas *m, cudaDataType_t type, int mode, double *rate, rt_ceilings *out, char *err,
                              size_t n)
{
    long long elems = (long long)GEMM_N * GEMM_N;
    RT_TRY(fill(m, m->a, elems, mode, err, n));
    RT_TRY(fill(m, m->b, elems, mode, err, n));
    RT_TRY(gemm(m, type, 3, err, n)); /* warm-up */
    float ms;
    RT_CUDA_TRY(cudaEventRecord(m->e0, m->s), err, n);
    RT_TRY(gemm(m, type, 5, err, n));
    RT_CUDA_TRY(cudaEventRecord(m->e1, m->s), err, n);
    RT_TRY(elapsed(m, &ms, err, n));
    int iters = (int)(GEMM_MIN_MS / (ms / 5) * 1.2) + 1;
    double t[3];
    for (int r = 0, tries = 0; r < 3; r++) {
        if (++tries > 10) return rt_fail(RT_ERR_CUDA, err, n, "ceilings: the GEMMs never ran for %.0f ms", GEMM_MIN_MS);
        RT_CUDA_TRY(cudaEventRecord(m->e0, m->s), err, n);
        RT_TRY(gemm(m, type, iters, err, n));
        RT_CUDA_TRY(cudaEventRecord(m->e1, m->s), err, n);
        RT_TRY(elapsed(m, &ms, err, n));
        t[r] = ms;
        if (ms < GEMM_MIN_MS) iters = (int)(iters * GEMM_MIN_MS / ms * 1.2) + 1, r--; /* too short: again, longer */
    }
    double med = rt_percentile(t, 3, 50);
    *rate = 2.0 * GEMM_N * GEMM_N * (double)GEMM_N * iters / (med * 1e-3);
    out->gemm_n = GEMM_N;
    out->gemm_iters = iters;
    out->gemm_ms = med;
    return RT_OK;
}

static void meas_free(meas *m)
{
    if (m->s) (void)cudaStreamSynchronize(m->s);
    if (m->blas) (void)m->cb->destroy(m->blas);
    if (m->buf) (void)cudaFree(m->buf);
    if (m->out) (void)cudaFree(m->out);
    if (m->a) (void)cudaFree(m->a);
    if (m->b) (void)cudaFree(m->b);
    if (m->c) (void)cudaFree(m->c);
    if (m->e0) (void)cudaEventDestroy(m->e0);
    if (m->e1) (void)cudaEventDestroy(m->e1);
    rt_module_free(m->mod);
}

static rt_status measure(meas *m, int device, const char *arch, rt_ceilings *out, char *err, size_t n)
{
    RT_CUDA_TRY(cudaSetDevice(device), err, n);
    RT_CUDA_TRY(cudaDeviceGetAttribute(&m->sms, cudaDevAttrMultiProcessorCount, device), err, n);
    rt_compile_opts co = {.arch = arch, .include_dir = ""};
    rt_compile_result res = {0};
    rt_status st = rt_nvrtc_compile("kiln_ceilings", ceil_src, &co, RT_TARGET_CUBIN, &res);
    if (st != RT_OK) {
        rt_fail(st, err, n, "the ceilings' kernels: %s", res.message ? res.message : rt_status_str(st));
        rt_compile_result_free(&res);
        return st;
    }
    st = rt_module_load(&m->mod, res.code.data, res.code.size, err, n);
    rt_compile_result_free(&res);
    RT_TRY(st);
    RT_TRY(rt_module_kernel(m->mod, "kiln_ceil_fill", &m->fill, err, n));
    RT_TRY(rt_module_kernel(m->mod, "kiln_ceil_read", &m->read, err, n));
    RT_CUDA_TRY(cudaEventCreate(&m->e0), err, n);
    RT_CUDA_TRY(cudaEventCreate(&m->e1), err, n);
    RT_TRY(measure_read(m, out, err, n));
    RT_CUDA_TRY(cudaFree(m->buf), err, n);
    m->buf = NULL;
    size_t bytes = (size_t)GEMM_N * GEMM_N * 2;
    RT_CUDA_TRY(cudaMalloc(&m->a, bytes), err, n);
    RT_CUDA_TRY(cudaMalloc(&m->b, bytes), err, n);
    RT_CUDA_TRY(cudaMalloc(&m->c, bytes), err, n);
    if (!(m->cb = rt_cublas(err, n))) return RT_ERR_NOT_FOUND;
    RT_CUBLAS_TRY(m->cb->create(&m->blas), err, n);
    RT_CUBLAS_TRY(m->cb->set_stream(m->blas, m->s), err, n);
    RT_TRY(measure_gemm(m, CUDA_R_16BF, 1, &out->bf16_rate, out, err, n));
    RT_TRY(measure_gemm(m, CUDA_R_16F, 2, &out->f16_rate, out, err, n));
    return RT_OK;
}

rt_status rt_ceilings_measure(int device, const char *arch, void *stream, rt_ceilings *out, char *err, size_t n)
{
    RT_TRY(rt_ceilings_key(device, out, err, n));
    meas m = {.s = (cudaStream_t)stream};
    rt_status st = measure(&m, device, arch ? arch : RT_DEFAULT_ARCH, out, err, n);
    meas_free(&m);
    if (st != RT_OK) return st;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out->measured, sizeof out->measured, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return RT_OK;
}

rt_status rt_ceilings_get(int device, const char *arch, const char *root, bool remeasure, rt_ceilings *out,
                          bool *from_file, char **path, char *err, size_t n)
{
    *from_file = false;
    if (path) *path = NULL;
    rt_ceilings key;
    RT_TRY(rt_ceilings_key(device, &key, err, n));
    char *dir = NULL;
    if (!root && rt_cache_resolve_dir(NULL, NULL, &dir) == RT_OK) root = dir;
    char *file = root ? rt_ceilings_path(root, &key) : NULL;
    free(dir);
    if (file && !remeasure && rt_ceilings_read(file, &key, out, NULL, 0) == RT_OK) {
        *from_file = true;
    } else {
        rt_status st = rt_ceilings_measure(device, arch, NULL, out, err, n);
        if (st != RT_OK) {
            free(file);
            return st;
        }
        if (file) (void)rt_ceilings_write(file, out, NULL, 0);
    }
    if (path) *path = file;
    else free(file);
    return RT_OK;
}
