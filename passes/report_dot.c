/* passes/report_dot.c — the fused graph for Graphviz (`kiln compile
 * --emit=dot`), see pass.h.
 *
 * Parameters (inputs, weights, states) are ellipses outside every cluster;
 * each kernel group is a cluster holding its ops; an edge that enters a
 * kernel from outside carries its value's bytes (HBM traffic: at the bound
 * dims, symbolic where a dim is not bound); edges inside a kernel are thin
 * and unlabelled. Constants are left out. Outputs and new state values end
 * in boxes of their own. A refused fusion joins the ops of its first and last
 * source lines that sit in different kernels with a dashed red edge that
 * does not constrain the layout, labelled with the rule and the reason. */
#include <stdio.h>
#include <string.h>

#include "passes/pass.h"

/* s as the inside of a DOT string: quotes and backslashes escaped, long
 * text wrapped at spaces near `wrap` columns. */
static void dot_str(FILE *out, const char *s, int wrap)
{
    int col = 0;
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        if (*s == '\n' || (*s == ' ' && wrap && col >= wrap)) {
            fputs("\\n", out);
            col = 0;
            continue;
        }
        fputc(*s, out);
        col++;
    }
}

static void value_bytes(arena *a, const ir_graph *g, const ir_node *n, FILE *out)
{
    bool overflow = false;
    ir_dim b = ir_type_bytes(&n->type, &overflow);
    fputs(overflow ? "(overflow)" : pass_bytes_str(a, g, &b), out);
}

static bool shown(const ir_node *n) { return n->op != IR_OP_CONST; }

static void node_decl(arena *a, const ir_graph *g, const ir_node *n, FILE *out)
{
    fprintf(out, "    n%d [label=\"", n->id);
    if (n->param >= 0) { /* "weight wq\nbf16[4096, 4096]" */
        char type[256];
        ir_type_print(&n->type, g->syms, type, sizeof type);
        fprintf(out, "%s ", ir_op_name(n->op));
        dot_str(out, n->name, 0);
        fputs("\\n", out);
        dot_str(out, type, 0);
    } else {
        dot_str(out, pass_describe(a, n), 40);
    }
    fputs("\"", out);
    if (n->op == IR_OP_INPUT || n->op == IR_OP_WEIGHT || n->op == IR_OP_STATE)
        fprintf(out, ", shape=ellipse, style=filled, fillcolor=\"%s\"",
                n->op == IR_OP_WEIGHT ? "#fff2cc" : n->op == IR_OP_STATE ? "#e1d5e7" : "#dae8fc");
    else if (n->group < 0)
        fputs(", style=dashed", out);
    fputs("];\n", out);
}

/* The first shown node of line `line` in a kernel other than `not_group`. */
static const ir_node *node_of_line(const ir_graph *g, int line, int not_group)
{
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->loc.line == line && n->group >= 0 && n->group != not_group && shown(n)) return n;
    }
    return NULL;
}

void pass_report_dot(const pass_report *r, const ir_graph *g, FILE *out)
{
    arena a;
    arena_init(&a);
    fputs("digraph \"", out);
    dot_str(out, g->name, 0);
    fputs("\" {\n  rankdir=TB; compound=true; fontname=\"Helvetica\";\n"
          "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [fontname=\"Helvetica\", fontsize=9];\n  label=\"", out);
    dot_str(out, g->name, 0);
    fprintf(out, ": %d kernels\"; labelloc=t;\n", g->ngroups);
    for (int k = 0; k < g->ngroups; k++) {
        fprintf(out, "  subgraph cluster_k%d {\n    label=\"k%d %s: ", k, k, ir_group_kind_name(g->groups[k].kind));
        dot_str(out, pass_kernel_describe(&a, g, k), 60);
        fputs("\"; style=rounded; color=\"#6c8ebf\";\n", out);
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i]->group == k && shown(g->nodes[i])) node_decl(&a, g, g->nodes[i], out);
        fputs("  }\n", out);
    }
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->group < 0 && shown(g->nodes[i])) node_decl(&a, g, g->nodes[i], out);
    for (int i = 0; i < g->nnodes; i++) {
        const ir_node *n = g->nodes[i];
        if (!shown(n)) continue;
        for (int j = 0; j < n->ninputs; j++) {
            const ir_node *in = n->inputs[j];
            if (!shown(in)) continue;
            fprintf(out, "  n%d -> n%d", in->id, n->id);
            if (in->group != n->group || in->group < 0) {
                fputs(" [label=\"", out);
                value_bytes(&a, g, in, out);
                fputs("\"]", out);
            } else {
                fputs(" [color=\"#999999\"]", out);
            }
            fputs(";\n", out);
        }
    }
    for (int i = 0; i < g->noutputs; i++) {
        fprintf(out, "  out%d [label=\"output ", i);
        dot_str(out, g->outputs[i].name, 0);
        fprintf(out, "\", shape=ellipse, style=filled, fillcolor=\"#d5e8d4\"];\n  n%d -> out%d [label=\"",
                g->outputs[i].value->id, i);
        value_bytes(&a, g, g->outputs[i].value, out);
        fputs("\"];\n", out);
    }
    for (int i = 0; i < g->nstates; i++) {
        fprintf(out, "  st%d [label=\"state ", i);
        dot_str(out, g->states[i].state->name, 0);
        fprintf(out, " (new value)\", shape=ellipse, style=filled, fillcolor=\"#e1d5e7\"];\n  n%d -> st%d [label=\"",
                g->states[i].value->id, i);
        value_bytes(&a, g, g->states[i].value, out);
        fputs("\"];\n", out);
    }
    for (int i = 0; r && i < r->count; i++) {
        const pass_decision *d = &r->items[i];
        if (d->taken || d->nlines == 0) continue;
        const ir_node *from = node_of_line(g, d->lines[0], -1);
        const ir_node *to = from ? node_of_line(g, d->lines[d->nlines - 1], from->group) : NULL;
        if (!from || !to) continue;
        fprintf(out, "  n%d -> n%d [style=dashed, color=\"#b85450\", fontcolor=\"#b85450\", constraint=false, "
                     "label=\"refused %s: ", from->id, to->id, d->rule);
        dot_str(out, d->why ? d->why : "", 40);
        fputs("\"];\n", out);
    }
    fputs("}\n", out);
    arena_free(&a);
}
