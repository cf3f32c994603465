/* tests/frontend/threads_test.c — no global mutable state: several threads
 * compile the samples (and a broken file) at once, many times, and every
 * result prints exactly as a single-threaded compile does. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

static const char *files[] = {"samples/llama3_8b_layer.kiln", "samples/gpt2_block.kiln",
                              "samples/llama3_1b_layer.kiln", "tests/diag/057_several_semantic_errors.kiln"};
#define NFILES 4
#define NTHREADS 8
#define ROUNDS 25

static char *reference[NFILES];

/* The IR text of a compile, or its rendered diagnostics. */
static char *compile_text(const char *path)
{
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    fe_source src;
    if (f && fe_source_read(&src, path, &d) == 0) {
        fe_define defs[] = {{"B", "4"}};
        fe_options o = {defs, 1};
        ir_graph *g = fe_compile(&src, &o, &d);
        if (g) {
            ir_print(g, f);
            ir_graph_free(g);
        }
        diag_print(&d, f, src.text);
        fe_source_free(&src);
    }
    if (f) fclose(f);
    diag_list_free(&d);
    arena_free(&a);
    return out;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg, *bad = malloc(sizeof *bad);
    if (!bad) return NULL;
    *bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int i = (id + r) % NFILES;
        char *t = compile_text(files[i]);
        if (!t || strcmp(t, reference[i]) != 0) (*bad)++;
        free(t);
    }
    return bad;
}

int main(void)
{
    for (int i = 0; i < NFILES; i++) {
        reference[i] = compile_text(files[i]);
        CHECK(reference[i] && strlen(reference[i]) > 0);
    }
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < NTHREADS; t++) {
        void *res = NULL;
        pthread_join(th[t], &res);
        CHECK_MSG(res && *(int *)res == 0, "thread %d: %d results differ", t, res ? *(int *)res : -1);
        free(res);
    }
    for (int i = 0; i < NFILES; i++) free(reference[i]);
    return CHECK_DONE();
}
