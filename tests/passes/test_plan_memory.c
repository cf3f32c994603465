/* tests/passes/test_plan_memory.c — the memory plan: buffers whose lifetimes
 * overlap never share memory; a row or elementwise kernel may write over the
 * input it reads element for element, but not over one it reads through a
 * view that remaps indices. A size that does not fit in 64 bits is an
 * error at the model line of the value, in the passes (symbolic sizes) and
 * in the plan (sizes at the bound dims), never a buffer of 0 bytes. */
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"
#include "passes/pass.h"

/* The pipeline over text; the first error's line and message into line/msg. */
static ir_graph *compile_diag(const char *text, int *line, char *msg, size_t msglen)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    fe_source src;
    fe_source_from_string(&src, "m.kiln", text);
    ir_graph *g = fe_compile(&src, NULL, &d);
    pass_options o = {0};
    pass_ctx ctx = {.opts = &o, .diags = &d};
    if (g) g = pass_run_pipeline(g, &ctx);
    if (line) *line = 0;
    if (msg) msg[0] = 0;
    for (int i = 0; i < d.count; i++)
        if (d.items[i].severity == DIAG_ERROR && line && !*line) {
            *line = d.items[i].loc.line;
            snprintf(msg, msglen, "%s", d.items[i].msg);
        }
    if (!line) diag_print(&d, stderr, src.text);
    fe_source_free(&src);
    diag_list_free(&d);
    arena_free(&a);
    return g;
}

static ir_graph *compile(const char *text) { return compile_diag(text, NULL, NULL, 0); }

/* Locations survive the pipeline: passes rebuild graphs and free the old
 * ones, so a file name pointing into an old arena would dangle (ASan). */
static void check_locs(const ir_graph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->loc.file) CHECK(strcmp(g->nodes[i]->loc.file, "m.kiln") == 0);
    for (int i = 0; i < g->noutputs; i++) CHECK(g->outputs[i].loc.file && !strcmp(g->outputs[i].loc.file, "m.kiln"));
}

static const pass_buffer *buf_of(const pass_memplan *mp, const char *name)
{
    for (int i = 0; i < mp->nbufs; i++)
        if (mp->bufs[i].value->name && !strcmp(mp->bufs[i].value->name, name)) return &mp->bufs[i];
    return NULL;
}

static bool overlap(const pass_buffer *a, const pass_buffer *b)
{
    return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* No two buffers alive in the same kernel share bytes, except the in-place
 * pair (one dies where the other is born). */
static void check_sound(const pass_memplan *mp)
{
    for (int i = 0; i < mp->nbufs; i++)
        for (int j = i + 1; j < mp->nbufs; j++) {
            const pass_buffer *a = &mp->bufs[i], *b = &mp->bufs[j];
            bool live_together = !(a->last < b->first || b->last < a->first);
            bool touching = a->last == b->first || b->last == a->first;
            if (live_together && !touching) CHECK_MSG(!overlap(a, b), "buffers %d and %d overlap", i, j);
        }
}

int main(void)
{
    int64_t dims[1] = {2};
    char err[256];
    pass_memplan mp;

    /* softmax reads a element for element: it may take a's place */
    ir_graph *g = compile("model m { dims B\n input x : f32[B, 8, 8]\n weight w : f32[8, 8]\n"
                          " a = linear(x, w)\n s = softmax(a, axis=-1)\n output y = linear(s, w) }\n");
    CHECK(g != NULL);
    if (g) {
        check_locs(g);
        CHECK(pass_plan_memory(g, dims, &mp, err, sizeof err) == 0);
        const pass_buffer *a = buf_of(&mp, "a"), *s = buf_of(&mp, "s");
        CHECK(a && s);
        if (a && s) CHECK_MSG(overlap(a, s), "softmax over its own input should reuse it in place");
        CHECK(mp.peak < mp.total);
        check_sound(&mp);
        pass_memplan_free(&mp);
        ir_graph_free(g);
    }

    /* the same through a transpose: element (i, j) is written before
     * element (j, i) is read, so the two need separate memory */
    g = compile("model m { dims B\n input x : f32[B, 8, 8]\n weight w : f32[8, 8]\n"
                " a = linear(x, w)\n s = softmax(transpose(a), axis=-1)\n output y = linear(s, w) }\n");
    CHECK(g != NULL);
    if (g) {
        CHECK(pass_plan_memory(g, dims, &mp, err, sizeof err) == 0);
        const pass_buffer *a = buf_of(&mp, "a"), *s = buf_of(&mp, "s");
        CHECK(a && s);
        if (a && s) CHECK_MSG(!overlap(a, s), "a transposed read must not be overwritten in place");
        check_sound(&mp);
        pass_memplan_free(&mp);
        ir_graph_free(g);
    }

    /* unbound dims are named in the error */
    g = compile("model m { dims B, S\n input x : f32[B, S, 8]\n weight w : f32[8, 8]\n"
                " a = linear(x, w)\n output y = linear(exp(a), w) }\n");
    CHECK(g != NULL);
    if (g) {
        CHECK(pass_plan_memory(g, NULL, &mp, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "-D B=N -D S=N") != NULL, "err: %s", err);
        ir_graph_free(g);
    }

    /* a size that overflows at the bound dims: an error at the value's line */
    g = compile("model m { dims B\n input x : f32[B, 4096]\n weight w : f32[4096, 4096]\n"
                " h = linear(x, w)\n output y = exp(h) + h }\n");
    CHECK(g != NULL);
    if (g) {
        int64_t huge[1] = {(int64_t)1 << 52}; /* 2^52 * 4096 * 4 bytes */
        CHECK(pass_plan_memory(g, huge, &mp, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "m.kiln:4: the size in bytes of linear 'h' (line 4) does not fit in 64 bits"), "err: %s", err);
        CHECK(mp.nbufs == 0 && mp.bufs == NULL);
        CHECK(pass_plan_memory(g, dims, &mp, err, sizeof err) == 0 && mp.nbufs == 1 && mp.bufs[0].bytes == 2 * 4096 * 4);
        pass_memplan_free(&mp);
        ir_graph_free(g);
    }

    /* a size that overflows in an intermediate (the declared ones are the
     * front end's: tests/diag/119_shape_bytes_overflow): the passes stop at
     * the value's line */
    int line;
    char msg[256];
    g = compile_diag("model m {\n input x : f32[2147483648, 1]\n input z : f32[1, 2147483648]\n h = x + z\n"
                     " output y = h * h + h }\n", &line, msg, sizeof msg);
    CHECK(g == NULL);
    CHECK_MSG(line == 4 && strstr(msg, "the size in bytes of add 'h' (line 4) does not fit in 64 bits"), "line %d: %s",
              line, msg);
    ir_graph_free(g);
    return CHECK_DONE();
}
