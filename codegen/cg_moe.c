/* codegen/cg_moe.c — the generated part of the mixture-of-experts kernels
 * (family moe, codegen/kernels/moe.cuh).
 *
 * Two anchors take the moe template:
 *  - EXPERT_LINEAR (a gather group holding it alone): the grouped expert
 *    matmul. x [..., K] (a token's row shared by its slots) or [..., k, K]
 *    (each slot its own row), w [E, N, K] read as stored, idx i32 [..., k]
 *    from device memory. A variant with at most 16 (token, slot) pairs
 *    (decode) takes the GEMV form, any other the mma.sync tiles; both give
 *    each chosen expert's weights to CTAs that read them once and launch no
 *    work for an expert no pair chose.
 *  - TOPK (a router group, passes/fuse_moe.c: both topk results of one
 *    input, a softmax over all before them, a softmax over the chosen and
 *    elementwise work after): one warp per token computes the whole route.
 * An expert kernel may also hold the combine (passes/fuse_moe.c,
 * moe-combine): sum over the slots of mul(expert_linear, weights), then an
 * elementwise chain on the sum (a residual add); the template then stores
 * each slot's term in a workspace and the CTA that completes a column block
 * sums the slots and runs the chain (kiln_moe_term, kiln_moe_out).
 * The GEMV form of a single weight (the down projection at decode) takes the
 * streaming form: a grid of at most the resident CTAs walking (expert,
 * column block) items of 8 or 4 rows, whichever leaves the fuller last round,
 * and as few CTAs as take the same number of items each.
 * A group that does not fit (f32 operands, another member in an expert
 * kernel, a layout that is not strided) fails with the reason and cg_emit.c
 * takes the generic kernel, whose note the reports print as a warning. */
#include <string.h>

#include "codegen/cg_impl.h"

/* "#define NAME value" lines go straight into plan->defines; hooks are
 * "signature { body }" blocks (cg_family.c's helpers are its own). */
#define DEFINE(plan, name, fmt, ...) cg_str_printf(&(plan)->defines, "#define " name " " fmt "\n", __VA_ARGS__)
#define GRID(n, div, cap) ((cg_grid_dim){(n), (div), (cap), ir_dim_const(0), 0})

static void add_hook(cg_str *hooks, const char *signature, cg_str *body)
{
    cg_str_printf(hooks, "%s\n{\n%s}\n\n", signature, body->s ? body->s : "");
    if (body->oom) hooks->oom = true;
    cg_str_free(body);
}

bool cg_moe_anchor(const ir_node *a) { return a->op == IR_OP_EXPERT_LINEAR || a->op == IR_OP_TOPK; }

/* The stride between rows of the first `lead` axes of s (they must flatten to
 * one stride; axes of size 1 do not count), into *ld. */
static bool rows_stride(const ir_type *t, const cg_strided *s, int lead, ir_dim *ld)
{
    int prev = -1; /* the last row axis of size other than 1 seen, going outwards */
    *ld = t->dims[t->rank - 1];
    for (int j = lead - 1; j >= 0; j--) {
        if (cg_dim_one(&t->dims[j])) continue;
        ir_dim want;
        if (prev < 0) *ld = s->stride[j];
        else if (!ir_dim_mul(s->stride[prev], t->dims[prev], &want) || !ir_dim_eq(&want, &s->stride[j]))
            return false;
        prev = j;
    }
    return true;
}

/* Is s the row-major layout of t from offset 0 (a plain stored tensor)? */
static bool contiguous(const ir_type *t, const cg_strided *s)
{
    ir_dim want = ir_dim_const(1);
    if (s->off.nterms != 0) return false;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (!cg_dim_one(&t->dims[i]) && !ir_dim_eq(&s->stride[i], &want)) return false;
        if (!ir_dim_mul(want, t->dims[i], &want)) return false;
    }
    return true;
}

static bool half_type(ir_dtype t) { return t == IR_BF16 || t == IR_F16; }

/* The combine members of the expert kernel of A (moe-combine): the sum over the slots, the
 * weighting mul it reads, and the member stored (the sum or the last op of its chain). False
 * with *sum NULL when there is no sum member; false with a reason failed when it is malformed. */
static bool find_combine(cg_gen *gen, const ir_node *A, const ir_node **sum, const ir_node **cmul, const ir_node **out)
{
    const ir_graph *g = gen->g;
    *sum = *cmul = *out = NULL;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->group == gen->k && g->nodes[i]->op == IR_OP_SUM && !gen->bind[i]) *sum = g->nodes[i];
    if (!*sum) return false;
    const ir_node *s = *sum, *m = s->inputs[0];
    const int r = A->type.rank;
    if (m->group != gen->k || m->op != IR_OP_MUL || (m->inputs[0] == A) == (m->inputs[1] == A) ||
        !ir_type_same_shape(&m->type, &A->type) || s->attrs.axes != (1u << (r - 2)))
        return cg_fail(gen, "the expert kernel's sum is not the combine over the slots of its weighted results");
    if (cg_used_outside(gen, A) || cg_used_outside(gen, m))
        return cg_fail(gen, "a slot's result of the combined expert kernel is used outside it");
    *cmul = m;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i] || pass_is_view(n) || n == A || n == m) continue;
        if (n != s && (ir_op_class(n->op) != IR_CLASS_ELEMENTWISE || !ir_type_same_shape(&n->type, &s->type)))
            return cg_fail(gen, "%s (line %d) in the combine of an expert kernel", ir_op_name(n->op), n->loc.line);
        if (cg_used_outside(gen, n)) {
            if (*out) return cg_fail(gen, "the combine of an expert kernel stores two results");
            *out = n;
        }
    }
    if (!*out) return cg_fail(gen, "the combine's result is not used");
    return true;
}

/* Rows per item of the streaming form: 8, or 4 when blocks of 8 leave the last of the
 * rounds over `slots` CTAs emptier (fewer rows for the busiest CTA). */
static int stream_cols(int64_t n, int64_t experts, int64_t slots)
{
    if (n <= 0 || slots <= 0) return 8;
    const int64_t r8 = ((n + 7) / 8 * experts + slots - 1) / slots * 8;
    const int64_t r4 = ((n + 3) / 4 * experts + slots - 1) / slots * 4;
    return r4 < r8 ? 4 : 8;
}

static bool gen_expert(cg_gen *gen, cg_plan *plan, cg_str *hooks)
{
    const ir_graph *g = gen->g;
    const ir_node *A = gen->anchor, *x = A->inputs[0], *w = A->inputs[1], *idx = A->inputs[2];
    /* combine (moe-combine): out = chain(sum over the slots of cmul(A, weights)) */
    const ir_node *csum = NULL, *cmul = NULL, *cout = NULL;
    const bool combine = find_combine(gen, A, &csum, &cmul, &cout);
    if (gen->failed) return false;
    /* gated (passes/fuse_moe.c, moe-gated): act(A) * up, up = expert_linear(x, w2, idx) */
    const ir_node *up = NULL, *act = NULL, *mul = NULL;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || n == A || gen->bind[i] || pass_is_view(n)) continue;
        if (combine) {
            if (n->op == IR_OP_EXPERT_LINEAR)
                return cg_fail(gen, "a gated expert kernel with the combine (its template takes one weight)");
            continue; /* find_combine checked them */
        }
        if (n->op == IR_OP_EXPERT_LINEAR && !up && n->inputs[0] == x && n->inputs[2] == idx) up = n;
        else if (ir_op_class(n->op) == IR_CLASS_ELEMENTWISE && n->ninputs == 1 && n->inputs[0] == A && !act) act = n;
        else if (n->op == IR_OP_MUL && !mul) mul = n;
        else
            return cg_fail(gen, "%s (line %d) in the kernel of an expert_linear (its template takes a gate alone)",
                           ir_op_name(n->op), n->loc.line);
    }
    const bool gated = up || act || mul;
    if (gated && !(up && act && mul &&
                   ((mul->inputs[0] == act && mul->inputs[1] == up) || (mul->inputs[0] == up && mul->inputs[1] == act))))
        return cg_fail(gen, "the expert kernel's members are not act(gate) * up");
    if (gated && (cg_used_outside(gen, A) || cg_used_outside(gen, up) || cg_used_outside(gen, act)))
        return cg_fail(gen, "a projection of a gated expert kernel is used outside it");
    if (!half_type(x->type.dtype) || w->type.dtype != x->type.dtype || A->type.dtype != x->type.dtype)
        return cg_fail(gen, "the expert matmul takes bf16 or f16 operands and result of one type (x %s, w %s)",
                       ir_dtype_name(x->type.dtype), ir_dtype_name(w->type.dtype));
    cg_strided xs, wsd, is;
    if (!cg_strided_of(gen, x, &xs)) return cg_fail(gen, "the expert matmul's input is not a strided view of stored data");
    if (!cg_strided_of(gen, w, &wsd) || w->type.rank != 3)
        return cg_fail(gen, "the expert weights are not a strided [E, N, K] view of stored data");
    if (!cg_strided_of(gen, idx, &is) || !contiguous(&idx->type, &is))
        return cg_fail(gen, "the expert ids are not stored contiguously");
    ir_dim one = ir_dim_const(1);
    const int rx = x->type.rank, ri = idx->type.rank;
    const bool per_slot = rx == ri + 1;
    if (!ir_dim_eq(&xs.stride[rx - 1], &one)) return cg_fail(gen, "the expert matmul's input rows are not contiguous");
    if (!ir_dim_eq(&wsd.stride[2], &one)) return cg_fail(gen, "the expert weights' K axis is not contiguous");
    cg_strided w2s;
    if (gated && (!cg_strided_of(gen, up->inputs[1], &w2s) || !ir_dim_eq(&w2s.stride[0], &wsd.stride[0]) ||
                  !ir_dim_eq(&w2s.stride[1], &wsd.stride[1]) || !ir_dim_eq(&w2s.stride[2], &one)))
        return cg_fail(gen, "the gate and up weights of the expert kernel differ in layout");
    ir_dim ldx;
    if (!rows_stride(&x->type, &xs, rx - 1, &ldx)) return cg_fail(gen, "the expert matmul's input rows do not flatten to one stride");
    ir_dim P = ir_type_numel(&idx->type, 0, ri, &gen->dim_overflow);
    const ir_dim top = idx->type.dims[ri - 1], E = w->type.dims[0], N = w->type.dims[1], K = w->type.dims[2];
    int64_t pv = 0, ev = 0;
    const bool known = ir_dim_value(&P, gen->dims, &pv);
    const bool mma = !known || pv > CG_GEMV_MAX_ROWS;
    int maxp = 1;
    if (!mma)
        while (maxp < pv) maxp *= 2;
    if (ir_dim_is_const(&E, &ev) && ev > 65535) return cg_fail(gen, "more than 65535 experts");
    const bool stream = !mma && !gated; /* the down projection at decode */

    plan->family = CG_FAMILY_MOE;
    cg_ptr_strided(gen, "x", &xs, false);
    cg_ptr_strided(gen, "w", &wsd, false);
    if (gated) cg_ptr_strided(gen, "w2", &w2s, false);
    cg_ptr_strided(gen, "idx", &is, false);
    int64_t nv = 0;
    if (!ir_dim_value(&N, gen->dims, &nv)) nv = 0;
    /* streaming: 4 rows above 4 pairs (the accumulators are pairs x rows registers) */
    const int cols = mma     ? 64
                     : gated ? 8
                     : maxp > 4 ? 4
                                : stream_cols(nv, ev > 0 && ev < pv ? ev : pv, (int64_t)gen->target->sm_count * (maxp <= 2 ? 2 : 1));
    if (combine) {
        /* the slots' terms in the result's type; a counter per column block (at most N) */
        bool *ovf = &gen->dim_overflow;
        cg_workspace(gen, "dw", "kiln_t *",
                     ir_dim_times(ir_dim_times(P, N, ovf), ir_dim_const((int64_t)ir_dtype_size(A->type.dtype)), ovf),
                     false);
        cg_workspace(gen, "sem", "int *", ir_dim_times(N, ir_dim_const(4), ovf), true);
    }
    cg_scalar(gen, "P", P);
    cg_scalar(gen, "top", top);
    cg_scalar(gen, "E", E);
    cg_scalar(gen, "N", N);
    cg_scalar(gen, "K", K);
    cg_scalar(gen, "ldx", ldx);
    cg_scalar(gen, "xslot", ir_dim_const(per_slot ? 1 : 0));
    cg_scalar(gen, "sw", wsd.stride[0]);
    cg_scalar(gen, "ldw", wsd.stride[1]);

    cg_str body = {0};
    cg_begin_fn(gen, &body);
    const ir_node *o = gated ? mul : A;
    cg_idx oi = cg_idx_flat(&o->type, cg_printf(gen, "(j * %s + n)", cg_dim(gen, &N)));
    if (combine) {
        cg_idx ti = cg_idx_flat(&cmul->type, cg_printf(gen, "(j * %s + n)", cg_dim(gen, &N)));
        cg_set_subst(gen, A, "v");
        cg_line(gen, "return %s;", cg_value(gen, cmul, &ti));
        cg_clear_subst(gen);
        add_hook(hooks, "__device__ __forceinline__ float kiln_moe_term(const KilnArgs &p, long long j, long long n, float v)",
                 &body);
        cg_begin_fn(gen, &body);
        cg_idx si = cg_idx_flat(&cout->type, cg_printf(gen, "(t * %s + n)", cg_dim(gen, &N)));
        cg_set_subst(gen, csum, "s");
        cg_store(gen, cout, &si, cout == csum ? "s" : cg_value(gen, cout, &si));
        cg_clear_subst(gen);
        add_hook(hooks, "__device__ __forceinline__ void kiln_moe_out(const KilnArgs &p, long long t, long long n, float s)",
                 &body);
    } else if (gated) {
        cg_set_subst(gen, A, "vg");
        cg_set_subst(gen, up, "vu");
        cg_store(gen, o, &oi, cg_value(gen, o, &oi));
        cg_clear_subst(gen);
    } else {
        cg_store(gen, o, &oi, "v");
    }
    if (!combine)
        add_hook(hooks,
                 gated ? "__device__ __forceinline__ void kiln_moe_store2(const KilnArgs &p, long long j, long long n, "
                         "float vg, float vu)"
                       : "__device__ __forceinline__ void kiln_moe_store(const KilnArgs &p, long long j, long long n, float v)",
                 &body);

    DEFINE(plan, "KILN_GEMV_MMA", "%d", 1); /* gemv.cuh: its element traits and loads only */
    DEFINE(plan, "KILN_MOE_ROUTER", "%d", 0);
    DEFINE(plan, "KILN_MOE_MMA", "%d", mma ? 1 : 0);
    DEFINE(plan, "KILN_MOE_STREAM", "%d", stream ? 1 : 0);
    DEFINE(plan, "KILN_MOE_COMBINE", "%d", combine ? 1 : 0);
    DEFINE(plan, "KILN_MOE_COLS", "%d", cols);
    DEFINE(plan, "KILN_MOE_GATED", "%d", gated ? 1 : 0);
    if (!mma) DEFINE(plan, "KILN_MOE_MAXP", "%d", maxp);
    if (x->type.dtype == IR_F16) DEFINE(plan, "KILN_MOE_F16", "%d", 1);
    const char *comb = combine ? ", the combine in the last CTA of each column block" : "";
    gen->kern->config = mma      ? cg_printf(gen, "mma.sync 64x%d%s over the chosen experts%s", cols, gated ? " gated" : "", comb)
                        : stream ? cg_printf(gen, "gemv streaming %d rows x %d pairs over the chosen experts%s", cols, maxp, comb)
                                 : cg_printf(gen, "gemv %d cols x %d pairs%s over the chosen experts", cols, maxp,
                                             gated ? " gated" : "");
    cg_launch *L = &gen->kern->launch;
    L->block = 256;
    if (stream) {
        /* column blocks times min(P, E) experts, capped at the CTAs resident at once */
        const int64_t slots = (int64_t)gen->target->sm_count * (maxp <= 2 ? 2 : 1);
        const int64_t experts = ev > 0 && ev < pv ? ev : pv, items = nv > 0 ? (nv + cols - 1) / cols * experts : 0;
        /* as many CTAs as give each the same number of items in the fewest rounds (no ragged last one) */
        const int64_t cap = items > 0 ? (items + (items + slots - 1) / slots - 1) / ((items + slots - 1) / slots) : slots;
        L->grid[0] = (cg_grid_dim){N, cols, cap, ir_dim_const(experts), 1};
        L->grid[1] = GRID(one, 1, 0);
    } else {
        L->grid[0] = GRID(N, cols, 0);
        /* min(P, E): one CTA per chosen expert at decode, one per expert else */
        L->grid[1] = ev > 0 ? GRID(P, 1, ev) : GRID(E, 1, 0);
    }
    L->grid[2] = GRID(one, 1, 0);
    return !gen->failed;
}

/* Does member n read the chosen values (tv, post), directly or through members? */
static bool reads_route(const cg_gen *gen, const ir_node *n, const ir_node *tv, const ir_node *post, int depth)
{
    if (n == tv || n == post) return true;
    if (depth > 64 || n->group != gen->k) return false;
    for (int i = 0; i < n->ninputs; i++)
        if (reads_route(gen, n->inputs[i], tv, post, depth + 1)) return true;
    return false;
}

static bool gen_router(cg_gen *gen, cg_plan *plan, cg_str *hooks)
{
    const ir_graph *g = gen->g;
    const ir_node *A = gen->anchor, *X = A->inputs[0];
    const ir_node *tv = NULL, *ti = NULL, *pre = NULL, *post = NULL;
    /* the members: the topk pair, a softmax before them, one after the values, elementwise work */
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i] || pass_is_view(n)) continue;
        if (n->op == IR_OP_TOPK) {
            if (n->inputs[0] != X || n->attrs.topk != A->attrs.topk) return cg_fail(gen, "two routes in one kernel");
            if (n->attrs.indices) ti = n;
            else tv = n;
        } else if (n->op == IR_OP_SOFTMAX && n == X) {
            pre = n;
        } else if (n->op == IR_OP_SOFTMAX && n->inputs[0] == tv && tv) {
            post = n;
        } else if (ir_op_class(n->op) != IR_CLASS_ELEMENTWISE) {
            return cg_fail(gen, "%s (line %d) in a router kernel", ir_op_name(n->op), n->loc.line);
        }
    }
    const int r = X->type.rank;
    int64_t ev = 0, kv = A->attrs.topk;
    if (r < 1 || !ir_dim_is_const(&X->type.dims[r - 1], &ev) || ev < 1 || ev > 256 || kv < 1 || kv > 32 || kv > ev)
        return cg_fail(gen, "the router template takes 1 <= k <= 32 of at most 256 experts (a constant count)");
    if (pre && pre->attrs.axis != r - 1) return cg_fail(gen, "a softmax over another axis than the experts'");
    if (post && post->attrs.axis != r - 1) return cg_fail(gen, "a softmax over another axis than the chosen");
    const ir_node *in = pre ? pre->inputs[0] : X;
    if (!ir_dtype_is_float(in->type.dtype)) return cg_fail(gen, "integer router scores");
    /* every other member is elementwise over [..., k], computed from the chosen values alone */
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i] || pass_is_view(n) || n->op == IR_OP_TOPK || n == pre || n == post)
            continue;
        if (ir_type_same_shape(&n->type, &in->type) && !reads_route(gen, n, tv, post, 0)) continue; /* the scores' prologue */
        if (!ir_type_same_shape(&n->type, &A->type)) return cg_fail(gen, "a router member of another shape than the route");
        for (int j = 0; j < n->ninputs; j++) {
            const ir_node *q = n->inputs[j];
            if (q->op == IR_OP_CONST || q == tv || q == post || (q->group == gen->k && !pass_is_view(q))) continue;
            return cg_fail(gen, "the router's epilogue reads %s", ir_op_name(q->op));
        }
    }
    ir_dim rows = ir_type_numel(&X->type, 0, r - 1, &gen->dim_overflow);
    plan->family = CG_FAMILY_MOE;
    cg_scalar(gen, "rows", rows);

    cg_str body = {0};
    cg_begin_fn(gen, &body);
    cg_idx xi = cg_idx_flat(&in->type, cg_printf(gen, "(row * %lldLL + e)", (long long)ev));
    cg_line(gen, "return %s;", cg_value(gen, in, &xi));
    add_hook(hooks, "__device__ __forceinline__ float kiln_router_in(const KilnArgs &p, long long row, int e)", &body);

    cg_begin_fn(gen, &body);
    if (tv) cg_set_subst(gen, tv, "vt");
    if (post) cg_set_subst(gen, post, "v");
    int nouts = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i] || !cg_used_outside(gen, n)) continue;
        if (n == pre) return cg_fail(gen, "the router's softmax over all experts is used outside it");
        cg_idx oi = cg_idx_flat(&n->type, cg_printf(gen, "(row * %lldLL + j)", (long long)kv));
        cg_store(gen, n, &oi, n == ti ? "(float)id" : cg_value(gen, n, &oi));
        nouts++;
    }
    cg_clear_subst(gen);
    cg_line(gen, "(void)vt; (void)v; (void)id;");
    add_hook(hooks,
              "__device__ __forceinline__ void kiln_router_store(const KilnArgs &p, long long row, int j, int id, float vt, "
              "float v)",
              &body);
    if (nouts == 0) return cg_fail(gen, "the router's results are not used");

    DEFINE(plan, "KILN_GEMV_MMA", "%d", 1); /* gemv.cuh: its element traits and loads only */
    DEFINE(plan, "KILN_MOE_ROUTER", "%d", 1);
    DEFINE(plan, "KILN_ROUTER_E", "%lld", (long long)ev);
    DEFINE(plan, "KILN_ROUTER_K", "%lld", (long long)kv);
    DEFINE(plan, "KILN_ROUTER_SOFTMAX_ALL", "%d", pre ? 1 : 0);
    DEFINE(plan, "KILN_ROUTER_SOFTMAX_CHOSEN", "%d", post ? 1 : 0);
    gen->kern->config = cg_printf(gen, "router top-%lld of %lld%s%s", (long long)kv, (long long)ev,
                                  pre ? ", softmax over all" : "", post ? ", softmax over the chosen" : "");
    cg_launch *L = &gen->kern->launch;
    L->block = 256;
    L->grid[0] = GRID(rows, 8, 0);
    L->grid[1] = L->grid[2] = GRID(ir_dim_const(1), 1, 0);
    return !gen->failed;
}

bool cg_gen_moe(cg_gen *gen, cg_plan *plan, cg_str *hooks)
{
    if (gen->anchor->op == IR_OP_EXPERT_LINEAR) return gen_expert(gen, plan, hooks);
    if (gen->anchor->op == IR_OP_TOPK) return gen_router(gen, plan, hooks);
    return cg_fail(gen, "%s has no mixture-of-experts template", ir_op_name(gen->anchor->op));
}
