/* runtime/rt_cublas.c — cuBLAS through dlopen (runtime/rt_cublas.h). */
#include "runtime/rt_cublas.h"

#include <pthread.h>
#include <stdio.h>

#include "runtime/rt_err.h"
#include "runtime/rt_util.h"

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static rt_cublas_api api;      /* set once, in load_once */
static char lib_path[512];     /* set once: the path that loaded, "" when none did */
static char lib_why[2048];     /* set once: why none loaded */

static void load_once(void)
{
    static const char *const subs[] = {"lib64", "lib", "targets/x86_64-linux/lib"};
    char cand[40][512];
    int nc = rt_lib_candidates("KILN_CUBLAS_LIB", "libcublas.so", CUBLAS_VER_MAJOR, subs, 3, NULL, NULL, cand, 40);
    const rt_lib_sym syms[] = {
        {"cublasCreate_v2", (void **)&api.create},
        {"cublasDestroy_v2", (void **)&api.destroy},
        {"cublasSetStream_v2", (void **)&api.set_stream},
        {"cublasGemmEx", (void **)&api.gemm_ex},
        {"cublasGetProperty", (void **)&api.get_property},
        {"cublasGetStatusString", (void **)&api.status_string},
        {"cublasGetStatusName", (void **)&api.status_name},
    };
    (void)rt_lib_load(cand, nc, syms, (int)(sizeof syms / sizeof syms[0]), lib_path, sizeof lib_path, lib_why,
                      sizeof lib_why);
}

const rt_cublas_api *rt_cublas(char *err, size_t n)
{
    pthread_once(&lib_once, load_once);
    if (lib_path[0]) return &api;
    rt_fail(RT_ERR_NOT_FOUND, err, n, "cuBLAS could not be loaded: %s (set KILN_CUBLAS_LIB)", lib_why);
    return NULL;
}

bool rt_cublas_loaded(void) { return lib_path[0] != 0; }
