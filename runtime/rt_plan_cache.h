/* runtime/rt_plan_cache.h — the plan cache: what the compile driver made of a
 * model (the plan's text and memory figures, each shape variant's kernels)
 * stored in the kernel cache (rt_cache.h), so that a warm start parses and
 * fuses the model but runs no codegen.
 *
 * An entry is an ordinary kernel-cache entry (the same directory, header,
 * checksum, ownership and permission checks, size cap and LRU trimming),
 * under a key of its own:
 *   XXH3-128 over ("kiln-plan-cache", RT_PLAN_CACHE_VERSION, KILN_VERSION,
 *                  the build identity, arch, the driver's description)
 * The build identity is the GNU build-id of the binary that holds libkiln
 * (the executable it is linked into, or libkiln.so), else the XXH3-128 of
 * that file: a rebuilt Kiln never reads a plan another build wrote, since
 * codegen may have changed while KILN_VERSION did not. The description is
 * the driver's (src/compile.c): the model text and name, the defines, the
 * passes turned off or on, the max dims, the target and every option that
 * changes the plan. A variant's entry adds its dims to the key.
 *
 * The payload holds kernels as the same build laid them out in memory
 * (cg_kernel and its arrays, pointers replaced by the strings they point
 * to). A payload that does not decode, or whose kernels do not fit the
 * graph (a group, node, parameter, output or state index out of range), is
 * a miss with a reason, as is an entry the kernel cache found corrupt (it
 * deletes it): the driver then compiles in full, says so in the model's
 * warnings, and stores the entry again. */
#ifndef KILN_RT_PLAN_CACHE_H
#define KILN_RT_PLAN_CACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/cg.h"
#include "runtime/rt_cache.h"
#include "runtime/rt_plan.h"

#define RT_PLAN_CACHE_VERSION 2u

/* The key of a plan (desc: the driver's description, len bytes) for arch.
 * RT_ERR_NOT_FOUND with a reason when the build has no identity (no build-id
 * and the binary cannot be read): then there is no plan cache. */
rt_status rt_plan_cache_key(const char *desc, size_t len, const char *arch, rt_cache_key *out, char *err, size_t n);
/* The key of the shape variant with these dims (nsyms values) of the plan with key base. */
rt_cache_key rt_plan_cache_variant_key(rt_cache_key base, const int64_t *dims, int nsyms);

/* What a plan's entry holds besides the large-shape kernels (a variant's
 * entry: nothing). Strings malloc'd when read (rt_plan_cache_head_free). */
typedef struct rt_plan_cache_head {
    char *text;     /* the plan text (rt_plan.text) */
    char *report;   /* the fusion report as JSON (kc_model_options.report_json), or NULL */
    rt_memory mem;  /* the memory figures (rt_plan.memory) */
} rt_plan_cache_head;
void rt_plan_cache_head_free(rt_plan_cache_head *h);

/* Stores kernels ks[0..nk) (sharing sources by pointer as the driver leaves
 * them: share_identical_kernels), with the plan's head when head is not NULL.
 * A disk failure is not an error (rt_cache_put). */
rt_status rt_plan_cache_put(rt_cache *c, rt_cache_key key, const char *arch, const char *what,
                            const rt_plan_cache_head *head, const cg_kernel *ks, int nk);

/* A variant's entry: a hit gives its kernels (*ks, *nk: free with
 * cg_kernels_free). A miss leaves them empty; when something was wrong with
 * an entry (corrupt, does not decode, does not fit g), why says what (else
 * why is ""). */
rt_cache_lookup rt_plan_cache_get(rt_cache *c, rt_cache_key key, const char *arch, const ir_graph *g, cg_kernel **ks,
                                  int *nk, char *why, size_t n);

/* The payload coder (a plan's entry is read in two steps: its head before
 * the passes run, the kernels after, against the fused graph). encode: into
 * a malloc'd blob. decode: the head into *head when head is not NULL (an
 * entry without one fails then), and the kernels when ks is not NULL; false
 * with why on anything that does not decode or fit g. */
rt_status rt_plan_cache_encode(const rt_plan_cache_head *head, const cg_kernel *ks, int nk, rt_blob *out);
bool rt_plan_cache_decode(const unsigned char *p, size_t len, const ir_graph *g, rt_plan_cache_head *head,
                          cg_kernel **ks, int *nk, char *why, size_t n);

#endif
