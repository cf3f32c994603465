/* codegen/cg_report.c — what codegen adds to the reports: the kernels that
 * fall back to the generic template (correct, slow), with the reason the
 * family's template refused them. `kiln compile --explain` and
 * `--emit=plan` print these as warnings. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "passes/pass.h"

int cg_fallbacks_print(const ir_graph *g, const cg_options *opts, FILE *out, char *err, size_t errlen)
{
    cg_kernel *ks = NULL;
    int n = 0;
    if (cg_emit_all_ex(g, opts, &ks, &n, err, errlen) != 0) return -1;
    int count = 0;
    arena a;
    arena_init(&a);
    for (int i = 0; i < n; i++) {
        if (!ks[i].note) continue;
        const ir_node *anchor = g->groups[ks[i].group].anchor;
        const char *why = ks[i].note;
        if (!strncmp(why, "generic fallback: ", 18)) why += 18;
        fprintf(out, "warning: kernel k%d (%s, %s) runs the generic %s template, not the %s one: %s\n", ks[i].group,
                ks[i].kind, pass_describe(&a, anchor), cg_family_name(ks[i].family), ks[i].kind, why);
        count++;
    }
    arena_free(&a);
    cg_kernels_free(ks, n);
    return count;
}
