/* tests/model/test_pack_gpu.c — weight packing on the device equals packing
 * on the host, bit for bit (runtime/rt_pack_dev.h against rt_pack.h).
 *
 * Every bind-time node of the model samples (small instances: merged Q/K/V and
 * gate/up concats, Qwen's biases) and of a model written for the purpose (a
 * gain folded into a weight as a row scale in bf16 and f32, a bf16 weight
 * scaled by a float32 gain made by other ops (Gemma's 1 + w), a permute of an
 * `x @ w` weight, a slice) is evaluated by rt_pack_eval on the host and by
 * rt_pack_dev_eval on the device from the same random weights; the bytes
 * must be equal. Then the layout changes: the gate/up row interleave and the
 * RoPE row pairs on a device buffer against rt_pack_interleave_rows and
 * rt_pack_rope_pairs on the host. And a node the device does not do (a cast)
 * is refused by rt_pack_dev_eval with a message. Exits 77 without a device. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codegen/cg.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/pass.h"
#include "runtime/rt_launch.h"
#include "runtime/rt_nvrtc.h"
#include "runtime/rt_pack.h"
#include "runtime/rt_pack_dev.h"
#include "pack_compile.h"

static uint64_t rng = 88172645463325252ull;
static float randf(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

typedef struct weights {
    void **host, **dev;
} weights;

static int get_host(void *user, int param, const void **data, char *err, size_t n)
{
    weights *w = user;
    *data = w->host[param];
    return *data ? 0 : (snprintf(err, n, "no weight %d", param), -1);
}

static int get_dev(void *user, int param, const void **data, char *err, size_t n)
{
    weights *w = user;
    *data = w->dev[param];
    return *data ? 0 : (snprintf(err, n, "no weight %d", param), -1);
}

/* Every bind-time node of g: host and device packing agree; returns the count done on the device. */
static int check_graph(const char *name, ir_graph *g, const int64_t *dims, const rt_pack_kernels *k, int *rowscales,
                       int *rowscales_f32, int *permutes, int *refused)
{
    weights w = {calloc((size_t)g->nparams + 1, sizeof(void *)), calloc((size_t)g->nparams + 1, sizeof(void *))};
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *p = g->params[i];
        if (p->op != IR_OP_WEIGHT) continue;
        int64_t shape[IR_MAX_RANK], numel;
        ir_type_shape_at(&p->type, dims, shape, &numel);
        size_t bytes = (size_t)numel * (size_t)ir_dtype_size(p->type.dtype);
        float *f = malloc((size_t)numel * sizeof *f + 1);
        for (int64_t j = 0; j < numel; j++) f[j] = randf();
        w.host[i] = malloc(bytes + 1);
        rt_from_f32(p->type.dtype, f, w.host[i], numel);
        free(f);
        CHECK(cudaMalloc(&w.dev[i], bytes + 1) == cudaSuccess);
        CHECK(cudaMemcpy(w.dev[i], w.host[i], bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    }
    bool *bind = pass_bind_time(g);
    int done = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *nd = g->nodes[i];
        if (!bind[i] || nd->op == IR_OP_WEIGHT || nd->op == IR_OP_CONST) continue;
        char e1[512] = "", e2[512] = "";
        void *hv = NULL, *dv = NULL;
        size_t hb = 0, db = 0;
        if (!rt_pack_dev_supported(g, i, true)) {
            /* refused, and said so */
            CHECK(rt_pack_dev_eval(g, dims, i, get_dev, &w, k, NULL, &dv, &db, e2, sizeof e2) == RT_ERR_INVALID && !dv &&
                  strstr(e2, "not packed on the device"));
            ++*refused;
            continue;
        }
        int r1 = rt_pack_eval(g, dims, i, get_host, &w, false, &hv, &hb, e1, sizeof e1);
        int r2 = rt_pack_dev_eval(g, dims, i, get_dev, &w, k, NULL, &dv, &db, e2, sizeof e2);
        CHECK_MSG(r1 == 0 && r2 == 0, "%s %%%d (%s): host: %s / device: %s", name, i, ir_op_name(nd->op), e1, e2);
        if (r1 == 0 && r2 == 0) {
            unsigned char *back = malloc(db + 1);
            CHECK(cudaMemcpy(back, dv, db, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK_MSG(hb == db && hb > 0 && !memcmp(hv, back, hb), "%s %%%d (%s): device and host packing differ", name, i,
                      ir_op_name(nd->op));
            free(back);
            done++;
            *rowscales += rt_pack_is_rowscale(nd) || rt_pack_is_rowscale_f32(nd, NULL, NULL);
            *rowscales_f32 += rt_pack_is_rowscale_f32(nd, NULL, NULL);
            *permutes += nd->op == IR_OP_PERMUTE;
        }
        free(hv);
        if (dv) cudaFree(dv);
    }
    free(bind);
    for (int i = 0; i < g->nparams; i++) {
        free(w.host[i]);
        if (w.dev[i]) cudaFree(w.dev[i]);
    }
    free(w.host);
    free(w.dev);
    return done;
}

static void check_layouts(void)
{
    enum { ROWS = 24, RB = 6 };
    unsigned char src[ROWS * RB], want[ROWS * RB], got[ROWS * RB];
    for (int i = 0; i < ROWS * RB; i++) src[i] = (unsigned char)(i * 7 + 3);
    void *ds = NULL, *dd = NULL;
    char err[256];
    CHECK(cudaMalloc(&ds, sizeof src) == cudaSuccess && cudaMalloc(&dd, sizeof src) == cudaSuccess);
    CHECK(cudaMemcpy(ds, src, sizeof src, cudaMemcpyHostToDevice) == cudaSuccess);
    rt_pack_interleave_rows(want, src, ROWS / 2, RB);
    CHECK(rt_pack_dev_interleave_rows(dd, ds, ROWS / 2, RB, NULL, err, sizeof err) == RT_OK);
    CHECK(cudaMemcpy(got, dd, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK_MSG(!memcmp(want, got, sizeof got), "interleaved rows differ");
    /* two heads of 8 rotated rows every 10 rows from row 3, in place */
    memcpy(want, src, sizeof src);
    CHECK(rt_pack_rope_pairs(want, ROWS, RB, 3, 10, 2, 8));
    CHECK(rt_pack_dev_rope_pairs(ds, ROWS, RB, 3, 10, 2, 8, NULL, err, sizeof err) == RT_OK);
    CHECK(cudaMemcpy(got, ds, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK_MSG(!memcmp(want, got, sizeof got), "rotated row pairs differ");
    /* a head past the rows: refused before any copy */
    CHECK(rt_pack_dev_rope_pairs(ds, ROWS, RB, 3, 10, 3, 8, NULL, err, sizeof err) == RT_ERR_INTERNAL && strstr(err, "do not fit"));
    cudaFree(ds);
    cudaFree(dd);
}

int main(void)
{
    char why[256];
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || !rt_device_available(why, sizeof why)) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    rt_compile_result cr;
    rt_compile_opts co = {0};
    rt_module *mod = NULL;
    rt_pack_kernels k;
    char err[512];
    if (rt_nvrtc_compile("kiln_pack", cg_template_text("pack.cuh"), &co, RT_TARGET_CUBIN, &cr) != RT_OK ||
        rt_module_load(&mod, cr.code.data, cr.code.size, err, sizeof err) != RT_OK ||
        rt_module_kernel(mod, "kiln_pack_rowscale", &k.rowscale, err, sizeof err) != RT_OK ||
        rt_module_kernel(mod, "kiln_pack_permute", &k.permute, err, sizeof err) != RT_OK) {
        fprintf(stderr, "pack.cuh: %s %s\n", cr.message ? cr.message : "", err);
        return 1;
    }
    rt_compile_result_free(&cr);
    int rowscales = 0, rowscales_f32 = 0, permutes = 0, refused = 0, done = 0;
    const char *samples[] = {"samples/models/llama3_2_1b.kiln", "samples/models/qwen2_5_0_5b.kiln",
                             "samples/models/llama3_8b.kiln"};
    fe_define small[] = {{"NL", "2"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
    for (size_t s = 0; s < sizeof samples / sizeof *samples; s++) {
        arena a;
        arena_init(&a);
        diag_list d;
        diag_list_init(&d, &a);
        ir_graph *g = pack_compile(samples[s], NULL, small, 6, &d);
        CHECK_MSG(g != NULL, "%s does not compile", samples[s]);
        int64_t dims[IR_MAX_SYMS] = {2, 5, 16};
        if (g) done += check_graph(samples[s], g, dims, &k, &rowscales, &rowscales_f32, &permutes, &refused);
        if (g) ir_graph_free(g);
        diag_list_free(&d);
        arena_free(&a);
    }
    /* row scales (a gain folded into a weight) in bf16 and f32, a permute, a slice, and a cast the device does not do */
    const char *txt = "model m {\n dims B\n input x : bf16[B, 64]\n input xf : f32[B, 64]\n"
                      " weight w : bf16[96, 64]\n weight g : bf16[64]\n weight wf : f32[40, 64]\n weight gf : f32[64]\n"
                      " weight u : bf16[64, 48]\n weight c : f32[32, 64]\n"
                      " output y = linear(x, w * g)\n output yf = linear(xf, wf * gf)\n output z = x @ u\n"
                      " output s = linear(x, slice(w, 0, start=16, end=48))\n output q = linear(x, cast(c, bf16))\n"
                      " output yg = linear(x, cast(cast(w, f32) * (1.0 + cast(g, f32)), bf16))\n}\n";
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    ir_graph *g = pack_compile("pack.kiln", txt, NULL, 0, &d);
    CHECK(g != NULL);
    int64_t dims[IR_MAX_SYMS] = {3};
    if (g) {
        done += check_graph("pack.kiln", g, dims, &k, &rowscales, &rowscales_f32, &permutes, &refused);
        ir_graph_free(g);
    }
    diag_list_free(&d);
    arena_free(&a);
    CHECK_MSG(done >= 9 && rowscales >= 3 && rowscales_f32 >= 1 && permutes >= 1 && refused >= 1,
              "packed on the device: %d values, %d row scales (%d by a float32 gain), %d permutes; %d refused", done,
              rowscales, rowscales_f32, permutes, refused);
    printf("device packing: %d values equal the host's (%d row scales, %d permutes), %d left to the host\n", done,
           rowscales, permutes, refused);
    check_layouts();
    rt_module_free(mod);
    return CHECK_DONE();
}
