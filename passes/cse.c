/* passes/cse.c — common subexpression elimination.
 *
 * Algorithm: rebuild the graph in order; before copying a node, look for an
 * already copied node with the same op, the same (mapped) inputs, the same
 * attributes and the same type, and reuse it. Parameters are never merged.
 * A hash of (op, input ids) keys an open-addressing table; candidates are
 * compared field by field. The duplicates become dead; DCE drops them at
 * the end of the pass. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

static bool same(const ir_node *a, const ir_node *b)
{
    if (a->op != b->op || a->ninputs != b->ninputs || !ir_type_eq(&a->type, &b->type)) return false;
    for (int i = 0; i < a->ninputs; i++)
        if (a->inputs[i] != b->inputs[i]) return false;
    return pass_attrs_eq(a, b);
}

static uint64_t hash_node(const ir_node *n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n->op;
    for (int i = 0; i < n->ninputs; i++) h = (h ^ (uint64_t)n->inputs[i]->id) * 1099511628211ull;
    return h;
}

ir_graph *pass_cse(ir_graph *g, pass_ctx *ctx)
{
    pass_rewriter rw;
    if (!pass_rw_begin(&rw, g, ctx)) {
        ir_graph_free(g);
        return NULL;
    }
    size_t cap = 16;
    while (cap < (size_t)g->nnodes * 2) cap *= 2;
    ir_node **table = calloc(cap, sizeof *table);
    if (!table) {
        diag_error(ctx->diags, g->loc, "out of memory");
        pass_rw_abort(&rw);
        ir_graph_free(g);
        return NULL;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        ir_node *c = pass_rw_copy(&rw, n);
        if (!c) {
            diag_error(ctx->diags, n->loc, "internal error: cse could not copy %s", ir_op_name(n->op));
            free(table);
            pass_rw_abort(&rw);
            ir_graph_free(g);
            return NULL;
        }
        if (c->param >= 0) continue;
        size_t slot = hash_node(c) & (cap - 1);
        while (table[slot] && !same(table[slot], c)) slot = (slot + 1) & (cap - 1);
        if (table[slot]) rw.map[n->id] = table[slot]; /* c is now dead */
        else table[slot] = c;
    }
    free(table);
    g = pass_rw_finish(&rw, g);
    return g ? pass_dce(g, ctx) : NULL;
}
