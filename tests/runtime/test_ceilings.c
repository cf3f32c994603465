/* tests/runtime/test_ceilings.c — the ceilings' file (no GPU): written and
 * read back equal; a changed byte, another key or a missing field makes it
 * unusable, with a reason; the measuring kernels compile with NVRTC for
 * sm_90a. */
#define _XOPEN_SOURCE 700
#include <jansson.h>

#include "check.h"
#include "runtime/rt_ceilings.h"
#include "runtime/rt_nvrtc.h"
#include "runtime/rt_test_util.h"

static rt_ceilings sample(void)
{
    rt_ceilings c;
    memset(&c, 0, sizeof c);
    snprintf(c.device, sizeof c.device, "NVIDIA H200");
    c.driver = 13000;
    c.sm_clock_khz = 1980000;
    c.mem_clock_khz = 3201000;
    snprintf(c.kiln, sizeof c.kiln, "0.1.0");
    c.read_bw = 4.3e12 + 0.125; /* not round: the text must carry every digit */
    c.bf16_rate = 8.123456789e14;
    c.f16_rate = 8.2e14;
    c.read_bytes = 2LL << 30;
    c.gemm_n = 8192;
    c.gemm_iters = 88;
    c.gemm_ms = 120.5;
    snprintf(c.measured, sizeof c.measured, "2026-12-01T09:00:00Z");
    return c;
}

static void rewrite(const char *path, const char *from, const char *to)
{
    FILE *f = fopen(path, "r");
    char buf[8192];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    char *at = strstr(buf, from);
    CHECK_MSG(at != NULL, "'%s' not in the file", from);
    if (!at) return;
    char out[8192];
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
    f = fopen(path, "w");
    fputs(out, f);
    fclose(f);
}

int main(void)
{
    char *dir = make_tmpdir();
    rt_ceilings c = sample(), r;
    char *path = rt_ceilings_path(dir, &c);
    CHECK(path && strstr(path, "/ceilings/NVIDIA_H200-") && strstr(path, ".json"));
    char err[512] = "";
    CHECK(rt_ceilings_read(path, &c, &r, err, sizeof err) == RT_ERR_NOT_FOUND);
    CHECK_MSG(rt_ceilings_write(path, &c, err, sizeof err) == RT_OK, "%s", err);
    CHECK_MSG(rt_ceilings_read(path, &c, &r, err, sizeof err) == RT_OK, "%s", err);
    CHECK(memcmp(&r, &c, sizeof r) == 0);
    CHECK(rt_ceilings_read(path, NULL, &r, err, sizeof err) == RT_OK);

    /* another key: another file name, and the file is refused for it */
    rt_ceilings k2 = c;
    k2.driver = 13010;
    char *p2 = rt_ceilings_path(dir, &k2);
    CHECK(p2 && strcmp(p2, path) != 0);
    free(p2);
    CHECK(rt_ceilings_read(path, &k2, &r, err, sizeof err) == RT_ERR_IO && strstr(err, "another device, driver"));
    k2 = c;
    snprintf(k2.kiln, sizeof k2.kiln, "0.2.0");
    CHECK(rt_ceilings_read(path, &k2, &r, err, sizeof err) == RT_ERR_IO);

    /* a changed figure breaks the checksum */
    rewrite(path, "\"gemm_iters\": 88", "\"gemm_iters\": 89");
    CHECK(rt_ceilings_read(path, &c, &r, err, sizeof err) == RT_ERR_IO && strstr(err, "checksum"));
    CHECK(r.read_bw == 0);
    /* not JSON */
    CHECK(rt_ceilings_write(path, &c, err, sizeof err) == RT_OK);
    rewrite(path, "{", "{{");
    CHECK(rt_ceilings_read(path, &c, &r, err, sizeof err) == RT_ERR_IO && strstr(err, "not JSON"));

    /* the --json text has the figures under their names */
    char *js = rt_ceilings_json(&c);
    json_t *o = js ? json_loads(js, 0, NULL) : NULL;
    CHECK(o && json_real_value(json_object_get(o, "read_bw")) == c.read_bw &&
          json_real_value(json_object_get(o, "bf16_rate")) == c.bf16_rate &&
          !strcmp(json_string_value(json_object_get(o, "device")), "NVIDIA H200"));
    json_decref(o);
    free(js);

    /* the measuring kernels compile */
    rt_compile_opts co = {.arch = "sm_90a", .include_dir = ""};
    rt_compile_result res = {0};
    CHECK_MSG(rt_nvrtc_compile("kiln_ceilings", rt_ceilings_source(), &co, RT_TARGET_PTX, &res) == RT_OK, "%s",
              res.message ? res.message : "");
    CHECK(res.code.data && strstr((const char *)res.code.data, "kiln_ceil_read") &&
          strstr((const char *)res.code.data, "ld.global.cs.v4"));
    rt_compile_result_free(&res);

    free(path);
    rm_tree(dir);
    free(dir);
    return CHECK_DONE();
}
