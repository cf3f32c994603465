/* tests/api/test_api_cpu.c — the public API without a GPU (label none).
 *
 * Checks: misuse (NULL arguments, unknown names, bad dims) comes back as a
 * status plus a message, never a crash; model errors carry the
 * file:line:col diagnostics; a successful compile keeps its warnings
 * (kiln_model_warnings); introspection of the samples; weight binding
 * errors (unknown name, not a weight, wrong dtype, wrong shape); safetensors
 * validation on crafted files (truncated, header too long, bad JSON, wrong
 * dtype, wrong shape, offsets out of range or inconsistent, overlapping,
 * missing and unknown tensors) and a fuzz of truncations and byte flips;
 * the host evaluation of bind-time (packed) weights equals what the
 * interpreter computes for the same IR nodes; the last error is per thread.
 * Everything here runs on a compile_only context; on a machine with a GPU
 * the device-only steps are skipped or checked for success. */
#include "api_util.h"

#include <pthread.h>

#include "check.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/pass.h"
#include "runtime/rt_pack.h"
#include "runtime/rt_weights.h"

static kiln_context *ctx;

static const kiln_dim MAXD[] = {{"B", 2}, {"S", 8}, {"T", 32}};

static kiln_model *compile_sample(const api_sample *s, int lazy)
{
    kiln_model_options o = {.defines = s->defines, .ndefines = s->ndefines, .max_dims = MAXD,
                            .nmax_dims = s->has_cache ? 3 : 2, .lazy = lazy};
    kiln_model *m = NULL;
    kiln_status st = kiln_model_compile_file(ctx, s->path, &o, &m);
    CHECK_MSG(st == KILN_OK, "%s: %s: %s", s->path, kiln_status_str(st), kiln_last_error());
    return m;
}

/* ---- misuse ------------------------------------------------------------------------- */

static void test_null_args(void)
{
    CHECK(kiln_context_create(NULL, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(api_contains(kiln_last_error(), "NULL"));
    kiln_model *m = (kiln_model *)1;
    CHECK(kiln_model_compile_file(NULL, "x.kiln", NULL, &m) == KILN_ERR_INVALID_ARGUMENT && m == NULL);
    CHECK(kiln_model_compile_file(ctx, NULL, NULL, &m) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_compile_string(ctx, "a", NULL, NULL, &m) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_compile_string(ctx, "a", "model m {}", NULL, NULL) == KILN_ERR_INVALID_ARGUMENT);
    kiln_model_options bad = {.ndefines = 2};
    CHECK(kiln_model_compile_string(ctx, "a", "x", &bad, &m) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_bind_weight(NULL, "w", NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_load_safetensors(NULL, "w") == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_alloc_states(NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_run(NULL, NULL, 0, NULL, 0, NULL, 0, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(api_contains(kiln_last_error(), "kiln_model_run: NULL model"));
    CHECK(kiln_model_counters(NULL, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_model_state_ptr(NULL, "kc", NULL, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_safetensors_write(NULL, NULL, 0) == KILN_ERR_INVALID_ARGUMENT);
    kiln_model_free(NULL);
    kiln_context_free(NULL);
    CHECK(kiln_model_num_dims(NULL) == 0 && kiln_model_dim_name(NULL, 0) == NULL);
    CHECK(strcmp(kiln_status_str(KILN_ERR_NO_DEVICE), "no CUDA device") == 0);
    CHECK(kiln_dtype_size(KILN_BF16) == 2 && strcmp(kiln_dtype_name(KILN_I32), "i32") == 0);
}

static void test_context(void)
{
    kiln_context *c = NULL;
    kiln_status st = kiln_context_create(&c, NULL);
    if (st == KILN_OK) {
        CHECK(kiln_context_has_device(c));
        printf("note: a CUDA device is present (arch %s)\n", kiln_context_arch(c));
        kiln_context_free(c);
    } else {
        CHECK_MSG(st == KILN_ERR_NO_DEVICE, "%s", kiln_last_error());
        CHECK(c == NULL);
        CHECK_MSG(api_contains(kiln_last_error(), "no CUDA device"), "%s", kiln_last_error());
    }
    kiln_context_options o = {.compile_only = 1, .arch = "not an arch"};
    CHECK(kiln_context_create(&c, &o) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(api_contains(kiln_last_error(), "not an arch"));
    CHECK(strcmp(kiln_context_arch(ctx), "sm_90a") == 0 || kiln_context_has_device(ctx));
}

/* ---- compile errors ------------------------------------------------------------------ */

static void test_compile_errors(void)
{
    kiln_model *m = NULL;
    const char *bad = "model m {\n  dims B\n  input x : f32[B, 4]\n  output y = x +* x\n}\n";
    kiln_dim md[] = {{"B", 4}};
    kiln_model_options o = {.max_dims = md, .nmax_dims = 1, .lazy = 1};
    kiln_status st = kiln_model_compile_string(ctx, "bad.kiln", bad, &o, &m);
    CHECK(st == KILN_ERR_MODEL && m == NULL);
    CHECK_MSG(api_contains(kiln_last_error(), "bad.kiln:4:"), "%s", kiln_last_error());
    CHECK(api_contains(kiln_last_error(), "error:"));
    CHECK_MSG(api_contains(kiln_last_error(), "^"), "caret line: %s", kiln_last_error());
    CHECK(api_contains(kiln_context_last_error(ctx), "bad.kiln:4:"));

    const char *unk = "model m {\n  dims B\n  input x : f32[B, 4]\n  output y = x + zz\n}\n";
    CHECK(kiln_model_compile_string(ctx, "unk.kiln", unk, &o, &m) == KILN_ERR_MODEL);
    CHECK_MSG(api_contains(kiln_last_error(), "unk.kiln:4:18: error:"), "%s", kiln_last_error());

    CHECK(kiln_model_compile_file(ctx, "no/such/file.kiln", &o, &m) == KILN_ERR_IO);
    CHECK_MSG(api_contains(kiln_last_error(), "no/such/file.kiln"), "%s", kiln_last_error());

    const char *ok = "model m {\n  dims B\n  input x : f32[B, 4]\n  output y = x * 2.0\n}\n";
    kiln_model_options nomax = {.lazy = 1};
    CHECK(kiln_model_compile_string(ctx, "ok.kiln", ok, &nomax, &m) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(api_contains(kiln_last_error(), "no value for dim 'B'"), "%s", kiln_last_error());
    kiln_dim wrong[] = {{"B", 4}, {"Q", 2}};
    kiln_model_options o2 = {.max_dims = wrong, .nmax_dims = 2, .lazy = 1};
    CHECK(kiln_model_compile_string(ctx, "ok.kiln", ok, &o2, &m) == KILN_ERR_NOT_FOUND);
    CHECK(api_contains(kiln_last_error(), "'Q'"));
    kiln_dim zero[] = {{"B", 0}};
    kiln_model_options o3 = {.max_dims = zero, .nmax_dims = 1, .lazy = 1};
    CHECK(kiln_model_compile_string(ctx, "ok.kiln", ok, &o3, &m) == KILN_ERR_INVALID_ARGUMENT);
    const char *dis[] = {"no-such-pass"};
    kiln_model_options o4 = {.max_dims = md, .nmax_dims = 1, .lazy = 1, .disabled = dis, .ndisabled = 1};
    CHECK(kiln_model_compile_string(ctx, "ok.kiln", ok, &o4, &m) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(api_contains(kiln_last_error(), "no-such-pass"), "%s", kiln_last_error());
    kiln_define defs[] = {{"NOPE", "3"}};
    kiln_model_options o5 = {.max_dims = md, .nmax_dims = 1, .lazy = 1, .defines = defs, .ndefines = 1};
    CHECK(kiln_model_compile_string(ctx, "ok.kiln", ok, &o5, &m) == KILN_ERR_MODEL);
    CHECK_MSG(api_contains(kiln_last_error(), "NOPE"), "%s", kiln_last_error());
    CHECK(kiln_model_compile_string(ctx, "ok.kiln", ok, &o, &m) == KILN_OK);
    CHECK_MSG(!strcmp(kiln_model_warnings(m), ""), "warnings of a clean model: %s", kiln_model_warnings(m));
    kiln_model_free(m);
}

/* ---- warnings: kept with the model, not dropped with a successful compile ------------ */

static void test_warnings(void)
{
    const char *text = "model m {\n  dims B\n  input x : f32[B, 4]\n  weight w : f32[4]\n"
                       "  t = x + 1.0\n  output y = x * 2.0\n}\n";
    kiln_dim md[] = {{"B", 4}};
    kiln_model_options o = {.max_dims = md, .nmax_dims = 1, .lazy = 1};
    kiln_model *m = NULL;
    CHECK_MSG(kiln_model_compile_string(ctx, "warn.kiln", text, &o, &m) == KILN_OK, "%s", kiln_last_error());
    if (!m) return;
    const char *w = kiln_model_warnings(m);
    CHECK_MSG(api_contains(w, "warn.kiln:4:10: warning: weight 'w' is declared but never read [-Wunused-param]"), "%s", w);
    CHECK_MSG(api_contains(w, "warn.kiln:5:3: warning:") && api_contains(w, "[-Wunused-value]"), "%s", w);
    CHECK_MSG(api_contains(w, "^"), "caret line: %s", w);
    kiln_model_free(m);
    CHECK(!strcmp(kiln_model_warnings(NULL), ""));

    /* chosen as on the command line: one kind off, all off, -Werror fails, later flags win */
    const char *no_param[] = {"-Wno-unused-param"};
    o.warning_flags = no_param;
    o.nwarning_flags = 1;
    CHECK(kiln_model_compile_string(ctx, "warn.kiln", text, &o, &m) == KILN_OK);
    if (m) {
        w = kiln_model_warnings(m);
        CHECK_MSG(!api_contains(w, "unused-param") && api_contains(w, "[-Wunused-value]"), "%s", w);
        kiln_model_free(m);
    }
    const char *none[] = {"-Wno-all"};
    o.warning_flags = none;
    CHECK(kiln_model_compile_string(ctx, "warn.kiln", text, &o, &m) == KILN_OK);
    if (m) {
        CHECK(!strcmp(kiln_model_warnings(m), ""));
        kiln_model_free(m);
    }
    const char *werror[] = {"-Werror"};
    o.warning_flags = werror;
    m = (kiln_model *)1;
    CHECK(kiln_model_compile_string(ctx, "warn.kiln", text, &o, &m) == KILN_ERR_MODEL && m == NULL);
    CHECK_MSG(api_contains(kiln_last_error(), "warn.kiln:4:10: error: weight 'w' is declared but never read "
                                              "[-Werror=unused-param]"), "%s", kiln_last_error());
    const char *werror_off[] = {"-Werror", "-Wno-unused-value", "-Wno-unused-param"};
    o.warning_flags = werror_off;
    o.nwarning_flags = 3;
    CHECK_MSG(kiln_model_compile_string(ctx, "warn.kiln", text, &o, &m) == KILN_OK, "%s", kiln_last_error());
    if (m) kiln_model_free(m);
    const char *bad[] = {"-Wno-such-thing"};
    o.warning_flags = bad;
    o.nwarning_flags = 1;
    CHECK(kiln_model_compile_string(ctx, "warn.kiln", text, &o, &m) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(api_contains(kiln_last_error(), "-Wno-such-thing"), "%s", kiln_last_error());
    o.warning_flags = NULL;
    CHECK(kiln_model_compile_string(ctx, "warn.kiln", text, &o, &m) == KILN_ERR_INVALID_ARGUMENT);
}

/* ---- the generic-template warnings of the variant a run uses ----------------------------- */

static void test_fallbacks(void)
{
    kiln_dim md[] = {{"B", 2}, {"S", 8}, {"T", 16}};
    kiln_model_options o = {.max_dims = md, .nmax_dims = 3, .lazy = 1};
    kiln_model *m = NULL;
    CHECK_MSG(kiln_model_compile_file(ctx, "tests/cli/attention_hd16.kiln", &o, &m) == KILN_OK, "%s", kiln_last_error());
    if (!m) return;
    const char *t = NULL;
    kiln_dim decode[] = {{"B", 1}, {"S", 1}};
    /* the large-shape variant (max dims) falls back; a decode-shaped one takes the decode template */
    CHECK(kiln_model_fallbacks(m, NULL, 0, &t) == KILN_OK);
    CHECK_MSG(api_contains(t, "warning: kernel k0 (attention, attention 'a' (line 10)) runs the generic elementwise "
                              "template, not the attention one: attention: the templates take head dimension 64 or 128"),
              "%s", t);
    CHECK(kiln_model_fallbacks(m, decode, 2, &t) == KILN_OK);
    CHECK_MSG(!strcmp(t, ""), "%s", t);
    kiln_dim bad[] = {{"B", 3}};
    CHECK(kiln_model_fallbacks(m, bad, 1, &t) == KILN_ERR_INVALID_ARGUMENT && !strcmp(t, ""));
    kiln_model_free(m);
    m = compile_sample(&API_SAMPLES[0], 1); /* bf16, head dimension 64: every kernel on its template */
    if (m) {
        CHECK(kiln_model_fallbacks(m, NULL, 0, &t) == KILN_OK && !strcmp(t, ""));
        CHECK(kiln_model_fallbacks(m, decode, 2, &t) == KILN_OK && !strcmp(t, ""));
        kiln_model_free(m);
    }
}

/* ---- introspection, binding and run errors (llama 1B shrunk) --------------------------- */

static void test_llama_api(void)
{
    kiln_model *m = compile_sample(&API_SAMPLES[0], 1);
    if (!m) return;
    CHECK(kiln_model_num_dims(m) == 3);
    CHECK(!strcmp(kiln_model_dim_name(m, 2), "T") && kiln_model_max_dim(m, 2) == 32);
    CHECK(kiln_model_num_tensors(m, KILN_INPUT) == 2 && kiln_model_num_tensors(m, KILN_OUTPUT) == 1);
    CHECK(kiln_model_num_tensors(m, KILN_WEIGHT) == 9 && kiln_model_num_tensors(m, KILN_STATE) == 2);
    CHECK(kiln_model_num_kernels(m) > 0);
    kiln_tensor_info ti;
    kiln_dim d[] = {{"B", 2}, {"S", 5}};
    CHECK(kiln_model_find_tensor(m, "x", d, 2, &ti) == KILN_OK);
    CHECK(ti.dtype == KILN_BF16 && ti.rank == 3 && ti.shape[0] == 2 && ti.shape[1] == 5 && ti.shape[2] == 256);
    CHECK(ti.bytes == 2 * 5 * 256 * 2 && ti.kind == KILN_INPUT && !strcmp(ti.type, "bf16[B, S, 256]"));
    CHECK(kiln_model_find_tensor(m, "kc", NULL, 0, &ti) == KILN_OK && ti.kind == KILN_STATE);
    CHECK(ti.shape[0] == 2 && ti.shape[1] == 2 && ti.shape[2] == 32 && ti.shape[3] == 64);
    CHECK(kiln_model_tensor(m, KILN_OUTPUT, 0, NULL, 0, &ti) == KILN_OK && !strcmp(ti.name, "y"));
    CHECK(kiln_model_tensor(m, KILN_WEIGHT, 1, NULL, 0, &ti) == KILN_OK && !strcmp(ti.name, "wq"));
    CHECK(ti.shape[0] == 256 && ti.shape[1] == 256);
    CHECK(kiln_model_tensor(m, KILN_WEIGHT, 99, NULL, 0, &ti) == KILN_ERR_NOT_FOUND);
    CHECK(kiln_model_find_tensor(m, "nope", NULL, 0, &ti) == KILN_ERR_NOT_FOUND);
    kiln_dim bad[] = {{"B", 3}};
    CHECK(kiln_model_find_tensor(m, "x", bad, 1, &ti) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(api_contains(kiln_last_error(), "B=3 is outside 1..2"), "%s", kiln_last_error());
    CHECK(api_contains(kiln_model_last_error(m), "B=3"));
    const char *desc = kiln_model_describe(m);
    CHECK(api_contains(desc, "memory plan") && api_contains(desc, "large-shape"));

    /* binding */
    CHECK(kiln_model_bind_weight(m, "wz", (void *)16) == KILN_ERR_NOT_FOUND);
    CHECK_MSG(api_contains(kiln_last_error(), "no weight 'wz'") && api_contains(kiln_last_error(), "wq"), "%s",
              kiln_last_error());
    CHECK(kiln_model_bind_weight(m, "x", (void *)16) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(api_contains(kiln_last_error(), "'x' is an input"), "%s", kiln_last_error());
    int64_t shp[] = {256, 128};
    CHECK(kiln_model_bind_weight_checked(m, "wq", KILN_F32, 2, shp, (void *)16) == KILN_ERR_WEIGHTS);
    CHECK_MSG(api_contains(kiln_last_error(), "dtype f32 but the model declares wq : bf16[256, 256] (samples/llama3_1b_layer.kiln:21)"),
              "%s", kiln_last_error());
    CHECK(kiln_model_bind_weight_checked(m, "wq", KILN_BF16, 2, shp, (void *)16) == KILN_ERR_WEIGHTS);
    CHECK_MSG(api_contains(kiln_last_error(), "shape [256, 128] but the model declares wq : bf16[256, 256]"), "%s",
              kiln_last_error());
    CHECK(kiln_model_bind_weight_checked(m, "wq", KILN_BF16, 1, shp, (void *)16) == KILN_ERR_WEIGHTS);
    if (!kiln_context_has_device(ctx)) {
        int64_t good[] = {256, 256};
        CHECK(kiln_model_bind_weight_checked(m, "wq", KILN_BF16, 2, good, (void *)16) == KILN_ERR_NO_DEVICE);
        CHECK(kiln_model_alloc_states(m) == KILN_ERR_NO_DEVICE);
        CHECK(api_contains(kiln_last_error(), "no CUDA device"));
    }
    void *sp;
    CHECK(kiln_model_state_ptr(m, "nope", &sp, NULL) == KILN_ERR_NOT_FOUND);
    CHECK(kiln_model_state_ptr(m, "kc", &sp, NULL) == KILN_ERR_STATE && sp == NULL);

    /* run errors, all found before the device is touched */
    kiln_dim rd[] = {{"B", 2}, {"S", 1}, {"T", 32}};
    kiln_tensor_arg in[] = {{"x", (void *)16}, {"pos", (void *)32}}, out[] = {{"y", (void *)48}};
    CHECK(kiln_model_run(m, rd, 3, in, 2, out, 1, NULL) == KILN_ERR_MISSING_WEIGHT);
    CHECK_MSG(api_contains(kiln_last_error(), "9 weights of model llama3_1b_layer not bound") &&
                  api_contains(kiln_last_error(), "wd : bf16[256, 512]"),
              "%s", kiln_last_error());
    kiln_dim rd2[] = {{"B", 2}, {"S", 1}};
    CHECK(kiln_model_run(m, rd2, 2, in, 2, out, 1, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(api_contains(kiln_last_error(), "no value for 'T'"));
    kiln_dim rd3[] = {{"B", 2}, {"S", 1}, {"T", 32}, {"Z", 1}};
    CHECK(kiln_model_run(m, rd3, 4, in, 2, out, 1, NULL) == KILN_ERR_NOT_FOUND);
    kiln_dim rd4[] = {{"B", 2}, {"S", 9}, {"T", 32}};
    CHECK(kiln_model_run(m, rd4, 3, in, 2, out, 1, NULL) == KILN_ERR_INVALID_ARGUMENT);
    kiln_tensor_arg in2[] = {{"x", (void *)16}, {"wq", (void *)32}};
    CHECK(kiln_model_run(m, rd, 3, in2, 2, out, 1, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(api_contains(kiln_last_error(), "it is a weight"), "%s", kiln_last_error());
    CHECK(kiln_model_run(m, rd, 3, in, 1, out, 1, NULL) == KILN_ERR_INVALID_ARGUMENT);
    CHECK_MSG(api_contains(kiln_last_error(), "input 'pos' : i32[B] not given"), "%s", kiln_last_error());
    kiln_tensor_arg out2[] = {{"q", (void *)48}};
    CHECK(kiln_model_run(m, rd, 3, in, 2, out2, 1, NULL) == KILN_ERR_NOT_FOUND);
    CHECK(kiln_model_run(m, rd, 3, in, 2, out, 0, NULL) == KILN_ERR_INVALID_ARGUMENT);
    kiln_counters c;
    CHECK(kiln_model_counters(m, &c) == KILN_OK && c.runs == 0 && c.variants == 1);
    kiln_model_free(m);
}

/* ---- shape variants (docs/ARCHITECTURE.md): planned by the driver, picked by the runtime ---- */

static void test_variants(void)
{
    static const char text[] = "model tiny {\n  dims B, S\n  input x : f32[B, S, 64]\n  weight w : f32[32, 64]\n"
                               "  output y = linear(x, w)\n}\n";
    kiln_dim maxd[] = {{"B", 4}, {"S", 16}};
    kiln_model_options o = {.max_dims = maxd, .nmax_dims = 2, .lazy = 1};
    kiln_model *m = NULL;
    CHECK_MSG(kiln_model_compile_string(ctx, "tiny.kiln", text, &o, &m) == KILN_OK, "%s", kiln_last_error());
    if (!m) return;
    kiln_counters c;
    CHECK(kiln_model_counters(m, &c) == KILN_OK && c.variants == 1 && c.kernels_compiled == 0);
    /* 1 row: a variant planned (through the driver's planner) for exactly these dims */
    kiln_dim one[] = {{"B", 1}, {"S", 1}};
    CHECK_MSG(kiln_model_prepare(m, one, 2) == KILN_OK, "%s", kiln_last_error());
    CHECK(kiln_model_counters(m, &c) == KILN_OK && c.variants == 2 && c.kernels_compiled == 1);
    const char *desc = kiln_model_describe(m);
    CHECK_MSG(api_contains(desc, "variant 1: small-shape for B=1 S=1 (compiled)") && api_contains(desc, "gemv"), "%s", desc);
    /* the same dims again: the same variant */
    CHECK(kiln_model_prepare(m, one, 2) == KILN_OK);
    CHECK(kiln_model_counters(m, &c) == KILN_OK && c.variants == 2 && c.kernels_compiled == 1);
    /* 64 rows (> 32): the large-shape variant, no new one */
    kiln_dim big[] = {{"B", 4}, {"S", 16}};
    CHECK_MSG(kiln_model_prepare(m, big, 2) == KILN_OK, "%s", kiln_last_error());
    CHECK(kiln_model_counters(m, &c) == KILN_OK && c.variants == 2 && c.kernels_compiled == 2);
    desc = kiln_model_describe(m);
    CHECK_MSG(api_contains(desc, "variant 0: large-shape (compiled)"), "%s", desc);
    kiln_model_free(m);
    /* decode_max_rows -1: never a small-shape variant */
    o.decode_max_rows = -1;
    CHECK(kiln_model_compile_string(ctx, "tiny.kiln", text, &o, &m) == KILN_OK);
    if (!m) return;
    CHECK(kiln_model_prepare(m, one, 2) == KILN_OK);
    CHECK(kiln_model_counters(m, &c) == KILN_OK && c.variants == 1);
    kiln_model_free(m);
}

/* ---- safetensors -------------------------------------------------------------------------- */

/* A file: 8-byte length (hlen_override >= 0 replaces it), the header, data. */
static int craft(const char *path, const char *header, long long hlen_override, size_t data_bytes)
{
    size_t hl = strlen(header);
    size_t total = 8 + hl + data_bytes;
    unsigned char *buf = calloc(1, total + 1);
    if (!buf) return -1;
    uint64_t L = hlen_override >= 0 ? (uint64_t)hlen_override : hl;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(L >> (8 * i));
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_bytes; i++) buf[8 + hl + i] = (unsigned char)(i * 7);
    int rc = api_write_file(path, buf, total);
    free(buf);
    return rc;
}

/* Expect load (with flags) to fail validation with a message containing want. */
static void expect_load(kiln_model *m, const char *path, unsigned flags, kiln_status want_st, const char *want, int line)
{
    kiln_status st = kiln_model_load_safetensors_ex(m, path, flags);
    if (want_st == KILN_OK && !kiln_context_has_device(ctx)) want_st = KILN_ERR_NO_DEVICE; /* validated, then no device */
    CHECK_MSG(st == want_st, "line %d: status %s, expected %s: %s", line, kiln_status_str(st), kiln_status_str(want_st),
              kiln_last_error());
    if (want) CHECK_MSG(api_contains(kiln_last_error(), want), "line %d: message lacks \"%s\": %s", line, want, kiln_last_error());
}
#define EXPECT_LOAD(m, p, f, s, w) expect_load(m, p, f, s, w, __LINE__)

static void write_all_weights(kiln_model *m, const char *path, int skip, const char *extra_name)
{
    int nw = kiln_model_num_tensors(m, KILN_WEIGHT);
    kiln_host_tensor t[16];
    void *bufs[16] = {0};
    int n = 0;
    uint64_t seed = 7;
    for (int i = 0; i < nw; i++) {
        if (i == skip) continue;
        kiln_tensor_info ti;
        if (kiln_model_tensor(m, KILN_WEIGHT, i, NULL, 0, &ti) != KILN_OK) continue;
        bufs[n] = malloc(ti.bytes);
        uint16_t *p = bufs[n];
        for (size_t j = 0; j < ti.bytes / 2; j++) p[j] = ir_f32_to_bf16_bits(api_randf(&seed) * 0.1f);
        t[n] = (kiln_host_tensor){ti.name, ti.dtype, ti.rank, {0}, bufs[n]};
        memcpy(t[n].shape, ti.shape, sizeof ti.shape);
        n++;
    }
    float extra[4] = {1, 2, 3, 4};
    if (extra_name) t[n++] = (kiln_host_tensor){extra_name, KILN_F32, 1, {4}, extra};
    CHECK_MSG(kiln_safetensors_write(path, t, n) == KILN_OK, "%s", kiln_last_error());
    for (int i = 0; i < 16; i++) free(bufs[i]);
}

static void test_safetensors(void)
{
    kiln_model *m = compile_sample(&API_SAMPLES[0], 1);
    if (!m) return;
    char *p = api_tmpfile("w.safetensors");
    char h[1024];
    const unsigned A = KILN_LOAD_ALLOW_MISSING;

    write_all_weights(m, p, -1, NULL);
    EXPECT_LOAD(m, p, 0, KILN_OK, NULL);
    write_all_weights(m, p, 2, NULL); /* wk missing */
    EXPECT_LOAD(m, p, 0, KILN_ERR_WEIGHTS, "1 weight of model llama3_1b_layer missing from the file: wk : bf16[128, 256]");
    EXPECT_LOAD(m, p, A, KILN_OK, NULL);
    write_all_weights(m, p, -1, "lm_head");
    EXPECT_LOAD(m, p, 0, KILN_ERR_WEIGHTS, "tensor 'lm_head' is not a weight of model llama3_1b_layer");
    EXPECT_LOAD(m, p, KILN_LOAD_IGNORE_UNKNOWN, KILN_OK, NULL);
    write_all_weights(m, p, -1, "x");
    EXPECT_LOAD(m, p, 0, KILN_ERR_WEIGHTS, "tensor 'x' is an input of the model, not a weight");

    /* one tensor at a time (the others allowed missing) */
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_OK, NULL);
    snprintf(h, sizeof h, "{\"__metadata__\":{\"format\":\"pt\"},\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_OK, NULL);
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[0,262144]}}");
    craft(p, h, -1, 262144);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "tensor 'wq': dtype F32 but the model declares wq : bf16[256, 256] (samples/llama3_1b_layer.kiln:21)");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"F64\",\"shape\":[256,256],\"data_offsets\":[0,524288]}}");
    craft(p, h, -1, 524288);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "dtype F64 but the model declares");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"Q4\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "unknown dtype \"Q4\"");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,128],\"data_offsets\":[0,65536]}}");
    craft(p, h, -1, 65536);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS,
                "tensor 'wq': shape [256, 128] but the model declares wq : bf16[256, 256] (samples/llama3_1b_layer.kiln:21)");
    snprintf(h, sizeof h, "{\"ln1\":{\"dtype\":\"BF16\",\"shape\":[256,1],\"data_offsets\":[0,512]}}");
    craft(p, h, -1, 512);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "shape [256, 1] but the model declares ln1 : bf16[256]");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}");
    craft(p, h, -1, 131000); /* truncated data */
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "run past the end of the data");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131070]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "hold 131070 bytes but BF16 with 65536 elements needs 131072");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[131072,0]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "end before they begin");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[1000000000000,1000000131072]}}");
    craft(p, h, -1, 64);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "run past the end");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}");
    craft(p, h, -1, 64);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "overflows");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,-256],\"data_offsets\":[0,131072]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "not a non-negative integer");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "data_offsets");
    snprintf(h, sizeof h, "{\"wq\":{\"shape\":[256,256],\"data_offsets\":[0,131072]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "\"dtype\"");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131072]},"
                          "\"wo\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[131070,262142]}}");
    craft(p, h, -1, 262144);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "overlap");
    snprintf(h, sizeof h, "{\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131072]},"
                          "\"wq\":{\"dtype\":\"BF16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}");
    craft(p, h, -1, 131072);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "not valid JSON");
    craft(p, "{\"wq\": {\"dtype\": ", -1, 16);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "not valid JSON");
    craft(p, "[1, 2, 3]", -1, 0);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "not a JSON object");
    craft(p, "{}", (long long)1 << 40, 0);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "over the limit");
    craft(p, "{}", 4096, 0);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "truncated");
    api_write_file(p, "abc", 3);
    EXPECT_LOAD(m, p, A, KILN_ERR_WEIGHTS, "too short");
    craft(p, "{}", -1, 0); /* empty file: every weight missing */
    EXPECT_LOAD(m, p, 0, KILN_ERR_WEIGHTS, "9 weights of model llama3_1b_layer missing from the file");
    EXPECT_LOAD(m, "/no/such/dir/w.safetensors", 0, KILN_ERR_IO, "No such file");
    CHECK(kiln_model_load_safetensors_ex(m, p, 0x80) == KILN_ERR_INVALID_ARGUMENT);

    /* writer round trip and argument errors */
    float v[6] = {1, 2, 3, 4, 5, 6};
    int32_t iv[2] = {7, -8};
    kiln_host_tensor t[] = {{"a", KILN_F32, 2, {2, 3}, v}, {"b", KILN_I32, 1, {2}, iv}, {"e", KILN_BF16, 1, {0}, NULL}};
    CHECK(kiln_safetensors_write(p, t, 3) == KILN_OK);
    rt_st_file f;
    char err[512];
    CHECK(rt_st_open(p, &f, err, sizeof err) == 0);
    const rt_st_tensor *ta = rt_st_find(&f, "a"), *tb = rt_st_find(&f, "b");
    CHECK(ta && ta->dtype == IR_F32 && ta->rank == 2 && ta->shape[1] == 3 && !memcmp(ta->data, v, sizeof v));
    CHECK(tb && tb->dtype == IR_I32 && !memcmp(tb->data, iv, sizeof iv));
    CHECK(rt_st_find(&f, "e") && rt_st_find(&f, "e")->rank == 1);
    CHECK(((8 + (f.data - (const unsigned char *)f.map) - 8) % 8) == 0);
    rt_st_close(&f);
    kiln_host_tensor dup[] = {{"a", KILN_F32, 1, {1}, v}, {"a", KILN_F32, 1, {1}, v}};
    CHECK(kiln_safetensors_write(p, dup, 2) == KILN_ERR_INVALID_ARGUMENT);
    CHECK(kiln_safetensors_write("/no/such/dir/x.safetensors", t, 1) == KILN_ERR_IO);
    remove(p);
    free(p);
    kiln_model_free(m);
}

/* Truncations and byte flips of a valid file: parse gives 0 or -1, never a crash
 * (the ASan build checks the reads). */
static void test_safetensors_fuzz(void)
{
    float v[64];
    for (int i = 0; i < 64; i++) v[i] = (float)i;
    kiln_host_tensor t[] = {{"a", KILN_F32, 2, {4, 8}, v}, {"b", KILN_F32, 1, {32}, v + 32}};
    char *p = api_tmpfile("fuzz.safetensors");
    CHECK(kiln_safetensors_write(p, t, 2) == KILN_OK);
    FILE *fp = fopen(p, "rb");
    unsigned char buf[4096];
    size_t n = fp ? fread(buf, 1, sizeof buf, fp) : 0;
    if (fp) fclose(fp);
    CHECK(n > 256);
    char err[512];
    rt_st_file f;
    int ok = 0, bad = 0;
    for (size_t len = 0; len < n; len++) {
        unsigned char *copy = malloc(len + 1); /* exact size, so ASan sees any overread */
        memcpy(copy, buf, len);
        if (rt_st_parse(copy, len, "trunc", &f, err, sizeof err) == 0) {
            ok++;
            rt_st_close(&f);
        } else bad++;
        free(copy);
    }
    CHECK(ok == 0 && bad == (int)n); /* every truncation is caught */
    uint64_t seed = 99;
    for (int it = 0; it < 3000; it++) {
        unsigned char *copy = malloc(n);
        memcpy(copy, buf, n);
        int flips = 1 + (int)(api_rand(&seed) % 4);
        for (int k = 0; k < flips; k++) copy[api_rand(&seed) % (it % 2 ? n : 120)] ^= (unsigned char)(1u << (api_rand(&seed) % 8));
        if (rt_st_parse(copy, n, "flip", &f, err, sizeof err) == 0) {
            for (int i = 0; i < f.n; i++) /* whatever parsed lies inside the buffer */
                CHECK(f.t[i].data >= copy && f.t[i].data + (f.t[i].end - f.t[i].begin) <= copy + n);
            rt_st_close(&f);
        }
        free(copy);
    }
    remove(p);
    free(p);
}

/* ---- bind-time packing vs the interpreter ------------------------------------------------ */

typedef struct host_w {
    const ir_graph *g;
    void **data;
} host_w;

static int get_w(void *user, int param, const void **data, char *err, size_t n)
{
    host_w *h = user;
    *data = h->data[param];
    return *data ? 0 : -1;
}

static void test_packing(void)
{
    int packed_total = 0, permutes = 0, concats = 0;
    for (int si = 0; si < API_NSAMPLES; si++) {
        const api_sample *s = &API_SAMPLES[si];
        arena a;
        arena_init(&a);
        diag_list d;
        diag_list_init(&d, &a);
        fe_source src;
        fe_define defs[8];
        for (int i = 0; i < s->ndefines; i++) defs[i] = (fe_define){s->defines[i].name, s->defines[i].value};
        fe_options fo = {defs, s->ndefines};
        ir_graph *g = NULL;
        if (fe_source_read(&src, s->path, &d) == 0) {
            g = fe_compile(&src, &fo, &d);
            pass_options po = {0};
            pass_ctx pc = {.opts = &po, .diags = &d};
            if (g) g = pass_run_pipeline(g, &pc);
            fe_source_free(&src);
        }
        CHECK_MSG(g != NULL, "%s does not compile", s->path);
        if (!g) {
            diag_list_free(&d);
            arena_free(&a);
            continue;
        }
        int64_t dims[IR_MAX_SYMS] = {2, 5, 16};
        void **data = calloc((size_t)g->nparams, sizeof *data);
        uint64_t seed = 1234 + (uint64_t)si;
        for (int i = 0; i < g->nparams; i++) {
            const ir_node *p = g->params[i];
            if (p->op != IR_OP_WEIGHT) continue;
            int64_t shape[IR_MAX_RANK], numel;
            ir_type_shape_at(&p->type, dims, shape, &numel);
            float *f = malloc((size_t)numel * sizeof *f);
            for (int64_t j = 0; j < numel; j++) f[j] = api_randf(&seed);
            data[i] = malloc((size_t)numel * (size_t)ir_dtype_size(p->type.dtype));
            rt_from_f32(p->type.dtype, f, data[i], numel);
            free(f);
        }
        host_w hw = {g, data};
        bool *bind = pass_bind_time(g);
        for (int i = 0; i < g->nnodes; i++) {
            const ir_node *nd = g->nodes[i];
            if (!bind[i] || nd->op == IR_OP_WEIGHT || nd->op == IR_OP_CONST) continue;
            void *x = NULL, *y = NULL;
            size_t bx = 0, by = 0;
            char e1[512] = "", e2[512] = "";
            int r1 = rt_pack_eval(g, dims, i, get_w, &hw, false, &x, &bx, e1, sizeof e1);
            int r2 = rt_pack_eval(g, dims, i, get_w, &hw, true, &y, &by, e2, sizeof e2);
            CHECK_MSG(r1 == 0 && r2 == 0, "%s %%%d: %s / %s", s->path, i, e1, e2);
            CHECK_MSG(bx == by && bx > 0 && x && y && !memcmp(x, y, bx), "%s %%%d (%s): copy code and interpreter differ",
                      s->path, i, ir_op_name(nd->op));
            packed_total++;
            permutes += nd->op == IR_OP_PERMUTE;
            concats += nd->op == IR_OP_CONCAT;
            free(x);
            free(y);
        }
        free(bind);
        for (int i = 0; i < g->nparams; i++) free(data[i]);
        free(data);
        ir_graph_free(g);
        diag_list_free(&d);
        arena_free(&a);
    }
    CHECK_MSG(concats >= 4, "merged Q/K/V and gate/up concats in the Llama samples: %d", concats);
    CHECK_MSG(permutes >= 1 || packed_total >= 5, "GPT-2's `h @ w` weights: %d permutes", permutes);

    /* a user-written bind-time expression the copy code does not cover: the interpreter */
    const char *txt = "model m {\n dims B\n input x : f32[B, 4]\n weight w : f32[4, 8]\n"
                      " output y = x @ (w * 2.0)\n}\n";
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src;
    fe_source_from_string(&src, "t.kiln", txt);
    ir_graph *g = fe_compile(&src, NULL, &d);
    CHECK(g != NULL);
    if (!g) diag_print(&d, stderr, txt);
    if (g) {
        int mul = -1;
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i]->op == IR_OP_MUL) mul = i;
        float w[32];
        for (int i = 0; i < 32; i++) w[i] = (float)i * 0.25f;
        void *data[4] = {NULL, w, NULL, NULL};
        host_w hw = {g, data};
        void *out = NULL;
        size_t b = 0;
        char e[256];
        int64_t dims[1] = {3};
        CHECK(mul >= 0 && rt_pack_eval(g, dims, mul, get_w, &hw, false, &out, &b, e, sizeof e) == 0 && b == 128);
        if (out) {
            const float *o = out;
            int good = 1;
            for (int i = 0; i < 32; i++) good &= o[i] == (float)i * 0.5f;
            CHECK(good);
        }
        free(out);
        ir_graph_free(g);
    }
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);

    /* Gemma's `1 + w`, folded at bind time in the precision the model states:
     * bf16 as written with a bf16 weight, f32 after cast(w, f32) (as Hugging
     * Face's GemmaRMSNorm computes it), through the whole pipeline */
    const char *gemma = "model m {\n dims B\n input x : bf16[B, 8]\n weight w : bf16[8]\n"
                        " output y = rmsnorm(x, 1.0 + w, eps=1e-6)\n"
                        " output z = cast(rmsnorm(cast(x, f32), 1.0 + cast(w, f32), eps=1e-6), bf16)\n}\n";
    arena_init(&a);
    diag_list_init(&d, &a);
    fe_source_from_string(&src, "gemma.kiln", gemma);
    g = fe_compile(&src, NULL, &d);
    pass_options po = {0};
    pass_ctx pc = {.opts = &po, .diags = &d};
    if (g) g = pass_run_pipeline(g, &pc);
    CHECK(g != NULL);
    if (g) {
        float wf[8];
        uint16_t wb[8];
        for (int i = 0; i < 8; i++) wf[i] = ir_round_bf16(0.0107f * (float)(i + 1)); /* 1 + w is not a bf16 */
        rt_from_f32(IR_BF16, wf, wb, 8);
        void *data[4] = {NULL, NULL, NULL, NULL};
        for (int i = 0; i < g->nparams; i++)
            if (g->params[i]->op == IR_OP_WEIGHT) data[i] = wb;
        host_w hw = {g, data};
        bool *bind = pass_bind_time(g);
        int nbf16 = 0, nf32 = 0;
        for (int i = 0; i < g->nnodes; i++) {
            const ir_node *nd = g->nodes[i];
            if (!bind[i] || nd->op != IR_OP_ADD) continue;
            void *out = NULL;
            size_t b = 0;
            char e[256];
            int64_t dims[1] = {2};
            CHECK_MSG(rt_pack_eval(g, dims, i, get_w, &hw, false, &out, &b, e, sizeof e) == 0, "%s", e);
            if (!out) continue;
            int exact = 1, rounded_differs = 0;
            for (int j = 0; j < 8; j++) {
                float want = nd->type.dtype == IR_F32 ? 1.0f + wf[j] : ir_round_bf16(1.0f + wf[j]);
                float got = nd->type.dtype == IR_F32 ? ((const float *)out)[j] : ir_bf16_bits_to_f32(((const uint16_t *)out)[j]);
                exact &= got == want;
                rounded_differs |= got != ir_round_bf16(1.0f + wf[j]);
            }
            if (nd->type.dtype == IR_F32) {
                nf32++;
                CHECK_MSG(b == 32 && exact && rounded_differs, "f32 1 + w: %zu bytes, exact %d, differs from bf16 %d", b,
                          exact, rounded_differs);
            } else if (nd->type.dtype == IR_BF16) {
                nbf16++;
                CHECK_MSG(b == 16 && exact, "bf16 1 + w: %zu bytes, exact %d", b, exact);
            }
            free(out);
        }
        CHECK_MSG(nbf16 == 1 && nf32 == 1, "bind-time 1 + w: %d in bf16, %d in f32", nbf16, nf32);
        free(bind);
        ir_graph_free(g);
    } else
        diag_print(&d, stderr, gemma);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);

    /* the SwiGLU interleave: row 2j = j, row 2j+1 = half + j */
    int32_t rows[6 * 3], dst[6 * 3];
    for (int i = 0; i < 18; i++) rows[i] = i;
    rt_pack_interleave_rows(dst, rows, 3, 3 * sizeof(int32_t));
    int order[6] = {0, 3, 1, 4, 2, 5}, good = 1;
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 3; c++) good &= dst[r * 3 + c] == order[r] * 3 + c;
    CHECK(good);
    /* the QKV epilogue's rope pairs: in 2 heads of 5 rows from row 2, rows (i, 2 + i) of the first 4 side by side */
    int32_t pr[12 * 2];
    for (int i = 0; i < 24; i++) pr[i] = i;
    CHECK(rt_pack_rope_pairs(pr, 12, 2 * sizeof(int32_t), 2, 5, 2, 4));
    int porder[12] = {0, 1, 2, 4, 3, 5, 6, 7, 9, 8, 10, 11};
    good = 1;
    for (int r = 0; r < 12; r++)
        for (int c = 0; c < 2; c++) good &= pr[r * 2 + c] == porder[r] * 2 + c;
    CHECK(good);
    CHECK(!rt_pack_rope_pairs(pr, 12, 2 * sizeof(int32_t), 2, 5, 3, 4)); /* a head past the rows */
    CHECK(!rt_pack_rope_pairs(pr, 12, 2 * sizeof(int32_t), 0, 5, 2, 3)); /* an odd rotary count */
    /* conversions */
    CHECK(ir_bf16_bits_to_f32(ir_f32_to_bf16_bits(1.5f)) == 1.5f && ir_f16_bits_to_f32(ir_f32_to_f16_bits(-2.25f)) == -2.25f);
    CHECK(ir_f16_bits_to_f32(ir_f32_to_f16_bits(6.0e-8f)) == ir_round_f16(6.0e-8f) && ir_f16_bits_to_f32(ir_f32_to_f16_bits(65504.0f)) == 65504.0f);
}

/* ---- the last error is per thread ---------------------------------------------------------- */

static void *other_thread(void *arg)
{
    (void)arg;
    kiln_model_bind_weight(NULL, "zzz", NULL);
    return (void *)(intptr_t)api_contains(kiln_last_error(), "NULL model");
}

/* The template each matmul instantiates at prefill (the large-shape
 * variant), by introspection: the Hopper template (with its mma.sync
 * fallback) for bf16 on sm_90a, mma.sync on sm_80, the f32 kernel for f32. */
static void test_templates(void)
{
    static const struct {
        const char *arch, *path, *want, *config, *fallback;
    } cases[] = {
        /* "wgmma 128x..." for three of them, "wgmma 64x128" for the QKV projection with RoPE and the cache write */
        {"sm_90a", "samples/llama3_8b_layer.kiln", "matmul_wgmma.cuh", "wgmma ", "matmul_mma.cuh"},
        {"sm_80", "samples/llama3_8b_layer.kiln", "matmul_mma.cuh", "mma.sync ", NULL},
        {"sm_90a", "samples/gpt2_block.kiln", "matmul_mma.cuh", "fma ", NULL},
    };
    const kiln_dim maxd[] = {{"B", 1}, {"S", 2048}, {"T", 2048}};
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        kiln_context_options co = {.compile_only = 1, .no_disk_cache = 1, .arch = cases[c].arch};
        kiln_context *cx = NULL;
        CHECK_MSG(kiln_context_create(&cx, &co) == KILN_OK, "%s: %s", cases[c].arch, kiln_last_error());
        if (!cx) continue;
        int llama = strstr(cases[c].path, "llama") != NULL;
        kiln_model_options mo = {.max_dims = maxd, .nmax_dims = llama ? 3 : 2, .lazy = 1};
        kiln_model *m = NULL;
        CHECK_MSG(kiln_model_compile_file(cx, cases[c].path, &mo, &m) == KILN_OK, "%s: %s", cases[c].path,
                  kiln_last_error());
        int matmuls = 0;
        for (int i = 0; m && i < kiln_model_num_kernels(m); i++) {
            kiln_kernel_info ki;
            CHECK(kiln_model_kernel(m, i, &ki) == KILN_OK);
            if (strcmp(ki.kind, "matmul") || strstr(ki.template_file, "elementwise")) continue;
            matmuls++;
            CHECK_MSG(!strcmp(ki.template_file, cases[c].want) && !strncmp(ki.config, cases[c].config, strlen(cases[c].config)),
                      "%s on %s: kernel %s is %s (%s), not %s", cases[c].path, cases[c].arch, ki.name, ki.template_file,
                      ki.config, cases[c].want);
            CHECK(cases[c].fallback ? ki.fallback && !strcmp(ki.fallback, cases[c].fallback) : ki.fallback == NULL);
        }
        CHECK_MSG(matmuls == 4, "%s: %d matmul kernels", cases[c].path, matmuls);
        if (m) {
            kiln_kernel_info ki;
            CHECK(kiln_model_kernel(m, kiln_model_num_kernels(m), &ki) == KILN_ERR_NOT_FOUND);
            char want[64];
            snprintf(want, sizeof want, "matmul (%s", cases[c].config);
            CHECK_MSG(api_contains(kiln_model_describe(m), want), "%s", kiln_model_describe(m));
        }
        kiln_model_free(m);
        kiln_context_free(cx);
    }
}

static void test_threads(void)
{
    kiln_model_run(NULL, NULL, 0, NULL, 0, NULL, 0, NULL);
    pthread_t t;
    void *r = NULL;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0 && pthread_join(t, &r) == 0 && r);
    CHECK_MSG(api_contains(kiln_last_error(), "kiln_model_run"), "%s", kiln_last_error());
}

int main(void)
{
    kiln_context_options o = {.compile_only = 1, .no_disk_cache = 1};
    if (kiln_context_create(&ctx, &o) != KILN_OK) {
        fprintf(stderr, "compile_only context: %s\n", kiln_last_error());
        return 1;
    }
    test_null_args();
    test_context();
    test_compile_errors();
    test_warnings();
    test_fallbacks();
    test_llama_api();
    test_variants();
    test_safetensors();
    test_safetensors_fuzz();
    test_packing();
    test_templates();
    test_threads();
    kiln_context_free(ctx);
    return CHECK_DONE();
}
