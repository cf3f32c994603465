/* tests/frontend/lookup_work_test.c — name lookup is linear in the model.
 *
 * Times nothing: it counts the lowering's name-lookup work
 * (fe_compile_counted: name comparisons and "did you mean" candidates) for
 * models of n and 2n statements, chains of assignments and models full of
 * unknown names, and checks the count at most doubles (plus slack for the
 * hash tables' growth). A backwards scan per lookup made the first quadratic
 * (10k statements: 4 s, 200k: minutes) and a scan of every statement plus a
 * suggestion search per unknown name made the second quadratic too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/frontend.h"

/* n assignments v_i = v_{i-1} * 2 (unknown: x + u_i, every u_i undefined,
 * and half of them used twice) */
static char *model(int n, bool unknown)
{
    size_t cap = (size_t)n * 48 + 256, len = 0;
    char *s = malloc(cap);
    len += (size_t)snprintf(s + len, cap - len, "model big {\n  dims B\n  input x : f32[B, 8]\n");
    for (int i = 0; i < n; i++) {
        if (unknown) len += (size_t)snprintf(s + len, cap - len, "  v%d = x + u%d\n", i, i / 2);
        else len += (size_t)snprintf(s + len, cap - len, "  v%d = %s%d * 2.0\n", i, i ? "v" : "x", i ? i - 1 : 0);
    }
    len += (size_t)snprintf(s + len, cap - len, "  output y = %s%d\n}\n", unknown ? "x" : "v", unknown ? 0 : n - 1);
    if (!unknown) {
        /* x0 is not a name: the first statement reads x */
        char *p = strstr(s, "= x0 *");
        if (p) memmove(p + 3, p + 4, strlen(p + 4) + 1);
    }
    return s;
}

static uint64_t work_of(int n, bool unknown, int *errors)
{
    char *text = model(n, unknown);
    fe_source src;
    CHECK(fe_source_from_string(&src, "big.kiln", text) == 0);
    arena a;
    arena_init(&a);
    diag_list d;
    diag_list_init(&d, &a);
    uint64_t work = 0;
    ir_graph *g = fe_compile_counted(&src, NULL, &d, &work);
    *errors = d.errors;
    ir_graph_free(g);
    diag_list_free(&d);
    arena_free(&a);
    fe_source_free(&src);
    free(text);
    return work;
}

int main(void)
{
    for (int unknown = 0; unknown < 2; unknown++) {
        int e1, e2;
        int n = unknown ? 2000 : 5000;
        uint64_t w1 = work_of(n, unknown, &e1), w2 = work_of(2 * n, unknown, &e2);
        printf("%s: %d statements: %llu, %d: %llu\n", unknown ? "unknown names" : "assignments", n,
               (unsigned long long)w1, 2 * n, (unsigned long long)w2);
        CHECK_MSG(unknown ? e1 >= n && e2 >= 2 * n : e1 == 0 && e2 == 0, "errors %d %d", e1, e2);
        CHECK(w1 > (uint64_t)n);
        CHECK_MSG(w2 <= 2 * w1 + w1 / 4, "work grows faster than the model: %llu -> %llu", (unsigned long long)w1,
                  (unsigned long long)w2);
    }
    return CHECK_DONE();
}
