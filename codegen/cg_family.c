/* codegen/cg_family.c — the generated part of each kernel family.
 *
 * Each generator checks that the group fits its template, registers the
 * KilnArgs fields the template reads (in the contract's order), writes the
 * template constants into plan->defines and the hook functions into `hooks`
 * (codegen/kernels/CONTRACT.md). A group that does not fit fails with the
 * reason; cg_emit.c then falls back to the generic elementwise kernel.
 *
 * Heuristics (tiles, threads, vector widths, splits) are small functions at
 * the top of each section; they only need to be correct and reasonable, the
 * fast template versions tune them. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_impl.h"
#include "codegen/cg_lt.h"


static void define(cg_plan *plan, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void define(cg_plan *plan, const char *name, const char *fmt, ...)
{
    cg_str_printf(&plan->defines, "#define %s ", name);
    va_list ap;
    va_start(ap, fmt);
    cg_str_vprintf(&plan->defines, fmt, ap);
    va_end(ap);
    cg_str_append(&plan->defines, "\n", 1);
}

/* One grid dimension without a second factor: min(ceil(n / div), cap). */
static cg_grid_dim grid_dim(ir_dim n, int64_t div, int64_t cap) { return (cg_grid_dim){n, div, cap, ir_dim_const(0), 0}; }

/* Does member (or free view) n read the anchor, directly or through members? */
static bool reads_anchor(const cg_gen *gen, const ir_node *n, int depth)
{
    if (n == gen->anchor) return true;
    if (depth > 64 || !(cg_is_member(gen, n) || cg_is_free_view(gen, n))) return false;
    for (int i = 0; i < n->ninputs; i++)
        if (reads_anchor(gen, n->inputs[i], depth + 1)) return true;
    return false;
}

static void finish_fn(cg_gen *gen, cg_str *hooks, const char *signature, cg_str *body)
{
    cg_str_printf(hooks, "%s\n{\n%s}\n\n", signature, body->s ? body->s : "");
    if (body->oom) hooks->oom = true;
    cg_str_free(body);
}

/* ---- elementwise: also gathers, copies, cache writes and the generic fallback --- */

/* A cache write whose result lives in the cache it updates: only the new
 * rows are written (in place). */
static bool in_place_cache_write(const cg_gen *gen, const ir_node *n)
{
    return n->op == IR_OP_CACHE_WRITE && cg_storage_node(gen, n) == cg_storage_node(gen, n->inputs[0]);
}

static void emit_output(cg_gen *gen, const ir_node *o, const char *e)
{
    if (in_place_cache_write(gen, o)) {
        const ir_node *xs = o->inputs[1], *pos = o->ninputs > 2 ? o->inputs[2] : NULL;
        cg_idx xi = cg_idx_flat(&xs->type, e);
        const char *b = cg_idx_coord(gen, &xi, 0), *s = cg_idx_coord(gen, &xi, 1);
        const char *h = cg_idx_coord(gen, &xi, 2), *d = cg_idx_coord(gen, &xi, 3);
        const char *off = "0LL";
        if (o->attrs.packed) b = cg_packed_token(gen, s, &o->type.dims[0], &s); /* its sequence and index there */
        if (pos) {
            cg_idx pi = cg_idx_flat(&pos->type, NULL);
            pi.c[0] = b;
            off = cg_int_value(gen, pos, &pi);
        }
        cg_line(gen, "const long long t = %s + %s;", off, s);
        cg_open(gen, "if (t >= 0 && t < %s) /* positions past the cache are not written */",
                cg_dim(gen, &o->type.dims[2]));
        const char *v = cg_value(gen, xs, &xi);
        cg_idx ci = cg_idx_flat(&o->type, NULL);
        ci.c[0] = cg_slot_row(gen, b); /* the state row of batch row b */
        ci.c[1] = h;
        ci.c[2] = "t";
        ci.c[3] = d;
        cg_store(gen, o, &ci, v);
        cg_close(gen);
        return;
    }
    cg_idx x = cg_idx_flat(&o->type, e);
    cg_store(gen, o, &x, cg_value(gen, o, &x));
}

/* KILN_VEC: 4 consecutive elements per thread for plain elementwise chains
 * with one output (ILP; the fast version vectorizes the hook), else 1. */
static int heur_vec(bool simple, int nouts) { return simple && nouts == 1 ? 4 : 1; }

bool cg_gen_elementwise(cg_gen *gen, cg_plan *plan, cg_str *hooks)
{
    const ir_graph *g = gen->g;
    plan->family = CG_FAMILY_ELEMENTWISE;
    plan->nouts = 0;
    bool simple = true;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i]) continue;
        if (ir_op_class(n->op) != IR_CLASS_ELEMENTWISE && !pass_is_view(n)) simple = false;
        if (!cg_used_outside(gen, n)) continue;
        if (plan->nouts == (int)(sizeof plan->outs / sizeof plan->outs[0]))
            return cg_fail(gen, "kernel k%d has more than %d outputs", gen->k, plan->nouts);
        plan->outs[plan->nouts++] = n;
    }
    if (plan->nouts == 0) return cg_fail(gen, "kernel k%d computes nothing that is used", gen->k);
    ir_dim space[16], total = ir_dim_const(0);
    for (int j = 0; j < plan->nouts; j++) {
        const ir_node *o = plan->outs[j];
        const ir_type *t = in_place_cache_write(gen, o) ? &o->inputs[1]->type : &o->type;
        space[j] = ir_type_numel(t, 0, t->rank, &gen->dim_overflow);
        total = ir_dim_plus(total, space[j], &gen->dim_overflow);
    }
    cg_scalar(gen, "n", total);
    cg_str body = {0};
    cg_begin_fn(gen, &body);
    if (plan->nouts == 1) {
        emit_output(gen, plan->outs[0], "i");
    } else {
        /* several outputs: the index space is their concatenation */
        ir_dim off = ir_dim_const(0);
        for (int j = 0; j < plan->nouts; j++) {
            ir_dim end = ir_dim_plus(off, space[j], &gen->dim_overflow);
            if (j + 1 < plan->nouts) cg_open(gen, "%sif (i < %s)", j ? "else " : "", cg_dim(gen, &end));
            else cg_open(gen, "else");
            cg_line(gen, "const long long e = i - %s;", cg_dim(gen, &off));
            emit_output(gen, plan->outs[j], "e");
            cg_close(gen);
            off = end;
        }
    }
    finish_fn(gen, hooks, "__device__ __forceinline__ void kiln_elem(const KilnArgs &p, long long i)", &body);
    int vec = heur_vec(simple, plan->nouts);
    define(plan, "KILN_VEC", "%d", vec);
    define(plan, "KILN_EW_THREADS", "256");
    gen->kern->launch.block = 256;
    gen->kern->launch.grid[0] = grid_dim(total, 256 * vec, (int64_t)gen->target->sm_count * 8);
    gen->kern->launch.grid[1] = gen->kern->launch.grid[2] = grid_dim(ir_dim_const(1), 1, 0);
    return !gen->failed;
}

/* ---- row ------------------------------------------------------------------------- */

#ifndef KILN_CG_ROW_ITEMS
/* row.cuh: the elements per thread the heuristic aims at (a power of two; those a thread
 * holds in registers and has in flight at once). A build-time knob for measurements. */
#define KILN_CG_ROW_ITEMS 16
#endif

/* row.cuh's threads per CTA (a power of two in [64, 1024] aiming at KILN_CG_ROW_ITEMS elements
 * each; a symbolic row length gets 256), *items (KILN_ROW_ITEMS: the row in registers where its
 * length is a constant of at most 16 per thread, else 0) and *vec (KILN_ROW_VEC, consecutive
 * elements per thread in the aligned path): vmax elements make 16 bytes of the kernel's type (a
 * d known only at run time: vmax, which row.cuh takes where p.d allows). Where vmax or a smaller
 * power of two divides d, the threads are chosen (a multiple of 64) so that each holds whole
 * groups of it: a row of 3072 takes 192 threads of 16, not 256 of 12. */
static int heur_row_threads(const ir_dim *d, int vmax, int *items, int *vec)
{
    int64_t len;
    *items = 0;
    *vec = 1;
    if (!ir_dim_is_const(d, &len)) {
        *vec = vmax; /* row.cuh takes the groups where p.d allows at run time */
        return 256;
    }
    int t = 64;
    while (t < 1024 && (int64_t)t * KILN_CG_ROW_ITEMS < len) t *= 2;
    int64_t per = (len + t - 1) / t;
    if (per > 16) return t;
    *items = (int)per;
    if (per < 1) return t; /* an empty row */
    for (int v = vmax; v > 1; v /= 2) {
        if (len % v) continue;
        const int64_t pv = (per + v - 1) / v * v;
        /* whole pairs of warps: at 288 threads ptxas aimed at 7 CTAs per SM, 32 registers, and spilled */
        const int64_t tv = ((len + pv - 1) / pv + 63) / 64 * 64;
        if (tv > 1024 || pv > 16) continue;
        *items = (int)pv;
        *vec = v;
        return (int)tv;
    }
    return t;
}

/* The decode-sized options of matmul_wgmma.cuh that codegen turns on at skinny M (bit 0
 * KILN_WGMMA_W_EARLY, bit 1 KILN_WGMMA_W_EVICT_FIRST, bit 2 KILN_WGMMA_EPI_EARLY, bit 3 with bit 0
 * KILN_WGMMA_W_L2 at two rings of K steps; cg_gen_matmul says when each applies): W early and
 * evict-first, the two the 8B decode layer measured faster with (README, "The decode-sized
 * options"); bit 4: the skinny split-K in a cluster (KILN_WGMMA_CLUSTER_K, wg_cluster_split)
 * instead of through the workspace; bit 5: the norm folds into a QKV epilogue's skinny tiles
 * too (cg_norm_folded); bit 6: the epilogue's operands in registers from each tile's start
 * (KILN_WGMMA_EPI_EARLY 2, over bit 2); bit 7: the tile's end without a round trip to memory
 * (KILN_WGMMA_TAIL); bit 8: bit 6 for the QKV epilogue too (README, "The M = 32 projections"). A build-time knob so that a benchmark
 * can build the variants it compares (bench/gemv/build_variants.sh). */
#ifndef KILN_CG_WG_DECODE
#define KILN_CG_WG_DECODE 211
#endif
/* the heuristic's largest cluster split: 2 (the H200 keeps sm_count / 2 clusters of two resident
 * under the skinny tiles' shared memory, only 39 of three and 30 of four, so larger splits of
 * the 8B projections leave a second wave: README, "The M = 32 projections") */
enum { WG_CLUSTER_MAX = 2 };

int cg_gemv_max_rows(const cg_target *t)
{
    return strcmp(t->arch, "sm_90a") ? CG_GEMV_MAX_ROWS : CG_GEMV_HOPPER_MAX_ROWS;
}

int cg_norm_fold_max_rows(const cg_target *t)
{
    return strcmp(t->arch, "sm_90a") ? CG_GEMV_MAX_ROWS : CG_NORM_FOLD_HOPPER_MAX_ROWS;
}

bool cg_attention_is_decode(const ir_node *attention, const int64_t *dims)
{
    int64_t s_val;
    return !attention->attrs.packed && ir_dim_value(&attention->inputs[0]->type.dims[1], dims, &s_val) &&
           s_val <= CG_GEMV_MAX_ROWS;
}

bool cg_decode_variant(const ir_graph *g, const int64_t *dims)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->op == IR_OP_ATTENTION) {
            if (!cg_attention_is_decode(g->nodes[i], dims)) return false;
            n++;
        }
    return n > 0;
}

bool cg_decode_rows(const ir_graph *g, const int64_t *dims, int64_t *rows)
{
    *rows = 0;
    bool any = false;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->op != IR_OP_ATTENTION) continue;
        int64_t b, s;
        if (!ir_dim_value(&n->inputs[0]->type.dims[0], dims, &b) || !ir_dim_value(&n->inputs[0]->type.dims[1], dims, &s))
            return false;
        if (b * s > *rows) *rows = b * s;
        any = true;
    }
    return any;
}

bool cg_norm_folded(const cg_gen *gen, const ir_node *n)
{
    const ir_graph *g = gen->g;
    if (n->op != IR_OP_RMSNORM || n->group < 0 || !g->groups[n->group].fold_into_gemv) return false;
    bool ovf = false;
    ir_dim rows = ir_type_numel(&n->type, 0, n->type.rank - 1, &ovf);
    int64_t r;
    if (ovf || !ir_dim_value(&rows, gen->dims, &r) || r > cg_norm_fold_max_rows(gen->target)) return false;
    if (r <= cg_gemv_max_rows(gen->target)) return true;
    if (r < CG_NORM_FOLD_HOPPER_MIN_ROWS) return false;
    /* the Hopper matmul's skinny tiles: not where a consumer's epilogue holds the QKV epilogue's
     * rope or cache write (its few tiles leave one consumer per CTA, whose added sums of squares
     * then cost more than the norm's kernel: README, "The decode rule"), unless
     * KILN_CG_WG_DECODE bit 5 says so */
    for (int i = 0; i < g->nnodes && !(KILN_CG_WG_DECODE & 32); i++) {
        const ir_node *m = g->nodes[i];
        if (m->op != IR_OP_LINEAR || m->inputs[0] != n || m->group < 0) continue;
        for (int j = 0; j < g->nnodes; j++)
            if (g->nodes[j]->group == m->group && (g->nodes[j]->op == IR_OP_ROPE || g->nodes[j]->op == IR_OP_CACHE_WRITE))
                return false;
    }
    return true;
}

static int64_t head_norm_paired_hd(cg_gen *gen, const ir_node *n);

/* The row anchor's value y inside a row hook's element loop: the norm's `v` times its gain plus
 * its bias (where the graph still has them: fold_norm_gain.c folds the gain into the weights
 * that read the norm); other anchors are `v` itself. */
static void row_anchor_value(cg_gen *gen, const ir_node *A)
{
    if (A->op != IR_OP_RMSNORM && A->op != IR_OP_LAYERNORM) return;
    cg_idx wi = cg_idx_flat(&A->type, "i");
    const char *av = "v";
    if (A->ninputs > 1) {
        wi = cg_idx_flat(&A->inputs[1]->type, "i");
        av = cg_printf(gen, "v * %s", cg_value(gen, A->inputs[1], &wi));
    }
    if (A->ninputs > 2) av = cg_printf(gen, "%s + %s", av, cg_value(gen, A->inputs[2], &wi));
    cg_line(gen, "const float y = %s;", av);
}

/* A row hook's body over the group of V elements from i0: one loop computes the n outputs'
 * values (with A: the anchor's value from vv[j] first) into o<k>[V], then one loop per output
 * stores them. xi: the element's index (its last coordinate `i`). */
static void row_group_stores(cg_gen *gen, const ir_node *const *outs, int n, const cg_idx *xi, const ir_node *A)
{
    for (int k = 0; k < n; k++) cg_line(gen, "float o%d[V];", k);
    cg_line(gen, "#pragma unroll");
    cg_open(gen, "for (int j = 0; j < V; j++)");
    cg_line(gen, "const long long i = i0 + j;");
    cg_line(gen, A ? "const float v = vv[j], x = xv[j];" : "const float x = xv[j];");
    cg_line(gen, A ? "(void)i; (void)v; (void)x;" : "(void)i; (void)x;");
    if (A) row_anchor_value(gen, A);
    for (int k = 0; k < n; k++) cg_line(gen, "o%d[j] = %s;", k, cg_value(gen, outs[k], xi));
    cg_close(gen);
    for (int k = 0; k < n; k++) {
        cg_line(gen, "#pragma unroll");
        cg_open(gen, "for (int j = 0; j < V; j++)");
        cg_line(gen, "const long long i = i0 + j;");
        cg_store(gen, outs[k], xi, cg_printf(gen, "o%d[j]", k));
        cg_close(gen);
    }
}

bool cg_gen_row(cg_gen *gen, cg_plan *plan, cg_str *hooks)
{
    const ir_graph *g = gen->g;
    const ir_node *A = gen->anchor, *X = A->inputs[0];
    const ir_type *xt = &X->type;
    int r = xt->rank;
    plan->family = CG_FAMILY_ROW;
    if (r < 1) return cg_fail(gen, "row kernel over a scalar");
    const char *op = NULL;
    bool reduction = false;
    switch (A->op) {
    case IR_OP_RMSNORM: op = "KILN_ROW_RMSNORM"; break;
    case IR_OP_LAYERNORM: op = "KILN_ROW_LAYERNORM"; break;
    case IR_OP_SOFTMAX:
        if (A->attrs.axis != r - 1) return cg_fail(gen, "softmax along axis %d, not the last", A->attrs.axis);
        op = "KILN_ROW_SOFTMAX";
        break;
    case IR_OP_SUM:
    case IR_OP_MEAN:
    case IR_OP_REDUCE_MAX:
        if (A->attrs.axes != (1u << (r - 1))) return cg_fail(gen, "%s over axes other than the last alone", ir_op_name(A->op));
        op = A->op == IR_OP_SUM ? "KILN_ROW_SUM" : A->op == IR_OP_MEAN ? "KILN_ROW_MEAN" : "KILN_ROW_MAX";
        reduction = true;
        break;
    default: return cg_fail(gen, "%s is not a row operation", ir_op_name(A->op));
    }
    /* classify members: prologue (before the anchor) and epilogue (after) */
    const ir_node *pre[16], *post[16], *rowout[16];
    int npre = 0, npost = 0, nrowout = 0;
    bool elemout = !reduction;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i]) continue;
        bool after = n != A && reads_anchor(gen, n, 0);
        if (n != A && ir_op_class(n->op) != IR_CLASS_ELEMENTWISE)
            return cg_fail(gen, "%s (line %d) in a row kernel is not elementwise", ir_op_name(n->op), n->loc.line);
        if (!cg_used_outside(gen, n)) continue;
        if (npre == 16 || npost == 16 || nrowout == 16) return cg_fail(gen, "too many outputs");
        if (n != A && !after) {
            if (!ir_type_same_shape(&n->type, xt)) return cg_fail(gen, "a prologue output is not row-shaped");
            pre[npre++] = n;
        } else if (ir_type_same_shape(&n->type, xt)) {
            post[npost++] = n;
            elemout = true;
        } else if (reduction && ir_type_same_shape(&n->type, &A->type)) {
            rowout[nrowout++] = n;
        } else {
            return cg_fail(gen, "an epilogue output of the row kernel has another shape");
        }
    }
    if (npost + nrowout == 0) return cg_fail(gen, "the row kernel's result is not used");

    ir_dim d = xt->dims[r - 1], rows = ir_type_numel(xt, 0, r - 1, &gen->dim_overflow);
    cg_scalar(gen, "rows", rows);
    cg_scalar(gen, "d", d);
    const char *D = cg_dim(gen, &d);
    cg_idx xi = cg_idx_flat(xt, cg_printf(gen, "(row * %s + i)", D));
    xi.c[r - 1] = "i";

    /* kiln_row_in: the row's input element. The hooks are templates on AL (row.cuh): their
     * element pointers through kiln_al<AL>, taken as 16-byte aligned in the checked path. */
    gen->ptr_wrap = "kiln_al<AL>";
    cg_str body = {0};
    cg_begin_fn(gen, &body);
    cg_line(gen, "return %s;", cg_value(gen, X, &xi));
    finish_fn(gen, hooks,
              "template <int AL> __device__ __forceinline__ float kiln_row_in(const KilnArgs &p, long long row, "
              "long long i)",
              &body);

    /* kiln_row_pre and kiln_row_out take a group of V consecutive elements from i0 (row.cuh):
     * each computes the group's values (its loads, e.g. a gain's, first), then stores each
     * output's V values in a row, so that no store comes between the loads or the stores the
     * compiler may merge (the outputs may alias the inputs). */
    /* kiln_row_pre: prologue values needed outside (the residual stream) */
    cg_begin_fn(gen, &body);
    cg_set_subst(gen, X, "x");
    if (npre == 0) cg_line(gen, "(void)p; (void)row; (void)i0; (void)xv;");
    else row_group_stores(gen, pre, npre, &xi, NULL);
    finish_fn(gen, hooks,
              "template <int AL, int V> __device__ __forceinline__ void kiln_row_pre(const KilnArgs &p, long long row, "
              "long long i0, const float (&xv)[V])",
              &body);

    /* kiln_row_out: the anchor's value, the epilogue, the stores */
    cg_begin_fn(gen, &body);
    cg_line(gen, "(void)xv;");
    cg_set_subst(gen, A, A->op == IR_OP_RMSNORM || A->op == IR_OP_LAYERNORM ? "y" : "v");
    cg_set_subst(gen, X, "x");
    row_group_stores(gen, post, npost, &xi, A);
    if (nrowout) {
        /* per-row outputs: once, from the group at i0 == 0 (its first element's values) */
        cg_open(gen, "if (i0 == 0)");
        cg_line(gen, "const long long i = 0;");
        cg_line(gen, "const float v = vv[0], x = xv[0];");
        cg_line(gen, "(void)i; (void)v; (void)x;");
        row_anchor_value(gen, A);
        for (int j = 0; j < nrowout; j++) {
            cg_idx ri = cg_idx_flat(&rowout[j]->type, "row");
            cg_store(gen, rowout[j], &ri, cg_value(gen, rowout[j], &ri));
        }
        cg_close(gen);
    }
    finish_fn(gen, hooks,
              "template <int AL, int V> __device__ __forceinline__ void kiln_row_out(const KilnArgs &p, long long row, "
              "long long i0, const float (&vv)[V], const float (&xv)[V])",
              &body);
    gen->ptr_wrap = NULL;

    /* kiln_row_aligned: every pointer field 16-byte aligned (the hooks' pointers are among them) */
    cg_begin_fn(gen, &body);
    const char *ors = NULL;
    for (int j = 0; j < gen->nargs; j++)
        if (gen->args[j].ctype && strchr(gen->args[j].ctype, '*'))
            ors = ors ? cg_printf(gen, "%s | (unsigned long long)p.%s", ors, gen->args[j].field)
                      : cg_printf(gen, "(unsigned long long)p.%s", gen->args[j].field);
    cg_line(gen, "return ((%s) & 15ull) == 0;", ors ? ors : "0ull");
    finish_fn(gen, hooks, "__device__ __forceinline__ bool kiln_row_aligned(const KilnArgs &p)", &body);

    const int esize = ir_dtype_size(X->type.dtype);
    int items, vec, threads = heur_row_threads(&d, esize > 0 && esize <= 8 ? 16 / esize : 1, &items, &vec);
    define(plan, "KILN_ROW_OP", "%s", op);
    if (A->op == IR_OP_RMSNORM || A->op == IR_OP_LAYERNORM) define(plan, "KILN_EPS", "%s", cg_float_lit(gen, A->attrs.eps));
    define(plan, "KILN_ROW_THREADS", "%d", threads);
    define(plan, "KILN_ROW_ITEMS", "%d", items);
    define(plan, "KILN_ROW_VEC", "%d", vec);
    define(plan, "KILN_ROW_ELEMOUT", "%d", elemout ? 1 : 0);
    gen->kern->launch.block = threads;
    /* a norm its GEMVs compute at these dims: not launched (an empty grid) */
    bool folded = cg_norm_folded(gen, A);
    if (folded) gen->kern->config = "not launched: the linears that read it compute it";
    gen->kern->launch.grid[0] = grid_dim(folded ? ir_dim_const(0) : rows, 1, 0);
    gen->kern->launch.grid[1] = gen->kern->launch.grid[2] = grid_dim(ir_dim_const(1), 1, 0);
    /* a per-head norm of rows whose rotation pairs sit side by side: its gain paired the same way */
    const int64_t phd = head_norm_paired_hd(gen, A);
    if (phd > 0) {
        const ir_node *gain = A->ninputs > 1 ? A->inputs[1] : NULL;
        if (gain) {
            gen->kern->xforms = calloc(1, sizeof *gen->kern->xforms);
            if (!gen->kern->xforms) return cg_fail(gen, "out of memory");
            gen->kern->xforms[gen->kern->nxforms++] =
                (cg_xform){CG_XFORM_ROPE_PAIRS, gain->id, ir_dim_const(0), 0, phd, 1, phd};
        }
        gen->kern->config = "its rows' rotation pairs side by side (the gain paired so) for attention's RoPE";
    }
    return !gen->failed;
}

/* ---- matmul ------------------------------------------------------------------------ */

/* Every term of d a multiple of 8 (16-byte loads of 2-byte elements). */
static bool mult8(const ir_dim *d)
{
    for (int t = 0; t < d->nterms; t++)
        if (d->t[t].coef % 8) return false;
    return true;
}


/* Batch strides of an operand over the output's batch axes: one stride for
 * the flattened batch index, or false when its axes do not flatten. */
static bool batch_stride(const ir_type *ot, int nb, const ir_type *xt, const cg_strided *xs, ir_dim *out)
{
    int xb = xt->rank - 2;
    ir_dim prev = ir_dim_const(0), prev_dim = ir_dim_const(1);
    bool have = false;
    *out = ir_dim_const(0);
    for (int q = nb - 1; q >= 0; q--) {
        if (cg_dim_one(&ot->dims[q])) continue;
        int xa = q - (nb - xb);
        ir_dim s = (xa >= 0 && !cg_dim_one(&xt->dims[xa])) ? xs->stride[xa] : ir_dim_const(0);
        if (!have) {
            *out = s;
            have = true;
        } else {
            ir_dim want;
            if (!ir_dim_mul(prev, prev_dim, &want) || !ir_dim_eq(&want, &s)) return false;
        }
        prev = s;
        prev_dim = ot->dims[q];
    }
    return true;
}

/* Which template and tiles. GEMV when M (rows of the product) is known to be
 * at most 16 — decode — else the tensor-core template with 128x128x32 tiles
 * (64 wide when N <= 64), 2x2 warps, 3 stages. GEMV: gemv_choose. */
typedef struct mm_heur {
    bool gemv;
    int bm, bn, bk, wm, wn, stages;
    int cols, splitk;
    int64_t ctas; /* GEMV: CTAs along N at most (0: one per column block) */
    /* the tensor-core GEMV (gemv_mma.cuh, 17..64 rows): n tiles of 8 rows, 16-column tiles
     * per warp task, warps per CTA, k blocks per load group, CTAs per SM, shared memory;
     * splitk and ctas as above */
    bool gmma;
    int nt, mt, warps, unroll, minb;
    int64_t smem;
} mm_heur;

/* The GEMV's split (gemv.cuh), for n columns, k and b batches: gemv_cols columns per
 * CTA; two CTAs of 256 threads are resident per SM up to 2 rows (gemv.cuh's
 * KILN_GEMV_MINB), one above, so `slots` = 2 (1) * SMs CTAs run at once. K is split (by powers of two, each slice
 * >= 512 of K) while the column blocks times the split still fit in the
 * slots; the grid is capped at the slots, each CTA walking several column
 * blocks when there are more: one wave, no partial second one, and every CTA
 * resident from the start so each issues its first weight loads under the
 * previous kernel's tail (programmatic dependent launch). */
/* CTAs per SM the GEMV's registers are capped for (gemv.cuh KILN_GEMV_MINB): two up to 2 rows
 * of a 2-byte type, where ptxas fits them in 128 registers, with a GELU epilogue too (the
 * Gemma-2B gate/up GEMV, GELU tanh or erf: 117 registers, no spill; test_cg_samples checks
 * every sample's kernels); one for f32 (GPT-2's fc + GELU spilled under the cap). */
static int gemv_minb(int64_t rows, ir_dtype t) { return rows <= 2 && t != IR_F32 ? 2 : 1; }

#ifndef KILN_CG_WG_QKV_WIDE
/* 1: the QKV epilogue through shared memory (qkv_tma_plan) at large M takes the cooperative
 * 128x256 tile (4 stages, one head staged at a time) where its tiles fill at least two waves, or,
 * M unknown (the large-shape variant), where N >= 4096 (wg_choose's rule for the other products);
 * 0: ping-pong 128x128, 5 stages, at every large M (docs/MATMUL.md). A build-time knob. */
#define KILN_CG_WG_QKV_WIDE 1
#endif
#ifndef KILN_CG_WG_RES_TMA
/* 1: at large M (not skinny), a TMA-store epilogue whose only loads are one operand of the
 * output's type read exactly where the output is written (a residual: the 8B layer's O and down)
 * gets it by TMA into the staging, a round ahead (matmul_wgmma.cuh KILN_WGMMA_RES_TMA), instead
 * of element loads at each tile's end; 0: the element loads (docs/MATMUL.md). A build-time knob. */
#define KILN_CG_WG_RES_TMA 1
#endif
#ifndef KILN_CG_WG_RES_REGS
/* 1: with the residual by TMA, the rounds after a tile's first take their residual from
 * registers loaded under the mainloop (matmul_wgmma.cuh KILN_WGMMA_RES_REGS, where they fit) instead
 * of a TMA load each behind the round before's store. A build-time knob, off until measured. */
#define KILN_CG_WG_RES_REGS 0
#endif
#ifndef KILN_CG_GEMV_DEFER
/* gemv.cuh's KILN_GEMV_DEFER: column blocks whose partial sums a CTA holds before one CTA-wide
 * reduction (0: a reduction after every block). A build-time knob for benchmarks. */
#define KILN_CG_GEMV_DEFER 16
#endif
#ifndef KILN_CG_GEMV_WIDE
/* 1: at one row, gemv_cols takes the width (12, 10, 8, 6 or 4) that gives the busiest CTA the
 * fewest weight rows, then the fewest column blocks. A build-time knob for benchmarks. */
#define KILN_CG_GEMV_WIDE 0
#endif
#ifndef KILN_CG_GEMV_LAUNCH
/* gemv.cuh's KILN_GEMV_LAUNCH_AT (where a CTA lets the next kernel launch). A build-time knob. */
#define KILN_CG_GEMV_LAUNCH 1
#endif
#ifndef KILN_CG_GEMV_RING
/* R > 1: gemv.cuh's KILN_GEMV_RING (the weights through slots per thread in shared memory,
 * cp.async one slot short of the ring ahead) where the deferred path applies at two CTAs per SM:
 * as many slots as fit them, at most R. A build-time knob for benchmarks. */
#define KILN_CG_GEMV_RING 0
#endif
#ifndef KILN_CG_GEMV_RING_MINK
/* the ring only where K is at least this (each thread's several steps per column block). A
 * build-time knob for measurements. */
#define KILN_CG_GEMV_RING_MINK 0
#endif
#ifndef KILN_CG_GEMV_SMALL_MB
/* with the ring or the prefetch on: only for weights of at most this many MB (0: any size). The
 * idea to measure: both start a kernel's weight stream under the previous kernel's tail, which
 * is a larger share of a small matrix's time (the 1B layer's 34 MB down projection gained 3.9 us
 * on an H100 where the 8B layer's 117 MB one lost). 40: the prefetch on the 1B, Gemma-2B and Phi-3
 * projections and the 8B's attention ones (bench/device/call_1b.sh measured the layers 1-7%
 * faster on an H100, see README). A build-time knob for measurements. */
#define KILN_CG_GEMV_SMALL_MB 40
#endif
#ifndef KILN_CG_GEMV_PREFETCH
/* 1: gemv.cuh's KILN_PDL_PREFETCH (the first block's weight rows into L2 before the wait), on
 * weights up to KILN_CG_GEMV_SMALL_MB. A build-time knob for benchmarks. */
#define KILN_CG_GEMV_PREFETCH 1
#endif
/* Columns per CTA (two CTAs per SM: gemv_minb 2): the busiest CTA streams ceil(blocks / slots)
 * column blocks of `cols` weight rows. 8, unless the blocks of 8 take more than one round and 6
 * or 4 (first best wins) gives it at most 7/8 of the rows of 8 — a partial last round of blocks
 * of 8 (the 1B QKV's 3072 columns: 384 blocks
 * of 8 on 264 slots, 2 rounds of 8 rows against 2 of 6). Wider blocks spill under the 128
 * registers of two CTAs per SM in gemv.cuh's general path (12 or 10 columns with a residual
 * epilogue), not in its deferred one (test_matmul_nvrtc), where KILN_CG_GEMV_WIDE may take them:
 * it measured no faster in the layers (README, "The deferred reduction"). */
static int gemv_cols(int minb, int64_t m, int64_t n, int64_t b, int64_t slots)
{
    if (KILN_CG_GEMV_WIDE && KILN_CG_GEMV_DEFER > 0 && minb == 2 && m == 1) {
        static const int wide[] = {8, 12, 10, 6, 4};
        int best = 8;
        int64_t best_rows = 0, best_rounds = 0;
        for (int i = 0; i < 5; i++) {
            const int64_t blocks = (n + wide[i] - 1) / wide[i] * b, rounds = (blocks + slots - 1) / slots;
            if (i == 0 || rounds * wide[i] < best_rows || (rounds * wide[i] == best_rows && rounds < best_rounds))
                best = wide[i], best_rows = rounds * wide[i], best_rounds = rounds;
        }
        return best;
    }
    static const int cand[] = {8, 6, 4};
    int best = 8;
    int64_t rows8 = 0, best_rows = 0;
    for (int i = 0; i < (minb == 2 ? 3 : 1); i++) {
        const int64_t blocks = (n + cand[i] - 1) / cand[i] * b, rows = (blocks + slots - 1) / slots * cand[i];
        if (i == 0 && blocks <= slots) return 8; /* one round: nothing to even out */
        if (i == 0) rows8 = best_rows = rows;
        else if (rows * 8 <= rows8 * 7 && rows < best_rows) best = cand[i], best_rows = rows;
    }
    return best;
}

static void gemv_choose(mm_heur *h, int minb, int64_t m, int64_t n, int64_t k, int64_t b, int sm_count)
{
    const int64_t slots = minb * (int64_t)sm_count;
    if (slots > 0) h->cols = gemv_cols(minb, m, n, b, slots);
    const int64_t cbs = (n + h->cols - 1) / h->cols * b;
    h->splitk = 1;
    while (cbs * h->splitk * 2 <= slots && k / (h->splitk * 2) >= 512 && h->splitk < 16) h->splitk *= 2;
    h->ctas = cbs > 0 && b > 0 ? slots / (h->splitk * b) : 0;
    if (h->ctas < 1 && cbs > 0) h->ctas = 1;
}

/* gemv_mma.cuh's shared memory for k, the split and nt row tiles (its gmma_smem_bytes):
 * the staged K slice of A, 8*nt rows of round_up(kper, 64) + 32 elements, and 8*nt floats */
static int64_t gmma_smem(int64_t k, int split, int nt)
{
    const int64_t kper = ((k + split - 1) / split + 31) / 32 * 32;
    return 8 * (int64_t)nt * (((kper + 63) / 64 * 64 + 32) * 2 + 4);
}

/* Whether gemv_mma.cuh takes a linear of m rows (17..64) at these dims: bf16 or f16
 * operands of one type, W as [N, K], N, K and batch known, and a K slice of A that fits
 * in shared memory at a split of at most 16. */
static bool gmma_fits(ir_dtype at, ir_dtype wt, int b_nk, bool hm, int64_t m, bool hn, bool hk, int64_t k, bool hb,
                      const cg_target *t)
{
    if (!hm || m <= CG_GEMV_MAX_ROWS || m > CG_GEMV_MMA_MAX_ROWS || !hn || !hk || !hb) return false;
    if (at != wt || (at != IR_BF16 && at != IR_F16) || b_nk != 1) return false;
    return gmma_smem(k, 16, (int)((m + 7) / 8)) <= t->smem_per_block;
}

/* gemv_mma.cuh's configuration for m rows (17..64), n columns, k, b batches:
 * - 8 warps of 16-column tiles (one 16x8 MMA tile per 8 rows), 4 k blocks of 32 per load
 *   group (two groups in flight per lane; 2 blocks with two CTAs per SM or more than 32 rows);
 * - K split into the fewest slices whose staged A fits in half the SM's shared memory
 *   (two CTAs per SM), or in all of it (one CTA per SM) when that needs fewer slices,
 *   then more slices (powers of two times that) while the warp tasks (tiles times slices)
 *   fill fewer than the warps resident at once, the partial sums (8 bytes per output
 *   element per slice, written and read back) stay under an eighth of the weight's bytes
 *   and each slice is at least 256 of K; two CTAs per SM when their shared memory fits
 *   (and at most 32 rows);
 * - the grid capped at the CTAs resident at once (each warp then walks several tiles). */
static void gmma_choose(mm_heur *h, int64_t m, int64_t n, int64_t k, int64_t b, const cg_target *t)
{
    h->gmma = true;
    h->nt = (int)((m + 7) / 8);
    h->mt = 1;
    h->warps = 8;
    h->unroll = h->nt <= 4 ? 4 : 2;
    const int64_t half = (t->smem_per_block - 2048) / 2;
    int sp = 1;
    while (sp < 16 && gmma_smem(k, sp, h->nt) > half) sp++;
    int sp1 = 1;
    while (sp1 < 16 && gmma_smem(k, sp1, h->nt) > t->smem_per_block) sp1++;
    h->minb = 2;
    if (sp1 < sp) sp = sp1, h->minb = 1;
    const int64_t ntiles = (n + 15) / 16, resident = (int64_t)t->sm_count * h->minb * h->warps;
    while (sp * 2 <= 16 && ntiles * sp * b < resident && 8.0 * (double)m * (double)(sp * 2) <= 0.25 * (double)k &&
           (k + sp * 2 - 1) / (sp * 2) >= 256)
        sp *= 2;
    h->splitk = sp;
    h->smem = gmma_smem(k, sp, h->nt);
    /* two CTAs per SM (128 registers each) where their shared memory fits and up to 32 rows:
     * more rows' accumulators spill at that cap */
    h->minb = h->nt <= 4 && 2 * h->smem + 2048 <= t->smem_per_block + 1024 ? 2 : 1;
    if (h->minb == 2) h->unroll = 2; /* two groups of 4 blocks in flight do not fit in 128 registers */
    const int64_t slots = (int64_t)t->sm_count * h->minb;
    h->ctas = slots / (sp * b);
    if (h->ctas < 1) h->ctas = 1;
}

/* The Hopper template's configuration (matmul_wgmma.cuh constants): tile,
 * ring depth, ping-pong consumers, the epilogue through shared memory and TMA
 * stores (ec output columns staged at a time), split-K factor through the
 * workspace (split), or in a cluster of ck CTAs (KILN_WGMMA_CLUSTER_K; 0 or 1:
 * none; wg_cluster_split), whose exchange carries the folded norm's sums too
 * (nrm). No clusters along M: they measured no better than one CTA with this
 * epilogue (docs/MATMUL.md). */
typedef struct wg_cfg {
    int bm, bn, stages, pp, ts, ec, split, ck, nrm;
} wg_cfg;
enum { WG_BK = 64, WG_THREADS = 384 };
/* its KILN_SMEM_BYTES: the ring, 1 KiB to align it, the mbarriers and flags,
 * the staging of the TMA-store epilogue */
static int64_t wg_smem(const wg_cfg *c)
{
    return (int64_t)c->stages * (c->bm + c->bn) * WG_BK * 2 + 1024 + c->stages * 16 + 32 +
           (KILN_CG_WG_RES_TMA && c->ts ? 16 : 0) + /* the TMA residual's mbarriers, wherever it may apply */
           (c->ts ? (int64_t)(c->pp ? 2 : 1) * c->bm * c->ec * 2 : 0) +
           (c->ck > 1 ? (int64_t)(c->ck - 1) * (c->bm / 64) * 128 * (c->bn / 8 + (c->nrm ? 1 : 0)) * 16 + 32 : 0);
}

/* The configuration (docs/MATMUL.md has the measurements behind it):
 * - large M (not known to be <= 256): K > 8192 or N >= 4096 (every 8B
 *   projection), cooperative 128x256, 4 stages; else (and N unknown)
 *   ping-pong 128x128, 5 stages (6 without the TMA store); the TMA-store
 *   epilogue staging 128 output columns at a time when `ts`.
 * - skinny M (17..256, known: a decode-shaped variant): the weights must
 *   stream once over the SMs: ping-pong 64x128 tiles, 8 stages (M <= 64 and
 *   `narrow`: 64x64 tiles, 12 stages, twice the tiles, unless the epilogue is
 *   a `plain` store and 64x128 tiles get as many CTAs under the cluster
 *   split), split K so
 *   that the tiles fill the SMs at most once, by at most 2 (4 when K >= 8192:
 *   more slices measured slower), each slice at least 2 K steps of 64 and the
 *   partial sums (written and read back, 8 bytes per output element per
 *   slice) at most a quarter of the weight's bytes; at M <= 64 only when
 *   K >= 8192 or the tiles fill at most a quarter of the SMs. The split needs
 *   N, K and batch known. With KILN_CG_WG_DECODE bit 4 the skinny split is
 *   the cluster's (wg_cluster_split): its end is an exchange in distributed
 *   shared memory, so it splits whenever two slices per tile fit the SMs: by
 *   floor(SMs / tiles), at most WG_CLUSTER_MAX, each slice at least 2 K
 *   steps. */

/* The CTAs of a skinny product's tiles of bn columns under the cluster split (as below). */
static int64_t wg_cluster_ctas(int64_t tiles, int64_t ktiles, int sm_count)
{
    if (tiles <= 0) return 0; /* an empty product */
    int64_t sp = sm_count / tiles;
    if (sp > WG_CLUSTER_MAX) sp = WG_CLUSTER_MAX;
    if (sp > ktiles / 2) sp = ktiles / 2;
    return tiles * (sp < 2 ? 1 : sp);
}

static wg_cfg wg_choose(const int64_t *mv, const int64_t *nv, const int64_t *kv, const int64_t *bv, bool ts,
                        bool narrow, bool plain, int sm_count)
{
    if (!mv || *mv > 256) {
        if ((kv && *kv > 8192) || (nv && *nv >= 4096)) return (wg_cfg){128, 256, 4, 0, ts, 128, 1, 0, 0};
        return (wg_cfg){128, 128, ts ? 5 : 6, 1, ts, 128, 1, 0, 0};
    }
    const bool one_block = *mv <= 64;
    /* a plain store (no epilogue operand to load at the tile's end) keeps the 64x128 tile where
     * the cluster split gives it as many CTAs as the 64x64 tile: the 8B QKV projection at M = 32,
     * 17.1 us against 20.6 (README, "The M = 32 projections") */
    if (narrow && plain && one_block && nv && kv && bv && (KILN_CG_WG_DECODE & 16)) {
        const int64_t kt = (*kv + 63) / 64;
        if (wg_cluster_ctas(*bv * ((*nv + 127) / 128), kt, sm_count) >= wg_cluster_ctas(*bv * ((*nv + 63) / 64), kt, sm_count))
            narrow = false;
    }
    wg_cfg c = narrow && one_block ? (wg_cfg){64, 64, 12, 1, ts, 64, 1, 0, 0} : (wg_cfg){64, 128, 8, 1, ts, 128, 1, 0, 0};
    if (!nv || !kv || !bv) return c;
    const int64_t rb = (*mv + c.bm - 1) / c.bm, tiles = *bv * rb * ((*nv + c.bn - 1) / c.bn), ktiles = (*kv + 63) / 64;
    if (tiles <= 0) return c; /* an empty product (a dim of 0): nothing to split */
    if (KILN_CG_WG_DECODE & 16) { /* the cluster's split (wg_cluster_split turns split into ck) */
        int64_t sp = sm_count / tiles;
        if (sp > WG_CLUSTER_MAX) sp = WG_CLUSTER_MAX;
        if (sp > ktiles / 2) sp = ktiles / 2;
        c.split = sp < 2 ? 1 : (int)sp;
        return c;
    }
    /* one row block: a split's end (partials, counter, the last slice's reduction) costs more
     * than the SMs it adds unless K is long or the tiles fill at most a quarter of the SMs */
    if (one_block && *kv < 8192 && tiles * 4 > sm_count) return c;
    int64_t sp = tiles >= sm_count ? 1 : sm_count / tiles;
    const int64_t cap = *kv >= 8192 ? 4 : 2;
    if (sp > cap) sp = cap;
    if (sp > ktiles / 2) sp = ktiles / 2;
    const int64_t rows = *mv < c.bm ? *mv : c.bm;
    while (sp > 1 && 8.0 * (double)rows * (double)rb * (double)*nv * (double)sp > 0.25 * 2.0 * (double)*nv * (double)*kv)
        sp--;
    c.split = sp < 1 ? 1 : (int)sp;
    return c;
}

/* At skinny M with KILN_CG_WG_DECODE bit 4: a split of 2..8 is the cluster's
 * (ck = split, no workspace; nrm: a folded norm, whose sums the exchange
 * carries), with the ring shortened until the exchange buffer fits the
 * target's shared memory (at least 2 stages; else the split stays the
 * workspace's). The tuner's choices go through it too: a stored split means
 * the same kernel. */
static void wg_cluster_split(wg_cfg *c, bool skinny, bool norm, const cg_target *t)
{
    if (!skinny || !(KILN_CG_WG_DECODE & 16) || c->split < 2 || c->split > 8 || c->ck > 1) return;
    wg_cfg k = *c;
    k.ck = c->split;
    k.split = 1;
    k.nrm = norm;
    while (k.stages > 2 && wg_smem(&k) > t->smem_per_block) k.stages--;
    if (wg_smem(&k) <= t->smem_per_block) *c = k;
}

static bool wg_legal(const wg_cfg *c, bool swiglu, bool heavy, bool can_split, const cg_target *t);

/* The tile widths matmul_wgmma.cuh's kwg_mma takes, ascending; those besides 64, 128 and 256 only on
 * ping-pong 64-row tiles (wg_legal). */
static const int wg_widths[] = {16, 32, 48, 64, 96, 112, 128, 160, 192, 224, 256};

static bool wg_width_ok(int bn)
{
    for (size_t i = 0; i < sizeof wg_widths / sizeof wg_widths[0]; i++)
        if (wg_widths[i] == bn) return true;
    return false;
}

/* Whether a tile of bn accumulator columns can leave through the TMA store's rounds of 64 output
 * columns (SwiGLU: half its columns); else its epilogue writes from registers. */
static bool wg_ts_fits(int bn, bool swiglu)
{
    return (swiglu ? bn / 2 : bn) % 64 == 0;
}

/* The weight columns the busiest SM streams under c (K slices of a cluster split count as
 * fractions of a column), for `tiles` column blocks of c->bn: a CTA per SM, a cluster of ck per ck SMs. */
static double wg_busiest(const wg_cfg *c, int64_t tiles, int sm_count)
{
    const int ck = c->ck > 1 ? c->ck : 1, sp = c->split > 1 ? c->split : 1;
    const int64_t slots = sm_count / ck > 0 ? sm_count / ck : 1, units = tiles * sp;
    return (double)((units + slots - 1) / slots) * (double)c->bn / (double)(ck * sp);
}

/* At skinny M with one row block (M <= 64) and N, batch known: the width of kwg_mma's that gives
 * the busiest SM the fewest weight columns to stream (ties: the wider, fewer tiles), unsplit, as
 * many stages as fit (at most 12), the TMA store where the output columns are a multiple of 64
 * (else from registers), into *out, when it leaves the busiest SM strictly fewer columns than c
 * (`ties`: or as many, where c splits K).
 * Not for the QKV epilogue (a tile holds whole heads). KILN_CG_WG_EVEN takes it (wg_even; with
 * bit 2 the autotuner times it: wg_candidates). */
static bool wg_even_pick(wg_cfg *out, const wg_cfg *c, bool skinny, const int64_t *mv, const int64_t *nv,
                         const int64_t *bv, bool swiglu, bool qkv, bool heavy, bool ties, const cg_target *t)
{
    if (!skinny || qkv || !mv || !nv || !bv || *mv > 64 || *nv <= 0 || *bv <= 0) return false;
    const double now = wg_busiest(c, *bv * ((*nv + c->bn - 1) / c->bn), t->sm_count);
    /* `ties`: as many columns as c will do when c splits K */
    const bool split = c->ck > 1 || c->split > 1, tie = ties && split;
    double least = now;
    bool found = false;
    for (size_t i = 0; i < sizeof wg_widths / sizeof wg_widths[0]; i++) {
        const int bn = wg_widths[i];
        if (swiglu && (bn / 2) % 8) continue;
        wg_cfg e = {64, bn, 12, 1, c->ts && wg_ts_fits(bn, swiglu), 64, 1, 0, 0};
        while (e.stages > 2 && wg_smem(&e) > t->smem_per_block) e.stages--;
        if (!wg_legal(&e, swiglu, heavy, false, t)) continue;
        const double load = wg_busiest(&e, *bv * ((*nv + bn - 1) / bn), t->sm_count);
        /* ascending: among equals the wider */
        if (load < least || (load == least && (least < now || tie))) least = load, *out = e, found = true;
    }
    return found && (least < now || tie);
}

/* KILN_CG_WG_EVEN: the column blocks spread evenly over the SMs (wg_even_pick). */
static void wg_even(wg_cfg *c, bool skinny, const int64_t *mv, const int64_t *nv, const int64_t *bv, bool swiglu,
                    bool qkv, bool heavy, const cg_target *t)
{
    wg_cfg e;
    if ((KILN_CG_WG_EVEN & 1) && wg_even_pick(&e, c, skinny, mv, nv, bv, swiglu, qkv, heavy, (KILN_CG_WG_EVEN & 2) != 0, t))
        *c = e;
}

/* Whether c is a configuration the template takes (its static_asserts) for
 * a tile whose output has obn columns per bn accumulator columns (SwiGLU:
 * half), with the staging of `ts`, `heavy`'s register cap (64 staged
 * columns), the target's shared memory, and split-K only when the split's
 * workspace can be sized (`can_split`: M, N, K and batch known). */
static bool wg_legal(const wg_cfg *c, bool swiglu, bool heavy, bool can_split, const cg_target *t)
{
    const int cw = c->pp ? 1 : 2;
    if (c->bn != 128 && c->bn != 256 && !(wg_width_ok(c->bn) && c->pp && c->bm == 64)) return false;
    if (c->pp ? (c->bm != 64 && c->bm != 128) : (c->bm != 128 && c->bm != 256)) return false;
    if ((c->bm / 64 / cw) * c->bn > 256 || c->stages < 2 || c->stages > 16) return false;
    if (c->split < 1 || c->split > 16 || (c->split > 1 && !can_split)) return false;
    if (c->ck > 8 || (c->ck > 1 && c->split > 1)) return false;
    const int obn = swiglu ? c->bn / 2 : c->bn;
    if (c->ts && (c->ec < 64 || c->ec % 64 || obn % c->ec || (heavy && c->ec > 64))) return false;
    return wg_smem(c) <= t->smem_per_block;
}

/* The configurations autotuning times for a matmul (cg_kernel.tune_cands):
 * the heuristic's first, then its neighbours that measured close to it on
 * some shape (docs/MATMUL.md): large M, ping-pong 128x128 at 4 and 5
 * stages, cooperative 128x256 and 256x128, ping-pong 64x256; skinny M
 * (known), the 64x128 tile at splits 1, 2 and 4, the 64x64 tile (12 stages) at
 * splits 1, 2 and 4 and the 64x256 tile (splits as wg_cluster_split makes
 * them, given a folded norm: `norm`) and `even` (KILN_CG_WG_EVEN bit 2: wg_even_pick's width
 * that spreads the column blocks evenly over the SMs, where one does). The ones the
 * shape cannot take are left out. A cluster split is stored as its split (wg_cluster_split gives the same
 * kernel back). */
static int wg_candidates(const wg_cfg *heur, bool skinny, bool swiglu, bool heavy, bool can_split, bool norm,
                         int qkv_ec, const wg_cfg *even, const cg_target *t, cg_wg_choice *out)
{
    const int ts = heur->ts, ec = heavy ? 64 : 128;
    wg_cfg all[CG_MAX_TUNE_CANDS + 1];
    int n = 0;
    all[n++] = *heur;
    if (!skinny) {
        all[n++] = (wg_cfg){128, 128, ts ? 5 : 6, 1, ts, ec, 1, 0, 0};
        all[n++] = (wg_cfg){128, 128, 4, 1, ts, ec, 1, 0, 0};
        all[n++] = (wg_cfg){128, 256, 4, 0, ts, ec, 1, 0, 0};
        all[n++] = (wg_cfg){128, 256, 3, 0, ts, heavy ? 64 : 256, 1, 0, 0};
        all[n++] = (wg_cfg){256, 128, 4, 0, ts, 64, 1, 0, 0};
        all[n++] = (wg_cfg){64, 256, 4, 1, ts, heavy ? 64 : 256, 1, 0, 0};
    } else {
        all[n++] = (wg_cfg){64, 128, 8, 1, ts, ec, 1, 0, 0};
        all[n++] = (wg_cfg){64, 128, 8, 1, ts, ec, 2, 0, 0};
        all[n++] = (wg_cfg){64, 128, 8, 1, ts, ec, 4, 0, 0};
        all[n++] = (wg_cfg){64, 64, 12, 1, ts, 64, 1, 0, 0};
        all[n++] = (wg_cfg){64, 64, 12, 1, ts, 64, 2, 0, 0};
        all[n++] = (wg_cfg){64, 64, 12, 1, ts, 64, 4, 0, 0};
        all[n++] = (wg_cfg){64, 256, 4, 1, ts, ec, heur->ck > 1 ? heur->ck : heur->split, 0, 0};
        if (even) all[n++] = *even;
    }
    int m = 0;
    for (int i = 0; i < n && m < CG_MAX_TUNE_CANDS - 1; i++) { /* the last slot: cuBLASLt */
        wg_cfg c = all[i];
        if (c.ec > (swiglu ? c.bn / 2 : c.bn)) c.ec = swiglu ? c.bn / 2 : c.bn;
        if (qkv_ec) c.ec = qkv_ec; /* the QKV epilogue stages one head at a time */
        if (i > 0) wg_cluster_split(&c, skinny, norm, t);
        if (i > 0 && !wg_legal(&c, swiglu, heavy, can_split, t)) continue;
        const int split = c.ck > 1 ? c.ck : c.split;
        bool dup = false;
        for (int j = 0; j < m; j++)
            dup |= out[j].bm == c.bm && out[j].bn == c.bn && out[j].stages == c.stages && out[j].pp == c.pp &&
                   (!ts || out[j].ec == c.ec) && out[j].split == split;
        if (!dup) out[m++] = (cg_wg_choice){c.bm, c.bn, c.stages, c.pp, c.ec, split, CG_IMPL_TEMPLATE, 0, 0};
    }
    return m;
}

/* Whether a matmul's shape and operands fit matmul_wgmma.cuh (the choice
 * itself also needs !gen->no_wgmma): the target is sm_90a, both operands
 * are bf16 or f16 of one type, B is [N, K] (K contiguous), M is not known to
 * be at most 16 (GEMV), and every stride and offset that TMA needs 16-byte
 * aligned is a multiple of 8 elements for every value of the dims. Base
 * pointers are checked at run time (cg_kernel.fallback). */
static bool wgmma_fits(const cg_gen *gen, ir_dtype at, ir_dtype wt, int b_nk, const ir_dim *M, const int64_t *dims,
                       const ir_dim *strides[6], const wg_cfg *cfg)
{
    int64_t m;
    if (strcmp(gen->target->arch, "sm_90a")) return false;
    if (at != wt || (at != IR_BF16 && at != IR_F16) || b_nk != 1) return false;
    if (ir_dim_value(M, dims, &m) && m <= cg_gemv_max_rows(gen->target)) return false;
    if (wg_smem(cfg) > gen->target->smem_per_block) return false;
    for (int i = 0; i < 6; i++)
        if (!mult8(strides[i])) return false;
    return true;
}

static mm_heur heur_matmul(const ir_dim *M, const ir_dim *N, const ir_dim *K, const ir_dim *batch,
                           const int64_t *dims, int sm_count, int gemv_rows, ir_dtype t)
{
    mm_heur h = {false, 128, 128, 32, 2, 2, 3, 8, 1, 0, false, 0, 0, 0, 0, 0, 0};
    int64_t m, n, k, b;
    if (ir_dim_value(M, dims, &m) && m <= gemv_rows) h.gemv = true;
    if (ir_dim_value(N, dims, &n) && n <= 64) h.bn = 64;
    if (h.gemv && ir_dim_value(N, dims, &n) && ir_dim_value(K, dims, &k)) {
        const bool hb = ir_dim_value(batch, dims, &b);
        gemv_choose(&h, gemv_minb(m, t), m, n, k, hb ? b : 1, sm_count);
        if (!hb) h.ctas = 0; /* the grid's other axis is not known: no cap */
    }
    return h;
}

/* The epilogue hook of a matmul group: kiln_epilogue2 (applies the fused
 * epilogue and stores every output), or with `val` kiln_epilogue_val (the
 * TMA-store epilogue of matmul_wgmma.cuh: the one output's values for columns
 * n, n + 1 — SwiGLU: the one value at column n / 2 — returned, not stored). */
typedef struct mm_epi {
    const ir_node *A, *bias, *slices[2], **outs;
    int nouts, ro;
    bool swiglu;
    ir_dim M, N, half;
    const ir_type *ot, *out_t;
} mm_epi;

/* warm: kiln_epilogue_warm, the value hook's body under another name with every load a
 * kiln_ld_warm (common.cuh: an L2 prefetch that returns 0), its values discarded by the
 * template (matmul_wgmma.cuh, KILN_WGMMA_EPI_EARLY): it asks for what the epilogue will read.
 * pre (with val; matmul_wgmma.cuh KILN_WGMMA_EPI_EARLY 2): 1 kiln_epilogue_pre, the value hook's
 * body with load k also kept in pre[k] (the template calls it at the tile's start; the rest of
 * the body is dead there), emitted only when it loads at least once and at most `cap` times, after
 * `#define KILN_HAS_EPILOGUE_PRE 1` and `#define KILN_EPI_NPRE` (the loads); 2 kiln_epilogue_post,
 * the body with load k read from pre[k] (the same body: the same loads in the same order).
 * Returns the loads of the body (pre 1: 0 when nothing was emitted). */
static int emit_mm_epilogue(cg_gen *gen, cg_str *hooks, const mm_epi *e, bool val, bool warm, int pre, int cap)
{
    if (warm) gen->ld_fn = "kiln_ld_warm";
    gen->ld_pre = pre;
    gen->ld_count = 0;
    gen->ld_out[0] = gen->ld_out[1] = NULL;
    const ir_node *A = e->A, *bias = e->bias;
    const int ro = e->ro;
    cg_str body = {0};
    cg_begin_fn(gen, &body);
    const char *Ms = A->op == IR_OP_MATMUL ? cg_dim(gen, &e->M) : "", *ret = "make_float2(r0, r1)";
    if (e->swiglu) {
        const char *H2 = cg_dim(gen, &e->half);
        cg_line(gen, "(void)has1; /* N is even: the up column n + 1 always exists */");
        cg_line(gen, "const long long j = n >> 1; /* gate j at column n, up j at n + 1 (interleaved) */");
        const char *gv = "v0", *uv = "v1";
        if (bias) {
            cg_idx b0 = cg_idx_flat(&bias->type, "n"), b1 = cg_idx_flat(&bias->type, "(n + 1)");
            gv = cg_printf(gen, "(v0 + %s)", cg_value(gen, bias, &b0));
            uv = cg_printf(gen, "(v1 + %s)", cg_value(gen, bias, &b1));
        }
        cg_line(gen, "const float gate = %s, up = %s;", gv, uv);
        cg_set_subst(gen, e->slices[0], "gate");
        cg_set_subst(gen, e->slices[1], "up");
        cg_idx oi = cg_idx_flat(e->out_t, A->op == IR_OP_LINEAR ? cg_printf(gen, "(m * %s + j)", H2)
                                                                : cg_printf(gen, "((b * %s + m) * %s + j)", Ms, H2));
        oi.c[ro - 1] = "j";
        if (A->op == IR_OP_MATMUL) oi.c[ro - 2] = "m";
        if (val) {
            cg_line(gen, "(void)j;");
            ret = cg_printf(gen, "make_float2(%s, 0.f)", cg_value(gen, e->outs[0], &oi));
        }
        else
            for (int j = 0; j < e->nouts; j++) cg_store(gen, e->outs[j], &oi, cg_value(gen, e->outs[j], &oi));
    } else {
        const char *Ns = cg_dim(gen, &e->N);
        if (val) cg_line(gen, "float r0 = 0.f, r1 = 0.f;");
        for (int c = 0; c < 2; c++) {
            const char *col = c ? "(n + 1)" : "n";
            cg_open(gen, "%s", c ? "if (has1)" : "");
            const char *v = c ? "v1" : "v0";
            if (bias) {
                cg_idx bi = cg_idx_flat(&bias->type, col);
                v = cg_printf(gen, "(%s + %s)", v, cg_value(gen, bias, &bi));
            }
            cg_line(gen, "const float acc = %s;", v);
            cg_set_subst(gen, A, "acc");
            cg_idx oi = cg_idx_flat(e->ot, A->op == IR_OP_LINEAR ? cg_printf(gen, "(m * %s + %s)", Ns, col)
                                                                : cg_printf(gen, "((b * %s + m) * %s + %s)", Ms, Ns, col));
            oi.c[ro - 1] = col;
            if (A->op == IR_OP_MATMUL) oi.c[ro - 2] = "m";
            if (pre == 1) gen->ld_out[c] = cg_idx_flatten(gen, &oi);
            if (val) cg_line(gen, "r%d = %s;", c, cg_value(gen, e->outs[0], &oi));
            else
                for (int j = 0; j < e->nouts; j++) cg_store(gen, e->outs[j], &oi, cg_value(gen, e->outs[j], &oi));
            cg_close(gen);
            cg_clear_subst(gen);
        }
    }
    cg_line(gen, "(void)b;");
    if (pre) cg_line(gen, "(void)pre;");
    if (val) cg_line(gen, "return %s;", ret);
    const int nld = gen->ld_count;
    gen->ld_fn = NULL;
    gen->ld_pre = 0;
    gen->ld_count = 0;
    if (pre == 1 && (nld <= 0 || nld > cap)) { /* nothing to load early, or too much */
        cg_str_free(&body);
        return 0;
    }
    if (pre == 1) cg_str_printf(hooks, "#define KILN_HAS_EPILOGUE_PRE 1\n#define KILN_EPI_NPRE %d\n", nld);
    if (warm) cg_str_printf(hooks, "#define KILN_HAS_EPILOGUE_WARM 1\n");
    finish_fn(gen, hooks,
              pre == 1 ? "__device__ __forceinline__ float2 kiln_epilogue_pre(const KilnArgs &p, long long b, long long m, "
                         "long long n, float v0, float v1, bool has1, float (&pre)[KILN_EPI_NPRE])"
              : pre == 2 ? "__device__ __forceinline__ float2 kiln_epilogue_post(const KilnArgs &p, long long b, long long m, "
                           "long long n, float v0, float v1, bool has1, const float (&pre)[KILN_EPI_NPRE])"
              : warm ? "__device__ __forceinline__ float2 kiln_epilogue_warm(const KilnArgs &p, long long b, long long m, "
                       "long long n, float v0, float v1, bool has1)"
              : val  ? "__device__ __forceinline__ float2 kiln_epilogue_val(const KilnArgs &p, long long b, long long m, "
                       "long long n, float v0, float v1, bool has1)"
                     : "__device__ __forceinline__ void kiln_epilogue2(const KilnArgs &p, long long b, long long m, "
                       "long long n, float v0, float v1, bool has1)",
              &body);
    return nld;
}

/* The QKV epilogue (passes/fuse_qkv_epilogue.c): the linear's result [B, S, N]
 * is read only through segments, [B, S, heads, hd] views whose column n is
 * off + head * stride + d; each segment is rotated by its rope (when it has
 * one) and stored where its readers want it: the rotated rows to the rope's
 * buffer when the rope is used outside, the rows into each cache write's state
 * at row pos[b] + s. The weight rows of every rotated segment are permuted at
 * bind time (CG_XFORM_ROPE_PAIRS) so that columns n, n + 1 of one epilogue call
 * are a rotation pair (d, d + R/2), or two dims that pass through. */
typedef struct qkv_seg {
    const ir_node *view, *norm, *rope, *cw[2]; /* norm: a per-head RMSNorm before the rope, or NULL */
    int ncw;
    int64_t off, stride, heads, hd, rot;
} qkv_seg;

enum { QKV_MAX_SEG = 16 };

static qkv_seg *qkv_seg_of(qkv_seg *segs, int *nseg, const ir_node *view)
{
    for (int i = 0; i < *nseg; i++)
        if (segs[i].view == view) return &segs[i];
    if (*nseg == QKV_MAX_SEG) return NULL;
    qkv_seg *sg = &segs[(*nseg)++];
    memset(sg, 0, sizeof *sg);
    sg->view = view;
    return sg;
}

/* sg->view as [B, S, heads, hd] columns off + head * stride + d of L's rank-3 result [B, S, N]:
 * sg's off, stride, heads and hd; false when it is not. any_group: through the views of other
 * kernels' groups too (cg_strided_in_graph). */
static bool seg_geometry(cg_gen *gen, const ir_node *L, qkv_seg *sg, bool any_group)
{
    cg_strided st;
    const ir_type *vt = &sg->view->type;
    ir_dim one = ir_dim_const(1), N = L->type.dims[2], SN;
    if (L->type.rank != 3 || !ir_dim_mul(L->type.dims[1], N, &SN)) return false;
    if (!(any_group ? cg_strided_in_graph(gen, sg->view, &st) : cg_strided_of(gen, sg->view, &st)) || st.base != L ||
        st.rank != 4 || !ir_dim_eq(&st.stride[3], &one) || (!cg_dim_one(&vt->dims[1]) && !ir_dim_eq(&st.stride[1], &N)) ||
        (!cg_dim_one(&vt->dims[0]) && !ir_dim_eq(&st.stride[0], &SN)) || !ir_dim_is_const(&st.off, &sg->off) ||
        !ir_dim_is_const(&vt->dims[2], &sg->heads) || !ir_dim_is_const(&vt->dims[3], &sg->hd) ||
        (sg->heads != 1 && !ir_dim_is_const(&st.stride[2], &sg->stride)))
        return false;
    if (sg->heads == 1) sg->stride = sg->hd; /* one head: its axis has no stride that matters */
    return true;
}

/* The segments of the QKV epilogue from the group's per-head norms, ropes and cache writes. */
static bool qkv_segments(cg_gen *gen, const ir_node **members, int nm, qkv_seg *segs, int *nseg)
{
    const ir_node *A = gen->anchor;
    *nseg = 0;
    static const ir_op order[3] = {IR_OP_RMSNORM, IR_OP_ROPE, IR_OP_CACHE_WRITE}; /* each reads the one before */
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < nm; i++) {
            const ir_node *n = members[i];
            if (n->op != order[pass]) continue;
            const ir_node *v = n->op == IR_OP_CACHE_WRITE ? n->inputs[1] : n->inputs[0];
            if (n->op == IR_OP_CACHE_WRITE && v->op == IR_OP_ROPE && cg_is_member(gen, v)) v = v->inputs[0];
            const ir_node *nv = n->op != IR_OP_RMSNORM && v->op == IR_OP_RMSNORM && cg_is_member(gen, v) ? v : NULL;
            if (nv) v = nv->inputs[0];
            qkv_seg *sg = qkv_seg_of(segs, nseg, v);
            if (!sg) return cg_fail(gen, "qkv epilogue: too many segments");
            if (n->op != IR_OP_RMSNORM && nv != sg->norm)
                return cg_fail(gen, "qkv epilogue: a segment read both through its per-head norm and without it");
            if (n->op == IR_OP_RMSNORM) {
                if (sg->norm) return cg_fail(gen, "qkv epilogue: two per-head norms of one segment");
                if (cg_used_outside(gen, n)) return cg_fail(gen, "qkv epilogue: a per-head norm is used outside the kernel");
                sg->norm = n;
            } else if (n->op == IR_OP_ROPE) {
                if (sg->rope) return cg_fail(gen, "qkv epilogue: two ropes over one segment");
                sg->rope = n;
            } else {
                if (sg->ncw == 2) return cg_fail(gen, "qkv epilogue: more than two cache writes of one segment");
                if (cg_storage_node(gen, n) != cg_storage_node(gen, n->inputs[0]))
                    return cg_fail(gen, "qkv epilogue: a cache write must update its cache in place");
                sg->cw[sg->ncw++] = n;
            }
        }
    for (int i = 0; i < *nseg; i++) {
        qkv_seg *sg = &segs[i];
        if (!seg_geometry(gen, A, sg, false))
            return cg_fail(gen, "qkv epilogue: a segment is not [B, S, heads, hd] columns of the result");
        sg->rot = sg->rope ? ir_rope_dims(&sg->rope->attrs.rope, sg->hd) : 0;
        if (sg->off % 2 || sg->stride % 2 || sg->hd % 2 || sg->rot % 2 || sg->rot > sg->hd || sg->hd > sg->stride)
            return cg_fail(gen, "qkv epilogue: a segment's columns are not in pairs");
        const ir_node *gn = sg->norm && sg->norm->ninputs > 1 ? sg->norm->inputs[1] : NULL;
        int64_t gl;
        if (gn && (gn->type.rank != 1 || !ir_dim_is_const(&gn->type.dims[0], &gl) || gl != sg->hd || pass_is_view(gn)))
            return cg_fail(gen, "qkv epilogue: a per-head norm's gain is not a stored vector of the head dim");
        if (sg->norm && !sg->rope && !sg->ncw)
            return cg_fail(gen, "qkv epilogue: a per-head norm that is neither rotated nor cached");
    }
    return true;
}

/* The i-th reader of x (the graph's users analysis, gen->users). */
static const ir_node *reader(const cg_gen *gen, const ir_node *x, int i)
{
    return gen->g->nodes[gen->users->users[x->id][i]];
}

/* The values x is read through: the views of x (recursively) and x itself where something
 * other than a view reads it, into term[*nterm]; false when a graph output or state is one of
 * them or there are too many. */
static bool view_ends(const cg_gen *gen, const ir_node *x, const ir_node **term, int *nterm, int depth)
{
    if (depth > 8 || gen->users->is_output[x->id]) return false;
    bool direct = false;
    for (int i = 0; i < gen->users->count[x->id]; i++) {
        const ir_node *n = reader(gen, x, i);
        if (pass_is_view(n)) {
            if (!view_ends(gen, n, term, nterm, depth + 1)) return false;
        } else {
            direct = true;
        }
    }
    if (direct) {
        if (*nterm == QKV_MAX_SEG) return false;
        term[(*nterm)++] = x;
    }
    return true;
}

typedef struct att_parts att_parts;
static bool att_parts_of(cg_gen *gen, att_parts *p);
static bool rope_of_decode_attention(cg_gen *gen, const ir_node *r);

/* Rotation pairs read side by side (CG_XFORM_ROPE_PAIRS without the QKV epilogue): L, a linear
 * with bind-time weight and bias anchoring its own kernel, is read only through [B, S, heads, hd]
 * views, each rotated one read only by its rope, which a decode attention kernel applies as it
 * loads q or the new k rows (KILN_ROPE_PAIRED_Q/K), rotating every dim (no partial rotary). Then
 * L's weight and bias rows are paired at bind time as the QKV epilogue pairs them, so that a
 * model whose other variants rotate in the epilogue binds one copy of that weight, and attention
 * reads each pair (d, d + hd/2) as the adjacent columns 2d, 2d + 1. The rotated segments into
 * segs (at most CG_MAX_ROPE_PAIRS, the runtime's limit per packed value), or false. The matmul
 * and attention kernels both ask at the same dims, so they agree. */
enum { CG_MAX_ROPE_PAIRS = 8 };
#ifndef KILN_CG_PAIR_HEAD_NORM
/* 1: a per-head RMSNorm between the projection and its rope (Qwen3's q/k norm, a row kernel in the
 * decode variants' graph) keeps the pairs side by side too, its gain paired at bind time the same
 * way (head_norm_paired), so that Qwen3's decode variants bind no unpaired QKV copy. Checked
 * against the interpreter on a GPU (bench/device/call_q3.sh: B=1, 2, 8, prefill S=300, memcheck
 * and racecheck clean). */
#define KILN_CG_PAIR_HEAD_NORM 1
#endif

/* n a per-head RMSNorm alone in its row kernel, over rows of hd with a bind-time [hd] gain or
 * none, read only by one rope over it: that rope (NULL: not so). */
static const ir_node *head_norm_rope(cg_gen *gen, const ir_node *n, int64_t hd)
{
    const ir_graph *g = gen->g;
    if (!KILN_CG_PAIR_HEAD_NORM || n->op != IR_OP_RMSNORM || n->group < 0 || g->groups[n->group].anchor != n ||
        n->type.rank != 4)
        return NULL;
    const ir_node *gain = n->ninputs > 1 ? n->inputs[1] : NULL;
    int64_t gl;
    if (gain && (!gen->bind[gain->id] || gain->type.rank != 1 || pass_is_view(gain) ||
                 !ir_dim_is_const(&gain->type.dims[0], &gl) || gl != hd))
        return NULL;
    if (gen->users->is_output[n->id]) return NULL;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *m = g->nodes[i];
        if (m->group == n->group && m != n && !gen->bind[i] && !pass_is_view(m)) return NULL; /* not alone */
    }
    const ir_node *rope = NULL;
    for (int i = 0; i < gen->users->count[n->id]; i++) {
        const ir_node *m = reader(gen, n, i);
        if (m == rope) continue;
        if (m->op != IR_OP_ROPE || m->inputs[0] != n || rope) return NULL;
        rope = m;
    }
    return rope;
}

static bool cg_rope_paired(cg_gen *gen, const ir_node *L, qkv_seg *segs, int *nseg)
{
    const ir_graph *g = gen->g;
    *nseg = 0;
    if (L->op != IR_OP_LINEAR || L->type.rank != 3 || L->group < 0 || g->groups[L->group].anchor != L) return false;
    const ir_node *w = L->inputs[1], *bias = L->ninputs > 2 ? L->inputs[2] : NULL;
    if (!gen->bind[w->id] || w->type.rank != 2 || pass_is_view(w)) return false;
    if (bias && (!gen->bind[bias->id] || bias->type.rank != 1 || pass_is_view(bias))) return false;
    const ir_node *term[QKV_MAX_SEG];
    int nterm = 0;
    if (!view_ends(gen, L, term, &nterm, 0)) return false;
    qkv_seg other[QKV_MAX_SEG];
    int nother = 0;
    for (int t = 0; t < nterm; t++) {
        const ir_node *v = term[t];
        if (v == L) return false; /* read as a whole */
        const ir_node *rope = NULL, *norm = NULL;
        bool plain = false;
        qkv_seg sg = {.view = v};
        if (!seg_geometry(gen, L, &sg, true)) return false;
        for (int i = 0; i < gen->users->count[v->id]; i++) {
            const ir_node *n = reader(gen, v, i);
            if (pass_is_view(n) || n == rope || n == norm) continue;
            const ir_node *nr = n->op == IR_OP_RMSNORM && n->inputs[0] == v ? head_norm_rope(gen, n, sg.hd) : NULL;
            if (n->op == IR_OP_ROPE && n->inputs[0] == v && !rope) rope = n;
            else if (nr && !rope) rope = nr, norm = n;
            else plain = true;
        }
        if (!rope) {
            other[nother++] = sg;
            continue;
        }
        /* a rotated segment: read only by its rope, which decode attention applies on load */
        if (plain || !rope_of_decode_attention(gen, rope) || *nseg == CG_MAX_ROPE_PAIRS) return false;
        sg.rope = rope;
        sg.norm = norm;
        sg.rot = ir_rope_dims(&rope->attrs.rope, sg.hd);
        if (sg.rot != sg.hd || sg.hd % 2 || sg.off % 2 || sg.stride % 2 || sg.hd > sg.stride) return false;
        segs[(*nseg)++] = sg;
    }
    if (*nseg == 0) return false;
    /* no other reader's columns among the rotated ones, and no two rotated segments overlapping */
    for (int i = 0; i < *nseg; i++) {
        const qkv_seg *r = &segs[i];
        const int64_t r0 = r->off, r1 = r->off + (r->heads - 1) * r->stride + r->hd;
        for (int j = 0; j < nother + *nseg; j++) {
            const qkv_seg *o = j < nother ? &other[j] : &segs[j - nother];
            if (o == r) continue;
            const int64_t o0 = o->off, o1 = o->off + (o->heads - 1) * o->stride + o->hd;
            if (o0 < r1 && r0 < o1) return false;
        }
    }
    return true;
}

/* The linear a rope reads through views, or through a per-head norm it pairs too (NULL: none). */
static const ir_node *rope_linear(cg_gen *gen, const ir_node *rope)
{
    cg_strided st;
    if (!rope || rope->op != IR_OP_ROPE) return NULL;
    const ir_node *x = rope->inputs[0];
    if (KILN_CG_PAIR_HEAD_NORM && x->op == IR_OP_RMSNORM) x = x->inputs[0];
    return cg_strided_in_graph(gen, x, &st) && st.base->op == IR_OP_LINEAR ? st.base : NULL;
}

/* The head dim of the segment of a paired linear whose per-head norm is n (cg_rope_paired), or 0. */
static int64_t head_norm_paired_hd(cg_gen *gen, const ir_node *n)
{
    cg_strided st;
    qkv_seg segs[QKV_MAX_SEG];
    int nseg;
    if (!KILN_CG_PAIR_HEAD_NORM || n->op != IR_OP_RMSNORM || !cg_strided_in_graph(gen, n->inputs[0], &st) ||
        st.base->op != IR_OP_LINEAR || !cg_rope_paired(gen, st.base, segs, &nseg))
        return 0;
    for (int i = 0; i < nseg; i++)
        if (segs[i].norm == n) return segs[i].hd;
    return 0;
}

bool cg_group_paired(cg_gen *gen)
{
    qkv_seg segs[QKV_MAX_SEG];
    int nseg;
    if (cg_rope_paired(gen, gen->anchor, segs, &nseg) || head_norm_paired_hd(gen, gen->anchor) > 0) return true;
    for (int i = 0; i < gen->g->nnodes; i++) {
        const ir_node *n = gen->g->nodes[i];
        const ir_node *L = n->group == gen->k ? rope_linear(gen, n) : NULL;
        if (L && cg_rope_paired(gen, L, segs, &nseg)) return true;
    }
    return false;
}

/* The rotation of y0, y1 by the angle pp * g (g the pair's frequency in turns, as
 * cg_rope_turns_table writes it, ms the scaling's magnitude): frac(pp * (g.x + g.y)) in
 * turns, pp * g.x split exactly by fmaf. */
static void emit_rotation(cg_gen *gen)
{
    cg_line(gen, "const float xp = (float)pp, hi = xp * g.x, err = fmaf(xp, g.x, -hi);");
    cg_line(gen, "const float tu = (hi - rintf(hi)) + fmaf(xp, g.y, err);");
    cg_line(gen, "float cs, sn;");
    cg_line(gen, "__sincosf(tu * 6.28318530717958648f, &sn, &cs);");
    cg_line(gen, "cs *= ms;");
    cg_line(gen, "sn *= ms;");
    cg_line(gen, "const float r0 = y0 * cs - y1 * sn, r1 = y1 * cs + y0 * sn;");
    cg_line(gen, "y0 = r0;");
    cg_line(gen, "y1 = r1;");
}

/* The head norm's read-back: the n pairs (d, d1 = d + half) of a round held in a0/a1 (c their
 * first d), each rotated (segment seg's frequencies) and stored to the nd destinations addr (tv:
 * a destination's guard, qout: whether the first is q's buffer). */
static void emit_rotate_store(cg_gen *gen, int n, long long half, int seg, int nd, const char *const tv[3], bool qout,
                              const char *const addr[3][3])
{
    cg_line(gen, "#pragma unroll");
    cg_open(gen, "for (int q = 0; q < %d; q++)", n);
    cg_line(gen, "const int d = c + q, d1 = d + %lld;", half);
    cg_line(gen, "if (d >= %lld) break;", half);
    cg_line(gen, "float y0 = a0[q], y1 = a1[q];");
    cg_line(gen, "const float2 g = kiln_qkv_turns%d[d];", seg);
    emit_rotation(gen);
    for (int j = 0; j < nd; j++) {
        cg_open(gen, "%s", tv[j] ? cg_printf(gen, "if (in%d)", j - (qout ? 1 : 0)) : "");
        cg_line(gen, "kiln_st(%s, y0);", addr[j][0]);
        cg_line(gen, "kiln_st(%s, y1);", addr[j][1]);
        cg_close(gen);
    }
    cg_close(gen);
}

/* The body is one path for every segment (its constants chosen by the
 * segment found): the hook is inlined once per accumulator pair of a tile,
 * under the registers that hold the accumulators, so it keeps few values
 * live — 32-bit indices, the angle in float (cg_rope_turns_table), the cache
 * and q stores at the end. */
/* The GEMV's kiln_epilogue_prefetch (gemv.cuh, CONTRACT.md): one thread per CTA, right after
 * kiln_pdl_wait, reads the first row's positions and every 32 bytes of the rotation tables, so
 * the epilogue of each column block finds them in the SM's L1 and constant caches. */
static void emit_qkv_prefetch(cg_gen *gen, cg_str *hooks, const qkv_seg *segs, int nseg)
{
    cg_str body = {0};
    cg_begin_fn(gen, &body);
    cg_line(gen, "int v = 0;");
    const ir_node *seen[2 * QKV_MAX_SEG];
    int nseen = 0;
    for (int i = 0; i < nseg; i++) {
        const qkv_seg *sg = &segs[i];
        const ir_node *ps[3] = {sg->rope && sg->rope->ninputs > 1 ? sg->rope->inputs[1] : NULL,
                                sg->ncw > 0 && sg->cw[0]->ninputs > 2 ? sg->cw[0]->inputs[2] : NULL,
                                sg->ncw > 1 && sg->cw[1]->ninputs > 2 ? sg->cw[1]->inputs[2] : NULL};
        for (int j = 0; j < 3; j++) {
            bool dup = !ps[j];
            for (int q = 0; q < nseen && !dup; q++) dup = seen[q] == ps[j];
            if (dup) continue;
            seen[nseen++] = ps[j];
            cg_idx pi = cg_idx_flat(&ps[j]->type, NULL);
            pi.c[0] = "0LL";
            cg_line(gen, "v += (int)%s;", cg_int_value(gen, ps[j], &pi));
        }
        for (int64_t e = 0; sg->rope && e < sg->rot / 2; e += 4)
            cg_line(gen, "v += __float_as_int(kiln_qkv_turns%d[%lld].x);", i, (long long)e);
    }
    cg_line(gen, "asm volatile(\"\" ::\"r\"(v));");
    cg_line(gen, "(void)p;");
    cg_str_printf(hooks, "#define KILN_HAS_EPILOGUE_PREFETCH 1\n");
    finish_fn(gen, hooks, "__device__ __forceinline__ void kiln_epilogue_prefetch(const KilnArgs &p)", &body);
}

/* The first position of batch row rb that cache write cw writes at (0 without positions). */
static const char *cw_pos(cg_gen *gen, const ir_node *cw)
{
    const ir_node *pos = cw->ninputs > 2 ? cw->inputs[2] : NULL;
    if (!pos) return "0LL";
    cg_idx pi = cg_idx_flat(&pos->type, NULL);
    pi.c[0] = "rb";
    return cg_int_value(gen, pos, &pi);
}

/* A per-head norm without a tile that holds whole heads (the register epilogue: GEMV, mma.sync,
 * the wgmma kernel's register epilogue): each epilogue call stores its two projected columns,
 * rounded, in the segment's first destination (the rotated q rows, else the first cache) in the
 * natural dim order, then counts them on the int workspace `hn` at (row, head) after a
 * __threadfence. The call that brings a head's count to hd/2 resets it to 0 (the next launch
 * needs no memset) and runs kiln_qkv_norm_fix: it reads the head's row back from the L2, scales
 * it by 1/rms and the gain, rotates it and stores it in every destination. Slower than the Hopper
 * QKV epilogue's in-register norm (a head's row sits in one quad of lanes there), and used only
 * where that one does not run. Returns the heads counted per row. */
static int64_t emit_qkv_norm_fix(cg_gen *gen, cg_str *hooks, const qkv_seg *segs, int nseg, const char *rnd, bool gemv)
{
    const ir_node *A = gen->anchor;
    /* values in flight per pass: 8 in the GEMV (its one call site is inlined once); 1 where the
     * hook is inlined once per accumulator pair of a tile (mma.sync, wgmma registers) */
    const int CH = gemv ? 8 : 1;
    int64_t nht = 0;
    for (int i = 0; i < nseg; i++) nht += segs[i].norm ? segs[i].heads : 0;
    if (!nht) return 0;
    cg_str body = {0};
    cg_begin_fn(gen, &body);
    const char *S = cg_dim(gen, &A->type.dims[1]);
    cg_line(gen, "const long long rb = m / %s, rs = m %% %s;", S, S);
    cg_line(gen, "(void)rb; (void)rs; (void)hh;");
    for (int i = 0; i < nseg; i++) {
        const qkv_seg *sg = &segs[i];
        if (!sg->norm) continue;
        cg_open(gen, "if (seg == %d)", i);
        const ir_node *gn = sg->norm->ninputs > 1 ? sg->norm->inputs[1] : NULL;
        const char *gf = gn ? cg_ptr(gen, gn, false) : NULL;
        const bool qout = sg->rope && cg_used_outside(gen, sg->rope);
        /* the destinations' element addresses at dim d */
        const ir_node *dn[3];
        const char *tv[3];
        int nd = 0;
        if (qout) dn[nd] = sg->rope, tv[nd++] = NULL;
        for (int j = 0; j < sg->ncw; j++) {
            const ir_node *cw = sg->cw[j];
            const char *o = cw_pos(gen, cw);
            tv[nd] = cg_printf(gen, "t%d", j);
            cg_line(gen, "const long long %s = %s + rs;", tv[nd], o);
            cg_line(gen, "const bool in%d = %s >= 0 && %s < %s; /* positions past the cache are not written */", j,
                    tv[nd], tv[nd], cg_dim(gen, &cw->type.dims[2]));
            dn[nd++] = cw;
        }
        if (!qout) cg_line(gen, "if (!in0) return;");
        const char *addr[3][3]; /* [destination][d, the pair's d1] */
        const char *dv[2] = {"(long long)d", "(long long)d1"};
        for (int j = 0; j < nd; j++)
            for (int e = 0; e < 2; e++) {
                cg_idx x = cg_idx_flat(&dn[j]->type, NULL);
                if (tv[j]) x.c[0] = "rb", x.c[1] = "(long long)hh", x.c[2] = tv[j], x.c[3] = dv[e];
                else x.c[0] = "rb", x.c[1] = "rs", x.c[2] = "(long long)hh", x.c[3] = dv[e];
                addr[j][e] = cg_printf(gen, "p.%s + %s", cg_ptr(gen, dn[j], true), cg_idx_flatten(gen, &x));
            }
        /* the row is read back from the L2, CH loads in flight (chunks of CH values, normalized as
         * they are loaded, whose stores follow) */
        /* the GEMV reads 2-byte rows of whole 16-byte units eight values a load (rows start at
         * multiples of hd elements; the buffers are 16-byte aligned) */
        const bool vec = gemv && A->type.dtype != IR_F32 && sg->hd % 8 == 0 && sg->rot % 16 == 0 &&
                         (!gn || gn->type.dtype == A->type.dtype);
        cg_line(gen, "float ss = 0.f;");
        if (vec) {
            cg_line(gen, "#pragma unroll 8");
            cg_open(gen, "for (int d = 0; d < %lld; d += 8)", (long long)sg->hd);
            cg_line(gen, "float f[8];");
            cg_line(gen, "kiln_ld_cg8(%s, f);", addr[0][0]);
            cg_line(gen, "#pragma unroll");
            cg_line(gen, "for (int e = 0; e < 8; e++) ss += f[e] * f[e];");
        } else {
            cg_line(gen, "#pragma unroll %d", CH);
            cg_open(gen, "for (int d = 0; d < %lld; d++)", (long long)sg->hd);
            cg_line(gen, "const float x = kiln_ld_cg(%s);", addr[0][0]);
            cg_line(gen, "ss += x * x;");
        }
        cg_close(gen);
        cg_line(gen, "const float rn = rsqrtf(ss * %s + %s);", cg_float_lit(gen, 1.0 / (double)sg->hd),
                cg_float_lit(gen, sg->norm->attrs.eps));
        const char *gd = gf ? cg_printf(gen, " * kiln_ld(p.%s + d)", gf) : "";
        const char *gd1 = gf ? cg_printf(gen, " * kiln_ld(p.%s + d1)", gf) : "";
        const long long half = (long long)(sg->rot / 2);
        if (sg->rot) {
            const ir_node *r = sg->rope, *pos = r->ninputs > 1 ? r->inputs[1] : NULL;
            if (pos) {
                cg_idx pi = cg_idx_flat(&pos->type, NULL);
                pi.c[0] = "rb";
                cg_line(gen, "const int pp = (int)(%s + rs);", cg_int_value(gen, pos, &pi));
            } else {
                cg_line(gen, "const int pp = (int)rs;");
            }
            cg_line(gen, "const float ms = (float)%.17g;", ir_rope_mscale(&r->attrs.rope));
            /* the rotated pairs (d, d + R/2) */
            if (vec) { /* 16 pairs a round: their values and gains loaded (eight a load) before any is stored */
                cg_line(gen, "#pragma unroll 1");
                cg_open(gen, "for (int c = 0; c < %lld; c += 16)", half);
                cg_line(gen, "float a0[16], a1[16];");
                cg_line(gen, "#pragma unroll");
                cg_open(gen, "for (int u = 0; u < 16; u += 8)");
                cg_line(gen, "const int d = c + u, d1 = d + %lld;", half);
                cg_line(gen, "float x0[8], x1[8], w0[8], w1[8];");
                cg_line(gen, "kiln_ld_cg8(%s, x0);", addr[0][0]);
                cg_line(gen, "kiln_ld_cg8(%s, x1);", addr[0][1]);
                if (gf) {
                    cg_line(gen, "kiln_ld_cg8(p.%s + d, w0);", gf);
                    cg_line(gen, "kiln_ld_cg8(p.%s + d1, w1);", gf);
                } else {
                    cg_line(gen, "for (int e = 0; e < 8; e++) w0[e] = w1[e] = 1.f;");
                }
                cg_line(gen, "#pragma unroll");
                cg_line(gen, "for (int e = 0; e < 8; e++) a0[u + e] = %s(x0[e] * rn * w0[e]), a1[u + e] = %s(x1[e] * rn * w1[e]);",
                        rnd, rnd);
                cg_close(gen);
                emit_rotate_store(gen, 16, half, i, nd, tv, qout, addr);
                cg_close(gen);
            } else {
            cg_line(gen, "#pragma unroll 1");
            cg_open(gen, "for (int c = 0; c < %lld; c += %d)", half, CH);
            cg_line(gen, "float a0[%d], a1[%d];", CH, CH);
            cg_line(gen, "#pragma unroll");
            cg_open(gen, "for (int q = 0; q < %d; q++)", CH);
            cg_line(gen, "const int d = c + q, d1 = d + %lld;", half);
            cg_line(gen, "a0[q] = a1[q] = 0.f;");
            cg_open(gen, "if (d < %lld)", half);
            cg_line(gen, "a0[q] = %s(kiln_ld_cg(%s) * rn%s);", rnd, addr[0][0], gd);
            cg_line(gen, "a1[q] = %s(kiln_ld_cg(%s) * rn%s);", rnd, addr[0][1], gd1);
            cg_close(gen);
            cg_close(gen);
            emit_rotate_store(gen, CH, half, i, nd, tv, qout, addr);
            cg_close(gen);
            }
        }
        if (sg->rot < sg->hd) { /* the dims that pass through */
            cg_line(gen, "#pragma unroll 1");
            cg_open(gen, "for (int c = %lld; c < %lld; c += %d)", (long long)sg->rot, (long long)sg->hd, CH);
            cg_line(gen, "float a0[%d];", CH);
            cg_line(gen, "#pragma unroll");
            cg_open(gen, "for (int q = 0; q < %d; q++)", CH);
            cg_line(gen, "const int d = c + q;");
            cg_line(gen, "a0[q] = d < %lld ? %s(kiln_ld_cg(%s) * rn%s) : 0.f;", (long long)sg->hd, rnd, addr[0][0], gd);
            cg_close(gen);
            cg_line(gen, "#pragma unroll");
            cg_open(gen, "for (int q = 0; q < %d; q++)", CH);
            cg_line(gen, "const int d = c + q;");
            cg_line(gen, "if (d >= %lld) break;", (long long)sg->hd);
            cg_line(gen, "const float y0 = a0[q];");
            for (int j = 0; j < nd; j++) {
                cg_open(gen, "%s", tv[j] ? cg_printf(gen, "if (in%d)", j - (qout ? 1 : 0)) : "");
                cg_line(gen, "kiln_st(%s, y0);", addr[j][0]);
                cg_close(gen);
            }
            cg_close(gen);
            cg_close(gen);
        }
        cg_line(gen, "return;");
        cg_close(gen);
    }
    finish_fn(gen, hooks, "__device__ __forceinline__ void kiln_qkv_norm_fix(const KilnArgs &p, int seg, long long m, int hh)",
              &body);
    return nht;
}

static bool emit_qkv_epilogue(cg_gen *gen, cg_str *hooks, const ir_node *bias, const qkv_seg *segs, int nseg,
                              bool gemv, ir_dim M)
{
    const ir_node *A = gen->anchor;
    /* the frequencies in turns, computed on the host (codegen/cg_rope.c), in constant memory: a warp
     * reads a few entries at once (its lanes share columns), and initcheck reports reads of a
     * module-initialized __device__ table as uninitialized (as for the attention table) */
    for (int i = 0; i < nseg; i++) {
        const ir_node *r = segs[i].rope;
        if (!r) continue;
        const char *name = cg_printf(gen, "kiln_qkv_turns%d", i);
        int len = cg_rope_turns_table(NULL, 0, "__constant__", name, r->attrs.theta, &r->attrs.rope, segs[i].hd);
        char *text = len >= 0 ? arena_alloc(gen->a, (size_t)len + 1) : NULL;
        if (!text || cg_rope_turns_table(text, (size_t)len + 1, "__constant__", name, r->attrs.theta, &r->attrs.rope,
                                         segs[i].hd) < 0)
            return cg_fail(gen, "out of memory");
        cg_str_printf(hooks, "%s\n", text);
    }
    const char *rnd = A->type.dtype == IR_BF16 ? "kiln_round_bf16" : A->type.dtype == IR_F16 ? "kiln_round_f16" : "";
    /* per-head norms: the counters (rows x normed heads) and the function that completes a head */
    int64_t nht = 0;
    for (int i = 0; i < nseg; i++) nht += segs[i].norm ? segs[i].heads : 0;
    if (nht)
        cg_workspace(gen, "hn", "int *",
                     ir_dim_times(M, ir_dim_const(4 * nht), &gen->dim_overflow), true);
    if (nht && emit_qkv_norm_fix(gen, hooks, segs, nseg, rnd, gemv) != nht) return cg_fail(gen, "out of memory");
    cg_str body = {0};
    cg_begin_fn(gen, &body);
    cg_line(gen, "(void)b; (void)has1; /* every segment is pairs of columns: n + 1 is in n's head */");
    /* which segment, head and dim: one test per segment */
    cg_line(gen, "int seg = -1, hh = 0, jj = 0;");
    for (int i = 0; i < nseg; i++) {
        const qkv_seg *sg = &segs[i];
        cg_open(gen, "/* segment %d: %lld heads of %lld at column %lld + head * %lld%s */", i, (long long)sg->heads,
                (long long)sg->hd, (long long)sg->off, (long long)sg->stride, sg->rope ? ", rotated" : "");
        cg_line(gen, "const int c = (int)(n - %lldLL);", (long long)sg->off);
        if (sg->stride == sg->hd)
            cg_open(gen, "if (c >= 0 && c < %lld)", (long long)(sg->heads * sg->hd));
        else
            cg_open(gen, "if (c >= 0 && c < %lld && c %% %lld < %lld)", (long long)(sg->heads * sg->stride),
                    (long long)sg->stride, (long long)sg->hd);
        cg_line(gen, "seg = %d;", i);
        cg_line(gen, "hh = c / %lld;", (long long)sg->stride);
        cg_line(gen, "jj = c %% %lld;", (long long)sg->stride);
        cg_close(gen);
        cg_close(gen);
    }
    cg_line(gen, "if (seg < 0) return;");
    /* packed sequences: row m is packed token m, of sequence rb at index rs (its rotated rows
     * are stored at (0, m)); else batch row rb, token rs */
    const ir_dim *nseq = NULL;
    for (int i = 0; i < nseg; i++) {
        if (segs[i].rope && segs[i].rope->attrs.packed && segs[i].rope->ninputs > 1) nseq = &segs[i].rope->inputs[1]->type.dims[0];
        for (int j = 0; j < segs[i].ncw; j++)
            if (segs[i].cw[j]->attrs.packed) nseq = &segs[i].cw[j]->type.dims[0];
        if (nseq && segs[i].norm) return cg_fail(gen, "QKV epilogue: a per-head norm over packed sequences has no kernel");
    }
    const char *tb = "rb", *ts = "rs";
    if (nseq) {
        const char *ls, *sq = cg_packed_token(gen, "m", nseq, &ls);
        cg_line(gen, "const long long rb = %s, rs = %s;", sq, ls);
        tb = "0LL", ts = "m";
    } else {
        const char *S = cg_dim(gen, &A->type.dims[1]);
        cg_line(gen, "const long long rb = m / %s, rs = m %% %s;", S, S);
    }
    cg_line(gen, "(void)rb; (void)rs;");
    const char *x[2] = {"v0", "v1"};
    for (int c = 0; c < 2; c++) {
        if (bias) {
            cg_idx bi = cg_idx_flat(&bias->type, c ? "(n + 1)" : "n");
            x[c] = cg_printf(gen, "(%s + %s)", x[c], cg_value(gen, bias, &bi));
        }
    }
    /* the projection's value as the interpreter holds it: rounded to its dtype */
    cg_line(gen, "float y0 = %s(%s), y1 = %s(%s);", rnd, x[0], rnd, x[1]);
    cg_line(gen, "int d0 = jj, d1 = jj + 1;");
    /* the rotation: segment constants chosen, one path */
    bool any = false;
    for (int i = 0; i < nseg; i++) any |= segs[i].rope != NULL;
    if (any) {
        cg_line(gen, "int rot = 0, pp = 0; float2 g = make_float2(0.f, 0.f); float ms = 1.f;");
        for (int i = 0; i < nseg; i++) {
            const qkv_seg *sg = &segs[i];
            if (!sg->rope) continue;
            const ir_node *r = sg->rope, *pos = r->ninputs > 1 ? r->inputs[1] : NULL;
            cg_open(gen, "if (seg == %d && jj < %lld)", i, (long long)sg->rot);
            cg_line(gen, "rot = %lld;", (long long)(sg->rot / 2));
            if (pos) {
                cg_idx pi = cg_idx_flat(&pos->type, NULL);
                pi.c[0] = "rb";
                cg_line(gen, "pp = (int)(%s + rs);", cg_int_value(gen, pos, &pi));
            } else {
                cg_line(gen, "pp = (int)rs;");
            }
            cg_line(gen, "g = kiln_qkv_turns%d[jj >> 1];", i);
            double m = ir_rope_mscale(&r->attrs.rope);
            if (m != 1.0) cg_line(gen, "ms = (float)%.17g;", m);
            cg_close(gen);
        }
        cg_open(gen, "if (rot)");
        cg_line(gen, "d0 = jj >> 1;");
        cg_line(gen, "d1 = d0 + rot;");
        /* a normed segment is rotated once its head is complete (kiln_qkv_norm_fix) */
        const char *nc = NULL;
        for (int i = 0; i < nseg; i++)
            if (segs[i].norm) nc = nc ? cg_printf(gen, "%s || seg == %d", nc, i) : cg_printf(gen, "seg == %d", i);
        if (nc) cg_open(gen, "if (!(%s))", nc);
        emit_rotation(gen);
        if (nc) cg_close(gen);
        cg_close(gen);
    }
    int64_t hb = 0; /* the first counter of the segment's heads in a row */
    for (int i = 0; i < nseg; i++) {
        const qkv_seg *sg = &segs[i];
        cg_open(gen, "%sif (seg == %d)", i ? "else " : "", i);
        if (sg->norm) {
            /* the projected columns to the first destination, then count them (emit_qkv_norm_fix) */
            const bool qout = sg->rope && cg_used_outside(gen, sg->rope);
            if (qout) {
                cg_idx ri = cg_idx_flat(&sg->rope->type, NULL);
                ri.c[0] = "rb", ri.c[1] = "rs", ri.c[2] = "(long long)hh", ri.c[3] = "(long long)d0";
                cg_store(gen, sg->rope, &ri, "y0");
                ri.c[3] = "(long long)d1";
                cg_store(gen, sg->rope, &ri, "y1");
            } else {
                const ir_node *cw = sg->cw[0];
                const char *o = cw_pos(gen, cw);
                cg_line(gen, "const long long t = %s + rs;", o);
                cg_open(gen, "if (t >= 0 && t < %s)", cg_dim(gen, &cw->type.dims[2]));
                cg_idx ci = cg_idx_flat(&cw->type, NULL);
                ci.c[0] = "rb", ci.c[1] = "(long long)hh", ci.c[2] = "t", ci.c[3] = "(long long)d0";
                cg_store(gen, cw, &ci, "y0");
                ci.c[3] = "(long long)d1";
                cg_store(gen, cw, &ci, "y1");
                cg_close(gen);
            }
            cg_line(gen, "__threadfence();");
            cg_line(gen, "const long long slot = m * %lldLL + %lld + hh;", (long long)nht, (long long)hb);
            cg_open(gen, "if (atomicAdd(p.hn + slot, 1) == %lld)", (long long)(sg->hd / 2 - 1));
            cg_line(gen, "__threadfence();");
            cg_line(gen, "p.hn[slot] = 0;");
            cg_line(gen, "kiln_qkv_norm_fix(p, %d, m, hh);", i);
            cg_close(gen);
            hb += sg->heads;
            cg_close(gen);
            continue;
        }
        if (sg->rope && cg_used_outside(gen, sg->rope)) {
            cg_idx ri = cg_idx_flat(&sg->rope->type, NULL);
            ri.c[0] = tb, ri.c[1] = ts, ri.c[2] = "(long long)hh", ri.c[3] = "(long long)d0";
            cg_store(gen, sg->rope, &ri, "y0");
            ri.c[3] = "(long long)d1";
            cg_store(gen, sg->rope, &ri, "y1");
        }
        for (int j = 0; j < sg->ncw; j++) {
            const ir_node *cw = sg->cw[j];
            const char *o = cw_pos(gen, cw);
            cg_open(gen, "%s", "");
            cg_line(gen, "const long long t = %s + rs;", o);
            cg_open(gen, "if (t >= 0 && t < %s) /* positions past the cache are not written */",
                    cg_dim(gen, &cw->type.dims[2]));
            cg_idx ci = cg_idx_flat(&cw->type, NULL);
            ci.c[0] = cg_slot_row(gen, "rb"), ci.c[1] = "(long long)hh", ci.c[2] = "t", ci.c[3] = "(long long)d0";
            cg_store(gen, cw, &ci, "y0");
            ci.c[3] = "(long long)d1";
            cg_store(gen, cw, &ci, "y1");
            cg_close(gen);
            cg_close(gen);
        }
        cg_close(gen);
    }
    finish_fn(gen, hooks,
              "__device__ __forceinline__ void kiln_epilogue2(const KilnArgs &p, long long b, long long m, "
              "long long n, float v0, float v1, bool has1)",
              &body);
    if (gemv) emit_qkv_prefetch(gen, hooks, segs, nseg);
    return !gen->failed;
}

/* The QKV epilogue through shared memory and TMA stores (matmul_wgmma.cuh KILN_WGMMA_QKV),
 * so that large M takes the plain projection's tiles: every segment is whole heads of one
 * width hd (64 or 128), contiguous (stride hd), at a column offset that is a multiple of hd,
 * rotated over the whole head or not at all, with exactly one destination — the rope's
 * rotated rows (used outside: q) or one cache written in place (k, v) — all at the same
 * positions, each destination of the operands' type (stored flat, as cg_store does). Destination
 * 0 is the q map (at most one segment's), 1 and 2 the caches' (at most two). Otherwise the
 * register epilogue (kiln_epilogue2) with its 64-row tiles. */
typedef struct qkv_tma {
    int hd;
    const ir_node *pos;
    int dst[QKV_MAX_SEG];
    const ir_node *node[3]; /* what destination d stores: the rope, then the cache writes */
} qkv_tma;

static bool qkv_tma_plan(cg_gen *gen, const qkv_seg *segs, int nseg, ir_dtype t, qkv_tma *q)
{
    memset(q, 0, sizeof *q);
    bool first = true;
    int ncache = 0;
    for (int i = 0; i < nseg; i++) {
        const qkv_seg *sg = &segs[i];
        const bool qout = sg->rope && cg_used_outside(gen, sg->rope);
        if (i == 0) q->hd = (int)sg->hd;
        if ((sg->hd != 64 && sg->hd != 128) || sg->hd != q->hd || sg->stride != sg->hd || sg->off % sg->hd ||
            (sg->rot != 0 && sg->rot != sg->hd) || (qout ? sg->ncw != 0 : sg->ncw != 1))
            return false;
        const ir_node *dn = qout ? sg->rope : sg->cw[0];
        if (dn->type.dtype != t) return false; /* stored as its own type's flat layout (cg_store) */
        if ((sg->rope && sg->rope->attrs.packed) || (sg->ncw && sg->cw[0]->attrs.packed))
            return false; /* a tile's rows may span sequences: its cache rows are not one box */
        if (qout) {
            if (q->node[0]) return false;
            q->node[0] = dn, q->dst[i] = 0;
        } else {
            if (ncache == 2) return false;
            q->node[1 + ncache] = dn, q->dst[i] = 1 + ncache++;
        }
        const ir_node *ps[2] = {sg->rope && sg->rope->ninputs > 1 ? sg->rope->inputs[1] : NULL,
                                sg->ncw && sg->cw[0]->ninputs > 2 ? sg->cw[0]->inputs[2] : NULL};
        for (int j = 0; j < 2; j++) {
            if (j == 0 ? !sg->rope : !sg->ncw) continue;
            if (first) q->pos = ps[j], first = false;
            else if (ps[j] != q->pos) return false;
        }
    }
    return q->node[0] && q->node[1]; /* the maps: q, then one or two caches */
}

/* The field of the one operand a TMA-store epilogue reads (KILN_WGMMA_RES_TMA), or -1: the value
 * hook's body, emitted as kiln_epilogue_pre with its loads recorded, loads exactly twice, both from
 * one pointer field of the output's element type, at the output's own flattened index of columns n
 * and n + 1, so that a TMA box of that field with the output's geometry holds what the hook would
 * load. Then that emission and kiln_epilogue_post (the values from pre[0], pre[1]) go to hooks. */
static int res_tma_field(cg_gen *gen, cg_str *hooks, const mm_epi *e, const char *out_field)
{
    if (e->swiglu || !out_field) return -1;
    cg_str pre = {0};
    const int nld = emit_mm_epilogue(gen, &pre, e, true, false, 1, 2);
    int fr = -1, fo = -1;
    bool same = !pre.oom && nld == 2 && gen->ld_out[0] && gen->ld_out[1];
    for (int c = 0; same && c < 2; c++)
        same = !strcmp(gen->ld_field[c], gen->ld_field[0]) && !strcmp(gen->ld_index[c], gen->ld_out[c]);
    for (int i = 0; same && i < gen->nargs; i++) {
        if (!strcmp(gen->args[i].field, gen->ld_field[0])) fr = i;
        if (!strcmp(gen->args[i].field, out_field)) fo = i;
    }
    if (fr >= 0 && fo >= 0 && fr != fo) {
        const char *rt = gen->args[fr].ctype;
        if (!strncmp(rt, "const ", 6)) rt += 6;
        if (strcmp(rt, gen->args[fo].ctype)) fr = -1;
    } else fr = -1;
    if (fr >= 0) {
        /* KILN_CG_WG_RES_REGS: the later rounds load the residual's pairs themselves, at the index
         * proven above (column n; n + 1 follows it) */
        if (KILN_CG_WG_RES_REGS)
            cg_str_printf(hooks,
                          "__device__ __forceinline__ const void *kiln_res_at(const KilnArgs &p, long long b, long long m, "
                          "long long n)\n{\n    (void)b;\n    return p.%s + %s;\n}\n",
                          gen->ld_field[0], gen->ld_index[0]);
        cg_str_append(hooks, pre.s, pre.len);
        emit_mm_epilogue(gen, hooks, e, true, false, 2, 0);
    }
    cg_str_free(&pre);
    return fr;
}

/* The hooks of the QKV epilogue through shared memory (matmul_wgmma.cuh kwg_epilogue_qkv);
 * the fields they read are the register hook's (emit_qkv_epilogue runs first), so the wgmma
 * kernel and its fallback have the same KilnArgs. */
static bool emit_qkv_tma_hooks(cg_gen *gen, cg_str *hooks, const ir_node *bias, const qkv_seg *segs, int nseg,
                               const qkv_tma *q)
{
    const ir_node *A = gen->anchor;
    cg_str_printf(hooks, "/* a head of the tile's columns: segment (-1: none), destination map, head, the segment's "
                         "heads, rotated, normed per head */\nstruct kiln_qkv_chunk {\n    int seg, dst, head, heads, rot, "
                         "norm;\n};\n\n");
    cg_str body = {0};
    cg_begin_fn(gen, &body);
    for (int i = 0; i < nseg; i++) {
        const qkv_seg *sg = &segs[i];
        cg_open(gen, "if (n0 >= %lldLL && n0 < %lldLL)", (long long)sg->off, (long long)(sg->off + sg->heads * sg->hd));
        cg_line(gen, "return kiln_qkv_chunk{%d, %d, (int)((n0 - %lldLL) / %lld), %lld, %d, %d};", i, q->dst[i],
                (long long)sg->off, (long long)sg->hd, (long long)sg->heads, sg->rot ? 1 : 0, sg->norm ? 1 : 0);
        cg_close(gen);
    }
    cg_line(gen, "return kiln_qkv_chunk{-1, 0, 0, 0, 0, 0};");
    finish_fn(gen, hooks, "__device__ __forceinline__ kiln_qkv_chunk kiln_qkv_find(long long n0)", &body);

    /* per-head norms: 1/rms from a row's sum of squares over its head, then the gain at dims d0, d1 */
    bool anynorm = false;
    for (int i = 0; i < nseg; i++) anynorm |= segs[i].norm != NULL;
    if (anynorm) {
        cg_str_printf(hooks, "#define KILN_QKV_NORM 1\n");
        cg_begin_fn(gen, &body);
        cg_line(gen, "(void)seg;");
        for (int i = 0; i < nseg; i++)
            if (segs[i].norm)
                cg_line(gen, "if (seg == %d) return rsqrtf(ss * %s + %s);", i, cg_float_lit(gen, 1.0 / (double)segs[i].hd),
                        cg_float_lit(gen, segs[i].norm->attrs.eps));
        cg_line(gen, "return 1.f;");
        finish_fn(gen, hooks, "__device__ __forceinline__ float kiln_qkv_rstd(int seg, float ss)", &body);
        cg_begin_fn(gen, &body);
        cg_line(gen, "(void)p; (void)d0; (void)d1;");
        const char *rnd = A->type.dtype == IR_BF16 ? "kiln_round_bf16" : A->type.dtype == IR_F16 ? "kiln_round_f16" : "";
        for (int i = 0; i < nseg; i++) {
            const ir_node *nm = segs[i].norm, *gn = nm && nm->ninputs > 1 ? nm->inputs[1] : NULL;
            if (!nm) continue;
            const char *gf = gn ? cg_ptr(gen, gn, false) : NULL;
            if (gf)
                cg_line(gen, "if (seg == %d) return make_float2(%s(y.x * rs * kiln_ld(p.%s + d0)), %s(y.y * rs * kiln_ld(p.%s + d1)));",
                        i, rnd, gf, rnd, gf);
            else
                cg_line(gen, "if (seg == %d) return make_float2(%s(y.x * rs), %s(y.y * rs));", i, rnd, rnd);
        }
        cg_line(gen, "return y;");
        finish_fn(gen, hooks,
                  "__device__ __forceinline__ float2 kiln_qkv_norm(const KilnArgs &p, int seg, int d0, int d1, float rs, float2 y)",
                  &body);
    }

    cg_begin_fn(gen, &body);
    const char *rnd = A->type.dtype == IR_BF16 ? "kiln_round_bf16" : A->type.dtype == IR_F16 ? "kiln_round_f16" : "";
    const char *x[2] = {"v0", "v1"};
    for (int c = 0; c < 2 && bias; c++) {
        cg_idx bi = cg_idx_flat(&bias->type, c ? "(n + 1)" : "n");
        x[c] = cg_printf(gen, "(%s + %s)", x[c], cg_value(gen, bias, &bi));
    }
    cg_line(gen, "(void)p; (void)n;");
    cg_line(gen, "return make_float2(%s(%s), %s(%s));", rnd, x[0], rnd, x[1]);
    finish_fn(gen, hooks, "__device__ __forceinline__ float2 kiln_qkv_in(const KilnArgs &p, long long n, float v0, float v1)",
              &body);

    /* the rotation in two steps (matmul_wgmma.cuh reads a pair's frequency once for all its
     * rows, or at a tile's start with KILN_WGMMA_EPI_EARLY 2): kiln_qkv_turn(seg, i), the pair's
     * frequency g (segments rotated alike, q and k, read one table); kiln_qkv_rotate_g with it */
    {
        cg_begin_fn(gen, &body);
        cg_line(gen, "float2 g = make_float2(0.f, 0.f);");
        bool done[QKV_MAX_SEG] = {false};
        for (int i = 0; i < nseg; i++) {
            const ir_node *r = segs[i].rope;
            if (!r || done[i]) continue;
            const char *cond = cg_printf(gen, "seg == %d", i);
            for (int j = i + 1; j < nseg; j++) {
                const ir_node *o = segs[j].rope;
                if (o && !done[j] && segs[j].hd == segs[i].hd && o->attrs.theta == r->attrs.theta &&
                    ir_rope_attrs_eq(&o->attrs.rope, &r->attrs.rope)) {
                    cond = cg_printf(gen, "%s || seg == %d", cond, j);
                    done[j] = true;
                }
            }
            cg_line(gen, "if (%s) g = kiln_qkv_turns%d[i];", cond, i);
        }
        cg_line(gen, "return g;");
        finish_fn(gen, hooks, "__device__ __forceinline__ float2 kiln_qkv_turn(int seg, int i)", &body);
        cg_begin_fn(gen, &body);
        cg_line(gen, "float ms = 1.f;");
        for (int i = 0; i < nseg; i++) {
            const ir_node *r = segs[i].rope;
            double m = r ? ir_rope_mscale(&r->attrs.rope) : 1.0;
            if (r && m != 1.0) cg_line(gen, "if (seg == %d) ms = (float)%.17g;", i, m);
        }
        cg_line(gen, "(void)seg;");
        emit_rotation(gen);
        finish_fn(gen, hooks,
                  "__device__ __forceinline__ void kiln_qkv_rotate_g(int seg, int pp, float2 g, float &y0, float &y1)",
                  &body);
    }

    cg_begin_fn(gen, &body);
    cg_line(gen, "(void)p;");
    cg_line(gen, "return %s;", cg_dim(gen, &A->type.dims[1]));
    finish_fn(gen, hooks, "__device__ __forceinline__ long long kiln_qkv_rows(const KilnArgs &p)", &body);

    cg_begin_fn(gen, &body);
    cg_line(gen, "(void)p; (void)b;");
    if (q->pos) {
        cg_idx pi = cg_idx_flat(&q->pos->type, NULL);
        pi.c[0] = "b";
        cg_line(gen, "return (int)%s;", cg_int_value(gen, q->pos, &pi));
    } else {
        cg_line(gen, "return 0;");
    }
    finish_fn(gen, hooks, "__device__ __forceinline__ int kiln_qkv_pos(const KilnArgs &p, long long b)", &body);

    cg_begin_fn(gen, &body);
    cg_line(gen, "(void)p; (void)b; (void)head; (void)t; (void)d; (void)v;");
    for (int j = 1; j < 3; j++) {
        const ir_node *cw = q->node[j];
        if (!cw) continue;
        cg_open(gen, "if (dst == %d && t >= 0 && t < %s) /* positions past the cache are not written */", j,
                cg_dim(gen, &cw->type.dims[2]));
        cg_idx ci = cg_idx_flat(&cw->type, NULL);
        ci.c[0] = cg_slot_row(gen, "b"), ci.c[1] = "(long long)head", ci.c[2] = "t", ci.c[3] = "(long long)d";
        cg_store(gen, cw, &ci, "v");
        cg_close(gen);
    }
    finish_fn(gen, hooks,
              "__device__ __forceinline__ void kiln_qkv_put(const KilnArgs &p, int dst, long long b, int head, "
              "long long t, int d, float v)",
              &body);

    /* the caches' row of batch row b (the TMA stores' slab: row * heads + head) */
    cg_begin_fn(gen, &body);
    cg_line(gen, "(void)p; (void)b;");
    cg_line(gen, "return %s;", cg_slot_row(gen, "b"));
    finish_fn(gen, hooks, "__device__ __forceinline__ long long kiln_qkv_slot(const KilnArgs &p, long long b)", &body);
    return !gen->failed;
}

bool cg_gen_matmul(cg_gen *gen, cg_plan *plan, cg_str *hooks, const int64_t *dims)
{
    const ir_graph *g = gen->g;
    const ir_node *A = gen->anchor, *a = A->inputs[0], *w = A->inputs[1];
    const ir_node *bias = A->op == IR_OP_LINEAR && A->ninputs > 2 ? A->inputs[2] : NULL;
    /* a folded RMSNorm (cg_norm_folded, no gain: it is in the weight): read its input x (same shape) */
    const ir_node *norm = A->op == IR_OP_LINEAR && cg_norm_folded(gen, a) ? a : NULL;
    if (norm) a = norm->inputs[0];
    const ir_type *ot = &A->type;
    int ro = ot->rank, ra = a->type.rank, rw = w->type.rank;
    if (A->op != IR_OP_MATMUL && A->op != IR_OP_LINEAR) return cg_fail(gen, "not a matmul");
    cg_strided as, ws;
    if (!cg_strided_of(gen, a, &as)) return cg_fail(gen, "the left operand is not a strided view of stored data");
    if (!cg_strided_of(gen, w, &ws)) return cg_fail(gen, "the right operand is not a strided view of stored data");
    ir_dim one = ir_dim_const(1);
    /* weights as stored: a view of a weight that leaves its K axis contiguous (a transposed
     * 3-D weight of x @ transpose(w), a reshaped one) is read in place, not copied at bind time */
    cg_strided wv;
    if (cg_weight_view_of(gen, w, &wv) && ir_dim_eq(&wv.stride[A->op == IR_OP_LINEAR ? rw - 1 : rw - 2], &one)) ws = wv;
    ir_dim M, N, K, batch = one, lda, ldw, sa = ir_dim_const(0), sw = ir_dim_const(0);
    int b_nk;
    if (!ir_dim_eq(&as.stride[ra - 1], &one)) return cg_fail(gen, "the left operand's K axis is not contiguous");
    K = a->type.dims[ra - 1];
    if (A->op == IR_OP_LINEAR) {
        M = ir_type_numel(&a->type, 0, ra - 1, &gen->dim_overflow);
        N = w->type.dims[0];
        /* the row axes flatten to one stride; an axis of constant size 1 has no
         * stride that matters (a view may give it any), so it is skipped */
        int inner = -1; /* the innermost row axis of size other than 1 */
        for (int j = ra - 2; j >= 0; j--) {
            if (cg_dim_one(&a->type.dims[j])) continue;
            ir_dim want;
            if (inner >= 0 &&
                (!ir_dim_mul(as.stride[inner], a->type.dims[inner], &want) || !ir_dim_eq(&want, &as.stride[j])))
                return cg_fail(gen, "the left operand's rows do not flatten to one stride");
            if (inner < 0) inner = j;
        }
        lda = inner >= 0 ? as.stride[inner] : ra >= 2 ? as.stride[ra - 2] : K;
        if (ir_dim_eq(&ws.stride[1], &one)) b_nk = 1, ldw = ws.stride[0];
        else if (ir_dim_eq(&ws.stride[0], &one)) b_nk = 0, ldw = ws.stride[1];
        else return cg_fail(gen, "the weight has no contiguous axis");
    } else {
        M = a->type.dims[ra - 2];
        N = w->type.dims[rw - 1];
        lda = as.stride[ra - 2];
        if (ir_dim_eq(&ws.stride[rw - 1], &one)) b_nk = 0, ldw = ws.stride[rw - 2];
        else if (ir_dim_eq(&ws.stride[rw - 2], &one)) b_nk = 1, ldw = ws.stride[rw - 1];
        else return cg_fail(gen, "the right operand has no contiguous axis");
        batch = ir_type_numel(ot, 0, ro - 2, &gen->dim_overflow);
        if (!batch_stride(ot, ro - 2, &a->type, &as, &sa) || !batch_stride(ot, ro - 2, &w->type, &ws, &sw))
            return cg_fail(gen, "the batch axes of an operand do not flatten to one stride");
    }

    /* epilogue members: elementwise, reading the anchor at the output element */
    const ir_node *slices[2] = {NULL, NULL};
    int nslices = 0, nother = 0, nqkv = 0;
    const ir_node *qkv_members[16];
    bool heavy = false; /* an epilogue op that needs many registers per element (GELU's erf) */
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i] || n == A) continue;
        bool direct = false;
        for (int j = 0; j < n->ninputs; j++) direct |= n->inputs[j] == A;
        if (n->op == IR_OP_SLICE && direct && n->attrs.axis == ro - 1 && nslices < 2) {
            slices[nslices++] = n;
            continue;
        }
        if (n->op == IR_OP_ROPE || n->op == IR_OP_CACHE_WRITE || n->op == IR_OP_RMSNORM) {
            if (nqkv == 16) return cg_fail(gen, "too many norms, ropes and cache writes in a matmul epilogue");
            qkv_members[nqkv++] = n;
            continue;
        }
        if (ir_op_class(n->op) != IR_CLASS_ELEMENTWISE)
            return cg_fail(gen, "%s (line %d) in a matmul epilogue is not elementwise", ir_op_name(n->op), n->loc.line);
        heavy |= n->op == IR_OP_GELU;
        nother++;
    }
    /* SwiGLU: the result split in two halves along N by two slices */
    bool swiglu = false;
    ir_dim half = ir_dim_const(0);
    if (nslices == 2) {
        if (slices[0]->attrs.start.nterms != 0) {
            const ir_node *t = slices[0];
            slices[0] = slices[1];
            slices[1] = t;
        }
        if (!ir_dim_div(N, ir_dim_const(2), &half) || slices[0]->attrs.start.nterms != 0 ||
            !ir_dim_eq(&slices[0]->attrs.end, &half) || !ir_dim_eq(&slices[1]->attrs.start, &half) ||
            !ir_dim_eq(&slices[1]->attrs.end, &N))
            return cg_fail(gen, "the slices of the matmul result are not its two halves");
        if (cg_used_outside(gen, A) || cg_used_outside(gen, slices[0]) || cg_used_outside(gen, slices[1]))
            return cg_fail(gen, "a half of a gated matmul is used outside the kernel");
        if (!gen->bind[w->id] || (bias && !gen->bind[bias->id]))
            return cg_fail(gen, "a gated matmul needs bind-time weights (to interleave gate and up)");
        if (ws.base != w || !ir_dim_eq(&ws.off, &(ir_dim){0}) || b_nk != 1)
            return cg_fail(gen, "a gated matmul needs an [N, K] weight stored as such");
        swiglu = true;
    } else if (nslices == 1) {
        return cg_fail(gen, "a slice of the matmul result in its epilogue");
    }
    qkv_seg segs[QKV_MAX_SEG];
    int nseg = 0;
    const bool qkv = nqkv > 0;
    if (qkv) {
        if (A->op != IR_OP_LINEAR || ro != 3 || nslices || nother)
            return cg_fail(gen, "a rope or cache write in the epilogue of a matmul that is not a plain rank-3 linear");
        if (cg_used_outside(gen, A)) return cg_fail(gen, "the result of a QKV epilogue matmul is used outside the kernel");
        if (!qkv_segments(gen, qkv_members, nqkv, segs, &nseg)) return false;
        bool rot = false;
        for (int i = 0; i < nseg; i++) rot |= segs[i].rope != NULL;
        if (rot && (!gen->bind[w->id] || (bias && !gen->bind[bias->id])))
            return cg_fail(gen, "a rotating epilogue needs bind-time weights (to pair the rotated rows)");
        if (rot && (ws.base != w || !ir_dim_eq(&ws.off, &(ir_dim){0}) || b_nk != 1))
            return cg_fail(gen, "a rotating epilogue needs an [N, K] weight stored as such");
    }

    /* outputs */
    const ir_node *outs[16];
    int nouts = 0;
    const ir_type *out_t = swiglu ? &slices[0]->type : ot;
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i] || !cg_used_outside(gen, n)) continue;
        if (!qkv && !ir_type_same_shape(&n->type, out_t)) return cg_fail(gen, "a matmul epilogue output has another shape");
        if (nouts == 16) return cg_fail(gen, "too many outputs");
        outs[nouts++] = n;
    }
    if (nouts == 0) return cg_fail(gen, "the matmul result is not used");

    mm_heur h = heur_matmul(&M, &N, &K, &batch, dims, gen->target->sm_count, cg_gemv_max_rows(gen->target),
                            a->type.dtype);
    const ir_dim *tma_strides[6] = {&lda, &ldw, &sa, &sw, &as.off, &ws.off};
    /* the TMA-store epilogue: one output, of the operands' type, rows of a
     * multiple of 8 elements (its base is checked at run time) */
    const ir_dim onb = swiglu ? half : N;
    int64_t mv, nv, kv, bv;
    const bool hm = ir_dim_value(&M, dims, &mv), hn = ir_dim_value(&N, dims, &nv), hk = ir_dim_value(&K, dims, &kv),
               hb = ir_dim_value(&batch, dims, &bv);
    /* 17..64 rows: the tensor-core GEMV where it fits (a folded norm above the GEMV's rows is
     * computed by the matmul templates: KILN_MATMUL_NORM) */
    if (!h.gemv && gmma_fits(a->type.dtype, w->type.dtype, b_nk, hm, mv, hn, hk, kv, hb, gen->target))
        gmma_choose(&h, mv, nv, kv, bv, gen->target);
    /* the QKV epilogue through shared memory and TMA stores (qkv_tma_plan) at every M the Hopper
     * template takes: at skinny M too (the register epilogue's loads and scattered stores wait on
     * each other; decode rows go to the caches element by element from the staging) */
    qkv_tma qt;
    const bool skinny = hm && mv <= 256;
    const bool qkv_ts = qkv && qkv_tma_plan(gen, segs, nseg, a->type.dtype, &qt);
    const bool ts_ok = qkv ? qkv_ts : nouts == 1 && outs[0]->type.dtype == a->type.dtype && mult8(&onb);
    /* the 64-column tile (skinny M): not for SwiGLU (its staged output would be 32 columns) nor the
     * QKV epilogue (a tile holds whole heads) */
    wg_cfg wc = wg_choose(hm ? &mv : NULL, hn ? &nv : NULL, hk ? &kv : NULL, hb ? &bv : NULL, ts_ok, !swiglu && !qkv,
                          !bias && nother == 0, gen->target->sm_count);
    /* a folded norm needs the whole of K in each tile: no split-K through the workspace (nor
     * among the candidates); the cluster's split carries its sums (wg_cluster_split, below) */
    if (norm && !(skinny && (KILN_CG_WG_DECODE & 16))) wc.split = 1;
    /* staged columns: at most the tile's output columns (SwiGLU: half its accumulator columns);
     * a GELU epilogue stages 64 at a time (at 128 its kernel spills under the consumers' register cap) */
    if (wc.ec > (swiglu ? wc.bn / 2 : wc.bn)) wc.ec = swiglu ? wc.bn / 2 : wc.bn;
    if (heavy && wc.ec > 64) wc.ec = 64;
    /* the QKV epilogue through shared memory, one head staged at a time: ping-pong 128x128, 5
     * stages, or the cooperative 128x256 tile (KILN_CG_WG_QKV_WIDE, below; docs/MATMUL.md: with
     * the rotation per head it is the faster); skinny M keeps its 64-row tiles and split */
    if (qkv_ts && !h.gemv && !skinny) {
        wc = (wg_cfg){128, 128, 5, 1, 1, qt.hd, 1, 0, 0};
        /* KILN_CG_WG_QKV_WIDE: cooperative 128x256 (4 stages) where its tiles fill two waves, or,
         * M unknown, where N >= 4096 */
        const int64_t tiles = hm && hn ? ((mv + 127) / 128) * ((nv + 255) / 256) * (hb ? bv : 1) : 0;
        const bool wide = hm ? tiles >= 2 * (int64_t)gen->target->sm_count : hn && nv >= 4096;
        if (KILN_CG_WG_QKV_WIDE && wide)
            wc = (wg_cfg){128, 256, 4, 0, 1, qt.hd, 1, 0, 0};
    }
    if (qkv_ts && skinny) wc.ts = 1, wc.ec = qt.hd;
    /* the QKV epilogue (rotation, cache stores) from registers: a 128-row tile's accumulators leave it
     * too few under the consumers' register cap (it spills), so large M takes the 64-row tiles of the
     * skinny configuration */
    if (qkv && !qkv_ts && wc.bm == 128) wc = (wg_cfg){64, 128, 8, 1, 0, 128, 1, 0, 0};
    /* skinny M: the split in a cluster (wg_cluster_split), the ring shortened to fit its exchange */
    wg_cluster_split(&wc, skinny, norm != NULL, gen->target);
    if (norm && wc.split > 1) wc.split = 1;
    /* KILN_CG_WG_EVEN: the column blocks spread evenly over the SMs */
    wg_even(&wc, skinny, hm ? &mv : NULL, hn ? &nv : NULL, hb ? &bv : NULL, swiglu, qkv, heavy, gen->target);
    /* cuBLASLt as an implementation (codegen/cg_lt.c): a candidate where it expresses the whole epilogue */
    cg_lt_nodes ltn;
    const cg_lt_in lti = {A, a, w, bias, norm != NULL, swiglu, qkv, outs, nouts, b_nk, M, N, K, batch, lda, ldw, sa, sw};
    cg_lt_analyze(gen, &lti, &gen->kern->lt, &ltn);
    cg_lt *lt = &gen->kern->lt;
    /* autotuning: the problem, the candidates, and the tuner's choice for it
     * (the fallback build asks too and gets the same answer: same fields) */
    const bool can_split = hm && hn && hk && hb && !norm;
    if (!h.gemv && !h.gmma && (!qkv || qkv_ts)) { /* the register QKV epilogue keeps its 64-row tiles (above) */
        char mtxt[24], ntxt[24], ktxt[24], btxt[24];
        snprintf(mtxt, sizeof mtxt, hm ? "%lld" : "sym", (long long)mv);
        snprintf(ntxt, sizeof ntxt, hn ? "%lld" : "sym", (long long)nv);
        snprintf(ktxt, sizeof ktxt, hk ? "%lld" : "sym", (long long)kv);
        snprintf(btxt, sizeof btxt, hb ? "%lld" : "sym", (long long)bv);
        /* a build without the TMA residual (KILN_CG_WG_RES_TMA 0) times other kernels: its own problems */
        gen->kern->tune_problem = cg_printf(gen, "matmul_wgmma %s M=%s N=%s K=%s batch=%s out=%s swiglu=%d heavy=%d%s%s",
                                            ir_dtype_name(a->type.dtype), mtxt, ntxt, ktxt, btxt,
                                            qkv_ts ? "qkv" : ts_ok ? "tma" : "regs", swiglu ? 1 : 0, heavy ? 1 : 0,
                                            KILN_CG_WG_RES_TMA ? (KILN_CG_WG_RES_REGS ? " res=regs" : "") : " res=ldg", cg_lt_problem_suffix(gen, lt));
        gen->kern->tune_rows = ir_dim_times(M, batch, &gen->dim_overflow);
        wg_cfg even;
        const bool has_even = (KILN_CG_WG_EVEN & 4) && wg_even_pick(&even, &wc, skinny, hm ? &mv : NULL, hn ? &nv : NULL,
                                                                    hb ? &bv : NULL, swiglu, qkv, heavy, true, gen->target);
        gen->kern->ntune_cands = wg_candidates(&wc, skinny, swiglu, heavy, can_split, norm != NULL, qkv_ts ? qt.hd : 0,
                                               has_even ? &even : NULL, gen->target, gen->kern->tune_cands);
        if (lt->why == CG_LT_OK) gen->kern->tune_cands[gen->kern->ntune_cands++] = (cg_wg_choice){.impl = CG_IMPL_CUBLASLT};
        cg_wg_choice tc;
        if (gen->opts && gen->opts->tune && gen->opts->tune(gen->opts->tune_user, gen->kern->tune_problem, &tc)) {
            wg_cfg t = {tc.bm, tc.bn, tc.stages, tc.pp ? 1 : 0, wc.ts, tc.ec, tc.split, 0, 0};
            if (!t.ts || qkv_ts) t.ec = wc.ec;
            /* a width whose output columns the TMA store's 64-column rounds do not divide (wg_even_pick's
             * 48, 224, ...) writes from registers */
            if (t.ts && !qkv_ts && !wg_ts_fits(t.bn, swiglu)) t.ts = 0;
            wg_cluster_split(&t, skinny, norm != NULL, gen->target);
            if (tc.impl == CG_IMPL_CUBLASLT && lt->why == CG_LT_OK) { /* the kernel stays the heuristic's, unlaunched */
                lt->chosen = gen->kern->tuned = true;
                cg_workspace(gen, "lt_ws", "void *", ir_dim_const(CG_LT_WORKSPACE), false);
            } else if (tc.impl == CG_IMPL_TEMPLATE && wg_legal(&t, swiglu, heavy, can_split, gen->target)) {
                wc = t;
                gen->kern->tuned = true;
            }
            if (gen->kern->tuned) lt->us = tc.us, lt->other_us = tc.other_us;
        }
    }
    /* the fallback of a wgmma kernel (no_wgmma) has the same fields: wg_fit */
    const bool wg_fit = !h.gemv && !h.gmma && wgmma_fits(gen, a->type.dtype, w->type.dtype, b_nk, &M, dims, tma_strides, &wc);
    const bool wgmma = wg_fit && !gen->no_wgmma;
    if (!wgmma) { /* only the Hopper template's configuration is tuned */
        gen->kern->tune_problem = NULL;
        gen->kern->ntune_cands = 0;
        gen->kern->tuned = false;
        if (lt->why == CG_LT_OK) lt->why = CG_LT_NOT_TUNED;
        lt->chosen = false;
    }
    plan->family = h.gemv ? CG_FAMILY_GEMV : h.gmma ? CG_FAMILY_GEMV_MMA : wgmma ? CG_FAMILY_MATMUL_WGMMA : CG_FAMILY_MATMUL;
    cg_ptr_strided(gen, "a", &as, false);
    cg_ptr_strided(gen, "w", &ws, false);
    cg_scalar(gen, "M", M);
    cg_scalar(gen, "N", N);
    cg_scalar(gen, "K", K);
    cg_scalar(gen, "batch", batch);
    cg_scalar(gen, "lda", lda);
    cg_scalar(gen, "ldw", ldw);
    cg_scalar(gen, "sa", sa);
    cg_scalar(gen, "sw", sw);
    if (norm && !h.gemv && !h.gmma) { /* the matmul templates (matmul_wgmma.cuh and its fallback) */
        define(plan, "KILN_MATMUL_NORM", "1");
        define(plan, "KILN_EPS", "%s", cg_float_lit(gen, norm->attrs.eps));
    }
    if (h.gemv || h.gmma) {
        bool *ovf = &gen->dim_overflow;
        /* partial products; with a folded norm as much again for the slices' sums of squares
         * (gemv.cuh, gemv_mma.cuh: at most one float per row and 16 columns); counters: one
         * per column block (8 columns) or tile (16) */
        ir_dim wsb = ir_dim_times(ir_dim_times(ir_dim_times(M, N, ovf), batch, ovf),
                                  ir_dim_const(4 * h.splitk * (norm ? 2 : 1)), ovf);
        ir_dim semb = ir_dim_times(ir_dim_times(N, batch, ovf), ir_dim_const(4), ovf);
        if (h.splitk > 1) {
            cg_workspace(gen, "ws", "float *", wsb, false);
            cg_workspace(gen, "sem", "int *", semb, true);
        } else {
            cg_null_ptr(gen, "ws", "float *");
            cg_null_ptr(gen, "sem", "int *");
        }
    }
    if (wg_fit && wc.split > 1) { /* split-K: partial sums and a counter per tile and consumer */
        const int64_t tiles = bv * ((mv + wc.bm - 1) / wc.bm) * ((nv + wc.bn - 1) / wc.bn);
        cg_workspace(gen, "ws", "float *", ir_dim_const(tiles * wc.split * wc.bm * wc.bn * 4), false);
        cg_workspace(gen, "sem", "int *", ir_dim_const(tiles * (wc.pp ? 1 : 2) * 4), true);
    }

    mm_epi epi = {A, bias, {slices[0], slices[1]}, outs, nouts, ro, swiglu, M, N, half, ot, out_t};
    if (qkv) {
        if (!emit_qkv_epilogue(gen, hooks, bias, segs, nseg, h.gemv, M)) return false;
        if (wg_fit && qkv_ts && !emit_qkv_tma_hooks(gen, hooks, bias, segs, nseg, &qt)) return false;
        int nx = 0;
        for (int i = 0; i < nseg; i++) nx += segs[i].rope ? 2 : 0;
        gen->kern->xforms = nx ? calloc((size_t)nx, sizeof *gen->kern->xforms) : NULL;
        if (nx && !gen->kern->xforms) return cg_fail(gen, "out of memory");
        for (int i = 0; i < nseg; i++) {
            const qkv_seg *sg = &segs[i];
            if (!sg->rope) continue;
            cg_xform x = {CG_XFORM_ROPE_PAIRS, w->id, ir_dim_const(0), sg->off, sg->stride, sg->heads, sg->rot};
            gen->kern->xforms[gen->kern->nxforms++] = x;
            if (bias) {
                x.node = bias->id;
                gen->kern->xforms[gen->kern->nxforms++] = x;
            }
        }
    } else {
        emit_mm_epilogue(gen, hooks, &epi, false, false, 0, 0);
    }
    /* rotation pairs side by side for decode attention's rope (cg_rope_paired) */
    qkv_seg psegs[QKV_MAX_SEG];
    int npseg = 0;
    const bool paired = !qkv && !swiglu && cg_rope_paired(gen, A, psegs, &npseg);
    if (paired) {
        gen->kern->xforms = calloc((size_t)npseg * 2, sizeof *gen->kern->xforms);
        if (!gen->kern->xforms) return cg_fail(gen, "out of memory");
        for (int i = 0; i < npseg; i++) {
            const qkv_seg *sg = &psegs[i];
            cg_xform x = {CG_XFORM_ROPE_PAIRS, w->id, ir_dim_const(0), sg->off, sg->stride, sg->heads, sg->rot};
            gen->kern->xforms[gen->kern->nxforms++] = x;
            if (bias) {
                x.node = bias->id;
                gen->kern->xforms[gen->kern->nxforms++] = x;
            }
        }
    }
    if (swiglu) {
        gen->kern->xforms = calloc(2, sizeof *gen->kern->xforms);
        if (!gen->kern->xforms) return cg_fail(gen, "out of memory");
        gen->kern->xforms[gen->kern->nxforms++] = (cg_xform){CG_XFORM_INTERLEAVE_ROWS, w->id, half, 0, 0, 0, 0};
        if (bias) gen->kern->xforms[gen->kern->nxforms++] = (cg_xform){CG_XFORM_INTERLEAVE_ROWS, bias->id, half, 0, 0, 0, 0};
    }
    /* the decode-sized template options (matmul_wgmma.cuh) at skinny M: W's first ring slots
     * before kiln_pdl_wait when W is a weight (bind time: no kernel of the graph writes it), W
     * evict-first in L2 when each of its bytes is read once (one row block, one batch), the
     * epilogue's operands asked for before the mainloop ends (the TMA-store epilogues) */
    const bool w_const = gen->bind[ws.base->id] || ws.base->op == IR_OP_WEIGHT;
    const bool w_early = wgmma && skinny && w_const && (KILN_CG_WG_DECODE & 1);
    const bool w_once = wgmma && hm && mv <= wc.bm && hb && bv == 1 && (KILN_CG_WG_DECODE & 2);
    const bool epi_early = wgmma && skinny && wc.ts && (KILN_CG_WG_DECODE & 4);
    /* bit 6: the epilogue's operands into registers at each tile's start (KILN_WGMMA_EPI_EARLY 2):
     * the QKV epilogue's positions and frequencies; another's loads through kiln_epilogue_pre when
     * they take at most 64 floats per consumer thread (its MW x BN/8 x 2 accumulator pairs) */
    const bool epi_regs = wgmma && skinny && wc.ts && (KILN_CG_WG_DECODE & 64);
    /* bit 8 (with bit 6): the QKV epilogue's operands early too (measured slower on an H100: the
     * registers it holds cost the QKV tile more than the round trip it saves) */
    const bool epi_regs_qkv = epi_regs && qkv && (KILN_CG_WG_DECODE & 256);
    const int pairs = (wc.bm / 64 / (wc.pp ? 1 : 2)) * (wc.bn / 8) * 2;
    bool epi_pre = false;
    if (wgmma && wc.ts && !qkv) emit_mm_epilogue(gen, hooks, &epi, true, false, 0, 0);
    if (epi_regs && !qkv && emit_mm_epilogue(gen, hooks, &epi, true, false, 1, 64 / pairs) > 0) {
        emit_mm_epilogue(gen, hooks, &epi, true, false, 2, 0);
        epi_pre = true;
    }
    if (epi_early && !epi_pre && !qkv) emit_mm_epilogue(gen, hooks, &epi, true, true, 0, 0);
    /* KILN_CG_WG_RES_TMA: at large M, one split, a residual read where the output is written comes by
     * TMA into the staging; the value hook becomes kiln_epilogue_post over the two values the
     * template reads there (pre[0] at column n, pre[1] at n + 1) */
    const bool res_ok = KILN_CG_WG_RES_TMA && wgmma && wc.ts && !qkv && !skinny && !swiglu && wc.split == 1 &&
                        wc.ck <= 1 && !epi_pre && !epi_early;
    const int res_f = res_ok ? res_tma_field(gen, hooks, &epi, cg_ptr(gen, outs[0], true)) : -1;
    /* bit 7: the tile's end without a round trip to memory (KILN_WGMMA_TAIL) */
    const bool tail = wgmma && skinny && (KILN_CG_WG_DECODE & 128);

    define(plan, "KILN_B_NK", "%d", b_nk);
    define(plan, "KILN_SWIGLU", "%d", swiglu ? 1 : 0);
    cg_launch *L = &gen->kern->launch;
    if (wgmma) {
        define(plan, "KILN_BM", "%d", wc.bm);
        define(plan, "KILN_BN", "%d", wc.bn);
        define(plan, "KILN_STAGES", "%d", wc.stages);
        define(plan, "KILN_WGMMA_PINGPONG", "%d", wc.pp);
        define(plan, "KILN_WGMMA_TMA_STORE", "%d", wc.ts);
        if (wc.ts) define(plan, "KILN_WGMMA_EPI_COLS", "%d", wc.ec);
        if (qkv_ts) {
            define(plan, "KILN_WGMMA_QKV", "1");
            define(plan, "KILN_QKV_HD", "%d", qt.hd);
        }
        define(plan, "KILN_SPLITK", "%d", wc.split);
        if (wc.ck > 1) define(plan, "KILN_WGMMA_CLUSTER_K", "%d", wc.ck);
        define(plan, "KILN_WGMMA_F16", "%d", a->type.dtype == IR_F16 ? 1 : 0);
        if (w_early) define(plan, "KILN_WGMMA_W_EARLY", "1");
        if (w_early && (KILN_CG_WG_DECODE & 8)) define(plan, "KILN_WGMMA_W_L2", "%d", 2 * wc.stages);
        if (w_once) define(plan, "KILN_WGMMA_W_EVICT_FIRST", "1");
        if (epi_regs_qkv || epi_pre) define(plan, "KILN_WGMMA_EPI_EARLY", "2");
        else if (epi_early) define(plan, "KILN_WGMMA_EPI_EARLY", "1");
        if (tail) define(plan, "KILN_WGMMA_TAIL", "1");
        if (res_f >= 0) define(plan, "KILN_WGMMA_RES_TMA", "1");
        if (res_f >= 0 && KILN_CG_WG_RES_REGS) define(plan, "KILN_WGMMA_RES_REGS", "1"); /* the template says where */
        gen->kern->config = cg_printf(gen, "wgmma %dx%d s%d%s%s", wc.bm, wc.bn, wc.stages, wc.pp ? " ping-pong" : "",
                                      wc.ts ? " tma-store" : "");
        if (wc.split > 1) gen->kern->config = cg_printf(gen, "%s split-k %d", gen->kern->config, wc.split);
        if (wc.ck > 1) gen->kern->config = cg_printf(gen, "%s split-k %d in a cluster", gen->kern->config, wc.ck);
        if (norm) gen->kern->config = cg_printf(gen, "%s, rmsnorm of its input", gen->kern->config);
        if (res_f >= 0) { /* KILN_WGMMA_RES_REGS applies where matmul_wgmma.cuh's kwg_rr is on */
            const int mw = wc.pp ? wc.bm / 64 : wc.bm / 128;
            const bool rr = KILN_CG_WG_RES_REGS && wc.bn > wc.ec && mw * (wc.bn - wc.ec) <= 128;
            gen->kern->config = cg_printf(gen, "%s, residual by TMA%s", gen->kern->config,
                                          rr ? " (later rounds from registers)" : "");
        }
        if (gen->kern->tuned) gen->kern->config = cg_printf(gen, "%s (autotuned)", gen->kern->config);
        if (lt->chosen) { /* what runs: cuBLASLt (the template's configuration is the heuristic's, unlaunched) */
            char e[64];
            gen->kern->config = cg_printf(gen, "cublasLt %s (autotuned)", cg_lt_epilogue_name(lt, e, sizeof e));
            if (lt->other_us > 0)
                gen->kern->config = cg_printf(gen, "%s, %.1f us vs the template's %.1f us", gen->kern->config, lt->us,
                                              lt->other_us);
        }
        /* the tensor maps: A rows M, W rows N, both K-major (base: fields "a",
         * "w"); the TMA-store epilogue's output: rows M of onb elements */
        int fa = -1, fw = -1, fo = -1;
        const char *of = wc.ts ? cg_ptr(gen, qkv_ts ? qt.node[0] : outs[0], true) : NULL;
        for (int i = 0; i < gen->nargs; i++) {
            if (!strcmp(gen->args[i].field, "a")) fa = i;
            if (!strcmp(gen->args[i].field, "w")) fw = i;
            if (of && !strcmp(gen->args[i].field, of)) fo = i;
        }
        if (fa < 0 || fw < 0 || (wc.ts && fo < 0)) return cg_fail(gen, "matmul: the operand fields are missing");
        gen->kern->tmaps[0] = (cg_tmap){CG_TMAP_A, fa, a->type.dtype, K, M, lda, batch, sa, wc.bm, false};
        gen->kern->tmaps[1] = (cg_tmap){CG_TMAP_W, fw, w->type.dtype, K, N, ldw, batch, sw, wc.bn, false};
        gen->kern->ntmaps = 2;
        if (qkv_ts) {
            /* q: rows M of its heads * hd columns; each cache {hd, T, B * heads} (as attention reads it) */
            const ir_type *qy = &qt.node[0]->type;
            bool *ovf = &gen->dim_overflow;
            ir_dim qw = ir_dim_times(qy->dims[2], qy->dims[3], ovf);
            gen->kern->tmaps[2] = (cg_tmap){CG_TMAP_Q, fo, qy->dtype, qw, M, qw, batch, ir_dim_times(M, qw, ovf), 64, false};
            gen->kern->ntmaps = 3;
            for (int j = 1; j < 3 && qt.node[j]; j++) {
                const char *cf = cg_ptr(gen, qt.node[j], true);
                int fc = -1;
                for (int i = 0; cf && i < gen->nargs; i++)
                    if (!strcmp(gen->args[i].field, cf)) fc = i;
                if (fc < 0) return cg_fail(gen, "matmul: the cache fields are missing");
                const ir_type *ct = &qt.node[j]->type;
                ir_dim hdd = ir_dim_const(qt.hd);
                gen->kern->tmaps[2 + j] = (cg_tmap){j == 1 ? CG_TMAP_K : CG_TMAP_V, fc, ct->dtype, hdd, ct->dims[2], hdd,
                                                    ir_dim_times(ct->dims[0], ct->dims[1], ovf),
                                                    ir_dim_times(ct->dims[2], hdd, ovf), 64, true};
                gen->kern->ntmaps = 3 + j;
            }
        } else if (wc.ts) {
            ir_dim so = ir_dim_times(M, onb, &gen->dim_overflow);
            gen->kern->tmaps[2] = (cg_tmap){CG_TMAP_OUT, fo, outs[0]->type.dtype, onb, M, onb, batch, so, 64, false};
            gen->kern->ntmaps = 3;
            if (res_f >= 0) { /* the residual: the output's geometry (res_tma_field) */
                gen->kern->tmaps[3] = (cg_tmap){CG_TMAP_RES, res_f, outs[0]->type.dtype, onb, M, onb, batch, so, 64, false};
                gen->kern->ntmaps = 4;
            }
        }
        /* persistent: one CTA per SM (the ring takes most of its shared
         * memory), at most one per unit (batch row blocks x column blocks x
         * K slices) */
        L->block = WG_THREADS;
        L->smem = wg_smem(&wc);
        L->grid[0] = (cg_grid_dim){ir_dim_times(M, batch, &gen->dim_overflow), wc.bm, gen->target->sm_count,
                                   ir_dim_times(N, ir_dim_const(wc.split), &gen->dim_overflow), wc.bn};
        L->grid[1] = L->grid[2] = grid_dim(ir_dim_const(1), 1, 0);
        if (wc.ck > 1) { /* a cluster of ck CTAs along y per tile, at most the SMs' worth of them */
            L->grid[0].cap = gen->target->sm_count / wc.ck;
            L->grid[1] = grid_dim(ir_dim_const(wc.ck), 1, 0);
            L->cluster = wc.ck;
            L->cluster_y = true;
        }
    } else if (h.gmma) {
        const int64_t ntiles = (nv + 16 * h.mt - 1) / (16 * h.mt), gx = (ntiles + h.warps - 1) / h.warps;
        gen->kern->config = cg_printf(gen, "gemv mma %d rows x %d cols per warp, %d warps, split-k %d", 8 * h.nt,
                                      16 * h.mt, h.warps, h.splitk);
        if (gx > h.ctas)
            gen->kern->config = cg_printf(gen, "%s, %lld CTAs along N", gen->kern->config, (long long)h.ctas);
        define(plan, "KILN_GEMV_MMA", "1");
        define(plan, "KILN_GMMA_NT", "%d", h.nt);
        define(plan, "KILN_GMMA_MT", "%d", h.mt);
        define(plan, "KILN_GMMA_WARPS", "%d", h.warps);
        define(plan, "KILN_GMMA_UNROLL", "%d", h.unroll);
        define(plan, "KILN_GMMA_MINB", "%d", h.minb);
        define(plan, "KILN_SPLITK", "%d", h.splitk);
        if (norm) {
            define(plan, "KILN_GEMV_NORM", "1");
            define(plan, "KILN_EPS", "%s", cg_float_lit(gen, norm->attrs.eps));
            gen->kern->config = cg_printf(gen, "%s, rmsnorm of its input", gen->kern->config);
        }
        L->block = 32 * h.warps;
        L->smem = h.smem;
        L->grid[0] = grid_dim(N, 16 * h.mt * h.warps, h.ctas);
        L->grid[1] = grid_dim(ir_dim_const(h.splitk), 1, 0);
        L->grid[2] = grid_dim(batch, 1, 0);
    } else if (h.gemv) {
        gen->kern->config = cg_printf(gen, "gemv %d cols split-k %d", h.cols, h.splitk);
        if (hn && h.ctas > 0 && (nv + h.cols - 1) / h.cols > h.ctas)
            gen->kern->config = cg_printf(gen, "%s, %lld CTAs along N", gen->kern->config, (long long)h.ctas);
        define(plan, "KILN_GEMV_COLS", "%d", h.cols);
        /* rows held in registers: the smallest power of two >= M (gemv.cuh: fewer registers,
         * two CTAs per SM up to 2 rows); M not known: 8 */
        int maxm = 1;
        while (hm && maxm < mv && maxm < 16) maxm *= 2;
        define(plan, "KILN_GEMV_MAXM", "%d", hm ? maxm : 8);
        /* two CTAs per SM (registers capped at 128) only where ptxas fits them without spilling */
        define(plan, "KILN_GEMV_MINB", "%d", gemv_minb(hm ? maxm : 8, a->type.dtype));
        define(plan, "KILN_SPLITK", "%d", h.splitk);
        define(plan, "KILN_GEMV_DEFER", "%d", KILN_CG_GEMV_DEFER);
        define(plan, "KILN_GEMV_LAUNCH_AT", "%d", KILN_CG_GEMV_LAUNCH);
        /* the weight's bytes at these dims, for KILN_CG_GEMV_SMALL_MB (-1: not known, taken as large) */
        int64_t nval = 0, kval = 0;
        const int64_t wbytes = ir_dim_value(&N, dims, &nval) && ir_dim_value(&K, dims, &kval)
                                   ? nval * kval * ir_dtype_size(w->type.dtype)
                                   : -1;
        const bool small_w = KILN_CG_GEMV_SMALL_MB <= 0 || (wbytes >= 0 && wbytes <= (int64_t)KILN_CG_GEMV_SMALL_MB << 20);
        if (KILN_CG_GEMV_PREFETCH && small_w) define(plan, "KILN_PDL_PREFETCH", "1");
        /* the ring's slots: as many as fit two CTAs per SM (beside 8 KB of static shared memory
         * each), at most KILN_CG_GEMV_RING */
        int64_t ring = ((gen->target->smem_per_block + 1024) / 2 - 8192) / ((int64_t)h.cols * 256 * 16);
        if (ring > KILN_CG_GEMV_RING) ring = KILN_CG_GEMV_RING;
        if (KILN_CG_GEMV_RING_MINK > 0 && (!ir_dim_value(&K, dims, &kval) || kval < KILN_CG_GEMV_RING_MINK)) ring = 0;
        if (!small_w) ring = 0;
        if (ring > 1 && KILN_CG_GEMV_DEFER > 0 && h.splitk == 1 && b_nk == 1 && maxm * h.cols <= 32 &&
            gemv_minb(hm ? maxm : 8, a->type.dtype) == 2 && a->type.dtype != IR_F32) {
            define(plan, "KILN_GEMV_RING", "%d", (int)ring);
            L->smem = ring * h.cols * 256 * 16;
            gen->kern->config = cg_printf(gen, "%s, ring %d", gen->kern->config, (int)ring);
        }
        if (norm) {
            define(plan, "KILN_GEMV_NORM", "1");
            define(plan, "KILN_EPS", "%s", cg_float_lit(gen, norm->attrs.eps));
            gen->kern->config = cg_printf(gen, "%s, rmsnorm of its input", gen->kern->config);
        }
        L->block = 256;
        L->grid[0] = grid_dim(N, h.cols, h.ctas);
        L->grid[1] = grid_dim(ir_dim_const(h.splitk), 1, 0);
        L->grid[2] = grid_dim(batch, 1, 0);
    } else {
        define(plan, "KILN_BM", "%d", h.bm);
        define(plan, "KILN_BN", "%d", h.bn);
        define(plan, "KILN_BK", "%d", h.bk);
        define(plan, "KILN_WARPS_M", "%d", h.wm);
        define(plan, "KILN_WARPS_N", "%d", h.wn);
        define(plan, "KILN_STAGES", "%d", h.stages);
        gen->kern->config = a->type.dtype == IR_F32 ? cg_printf(gen, "fma %dx%dx%d", h.bm, h.bn, h.bk)
                                                   : cg_printf(gen, "mma.sync %dx%dx%d s%d", h.bm, h.bn, h.bk, h.stages);
        if (norm) gen->kern->config = cg_printf(gen, "%s, rmsnorm of its input", gen->kern->config);
        /* the template's KILN_SMEM_BYTES (matmul_mma.cuh), computed here for the launch:
         * 2-byte types a STAGES-deep ring of rows padded by 8 elements; f32 one
         * A and one B tile, k-major, padded by 4 */
        int64_t smem;
        if (a->type.dtype == IR_F32)
            smem = ((int64_t)h.bk * (h.bm + 4) + (int64_t)h.bk * (h.bn + 4)) * 4;
        else
            smem = (int64_t)h.stages *
                   ((int64_t)h.bm * (h.bk + 8) + (b_nk ? (int64_t)h.bn * (h.bk + 8) : (int64_t)h.bk * (h.bn + 8))) * 2;
        L->block = 32 * h.wm * h.wn;
        L->smem = smem;
        L->grid[0] = grid_dim(N, h.bn, 0);
        L->grid[1] = grid_dim(M, h.bm, 0);
        L->grid[2] = grid_dim(batch, 1, 0);
    }
    bool head_norm = false;
    for (int i = 0; i < nseg; i++) head_norm |= segs[i].norm != NULL;
    if (head_norm) /* where the per-head q/k norm is computed (emit_qkv_norm_fix) */
        gen->kern->config = cg_printf(gen, "%s, per-head q/k norm %s", gen->kern->config ? gen->kern->config : "?",
                                      wgmma && qkv_ts ? "in the epilogue (a quad of lanes holds a head's row)"
                                                      : "by the epilogue call that completes a head (a counter per row and "
                                                        "head: this template's threads hold no whole heads)");
    if (paired)
        gen->kern->config = cg_printf(gen, "%s, rotation pairs side by side for attention's RoPE",
                                      gen->kern->config ? gen->kern->config : "?");
    cg_lt_fields(gen, &ltn, lt);
    char ltxt[320];
    gen->kern->lt_note = cg_printf(gen, "%s", cg_lt_line(gen->kern, ltxt, sizeof ltxt));
    (void)nother;
    return !gen->failed;
}

/* ---- attention ------------------------------------------------------------------------- */

/* Prefill: 64 queries and 64 keys per tile, 4 warps. Decode (S known and
 * <= 16): the grid's splits, so that B*KV*SPLITS covers the SMs twice (1..32; 64 with
 * one or two KV heads per sequence at B=1); the kernel cuts the cache length it reads
 * from the device into at most that many, a tile of keys or more each. */
int cg_attention_decode_splits(int64_t b, int64_t kv, int sm_count)
{
    if (b * kv <= 0) return 8;
    int s = 1, most = b * kv <= 2 ? 64 : 32;
    while (s < most && b * kv * s < 2 * sm_count) s *= 2;
    return s;
}

int cg_attention_decode_warps(int64_t hd) { return hd > 128 ? 1 : 2; }
int cg_attention_decode_threads(int64_t hd, int64_t bkv)
{
    return bkv > 0 && bkv <= 16 ? 128 : 32 * cg_attention_decode_warps(hd);
}

/* A cluster per (KV head, sequence) when the batch is small (B*KV <= 16) and the cache short
 * (known t up to CG_DEC_CLUSTER_T rows): the cluster's CTAs are the splits (at most 8, the
 * portable size, or 16 for the tiniest grids: KILN_CG_DEC_CLUSTER_TINY below; B*KV*splits CTAs
 * within two per SM), CG_DEC_CLUSTER_WARPS warps of 16 keys
 * each at head dims 64 and 128 (else, or where two stages of those do not fit, four), a ring deep enough
 * to hold the whole split before the programmatic-launch wait where it fits. Eight warps take
 * a split of 128 keys (1024 keys over a cluster of 8) as one tile: the fewest steps in series
 * after the data lands (README, "Decode attention table"). With a known number of query rows
 * per KV head (G*S) up to 16, the partials are pushed into the leader's shared memory (push =
 * that number; KILN_CG_DEC_PUSH 0 turns it off, for measurements), where the slots fit. */
#ifndef KILN_CG_DEC_PUSH
#define KILN_CG_DEC_PUSH 1
#endif
/* With the push, KILN_CG_DEC_COLS 1: one softmax per key tile for the whole CTA and P V split by
 * columns among the warps (KILN_DEC_COLS) where the head dim is a multiple of 8 * warps. On: in
 * the layers' profiles on an H100 (bench/device/variants.sh, README "Decode attention table")
 * the attention at B=1 over 1024 keys takes 3.4 us in the 1B layer (5.5-6.0 with the push alone)
 * and 4.7 in the 8B (5.0-5.2); 0 builds a kiln without it. */
#ifndef KILN_CG_DEC_COLS
#define KILN_CG_DEC_COLS 1
#endif
/* KILN_CG_DEC_PUSH_FIRST 1: where the push's slots do not fit beside a ring of three or four
 * stages, the ring gives up stages (down to two) before the push is dropped (the Gemma-2B
 * layer's head dim 256 over one KV head); 0 drops the push. */
#ifndef KILN_CG_DEC_PUSH_FIRST
#define KILN_CG_DEC_PUSH_FIRST 0
#endif
/* KILN_CG_DEC_CLUSTER_MAX / _WARPS: other cluster sizes and warps for measurements (a kiln
 * built with them: bench/attn/push_variants.sh) */
#ifndef KILN_CG_DEC_CLUSTER_MAX
#define KILN_CG_DEC_CLUSTER_MAX 8
#endif
#ifndef KILN_CG_DEC_CLUSTER_WARPS
#define KILN_CG_DEC_CLUSTER_WARPS 8
#endif
/* KILN_CG_DEC_CLUSTER_TINY N > 0: where the rule's clusters would be at most N sequence heads
 * (B*KV <= N: Gemma-2B's one KV head at B = 1 and 2, 8 or 16 CTAs in all) and the cache holds a
 * key tile of four warps (64 keys) for each of 16 CTAs, clusters of 16 (non-portable) rather than
 * 8, so that twice the SMs read the cache; only on the full GH100
 * (132 SMs or more: the H100 SXM and H200 on which it was measured; a GPC of a smaller part may
 * not hold 16 CTAs). Measured on an H100 (README, "Decode at B = 1 and the batched rows: the
 * rules measured"): the Gemma-2B layer at B = 1 over 1024 keys 103.9-114.2 -> 89.0-89.4 us over
 * four rounds in two calls. 0 builds a kiln without it. */
#ifndef KILN_CG_DEC_CLUSTER_TINY
#define KILN_CG_DEC_CLUSTER_TINY 2
#endif
enum { CG_DEC_CLUSTER_T = 8192, CG_DEC_CLUSTER_MAX = KILN_CG_DEC_CLUSTER_MAX, CG_DEC_CLUSTER_WARPS = KILN_CG_DEC_CLUSTER_WARPS };
/* From B*KV = CG_DEC_WIDE_BKV sequence heads on (B=8 and 32 of the 8B layer, measured: README,
 * "Decode attention table"), no cluster: four warps, a ring of 3-4 stages in dynamic shared
 * memory, splits so that the grid is one wave of two CTAs per SM (one split at B=32 x 8 heads). */
enum { CG_DEC_WIDE_BKV = 64 };

static int64_t chunks_padded(int64_t hd) { return (hd / 8 + 7) & ~7; }

int64_t cg_attention_decode_smem(const cg_att_decode_cfg *c, int64_t hd)
{
    int64_t chp = chunks_padded(hd), stage = 2 * 16 * (int64_t)c->warps * chp * 16;
    int64_t ring = c->stages * stage + (c->qsmem ? 16 * chp * 16 : 0);
    if (c->cluster <= 1) return ring > 47 * 1024 ? ring : 0; /* else static shared memory */
    if (c->push > 0) /* the slots, the mbarrier; with cols the P tile and the warps' row maxima and sums */
        return ring + (int64_t)c->cluster * c->push * (hd + 2) * 4 + 16 +
               (c->cols ? 16 * ((2 * (int64_t)c->warps + 7) & ~7) * 16 + 2 * 16 * (int64_t)c->warps * 4 : 0);
    return ring + 16 * (hd + 2) * 4;
}

cg_att_decode_cfg cg_attention_decode_config(int64_t b, int64_t kv, int64_t hd, int64_t t, int64_t rows,
                                             int sm_count, int64_t smem_limit, bool clusters)
{
    bool known = b > 0 && kv > 0;
    cg_att_decode_cfg c = {.splits = known ? cg_attention_decode_splits(b, kv, sm_count) : 8, .cluster = 1,
                           .warps = cg_attention_decode_warps(hd),
                           .threads = cg_attention_decode_threads(hd, known ? b * kv : 0),
                           .stages = hd > 64 ? 2 : 4, .qsmem = hd > 128};
    c.minkeys = hd > 128 ? 32 : (int)(8192 / (hd * 2));
    smem_limit -= 2048; /* the template's static shared memory (the RoPE table, a flag) */
    if (known && b * kv >= CG_DEC_WIDE_BKV && hd <= 128) {
        /* a large batch: four warps and a deep ring (96 KB at head dim 128, 64 KB up to 64:
         * two CTAs per SM) and the most splits that keep the grid in one such wave */
        cg_att_decode_cfg k = {.splits = 1, .cluster = 1, .warps = 4, .threads = 128, .stages = hd > 64 ? 3 : 4,
                               .minkeys = c.minkeys, .qsmem = 0};
        while (k.splits < 32 && b * kv * k.splits * 2 <= 2 * sm_count) k.splits *= 2;
        if (cg_attention_decode_smem(&k, hd) <= smem_limit) return k;
    }
    if (!clusters || !known || t <= 0 || t > CG_DEC_CLUSTER_T || b * kv > 16) return c;
    const int cmax =
        KILN_CG_DEC_CLUSTER_TINY && b * kv <= KILN_CG_DEC_CLUSTER_TINY && sm_count >= 132 && t >= 16 * 64 &&
                CG_DEC_CLUSTER_MAX < 16
            ? 16
            : CG_DEC_CLUSTER_MAX;
    /* eight warps at the head dims measured (64, 128; at 96 the kernel spills), four elsewhere and in
     * the tiny grids' clusters of 16 (as measured: a tile of 64 keys per CTA over 1024) */
    for (int w = (hd == 64 || hd == 128) && cmax <= 8 ? CG_DEC_CLUSTER_WARPS : 4; w >= 4; w /= 2) {
        cg_att_decode_cfg k = {.cluster = cmax, .warps = w, .threads = 32 * w, .qsmem = hd > 128};
        while (k.cluster > 1 && b * kv * k.cluster > 2 * sm_count) k.cluster /= 2;
        k.splits = k.cluster;
        k.minkeys = 16 * k.warps;
        int64_t per = (t + k.cluster - 1) / k.cluster, tiles = (per + k.minkeys - 1) / k.minkeys;
        k.stages = 2;
        while (k.stages < 4 && k.stages < tiles + 1) {
            k.stages++;
            if (cg_attention_decode_smem(&k, hd) > smem_limit) {
                k.stages--;
                break;
            }
        }
        /* the ring first, then the push's slots where they fit beside it */
        k.push = KILN_CG_DEC_PUSH && rows > 0 && rows <= 16 ? (int)rows : 0;
        k.cols = k.push && KILN_CG_DEC_COLS && hd % (8 * k.warps) == 0;
        while (KILN_CG_DEC_PUSH_FIRST && k.push && k.stages > 2 && cg_attention_decode_smem(&k, hd) > smem_limit)
            k.stages--;
        if (k.push && cg_attention_decode_smem(&k, hd) > smem_limit) k.push = k.cols = 0;
        if (k.cluster >= 2 && cg_attention_decode_smem(&k, hd) <= smem_limit) return k;
    }
    return c;
}

/* The Hopper prefill template's configuration (attention_wgmma.cuh's knobs), chosen by the
 * sweep of bench/attn/pfa2_device.sh (H200, every variant first checked against the f64
 * reference; README, "Attention prefill: the knobs timed"): 2 stages, one Q buffer per
 * consumer, K(0), Q, then K(t+1) before V(t) (order 1), the row max moved only past a
 * threshold of 2^8 (th 8: the O rescale mostly skipped). Head dims up to 128: key tiles of
 * 128 rows, the static longest-first schedule. Above 128: key tiles of 64 rows (80 measured
 * faster still but spills a few registers in the consumers), the dynamic scheduler over L2
 * sections of 5/8 of the L2 (FlashAttention-3's 32 of 50 MB) and the cache hints (Q
 * evict-first, K and V evict-last), which measured best together. */
typedef struct att_wgmma_cfg {
    int bk, stages, qbuf, order, qpf, th, sched, hint;
    int64_t l2sec;
} att_wgmma_cfg;
static att_wgmma_cfg att_wgmma_config(const cg_target *tg, int64_t hd)
{
    att_wgmma_cfg c = {128, 2, 1, 1, 0, 8, 0, 0, 0};
    if (hd > 128) {
        c.bk = 64;
        c.sched = c.hint = 1;
    }
    if (c.sched) c.l2sec = tg->l2_bytes * 5 / 8;
    return c;
}
/* KILN_ATT_SMEM of attention_wgmma.cuh: the consumers' Q buffers, the K and V rings (rows
 * padded to 64-column blocks), 1 KiB to align, the mbarriers, the scheduler's two slots */
static int64_t att_wgmma_smem(int64_t hd, const att_wgmma_cfg *c)
{
    int64_t na = (hd + 63) / 64;
    return 2 * c->qbuf * na * 64 * 128 + 2 * c->stages * na * c->bk * 128 + 1024 + (4 * c->qbuf + 4 * c->stages + 4) * 8 +
           16;
}

/* Whether a prefill attention fits attention_wgmma.cuh (and takes it unless this is the
 * build of such a kernel's fallback, gen->no_wgmma): the target is sm_90a, the head dim is a multiple of 16 up to 256, q arrives rotated
 * and k/v are in the cache (no RoPE on load, no fused cache write: those take
 * attention_prefill.cuh), and the tiles fit the target's shared memory (the fallback of
 * such a kernel asks the same and declares the same fields). q's strides are
 * multiples of 8 elements (rows_operand); base pointers are checked at run time
 * (cg_kernel.fallback: attention_prefill.cuh, head dims 64 and 128). */
static bool att_wgmma_fits(const cg_gen *gen, int64_t hd, bool rope, bool append)
{
    if (strcmp(gen->target->arch, "sm_90a") || rope || append) return false;
    if (hd % 16 || hd < 16 || hd > 256) return false;
    att_wgmma_cfg c = att_wgmma_config(gen->target, hd);
    return att_wgmma_smem(hd, &c) <= gen->target->smem_per_block;
}

static bool same_pos(const ir_node *a, const ir_node *b) { return a == b; }

static const ir_node *opt_input(const ir_node *n, int i) { return n->ninputs > i ? n->inputs[i] : NULL; }

/* The [B, S, N, HD] strides of a q or new-rows operand. */
static bool rows_ok(cg_gen *gen, const ir_node *n, const char *field, cg_strided *s);

static bool rows_operand(cg_gen *gen, const ir_node *n, const char *field, const char *pre, cg_strided *s)
{
    if (!rows_ok(gen, n, field, s)) return false;
    cg_ptr_strided(gen, field, s, false);
    const char *names[3] = {"sb", "ss", "sh"};
    for (int i = 0; i < 3; i++) cg_scalar(gen, cg_printf(gen, "%s_%s", pre, names[i]), s->stride[i]);
    return true;
}

/* What the attention kernel of gen's group (anchor gen->anchor) takes: q (the rotated q's input
 * when RoPE is fused), the caches, the positions, the fused ropes and cache writes and their new
 * rows. */
typedef struct att_parts {
    const ir_node *q, *kc, *vc, *pos, *rope_q, *rope_k, *knew, *vnew;
    bool append;
    int64_t hd;
} att_parts;

/* q or new rows [B, S, N, HD] with the head dimension contiguous, strides and offset in whole
 * 16-byte chunks (multiples of 8 elements): the templates' row loads. */
static bool rows_ok(cg_gen *gen, const ir_node *n, const char *field, cg_strided *s)
{
    if (!cg_strided_of(gen, n, s)) return cg_fail(gen, "attention: %s is not a strided view of stored data", field);
    ir_dim one = ir_dim_const(1);
    if (s->rank != 4 || !ir_dim_eq(&s->stride[3], &one))
        return cg_fail(gen, "attention: the head dimension of %s is not contiguous", field);
    for (int i = 0; i < 3; i++)
        if (!mult8(&s->stride[i])) return cg_fail(gen, "attention: a stride of %s is not a multiple of 8", field);
    if (!mult8(&s->off)) return cg_fail(gen, "attention: %s does not start 16-byte aligned", field);
    return true;
}

/* The parts of the attention kernel and every check on them that does not depend on the
 * template: no side effect but cg_fail's message, so that cg_rope_paired can ask it of another
 * kernel's group (a copy of gen with that group's k and anchor). */
static bool att_parts_of(cg_gen *gen, att_parts *p)
{
    const ir_graph *g = gen->g;
    const ir_node *A = gen->anchor;
    memset(p, 0, sizeof *p);
    if (A->op != IR_OP_ATTENTION) return cg_fail(gen, "not attention");
    const ir_node *q = A->inputs[0], *kc = A->inputs[1], *vc = A->inputs[2], *pos = opt_input(A, 3);
    const ir_node *rope_q = NULL, *rope_k = NULL, *knew = NULL, *vnew = NULL;
    if (q->op == IR_OP_ROPE && cg_is_member(gen, q)) {
        rope_q = q;
        q = q->inputs[0];
        if (!same_pos(opt_input(rope_q, 1), pos)) return cg_fail(gen, "attention: RoPE on q uses other positions");
    }
    bool append = kc->op == IR_OP_CACHE_WRITE && cg_is_member(gen, kc);
    if (append != (vc->op == IR_OP_CACHE_WRITE && cg_is_member(gen, vc)))
        return cg_fail(gen, "attention: the cache write of only one of k and v is fused");
    if (append) {
        for (int i = 0; i < 2; i++) {
            const ir_node *cw = i ? vc : kc;
            if (!pos || !same_pos(opt_input(cw, 2), pos))
                return cg_fail(gen, "attention: a fused cache write must use the attention's positions");
            if (cg_storage_node(gen, cw) != cg_storage_node(gen, cw->inputs[0]))
                return cg_fail(gen, "attention: a fused cache write must update its cache in place");
        }
        knew = kc->inputs[1];
        vnew = vc->inputs[1];
        if (knew->op == IR_OP_ROPE && cg_is_member(gen, knew)) {
            rope_k = knew;
            knew = knew->inputs[0];
            if (!same_pos(opt_input(rope_k, 1), pos)) return cg_fail(gen, "attention: RoPE on k uses other positions");
        }
    }
    if ((rope_q != NULL) != (rope_k != NULL) && append)
        return cg_fail(gen, "attention: RoPE is fused on only one of q and the new k rows");
    if (rope_q && rope_k &&
        (rope_q->attrs.theta != rope_k->attrs.theta || !ir_rope_attrs_eq(&rope_q->attrs.rope, &rope_k->attrs.rope)))
        return cg_fail(gen, "attention: q and k are rotated with different theta or scaling");
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group != gen->k || gen->bind[i] || pass_is_view(n)) continue;
        if (n != A && n != rope_q && n != rope_k && !(append && (n == kc || n == vc)))
            return cg_fail(gen, "attention: %s (line %d) cannot be fused into the attention kernel",
                           ir_op_name(n->op), n->loc.line);
        if ((n == rope_q || n == rope_k) && cg_used_outside(gen, n))
            return cg_fail(gen, "attention: the rotated %s is also used outside the kernel", n == rope_q ? "q" : "k");
    }
    const ir_type *qt = &A->inputs[0]->type;
    int64_t hd;
    if (qt->dtype != IR_BF16 && qt->dtype != IR_F16) return cg_fail(gen, "attention: the templates take bf16 or f16");
    if (!ir_dim_eq(&vc->type.dims[3], &qt->dims[3])) return cg_fail(gen, "attention: v's head dimension differs from q's");
    if (!ir_dim_is_const(&qt->dims[3], &hd)) return cg_fail(gen, "attention: the head dimension is not a constant");
    if (hd % 16 || hd < 16 || hd > 256)
        return cg_fail(gen, "attention: the templates take head dimensions that are multiples of 16 up to 256");
    cg_strided st;
    if (!rows_ok(gen, q, "q", &st)) return false;
    if (append && (!rows_ok(gen, knew, "k_new", &st) || !rows_ok(gen, vnew, "v_new", &st))) return false;
    ir_dim zero = ir_dim_const(0);
    for (int i = 0; i < 2; i++) {
        const ir_node *c = i ? vc : kc;
        const ir_node *data = append ? cg_storage_node(gen, c) : c;
        if (!cg_strided_of(gen, data, &st) || st.base != data || !ir_dim_eq(&st.off, &zero))
            return cg_fail(gen, "attention: the %s cache is not a stored contiguous tensor", i ? "v" : "k");
    }
    *p = (att_parts){q, kc, vc, pos, rope_q, rope_k, knew, vnew, append, hd};
    return true;
}

/* Rope r fused into a decode attention kernel at gen's dims (the kernel of r's group, asked
 * through a copy of gen with that group's k and anchor) as its q rope or its new k rows' rope,
 * with every check of that kernel's parts passing (att_parts_of): the kernel that reads the pairs
 * side by side is then sure to be the decode template, never the generic one. */
static bool rope_of_decode_attention(cg_gen *gen, const ir_node *r)
{
    const ir_graph *g = gen->g;
    if (r->op != IR_OP_ROPE || r->group < 0) return false;
    const ir_node *att = g->groups[r->group].anchor;
    if (att->op != IR_OP_ATTENTION || att->attrs.packed || !cg_attention_is_decode(att, gen->dims)) return false;
    char err[256];
    cg_gen t = *gen;
    t.k = r->group;
    t.anchor = att;
    t.err = err;
    t.errlen = sizeof err;
    t.failed = false;
    att_parts p;
    return att_parts_of(&t, &p) && (p.rope_q == r || p.rope_k == r);
}

bool cg_gen_attention(cg_gen *gen, cg_plan *plan, cg_str *hooks, const int64_t *dims)
{
    const ir_node *A = gen->anchor;
    att_parts ap;
    if (!att_parts_of(gen, &ap)) return false;
    const ir_node *q = ap.q, *kc = ap.kc, *vc = ap.vc, *pos = ap.pos, *rope_q = ap.rope_q, *rope_k = ap.rope_k,
                  *knew = ap.knew, *vnew = ap.vnew;
    const bool append = ap.append;
    const int64_t hd = ap.hd;
    /* q or the new k rows with their rotation pairs side by side (cg_rope_paired) */
    bool paired_q = false, paired_k = false;
    for (int i = 0; i < 2; i++) {
        const ir_node *L = rope_linear(gen, i ? rope_k : rope_q);
        qkv_seg segs[QKV_MAX_SEG];
        int nseg;
        if (L && cg_rope_paired(gen, L, segs, &nseg)) *(i ? &paired_k : &paired_q) = true;
    }
    const ir_type *qt = &A->inputs[0]->type, *ct = &kc->type;

    /* packed sequences (KILN_ATT_VARLEN): q is [1, S, H, HD], the sequences' tokens one after
     * another; the caches' rows and pos are per sequence; never the decode template
     * (cg_attention_is_decode) */
    const bool packed = A->attrs.packed;
    bool decode = cg_attention_is_decode(A, dims);
    /* the fallback of a wgmma kernel (no_wgmma) declares the same fields: wg_fit */
    const bool wg_fit = !decode && att_wgmma_fits(gen, hd, rope_q != NULL, append);
    bool wgmma = wg_fit && !gen->no_wgmma;
    if (!decode && !wgmma && hd != 64 && hd != 128)
        return cg_fail(gen, "attention: the templates take head dimension 64 or 128 at prefill (any multiple of 16 up "
                            "to 256 at decode, and on sm_90a prefill without RoPE on load or a fused cache write)");
    bool variant = A->attrs.window > 0 || A->attrs.softcap > 0;
    if (variant && !decode && !wgmma) /* the generic kernel applies them */
        return cg_fail(gen, "attention: the prefill template with %s takes no %s (attention_wgmma.cuh does, on sm_90a "
                            "without RoPE on load or a fused cache write)",
                       rope_q || append ? "RoPE on load or a fused cache write" : "mma.sync tiles",
                       A->attrs.window > 0 ? "sliding window (window=)" : "soft-capping (softcap=)");
    plan->family = decode ? CG_FAMILY_ATTENTION_DECODE : wgmma ? CG_FAMILY_ATTENTION_WGMMA : CG_FAMILY_ATTENTION_PREFILL;

    cg_strided qs, ks, vs;
    if (!rows_operand(gen, q, "q", "q", &qs)) return false;
    ir_dim zero = ir_dim_const(0);
    for (int i = 0; i < 2; i++) {
        const ir_node *c = i ? vc : kc;
        cg_strided *s = i ? &vs : &ks;
        const ir_node *data = append ? cg_storage_node(gen, c) : c;
        if (!cg_strided_of(gen, data, s) || s->base != data || !ir_dim_eq(&s->off, &zero))
            return cg_fail(gen, "attention: the %s cache is not a stored contiguous tensor", i ? "v" : "k");
        cg_ptr_named(gen, i ? "v" : "k", append ? c : data, append);
    }
    cg_ptr_named(gen, "o", A, true);
    (void)cg_slot_row(gen, "b"); /* the templates read the caches' rows at kiln_slot(p.slot, b) */
    if (pos) cg_ptr_named(gen, "pos", pos, false);
    else cg_null_ptr(gen, "pos", "const int *");
    if (append) {
        if (!rows_operand(gen, knew, "k_new", "kn", &ks)) return false;
        if (!rows_operand(gen, vnew, "v_new", "vn", &vs)) return false;
    } else {
        const char *ct_s = cg_printf(gen, "const %s *", qt->dtype == IR_F32 ? "float" : qt->dtype == IR_F16 ? "__half" : "__nv_bfloat16");
        cg_null_ptr(gen, "k_new", ct_s);
        cg_null_ptr(gen, "v_new", ct_s);
        const char *f[6] = {"kn_sb", "kn_ss", "kn_sh", "vn_sb", "vn_ss", "vn_sh"};
        for (int i = 0; i < 6; i++) cg_scalar(gen, f[i], zero);
    }
    cg_scalar(gen, "B", packed ? ct->dims[0] : qt->dims[0]); /* packed: the sequences */
    cg_scalar(gen, "S", qt->dims[1]);                         /* packed: all their tokens */
    cg_scalar(gen, "T", ct->dims[2]);
    if (packed) {
        (void)cg_seq_table(gen);
        define(plan, "KILN_ATT_VARLEN", "1");
    }
    cg_scalar(gen, "H", qt->dims[2]);
    cg_scalar(gen, "KV", ct->dims[1]);
    cg_att_decode_cfg dc = {0};
    if (decode) {
        int64_t b_val, kv_val, t_val, s_val, h_val, rows = 0;
        if (!ir_dim_value(&qt->dims[0], dims, &b_val)) b_val = 0;
        if (!ir_dim_value(&ct->dims[1], dims, &kv_val)) kv_val = 0;
        if (!ir_dim_value(&ct->dims[2], dims, &t_val)) t_val = 0;
        /* the query rows per KV head and sequence (G*S): the push combine's slots */
        if (kv_val > 0 && ir_dim_value(&qt->dims[1], dims, &s_val) && ir_dim_value(&qt->dims[2], dims, &h_val) &&
            h_val % kv_val == 0)
            rows = h_val / kv_val * s_val;
        dc = cg_attention_decode_config(b_val, kv_val, hd, t_val, rows, gen->target->sm_count,
                                        gen->target->smem_per_block, !strncmp(gen->target->arch, "sm_90", 5));
    }
    int splits = dc.splits;
    if (decode && dc.cluster == 1) {
        bool *ovf = &gen->dim_overflow;
        ir_dim bsh = ir_dim_times(ir_dim_times(qt->dims[0], qt->dims[1], ovf), qt->dims[2], ovf);
        cg_workspace(gen, "ws", "float *", ir_dim_times(bsh, ir_dim_const(4 * splits * (hd + 2)), ovf), false);
        cg_workspace(gen, "sem", "int *", ir_dim_times(bsh, ir_dim_const(4), ovf), true);
    }
    if (wg_fit && att_wgmma_config(gen->target, hd).sched) /* the dynamic scheduler's tile counter, left zero */
        cg_workspace(gen, "sched", "int *", ir_dim_const(4), true);
    cg_str_printf(hooks, "/* attention: no hooks; the template reads the constants and KilnArgs above */\n\n");
    if (rope_q && rope_q->attrs.rope.scaling != IR_ROPE_NONE) { /* the host's frequencies (cg_rope.c) */
        int len = cg_attention_rope_source(NULL, 0, rope_q->attrs.theta, &rope_q->attrs.rope, hd);
        char *text = len >= 0 ? arena_alloc(gen->a, (size_t)len + 1) : NULL;
        if (!text || cg_attention_rope_source(text, (size_t)len + 1, rope_q->attrs.theta, &rope_q->attrs.rope, hd) < 0)
            return cg_fail(gen, "out of memory");
        cg_str_printf(hooks, "%s\n", text);
    }

    define(plan, "KILN_HD", "%lld", (long long)hd);
    define(plan, "KILN_SCALE", "%s", cg_float_lit(gen, A->attrs.scale));
    define(plan, "KILN_CAUSAL", "%d", A->attrs.causal ? 1 : 0);
    define(plan, "KILN_ROPE", "%d", rope_q ? 1 : 0);
    define(plan, "KILN_THETA", "%s", cg_float_lit(gen, rope_q ? rope_q->attrs.theta : 10000.0));
    define(plan, "KILN_APPEND", "%d", append ? 1 : 0);
    if (paired_q) define(plan, "KILN_ROPE_PAIRED_Q", "1");
    if (paired_k) define(plan, "KILN_ROPE_PAIRED_K", "1");
    if (A->attrs.window > 0) define(plan, "KILN_ATT_WINDOW", "%lld", (long long)A->attrs.window);
    if (A->attrs.softcap > 0) define(plan, "KILN_ATT_SOFTCAP", "%s", cg_float_lit(gen, A->attrs.softcap));
    cg_launch *L = &gen->kern->launch;
    if (decode) {
        /* one CTA per (split, KV head, batch) serves the whole GQA group; with a cluster
         * the splits of a (KV head, batch) combine in distributed shared memory */
        define(plan, "KILN_SPLITS", "%d", splits);
        define(plan, "KILN_DEC_CLUSTER", "%d", dc.cluster);
        define(plan, "KILN_DEC_WARPS", "%d", dc.warps);
        define(plan, "KILN_ATT_THREADS", "%d", dc.threads);
        define(plan, "KILN_DEC_STAGES", "%d", dc.stages);
        define(plan, "KILN_DEC_MINKEYS", "%d", dc.minkeys);
        define(plan, "KILN_DEC_QSMEM", "%d", dc.qsmem);
        if (dc.push) define(plan, "KILN_DEC_PUSH", "%d", dc.push);
        if (dc.cols) define(plan, "KILN_DEC_COLS", "1");
        define(plan, "KILN_DEC_DYNSMEM", "%d", cg_attention_decode_smem(&dc, hd) > 0);
        if (dc.cluster > 1)
            gen->kern->config = cg_printf(gen, "cluster %d x %d warps s%d%s", dc.cluster, dc.warps, dc.stages,
                                          dc.cols ? " push cols" : dc.push ? " push" : "");
        L->block = dc.threads;
        L->smem = cg_attention_decode_smem(&dc, hd);
        L->cluster = dc.cluster > 1 ? dc.cluster : 0;
        L->grid[0] = grid_dim(ir_dim_const(splits), 1, 0);
        L->grid[1] = grid_dim(ct->dims[1], 1, 0);
    } else if (wgmma) {
        att_wgmma_cfg wc = att_wgmma_config(gen->target, hd);
        int bk = wc.bk;
        define(plan, "KILN_WGMMA_NO_KERNEL", "1");
        define(plan, "KILN_WGMMA_F16", "%d", qt->dtype == IR_F16 ? 1 : 0);
        define(plan, "KILN_ATT_BK", "%d", bk);
        define(plan, "KILN_ATT_STAGES", "%d", wc.stages);
        define(plan, "KILN_ATT_QBUF", "%d", wc.qbuf);
        define(plan, "KILN_ATT_ORDER", "%d", wc.order);
        define(plan, "KILN_ATT_QPF", "%d", wc.qpf);
        define(plan, "KILN_ATT_TH", "%d", wc.th);
        define(plan, "KILN_ATT_SCHED", "%d", wc.sched);
        define(plan, "KILN_ATT_L2SEC", "%lldll", (long long)wc.l2sec);
        define(plan, "KILN_ATT_HINT", "%d", wc.hint);
        gen->kern->config = cg_printf(gen, "wgmma 2x64x%d s%d", bk, wc.stages);
        /* the maps (attention_wgmma.cuh): q {H*HD, S, B} (ld q_ss, batch stride q_sb), k and v
         * {HD, T, rows*KV} (ld HD, batch stride T*HD; rows: the caches' allocated rows, which
         * a slot table may address); bases: fields "q", "k", "v" */
        int fq = -1, fk = -1, fv = -1;
        for (int i = 0; i < gen->nargs; i++) {
            if (!strcmp(gen->args[i].field, "q")) fq = i;
            if (!strcmp(gen->args[i].field, "k")) fk = i;
            if (!strcmp(gen->args[i].field, "v")) fv = i;
        }
        if (fq < 0 || fk < 0 || fv < 0) return cg_fail(gen, "attention: the operand fields are missing");
        bool *ovf = &gen->dim_overflow;
        ir_dim hdd = ir_dim_const(hd), bkv = ir_dim_times(ct->dims[0], ct->dims[1], ovf);
        ir_dim th = ir_dim_times(ct->dims[2], hdd, ovf);
        gen->kern->tmaps[0] = (cg_tmap){CG_TMAP_Q, fq, qt->dtype, ir_dim_times(qt->dims[2], hdd, ovf), qt->dims[1],
                                        qs.stride[1], qt->dims[0], qs.stride[0], 64, false};
        gen->kern->tmaps[1] = (cg_tmap){CG_TMAP_K, fk, qt->dtype, hdd, ct->dims[2], hdd, bkv, th, bk, true};
        gen->kern->tmaps[2] = (cg_tmap){CG_TMAP_V, fv, qt->dtype, hdd, ct->dims[2], hdd, bkv, th, bk, true};
        gen->kern->ntmaps = 3;
        /* persistent: at most one CTA per SM, about one per tile (pairs of 64-row sub-tiles) */
        L->block = 384;
        L->smem = att_wgmma_smem(hd, &wc);
        L->grid[0] = (cg_grid_dim){qt->dims[1], 64, gen->target->sm_count,
                                   ir_dim_times(qt->dims[0], qt->dims[2], ovf), 2};
        L->grid[1] = grid_dim(ir_dim_const(1), 1, 0);
    } else {
        define(plan, "KILN_BQ", "64");
        define(plan, "KILN_BK", "64");
        define(plan, "KILN_ATT_THREADS", "128");
        L->block = 128;
        L->grid[0] = grid_dim(qt->dims[1], 64, 0);
        L->grid[1] = grid_dim(qt->dims[2], 1, 0);
    }
    /* the persistent wgmma kernel walks every batch row itself; packed: a CTA per sequence
     * and query tile of the longest (tiles past a sequence's end return at once) */
    L->grid[2] = wgmma ? grid_dim(ir_dim_const(1), 1, 0) : grid_dim(packed ? ct->dims[0] : qt->dims[0], 1, 0);
    return !gen->failed;
}
