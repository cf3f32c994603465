/* ir/ir_internal.h — helpers shared inside ir/ only. */
#ifndef KILN_IR_INTERNAL_H
#define KILN_IR_INTERNAL_H
#include "ir/ir.h"

/* Appends n to g: assigns its id and, for parameters, its param index. */
bool ir_graph_append_node_(ir_graph *g, ir_node *n);

#endif
