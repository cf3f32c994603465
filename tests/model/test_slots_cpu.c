/* tests/model/test_slots_cpu.c — the slot table without a GPU.
 *   1. bookkeeping (rt_slots): a sequence opens the highest free slot and the
 *      lowest free row; closing frees both; a full table and a bad id fail;
 *      the table a call reads gives rows without a sequence distinct free
 *      slots, never a live one, and refuses fewer rows than are used.
 *   2. the interpreter's reference (ir_interp_run_slots) on a one-layer
 *      Llama: a batch of 2 in slots {3, 1} of 4 gives each row the logits and
 *      cache rows of that sequence run alone (B = 1) on its slot's rows, and
 *      leaves slots 0 and 2 as they were; duplicate and out-of-range slots
 *      fail.
 *   3. codegen: in the decode and prefill kernels of the two-layer Llama
 *      (sm_90a: GEMV and wgmma QKV epilogues, decode and wgmma attention, and
 *      their fallbacks), every kernel that touches a state has the "slot"
 *      field and reads the rows through kiln_slot. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codegen/cg.h"
#include "runtime/rt_wmodel.h"
#include "src/compile.h"

#define MODEL "samples/models/llama3_2_1b.kiln"

static void bookkeeping(void)
{
    rt_slots t;
    CHECK(rt_slots_init(&t, 0) == -1);
    CHECK(rt_slots_init(&t, 4) == 0);
    int r0, r1, r2, r3, rx;
    CHECK(rt_slots_open(&t, &r0) == 3 && r0 == 0);
    CHECK(rt_slots_open(&t, &r1) == 2 && r1 == 1);
    CHECK(rt_slots_open(&t, &r2) == 1 && r2 == 2);
    CHECK(rt_slots_rows(&t) == 3 && t.live == 3);
    int32_t tab[4];
    CHECK(rt_slots_table(&t, 2, tab) == -1); /* row 2 runs a sequence */
    CHECK(rt_slots_table(&t, 4, tab) == 0 && tab[0] == 3 && tab[1] == 2 && tab[2] == 1 && tab[3] == 0);
    CHECK(rt_slots_close(&t, 2) == 0 && rt_slots_close(&t, 2) == -1 && rt_slots_close(&t, 9) == -1 &&
          rt_slots_close(&t, -1) == -1);
    CHECK(rt_slots_row(&t, 2) == -1 && rt_slots_row(&t, 3) == 0 && rt_slots_rows(&t) == 3);
    /* row 1 is a hole: it and the padding row take the free slots 0 and 2, not 3 or 1 */
    CHECK(rt_slots_table(&t, 4, tab) == 0 && tab[0] == 3 && tab[2] == 1 && tab[1] == 0 && tab[3] == 2);
    CHECK(rt_slots_open(&t, &r3) == 2 && r3 == 1); /* the freed slot and row again */
    CHECK(rt_slots_open(&t, &rx) == 0 && rx == 3);
    CHECK(rt_slots_open(&t, &rx) == -1 && t.live == 4); /* full */
    CHECK(rt_slots_close(&t, 3) == 0 && rt_slots_rows(&t) == 4);
    CHECK(rt_slots_table(&t, 4, tab) == 0 && tab[0] == 3 && tab[1] == 2 && tab[2] == 1 && tab[3] == 0);
    rt_slots_free(&t);
}

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

/* params at dims (states with `rows` rows), random */
static bool alloc_params(const ir_graph *g, const int64_t *dims, int rows, ir_tensor *p, int V, int T, int S)
{
    for (int i = 0; i < g->nparams; i++) {
        const ir_node *n = g->params[i];
        int64_t shape[IR_MAX_RANK], numel;
        if (!ir_type_shape_at(&n->type, dims, shape, &numel)) return false;
        if (n->op == IR_OP_STATE) shape[0] = rows;
        if (!ir_tensor_alloc(&p[i], n->type.dtype, n->type.rank, shape)) return false;
        int64_t k = ir_tensor_numel(&p[i]);
        for (int64_t j = 0; j < k; j++) {
            if (p[i].i) p[i].i[j] = !strcmp(n->name, "pos") ? (int32_t)((j * 3) % (T - S + 1)) : (int32_t)((j * 7 + 3) % V);
            else p[i].f[j] = n->op == IR_OP_WEIGHT ? 0.2f * frand() : n->op == IR_OP_STATE ? frand() : 0.f;
        }
    }
    return true;
}

static void interp_slots(void)
{
    char err[2048];
    kc_define defs[] = {{"NL", "1"}, {"V", "64"}, {"D", "64"}, {"H", "4"}, {"KV", "2"}, {"F", "128"}};
    kc_options o = {.name = MODEL, .defines = defs, .ndefines = 6};
    kc_unit *u = NULL;
    CHECK(kc_open(&o, NULL, &u, err, sizeof err) == RT_OK);
    if (!u || kc_parse(u, err, sizeof err) != RT_OK) {
        CHECK_MSG(0, "parse: %s", err);
        kc_free(u);
        return;
    }
    const ir_graph *g = kc_written(u);
    const int NS = 4, B = 2, S = 3, T = 8, V = 64;
    int64_t dims[IR_MAX_SYMS] = {B, S, T}, d1[IR_MAX_SYMS] = {1, S, T};
    ir_tensor *p = calloc((size_t)g->nparams, sizeof *p), *p1 = calloc((size_t)g->nparams, sizeof *p1);
    ir_tensor *init = calloc((size_t)g->nparams, sizeof *init);
    CHECK(p && p1 && init && alloc_params(g, dims, NS, p, V, T, S));
    for (int i = 0; i < g->nparams; i++) { /* the states as they start */
        if (g->params[i]->op != IR_OP_STATE) continue;
        CHECK(ir_tensor_alloc(&init[i], p[i].dtype, p[i].rank, p[i].shape));
        memcpy(init[i].f, p[i].f, (size_t)ir_tensor_numel(&p[i]) * sizeof(float));
    }
    const int32_t slots[2] = {3, 1};
    ir_tensor out[1];
    int rc = ir_interp_run_slots(g, dims, p, slots, B, out, err, sizeof err);
    CHECK_MSG(rc == 0, "slot run: %s", err);
    for (int b = 0; b < B && rc == 0; b++) {
        /* sequence b alone: its inputs' row b, the states' row slots[b] */
        for (int i = 0; i < g->nparams; i++) {
            const ir_node *n = g->params[i];
            if (n->op == IR_OP_WEIGHT) {
                p1[i] = p[i];
                continue;
            }
            ir_tensor *src = n->op == IR_OP_STATE ? &init[i] : &p[i];
            int row = n->op == IR_OP_STATE ? slots[b] : b;
            int64_t shape[IR_MAX_RANK];
            memcpy(shape, src->shape, sizeof shape);
            shape[0] = 1;
            CHECK(ir_tensor_alloc(&p1[i], src->dtype, src->rank, shape));
            int64_t w = ir_tensor_numel(src) / src->shape[0];
            if (src->f) memcpy(p1[i].f, src->f + row * w, (size_t)w * sizeof(float));
            else memcpy(p1[i].i, src->i + row * w, (size_t)w * sizeof(int32_t));
        }
        ir_tensor o1[1];
        CHECK_MSG(ir_interp_run(g, d1, p1, o1, err, sizeof err) == 0, "alone: %s", err);
        int64_t w = ir_tensor_numel(&o1[0]);
        double worst = 0;
        for (int64_t j = 0; j < w; j++) worst = fmax(worst, fabs(o1[0].f[j] - out[0].f[b * w + j]));
        CHECK_MSG(worst == 0, "sequence %d: logits differ from the run alone by %g", b, worst);
        for (int i = 0; i < g->nparams; i++) {
            if (g->params[i]->op != IR_OP_STATE) continue;
            int64_t sw = ir_tensor_numel(&p1[i]);
            CHECK_MSG(!memcmp(p1[i].f, p[i].f + slots[b] * sw, (size_t)sw * sizeof(float)),
                      "sequence %d: state %s's slot %d differs from the run alone", b, g->params[i]->name, slots[b]);
        }
        for (int i = 0; i < g->nparams; i++)
            if (g->params[i]->op != IR_OP_WEIGHT) ir_tensor_free(&p1[i]);
        ir_tensor_free(&o1[0]);
    }
    for (int i = 0; i < g->nparams; i++) { /* slots 0 and 2: untouched */
        if (g->params[i]->op != IR_OP_STATE) continue;
        int64_t sw = ir_tensor_numel(&p[i]) / NS;
        for (int sl = 0; sl < NS; sl += 2)
            CHECK_MSG(!memcmp(p[i].f + sl * sw, init[i].f + sl * sw, (size_t)sw * sizeof(float)),
                      "state %s: slot %d written", g->params[i]->name, sl);
    }
    if (rc == 0) ir_tensor_free(&out[0]);
    const int32_t dup[2] = {1, 1}, far[2] = {0, 4};
    CHECK(ir_interp_run_slots(g, dims, p, dup, B, out, err, sizeof err) != 0 && strstr(err, "given twice"));
    CHECK(ir_interp_run_slots(g, dims, p, far, B, out, err, sizeof err) != 0 && strstr(err, "out of range"));
    for (int i = 0; i < g->nparams; i++) {
        ir_tensor_free(&p[i]);
        ir_tensor_free(&init[i]);
    }
    free(p);
    free(p1);
    free(init);
    kc_free(u);
}

static int check_kernel(const ir_graph *g, const cg_kernel *K)
{
    bool state = false, slot = false;
    for (int i = 0; i < K->nargs; i++) {
        const cg_arg *a = &K->args[i];
        if (a->kind == CG_ARG_SLOTS) slot = !strcmp(a->field, "slot");
        if (a->kind == CG_ARG_STATE || (a->kind == CG_ARG_PARAM && g->params[a->index]->op == IR_OP_STATE)) state = true;
    }
    if (!state) return 0;
    CHECK_MSG(slot && K->source && strstr(K->source, "kiln_slot("), "kernel %s touches a state without the slot table",
              K->name);
    return 1;
}

static void codegen(void)
{
    char err[2048];
    kc_define defs[] = {{"NL", "2"}, {"V", "512"}, {"D", "256"}, {"H", "4"}, {"KV", "2"}, {"F", "512"}};
    kc_options o = {.name = MODEL, .defines = defs, .ndefines = 6};
    kc_unit *u = NULL;
    CHECK(kc_open(&o, NULL, &u, err, sizeof err) == RT_OK);
    if (!u || kc_parse(u, err, sizeof err) != RT_OK || kc_fuse(u, err, sizeof err) != RT_OK) {
        CHECK_MSG(0, "compile: %s", err);
        kc_free(u);
        return;
    }
    const ir_graph *g = kc_fused(u);
    cg_target tg;
    kc_tool_target("sm_90a", &tg);
    int64_t shapes[][3] = {{1, 1, 64}, {4, 1, 64}, {2, 128, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        cg_options co = {.dims = shapes[s], .target = &tg};
        cg_kernel *ks = NULL;
        int nk = 0, touched = 0;
        CHECK_MSG(cg_emit_all_ex(g, &co, &ks, &nk, err, sizeof err) == 0, "emit: %s", err);
        for (int i = 0; i < nk; i++) {
            touched += check_kernel(g, &ks[i]);
            if (ks[i].fallback) touched += check_kernel(g, ks[i].fallback);
        }
        printf("B=%lld S=%lld: %d kernels, %d of them (and fallbacks) touch the caches\n", (long long)shapes[s][0],
               (long long)shapes[s][1], nk, touched);
        CHECK(touched >= 4); /* two layers: a cache write and an attention each, at least */
        cg_kernels_free(ks, nk);
    }
    kc_free(u);
}

int main(void)
{
    bookkeeping();
    interp_slots();
    codegen();
    return CHECK_DONE();
}
