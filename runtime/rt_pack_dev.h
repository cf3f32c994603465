/* runtime/rt_pack_dev.h — bind-time values on the device: packing without a
 * round trip through the host.
 *
 * The packing of rt_pack.h (concat of Q/K/V or gate/up, slices, reshapes,
 * permutes, a norm's gain folded into a weight; then codegen's layout
 * changes: gate/up rows interleaved, the RoPE row pairs) done where the
 * weights are: data movement by cudaMemcpy2DAsync, permutes and row scales by
 * the kernels of codegen/kernels/pack.cuh. The values are bit for bit the
 * host's (rt_pack_eval): movement is exact and the row scale rounds each
 * product once as the host does. A bf16 weight scaled by a float32 gain
 * (rt_pack_is_rowscale_f32) is done here too, its gain computed on the host
 * when other ops make it (a few KB, the weights under it read back). A node of
 * any other kind (a cast, any op the interpreter evaluates) is not done here:
 * the caller packs that value on the host. */
#ifndef KILN_RT_PACK_DEV_H
#define KILN_RT_PACK_DEV_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/rt_err.h"
#include "runtime/rt_launch.h"

/* The two kernels of pack.cuh, loaded (rt_module_kernel). */
typedef struct rt_pack_kernels {
    rt_kernel rowscale, permute;
} rt_pack_kernels;

/* Whether bind-time node `node` of g can be evaluated on the device: every
 * node under it a weight, data movement (rt_pack_is_movement) or, with
 * kernels, a permute, a bf16/f32 row scale (rt_pack_is_rowscale) and a bf16
 * row scale by a float32 gain (rt_pack_is_rowscale_f32; the gain any float32
 * vector). */
bool rt_pack_dev_supported(const ir_graph *g, int node, bool kernels);

/* The device bytes of weight parameter `param` at its declared type (read,
 * never written nor freed by packing; valid until rt_pack_dev_eval returns).
 * Returns 0 or an rt_status with a message. */
typedef int (*rt_pack_dev_weight_fn)(void *user, int param, const void **dev, char *err, size_t n);

/* Evaluates bind-time node `node` on the device, on `stream`: *out receives
 * a cudaMalloc'd buffer of *bytes bytes (the node's dtype, row-major), whose
 * contents are ready once the stream reaches this point. k: the kernels, or
 * NULL when the node needs none (rt_pack_dev_supported(g, node, false)).
 * Returns RT_OK, or with a message RT_ERR_INVALID (node not supported),
 * RT_ERR_WEIGHTS (a shape does not evaluate), the callback's status or a
 * CUDA failure. */
rt_status rt_pack_dev_eval(const ir_graph *g, const int64_t *dims, int node, rt_pack_dev_weight_fn get, void *user,
                           const rt_pack_kernels *k, void *stream, void **out, size_t *bytes, char *err, size_t n);

/* rt_pack_interleave_rows and rt_pack_rope_pairs on device buffers (async on
 * stream): dst and src must not overlap; rope pairs work in place. False from
 * rope pairs (no CUDA call made) when rt_pack_rope_pairs_fit refuses. */
rt_status rt_pack_dev_interleave_rows(void *dst, const void *src, int64_t half, size_t row_bytes, void *stream, char *err,
                                      size_t n);
rt_status rt_pack_dev_rope_pairs(void *val, int64_t rows, size_t row_bytes, int64_t off, int64_t stride, int64_t heads,
                                 int64_t rot, void *stream, char *err, size_t n);

#endif
