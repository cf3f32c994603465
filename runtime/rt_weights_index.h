/* runtime/rt_weights_index.h — a Hugging Face checkpoint: one .safetensors
 * file, or shards listed by model.safetensors.index.json.
 *
 * The index is
 *   {"metadata": {"total_size": BYTES, ...}, "weight_map": {"TENSOR": "SHARD", ...}}
 * (metadata optional). rt_ckpt_open takes a directory (its
 * model.safetensors.index.json, else its model.safetensors), an index file or
 * a .safetensors file, and checks, before anything is copied anywhere:
 *   - the index is one JSON object with a "weight_map" object whose values are
 *     shard file names: plain names in the index's directory (no '/', not
 *     "." or ".."), each a file that rt_st_open validates in full;
 *   - every tensor the index lists is in the shard it names, and every tensor
 *     of every shard is listed, for that shard (no tensor in two shards);
 *   - "total_size", when given, equals the sum of the tensors' bytes.
 * Each problem is one line of the message, naming the index and the tensor. */
#ifndef KILN_RT_WEIGHTS_INDEX_H
#define KILN_RT_WEIGHTS_INDEX_H
#include "runtime/rt_weights.h"

#define RT_CKPT_INDEX_NAME "model.safetensors.index.json"
#define RT_CKPT_SINGLE_NAME "model.safetensors"
#define RT_CKPT_MAX_INDEX (64u << 20) /* bytes of index JSON */

typedef struct rt_ckpt {
    char *index_path;   /* NULL for a single file */
    rt_st_file *shards; /* opened and validated */
    int nshards;
    uint64_t bytes;     /* of all tensors */
} rt_ckpt;

/* Parse an index already read (text of len bytes; name for messages, dir
 * where the shards are) and open its shards. RT_ERR_WEIGHTS for a malformed
 * or inconsistent index, RT_ERR_IO for a shard that cannot be read,
 * RT_ERR_NOMEM. */
rt_status rt_ckpt_parse_index(const char *text, size_t len, const char *name, const char *dir, rt_ckpt *c, char *err,
                              size_t n);
rt_status rt_ckpt_open(const char *path, rt_ckpt *c, char *err, size_t n);
void rt_ckpt_close(rt_ckpt *c); /* NULL-safe, idempotent */
/* The tensor and its shard (NULL when absent). */
const rt_st_tensor *rt_ckpt_find(const rt_ckpt *c, const char *name, const rt_st_file **shard);

#endif
