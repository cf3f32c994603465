// bench/row/row_main.cu — times one generated row kernel (row.cuh) standalone: included after
// the kernel's generated .cu (-DKFILE), it launches it over `rows` rows on fresh random bf16
// inputs rotated over enough copies that each launch reads from HBM, and writes the output's
// checksum so that variants of one kernel can be compared bit for bit. Built by
// bench/row/build.sh; run by bench/row/device.sh.
#include KFILE
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
int main(int argc, char **argv)
{
    const long long rows = argc > 1 ? atoll(argv[1]) : 16384, d = argc > 2 ? atoll(argv[2]) : 4096;
    const int misalign = argc > 3 ? atoi(argv[3]) : 0; // elements added to every pointer
    const long long n = rows * d;
    int copies = (int)std::max(1LL, (256LL << 20) / (4 * n) + 1);
    std::vector<unsigned short> h(n + 8);
    unsigned s = 12345;
    for (auto &v : h) { s = s * 1664525u + 1013904223u; v = (unsigned short)(0x3c00 + ((s >> 16) & 0x3ff)) ^ ((s & 1) << 15); }
    std::vector<unsigned short> g(d + 8);
    for (auto &v : g) { s = s * 1664525u + 1013904223u; v = (unsigned short)(0x3f00 + ((s >> 16) & 0xff)); }
    std::vector<__nv_bfloat16 *> in(copies), out(copies);
    __nv_bfloat16 *gain;
    for (int c = 0; c < copies; c++) {
        CK(cudaMalloc(&in[c], (n + 8) * 2));
        CK(cudaMalloc(&out[c], (n + 8) * 2));
        CK(cudaMemcpy(in[c], h.data(), (n + 8) * 2, cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc(&gain, (d + 8) * 2));
    CK(cudaMemcpy(gain, g.data(), (d + 8) * 2, cudaMemcpyHostToDevice));
    auto args = [&](int c) {
        KilnArgs a;
        a.rows = rows;
        a.d = d;
#ifdef GAIN
        a.ARG_IN = in[c] + misalign; a.ARG_GAIN = gain + misalign; a.ARG_OUT = out[c] + misalign;
#else
        a.ARG_IN = in[c] + misalign; a.ARG_OUT = out[c] + misalign;
#endif
        return a;
    };
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int it = 0; it < 60; it++) {
        KilnArgs a = args(it % copies);
        CK(cudaEventRecord(e0));
        KILN_KERNEL<<<(unsigned)rows, KILN_ROW_THREADS>>>(a);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= 10) t.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    std::vector<unsigned short> o(n);
    CK(cudaMemcpy(o.data(), out[0] + misalign, n * 2, cudaMemcpyDeviceToHost));
    unsigned long long sum = 1469598103934665603ull;
    for (auto v : o) sum = (sum ^ v) * 1099511628211ull;
    const double bytes = 2.0 * n * 2;
    printf("rows %lld d %lld misalign %d threads %d items %d vec %d: median %.2f us p10 %.2f p90 %.2f, %.2f TB/s, out %016llx\n",
           rows, d, misalign, KILN_ROW_THREADS, KILN_ROW_ITEMS, KILN_ROW_VEC, t[t.size() / 2], t[t.size() / 10],
           t[t.size() * 9 / 10], bytes / (t[t.size() / 2] * 1e-6) / 1e12, sum);
    return 0;
}
