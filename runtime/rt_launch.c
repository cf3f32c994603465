/* runtime/rt_launch.c — the kernel loader/launcher (see rt_launch.h).
 *
 * cudaLibrary_t / cudaKernel_t from the CUDA runtime (12.0+): the runtime
 * API accepts a cudaKernel_t cast to `const void *` wherever it takes a
 * function ("If the specified function does not exist, then it is assumed to
 * be a cudaKernel_t and used as is", cuda_runtime_api.h on
 * cudaFuncGetAttributes / cudaLaunchKernel), so a kernel loaded at run time
 * launches through plain cudaLaunchKernel. */
#include "runtime/rt_launch.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_err.h"
#include "util/vec.h"

struct rt_module {
    cudaLibrary_t lib;
    /* kernel names handed out by rt_module_kernel, freed with the module */
    char **names;
    int nnames, cap;
};

static void ok(char *err, size_t n)
{
    if (err && n) err[0] = '\0';
}

int rt_device_available(char *why, size_t n)
{
    int count = 0;
    if (RT_CUDA_CHECK(cudaGetDeviceCount(&count), "no CUDA device", why, n) != RT_OK) return 0;
    if (count <= 0) {
        rt_fail(RT_ERR_NO_DEVICE, why, n, "no CUDA device: cudaGetDeviceCount found 0 devices");
        return 0;
    }
    ok(why, n);
    return 1;
}

rt_status rt_device_max_smem_optin(int *bytes, char *err, size_t n)
{
    if (!bytes) return rt_fail(RT_ERR_INVALID, err, n, "rt_device_max_smem_optin: NULL bytes");
    *bytes = 0;
    int dev = 0;
    RT_CUDA_TRY(cudaGetDevice(&dev), err, n);
    RT_CUDA_TRY(cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), err, n);
    ok(err, n);
    return RT_OK;
}

/* A cubin is ELF; a fatbin starts with its magic; PTX is text that must be
 * NUL-terminated within len. */
static int plausible_image(const unsigned char *p, size_t len)
{
    if (len >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') return 1;
    if (len >= 4 && p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba) return 1;
    return memchr(p, '\0', len) != NULL && len > 1;
}

rt_status rt_module_load(rt_module **m, const void *image, size_t len, char *err, size_t n)
{
    if (!m) return rt_fail(RT_ERR_INVALID, err, n, "rt_module_load: NULL module pointer");
    *m = NULL;
    if (!image || len == 0) return rt_fail(RT_ERR_INVALID, err, n, "rt_module_load: empty image");
    if (!plausible_image(image, len))
        return rt_fail(RT_ERR_INVALID, err, n,
                       "rt_module_load: image of %zu bytes is neither a cubin (ELF), a fatbin nor NUL-terminated PTX", len);
    rt_module *mod = calloc(1, sizeof *mod);
    if (!mod) return rt_fail(RT_ERR_NOMEM, err, n, "rt_module_load: out of memory");
    rt_status st = RT_CUDA_CHECK(cudaLibraryLoadData(&mod->lib, image, NULL, NULL, 0, NULL, NULL, 0), NULL, err, n);
    if (st != RT_OK) {
        free(mod);
        return st;
    }
    *m = mod;
    ok(err, n);
    return RT_OK;
}

static const char *keep_name(rt_module *m, const char *name)
{
    for (int i = 0; i < m->nnames; i++)
        if (strcmp(m->names[i], name) == 0) return m->names[i];
    if (!VEC_GROW(m->names, m->nnames, m->cap, NULL)) return NULL;
    size_t l = strlen(name) + 1;
    char *c = malloc(l);
    if (!c) return NULL;
    memcpy(c, name, l);
    m->names[m->nnames++] = c;
    return c;
}

rt_status rt_module_kernel(rt_module *m, const char *name, rt_kernel *k, char *err, size_t n)
{
    if (!m || !name || !k) return rt_fail(RT_ERR_INVALID, err, n, "rt_module_kernel: NULL argument");
    memset(k, 0, sizeof *k);
    cudaKernel_t ker = NULL;
    cudaError_t e = cudaLibraryGetKernel(&ker, m->lib, name);
    if (e == cudaErrorSymbolNotFound || e == cudaErrorInvalidDeviceFunction) {
        (void)cudaGetLastError();
        return rt_fail(RT_ERR_NOT_FOUND, err, n, "cudaLibraryGetKernel: no kernel '%s' in the module (%s)", name,
                       cudaGetErrorName(e));
    }
    char who[300];
    snprintf(who, sizeof who, "kernel '%s'", name);
    RT_TRY(rt_cuda_check(e, "cudaLibraryGetKernel", who, err, n));
    /* The parameter's size, to catch a host/device KilnArgs mismatch at launch.
     * Kiln's kernels take exactly one parameter (codegen/kernels/CONTRACT.md), so
     * only parameter 0 is asked about: probing past the last parameter is an API
     * error that compute-sanitizer reports against the user's program. When the
     * query is unsupported (param_size 0) launches go unchecked. */
    size_t off = 0, size = 0;
    e = cudaFuncGetParamInfo((const void *)ker, 0, &off, &size);
    if (e == cudaErrorInvalidValue)
        return rt_fail(RT_ERR_INVALID, err, n, "kernel '%s' takes no parameter: Kiln kernels take one KilnArgs struct",
                       name);
    if (rt_cuda_status(e) != RT_OK) {
        size = 0;
        (void)cudaGetLastError(); /* an unsupported query leaves no error behind */
    }
    const char *kept = keep_name(m, name);
    if (!kept) return rt_fail(RT_ERR_NOMEM, err, n, "rt_module_kernel: out of memory");
    k->fn = (void *)ker;
    k->param_size = size;
    k->name = kept;
    k->mod = m;
    ok(err, n);
    return RT_OK;
}

static const char *kname(const rt_kernel *k)
{
    return k && k->name ? k->name : "?";
}

rt_status rt_kernel_set_max_smem(const rt_kernel *k, size_t bytes, char *err, size_t n)
{
    if (!k || !k->fn) return rt_fail(RT_ERR_INVALID, err, n, "rt_kernel_set_max_smem: NULL kernel");
    char who[300];
    snprintf(who, sizeof who, "kernel '%s'", kname(k));
    int dev = 0, optin = 0;
    RT_CUDA_TRY(cudaGetDevice(&dev), err, n);
    RT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), err, n);
    struct cudaFuncAttributes fa;
    RT_TRY(RT_CUDA_CHECK(cudaFuncGetAttributes(&fa, (const void *)k->fn), who, err, n));
    if (bytes + fa.sharedSizeBytes > (size_t)optin)
        return rt_fail(RT_ERR_INVALID, err, n,
                       "kernel '%s': %zu bytes of dynamic shared memory + %zu static exceed the device's "
                       "opt-in limit of %d bytes per block", kname(k), bytes, (size_t)fa.sharedSizeBytes, optin);
    RT_TRY(RT_CUDA_CHECK(cudaKernelSetAttributeForDevice((cudaKernel_t)k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                         (int)bytes, dev),
                         who, err, n));
    ok(err, n);
    return RT_OK;
}

rt_status rt_kernel_allow_large_clusters(const rt_kernel *k, char *err, size_t n)
{
    if (!k || !k->fn) return rt_fail(RT_ERR_INVALID, err, n, "rt_kernel_allow_large_clusters: NULL kernel");
    char who[300];
    snprintf(who, sizeof who, "kernel '%s'", kname(k));
    int dev = 0;
    RT_CUDA_TRY(cudaGetDevice(&dev), err, n);
    RT_TRY(RT_CUDA_CHECK(cudaKernelSetAttributeForDevice((cudaKernel_t)k->fn,
                                                         cudaFuncAttributeNonPortableClusterSizeAllowed, 1, dev),
                         who, err, n));
    ok(err, n);
    return RT_OK;
}

rt_status rt_kernel_get_attrs(const rt_kernel *k, rt_kernel_attrs *a, char *err, size_t n)
{
    if (!k || !k->fn || !a) return rt_fail(RT_ERR_INVALID, err, n, "rt_kernel_get_attrs: NULL argument");
    memset(a, 0, sizeof *a);
    char who[300];
    snprintf(who, sizeof who, "kernel '%s'", kname(k));
    struct cudaFuncAttributes fa;
    RT_TRY(RT_CUDA_CHECK(cudaFuncGetAttributes(&fa, (const void *)k->fn), who, err, n));
    a->num_regs = fa.numRegs;
    a->static_smem = fa.sharedSizeBytes;
    a->local_bytes = fa.localSizeBytes;
    a->max_threads = fa.maxThreadsPerBlock;
    a->max_dynamic_smem = fa.maxDynamicSharedSizeBytes;
    a->ptx_version = fa.ptxVersion;
    a->binary_version = fa.binaryVersion;
    ok(err, n);
    return RT_OK;
}

static rt_status check_launch(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, const void *args,
                              size_t args_size, char *err, size_t n)
{
    if (!k || !k->fn) return rt_fail(RT_ERR_INVALID, err, n, "rt_launch: NULL kernel");
    if (!args) return rt_fail(RT_ERR_INVALID, err, n, "rt_launch '%s': NULL args", kname(k));
    if (k->param_size && args_size != k->param_size)
        return rt_fail(RT_ERR_INVALID, err, n,
                       "rt_launch '%s': host args struct is %zu bytes but the kernel's parameter is %zu bytes "
                       "(KilnArgs differs between host and device)", kname(k), args_size, k->param_size);
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        return rt_fail(RT_ERR_INVALID, err, n, "rt_launch '%s': empty grid (%u,%u,%u) or block (%u,%u,%u)",
                       kname(k), grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return RT_OK;
}

rt_status rt_launch(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, size_t smem, void *stream,
                    const void *args, size_t args_size, char *err, size_t n)
{
    return rt_launch_ex(k, grid, block, smem, stream, args, args_size, 0, err, n);
}

rt_status rt_launch_ex(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, size_t smem, void *stream,
                       const void *args, size_t args_size, unsigned flags, char *err, size_t n)
{
    RT_TRY(check_launch(k, grid, block, args, args_size, err, n));
    if (flags & ~(unsigned)RT_LAUNCH_PDL)
        return rt_fail(RT_ERR_INVALID, err, n, "rt_launch '%s': unknown flags 0x%x", kname(k), flags);
    void *params[1] = {(void *)args};
    dim3 g = {grid.x, grid.y, grid.z}, b = {block.x, block.y, block.z};
    char why[512];
    rt_status st;
    if (flags == 0) {
        st = RT_CUDA_CHECK(cudaLaunchKernel((const void *)k->fn, g, b, params, smem, (cudaStream_t)stream), NULL, why,
                           sizeof why);
    } else {
        cudaLaunchAttribute attr[1];
        memset(attr, 0, sizeof attr);
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDim = g;
        cfg.blockDim = b;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = (cudaStream_t)stream;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        st = RT_CUDA_CHECK(cudaLaunchKernelExC(&cfg, (const void *)k->fn, params), NULL, why, sizeof why);
    }
    if (st != RT_OK) /* the check cleared the error record: launch errors are not sticky */
        return rt_fail(st, err, n, "launch of '%s' grid (%u,%u,%u) block (%u,%u,%u) smem %zu: %s", kname(k), grid.x,
                       grid.y, grid.z, block.x, block.y, block.z, smem, why);
    ok(err, n);
    return RT_OK;
}

void rt_module_free(rt_module *m)
{
    if (!m) return;
    if (m->lib) (void)cudaLibraryUnload(m->lib);
    for (int i = 0; i < m->nnames; i++) free(m->names[i]);
    free(m->names);
    free(m);
}
