// bench/graph/graph_gap.cu — what a CUDA graph replay costs around its kernels (issue 11's
// bubble row): a graph of NK kernels that each spin for a given time is replayed back to back,
// and every kernel's first and last CTA stamp %globaltimer. From the stamps: the gap between
// consecutive kernels inside a replay, and the gap from the last kernel of replay i to the first
// kernel of replay i+1 (the graph's head + tail), for several ways of launching:
//   events   a CUDA event recorded before every replay (as `kiln run --profile` and bench.py do)
//   none     replays back to back, no events between
//   upload   cudaGraphUpload before the first replay, no events
//   pdl      the kernels captured with programmatic stream serialization (PDL edges)
//   one      a graph of one kernel spinning NK times as long
// Usage: graph_gap [NK=5] [spin_us=8] [replays=200]. Prints medians in microseconds.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

__device__ __forceinline__ unsigned long long gt()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// stamps[2*slot] = earliest start over CTAs, stamps[2*slot+1] = latest end
__global__ void spin(unsigned long long *stamps, int slot, unsigned ns, int pdl)
{
    unsigned long long t0 = gt();
    if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x == 0) atomicMin(&stamps[2 * slot], t0);
    while (gt() - t0 < ns) {
    }
    if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&stamps[2 * slot + 1], gt());
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv)
{
    int nk = argc > 1 ? atoi(argv[1]) : 5;
    double spin_us = argc > 2 ? atof(argv[2]) : 8;
    int reps = argc > 3 ? atoi(argv[3]) : 200;
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const char *modes[] = {"events", "none", "upload", "pdl", "one"};
    printf("graph_gap: %d kernels of %.1f us, %d CTAs each, %d replays\n", nk, spin_us, sms, reps);
    printf("%-8s %12s %12s %12s %12s\n", "mode", "replay", "head+tail", "in-graph gap", "event wall");
    for (int m = 0; m < 5; m++) {
        const bool pdl = m == 3, one = m == 4;
        const int kn = one ? 1 : nk;
        unsigned long long *st;
        const size_t nst = (size_t)reps * kn * 2;
        CK(cudaMalloc(&st, nst * sizeof *st));
        std::vector<unsigned long long> init(nst);
        for (size_t i = 0; i < nst; i += 2) init[i] = ~0ull, init[i + 1] = 0;
        CK(cudaMemcpy(st, init.data(), nst * sizeof *st, cudaMemcpyHostToDevice));
        // each replay its own exec (the same kernels writing their own stamp slots), made up front
        std::vector<cudaGraphExec_t> ex(reps);
        for (int r = 0; r < reps; r++) {
            cudaGraph_t g;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int k = 0; k < kn; k++) {
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(sms);
                cfg.blockDim = dim3(128);
                cfg.stream = s;
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                at[0].val.programmaticStreamSerializationAllowed = 1;
                cfg.attrs = at;
                cfg.numAttrs = pdl && k > 0 ? 1 : 0;
                unsigned ns = (unsigned)(spin_us * 1000 * (one ? nk : 1));
                CK(cudaLaunchKernelEx(&cfg, spin, st + (size_t)r * kn * 2, k, ns, (int)pdl));
            }
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ex[r], g, 0));
            CK(cudaGraphDestroy(g));
            if (m == 2) CK(cudaGraphUpload(ex[r], s));
        }
        CK(cudaStreamSynchronize(s));
        std::vector<cudaEvent_t> ev(reps + 1);
        for (auto &e : ev) CK(cudaEventCreate(&e));
        for (int r = 0; r < reps; r++) {
            if (m == 0) CK(cudaEventRecord(ev[r], s));
            CK(cudaGraphLaunch(ex[r], s));
        }
        if (m == 0) CK(cudaEventRecord(ev[reps], s));
        CK(cudaStreamSynchronize(s));
        std::vector<unsigned long long> h(nst);
        CK(cudaMemcpy(h.data(), st, nst * sizeof *st, cudaMemcpyDeviceToHost));
        std::vector<double> replay, head, gap, wall;
        for (int r = 10; r < reps; r++) {
            const unsigned long long *a = &h[(size_t)r * kn * 2], *p = &h[(size_t)(r - 1) * kn * 2];
            replay.push_back((a[2 * kn - 1] - p[2 * kn - 1]) / 1e3);
            head.push_back(((double)a[0] - (double)p[2 * kn - 1]) / 1e3);
            for (int k = 1; k < kn; k++) gap.push_back(((double)a[2 * k] - (double)a[2 * k - 1]) / 1e3);
            if (m == 0) {
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
                wall.push_back(ms * 1e3);
            }
        }
        printf("%-8s %12.2f %12.2f %12.2f %12.2f\n", modes[m], median(replay), median(head), median(gap),
               m == 0 ? median(wall) : 0.0);
        for (auto &e : ev) CK(cudaEventDestroy(e));
        for (auto &x : ex) CK(cudaGraphExecDestroy(x));
        CK(cudaFree(st));
    }
    return 0;
}
