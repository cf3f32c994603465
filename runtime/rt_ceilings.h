/* runtime/rt_ceilings.h — what the device can do: the one source of
 * ceilings for Kiln's floors and for bench/.
 *
 *   read bandwidth   a streaming-read kernel (16-byte loads, four in flight
 *                    per thread, every SM full) over a 2 GiB buffer of random
 *                    bits, compiled with NVRTC like Kiln's kernels; the median
 *                    of 20 timed passes after 3 warm-up ones.
 *   tensor rate      cuBLAS GEMMs of 8192^3 (bf16 and f16 in, f32 accumulate,
 *                    random inputs), back to back for at least 100 ms per
 *                    measure (one burst reads high), the median of 3.
 *
 * Measured once per device and kept in the cache directory
 * (<cache root>/ceilings/<device>-<key>.json, written to a temp file and
 * renamed), keyed by the device name, the driver version, the clocks the
 * device reports and Kiln's version. A file is used only when it parses,
 * its checksum (XXH3-64 over its canonical JSON without the checksum)
 * matches and its key is the device's; otherwise the ceilings are measured
 * again and the file replaced. */
#ifndef KILN_RT_CEILINGS_H
#define KILN_RT_CEILINGS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/rt_err.h"

typedef struct rt_ceilings {
    /* the key */
    char device[256];
    int driver;                      /* cudaDriverGetVersion: 13000 = 13.0 */
    int sm_clock_khz, mem_clock_khz; /* the peak clocks the device reports */
    char kiln[32];                   /* Kiln's version */
    /* the figures */
    double read_bw;                  /* bytes/s */
    double bf16_rate, f16_rate;      /* FLOP/s */
    /* how they were measured */
    int64_t read_bytes;
    int gemm_n, gemm_iters;          /* per sustained measure */
    double gemm_ms;                  /* length of one sustained measure */
    char measured[32];               /* UTC, "2026-12-01T09:00:00Z" */
} rt_ceilings;

/* The key of device `device` (name, driver, clocks, Kiln version) into c
 * (figures zeroed). */
rt_status rt_ceilings_key(int device, rt_ceilings *c, char *err, size_t n);

/* The file for key under the cache root `root`: malloc'd path. */
char *rt_ceilings_path(const char *root, const rt_ceilings *key);

/* Reads and verifies a file against key (NULL: any key). RT_ERR_NOT_FOUND
 * when there is no file; RT_ERR_IO (the reason in err) when it is corrupt,
 * or measured for another key. */
rt_status rt_ceilings_read(const char *path, const rt_ceilings *key, rt_ceilings *out, char *err, size_t n);
/* Writes c (atomically: a temp file renamed), making the directory. */
rt_status rt_ceilings_write(const char *path, const rt_ceilings *c, char *err, size_t n);

/* Measures on `device` (arch: its NVRTC target, e.g. "sm_90a") into out,
 * whose key fields rt_ceilings_key fills. stream: a cudaStream_t or NULL. */
rt_status rt_ceilings_measure(int device, const char *arch, void *stream, rt_ceilings *out, char *err, size_t n);

/* The ceilings of `device`: from the cache root's file when it verifies,
 * else measured and stored (remeasure: always measured). *from_file says
 * which; path (may be NULL) receives the file's path (malloc'd). root NULL:
 * rt_cache_resolve_dir. A file that cannot be written is no error. */
rt_status rt_ceilings_get(int device, const char *arch, const char *root, bool remeasure, rt_ceilings *out,
                          bool *from_file, char **path, char *err, size_t n);

/* The source of the measuring kernels (NVRTC, no headers), for tests that
 * compile it without a device. */
const char *rt_ceilings_source(void);

/* The JSON text `kiln ceilings --json` prints (malloc'd): the fields above,
 * read_bw in bytes/s and rates in FLOP/s. */
char *rt_ceilings_json(const rt_ceilings *c);

#endif
