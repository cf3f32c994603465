/* Builder type inference (every op's rule and its error message), the
 * verifier, and the printer's text form. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/ir.h"

static ir_type ty(ir_dtype dt, int rank, const ir_dim *dims)
{
    ir_type t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    return t;
}

#define K(v) ir_dim_const(v)
#define TY(dt, ...) ty(dt, (int)(sizeof((ir_dim[]){__VA_ARGS__}) / sizeof(ir_dim)), (ir_dim[]){__VA_ARGS__})

static ir_node *par(ir_graph *g, ir_op kind, const char *name, ir_type t, src_loc loc)
{
    return ir_param(g, kind, name, &t, loc);
}

typedef struct fx {
    arena a;
    diag_list d;
    ir_graph *g;
    ir_dim B, S, T;
} fx;

static void fx_init(fx *f)
{
    arena_init(&f->a);
    diag_list_init(&f->d, &f->a);
    f->g = ir_graph_new("t");
    f->g->diags = &f->d;
    f->B = ir_dim_sym(ir_graph_add_sym(f->g, "B"));
    f->S = ir_dim_sym(ir_graph_add_sym(f->g, "S"));
    f->T = ir_dim_sym(ir_graph_add_sym(f->g, "T"));
}

static void fx_free(fx *f)
{
    ir_graph_free(f->g);
    diag_list_free(&f->d);
    arena_free(&f->a);
}

/* The last diagnostic contains `want`. */
static bool last_error_has(fx *f, const char *want)
{
    if (f->d.count == 0) return false;
    const char *m = f->d.items[f->d.count - 1].msg;
    if (!strstr(m, want)) {
        fprintf(stderr, "  diagnostic was: %s\n  expected to contain: %s\n", m, want);
        return false;
    }
    return true;
}

static src_loc L(int line) { return (src_loc){"m.kiln", line, 3, 5}; }

static void test_types(void)
{
    fx f;
    fx_init(&f);
    ir_graph *g = f.g;
    ir_node *x = par(g, IR_OP_INPUT, "x", TY(IR_BF16, f.B, f.S, K(64)), L(1));
    ir_node *w = par(g, IR_OP_WEIGHT, "w", TY(IR_BF16, K(128), K(64)), L(2));
    ir_node *bias = par(g, IR_OP_WEIGHT, "b", TY(IR_BF16, K(128)), L(3));
    ir_node *pos = par(g, IR_OP_INPUT, "pos", TY(IR_I32, f.B), L(4));
    ir_node *kc = par(g, IR_OP_STATE, "kc", TY(IR_BF16, f.B, K(2), f.T, K(16)), L(5));
    CHECK(x && w && bias && pos && kc);
    CHECK(x->param == 0 && kc->param == 4 && g->nparams == 5);

    ir_node *y = ir_linear(g, x, w, bias, L(6));
    CHECK(y && y->type.rank == 3 && ir_dim_eq(&y->type.dims[2], &(ir_dim){0}) == false);
    int64_t v;
    CHECK(y && ir_dim_is_const(&y->type.dims[2], &v) && v == 128);

    /* weak scalar takes the tensor's dtype */
    ir_node *c = ir_const(g, 0.5, IR_F32, L(7));
    ir_node *m = ir_binary(g, IR_OP_MUL, y, c, L(7));
    CHECK(m && m->type.dtype == IR_BF16 && m->inputs[1]->type.dtype == IR_BF16);

    /* `pos + 1`: an integral constant takes i32; 0.5 cannot and is refused */
    ir_node *p1 = ir_binary(g, IR_OP_ADD, pos, ir_const(g, 1, IR_F32, L(7)), L(7));
    CHECK(p1 && p1->type.dtype == IR_I32 && p1->inputs[1]->type.dtype == IR_I32);
    CHECK(ir_binary(g, IR_OP_ADD, pos, ir_const(g, 0.5, IR_F32, L(7)), L(7)) == NULL);
    CHECK(f.d.errors == 1);
    diag_list_clear(&f.d);

    /* broadcasting [B, S, 128] with [128] and [1, S, 1] */
    ir_node *bb = ir_binary(g, IR_OP_ADD, m, bias, L(8));
    CHECK(bb && bb->type.rank == 3);

    /* reshape to heads; element counts compared symbolically */
    ir_node *r = ir_reshape(g, y, 4, (ir_dim[]){f.B, f.S, K(8), K(16)}, L(9));
    CHECK(r != NULL);
    ir_node *ro = ir_rope(g, r, pos, 10000.0, L(10));
    CHECK(ro && ir_type_eq(&ro->type, &r->type));

    /* cache_write of [B, S, 2, 16] rows: reshape y to 2 KV heads of 64? no: slice first */
    ir_node *k = ir_slice(g, r, 2, K(0), K(2), L(11));
    CHECK(k && ir_dim_is_const(&k->type.dims[2], &v) && v == 2);
    ir_node *kc2 = ir_cache_write(g, kc, k, pos, L(12));
    CHECK(kc2 && ir_type_eq(&kc2->type, &kc->type));
    CHECK(ir_graph_set_state(g, kc, kc2, L(12)) == 0);

    /* GQA: 8 query heads over 2 KV heads; default scale 1/sqrt(16) */
    ir_node *at = ir_attention(g, ro, kc2, kc2, pos, 0, true, L(13));
    CHECK(at && at->attrs.scale == 0.25 && at->attrs.causal);

    ir_node *sm = ir_softmax(g, at, 3, L(14));
    ir_node *su = ir_reduce(g, IR_OP_SUM, sm, (1u << 1) | (1u << 3), true, L(15));
    CHECK(su && su->type.rank == 4 && ir_dim_is_const(&su->type.dims[1], &v) && v == 1);
    ir_node *mx = ir_reduce(g, IR_OP_REDUCE_MAX, sm, 1u << 3, false, L(16));
    CHECK(mx && mx->type.rank == 3);
    ir_node *p = ir_permute(g, at, (int[]){0, 2, 1, 3}, L(17));
    CHECK(p && ir_dim_eq(&p->type.dims[1], &(ir_dim){0}) == false && ir_dim_is_const(&p->type.dims[1], &v) && v == 8);
    ir_node *mm = ir_matmul(g, p, ir_permute(g, p, (int[]){0, 1, 3, 2}, L(18)), L(18));
    CHECK(mm && ir_dim_eq(&mm->type.dims[2], &f.S) && ir_dim_eq(&mm->type.dims[3], &f.S));
    ir_node *mask = ir_causal_mask(g, f.S, f.S, IR_F32, L(19));
    ir_node *mk = ir_binary(g, IR_OP_ADD, mm, mask, L(19));
    CHECK(mk && mk->type.dtype == IR_BF16);
    ir_node *cat = ir_concat(g, 2, (ir_node *[]){k, k}, 2, L(20));
    CHECK(cat && ir_dim_is_const(&cat->type.dims[2], &v) && v == 4);
    ir_node *ids = par(g, IR_OP_INPUT, "ids", TY(IR_I32, f.B, f.S), L(21));
    ir_node *emb = ir_embedding(g, w, ids, L(21));
    CHECK(emb && emb->type.rank == 3 && ir_dim_is_const(&emb->type.dims[2], &v) && v == 64);
    ir_node *n1 = ir_rmsnorm(g, x, par(g, IR_OP_WEIGHT, "g", TY(IR_BF16, K(64)), L(22)), 1e-5, L(22));
    CHECK(n1 != NULL);
    ir_node *cs = ir_cast(g, n1, IR_F32, L(23));
    CHECK(cs && cs->type.dtype == IR_F32);
    ir_node *ge = ir_gelu(g, cs, true, L(24));
    CHECK(ge && ge->attrs.gelu_tanh);
    CHECK(ir_graph_add_output(g, "y", ge, L(25)) == 0);

    CHECK(f.d.errors == 0);
    CHECK(ir_verify(g, &f.d) == 0);

    /* the verifier notices a node whose stored type disagrees with its inputs */
    ir_type saved = ge->type;
    ge->type.dims[2] = K(65);
    CHECK(ir_verify(g, &f.d) == 1);
    CHECK(last_error_has(&f, "is typed f32[B, S, 65] but its inputs give f32[B, S, 64]"));
    ge->type = saved;
    /* ... and an input that comes later than its user */
    ir_node *first = g->nodes[5];
    ir_node *saved_in = first->inputs[0];
    first->inputs[0] = ge;
    CHECK(ir_verify(g, NULL) >= 1);
    first->inputs[0] = saved_in;
    CHECK(ir_verify(g, NULL) == 0);
    fx_free(&f);
}

static void test_errors(void)
{
    fx f;
    fx_init(&f);
    ir_graph *g = f.g;
    ir_node *x = par(g, IR_OP_INPUT, "x", TY(IR_BF16, f.B, f.S, K(64)), L(1));
    ir_node *y = par(g, IR_OP_INPUT, "y", TY(IR_BF16, f.B, K(32)), L(2));
    ir_node *z = par(g, IR_OP_INPUT, "z", TY(IR_F32, f.B, f.S, K(64)), L(3));
    ir_node *w = par(g, IR_OP_WEIGHT, "w", TY(IR_BF16, K(128), K(32)), L(4));
    ir_node *pos = par(g, IR_OP_INPUT, "pos", TY(IR_I32, f.B), L(5));
    ir_node *q = par(g, IR_OP_INPUT, "q", TY(IR_BF16, f.B, f.S, K(6), K(16)), L(6));
    ir_node *kc = par(g, IR_OP_STATE, "kc", TY(IR_BF16, f.B, K(4), f.T, K(16)), L(7));

    CHECK(ir_binary(g, IR_OP_ADD, x, y, L(10)) == NULL);
    CHECK(last_error_has(&f, "add: shapes [B, S, 64] and [B, 32] cannot be broadcast together"));
    CHECK(f.d.items[f.d.count - 1].loc.line == 10);
    CHECK(ir_binary(g, IR_OP_MUL, x, z, L(11)) == NULL);
    CHECK(last_error_has(&f, "mul: dtype mismatch: bf16 and f32 (use cast() to convert)"));
    CHECK(ir_linear(g, x, w, NULL, L(12)) == NULL);
    CHECK(last_error_has(&f, "linear: input [B, S, 64] does not match weight [128, 32]"));
    CHECK(ir_reshape(g, x, 2, (ir_dim[]){f.B, K(64)}, L(13)) == NULL);
    CHECK(last_error_has(&f, "reshape: [B, S, 64] has 64*B*S elements but [B, 64] has 64*B"));
    CHECK(ir_attention(g, q, kc, kc, pos, 0, true, L(14)) == NULL);
    CHECK(last_error_has(&f, "6 query heads cannot be grouped over 4 KV heads"));
    CHECK(ir_rope(g, q, y, 10000, L(15)) == NULL);
    CHECK(last_error_has(&f, "rope: positions must be i32[B], got bf16[B, 32]"));
    CHECK(ir_rope(g, x, pos, 10000, L(16)) == NULL);
    CHECK(last_error_has(&f, "rope: input ([B, S, heads, head_dim]) must have rank 4, got [B, S, 64]"));
    CHECK(ir_matmul(g, x, x, L(17)) == NULL);
    CHECK(last_error_has(&f, "matmul: inner dimensions do not agree: [B, S, 64] @ [B, S, 64]"));
    CHECK(ir_reduce(g, IR_OP_SUM, x, 1u << 3, false, L(18)) == NULL);
    CHECK(last_error_has(&f, "sum: axis out of range for [B, S, 64]"));
    CHECK(ir_slice(g, x, 2, K(60), K(70), L(19)) == NULL);
    CHECK(last_error_has(&f, "slice: [60, 70) is not a non-empty range inside axis 2 of [B, S, 64]"));
    CHECK(ir_permute(g, x, (int[]){0, 0, 1}, L(20)) == NULL);
    CHECK(last_error_has(&f, "permute: not a permutation"));
    CHECK(ir_unary(g, IR_OP_EXP, pos, L(21)) == NULL);
    CHECK(last_error_has(&f, "exp needs a floating-point tensor, got i32"));
    CHECK(ir_rmsnorm(g, x, w, 1e-5, L(22)) == NULL);
    CHECK(last_error_has(&f, "rmsnorm: weight must be [64] to match the last axis of [B, S, 64], got [128, 32]"));
    CHECK(ir_cache_write(g, kc, q, pos, L(23)) == NULL);
    CHECK(last_error_has(&f, "cache_write: heads of cache and new rows do not agree: 4 vs 6"));
    CHECK(ir_embedding(g, w, x, L(24)) == NULL);
    CHECK(last_error_has(&f, "embedding: ids must be i32, got bf16"));
    CHECK(ir_concat(g, 2, (ir_node *[]){x, z}, 0, L(25)) == NULL);
    CHECK(last_error_has(&f, "concat: dtype mismatch"));
    /* a NULL operand (an earlier error) is silent */
    int before = f.d.count;
    CHECK(ir_binary(g, IR_OP_ADD, NULL, x, L(26)) == NULL && f.d.count == before);
    CHECK(ir_verify(g, NULL) == 0); /* failed constructors added nothing */
    fx_free(&f);
}

static void test_print(void)
{
    fx f;
    fx_init(&f);
    ir_graph *g = f.g;
    ir_node *x = par(g, IR_OP_INPUT, "x", TY(IR_F32, f.B, K(8)), (src_loc){"m", 2, 3, 3});
    ir_node *w = par(g, IR_OP_WEIGHT, "w", TY(IR_F32, K(8)), (src_loc){"m", 3, 3, 3});
    ir_node *h = ir_rmsnorm(g, x, w, 1e-5, (src_loc){"m", 4, 7, 20});
    h->name = "h";
    ir_node *s = ir_reduce(g, IR_OP_MEAN, h, 2u, true, (src_loc){"m", 5, 7, 9});
    ir_graph_add_output(g, "y", s, (src_loc){0});
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    ir_print(g, out);
    fclose(out);
    const char *want = "model t\n"
                       "dims B, S, T\n"
                       "%0 = input x : f32[B, 8]  # @2:3\n"
                       "%1 = weight w : f32[8]  # @3:3\n"
                       "%2 = rmsnorm(%0, %1) {eps=1e-05} : f32[B, 8]  # h @4:7\n"
                       "%3 = mean(%2) {axes=[1], keepdim} : f32[B, 1]  # @5:7\n"
                       "output y = %3\n";
    CHECK_MSG(strcmp(buf, want) == 0, "printed:\n%s", buf);
    free(buf);
    fx_free(&f);
}

int main(void)
{
    test_types();
    test_errors();
    test_print();
    return CHECK_DONE();
}
