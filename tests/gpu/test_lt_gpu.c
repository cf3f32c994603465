/* tests/gpu/test_lt_gpu.c — matmuls that autotuning gives to cuBLASLt
 * (codegen/cg_lt.c, runtime/rt_cublaslt.h) against a float64 reference.
 *
 * KILN_FORCE_CUBLASLT=1 (set here; rt_lt_forced) makes the tuner store
 * cuBLASLt as the choice of every problem where it is a candidate and ran,
 * whatever the times say: each case below is compiled with autotune on the
 * device (every candidate timed, cuBLASLt among them), its matmul must then
 * be cuBLASLt ("cublasLt ... (autotuned)", lt.chosen), and its output, on
 * fresh random inputs with the output poisoned first, must match the f64
 * reference of the model's math within bf16's tolerance, at the max rows
 * and at a row tail (the GELU case nearer the tanh form than the erf one:
 * cuBLASLt's GELU is the tanh approximation). Cases: bias + tanh GELU, bias + ReLU, bias + residual
 * (beta * C), residual + ReLU, and a batched matmul (x @ transpose(w), W as [N, K] per batch). The
 * runs go through the CUDA graph cache: a graph is captured and replayed
 * (counters), every replay equals the first run bit for bit (the algorithm
 * is fixed at prepare time, no in-place split-K), and an eager model
 * (no_graphs) gives the same bits. Exits 77 without a device. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_test_util.h"
#include "runtime/rt_test_util.h"
#include "src/compile.h"

enum { MAXS = 256, K = 512, N = 1024, BATCH = 4, BK = 128, BN = 256 };

typedef struct lt_case {
    const char *name, *text;
    int act; /* 0 none, 1 relu, 2 gelu tanh */
    bool bias, res, batched;
} lt_case;

static const lt_case CASES[] = {
    {"bias+gelu_tanh",
     "model lt_gelu {\n  dims S\n  input x : bf16[S, 512]\n  weight w : bf16[1024, 512]\n  weight b : bf16[1024]\n"
     "  output y = gelu(linear(x, w, b), tanh=true)\n}\n",
     2, true, false, false},
    {"bias+relu",
     "model lt_relu {\n  dims S\n  input x : bf16[S, 512]\n  weight w : bf16[1024, 512]\n  weight b : bf16[1024]\n"
     "  output y = relu(linear(x, w, b))\n}\n",
     1, true, false, false},
    {"bias+residual",
     "model lt_res {\n  dims S\n  input x : bf16[S, 512]\n  input r : bf16[S, 1024]\n  weight w : bf16[1024, 512]\n"
     "  weight b : bf16[1024]\n  output y = linear(x, w, b) + r\n}\n",
     0, true, true, false},
    {"residual+relu",
     "model lt_resrelu {\n  dims S\n  input x : bf16[S, 512]\n  input r : bf16[S, 1024]\n  weight w : bf16[1024, 512]\n"
     "  output y = relu(r + linear(x, w))\n}\n",
     1, false, true, false},
    {"batched",
     "model lt_batched {\n  dims S\n  input x : bf16[4, S, 128]\n  input w : bf16[4, 256, 128]\n"
     "  output y = matmul(x, transpose(w))\n}\n",
     0, false, false, true},
};

static char err[4096];

static uint16_t *random_host(size_t n, float scale)
{
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = enc(scale * rng_normal());
    return h;
}

static void *upload(const uint16_t *h, size_t n)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, n * 2));
    CUDA_OK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    return d;
}

static rt_model *compile(rt_ctx *ctx, const lt_case *c, bool graphs, const cg_kernel **mm)
{
    static const rt_dim_value md[] = {{"S", MAXS}};
    kc_model_options o = {.compile = {.name = "lt.kiln", .text = c->text},
                          .max_dims = md,
                          .nmax_dims = 1,
                          .autotune = true,
                          .run = {.no_graphs = !graphs}};
    rt_model *m = NULL;
    rt_status st = kc_compile_model(ctx, &o, &m, NULL, err, sizeof err);
    CHECK_MSG(st == RT_OK, "%s: compile: %s", c->name, err);
    *mm = NULL;
    for (int i = 0; m && i < rt_model_num_kernels(m); i++)
        if (rt_model_kernel(m, i)->lt_note) *mm = rt_model_kernel(m, i);
    CHECK_MSG(*mm, "%s: no matmul kernel", c->name);
    return m;
}

typedef struct operands {
    uint16_t *x, *w, *b, *r;
    void *dx, *dw, *db, *dr, *dy;
    size_t nx, nw, ny;
} operands;

/* One run at S rows; bind: the weights are bound first (a bind redoes the bind-time work, so the
 * next run captures its graph again: the replay check runs without it). */
static uint16_t *run(rt_model *m, const lt_case *c, const operands *op, int64_t S, bool bind)
{
    if (!c->batched && bind) {
        CHECK(rt_model_bind_weight(m, "w", 0, IR_BF16, 0, NULL, op->dw, err, sizeof err) == RT_OK);
        if (c->bias) CHECK(rt_model_bind_weight(m, "b", 0, IR_BF16, 0, NULL, op->db, err, sizeof err) == RT_OK);
    }
    CUDA_OK(cudaMemset(op->dy, 0xff, op->ny * 2));
    CUDA_OK(cudaDeviceSynchronize());
    int64_t dims[1] = {S};
    rt_tensor_ptr in[3];
    int nin = 0;
    in[nin++] = (rt_tensor_ptr){"x", op->dx};
    if (c->res) in[nin++] = (rt_tensor_ptr){"r", op->dr};
    if (c->batched) in[nin++] = (rt_tensor_ptr){"w", op->dw};
    rt_tensor_ptr out[1] = {{"y", op->dy}};
    rt_status st = rt_model_run(m, dims, in, nin, out, 1, NULL, err, sizeof err);
    if (st == RT_OK) st = rt_model_sync(m, err, sizeof err);
    CHECK_MSG(st == RT_OK, "%s: run S=%lld: %s", c->name, (long long)S, err);
    const size_t ny = c->batched ? (size_t)BATCH * S * BN : (size_t)S * N;
    uint16_t *h = malloc(ny * 2);
    CUDA_OK(cudaMemcpy(h, op->dy, ny * 2, cudaMemcpyDeviceToHost));
    return h;
}

/* ‖y − ref‖ / ‖ref‖ at S rows (f64 reference of the model's math on the bf16 operands). */
static double check_ref(const lt_case *c, const operands *op, const uint16_t *y, int64_t S, size_t *nan, double *rel_erf)
{
    double num = 0, den = 0, num_erf = 0;
    *nan = 0;
    const int nb = c->batched ? BATCH : 1, kk = c->batched ? BK : K, nn = c->batched ? BN : N;
    for (int bt = 0; bt < nb; bt++)
        for (int64_t i = 0; i < S; i++)
            for (int j = 0; j < nn; j++) {
                double s = 0;
                for (int k = 0; k < kk; k++) {
                    /* linear: x[i, k] * w[j, k]; batched: x[bt, i, k] * w[bt, j, k] (x of MAXS rows per batch) */
                    const double a = c->batched ? dec(op->x[((size_t)bt * MAXS + i) * kk + k]) : dec(op->x[i * kk + k]);
                    const double b = c->batched ? dec(op->w[((size_t)bt * nn + j) * kk + k]) : dec(op->w[(size_t)j * kk + k]);
                    s += a * b;
                }
                if (c->bias) s += dec(op->b[j]);
                if (c->res) s += dec(op->r[i * nn + j]);
                const double e = 0.5 * s * (1 + erf(s * 0.7071067811865476)); /* the other GELU */
                if (c->act == 1) s = s > 0 ? s : 0;
                if (c->act == 2) s = 0.5 * s * (1 + tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
                const double v = dec(y[((size_t)bt * S + i) * nn + j]);
                if (isnan(v)) (*nan)++;
                else num += (v - s) * (v - s), den += s * s, num_erf += (v - e) * (v - e);
            }
    *rel_erf = sqrt(num_erf / (den > 0 ? den : 1));
    return sqrt(num / (den > 0 ? den : 1));
}

static void test_case(rt_ctx *ctx, const lt_case *c, bool eager_too)
{
    const cg_kernel *k = NULL;
    rt_model *m = compile(ctx, c, true, &k);
    if (!m || !k) {
        rt_model_free(m);
        return;
    }
    printf("%s: %s | %s\n", c->name, k->config, k->lt_note);
    CHECK_MSG(k->lt.chosen && strstr(k->config, "cublasLt") && strstr(k->config, "(autotuned)"), "%s: runs %s (%s)",
              c->name, k->config, k->lt_note);
    CHECK_MSG(strstr(k->lt_note, "chosen"), "%s: %s", c->name, k->lt_note);
    operands op = {0};
    /* batched: x is [4, S, 128] at S = MAXS (a tail run reads its first S rows per batch as the
     * model lays them out, so the inputs are uploaded per run size below) */
    op.nx = c->batched ? (size_t)BATCH * MAXS * BK : (size_t)MAXS * K;
    op.nw = c->batched ? (size_t)BATCH * BK * BN : (size_t)N * K;
    op.ny = c->batched ? (size_t)BATCH * MAXS * BN : (size_t)MAXS * N;
    op.x = random_host(op.nx, 1.0f);
    op.w = random_host(op.nw, 1.0f / 16.0f);
    op.b = random_host(N, 0.5f);
    op.r = random_host((size_t)MAXS * N, 1.0f);
    op.dw = upload(op.w, op.nw);
    op.db = upload(op.b, N);
    op.dr = upload(op.r, (size_t)MAXS * N);
    CUDA_OK(cudaMalloc(&op.dy, op.ny * 2));
    const int64_t rows[2] = {MAXS, 100};
    for (int ri = 0; ri < 2; ri++) {
        const int64_t S = rows[ri];
        /* batched at S rows: x[bt, i, k] = the MAXS-row host array's row i of batch bt */
        uint16_t *xs = op.x;
        if (c->batched && S != MAXS) {
            xs = malloc((size_t)BATCH * S * BK * 2);
            for (int bt = 0; bt < BATCH; bt++)
                memcpy(xs + (size_t)bt * S * BK, op.x + (size_t)bt * MAXS * BK, (size_t)S * BK * 2);
        }
        op.dx = upload(xs, c->batched ? (size_t)BATCH * S * BK : op.nx);
        if (xs != op.x) free(xs);
        uint16_t *y = run(m, c, &op, S, true);
        size_t nan;
        double rel_erf;
        const double rel = check_ref(c, &op, y, S, &nan, &rel_erf);
        printf("  S=%lld: rel %.2e vs the f64 reference, %zu NaN\n", (long long)S, rel, nan);
        CHECK_MSG(nan == 0 && rel < 1e-2, "%s S=%lld: rel %.2e, %zu NaN", c->name, (long long)S, rel, nan);
        /* the two GELUs differ by less than bf16's rounding per element, but over the whole output
         * the one cuBLASLt computes is measurably nearer: it must be the tanh form (cg_lt.c) */
        if (c->act == 2) {
            printf("  S=%lld: rel %.3e vs tanh GELU, %.3e vs erf GELU\n", (long long)S, rel, rel_erf);
            CHECK_MSG(rel < rel_erf, "%s: cuBLASLt's GELU is nearer the erf form (%.3e vs tanh %.3e): cg_lt.c's "
                      "mapping is wrong", c->name, rel_erf, rel);
        }
        /* graph replays: the same bits every time */
        rt_model_counters before, after;
        rt_model_get_counters(m, &before);
        for (int rep = 0; rep < 3; rep++) {
            uint16_t *y2 = run(m, c, &op, S, false);
            const size_t ny = c->batched ? (size_t)BATCH * S * BN : (size_t)S * N;
            CHECK_MSG(!memcmp(y, y2, ny * 2), "%s S=%lld: replay %d differs from the first run", c->name, (long long)S, rep);
            free(y2);
        }
        rt_model_get_counters(m, &after);
        CHECK_MSG(after.graph_replays >= before.graph_replays + 3, "%s: %llu graph replays in 3 runs", c->name,
                  (unsigned long long)(after.graph_replays - before.graph_replays));
        if (eager_too && ri == 0) { /* an eager model on the same choice: the same bits */
            const cg_kernel *ke = NULL;
            rt_model *me = compile(ctx, c, false, &ke);
            if (me) {
                CHECK(ke && ke->lt.chosen);
                uint16_t *ye = run(me, c, &op, S, true);
                CHECK_MSG(!memcmp(y, ye, (size_t)S * N * 2), "%s: eager differs from the graph replay", c->name);
                rt_model_counters ce;
                rt_model_get_counters(me, &ce);
                CHECK(ce.graph_replays == 0 && ce.eager_runs >= 1);
                free(ye);
            }
            rt_model_free(me);
        }
        free(y);
        cudaFree(op.dx);
    }
    free(op.x), free(op.w), free(op.b), free(op.r);
    cudaFree(op.dw), cudaFree(op.db), cudaFree(op.dr), cudaFree(op.dy);
    rt_model_free(m);
}

int main(void)
{
    if (gpu_sm90_or_skip()) return 77;
    setenv("KILN_FORCE_CUBLASLT", "1", 1);
    rng_state = 20261202;
    char *dir = make_tmpdir();
    rt_ctx_config cc = {.cache_dir = dir};
    rt_ctx *ctx = NULL;
    CHECK_MSG(rt_ctx_create(&ctx, &cc, err, sizeof err) == RT_OK, "context: %s", err);
    if (!ctx) return 1;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) test_case(ctx, &CASES[i], i == 0);
    rt_ctx_free(ctx);
    rm_tree(dir);
    free(dir);
    return CHECK_DONE();
}
