/* runtime/rt_tmap.h — TMA tensor maps for the Hopper matmul template
 * (codegen/kernels/matmul_wgmma.cuh).
 *
 * A tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned) describes a
 * tiled view of a global tensor for cp.async.bulk.tensor. The template reads
 * each K-major operand (A [M, K], W [N, K]; K contiguous) through a rank-3 map
 * {K, rows, batches} with 64 x box_rows x 1 boxes and the 128-byte swizzle.
 * Maps are encoded on the host by the driver's cuTensorMapEncodeTiled, reached
 * through cudaGetDriverEntryPointByVersion (the CUDA runtime), so nothing links
 * libcuda. A map holds the base pointer: encode again when it changes.
 *
 * Messages and statuses as runtime/rt_launch.h. No global state: the entry
 * point is looked up on every call (cheap; maps are encoded when a launch is
 * recorded, not per replay). */
#ifndef KILN_RT_TMAP_H
#define KILN_RT_TMAP_H
#include <stdbool.h>
#include <stddef.h>

#include "runtime/rt_launch.h"

/* The bytes of one CUtensorMap, as the kernel parameter holds them (the
 * header is also included from C++: the nvcc bench harness). */
#ifdef __cplusplus
#define RT_TMAP_ALIGN alignas(64)
#else
#define RT_TMAP_ALIGN _Alignas(64)
#endif
typedef struct rt_tmap {
    RT_TMAP_ALIGN unsigned char bytes[128];
} rt_tmap;

/* A K-major operand of `batch` matrices of `rows` x `K` 2-byte elements: row r
 * of batch b at base + b*batch_stride + r*ld (elements). batch_stride 0: one
 * matrix shared by every batch (the map then has one batch). */
typedef struct rt_tmap_operand {
    const void *base;
    bool f16; /* element type: f16, else bf16 */
    long long K, rows, ld, batch, batch_stride;
    int box_rows; /* rows per box: the template's BM (A) or BN / cluster size (W) */
} rt_tmap_operand;

/* Whether TMA can describe the operand: base 16-byte aligned, ld and
 * batch_stride multiples of 8 elements (16 bytes), sizes in range, box_rows
 * in 1..256. Shapes it cannot describe take matmul_mma.cuh. */
bool rt_tmap_describable(const rt_tmap_operand *op);

/* Encodes the map (dims {K, rows, batches}, strides {ld, batch_stride} bytes,
 * box {64, box_rows, 1}, no interleave, 128-byte swizzle, 256-byte L2
 * promotion, out-of-bounds elements read as zeros). */
rt_status rt_tmap_encode(rt_tmap *out, const rt_tmap_operand *op, char *err, size_t n);

#endif
