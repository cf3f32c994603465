// codegen/kernels/sample.cuh — token sampling over the LM head's logits.
//
// Two kernels, each taking one SampleArgs by value (runtime/rt_sample.c):
//   kiln_sample_partial  grid (nct, rows), 256 threads, chunk floats of dynamic
//                        shared memory: CTA c of row r takes logits
//                        [c * chunk, (c + 1) * chunk) of the row and writes its
//                        K best (value, index), best first, to the candidate
//                        workspace [rows, nct, K].
//   kiln_sample_combine  grid (rows), 256 threads, nct * K candidates in dynamic
//                        shared memory: the row's K best overall, then
//                          temperature <= 0: the best one (greedy);
//                          else softmax(v / temperature) over the K candidates,
//                          cut to the smallest best-first prefix whose mass is at
//                          least top_p of theirs (top-p over the top-K set), and
//                          one draw from it with the row's random stream.
//                        A forced token (force[r, step[r]] while step[r] <
//                        force_len[r]: the rest of a longer prompt, or teacher
//                        forcing) replaces the draw. The token goes to out[r]
//                        (the next step's input ids) and hist[r * hist_cap +
//                        step[r]]; step[r], rng[r] (when it drew) and pos[r] (by
//                        pos_add) advance in device memory, so a decode step needs
//                        no host copy and a CUDA-graph replay of these launches
//                        samples the next token with the next random number.
//   kiln_sample_head     the LM head and the sampler in one kernel: grid (nct),
//                        256 threads, rows * chunk floats of dynamic shared
//                        memory. CTA c computes the logits of tokens
//                        [c * chunk, (c + 1) * chunk) for every row (a GEMV over
//                        its slice of the head's weight with 16-byte loads, each
//                        logit rounded to bf16 as the model's linear rounds it),
//                        writes them to logits only when that is given (else the
//                        logits never reach HBM), and its K best per row to the
//                        candidate workspace; the last CTA to finish (an atomic
//                        counter) merges the rows' nct sorted lists (a warp per
//                        row) and picks each row's token as the combine does.
// Ties between equal logits go to the lower token id (as argmax does).
// Header-free: bf16 logits are read as raw 16-bit patterns.

struct SampleArgs {
    unsigned long long logits;   // bf16 [rows, ld]
    unsigned long long cand_val; // float [rows, nct, K]
    unsigned long long cand_idx; // int   [rows, nct, K]
    unsigned long long out;      // int   [rows]
    unsigned long long hist;     // int   [rows, hist_cap] (0: none)
    unsigned long long step;     // int   [rows]
    unsigned long long rng;      // unsigned long long [rows]: draws made so far
    unsigned long long pos;      // int [rows]: positions advanced by pos_add (0: none)
    unsigned long long force;    // int [rows, force_cap]: tokens to emit instead of sampling (0: none)
    unsigned long long force_len; // int [rows]: step s of row r emits force[r, s] while s < force_len[r]
    unsigned long long seed;
    long long vocab, ld;
    int rows, nct, k, chunk;
    float temperature, top_p;
    int hist_cap, pos_add, force_cap, pad_;
    // kiln_sample_head only
    unsigned long long hidden;   // bf16 [rows, dmodel]: the LM head's input
    unsigned long long weight;   // bf16 [vocab, dmodel]: the LM head ([out, in])
    unsigned long long counter;  // int: CTAs done (left at 0 by the last one)
    long long dmodel;
};

#define KILN_SAMPLE_THREADS 256
#define KILN_NEG_INF (__int_as_float(0xff800000))

__device__ __forceinline__ float kiln_bf16_to_float(unsigned short h) { return __int_as_float(((unsigned)h) << 16); }

__device__ __forceinline__ bool kiln_better(float av, int ai, float bv, int bi)
{
    return av > bv || (av == bv && (unsigned)ai < (unsigned)bi);
}

// The block's best (value, index) among v[0..n): every thread gets it.
__device__ void kiln_block_best(const float *v, int n, int base, float *rv, int *ri, float *sv, int *si)
{
    float bv = KILN_NEG_INF;
    int bi = -1;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (kiln_better(v[i], base + i, bv, bi)) {
            bv = v[i];
            bi = base + i;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_down_sync(0xffffffffu, bv, o);
        int oi = __shfl_down_sync(0xffffffffu, bi, o);
        if (kiln_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        sv[w] = bv;
        si[w] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int j = 1; j < (int)(blockDim.x >> 5); j++)
            if (kiln_better(sv[j], si[j], sv[0], si[0])) {
                sv[0] = sv[j];
                si[0] = si[j];
            }
    }
    __syncthreads();
    *rv = sv[0];
    *ri = si[0];
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(KILN_SAMPLE_THREADS) kiln_sample_partial(SampleArgs a)
{
    extern __shared__ float kiln_sbuf[];
    __shared__ float sv[32];
    __shared__ int si[32];
    int row = blockIdx.y, c = blockIdx.x;
    long long begin = (long long)c * a.chunk;
    long long end = begin + a.chunk < a.vocab ? begin + a.chunk : a.vocab;
    int n = begin < end ? (int)(end - begin) : 0;
    const unsigned short *lg = (const unsigned short *)a.logits + (long long)row * a.ld + begin;
    for (int i = threadIdx.x; i < n; i += blockDim.x) kiln_sbuf[i] = kiln_bf16_to_float(lg[i]);
    __syncthreads();
    float *ov = (float *)a.cand_val + ((long long)row * a.nct + c) * a.k;
    int *oi = (int *)a.cand_idx + ((long long)row * a.nct + c) * a.k;
    for (int r = 0; r < a.k; r++) {
        float bv;
        int bi;
        kiln_block_best(kiln_sbuf, n, (int)begin, &bv, &bi, sv, si);
        if (threadIdx.x == 0) {
            ov[r] = bv;
            oi[r] = bi;
            if (bi >= 0) kiln_sbuf[bi - (int)begin] = KILN_NEG_INF;
        }
        __syncthreads();
    }
}

__device__ __forceinline__ unsigned long long kiln_mix64(unsigned long long z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// The token of row `row` from its kk best candidates (top_v/top_i, best
// first): the forced token, the best one (greedy) or a draw; then the history,
// the step, the random state and the position advance. One thread.
__device__ void kiln_sample_finish(const SampleArgs &a, int row, const float *top_v, const int *top_i, int kk)
{
    int *step = (int *)a.step;
    int s = step[row];
    int tok = top_i[0];
    bool forced = a.force && s < ((const int *)a.force_len)[row];
    if (forced) {
        tok = ((const int *)a.force)[(long long)row * a.force_cap + s];
    } else if (a.temperature > 0.0f) {
        unsigned long long *rng = (unsigned long long *)a.rng;
        unsigned long long draw = rng[row];
        rng[row] = draw + 1;
        unsigned long long bits = kiln_mix64(a.seed ^ kiln_mix64(((unsigned long long)row << 40) ^ draw));
        double u = (double)(bits >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
        float m = top_v[0];
        float p[64];
        double total = 0;
        int valid = 0;
        for (int r = 0; r < kk; r++) {
            if (top_i[r] < 0 || !(top_v[r] > KILN_NEG_INF)) break;
            p[r] = __expf((top_v[r] - m) / a.temperature);
            total += p[r];
            valid++;
        }
        // top-p: the smallest best-first prefix holding at least top_p of the mass
        double keep = 0, limit = (a.top_p > 0.0f && a.top_p < 1.0f ? (double)a.top_p : 1.0) * total;
        int nk = 0;
        while (nk < valid) {
            keep += p[nk++];
            if (keep >= limit) break;
        }
        double target = u * keep, acc = 0;
        tok = top_i[nk - 1];
        for (int r = 0; r < nk; r++) {
            acc += p[r];
            if (target < acc) {
                tok = top_i[r];
                break;
            }
        }
    }
    ((int *)a.out)[row] = tok;
    if (a.hist && s < a.hist_cap) ((int *)a.hist)[(long long)row * a.hist_cap + s] = tok;
    step[row] = s + 1;
    if (a.pos) ((int *)a.pos)[row] += a.pos_add;
}

extern "C" __global__ void __launch_bounds__(KILN_SAMPLE_THREADS) kiln_sample_combine(SampleArgs a)
{
    extern __shared__ float kiln_sbuf[];
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ float top_v[64];
    __shared__ int top_i[64];
    int row = blockIdx.x, n = a.nct * a.k;
    float *cv = kiln_sbuf;
    int *ci = (int *)(kiln_sbuf + n);
    const float *gv = (const float *)a.cand_val + (long long)row * n;
    const int *gi = (const int *)a.cand_idx + (long long)row * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        cv[i] = gv[i];
        ci[i] = gi[i];
    }
    __syncthreads();
    int kk = a.temperature > 0.0f ? a.k : 1;
    for (int r = 0; r < kk; r++) {
        // the best candidate by (value, token id): index into cv through the position
        float bv = KILN_NEG_INF;
        int bt = -1, bp = -1;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            if (ci[i] < 0) continue;
            if (bp < 0 || kiln_better(cv[i], ci[i], bv, bt)) {
                bv = cv[i];
                bt = ci[i];
                bp = i;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_down_sync(0xffffffffu, bv, o);
            int ot = __shfl_down_sync(0xffffffffu, bt, o);
            int op = __shfl_down_sync(0xffffffffu, bp, o);
            if (op >= 0 && (bp < 0 || kiln_better(ov, ot, bv, bt))) {
                bv = ov;
                bt = ot;
                bp = op;
            }
        }
        int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
        __shared__ int sp[32];
        if (lane == 0) {
            sv[w] = bv;
            si[w] = bt;
            sp[w] = bp;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int j = 1; j < (int)(blockDim.x >> 5); j++)
                if (sp[j] >= 0 && (sp[0] < 0 || kiln_better(sv[j], si[j], sv[0], si[0]))) {
                    sv[0] = sv[j];
                    si[0] = si[j];
                    sp[0] = sp[j];
                }
            top_v[r] = sv[0];
            top_i[r] = si[0];
            if (sp[0] >= 0) ci[sp[0]] = -1; // taken
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) kiln_sample_finish(a, row, top_v, top_i, kk);
}

#define KILN_HEAD_WARPS (KILN_SAMPLE_THREADS / 32)
#define KILN_HEAD_MAX_NCT 512
#define KILN_HEAD_ROWS_AT_ONCE 4

__device__ __forceinline__ float kiln_dot8(uint4 w, uint4 h)
{
    const unsigned *wp = (const unsigned *)&w, *hp = (const unsigned *)&h;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        s = fmaf(__int_as_float(wp[j] << 16), __int_as_float(hp[j] << 16), s);
        s = fmaf(__int_as_float(wp[j] & 0xffff0000u), __int_as_float(hp[j] & 0xffff0000u), s);
    }
    return s;
}

// f rounded to the nearest bf16 (ties to even), as a float and as its bits.
__device__ __forceinline__ float kiln_round_bf16(float f, unsigned short *bits)
{
    unsigned u = __float_as_uint(f);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    *bits = (unsigned short)(u >> 16);
    return __uint_as_float(u);
}

// The warp's best (value, id, owner lane) of the lanes' (v, i); every lane gets it.
__device__ __forceinline__ void kiln_warp_best(float &v, int &i, int &who)
{
    who = threadIdx.x & 31;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, i, o);
        int ow = __shfl_xor_sync(0xffffffffu, who, o);
        bool take = oi >= 0 && (i < 0 || kiln_better(ov, oi, v, i) || (ov == v && oi == i && ow < who));
        if (take) {
            v = ov;
            i = oi;
            who = ow;
        }
    }
}

// This lane's best not yet taken among s[lane], s[lane + 32], ... (-inf: taken).
__device__ __forceinline__ void kiln_lane_best(const float *s, int n, int base, float &v, int &i)
{
    v = KILN_NEG_INF;
    i = -1;
    for (int j = threadIdx.x & 31; j < n; j += 32)
        if (s[j] > KILN_NEG_INF && (i < 0 || kiln_better(s[j], base + j, v, i))) {
            v = s[j];
            i = base + j;
        }
}

extern "C" __global__ void __launch_bounds__(KILN_SAMPLE_THREADS) kiln_sample_head(SampleArgs a)
{
    extern __shared__ float kiln_sbuf[]; // [rows][chunk] logits of this CTA's tokens
    __shared__ int heads[KILN_HEAD_WARPS][KILN_HEAD_MAX_NCT];
    __shared__ float top_v[KILN_HEAD_WARPS][64];
    __shared__ int top_i[KILN_HEAD_WARPS][64];
    __shared__ int last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, c = blockIdx.x;
    const long long begin = (long long)c * a.chunk;
    const int n = (int)(begin + a.chunk < a.vocab ? a.chunk : a.vocab - begin);
    const int d8 = (int)(a.dmodel / 8);
    const uint4 *hid = (const uint4 *)a.hidden;
    // 1. the logits: warp w takes tokens w, w + 8, ... of the slice
    for (int t = warp; t < n; t += KILN_HEAD_WARPS) {
        const uint4 *wr = (const uint4 *)a.weight + (begin + t) * d8;
        for (int r0 = 0; r0 < a.rows; r0 += KILN_HEAD_ROWS_AT_ONCE) {
            float acc[KILN_HEAD_ROWS_AT_ONCE] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int i = lane; i < d8; i += 32) {
                uint4 w = __ldg(wr + i);
#pragma unroll
                for (int rr = 0; rr < KILN_HEAD_ROWS_AT_ONCE; rr++)
                    if (r0 + rr < a.rows) acc[rr] += kiln_dot8(w, __ldg(hid + (long long)(r0 + rr) * d8 + i));
            }
#pragma unroll
            for (int rr = 0; rr < KILN_HEAD_ROWS_AT_ONCE; rr++) {
                float v = acc[rr];
                for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                if (lane == 0 && r0 + rr < a.rows) {
                    unsigned short bits;
                    kiln_sbuf[(r0 + rr) * a.chunk + t] = kiln_round_bf16(v, &bits);
                }
            }
        }
    }
    __syncthreads();
    if (a.logits) // asked for: the bf16 logits [rows, ld]
        for (int r = 0; r < a.rows; r++)
            for (int t = threadIdx.x; t < n; t += blockDim.x) {
                unsigned short bits;
                kiln_round_bf16(kiln_sbuf[r * a.chunk + t], &bits);
                ((unsigned short *)a.logits)[(long long)r * a.ld + begin + t] = bits;
            }
    __syncthreads();
    // 2. this CTA's K best per row, best first: a warp per row
    for (int r = warp; r < a.rows; r += KILN_HEAD_WARPS) {
        float *s = kiln_sbuf + r * a.chunk;
        float *ov = (float *)a.cand_val + ((long long)r * a.nct + c) * a.k;
        int *oi = (int *)a.cand_idx + ((long long)r * a.nct + c) * a.k;
        float v;
        int i, who;
        kiln_lane_best(s, n, (int)begin, v, i);
        for (int q = 0; q < a.k; q++) {
            float bv = v;
            int bi = i;
            kiln_warp_best(bv, bi, who);
            if (lane == 0) {
                ov[q] = bi >= 0 ? bv : KILN_NEG_INF;
                oi[q] = bi;
            }
            if (bi < 0) continue;
            if (lane == who) {
                s[bi - (int)begin] = KILN_NEG_INF;
                kiln_lane_best(s, n, (int)begin, v, i);
            }
            __syncwarp();
        }
    }
    // 3. the last CTA merges every row's nct lists and samples
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd((int *)a.counter, 1) == a.nct - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int r = warp; r < a.rows; r += KILN_HEAD_WARPS) {
        const float *cv = (const float *)a.cand_val + (long long)r * a.nct * a.k;
        const int *ci = (const int *)a.cand_idx + (long long)r * a.nct * a.k;
        int *hd = heads[warp];
        for (int l = lane; l < a.nct; l += 32) hd[l] = 0;
        __syncwarp();
        // this lane's best list head among lists lane, lane + 32, ...
        float v = KILN_NEG_INF;
        int i = -1, lst = -1;
        for (int l = lane; l < a.nct; l += 32) {
            int j = __ldcg(ci + (long long)l * a.k);
            float x = __ldcg(cv + (long long)l * a.k);
            if (j >= 0 && (i < 0 || kiln_better(x, j, v, i))) {
                v = x;
                i = j;
                lst = l;
            }
        }
        for (int q = 0; q < a.k; q++) {
            float bv = v;
            int bi = i, who;
            kiln_warp_best(bv, bi, who);
            if (lane == 0) {
                top_v[warp][q] = bi >= 0 ? bv : KILN_NEG_INF;
                top_i[warp][q] = bi;
            }
            if (bi >= 0 && lane == who) {
                hd[lst]++;
                v = KILN_NEG_INF;
                i = -1;
                lst = -1;
                for (int l = lane; l < a.nct; l += 32) {
                    if (hd[l] >= a.k) continue;
                    long long at = (long long)l * a.k + hd[l];
                    int j = __ldcg(ci + at);
                    float x = __ldcg(cv + at);
                    if (j >= 0 && (i < 0 || kiln_better(x, j, v, i))) {
                        v = x;
                        i = j;
                        lst = l;
                    }
                }
            }
            __syncwarp();
        }
        __syncwarp();
        if (lane == 0) kiln_sample_finish(a, r, top_v[warp], top_i[warp], a.k);
        __syncwarp();
    }
    __syncthreads();
    if (threadIdx.x == 0) *(int *)a.counter = 0;
}
