/* tests/passes/test_fusion.c — graph-level tests of the fusion passes for
 * what the golden cases cannot reach through the language: graphs built with
 * the builder API, run through merge-linears .. fuse-elementwise and then
 * plan-kernels (which checks that fusion created no cycle between kernels),
 * compared with the interpreter before/after, with the report inspected.
 * Run under ASan to check that every pass frees what it allocates. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "passes/pass.h"

#define L(n) ((src_loc){"t.kiln", (n), 1, 1})

typedef struct fx {
    ir_graph *g, *before;
    arena a;
    diag_list d;
    pass_report rep;
    pass_options o;
    pass_ctx ctx;
} fx;

static void fx_init(fx *f, const char *const *disabled, int ndisabled)
{
    memset(f, 0, sizeof *f);
    arena_init(&f->a);
    diag_list_init(&f->d, &f->a);
    pass_report_init(&f->rep);
    f->o.disabled = disabled;
    f->o.ndisabled = ndisabled;
    f->ctx = (pass_ctx){.opts = &f->o, .report = &f->rep, .diags = &f->d};
}

static void fx_free(fx *f)
{
    ir_graph_free(f->g);
    ir_graph_free(f->before);
    pass_report_free(&f->rep);
    diag_list_free(&f->d);
    arena_free(&f->a);
}

static ir_type ty(ir_dtype dt, int rank, const int64_t *dims)
{
    ir_type t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i] < 0 ? ir_dim_sym((int)(-dims[i] - 1)) : ir_dim_const(dims[i]);
    return t;
}
#define TY(dt, ...) ty((dt), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define B_ (-1)
#define S_ (-2)
#define T_ (-3)

static ir_node *par(ir_graph *g, ir_op k, const char *name, ir_type t, int line)
{
    return ir_param(g, k, name, &t, L(line));
}

/* Builds the same graph twice (one to keep as the reference). */
typedef void (*build_fn)(ir_graph *g);

static ir_graph *make(build_fn build)
{
    ir_graph *g = ir_graph_new("t");
    ir_graph_add_sym(g, "B");
    ir_graph_add_sym(g, "S");
    ir_graph_add_sym(g, "T");
    build(g);
    return g;
}

/* The fusion passes, then plan-kernels; checks verification at each step. */
static void run_fusion(fx *f, build_fn build)
{
    f->before = make(build);
    f->g = make(build);
    CHECK(ir_verify(f->g, &f->d) == 0);
    pass_fn passes[] = {pass_merge_linears, pass_fuse_epilogue, pass_fuse_residual_norm, pass_fuse_attention,
                        pass_fuse_elementwise, pass_plan_kernels};
    const char *names[] = {"merge-linears", "fuse-epilogue", "fuse-residual-norm", "fuse-attention",
                           "fuse-elementwise", "plan-kernels"};
    for (int i = 0; i < 6 && f->g; i++) {
        f->ctx.pass = names[i];
        f->g->diags = &f->d;
        f->g = passes[i](f->g, &f->ctx);
        pass_analyses_clear(&f->ctx.analyses); /* as the pass manager does: nothing cached outlives a pass here */
        CHECK_MSG(f->g != NULL, "pass %s failed", names[i]);
        if (f->g) CHECK_MSG(ir_verify(f->g, &f->d) == 0, "verifier after %s", names[i]);
    }
    f->ctx.pass = NULL;
    pass_analyses_clear(&f->ctx.analyses); /* the passes ran one by one, not through the pipeline */
    if (f->d.errors) diag_print(&f->d, stderr, NULL);
    CHECK(f->d.errors == 0);
    if (!f->g) return;
    int64_t dims[3] = {2, 3, 8};
    pass_validation v;
    char err[256];
    int rc = pass_validate(f->before, f->g, dims, 7, &v, err, sizeof err);
    CHECK_MSG(rc == 0, "validate: %s", err);
    if (rc == 0) CHECK_MSG(v.max_rel_err <= pass_validate_tolerance(f->before), "rel err %g", v.max_rel_err);
}

static const pass_decision *find(const fx *f, const char *rule, bool taken)
{
    for (int i = 0; i < f->rep.count; i++)
        if (!strcmp(f->rep.items[i].rule, rule) && f->rep.items[i].taken == taken) return &f->rep.items[i];
    return NULL;
}

static bool has_why(const fx *f, const char *rule, const char *needle)
{
    for (int i = 0; i < f->rep.count; i++)
        if (!strcmp(f->rep.items[i].rule, rule) && strstr(f->rep.items[i].why, needle)) return true;
    return false;
}

static ir_node *by_name(const ir_graph *g, const char *name)
{
    for (int i = g->nnodes - 1; i >= 0; i--)
        if (g->nodes[i]->name && !strcmp(g->nodes[i]->name, name)) return g->nodes[i];
    return NULL;
}

/* ---- a row kernel must not take an epilogue operand computed from its own
 * results by another kernel (that would be a cycle between kernels) ---------- */
static void build_cycle(ir_graph *g)
{
    ir_node *x = par(g, IR_OP_INPUT, "x", TY(IR_F32, B_, S_, 16), 1);
    ir_node *r = par(g, IR_OP_INPUT, "r", TY(IR_F32, B_, S_, 16), 2);
    ir_node *ln = par(g, IR_OP_WEIGHT, "ln", TY(IR_F32, 16), 3);
    ir_node *w = par(g, IR_OP_WEIGHT, "w", TY(IR_F32, 16, 16), 4);
    ir_node *x1 = ir_binary(g, IR_OP_ADD, x, r, L(5));
    x1->name = "x1";
    ir_node *h = ir_rmsnorm(g, x1, ln, 1e-5, L(6));
    ir_node *z = ir_linear(g, x1, w, NULL, L(7));
    ir_node *y = ir_binary(g, IR_OP_MUL, h, z, L(8));
    y->name = "y";
    ir_graph_add_output(g, "y", y, L(8));
}

static void test_no_cycle(void)
{
    /* without epilogue-gate (y = h * z is a product, not a residual add), y
     * is not taken by z's matmul, so the row kernel is offered it */
    static const char *const off[] = {"epilogue-gate"};
    fx f;
    fx_init(&f, off, 1);
    run_fusion(&f, build_cycle);
    if (f.g) {
        ir_node *x1 = by_name(f.g, "x1"), *y = by_name(f.g, "y");
        CHECK(x1 && x1->group >= 0 && f.g->groups[x1->group].anchor->op == IR_OP_RMSNORM);
        CHECK(find(&f, "residual-norm", true) != NULL);
        /* y = h * z: z is a matmul over x1, computed from the row kernel's result */
        CHECK(y && f.g->groups[y->group].anchor != f.g->groups[x1->group].anchor);
        CHECK(has_why(&f, "reduction-epilogue", "computed by another kernel"));
    }
    fx_free(&f);
}

/* ---- merge-linears: the packed weight of a later linear is computed after the
 * first linear in node order; biases merge; a mul reading u first still
 * matches SwiGLU ------------------------------------------------------------- */
static void build_late_weight(ir_graph *g)
{
    ir_node *x = par(g, IR_OP_INPUT, "x", TY(IR_F32, B_, S_, 8), 1);
    ir_node *wg = par(g, IR_OP_WEIGHT, "wg", TY(IR_F32, 12, 8), 2);
    ir_node *wut = par(g, IR_OP_WEIGHT, "wut", TY(IR_F32, 8, 12), 3);
    ir_node *gl = ir_linear(g, x, wg, NULL, L(4));
    gl->name = "g";
    int perm[2] = {1, 0};
    ir_node *wu = ir_permute(g, wut, perm, L(5));
    ir_node *ul = ir_linear(g, x, wu, NULL, L(5));
    ul->name = "u";
    ir_node *m = ir_binary(g, IR_OP_MUL, ul, ir_unary(g, IR_OP_SILU, gl, L(6)), L(6));
    ir_graph_add_output(g, "y", m, L(6));
}

static void test_merge_late_weight_swiglu(void)
{
    fx f;
    fx_init(&f, NULL, 0);
    run_fusion(&f, build_late_weight);
    const pass_decision *d = find(&f, "merge-linears", true);
    CHECK(d != NULL);
    if (d) {
        CHECK(strstr(d->what, "[wg; permute(wut)]") != NULL);
        CHECK(d->nlines == 2 && d->lines[0] == 4 && d->lines[1] == 5);
        int64_t v = 0;
        CHECK(ir_dim_is_const(&d->bytes, &v) == false); /* 4*8*B*S: symbolic */
    }
    CHECK(find(&f, "epilogue-swiglu", true) != NULL);
    if (f.g) CHECK(f.g->ngroups == 1);
    fx_free(&f);
}

/* ---- attention: the old cache is read elsewhere, so it cannot be updated in
 * place by the attention kernel ------------------------------------------------ */
static void build_cache_read(ir_graph *g)
{
    ir_node *q = par(g, IR_OP_INPUT, "q", TY(IR_F32, B_, S_, 4, 8), 1);
    ir_node *k = par(g, IR_OP_INPUT, "k", TY(IR_F32, B_, S_, 2, 8), 2);
    ir_node *pos = par(g, IR_OP_INPUT, "pos", TY(IR_I32, B_), 3);
    ir_node *kc = par(g, IR_OP_STATE, "kc", TY(IR_F32, B_, 2, T_, 8), 4);
    ir_node *vc = par(g, IR_OP_STATE, "vc", TY(IR_F32, B_, 2, T_, 8), 5);
    ir_node *kc2 = ir_cache_write(g, kc, k, pos, L(6));
    ir_node *a = ir_attention(g, q, kc2, vc, pos, 0, true, L(7));
    ir_graph_add_output(g, "a", a, L(7));
    ir_graph_add_output(g, "old", ir_unary(g, IR_OP_EXP, kc, L(8)), L(8));
    ir_graph_set_state(g, kc, kc2, L(6));
}

static void test_attention_old_cache(void)
{
    fx f;
    fx_init(&f, NULL, 0);
    run_fusion(&f, build_cache_read);
    CHECK(has_why(&f, "attention-cache-write", "old value of state 'kc' is also read"));
    CHECK(find(&f, "attention-cache-write", true) == NULL);
    fx_free(&f);
}

/* ---- every pass works without a report and with all rules disabled -------- */
static void build_layer(ir_graph *g)
{
    ir_node *x = par(g, IR_OP_INPUT, "x", TY(IR_BF16, B_, S_, 16), 1);
    ir_node *pos = par(g, IR_OP_INPUT, "pos", TY(IR_I32, B_), 2);
    ir_node *kc = par(g, IR_OP_STATE, "kc", TY(IR_BF16, B_, 1, T_, 8), 3);
    ir_node *vc = par(g, IR_OP_STATE, "vc", TY(IR_BF16, B_, 1, T_, 8), 4);
    ir_node *ln = par(g, IR_OP_WEIGHT, "ln", TY(IR_BF16, 16), 5);
    ir_node *wq = par(g, IR_OP_WEIGHT, "wq", TY(IR_BF16, 16, 16), 6);
    ir_node *wk = par(g, IR_OP_WEIGHT, "wk", TY(IR_BF16, 8, 16), 7);
    ir_node *wv = par(g, IR_OP_WEIGHT, "wv", TY(IR_BF16, 8, 16), 8);
    ir_node *wo = par(g, IR_OP_WEIGHT, "wo", TY(IR_BF16, 16, 16), 9);
    ir_node *h = ir_rmsnorm(g, x, ln, 1e-5, L(10));
    ir_dim q4[4] = {ir_dim_sym(0), ir_dim_sym(1), ir_dim_const(2), ir_dim_const(8)};
    ir_dim k4[4] = {ir_dim_sym(0), ir_dim_sym(1), ir_dim_const(1), ir_dim_const(8)};
    ir_dim o3[3] = {ir_dim_sym(0), ir_dim_sym(1), ir_dim_const(16)};
    ir_node *q = ir_rope(g, ir_reshape(g, ir_linear(g, h, wq, NULL, L(11)), 4, q4, L(11)), pos, 1e4, L(11));
    ir_node *k = ir_rope(g, ir_reshape(g, ir_linear(g, h, wk, NULL, L(12)), 4, k4, L(12)), pos, 1e4, L(12));
    ir_node *v = ir_reshape(g, ir_linear(g, h, wv, NULL, L(13)), 4, k4, L(13));
    ir_node *kc2 = ir_cache_write(g, kc, k, pos, L(14));
    ir_node *vc2 = ir_cache_write(g, vc, v, pos, L(14));
    ir_node *a = ir_attention(g, q, kc2, vc2, pos, 0, true, L(15));
    ir_node *x1 = ir_binary(g, IR_OP_ADD, x, ir_linear(g, ir_reshape(g, a, 3, o3, L(16)), wo, NULL, L(16)), L(16));
    ir_graph_add_output(g, "y", x1, L(16));
    ir_graph_set_state(g, kc, kc2, L(14));
    ir_graph_set_state(g, vc, vc2, L(14));
}

static void test_layer_kernels(void)
{
    fx f;
    fx_init(&f, NULL, 0);
    f.ctx.report = NULL; /* no report: the passes must not need one */
    run_fusion(&f, build_layer);
    /* rmsnorm, QKV, attention (rope q, rope k, both cache writes), O + residual */
    if (f.g) CHECK_MSG(f.g->ngroups == 4, "%d kernels", f.g->ngroups);
    fx_free(&f);

    static const char *const all[] = {"merge-linears", "epilogue-bias", "epilogue-broadcast", "epilogue-scale",
                                      "epilogue-activation", "epilogue-residual", "epilogue-gate", "epilogue-swiglu", "residual-norm", "attention-rope",
                                      "attention-cache-write", "elementwise-chain", "reduction-prologue",
                                      "reduction-epilogue"};
    fx_init(&f, all, (int)(sizeof all / sizeof all[0]));
    run_fusion(&f, build_layer);
    /* rmsnorm, 3 linears, 2 ropes, 2 cache writes, attention, O linear, add */
    if (f.g) CHECK_MSG(f.g->ngroups == 11, "%d kernels", f.g->ngroups);
    for (int i = 0; i < f.rep.count; i++) CHECK_MSG(!f.rep.items[i].taken, "%s taken", f.rep.items[i].rule);
    fx_free(&f);
}

int main(void)
{
    test_no_cycle();
    test_merge_late_weight_swiglu();
    test_attention_old_cache();
    test_layer_kernels();
    return CHECK_DONE();
}
