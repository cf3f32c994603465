/* runtime/rt_cublaslt.h — cuBLASLt, loaded when a matmul first needs it, and
 * the matmul plans of the kernels that autotuning gave to it (codegen/cg.h:
 * cg_lt).
 *
 * libcublasLt is opened with dlopen as libcublas is (runtime/rt_cublas.h):
 * $KILN_CUBLASLT_LIB (a path), libcublasLt.so.MAJOR and libcublasLt.so
 * through the library path, then lib64/ and lib/ under each toolkit root;
 * the functions go through one table, filled once under pthread_once, and
 * every call is checked through RT_CUBLAS_CHECK (cuBLASLt's statuses are
 * cuBLAS's). Without the library cuBLASLt is no candidate: rt_cublaslt
 * says why, and the tuner skips it with that reason.
 *
 * A plan (rt_lt_plan) is one matmul at one shape: the row-major operands as
 * the column-major transposes cuBLASLt expects (D^T[N, M] = op(W)[N, K] .
 * A^T[K, M]: W is cuBLASLt's A, transposed when stored [N, K]; the
 * activation rows its B), batched strides, the epilogue (bias, relu or
 * gelu, beta 1 with C the residual), f32 accumulation and the heuristic's
 * first algorithm for the operands' alignment and the workspace, among those
 * whose split-K reduction is none or a separate ordered pass (never the
 * in-place one): the same algorithm, so the same bits, on every launch. It
 * is made once per (kernel, shape, alignment) and replayed; its launches go
 * on the stream given, so a CUDA graph captures them. */
#ifndef KILN_RT_CUBLASLT_H
#define KILN_RT_CUBLASLT_H
#include <cublasLt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/cg.h"
#include "runtime/rt_err.h"

typedef struct rt_cublaslt_api {
    cublasStatus_t (*create)(cublasLtHandle_t *);
    cublasStatus_t (*destroy)(cublasLtHandle_t);
    size_t (*get_version)(void);
    cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
    cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*layout_set)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, const void *, size_t);
    cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void *, size_t);
    cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                cublasLtMatmulHeuristicResult_t *, int *);
    cublasStatus_t (*algo_config_get)(const cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t, void *, size_t,
                                      size_t *);
    cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
                             const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
                             void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
} rt_cublaslt_api;

/* The loaded library's functions, loading it on the first call; NULL when it
 * cannot be loaded (why in err, RT_ERR_NOT_FOUND's message). */
const rt_cublaslt_api *rt_cublaslt(char *err, size_t n);

/* One matmul at one shape (above). */
typedef struct rt_lt_plan rt_lt_plan;

/* *p (a kernel's list of plans, one per shape) with a plan for kernel K
 * (K->lt.chosen) at dims with the operand pointers of its KilnArgs (args)
 * at its front: the one made for that shape and an alignment the pointers
 * still have, else a new one (the heuristic asked once per shape; plans
 * of other shapes are kept, for the graphs captured with them, up to 32).
 * RT_ERR_NOT_FOUND without cuBLASLt, RT_ERR_CUDA when no algorithm takes
 * the shape. */
rt_status rt_lt_prepare(rt_lt_plan **p, const cg_kernel *K, const int64_t *dims, const unsigned char *args, char *err,
                        size_t n);
/* One launch of the plan on stream with the pointers of args (the bias's
 * and the residual's too). */
rt_status rt_lt_launch(rt_lt_plan *p, const cg_kernel *K, const unsigned char *args, void *stream, char *err, size_t n);
void rt_lt_plan_free(rt_lt_plan *p); /* the whole list; NULL-safe */
/* "algo 23, split-k 1, reduction none, tile 12": the plan's algorithm, for
 * tests and reports. */
const char *rt_lt_plan_describe(const rt_lt_plan *p, char *buf, size_t n);

/* Test hook: KILN_FORCE_CUBLASLT=1 in the environment makes the tuner store
 * cuBLASLt as the choice of every problem where it is a candidate and ran
 * (its measurement still taken and stored); the GPU tests use it to run the
 * cuBLASLt path whatever the timing says. */
bool rt_lt_forced(void);

#endif
