/* util/vec.c — see vec.h. */
#include "util/vec.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool vec_reserve(void **items, size_t *cap, size_t need, size_t elem, arena *a)
{
    if (need <= *cap) return true;
    if (elem == 0) return false;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return false;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem) return false;
    void *n;
    if (a) {
        n = arena_alloc(a, ncap * elem);
        if (n && *cap) memcpy(n, *items, *cap * elem);
    } else {
        n = realloc(*items, ncap * elem);
    }
    if (!n) return false;
    *items = n;
    *cap = ncap;
    return true;
}

bool vec_grow(void **items, int *cap, int count, size_t elem, arena *a)
{
    if (count < 0 || count == INT_MAX) return false;
    if (count < *cap) return true;
    size_t c = *cap > 0 ? (size_t)*cap : 0;
    if (!vec_reserve(items, &c, (size_t)count + 1, elem, a)) return false;
    *cap = c > INT_MAX ? INT_MAX : (int)c;
    return true;
}
