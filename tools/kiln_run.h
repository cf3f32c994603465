/* tools/kiln_run.h — `kiln run`: a model on the GPU through the public API. */
#ifndef KILN_TOOLS_RUN_H
#define KILN_TOOLS_RUN_H
#include <stdbool.h>
#include <stdint.h>

#include "src/compile.h"

typedef struct run_opts {
    const char *file;
    const kc_define *defines;
    int ndefines;
    const char *const *disabled;
    int ndisabled;
    const char *dims;    /* "B=1,S=1,T=1024" */
    const char *weights; /* safetensors, or NULL with random */
    bool random;
    const char *inputs;  /* safetensors, or NULL: random inputs */
    const char *outputs; /* safetensors to write, or NULL */
    int steps;           /* decode steps (>= 1) */
    bool check;          /* compare with the interpreter */
    int bench;           /* timed runs (0: none) */
    bool stats;
    bool no_graphs;
    uint64_t seed;
} run_opts;

/* Returns a sysexits-style status: 0, 1 (model errors or a failed --check),
 * 64, 66, 69 (no GPU), 70, 73. */
int kiln_run_command(const run_opts *o);

#endif
