/* tests/passes/pass_harness.h — shared by the pass tests: compile a model
 * file, run the pipeline up to a pass, validate against the unfused graph. */
#ifndef KILN_TESTS_PASS_HARNESS_H
#define KILN_TESTS_PASS_HARNESS_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "frontend/frontend.h"
#include "passes/pass.h"

/* Compiles `path` (with -D style defines) or returns NULL after printing
 * the diagnostics to stderr. */
ir_graph *harness_compile(const char *path, const fe_define *defs, int ndefs);

/* Runs the pipeline passes up to and including `last` (all when NULL).
 * Consumes g. */
ir_graph *harness_run_until(ir_graph *g, const char *last, pass_ctx *ctx);

#endif
