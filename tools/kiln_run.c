/* tools/kiln_run.c — `kiln run FILE --dims B=1,S=1,T=1024 ...`.
 *
 * Runs a model on the GPU through include/kiln.h: weights from a safetensors
 * file or random (seeded), inputs from a file or random, states zeroed; N
 * steps feed the first output back as the first input and advance the
 * positions; --check runs the reference interpreter on the same host data
 * and compares every output and state; --bench times runs; --outputs saves
 * the last outputs. */
#define _POSIX_C_SOURCE 200809L
#include "tools/kiln_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln.h"
#include "runtime/rt_weights.h"

/* The largest value --dims takes: sizes are products of dims and must stay
 * far from int64 overflow (the plan checks the products themselves). */
#define KILN_RUN_DIM_MAX ((int64_t)1 << 31)

enum { EX_OK = 0, EX_MODEL = 1, EX_USAGE = 64, EX_NOINPUT = 66, EX_UNAVAILABLE = 69, EX_SOFTWARE = 70, EX_CANTCREAT = 73 };

/* ---- host values <-> storage bytes ----------------------------------------------- */

/* Storage bytes of a host tensor in dtype t. malloc'd. */
static void *to_bytes(const ir_tensor *t)
{
    int64_t n = ir_tensor_numel(t);
    void *b = malloc((size_t)n * (size_t)ir_dtype_size(t->dtype) + 1);
    if (!b) return NULL;
    for (int64_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case IR_F32: ((float *)b)[i] = t->f[i]; break;
        case IR_BF16: ((uint16_t *)b)[i] = ir_f32_to_bf16_bits(t->f[i]); break;
        case IR_F16: ((uint16_t *)b)[i] = ir_f32_to_f16_bits(t->f[i]); break;
        default: ((int32_t *)b)[i] = t->i[i]; break;
        }
    }
    return b;
}

static void from_bytes(ir_tensor *t, const void *b)
{
    int64_t n = ir_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case IR_F32: memcpy(&t->f[i], (const float *)b + i, 4); break;
        case IR_BF16: t->f[i] = ir_bf16_bits_to_f32(((const uint16_t *)b)[i]); break;
        case IR_F16: t->f[i] = ir_f16_bits_to_f32(((const uint16_t *)b)[i]); break;
        default: memcpy(&t->i[i], (const int32_t *)b + i, 4); break;
        }
    }
}

static uint64_t next_u64(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s) { return (float)((next_u64(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

/* ---- the command ------------------------------------------------------------------ */

typedef struct run {
    const run_opts *o;
    kc_unit *unit;        /* the model through the compile driver */
    const ir_graph *g;    /* the model as written: the interpreter's reference */
    int64_t dims[IR_MAX_SYMS];
    kiln_dim kdims[IR_MAX_SYMS];
    int nd;
    kiln_context *ctx;
    kiln_model *m;
    ir_tensor *host;      /* one per g->params: the interpreter's copy */
    void **dev;           /* device buffers of inputs and random weights */
    ir_tensor *outs;      /* interpreter outputs */
    void **dev_out;
    int status;
} run;

void kiln_tool_progress(void *user, int done, int total, const char *kernel, double ms)
{
    (void)user;
    if (!isatty(2)) return;
    fprintf(stderr, "\r\033[K[%d/%d] %s (%.0f ms)", done, total, kernel, ms);
    if (done == total) fputc('\n', stderr);
}

static int fail_api(run *r, const char *what, int code)
{
    fprintf(stderr, "kiln run: %s: %s\n", what, kiln_last_error());
    r->status = code;
    return code;
}

static int parse_dims(run *r)
{
    char *spec = strdup(r->o->dims ? r->o->dims : "");
    if (!spec) return EX_SOFTWARE;
    bool seen[IR_MAX_SYMS] = {false};
    int rc = EX_OK;
    for (char *t = strtok(spec, ","); t && rc == EX_OK; t = strtok(NULL, ",")) {
        char *eq = strchr(t, '=');
        char *end = NULL;
        errno = 0;
        long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
        if (eq && *(eq + 1) && !*end && (errno == ERANGE || v > KILN_RUN_DIM_MAX)) {
            fprintf(stderr, "kiln run: --dims: '%s' is out of range (at most %lld)\n", t, (long long)KILN_RUN_DIM_MAX);
            rc = EX_USAGE;
            break;
        }
        if (!eq || !*(eq + 1) || *end || v <= 0) {
            fprintf(stderr, "kiln run: --dims expects NAME=N,... with N >= 1, got '%s'\n", t);
            rc = EX_USAGE;
            break;
        }
        *eq = 0;
        int s = ir_graph_find_sym(r->g, t);
        if (s < 0) {
            fprintf(stderr, "kiln run: --dims: the model has no dim '%s'\n", t);
            rc = EX_USAGE;
            break;
        }
        if (seen[s]) {
            fprintf(stderr, "kiln run: --dims gives %s twice\n", t);
            rc = EX_USAGE;
            break;
        }
        r->dims[s] = v;
        seen[s] = true;
    }
    for (int i = 0; i < r->g->nsyms && rc == EX_OK; i++) {
        if (!seen[i]) {
            fprintf(stderr, "kiln run: --dims must give every dim of the model; missing %s\n", r->g->syms[i]);
            rc = EX_USAGE;
        }
        r->kdims[i] = (kiln_dim){r->g->syms[i], r->dims[i]};
    }
    r->nd = r->g->nsyms;
    free(spec);
    return rc;
}

static bool alloc_host(const ir_type *t, const int64_t *dims, ir_tensor *out)
{
    int64_t shape[IR_MAX_RANK];
    return ir_type_shape_at(t, dims, shape, NULL) && ir_tensor_alloc(out, t->dtype, t->rank, shape);
}

/* Fill host tensor t of parameter p from a safetensors file. */
static int from_file(const rt_st_file *f, const ir_node *p, ir_tensor *t)
{
    const rt_st_tensor *s = rt_st_find(f, p->name);
    if (!s) {
        fprintf(stderr, "kiln run: %s has no tensor '%s'\n", f->path, p->name);
        return EX_NOINPUT;
    }
    bool same = s->kiln_dtype && s->dtype == t->dtype && s->rank == t->rank;
    for (int i = 0; same && i < t->rank; i++) same = s->shape[i] == t->shape[i];
    if (!same) {
        char want[256];
        ir_type_print(&p->type, NULL, want, sizeof want);
        fprintf(stderr, "kiln run: %s: tensor '%s' is %s of rank %d, but the model declares %s (%s at these dims)\n",
                f->path, p->name, s->dtype_str, s->rank, want, ir_dtype_name(t->dtype));
        return EX_NOINPUT;
    }
    from_bytes(t, s->data);
    return EX_OK;
}

static void randomize(run *r, const ir_node *p, ir_tensor *t, uint64_t *seed)
{
    int64_t n = ir_tensor_numel(t);
    if (t->dtype == IR_I32) {
        int64_t hi = kc_i32_bound(r->g, p, r->dims, 16); /* random values stay small where nothing bounds them */
        for (int64_t i = 0; i < n; i++) t->i[i] = (int32_t)(hi > 0 ? next_u64(seed) % (uint64_t)hi : 0);
        return;
    }
    /* weights scaled by 1/sqrt(fan-in) so a layer keeps activations near 1;
     * gains of norms around 1 */
    float scale = 1.0f, shift = 0.0f;
    if (p->op == IR_OP_WEIGHT && t->rank >= 2) scale = 1.0f / sqrtf((float)t->shape[t->rank - 1]);
    if (p->op == IR_OP_WEIGHT && t->rank == 1) scale = 0.5f, shift = 1.0f;
    for (int64_t i = 0; i < n; i++) t->f[i] = ir_round_to(t->dtype, uniform(seed) * scale + shift);
}

static int upload(run *r, int i)
{
    ir_tensor *t = &r->host[i];
    size_t bytes = (size_t)ir_tensor_numel(t) * (size_t)ir_dtype_size(t->dtype);
    void *b = to_bytes(t);
    if (!b) return EX_SOFTWARE;
    if (!r->dev[i] && kiln_device_alloc(r->ctx, bytes, &r->dev[i]) != KILN_OK) {
        free(b);
        return fail_api(r, "device memory", EX_SOFTWARE);
    }
    kiln_status st = kiln_copy_to_device(r->ctx, r->dev[i], b, bytes);
    free(b);
    return st == KILN_OK ? EX_OK : fail_api(r, "upload", EX_SOFTWARE);
}

/* Device tensor -> host tensor of the same type. */
static int download(run *r, const void *dev, ir_tensor *t)
{
    size_t bytes = (size_t)ir_tensor_numel(t) * (size_t)ir_dtype_size(t->dtype);
    void *b = malloc(bytes + 1);
    if (!b) return EX_SOFTWARE;
    if (kiln_copy_to_host(r->ctx, b, dev, bytes) != KILN_OK) {
        free(b);
        return fail_api(r, "download", EX_SOFTWARE);
    }
    from_bytes(t, b);
    free(b);
    return EX_OK;
}

static int check_step(run *r, int step)
{
    char err[1024];
    for (int i = 0; i < r->g->noutputs; i++) ir_tensor_free(&r->outs[i]);
    if (ir_interp_run(r->g, r->dims, r->host, r->outs, err, sizeof err) != 0) {
        fprintf(stderr, "kiln run: --check: the interpreter failed: %s\n", err);
        return EX_SOFTWARE;
    }
    double tol = kc_tolerance(r->g), worst = 0;
    for (int i = 0; i < r->g->noutputs; i++) {
        ir_tensor got;
        if (!ir_tensor_alloc(&got, r->outs[i].dtype, r->outs[i].rank, r->outs[i].shape)) return EX_SOFTWARE;
        int rc = download(r, r->dev_out[i], &got);
        double e = rc == EX_OK ? ir_tensor_rel_err(&r->outs[i], &got) : INFINITY;
        ir_tensor_free(&got);
        if (rc != EX_OK) return rc;
        printf("check step %d: output %-8s relative error %.3g\n", step, r->g->outputs[i].name, e);
        if (!(e <= worst)) worst = e;
    }
    for (int i = 0; i < r->g->nstates; i++) {
        const ir_node *s = r->g->states[i].state;
        void *ptr;
        size_t bytes;
        if (kiln_model_state_ptr(r->m, s->name, &ptr, &bytes) != KILN_OK) return fail_api(r, "state", EX_SOFTWARE);
        ir_tensor got;
        const ir_tensor *want = &r->host[s->param];
        if (!ir_tensor_alloc(&got, want->dtype, want->rank, want->shape)) return EX_SOFTWARE;
        int rc = download(r, ptr, &got);
        double e = rc == EX_OK ? ir_tensor_rel_err(want, &got) : INFINITY;
        ir_tensor_free(&got);
        if (rc != EX_OK) return rc;
        printf("check step %d: state  %-8s relative error %.3g\n", step, s->name, e);
        if (!(e <= worst)) worst = e;
    }
    if (!(worst <= tol)) {
        printf("check: FAILED (tolerance %.0e)\n", tol);
        return EX_MODEL;
    }
    return EX_OK;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int do_run(run *r, kiln_tensor_arg *ins, int nin, kiln_tensor_arg *outs, int nout)
{
    if (kiln_model_run(r->m, r->kdims, r->nd, ins, nin, outs, nout, NULL) != KILN_OK ||
        kiln_model_sync(r->m) != KILN_OK)
        return fail_api(r, "run", EX_SOFTWARE);
    return EX_OK;
}

int kiln_run_command(const run_opts *o)
{
    run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    rt_st_file weights_file = {0}, inputs_file = {0};
    bool weights_open = false, inputs_open = false;
    char err[1024];
    int rc = EX_OK;
    kiln_tensor_arg *ins = NULL, *outs = NULL;
    int nin = 0, nout = 0;

    kc_options ko = {.name = o->text ? "<stdin>" : o->file, .text = o->text, .defines = o->defines, .ndefines = o->ndefines};
    if (kc_open(&ko, stderr, &r.unit, err, sizeof err) != RT_OK) {
        rc = EX_NOINPUT;
        goto done;
    }
    if (kc_parse(r.unit, err, sizeof err) != RT_OK) {
        rc = EX_MODEL;
        goto done;
    }
    r.g = kc_written(r.unit);
    if ((rc = parse_dims(&r)) != EX_OK) goto done;
    if (!o->weights && !o->random) {
        fprintf(stderr, "kiln run: give the weights: --weights FILE.safetensors, or --random\n");
        rc = EX_USAGE;
        goto done;
    }
    if (o->weights && rt_st_open(o->weights, &weights_file, err, sizeof err) != 0) {
        fprintf(stderr, "kiln run: %s\n", err);
        rc = EX_NOINPUT;
        goto done;
    }
    weights_open = o->weights != NULL;
    if (o->inputs && rt_st_open(o->inputs, &inputs_file, err, sizeof err) != 0) {
        fprintf(stderr, "kiln run: %s\n", err);
        rc = EX_NOINPUT;
        goto done;
    }
    inputs_open = o->inputs != NULL;

    kiln_context_options context_opts = {0};
    if (kiln_context_create(&r.ctx, &context_opts) != KILN_OK) {
        fprintf(stderr, "kiln run needs a CUDA device (kiln check and kiln compile work without one):\n  %s\n",
                kiln_last_error());
        rc = EX_UNAVAILABLE;
        goto done;
    }
    kiln_define model_defines[64];
    for (int i = 0; i < o->ndefines && i < 64; i++) model_defines[i] = (kiln_define){o->defines[i].name, o->defines[i].value};
    kiln_model_options model_opts = {.defines = model_defines, .ndefines = o->ndefines < 64 ? o->ndefines : 64,
                             .disabled = o->disabled, .ndisabled = o->ndisabled,
                             .enabled = o->enabled, .nenabled = o->nenabled,
                             .max_dims = r.kdims, .nmax_dims = r.nd, .no_graphs = o->no_graphs,
                             .no_pdl = o->no_pdl, .autotune = o->autotune, .progress = isatty(2) ? kiln_tool_progress : NULL};
    kiln_status cs = o->text ? kiln_model_compile_string(r.ctx, "<stdin>", o->text, &model_opts, &r.m)
                             : kiln_model_compile_file(r.ctx, o->file, &model_opts, &r.m);
    if (cs != KILN_OK) {
        rc = fail_api(&r, "compile", EX_MODEL);
        goto done;
    }
    const char *generic = NULL; /* the compile's warnings, and kernels of this run's variant on the generic template */
    if (*kiln_model_warnings(r.m)) fprintf(stderr, "%s\n", kiln_model_warnings(r.m));
    if (kiln_model_fallbacks(r.m, r.kdims, r.nd, &generic) != KILN_OK) {
        rc = fail_api(&r, "plan", EX_SOFTWARE);
        goto done;
    }
    fputs(generic, stderr);
    if (o->autotune) /* which implementation each matmul runs, and why (the large-shape variant) */
        for (int i = 0;; i++) {
            kiln_kernel_info ki;
            if (kiln_model_kernel(r.m, i, &ki) != KILN_OK) break;
            if (!strcmp(ki.template_file, "matmul_wgmma.cuh") || !strcmp(ki.template_file, "cublasLt"))
                printf("autotune: %s: %s%s%s%s\n", ki.name, ki.config,
                       strstr(ki.config, "(autotuned)") ? "" : " (the rule's: nothing measured or stored)",
                       ki.implementation ? "; " : "", ki.implementation ? ki.implementation : "");
        }
    int np = r.g->nparams;
    r.host = calloc((size_t)np + 1, sizeof *r.host);
    r.dev = calloc((size_t)np + 1, sizeof *r.dev);
    r.outs = calloc((size_t)r.g->noutputs + 1, sizeof *r.outs);
    r.dev_out = calloc((size_t)r.g->noutputs + 1, sizeof *r.dev_out);
    ins = calloc((size_t)np + 1, sizeof *ins);
    outs = calloc((size_t)r.g->noutputs + 1, sizeof *outs);
    if (!r.host || !r.dev || !r.outs || !r.dev_out || !ins || !outs) {
        rc = EX_SOFTWARE;
        goto done;
    }
    uint64_t seed = o->seed;
    for (int i = 0; i < np && rc == EX_OK; i++) {
        const ir_node *p = r.g->params[i];
        if (!alloc_host(&p->type, r.dims, &r.host[i])) {
            fprintf(stderr, "kiln run: '%s' is too large at these dims\n", p->name);
            rc = EX_USAGE;
            break;
        }
        if (p->op == IR_OP_WEIGHT) {
            if (weights_open) rc = from_file(&weights_file, p, &r.host[i]);
            else randomize(&r, p, &r.host[i], &seed);
            if (rc == EX_OK && !weights_open) {
                rc = upload(&r, i);
                if (rc == EX_OK && kiln_model_bind_weight(r.m, p->name, r.dev[i]) != KILN_OK)
                    rc = fail_api(&r, "bind weight", EX_NOINPUT);
            }
        } else if (p->op == IR_OP_INPUT) {
            if (inputs_open) rc = from_file(&inputs_file, p, &r.host[i]);
            else randomize(&r, p, &r.host[i], &seed);
            if (rc == EX_OK && p->type.dtype == IR_I32 && o->steps > 1) /* decode from position 0 */
                memset(r.host[i].i, 0, (size_t)ir_tensor_numel(&r.host[i]) * sizeof(int32_t));
            if (rc == EX_OK && p->type.dtype == IR_I32 && o->pos >= 0 && !inputs_open) {
                int64_t hi = kc_i32_bound(r.g, p, r.dims, INT32_MAX);
                if (o->pos >= hi) {
                    fprintf(stderr, "kiln run: --pos=%d: '%s' must stay below %lld at these dims\n", o->pos, p->name,
                            (long long)hi);
                    rc = EX_USAGE;
                    break;
                }
                for (int64_t k = 0; k < ir_tensor_numel(&r.host[i]); k++) r.host[i].i[k] = o->pos;
            }
            if (rc == EX_OK) rc = upload(&r, i);
            ins[nin++] = (kiln_tensor_arg){p->name, r.dev[i]};
        }
    }
    if (rc != EX_OK) goto done;
    if (weights_open && kiln_model_load_safetensors(r.m, o->weights) != KILN_OK) {
        rc = fail_api(&r, "weights", EX_NOINPUT);
        goto done;
    }
    if (r.g->nstates && kiln_model_alloc_states(r.m) != KILN_OK) {
        rc = fail_api(&r, "states", EX_SOFTWARE);
        goto done;
    }
    for (int i = 0; i < r.g->noutputs; i++) {
        const ir_output *out = &r.g->outputs[i];
        if (!alloc_host(&out->value->type, r.dims, &r.outs[i])) {
            rc = EX_USAGE;
            goto done;
        }
        size_t bytes = (size_t)ir_tensor_numel(&r.outs[i]) * (size_t)ir_dtype_size(r.outs[i].dtype);
        if (kiln_device_alloc(r.ctx, bytes, &r.dev_out[i]) != KILN_OK) {
            rc = fail_api(&r, "device memory", EX_SOFTWARE);
            goto done;
        }
        outs[nout++] = (kiln_tensor_arg){out->name, r.dev_out[i]};
    }

    /* the first float input takes the first output back between steps */
    int feed_in = -1, pos_in = -1;
    for (int i = 0; i < np; i++) {
        const ir_node *p = r.g->params[i];
        if (p->op != IR_OP_INPUT) continue;
        if (p->type.dtype == IR_I32 && pos_in < 0) pos_in = i;
        if (p->type.dtype != IR_I32 && feed_in < 0 && r.g->noutputs && ir_type_eq(&p->type, &r.g->outputs[0].value->type))
            feed_in = i;
    }
    int steps = o->steps > 0 ? o->steps : 1;
    for (int step = 0; step < steps && rc == EX_OK; step++) {
        if (step > 0) {
            if (feed_in >= 0) {
                ir_tensor_free(&r.host[feed_in]);
                if ((rc = download(&r, r.dev_out[0], &r.outs[0])) != EX_OK) break;
                if (!ir_tensor_alloc(&r.host[feed_in], r.outs[0].dtype, r.outs[0].rank, r.outs[0].shape)) break;
                memcpy(r.host[feed_in].f, r.outs[0].f, (size_t)ir_tensor_numel(&r.outs[0]) * sizeof(float));
                if ((rc = upload(&r, feed_in)) != EX_OK) break;
            }
            if (pos_in >= 0) {
                int s = ir_graph_find_sym(r.g, "S");
                int64_t adv = s >= 0 ? r.dims[s] : 1;
                for (int64_t k = 0; k < ir_tensor_numel(&r.host[pos_in]); k++) r.host[pos_in].i[k] += (int32_t)adv;
                if ((rc = upload(&r, pos_in)) != EX_OK) break;
            }
        }
        if ((rc = do_run(&r, ins, nin, outs, nout)) != EX_OK) break;
        if (o->check) {
            int c = check_step(&r, step);
            if (c != EX_OK) rc = c;
        }
    }
    if (rc == EX_OK && o->profile) {
        kiln_profile_options po = {.runs = o->profile_runs, .peak_bw = o->peak_bw, .peak_flops = o->peak_flops,
                                   .json_path = o->profile_json, .trace_path = o->trace, .roofline_path = o->roofline};
        kiln_profile prof;
        kiln_status ps = kiln_model_profile(r.m, r.kdims, r.nd, ins, nin, outs, nout, &po, &prof);
        if (ps == KILN_OK) {
            fputs(prof.text, stdout);
            if (o->profile_json) printf("profile: JSON written to %s\n", o->profile_json);
            if (o->trace) printf("profile: Chrome trace written to %s (open it in ui.perfetto.dev)\n", o->trace);
            if (o->roofline) printf("profile: roofline written to %s\n", o->roofline);
        } else {
            rc = fail_api(&r, "profile", ps == KILN_ERR_IO ? EX_CANTCREAT : ps == KILN_ERR_NOT_FOUND ? EX_UNAVAILABLE : EX_SOFTWARE);
        }
    }
    if (rc == EX_OK && o->bench > 0) {
        double *t = calloc((size_t)o->bench, sizeof *t);
        for (int i = 0; t && i < o->bench && rc == EX_OK; i++) {
            double t0 = now_us();
            rc = do_run(&r, ins, nin, outs, nout);
            t[i] = now_us() - t0;
        }
        if (t && rc == EX_OK) {
            qsort(t, (size_t)o->bench, sizeof *t, cmp_double);
            printf("bench: %d runs, median %.1f us, min %.1f us (host clock around run + sync)\n", o->bench,
                   t[o->bench / 2], t[0]);
        }
        free(t);
    }
    if (rc == EX_OK && o->outputs) {
        kiln_host_tensor *ht = calloc((size_t)nout + 1, sizeof *ht);
        void **bufs = calloc((size_t)nout + 1, sizeof *bufs);
        for (int i = 0; ht && bufs && i < nout && rc == EX_OK; i++) {
            if ((rc = download(&r, r.dev_out[i], &r.outs[i])) != EX_OK) break;
            bufs[i] = to_bytes(&r.outs[i]);
            ht[i] = (kiln_host_tensor){r.g->outputs[i].name, (kiln_dtype)r.outs[i].dtype, r.outs[i].rank, {0}, bufs[i]};
            memcpy(ht[i].shape, r.outs[i].shape, sizeof r.outs[i].shape[0] * (size_t)r.outs[i].rank);
        }
        if (rc == EX_OK && kiln_safetensors_write(o->outputs, ht, nout) != KILN_OK)
            rc = fail_api(&r, "write outputs", EX_CANTCREAT);
        for (int i = 0; bufs && i < nout; i++) free(bufs[i]);
        free(bufs);
        free(ht);
    }
    if (o->stats && r.m) {
        kiln_counters c;
        if (kiln_model_counters(r.m, &c) == KILN_OK)
            printf("stats: kernels compiled %llu, cache hits %llu memory + %llu disk, variants %llu, runs %llu, "
                   "launches %llu, graph captures %llu, replays %llu, updates %llu, eager runs %llu, eager fallbacks %llu, "
                   "tma fallbacks %llu\n",
                   (unsigned long long)c.kernels_compiled, (unsigned long long)c.cache_hits_memory,
                   (unsigned long long)c.cache_hits_disk, (unsigned long long)c.variants, (unsigned long long)c.runs,
                   (unsigned long long)c.launches, (unsigned long long)c.graph_captures,
                   (unsigned long long)c.graph_replays, (unsigned long long)c.graph_updates,
                   (unsigned long long)c.eager_runs, (unsigned long long)c.eager_fallbacks,
                   (unsigned long long)c.tma_fallbacks);
    }
    if (rc == EX_OK) printf("ok: %d step%s of %s\n", steps, steps == 1 ? "" : "s", r.g->name);
done:
    if (r.status && rc == EX_OK) rc = r.status;
    kiln_model_free(r.m);
    for (int i = 0; r.g && r.dev && i < r.g->nparams; i++) kiln_device_free(r.ctx, r.dev[i]);
    for (int i = 0; r.g && r.dev_out && i < r.g->noutputs; i++) kiln_device_free(r.ctx, r.dev_out[i]);
    for (int i = 0; r.g && r.host && i < r.g->nparams; i++) ir_tensor_free(&r.host[i]);
    for (int i = 0; r.g && r.outs && i < r.g->noutputs; i++) ir_tensor_free(&r.outs[i]);
    kiln_context_free(r.ctx);
    free(r.host);
    free(r.dev);
    free(r.outs);
    free(r.dev_out);
    free(ins);
    free(outs);
    if (weights_open) rt_st_close(&weights_file);
    if (inputs_open) rt_st_close(&inputs_file);
    kc_free(r.unit);
    return rc;
}

int kiln_ceilings_command(bool json, bool remeasure)
{
    kiln_context *ctx;
    kiln_context_options co = {0};
    if (kiln_context_create(&ctx, &co) != KILN_OK) {
        fprintf(stderr, "kiln ceilings needs a CUDA device:\n  %s\n", kiln_last_error());
        return EX_UNAVAILABLE;
    }
    kiln_ceilings c;
    int rc = EX_OK;
    if (kiln_context_ceilings(ctx, remeasure, &c) != KILN_OK) {
        fprintf(stderr, "kiln ceilings: %s\n", kiln_last_error());
        rc = EX_SOFTWARE;
    } else if (json) {
        printf("%s\n", c.json);
    } else {
        printf("device:         %s\n", c.device);
        printf("read bandwidth: %.2f TB/s (streaming read of 2 GiB)\n", c.read_bw / 1e12);
        printf("bf16 tensor:    %.0f TFLOP/s (cuBLAS 8192^3, sustained >= 100 ms)\n", c.bf16_flops / 1e12);
        printf("f16 tensor:     %.0f TFLOP/s\n", c.f16_flops / 1e12);
        printf("measured:       %s (%s%s)\n", c.measured, c.from_cache ? "read from " : "now; kept in ",
               c.path[0] ? c.path : "no cache directory");
    }
    kiln_context_free(ctx);
    return rc;
}
