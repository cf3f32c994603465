// codegen/kernels/moe.cuh — family `moe`: mixture-of-experts kernels (issue 18).
//
// Two kernels, chosen by KILN_MOE_ROUTER:
//
// ---- KILN_MOE_ROUTER 1: the router -------------------------------------------------------
// One warp per row (token) of E router scores (E = KILN_ROUTER_E <= 256): the scores are read
// through the hook kiln_router_in(p, row, e) (the logits, or whatever the group computes from
// them), optionally turned into probabilities over all E (KILN_ROUTER_SOFTMAX_ALL: softmax,
// max subtracted), then the KILN_ROUTER_K largest are chosen (ties: the lower expert first, as
// the interpreter), optionally softmaxed over the chosen (KILN_ROUTER_SOFTMAX_CHOSEN) and
// stored by lane j < K through kiln_router_store(p, row, j, id, vt, v): id the expert, vt the
// chosen score, v the chosen weight (== vt without KILN_ROUTER_SOFTMAX_CHOSEN).
// Args: `long long rows` first. Launch: grid ceil(rows / 8), block 256, no dynamic smem.
//
// ---- KILN_MOE_ROUTER 0: the grouped expert matmul ----------------------------------------
// out[j][n] = sum_k X(j)[k] * w[idx[j]][n][k] over the P = p.P (token, slot) pairs j, with w
// [E, N, K] (k contiguous, expert e at p.w + e*p.sw, row n at + n*p.ldw) and X(j) the row
// p.x + (p.xslot ? j : j / p.top) * p.ldx (the slot's own row, or the token's row shared by
// its slots). Expert ids come from device memory (p.idx, P ints); an id outside [0, E) is
// never computed.
// Work split: CTA (x, y) owns the output columns of block x of expert e, for every pair routed
// to e: e = y when P >= E (grid.y = E), else e = idx[y] and the CTA exits unless y is the
// first pair with that expert (grid.y = P: at decode only the chosen experts get CTAs). The
// CTA gathers its pairs by scanning p.idx (all 256 threads, 256 ids a step, ballots and a
// shared prefix; order kept) into a shared list of at most CAP pairs at a time, and loops
// until the ids are exhausted; a CTA with no pairs exits before reading any weight. So the
// weights of an expert no pair chose are never read, and each chosen expert's weights are
// read once per CAP pairs (once at decode).
// KILN_MOE_MMA 0 (decode, few pairs): CAP = KILN_MOE_MAXP (<= 16); 8 warps, each owns
// KILN_MOE_COLS/8 weight rows; lanes stride along k with 16-byte loads (KILN_MOE_UNROLL steps
// in flight), the X rows read alongside (L1/L2 hits), f32 accumulators per (row, pair), warp
// sums. KILN_MOE_MMA 1 (prefill): CAP = 64 pairs x KILN_MOE_COLS (64) columns tiles,
// mma.sync m16n8k16 (bf16/f16, f32 accumulate), 8 warps as 2 x 4 of 32 x 16, K steps of 32
// staged through shared memory with the next step's loads in registers.
// Both: 16-byte loads when K, ldx, ldw, sw are multiples of 8 and the bases 16-byte aligned,
// else scalar loads. Hook: kiln_moe_store(p, j, n, v) stores out[j][n] (once per j, n).
// KILN_MOE_GATED 1 (rule moe-gated): a second weight p.w2 of the same layout (the up
// projection next to the gate's), both accumulated side by side, and the hook
// kiln_moe_store2(p, j, n, vg, vu) stores act(vg) * vu instead (GEMV form: 8 columns).
// KILN_MOE_STREAM 1 (decode, not gated: the down projection): a persistent grid of
// gridDim.x CTAs (codegen: at most the CTAs resident at once, two per SM) walks the items
// (expert u, column block cb) of the distinct valid experts in idx (u in first-appearance
// order) times the ceil(N / KILN_MOE_COLS) column blocks, item t = blockIdx.x + i * gridDim.x.
// Every CTA finds the experts itself (warp 0 matches the <= 32 ids). Codegen sizes the grid so
// that every CTA takes the same number of items (the fewest rounds over the resident CTAs). The 256 threads of a
// CTA stride along k over the COLS weight rows of its item (a warp reads 512 contiguous bytes
// of a row per load), each issuing COLS * KILN_MOE_SU 16-byte weight loads before the first
// use, with the pairs' x rows (L1/L2 hits); warp shuffles and a shared-memory pass over the 8
// warps reduce the (pair, column) sums. Each item is 8 weight rows of K: fine enough that the
// CTAs' last round is nearly full.
// KILN_MOE_COMBINE 1 (rule moe-combine; STREAM or MMA): instead of out[j][n] the kernel
// stores the slot's term kiln_moe_term(p, j, n, v) (the weighting of the combine, with v
// for out[j][n]) rounded to KILN_T into the workspace p.dw [P, N], then counts the column
// block done in p.sem[cb] (zero before the first launch); the CTA that completes a column
// block (all its items: nexp of them; MMA: all gridDim.y CTAs of grid column cb) sums each
// token's top terms in slot order (ids outside [0, E) add nothing) and stores through
// kiln_moe_out(p, t, n, s) (the sum's epilogue: a residual add), then puts the counter back
// to 0, so no memset runs before the next launch or graph replay.
// Programmatic dependent launch: every kernel waits (kiln_pdl_wait) before it reads
// anything, and lets the next kernel launch after its main loop.
// Args: `x, w, [w2,] idx, [dw, sem]` pointers, then scalars `P, top, E, N, K, ldx, xslot, sw,
// ldw`. Launch: grid (ceil(N / KILN_MOE_COLS), min(P, E)), block 256 (STREAM: grid (at most
// the items, 1)), no dynamic shared memory.
#ifndef KILN_MOE_CUH
#define KILN_MOE_CUH

#ifndef KILN_T
#error "moe.cuh: the generated part must define KILN_T"
#endif
#ifndef KILN_MOE_ROUTER
#define KILN_MOE_ROUTER 0
#endif

#if KILN_MOE_ROUTER
#ifndef KILN_ROUTER_E
#error "moe.cuh: the router needs KILN_ROUTER_E"
#endif
#ifndef KILN_ROUTER_K
#error "moe.cuh: the router needs KILN_ROUTER_K"
#endif
#ifndef KILN_ROUTER_SOFTMAX_ALL
#define KILN_ROUTER_SOFTMAX_ALL 0
#endif
#ifndef KILN_ROUTER_SOFTMAX_CHOSEN
#define KILN_ROUTER_SOFTMAX_CHOSEN 0
#endif
static_assert(KILN_ROUTER_E >= 1 && KILN_ROUTER_E <= 256, "moe.cuh: at most 256 experts");
static_assert(KILN_ROUTER_K >= 1 && KILN_ROUTER_K <= 32 && KILN_ROUTER_K <= KILN_ROUTER_E, "moe.cuh: 1 <= K <= 32, K <= E");
#define KILN_ROUTER_EV ((KILN_ROUTER_E + 31) / 32)

extern "C" __global__ void __launch_bounds__(256) KILN_KERNEL(KilnArgs p)
{
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
    kiln_pdl_wait();
    kiln_pdl_launch();
    if (row >= p.rows) return;
    float s[KILN_ROUTER_EV];
    bool taken[KILN_ROUTER_EV];
#pragma unroll
    for (int i = 0; i < KILN_ROUTER_EV; i++) {
        const int e = lane + 32 * i;
        s[i] = e < KILN_ROUTER_E ? kiln_router_in(p, row, e) : -KILN_INF;
        taken[i] = e >= KILN_ROUTER_E;
    }
#if KILN_ROUTER_SOFTMAX_ALL
    {
        float m = -KILN_INF;
#pragma unroll
        for (int i = 0; i < KILN_ROUTER_EV; i++) m = fmaxf(m, s[i]);
        m = kiln_warp_max(m);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < KILN_ROUTER_EV; i++) {
            s[i] = lane + 32 * i < KILN_ROUTER_E ? expf(s[i] - m) : 0.0f;
            sum += s[i];
        }
        sum = kiln_warp_sum(sum);
#pragma unroll
        for (int i = 0; i < KILN_ROUTER_EV; i++) s[i] = s[i] / sum;
    }
#endif
    // K rounds of a warp argmax: larger value first, the lower expert on ties
    float my_v = 0.0f;
    int my_id = 0;
#pragma unroll 1
    for (int r = 0; r < KILN_ROUTER_K; r++) {
        float bv = -KILN_INF;
        int be = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < KILN_ROUTER_EV; i++) {
            const int e = lane + 32 * i;
            if (!taken[i] && (be == 0x7fffffff || s[i] > bv)) bv = s[i], be = e;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (oe != 0x7fffffff && (be == 0x7fffffff || ov > bv || (ov == bv && oe < be))) bv = ov, be = oe;
        }
#pragma unroll
        for (int i = 0; i < KILN_ROUTER_EV; i++)
            if (lane + 32 * i == be) taken[i] = true;
        if (lane == r) my_v = bv, my_id = be;
    }
    float w = my_v;
#if KILN_ROUTER_SOFTMAX_CHOSEN
    {
        const float m = __shfl_sync(0xffffffffu, my_v, 0); // the first chosen is the largest
        float ex = lane < KILN_ROUTER_K ? expf(my_v - m) : 0.0f;
        const float sum = kiln_warp_sum(ex);
        w = ex / sum;
    }
#endif
    if (lane < KILN_ROUTER_K) kiln_router_store(p, row, lane, my_id, my_v, w);
}

#else // the grouped expert matmul

#ifndef KILN_MOE_MMA
#define KILN_MOE_MMA 0
#endif
#ifndef KILN_MOE_COLS
#define KILN_MOE_COLS (KILN_MOE_MMA ? 64 : 16)
#endif
#ifndef KILN_MOE_MAXP
#define KILN_MOE_MAXP 16
#endif
#ifndef KILN_MOE_UNROLL
#define KILN_MOE_UNROLL 4
#endif
#ifndef KILN_MOE_GATED
#define KILN_MOE_GATED 0
#endif
#ifndef KILN_MOE_STREAM
#define KILN_MOE_STREAM 0
#endif
#ifndef KILN_MOE_SU
// Steps (of 2048 elements of k) whose weight loads a thread issues before the first use:
// COLS * SU 16-byte loads (8 at COLS 8: 32 KB per CTA, 64 KB per SM at two CTAs; ptxas fits
// SU 1 in the 128 registers of two CTAs per SM, SU 2 spills there)
#define KILN_MOE_SU 1
#endif
#ifndef KILN_MOE_COMBINE
#define KILN_MOE_COMBINE 0
#endif
#ifndef KILN_MOE_MINB
// CTAs per SM the registers are capped for: two for the streaming form up to 2 pairs
#define KILN_MOE_MINB (KILN_MOE_STREAM && KILN_MOE_MAXP <= 2 ? 2 : 1)
#endif
#define KILN_MOE_NW (KILN_MOE_GATED ? 2 : 1)
#define KILN_MOE_CAP (KILN_MOE_MMA ? 64 : KILN_MOE_MAXP)
static_assert(KILN_MOE_MMA || KILN_MOE_STREAM || (KILN_MOE_COLS % 8 == 0 && KILN_MOE_MAXP >= 1 && KILN_MOE_MAXP <= 32),
              "moe.cuh: GEMV columns a multiple of the 8 warps, at most 32 pairs");
static_assert(!KILN_MOE_STREAM || (!KILN_MOE_MMA && !KILN_MOE_GATED && KILN_MOE_MAXP >= 1 && KILN_MOE_MAXP <= 32),
              "moe.cuh: the streaming form takes one weight and at most 32 pairs");
static_assert(!KILN_MOE_MMA || KILN_MOE_COLS == 64, "moe.cuh: the mma tile is 64 x 64");
static_assert(!KILN_MOE_COMBINE || ((KILN_MOE_STREAM || KILN_MOE_MMA) && !KILN_MOE_GATED),
              "moe.cuh: the combine follows the streaming or the mma form of one weight");

namespace kmoe {

// Appends the pairs j >= *pos with idx[j] == e to list (in order) until it holds cap of
// them or the ids run out; *pos (shared) moves past the last pair taken. Every thread of
// the CTA calls it; returns the count (the same in every thread).
__device__ __forceinline__ int gather(const int *__restrict__ idx, long long P, int e, int *list, int cap,
                                      long long *pos, int *scratch)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int cnt = 0;
    __syncthreads();
    long long q = *pos;
    while (q < P && cnt < cap) {
        const long long j = q + tid;
        const bool hit = j < P && __ldg(idx + j) == e;
        const unsigned m = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) scratch[warp] = __popc(m);
        __syncthreads();
        int before = 0, total = 0;
#pragma unroll
        for (int w = 0; w < 8; w++) {
            const int c = scratch[w];
            before += w < warp ? c : 0;
            total += c;
        }
        const int rank = cnt + before + __popc(m & ((1u << lane) - 1u));
        if (hit && rank < cap) list[rank] = (int)j;
        long long next = q + 256;
        if (cnt + total > cap) { // the first hit not taken is where the next chunk starts
            if (hit && rank == cap) scratch[8] = tid;
            __syncthreads();
            next = q + scratch[8];
        }
        cnt = min(cnt + total, cap);
        q = next;
        __syncthreads();
    }
    if (tid == 0) *pos = q;
    __syncthreads();
    return cnt;
}

__device__ __forceinline__ float dot8(uint4 a, uint4 b)
{
    const kiln_t *x = reinterpret_cast<const kiln_t *>(&a);
    const kiln_t *y = reinterpret_cast<const kiln_t *>(&b);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) s += kiln_ld(x + i) * kiln_ld(y + i);
    return s;
}

// Stores pair j's column n from the accumulators of the NW weights.
__device__ __forceinline__ void store(const KilnArgs &p, long long j, long long n, const float *v)
{
#if KILN_MOE_GATED
    kiln_moe_store2(p, j, n, v[0], v[1]);
#elif KILN_MOE_COMBINE
    kiln_st(p.dw + j * p.N + n, kiln_moe_term(p, j, n, v[0]));
#else
    kiln_moe_store(p, j, n, v[0]);
#endif
}

#if KILN_MOE_COMBINE
// The combine of column block cb (cols columns): every token's terms in slot order.
__device__ __forceinline__ void combine(const KilnArgs &p, long long cb, int cols)
{
    const long long N = p.N, top = p.top, T = p.P / p.top, n0 = cb * cols;
    for (long long q = threadIdx.x; q < T * cols; q += blockDim.x) {
        const long long t = q / cols, n = n0 + q % cols;
        if (n >= N) continue;
        float s = 0.0f;
        for (long long k = 0; k < top; k++) {
            const long long j = t * top + k;
            const int e = __ldg(p.idx + j);
            if (e < 0 || e >= (int)p.E) continue;
            kiln_t v; // written by other CTAs of this grid: from L2
            *reinterpret_cast<unsigned short *>(&v) = __ldcg(reinterpret_cast<const unsigned short *>(p.dw + j * N + n));
            s += kiln_ld(&v);
        }
        kiln_moe_out(p, t, n, s);
    }
}

// This CTA's terms of column block cb are stored: count it; the CTA that brings the count
// to need runs the block's combine and puts the counter back to 0.
__device__ __forceinline__ void arrive(const KilnArgs &p, long long cb, int need, int cols, bool stored)
{
    __shared__ int last;
    if (stored) __threadfence(); // this thread's terms are visible to the grid before the count
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(p.sem + cb, 1) == need - 1;
        if (last) atomicExch(p.sem + cb, 0);
    }
    __syncthreads();
    if (last) {
        __threadfence();
        combine(p, cb, cols);
    }
    __syncthreads();
}
#endif

#if KILN_MOE_STREAM
// The streaming form (KILN_MOE_STREAM, header): the items of this CTA.
__device__ __forceinline__ void stream(const KilnArgs &p)
{
    constexpr int COLS = KILN_MOE_COLS, MAXP = KILN_MOE_MAXP, U = KILN_MOE_SU, STEP = 256 * 8;
    __shared__ int ex_id[32];
    __shared__ unsigned ex_mask[32];
    __shared__ int nexp_s;
    __shared__ int list[MAXP];
    __shared__ float red[8][MAXP * COLS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const long long P = p.P, N = p.N, K = p.K;
    const int E = (int)p.E;
    if (warp == 0) { // the distinct valid experts, in the order of their first pair
        const int e = lane < P ? __ldg(p.idx + lane) : -1;
        const bool valid = lane < P && e >= 0 && e < E;
        const unsigned same = __match_any_sync(0xffffffffu, valid ? e : -1);
        const bool first = valid && (__ffs(same) - 1) == lane;
        const unsigned firsts = __ballot_sync(0xffffffffu, first);
        if (first) {
            const int u = __popc(firsts & ((1u << lane) - 1u));
            ex_id[u] = e;
            ex_mask[u] = same;
        }
        if (lane == 0) nexp_s = __popc(firsts);
    }
    __syncthreads();
    const int nexp = nexp_s;
    const long long ncb = (N + COLS - 1) / COLS, items = nexp * ncb;
    const bool vec = (K % 8) == 0 && (p.ldx % 8) == 0 && (p.ldw % 8) == 0 && (p.sw % 8) == 0 &&
                     (reinterpret_cast<unsigned long long>(p.x) & 15) == 0 &&
                     (reinterpret_cast<unsigned long long>(p.w) & 15) == 0;
    for (long long t = blockIdx.x; t < items; t += gridDim.x) {
        const int u = (int)(t / ncb);
        const long long cb = t - (long long)u * ncb, n0 = cb * COLS;
        const int e = ex_id[u];
        unsigned mask = ex_mask[u];
        const int cnt = __popc(mask);
        const kiln_t *xr[MAXP];
#pragma unroll
        for (int i = 0; i < MAXP; i++) {
            const int j = mask ? __ffs(mask) - 1 : 0;
            if (i < cnt && tid == 0) list[i] = j;
            xr[i] = p.x + (p.xslot ? (long long)j : (long long)j / p.top) * p.ldx;
            if (mask) mask &= mask - 1u;
        }
        // row c of the item: wb + row(c) * ldw; rows past N re-read row N-1 (ignored)
        const long long ldw = p.ldw, last = N - 1 - n0;
        const kiln_t *const wb = p.w + (long long)e * p.sw + n0 * ldw;
auto row = [&](int c) -> long long { return (long long)(c < last ? c : last) * ldw; };
        float acc[MAXP][COLS];
#pragma unroll
        for (int i = 0; i < MAXP; i++)
#pragma unroll
            for (int c = 0; c < COLS; c++) acc[i][c] = 0.0f;
        if (vec) {
            long long k = (long long)tid * 8;
            for (; k + (long long)(U - 1) * STEP < K; k += (long long)U * STEP) {
                uint4 wv[U][COLS];
#pragma unroll
                for (int s = 0; s < U; s++)
#pragma unroll
                    for (int c = 0; c < COLS; c++) wv[s][c] = kgv_ld_stream(wb + row(c) + k + s * STEP);
#pragma unroll
                for (int s = 0; s < U; s++)
#pragma unroll
                    for (int i = 0; i < MAXP; i++) {
                        if (i >= cnt) break;
                        const uint4 xv = __ldg(reinterpret_cast<const uint4 *>(xr[i] + k + s * STEP));
#pragma unroll
                        for (int c = 0; c < COLS; c++) acc[i][c] += dot8(wv[s][c], xv);
                    }
            }
            for (; k < K; k += STEP) {
                uint4 wv[COLS];
#pragma unroll
                for (int c = 0; c < COLS; c++) wv[c] = kgv_ld_stream(wb + row(c) + k);
#pragma unroll
                for (int i = 0; i < MAXP; i++) {
                    if (i >= cnt) break;
                    const uint4 xv = __ldg(reinterpret_cast<const uint4 *>(xr[i] + k));
#pragma unroll
                    for (int c = 0; c < COLS; c++) acc[i][c] += dot8(wv[c], xv);
                }
            }
        } else {
            for (long long k = tid; k < K; k += 256) {
                float wv[COLS];
#pragma unroll
                for (int c = 0; c < COLS; c++) wv[c] = kiln_ld(wb + row(c) + k);
#pragma unroll
                for (int i = 0; i < MAXP; i++) {
                    if (i >= cnt) break;
                    const float xv = kiln_ld(xr[i] + k);
#pragma unroll
                    for (int c = 0; c < COLS; c++) acc[i][c] += wv[c] * xv;
                }
            }
        }
        if (t + gridDim.x >= items) kiln_pdl_launch(); // this CTA's last item: its weights are read
#pragma unroll
        for (int i = 0; i < MAXP; i++) {
            if (i >= cnt) break;
#pragma unroll
            for (int c = 0; c < COLS; c++) {
                const float v = kiln_warp_sum(acc[i][c]);
                if (lane == 0) red[warp][i * COLS + c] = v;
            }
        }
        __syncthreads();
        for (int q = tid; q < cnt * COLS; q += 256) {
            const long long n = n0 + q % COLS;
            float v = 0.0f;
#pragma unroll
            for (int w = 0; w < 8; w++) v += red[w][q];
            if (n < N) store(p, list[q / COLS], n, &v);
        }
#if KILN_MOE_COMBINE
        arrive(p, cb, nexp, COLS, tid < cnt * COLS); // ends with a barrier
#else
        __syncthreads(); // red and list are reused by the next item
#endif
    }
#if KILN_MOE_COMBINE
    if (nexp == 0) // no valid expert: every output is the combine of nothing
        for (long long cb = blockIdx.x; cb < ncb; cb += gridDim.x) combine(p, cb, COLS);
#endif
    kiln_pdl_launch();
}
#endif

} // namespace kmoe

extern "C" __global__ void __launch_bounds__(256, KILN_MOE_MINB) KILN_KERNEL(KilnArgs p)
{
    kiln_pdl_wait();
#if KILN_MOE_STREAM
    kmoe::stream(p);
#else
    __shared__ int list[KILN_MOE_CAP];
    __shared__ int scratch[9];
    __shared__ long long pos;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const long long P = p.P;
    const int E = (int)p.E;
    int e;
    bool run = true; // false: no pair of this CTA's expert, or an earlier CTA serves it
    if (P >= E) {
        e = blockIdx.y;
    } else {
        e = __ldg(p.idx + blockIdx.y);
        for (unsigned j = 0; j < blockIdx.y; j++)
            if (__ldg(p.idx + j) == e) run = false;
    }
    if (e < 0 || e >= E) run = false;
#if !KILN_MOE_COMBINE
    if (!run) return;
#endif
    if (tid == 0) pos = 0;
    const long long N = p.N, K = p.K;
    constexpr int NW = KILN_MOE_NW;
    const kiln_t *wb[NW];
    wb[0] = p.w + (long long)e * p.sw;
#if KILN_MOE_GATED
    wb[1] = p.w2 + (long long)e * p.sw;
    const bool w2_ok = (reinterpret_cast<unsigned long long>(p.w2) & 15) == 0;
#else
    const bool w2_ok = true;
#endif
    const bool vec = (K % 8) == 0 && (p.ldx % 8) == 0 && (p.ldw % 8) == 0 && (p.sw % 8) == 0 &&
                     (reinterpret_cast<unsigned long long>(p.x) & 15) == 0 &&
                     (reinterpret_cast<unsigned long long>(p.w) & 15) == 0 && w2_ok;
#if !KILN_MOE_MMA
    constexpr int CPW = KILN_MOE_COLS / 8; // weight rows per warp
    const long long n0 = (long long)blockIdx.x * KILN_MOE_COLS + warp * CPW;
    for (;;) {
        const int cnt = kmoe::gather(p.idx, P, e, list, KILN_MOE_CAP, &pos, scratch);
        kiln_pdl_launch();
        if (cnt == 0) return;
        const kiln_t *xr[KILN_MOE_MAXP];
#pragma unroll
        for (int i = 0; i < KILN_MOE_MAXP; i++) {
            const long long j = i < cnt ? list[i] : list[0];
            xr[i] = p.x + (p.xslot ? j : j / p.top) * p.ldx;
        }
        float acc[NW][CPW][KILN_MOE_MAXP];
#pragma unroll
        for (int q = 0; q < NW; q++)
#pragma unroll
            for (int c = 0; c < CPW; c++)
#pragma unroll
                for (int i = 0; i < KILN_MOE_MAXP; i++) acc[q][c][i] = 0.0f;
        if (vec) {
            for (long long k0 = (long long)lane * 8; k0 < K; k0 += 256LL * KILN_MOE_UNROLL) {
                uint4 wv[KILN_MOE_UNROLL][NW][CPW];
#pragma unroll
                for (int u = 0; u < KILN_MOE_UNROLL; u++)
#pragma unroll
                    for (int q = 0; q < NW; q++)
#pragma unroll
                        for (int c = 0; c < CPW; c++) {
                            const long long k = k0 + 256LL * u, n = n0 + c;
                            wv[u][q][c] = k < K && n < N
                                              ? __ldg(reinterpret_cast<const uint4 *>(wb[q] + n * p.ldw + k))
                                              : make_uint4(0, 0, 0, 0);
                        }
#pragma unroll
                for (int u = 0; u < KILN_MOE_UNROLL; u++) {
                    const long long k = k0 + 256LL * u;
                    if (k >= K) break;
#pragma unroll
                    for (int i = 0; i < KILN_MOE_MAXP; i++) {
                        if (i >= cnt) break;
                        const uint4 xv = __ldg(reinterpret_cast<const uint4 *>(xr[i] + k));
#pragma unroll
                        for (int q = 0; q < NW; q++)
#pragma unroll
                            for (int c = 0; c < CPW; c++) acc[q][c][i] += kmoe::dot8(wv[u][q][c], xv);
                    }
                }
            }
        } else {
            for (long long k = lane; k < K; k += 32)
#pragma unroll
                for (int q = 0; q < NW; q++)
#pragma unroll
                    for (int c = 0; c < CPW; c++) {
                        const long long n = n0 + c;
                        const float wv = n < N ? kiln_ld(wb[q] + n * p.ldw + k) : 0.0f;
#pragma unroll
                        for (int i = 0; i < KILN_MOE_MAXP; i++)
                            if (i < cnt) acc[q][c][i] += wv * kiln_ld(xr[i] + k);
                    }
        }
#pragma unroll
        for (int c = 0; c < CPW; c++)
#pragma unroll
            for (int i = 0; i < KILN_MOE_MAXP; i++) {
                if (i >= cnt) break;
                float v[NW];
#pragma unroll
                for (int q = 0; q < NW; q++) v[q] = kiln_warp_sum(acc[q][c][i]);
                if (lane == 0 && n0 + c < N) kmoe::store(p, list[i], n0 + c, v);
            }
        if (cnt < KILN_MOE_CAP) return;
    }
#else
    constexpr int BK = 32, LD = BK + 8;
    __shared__ __align__(16) kiln_t As[64][LD];
    __shared__ __align__(16) kiln_t Bs[NW][64][LD];
    const int wm = warp >> 2, wn = warp & 3, g = lane >> 2, t = lane & 3;
    const long long n0 = (long long)blockIdx.x * 64;
    const int lr = tid >> 2, lk = (tid & 3) * 8; // the 16 bytes this thread loads of each tile
    while (run) {
        const int cnt = kmoe::gather(p.idx, P, e, list, 64, &pos, scratch);
        if (cnt == 0) break;
        const kiln_t *xrow = NULL;
        if (lr < cnt) {
            const long long j = list[lr];
            xrow = p.x + (p.xslot ? j : j / p.top) * p.ldx;
        }
        const kiln_t *wrow[NW];
#pragma unroll
        for (int q = 0; q < NW; q++) wrow[q] = n0 + lr < N ? wb[q] + (n0 + lr) * p.ldw : NULL;
        float acc[NW][2][2][4];
#pragma unroll
        for (int q = 0; q < NW; q++)
#pragma unroll
            for (int a = 0; a < 2; a++)
#pragma unroll
                for (int b = 0; b < 2; b++)
#pragma unroll
                    for (int c = 0; c < 4; c++) acc[q][a][b][c] = 0.0f;
        auto load = [&](const kiln_t *r, long long k) -> uint4 {
            if (!r) return make_uint4(0, 0, 0, 0);
            if (vec) return k < K ? __ldg(reinterpret_cast<const uint4 *>(r + k)) : make_uint4(0, 0, 0, 0);
            uint4 v;
            kiln_t *h = reinterpret_cast<kiln_t *>(&v);
#pragma unroll
            for (int i = 0; i < 8; i++) kiln_st(h + i, k + i < K ? kiln_ld(r + k + i) : 0.0f);
            return v;
        };
        uint4 ra = load(xrow, lk), rb[NW];
#pragma unroll
        for (int q = 0; q < NW; q++) rb[q] = load(wrow[q], lk);
        for (long long k0 = 0; k0 < K; k0 += BK) {
            *reinterpret_cast<uint4 *>(&As[lr][lk]) = ra;
#pragma unroll
            for (int q = 0; q < NW; q++) *reinterpret_cast<uint4 *>(&Bs[q][lr][lk]) = rb[q];
            __syncthreads();
            if (k0 + BK < K) {
                ra = load(xrow, k0 + BK + lk);
#pragma unroll
                for (int q = 0; q < NW; q++) rb[q] = load(wrow[q], k0 + BK + lk);
            }
#pragma unroll
            for (int kb = 0; kb < BK; kb += 16) {
                unsigned af[2][4], bf[NW][2][2];
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    const int r0 = wm * 32 + mi * 16 + g;
                    af[mi][0] = *reinterpret_cast<const unsigned *>(&As[r0][kb + 2 * t]);
                    af[mi][1] = *reinterpret_cast<const unsigned *>(&As[r0 + 8][kb + 2 * t]);
                    af[mi][2] = *reinterpret_cast<const unsigned *>(&As[r0][kb + 2 * t + 8]);
                    af[mi][3] = *reinterpret_cast<const unsigned *>(&As[r0 + 8][kb + 2 * t + 8]);
                }
#pragma unroll
                for (int q = 0; q < NW; q++)
#pragma unroll
                    for (int ni = 0; ni < 2; ni++) {
                        const int c0 = wn * 16 + ni * 8 + g;
                        bf[q][ni][0] = *reinterpret_cast<const unsigned *>(&Bs[q][c0][kb + 2 * t]);
                        bf[q][ni][1] = *reinterpret_cast<const unsigned *>(&Bs[q][c0][kb + 2 * t + 8]);
                    }
#pragma unroll
                for (int q = 0; q < NW; q++)
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int ni = 0; ni < 2; ni++) {
                        float *d = acc[q][mi][ni];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
                        asm volatile(
#ifdef KILN_MOE_F16
                            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#else
                            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#endif
                            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                            : "r"(af[mi][0]), "r"(af[mi][1]), "r"(af[mi][2]), "r"(af[mi][3]), "r"(bf[q][ni][0]),
                              "r"(bf[q][ni][1]));
#endif
                    }
            }
            __syncthreads();
        }
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int ni = 0; ni < 2; ni++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = wm * 32 + mi * 16 + g + 8 * h;
                    const long long n = n0 + wn * 16 + ni * 8 + 2 * t;
                    if (r >= cnt) continue;
                    const long long j = list[r];
                    float v0[NW], v1[NW];
#pragma unroll
                    for (int q = 0; q < NW; q++) v0[q] = acc[q][mi][ni][2 * h], v1[q] = acc[q][mi][ni][2 * h + 1];
                    if (n < N) kmoe::store(p, j, n, v0);
                    if (n + 1 < N) kmoe::store(p, j, n + 1, v1);
                }
        if (cnt < 64) break;
    }
    kiln_pdl_launch();
#if KILN_MOE_COMBINE
    kmoe::arrive(p, blockIdx.x, (int)gridDim.y, 64, true); // every CTA of grid column x counts once
#endif
#endif
#endif // KILN_MOE_STREAM
}

#endif // KILN_MOE_ROUTER
#endif
