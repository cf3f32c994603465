/* ir/verify.c — the checker run after construction and between passes.
 *
 * Structure: ids are dense and equal to positions, inputs precede their
 * users and belong to the graph, arities match the op table, parameters are
 * registered, outputs and state updates point at nodes of the graph and state
 * updates keep the state's type. Types: every node's type is re-inferred
 * with ir_infer_type and must equal the stored one. */
#include <string.h>

#include "ir/ir.h"

static bool in_graph(const ir_graph *g, const ir_node *n)
{
    return n && n->id >= 0 && n->id < g->nnodes && g->nodes[n->id] == n;
}

int ir_verify(const ir_graph *g, diag_list *d)
{
    int bad = 0;
#define FAIL(loc, ...)                                                          \
    do {                                                                        \
        bad++;                                                                  \
        if (d) diag_error(d, (loc), "IR verifier: " __VA_ARGS__);              \
    } while (0)
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (!n || n->id != i) {
            FAIL((src_loc){0}, "node at position %d has id %d", i, n ? n->id : -1);
            continue;
        }
        if ((unsigned)n->op >= IR_OP_COUNT) {
            FAIL(n->loc, "%%%d has an unknown op", i);
            continue;
        }
        int lo = ir_op_min_inputs(n->op), hi = ir_op_max_inputs(n->op);
        if (n->ninputs < lo || (hi >= 0 && n->ninputs > hi))
            FAIL(n->loc, "%%%d (%s) has %d inputs", i, ir_op_name(n->op), n->ninputs);
        bool inputs_ok = true;
        for (int j = 0; j < n->ninputs; j++)
            if (!in_graph(g, n->inputs[j]) || n->inputs[j]->id >= i) {
                FAIL(n->loc, "%%%d (%s): input %d is not an earlier node of this graph", i,
                     ir_op_name(n->op), j);
                inputs_ok = false;
            }
        bool is_param = n->op == IR_OP_INPUT || n->op == IR_OP_WEIGHT || n->op == IR_OP_STATE;
        if (is_param != (n->param >= 0) ||
            (is_param && (n->param >= g->nparams || g->params[n->param] != n)))
            FAIL(n->loc, "%%%d: parameter registration is inconsistent", i);
        if (n->group < -1 || n->group >= g->ngroups)
            FAIL(n->loc, "%%%d: kernel group %d does not exist", i, n->group);
        if (!inputs_ok) continue;
        ir_type t = n->type; /* declared part for params, CONST, CAST, RESHAPE, masks */
        if (!ir_infer_type(g, n->op, n->ninputs, n->inputs, &n->attrs, &t, d, n->loc)) {
            bad++;
            continue;
        }
        if (!ir_type_eq(&t, &n->type)) {
            char a[256], b[256];
            ir_type_print(&n->type, g->syms, a, sizeof a);
            ir_type_print(&t, g->syms, b, sizeof b);
            FAIL(n->loc, "%%%d (%s) is typed %s but its inputs give %s", i, ir_op_name(n->op), a, b);
        }
    }
    for (int i = 0; i < g->nparams; i++)
        if (!in_graph(g, g->params[i]) || g->params[i]->param != i)
            FAIL((src_loc){0}, "parameter %d is not a node of the graph", i);
    for (int i = 0; i < g->noutputs; i++)
        if (!in_graph(g, g->outputs[i].value))
            FAIL(g->outputs[i].loc, "output '%s' is not a node of the graph", g->outputs[i].name);
    for (int i = 0; i < g->nstates; i++) {
        const ir_state_update *s = &g->states[i];
        if (!in_graph(g, s->state) || s->state->op != IR_OP_STATE || !in_graph(g, s->value)) {
            FAIL(s->loc, "state update %d is malformed", i);
            continue;
        }
        if (!ir_type_eq(&s->state->type, &s->value->type)) {
            char a[256], b[256];
            ir_type_print(&s->state->type, g->syms, a, sizeof a);
            ir_type_print(&s->value->type, g->syms, b, sizeof b);
            FAIL(s->loc, "state '%s' is %s but is assigned %s", s->state->name, a, b);
        }
    }
    for (int i = 0; i < g->ngroups; i++)
        if (!in_graph(g, g->groups[i].anchor) || g->groups[i].anchor->group != i)
            FAIL((src_loc){0}, "kernel group k%d has no anchor in it", i);
#undef FAIL
    return bad;
}
