/* tests/codegen/ptxas_log.h — reading the ptxas -v report in an NVRTC log
 * (compiled with --ptxas-options=-v), shared by the codegen tests. */
#ifndef KILN_TESTS_PTXAS_LOG_H
#define KILN_TESTS_PTXAS_LOG_H
#include <stdio.h>
#include <string.h>

/* "N bytes stack frame, S bytes spill stores, L bytes spill loads" for kernel
 * `kname` in a ptxas -v log; 1 when found and all three are zero (*regs gets
 * the registers it uses). */
static inline int ptxas_no_spills(const char *log, const char *kname, int *regs)
{
    const char *k = strstr(log, kname);
    if (!k) return 0;
    const char *f = strstr(k, "bytes stack frame");
    const char *u = strstr(k, "Used ");
    if (!f || !u) return 0;
    while (f > log && f[-1] == ' ') f--;
    while (f > log && f[-1] >= '0' && f[-1] <= '9') f--;
    int frame = -1, st = -1, ld = -1;
    if (sscanf(f, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &frame, &st, &ld) != 3)
        return 0;
    sscanf(u, "Used %d registers", regs);
    return frame == 0 && st == 0 && ld == 0;
}

/* 1 when every line of the log is ptxas's -v report ("ptxas info    : ...",
 * "ptxas         .     0 bytes stack frame, ..."): no error, no warning,
 * nothing else. */
static inline int ptxas_info_only(const char *log)
{
    for (const char *l = log; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)len, l);
        if (len && (strncmp(line, "ptxas ", 6) || strstr(line, "warning") || strstr(line, "error"))) return 0;
        l = e ? e + 1 : l + len;
    }
    return 1;
}

#endif
