/* codegen/cg_lt.c — cuBLASLt as an implementation of a matmul kernel.
 *
 * cuBLASLt computes D = act(alpha * op(A) op(B) + beta * C + bias) with
 * one activation; Kiln's matmul epilogue is a chain of elementwise members
 * from the anchor to the group's one output. The chain is walked from the
 * anchor: each step is the one member that reads the previous value; an add
 * of a stored tensor of the output's shape, type and contiguous layout is
 * the residual (C, beta 1; at most one, and before the activation, since
 * cuBLASLt adds C first), relu or the tanh form of gelu the activation (at
 * most one); anything else, a member off the chain, or a second output ends
 * the candidacy with the reason (cg_lt_why). The linear's bias is cuBLASLt's
 * bias vector when it is a contiguous [N] of the output's type. The rules
 * are cg.h's (cg_lt); the launch is runtime/rt_cublaslt.c's. */
#include "codegen/cg_lt.h"

#include <stdio.h>
#include <string.h>

static bool contiguous(const cg_strided *s, const ir_type *t)
{
    if (s->off.nterms != 0 || s->rank != t->rank) return false;
    ir_dim want = ir_dim_const(1);
    for (int i = t->rank - 1; i >= 0; i--) {
        if (!cg_dim_one(&t->dims[i]) && !ir_dim_eq(&s->stride[i], &want)) return false;
        if (!ir_dim_mul(want, t->dims[i], &want)) return false;
    }
    return true;
}

static bool member(const cg_gen *gen, const ir_node *n)
{
    return n->group == gen->k && !gen->bind[n->id];
}

static cg_lt_why fail_op(cg_lt *lt, int op)
{
    lt->op = op;
    return lt->why = CG_LT_OP;
}

static cg_lt_why walk(cg_gen *gen, const cg_lt_in *in, cg_lt *lt, cg_lt_nodes *nd)
{
    const ir_graph *g = gen->g;
    const ir_dtype dt = in->a->type.dtype;
    if (in->norm) return lt->why = CG_LT_NORM;
    if (in->swiglu) return lt->why = CG_LT_SWIGLU;
    if (in->qkv) return lt->why = CG_LT_QKV;
    if (dt != in->w->type.dtype || (dt != IR_BF16 && dt != IR_F16)) return lt->why = CG_LT_DTYPE;
    if (in->nouts != 1) return lt->why = CG_LT_OUTPUTS;
    int nmembers = 0;
    for (int i = 0; i < g->nnodes; i++) nmembers += member(gen, g->nodes[i]) && g->nodes[i] != in->A;
    const ir_node *cur = in->A;
    int steps = 0;
    while (cur != in->outs[0]) {
        if (steps > nmembers || cg_used_outside(gen, cur)) return lt->why = CG_LT_OUTPUTS;
        const ir_node *u = NULL;
        for (int i = 0; i < g->nnodes; i++) {
            const ir_node *c = g->nodes[i];
            if (!member(gen, c) || c == in->A) continue;
            for (int j = 0; j < c->ninputs; j++)
                if (c->inputs[j] == cur) {
                    if (u && u != c) return fail_op(lt, c->op); /* cur read twice: not a chain */
                    u = c;
                }
        }
        if (!u) return lt->why = CG_LT_OUTPUTS;
        switch (u->op) {
        case IR_OP_RELU:
        case IR_OP_GELU:
            if (lt->act != CG_LT_ACT_NONE) return fail_op(lt, u->op);
            if (u->op == IR_OP_GELU && !u->attrs.gelu_tanh) return lt->why = CG_LT_GELU_ERF;
            lt->act = u->op == IR_OP_RELU ? CG_LT_ACT_RELU : CG_LT_ACT_GELU_TANH;
            break;
        case IR_OP_ADD: {
            const ir_node *r = u->inputs[0] == cur ? u->inputs[1] : u->inputs[0];
            if (r == cur || lt->residual || member(gen, r)) return fail_op(lt, u->op);
            if (lt->act != CG_LT_ACT_NONE) return lt->why = CG_LT_ACT_ORDER;
            cg_strided rs;
            if (r->type.dtype != dt || !ir_type_same_shape(&r->type, &in->A->type) || !cg_strided_of(gen, r, &rs) ||
                !contiguous(&rs, &r->type))
                return lt->why = CG_LT_LAYOUT;
            nd->res = rs.base;
            lt->residual = true;
            break;
        }
        default: return fail_op(lt, u->op);
        }
        cur = u;
        steps++;
    }
    if (steps != nmembers) return fail_op(lt, -1); /* a member off the chain */
    if (in->outs[0]->type.dtype != dt) return lt->why = CG_LT_DTYPE;
    if (in->bias) {
        cg_strided bs;
        if (in->bias->type.dtype != dt || in->bias->type.rank != 1 || !cg_strided_of(gen, in->bias, &bs) ||
            !contiguous(&bs, &in->bias->type))
            return lt->why = CG_LT_LAYOUT;
        nd->bias = bs.base;
        lt->bias = true;
    }
    nd->out = in->outs[0];
    return lt->why = CG_LT_OK;
}

void cg_lt_analyze(cg_gen *gen, const cg_lt_in *in, cg_lt *lt, cg_lt_nodes *nd)
{
    memset(lt, 0, sizeof *lt);
    memset(nd, 0, sizeof *nd);
    lt->a_arg = lt->w_arg = lt->bias_arg = lt->res_arg = lt->out_arg = lt->ws_arg = -1;
    if (walk(gen, in, lt, nd) != CG_LT_OK) {
        lt->act = CG_LT_ACT_NONE;
        lt->bias = lt->residual = false;
        return;
    }
    lt->f16 = in->a->type.dtype == IR_F16;
    lt->b_nk = in->b_nk != 0;
    lt->M = in->M, lt->N = in->N, lt->K = in->K, lt->batch = in->batch;
    lt->lda = in->lda, lt->ldw = in->ldw, lt->sa = in->sa, lt->sw = in->sw;
}

static int field_index(const cg_gen *gen, const char *field)
{
    for (int i = 0; field && i < gen->nargs; i++)
        if (!strcmp(gen->args[i].field, field)) return i;
    return -1;
}

/* The field the epilogue registered for node n's storage (cg_ptr's name),
 * without registering one: the kernel and its fallback keep one layout. */
static int node_field(const cg_gen *gen, const ir_node *n)
{
    char name[32];
    snprintf(name, sizeof name, "t%d", n->id);
    int i = field_index(gen, name);
    return i >= 0 && gen->args[i].node == n->id ? i : -1;
}

void cg_lt_fields(cg_gen *gen, const cg_lt_nodes *nd, cg_lt *lt)
{
    if (lt->why != CG_LT_OK) return;
    lt->a_arg = field_index(gen, "a");
    lt->w_arg = field_index(gen, "w");
    lt->out_arg = node_field(gen, nd->out);
    if (lt->bias) lt->bias_arg = node_field(gen, nd->bias);
    if (lt->residual) lt->res_arg = node_field(gen, nd->res);
    lt->ws_arg = field_index(gen, "lt_ws");
    if (lt->a_arg < 0 || lt->w_arg < 0 || lt->out_arg < 0 || (lt->bias && lt->bias_arg < 0) ||
        (lt->residual && lt->res_arg < 0) || (lt->chosen && lt->ws_arg < 0)) {
        lt->why = CG_LT_FIELDS;
        lt->chosen = false;
    }
}

const char *cg_lt_epilogue_name(const cg_lt *lt, char *buf, size_t n)
{
    static const char *const act[] = {"", "relu", "gelu_tanh"};
    snprintf(buf, n, "%s%s%s%s%s", lt->bias ? "bias" : "", lt->bias && lt->residual ? "+" : "",
             lt->residual ? "residual" : "", (lt->bias || lt->residual) && lt->act ? "+" : "", act[lt->act]);
    if (!buf[0]) snprintf(buf, n, "none");
    return buf;
}

const char *cg_lt_problem_suffix(cg_gen *gen, const cg_lt *lt)
{
    char e[64];
    return lt->why == CG_LT_OK ? cg_printf(gen, " lt=%s", cg_lt_epilogue_name(lt, e, sizeof e)) : "";
}

static const char *why_text(const cg_lt *lt, char *buf, size_t n)
{
    switch (lt->why) {
    case CG_LT_OK: return "a candidate";
    case CG_LT_NOT_TUNED: return "autotuning times only the Hopper template's matmuls (this one runs another template)";
    case CG_LT_DTYPE: return "its operands are not bf16 or f16 of one type, or its output has another type";
    case CG_LT_SWIGLU: return "the epilogue holds a SwiGLU gate";
    case CG_LT_QKV: return "the epilogue holds a rope / cache write";
    case CG_LT_NORM: return "it computes a folded RMSNorm of its input";
    case CG_LT_OUTPUTS: return "its epilogue writes more than one output";
    case CG_LT_OP:
        if (lt->op < 0) return "an epilogue member is off the matmul's chain";
        snprintf(buf, n, "the epilogue holds %s, which cuBLASLt has no form of", ir_op_name((ir_op)lt->op));
        return buf;
    case CG_LT_GELU_ERF: return "the epilogue's gelu is the erf form (cuBLASLt's is the tanh form)";
    case CG_LT_ACT_ORDER: return "the residual is added after the activation (cuBLASLt adds C before it)";
    case CG_LT_LAYOUT: return "a bias or residual of another type or layout than cuBLASLt takes";
    case CG_LT_FIELDS: return "an operand has no pointer of its own";
    }
    return "?";
}

const char *cg_lt_text(const cg_kernel *k, char *buf, size_t n)
{
    if (!k || (k->family != CG_FAMILY_MATMUL && k->family != CG_FAMILY_MATMUL_WGMMA && k->family != CG_FAMILY_GEMV &&
               k->family != CG_FAMILY_GEMV_MMA))
        return NULL;
    return cg_lt_line(k, buf, n);
}

const char *cg_lt_line(const cg_kernel *k, char *buf, size_t n)
{
    const cg_lt *lt = &k->lt;
    char e[64], w[160];
    if (lt->why != CG_LT_OK)
        snprintf(buf, n, "cublasLt: not a candidate: %s", why_text(lt, w, sizeof w));
    else if (lt->chosen && lt->other_us > 0)
        snprintf(buf, n, "cublasLt (%s): chosen by timing (%.1f us vs the template's %.1f us)",
                 cg_lt_epilogue_name(lt, e, sizeof e), lt->us, lt->other_us);
    else if (lt->chosen)
        snprintf(buf, n, "cublasLt (%s): chosen", cg_lt_epilogue_name(lt, e, sizeof e));
    else if (k->tuned && lt->other_us > 0)
        snprintf(buf, n, "cublasLt (%s): a candidate; the template won by timing (%.1f us vs cuBLASLt's %.1f us)",
                 cg_lt_epilogue_name(lt, e, sizeof e), lt->us, lt->other_us);
    else
        snprintf(buf, n, "cublasLt (%s): a candidate (timed with --autotune)", cg_lt_epilogue_name(lt, e, sizeof e));
    return buf;
}
