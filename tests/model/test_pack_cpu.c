/* tests/model/test_pack_cpu.c — which packed values are computed on the device
 * (rt_pack_dev_supported, runtime/rt_pack_dev.h) and the weight-upload queue
 * (rt_upload_*, runtime/rt_wmodel.h), without a GPU.
 *
 * Every bind-time node of the whole-model samples (merged Q/K/V and gate/up,
 * Qwen's biases, the norms' gains folded into the projections) packs on the
 * device; a folded gain (a row scale) in bf16 or f32 and a permute need
 * pack.cuh's kernels; a cast, an
 * f16 row scale and a value with either under it stay on the host. The upload
 * queue started for nothing starts no thread, skips empty copies, refuses
 * bytes it was not told of, runs nothing and frees what it holds (its
 * threads need a device: test_model_gpu loads its checkpoints through them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/pass.h"
#include "runtime/rt_pack.h"
#include "runtime/rt_pack_dev.h"
#include "pack_compile.h"
#include "runtime/rt_wmodel.h"

/* Deterministic weights for host packing: element i of param p is a value in about [-2, 2]
 * (not a multiple of a power of two, so that products round); made once per param. */
typedef struct host_weights {
    const ir_graph *g;
    void *buf[64];
} host_weights;

static int host_weight(void *user, int param, const void **data, char *err, size_t n)
{
    host_weights *h = user;
    const ir_node *p = h->g->params[param];
    int64_t shape[IR_MAX_RANK], numel, dims[IR_MAX_SYMS] = {3};
    if (param >= 64 || !ir_type_shape_at(&p->type, dims, shape, &numel)) return (snprintf(err, n, "no weight"), -1);
    if (!h->buf[param]) {
        float *f = malloc((size_t)numel * sizeof *f + 1);
        h->buf[param] = malloc((size_t)numel * (size_t)ir_dtype_size(p->type.dtype) + 1);
        if (!f || !h->buf[param]) return (free(f), snprintf(err, n, "out of memory"), -1);
        for (int64_t i = 0; i < numel; i++) f[i] = (float)(((i * 7919 + param * 104729) % 4001) - 2000) * 0.0009765625f * 1.0371f;
        rt_from_f32(p->type.dtype, f, h->buf[param], numel);
        free(f);
    }
    *data = h->buf[param];
    return 0;
}

/* The first mul of dtype t that scales a weight (w * g): not the one inside a float32 row scale. */
static int find_weight_mul(const ir_graph *g, ir_dtype t)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->op == IR_OP_MUL && g->nodes[i]->type.dtype == t && g->nodes[i]->inputs[0]->op == IR_OP_WEIGHT)
            return i;
    return -1;
}

static int find(const ir_graph *g, ir_op op, ir_dtype t, int nth)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->op == op && g->nodes[i]->type.dtype == t && nth-- == 0) return i;
    return -1;
}

int main(void)
{
    const char *samples[] = {"samples/models/llama3_2_1b.kiln", "samples/models/qwen2_5_0_5b.kiln",
                             "samples/models/llama3_8b.kiln"};
    fe_define small[] = {{"NL", "2"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
    int values = 0, kernels = 0, rowscales = 0;
    for (size_t s = 0; s < sizeof samples / sizeof *samples; s++) {
        arena a;
        arena_init(&a);
        diag_list d;
        diag_list_init(&d, &a);
        ir_graph *g = pack_compile(samples[s], NULL, small, 6, &d);
        CHECK_MSG(g != NULL, "%s does not compile", samples[s]);
        if (g) {
            bool *bind = pass_bind_time(g);
            for (int i = 0; i < g->nnodes; i++) {
                const ir_node *nd = g->nodes[i];
                if (!bind[i] || nd->op == IR_OP_WEIGHT || nd->op == IR_OP_CONST) continue;
                CHECK_MSG(rt_pack_dev_supported(g, i, true), "%s %%%d (%s) is not packed on the device", samples[s], i,
                          ir_op_name(nd->op));
                values++;
                kernels += !rt_pack_dev_supported(g, i, false);
                rowscales += rt_pack_is_rowscale(nd);
            }
            free(bind);
            CHECK(!rt_pack_dev_supported(g, -1, true) && !rt_pack_dev_supported(g, g->nnodes, true));
            ir_graph_free(g);
        }
        diag_list_free(&d);
        arena_free(&a);
    }
    /* the norms' gains folded into the projections: row scales, which need the kernels */
    CHECK_MSG(values >= 12 && rowscales >= 6 && kernels >= rowscales, "bind-time values in the samples: %d (%d row scales, "
              "%d needing kernels)", values, rowscales, kernels);

    const char *txt = "model m {\n dims B\n input x : bf16[B, 64]\n input xf : f32[B, 64]\n input xh : f16[B, 64]\n"
                      " weight w : bf16[96, 64]\n weight g : bf16[64]\n weight wf : f32[40, 64]\n weight gf : f32[64]\n"
                      " weight wh : f16[40, 64]\n weight gh : f16[64]\n weight u : bf16[64, 48]\n weight c : f32[32, 64]\n"
                      " output y = linear(x, w * g)\n output yf = linear(xf, wf * gf)\n output yh = linear(xh, wh * gh)\n"
                      " output z = x @ u\n output q = linear(x, cast(c, bf16))\n"
                      " output yg = linear(x, cast(cast(w, f32) * (1.0 + cast(g, f32)), bf16))\n"
                      " output yhg = linear(xh, cast(cast(wh, f32) * (1.0 + cast(gh, f32)), f16))\n}\n";
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    ir_graph *g = pack_compile("pack.kiln", txt, NULL, 0, &d);
    CHECK(g != NULL);
    if (g) {
        int rs = find_weight_mul(g, IR_BF16), rsf = find_weight_mul(g, IR_F32), rsh = find_weight_mul(g, IR_F16);
        int perm = find(g, IR_OP_PERMUTE, IR_BF16, 0), cast = find(g, IR_OP_CAST, IR_BF16, 0);
        int cat = find(g, IR_OP_CONCAT, IR_BF16, 0); /* the merged projections of x: the cast is under it */
        CHECK(rs >= 0 && rsf >= 0 && rsh >= 0 && perm >= 0 && cast >= 0 && cat >= 0);
        if (rs >= 0 && rsf >= 0 && rsh >= 0 && perm >= 0 && cast >= 0 && cat >= 0) {
            CHECK(rt_pack_is_rowscale(g->nodes[rs]) && rt_pack_is_rowscale(g->nodes[rsh]));
            CHECK(rt_pack_dev_supported(g, rs, true) && !rt_pack_dev_supported(g, rs, false));
            CHECK(rt_pack_dev_supported(g, rsf, true) && !rt_pack_dev_supported(g, rsf, false));
            CHECK(!rt_pack_dev_supported(g, rsh, true)); /* f16 rounding is the host's */
            CHECK(rt_pack_dev_supported(g, perm, true) && !rt_pack_dev_supported(g, perm, false));
            CHECK(!rt_pack_dev_supported(g, cast, true) && !rt_pack_dev_supported(g, cat, true));
            CHECK(rt_pack_is_movement(g->nodes[cat]) && !rt_pack_is_movement(g->nodes[cast]));
        }
        /* Gemma's form: a bf16 weight times a float32 gain made by other ops, rounded once to bf16: on the
         * device (the gain on the host); in f16 on the host; the host's row scale equals the interpreter's */
        int yg = -1, yhg = -1;
        for (int i = 0; i < g->nnodes; i++) {
            const ir_node *w = NULL, *gn = NULL;
            if (!rt_pack_is_rowscale_f32(g->nodes[i], &w, &gn)) continue;
            CHECK(w->op == IR_OP_WEIGHT && gn->op == IR_OP_ADD);
            if (g->nodes[i]->type.dtype == IR_BF16) yg = i;
            else yhg = i;
        }
        CHECK(yg >= 0 && yhg >= 0);
        if (yg >= 0 && yhg >= 0) {
            CHECK(rt_pack_dev_supported(g, yg, true) && !rt_pack_dev_supported(g, yg, false));
            CHECK(!rt_pack_dev_supported(g, yhg, true));
            CHECK(!rt_pack_is_rowscale(g->nodes[yg]) && !rt_pack_is_rowscale_f32(g->nodes[cast], NULL, NULL));
            int64_t dims[IR_MAX_SYMS] = {3};
            host_weights hw = {g, {NULL}};
            for (int v = 0; v < 2; v++) {
                const int node = v ? yhg : yg;
                void *fast = NULL, *ref = NULL;
                size_t fb = 0, rb = 0;
                char e1[256] = "", e2[256] = "";
                rt_status s1 = rt_pack_eval(g, dims, node, host_weight, &hw, false, &fast, &fb, e1, sizeof e1);
                rt_status s2 = rt_pack_eval(g, dims, node, host_weight, &hw, true, &ref, &rb, e2, sizeof e2);
                CHECK_MSG(s1 == RT_OK && s2 == RT_OK, "row scale by a float32 gain: %s / %s", e1, e2);
                CHECK_MSG(fb == rb && fb > 0 && fast && ref && !memcmp(fast, ref, fb),
                          "the %s row scale by a float32 gain differs from the interpreter's", v ? "f16" : "bf16");
                free(fast);
                free(ref);
            }
            for (int i = 0; i < 64; i++) free(hw.buf[i]);
        }
        ir_graph_free(g);
    }
    diag_list_free(&d);
    arena_free(&a);

    /* the upload queue: nothing announced, nothing started, nothing to run; more than announced is refused */
    rt_upload up;
    char err[256] = "";
    char buf[64];
    CHECK(rt_upload_begin(&up, 0, 0, err, sizeof err) == RT_OK && up.nworkers == 0);
    CHECK(rt_upload_add(&up, buf, buf, -1, 0, 0, "empty", err, sizeof err) == RT_OK && up.njobs == 0);
    CHECK(rt_upload_add(&up, buf, buf, -1, 0, 8, "t", err, sizeof err) == RT_ERR_INTERNAL && strstr(err, "more bytes"));
    CHECK(rt_upload_run(&up, err, sizeof err) == RT_OK);
    rt_upload_end(&up);
    CHECK(up.njobs == 0 && up.jobs == NULL && up.total == 0 && up.workers == NULL);
    return CHECK_DONE();
}
