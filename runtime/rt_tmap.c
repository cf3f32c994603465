/* runtime/rt_tmap.c — see rt_tmap.h. cuda.h / cudaTypedefs.h are used for the
 * types and the entry point's signature only; the function comes from the
 * driver through the CUDA runtime. */
#include "runtime/rt_tmap.h"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/rt_err.h"

_Static_assert(sizeof(rt_tmap) == sizeof(CUtensorMap), "rt_tmap is a CUtensorMap");
_Static_assert(_Alignof(rt_tmap) == 64, "a tensor map is 64-byte aligned");

bool rt_tmap_describable(const rt_tmap_operand *op)
{
    if (!op || !op->base || ((uintptr_t)op->base & 15u)) return false;
    if (op->K < 1 || op->rows < 1 || op->batch < 1 || op->ld < op->K || op->ld % 8 || op->batch_stride % 8 ||
        op->batch_stride < 0)
        return false;
    if (op->box_rows < 1 || op->box_rows > 256) return false;
    /* TMA: dims < 2^32, strides < 2^40 bytes, coordinates are int32 */
    const long long lim = 1ll << 31;
    return op->K < lim && op->rows < lim && op->batch < lim && op->ld * 2 < (1ll << 40) &&
           op->batch_stride * 2 < (1ll << 40);
}

rt_status rt_tmap_encode(rt_tmap *out, const rt_tmap_operand *op, char *err, size_t n)
{
    if (!out || !rt_tmap_describable(op))
        return rt_fail(RT_ERR_INVALID, err, n, "rt_tmap_encode: operand not describable by TMA");
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    RT_TRY(RT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q),
                         "rt_tmap_encode", err, n));
    if (q != cudaDriverEntryPointSuccess || !fn)
        return rt_fail(RT_ERR_NO_DEVICE, err, n, "rt_tmap_encode: the driver has no cuTensorMapEncodeTiled (query result %d)",
                       (int)q);
    const bool shared = op->batch_stride == 0;
    cuuint64_t dims[3] = {(cuuint64_t)op->K, (cuuint64_t)op->rows, (cuuint64_t)(shared ? 1 : op->batch)};
    cuuint64_t strides[2] = {(cuuint64_t)(op->ld * 2),
                             (cuuint64_t)((shared ? op->rows * op->ld : op->batch_stride) * 2)};
    cuuint32_t box[3] = {64, (cuuint32_t)op->box_rows, 1}, estr[3] = {1, 1, 1};
    /* a driver call (CUresult, not a cudaError_t): its code in the message */
    CUresult r = ((PFN_cuTensorMapEncodeTiled_v12000)fn)(
        (CUtensorMap *)out, op->f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
        (void *)op->base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return rt_fail(RT_ERR_CUDA, err, n, "rt_tmap_encode: cuTensorMapEncodeTiled failed (CUresult %d)", (int)r);
    return RT_OK;
}
