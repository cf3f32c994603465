/* tests/codegen/test_attention_nvrtc.c — the attention templates compile with
 * NVRTC for sm_90a, with a hand-written generated part, with an empty log:
 * prefill and decode, bf16 and f16, HD 64 and 128, every combination of
 * KILN_CAUSAL, KILN_ROPE, KILN_APPEND (64 units), and RoPE with the llama3
 * and YaRN frequency tables (codegen/cg_rope.c); decode at head dims 16, 80,
 * 96, 112, 192 and 256 with a sliding window and soft-capping. The all-on
 * variants (and the decode ones at 80, 96, 256) are compiled again with
 * ptxas -v to check for local memory: no stack frame, no spills; so are the decode
 * kernels with a thread-block cluster (the shapes codegen picks, and clusters of 16; the partials
 * pushed into the leader (KILN_DEC_PUSH) or combined after a cluster barrier) and the other
 * shapes of test_gpu_attention's sweep (8 warps, rings in dynamic shared memory). Needs no GPU
 * and no driver (NVRTC only). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gpu/attention_src.h"

/* The integer just before `what` in line, or -1. */
static int num_before(const char *line, const char *what)
{
    const char *w = strstr(line, what);
    if (!w) return -1;
    while (w > line && w[-1] == ' ') w--;
    const char *d = w;
    while (d > line && d[-1] >= '0' && d[-1] <= '9') d--;
    return d < w ? atoi(d) : -1;
}

int main(void)
{
    enum { NPLAIN = 64, NV = 8, NSCALED = 8, NHD = 12, NCL = 16, NSH = 8 };
    static const int hds[NHD / 2] = {16, 80, 96, 112, 192, 256};
    att_job jobs[NPLAIN + NV + NSCALED + NHD + NCL + NSH];
    memset(jobs, 0, sizeof jobs);
    int n = 0;
    for (int i = 0; i < NPLAIN; i++) {
        att_cfg c = {.decode = i & 1, .bf16 = !(i & 2), .hd = (i & 4) ? 128 : 64,
                     .causal = !!(i & 8), .rope = !!(i & 16), .append = !!(i & 32),
                     .splits = 16, .theta = 500000.0};
        jobs[n++].cfg = c;
    }
    for (int i = 0; i < NV; i++) {
        att_cfg c = {.decode = i & 1, .bf16 = !(i & 2), .hd = (i & 4) ? 128 : 64, .causal = 1,
                     .rope = 1, .append = 1, .splits = 16, .theta = 500000.0};
        jobs[n].cfg = c;
        jobs[n++].verbose_ptxas = 1;
    }
    for (int i = 0; i < NSCALED; i++) {
        att_cfg c = {.decode = i & 1, .bf16 = !(i & 2), .hd = (i & 4) ? 128 : 64, .causal = 1,
                     .rope = 1, .append = 1, .splits = 16, .theta = 500000.0};
        if (i & 4)
            c.scaling = (ir_rope_attrs){.scaling = IR_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1,
                                        .high_freq_factor = 4, .original_max_pos = 8192};
        else
            c.scaling = (ir_rope_attrs){.scaling = IR_ROPE_YARN, .factor = 4, .original_max_pos = 4096,
                                        .beta_fast = 32, .beta_slow = 1, .mscale = ir_rope_yarn_mscale(4, 1)};
        if (i >= 4) c.hd = (i & 1) ? 64 : 128;
        jobs[n++].cfg = c;
    }
    for (int i = 0; i < NHD; i++) { /* decode head dims; window and soft-cap; form (a) and (b) */
        att_cfg c = {.decode = 1, .bf16 = !(i & 1), .hd = hds[i / 2], .causal = 1, .rope = i & 1,
                     .append = i & 1, .splits = 32, .theta = 10000.0, .window = (i & 2) ? 0 : 100,
                     .softcap = (i & 2) ? 0 : 50.0};
        jobs[n].cfg = c;
        jobs[n++].verbose_ptxas = c.hd == 80 || c.hd == 96 || c.hd == 256;
    }
    /* decode with a cluster: the shapes codegen picks (cg_attention_decode_config) for the 1B,
     * 8B and Gemma-2B layers at B=1 over 1024 keys, hd 96 with 16 KV heads, B=2 over 8192 and a
     * 16-row cache, each form, and clusters of 16 at two head dims */
    static const int64_t shapes[NCL / 2][4] = {{1, 8, 64, 1024},  {1, 8, 128, 1024}, {1, 1, 256, 1024},
                                               {1, 16, 96, 1024}, {2, 8, 128, 8192}, {1, 8, 128, 16},
                                               {1, 8, 128, 0},    {1, 1, 256, 0}};
    for (int i = 0; i < NCL; i++) {
        const int64_t *sh = shapes[i / 2];
        cg_att_decode_cfg d = cg_attention_decode_config(sh[0], sh[1], sh[2], sh[3] ? sh[3] : 1024, 4, 132, 232448, true);
        if (!sh[3]) /* clusters of 16 (non-portable) of four warps, as KILN_CG_DEC_CLUSTER_MAX 16 builds them */
            d.cluster = d.splits = 16, d.stages = 2, d.warps = 4, d.threads = 128, d.minkeys = 64,
            d.cols = d.push && sh[2] % 32 == 0;
        CHECK_MSG(d.cluster > 1, "no cluster for B=%lld KV=%lld hd %lld T %lld", (long long)sh[0], (long long)sh[1],
                  (long long)sh[2], (long long)sh[3]);
        att_cfg c = {.decode = 1, .bf16 = !(i & 1), .hd = (int)sh[2], .causal = 1, .rope = i & 1, .append = i & 1,
                     .splits = d.splits, .theta = 10000.0, .threads = d.threads, .cluster = d.cluster,
                     .warps = d.warps, .stages = d.stages, .minkeys = d.minkeys,
                     .push = (i / 2) % 2 && i / 2 != 1 ? 0 : d.push, /* the two-barrier combine at 3, 5, 7 */
                     .cols = (i / 2) % 2 && i / 2 != 1 ? 0 : i / 2 == 4 ? 0 : d.cols}; /* the per-warp softmax at 4 */
        jobs[n].cfg = c;
        jobs[n++].verbose_ptxas = 1;
    }
    /* other decode shapes (test_gpu_attention's sweep): 8 warps, clusters of 16 with 2 warps, and
     * without a cluster rings above 47 KB in dynamic shared memory (KILN_DEC_DYNSMEM) */
    static const int shp[NSH][7] = {/* hd, splits, cluster, warps, stages, minkeys, threads */
                                    {128, 8, 8, 8, 2, 128, 256},  {64, 16, 16, 2, 3, 32, 64},
                                    {128, 16, 16, 8, 2, 128, 256}, {128, 1, 0, 4, 3, 0, 128},
                                    {128, 4, 0, 2, 4, 0, 64},     {64, 1, 0, 2, 6, 0, 64},
                                    {128, 16, 0, 4, 2, 64, 128},  {64, 2, 0, 4, 3, 0, 128}};
    for (int i = 0; i < NSH; i++) {
        const int *h = shp[i];
        att_cfg c = {.decode = 1, .bf16 = !(i & 1), .hd = h[0], .causal = 1, .rope = !(i & 2), .append = !(i & 2),
                     .splits = h[1], .theta = 10000.0, .cluster = h[2], .warps = h[3], .stages = h[4],
                     .minkeys = h[5], .threads = h[6]};
        jobs[n].cfg = c;
        jobs[n++].verbose_ptxas = 1;
    }
    const char *only = getenv("KILN_NVRTC_ONLY"); /* a substring of the names to compile (iterating) */
    if (only) {
        int m = 0;
        for (int i = 0; i < n; i++) {
            char name[128];
            att_cfg_name(&jobs[i].cfg, name, sizeof name);
            if (strstr(name, only)) jobs[m++] = jobs[i];
        }
        n = m;
    }
    att_compile_all(jobs, n, 0);

    for (int i = 0; i < n; i++) {
        att_job *j = &jobs[i];
        char name[128];
        att_cfg_name(&j->cfg, name, sizeof name);
        CHECK_MSG(j->ok, "%s did not compile:\n%s", name, j->log ? j->log : "(no log)");
        if (!j->ok) continue;
        if (!j->verbose_ptxas) {
            CHECK_MSG(j->log && j->log[0] == 0, "%s: NVRTC log not empty:\n%s", name, j->log);
            continue;
        }
        /* ptxas -v: only "ptxas info" lines and the stack/spill line, all zero */
        int regs = -1, smem = -1, frame = -1, spills = -1, other = 0;
        for (char *line = j->log; line && *line;) {
            char *end = strchr(line, '\n');
            if (end) *end = 0;
            int a;
            const char *u;
            if ((u = strstr(line, "Used ")) && sscanf(u, "Used %d registers", &a) == 1) {
                regs = a;
                smem = strstr(line, "bytes smem") ? num_before(line, "bytes smem") : 0; /* none: dynamic only */
            } else if (strstr(line, "bytes stack frame")) {
                frame = num_before(line, "bytes stack frame");
                spills = num_before(line, "bytes spill stores") + num_before(line, "bytes spill loads");
            } else if (strncmp(line, "ptxas info", 10) != 0 && line[0] != 0) {
                other++;
                fprintf(stderr, "%s: unexpected log line: %s\n", name, line);
            }
            line = end ? end + 1 : NULL;
        }
        printf("%-40s %3d registers, %5d bytes smem, stack %d, spills %d\n", name, regs, smem,
               frame, spills);
        CHECK_MSG(other == 0, "%s: warnings in the log", name);
        CHECK_MSG(regs > 0 && regs <= 255, "%s: %d registers", name, regs);
        CHECK_MSG(smem >= 0 && smem <= 48 * 1024, "%s: %d bytes of static smem", name, smem);
        CHECK_MSG(frame == 0 && spills == 0, "%s: stack frame %d, spills %d", name, frame, spills);
    }
    for (int i = 0; i < n; i++) att_job_free(&jobs[i]);
    return CHECK_DONE();
}
