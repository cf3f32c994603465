/* passes/dce.c — dead code elimination.
 *
 * Algorithm: mark backwards from the outputs and the state updates; rebuild
 * the graph with the marked nodes only. Parameters are always kept (they are
 * the model's interface, bound by name), even when nothing reads them. */
#include <stdlib.h>

#include "passes/pass.h"

ir_graph *pass_dce(ir_graph *g, pass_ctx *ctx)
{
    bool *live = calloc((size_t)g->nnodes + 1, sizeof *live);
    if (!live) {
        diag_error(ctx->diags, g->loc, "out of memory");
        ir_graph_free(g);
        return NULL;
    }
    for (int i = 0; i < g->noutputs; i++) live[g->outputs[i].value->id] = true;
    for (int i = 0; i < g->nstates; i++) live[g->states[i].value->id] = true;
    int dead = 0;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        const ir_node *n = g->nodes[i];
        if (n->param >= 0) live[i] = true;
        if (!live[i]) {
            dead++;
            continue;
        }
        for (int j = 0; j < n->ninputs; j++) live[n->inputs[j]->id] = true;
    }
    if (dead == 0) {
        free(live);
        return g;
    }
    pass_rewriter rw;
    if (!pass_rw_begin(&rw, g, ctx)) {
        free(live);
        ir_graph_free(g);
        return NULL;
    }
    for (int i = 0; i < g->nnodes; i++)
        if (live[i] && !pass_rw_copy(&rw, g->nodes[i])) {
            diag_error(ctx->diags, g->nodes[i]->loc, "internal error: dce could not copy %s",
                       ir_op_name(g->nodes[i]->op));
            free(live);
            pass_rw_abort(&rw);
            ir_graph_free(g);
            return NULL;
        }
    free(live);
    return pass_rw_finish(&rw, g);
}
