/* tests/ir/test_vec.c — util/vec.h: growth on the heap and in an arena,
 * contents kept, overflow refused with the array left as it was. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "util/vec.h"

static void test_heap(void)
{
    int *v = NULL, n = 0, cap = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK(VEC_GROW(v, n, cap, NULL));
        v[n++] = i;
    }
    CHECK(n == 1000 && cap >= 1000);
    bool same = true;
    for (int i = 0; i < n; i++) same = same && v[i] == i;
    CHECK(same);
    free(v);
}

static void test_arena(void)
{
    arena a;
    arena_init(&a);
    double *v = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < 100; i++) {
        CHECK(VEC_GROW(v, n, cap, &a));
        v[n++] = i * 0.5;
    }
    CHECK(n == 100 && v[99] == 49.5 && v[0] == 0.0);
    arena_free(&a);
}

static void test_overflow(void)
{
    int *v = NULL, cap = 0;
    CHECK(!VEC_GROW(v, INT_MAX, cap, NULL));
    CHECK(!VEC_GROW(v, -1, cap, NULL));
    CHECK(v == NULL && cap == 0);
    void *p = NULL;
    size_t c = 0;
    CHECK(!vec_reserve(&p, &c, SIZE_MAX / 2 + 2, 1, NULL));  /* capacity would overflow */
    CHECK(!vec_reserve(&p, &c, SIZE_MAX / 4, 16, NULL));     /* bytes would overflow */
    CHECK(p == NULL && c == 0);
    CHECK(vec_reserve(&p, &c, 3, 4, NULL) && c >= 3);
    free(p);
}

int main(void)
{
    test_heap();
    test_arena();
    test_overflow();
    return CHECK_DONE();
}
