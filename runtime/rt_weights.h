/* runtime/rt_weights.h — the safetensors format: read (validated) and write.
 *
 * A .safetensors file is
 *   u64 little-endian N | N bytes of JSON header | data
 * The header maps tensor names to {"dtype": "BF16", "shape": [..],
 * "data_offsets": [begin, end]} with offsets relative to the start of the
 * data; "__metadata__" (a string->string map) is ignored.
 *
 * rt_st_parse checks everything that can be checked without a model, and
 * never reads outside the buffer whatever the bytes say:
 *   - the file holds the 8-byte length, the length is <= RT_ST_MAX_HEADER and
 *     fits in the file;
 *   - the header is one JSON object (duplicate keys rejected), every entry
 *     an object with a known dtype string, a shape of non-negative integers
 *     (rank <= 8) and two integer data_offsets;
 *   - begin <= end <= data length, end - begin = numel * dtype size (no
 *     overflow), and no two tensors' byte ranges overlap;
 *   - as the reference implementation requires, the tensors fill the data
 *     back to back from offset 0: no holes, no trailing bytes, and each
 *     begins at a multiple of its element size.
 * The model-specific checks (names, dtypes, shapes vs declarations) are done
 * by rt_model (rt_model_load_safetensors). */
#ifndef KILN_RT_WEIGHTS_H
#define KILN_RT_WEIGHTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "runtime/rt_err.h"

#define RT_ST_MAX_HEADER (100u << 20) /* 100 MiB of JSON: as the reference implementation */
#define RT_ST_MAX_RANK 8

typedef struct rt_st_tensor {
    char *name;
    char dtype_str[16];   /* as in the file: "BF16", "F64", ... */
    bool kiln_dtype;      /* dtype maps to a Kiln dtype (BF16 F16 F32 I32) */
    ir_dtype dtype;       /* when kiln_dtype */
    int elem_size;
    int rank;
    int64_t shape[RT_ST_MAX_RANK];
    uint64_t begin, end;  /* in the data section */
    const unsigned char *data; /* begin's address */
} rt_st_tensor;

typedef struct rt_st_file {
    char *path;           /* for messages */
    void *map;            /* mmap'd file (rt_st_open) or NULL */
    size_t map_size;
    const unsigned char *data; /* the data section */
    uint64_t data_len;
    rt_st_tensor *t;      /* sorted by begin */
    int n;
} rt_st_file;

/* Parse and validate `size` bytes at buf (kept, not copied: buf must outlive
 * f). name is used in messages. Returns RT_OK, or RT_ERR_WEIGHTS (not a
 * valid safetensors file) or RT_ERR_NOMEM with a message "NAME: ..." in err. */
rt_status rt_st_parse(const void *buf, size_t size, const char *name, rt_st_file *f, char *err, size_t errlen);
/* mmap the file and parse it: rt_st_parse's statuses, RT_ERR_IO when the
 * file cannot be read, RT_ERR_INVALID for a NULL path. */
rt_status rt_st_open(const char *path, rt_st_file *f, char *err, size_t errlen);
void rt_st_close(rt_st_file *f); /* NULL-safe, idempotent */
const rt_st_tensor *rt_st_find(const rt_st_file *f, const char *name);

/* "BF16" -> IR_BF16 (false for others). */
bool rt_st_dtype_parse(const char *s, ir_dtype *out);
const char *rt_st_dtype_str(ir_dtype t);

/* Writing: tensors in the given order, data contiguous, the header padded
 * with spaces to a multiple of 8 bytes. Written to a temp file and renamed.
 * RT_ERR_INVALID for a bad tensor (name, dtype, shape, data) or arguments,
 * RT_ERR_IO when the file cannot be written, RT_ERR_NOMEM. */
typedef struct rt_st_out {
    const char *name;
    ir_dtype dtype;
    int rank;
    const int64_t *shape;
    const void *data; /* numel * dtype size bytes (host) */
} rt_st_out;
rt_status rt_safetensors_write(const char *path, const rt_st_out *ts, int n, char *err, size_t errlen);

#endif
