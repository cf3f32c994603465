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
    if (threadIdx.x != 0) return;
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
