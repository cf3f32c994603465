/* passes/fuse_qkv_epilogue.c — RoPE and the KV-cache write in the QKV matmul's epilogue.
 *
 * The Q/K/V projection's accumulators sit in registers before they are
 * stored. Rotating Q and K there and storing K and V straight into the cache
 * rows at their positions saves the rope kernels (or the rotation inside
 * attention), the store and re-read of the new K/V rows, and lets attention
 * read q and an already-rotated cache: the plain form the fast attention
 * templates take, at prefill and at decode alike.
 *
 * A rotation pairs dim d of a head with d + R/2 (R the rotary dims: the head
 * dim, or fewer for partial rotary). In the accumulators those two columns
 * sit far apart; the weight rows (and the bias) are permuted at bind time so
 * that each pair is two adjacent output columns (codegen's
 * CG_XFORM_ROPE_PAIRS), which every matmul template hands to one epilogue
 * call. The permutation is codegen's business: the IR is unchanged, the
 * decisions only group nodes.
 *
 * Algorithm: for every linear that anchors a matmul group, follow its
 * result through views to the ops that read it. The result must be rank 3
 * [B, S, N] and read only through "segments": rank-4 views [B, S, n, hd]
 * whose columns are an affine run of N (slice then reshape, as merged Q/K/V
 * linears are read; reshape then slice, as a fused query_key_value weight is
 * split per head; or one reshape). Every segment must be read only by
 *   - a ROPE over it (hd and the rotary dims even), which may itself be read
 *     by a CACHE_WRITE of its rows and by anything outside the kernel, and
 *   - a CACHE_WRITE of its rows (rule epilogue-cache-write) that updates a
 *     state in place: the cache write is the state's new value, not a model
 *     output, and the old cache is read by nothing else.
 *   - an RMSNORM over it (rule epilogue-head-norm: Qwen3's per-head q/k
 *     norm before the rope), its gain a bind-time [hd] vector or none,
 *     read only by a rope over it and by cache writes of it (as above).
 *     The norm needs the sum of squares of each head's row: codegen gets it
 *     where the tile holds whole heads (the Hopper matmul's QKV epilogue:
 *     a row's columns sit in the four lanes of a quad) and otherwise
 *     through a counter per (row, head) in a workspace, the epilogue call
 *     that completes a head normalizing and rotating it (codegen/cg_family.c).
 * In the graph the driver plans the decode variants with
 * (pass_options.decode_variant) a per-head norm does not join unless
 * --enable names the rule: it stays a row kernel and its projection's rope
 * and cache writes go to attention (the driver then keeps that graph only
 * when it differs from the prefill one). In the batched decode variants' graph
 * (pass_options.decode_batched: at least CG_DECODE_BATCHED_ROWS query rows)
 * ropes and cache writes do not join unless --enable names both rules, where
 * decode attention can take them on load (every rope full rotary with the
 * attention's positions, one theta and scaling; the cache writes at those
 * positions): it does them there.
 * Every norm, rope and cache write joins (rules epilogue-head-norm,
 * epilogue-rope, epilogue-cache-write), or none does: the linear's result
 * is then not stored at all. Anything else reading the result — a per-head
 * LayerNorm, a norm read by something else, an op that is not a view —
 * keeps them all out, each refusal recorded with its reason, and
 * fuse-attention places them as before. A linear whose result reaches no
 * rope and no cache write is left alone. */
#include <stdlib.h>

#include "passes/pass.h"

#define NZ(s) ((s) ? (s) : "?")

enum { MAX_SEG = 16, MAX_CAND = 32 };

typedef struct qkv {
    ir_graph *g;
    pass_ctx *ctx;
    const pass_users *u;
    const bool *bt;
    arena a;
    /* one linear's candidates */
    ir_node *seg[MAX_SEG];
    int nseg;
    ir_node *cand[MAX_CAND]; /* per-head norms, ropes and cache writes, as found */
    int ncand;
    const char *why; /* the first reason they cannot join */
} qkv;

static int64_t konst(const ir_dim *d)
{
    int64_t v;
    return ir_dim_is_const(d, &v) ? v : -1;
}

static void add_cand(qkv *q, ir_node *n)
{
    for (int i = 0; i < q->ncand; i++)
        if (q->cand[i] == n) return;
    if (q->ncand < MAX_CAND) q->cand[q->ncand++] = n;
    else if (!q->why) q->why = "the QKV result feeds more ropes and cache writes than one epilogue takes";
}

static void block(qkv *q, const char *why)
{
    if (!q->why) q->why = why;
}

static bool users_are_views(const qkv *q, const ir_node *n)
{
    for (int i = 0; i < q->u->count[n->id]; i++)
        if (!pass_is_view(q->g->nodes[q->u->users[n->id][i]])) return false;
    return true;
}

/* Is v ([B, S, n, hd]) an affine run of the columns of A ([B, S, N])? */
static bool segment_shape(const ir_node *A, const ir_node *v)
{
    const ir_type *t = &v->type;
    if (t->rank != 4 || !ir_dim_eq(&t->dims[0], &A->type.dims[0]) || !ir_dim_eq(&t->dims[1], &A->type.dims[1]))
        return false;
    int64_t nh = konst(&t->dims[2]), hd = konst(&t->dims[3]);
    return nh > 0 && hd > 0 && hd % 2 == 0;
}

/* A cache write that can update its state in place from the epilogue; NULL, or why not. */
static const char *cache_write_blocker(qkv *q, const ir_node *cw)
{
    const ir_graph *g = q->g;
    const ir_node *cache = cw->inputs[0];
    bool state_value = false, model_output = false;
    for (int i = 0; i < g->nstates; i++) state_value |= g->states[i].state == cache && g->states[i].value == cw;
    for (int i = 0; i < g->noutputs; i++) model_output |= g->outputs[i].value == cw;
    if (cw->group >= 0) return arena_printf(&q->a, "%s is already in a kernel", NZ(pass_describe(&q->a, cw)));
    if (model_output) return arena_printf(&q->a, "the updated cache (line %d) is a model output", cw->loc.line);
    if (cache->op != IR_OP_STATE)
        return arena_printf(&q->a, "the cache %s is not a state, so it cannot be updated in place",
                            NZ(pass_describe(&q->a, cache)));
    if (!state_value)
        return arena_printf(&q->a, "the result of %s is not the new value of state '%s', so it cannot be written in place",
                            NZ(pass_describe(&q->a, cw)), NZ(cache->name));
    if (q->u->count[cache->id] != 1)
        return arena_printf(&q->a, "the old value of state '%s' is also read elsewhere (%s), so it cannot be updated in place",
                            NZ(cache->name), NZ(pass_describe_consumers(&q->a, g, q->u, cache)));
    return NULL;
}

static void segment_readers(qkv *q, ir_node *v, ir_node *seg);

/* A per-head RMSNorm c of segment v that the epilogue can apply; NULL, or why not. */
static const char *head_norm_blocker(qkv *q, const ir_node *v, const ir_node *c)
{
    int64_t hd = konst(&v->type.dims[3]);
    /* a norm starts a row kernel of its own (fuse-residual-norm): it may leave it when alone in it */
    for (int i = 0; c->group >= 0 && i < q->g->nnodes; i++) {
        const ir_node *m = q->g->nodes[i];
        if (m->group == c->group && (m != c || q->g->groups[c->group].anchor != c))
            return arena_printf(&q->a, "the per-head norm (line %d) is in a kernel with %s", c->loc.line,
                                NZ(pass_describe(&q->a, m == c ? q->g->groups[c->group].anchor : m)));
    }
    if (q->u->is_output[c->id])
        return arena_printf(&q->a, "the per-head norm (line %d) is a model output", c->loc.line);
    if (c->ninputs > 1) {
        const ir_node *w = c->inputs[1];
        if (!q->bt[w->id])
            return arena_printf(&q->a, "the gain of the per-head norm (line %d) is computed at run time", c->loc.line);
        if (w->type.rank != 1 || konst(&w->type.dims[0]) != hd)
            return arena_printf(&q->a, "the gain of the per-head norm (line %d) is not one value per head dim",
                                c->loc.line);
    }
    if (c->type.dtype != v->type.dtype)
        return arena_printf(&q->a, "the per-head norm (line %d) changes the dtype", c->loc.line);
    return NULL;
}

/* The readers of segment v (seg: v itself, or the per-head norm of it that
 * is read instead): ropes and cache writes. */
static void segment_readers(qkv *q, ir_node *v, ir_node *seg)
{
    const ir_graph *g = q->g;
    if (q->u->is_output[v->id]) block(q, arena_printf(&q->a, "the columns of %s are a model output", NZ(pass_describe(&q->a, v))));
    for (int i = 0; i < q->u->count[v->id]; i++) {
        ir_node *c = g->nodes[q->u->users[v->id][i]];
        if (c->op == IR_OP_CACHE_WRITE && c->inputs[1] == v && c->inputs[0] != v) {
            const char *why = cache_write_blocker(q, c);
            if (why) block(q, why);
            add_cand(q, c);
            continue;
        }
        if (c->op == IR_OP_ROPE && c->inputs[0] == v && c->group < 0) {
            int64_t hd = konst(&v->type.dims[3]), R = ir_rope_dims(&c->attrs.rope, hd);
            if (R % 2 || R > hd) block(q, arena_printf(&q->a, "the rope (line %d) rotates %lld dims, not an even count within the head",
                                                       c->loc.line, (long long)R));
            add_cand(q, c);
            for (int j = 0; j < q->u->count[c->id]; j++) {
                ir_node *w = g->nodes[q->u->users[c->id][j]];
                if (w->op != IR_OP_CACHE_WRITE || w->inputs[1] != c || w->inputs[0] == c) continue;
                const char *why = cache_write_blocker(q, w);
                if (why) block(q, why);
                add_cand(q, w);
            }
            continue;
        }
        if (c->op == IR_OP_RMSNORM && c->inputs[0] == v && v == seg) {
            const char *why = head_norm_blocker(q, v, c);
            if (why) block(q, why);
            add_cand(q, c);
            segment_readers(q, c, v);
            continue;
        }
        const char *what = c->op == IR_OP_LAYERNORM && v == seg
                               ? arena_printf(&q->a, "the per-head layernorm (line %d) before the rope: the epilogue "
                                                     "applies a per-head RMSNorm only",
                                              c->loc.line)
                           : v != seg
                               ? arena_printf(&q->a, "%s reads the per-head norm, and the epilogue stores only rotated "
                                                     "rows and cache rows",
                                              NZ(pass_describe(&q->a, c)))
                               : arena_printf(&q->a, "%s reads the projected columns, and the epilogue stores only "
                                                     "rotated rows and cache rows",
                                              NZ(pass_describe(&q->a, c)));
        block(q, what);
    }
}

static void add_segment(qkv *q, const ir_node *A, ir_node *v)
{
    if (!segment_shape(A, v)) {
        block(q, arena_printf(&q->a, "%s is not a [B, S, heads, head dim] view of the result with an even, constant head dim",
                              NZ(pass_describe(&q->a, v))));
        return;
    }
    if (q->nseg == MAX_SEG) {
        block(q, "the result is split into more pieces than one epilogue takes");
        return;
    }
    q->seg[q->nseg++] = v;
    segment_readers(q, v, v);
}

/* The segments of A: slice(A, last axis) -> reshape, reshape(A) -> slice(axis 3), reshape(A). */
static void find_segments(qkv *q, const ir_node *A)
{
    const ir_graph *g = q->g;
    const pass_users *u = q->u;
    if (u->is_output[A->id]) block(q, "the projection's result is a model output");
    for (int i = 0; i < u->count[A->id]; i++) {
        ir_node *c = g->nodes[u->users[A->id][i]];
        if (c->op == IR_OP_SLICE && c->attrs.axis == 2 && !u->is_output[c->id] && u->count[c->id] >= 1 &&
            users_are_views(q, c)) {
            int64_t st = konst(&c->attrs.start);
            if (st < 0 || st % 2) block(q, arena_printf(&q->a, "%s does not start at an even constant column",
                                                       NZ(pass_describe(&q->a, c))));
            for (int j = 0; j < u->count[c->id]; j++) {
                ir_node *r = g->nodes[u->users[c->id][j]];
                if (r->op == IR_OP_RESHAPE) add_segment(q, A, r);
                else block(q, arena_printf(&q->a, "%s reads the projected columns", NZ(pass_describe(&q->a, r))));
            }
            continue;
        }
        if (c->op == IR_OP_RESHAPE && c->type.rank == 4) {
            bool split = u->count[c->id] > 0 && !u->is_output[c->id];
            for (int j = 0; j < u->count[c->id]; j++) {
                const ir_node *s = g->nodes[u->users[c->id][j]];
                split = split && s->op == IR_OP_SLICE && s->attrs.axis == 3;
            }
            if (!split) {
                add_segment(q, A, c);
                continue;
            }
            for (int j = 0; j < u->count[c->id]; j++) {
                ir_node *s = g->nodes[u->users[c->id][j]];
                int64_t st = konst(&s->attrs.start);
                if (st < 0 || st % 2 || konst(&c->type.dims[3]) % 2)
                    block(q, arena_printf(&q->a, "%s does not start at an even constant column of an even-width head",
                                          NZ(pass_describe(&q->a, s))));
                add_segment(q, A, s);
            }
            continue;
        }
        if (pass_is_view(c))
            block(q, arena_printf(&q->a, "%s is a view of the result the epilogue cannot map to heads",
                                  NZ(pass_describe(&q->a, c))));
        else
            block(q, arena_printf(&q->a, "%s reads the result itself", NZ(pass_describe(&q->a, c))));
    }
}

/* The attention that reads x as its q, or through a cache write of x as its new k rows (NULL: none). */
static const ir_node *attention_of(const qkv *q, const ir_node *x)
{
    for (int i = 0; i < q->u->count[x->id]; i++) {
        const ir_node *c = q->g->nodes[q->u->users[x->id][i]];
        if (c->op == IR_OP_ATTENTION && c->inputs[0] == x) return c;
        if (c->op == IR_OP_CACHE_WRITE && c->inputs[1] == x)
            for (int j = 0; j < q->u->count[c->id]; j++) {
                const ir_node *a = q->g->nodes[q->u->users[c->id][j]];
                if (a->op == IR_OP_ATTENTION && a->inputs[1] == c) return a;
            }
    }
    return NULL;
}

/* Can decode attention take the projection's ropes and cache writes on load (the batched decode
 * graph's choice): every rope full rotary, read by an attention as its q or new k rows, with that
 * attention's positions, all with one theta and scaling; every cache write at those positions. */
static bool attention_takes_them(const qkv *q)
{
    const ir_node *first = NULL;
    for (int i = 0; i < q->ncand; i++) {
        const ir_node *n = q->cand[i];
        if (n->op == IR_OP_RMSNORM) continue;
        if (n->op == IR_OP_CACHE_WRITE) {
            const ir_node *a = NULL;
            for (int j = 0; j < q->u->count[n->id] && !a; j++) {
                const ir_node *c = q->g->nodes[q->u->users[n->id][j]];
                if (c->op == IR_OP_ATTENTION && (c->inputs[1] == n || c->inputs[2] == n)) a = c;
            }
            if (!a || a->ninputs < 4 || n->ninputs < 3 || n->inputs[2] != a->inputs[3]) return false;
            continue;
        }
        const ir_node *a = attention_of(q, n);
        int64_t hd = konst(&n->type.dims[3]);
        if (!a || a->ninputs < 4 || n->ninputs < 2 || n->inputs[1] != a->inputs[3] || hd <= 0 ||
            ir_rope_dims(&n->attrs.rope, hd) != hd)
            return false;
        if (first && (first->attrs.theta != n->attrs.theta || !ir_rope_attrs_eq(&first->attrs.rope, &n->attrs.rope)))
            return false;
        first = n;
    }
    return true;
}

static pass_rule rule_of(const ir_node *n)
{
    return n->op == IR_OP_RMSNORM ? PASS_RULE_EPILOGUE_HEAD_NORM
           : n->op == IR_OP_ROPE  ? PASS_RULE_EPILOGUE_ROPE
                                  : PASS_RULE_EPILOGUE_CACHE_WRITE;
}

static void decide(qkv *q, ir_node *A)
{
    if (q->ncand == 0) return;
    /* both rules on: the epilogue takes all or none */
    for (int i = 0; i < q->ncand && !q->why; i++)
        if (!pass_rule_enabled(q->ctx, rule_of(q->cand[i])))
            q->why = arena_printf(&q->a, "rule %s is %s, and the epilogue takes every per-head norm, "
                                         "rope and cache write of the projection or none",
                                  pass_rule_name(rule_of(q->cand[i])),
                                  pass_rule_off_by_default(rule_of(q->cand[i])) ? "off unless --enable names it"
                                                                                : "disabled (--disable)");
    /* the decode variants' graph: a head norm stays a row kernel there, unless --enable names the rule */
    for (int i = 0; i < q->ncand && !q->why; i++)
        if (q->cand[i]->op == IR_OP_RMSNORM && q->ctx->opts && q->ctx->opts->decode_variant &&
            !pass_rule_named_enabled(q->ctx, PASS_RULE_EPILOGUE_HEAD_NORM))
            q->why = "this graph serves the decode variants (the decode rule: at most 16 new rows per sequence), where "
                     "the QKV GEMV or skinny tile holds a head's columns across CTAs and normalizing them there (a "
                     "counter per row and head) costs more than the two norm kernels (README, \"Per-head q/k norm\"); "
                     "the prefill variants' graph fuses it, and the epilogue takes every per-head norm, rope and cache "
                     "write of the projection or none";
    /* the batched decode variants' graph: RoPE and the cache write go to decode attention, unless
     * --enable names both rules */
    if (!q->why && q->ctx->opts && q->ctx->opts->decode_batched && attention_takes_them(q) &&
        !(pass_rule_named_enabled(q->ctx, PASS_RULE_EPILOGUE_ROPE) &&
          pass_rule_named_enabled(q->ctx, PASS_RULE_EPILOGUE_CACHE_WRITE)))
        q->why = "this graph serves the batched decode variants (at least 4 query rows in all, at most 16 per "
                 "sequence), where decode attention rotates q and the new k rows and appends them to the caches "
                 "for less than the QKV epilogue's position loads and element stores cost the skinny projection "
                 "(README, \"RoPE and the cache write in decode attention at B > 1\"); where attention rotates "
                 "every dim of a head, the projection's weight keeps the other graph's copy with each rotation pair "
                 "side by side and attention reads the pairs so (codegen: one copy of the weight); the epilogue "
                 "takes every per-head norm, rope and cache write of the projection or none";
    /* packed sequences (passes/pack_sequences.c): codegen has no packed form of the head norm's epilogue */
    bool packed = false, head_norm = false;
    for (int i = 0; i < q->ncand; i++) {
        packed |= q->cand[i]->attrs.packed;
        head_norm |= q->cand[i]->op == IR_OP_RMSNORM;
    }
    if (!q->why && packed && head_norm)
        q->why = "the model is packed (sequences end to end) and the QKV epilogue has no packed form of a per-head "
                 "norm; the norm stays a row kernel, and the epilogue takes every per-head norm, rope and cache write "
                 "of the projection or none";
    if (!q->why && (!q->bt[A->inputs[1]->id] || (A->ninputs > 2 && !q->bt[A->inputs[2]->id])))
        q->why = "the projection's weight or bias is computed at run time, so its rows cannot be paired for the rotation "
                 "at bind time";
    bool take = !q->why;
    for (int i = 0; i < q->ncand; i++) {
        int k = A->group; /* the views stay ungrouped: the epilogue reads through them */
        ir_node *n = q->cand[i];
        bool rope = n->op == IR_OP_ROPE, norm = n->op == IR_OP_RMSNORM;
        ir_dim bytes = rope || norm ? pass_size(q->ctx, n, 2) : pass_size(q->ctx, n->inputs[1], 2);
        ir_node *nodes[2] = {n, A};
        const char *what = arena_printf(&q->a, "fuse %s into the epilogue of %s", NZ(pass_describe(&q->a, n)),
                                        NZ(pass_describe(&q->a, A)));
        if (!take) {
            pass_decide(q->ctx, q->g, rule_of(n), false, bytes, nodes, 2, NZ(what), "not fused: %s", NZ(q->why));
            continue;
        }
        int old = n->group;
        n->group = k;
        if (old >= 0) ir_graph_remove_group(q->g, old); /* the norm's own row kernel, now empty */
        if (norm)
            pass_decide(q->ctx, q->g, PASS_RULE_EPILOGUE_HEAD_NORM, true, bytes, nodes, 2, NZ(what),
                        "the epilogue scales each head's row by 1/rms of its %lld columns and the gain before it "
                        "rotates them; the normed rows are not written and read back, and no row kernel runs",
                        (long long)konst(&n->type.dims[3]));
        else if (rope)
            pass_decide(q->ctx, q->g, PASS_RULE_EPILOGUE_ROPE, true, bytes, nodes, 2, NZ(what),
                        "each rotation pair is made two adjacent output columns by permuting the weight rows at bind "
                        "time; the epilogue rotates them in registers, so no rope runs later and attention reads "
                        "rotated rows");
        else
            pass_decide(q->ctx, q->g, PASS_RULE_EPILOGUE_CACHE_WRITE, true, bytes, nodes, 2, NZ(what),
                        "the epilogue stores the new rows into '%s' at their positions in place; the projected rows "
                        "are not written and read back, and attention reads only the cache",
                        NZ(n->inputs[0]->name));
    }
}

ir_graph *pass_fuse_qkv_epilogue(ir_graph *g, pass_ctx *ctx)
{
    qkv q = {.g = g, .ctx = ctx};
    arena_init(&q.a);
    q.u = pass_users_of(ctx, g);
    q.bt = pass_bind_time_of(ctx, g);
    bool ok = q.u && q.bt;
    for (int i = 0; ok && i < g->nnodes; i++) {
        ir_node *A = g->nodes[i];
        if (A->op != IR_OP_LINEAR || A->group < 0 || g->groups[A->group].anchor != A || A->type.rank != 3) continue;
        q.nseg = q.ncand = 0;
        q.why = NULL;
        find_segments(&q, A);
        decide(&q, A);
    }
    arena_free(&q.a);
    return pass_done(g, ctx, ok);
}
