/* frontend/suggest.c — "did you mean 'X'?": Levenshtein distance with
 * adjacent transpositions (optimal string alignment), bounded by the length
 * of the name so that short names only match near-identical candidates. */
#include <stdlib.h>
#include <string.h>

#include "frontend/lower.h"

#define MAXLEN 64

int fe_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > MAXLEN || m > MAXLEN) return (int)(n > m ? n : m);
    int d[MAXLEN + 1][MAXLEN + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

bool fe_suggest_consider(const char *name, const char *cand, int *best_d)
{
    if (strcmp(name, cand) == 0) return false;
    size_t len = strlen(name);
    int limit = len <= 2 ? 1 : len <= 5 ? 2 : 3;
    int dist = fe_edit_distance(name, cand);
    if (dist > limit || dist >= *best_d) return false;
    /* a one-letter name matches any other one-letter name: not helpful */
    if (len == 1 && strlen(cand) == 1) return false;
    *best_d = dist;
    return true;
}
