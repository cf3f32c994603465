/* ir/graph.c — graph ownership: the arena, symbols, node list, parameters,
 * outputs and state updates. */
#include <string.h>

#include "ir/ir.h"
#include "ir/ir_internal.h"
#include "util/vec.h"

ir_graph *ir_graph_new(const char *name)
{
    arena a;
    arena_init(&a);
    ir_graph *g = arena_alloc(&a, sizeof *g);
    if (!g) {
        arena_free(&a);
        return NULL;
    }
    g->arena = a;
    g->name = arena_strdup(&g->arena, name ? name : "model");
    return g;
}

void ir_graph_free(ir_graph *g)
{
    if (!g) return;
    arena a = g->arena; /* g itself lives in the arena */
    arena_free(&a);
}

src_loc ir_graph_loc(ir_graph *g, src_loc loc)
{
    if (!loc.file) return loc;
    if (!g->file || (g->file != loc.file && strcmp(g->file, loc.file) != 0)) {
        const char *f = arena_strdup(&g->arena, loc.file);
        if (!f) {
            loc.file = NULL;
            return loc;
        }
        g->file = f;
    }
    loc.file = g->file;
    return loc;
}

int ir_graph_find_sym(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->nsyms; i++)
        if (strcmp(g->syms[i], name) == 0) return i;
    return -1;
}

int ir_graph_add_sym(ir_graph *g, const char *name)
{
    if (g->nsyms >= IR_MAX_SYMS || ir_graph_find_sym(g, name) >= 0) return -1;
    const char *s = arena_strdup(&g->arena, name);
    if (!s) return -1;
    g->syms[g->nsyms] = s;
    return g->nsyms++;
}

bool ir_graph_append_node_(ir_graph *g, ir_node *n)
{
    if (!VEC_GROW(g->nodes, g->nnodes, g->cap_nodes, &g->arena)) return false;
    n->id = g->nnodes;
    g->nodes[g->nnodes++] = n;
    if (n->op == IR_OP_INPUT || n->op == IR_OP_WEIGHT || n->op == IR_OP_STATE) {
        if (!VEC_GROW(g->params, g->nparams, g->cap_params, &g->arena)) {
            g->nnodes--;
            return false;
        }
        n->param = g->nparams;
        g->params[g->nparams++] = n;
    } else {
        n->param = -1;
    }
    return true;
}

int ir_graph_add_output(ir_graph *g, const char *name, ir_node *value, src_loc loc)
{
    if (!value) return -1;
    if (!VEC_GROW(g->outputs, g->noutputs, g->cap_outputs, &g->arena)) return -1;
    g->outputs[g->noutputs] = (ir_output){arena_strdup(&g->arena, name), value, ir_graph_loc(g, loc)};
    return g->noutputs++;
}

int ir_graph_set_state(ir_graph *g, ir_node *state, ir_node *value, src_loc loc)
{
    if (!state || !value || state->op != IR_OP_STATE) return -1;
    for (int i = 0; i < g->nstates; i++)
        if (g->states[i].state == state) {
            g->states[i].value = value;
            g->states[i].loc = ir_graph_loc(g, loc);
            return i;
        }
    if (!VEC_GROW(g->states, g->nstates, g->cap_states, &g->arena)) return -1;
    g->states[g->nstates] = (ir_state_update){state, value, ir_graph_loc(g, loc)};
    return g->nstates++;
}

int ir_graph_add_group(ir_graph *g, ir_node *anchor, ir_group_kind kind)
{
    if (!VEC_GROW(g->groups, g->ngroups, g->cap_groups, &g->arena)) return -1;
    g->groups[g->ngroups] = (ir_group){anchor, kind, false};
    anchor->group = g->ngroups;
    return g->ngroups++;
}

void ir_graph_remove_group(ir_graph *g, int k)
{
    if (k < 0 || k >= g->ngroups) return;
    memmove(&g->groups[k], &g->groups[k + 1], (size_t)(g->ngroups - k - 1) * sizeof *g->groups);
    g->ngroups--;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->group > k) g->nodes[i]->group--;
}

void ir_graph_count_uses(const ir_graph *g, int *uses)
{
    memset(uses, 0, (size_t)g->nnodes * sizeof *uses);
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i]->ninputs; j++) uses[g->nodes[i]->inputs[j]->id]++;
    for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i].value->id]++;
    for (int i = 0; i < g->nstates; i++) uses[g->states[i].value->id]++;
}
