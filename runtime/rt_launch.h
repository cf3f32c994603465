/* runtime/rt_launch.h — load compiled kernels and launch them.
 *
 * The one loader/launcher every GPU test and the runtime use. CUDA runtime API
 * only (cudaLibraryLoadData / cudaLibraryGetKernel / cudaLaunchKernel), never
 * libcuda: a binary linking this starts, and every call here fails with a
 * status and a message instead of crashing, on a machine with no GPU driver.
 *
 * Kiln kernels take ONE argument, the group's `KilnArgs` struct, by value
 * (codegen/kernels/CONTRACT.md). rt_launch passes `args` (a pointer to the
 * host copy of that struct) as the single kernel parameter; the struct's size
 * is checked against the kernel's parameter size read from the module
 * (cudaFuncGetParamInfo), so a host/device struct mismatch is an error, not
 * silent garbage. Any kernel with exactly one by-value parameter works.
 *
 * Status and messages: every call that can fail returns an rt_status
 * (runtime/rt_err.h: RT_ERR_INVALID for a bad argument, not a cubin or an
 * args size mismatch, RT_ERR_NOT_FOUND for a kernel missing from a module,
 * RT_ERR_NOMEM, RT_ERR_NO_DEVICE without a usable device or driver,
 * RT_ERR_CUDA for any other CUDA failure) and takes (err, n); err may be
 * NULL. On failure err receives one line naming the call, the kernel and
 * CUDA's error string; on success it is emptied. Nothing here prints, exits or aborts, and there is no global state
 * (CUDA's current device aside): modules and kernels are plain handles. */
#ifndef KILN_RT_LAUNCH_H
#define KILN_RT_LAUNCH_H
#include <stddef.h>

#include "runtime/rt_err.h"

typedef struct rt_module rt_module; /* a loaded cubin/PTX (a cudaLibrary_t) */

typedef struct rt_kernel {
    void *fn;            /* the cudaKernel_t, usable wherever the runtime takes a function */
    size_t param_size;   /* bytes of the kernel's single by-value parameter (0: unknown, unchecked) */
    const char *name;    /* points into the owning module; valid until rt_module_free */
    rt_module *mod;
} rt_kernel;

typedef struct rt_dim3 {
    unsigned x, y, z;
} rt_dim3;

/* Resources the compiler gave a kernel (cudaFuncGetAttributes). */
typedef struct rt_kernel_attrs {
    int num_regs;             /* registers per thread */
    size_t static_smem;       /* statically declared shared memory, bytes */
    size_t local_bytes;       /* local memory per thread (stack, spills), bytes */
    int max_threads;          /* most threads per block this kernel can be launched with */
    int max_dynamic_smem;     /* current dynamic shared-memory limit, bytes */
    int ptx_version, binary_version;
} rt_kernel_attrs;

/* 1 when at least one CUDA device is usable, else 0 with the reason in why
 * ("no CUDA device: ..."). Never fails otherwise. */
int rt_device_available(char *why, size_t n);

/* Shared memory a block may opt in to on the current device
 * (cudaDevAttrMaxSharedMemoryPerBlockOptin), into *bytes. */
rt_status rt_device_max_smem_optin(int *bytes, char *err, size_t n);

/* Load `len` bytes of a cubin (ELF), a fatbin, or NUL-terminated PTX. The
 * image is not kept: the caller may free it after the call. On failure *m is
 * NULL. */
rt_status rt_module_load(rt_module **m, const void *image, size_t len, char *err, size_t n);

/* Look a kernel up by its extern "C" name. Fills *k (k->name is a copy owned
 * by the module). The kernel must take exactly one parameter. */
rt_status rt_module_kernel(rt_module *m, const char *name, rt_kernel *k, char *err, size_t n);

/* Raise the kernel's dynamic shared-memory limit on the current device to
 * `bytes` (cudaKernelSetAttributeForDevice with
 * cudaFuncAttributeMaxDynamicSharedMemorySize). Needed before any launch with
 * more than 48 KiB of dynamic shared memory; fails with a message when bytes
 * plus the kernel's static shared memory exceeds the device's opt-in limit. */
rt_status rt_kernel_set_max_smem(const rt_kernel *k, size_t bytes, char *err, size_t n);

/* Allow the kernel thread-block clusters above the portable 8 CTAs (a kernel whose
 * __cluster_dims__ hold up to 16 on sm_90): cudaFuncAttributeNonPortableClusterSizeAllowed. */
rt_status rt_kernel_allow_large_clusters(const rt_kernel *k, char *err, size_t n);

/* Registers, shared and local memory of a kernel (on the current device). */
rt_status rt_kernel_get_attrs(const rt_kernel *k, rt_kernel_attrs *a, char *err, size_t n);

/* Launch flags for rt_launch_ex. */
enum {
    /* Programmatic dependent launch: this kernel may start before the previous
     * kernel in the stream has finished; it must call
     * cudaGridDependencySynchronize() before reading that kernel's outputs. */
    RT_LAUNCH_PDL = 1u << 0,
};

/* Launch k with one by-value argument: `args` points at args_size bytes (the
 * host KilnArgs), which must equal k->param_size. stream is a cudaStream_t
 * (NULL = the legacy default stream). Checks the launch error
 * (cudaGetLastError is not consumed by later calls: the launch's own status is
 * returned). Asynchronous: execution errors surface at the next
 * synchronization. */
rt_status rt_launch(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, size_t smem, void *stream,
                    const void *args, size_t args_size, char *err, size_t n);

/* rt_launch with flags (RT_LAUNCH_*), through cudaLaunchKernelExC. */
rt_status rt_launch_ex(const rt_kernel *k, rt_dim3 grid, rt_dim3 block, size_t smem, void *stream,
                       const void *args, size_t args_size, unsigned flags, char *err, size_t n);

/* Unload the module (cudaLibraryUnload) and free it. Kernels from it become
 * invalid. NULL-safe; errors from the unload are ignored (the memory is freed
 * regardless). */
void rt_module_free(rt_module *m);

#endif
