/* passes/plan_kernels.c — the last pass: every computation belongs to
 * exactly one kernel, or to none for a good reason.
 *
 * Algorithm:
 *  1. Bind-time values: a node whose transitive inputs are all weights or
 *     constants (packed Q/K/V weights, a transposed weight) is computed once
 *     when weights are bound; it gets no kernel.
 *  2. Free nodes: parameters, scalar constants and causal masks (generated
 *     inside the kernel that reads them), and views — RESHAPE, PERMUTE,
 *     SLICE — that the consuming kernel reads through its indexing. A view
 *     that is itself a model output or a state's new value must be
 *     materialized and gets a copy kernel.
 *  3. Every other node not yet in a group (left ungrouped by the fusion
 *     passes, or all of them when fusion is disabled) becomes a kernel of
 *     its own, of the kernel kind its op's row of ir/ops.def names.
 *  4. Kernels are renumbered in execution order (by their last member) and
 *     checked: each kernel's inputs come from earlier kernels, so fusion
 *     never created a cycle. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

typedef struct order_item {
    int group, last;
} order_item;

static int cmp_order(const void *a, const void *b)
{
    const order_item *x = a, *y = b;
    return x->last != y->last ? x->last - y->last : x->group - y->group;
}

/* The kernel that produces the value of n, looking through free views. */
static int producer_group(const ir_node *n)
{
    while (n->group < 0 && pass_is_view(n)) n = n->inputs[0];
    return n->group;
}

ir_graph *pass_plan_kernels(ir_graph *g, pass_ctx *ctx)
{
    const bool *bind = pass_bind_time_of(ctx, g);
    const pass_users *u = pass_users_of(ctx, g);
    if (!bind || !u) return pass_done(g, ctx, false);
    for (int i = 0; i < g->nnodes; i++) {
        ir_node *n = g->nodes[i];
        if (n->group >= 0 || bind[i] || ir_op_class(n->op) == IR_CLASS_SOURCE) continue;
        if (pass_is_view(n) && !u->is_output[i]) continue;
        if (ir_graph_add_group(g, n, ir_op_kernel_kind(n->op)) < 0) {
            diag_error(ctx->diags, n->loc, "out of memory");
            goto fail;
        }
    }
    /* a bind-time node inside a group would be recomputed per call: take it out */
    for (int i = 0; i < g->nnodes; i++)
        if (bind[i] && g->nodes[i]->group >= 0 && g->groups[g->nodes[i]->group].anchor != g->nodes[i])
            g->nodes[i]->group = -1;

    /* renumber kernels in execution order */
    int k = g->ngroups;
    order_item *ord = calloc((size_t)k + 1, sizeof *ord);
    int *renum = calloc((size_t)k + 1, sizeof *renum);
    ir_group *groups = calloc((size_t)k + 1, sizeof *groups);
    if (!ord || !renum || !groups) {
        free(ord);
        free(renum);
        free(groups);
        diag_error(ctx->diags, g->loc, "out of memory");
        goto fail;
    }
    for (int i = 0; i < k; i++) ord[i].group = i;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->group >= 0) ord[g->nodes[i]->group].last = i;
    qsort(ord, (size_t)k, sizeof *ord, cmp_order);
    for (int i = 0; i < k; i++) {
        renum[ord[i].group] = i;
        groups[i] = g->groups[ord[i].group];
    }
    if (k) memcpy(g->groups, groups, (size_t)k * sizeof *groups); /* a model with no kernels: g->groups is NULL */
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->group >= 0) g->nodes[i]->group = renum[g->nodes[i]->group];
    free(ord);
    free(renum);
    free(groups);

    /* every kernel reads only what earlier kernels (or bind time) produced */
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->group < 0) continue;
        for (int j = 0; j < n->ninputs; j++) {
            int pg = producer_group(n->inputs[j]);
            if (pg > n->group) {
                diag_error(ctx->diags, n->loc,
                           "internal error: kernel k%d reads %s, computed later by kernel k%d", n->group,
                           pass_describe(&g->arena, n->inputs[j]), pg);
                goto fail;
            }
        }
    }
    return g;
fail:
    ir_graph_free(g);
    return NULL;
}
