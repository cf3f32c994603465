/* runtime/rt_context.c — the context (device, stream, kernel cache, the
 * target description codegen sizes kernels for) and device memory for
 * callers without CUDA of their own (rt_model.h). */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_model_internal.h"

rt_status rt_kernel_status(rt_status s)
{
    return s == RT_ERR_INVALID || s == RT_ERR_NOT_FOUND ? RT_ERR_INTERNAL : s;
}

static void quiet_warn(void *user, const char *msg)
{
    (void)user;
    (void)msg;
}

/* The device's numbers for codegen: SMs, opt-in shared memory, L2. */
static rt_status query_target(rt_ctx *c, char *err, size_t n)
{
    struct cudaDeviceProp p;
    RT_CUDA_TRY(cudaGetDeviceProperties(&p, c->device), err, n);
    memset(&c->target, 0, sizeof c->target);
    snprintf(c->target.arch, sizeof c->target.arch, "%s", c->arch);
    c->target.sm_count = p.multiProcessorCount;
    c->target.smem_per_block = (int64_t)p.sharedMemPerBlockOptin;
    c->target.l2_bytes = p.l2CacheSize;
    return RT_OK;
}

/* Opens the device: ordinal, arch (when not given), stream, target. */
static rt_status open_device(rt_ctx *c, const rt_ctx_config *cfg, char *err, size_t n)
{
    char why[512];
    if (!rt_device_available(why, sizeof why))
        return rt_fail(RT_ERR_NO_DEVICE, err, n, "%s (a context with compile_only set can still compile models)", why);
    int count = 0;
    if (RT_CUDA_CHECK(cudaGetDeviceCount(&count), NULL, NULL, 0) != RT_OK || cfg->device >= count)
        return rt_fail(RT_ERR_INVALID, err, n, "device %d does not exist (%d CUDA devices)", cfg->device, count);
    RT_CUDA_TRY(cudaSetDevice(cfg->device), err, n);
    if (!cfg->arch) {
        int major = 0, minor = 0;
        if (RT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cfg->device), NULL, NULL, 0) ||
            RT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cfg->device), NULL, NULL, 0))
            return rt_fail(RT_ERR_CUDA, err, n, "cannot read the compute capability of device %d", cfg->device);
        /* sm_90 -> sm_90a: Kiln's Hopper kernels use the arch-specific features */
        snprintf(c->arch, sizeof c->arch, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
    }
    RT_TRY(query_target(c, err, n));
    c->has_device = true;
    if (cfg->stream) {
        c->stream = cfg->stream;
        return RT_OK;
    }
    cudaStream_t s = NULL;
    RT_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), err, n);
    c->stream = s;
    c->own_stream = true;
    return RT_OK;
}

rt_status rt_ctx_create(rt_ctx **out, const rt_ctx_config *cfg, char *err, size_t n)
{
    *out = NULL;
    rt_ctx_config def;
    memset(&def, 0, sizeof def);
    if (!cfg) cfg = &def;
    if (cfg->arch && !rt_nvrtc_arch_valid(cfg->arch))
        return rt_fail(RT_ERR_INVALID, err, n, "arch \"%s\" is not a GPU architecture name like sm_90a", cfg->arch);
    if (cfg->device < 0) return rt_fail(RT_ERR_INVALID, err, n, "device ordinal %d is negative", cfg->device);
    rt_ctx *c = calloc(1, sizeof *c);
    if (!c) return rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    c->device = cfg->device;
    c->no_cache = cfg->no_cache;
    c->compile_threads = cfg->compile_threads;
    snprintf(c->arch, sizeof c->arch, "%s", cfg->arch ? cfg->arch : RT_DEFAULT_ARCH);
    cg_target_default(c->arch, &c->target);
    rt_status st = RT_OK;
    if (!cfg->compile_only && (st = open_device(c, cfg, err, n)) != RT_OK) goto bad;
    if (!cfg->no_cache) {
        rt_cache_config cc = {.dir = cfg->cache_dir, .no_disk = cfg->no_disk_cache, .warn = quiet_warn};
        if (rt_cache_open(&c->cache, &cc) != RT_OK) {
            st = rt_fail(RT_ERR_NOMEM, err, n, "cannot open the kernel cache");
            goto bad;
        }
    }
    *out = c;
    return RT_OK;
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
struct rt_cache *rt_ctx_kernel_cache(const rt_ctx *c) { return c ? c->cache : NULL; }
int rt_ctx_device(const rt_ctx *c) { return c->device; }
bool rt_ctx_has_device(const rt_ctx *c) { return c && c->has_device; }

void rt_ctx_target(const rt_ctx *c, cg_target *out)
{
    if (c) *out = c->target;
    else cg_target_default(NULL, out);
}

bool rt_model_use_device(const rt_model *m, const char *what, rt_status *st, char *err, size_t n)
{
    if (!m->ctx->has_device) {
        *st = rt_fail(RT_ERR_NO_DEVICE, err, n, "%s: no CUDA device (the context was created compile_only)", what);
        return false;
    }
    *st = RT_CUDA_CHECK(cudaSetDevice(m->ctx->device), what, err, n);
    return *st == RT_OK;
}

/* ---- device memory for callers without CUDA ------------------------------------ */

rt_status rt_ctx_alloc(rt_ctx *c, size_t bytes, void **ptr, char *err, size_t n)
{
    *ptr = NULL;
    if (!c->has_device) return rt_fail(RT_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    RT_CUDA_TRY(cudaSetDevice(c->device), err, n);
    char who[64];
    snprintf(who, sizeof who, "%zu bytes", bytes);
    rt_status st = RT_CUDA_CHECK(cudaMalloc(ptr, bytes ? bytes : 1), who, err, n);
    if (st != RT_OK) *ptr = NULL;
    return st;
}

rt_status rt_ctx_free_mem(rt_ctx *c, void *ptr, char *err, size_t n)
{
    if (!ptr) return RT_OK;
    if (!c->has_device) return rt_fail(RT_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    /* free it even when selecting the device fails (a device pointer names its device): the caller's
     * memory must not stay allocated behind an error; the first failure is the status */
    rt_status st = RT_CUDA_CHECK(cudaSetDevice(c->device), NULL, err, n);
    rt_status freed = RT_CUDA_CHECK(cudaFree(ptr), NULL, st == RT_OK ? err : NULL, st == RT_OK ? n : 0);
    return st != RT_OK ? st : freed;
}

rt_status rt_ctx_copy(rt_ctx *c, void *dst, const void *src, size_t bytes, bool to_device, char *err, size_t n)
{
    if (!c->has_device) return rt_fail(RT_ERR_NO_DEVICE, err, n, "device memory: no CUDA device");
    RT_CUDA_TRY(cudaSetDevice(c->device), err, n);
    char who[64];
    snprintf(who, sizeof who, "%zu bytes %s", bytes, to_device ? "to the device" : "to the host");
    return RT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost), who,
                         err, n);
}
