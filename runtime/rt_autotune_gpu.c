/* runtime/rt_autotune_gpu.c — timing one candidate kernel on the device for
 * the tuner (rt_autotune.h).
 *
 * The kernel is compiled through the context's cache and loaded on its own.
 * Its operands live in one scratch allocation: every pointer field gets the
 * bytes of its node at the dims (plus its element offset), workspaces their
 * size; floating-point storage is filled with random values of magnitude
 * [0.5, 1) (a small fill kernel: tensor-core power, and so the clocks, depend
 * on the data), integer storage (positions, token ids) and the counters with
 * zeros, so that every index the epilogue computes stays in range. The launch is the one the run makes (cg_launch_eval, the
 * tensor maps encoded for the scratch pointers, programmatic serialization
 * off); three warm-ups, then the median of RT_TUNE_LAUNCHES launches, each
 * between two events on the context's stream. The cuBLASLt candidate
 * (cg_kernel.lt.chosen) is timed the same way: its plan made for the same
 * scratch operands (workspace: its "lt_ws" field), its matmul launched. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_autotune.h"
#include "runtime/rt_cublaslt.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_model_internal.h"
#include "runtime/rt_util.h"

#define RT_TUNE_LAUNCHES 15

/* Random bits for the operands (tensor-core power, and so the clocks, depend on the data):
 * values of magnitude [0.5, 1) with random signs and mantissas, per element size. */
typedef struct fill_args {
    void *p;
    unsigned long long n;
    int esize, f16;
    unsigned long long seed;
} fill_args;
static const char FILL_SRC[] =
    "struct fill_args { void *p; unsigned long long n; int esize, f16; unsigned long long seed; };\n"
    "extern \"C\" __global__ void kiln_tune_fill(const fill_args a)\n"
    "{\n"
    "    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < a.n;\n"
    "         i += (unsigned long long)gridDim.x * blockDim.x) {\n"
    "        unsigned long long z = (i + a.seed * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;\n"
    "        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
    "        z ^= z >> 31;\n"
    "        const unsigned h = (unsigned)z;\n"
    "        if (a.esize == 4) ((unsigned *)a.p)[i] = (h & 0x80000000u) | 0x3F000000u | (h & 0x7FFFFFu);\n"
    "        else ((unsigned short *)a.p)[i] = (unsigned short)((h & 0x8000u) | (a.f16 ? 0x3800u | (h & 0x3FFu) : 0x3F00u | (h & 0x7Fu)));\n"
    "    }\n"
    "}\n";

bool rt_tune_device_of(rt_ctx *ctx, rt_tune_device *out)
{
    memset(out, 0, sizeof *out);
    if (!ctx || !rt_ctx_has_device(ctx)) return false;
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, rt_ctx_device(ctx)) != cudaSuccess) return false;
    snprintf(out->name, sizeof out->name, "%.127s", p.name);
    out->cc = p.major * 10 + p.minor;
    out->sms = p.multiProcessorCount;
    return cudaDriverGetVersion(&out->driver) == cudaSuccess;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The node whose storage a pointer field is (-1: a workspace or none). */
static const ir_node *arg_node(const ir_graph *g, const cg_arg *a)
{
    if (a->kind == CG_ARG_PARAM && a->index >= 0 && a->index < g->nparams) return g->params[a->index];
    return a->node >= 0 && a->node < g->nnodes ? g->nodes[a->node] : NULL;
}

double rt_tuner_time_gpu(rt_ctx *ctx, const cg_kernel *k, const ir_graph *g, const int64_t *dims, char *err, size_t n)
{
    if (!ctx || !rt_ctx_has_device(ctx)) {
        rt_fail(RT_ERR_NO_DEVICE, err, n, "autotune: no device");
        return -1;
    }
    _Alignas(64) unsigned char param[8 * 256 + 128 * CG_MAX_TMAPS];
    if (k->param_size > sizeof param || k->param_prefix + k->args_size > sizeof param) {
        rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: %zu bytes of parameter", k->name, k->param_size);
        return -1;
    }
    size_t *off = calloc((size_t)k->nargs + 1, sizeof *off), *bytes = calloc((size_t)k->nargs + 1, sizeof *bytes);
    rt_compile_result res = {0};
    rt_module *mod = NULL;
    rt_kernel kern;
    unsigned char *slab = NULL;
    cudaEvent_t ev[2 * RT_TUNE_LAUNCHES];
    int nev = 0;
    double result = -1;
    rt_status st = off && bytes ? RT_OK : rt_fail(RT_ERR_NOMEM, err, n, "out of memory");
    /* the operands' sizes, packed into one allocation */
    size_t total = 0;
    for (int i = 0; st == RT_OK && i < k->nargs; i++) {
        const cg_arg *a = &k->args[i];
        int64_t b = 0;
        if (a->kind == CG_ARG_SEQS) { /* zeros are no table: not timed */
            st = rt_fail(RT_ERR_INVALID, err, n, "kernel %s reads a packed run's sequence table: not timed", k->name);
            break;
        }
        if (a->kind == CG_ARG_SCALAR || a->kind == CG_ARG_NULL || a->kind == CG_ARG_SLOTS) continue;
        if (a->kind == CG_ARG_WORKSPACE) {
            if (!cg_arg_eval(a, dims, &b) || b < 0) st = rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: workspace %s", k->name, a->field);
        } else {
            const ir_node *nd = arg_node(g, a);
            int64_t numel = 0, eoff = 0;
            if (!nd || !ir_type_shape_at(&nd->type, dims, NULL, &numel) ||
                (a->elem_offset.nterms && !ir_dim_value(&a->elem_offset, dims, &eoff)))
                st = rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: the size of %s does not evaluate", k->name, a->field);
            else b = (numel + eoff) * ir_dtype_size(nd->type.dtype);
        }
        off[i] = total;
        bytes[i] = (size_t)b;
        total += RT_ALIGN_UP(b > 0 ? b : 1);
    }
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaMalloc((void **)&slab, total ? total : 1), "autotune operands", err, n);
    memset(param, 0, k->param_size);
    unsigned char *args = param + k->param_prefix;
    for (int i = 0; st == RT_OK && i < k->nargs; i++) {
        const cg_arg *a = &k->args[i];
        uint64_t val = 0;
        if (a->kind == CG_ARG_SCALAR) {
            int64_t x;
            if (!cg_arg_eval(a, dims, &x)) st = rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: scalar %s", k->name, a->field);
            val = (uint64_t)x;
        } else if (a->kind != CG_ARG_NULL && a->kind != CG_ARG_SLOTS) { /* no slot table: identity */
            const ir_node *nd = a->kind == CG_ARG_WORKSPACE ? NULL : arg_node(g, a);
            st = RT_CUDA_CHECK(cudaMemsetAsync(slab + off[i], 0, bytes[i], (cudaStream_t)ctx->stream),
                               "autotune operands", err, n);
            unsigned char *p = slab + off[i];
            int64_t eoff = 0;
            if (nd && a->elem_offset.nterms && ir_dim_value(&a->elem_offset, dims, &eoff)) p += eoff * ir_dtype_size(nd->type.dtype);
            val = (uint64_t)(uintptr_t)p;
        }
        if (a->offset + 8 > k->args_size) st = rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: field outside KilnArgs", k->name);
        else memcpy(args + a->offset, &val, 8);
    }
    const bool lt = k->lt.chosen; /* the cuBLASLt candidate: its matmul on the same operands */
    rt_lt_plan *plan = NULL;
    if (st == RT_OK && lt) st = rt_lt_prepare(&plan, k, dims, args, err, n);
    bool describable = true;
    if (st == RT_OK && k->ntmaps && !lt) st = rt_encode_tmaps(k, dims, dims, param, args, &describable, err, n); /* states allocated at dims */
    if (st == RT_OK && !describable) st = rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: scratch operands TMA cannot describe", k->name);
    /* compile (through the cache) and load */
    rt_compile_opts co = {.arch = ctx->arch};
    if (st == RT_OK && !lt) {
        st = rt_cache_compile(ctx->cache, k->name, k->source, &co, ctx->no_cache ? RT_CACHE_NO_CACHE : 0, &res, NULL);
        if (st != RT_OK) rt_fail(st, err, n, "autotune: kernel %s: %s", k->name, res.message ? res.message : rt_status_str(st));
    }
    if (st == RT_OK && !lt) st = rt_module_load(&mod, res.code.data, res.code.size, err, n);
    if (st == RT_OK && !lt) st = rt_module_kernel(mod, k->name, &kern, err, n);
    if (st == RT_OK && !lt && kern.param_size != k->param_size)
        st = rt_fail(RT_ERR_INTERNAL, err, n, "kernel %s: parameter size differs in the cubin", k->name);
    /* any dynamic shared memory: with the kernel's static bytes it may pass the default 48 KB (as rt_variant.c) */
    if (st == RT_OK && !lt && k->launch.smem > 0)
        st = rt_kernel_set_max_smem(&kern, (size_t)k->launch.smem, err, n);
    unsigned grid[3] = {0, 0, 0}, block = 0;
    size_t smem = 0;
    char lerr[512];
    if (st == RT_OK && !lt && !cg_launch_eval(k, dims, grid, &block, &smem, lerr, sizeof lerr))
        st = rt_fail(RT_ERR_INVALID, err, n, "kernel %s: %s", k->name, lerr);
    if (st == RT_OK && !lt && (!grid[0] || !grid[1] || !grid[2]))
        st = rt_fail(RT_ERR_INVALID, err, n, "kernel %s: empty grid", k->name);
    /* floating-point operands: random (the fill kernel, compiled through the cache too) */
    rt_compile_result fres = {0};
    rt_module *fmod = NULL;
    rt_kernel fill;
    if (st == RT_OK) {
        st = rt_cache_compile(ctx->cache, "kiln_tune_fill", FILL_SRC, &co, ctx->no_cache ? RT_CACHE_NO_CACHE : 0, &fres, NULL);
        if (st != RT_OK) rt_fail(st, err, n, "autotune: the fill kernel: %s", fres.message ? fres.message : rt_status_str(st));
    }
    if (st == RT_OK) st = rt_module_load(&fmod, fres.code.data, fres.code.size, err, n);
    if (st == RT_OK) st = rt_module_kernel(fmod, "kiln_tune_fill", &fill, err, n);
    for (int i = 0; st == RT_OK && i < k->nargs; i++) {
        const cg_arg *a = &k->args[i];
        const ir_node *nd = a->kind == CG_ARG_WORKSPACE || a->kind == CG_ARG_SCALAR || a->kind == CG_ARG_NULL || a->kind == CG_ARG_SLOTS ? NULL : arg_node(g, a);
        if (!nd || !(nd->type.dtype == IR_BF16 || nd->type.dtype == IR_F16 || nd->type.dtype == IR_F32)) continue;
        fill_args fa = {slab + off[i], bytes[i] / (size_t)ir_dtype_size(nd->type.dtype), (int)ir_dtype_size(nd->type.dtype),
                        nd->type.dtype == IR_F16, (unsigned long long)i + 1};
        st = rt_launch(&fill, (rt_dim3){1024, 1, 1}, (rt_dim3){256, 1, 1}, 0, ctx->stream, &fa, sizeof fa, err, n);
    }
    for (; st == RT_OK && nev < 2 * RT_TUNE_LAUNCHES; nev++) st = RT_CUDA_CHECK(cudaEventCreate(&ev[nev]), "autotune events", err, n);
    rt_dim3 gd = {grid[0], grid[1], grid[2]}, bd = {block, 1, 1};
    void *stream = ctx->stream;
#define LAUNCH() (lt ? rt_lt_launch(plan, k, args, stream, err, n) \
                    : rt_launch_ex(&kern, gd, bd, smem, stream, param, k->param_size, 0, err, n))
    for (int i = 0; st == RT_OK && i < 3; i++) st = LAUNCH();
    for (int i = 0; st == RT_OK && i < RT_TUNE_LAUNCHES; i++) {
        st = RT_CUDA_CHECK(cudaEventRecord(ev[2 * i], (cudaStream_t)stream), "autotune events", err, n);
        if (st == RT_OK) st = LAUNCH();
        if (st == RT_OK) st = RT_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], (cudaStream_t)stream), "autotune events", err, n);
    }
    if (st == RT_OK) st = RT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream), "autotune launches", err, n);
    if (st == RT_OK) {
        float t[RT_TUNE_LAUNCHES];
        for (int i = 0; st == RT_OK && i < RT_TUNE_LAUNCHES; i++)
            st = RT_CUDA_CHECK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]), "autotune events", err, n);
        if (st == RT_OK) {
            qsort(t, RT_TUNE_LAUNCHES, sizeof t[0], cmp_float);
            result = 1e3 * (double)t[RT_TUNE_LAUNCHES / 2];
        }
    }
    if (st != RT_OK) (void)cudaStreamSynchronize((cudaStream_t)stream);
    for (int i = 0; i < nev; i++) (void)cudaEventDestroy(ev[i]);
#undef LAUNCH
    if (slab) (void)cudaFree(slab);
    rt_lt_plan_free(plan);
    rt_module_free(mod);
    rt_module_free(fmod);
    rt_compile_result_free(&res);
    rt_compile_result_free(&fres);
    free(off);
    free(bytes);
    return st == RT_OK ? result : -1;
}
