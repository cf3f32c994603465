/* runtime/rt_cache_map.c — the kernel cache's memory map: open addressing
 * with linear probing on the 128-bit key (already a good hash: the low word
 * picks the slot), grown at half load. Every function runs under c->mu. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_cache_internal.h"

rt_cache_slot *rt_cache_map_find(rt_cache *c, rt_cache_key k)
{
    if (!c->cap) return NULL;
    for (size_t i = (size_t)k.lo & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
        if (!c->slots[i].data) return NULL;
        if (rt_cache_key_equal(c->slots[i].key, k)) return &c->slots[i];
    }
}

/* Takes ownership of data on success (true). */
bool rt_cache_map_insert(rt_cache *c, rt_cache_key k, unsigned char *data, size_t size)
{
    if ((c->count + 1) * 2 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        rt_cache_slot *ns = calloc(ncap, sizeof *ns);
        if (!ns) return false;
        for (size_t i = 0; i < c->cap; i++) {
            if (!c->slots[i].data) continue;
            size_t j = (size_t)c->slots[i].key.lo & (ncap - 1);
            while (ns[j].data) j = (j + 1) & (ncap - 1);
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->cap = ncap;
    }
    size_t i = (size_t)k.lo & (c->cap - 1);
    while (c->slots[i].data) i = (i + 1) & (c->cap - 1);
    c->slots[i] = (rt_cache_slot){k, data, size};
    c->count++;
    c->st.mem_entries = c->count;
    c->st.mem_bytes += size;
    return true;
}

unsigned char *rt_cache_bytes_dup(const unsigned char *p, size_t n)
{
    unsigned char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, p, n);
    d[n] = 0; /* PTX-friendly; not part of the blob */
    return d;
}

void rt_cache_map_free(rt_cache *c)
{
    for (size_t i = 0; i < c->cap; i++) free(c->slots[i].data);
    free(c->slots);
    c->slots = NULL;
    c->cap = c->count = 0;
    c->st.mem_entries = c->st.mem_bytes = 0;
}
