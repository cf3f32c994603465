/* tests/codegen/test_cg_expr.c — the expression emitter and the families'
 * hooks on small fused graphs built with the IR builder: the generated text
 * of broadcast index math, views, every elementwise op, constants, causal
 * masks, row hooks (fused residual), matmul epilogues (bias, residual,
 * SwiGLU), attention arguments, the generic fallback — and every kernel
 * built here compiles with NVRTC for sm_90a with an empty log. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codegen/cg.h"
#include "runtime/rt_nvrtc.h"

static const src_loc L0 = {0};

/* kernels to compile at the end */
static cg_kernel kept[128];
static int nkept;

static ir_type ty(ir_dtype t, int rank, ...)
{
    ir_type r;
    memset(&r, 0, sizeof r);
    r.dtype = t;
    r.rank = rank;
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) {
        int v = va_arg(ap, int);
        r.dims[i] = v < 0 ? ir_dim_sym(-v - 1) : ir_dim_const(v); /* -1 = sym 0 (B), -2 = sym 1 (S) */
    }
    va_end(ap);
    return r;
}

static ir_graph *new_graph(void)
{
    ir_graph *g = ir_graph_new("t");
    ir_graph_add_sym(g, "B");
    ir_graph_add_sym(g, "S");
    ir_graph_add_sym(g, "T");
    return g;
}

static ir_node *in(ir_graph *g, const char *name, ir_type t) { return ir_param(g, IR_OP_INPUT, name, &t, L0); }
static ir_node *wt(ir_graph *g, const char *name, ir_type t) { return ir_param(g, IR_OP_WEIGHT, name, &t, L0); }

/* Emits group k; keeps it for the NVRTC pass; returns its generated text. */
static const char *emit(const ir_graph *g, int k, const char *what, cg_kernel **out)
{
    if (nkept == (int)(sizeof kept / sizeof kept[0])) return "";
    char err[512];
    cg_kernel *kk = &kept[nkept];
    int rc = cg_emit_kernel(g, k, kk, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", what, err);
    if (rc != 0) return "";
    nkept++;
    if (out) *out = kk;
    return kk->generated;
}

#define HAS(text, snippet) CHECK_MSG(strstr((text), (snippet)) != NULL, "missing '%s' in:\n%s", (snippet), (text))

/* y = op(x[, x2]) as one elementwise kernel */
static void test_op(ir_op op, bool gelu_tanh, const char *snippet)
{
    ir_graph *g = new_graph();
    ir_node *x = in(g, "x", ty(IR_F32, 2, -1, 8)), *x2 = in(g, "x2", ty(IR_F32, 2, -1, 8)), *y;
    if (op == IR_OP_GELU) y = ir_gelu(g, x, gelu_tanh, L0);
    else if (op == IR_OP_CAST) y = ir_cast(g, x, IR_BF16, L0);
    else if (ir_op_min_inputs(op) == 2) y = ir_binary(g, op, x, x2, L0);
    else y = ir_unary(g, op, x, L0);
    ir_graph_add_output(g, "y", y, L0);
    ir_graph_add_group(g, y, IR_GROUP_ELEMENTWISE);
    const char *t = emit(g, 0, ir_op_name(op), NULL);
    HAS(t, snippet);
    ir_graph_free(g);
}

static void test_ops(void)
{
    test_op(IR_OP_ADD, false, "(f0 + f1)");
    test_op(IR_OP_SUB, false, "(f0 - f1)");
    test_op(IR_OP_MUL, false, "(f0 * f1)");
    test_op(IR_OP_DIV, false, "(f0 / f1)");
    test_op(IR_OP_MAX, false, "fmaxf(f0, f1)");
    test_op(IR_OP_MIN, false, "fminf(f0, f1)");
    test_op(IR_OP_POW, false, "powf(f0, f1)");
    test_op(IR_OP_NEG, false, "(-f0)");
    test_op(IR_OP_EXP, false, "expf(f0)");
    test_op(IR_OP_LOG, false, "logf(f0)");
    test_op(IR_OP_SQRT, false, "sqrtf(f0)");
    test_op(IR_OP_RSQRT, false, "rsqrtf(f0)");
    test_op(IR_OP_TANH, false, "tanhf(f0)");
    test_op(IR_OP_SIGMOID, false, "kiln_sigmoid(f0)");
    test_op(IR_OP_SILU, false, "kiln_silu(f0)");
    test_op(IR_OP_GELU, false, "kiln_gelu(f0)");
    test_op(IR_OP_GELU, true, "kiln_gelu_tanh(f0)");
    test_op(IR_OP_RELU, false, "kiln_relu(f0)");
    test_op(IR_OP_CAST, false, "kiln_round_bf16(f0)");
}

static void test_broadcast_and_consts(void)
{
    ir_graph *g = new_graph();
    ir_node *x = in(g, "x", ty(IR_F32, 3, -1, 4, 8));
    ir_node *b = in(g, "b", ty(IR_F32, 1, 8));
    ir_node *c = in(g, "c", ty(IR_F32, 3, -1, 1, 8));
    ir_node *y = ir_binary(g, IR_OP_ADD, x, b, L0);
    y = ir_binary(g, IR_OP_MUL, y, c, L0);
    y = ir_binary(g, IR_OP_MUL, y, ir_const(g, 0.5, IR_F32, L0), L0);
    y = ir_binary(g, IR_OP_ADD, y, ir_const(g, 2, IR_F32, L0), L0);
    y = ir_binary(g, IR_OP_ADD, y, ir_const(g, 1e-5, IR_F32, L0), L0);
    ir_graph_add_output(g, "y", y, L0);
    int k = ir_graph_add_group(g, y, IR_GROUP_ELEMENTWISE);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->ninputs > 0) g->nodes[i]->group = k;
    cg_kernel *kk = NULL;
    const char *t = emit(g, k, "broadcast", &kk);
    HAS(t, "kiln_ld(p.t0 + i)");                              /* x: same shape, same index */
    HAS(t, "kiln_ld(p.t1 + (i % 8LL))");                      /* b [8]: the last coordinate */
    HAS(t, "kiln_ld(p.t2 + ((i / 32LL) * 8LL + (i % 8LL)))"); /* c [B, 1, 8]: axis 1 reads 0 */
    HAS(t, "0.5f");
    HAS(t, "2.0f");
    HAS(t, "9.99999975e-06f");
    HAS(t, "kiln_st(p.t");
    HAS(t, "#define KILN_VEC 4");
    HAS(t, "long long n;");
    if (kk) {
        CHECK(kk->family == CG_FAMILY_ELEMENTWISE);
        /* n, t0 t1 t2 (inputs), output, dim_B */
        int ptrs = 0;
        for (int i = 0; i < kk->nargs; i++) ptrs += kk->args[i].kind == CG_ARG_PARAM;
        CHECK(ptrs == 3);
        CHECK(kk->args[0].kind == CG_ARG_SCALAR && !strcmp(kk->args[0].field, "n"));
        int64_t dims[3] = {3, 1, 1}, v;
        CHECK(cg_arg_eval(&kk->args[0], dims, &v) && v == 96);
        unsigned grid[3], block;
        size_t smem;
        char err[128];
        CHECK(cg_launch_eval(kk, dims, grid, &block, &smem, err, sizeof err) && grid[0] == 1 && block == 256);
    }
    ir_graph_free(g);
}

static void test_views_and_mask(void)
{
    ir_graph *g = new_graph();
    ir_node *x = in(g, "x", ty(IR_F32, 3, -1, 4, 8));
    int perm[3] = {0, 2, 1};
    ir_node *p = ir_permute(g, x, perm, L0); /* [B, 8, 4] */
    ir_node *y1 = ir_unary(g, IR_OP_EXP, p, L0);
    ir_node *s = ir_slice(g, x, 2, ir_dim_const(2), ir_dim_const(6), L0); /* [B, 4, 4] */
    ir_node *y2 = ir_unary(g, IR_OP_EXP, s, L0);
    ir_dim rs[2] = {ir_dim_sym(0), ir_dim_const(32)};
    ir_node *r = ir_reshape(g, x, 2, rs, L0);
    ir_node *y3 = ir_unary(g, IR_OP_EXP, r, L0);
    ir_node *sc = in(g, "sc", ty(IR_F32, 3, -1, -2, -2));
    ir_node *m = ir_causal_mask(g, ir_dim_sym(1), ir_dim_sym(1), IR_F32, L0);
    ir_node *y4 = ir_binary(g, IR_OP_ADD, sc, m, L0);
    ir_graph_add_output(g, "y1", y1, L0);
    ir_graph_add_output(g, "y2", y2, L0);
    ir_graph_add_output(g, "y3", y3, L0);
    ir_graph_add_output(g, "y4", y4, L0);
    ir_graph_add_group(g, y1, IR_GROUP_ELEMENTWISE);
    ir_graph_add_group(g, y2, IR_GROUP_ELEMENTWISE);
    ir_graph_add_group(g, y3, IR_GROUP_ELEMENTWISE);
    ir_graph_add_group(g, y4, IR_GROUP_ELEMENTWISE);
    /* permute: x[c0, c2, c1] from y1's (c0, c1, c2) */
    HAS(emit(g, 0, "permute", NULL), "kiln_ld(p.t0 + (((i / 32LL) * 4LL + (i % 4LL)) * 8LL + (i / 4LL % 8LL)))");
    HAS(emit(g, 1, "slice", NULL), "((i % 4LL) + 2LL)");
    HAS(emit(g, 2, "reshape", NULL), "kiln_ld(p.t0 + i)");
    const char *t = emit(g, 3, "causal mask", NULL);
    HAS(t, "? 0.0f : -KILN_INF)");
    HAS(t, "(i % p.dim_S) <= (i / p.dim_S % p.dim_S) + 0LL");
    ir_graph_free(g);
}

static void test_row(void)
{
    /* x1 = x + r (also stored: the residual stream); h = rmsnorm(x1, w) */
    ir_graph *g = new_graph();
    ir_node *x = in(g, "x", ty(IR_BF16, 3, -1, -2, 8)), *r = in(g, "r", ty(IR_BF16, 3, -1, -2, 8));
    ir_node *w = wt(g, "w", ty(IR_BF16, 1, 8));
    ir_node *x1 = ir_binary(g, IR_OP_ADD, x, r, L0);
    ir_node *h = ir_rmsnorm(g, x1, w, 1e-5, L0);
    ir_graph_add_output(g, "x1", x1, L0);
    ir_graph_add_output(g, "h", h, L0);
    int k = ir_graph_add_group(g, h, IR_GROUP_ROW);
    x1->group = k;
    cg_kernel *kk = NULL;
    const char *t = emit(g, k, "rmsnorm+residual", &kk);
    HAS(t, "#define KILN_ROW_OP KILN_ROW_RMSNORM");
    /* 8 bf16 elements: one group of 8 (16 bytes) for the first thread of 64 */
    HAS(t, "#define KILN_ROW_ITEMS 8");
    HAS(t, "#define KILN_ROW_VEC 8");
    /* the residual stream's stores: the group's values first, then its stores in a row */
    HAS(t, "kiln_row_pre(const KilnArgs &p, long long row, long long i0, const float (&xv)[V])\n{\n"
           "    float o0[V];\n");
    HAS(t, "        o0[j] = x;\n");
    HAS(t, "        kiln_stv(kiln_al<AL>(p.t3) + (row * 8LL + i), o0[j]);");
    HAS(t, "const float y = v * f0;");
    HAS(t, "return (((unsigned long long)p.t0 | (unsigned long long)p.t1 | (unsigned long long)p.t3 | "
           "(unsigned long long)p.t2 | (unsigned long long)p.t4) & 15ull) == 0;");
    if (kk) CHECK(kk->family == CG_FAMILY_ROW && kk->launch.block == 64);
    ir_graph_free(g);

    /* softmax over a symbolic last axis; mean then x - mean (a reduction with
     * a per-element epilogue); a reduction over a non-last axis (fallback) */
    g = new_graph();
    ir_node *s = in(g, "s", ty(IR_F32, 3, -1, -2, -2));
    ir_node *sm = ir_softmax(g, s, 2, L0);
    ir_node *z = in(g, "z", ty(IR_F32, 3, -1, -2, 12));
    ir_node *mean = ir_reduce(g, IR_OP_MEAN, z, 1u << 2, true, L0);
    ir_node *xc = ir_binary(g, IR_OP_SUB, z, mean, L0);
    ir_node *sum0 = ir_reduce(g, IR_OP_SUM, z, 1u << 1, false, L0);
    ir_graph_add_output(g, "sm", sm, L0);
    ir_graph_add_output(g, "xc", xc, L0);
    ir_graph_add_output(g, "sum0", sum0, L0);
    ir_graph_add_group(g, sm, IR_GROUP_ROW);
    k = ir_graph_add_group(g, mean, IR_GROUP_ROW);
    xc->group = k;
    ir_graph_add_group(g, sum0, IR_GROUP_ROW);
    t = emit(g, 0, "softmax", &kk);
    HAS(t, "#define KILN_ROW_OP KILN_ROW_SOFTMAX");
    HAS(t, "#define KILN_ROW_ITEMS 0");
    HAS(t, "#define KILN_ROW_VEC 4"); /* f32: taken where p.d allows at run time */
    t = emit(g, 1, "mean, x - mean", &kk);
    HAS(t, "#define KILN_ROW_OP KILN_ROW_MEAN");
    HAS(t, "#define KILN_ROW_ELEMOUT 1");
    HAS(t, "#define KILN_ROW_ITEMS 4"); /* a row of 12 f32: groups of 4 (16 bytes) */
    HAS(t, "#define KILN_ROW_VEC 4");
    HAS(t, "(x - v)");
    t = emit(g, 2, "sum over axis 1", &kk);
    if (kk) {
        CHECK(kk->family == CG_FAMILY_ELEMENTWISE);
        CHECK(kk->note && strstr(kk->note, "generic fallback"));
    }
    HAS(t, "for (long long r");
    ir_graph_free(g);
}

static void test_matmul(void)
{
    /* y = x + gelu(linear(h, w, b)) : bias, activation, residual */
    ir_graph *g = new_graph();
    ir_node *h = in(g, "h", ty(IR_BF16, 3, -1, -2, 64)), *x = in(g, "x", ty(IR_BF16, 3, -1, -2, 32));
    ir_node *w = wt(g, "w", ty(IR_BF16, 2, 32, 64)), *b = wt(g, "b", ty(IR_BF16, 1, 32));
    ir_node *l = ir_linear(g, h, w, b, L0);
    ir_node *a = ir_gelu(g, l, false, L0);
    ir_node *y = ir_binary(g, IR_OP_ADD, x, a, L0);
    ir_graph_add_output(g, "y", y, L0);
    int k = ir_graph_add_group(g, l, IR_GROUP_MATMUL);
    a->group = y->group = k;
    cg_kernel *kk = NULL;
    const char *t = emit(g, k, "matmul epilogue", &kk);
    HAS(t, "kiln_epilogue2(const KilnArgs &p, long long b, long long m, long long n, float v0, float v1, bool has1)");
    HAS(t, "kiln_ld(p.t3 + n)");
    HAS(t, "kiln_ld(p.t3 + (n + 1))");
    HAS(t, "if (has1) {");
    HAS(t, "kiln_gelu(acc)");
    HAS(t, "kiln_ld(p.t1 + (m * 32LL + n))");
    HAS(t, "#define KILN_B_NK 1");
    if (kk) {
        /* sm_90a (the default target), bf16, M symbolic: the Hopper template, with
         * the mma.sync kernel of the same KilnArgs as its run-time fallback */
        CHECK(kk->family == CG_FAMILY_MATMUL_WGMMA && kk->ntmaps == 3);
        CHECK(!strcmp(kk->args[0].field, "a") && !strcmp(kk->args[1].field, "w"));
        CHECK(kk->tmaps[0].operand == CG_TMAP_A && kk->tmaps[0].arg == 0 && kk->tmaps[0].box_rows == 128);
        CHECK(kk->tmaps[1].operand == CG_TMAP_W && kk->tmaps[1].arg == 1 && kk->tmaps[1].box_rows == 128);
        int64_t v;
        CHECK(ir_dim_is_const(&kk->tmaps[1].rows, &v) && v == 32 && ir_dim_is_const(&kk->tmaps[0].ld, &v) && v == 64);
        /* one bf16 output of rows of 32: the epilogue through shared memory and a TMA store */
        CHECK(kk->tmaps[2].operand == CG_TMAP_OUT && kk->tmaps[2].box_rows == 64 &&
              !strcmp(kk->args[kk->tmaps[2].arg].field, "t6"));
        CHECK(ir_dim_is_const(&kk->tmaps[2].K, &v) && v == 32 && ir_dim_is_const(&kk->tmaps[2].ld, &v) && v == 32);
        CHECK(kk->param_prefix == 384 && kk->param_size == (384 + kk->args_size + 63) / 64 * 64);
        HAS(t, "#define KILN_WGMMA_TMA_STORE 1");
        HAS(t, "float2 kiln_epilogue_val(const KilnArgs &p, long long b, long long m, long long n, float v0, float v1, bool has1)");
        HAS(t, "return make_float2(r0, r1);");
        CHECK(kk->fallback && kk->fallback->family == CG_FAMILY_MATMUL && kk->fallback->nargs == kk->nargs &&
              kk->fallback->param_size == kk->args_size && kk->fallback->ntmaps == 0);
        HAS(t, "#define KILN_BN 128"); /* K <= 8192: ping-pong 128x128 */
        HAS(t, "#define KILN_WGMMA_PINGPONG 1");
        if (kk->fallback) HAS(kk->fallback->generated, "#define KILN_WARPS_M");
    }
    ir_graph_free(g);

    /* SwiGLU: linear(h, concat(wg, wu)) split in halves, silu(g) * u */
    g = new_graph();
    h = in(g, "h", ty(IR_BF16, 3, -1, -2, 64));
    ir_node *wg = wt(g, "wg", ty(IR_BF16, 2, 48, 64)), *wu = wt(g, "wu", ty(IR_BF16, 2, 48, 64));
    ir_node *ws[2] = {wg, wu};
    ir_node *wc = ir_concat(g, 2, ws, 0, L0);
    l = ir_linear(g, h, wc, NULL, L0);
    ir_node *s0 = ir_slice(g, l, 2, ir_dim_const(0), ir_dim_const(48), L0);
    ir_node *s1 = ir_slice(g, l, 2, ir_dim_const(48), ir_dim_const(96), L0);
    y = ir_binary(g, IR_OP_MUL, ir_unary(g, IR_OP_SILU, s0, L0), s1, L0);
    ir_graph_add_output(g, "y", y, L0);
    k = ir_graph_add_group(g, l, IR_GROUP_MATMUL);
    for (int i = l->id + 1; i < g->nnodes; i++) g->nodes[i]->group = k;
    int64_t dims[3] = {1, 1, 1};
    cg_options o = {0};
    o.dims = dims;
    char err[256];
    kk = &kept[nkept];
    CHECK_MSG(cg_emit_kernel_ex(g, k, &o, kk, err, sizeof err) == 0, "swiglu: %s", err);
    if (kk->source) {
        nkept++;
        t = kk->generated;
        HAS(t, "kiln_silu(gate)");
        HAS(t, "kiln_st(p.t");
        HAS(t, "(m * 48LL + j)");
        HAS(t, "#define KILN_SWIGLU 1");
        CHECK(kk->family == CG_FAMILY_GEMV);
        CHECK(kk->nxforms == 1 && kk->xforms[0].node == wc->id && kk->xforms[0].kind == CG_XFORM_INTERLEAVE_ROWS);
        int64_t half;
        CHECK(ir_dim_is_const(&kk->xforms[0].half, &half) && half == 48);
    }
    ir_graph_free(g);
}

/* r: a frequency scaling (NULL: none), whose table goes into the source */
static void attention_case(const ir_rope_attrs *r)
{
    /* the Llama block: q, k, v slices of one QKV buffer, RoPE on q and k, cache writes fused */
    ir_graph *g = new_graph();
    ir_node *qkv = in(g, "qkv", ty(IR_BF16, 3, -1, -2, 4 * 64 + 2 * 2 * 64));
    ir_node *pos = in(g, "pos", ty(IR_I32, 1, -1));
    ir_type ct = ty(IR_BF16, 4, -1, 2, -3, 64);
    ir_node *kc = ir_param(g, IR_OP_STATE, "kc", &ct, L0), *vc = ir_param(g, IR_OP_STATE, "vc", &ct, L0);
    ir_node *sq = ir_slice(g, qkv, 2, ir_dim_const(0), ir_dim_const(256), L0);
    ir_node *sk = ir_slice(g, qkv, 2, ir_dim_const(256), ir_dim_const(384), L0);
    ir_node *sv = ir_slice(g, qkv, 2, ir_dim_const(384), ir_dim_const(512), L0);
    ir_dim qd[4] = {ir_dim_sym(0), ir_dim_sym(1), ir_dim_const(4), ir_dim_const(64)};
    ir_dim kd[4] = {ir_dim_sym(0), ir_dim_sym(1), ir_dim_const(2), ir_dim_const(64)};
    ir_node *q = ir_rope_scaled(g, ir_reshape(g, sq, 4, qd, L0), pos, 10000.0, r, L0);
    ir_node *k = ir_rope_scaled(g, ir_reshape(g, sk, 4, kd, L0), pos, 10000.0, r, L0);
    ir_node *v = ir_reshape(g, sv, 4, kd, L0);
    ir_node *kc2 = ir_cache_write(g, kc, k, pos, L0), *vc2 = ir_cache_write(g, vc, v, pos, L0);
    ir_node *a = ir_attention(g, q, kc2, vc2, pos, 0, true, L0);
    ir_graph_add_output(g, "a", a, L0);
    ir_graph_set_state(g, kc, kc2, L0);
    ir_graph_set_state(g, vc, vc2, L0);
    int kk_ = ir_graph_add_group(g, a, IR_GROUP_ATTENTION);
    q->group = k->group = kc2->group = vc2->group = kk_;
    cg_kernel *kk = NULL;
    const char *t = emit(g, kk_, "attention", &kk);
    HAS(t, "#define KILN_ROPE 1");
    HAS(t, "#define KILN_APPEND 1");
    HAS(t, "#define KILN_CAUSAL 1");
    HAS(t, "#define KILN_HD 64");
    HAS(t, "#define KILN_SCALE 0.125f");
    HAS(t, "#define KILN_THETA 10000.0f");
    if (r) {
        HAS(t, "#define KILN_ROPE_TABLE 1");
        /* f_0 = 1 always; llama3 with factor 8 scales the lowest frequency */
        HAS(t, "__constant__ double kiln_rope_inv[32] = {1, ");
        HAS(t, r->scaling == IR_ROPE_YARN ? "#define KILN_ROPE_MSCALE ((float)1.2079441541679836)"
                                          : "#define KILN_ROPE_MSCALE ((float)1)");
    } else {
        CHECK(!strstr(t, "KILN_ROPE_TABLE"));
    }
    if (kk) {
        CHECK(kk->family == CG_FAMILY_ATTENTION_PREFILL);
        for (int i = 0; i < kk->nargs; i++) {
            const cg_arg *x = &kk->args[i];
            int64_t val = -1;
            if (!strcmp(x->field, "q_ss")) CHECK(ir_dim_is_const(&x->dim, &val) && val == 512);
            if (!strcmp(x->field, "q_sh")) CHECK(ir_dim_is_const(&x->dim, &val) && val == 64);
            if (!strcmp(x->field, "k_new")) CHECK(ir_dim_is_const(&x->elem_offset, &val) && val == 256);
            if (!strcmp(x->field, "v_new")) CHECK(ir_dim_is_const(&x->elem_offset, &val) && val == 384);
            if (!strcmp(x->field, "k")) CHECK(x->kind == CG_ARG_STATE && x->index == 0 && x->written);
            if (!strcmp(x->field, "pos")) CHECK(x->kind == CG_ARG_PARAM && x->index == 1);
        }
    }
    ir_graph_free(g);
}

/* q a slice of a QKV buffer (already rotated), k/v read from the caches (no fused cache write):
 * on sm_90a the Hopper template with attention_prefill.cuh as its run-time fallback (head dim
 * 64 / 128) or none (other head dims); on sm_80 attention_prefill.cuh. */
static void attention_wgmma_case(int hd, const char *arch, float softcap)
{
    ir_graph *g = new_graph();
    ir_node *qkv = in(g, "qkv", ty(IR_BF16, 3, -1, -2, 4 * hd + 2 * 2 * hd));
    ir_node *pos = in(g, "pos", ty(IR_I32, 1, -1));
    ir_type ct = ty(IR_BF16, 4, -1, 2, -3, hd);
    ir_node *kc = ir_param(g, IR_OP_STATE, "kc", &ct, L0), *vc = ir_param(g, IR_OP_STATE, "vc", &ct, L0);
    ir_node *sq = ir_slice(g, qkv, 2, ir_dim_const(0), ir_dim_const(4 * hd), L0);
    ir_dim qd[4] = {ir_dim_sym(0), ir_dim_sym(1), ir_dim_const(4), ir_dim_const(hd)};
    ir_node *q = ir_reshape(g, sq, 4, qd, L0);
    ir_node *a = ir_attention(g, q, kc, vc, pos, 0, true, L0);
    a->attrs.softcap = softcap;
    ir_graph_add_output(g, "a", a, L0);
    int k = ir_graph_add_group(g, a, IR_GROUP_ATTENTION);
    q->group = sq->group = k;
    cg_target tg;
    cg_target_default(arch, &tg);
    cg_options o = {0};
    o.target = &tg;
    char err[512];
    cg_kernel *kk = &kept[nkept];
    int rc = cg_emit_kernel_ex(g, k, &o, kk, err, sizeof err);
    CHECK_MSG(rc == 0, "attention hd%d %s: %s", hd, arch, err);
    if (rc == 0) {
        nkept++;
        const char *t = kk->generated;
        if (!strcmp(arch, "sm_90a")) {
            CHECK(kk->family == CG_FAMILY_ATTENTION_WGMMA && kk->ntmaps == 3 && kk->param_prefix == 384);
            CHECK(kk->param_size == (384 + kk->args_size + 63) / 64 * 64 && kk->launch.block == 384);
            int64_t one = 0;
            CHECK(kk->launch.grid[0].cap == 132 && kk->launch.grid[0].div == 64 && kk->launch.grid[0].div2 == 2);
            CHECK(ir_dim_is_const(&kk->launch.grid[1].n, &one) && one == 1 && ir_dim_is_const(&kk->launch.grid[2].n, &one) &&
                  one == 1);
            /* the measured configuration (cg_family.c att_wgmma_config): key tiles of 128 rows up
             * to head dim 128, 64 above, order 1, threshold 8, the dynamic scheduler and cache
             * hints above 128; a soft-cap changes none of it */
            const char *want = hd <= 128 ? "wgmma 2x64x128 s2" : "wgmma 2x64x64 s2";
            CHECK_MSG(kk->config && !strcmp(kk->config, want), "hd %d softcap %g: %s", hd, softcap, kk->config);
            HAS(t, "#define KILN_ATT_ORDER 1");
            HAS(t, "#define KILN_ATT_TH 8");
            HAS(t, hd > 128 ? "#define KILN_ATT_SCHED 1" : "#define KILN_ATT_SCHED 0");
            HAS(t, hd > 128 ? "#define KILN_ATT_HINT 1" : "#define KILN_ATT_HINT 0");
            if (softcap > 0) HAS(t, "#define KILN_ATT_SOFTCAP ");
            HAS(t, "#define KILN_WGMMA_NO_KERNEL 1");
            HAS(t, "#define KILN_ATT_BK ");
            int64_t v;
            CHECK(kk->tmaps[0].operand == CG_TMAP_Q && kk->tmaps[1].operand == CG_TMAP_K && kk->tmaps[2].operand == CG_TMAP_V);
            CHECK(kk->tmaps[0].box_rows == 64 && ir_dim_is_const(&kk->tmaps[0].K, &v) && v == 4 * hd);
            CHECK(ir_dim_is_const(&kk->tmaps[0].ld, &v) && v == 8 * hd); /* q_ss: a row of the QKV buffer */
            CHECK(ir_dim_is_const(&kk->tmaps[1].K, &v) && v == hd && ir_dim_is_const(&kk->tmaps[2].ld, &v) && v == hd);
            CHECK(!strcmp(kk->args[kk->tmaps[0].arg].field, "q") && !strcmp(kk->args[kk->tmaps[1].arg].field, "k") &&
                  !strcmp(kk->args[kk->tmaps[2].arg].field, "v"));
            if (hd == 64 || hd == 128) {
                CHECK(kk->fallback && kk->fallback->family == CG_FAMILY_ATTENTION_PREFILL &&
                      kk->fallback->nargs == kk->nargs && kk->fallback->ntmaps == 0);
            } else {
                CHECK(kk->fallback == NULL);
            }
        } else {
            CHECK(kk->family == CG_FAMILY_ATTENTION_PREFILL && kk->ntmaps == 0 && !kk->fallback);
        }
    }
    ir_graph_free(g);
}

/* decode attention's clusters (cg_attention_decode_config): 8 CTAs of the portable size, 16 where
 * the grid would be at most two sequence heads on a full GH100 (KILN_CG_DEC_CLUSTER_TINY) */
static void test_decode_clusters(void)
{
    struct {
        int64_t b, kv, hd, t;
        int sms, cluster, warps;
    } want[] = {
        {1, 1, 256, 1024, 132, 16, 4}, /* Gemma-2B at B = 1: 16 CTAs of 64 keys */
        {2, 1, 256, 1024, 132, 16, 4}, /* B*KV = 2 */
        {3, 1, 256, 1024, 132, 8, 4},  /* B*KV = 3: the portable size */
        {1, 1, 256, 512, 132, 8, 4},   /* a cache under 16 tiles of 64 keys */
        {1, 1, 256, 8192, 132, 16, 4}, /* a long one */
        {1, 1, 256, 1024, 114, 8, 4},  /* fewer SMs than a full GH100 */
        {1, 2, 128, 1024, 132, 16, 4}, /* two KV heads: 32 CTAs of four warps, 64 keys each */
        {1, 8, 128, 1024, 132, 8, 8},  /* the 8B layer: unchanged */
        {1, 8, 64, 1024, 132, 8, 8},   /* the 1B layer: unchanged */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cg_att_decode_cfg d = cg_attention_decode_config(want[i].b, want[i].kv, want[i].hd, want[i].t, 8, want[i].sms,
                                                         232448, true);
        CHECK_MSG(d.cluster == want[i].cluster && d.splits == d.cluster && d.warps == want[i].warps &&
                      cg_attention_decode_smem(&d, want[i].hd) <= 232448 - 2048,
                  "B=%lld KV=%lld hd %lld, %d SMs: cluster %d (want %d), splits %d, warps %d (want %d)",
                  (long long)want[i].b, (long long)want[i].kv, (long long)want[i].hd, want[i].sms, d.cluster,
                  want[i].cluster, d.splits, d.warps, want[i].warps);
    }
}

static void test_attention(void)
{
    test_decode_clusters();
    attention_wgmma_case(128, "sm_90a", 0);
    attention_wgmma_case(96, "sm_90a", 0);
    attention_wgmma_case(256, "sm_90a", 0);
    attention_wgmma_case(256, "sm_90a", 30.f);
    attention_wgmma_case(128, "sm_80", 0);
    attention_case(NULL);
    ir_rope_attrs l3 = {.scaling = IR_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                        .original_max_pos = 8192};
    attention_case(&l3);
    ir_rope_attrs y = {.scaling = IR_ROPE_YARN, .factor = 8, .original_max_pos = 4096, .beta_fast = 32,
                       .beta_slow = 1, .mscale = ir_rope_yarn_mscale(8, 1)};
    attention_case(&y);
}

static void test_gathers(void)
{
    ir_graph *g = new_graph();
    ir_node *tab = wt(g, "tab", ty(IR_F32, 2, 100, 16)), *ids = in(g, "ids", ty(IR_I32, 2, -1, -2));
    ir_node *e = ir_embedding(g, tab, ids, L0);
    ir_node *a = in(g, "a", ty(IR_F32, 2, -1, 3)), *b = in(g, "b", ty(IR_F32, 2, -1, 5));
    ir_node *ab[2] = {a, b};
    ir_node *c = ir_concat(g, 2, ab, 1, L0);
    ir_node *x = in(g, "x", ty(IR_F32, 4, -1, -2, 2, 8)), *pos = in(g, "pos", ty(IR_I32, 1, -1));
    ir_node *r = ir_rope(g, x, pos, 500000.0, L0);
    ir_type ct = ty(IR_F32, 4, -1, 2, -3, 8);
    ir_node *kc = ir_param(g, IR_OP_STATE, "kc", &ct, L0);
    ir_node *kc2 = ir_cache_write(g, kc, x, pos, L0);
    ir_graph_add_output(g, "e", e, L0);
    ir_graph_add_output(g, "c", c, L0);
    ir_graph_add_output(g, "r", r, L0);
    ir_graph_set_state(g, kc, kc2, L0);
    ir_graph_add_group(g, e, IR_GROUP_GATHER);
    ir_graph_add_group(g, c, IR_GROUP_GATHER);
    ir_graph_add_group(g, r, IR_GROUP_GATHER);
    ir_graph_add_group(g, kc2, IR_GROUP_CACHE_WRITE);
    HAS(emit(g, 0, "embedding", NULL), "(long long)p.t1[");
    const char *t = emit(g, 1, "concat", NULL);
    HAS(t, "if ((i % 8LL) < 3LL) {");
    HAS(t, "((i % 8LL) - 3LL)");
    HAS(emit(g, 2, "rope", NULL), "pow(500000, -2.0 * (double)j");
    /* scaled: the host's table in the function, YaRN's factor on cos and sin */
    ir_rope_attrs l3 = {.scaling = IR_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                        .original_max_pos = 64};
    ir_rope_attrs y = {.scaling = IR_ROPE_YARN, .factor = 4, .original_max_pos = 64, .beta_fast = 32,
                       .beta_slow = 1, .mscale = 1.25};
    ir_node *r3 = ir_rope_scaled(g, x, pos, 500000.0, &l3, L0), *ry = ir_rope_scaled(g, x, pos, 10000.0, &y, L0);
    ir_graph_add_output(g, "r3", r3, L0);
    ir_graph_add_output(g, "ry", ry, L0);
    int k3 = ir_graph_add_group(g, r3, IR_GROUP_GATHER), ky = ir_graph_add_group(g, ry, IR_GROUP_GATHER);
    double inv[4];
    ir_rope_inv_freq(500000.0, &l3, 8, inv);
    char want[256];
    snprintf(want, sizeof want, "static const double rope_inv");
    t = emit(g, k3, "rope llama3", NULL);
    HAS(t, want);
    snprintf(want, sizeof want, "[4] = {1, %.17g, %.17g, %.17g};", inv[1], inv[2], inv[3]);
    HAS(t, want);
    CHECK(!strstr(t, "pow("));
    t = emit(g, ky, "rope yarn", NULL);
    HAS(t, "__sincosf(red"); /* the reduced angle, as the attention templates rotate */
    HAS(t, " *= (float)1.25;");
    t = emit(g, 3, "cache write", NULL);
    HAS(t, "const long long t = (long long)p.t");
    HAS(t, "if (t >= 0 && t < p.dim_T)");
    ir_graph_free(g);
}

static void test_determinism(void)
{
    ir_graph *g = new_graph();
    ir_node *x = in(g, "x", ty(IR_F32, 2, -1, 8));
    ir_node *y = ir_unary(g, IR_OP_SILU, ir_unary(g, IR_OP_EXP, x, L0), L0);
    ir_graph_add_output(g, "y", y, L0);
    int k = ir_graph_add_group(g, y, IR_GROUP_ELEMENTWISE);
    g->nodes[y->id - 1]->group = k;
    cg_kernel a, b;
    char err[256];
    CHECK(cg_emit_kernel(g, k, &a, err, sizeof err) == 0);
    CHECK(cg_emit_kernel(g, k, &b, err, sizeof err) == 0);
    CHECK(a.source && b.source && !strcmp(a.source, b.source));
    CHECK(a.name && !strcmp(a.name, "kiln_t_k0_elementwise"));
    cg_kernel_free(&a);
    cg_kernel_free(&b);
    CHECK(cg_emit_kernel(g, 7, &a, err, sizeof err) == -1 && strstr(err, "no kernel group 7"));
    ir_graph_free(g);
}

int main(void)
{
    test_ops();
    test_broadcast_and_consts();
    test_views_and_mask();
    test_row();
    test_matmul();
    test_attention();
    test_gathers();
    test_determinism();

    const char *names[128], *srcs[128];
    rt_compile_result res[128];
    memset(res, 0, sizeof res);
    for (int i = 0; i < nkept; i++) {
        names[i] = kept[i].name;
        srcs[i] = kept[i].source;
    }
    rt_compile_opts o = {0};
    rt_nvrtc_compile_many(nkept, names, srcs, &o, RT_TARGET_CUBIN, res, 0, NULL, NULL);
    for (int i = 0; i < nkept; i++) {
        CHECK_MSG(res[i].status == RT_OK, "kernel %d %s (%s): %s", i, kept[i].name, cg_family_name(kept[i].family),
                  res[i].message ? res[i].message : "?");
        CHECK_MSG(res[i].log && !res[i].log[0], "kernel %d %s: log:\n%s", i, kept[i].name, res[i].log ? res[i].log : "");
        rt_compile_result_free(&res[i]);
        cg_kernel_free(&kept[i]);
    }
    printf("compiled %d kernels with NVRTC\n", nkept);
    return CHECK_DONE();
}
