// codegen/kernels/row.cuh — one CTA of KILN_ROW_THREADS threads per row of
// p.d elements (the last axis), p.rows rows: norms, softmax, last-axis
// reductions, with the group's prologue and epilogue in the generated hooks
// (CONTRACT.md, family `row`):
//   float kiln_row_in<AL>(p, row, i)             the row's input element
//   void  kiln_row_pre<AL, V>(p, row, i0, xv)    store prologue values needed outside
//   void  kiln_row_out<AL, V>(p, row, i0, vv, xv) apply the epilogue to v and store
//   bool  kiln_row_aligned(p)                    every pointer they use is 16-byte aligned
// (pre and out take a group of V consecutive elements from i0: xv[j] the input, vv[j] v.)
// All math in float32. Thread t handles elements i = k * THREADS + t
// (coalesced). With KILN_ROW_ITEMS > 0 (d known and <= ITEMS * THREADS) the
// row stays in registers between passes; otherwise each pass calls
// kiln_row_in again, and kiln_row_pre runs in the last pass, so that every
// element is read before the same thread writes it (outputs may alias inputs).
//
// With KILN_ROW_VEC = V > 1 a thread's elements come in groups of V consecutive ones
// (i = (g * THREADS + t) * V + j) when every pointer the hooks use is 16-byte aligned
// (kiln_row_aligned(p)) and V divides p.d: the hooks, instantiated with AL = 16, see their
// pointers as aligned (kiln_al, common.cuh), so the compiler merges a group's element loads
// and stores into vector ones (16 bytes for V bf16 elements at V = 8) where the index
// arithmetic shows them consecutive. Otherwise (AL = 0) V is 1: i = k * THREADS + t.
//
// Statistics: rmsnorm sum of squares; layernorm two passes (mean, then the
// sum of squared deviations: no cancellation); softmax max, then the sum of
// exp(x - max). Launch: grid p.rows, block KILN_ROW_THREADS.
#ifndef KILN_ROW_ITEMS
#define KILN_ROW_ITEMS 0
#endif
#ifndef KILN_ROW_ELEMOUT
#define KILN_ROW_ELEMOUT 1
#endif

#ifndef KILN_ROW_VEC
#define KILN_ROW_VEC 1
#endif
#if KILN_ROW_ITEMS > 0 && KILN_ROW_ITEMS % KILN_ROW_VEC != 0
#error "row.cuh: KILN_ROW_VEC must divide KILN_ROW_ITEMS"
#endif

// Visit this thread's elements of the row in groups of V (constexpr in the body): BODY sees
// `i` and, with a register cache, `xs[k]`. A group is whole or absent (V divides d).
#if KILN_ROW_ITEMS > 0
#define KILN_ROW_FOR(BODY)                                                            \
    _Pragma("unroll") for (int g = 0; g < KILN_ROW_ITEMS / V; g++)                    \
    {                                                                                 \
        const long long i0 = ((long long)g * KILN_ROW_THREADS + threadIdx.x) * V;     \
        if (i0 < d) {                                                                 \
            _Pragma("unroll") for (int j = 0; j < V; j++)                             \
            {                                                                         \
                const int k = g * V + j;                                              \
                const long long i = i0 + j;                                           \
                (void)k;                                                              \
                (void)i;                                                              \
                BODY                                                                  \
            }                                                                         \
        }                                                                             \
    }
#define KILN_ROW_X(k, i) xs[k]
// The groups of this thread's elements for the last pass: __VA_ARGS__ sees i0 (its first index)
// and KILN_ROW_LOAD(xv) fills xv[V] with the group's inputs (from the register cache).
#define KILN_ROW_GROUPS(...)                                                          \
    _Pragma("unroll") for (int g = 0; g < KILN_ROW_ITEMS / V; g++)                    \
    {                                                                                 \
        const long long i0 = ((long long)g * KILN_ROW_THREADS + threadIdx.x) * V;     \
        if (i0 < d) {                                                                 \
            __VA_ARGS__                                                               \
        }                                                                             \
    }
#define KILN_ROW_LOAD(xv) _Pragma("unroll") for (int j = 0; j < V; j++) xv[j] = xs[g * V + j]
#else
#define KILN_ROW_FOR(BODY)                                                                        \
    for (long long i0 = (long long)threadIdx.x * V; i0 < d; i0 += (long long)KILN_ROW_THREADS * V) \
        _Pragma("unroll") for (int j = 0; j < V; j++)                                             \
        {                                                                                         \
            const long long i = i0 + j;                                                           \
            BODY                                                                                  \
        }
#define KILN_ROW_X(k, i) kiln_row_in<AL>(p, row, i)
#define KILN_ROW_GROUPS(...)                                                                      \
    for (long long i0 = (long long)threadIdx.x * V; i0 < d; i0 += (long long)KILN_ROW_THREADS * V) { \
        __VA_ARGS__                                                                               \
    }
#define KILN_ROW_LOAD(xv) _Pragma("unroll") for (int j = 0; j < V; j++) xv[j] = kiln_row_in<AL>(p, row, i0 + j)
#endif
// The last pass: per group, v = EXPR (of x, the element) for each element, then the group's
// prologue stores (kiln_row_pre) and epilogue (kiln_row_out), each of which loads what it
// needs for the whole group before it stores it (the compiler may merge the group's accesses).
#define KILN_ROW_LAST(EXPR)                                                           \
    KILN_ROW_GROUPS(float xv[V], vv[V]; KILN_ROW_LOAD(xv);                            \
                    _Pragma("unroll") for (int j = 0; j < V; j++) {                   \
                        const float x = xv[j];                                        \
                        vv[j] = (EXPR);                                               \
                    } kiln_row_pre<AL, V>(p, row, i0, xv);                            \
                    kiln_row_out<AL, V>(p, row, i0, vv, xv);)
// kiln_row_pre alone over the row (a reduction whose epilogue is per row)
#define KILN_ROW_PRE_ALL() KILN_ROW_GROUPS(float xv[V]; KILN_ROW_LOAD(xv); kiln_row_pre<AL, V>(p, row, i0, xv);)

template <int AL> __device__ __forceinline__ void kiln_row_run(const KilnArgs &p)
{
    constexpr int V = AL > 0 ? KILN_ROW_VEC : 1;
    __shared__ float red[32];
    const long long row = blockIdx.x;
    const long long d = p.d;
    const float inv_d = 1.0f / (float)d;
    (void)inv_d;
#if KILN_ROW_ITEMS > 0
    float xs[KILN_ROW_ITEMS];
    KILN_ROW_FOR(xs[k] = kiln_row_in<AL>(p, row, i);)
#endif

#if KILN_ROW_OP == KILN_ROW_RMSNORM
    float acc = 0.0f;
    KILN_ROW_FOR(const float x = KILN_ROW_X(k, i); acc += x * x;)
    const float rstd = rsqrtf(kiln_block_reduce<false>(acc, red) * inv_d + KILN_EPS);
    KILN_ROW_LAST(x * rstd);

#elif KILN_ROW_OP == KILN_ROW_LAYERNORM
    float acc = 0.0f;
    KILN_ROW_FOR(acc += KILN_ROW_X(k, i);)
    const float mean = kiln_block_reduce<false>(acc, red) * inv_d;
    acc = 0.0f;
    KILN_ROW_FOR(const float x = KILN_ROW_X(k, i) - mean; acc += x * x;)
    const float rstd = rsqrtf(kiln_block_reduce<false>(acc, red) * inv_d + KILN_EPS);
    KILN_ROW_LAST((x - mean) * rstd);

#elif KILN_ROW_OP == KILN_ROW_SOFTMAX
    float mx = -KILN_INF;
    KILN_ROW_FOR(mx = fmaxf(mx, KILN_ROW_X(k, i));)
    mx = kiln_block_reduce<true>(mx, red);
    float acc = 0.0f;
    KILN_ROW_FOR(acc += expf(KILN_ROW_X(k, i) - mx);)
    const float inv_sum = 1.0f / kiln_block_reduce<false>(acc, red);
    KILN_ROW_LAST(expf(x - mx) * inv_sum);

#elif KILN_ROW_OP == KILN_ROW_SUM || KILN_ROW_OP == KILN_ROW_MEAN || KILN_ROW_OP == KILN_ROW_MAX
#if KILN_ROW_OP == KILN_ROW_MAX
    float acc = -KILN_INF;
    KILN_ROW_FOR(acc = fmaxf(acc, KILN_ROW_X(k, i));)
    const float r = kiln_block_reduce<true>(acc, red);
#else
    float acc = 0.0f;
    KILN_ROW_FOR(acc += KILN_ROW_X(k, i);)
    float r = kiln_block_reduce<false>(acc, red);
#if KILN_ROW_OP == KILN_ROW_MEAN
    r *= inv_d;
#endif
#endif
#if KILN_ROW_ELEMOUT
    // the epilogue is per element (e.g. x - mean): one call per element
    KILN_ROW_LAST(r);
#else
    KILN_ROW_PRE_ALL();
    if (threadIdx.x == 0) {
        const float rv[1] = {r}, zero[1] = {0.0f};
        kiln_row_out<AL, 1>(p, row, 0, rv, zero);
    }
#endif
#else
#error "KILN_ROW_OP: unknown row operation"
#endif
}

extern "C" __global__ void __launch_bounds__(KILN_ROW_THREADS) KILN_KERNEL(KilnArgs p)
{
    kiln_pdl_wait(); // programmatic dependent launch (common.cuh)
    kiln_pdl_launch();
#if KILN_ROW_VEC > 1
    if (p.d % KILN_ROW_VEC == 0 && kiln_row_aligned(p)) {
        kiln_row_run<16>(p);
        return;
    }
#endif
    kiln_row_run<0>(p);
}
