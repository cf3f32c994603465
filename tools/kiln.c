/* tools/kiln.c — the `kiln` command line. It parses arguments, calls the
 * library (the compile driver, src/compile.h, for everything from text to
 * kernels; the runtime for the kernel cache) and maps results to exit codes;
 * the logic lives in the library.
 *
 * Exit codes (sysexits.h style): 0 success; 1 errors in the model file;
 * 64 usage error; 66 input file unreadable; 70 internal error; 73 output
 * file not writable. */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ir/ir.h"

#include "runtime/rt_cache.h"
#include "runtime/rt_emit.h"
#include "runtime/rt_info.h"
#include "runtime/rt_nvrtc.h"
#include "src/compile.h"
#include "tools/kiln_generate.h"
#include "tools/kiln_run.h"

enum { EX_OK = 0, EX_MODEL = 1, EX_USAGE = 64, EX_NOINPUT = 66, EX_SOFTWARE = 70, EX_CANTCREAT = 73 };

/* ---- commands and options ----------------------------------------------------------
 * One table of options; each names the commands that take it. The help of a
 * command (`kiln help CMD`, `kiln CMD --help`, and the man page made from
 * them) and getopt_long's option list are built from it. */

enum { C_CHECK = 1 << 0, C_COMPILE = 1 << 1, C_RUN = 1 << 2, C_CEILINGS = 1 << 3, C_PASSES = 1 << 4, C_CACHE = 1 << 5,
       C_TUNE = 1 << 6, C_ALL = 0xff, C_MODEL = C_CHECK | C_COMPILE | C_RUN };

typedef struct command {
    const char *name;
    unsigned bit;
    const char *args;    /* the positional arguments, for the synopsis */
    int min_pos, max_pos;
    const char *summary; /* one line, for `kiln --help` */
    const char *detail;  /* a paragraph, for `kiln help CMD` */
} command;

static const command commands[] = {
    {"check", C_CHECK, "FILE", 1, 1, "parse and type-check a model; print diagnostics",
     "Parses and type-checks FILE ('-': standard input) and prints its errors and\n"
     "warnings as file:line:col: with the source line and a caret."},
    {"compile", C_COMPILE, "FILE", 1, 1, "compile a model and write what --emit selects",
     "Compiles FILE ('-': standard input) through the pass pipeline and writes what\n"
     "--emit selects (the fused IR by default) to standard output or -o."},
    {"run", C_RUN, "FILE --dims NAME=N,... (--weights W.safetensors | --random)", 1, 1,
     "run a model on the GPU (exit 69 without a CUDA device)",
     "Runs FILE on the GPU: weights from a safetensors file or random (seeded),\n"
     "inputs from a file or random, states zeroed. --steps runs N decode steps (the\n"
     "first output feeds the first input, positions advance; --pos sets every\n"
     "position input to N, else they are random); --check compares every output and\n"
     "state with the reference interpreter; --profile times every kernel inside N\n"
     "graph replays (CUPTI) against its floor."},
    {"ceilings", C_CEILINGS, "", 0, 0, "the device's read bandwidth and tensor rates",
     "Measures the device's read bandwidth and bf16/f16 tensor rates once and keeps\n"
     "them in the cache directory (the profiler's floors)."},
    {"passes", C_PASSES, "", 0, 0, "list the passes and fusion rules, in pipeline order",
     "Lists the pass pipeline, each pass and fusion rule with its summary (the names\n"
     "--disable and --print-ir-* take)."},
    {"cache", C_CACHE, "ls|verify|clear|why FILE", 1, 2, "list, check, empty or explain the kernel cache",
     "The kernel cache ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln):\n"
     "  ls       list the entries, each with what made its key\n"
     "  verify   check every entry's checksum, deleting corrupt ones (exit 1 if any,\n"
     "           or if an entry could not be checked or deleted)\n"
     "  clear    delete Kiln's files (others are left and listed)\n"
     "  why FILE for each kernel of FILE: in the cache, or what changed against the\n"
     "           nearest entry\n"
     "KILN_CACHE_MAX_MB caps its size (least recently used entries go first)."},
    {"tune", C_TUNE, "export|import FILE", 2, 2, "move the autotuned matmul choices to or from one file",
     "The Hopper matmul configurations (or cuBLASLt) `kiln run --autotune` chose (kept in the\n"
     "kernel cache directory, per device, driver, Kiln version and problem):\n"
     "  export FILE  write every stored choice into FILE (JSON with a checksum)\n"
     "  import FILE  store the choices of FILE here (entries whose key or the file's\n"
     "               checksum does not check are rejected), so that a fresh machine\n"
     "               starts tuned"},
};
enum { NCOMMANDS = (int)(sizeof commands / sizeof commands[0]) };

enum {
    O_HELP = 'h', O_OUT = 'o', O_DEFINE = 'D', O_WARN = 'W',
    O_EMIT = 256, O_ARCH, O_NO_CACHE, O_TIMINGS, O_EXPLAIN, O_REPORT, O_DISABLE, O_PRINT_BEFORE, O_PRINT_AFTER,
    O_PRINT_ALL, O_VERIFY, O_PACKED, O_DIMS, O_WEIGHTS, O_INPUTS, O_OUTPUTS, O_STEPS, O_BENCH, O_SEED, O_RANDOM, O_CHECK,
    O_STATS, O_NO_GRAPHS, O_POS, O_PROFILE, O_PROFILE_RUNS, O_TRACE, O_ROOFLINE, O_PROFILE_JSON, O_PEAK_BW,
    O_PEAK_FLOPS, O_JSON, O_REMEASURE, O_VERSION, O_ENABLE, O_NO_PDL, O_AUTOTUNE,
};

typedef struct opt_def {
    const char *name; /* long name (NULL: short only) */
    int id;           /* the short option's letter, or an O_ value */
    int has_arg;
    const char *arg;  /* the value's name in the help ("FILE"), NULL without */
    const char *need; /* what a missing value is, for the usage error */
    unsigned cmds;
    const char *help; /* lines after the first are indented under it */
} opt_def;

static const opt_def options[] = {
    {"emit", O_EMIT, required_argument, "KIND", "a value", C_COMPILE,
     "what to write: ast, ir (as written), fused-ir (after all passes,\n"
     "kernels marked [kN]; the default), plan (kernels and the memory plan;\n"
     "needs every dim bound), dot (the fused graph for Graphviz: one\n"
     "cluster per kernel, edges with their bytes), cuda, ptx or cubin\n"
     "(one file per kernel into the directory given by -o, plus kernels.txt)"},
    {"output", O_OUT, required_argument, "OUT", "a file name", C_COMPILE,
     "write to OUT ('-': standard output) instead of standard output"},
    {"arch", O_ARCH, required_argument, "SM", "an architecture", C_COMPILE,
     "the GPU architecture to generate and compile for (default: the\n"
     "device's, else sm_90a); nvcc's spellings -arch=SM, -arch SM work too;\n"
     "Kiln targets " "%ARCHS%"},
    {"no-cache", O_NO_CACHE, no_argument, NULL, NULL, C_COMPILE,
     "compile every kernel, neither reading nor filling the cache"},
    {"timings", O_TIMINGS, no_argument, NULL, NULL, C_COMPILE, "print per-kernel compile times and cache hits"},
    {"define", O_DEFINE, required_argument, "NAME=VALUE", "NAME=VALUE", C_MODEL | C_CACHE,
     "bind a `dims` size or override a `const` (repeatable)"},
    {NULL, O_WARN, required_argument, "NAME", "a warning name", C_CHECK | C_COMPILE,
     "-Werror makes warnings errors (exit 1); -Wno-NAME, -WNAME turn the\n"
     "warning NAME off or on (unused-value, unused-param, stale-state,\n"
     "attention-layout, all)"},
    {"explain", O_EXPLAIN, no_argument, NULL, NULL, C_COMPILE,
     "print the fusion report: every kernel, every decision taken or\n"
     "refused, its rule, lines and bytes saved"},
    {"report", O_REPORT, required_argument, "FILE.json", "a file name", C_COMPILE, "write the fusion report as JSON"},
    {"disable", O_DISABLE, required_argument, "NAME[,NAME]", "a name", C_COMPILE | C_RUN,
     "turn off a pass or a fusion rule (see `kiln passes`)"},
    {"enable", O_ENABLE, required_argument, "NAME[,NAME]", "a name", C_COMPILE | C_RUN,
     "turn on a rule that is off by default (none today: a rule on by default is accepted; `kiln passes` marks them)"},
    {"print-ir-before", O_PRINT_BEFORE, required_argument, "PASS", "a pass name", C_COMPILE,
     "dump the IR before PASS (to stderr)"},
    {"print-ir-after", O_PRINT_AFTER, required_argument, "PASS", "a pass name", C_COMPILE, "dump the IR after PASS"},
    {"print-ir-after-all", O_PRINT_ALL, no_argument, NULL, NULL, C_COMPILE, "dump the IR after every pass"},
    {"packed", O_PACKED, no_argument, NULL, NULL, C_COMPILE,
     "compile the model's packed form: the prompts of a run concatenated\n"
     "along one token axis, no padding (README, \"Packed prefill\")"},
    {"verify", O_VERIFY, no_argument, NULL, NULL, C_COMPILE,
     "check the passes: run the CPU interpreter on the IR as written and\n"
     "on the fused IR, on random inputs, and report the largest relative\n"
     "error (dims not bound with -D take the value 4); the generated\n"
     "kernels are checked by `kiln run FILE --check` on a GPU"},
    {"dims", O_DIMS, required_argument, "NAME=N,...", "NAME=N,...", C_RUN, "a value for every dim of the model"},
    {"weights", O_WEIGHTS, required_argument, "W.safetensors", "a file", C_RUN, "the weights"},
    {"random", O_RANDOM, no_argument, NULL, NULL, C_RUN, "random weights (scaled by 1/sqrt(fan-in))"},
    {"inputs", O_INPUTS, required_argument, "IN.safetensors", "a file", C_RUN, "the inputs (default: random)"},
    {"outputs", O_OUTPUTS, required_argument, "OUT.safetensors", "a file", C_RUN, "save the last outputs"},
    {"steps", O_STEPS, required_argument, "N", "a number", C_RUN, "run N decode steps (default 1)"},
    {"pos", O_POS, required_argument, "N", "a position", C_RUN, "set every position (i32) input to N"},
    {"check", O_CHECK, no_argument, NULL, NULL, C_RUN,
     "compare every output and state with the reference interpreter\n"
     "(exit 1 beyond the dtype's tolerance)"},
    {"bench", O_BENCH, required_argument, "N", "a number", C_RUN, "time N runs (host clock around run + sync)"},
    {"stats", O_STATS, no_argument, NULL, NULL, C_RUN, "print the model's counters (compiles, cache hits, graphs)"},
    {"seed", O_SEED, required_argument, "N", "a number", C_RUN, "seed of the random weights and inputs"},
    {"no-graphs", O_NO_GRAPHS, no_argument, NULL, NULL, C_RUN, "launch kernels eagerly, never capture CUDA graphs"},
    {"no-pdl", O_NO_PDL, no_argument, NULL, NULL, C_RUN,
     "no programmatic dependent launch: each kernel starts when the one before it has finished"},
    {"autotune", O_AUTOTUNE, no_argument, NULL, NULL, C_RUN,
     "time the Hopper matmul's candidate configurations (and cuBLASLt, where it\n"
     "expresses the epilogue) when a variant is planned and use the fastest\n"
     "(stored in the cache directory: later runs time nothing; `kiln tune\n"
     "export|import` moves them)"},
    {"profile", O_PROFILE, no_argument, NULL, NULL, C_RUN,
     "time every kernel inside graph replays (CUPTI) against its floor"},
    {"profile-runs", O_PROFILE_RUNS, required_argument, "N", "a number", C_RUN, "replays to time (default 50)"},
    {"trace", O_TRACE, required_argument, "F.json", "a file name", C_RUN, "write a Chrome trace of the profile"},
    {"roofline", O_ROOFLINE, required_argument, "F.svg", "a file name", C_RUN, "write a roofline SVG of the profile"},
    {"profile-json", O_PROFILE_JSON, required_argument, "F", "a file name", C_RUN, "write the profile as JSON"},
    {"peak-bw", O_PEAK_BW, required_argument, "TB/s", "a number", C_RUN, "the bandwidth ceiling (default: measured)"},
    {"peak-flops", O_PEAK_FLOPS, required_argument, "TFLOP/s", "a number", C_RUN,
     "the tensor-rate ceiling (default: measured)"},
    {"json", O_JSON, no_argument, NULL, NULL, C_CEILINGS, "print the ceilings as JSON"},
    {"remeasure", O_REMEASURE, no_argument, NULL, NULL, C_CEILINGS, "measure again instead of reading the file"},
    {"help", O_HELP, no_argument, NULL, NULL, C_ALL, "show this help"},
};
enum { NOPTIONS = (int)(sizeof options / sizeof options[0]) };

static const char exit_text[] =
    "exit status: 0 ok, 1 errors in the model (or a failed check), 64 usage,\n"
    "             66 unreadable input, 69 no CUDA device, 70 internal error,\n"
    "             73 unwritable output\n";

static void print_usage(FILE *out)
{
    fputs("usage: kiln <command> [options] [FILE]\n"
          "       kiln help <command>       the command's options\n"
          "       kiln --version            the versions of Kiln and its CUDA components\n"
          "\ncommands:\n", out);
    for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-9s%s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-9s%s\n", "generate", "generate tokens with a whole model from a Hugging Face checkpoint");
    fputs("\nFILE '-' reads the model from standard input; '--' ends the options.\n\n", out);
    fputs(exit_text, out);
}

/* help text with %ARCHS% replaced, its words wrapped at 79 columns, the lines
 * after the first indented */
static void print_help_text(FILE *out, const char *h, int indent)
{
    char text[1024];
    const char *archs = strstr(h, "%ARCHS%");
    if (archs) snprintf(text, sizeof text, "%.*s%s%s", (int)(archs - h), h, cg_target_archs(), archs + 7);
    else snprintf(text, sizeof text, "%s", h);
    int col = indent;
    for (char *w = strtok(text, " \n"); w; w = strtok(NULL, " \n")) {
        int len = (int)strlen(w);
        if (col > indent && col + 1 + len > 79) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        }
        if (col > indent) fputc(' ', out), col++;
        fputs(w, out);
        col += len;
    }
    fputc('\n', out);
}

static void print_command_help(const command *c, FILE *out)
{
    fprintf(out, "usage: kiln %s%s%s [options]\n\n", c->name, *c->args ? " " : "", c->args);
    fprintf(out, "%s\n", c->detail);
    bool any = false;
    for (int i = 0; i < NOPTIONS; i++) {
        const opt_def *o = &options[i];
        if (!(o->cmds & c->bit)) continue;
        if (!any) fputs("\noptions:\n", out);
        any = true;
        char left[64];
        if (o->id == O_WARN) snprintf(left, sizeof left, "-Werror, -Wno-NAME");
        else if (o->id < 256 && o->arg) snprintf(left, sizeof left, "-%c %s, --%s=%s", o->id, o->arg, o->name, o->arg);
        else if (o->id < 256) snprintf(left, sizeof left, "-%c, --%s", o->id, o->name);
        else if (o->arg) snprintf(left, sizeof left, "--%s=%s", o->name, o->arg);
        else snprintf(left, sizeof left, "--%s", o->name);
        if (strlen(left) > 24) fprintf(out, "  %s\n%28s", left, "");
        else fprintf(out, "  %-24s  ", left);
        print_help_text(out, o->help, 28);
    }
    fputs("\nAn option's value may follow it (--opt value) or be joined to it (--opt=value).\n", out);
    fputs(exit_text, out);
}

static const command *find_command(const char *name)
{
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

typedef struct cli {
    const command *command;
    const char *cmd;
    const char *file;  /* the model file ("-": standard input); cache: the subcommand */
    const char *arg2;  /* cache: the subcommand's argument */
    int cache_problems; /* cache: files reported as not Kiln's or not checkable */
    const char *emit;
    const char *out;
    kc_define defines[64];
    int ndefines;
    const char *disabled[64];
    int ndisabled;
    const char *enabled[64];
    int nenabled;
    const char *report;
    const char *print_before, *print_after;
    bool print_all, explain, verify, packed;
    const char *arch;
    bool no_cache, timings;
    bool json, remeasure; /* ceilings */
    diag_options warnings; /* -Werror, -Wno-NAME */
    char *stdin_text;      /* FILE '-' */
    run_opts run;
} cli;

static int usage_error(const cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const cli *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kiln: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (c && c->command) fprintf(stderr, "\nTry 'kiln help %s'.\n", c->command->name);
    else fprintf(stderr, "\nTry 'kiln --help'.\n");
    return EX_USAGE;
}

static int add_define(cli *c, char *spec)
{
    char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) return usage_error(c, "-D expects NAME=VALUE, got '%s'", spec);
    if (c->ndefines == (int)(sizeof c->defines / sizeof c->defines[0]))
        return usage_error(c, "too many -D options (at most 64)");
    *eq = 0;
    c->defines[c->ndefines++] = (kc_define){spec, eq + 1};
    return EX_OK;
}

/* v is a whole number in lo..hi: into *out. */
static bool ll_in(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno == ERANGE || x < lo || x > hi) return false;
    *out = x;
    return true;
}

static bool int_in(const char *v, long lo, long hi, int *out)
{
    long long x;
    if (!ll_in(v, lo, hi, &x)) return false;
    *out = (int)x;
    return true;
}

static const opt_def *find_opt(int id)
{
    for (int i = 0; i < NOPTIONS; i++)
        if (options[i].id == id) return &options[i];
    return NULL;
}

/* One option (id, with its value v) into c. */
static int take_option(cli *c, int id, char *v)
{
    long long n;
    switch (id) {
    case O_EMIT: c->emit = v; break;
    case O_OUT: c->out = v; break;
    case O_ARCH: c->arch = v; break;
    case O_NO_CACHE: c->no_cache = true; break;
    case O_TIMINGS: c->timings = true; break;
    case O_DEFINE: return add_define(c, v);
    case O_WARN: {
        char flag[256];
        snprintf(flag, sizeof flag, "-W%s", v);
        if (!diag_warning_flag(&c->warnings, flag)) return usage_error(c, "unknown warning option '%s'", flag);
        break;
    }
    case O_EXPLAIN: c->explain = true; break;
    case O_REPORT: c->report = v; break;
    case O_DISABLE:
        for (char *t = strtok(v, ","); t; t = strtok(NULL, ",")) {
            if (c->ndisabled == 64) return usage_error(c, "too many --disable names");
            c->disabled[c->ndisabled++] = t;
        }
        break;
    case O_ENABLE:
        for (char *t = strtok(v, ","); t; t = strtok(NULL, ",")) {
            if (c->nenabled == 64) return usage_error(c, "too many --enable names");
            c->enabled[c->nenabled++] = t;
        }
        break;
    case O_PRINT_BEFORE: c->print_before = v; break;
    case O_PRINT_AFTER: c->print_after = v; break;
    case O_PRINT_ALL: c->print_all = true; break;
    case O_VERIFY: c->verify = true; break;
    case O_PACKED: c->packed = true; break;
    case O_DIMS: c->run.dims = v; break;
    case O_WEIGHTS: c->run.weights = v; break;
    case O_INPUTS: c->run.inputs = v; break;
    case O_OUTPUTS: c->run.outputs = v; break;
    case O_STEPS:
    case O_BENCH:
    case O_SEED:
        if (!ll_in(v, 0, 1000000000, &n)) return usage_error(c, "expected a number, got '%s'", v);
        if (id == O_STEPS) c->run.steps = (int)n;
        else if (id == O_BENCH) c->run.bench = (int)n;
        else c->run.seed = (uint64_t)n;
        break;
    case O_RANDOM: c->run.random = true; break;
    case O_CHECK: c->run.check = true; break;
    case O_STATS: c->run.stats = true; break;
    case O_NO_GRAPHS: c->run.no_graphs = true; break;
    case O_NO_PDL: c->run.no_pdl = true; break;
    case O_AUTOTUNE: c->run.autotune = true; break;
    case O_POS:
        if (!int_in(v, 0, 1000000000, &c->run.pos)) return usage_error(c, "--pos expects a position >= 0, got '%s'", v);
        break;
    case O_PROFILE: c->run.profile = true; break;
    case O_PROFILE_RUNS:
        if (!int_in(v, 1, 100000, &c->run.profile_runs))
            return usage_error(c, "--profile-runs expects 1..100000, got '%s'", v);
        c->run.profile = true;
        break;
    case O_TRACE:
    case O_ROOFLINE:
    case O_PROFILE_JSON:
        if (!*v) return usage_error(c, "--%s needs a file name", find_opt(id)->name);
        if (id == O_TRACE) c->run.trace = v;
        else if (id == O_ROOFLINE) c->run.roofline = v;
        else c->run.profile_json = v;
        c->run.profile = true;
        break;
    case O_PEAK_BW:
    case O_PEAK_FLOPS: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno == ERANGE || !(x > 0) || x > 1e6)
            return usage_error(c, "expected a positive number, got '%s'", v);
        if (id == O_PEAK_BW) c->run.peak_bw = x * 1e12;
        else c->run.peak_flops = x * 1e12;
        break;
    }
    case O_JSON: c->json = true; break;
    case O_REMEASURE: c->remeasure = true; break;
    default: return usage_error(c, "internal error: option %d", id);
    }
    return EX_OK;
}

/* nvcc spells the architecture -arch=sm_90a and -arch sm_90a: as --arch. */
static void nvcc_spellings(int argc, char **argv, char **fixed)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "-arch")) argv[i] = "--arch";
        else if (!strncmp(argv[i], "-arch=", 6)) {
            size_t n = strlen(argv[i]) + 2;
            if ((fixed[i] = malloc(n))) {
                snprintf(fixed[i], n, "-%s", argv[i]);
                argv[i] = fixed[i];
            }
        }
    }
}

/* Parses the command's options and arguments (argv[0] is the command). */
static int parse_command(int argc, char **argv, cli *c)
{
    const command *cmd = c->command;
    struct option longopts[NOPTIONS + 1];
    char shortopts[2 * NOPTIONS + 4];
    int nl = 0, ns = 0;
    shortopts[ns++] = ':'; /* first: a missing value comes back as ':' */
    for (int i = 0; i < NOPTIONS; i++) {
        const opt_def *o = &options[i];
        if (!(o->cmds & cmd->bit)) continue;
        if (o->name) longopts[nl++] = (struct option){o->name, o->has_arg, NULL, o->id};
        if (o->id < 256) {
            shortopts[ns++] = (char)o->id;
            if (o->has_arg) shortopts[ns++] = ':';
        }
    }
    longopts[nl] = (struct option){0, 0, 0, 0};
    shortopts[ns] = 0;
    const char *pos[3];
    int npos = 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int id = getopt_long(argc, argv, shortopts, longopts, NULL);
        if (id == -1) break;
        /* the element just taken (for long options; short ones are in optopt) */
        const char *as_given = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "?";
        if (id == '?') {
            /* not an option of this command; of another one? */
            char name[64];
            const char *eq = strchr(as_given, '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - as_given : (ptrdiff_t)strlen(as_given)), as_given);
            for (int i = 0; optopt == 0 && i < NOPTIONS; i++)
                if (options[i].name && !strncmp(name, "--", 2) && !strcmp(name + 2, options[i].name))
                    return usage_error(c, "'%s' is not an option of 'kiln %s'", name, cmd->name);
            if (optopt) return usage_error(c, "unknown option '-%c'", optopt);
            return usage_error(c, "unknown option '%s'", name);
        }
        if (id == ':') {
            const opt_def *o = find_opt(optopt);
            bool as_long = o && o->name && !strncmp(as_given, "--", 2);
            if (o && o->id < 256 && !as_long) return usage_error(c, "-%c needs %s", o->id, o->need);
            if (o && o->name) return usage_error(c, "--%s needs %s", o->name, o->need);
            return usage_error(c, "%s needs a value", as_given);
        }
        if (id == O_HELP) {
            print_command_help(cmd, stdout);
            return -1;
        }
        int rc = take_option(c, id, optarg);
        if (rc != EX_OK) return rc;
    }
    for (int i = optind; i < argc; i++) {
        if (npos == cmd->max_pos) return usage_error(c, "unexpected argument '%s'", argv[i]);
        pos[npos++] = argv[i];
    }
    if (npos < cmd->min_pos) {
        if (cmd->bit == C_CACHE) return usage_error(c, "'cache' needs ls, verify, clear or why FILE");
        if (cmd->bit == C_TUNE) return usage_error(c, "'tune' needs export FILE or import FILE");
        if (cmd->bit == C_RUN) return usage_error(c, "'run' needs a model file");
        return usage_error(c, "'%s' needs a model file", cmd->name);
    }
    c->file = npos > 0 ? pos[0] : NULL;
    c->arg2 = npos > 1 ? pos[1] : NULL;
    return EX_OK;
}

/* Reads standard input (FILE '-'). */
static char *read_stdin(void)
{
    size_t n = 0, cap = 1 << 16;
    char *b = malloc(cap);
    while (b) {
        if (n + 1 >= cap) {
            char *nb = cap < ((size_t)1 << 30) ? realloc(b, cap *= 2) : NULL;
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
        }
        size_t k = fread(b + n, 1, cap - n - 1, stdin);
        n += k;
        if (k == 0) break;
    }
    if (b) b[n] = 0;
    return b;
}

/* Parses argv into c; returns EX_OK, EX_USAGE, or -1 when help/version was
 * printed and the program should exit 0. */
static int parse_args(int argc, char **argv, cli *c, char **fixed)
{
    if (argc < 2) return usage_error(c, "no command given");
    const char *a = argv[1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help")) {
        if (argc > 2 && strcmp(a, "help") == 0) {
            if (!strcmp(argv[2], "generate")) {
                char *h[] = {"generate", "--help", NULL};
                (void)kiln_generate_command(2, h);
                return -1;
            }
            const command *cmd = find_command(argv[2]);
            if (!cmd) return usage_error(c, "unknown command '%s'", argv[2]);
            print_command_help(cmd, stdout);
            return -1;
        }
        print_usage(stdout);
        return -1;
    }
    if (!strcmp(a, "--version")) {
        char v[256];
        rt_versions(v, sizeof v);
        printf("kiln %s (%s)\n", KILN_VERSION, v);
        return -1;
    }
    if (a[0] == '-') return usage_error(c, "unknown option '%s' (the command comes first: kiln <command> [options])", a);
    c->cmd = a;
    if (!(c->command = find_command(a))) return usage_error(c, "unknown command '%s'", a);
    nvcc_spellings(argc - 1, argv + 1, fixed + 1);
    int rc = parse_command(argc - 1, argv + 1, c);
    if (rc != EX_OK) return rc;

    if (c->command->bit & (C_PASSES | C_CEILINGS | C_CACHE | C_TUNE)) return EX_OK;
    if (c->file && !strcmp(c->file, "-")) {
        if (!(c->stdin_text = read_stdin())) {
            fprintf(stderr, "kiln: cannot read standard input\n");
            return EX_NOINPUT;
        }
    }
    if (!strcmp(c->cmd, "run")) {
        if (!c->run.dims) return usage_error(c, "'run' needs --dims NAME=N,... for every dim of the model");
        if (c->run.weights && c->run.random) return usage_error(c, "--weights and --random exclude each other");
        c->run.file = c->file;
        c->run.text = c->stdin_text;
        c->run.defines = c->defines;
        c->run.ndefines = c->ndefines;
        c->run.disabled = c->disabled;
        c->run.ndisabled = c->ndisabled;
        c->run.enabled = c->enabled;
        c->run.nenabled = c->nenabled;
        if (!c->run.steps) c->run.steps = 1;
        return EX_OK;
    }
    if (c->arch && !rt_nvrtc_arch_valid(c->arch))
        return usage_error(c, "--arch must look like sm_90a, not '%s'", c->arch);
    if (c->arch && !cg_target_known(c->arch))
        return usage_error(c, "--arch=%s: Kiln's kernels target %s, not %s", c->arch, cg_target_archs(), c->arch);
    if (!c->emit) c->emit = "fused-ir";
    bool to_dir = !strcmp(c->emit, "cuda") || !strcmp(c->emit, "ptx") || !strcmp(c->emit, "cubin");
    if (strcmp(c->emit, "ir") && strcmp(c->emit, "ast") && strcmp(c->emit, "fused-ir") && strcmp(c->emit, "plan") &&
        strcmp(c->emit, "dot") && !to_dir)
        return usage_error(c, "--emit must be ast, ir, fused-ir, plan, dot, cuda, ptx or cubin, not '%s'", c->emit);
    if (to_dir && !c->out) return usage_error(c, "--emit=%s writes one file per kernel: give a directory with -o DIR", c->emit);
    return EX_OK;
}

static FILE *open_out(const cli *c, int *status)
{
    if (!c->out || !strcmp(c->out, "-")) return stdout;
    FILE *f = fopen(c->out, "w");
    if (!f) {
        fprintf(stderr, "kiln: cannot write '%s': %s\n", c->out, strerror(errno));
        *status = EX_CANTCREAT;
    }
    return f;
}

static int close_out(const cli *c, FILE *f)
{
    int bad = ferror(f);
    if (f != stdout) bad |= fclose(f);
    else bad |= fflush(f);
    if (bad) {
        fprintf(stderr, "kiln: error writing '%s'\n", c->out ? c->out : "standard output");
        return EX_CANTCREAT;
    }
    return EX_OK;
}

static int list_passes(void)
{
    kc_print_passes(stdout);
    return EX_OK;
}

/* --emit=cuda|ptx|cubin: one file per kernel into c->out. */
static int emit_kernels(const cli *c, const kc_unit *u)
{
    char err[8192];
    if (mkdir(c->out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kiln: cannot create '%s': %s\n", c->out, strerror(errno));
        return EX_CANTCREAT;
    }
    cg_target target;
    kc_tool_target(c->arch, &target);
    if (!strcmp(c->emit, "cuda")) {
        if (kc_write_sources(u, c->out, &target, err, sizeof err) < 0) {
            fprintf(stderr, "kiln: %s\n", err);
            return EX_CANTCREAT;
        }
        return EX_OK;
    }
    bool ptx = !strcmp(c->emit, "ptx");
    rt_cache *cache = NULL;
    if (!ptx && !c->no_cache && rt_cache_open(&cache, NULL) != RT_OK) cache = NULL;
    rt_compile_opts copts = {.arch = c->arch};
    rt_emit_options o = {.target = ptx ? RT_TARGET_PTX : RT_TARGET_CUBIN, .copts = &copts, .cache = cache,
                         .progress = kiln_tool_progress};
    rt_emit_result res;
    int n = kc_write_compiled(u, c->out, &target, &o, &res, err, sizeof err);
    char *w = cache ? rt_cache_take_warnings(cache) : NULL;
    if (w && *w) fprintf(stderr, "kiln: warning: %s\n", w);
    free(w);
    rt_cache_close(cache);
    if (n < 0) {
        fprintf(stderr, "kiln: %s%s\n", n == RT_EMIT_ERR_WRITE ? "cannot write " : "", err);
        return n == RT_EMIT_ERR_WRITE ? EX_CANTCREAT : EX_SOFTWARE;
    }
    int hits = 0;
    for (int i = 0; i < res.n; i++) {
        const rt_emit_kernel *k = &res.kernels[i];
        hits += k->how == RT_CACHE_HIT_MEMORY || k->how == RT_CACHE_HIT_DISK;
        if (k->log[0]) fprintf(stderr, "kiln: warning: kernel %s: %s\n", k->name, k->log);
        if (c->timings)
            fprintf(stderr, "  %-40s %-10s %8.2f ms\n", k->name,
                    k->how == RT_CACHE_HIT_MEMORY ? "memory hit" : k->how == RT_CACHE_HIT_DISK ? "disk hit" : "compiled",
                    k->ms);
    }
    if (c->timings) fprintf(stderr, "%d kernels in %.1f ms (%d from the cache)\n", res.n, res.total_ms, hits);
    rt_emit_result_free(&res);
    return EX_OK;
}

/* One line per entry: arch, key, size, last use, then what made the key. */
static bool print_entry(void *user, const rt_cache_entry *e)
{
    char when[64];
    struct tm tm;
    localtime_r(&e->mtime, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    printf("%-10s %s %10llu  %s", e->arch, e->hex, (unsigned long long)e->size, when);
    char what[2048];
    if (e->manifest && rt_cache_manifest_describe(e->manifest, what, sizeof what)) printf("  %s", what);
    else printf("  (%s)", e->problem ? e->problem : "no manifest");
    putchar('\n');
    (*(int *)user)++;
    return true;
}

static void print_problem(void *user, const char *path, const char *what)
{
    fprintf(stderr, "kiln cache: %s: %s\n", path, what);
    (*(int *)user)++;
}

static int cache_ls(rt_cache *cache, const cli *c)
{
    (void)c;
    int n = 0;
    if (rt_cache_list(cache, print_entry, &n) != RT_OK) {
        fprintf(stderr, "kiln: %s\n", rt_cache_error(cache));
        return EX_NOINPUT;
    }
    printf("%d entries in %s\n", n, rt_cache_dir(cache));
    return EX_OK;
}

static int cache_verify(rt_cache *cache, const cli *c)
{
    (void)c;
    rt_cache_verify_stats st;
    if (rt_cache_verify(cache, &st) != RT_OK) {
        fprintf(stderr, "kiln: %s\n", rt_cache_error(cache));
        return EX_NOINPUT;
    }
    printf("%llu entries ok (%llu bytes), %llu corrupt removed, %llu stale temp files removed, %llu other files left alone"
           ", %llu not checked, %llu not deletable\n",
           (unsigned long long)st.ok, (unsigned long long)st.bytes_ok, (unsigned long long)st.corrupt_removed,
           (unsigned long long)st.stale_temps_removed, (unsigned long long)st.other_files,
           (unsigned long long)st.unchecked, (unsigned long long)st.undeletable);
    return st.corrupt_removed || st.unchecked || st.undeletable ? EX_MODEL : EX_OK;
}

static int cache_clear(rt_cache *cache, const cli *c)
{
    (void)c;
    uint64_t removed = 0;
    if (rt_cache_clear(cache, &removed) != RT_OK) {
        fprintf(stderr, "kiln: %s\n", rt_cache_error(cache));
        return EX_CANTCREAT;
    }
    printf("removed %llu files from %s%s\n", (unsigned long long)removed, rt_cache_dir(cache),
           c->cache_problems ? " (files that are not Kiln's were left: listed above)" : "");
    return EX_OK;
}

/* kiln cache why FILE */
static int cache_why(rt_cache *cache, const cli *c)
{
    kc_options o = {.name = c->arg2, .defines = c->defines, .ndefines = c->ndefines, .disabled = c->disabled,
                    .ndisabled = c->ndisabled, .enabled = c->enabled, .nenabled = c->nenabled,
                    .warnings = c->warnings};
    kc_unit *u;
    char err[1024];
    rt_status st = kc_open(&o, stderr, &u, err, sizeof err);
    if (st != RT_OK) return st == RT_ERR_IO ? EX_NOINPUT : EX_SOFTWARE;
    int status = EX_OK, misses = 0;
    if ((st = kc_parse(u, err, sizeof err)) != RT_OK) status = st == RT_ERR_MODEL ? EX_MODEL : EX_SOFTWARE;
    else if ((st = kc_fuse(u, err, sizeof err)) != RT_OK) status = st == RT_ERR_INVALID ? EX_USAGE : EX_SOFTWARE;
    else {
        cg_target target;
        kc_tool_target(c->arch, &target);
        rt_compile_opts copts = {.arch = c->arch};
        if (kc_cache_why(u, &target, cache, &copts, stdout, &misses, err, sizeof err) != RT_OK) {
            fprintf(stderr, "kiln: %s\n", err);
            status = EX_SOFTWARE;
        }
    }
    kc_free(u);
    return status;
}

/* `kiln cache SUB [ARG]`: one row per subcommand (its argument in c->arg2) */
static const struct cache_sub {
    const char *name;
    const char *arg; /* NULL: takes none */
    int (*fn)(rt_cache *cache, const cli *c);
} cache_subs[] = {
    {"ls", NULL, cache_ls},
    {"verify", NULL, cache_verify},
    {"clear", NULL, cache_clear},
    {"why", "a model file", cache_why},
};

/* The kernel cache with its disk directory, or NULL after saying why not. */
static rt_cache *open_disk_cache(void)
{
    rt_cache *cache = NULL;
    if (rt_cache_open(&cache, NULL) != RT_OK || !rt_cache_disk_enabled(cache)) {
        char *w = cache ? rt_cache_take_warnings(cache) : NULL;
        fprintf(stderr, "kiln: the kernel cache directory is not usable%s%s\n", w ? ": " : "", w ? w : "");
        free(w);
        rt_cache_close(cache);
        return NULL;
    }
    return cache;
}

static int cache_cmd(cli *c)
{
    const struct cache_sub *sub = NULL;
    for (size_t i = 0; i < sizeof cache_subs / sizeof cache_subs[0]; i++)
        if (!strcmp(c->file, cache_subs[i].name)) sub = &cache_subs[i];
    if (!sub) return usage_error(c, "'cache' needs ls, verify, clear or why FILE, not '%s'", c->file);
    if (!sub->arg && c->arg2) return usage_error(c, "unexpected argument '%s'", c->arg2);
    if (sub->arg && !c->arg2) return usage_error(c, "'cache %s' needs %s", sub->name, sub->arg);
    rt_cache *cache = open_disk_cache();
    if (!cache) return EX_CANTCREAT;
    rt_cache_set_problem_fn(cache, print_problem, &c->cache_problems); /* read by cache_clear */
    int status = sub->fn(cache, c);
    rt_cache_close(cache);
    return status;
}

/* `kiln tune export|import FILE`: the autotuned choices of the cache directory. */
static int tune_cmd(cli *c)
{
    const bool exp = !strcmp(c->file, "export");
    if (!exp && strcmp(c->file, "import")) return usage_error(c, "'tune' needs export FILE or import FILE, not '%s'", c->file);
    rt_cache *cache = open_disk_cache();
    if (!cache) return EX_CANTCREAT;
    char err[1024];
    int count = 0, rejected = 0;
    rt_status st = exp ? rt_tune_export(cache, c->arg2, &count, err, sizeof err)
                       : rt_tune_import(cache, c->arg2, &count, &rejected, err, sizeof err);
    rt_cache_close(cache);
    if (st != RT_OK) {
        fprintf(stderr, "kiln: %s\n", err);
        return st == RT_ERR_IO ? (exp ? EX_CANTCREAT : EX_NOINPUT) : EX_MODEL;
    }
    if (exp) printf("%d choice%s written to %s\n", count, count == 1 ? "" : "s", c->arg2);
    else printf("%d choice%s imported from %s%s\n", count, count == 1 ? "" : "s", c->arg2,
                rejected ? " (some entries did not check and were rejected)" : "");
    if (rejected) fprintf(stderr, "kiln: %d entr%s of %s rejected\n", rejected, rejected == 1 ? "y" : "ies", c->arg2);
    return rejected ? EX_MODEL : EX_OK;
}

/* Runs the pipeline on the parsed unit and writes what was asked for. */
static int compile(const cli *c, kc_unit *u)
{
    int status = EX_OK;
    char err[1024];
    if (!strcmp(c->emit, "ir")) {
        FILE *out = open_out(c, &status);
        if (out) {
            ir_print(kc_written(u), out);
            status = close_out(c, out);
        }
        return status;
    }
    rt_status st = kc_fuse(u, err, sizeof err);
    if (st == RT_ERR_INVALID) return EX_USAGE;
    if (st != RT_OK) return EX_SOFTWARE;
    const ir_graph *g = kc_fused(u);
    bool have_plan = false;
    if (!strcmp(c->emit, "plan") || c->report) {
        have_plan = kc_plan_memory(u, NULL, err, sizeof err) == RT_OK;
        if (!have_plan && !strcmp(c->emit, "plan")) {
            fprintf(stderr, "kiln: %s\n", err);
            return EX_USAGE;
        }
    }
    /* the templates the plan and the report name are chosen for the target */
    cg_target target;
    if (!strcmp(c->emit, "plan") || c->explain) kc_tool_target(c->arch, &target);
    if (!strcmp(c->emit, "cuda") || !strcmp(c->emit, "ptx") || !strcmp(c->emit, "cubin")) {
        status = emit_kernels(c, u);
        if (c->explain) {
            kc_print_report(u, stderr);
            fputc('\n', stderr);
            kc_print_templates(u, &target, stderr);
        }
        return status;
    }
    FILE *out = open_out(c, &status);
    if (!out) return status;
    if (!strcmp(c->emit, "plan")) {
        fprintf(out, "plan for model %s\n", g->name);
        kc_print_plan(u, &target, out);
    } else if (!strcmp(c->emit, "dot")) {
        kc_print_dot(u, out);
    } else {
        ir_print(g, out);
    }
    status = close_out(c, out);
    if (c->explain) {
        kc_print_report(u, stderr);
        fputc('\n', stderr);
        kc_print_templates(u, &target, stderr);
    }
    if (c->report && kc_write_report_json(u, c->report, err, sizeof err) != RT_OK) {
        fprintf(stderr, "kiln: %s\n", err);
        status = EX_CANTCREAT;
    }
    if (c->verify && kc_written(u)) {
        int64_t dims[IR_MAX_SYMS];
        for (int i = 0; i < IR_MAX_SYMS; i++) dims[i] = 4;
        kc_validation v;
        if (kc_validate(u, dims, &v, err, sizeof err) != RT_OK) {
            fprintf(stderr, "kiln: --verify: %s\n", err);
            status = EX_SOFTWARE;
        } else {
            bool ok = v.max_rel_err <= v.tolerance;
            fprintf(stderr, "verify: %s: %d outputs and states compared on random inputs; largest relative error %.3g (%s), tolerance %.0e\n",
                    ok ? "ok" : "FAILED", v.compared, v.max_rel_err, v.worst ? v.worst : "-", v.tolerance);
            fprintf(stderr, "verify: this checks the passes on the CPU interpreter (the IR as written against the "
                            "fused IR), not the generated kernels: `kiln run %s --check` runs those on a GPU "
                            "against the interpreter\n", c->file);
            if (!ok) status = EX_SOFTWARE;
        }
    }
    return status;
}

static int run(const cli *c)
{
    kc_options o = {.name = c->stdin_text ? "<stdin>" : c->file,
                    .text = c->stdin_text,
                    .defines = c->defines,
                    .ndefines = c->ndefines,
                    .disabled = c->disabled,
                    .ndisabled = c->ndisabled,
                    .enabled = c->enabled,
                    .nenabled = c->nenabled,
                    .print_before = c->print_before,
                    .print_after = c->print_after,
                    .print_after_all = c->print_all,
                    .dump = stderr,
                    .report = true,
                    .keep_written = c->verify,
                    .packed = c->packed,
                    .warnings = c->warnings};
    kc_unit *u;
    char err[1024];
    rt_status st = kc_open(&o, stderr, &u, err, sizeof err);
    if (st != RT_OK) return st == RT_ERR_IO ? EX_NOINPUT : EX_SOFTWARE;
    int status = EX_OK;
    if (!strcmp(c->cmd, "compile") && !strcmp(c->emit, "ast")) {
        FILE *out = open_out(c, &status);
        if (out) {
            st = kc_dump_ast(u, out, err, sizeof err);
            int cs = close_out(c, out);
            status = st != RT_OK ? EX_MODEL : cs;
        }
    } else if ((st = kc_parse(u, err, sizeof err)) != RT_OK) {
        status = st == RT_ERR_MODEL ? EX_MODEL : EX_SOFTWARE;
    } else if (!strcmp(c->cmd, "compile")) {
        status = compile(c, u);
    }
    kc_free(u);
    return status;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "generate")) return kiln_generate_command(argc - 1, argv + 1);
    cli c;
    memset(&c, 0, sizeof c);
    c.run.pos = -1;
    char **fixed = calloc((size_t)argc + 1, sizeof *fixed); /* argv rewritten for nvcc's spellings */
    int rc = fixed ? parse_args(argc, argv, &c, fixed) : EX_SOFTWARE;
    if (rc == EX_OK) {
        if (!strcmp(c.cmd, "passes")) rc = list_passes();
        else if (!strcmp(c.cmd, "cache")) rc = cache_cmd(&c);
        else if (!strcmp(c.cmd, "tune")) rc = tune_cmd(&c);
        else if (!strcmp(c.cmd, "run")) rc = kiln_run_command(&c.run);
        else if (!strcmp(c.cmd, "ceilings")) rc = kiln_ceilings_command(c.json, c.remeasure);
        else rc = run(&c);
    }
    for (int i = 0; fixed && i < argc; i++) free(fixed[i]);
    free(fixed);
    free(c.stdin_text);
    return rc == -1 ? EX_OK : rc;
}
