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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_err.h"

struct rt_module {
    cudaLibrary_t lib;
    /* kernel names handed out by rt_module_kernel, freed with the module */
    char **names;
    int nnames, cap;
};

const char *rt_lstatus_str(rt_lstatus s)
{
    switch (s) {
    case RT_LAUNCH_OK: return "ok";
    case RT_LAUNCH_ERR_INVALID: return "invalid argument";
    case RT_LAUNCH_ERR_NOMEM: return "out of memory";
    case RT_LAUNCH_ERR_NO_DEVICE: return "no CUDA device";
    case RT_LAUNCH_ERR_NOT_FOUND: return "kernel not found";
    case RT_LAUNCH_ERR_CUDA: return "CUDA error";
    }
    return "unknown status";
}

static void ok(char *err, size_t n)
{
    if (err && n) err[0] = '\0';
}

/* CUDA errors that mean "no usable device/driver" rather than a bug. */
static int no_device_error(cudaError_t e)
{
    return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
           e == cudaErrorInitializationError || e == cudaErrorDevicesUnavailable ||
           e == cudaErrorSystemDriverMismatch || e == cudaErrorCompatNotSupportedOnDevice ||
           e == cudaErrorStubLibrary || e == cudaErrorNotSupported;
}

static rt_lstatus cuda_fail(cudaError_t e, char *err, size_t n, const char *what, const char *name)
{
    rt_lstatus s = no_device_error(e) ? RT_LAUNCH_ERR_NO_DEVICE : RT_LAUNCH_ERR_CUDA;
    return rt_fail(s, err, n, "%s%s%s%s: %s (%s)", what, name ? " '" : "", name ? name : "",
                   name ? "'" : "", cudaGetErrorString(e), cudaGetErrorName(e));
}

int rt_device_available(char *why, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        rt_fail(RT_LAUNCH_ERR_NO_DEVICE, why, n, "no CUDA device: %s (%s)", cudaGetErrorString(e),
                cudaGetErrorName(e));
        return 0;
    }
    if (count <= 0) {
        rt_fail(RT_LAUNCH_ERR_NO_DEVICE, why, n, "no CUDA device: cudaGetDeviceCount found 0 devices");
        return 0;
    }
    ok(why, n);
    return 1;
}

rt_lstatus rt_device_max_smem_optin(int *bytes, char *err, size_t n)
{
    if (!bytes) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_device_max_smem_optin: NULL bytes");
    *bytes = 0;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return cuda_fail(e, err, n, "cudaGetDevice", NULL);
    e = cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess) return cuda_fail(e, err, n, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)", NULL);
    ok(err, n);
    return RT_LAUNCH_OK;
}

/* A cubin is ELF; a fatbin starts with its magic; PTX is text that must be
 * NUL-terminated within len. */
static int plausible_image(const unsigned char *p, size_t len)
{
    if (len >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') return 1;
    if (len >= 4 && p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba) return 1;
    return memchr(p, '\0', len) != NULL && len > 1;
}

rt_lstatus rt_module_load(rt_module **m, const void *image, size_t len, char *err, size_t n)
{
    if (!m) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_module_load: NULL module pointer");
    *m = NULL;
    if (!image || len == 0) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_module_load: empty image");
    if (!plausible_image(image, len))
        return rt_fail(RT_LAUNCH_ERR_INVALID, err, n,
                       "rt_module_load: image of %zu bytes is neither a cubin (ELF), a fatbin nor NUL-terminated PTX", len);
    rt_module *mod = calloc(1, sizeof *mod);
    if (!mod) return rt_fail(RT_LAUNCH_ERR_NOMEM, err, n, "rt_module_load: out of memory");
    cudaError_t e = cudaLibraryLoadData(&mod->lib, image, NULL, NULL, 0, NULL, NULL, 0);
    if (e != cudaSuccess) {
        free(mod);
        return cuda_fail(e, err, n, "cudaLibraryLoadData", NULL);
    }
    *m = mod;
    ok(err, n);
    return RT_LAUNCH_OK;
}

static const char *keep_name(rt_module *m, const char *name)
{
    for (int i = 0; i < m->nnames; i++)
        if (strcmp(m->names[i], name) == 0) return m->names[i];
    if (m->nnames == m->cap) {
        int cap = m->cap ? 2 * m->cap : 4;
        char **nn = realloc(m->names, (size_t)cap * sizeof *nn);
        if (!nn) return NULL;
        m->names = nn;
        m->cap = cap;
    }
    size_t l = strlen(name) + 1;
    char *c = malloc(l);
    if (!c) return NULL;
    memcpy(c, name, l);
    m->names[m->nnames++] = c;
    return c;
}

rt_lstatus rt_module_kernel(rt_module *m, const char *name, rt_kernel *k, char *err, size_t n)
{
    if (!m || !name || !k) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_module_kernel: NULL argument");
    memset(k, 0, sizeof *k);
    cudaKernel_t ker = NULL;
    cudaError_t e = cudaLibraryGetKernel(&ker, m->lib, name);
    if (e == cudaErrorSymbolNotFound || e == cudaErrorInvalidDeviceFunction)
        return rt_fail(RT_LAUNCH_ERR_NOT_FOUND, err, n, "cudaLibraryGetKernel: no kernel '%s' in the module (%s)",
                       name, cudaGetErrorName(e));
    if (e != cudaSuccess) return cuda_fail(e, err, n, "cudaLibraryGetKernel", name);
    /* The parameter's size, to catch a host/device KilnArgs mismatch at launch. A
     * kernel with no parameter, or more than one, is refused; when the query itself
     * is unsupported (param_size 0) launches go unchecked. */
    size_t off = 0, size = 0, off1 = 0, size1 = 0;
    e = cudaFuncGetParamInfo((const void *)ker, 0, &off, &size);
    if (e == cudaSuccess && cudaFuncGetParamInfo((const void *)ker, 1, &off1, &size1) == cudaSuccess)
        return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "kernel '%s' takes more than one parameter", name);
    if (e == cudaErrorInvalidValue)
        return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "kernel '%s' takes no parameter: Kiln kernels take one KilnArgs struct",
                       name);
    if (e != cudaSuccess) size = 0;
    (void)cudaGetLastError(); /* the probes are expected to fail; leave no error behind */
    const char *kept = keep_name(m, name);
    if (!kept) return rt_fail(RT_LAUNCH_ERR_NOMEM, err, n, "rt_module_kernel: out of memory");
    k->fn = (void *)ker;
    k->param_size = size;
    k->name = kept;
    k->mod = m;
    ok(err, n);
    return RT_LAUNCH_OK;
}

static const char *kname(const rt_kernel *k)
{
    return k && k->name ? k->name : "?";
}

rt_lstatus rt_kernel_set_max_smem(const rt_kernel *k, size_t bytes, char *err, size_t n)
{
    if (!k || !k->fn) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_kernel_set_max_smem: NULL kernel");
    int dev = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return cuda_fail(e, err, n, "cudaGetDevice", NULL);
    e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess) return cuda_fail(e, err, n, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)", NULL);
    struct cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, (const void *)k->fn);
    if (e != cudaSuccess) return cuda_fail(e, err, n, "cudaFuncGetAttributes", kname(k));
    if (bytes + fa.sharedSizeBytes > (size_t)optin)
        return rt_fail(RT_LAUNCH_ERR_INVALID, err, n,
                       "kernel '%s': %zu bytes of dynamic shared memory + %zu static exceed the device's "
                       "opt-in limit of %d bytes per block", kname(k), bytes, (size_t)fa.sharedSizeBytes, optin);
    e = cudaKernelSetAttributeForDevice((cudaKernel_t)k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes, dev);
    if (e != cudaSuccess)
        return cuda_fail(e, err, n, "cudaKernelSetAttributeForDevice(MaxDynamicSharedMemorySize)", kname(k));
    ok(err, n);
    return RT_LAUNCH_OK;
}

rt_lstatus rt_kernel_get_attrs(const rt_kernel *k, rt_kernel_attrs *a, char *err, size_t n)
{
    if (!k || !k->fn || !a) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_kernel_get_attrs: NULL argument");
    memset(a, 0, sizeof *a);
    struct cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, (const void *)k->fn);
    if (e != cudaSuccess) return cuda_fail(e, err, n, "cudaFuncGetAttributes", kname(k));
    a->num_regs = fa.numRegs;
    a->static_smem = fa.sharedSizeBytes;
    a->local_bytes = fa.localSizeBytes;
    a->max_threads = fa.maxThreadsPerBlock;
    a->max_dynamic_smem = fa.maxDynamicSharedSizeBytes;
    a->ptx_version = fa.ptxVersion;
    a->binary_version = fa.binaryVersion;
    ok(err, n);
    return RT_LAUNCH_OK;
}

static rt_lstatus check_launch(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, const void *args,
                               size_t args_size, char *err, size_t n)
{
    if (!k || !k->fn) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_launch: NULL kernel");
    if (!args) return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_launch '%s': NULL args", kname(k));
    if (k->param_size && args_size != k->param_size)
        return rt_fail(RT_LAUNCH_ERR_INVALID, err, n,
                       "rt_launch '%s': host args struct is %zu bytes but the kernel's parameter is %zu bytes "
                       "(KilnArgs differs between host and device)", kname(k), args_size, k->param_size);
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_launch '%s': empty grid (%u,%u,%u) or block (%u,%u,%u)",
                       kname(k), grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return RT_LAUNCH_OK;
}

rt_lstatus rt_launch(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, size_t smem, void *stream,
                     const void *args, size_t args_size, char *err, size_t n)
{
    return rt_launch_ex(k, grid, block, smem, stream, args, args_size, 0, err, n);
}

rt_lstatus rt_launch_ex(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, size_t smem, void *stream,
                        const void *args, size_t args_size, unsigned flags, char *err, size_t n)
{
    rt_lstatus s = check_launch(k, grid, block, args, args_size, err, n);
    if (s != RT_LAUNCH_OK) return s;
    if (flags & ~(unsigned)RT_LAUNCH_PDL)
        return rt_fail(RT_LAUNCH_ERR_INVALID, err, n, "rt_launch '%s': unknown flags 0x%x", kname(k), flags);
    void *params[1] = {(void *)args};
    dim3 g = {grid.x, grid.y, grid.z}, b = {block.x, block.y, block.z};
    cudaError_t e;
    if (flags == 0) {
        e = cudaLaunchKernel((const void *)k->fn, g, b, params, smem, (cudaStream_t)stream);
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
        e = cudaLaunchKernelExC(&cfg, (const void *)k->fn, params);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* launch errors are not sticky; clear the record */
        return rt_fail(no_device_error(e) ? RT_LAUNCH_ERR_NO_DEVICE : RT_LAUNCH_ERR_CUDA, err, n,
                       "launch of '%s' grid (%u,%u,%u) block (%u,%u,%u) smem %zu: %s (%s)", kname(k), grid.x,
                       grid.y, grid.z, block.x, block.y, block.z, smem, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    ok(err, n);
    return RT_LAUNCH_OK;
}

void rt_module_free(rt_module *m)
{
    if (!m) return;
    if (m->lib) (void)cudaLibraryUnload(m->lib);
    for (int i = 0; i < m->nnames; i++) free(m->names[i]);
    free(m->names);
    free(m);
}
