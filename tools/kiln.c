/* tools/kiln.c — the `kiln` command line. It parses arguments, calls the
 * library (the compile driver, src/compile.h, for everything from text to
 * kernels; the runtime for the kernel cache) and maps results to exit codes;
 * the logic lives in the library.
 *
 * Exit codes (sysexits.h style): 0 success; 1 errors in the model file;
 * 64 usage error; 66 input file unreadable; 70 internal error; 73 output
 * file not writable. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
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
#include "tools/kiln_run.h"

enum { EX_OK = 0, EX_MODEL = 1, EX_USAGE = 64, EX_NOINPUT = 66, EX_SOFTWARE = 70, EX_CANTCREAT = 73 };

static const char usage_text[] =
    "usage: kiln <command> [options] FILE\n"
    "\n"
    "commands:\n"
    "  check FILE               parse and type-check a model; print diagnostics\n"
    "  compile FILE             compile a model and write what --emit selects\n"
    "  run FILE --dims B=1,S=1,T=1024 [--weights W.safetensors | --random]\n"
    "           [--inputs IN.safetensors] [--outputs OUT.safetensors] [--steps N]\n"
    "           [--check] [--bench N] [--stats] [--seed N] [--no-graphs] [--no-pdl] [--pos=N]\n"
    "           [--profile [--profile-runs=N] [--trace=F.json] [--roofline=F.svg]\n"
    "            [--profile-json=F] [--peak-bw=TB/s] [--peak-flops=TFLOP/s]]\n"
    "                           run a model on the GPU: --steps runs N decode steps\n"
    "                           (the first output feeds the first input, positions\n"
    "                           advance; --pos sets every position input to N, else\n"
    "                           they are random); --check compares every output and\n"
    "                           state with the reference interpreter; --profile times\n"
    "                           every kernel inside N graph replays (CUPTI; default\n"
    "                           50) against its floor and writes a Chrome trace, a\n"
    "                           roofline and JSON on request; needs a CUDA device\n"
    "                           (exit 69)\n"
    "  ceilings [--json] [--remeasure]\n"
    "                           the device's read bandwidth and tensor rates, measured\n"
    "                           once and kept in the cache directory\n"
    "  passes                   list the passes and fusion rules, in pipeline order\n"
    "  cache ls|verify|clear    list, check (deleting corrupt entries) or empty the\n"
    "                           kernel cache ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln,\n"
    "                           else ~/.cache/kiln)\n"
    "\n"
    "options:\n"
    "  --emit=KIND              what `compile` writes: ast, ir (as written), fused-ir\n"
    "                           (after all passes, kernels marked [kN]; the default),\n"
    "                           plan (kernels and the memory plan; needs every dim bound),\n"
    "                           cuda, ptx or cubin (one file per kernel into the\n"
    "                           directory given by -o, plus kernels.txt)\n"
    "  --arch=SM                NVRTC target for ptx/cubin (default sm_90a)\n"
    "  --no-cache               compile every kernel, neither reading nor filling the cache\n"
    "  --timings                print per-kernel compile times and cache hits\n"
    "  -o OUT                   write to OUT instead of standard output\n"
    "  -D NAME=VALUE            bind a `dims` size or override a `const` (repeatable)\n"
    "  -Werror                  make warnings errors (check and compile then exit 1)\n"
    "  -Wno-NAME, -WNAME        turn the warning NAME off or on (NAME: unused-value,\n"
    "                           unused-param, stale-state, attention-layout, all)\n"
    "  --explain                print the fusion report: every kernel, every decision\n"
    "                           taken or refused, its rule, lines and bytes saved\n"
    "  --report=FILE.json       write the fusion report as JSON\n"
    "  --disable=NAME[,NAME]    turn off a pass or a fusion rule (see `kiln passes`)\n"
    "  --enable=NAME[,NAME]     turn on a rule that is off by default (norm-gemv)\n"
    "  --print-ir-before=PASS   dump the IR before PASS (to stderr)\n"
    "  --print-ir-after=PASS    dump the IR after PASS\n"
    "  --print-ir-after-all     dump the IR after every pass\n"
    "  --verify                 check the passes: run the CPU interpreter on the IR as\n"
    "                           written and on the fused IR, on random inputs, and report\n"
    "                           the largest relative error (dims not bound with -D take\n"
    "                           the value 4); the generated kernels are checked by\n"
    "                           `kiln run FILE --check` on a GPU\n"
    "  -h, --help               show this help\n"
    "  --version                show the versions of Kiln and its CUDA components\n"
    "\n"
    "exit status: 0 ok, 1 errors in the model (or a failed check), 64 usage,\n"
    "             66 unreadable input, 69 no CUDA device, 70 internal error,\n"
    "             73 unwritable output\n";

typedef struct cli {
    const char *cmd;
    const char *file;
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
    bool print_all, explain, verify;
    const char *arch;
    bool no_cache, timings;
    bool json, remeasure; /* ceilings */
    diag_options warnings; /* -Werror, -Wno-NAME */
    run_opts run;
} cli;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'kiln --help'.\n");
    return EX_USAGE;
}

static int add_define(cli *c, char *spec)
{
    char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) return usage_error("-D expects NAME=VALUE, got '%s'", spec);
    if (c->ndefines == (int)(sizeof c->defines / sizeof c->defines[0]))
        return usage_error("too many -D options (at most 64)%s", "");
    *eq = 0;
    c->defines[c->ndefines++] = (kc_define){spec, eq + 1};
    return EX_OK;
}

/* v is a whole number in lo..hi: into *out. */
static bool int_in(const char *v, long lo, long hi, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) return false;
    *out = (int)x;
    return true;
}

/* Parses argv into c; returns EX_OK, EX_USAGE, or -1 when help/version was
 * printed and the program should exit 0. */
static int parse_args(int argc, char **argv, cli *c)
{
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help")) {
            fputs(usage_text, stdout);
            return -1;
        } else if (!strcmp(a, "--version")) {
            char v[256];
            rt_versions(v, sizeof v);
            printf("kiln %s (%s)\n", KILN_VERSION, v);
            return -1;
        } else if (!strcmp(a, "--explain")) {
            c->explain = true;
        } else if (!strncmp(a, "--dims=", 7) || !strcmp(a, "--dims")) {
            if (!a[6] && ++i == argc) return usage_error("%s needs NAME=N,...", a);
            c->run.dims = a[6] ? a + 7 : argv[i];
        } else if (!strncmp(a, "--weights=", 10) || !strcmp(a, "--weights")) {
            if (!a[9] && ++i == argc) return usage_error("%s needs a file", a);
            c->run.weights = a[9] ? a + 10 : argv[i];
        } else if (!strncmp(a, "--inputs=", 9) || !strcmp(a, "--inputs")) {
            if (!a[8] && ++i == argc) return usage_error("%s needs a file", a);
            c->run.inputs = a[8] ? a + 9 : argv[i];
        } else if (!strncmp(a, "--outputs=", 10) || !strcmp(a, "--outputs")) {
            if (!a[9] && ++i == argc) return usage_error("%s needs a file", a);
            c->run.outputs = a[9] ? a + 10 : argv[i];
        } else if (!strncmp(a, "--steps=", 8) || !strcmp(a, "--steps") || !strncmp(a, "--bench=", 8) ||
                   !strcmp(a, "--bench") || !strncmp(a, "--seed=", 7) || !strcmp(a, "--seed")) {
            const char *eq = strchr(a, '=');
            if (!eq && ++i == argc) return usage_error("%s needs a number", a);
            const char *v = eq ? eq + 1 : argv[i];
            char *end;
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n < 0 || n > 1000000000) return usage_error("expected a number, got '%s'", v);
            if (!strncmp(a, "--steps", 7)) c->run.steps = (int)n;
            else if (!strncmp(a, "--bench", 7)) c->run.bench = (int)n;
            else c->run.seed = (uint64_t)n;
        } else if (!strcmp(a, "--random")) {
            c->run.random = true;
        } else if (!strcmp(a, "--check")) {
            c->run.check = true;
        } else if (!strcmp(a, "--stats")) {
            c->run.stats = true;
        } else if (!strncmp(a, "--pos=", 6)) {
            if (!int_in(a + 6, 0, 1000000000, &c->run.pos)) return usage_error("--pos expects a position >= 0, got '%s'", a + 6);
        } else if (!strcmp(a, "--profile")) {
            c->run.profile = true;
        } else if (!strncmp(a, "--profile-runs=", 15)) {
            if (!int_in(a + 15, 1, 100000, &c->run.profile_runs))
                return usage_error("--profile-runs expects 1..100000, got '%s'", a + 15);
            c->run.profile = true;
        } else if (!strncmp(a, "--trace=", 8) && a[8]) {
            c->run.trace = a + 8;
            c->run.profile = true;
        } else if (!strncmp(a, "--roofline=", 11) && a[11]) {
            c->run.roofline = a + 11;
            c->run.profile = true;
        } else if (!strncmp(a, "--profile-json=", 15) && a[15]) {
            c->run.profile_json = a + 15;
            c->run.profile = true;
        } else if (!strncmp(a, "--peak-bw=", 10) || !strncmp(a, "--peak-flops=", 13)) {
            bool bw = a[7] == 'b';
            const char *v = a + (bw ? 10 : 13);
            char *end;
            double x = strtod(v, &end);
            if (!*v || *end || !(x > 0) || x > 1e6) return usage_error("expected a positive number, got '%s'", v);
            if (bw) c->run.peak_bw = x * 1e12;
            else c->run.peak_flops = x * 1e12;
        } else if (!strcmp(a, "--json")) {
            c->json = true;
        } else if (!strcmp(a, "--remeasure")) {
            c->remeasure = true;
        } else if (!strcmp(a, "--no-graphs")) {
            c->run.no_graphs = true;
        } else if (!strcmp(a, "--no-pdl")) {
            c->run.no_pdl = true;
        } else if (!strcmp(a, "--no-cache")) {
            c->no_cache = true;
        } else if (!strcmp(a, "--timings")) {
            c->timings = true;
        } else if (!strncmp(a, "--arch=", 7)) {
            c->arch = a + 7;
        } else if (!strcmp(a, "--verify")) {
            c->verify = true;
        } else if (!strcmp(a, "--print-ir-after-all")) {
            c->print_all = true;
        } else if (!strncmp(a, "--print-ir-after=", 17)) {
            c->print_after = a + 17;
        } else if (!strncmp(a, "--print-ir-before=", 18)) {
            c->print_before = a + 18;
        } else if (!strncmp(a, "--report=", 9)) {
            c->report = a + 9;
        } else if (!strncmp(a, "--disable=", 10)) {
            for (char *t = strtok(a + 10, ","); t; t = strtok(NULL, ",")) {
                if (c->ndisabled == 64) return usage_error("too many --disable names%s", "");
                c->disabled[c->ndisabled++] = t;
            }
        } else if (!strncmp(a, "--enable=", 9)) {
            for (char *t = strtok(a + 9, ","); t; t = strtok(NULL, ",")) {
                if (c->nenabled == 64) return usage_error("too many --enable names%s", "");
                c->enabled[c->nenabled++] = t;
            }
        } else if (!strncmp(a, "--emit=", 7)) {
            c->emit = a + 7;
        } else if (!strcmp(a, "--emit")) {
            if (++i == argc) return usage_error("%s needs a value", a);
            c->emit = argv[i];
        } else if (!strcmp(a, "-o")) {
            if (++i == argc) return usage_error("%s needs a file name", a);
            c->out = argv[i];
        } else if (!strcmp(a, "-D")) {
            if (++i == argc) return usage_error("%s needs NAME=VALUE", a);
            if (add_define(c, argv[i]) != EX_OK) return EX_USAGE;
        } else if (!strncmp(a, "-D", 2)) {
            if (add_define(c, a + 2) != EX_OK) return EX_USAGE;
        } else if (!strncmp(a, "-W", 2)) {
            if (!diag_warning_flag(&c->warnings, a)) return usage_error("unknown warning option '%s'", a);
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (!c->cmd) {
            c->cmd = a;
        } else if (!c->file) {
            c->file = a;
        } else {
            return usage_error("unexpected argument '%s'", a);
        }
    }
    if (!c->cmd) return usage_error("no command given%s", "");
    if (strcmp(c->cmd, "check") && strcmp(c->cmd, "compile") && strcmp(c->cmd, "passes") &&
        strcmp(c->cmd, "cache") && strcmp(c->cmd, "run") && strcmp(c->cmd, "ceilings"))
        return usage_error("unknown command '%s'", c->cmd);
    if (!strcmp(c->cmd, "passes") || !strcmp(c->cmd, "ceilings"))
        return c->file ? usage_error("unexpected argument '%s'", c->file) : EX_OK;
    if (!strcmp(c->cmd, "cache")) {
        if (!c->file || (strcmp(c->file, "ls") && strcmp(c->file, "verify") && strcmp(c->file, "clear")))
            return usage_error("'cache' needs ls, verify or clear%s", "");
        return EX_OK;
    }
    if (!strcmp(c->cmd, "run")) {
        if (!c->file) return usage_error("'run' needs a model file%s", "");
        if (!c->run.dims) return usage_error("'run' needs --dims NAME=N,... for every dim of the model%s", "");
        if (c->run.weights && c->run.random) return usage_error("--weights and --random exclude each other%s", "");
        c->run.file = c->file;
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
        return usage_error("--arch must look like sm_90a, not '%s'", c->arch);
    if (!c->file) return usage_error("'%s' needs a model file", c->cmd);
    if (!c->emit) c->emit = "fused-ir";
    bool to_dir = !strcmp(c->emit, "cuda") || !strcmp(c->emit, "ptx") || !strcmp(c->emit, "cubin");
    if (strcmp(c->emit, "ir") && strcmp(c->emit, "ast") && strcmp(c->emit, "fused-ir") && strcmp(c->emit, "plan") &&
        !to_dir)
        return usage_error("--emit must be ast, ir, fused-ir, plan, cuda, ptx or cubin, not '%s'", c->emit);
    if (to_dir && !c->out) return usage_error("--emit=%s writes one file per kernel: give a directory with -o DIR", c->emit);
    if (!strcmp(c->cmd, "check") && c->out) return usage_error("'check' writes no output file%s", "");
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

static void progress(void *user, int done, int total, const char *name, double ms)
{
    if (!isatty(2)) return;
    fprintf(stderr, "\r\033[K[%d/%d] %s (%.0f ms)", done, total, name, ms);
    if (done == total) fputc('\n', stderr);
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
                         .progress = progress};
    rt_emit_result res;
    int n = kc_write_compiled(u, c->out, &target, &o, &res, err, sizeof err);
    char *w = cache ? rt_cache_take_warnings(cache) : NULL;
    if (w && *w) fprintf(stderr, "kiln: warning: %s\n", w);
    free(w);
    rt_cache_close(cache);
    if (n < 0) {
        fprintf(stderr, "kiln: %s\n", err);
        return EX_SOFTWARE;
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

static bool print_entry(void *user, const rt_cache_entry *e)
{
    char when[64];
    struct tm tm;
    localtime_r(&e->mtime, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    printf("%-10s %s %10llu  %s\n", e->arch, e->hex, (unsigned long long)e->size, when);
    (*(int *)user)++;
    return true;
}

/* kiln cache ls|verify|clear */
static int cache_cmd(const cli *c)
{
    rt_cache *cache = NULL;
    if (rt_cache_open(&cache, NULL) != RT_OK || !rt_cache_disk_enabled(cache)) {
        char *w = cache ? rt_cache_take_warnings(cache) : NULL;
        fprintf(stderr, "kiln: the kernel cache directory is not usable%s%s\n", w ? ": " : "", w ? w : "");
        free(w);
        rt_cache_close(cache);
        return EX_CANTCREAT;
    }
    int status = EX_OK;
    if (!strcmp(c->file, "ls")) {
        int n = 0;
        if (rt_cache_list(cache, print_entry, &n) != RT_OK) {
            fprintf(stderr, "kiln: %s\n", rt_cache_error(cache));
            status = EX_NOINPUT;
        } else {
            printf("%d entries in %s\n", n, rt_cache_dir(cache));
        }
    } else if (!strcmp(c->file, "verify")) {
        rt_cache_verify_stats st;
        if (rt_cache_verify(cache, &st) != RT_OK) {
            fprintf(stderr, "kiln: %s\n", rt_cache_error(cache));
            status = EX_NOINPUT;
        } else {
            printf("%llu entries ok (%llu bytes), %llu corrupt removed, %llu stale temp files removed, %llu other files left alone\n",
                   (unsigned long long)st.ok, (unsigned long long)st.bytes_ok, (unsigned long long)st.corrupt_removed,
                   (unsigned long long)st.stale_temps_removed, (unsigned long long)st.other_files);
            if (st.corrupt_removed) status = EX_MODEL;
        }
    } else {
        uint64_t removed = 0;
        if (rt_cache_clear(cache, &removed) != RT_OK) {
            fprintf(stderr, "kiln: %s\n", rt_cache_error(cache));
            status = EX_CANTCREAT;
        } else {
            printf("removed %llu files from %s\n", (unsigned long long)removed, rt_cache_dir(cache));
        }
    }
    rt_cache_close(cache);
    return status;
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
    kc_options o = {.name = c->file,
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
    cli c;
    memset(&c, 0, sizeof c);
    c.run.pos = -1;
    int rc = parse_args(argc, argv, &c);
    if (rc == -1) return EX_OK;
    if (rc != EX_OK) return rc;
    if (!strcmp(c.cmd, "passes")) return list_passes();
    if (!strcmp(c.cmd, "cache")) return cache_cmd(&c);
    if (!strcmp(c.cmd, "run")) return kiln_run_command(&c.run);
    if (!strcmp(c.cmd, "ceilings")) return kiln_ceilings_command(c.json, c.remeasure);
    return run(&c);
}
