/* util/arena.h — bump allocator. A graph, an AST or a compile session owns one
 * arena and frees everything it allocated in one call. Allocation failure is
 * reported by a NULL return, never by exiting. */
#ifndef KILN_UTIL_ARENA_H
#define KILN_UTIL_ARENA_H
#include <stddef.h>

typedef struct arena_block arena_block;
typedef struct arena {
    arena_block *head;
    size_t used_total;
} arena;

void arena_init(arena *a);
void arena_free(arena *a);
/* Zeroed, 16-byte aligned memory that lives until arena_free. NULL on OOM. */
void *arena_alloc(arena *a, size_t size);
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);
/* printf into the arena. */
char *arena_printf(arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
