/* tests/runtime/test_weights_reader.c — reading files that are not what
 * they should be (issue: reliability):
 *   - safetensors data with a hole between tensors, trailing bytes after the
 *     last one, or a tensor at an offset that is not a multiple of its
 *     element size: rejected, as the reference implementation does;
 *   - a directory, a FIFO or a device as the weights file: RT_ERR_IO (the
 *     C API: KILN_ERR_IO), at once (a FIFO with no writer does not hang);
 *   - the same as a model file (fe_source_read): a located error at once,
 *     nothing read (/dev/zero used to grow a 2 GiB buffer). */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <signal.h>

#include "check.h"
#include "frontend/frontend.h"
#include "kiln.h"
#include "runtime/rt_weights.h"
#include "rt_test_util.h"

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_weights_reader: hung on a FIFO\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

/* 8-byte length, header, data */
static size_t file_of(unsigned char *out, const char *header, size_t data_len)
{
    size_t h = strlen(header);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(out + 8, header, h);
    memset(out + 8 + h, 0x3c, data_len);
    return 8 + h + data_len;
}

static rt_status parse(const char *header, size_t data_len, char *err, size_t n)
{
    static unsigned char buf[4096];
    size_t len = file_of(buf, header, data_len);
    rt_st_file f;
    rt_status st = rt_st_parse(buf, len, "t.safetensors", &f, err, n);
    if (st == RT_OK) rt_st_close(&f);
    return st;
}

static void test_layout(void)
{
    char err[1024];
    /* back to back from 0, an empty tensor between: fine */
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[8,14]}}", 14, err, sizeof err) == RT_OK);
    /* a hole */
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, err, sizeof err) == RT_ERR_WEIGHTS);
    CHECK_MSG(strstr(err, "4 bytes of the data before tensor 'b' [8, 12] belong to no tensor (a hole)"), "%s", err);
    /* a hole at the start */
    CHECK(parse("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, err, sizeof err) == RT_ERR_WEIGHTS);
    CHECK_MSG(strstr(err, "a hole"), "%s", err);
    /* trailing bytes */
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, err, sizeof err) == RT_ERR_WEIGHTS);
    CHECK_MSG(strstr(err, "8 bytes after the last tensor's data belong to no tensor (trailing bytes"), "%s", err);
    /* data and no tensors */
    CHECK(parse("{}", 3, err, sizeof err) == RT_ERR_WEIGHTS && strstr(err, "trailing bytes"));
    CHECK(parse("{\"__metadata__\":{\"a\":\"b\"}}", 0, err, sizeof err) == RT_OK);
    /* misaligned: an f32 at offset 2 behind a bf16 */
    CHECK(parse("{\"h\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]},"
                "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 6, err, sizeof err) == RT_ERR_WEIGHTS);
    CHECK_MSG(strstr(err, "tensor 'f' starts at data offset 2, not a multiple of its element size (F32, 4 bytes)"), "%s", err);
}

static void test_not_files(void)
{
    signal(SIGALRM, on_alarm);
    alarm(20);
    char *dir = make_tmpdir(), fifo[600];
    snprintf(fifo, sizeof fifo, "%s/w.safetensors", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    const char *bad[] = {dir, fifo, "/dev/zero"};
    const char *why[] = {"a directory", "a FIFO", "a device"};
    char err[1024];
    for (int i = 0; i < 3; i++) {
        rt_st_file f;
        CHECK_MSG(rt_st_open(bad[i], &f, err, sizeof err) == RT_ERR_IO && strstr(err, why[i]), "%s: %s", bad[i], err);
    }
    /* through the C API, against a model */
    kiln_context *ctx = NULL;
    kiln_context_options co = {.compile_only = 1, .no_cache = 1};
    CHECK(kiln_context_create(&ctx, &co) == KILN_OK);
    kiln_model *m = NULL;
    kiln_dim maxd[] = {{"B", 2}};
    kiln_model_options mo = {.max_dims = maxd, .nmax_dims = 1, .lazy = 1};
    CHECK(kiln_model_compile_string(ctx, "w.kiln", "model w {\n  dims B\n  input x : f32[B, 4]\n  weight w : f32[4, 4]\n"
                                    "  output y = linear(x, w)\n}\n", &mo, &m) == KILN_OK);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(kiln_model_load_safetensors(m, bad[i]) == KILN_ERR_IO, "%s: %s", bad[i], kiln_last_error());
        CHECK(strstr(kiln_last_error(), why[i]));
    }
    kiln_model_free(m);
    kiln_context_free(ctx);

    /* as model files: refused before a byte is read */
    snprintf(fifo, sizeof fifo, "%s/m.kiln", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    const char *bad_models[] = {dir, fifo, "/dev/zero"};
    for (int i = 0; i < 3; i++) {
        arena a;
        arena_init(&a);
        diag_list d;
        diag_list_init(&d, &a);
        fe_source src;
        CHECK(fe_source_read(&src, bad_models[i], &d) != 0 && d.count == 1);
        char *text = NULL;
        size_t tl = 0;
        FILE *mem = open_memstream(&text, &tl);
        diag_print(&d, mem, NULL);
        fclose(mem);
        CHECK_MSG(text && strstr(text, "not a regular file") && strstr(text, why[i]), "%s", text ? text : "(null)");
        free(text);
        diag_list_free(&d);
        arena_free(&a);
    }
    alarm(0);
    rm_tree(dir);
    free(dir);
}

int main(void)
{
    test_layout();
    test_not_files();
    return CHECK_DONE();
}
