/* tests/model/test_ckpt_cpu.c — Hugging Face checkpoints without a GPU: a
 * directory with model.safetensors.index.json and shards, a directory with one
 * model.safetensors, and crafted, truncated and inconsistent index files, each
 * rejected with a message that names the problem. On a compile-only context a
 * checkpoint that validates ends in KILN_ERR_NO_DEVICE (the copy). */
#include "api/api_util.h"

#include <sys/stat.h>
#include <unistd.h>
#include "check.h"

static kiln_context *ctx;

static const char *MODEL =
    "model tiny {\n"
    "  dims B, S, T\n"
    "  const V = 16, D = 8, NL = 2\n"
    "  input ids : i32[B, S]\n"
    "  weight embed : bf16[V, D] = \"model.embed_tokens.weight\"\n"
    "  weight norm : bf16[D] = \"model.norm.weight\"\n"
    "  x = embedding(embed, ids)\n"
    "  layer i < NL {\n"
    "    weight w : bf16[D, D] = \"model.layers.{i}.mlp.weight\"\n"
    "    x = x + linear(x, w)\n"
    "  }\n"
    "  output logits = linear(rmsnorm(x, norm), embed)\n"
    "}\n";

static char dir[512];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void write_text(const char *name, const char *text)
{
    char p[1024];
    path_in(p, sizeof p, name);
    CHECK(api_write_file(p, text, strlen(text)) == 0);
}

/* A shard holding the named tensors (shapes from the model, or [3] for an unknown one). */
static void write_shard(kiln_model *m, const char *name, const char *const *tensors, int n, int bad_shape)
{
    kiln_host_tensor t[8];
    void *bufs[8] = {0};
    uint64_t seed = 11;
    for (int i = 0; i < n; i++) {
        kiln_tensor_info ti;
        if (kiln_model_find_tensor(m, tensors[i], NULL, 0, &ti) != KILN_OK) {
            ti.dtype = KILN_BF16;
            ti.rank = 1;
            ti.shape[0] = 3;
            ti.bytes = 6;
        }
        if (bad_shape && i == 0) ti.shape[ti.rank - 1] -= 1, ti.bytes = ti.bytes / (size_t)(ti.shape[ti.rank - 1] + 1) * (size_t)ti.shape[ti.rank - 1];
        bufs[i] = malloc(ti.bytes);
        uint16_t *p = bufs[i];
        for (size_t j = 0; j < ti.bytes / 2; j++) p[j] = (uint16_t)(api_rand(&seed) & 0x3f7f);
        t[i] = (kiln_host_tensor){tensors[i], ti.dtype, ti.rank, {0}, bufs[i]};
        memcpy(t[i].shape, ti.shape, sizeof ti.shape);
    }
    char p[1024];
    path_in(p, sizeof p, name);
    CHECK_MSG(kiln_safetensors_write(p, t, n) == KILN_OK, "%s", kiln_last_error());
    for (int i = 0; i < n; i++) free(bufs[i]);
}

static const char *SHARD1[] = {"model.embed_tokens.weight", "model.layers.0.mlp.weight"};
static const char *SHARD2[] = {"model.layers.1.mlp.weight", "model.norm.weight"};

static const char *GOOD_INDEX =
    "{\"metadata\": {\"total_size\": %d}, \"weight_map\": {"
    "\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
    "\"model.layers.0.mlp.weight\": \"model-00001-of-00002.safetensors\","
    "\"model.layers.1.mlp.weight\": \"model-00002-of-00002.safetensors\","
    "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}";
#define TOTAL (16 * 8 * 2 + 8 * 8 * 2 * 2 + 8 * 2)

static void expect(kiln_model *m, const char *path, unsigned flags, kiln_status want_st, const char *want, int line)
{
    kiln_status st = kiln_model_load_checkpoint(m, path, flags);
    if (want_st == KILN_OK && !kiln_context_has_device(ctx)) want_st = KILN_ERR_NO_DEVICE;
    CHECK_MSG(st == want_st, "line %d: status %s, expected %s: %s", line, kiln_status_str(st), kiln_status_str(want_st),
              kiln_last_error());
    if (want) CHECK_MSG(api_contains(kiln_last_error(), want), "line %d: message lacks \"%s\": %s", line, want, kiln_last_error());
}
#define EXPECT(m, p, f, s, w) expect(m, p, f, s, w, __LINE__)

static void index_text(char *buf, size_t n, const char *fmt) { snprintf(buf, n, fmt, TOTAL); }

int main(void)
{
    kiln_context_options co = {.compile_only = 1, .no_disk_cache = 1};
    if (kiln_context_create(&ctx, &co) != KILN_OK) {
        fprintf(stderr, "context: %s\n", kiln_last_error());
        return 1;
    }
    kiln_dim maxd[] = {{"B", 2}, {"S", 4}, {"T", 8}};
    kiln_model_options mo = {.max_dims = maxd, .nmax_dims = 3, .lazy = 1};
    kiln_model *m = NULL;
    CHECK_MSG(kiln_model_compile_string(ctx, "tiny.kiln", MODEL, &mo, &m) == KILN_OK, "%s", kiln_last_error());
    if (!m) return CHECK_DONE();
    char *base = api_tmpfile("ckpt");
    snprintf(dir, sizeof dir, "%s", base);
    free(base);
    mkdir(dir, 0700);
    char idx[1024], buf[4096];
    path_in(idx, sizeof idx, "model.safetensors.index.json");

    write_shard(m, "model-00001-of-00002.safetensors", SHARD1, 2, 0);
    write_shard(m, "model-00002-of-00002.safetensors", SHARD2, 2, 0);
    index_text(buf, sizeof buf, GOOD_INDEX);
    write_text("model.safetensors.index.json", buf);
    EXPECT(m, dir, 0, KILN_OK, NULL); /* the directory */
    EXPECT(m, idx, 0, KILN_OK, NULL); /* the index itself */

    /* crafted and truncated indexes */
    write_text("model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": ");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "model.safetensors.index.json: not valid JSON");
    write_text("model.safetensors.index.json", "[1, 2]");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "no \"weight_map\" object");
    write_text("model.safetensors.index.json", "{\"weight_map\": {}}");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "the weight_map is empty");
    write_text("model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": 3}}");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "tensor 'model.norm.weight': the shard is not a string");
    write_text("model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": \"../secret.safetensors\"}}");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "shard \"../secret.safetensors\" is not a file name in the index's directory");
    write_text("model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"x.safetensors\", \"a\": \"y.safetensors\"}}");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "not valid JSON");
    write_text("model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": \"model-00003-of-00002.safetensors\"}}");
    EXPECT(m, dir, 0, KILN_ERR_IO, "shard model-00003-of-00002.safetensors");

    /* inconsistent with its shards */
    snprintf(buf, sizeof buf,
             "{\"weight_map\": {\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
             "\"model.layers.0.mlp.weight\": \"model-00002-of-00002.safetensors\","
             "\"model.layers.1.mlp.weight\": \"model-00002-of-00002.safetensors\","
             "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}");
    write_text("model.safetensors.index.json", buf);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "tensor 'model.layers.0.mlp.weight' is listed in model-00002-of-00002.safetensors but is in");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS,
           "tensor 'model.layers.0.mlp.weight' is in model-00001-of-00002.safetensors and also in model-00002-of-00002.safetensors");
    snprintf(buf, sizeof buf,
             "{\"weight_map\": {\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
             "\"model.layers.1.mlp.weight\": \"model-00002-of-00002.safetensors\","
             "\"model.norm.weight\": \"model-00002-of-00002.safetensors\", \"lm_head.weight\": \"model-00002-of-00002.safetensors\"}}");
    write_text("model.safetensors.index.json", buf);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS,
           "tensor 'model.layers.0.mlp.weight' of model-00001-of-00002.safetensors is not in the weight_map");
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "tensor 'lm_head.weight' is listed in model-00002-of-00002.safetensors, which does not hold it");
    snprintf(buf, sizeof buf, GOOD_INDEX, TOTAL + 2);
    write_text("model.safetensors.index.json", buf);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "metadata.total_size is");

    /* consistent index, shards that do not fit the model */
    index_text(buf, sizeof buf, GOOD_INDEX);
    write_text("model.safetensors.index.json", buf);
    write_shard(m, "model-00002-of-00002.safetensors", SHARD2, 2, 1);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "metadata.total_size is 528 bytes but the shards hold 512");
    snprintf(buf, sizeof buf, "{%s", strstr(GOOD_INDEX, "\"weight_map\""));
    write_text("model.safetensors.index.json", buf);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS,
           "model-00002-of-00002.safetensors: tensor 'model.layers.1.mlp.weight': shape [8, 7] but the model declares "
           "model.layers.1.mlp.weight : bf16[8, 8] (tiny.kiln:9)");
    write_shard(m, "model-00002-of-00002.safetensors", SHARD2, 1, 0);
    snprintf(buf, sizeof buf,
             "{\"weight_map\": {\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
             "\"model.layers.0.mlp.weight\": \"model-00001-of-00002.safetensors\","
             "\"model.layers.1.mlp.weight\": \"model-00002-of-00002.safetensors\"}}");
    write_text("model.safetensors.index.json", buf);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "1 weight of model tiny missing from the checkpoint: model.norm.weight : bf16[8]");
    EXPECT(m, dir, KILN_LOAD_ALLOW_MISSING, KILN_OK, NULL);
    /* a truncated shard: rt_st_open's checks, named with the shard */
    char sp[1024];
    path_in(sp, sizeof sp, "model-00002-of-00002.safetensors");
    CHECK(truncate(sp, 40) == 0);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "shard model-00002-of-00002.safetensors:");

    /* no index: the directory's model.safetensors */
    remove(idx);
    EXPECT(m, dir, 0, KILN_ERR_IO, "neither model.safetensors.index.json nor model.safetensors");
    const char *all[] = {"model.embed_tokens.weight", "model.layers.0.mlp.weight", "model.layers.1.mlp.weight",
                         "model.norm.weight"};
    write_shard(m, "model.safetensors", all, 4, 0);
    EXPECT(m, dir, 0, KILN_OK, NULL);
    const char *extra[] = {"model.embed_tokens.weight", "model.layers.0.mlp.weight", "model.layers.1.mlp.weight",
                           "model.norm.weight", "lm_head.weight"};
    write_shard(m, "model.safetensors", extra, 5, 0);
    EXPECT(m, dir, 0, KILN_ERR_WEIGHTS, "tensor 'lm_head.weight' is not a weight of model tiny");
    EXPECT(m, dir, KILN_LOAD_IGNORE_UNKNOWN, KILN_OK, NULL);

    const char *files[] = {"model.safetensors", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    for (int i = 0; i < 3; i++) {
        path_in(sp, sizeof sp, files[i]);
        remove(sp);
    }
    rmdir(dir);
    kiln_model_free(m);
    kiln_context_free(ctx);
    return CHECK_DONE();
}
