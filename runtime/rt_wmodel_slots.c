/* runtime/rt_wmodel_slots.c — the slot table's bookkeeping (rt_wmodel.h):
 * which cache slot and which batch row each running sequence has, and the
 * table a call reads. Pure host code, no device. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_wmodel.h"

int rt_slots_init(rt_slots *t, int nslots)
{
    memset(t, 0, sizeof *t);
    if (nslots < 1) return -1;
    t->slot_row = malloc((size_t)nslots * sizeof *t->slot_row);
    t->row_slot = malloc((size_t)nslots * sizeof *t->row_slot);
    if (!t->slot_row || !t->row_slot) {
        rt_slots_free(t);
        return -1;
    }
    t->nslots = nslots;
    for (int i = 0; i < nslots; i++) t->slot_row[i] = t->row_slot[i] = -1;
    return 0;
}

void rt_slots_free(rt_slots *t)
{
    free(t->slot_row);
    free(t->row_slot);
    memset(t, 0, sizeof *t);
}

int rt_slots_open(rt_slots *t, int *row)
{
    int slot = -1, r = -1;
    for (int i = t->nslots - 1; i >= 0 && slot < 0; i--)
        if (t->slot_row[i] < 0) slot = i;
    for (int i = 0; i < t->nslots && r < 0; i++)
        if (t->row_slot[i] < 0) r = i;
    if (slot < 0 || r < 0) return -1;
    t->slot_row[slot] = r;
    t->row_slot[r] = slot;
    t->live++;
    if (row) *row = r;
    return slot;
}

int rt_slots_close(rt_slots *t, int slot)
{
    if (slot < 0 || slot >= t->nslots || t->slot_row[slot] < 0) return -1;
    t->row_slot[t->slot_row[slot]] = -1;
    t->slot_row[slot] = -1;
    t->live--;
    return 0;
}

int rt_slots_row(const rt_slots *t, int slot)
{
    return slot >= 0 && slot < t->nslots ? t->slot_row[slot] : -1;
}

int rt_slots_rows(const rt_slots *t)
{
    int n = 0;
    for (int i = 0; i < t->nslots; i++)
        if (t->row_slot[i] >= 0) n = i + 1;
    return n;
}

int rt_slots_table(const rt_slots *t, int rows, int32_t *table)
{
    if (rows < rt_slots_rows(t) || rows > t->nslots) return -1; /* every live row runs */
    int next = 0; /* the lowest free slot not handed to a hole yet */
    for (int r = 0; r < rows; r++) {
        if (t->row_slot[r] >= 0) {
            table[r] = t->row_slot[r];
            continue;
        }
        while (next < t->nslots && t->slot_row[next] >= 0) next++;
        if (next == t->nslots) return -1; /* rows > nslots: cannot happen for rows <= nslots */
        table[r] = next++;
    }
    return 0;
}
