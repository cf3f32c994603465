/* codegen/cg_report.c — what codegen adds to the reports: the kernels that
 * fall back to the generic template (correct, slow), with the reason the
 * family's template refused them (`kiln compile --explain` and
 * `--emit=plan` print these as warnings); and the weight copies the runtime
 * makes when weights are bound, counted by the rule the runtime follows. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "passes/pass.h"
#include "util/vec.h"

int cg_fallbacks_print(const ir_graph *g, const cg_options *opts, FILE *out, char *err, size_t errlen)
{
    cg_kernel *ks = NULL;
    int n = 0;
    if (cg_emit_all_ex(g, opts, &ks, &n, err, errlen) != 0) return -1;
    int count = 0;
    for (int i = 0; i < n; i++) count += cg_fallback_print(g, &ks[i], out);
    cg_kernels_free(ks, n);
    return count;
}

int cg_fallback_print(const ir_graph *g, const cg_kernel *k, FILE *out)
{
    if (!k->note) return 0;
    arena a;
    arena_init(&a);
    const ir_node *anchor = g->groups[k->group].anchor;
    const char *why = k->note;
    if (!strncmp(why, "generic fallback: ", 18)) why += 18;
    fprintf(out, "warning: kernel k%d (%s, %s) runs the generic %s template, not the %s one: %s\n", k->group, k->kind,
            pass_describe(&a, anchor), cg_family_name(k->family), k->kind, why);
    int64_t h, kv, hd;
    if (anchor && anchor->op == IR_OP_ATTENTION && ir_dim_is_const(&anchor->inputs[0]->type.dims[2], &h) &&
        ir_dim_is_const(&anchor->inputs[1]->type.dims[1], &kv) && ir_dim_is_const(&anchor->inputs[0]->type.dims[3], &hd) &&
        kv > 0)
        /* the generic kernel computes each output element alone: two passes over its query's keys
         * (scores, then the weighted sum), each reading whole K rows */
        fprintf(out, "  expected cost: every output element reads its keys' K rows twice and a V column, about %.0fx "
                     "the K/V bytes of the attention template (G*(HD+1/2), G=%lld query heads per KV head, HD=%lld)\n",
                (double)(h / kv) * ((double)hd + 0.5), (long long)(h / kv), (long long)hd);
    arena_free(&a);
    return 1;
}

/* The rows-interleave half a kernel applies to node, or 0. */
static int64_t interleave_half(const cg_kernel *k, int node)
{
    for (int i = 0; i < k->nxforms; i++) {
        int64_t h;
        if (k->xforms[i].node == node && k->xforms[i].kind == CG_XFORM_INTERLEAVE_ROWS &&
            ir_dim_value(&k->xforms[i].half, NULL, &h))
            return h;
    }
    return 0;
}

/* How many rope-pair changes (CG_XFORM_ROPE_PAIRS) a kernel applies to node. */
static int rope_pairs(const cg_kernel *k, int node)
{
    int c = 0;
    for (int i = 0; i < k->nxforms; i++) c += k->xforms[i].node == node && k->xforms[i].kind == CG_XFORM_ROPE_PAIRS;
    return c;
}

int cg_bind_copies(const ir_graph *g, const cg_options *opts, const int64_t *dims, int64_t *bytes, FILE *out,
                   char *err, size_t errlen)
{
    *bytes = 0;
    cg_kernel *ks = NULL;
    int n = 0;
    if (cg_emit_all_ex(g, opts, &ks, &n, err, errlen) != 0) return -1;
    /* one copy per (node, layout), as the runtime keys its products */
    typedef struct copy {
        int node;
        int64_t half;
        int pairs;
    } copy;
    copy *seen = NULL;
    int cap = 0, count = 0, rc = 0;
    arena a;
    arena_init(&a);
    for (int k = 0; k < n && rc == 0; k++)
        for (int i = 0; i < ks[k].nargs && rc == 0; i++) {
            const cg_arg *x = &ks[k].args[i];
            if (x->node < 0) continue;
            int64_t half = interleave_half(&ks[k], x->node);
            int pairs = rope_pairs(&ks[k], x->node);
            if (!(x->kind == CG_ARG_PACKED || (x->kind == CG_ARG_PARAM && (half > 0 || pairs > 0)))) continue;
            bool dup = false;
            for (int j = 0; j < count && !dup; j++)
                dup = seen[j].node == x->node && seen[j].half == half && seen[j].pairs == pairs;
            if (dup) continue;
            if (!VEC_GROW(seen, count, cap, &a)) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
                break;
            }
            seen[count++] = (copy){x->node, half, pairs};
            const ir_node *v = g->nodes[x->node];
            bool overflow = false;
            ir_dim b = ir_type_bytes(&v->type, &overflow);
            int64_t vb = 0;
            if (overflow || !ir_dim_value(&b, dims, &vb)) {
                snprintf(err, errlen, overflow ? "the size of %s does not fit in 64 bits" : "the size of %s needs every dim bound",
                         pass_describe(&a, v));
                rc = -1;
                break;
            }
            *bytes += vb;
            if (out) {
                const char *what = v->op == IR_OP_WEIGHT ? arena_printf(&a, "weight %s", v->name ? v->name : "?")
                                                         : pass_describe(&a, v);
                fprintf(out, "  bind-time copy: %s%s%s, %s\n", what,
                        half > 0 ? " with its rows interleaved (gate/up side by side for the SwiGLU epilogue)" : "",
                        pairs > 0 ? " with its rotated rows paired (each RoPE pair side by side for the QKV epilogue)" : "",
                        pass_bytes_str(&a, g, &b));
            }
        }
    arena_free(&a);
    cg_kernels_free(ks, n);
    return rc < 0 ? -1 : count;
}
