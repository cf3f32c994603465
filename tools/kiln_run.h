/* tools/kiln_run.h — `kiln run`: a model on the GPU through the public API. */
#ifndef KILN_TOOLS_RUN_H
#define KILN_TOOLS_RUN_H
#include <stdbool.h>
#include <stdint.h>

#include "src/compile.h"

typedef struct run_opts {
    const char *file;
    const char *text;    /* the model's text when it came from standard input (file "-"), else NULL */
    const kc_define *defines;
    int ndefines;
    const char *const *disabled;
    int ndisabled;
    const char *const *enabled;
    int nenabled;
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
    bool no_pdl;              /* --no-pdl: no programmatic dependent launch */
    bool autotune;            /* --autotune: time the matmul candidates (kiln_model_options.autotune) */
    uint64_t seed;
    int pos;                  /* --pos=N: every i32 input (positions) set to N; -1: random */
    bool profile;             /* --profile (implied by the three files below) */
    int profile_runs;         /* --profile-runs=N (0: 50) */
    const char *trace;        /* --trace=FILE.json */
    const char *roofline;     /* --roofline=FILE.svg */
    const char *profile_json; /* --profile-json=FILE */
    double peak_bw;           /* --peak-bw=TB/s, as bytes/s (0: measured) */
    double peak_flops;        /* --peak-flops=TFLOP/s, as FLOP/s (0: measured) */
} run_opts;

/* Returns a sysexits-style status: 0, 1 (model errors or a failed --check),
 * 64, 66, 69 (no GPU), 70, 73. */
int kiln_run_command(const run_opts *o);

/* `kiln ceilings [--json] [--remeasure]`: the device's ceilings (measured
 * once, then read from the cache directory). Same exit statuses. */
int kiln_ceilings_command(bool json, bool remeasure);

/* Compile progress on a terminal (kiln_model_options.progress, NVRTC's per-kernel
 * callback): one line on stderr, rewritten per kernel; nothing when stderr is
 * not a terminal. Used by kiln compile, run and generate. */
void kiln_tool_progress(void *user, int done, int total, const char *kernel, double ms);

#endif
