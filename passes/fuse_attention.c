/* passes/fuse_attention.c — fuse RoPE and the KV-cache write into attention.
 *
 * The attention kernel loads Q, K and V tiles anyway. Rotating Q as it is
 * loaded saves writing the rotated Q and reading it back; writing the new
 * K/V rows into the cache from the same kernel (rotating the new K rows on
 * the way) saves a rope kernel and a cache-write kernel, and the new rows are
 * used from registers instead of being read back from the cache.
 *
 * Algorithm: every ATTENTION not yet in a group starts a group of kind
 * "attention". Then, behind a chain of views (reshape, permute) on each
 * input:
 *   - q: a ROPE whose only consumer is that chain joins (rule
 *     attention-rope: "RoPE applied to Q as it is loaded");
 *   - k, v: a CACHE_WRITE joins (rule attention-cache-write) when its result
 *     is read by this attention only (besides being the new value of its
 *     state: the kernel writes the state in place), the cache it updates is
 *     a state read by nothing else, and it uses the attention's positions;
 *     then a ROPE producing the new rows (behind views), read only by the
 *     cache write, joins too (rule attention-rope).
 * Views stay ungrouped: they cost nothing and the kernel reads through them.
 * Every candidate that does not join is reported with the reason. */
#include <stdlib.h>

#include "passes/pass.h"

#define NZ(s) ((s) ? (s) : "?")

static int consumers(const pass_users *u, const ir_node *n)
{
    return u->count[n->id] + (u->is_output[n->id] ? 1 : 0);
}

typedef struct att {
    ir_graph *g;
    pass_ctx *ctx;
    const pass_users *u;
    arena a;
} att;

/* The producer of v behind views. *blocker: the first node on the way (a view
 * or the producer itself) read by something besides the next node, else
 * NULL. */
static ir_node *behind_views(const att *t, ir_node *v, ir_node **blocker)
{
    *blocker = NULL;
    while (pass_is_view(v)) {
        if (!*blocker && consumers(t->u, v) != 1) *blocker = v;
        v = v->inputs[0];
    }
    if (!*blocker && consumers(t->u, v) != 1) *blocker = v;
    return v;
}

static const char *what_into(att *t, const ir_node *n, const ir_node *anchor)
{
    return arena_printf(&t->a, "fuse %s into %s", NZ(pass_describe(&t->a, n)), NZ(pass_describe(&t->a, anchor)));
}

static void refuse(att *t, pass_rule rule, ir_dim bytes, ir_node *n, ir_node *anchor, const char *why)
{
    ir_node *nodes[2] = {n, anchor};
    pass_decide(t->ctx, t->g, rule, false, bytes, nodes, 2, NZ(what_into(t, n, anchor)), "not fused: %s", NZ(why));
}

static void take(att *t, pass_rule rule, ir_dim bytes, ir_node *n, ir_node *anchor, int k, const char *why)
{
    ir_node *nodes[2] = {n, anchor};
    n->group = k;
    pass_decide(t->ctx, t->g, rule, true, bytes, nodes, 2, NZ(what_into(t, n, anchor)), "%s", NZ(why));
}

/* Would `rule` allow joining? Records the refusal when disabled. */
static bool allowed(att *t, pass_rule rule, ir_dim bytes, ir_node *n, ir_node *anchor)
{
    if (pass_rule_enabled(t->ctx, rule)) return true;
    refuse(t, rule, bytes, n, anchor, arena_printf(&t->a, "rule %s is disabled (--disable)", pass_rule_name(rule)));
    return false;
}

/* A partial rotary rope stays out of attention (refused, with the reason). */
static bool partial_rotary(att *t, ir_node *r, ir_node *attn, ir_dim bytes)
{
    if (!r->attrs.rope.rotary_dims) return false;
    refuse(t, PASS_RULE_ATTENTION_ROPE, bytes, r, attn,
           arena_printf(&t->a, "partial rotary (dims=%lld of each head): the attention templates rotate whole heads, "
                               "so the rope is a kernel of its own",
                        (long long)r->attrs.rope.rotary_dims));
    return true;
}

static void fuse_q(att *t, ir_node *attn, int k)
{
    ir_node *blocker;
    ir_node *r = behind_views(t, attn->inputs[0], &blocker);
    if (r->op != IR_OP_ROPE || r->group >= 0) return;
    ir_dim bytes = pass_size(t->ctx, r, 2);
    if (!allowed(t, PASS_RULE_ATTENTION_ROPE, bytes, r, attn)) return;
    if (partial_rotary(t, r, attn, bytes)) return;
    if (blocker) {
        refuse(t, PASS_RULE_ATTENTION_ROPE, bytes, r, attn,
               arena_printf(&t->a, "%s, so the rotated Q must be written to memory",
                            NZ(pass_describe_consumers(&t->a, t->g, t->u, blocker))));
        return;
    }
    take(t, PASS_RULE_ATTENTION_ROPE, bytes, r, attn, k, "RoPE is applied to Q as it is loaded; the rotated Q is not written and read back");
}

/* Is cw the new value of state c? Is cw a model output? */
static bool state_value(const ir_graph *g, const ir_node *c, const ir_node *cw)
{
    for (int i = 0; i < g->nstates; i++)
        if (g->states[i].state == c && g->states[i].value == cw) return true;
    return false;
}

static bool is_model_output(const ir_graph *g, const ir_node *n)
{
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value == n) return true;
    return false;
}

static void fuse_cache(att *t, ir_node *attn, int input, int k)
{
    ir_graph *g = t->g;
    const pass_users *u = t->u;
    ir_node *v = attn->inputs[input];
    while (pass_is_view(v) && u->count[v->id] == 1 && !u->is_output[v->id]) {
        v = v->inputs[0];
    }
    ir_node *cw = v;
    if (cw->op != IR_OP_CACHE_WRITE || cw->group >= 0) return;
    ir_node *cache = cw->inputs[0], *rows = cw->inputs[1];
    ir_node *cpos = cw->ninputs > 2 ? cw->inputs[2] : NULL, *apos = attn->ninputs > 3 ? attn->inputs[3] : NULL;
    ir_dim bytes = pass_size(t->ctx, rows, 1);
    const char *kv = input == 1 ? "K" : "V";
    if (!allowed(t, PASS_RULE_ATTENTION_CACHE_WRITE, bytes, cw, attn)) return;
    const char *why = NULL;
    if (u->count[cw->id] != 1)
        why = arena_printf(&t->a, "%s, so the cache must be complete before any of them runs",
                           NZ(pass_describe_consumers(&t->a, g, u, cw)));
    else if (is_model_output(g, cw))
        why = arena_printf(&t->a, "the updated cache (line %d) is a model output", cw->loc.line);
    else if (cache->op != IR_OP_STATE)
        why = arena_printf(&t->a, "the cache %s is not a state, so it cannot be updated in place",
                           NZ(cache->name ? arena_printf(&t->a, "'%s'", cache->name) : pass_describe(&t->a, cache)));
    else if (!state_value(g, cache, cw))
        why = arena_printf(&t->a, "the result of %s is not the new value of state '%s', so it cannot be written in place",
                           NZ(pass_describe(&t->a, cw)), NZ(cache->name));
    else if (u->count[cache->id] != 1)
        why = arena_printf(&t->a, "the old value of state '%s' is also read elsewhere (%s), so it cannot be updated in place",
                           NZ(cache->name), NZ(pass_describe_consumers(&t->a, g, u, cache)));
    else if (cpos != apos)
        why = arena_printf(&t->a, "the cache write (line %d) and the attention (line %d) use different positions",
                           cw->loc.line, attn->loc.line);
    if (why) {
        refuse(t, PASS_RULE_ATTENTION_CACHE_WRITE, bytes, cw, attn, why);
        return;
    }
    take(t, PASS_RULE_ATTENTION_CACHE_WRITE, bytes, cw, attn, k,
         arena_printf(&t->a, "the attention kernel writes the new %s rows into '%s' in place and uses them from registers; "
                             "no separate cache-write kernel runs",
                      kv, NZ(cache->name)));
    /* the rotation of the new K rows */
    ir_node *blocker;
    ir_node *r = behind_views(t, rows, &blocker);
    if (r->op != IR_OP_ROPE || r->group >= 0) return;
    ir_dim rbytes = pass_size(t->ctx, r, 2);
    if (!allowed(t, PASS_RULE_ATTENTION_ROPE, rbytes, r, attn)) return;
    if (partial_rotary(t, r, attn, rbytes)) return;
    if (blocker) {
        refuse(t, PASS_RULE_ATTENTION_ROPE, rbytes, r, attn,
               arena_printf(&t->a, "%s, so the rotated %s rows must be written to memory",
                            NZ(pass_describe_consumers(&t->a, g, u, blocker)), kv));
        return;
    }
    take(t, PASS_RULE_ATTENTION_ROPE, rbytes, r, attn, k,
         arena_printf(&t->a, "RoPE is applied to the new %s rows as they are written into the cache; "
                             "the rotated rows are not written and read back",
                      kv));
}

ir_graph *pass_fuse_attention(ir_graph *g, pass_ctx *ctx)
{
    att t = {.g = g, .ctx = ctx};
    arena_init(&t.a);
    bool ok = (t.u = pass_users_of(ctx, g)) != NULL;
    for (int i = 0; ok && i < g->nnodes; i++) {
        ir_node *n = g->nodes[i];
        if (n->op != IR_OP_ATTENTION || n->group >= 0) continue;
        int k = ir_graph_add_group(g, n, IR_GROUP_ATTENTION);
        if (k < 0) {
            ok = false;
            break;
        }
        fuse_q(&t, n, k);
        fuse_cache(&t, n, 1, k);
        if (n->inputs[2] != n->inputs[1]) fuse_cache(&t, n, 2, k);
    }
    arena_free(&t.a);
    return pass_done(g, ctx, ok);
}
