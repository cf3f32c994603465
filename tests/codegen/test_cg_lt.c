/* tests/codegen/test_cg_lt.c — which matmuls cuBLASLt can implement
 * (codegen/cg_lt.c) and the text that says so. CPU only.
 *
 * Each small model (one linear or matmul, one epilogue) is fused and emitted
 * for sm_90a at S=4096 rows (the Hopper template: autotuning's matmuls); its
 * matmul kernel's lt says whether cuBLASLt is a candidate, with which
 * epilogue (bias, residual as beta * C, relu, tanh gelu) or why not (erf
 * gelu, an activation before the residual, another op, SwiGLU, f32),
 * whether the tuning problem names it (" lt=..."), and its
 * last candidate is cuBLASLt exactly when it is one. The Llama layer: its
 * SwiGLU and rope/cache-write epilogues are no candidates, its residual
 * projections are; `--explain`'s template section gives every matmul its
 * cublasLt line. A GEMV (one row) is none: autotuning times it not. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codegen/cg.h"
#include "src/compile.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

#define HEAD "model m {\n  dims S\n  input x : bf16[S, 1024]\n  input r : bf16[S, 2048]\n  weight w : bf16[2048, 1024]\n  weight b : bf16[2048]\n"

typedef struct lt_case {
    const char *body;
    cg_lt_why why;
    const char *epi; /* candidates: cg_lt_epilogue_name */
} lt_case;

static const lt_case CASES[] = {
    {"  output y = linear(x, w)\n", CG_LT_OK, "none"},
    {"  output y = linear(x, w, b)\n", CG_LT_OK, "bias"},
    {"  output y = relu(linear(x, w, b))\n", CG_LT_OK, "bias+relu"},
    {"  output y = gelu(linear(x, w, b), tanh=true)\n", CG_LT_OK, "bias+gelu_tanh"},
    {"  output y = gelu(linear(x, w))\n", CG_LT_GELU_ERF, NULL},
    {"  output y = r + linear(x, w)\n", CG_LT_OK, "residual"},
    {"  output y = linear(x, w, b) + r\n", CG_LT_OK, "bias+residual"},
    {"  output y = relu(r + linear(x, w, b))\n", CG_LT_OK, "bias+residual+relu"},
    {"  output y = r + relu(linear(x, w))\n", CG_LT_ACT_ORDER, NULL},
    {"  output y = linear(x, w) * 2.0\n", CG_LT_OP, NULL},
    {"  output y = sigmoid(linear(x, w))\n", CG_LT_OP, NULL},
};

static const char *FUSED_SWIGLU =
    "model m {\n  dims S\n  input x : bf16[S, 1024]\n  weight wg : bf16[2048, 1024]\n  weight wu : bf16[2048, 1024]\n"
    "  output y = silu(linear(x, wg)) * linear(x, wu)\n}\n";
static const char *F32 = "model m {\n  dims S\n  input x : f32[S, 1024]\n  weight w : f32[2048, 1024]\n"
                         "  output y = linear(x, w)\n}\n";
static const char *BATCHED = "model m {\n  dims S\n  input a : bf16[8, S, 128]\n  input c : bf16[8, 256, 128]\n"
                             "  output y = matmul(a, transpose(c))\n}\n";

typedef struct emitted {
    kc_unit *u;
    cg_kernel *ks;
    int n;
} emitted;

static bool emit_text(const char *text, int64_t rows, emitted *e)
{
    memset(e, 0, sizeof *e);
    kc_options o = {.name = "lt.kiln", .text = text};
    char err[2048];
    if (kc_open(&o, stderr, &e->u, err, sizeof err) != RT_OK || kc_parse(e->u, err, sizeof err) != RT_OK ||
        kc_fuse(e->u, err, sizeof err) != RT_OK) {
        fprintf(stderr, "%s\n%s\n", text, err);
        return false;
    }
    const ir_graph *g = kc_fused(e->u);
    int64_t dims[IR_MAX_SYMS];
    for (int i = 0; i < g->nsyms; i++) dims[i] = rows;
    cg_options co = {.dims = dims};
    if (cg_emit_all_ex(g, &co, &e->ks, &e->n, err, sizeof err) != 0) {
        fprintf(stderr, "codegen: %s\n", err);
        return false;
    }
    return true;
}

static void emitted_free(emitted *e)
{
    if (e->ks) cg_kernels_free(e->ks, e->n);
    kc_free(e->u);
}

/* The one matmul kernel of e. */
static const cg_kernel *matmul_of(const emitted *e)
{
    const cg_kernel *m = NULL;
    for (int i = 0; i < e->n; i++)
        if (cg_lt_text(&e->ks[i], (char[8]){0}, 8)) {
            CHECK_MSG(!m, "two matmul kernels");
            m = &e->ks[i];
        }
    CHECK_MSG(m, "no matmul kernel");
    return m;
}

static void check_candidate(const cg_kernel *k, const char *what)
{
    const bool cand = k->lt.why == CG_LT_OK;
    const bool last_lt = k->ntune_cands > 0 && k->tune_cands[k->ntune_cands - 1].impl == CG_IMPL_CUBLASLT;
    CHECK_MSG(cand == last_lt, "%s: candidate %d, cuBLASLt in the candidates %d", what, cand, last_lt);
    CHECK_MSG(cand == (k->tune_problem && strstr(k->tune_problem, " lt=") != NULL), "%s: problem %s", what,
              k->tune_problem ? k->tune_problem : "-");
    CHECK_MSG(k->lt_note && !strncmp(k->lt_note, "cublasLt", 8), "%s: note %s", what, k->lt_note ? k->lt_note : "-");
    CHECK_MSG(!k->lt.chosen, "%s: chosen without autotuning", what);
}

static void test_cases(void)
{
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        char text[1024];
        snprintf(text, sizeof text, HEAD "%s}\n", CASES[c].body);
        emitted e;
        CHECK_MSG(emit_text(text, 4096, &e), "case %zu", c);
        const cg_kernel *k = e.ks ? matmul_of(&e) : NULL;
        if (k) {
            char ep[64];
            CHECK_MSG(k->family == CG_FAMILY_MATMUL_WGMMA, "case %zu: family %s", c, cg_family_name(k->family));
            CHECK_MSG(k->lt.why == CASES[c].why, "case %zu (%s): why %d, want %d (%s)", c, CASES[c].body, k->lt.why,
                      CASES[c].why, k->lt_note);
            if (CASES[c].epi)
                CHECK_MSG(!strcmp(cg_lt_epilogue_name(&k->lt, ep, sizeof ep), CASES[c].epi), "case %zu: epilogue %s",
                          c, ep);
            check_candidate(k, CASES[c].body);
            if (k->lt.why == CG_LT_OK) {
                CHECK(k->lt.a_arg >= 0 && k->lt.w_arg >= 0 && k->lt.out_arg >= 0 && k->lt.ws_arg < 0);
                CHECK(k->lt.bias == (k->lt.bias_arg >= 0) && k->lt.residual == (k->lt.res_arg >= 0));
                CHECK_MSG(strstr(k->lt_note, "a candidate (timed with --autotune)"), "%s", k->lt_note);
            } else {
                CHECK_MSG(strstr(k->lt_note, "not a candidate: "), "%s", k->lt_note);
            }
            printf("%-48s %s\n", CASES[c].body + 2, k->lt_note);
        }
        emitted_free(&e);
    }
    /* the texts of the refusals name the reason */
    struct {
        const char *body, *words;
    } texts[] = {{"  output y = gelu(linear(x, w))\n", "erf form"},
                 {"  output y = r + relu(linear(x, w))\n", "after the activation"},
                 {"  output y = linear(x, w) * 2.0\n", "holds mul"}};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, HEAD "%s}\n", texts[i].body);
        emitted e;
        if (emit_text(text, 4096, &e)) {
            const cg_kernel *k = matmul_of(&e);
            CHECK_MSG(k && strstr(k->lt_note, texts[i].words), "%s: %s", texts[i].words, k ? k->lt_note : "-");
        }
        emitted_free(&e);
    }
}

static void test_others(void)
{
    emitted e;
    bool ok;
    /* SwiGLU (gate and up merged, the gate in the epilogue) */
    ok = emit_text(FUSED_SWIGLU, 4096, &e);
    CHECK(ok);
    if (ok) {
        const cg_kernel *k = matmul_of(&e);
        CHECK_MSG(k && k->lt.why == CG_LT_SWIGLU, "swiglu: %s", k ? k->lt_note : "-");
        if (k) check_candidate(k, "swiglu");
    }
    emitted_free(&e);
    /* f32: the mma.sync template (no tuning), operands cuBLASLt's candidate does not take */
    ok = emit_text(F32, 4096, &e);
    CHECK(ok);
    if (ok) {
        const cg_kernel *k = matmul_of(&e);
        CHECK_MSG(k && k->lt.why == CG_LT_DTYPE && !k->tune_problem, "f32: %s", k ? k->lt_note : "-");
    }
    emitted_free(&e);
    /* batched matmul, W as [N, K] (a transposed view): a candidate with its batch and strides */
    ok = emit_text(BATCHED, 512, &e);
    CHECK(ok);
    if (ok) {
        const cg_kernel *k = matmul_of(&e);
        int64_t d[1] = {512}, bt = 0, sa = 0, sw = 0;
        CHECK_MSG(k && k->lt.why == CG_LT_OK && k->lt.b_nk, "batched: %s", k ? k->lt_note : "-");
        if (k && k->lt.why == CG_LT_OK) {
            CHECK(ir_dim_value(&k->lt.batch, d, &bt) && bt == 8);
            CHECK(ir_dim_value(&k->lt.sa, d, &sa) && sa == 512 * 128);
            CHECK(ir_dim_value(&k->lt.sw, d, &sw) && sw == 256 * 128);
            check_candidate(k, "batched");
        }
    }
    emitted_free(&e);
    /* one row: the GEMV, which autotuning does not time */
    char text[1024];
    snprintf(text, sizeof text, HEAD "  output y = linear(x, w, b)\n}\n");
    ok = emit_text(text, 1, &e);
    CHECK(ok);
    if (ok) {
        const cg_kernel *k = matmul_of(&e);
        CHECK_MSG(k && k->family == CG_FAMILY_GEMV && k->lt.why == CG_LT_NOT_TUNED, "gemv: %s", k ? k->lt_note : "-");
    }
    emitted_free(&e);
}

/* The Llama layer at prefill: no SwiGLU or QKV candidate, the residual projections are;
 * the explain's template section says so per matmul. */
static void test_llama(void)
{
    kc_options o = {.name = KILN_SOURCE_DIR "/samples/llama3_1b_layer.kiln"};
    kc_unit *u = NULL;
    char err[2048];
    CHECK_MSG(kc_open(&o, stderr, &u, err, sizeof err) == RT_OK, "%s", err);
    if (!u) return;
    CHECK(kc_parse(u, err, sizeof err) == RT_OK && kc_fuse(u, err, sizeof err) == RT_OK);
    const ir_graph *g = kc_fused(u);
    int64_t dims[IR_MAX_SYMS];
    for (int i = 0; g && i < g->nsyms; i++) dims[i] = !strcmp(g->syms[i], "B") ? 1 : 2048;
    cg_options co = {.dims = dims};
    cg_kernel *ks = NULL;
    int n = 0;
    int swiglu = 0, qkv = 0, res = 0;
    const bool emitted_ok = g && cg_emit_all_ex(g, &co, &ks, &n, err, sizeof err) == 0;
    CHECK_MSG(emitted_ok, "%s", err);
    if (emitted_ok) {
        for (int i = 0; i < n; i++) {
            swiglu += ks[i].lt.why == CG_LT_SWIGLU;
            qkv += ks[i].lt.why == CG_LT_QKV;
            res += ks[i].lt.why == CG_LT_OK && ks[i].lt.residual;
            if (cg_lt_text(&ks[i], (char[8]){0}, 8)) check_candidate(&ks[i], ks[i].name);
        }
        cg_kernels_free(ks, n);
    }
    CHECK_MSG(swiglu == 1 && qkv == 1 && res == 2, "swiglu %d, qkv %d, residual candidates %d", swiglu, qkv, res);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kc_print_templates(u, NULL, f);
    fclose(f);
    int lines = 0;
    for (const char *s = buf; s && (s = strstr(s, "cublasLt")); s++) lines++;
    CHECK_MSG(buf && strstr(buf, "cublasLt: not a candidate: the epilogue holds a SwiGLU gate"), "%s", buf ? buf : "");
    CHECK_MSG(lines >= 4, "%d cublasLt lines in\n%s", lines, buf ? buf : "");
    free(buf);
    kc_free(u);
}

int main(void)
{
    test_cases();
    test_others();
    test_llama();
    return CHECK_DONE();
}
