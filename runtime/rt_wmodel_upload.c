/* runtime/rt_wmodel_upload.c — weight uploads through pinned staging buffers
 * (rt_wmodel.h, rt_upload_*): the host copies a piece of the (memory-mapped)
 * file into one pinned buffer while the DMA engine copies the previous piece
 * from the other to the device, so reading the file and the host-to-device
 * copy overlap, and the copy runs at pinned speed instead of staging pageable
 * memory. The buffers are as large as a piece or the whole upload, whichever is
 * smaller. */
#include "runtime/rt_wmodel.h"

#include <cuda_runtime_api.h>
#include <string.h>

#include "runtime/rt_model_internal.h"

rt_status rt_upload_begin(rt_upload *u, void *stream, size_t total, char *err, size_t n)
{
    memset(u, 0, sizeof *u);
    u->stream = stream;
    u->piece = total < RT_UPLOAD_PIECE ? total : RT_UPLOAD_PIECE;
    if (!u->piece) return RT_OK;
    for (int i = 0; i < 2; i++) {
        RT_TRY(RT_CUDA_CHECK(cudaHostAlloc(&u->pinned[i], u->piece, cudaHostAllocDefault), "weight staging buffer", err, n));
        RT_TRY(RT_CUDA_CHECK(cudaEventCreateWithFlags((cudaEvent_t *)&u->done[i], cudaEventDisableTiming), "weight staging", err,
                             n));
    }
    return RT_OK;
}

rt_status rt_upload_copy(rt_upload *u, void *dev, const void *src, size_t bytes, const char *who, char *err, size_t n)
{
    if (!u->pinned[0] || !u->done[1]) return RT_CUDA_CHECK(cudaMemcpy(dev, src, bytes, cudaMemcpyHostToDevice), who, err, n);
    for (size_t off = 0; off < bytes;) {
        size_t len = bytes - off < u->piece ? bytes - off : u->piece;
        int s = u->slot;
        /* the buffer's previous copy has finished */
        RT_TRY(RT_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)u->done[s]), who, err, n));
        memcpy(u->pinned[s], (const char *)src + off, len);
        RT_TRY(RT_CUDA_CHECK(cudaMemcpyAsync((char *)dev + off, u->pinned[s], len, cudaMemcpyHostToDevice,
                                             (cudaStream_t)u->stream), who, err, n));
        RT_TRY(RT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)u->done[s], (cudaStream_t)u->stream), who, err, n));
        u->slot ^= 1;
        off += len;
    }
    return RT_OK;
}

rt_status rt_upload_end(rt_upload *u, char *err, size_t n)
{
    rt_status st = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)u->stream), "weight upload", err, n);
    for (int i = 0; i < 2; i++) {
        if (u->done[i]) (void)cudaEventDestroy((cudaEvent_t)u->done[i]);
        if (u->pinned[i]) (void)cudaFreeHost(u->pinned[i]);
    }
    memset(u, 0, sizeof *u);
    return st;
}
