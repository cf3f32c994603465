/* tests/frontend/lower_test.c — every function of the language lowers to the
 * right IR op with the right attributes and type; tuples, state rebinding,
 * -D bindings, const arithmetic, reshape checks, names and locations. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

static const char *prelude =
    "model t {\n"
    "  dims B, S, T\n"
    "  const D = 64, H = 4, KV = 2, HD = D / H\n"
    "  input x : f32[B, S, D]\n"
    "  input xb : bf16[B, S, D]\n"
    "  input ids : i32[B, S]\n"
    "  input pos : i32[B]\n"
    "  input q4 : f32[B, S, H, HD]\n"
    "  input k4 : f32[B, S, KV, HD]\n"
    "  input v4 : f32[B, S, KV, HD]\n"
    "  input s4 : f32[B, H, S, S]\n"
    "  weight w : f32[D]\n"
    "  weight bias : f32[D]\n"
    "  weight wq : f32[D, D]\n"
    "  weight emb : f32[100, D]\n"
    "  state kc : f32[B, KV, T, HD]\n"
    "  state vc : f32[B, KV, T, HD]\n";

typedef struct ctx {
    arena a;
    diag_list d;
    ir_graph *g;
} ctx;

/* Compiles prelude + body + "}". */
static ir_graph *build(ctx *c, const char *body, const fe_define *defs, int ndefs)
{
    arena_init(&c->a);
    diag_list_init(&c->d, &c->a);
    char text[8192];
    snprintf(text, sizeof text, "%s%s\n}\n", prelude, body);
    fe_source src;
    if (fe_source_from_string(&src, "t.kiln", text) != 0) return NULL;
    fe_options o = {defs, ndefs};
    c->g = fe_compile(&src, &o, &c->d);
    if (!c->g && c->d.errors == 0) fprintf(stderr, "NULL graph without errors\n");
    if (!c->g) {
        fprintf(stderr, "--- %s\n", body);
        diag_print(&c->d, stderr, src.text);
    }
    fe_source_free(&src);
    return c->g;
}

/* Compiles and expects errors; returns the error count. */
static int build_fail(const char *body)
{
    ctx c;
    arena_init(&c.a);
    diag_list_init(&c.d, &c.a);
    char text[8192];
    snprintf(text, sizeof text, "%s%s\n}\n", prelude, body);
    fe_source src;
    if (fe_source_from_string(&src, "t.kiln", text) != 0) return -1;
    ir_graph *g = fe_compile(&src, NULL, &c.d);
    int n = c.d.errors;
    if (g) {
        ir_graph_free(g);
        n = 0;
    }
    fe_source_free(&src);
    diag_list_free(&c.d);
    arena_free(&c.a);
    return n;
}

static void done(ctx *c)
{
    ir_graph_free(c->g);
    diag_list_free(&c->d);
    arena_free(&c->a);
}

static const char *type_of(const ir_graph *g, const ir_node *n)
{
    static _Thread_local char buf[256];
    ir_type_print(&n->type, g->syms, buf, sizeof buf);
    return buf;
}

static const ir_node *output(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->noutputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0) return g->outputs[i].value;
    return NULL;
}

/* `output y = EXPR`: checks y's op and type; returns y (valid until done). */
static const ir_node *expect(ctx *c, const char *expr, ir_op op, const char *type)
{
    char body[1024];
    snprintf(body, sizeof body, "  output y = %s", expr);
    if (!build(c, body, NULL, 0)) {
        CHECK_MSG(0, "%s did not compile", expr);
        return NULL;
    }
    const ir_node *y = output(c->g, "y");
    CHECK_MSG(y && y->op == op, "%s: op %s, expected %s", expr, y ? ir_op_name(y->op) : "-",
              ir_op_name(op));
    CHECK_MSG(y && strcmp(type_of(c->g, y), type) == 0, "%s: type %s, expected %s", expr,
              y ? type_of(c->g, y) : "-", type);
    return y;
}

#define EXPECT(expr, op, type, ...)                                                              \
    do {                                                                                         \
        ctx c_;                                                                                  \
        const ir_node *y = expect(&c_, expr, op, type);                                          \
        if (y) { __VA_ARGS__; }                                                                  \
        if (c_.g) done(&c_); else { diag_list_free(&c_.d); arena_free(&c_.a); }                  \
    } while (0)

static void test_elementwise(void)
{
    static const struct { const char *fn; ir_op op; } unary[] = {
        {"exp", IR_OP_EXP},   {"log", IR_OP_LOG},         {"sqrt", IR_OP_SQRT},
        {"rsqrt", IR_OP_RSQRT}, {"tanh", IR_OP_TANH},     {"sigmoid", IR_OP_SIGMOID},
        {"silu", IR_OP_SILU}, {"relu", IR_OP_RELU},       {"neg", IR_OP_NEG},
    };
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) {
        char e[64];
        snprintf(e, sizeof e, "%s(xb)", unary[i].fn);
        EXPECT(e, unary[i].op, "bf16[B, S, 64]", CHECK(y->ninputs == 1));
    }
    EXPECT("gelu(x)", IR_OP_GELU, "f32[B, S, 64]", CHECK(!y->attrs.gelu_tanh));
    EXPECT("gelu(x, tanh=true)", IR_OP_GELU, "f32[B, S, 64]", CHECK(y->attrs.gelu_tanh));
    EXPECT("-x", IR_OP_NEG, "f32[B, S, 64]");
    static const struct { const char *fn; ir_op op; } binary[] = {
        {"add", IR_OP_ADD}, {"sub", IR_OP_SUB}, {"mul", IR_OP_MUL}, {"div", IR_OP_DIV},
        {"pow", IR_OP_POW}, {"max", IR_OP_MAX}, {"min", IR_OP_MIN},
    };
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++) {
        char e[64];
        snprintf(e, sizeof e, "%s(x, w)", binary[i].fn);
        EXPECT(e, binary[i].op, "f32[B, S, 64]", CHECK(y->ninputs == 2));
    }
    EXPECT("x + w", IR_OP_ADD, "f32[B, S, 64]");
    EXPECT("x - w", IR_OP_SUB, "f32[B, S, 64]");
    EXPECT("x * w", IR_OP_MUL, "f32[B, S, 64]");
    EXPECT("x / w", IR_OP_DIV, "f32[B, S, 64]");
    EXPECT("x - w * x", IR_OP_SUB, "f32[B, S, 64]", CHECK(y->inputs[1]->op == IR_OP_MUL));
    EXPECT("(x - w) * x", IR_OP_MUL, "f32[B, S, 64]", CHECK(y->inputs[0]->op == IR_OP_SUB));
    /* pow with a number: a weakly typed scalar takes x's dtype */
    EXPECT("pow(xb, 2.0)", IR_OP_POW, "bf16[B, S, 64]",
           CHECK(y->inputs[1]->op == IR_OP_CONST && y->inputs[1]->attrs.value == 2.0 &&
                 y->inputs[1]->type.dtype == IR_BF16));
    /* max with a number is elementwise (ReLU-like) */
    EXPECT("max(x, 0.0)", IR_OP_MAX, "f32[B, S, 64]");
    /* numbers fold: 2 * HD + 1 = 33 */
    EXPECT("x * (2 * HD + 1)", IR_OP_MUL, "f32[B, S, 64]",
           CHECK(y->inputs[1]->op == IR_OP_CONST && y->inputs[1]->attrs.value == 33));
    /* an integer next to an i32 tensor is an i32 constant */
    EXPECT("ids + 1", IR_OP_ADD, "i32[B, S]", CHECK(y->inputs[1]->type.dtype == IR_I32));
    EXPECT("cast(x, bf16)", IR_OP_CAST, "bf16[B, S, 64]");
    EXPECT("cast(ids, dtype=f32)", IR_OP_CAST, "f32[B, S]");
}

static void test_reductions(void)
{
    EXPECT("sum(x)", IR_OP_SUM, "f32[]", CHECK(y->attrs.axes == 7 && !y->attrs.keepdim));
    EXPECT("mean(x, axis=-1)", IR_OP_MEAN, "f32[B, S]", CHECK(y->attrs.axes == 4));
    EXPECT("mean(x, axis=[0, -1], keepdim=true)", IR_OP_MEAN, "f32[1, S, 1]",
           CHECK(y->attrs.axes == 5 && y->attrs.keepdim));
    EXPECT("max(x, axis=-1, keepdim=true)", IR_OP_REDUCE_MAX, "f32[B, S, 1]",
           CHECK(y->attrs.axes == 4 && y->attrs.keepdim));
    EXPECT("max(x, axis=1)", IR_OP_REDUCE_MAX, "f32[B, 64]", CHECK(y->attrs.axes == 2));
    /* min(x, axis) = -max(-x, axis) */
    EXPECT("min(x, axis=1)", IR_OP_NEG, "f32[B, 64]",
           CHECK(y->inputs[0]->op == IR_OP_REDUCE_MAX && y->inputs[0]->inputs[0]->op == IR_OP_NEG));
    EXPECT("softmax(x)", IR_OP_SOFTMAX, "f32[B, S, 64]", CHECK(y->attrs.axis == 2));
    EXPECT("softmax(x, axis=1)", IR_OP_SOFTMAX, "f32[B, S, 64]", CHECK(y->attrs.axis == 1));
    EXPECT("rmsnorm(x, w)", IR_OP_RMSNORM, "f32[B, S, 64]", CHECK(y->attrs.eps == 1e-5));
    EXPECT("rmsnorm(x, w, eps=1e-6)", IR_OP_RMSNORM, "f32[B, S, 64]", CHECK(y->attrs.eps == 1e-6));
    EXPECT("layernorm(x, w)", IR_OP_LAYERNORM, "f32[B, S, 64]", CHECK(y->ninputs == 2));
    EXPECT("layernorm(x, w, bias, eps=1e-6)", IR_OP_LAYERNORM, "f32[B, S, 64]",
           CHECK(y->ninputs == 3 && y->attrs.eps == 1e-6));
    EXPECT("layernorm(x, w, b=bias)", IR_OP_LAYERNORM, "f32[B, S, 64]", CHECK(y->ninputs == 3));
}

static void test_matmul_and_movement(void)
{
    EXPECT("x @ wq", IR_OP_MATMUL, "f32[B, S, 64]");
    EXPECT("matmul(x, transpose(wq))", IR_OP_MATMUL, "f32[B, S, 64]",
           CHECK(y->inputs[1]->op == IR_OP_PERMUTE && y->inputs[1]->attrs.perm[0] == 1));
    EXPECT("linear(x, wq)", IR_OP_LINEAR, "f32[B, S, 64]", CHECK(y->ninputs == 2));
    EXPECT("linear(x, wq, bias)", IR_OP_LINEAR, "f32[B, S, 64]", CHECK(y->ninputs == 3));
    EXPECT("reshape(x, [B, S, H, HD])", IR_OP_RESHAPE, "f32[B, S, 4, 16]");
    EXPECT("reshape(x, [B * S, D])", IR_OP_RESHAPE, "f32[B*S, 64]");
    EXPECT("reshape(x, [B, S, -1, HD])", IR_OP_RESHAPE, "f32[B, S, 4, 16]");
    EXPECT("reshape(x, [-1, D])", IR_OP_RESHAPE, "f32[B*S, 64]");
    EXPECT("transpose(x)", IR_OP_PERMUTE, "f32[B, 64, S]",
           CHECK(y->attrs.perm[0] == 0 && y->attrs.perm[1] == 2 && y->attrs.perm[2] == 1));
    EXPECT("transpose(x, 0, -1)", IR_OP_PERMUTE, "f32[64, S, B]",
           CHECK(y->attrs.perm[0] == 2 && y->attrs.perm[1] == 1 && y->attrs.perm[2] == 0));
    EXPECT("permute(x, [2, 0, 1])", IR_OP_PERMUTE, "f32[64, B, S]",
           CHECK(y->attrs.perm[0] == 2 && y->attrs.perm[1] == 0 && y->attrs.perm[2] == 1));
    EXPECT("slice(x, axis=-1, start=16, end=32)", IR_OP_SLICE, "f32[B, S, 16]", {
        int64_t s, e;
        CHECK(y->attrs.axis == 2);
        CHECK(ir_dim_is_const(&y->attrs.start, &s) && s == 16);
        CHECK(ir_dim_is_const(&y->attrs.end, &e) && e == 32);
    });
    EXPECT("slice(x, 2, 0, HD)", IR_OP_SLICE, "f32[B, S, 16]");
    EXPECT("slice(x, axis=1, start=1)", IR_OP_SLICE, "f32[B, S - 1, 64]");
    EXPECT("concat([x, x, x], axis=-1)", IR_OP_CONCAT, "f32[B, S, 192]",
           CHECK(y->ninputs == 3 && y->attrs.axis == 2));
    EXPECT("concat([x, x], axis=1)", IR_OP_CONCAT, "f32[B, 2*S, 64]");
    EXPECT("embedding(emb, ids)", IR_OP_EMBEDDING, "f32[B, S, 64]");
    EXPECT("s4 + causal_mask(S, S)", IR_OP_ADD, "f32[B, 4, S, S]",
           CHECK(y->inputs[1]->op == IR_OP_CAUSAL_MASK));
}

static void test_attention(void)
{
    EXPECT("rope(q4, pos, theta=500000.0)", IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->ninputs == 2 && y->attrs.theta == 500000.0));
    EXPECT("rope(q4)", IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->ninputs == 1 && y->attrs.theta == 10000.0 && y->attrs.rope.scaling == IR_ROPE_NONE));
    /* frequency scaling, as a Hugging Face config's rope_scaling */
    EXPECT("rope(q4, pos, theta=500000.0, scaling=llama3, factor=8, low_freq_factor=1, high_freq_factor=4, "
           "original_max_pos=8192)",
           IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->attrs.rope.scaling == IR_ROPE_LLAMA3 && y->attrs.rope.factor == 8 &&
                 y->attrs.rope.low_freq_factor == 1 && y->attrs.rope.high_freq_factor == 4 &&
                 y->attrs.rope.original_max_pos == 8192 && ir_rope_mscale(&y->attrs.rope) == 1.0));
    EXPECT("rope(q4, pos, scaling=llama3, factor=32, original_max_pos=8192)", IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->attrs.rope.low_freq_factor == 1 && y->attrs.rope.high_freq_factor == 4));
    EXPECT("rope(q4, pos, scaling=\"llama3\", factor=8, original_max_pos=8192)", IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->attrs.rope.scaling == IR_ROPE_LLAMA3 && y->attrs.rope.factor == 8)); /* as in config.json */
    EXPECT("rope(q4, pos, scaling=linear, factor=2)", IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->attrs.rope.scaling == IR_ROPE_LINEAR && y->attrs.rope.factor == 2));
    EXPECT("rope(q4, pos, scaling=none)", IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->attrs.rope.scaling == IR_ROPE_NONE));
    /* YaRN's attention factor: 0.1 ln(factor) + 1 by default (0.1 ln 4 + 1) */
    EXPECT("rope(q4, pos, scaling=yarn, factor=4, original_max_pos=4096)", IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->attrs.rope.scaling == IR_ROPE_YARN && y->attrs.rope.beta_fast == 32 &&
                 y->attrs.rope.beta_slow == 1 && !y->attrs.rope.no_truncate &&
                 fabs(y->attrs.rope.mscale - 1.1386294361119891) < 1e-15));
    /* given directly, or the ratio of the two mscales: (0.1 ln 40 + 1) / (0.1 * 0.5 ln 40 + 1) */
    EXPECT("rope(q4, pos, scaling=yarn, factor=4, original_max_pos=4096, attention_factor=1.5, beta_fast=16, "
           "truncate=false)",
           IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(y->attrs.rope.mscale == 1.5 && y->attrs.rope.beta_fast == 16 && y->attrs.rope.no_truncate));
    EXPECT("rope(q4, pos, scaling=yarn, factor=40, original_max_pos=4096, mscale=1, mscale_all_dim=0.5)",
           IR_OP_ROPE, "f32[B, S, 4, 16]",
           CHECK(fabs(y->attrs.rope.mscale - 1.3688879454113936 / 1.1844439727056968) < 1e-15));
    EXPECT("attention(q4, kc, vc, pos, causal=true)", IR_OP_ATTENTION, "f32[B, S, 4, 16]",
           CHECK(y->ninputs == 4 && y->attrs.causal && fabs(y->attrs.scale - 0.25) < 1e-12));
    EXPECT("attention(q4, kc, vc, scale=0.5)", IR_OP_ATTENTION, "f32[B, S, 4, 16]",
           CHECK(y->ninputs == 3 && !y->attrs.causal && y->attrs.scale == 0.5));
    EXPECT("cache_write(kc, k4, pos)", IR_OP_CACHE_WRITE, "f32[B, 2, T, 16]", CHECK(y->ninputs == 3));
    EXPECT("cache_write(kc, k4)", IR_OP_CACHE_WRITE, "f32[B, 2, T, 16]", CHECK(y->ninputs == 2));
}

static void test_tuples_and_states(void)
{
    ctx c;
    if (build(&c, "  a, b = split(x, [16, 48])\n  output ya = a\n  output yb = b\n"
                  "  p, q, r, s = split(x, 4, axis=2)\n  output ys = s", NULL, 0)) {
        const ir_node *a = output(c.g, "ya"), *b = output(c.g, "yb"), *s = output(c.g, "ys");
        CHECK(a && a->op == IR_OP_SLICE && strcmp(type_of(c.g, a), "f32[B, S, 16]") == 0);
        CHECK(b && b->op == IR_OP_SLICE && strcmp(type_of(c.g, b), "f32[B, S, 48]") == 0);
        int64_t st;
        CHECK(b && ir_dim_is_const(&b->attrs.start, &st) && st == 16);
        CHECK(s && ir_dim_is_const(&s->attrs.start, &st) && st == 48);
        CHECK(a && a->name && strcmp(a->name, "a") == 0);
        done(&c);
    } else {
        CHECK(0);
    }
    /* two-cache write: a tuple; the final binding of each state counts */
    if (build(&c, "  kc, vc = cache_write(kc, vc, k4, v4, pos)\n"
                  "  kc = cache_write(kc, k4, pos)\n"
                  "  output y = attention(q4, kc, vc, pos, causal=true)", NULL, 0)) {
        CHECK(c.g->nstates == 2);
        for (int i = 0; i < c.g->nstates; i++) {
            const ir_state_update *u = &c.g->states[i];
            CHECK(u->value->op == IR_OP_CACHE_WRITE);
            if (strcmp(u->state->name, "kc") == 0) {
                /* kc's final value is the second write, whose cache input is the first */
                CHECK(u->value->inputs[0]->op == IR_OP_CACHE_WRITE);
                CHECK(u->loc.line == 19);
            } else {
                CHECK(strcmp(u->state->name, "vc") == 0 && u->value->inputs[0]->op == IR_OP_STATE);
            }
        }
        const ir_node *y = output(c.g, "y");
        CHECK(y && y->inputs[1] == c.g->states[0].value);
        done(&c);
    } else {
        CHECK(0);
    }
    /* a state assigned a value of another type is an error */
    CHECK(build_fail("  kc = x\n  output y = x") == 1);
    /* assigning to an input is an error */
    CHECK(build_fail("  x = x * 2.0\n  output y = x") == 1);
    /* tuple count mismatch */
    CHECK(build_fail("  a, b, c = split(x, 2)\n  output y = a") == 1);
    CHECK(build_fail("  a, b = cache_write(kc, k4, pos)\n  output y = a") == 1);
}

static void test_defines_and_consts(void)
{
    ctx c;
    fe_define defs[] = {{"B", "2"}, {"D", "32"}};
    /* D=32 overrides the const, and HD = D / H follows */
    if (build(&c, "  output y = x * 1.0", defs, 2)) {
        CHECK(c.g->nsyms == 3 && strcmp(c.g->syms[0], "B") == 0);
        CHECK(strcmp(type_of(c.g, c.g->params[0]), "f32[2, S, 32]") == 0);
        CHECK(strcmp(type_of(c.g, c.g->params[4]), "f32[2, S, 4, 8]") == 0);
        done(&c);
    } else {
        CHECK(0);
    }
    fe_define bad[] = {{"Q", "3"}};
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src;
    char text[4096];
    snprintf(text, sizeof text, "%s  output y = x\n}\n", prelude);
    fe_source_from_string(&src, "t.kiln", text);
    fe_options o = {bad, 1};
    ir_graph *g = fe_compile(&src, &o, &d);
    CHECK(!g && d.errors == 1 && d.items[0].loc.line == 0);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);

    if (build(&c, "  const A = 3, B2 = A * 4 + 1, C = 7 / 2, E = 8 / 2, F = -(A - 1) * 2.5\n"
                  "  input z : f32[B2, E, (A + 1) * B]\n"
                  "  output y = z * C\n  output y2 = z + F", NULL, 0)) {
        const ir_node *y = output(c.g, "y"), *y2 = output(c.g, "y2");
        CHECK(y && strcmp(type_of(c.g, y), "f32[13, 4, 4*B]") == 0);
        CHECK(y && y->inputs[1]->op == IR_OP_CONST && y->inputs[1]->attrs.value == 3.5);
        CHECK(y2 && y2->inputs[1]->attrs.value == -5.0);
        done(&c);
    } else {
        CHECK(0);
    }
    /* C = 3.5 is not an integer: not a dimension */
    CHECK(build_fail("  const C = 7 / 2\n  input z : f32[C]\n  output y = z") == 1);
}

static void test_reshape_checks(void)
{
    CHECK(build_fail("  output y = reshape(x, [B, S, H, D])") == 1);
    CHECK(build_fail("  output y = reshape(x, [B, S, 3, -1])") == 1);
    CHECK(build_fail("  output y = reshape(x, [B, -1, -1])") == 1);
    CHECK(build_fail("  output y = reshape(x, [B, T, D])") == 1);
}

static void test_names_outputs_locations(void)
{
    ctx c;
    if (build(&c, "  h = rmsnorm(x, w)\n"
                  "  output y : f32[B, S, 64]\n"
                  "  output z : f32[B, S, 64] = h * 2.0\n"
                  "  y = h + x;", NULL, 0)) {
        CHECK(c.g->noutputs == 2);
        /* outputs in declaration order */
        CHECK(strcmp(c.g->outputs[0].name, "y") == 0 && strcmp(c.g->outputs[1].name, "z") == 0);
        const ir_node *y = output(c.g, "y");
        const ir_node *h = y ? y->inputs[0] : NULL;
        CHECK(h && h->op == IR_OP_RMSNORM && h->name && strcmp(h->name, "h") == 0);
        /* a call's location is its extent on its line */
        CHECK(h && h->loc.line == 18 && h->loc.col == 7 && h->loc.end_col == 19);
        CHECK(h && h->loc.file && strcmp(h->loc.file, "t.kiln") == 0);
        /* a binary op's location is its operator */
        CHECK(y && y->loc.line == 21 && y->loc.col == 9);
        CHECK(c.g->params[0]->loc.line == 4 && c.g->params[0]->loc.col == 9);
        done(&c);
    } else {
        CHECK(0);
    }
    CHECK(build_fail("  output y : f32[B, S, 16] = x") == 1);
    CHECK(build_fail("  output y : f32[B, S, 64]") == 1);
    CHECK(build_fail("  h = x\n  h = x\n  output y = h") == 1);
}

static void test_dump_ast(void)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src;
    fe_source_from_string(&src, "d.kiln", "model m { dims B input x : f32[B] output y = -x * 2 }");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK(fe_dump_ast(&src, f, &d) == 0);
    fclose(f);
    CHECK(out && strcmp(out, "(model m\n  (dims B) @1:11\n  (input x f32[B]) @1:18\n"
                             "  (output y (* (neg x) 2)) @1:35)\n") == 0);
    free(out);
    fe_source_free(&src);
    fe_source_from_string(&src, "d.kiln", "model m { output y = }");
    f = open_memstream(&out, &len);
    CHECK(fe_dump_ast(&src, f, &d) == -1 && d.errors == 1);
    fclose(f);
    free(out);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);
}

int main(void)
{
    test_elementwise();
    test_reductions();
    test_matmul_and_movement();
    test_attention();
    test_tuples_and_states();
    test_defines_and_consts();
    test_reshape_checks();
    test_names_outputs_locations();
    test_dump_ast();
    return CHECK_DONE();
}
