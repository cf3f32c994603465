/* tests/api/test_api_gpu.c — the public API on a GPU (label gpu; exits 77
 * without a device). Self-checking; every failure prints what was compared,
 * at which dims, and the error; the last line is "N passed, N failed".
 *
 *  1. samples: each sample (consts shrunk: Llama D=256 H=4 KV=2 F=512, GPT-2
 *     D=128 H=2) compiled through kiln_model_compile_file, random weights
 *     (bound from device memory, or loaded from a .safetensors file),
 *     random states, random inputs, outputs poisoned with NaN; runs at
 *     B=2 S=5 (small-shape variant: 10 rows, the batched decode graph, RoPE
 *     and the cache write in attention), B=2 S=12 (large-shape), B=2 S=1 and
 *     B=1 S=1 (decode) are compared with ir_interp_run on the unfused graph:
 *     outputs and states, relative error < 2e-2 (bf16) / 1e-3 (f32). The
 *     Llama-1B layer is also run with decode_max_rows = -1 (large-shape
 *     kernels at every size), and both Llama layers with the norm folds
 *     (rules norm-gain and norm-gemv, on by default: the gains in the weights,
 *     the decode GEMVs computing the RMSNorms) turned off.
 *  2. graphs: a run replayed from a CUDA graph equals an eager run (graphs
 *     off) bit for bit, outputs and states; new output pointers update the
 *     graph (counted) and still give the same bits.
 *  3. decode == prefill: 6 decode steps (S=1, pos fed forward in device
 *     memory, one graph replayed) give the last row of one 6-token prefill,
 *     and the same KV caches.
 *  4. errors on a device: a bad weight file, a run without weights.
 *  5. threads: two threads, two contexts, each compiles and runs the Llama
 *     layer with its own weights; both match the interpreter.
 *  6. the Hopper matmul (sm_90a only): the full 8B layer's plan at prefill
 *     dims (B=1, S=2048, T=2048) has its four projections on matmul_wgmma.cuh
 *     with the mma.sync fallback (kiln_model_kernel); the shrunk 8B layer at
 *     B=2 S=12 on its large-shape variant (decode_max_rows -1) runs them
 *     without a fallback (counter tma_fallbacks 0) and
 *     matches the interpreter; with wo rebound at a pointer 2 bytes off
 *     16-byte alignment its projection falls back (counted) and still
 *     matches; so does the O projection with the input x (its residual,
 *     read by TMA) 2 bytes off. */
#include "api_util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "frontend/frontend.h"
#include "ir/ir.h"
#include "runtime/rt_pack.h"

static atomic_int g_pass, g_fail;

__attribute__((format(printf, 2, 3))) static bool expect(bool cond, const char *fmt, ...)
{
    if (cond) {
        atomic_fetch_add(&g_pass, 1);
        return true;
    }
    atomic_fetch_add(&g_fail, 1);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return false;
}

#define KOK(call, what) expect((call) == KILN_OK, "%s: %s", what, kiln_last_error())
#define COK(call) expect((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

/* ---- a bench: one sample compiled in one context, its reference graph and weights ---- */

typedef struct bench {
    const api_sample *s;
    kiln_context *ctx;
    kiln_model *m;
    ir_graph *g0;       /* unfused, for the interpreter */
    arena a;
    diag_list d;
    void *wh[32];       /* host bytes per g0 param (weights) */
    void *wd[32];       /* device copies */
    int64_t maxd[IR_MAX_SYMS];
    uint64_t seed;
} bench;

static size_t type_bytes(const ir_type *t, const int64_t *dims, int64_t *shape, int64_t *numel)
{
    int64_t sh[IR_MAX_RANK], n = 0;
    ir_type_shape_at(t, dims, shape ? shape : sh, &n);
    if (numel) *numel = n;
    return (size_t)n * (size_t)ir_dtype_size(t->dtype);
}

static void *rand_bytes(ir_dtype t, int64_t n, float scale, float offset, uint64_t *seed)
{
    float *f = malloc((size_t)(n + 1) * sizeof *f);
    void *b = malloc((size_t)(n + 1) * 4);
    for (int64_t i = 0; i < n; i++) f[i] = offset + scale * api_randf(seed);
    rt_from_f32(t, f, b, n);
    free(f);
    return b;
}

static void *to_device(const void *h, size_t n)
{
    void *d = NULL;
    if (!COK(cudaMalloc(&d, n ? n : 1))) return NULL;
    if (n) COK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}

static const kiln_dim *bench_maxd(const bench *b, int *n)
{
    static const kiln_dim md[] = {{"B", 2}, {"S", 12}, {"T", 32}};
    *n = b->s->has_cache ? 3 : 2;
    return md;
}

/* Compile the sample (model + reference) and make random weights; use_file:
 * load them from a .safetensors file, else bind device copies. */
static const char *const norm_folds[] = {"norm-gain", "norm-gemv"};

/* no_norm_fold: compile with the rules norm-gain and norm-gemv turned off. */
static bool bench_init(bench *b, const api_sample *s, kiln_context *ctx, uint64_t seed, int decode_max_rows,
                       bool use_file, bool no_norm_fold)
{
    memset(b, 0, sizeof *b);
    b->s = s;
    b->ctx = ctx;
    b->seed = seed;
    arena_init(&b->a);
    diag_list_init(&b->d, &b->a);
    int nmd;
    const kiln_dim *md = bench_maxd(b, &nmd);
    kiln_model_options o = {.defines = s->defines, .ndefines = s->ndefines, .max_dims = md, .nmax_dims = nmd,
                            .decode_max_rows = decode_max_rows, .disabled = norm_folds,
                            .ndisabled = no_norm_fold ? 2 : 0};
    if (!KOK(kiln_model_compile_file(ctx, s->path, &o, &b->m), s->path)) return false;
    fe_source src;
    fe_define defs[8];
    for (int i = 0; i < s->ndefines; i++) defs[i] = (fe_define){s->defines[i].name, s->defines[i].value};
    fe_options fo = {defs, s->ndefines};
    if (fe_source_read(&src, s->path, &b->d) != 0) return expect(false, "%s: cannot read", s->path);
    b->g0 = fe_compile(&src, &fo, &b->d);
    fe_source_free(&src);
    if (!expect(b->g0 != NULL, "%s: reference graph", s->path)) return false;
    for (int i = 0; i < nmd; i++) b->maxd[ir_graph_find_sym(b->g0, md[i].name)] = md[i].value;
    kiln_host_tensor ht[32];
    int nh = 0;
    for (int i = 0; i < b->g0->nparams && i < 32; i++) {
        const ir_node *p = b->g0->params[i];
        if (p->op != IR_OP_WEIGHT) continue;
        int64_t shape[IR_MAX_RANK], numel;
        size_t bytes = type_bytes(&p->type, b->maxd, shape, &numel);
        /* norm gains near 1, matrices ~ 1/sqrt(fan-in), biases small */
        bool gain = p->type.rank == 1 && (strstr(p->name, "ln") || strstr(p->name, "_w"));
        float scale = p->type.rank >= 2 ? 1.0f / sqrtf((float)(numel / shape[0])) : 0.1f;
        b->wh[i] = rand_bytes(p->type.dtype, numel, scale, gain ? 1.0f : 0.0f, &b->seed);
        if (use_file) {
            ht[nh] = (kiln_host_tensor){p->name, (kiln_dtype)p->type.dtype, p->type.rank, {0}, b->wh[i]};
            memcpy(ht[nh].shape, shape, sizeof(int64_t) * (size_t)p->type.rank);
            nh++;
        } else {
            b->wd[i] = to_device(b->wh[i], bytes);
            if (!KOK(kiln_model_bind_weight_checked(b->m, p->name, (kiln_dtype)p->type.dtype, p->type.rank, shape, b->wd[i]),
                     p->name))
                return false;
        }
    }
    if (use_file) {
        char *path = api_tmpfile("bench.safetensors");
        bool ok = KOK(kiln_safetensors_write(path, ht, nh), "write weights") &&
                  KOK(kiln_model_load_safetensors(b->m, path), "load weights");
        remove(path);
        free(path);
        if (!ok) return false;
    }
    return KOK(kiln_model_alloc_states(b->m), "alloc states");
}

static void bench_free(bench *b)
{
    kiln_model_free(b->m);
    if (b->g0) ir_graph_free(b->g0);
    for (int i = 0; i < 32; i++) {
        free(b->wh[i]);
        if (b->wd[i]) cudaFree(b->wd[i]);
    }
    diag_list_free(&b->d);
    arena_free(&b->a);
}

/* One run's data: host inputs, device buffers, results. */
typedef struct run_io {
    int64_t dims[IR_MAX_SYMS];
    void *in_h[32], *in_d[32];   /* per g0 param (inputs) */
    void *st_h[32];              /* per g0 param (states): the full max-size initial contents */
    void *out_d[8], *out_h[8];   /* per output */
    size_t out_bytes[8];
    void *st_after[32];          /* states read back (run dims part) */
} run_io;

static void io_free(run_io *io)
{
    for (int i = 0; i < 32; i++) {
        free(io->in_h[i]);
        if (io->in_d[i]) cudaFree(io->in_d[i]);
        free(io->st_h[i]);
        free(io->st_after[i]);
    }
    for (int i = 0; i < 8; i++) {
        if (io->out_d[i]) cudaFree(io->out_d[i]);
        free(io->out_h[i]);
    }
    memset(io, 0, sizeof *io);
}

/* Random inputs (positions from pos[]) and states for dims B, S. */
static void io_make(bench *b, run_io *io, int64_t B, int64_t S, const int32_t *pos)
{
    memset(io, 0, sizeof *io);
    const ir_graph *g = b->g0;
    for (int s = 0; s < g->nsyms; s++) io->dims[s] = b->maxd[s];
    io->dims[ir_graph_find_sym(g, "B")] = B;
    io->dims[ir_graph_find_sym(g, "S")] = S;
    for (int i = 0; i < g->nparams && i < 32; i++) {
        const ir_node *p = g->params[i];
        int64_t numel;
        if (p->op == IR_OP_INPUT) {
            size_t bytes = type_bytes(&p->type, io->dims, NULL, &numel);
            if (p->type.dtype == IR_I32) {
                io->in_h[i] = calloc((size_t)numel + 1, 4);
                for (int64_t j = 0; j < numel; j++) ((int32_t *)io->in_h[i])[j] = pos ? pos[j] : 0;
            } else {
                io->in_h[i] = rand_bytes(p->type.dtype, numel, 1.0f, 0.0f, &b->seed);
            }
            io->in_d[i] = to_device(io->in_h[i], bytes);
        } else if (p->op == IR_OP_STATE) {
            type_bytes(&p->type, b->maxd, NULL, &numel);
            io->st_h[i] = rand_bytes(p->type.dtype, numel, 1.0f, 0.0f, &b->seed);
        }
    }
    for (int o = 0; o < g->noutputs && o < 8; o++) {
        io->out_bytes[o] = type_bytes(&g->outputs[o].value->type, io->dims, NULL, NULL);
        io->out_h[o] = malloc(io->out_bytes[o] + 1);
        COK(cudaMalloc(&io->out_d[o], io->out_bytes[o] + 1));
    }
}

static void dims_of(const bench *b, const run_io *io, kiln_dim *d, int *nd)
{
    *nd = b->g0->nsyms;
    for (int s = 0; s < *nd; s++) d[s] = (kiln_dim){b->g0->syms[s], io->dims[s]};
}

/* Upload the initial states, poison the outputs, run, read everything back. */
static bool io_run(bench *b, kiln_model *m, run_io *io, void *const *outs_override)
{
    const ir_graph *g = b->g0;
    for (int i = 0; i < g->nparams && i < 32; i++) {
        if (!io->st_h[i]) continue;
        void *sp;
        size_t sb;
        if (!KOK(kiln_model_state_ptr(m, g->params[i]->name, &sp, &sb), "state_ptr")) return false;
        COK(cudaMemcpy(sp, io->st_h[i], sb, cudaMemcpyHostToDevice));
    }
    kiln_tensor_arg in[32], out[8];
    int nin = 0, nout = 0;
    for (int i = 0; i < g->nparams && i < 32; i++)
        if (io->in_d[i]) in[nin++] = (kiln_tensor_arg){g->params[i]->name, io->in_d[i]};
    for (int o = 0; o < g->noutputs && o < 8; o++) {
        void *dst = outs_override ? outs_override[o] : io->out_d[o];
        COK(cudaMemset(dst, 0xff, io->out_bytes[o])); /* NaN in bf16 and f32 */
        out[nout++] = (kiln_tensor_arg){g->outputs[o].name, dst};
    }
    kiln_dim d[IR_MAX_SYMS];
    int nd;
    dims_of(b, io, d, &nd);
    /* the copies above ran on the legacy stream, which the context's
     * non-blocking stream does not wait for */
    COK(cudaStreamSynchronize(cudaStreamLegacy));
    if (!KOK(kiln_model_run(m, d, nd, in, nin, out, nout, NULL), "run")) return false;
    if (!KOK(kiln_model_sync(m), "sync")) return false;
    for (int o = 0; o < nout; o++)
        COK(cudaMemcpy(io->out_h[o], outs_override ? outs_override[o] : io->out_d[o], io->out_bytes[o], cudaMemcpyDeviceToHost));
    for (int i = 0; i < g->nparams && i < 32; i++) {
        if (!io->st_h[i]) continue;
        void *sp;
        size_t sb;
        kiln_model_state_ptr(m, g->params[i]->name, &sp, &sb);
        free(io->st_after[i]);
        io->st_after[i] = malloc(sb);
        COK(cudaMemcpy(io->st_after[i], sp, sb, cudaMemcpyDeviceToHost));
    }
    return true;
}

static double rel_err(ir_dtype t, const void *got, const float *ref, int64_t n, int *nonfinite)
{
    float *g = malloc((size_t)(n + 1) * sizeof *g);
    rt_to_f32(t, got, g, n);
    double num = 0, den = 0;
    *nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(g[i])) (*nonfinite)++;
        double dd = (double)g[i] - ref[i];
        num += dd * dd;
        den += (double)ref[i] * ref[i];
    }
    free(g);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double tol_of(ir_dtype t) { return t == IR_F32 ? 1e-3 : 2e-2; }

/* The interpreter on io's inputs and initial states; compare outputs and states. */
static void io_check(bench *b, run_io *io, const char *what)
{
    const ir_graph *g = b->g0;
    ir_tensor *params = calloc((size_t)g->nparams + 1, sizeof *params), *outs = calloc((size_t)g->noutputs + 1, sizeof *outs);
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *p = g->params[i];
        int64_t shape[IR_MAX_RANK], numel;
        ir_type_shape_at(&p->type, io->dims, shape, &numel);
        ir_tensor_alloc(&params[i], p->type.dtype, p->type.rank, shape);
        const void *src = p->op == IR_OP_WEIGHT ? b->wh[i] : p->op == IR_OP_INPUT ? io->in_h[i] : io->st_h[i];
        if (p->type.dtype == IR_I32) memcpy(params[i].i, src, (size_t)numel * 4);
        else rt_to_f32(p->type.dtype, src, params[i].f, numel); /* states: the run-dims prefix of the buffer */
    }
    char err[512];
    char dims[128] = "";
    for (int s = 0; s < g->nsyms; s++) {
        size_t l = strlen(dims);
        snprintf(dims + l, sizeof dims - l, "%s%s=%lld", s ? " " : "", g->syms[s], (long long)io->dims[s]);
    }
    if (expect(ir_interp_run(g, io->dims, params, outs, err, sizeof err) == 0, "%s %s (%s): interpreter: %s", b->s->path,
               what, dims, err)) {
        for (int o = 0; o < g->noutputs; o++) {
            int nf;
            int64_t n = ir_tensor_numel(&outs[o]);
            ir_dtype t = g->outputs[o].value->type.dtype;
            double e = rel_err(t, io->out_h[o], outs[o].f, n, &nf);
            expect(e < tol_of(t) && nf == 0, "%s %s (%s): output %s: relative error %.3g (tolerance %.0e), %d non-finite",
                   b->s->path, what, dims, g->outputs[o].name, e, tol_of(t), nf);
        }
        for (int i = 0; i < g->nparams; i++) {
            if (!io->st_h[i] || !io->st_after[i]) continue;
            int nf;
            int64_t n = ir_tensor_numel(&params[i]);
            ir_dtype t = g->params[i]->type.dtype;
            double e = rel_err(t, io->st_after[i], params[i].f, n, &nf);
            expect(e < tol_of(t) && nf == 0, "%s %s (%s): state %s: relative error %.3g (tolerance %.0e), %d non-finite",
                   b->s->path, what, dims, g->params[i]->name, e, tol_of(t), nf);
        }
        for (int o = 0; o < g->noutputs; o++) ir_tensor_free(&outs[o]);
    }
    for (int i = 0; i < g->nparams; i++) ir_tensor_free(&params[i]);
    free(params);
    free(outs);
}

static void run_and_check(bench *b, int64_t B, int64_t S, const int32_t *pos, const char *what)
{
    run_io io;
    io_make(b, &io, B, S, pos);
    if (io_run(b, b->m, &io, NULL)) io_check(b, &io, what);
    io_free(&io);
}

/* ---- 1. every sample against the interpreter ------------------------------------------------ */

static void test_samples(kiln_context *ctx)
{
    for (int si = 0; si < API_NSAMPLES; si++) {
        const api_sample *s = &API_SAMPLES[si];
        bench b;
        if (bench_init(&b, s, ctx, 100 + (uint64_t)si, 0, si == 2, false)) {
            int32_t p5[2] = {3, 17}, p12[2] = {0, 20}, p1[2] = {9, 31};
            run_and_check(&b, 2, 5, p5, "prefill B=2 S=5 (small-shape kernels)");
            run_and_check(&b, 2, 12, p12, "prefill B=2 S=12 (large-shape kernels)");
            run_and_check(&b, 2, 1, p1, "decode B=2 S=1");
            run_and_check(&b, 1, 1, p1, "decode B=1 S=1");
            run_and_check(&b, 2, 1, p5, "decode B=2 S=1 again (graph replay)");
            kiln_counters c;
            kiln_model_counters(b.m, &c);
            printf("%s: %d kernels; variants %llu, compiled %llu, cache hits %llu+%llu, launches %llu, captures %llu, "
                   "replays %llu, updates %llu, eager %llu\n",
                   s->path, kiln_model_num_kernels(b.m), (unsigned long long)c.variants,
                   (unsigned long long)c.kernels_compiled, (unsigned long long)c.cache_hits_memory,
                   (unsigned long long)c.cache_hits_disk, (unsigned long long)c.launches,
                   (unsigned long long)c.graph_captures, (unsigned long long)c.graph_replays,
                   (unsigned long long)c.graph_updates, (unsigned long long)c.eager_runs);
            expect(c.graph_replays + c.graph_updates >= 1, "%s: the repeated decode shape did not reuse its graph", s->path);
            expect(c.variants >= 3, "%s: %llu variants (large + S=5 + S=1 expected)", s->path, (unsigned long long)c.variants);
        } else {
            fprintf(stderr, "%s: %s\n", s->path, kiln_last_error());
        }
        bench_free(&b);
    }
    /* the norm folds turned off: the norms keep their gains and kernels (both Llama samples) */
    for (int si = 0; si < 2; si++) {
        bench bn;
        if (bench_init(&bn, &API_SAMPLES[si], ctx, 300 + (uint64_t)si, 0, false, true)) {
            int32_t p1[2] = {9, 31}, p5[2] = {3, 17};
            run_and_check(&bn, 2, 1, p1, "decode B=2 S=1 without the norm folds");
            run_and_check(&bn, 1, 1, p1, "decode B=1 S=1 without the norm folds");
            run_and_check(&bn, 2, 5, p5, "B=2 S=5 without the norm folds (GEMV variant)");
        }
        bench_free(&bn);
    }
    /* large-shape kernels at every size */
    bench b;
    if (bench_init(&b, &API_SAMPLES[0], ctx, 7, -1, false, false)) {
        int32_t p1[2] = {4, 30};
        run_and_check(&b, 2, 1, p1, "decode B=2 S=1 with decode_max_rows=-1 (tensor-core matmul, prefill attention)");
        int32_t p3[2] = {4, 29}; /* 29 + 3 new tokens fill the 32-row cache exactly */
        run_and_check(&b, 2, 3, p3, "B=2 S=3 with decode_max_rows=-1");
    }
    bench_free(&b);
}

/* ---- 2. graph replay == eager ---------------------------------------------------------------- */

static void test_graphs(kiln_context *ctx)
{
    bench b;
    if (!bench_init(&b, &API_SAMPLES[0], ctx, 21, 0, false, false)) {
        bench_free(&b);
        return;
    }
    kiln_model *eager = NULL;
    int nmd;
    const kiln_dim *md = bench_maxd(&b, &nmd);
    kiln_model_options o = {.defines = b.s->defines, .ndefines = b.s->ndefines, .max_dims = md, .nmax_dims = nmd, .no_graphs = 1};
    bool ok = KOK(kiln_model_compile_file(ctx, b.s->path, &o, &eager), "compile eager");
    for (int i = 0; ok && i < b.g0->nparams; i++)
        if (b.wd[i]) ok = KOK(kiln_model_bind_weight(eager, b.g0->params[i]->name, b.wd[i]), "bind eager");
    ok = ok && KOK(kiln_model_alloc_states(eager), "alloc eager");
    int64_t shapes[2][2] = {{2, 1}, {2, 7}};
    for (int c = 0; ok && c < 2; c++) {
        int32_t pos[2] = {5, 11};
        run_io io;
        io_make(&b, &io, shapes[c][0], shapes[c][1], pos);
        ok = io_run(&b, b.m, &io, NULL) && io_run(&b, b.m, &io, NULL); /* capture, then replay */
        void *gy = malloc(io.out_bytes[0]), *gs[32] = {0};
        memcpy(gy, io.out_h[0], io.out_bytes[0]);
        for (int i = 0; i < 32; i++)
            if (io.st_after[i]) {
                void *sp;
                size_t sb;
                kiln_model_state_ptr(b.m, b.g0->params[i]->name, &sp, &sb);
                gs[i] = malloc(sb);
                memcpy(gs[i], io.st_after[i], sb);
            }
        ok = ok && io_run(&b, eager, &io, NULL);
        if (ok) {
            expect(!memcmp(gy, io.out_h[0], io.out_bytes[0]), "graphs (S=%lld): replayed output differs from the eager one",
                   (long long)shapes[c][1]);
            for (int i = 0; i < 32; i++)
                if (gs[i]) {
                    size_t sb;
                    void *sp;
                    kiln_model_state_ptr(eager, b.g0->params[i]->name, &sp, &sb);
                    expect(!memcmp(gs[i], io.st_after[i], sb), "graphs (S=%lld): state %s differs from the eager one",
                           (long long)shapes[c][1], b.g0->params[i]->name);
                }
            /* new output pointer: the graph is updated, same bits */
            void *other = NULL;
            COK(cudaMalloc(&other, io.out_bytes[0] + 1));
            void *ovr[8] = {other};
            if (io_run(&b, b.m, &io, ovr))
                expect(!memcmp(gy, io.out_h[0], io.out_bytes[0]), "graphs: output after a pointer update differs");
            cudaFree(other);
        }
        free(gy);
        for (int i = 0; i < 32; i++) free(gs[i]);
        io_free(&io);
    }
    kiln_counters c, ce;
    kiln_model_counters(b.m, &c);
    kiln_model_counters(eager, &ce);
    expect(c.graph_captures >= 2 && c.graph_replays >= 2 && c.graph_updates >= 2,
           "graphs: captures %llu replays %llu updates %llu (expected >= 2 each)", (unsigned long long)c.graph_captures,
           (unsigned long long)c.graph_replays, (unsigned long long)c.graph_updates);
    expect(ce.graph_captures == 0 && ce.eager_runs >= 2, "eager model: %llu captures, %llu eager runs",
           (unsigned long long)ce.graph_captures, (unsigned long long)ce.eager_runs);
    kiln_model_free(eager);
    bench_free(&b);
}

/* ---- 3. decode steps == one prefill --------------------------------------------------------- */

static void test_decode_vs_prefill(kiln_context *ctx)
{
    bench b;
    if (!bench_init(&b, &API_SAMPLES[0], ctx, 33, 0, false, false)) {
        bench_free(&b);
        return;
    }
    enum { B = 2, N = 6 };
    int D = 256;
    kiln_tensor_info xi;
    if (KOK(kiln_model_find_tensor(b.m, "x", NULL, 0, &xi), "x")) D = (int)xi.shape[2];
    uint64_t seed = 5;
    size_t row = (size_t)D * 2;
    uint16_t *x = malloc((size_t)B * N * row); /* bf16 [B, N, D] */
    float *f = malloc((size_t)B * N * D * sizeof *f);
    for (int i = 0; i < B * N * D; i++) f[i] = api_randf(&seed);
    rt_from_f32(IR_BF16, f, x, (int64_t)B * N * D);
    void *xd = to_device(x, (size_t)B * N * row), *yp = NULL, *ys = NULL, *xs = NULL, *posd = NULL;
    COK(cudaMalloc(&yp, (size_t)B * N * row));
    COK(cudaMalloc(&ys, (size_t)B * row));
    COK(cudaMalloc(&xs, (size_t)B * row));
    COK(cudaMalloc(&posd, B * sizeof(int32_t)));
    int32_t zero[B] = {0, 0};
    COK(cudaMemcpy(posd, zero, sizeof zero, cudaMemcpyHostToDevice));
    uint16_t *yph = malloc((size_t)B * N * row), *ysh = malloc((size_t)B * row);
    void *kp = NULL, *vp = NULL, *kd = NULL, *vd = NULL;
    size_t cb = 0;
    /* one prefill of N tokens from position 0 */
    KOK(kiln_model_zero_states(b.m), "zero states");
    kiln_dim dp[] = {{"B", B}, {"S", N}, {"T", 32}}, dd[] = {{"B", B}, {"S", 1}, {"T", 32}};
    kiln_tensor_arg in[] = {{"x", xd}, {"pos", posd}}, out[] = {{"y", yp}};
    COK(cudaStreamSynchronize(cudaStreamLegacy));
    bool ok = KOK(kiln_model_run(b.m, dp, 3, in, 2, out, 1, NULL), "prefill") && KOK(kiln_model_sync(b.m), "sync");
    ok = ok && KOK(kiln_model_state_ptr(b.m, "kc", &kp, &cb), "kc") && KOK(kiln_model_state_ptr(b.m, "vc", &vp, &cb), "vc");
    void *kc_pre = malloc(cb), *vc_pre = malloc(cb), *kc_dec = malloc(cb), *vc_dec = malloc(cb);
    if (ok) {
        COK(cudaMemcpy(yph, yp, (size_t)B * N * row, cudaMemcpyDeviceToHost));
        COK(cudaMemcpy(kc_pre, kp, cb, cudaMemcpyDeviceToHost));
        COK(cudaMemcpy(vc_pre, vp, cb, cudaMemcpyDeviceToHost));
        /* N decode steps, pos fed forward in device memory */
        ok = KOK(kiln_model_zero_states(b.m), "zero states");
        kiln_counters c0;
        kiln_model_counters(b.m, &c0);
        for (int t = 0; ok && t < N; t++) {
            int32_t pos[B] = {t, t};
            COK(cudaMemcpy(posd, pos, sizeof pos, cudaMemcpyHostToDevice));
            for (int bb = 0; bb < B; bb++)
                COK(cudaMemcpy((char *)xs + bb * row, (char *)xd + ((size_t)bb * N + t) * row, row, cudaMemcpyDeviceToDevice));
            COK(cudaStreamSynchronize(cudaStreamLegacy)); /* the copies are done before the step reads them */
            kiln_tensor_arg din[] = {{"x", xs}, {"pos", posd}}, dout[] = {{"y", ys}};
            ok = KOK(kiln_model_run(b.m, dd, 3, din, 2, dout, 1, NULL), "decode step") && KOK(kiln_model_sync(b.m), "sync");
        }
        kiln_counters c1;
        kiln_model_counters(b.m, &c1);
        expect(c1.graph_replays - c0.graph_replays >= N - 1, "decode: %llu graph replays over %d steps (pos in device "
               "memory should let every step after the first replay)", (unsigned long long)(c1.graph_replays - c0.graph_replays), N);
        if (ok) {
            COK(cudaMemcpy(ysh, ys, (size_t)B * row, cudaMemcpyDeviceToHost));
            kd = kc_dec;
            vd = vc_dec;
            COK(cudaMemcpy(kc_dec, kp, cb, cudaMemcpyDeviceToHost));
            COK(cudaMemcpy(vc_dec, vp, cb, cudaMemcpyDeviceToHost));
            /* last decode output vs the prefill's last row */
            float *ref = malloc((size_t)B * D * sizeof *ref);
            uint16_t *last = malloc((size_t)B * row);
            for (int bb = 0; bb < B; bb++) memcpy((char *)last + bb * row, (char *)yph + ((size_t)bb * N + N - 1) * row, row);
            rt_to_f32(IR_BF16, last, ref, (int64_t)B * D);
            int nf;
            double e = rel_err(IR_BF16, ysh, ref, (int64_t)B * D, &nf);
            expect(e < 2e-2 && nf == 0, "decode x%d vs prefill: last row relative error %.3g, %d non-finite", N, e, nf);
            free(ref);
            free(last);
            /* the caches: compare as floats */
            int64_t n = (int64_t)(cb / 2);
            float *kr = malloc((size_t)n * sizeof *kr), *vr = malloc((size_t)n * sizeof *vr);
            rt_to_f32(IR_BF16, kc_pre, kr, n);
            rt_to_f32(IR_BF16, vc_pre, vr, n);
            e = rel_err(IR_BF16, kd, kr, n, &nf);
            expect(e < 2e-2 && nf == 0, "decode x%d vs prefill: k cache relative error %.3g", N, e);
            e = rel_err(IR_BF16, vd, vr, n, &nf);
            expect(e < 2e-2 && nf == 0, "decode x%d vs prefill: v cache relative error %.3g", N, e);
            free(kr);
            free(vr);
        }
    }
    free(kc_pre);
    free(vc_pre);
    free(kc_dec);
    free(vc_dec);
    free(x);
    free(f);
    free(yph);
    free(ysh);
    cudaFree(xd);
    cudaFree(yp);
    cudaFree(ys);
    cudaFree(xs);
    cudaFree(posd);
    bench_free(&b);
}

/* ---- 4. errors on a device ------------------------------------------------------------------- */

static void test_device_errors(kiln_context *ctx)
{
    const api_sample *s = &API_SAMPLES[0];
    int nmd = 3;
    static const kiln_dim md[] = {{"B", 2}, {"S", 12}, {"T", 32}};
    kiln_model_options o = {.defines = s->defines, .ndefines = s->ndefines, .max_dims = md, .nmax_dims = nmd};
    kiln_model *m = NULL;
    if (!KOK(kiln_model_compile_file(ctx, s->path, &o, &m), "compile")) return;
    char *p = api_tmpfile("bad.safetensors");
    uint16_t w[256 * 128] = {0};
    kiln_host_tensor t[] = {{"wq", KILN_BF16, 2, {256, 128}, w}};
    kiln_safetensors_write(p, t, 1);
    kiln_status st = kiln_model_load_safetensors(m, p);
    expect(st == KILN_ERR_WEIGHTS && api_contains(kiln_last_error(), "shape [256, 128] but the model declares wq : bf16[256, 256]"),
           "bad weight file: %s: %s", kiln_status_str(st), kiln_last_error());
    expect(api_contains(kiln_last_error(), "missing from the file"), "bad weight file lists missing weights: %s", kiln_last_error());
    remove(p);
    free(p);
    void *x = NULL, *pos = NULL, *y = NULL;
    cudaMalloc(&x, 4096);
    cudaMalloc(&pos, 64);
    cudaMalloc(&y, 4096);
    kiln_dim d[] = {{"B", 1}, {"S", 1}, {"T", 32}};
    kiln_tensor_arg in[] = {{"x", x}, {"pos", pos}}, out[] = {{"y", y}};
    st = kiln_model_run(m, d, 3, in, 2, out, 1, NULL);
    expect(st == KILN_ERR_MISSING_WEIGHT, "run without weights: %s: %s", kiln_status_str(st), kiln_last_error());
    int host_w = 0;
    st = kiln_model_bind_weight(m, "ln1", &host_w);
    expect(st == KILN_ERR_INVALID_ARGUMENT && api_contains(kiln_last_error(), "host memory"),
           "binding a host pointer: %s: %s", kiln_status_str(st), kiln_last_error());
    kiln_dim d2[] = {{"B", 1}, {"S", 1}, {"T", 16}};
    st = kiln_model_run(m, d2, 3, in, 2, out, 1, NULL);
    expect(st != KILN_OK, "T below the state's capacity must be refused");
    cudaFree(x);
    cudaFree(pos);
    cudaFree(y);
    kiln_model_free(m);
}

/* ---- 5. two contexts in two threads ---------------------------------------------------------- */

static void *thread_main(void *arg)
{
    intptr_t id = (intptr_t)arg;
    kiln_context *ctx = NULL;
    if (!KOK(kiln_context_create(&ctx, NULL), "thread context")) return NULL;
    bench b;
    if (bench_init(&b, &API_SAMPLES[0], ctx, 1000 + (uint64_t)id, 0, false, false)) {
        int32_t p[2] = {2 + (int32_t)id, 9};
        for (int r = 0; r < 3; r++) {
            run_and_check(&b, 2, 5, p, id ? "thread 1 prefill" : "thread 0 prefill");
            run_and_check(&b, 2, 1, p, id ? "thread 1 decode" : "thread 0 decode");
        }
    }
    bench_free(&b);
    kiln_context_free(ctx);
    return NULL;
}

/* ---- 6. the Hopper template ------------------------------------------------------------------------ */

static void test_hopper(kiln_context *ctx)
{
    if (strcmp(kiln_context_arch(ctx), "sm_90a")) {
        printf("hopper: arch %s, not sm_90a: skipped\n", kiln_context_arch(ctx));
        return;
    }
    /* the plan at prefill dims, by introspection (lazy: nothing compiled) */
    const kiln_dim maxd[] = {{"B", 1}, {"S", 2048}, {"T", 2048}};
    kiln_model_options mo = {.max_dims = maxd, .nmax_dims = 3, .lazy = 1};
    kiln_model *m = NULL;
    if (KOK(kiln_model_compile_file(ctx, "samples/llama3_8b_layer.kiln", &mo, &m), "8B layer")) {
        int wgmma = 0;
        for (int i = 0; i < kiln_model_num_kernels(m); i++) {
            kiln_kernel_info ki;
            if (!KOK(kiln_model_kernel(m, i, &ki), "kernel info") || strcmp(ki.kind, "matmul")) continue;
            bool hopper = !strcmp(ki.template_file, "matmul_wgmma.cuh") && ki.fallback && !strcmp(ki.fallback, "matmul_mma.cuh");
            expect(hopper, "8B prefill: kernel %s is %s (%s), not the Hopper template", ki.name, ki.template_file, ki.config);
            wgmma += hopper;
        }
        expect(wgmma == 4, "8B prefill: %d projections on the Hopper template, 4 expected", wgmma);
    }
    kiln_model_free(m);

    /* the shrunk 8B layer runs them: no fallback, then one for an unaligned
     * weight. decode_max_rows -1: B=2 S=12 is 24 rows, which the default rule
     * would give an exact variant (M known <= 256: mma.sync) */
    bench b;
    if (!bench_init(&b, &API_SAMPLES[1], ctx, 61, -1, false, false)) {
        bench_free(&b);
        return;
    }
    int32_t p12[2] = {0, 20};
    kiln_counters c0, c1, c2;
    run_and_check(&b, 2, 12, p12, "8B (shrunk) B=2 S=12 on the Hopper template");
    kiln_model_counters(b.m, &c0);
    expect(c0.variants == 1, "8B (shrunk): %llu variants, only the large-shape one expected", (unsigned long long)c0.variants);
    expect(c0.tma_fallbacks == 0, "8B (shrunk): %llu wgmma launches fell back with aligned operands",
           (unsigned long long)c0.tma_fallbacks);
    int wo = -1;
    for (int i = 0; i < b.g0->nparams && i < 32; i++)
        if (!strcmp(b.g0->params[i]->name, "wo")) wo = i;
    void *raw = NULL;
    if (expect(wo >= 0 && b.wd[wo], "8B (shrunk): weight wo")) {
        int64_t shape[IR_MAX_RANK], numel;
        size_t bytes = type_bytes(&b.g0->params[wo]->type, b.maxd, shape, &numel);
        COK(cudaMalloc(&raw, bytes + 16));
        COK(cudaMemcpy((char *)raw + 2, b.wd[wo], bytes, cudaMemcpyDeviceToDevice));
        if (KOK(kiln_model_bind_weight(b.m, "wo", (char *)raw + 2), "rebind wo unaligned")) {
            run_and_check(&b, 2, 12, p12, "8B (shrunk) B=2 S=12, wo not 16-byte aligned (mma.sync fallback)");
            kiln_model_counters(b.m, &c1);
            expect(c1.tma_fallbacks >= 1, "8B (shrunk): wo 2 bytes off alignment, yet no fallback was recorded");
            KOK(kiln_model_bind_weight(b.m, "wo", b.wd[wo]), "rebind wo aligned");
            run_and_check(&b, 2, 12, p12, "8B (shrunk) B=2 S=12, wo aligned again");
            kiln_model_counters(b.m, &c2);
            expect(c2.tma_fallbacks == c1.tma_fallbacks, "8B (shrunk): a fallback after wo was aligned again");
        }
    }
    /* the input x 2 bytes off alignment: x is the O projection's residual, which comes by TMA where
     * TMA can describe it (KILN_CG_WG_RES_TMA): the O kernel falls back to mma.sync (the row kernel
     * reading x takes its unaligned path), and the result still matches */
    int xi = -1;
    for (int i = 0; i < b.g0->nparams && i < 32; i++)
        if (!strcmp(b.g0->params[i]->name, "x") && b.g0->params[i]->op == IR_OP_INPUT) xi = i;
    void *rawx = NULL;
    run_io io;
    io_make(&b, &io, 2, 12, p12);
    if (expect(xi >= 0 && io.in_d[xi], "8B (shrunk): input x")) {
        const size_t xb = type_bytes(&b.g0->params[xi]->type, io.dims, NULL, NULL);
        if (COK(cudaMalloc(&rawx, xb + 16)) &&
            COK(cudaMemcpy((char *)rawx + 2, io.in_d[xi], xb, cudaMemcpyDeviceToDevice))) {
            void *own = io.in_d[xi];
            io.in_d[xi] = (char *)rawx + 2;
            kiln_counters x0, x1;
            kiln_model_counters(b.m, &x0);
            if (io_run(&b, b.m, &io, NULL)) io_check(&b, &io, "8B (shrunk) B=2 S=12, x (the residual) not 16-byte aligned");
            kiln_model_counters(b.m, &x1);
            expect(x1.tma_fallbacks > x0.tma_fallbacks,
                   "8B (shrunk): the residual x 2 bytes off alignment, yet no fallback was recorded");
            io.in_d[xi] = own;
        }
    }
    io_free(&io);
    kiln_model_sync(b.m);
    bench_free(&b);
    if (raw) cudaFree(raw);
    if (rawx) cudaFree(rawx);
}

static void test_threads(void)
{
    pthread_t t[2];
    for (intptr_t i = 0; i < 2; i++) expect(pthread_create(&t[i], NULL, thread_main, (void *)i) == 0, "pthread_create");
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

int main(void)
{
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&ctx, NULL);
    if (st == KILN_ERR_NO_DEVICE) {
        printf("no CUDA device: skipped (%s)\n", kiln_last_error());
        return 77;
    }
    if (!KOK(st, "context")) return 1;
    printf("device arch %s\n", kiln_context_arch(ctx));
    /* KILN_API_GPU_ONLY=hopper: only the Hopper-template cases (a short device run) */
    const char *only = getenv("KILN_API_GPU_ONLY");
    if (!only || strcmp(only, "hopper")) {
        test_samples(ctx);
        test_graphs(ctx);
        test_decode_vs_prefill(ctx);
        test_device_errors(ctx);
        test_threads();
    }
    test_hopper(ctx);
    kiln_context_free(ctx);
    printf("%d passed, %d failed\n", atomic_load(&g_pass), atomic_load(&g_fail));
    return atomic_load(&g_fail) ? 1 : 0;
}
