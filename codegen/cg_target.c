/* codegen/cg_target.c — the default target descriptions per arch (cg.h). */
#include <stdio.h>
#include <string.h>

#include "codegen/cg.h"

void cg_target_default(const char *arch, cg_target *out)
{
    if (!arch) arch = "sm_90a";
    memset(out, 0, sizeof *out);
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    if (!strcmp(arch, "sm_80")) {
        out->sm_count = 108;
        out->smem_per_block = 166912;
        out->l2_bytes = 40ll << 20;
        return;
    }
    out->sm_count = 132;
    out->smem_per_block = 232448;
    out->l2_bytes = 60ll << 20;
}

static const char *const known_archs[] = {"sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"};
enum { NKNOWN = (int)(sizeof known_archs / sizeof known_archs[0]) };

const char *cg_target_archs(void) { return "sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a"; }

bool cg_target_known(const char *arch)
{
    for (int i = 0; arch && i < NKNOWN; i++)
        if (!strcmp(arch, known_archs[i])) return true;
    return false;
}
