/* runtime/rt_context.c — the context (device, stream, kernel cache, the
 * target description codegen sizes kernels for) and device memory for
 * callers without CUDA of their own (rt_model.h). */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_model_internal.h"

/* rt_cuda_status: runtime/rt_err.h */

int rt_launch_status(rt_lstatus s)
{
    switch (s) {
    case RT_LAUNCH_OK: return RTM_OK;
    case RT_LAUNCH_ERR_NOMEM: return RTM_ERR_NOMEM;
    case RT_LAUNCH_ERR_NO_DEVICE: return RTM_ERR_NO_DEVICE;
    case RT_LAUNCH_ERR_INVALID:
    case RT_LAUNCH_ERR_NOT_FOUND: return RTM_ERR_INTERNAL;
    default: return RTM_ERR_CUDA;
    }
}

static void quiet_warn(void *user, const char *msg)
{
    (void)user;
    (void)msg;
}

/* The device's numbers for codegen: SMs, opt-in shared memory, L2. */
static int query_target(rt_ctx *c, char *err, size_t n)
{
    struct cudaDeviceProp p;
    CUDA_TRY(cudaGetDeviceProperties(&p, c->device), "cudaGetDeviceProperties(%d)", c->device);
    memset(&c->target, 0, sizeof c->target);
    snprintf(c->target.arch, sizeof c->target.arch, "%s", c->arch);
    c->target.sm_count = p.multiProcessorCount;
    c->target.smem_per_block = (int64_t)p.sharedMemPerBlockOptin;
    c->target.l2_bytes = p.l2CacheSize;
    return RTM_OK;
}

/* Opens the device: ordinal, arch (when not given), stream, target. */
static int open_device(rt_ctx *c, const rt_ctx_config *cfg, char *err, size_t n)
{
    char why[512];
    if (!rt_device_available(why, sizeof why))
        return rt_fail(RTM_ERR_NO_DEVICE, err, n, "%s (a context with compile_only set can still compile models)", why);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || cfg->device >= count)
        return rt_fail(RTM_ERR_INVALID, err, n, "device %d does not exist (%d CUDA devices)", cfg->device, count);
    CUDA_TRY(cudaSetDevice(cfg->device), "cudaSetDevice(%d)", cfg->device);
    if (!cfg->arch) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cfg->device) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cfg->device) != cudaSuccess)
            return rt_fail(RTM_ERR_CUDA, err, n, "cannot read the compute capability of device %d", cfg->device);
        /* sm_90 -> sm_90a: Kiln's Hopper kernels use the arch-specific features */
        snprintf(c->arch, sizeof c->arch, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
    }
    int st = query_target(c, err, n);
    if (st != RTM_OK) return st;
    c->has_device = true;
    if (cfg->stream) {
        c->stream = cfg->stream;
        return RTM_OK;
    }
    cudaStream_t s = NULL;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags%s", "");
    c->stream = s;
    c->own_stream = true;
    return RTM_OK;
}

int rt_ctx_create(rt_ctx **out, const rt_ctx_config *cfg, char *err, size_t n)
{
    *out = NULL;
    rt_ctx_config def;
    memset(&def, 0, sizeof def);
    if (!cfg) cfg = &def;
    if (cfg->arch && !rt_nvrtc_arch_valid(cfg->arch))
        return rt_fail(RTM_ERR_INVALID, err, n, "arch \"%s\" is not a GPU architecture name like sm_90a", cfg->arch);
    if (cfg->device < 0) return rt_fail(RTM_ERR_INVALID, err, n, "device ordinal %d is negative", cfg->device);
    rt_ctx *c = calloc(1, sizeof *c);
    if (!c) return rt_fail(RTM_ERR_NOMEM, err, n, "out of memory");
    c->device = cfg->device;
    c->no_cache = cfg->no_cache;
    c->compile_threads = cfg->compile_threads;
    snprintf(c->arch, sizeof c->arch, "%s", cfg->arch ? cfg->arch : RT_DEFAULT_ARCH);
    cg_target_default(c->arch, &c->target);
    int st = RTM_OK;
    if (!cfg->compile_only && (st = open_device(c, cfg, err, n)) != RTM_OK) goto bad;
    if (!cfg->no_cache) {
        rt_cache_config cc = {.dir = cfg->cache_dir, .no_disk = cfg->no_disk_cache, .warn = quiet_warn};
        if (rt_cache_open(&c->cache, &cc) != RT_OK) {
            st = rt_fail(RTM_ERR_NOMEM, err, n, "cannot open the kernel cache");
            goto bad;
        }
    }
    *out = c;
    return RTM_OK;
bad:
    rt_ctx_free(c);
    return st;
}

void rt_ctx_free(rt_ctx *c)
{
    if (!c) return;
    if (c->own_stream && c->stream) {
        (void)cudaSetDevice(c->device);
        (void)cudaStreamSynchronize((cudaStream_t)c->stream);
        (void)cudaStreamDestroy((cudaStream_t)c->stream);
    }
    rt_cache_close(c->cache);
    free(c);
}

const char *rt_ctx_arch(const rt_ctx *c) { return c ? c->arch : NULL; }
bool rt_ctx_has_device(const rt_ctx *c) { return c && c->has_device; }

void rt_ctx_target(const rt_ctx *c, cg_target *out)
{
    if (c) *out = c->target;
    else cg_target_default(NULL, out);
}

bool rt_model_use_device(const rt_model *m, const char *what, int *st, char *err, size_t n)
{
    if (!m->ctx->has_device) {
        *st = rt_fail(RTM_ERR_NO_DEVICE, err, n, "%s: no CUDA device (the context was created compile_only)", what);
        return false;
    }
    cudaError_t e = cudaSetDevice(m->ctx->device);
    if (e != cudaSuccess) {
        *st = rt_fail(rt_cuda_status(e), err, n, "%s: cudaSetDevice(%d): %s", what, m->ctx->device, cudaGetErrorString(e));
        return false;
    }
    return true;
}

/* ---- device memory for callers without CUDA ------------------------------------ */

int rt_ctx_alloc(rt_ctx *c, size_t bytes, void **ptr, char *err, size_t n)
{
    *ptr = NULL;
    if (!c->has_device) return rt_fail(RTM_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *ptr = NULL;
        return rt_fail(e == cudaErrorMemoryAllocation ? RTM_ERR_NOMEM : RTM_ERR_CUDA, err, n,
                       "cudaMalloc(%zu bytes): %s", bytes, cudaGetErrorString(e));
    }
    return RTM_OK;
}

int rt_ctx_free_mem(rt_ctx *c, void *ptr, char *err, size_t n)
{
    if (!ptr) return RTM_OK;
    if (!c->has_device) return rt_fail(RTM_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = cudaFree(ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt_fail(RTM_ERR_CUDA, err, n, "cudaFree: %s", cudaGetErrorString(e));
    }
    return RTM_OK;
}

int rt_ctx_copy(rt_ctx *c, void *dst, const void *src, size_t bytes, bool to_device, char *err, size_t n)
{
    if (!c->has_device) return rt_fail(RTM_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt_fail(RTM_ERR_CUDA, err, n, "cudaMemcpy (%zu bytes, %s): %s", bytes,
                       to_device ? "to the device" : "to the host", cudaGetErrorString(e));
    }
    return RTM_OK;
}
