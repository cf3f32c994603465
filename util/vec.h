/* util/vec.h — growable arrays: one way to make room for more items.
 *
 * An array is a pointer, a count and a capacity kept by its owner. Storage
 * comes from malloc/realloc, or — when an arena is given — from that arena
 * (the old storage stays there until the arena is freed). The capacity
 * doubles (from a small first size) until it holds what is needed. Sizes are
 * checked for overflow; on overflow or allocation failure the array is left
 * as it was and false returned. */
#ifndef KILN_UTIL_VEC_H
#define KILN_UTIL_VEC_H
#include <stdbool.h>
#include <stddef.h>

#include "util/arena.h"

/* Room for `need` items of `elem` bytes in *items (capacity *cap). */
bool vec_reserve(void **items, size_t *cap, size_t need, size_t elem, arena *a);
/* Room for one more item after `count` (int count and capacity). */
bool vec_grow(void **items, int *cap, int count, size_t elem, arena *a);

/* VEC_GROW(arr, count, cap, arena_or_NULL): vec_grow for a typed array. */
#define VEC_GROW(arr, count, cap, a) vec_grow((void **)&(arr), &(cap), (count), sizeof *(arr), (a))

#endif
