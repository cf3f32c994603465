/* runtime/rt_cublas.h — cuBLAS, loaded when something first needs it.
 *
 * libcublas (and libcublasLt behind it) is a few hundred MB mapped into a
 * process: linking it made every `kiln` command, `check` included, start
 * at about 250 MB. It is opened with dlopen on first use instead (the
 * ceilings' GEMMs, `kiln --version`, naming a cuBLAS status), from
 * $KILN_CUBLAS_LIB (a path), libcublas.so.MAJOR and libcublas.so through
 * the library path, then lib64/ and lib/ under each toolkit root
 * (rt_lib_candidates). Process-wide: the function table is filled once,
 * under pthread_once, and never changed after. */
#ifndef KILN_RT_CUBLAS_H
#define KILN_RT_CUBLAS_H
#include <cublas_api.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct rt_cublas_api {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*get_property)(libraryPropertyType, int *);
    const char *(*status_string)(cublasStatus_t);
    const char *(*status_name)(cublasStatus_t);
} rt_cublas_api;

/* The loaded library's functions, loading it on the first call; NULL when
 * it cannot be loaded (why in err, RT_ERR_NOT_FOUND's message). */
const rt_cublas_api *rt_cublas(char *err, size_t n);
/* Whether cuBLAS is loaded now (never loads it: for tests). */
bool rt_cublas_loaded(void);

#endif
