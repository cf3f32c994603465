// codegen/kernels/row.cuh — one CTA of KILN_ROW_THREADS threads per row of
// p.d elements (the last axis), p.rows rows: norms, softmax, last-axis
// reductions, with the group's prologue and epilogue in the generated hooks
// (CONTRACT.md, family `row`):
//   float kiln_row_in (p, row, i)          the row's input element
//   void  kiln_row_pre(p, row, i, x)       store prologue values needed outside
//   void  kiln_row_out(p, row, i, v, x)    apply the epilogue to v and store
// All math in float32. Thread t handles elements i = k * THREADS + t
// (coalesced). With KILN_ROW_ITEMS > 0 (d known and <= ITEMS * THREADS) the
// row stays in registers between passes; otherwise each pass calls
// kiln_row_in again, and kiln_row_pre runs in the last pass, so that every
// element is read before the same thread writes it (outputs may alias inputs).
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

// Visit this thread's elements of the row: BODY sees `i` and, with a register
// cache, `xs[k]`.
#if KILN_ROW_ITEMS > 0
#define KILN_ROW_FOR(BODY)                                                   \
    _Pragma("unroll") for (int k = 0; k < KILN_ROW_ITEMS; k++)               \
    {                                                                        \
        const long long i = (long long)k * KILN_ROW_THREADS + threadIdx.x;   \
        if (i < d) { BODY }                                                  \
    }
#define KILN_ROW_X(k, i) xs[k]
#else
#define KILN_ROW_FOR(BODY)                                                   \
    for (long long i = threadIdx.x, k = 0; i < d; i += KILN_ROW_THREADS, k++) { (void)k; BODY }
#define KILN_ROW_X(k, i) kiln_row_in(p, row, i)
#endif

extern "C" __global__ void __launch_bounds__(KILN_ROW_THREADS) KILN_KERNEL(KilnArgs p)
{
    kiln_pdl_wait(); // programmatic dependent launch (common.cuh)
    kiln_pdl_launch();
    __shared__ float red[32];
    const long long row = blockIdx.x;
    const long long d = p.d;
    const float inv_d = 1.0f / (float)d;
    (void)inv_d;
#if KILN_ROW_ITEMS > 0
    float xs[KILN_ROW_ITEMS];
    KILN_ROW_FOR(xs[k] = kiln_row_in(p, row, i); kiln_row_pre(p, row, i, xs[k]);)
#endif

#if KILN_ROW_OP == KILN_ROW_RMSNORM
    float acc = 0.0f;
    KILN_ROW_FOR(const float x = KILN_ROW_X(k, i); acc += x * x;)
    const float rstd = rsqrtf(kiln_block_reduce<false>(acc, red) * inv_d + KILN_EPS);
#if KILN_ROW_ITEMS > 0
    KILN_ROW_FOR(kiln_row_out(p, row, i, xs[k] * rstd, xs[k]);)
#else
    KILN_ROW_FOR(const float x = kiln_row_in(p, row, i); kiln_row_pre(p, row, i, x);
                 kiln_row_out(p, row, i, x * rstd, x);)
#endif

#elif KILN_ROW_OP == KILN_ROW_LAYERNORM
    float acc = 0.0f;
    KILN_ROW_FOR(acc += KILN_ROW_X(k, i);)
    const float mean = kiln_block_reduce<false>(acc, red) * inv_d;
    acc = 0.0f;
    KILN_ROW_FOR(const float x = KILN_ROW_X(k, i) - mean; acc += x * x;)
    const float rstd = rsqrtf(kiln_block_reduce<false>(acc, red) * inv_d + KILN_EPS);
#if KILN_ROW_ITEMS > 0
    KILN_ROW_FOR(kiln_row_out(p, row, i, (xs[k] - mean) * rstd, xs[k]);)
#else
    KILN_ROW_FOR(const float x = kiln_row_in(p, row, i); kiln_row_pre(p, row, i, x);
                 kiln_row_out(p, row, i, (x - mean) * rstd, x);)
#endif

#elif KILN_ROW_OP == KILN_ROW_SOFTMAX
    float mx = -KILN_INF;
    KILN_ROW_FOR(mx = fmaxf(mx, KILN_ROW_X(k, i));)
    mx = kiln_block_reduce<true>(mx, red);
    float acc = 0.0f;
    KILN_ROW_FOR(acc += expf(KILN_ROW_X(k, i) - mx);)
    const float inv_sum = 1.0f / kiln_block_reduce<false>(acc, red);
#if KILN_ROW_ITEMS > 0
    KILN_ROW_FOR(kiln_row_out(p, row, i, expf(xs[k] - mx) * inv_sum, xs[k]);)
#else
    KILN_ROW_FOR(const float x = kiln_row_in(p, row, i); kiln_row_pre(p, row, i, x);
                 kiln_row_out(p, row, i, expf(x - mx) * inv_sum, x);)
#endif

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
#if KILN_ROW_ITEMS > 0
    KILN_ROW_FOR(kiln_row_out(p, row, i, r, xs[k]);)
#else
    KILN_ROW_FOR(const float x = kiln_row_in(p, row, i); kiln_row_pre(p, row, i, x);
                 kiln_row_out(p, row, i, r, x);)
#endif
#else
#if KILN_ROW_ITEMS == 0
    KILN_ROW_FOR(kiln_row_pre(p, row, i, kiln_row_in(p, row, i));)
#endif
    if (threadIdx.x == 0) kiln_row_out(p, row, 0, r, 0.0f);
#endif
#else
#error "KILN_ROW_OP: unknown row operation"
#endif
}
