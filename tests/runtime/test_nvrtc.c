/* tests/runtime/test_nvrtc.c — NVRTC compilation without a GPU: PTX and
 * sm_90a cubins of a bf16 kernel with a clean log, compile errors that name
 * the kernel and carry the log, option checking, include-dir resolution, and
 * parallel compiles that give the same bytes as serial ones. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <pthread.h>

#include "check.h"
#include "runtime/rt_nvrtc.h"
#include "rt_test_util.h"

static void test_version(void)
{
    int maj = 0, min = -1;
    CHECK(rt_nvrtc_version(&maj, &min) == RT_OK);
    CHECK_MSG(maj >= 12 && min >= 0, "NVRTC %d.%d", maj, min);
    CHECK(rt_nvrtc_version(NULL, &min) == RT_ERR_INVALID);
    printf("NVRTC %d.%d\n", maj, min);
}

static void test_bf16_ptx_and_cubin(void)
{
    char src[1024];
    bf16_kernel(src, sizeof src, "scale_bf16", 2);

    rt_compile_result r;
    CHECK(rt_nvrtc_compile("scale_bf16", src, NULL, RT_TARGET_PTX, &r) == RT_OK);
    CHECK(r.status == RT_OK && r.message == NULL);
    CHECK_MSG(r.log && r.log[0] == '\0', "log: [%s]", r.log ? r.log : "(null)");
    CHECK(r.code.data && r.code.size > 0);
    CHECK(r.code.data && r.code.data[r.code.size] == '\0' && strlen((char *)r.code.data) == r.code.size);
    CHECK(r.code.data && strstr((char *)r.code.data, ".target sm_90a"));
    CHECK(r.code.data && strstr((char *)r.code.data, ".entry scale_bf16"));
    rt_compile_result_free(&r);
    CHECK(r.code.data == NULL && r.log == NULL);

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rt_compile_opts o = {.arch = "sm_90a"};
    CHECK(rt_nvrtc_compile("scale_bf16", src, &o, RT_TARGET_CUBIN, &r) == RT_OK);
    double ms = ms_since(&t0);
    CHECK_MSG(r.log && r.log[0] == '\0', "log: [%s]", r.log ? r.log : "(null)");
    CHECK(r.code.size > 64 && r.code.data && !memcmp(r.code.data, "\x7f" "ELF", 4));
    CHECK(r.ms > 0 && r.ms <= ms + 1);
    printf("bf16 kernel -> sm_90a cubin: %zu bytes, %.1f ms\n", r.code.size, r.ms);
    rt_compile_result_free(&r);

    /* and the header-free kernel, the NVRTC floor */
    plain_kernel(src, sizeof src, "plain", 1);
    CHECK(rt_nvrtc_compile("plain", src, NULL, RT_TARGET_CUBIN, &r) == RT_OK);
    printf("header-free kernel -> cubin: %zu bytes, %.1f ms\n", r.code.size, r.ms);
    rt_compile_result_free(&r);
}

static void test_log_on_success(void)
{
    /* A warning: the log is captured even though the compile succeeds. */
    const char *src = "extern \"C\" __global__ void warny(float *y) { int unused; y[0] = 1.0f; }\n";
    rt_compile_result r;
    CHECK(rt_nvrtc_compile("warny", src, NULL, RT_TARGET_CUBIN, &r) == RT_OK);
    CHECK_MSG(r.log && strstr(r.log, "unused"), "log: [%s]", r.log ? r.log : "(null)");
    CHECK(r.message == NULL && r.code.size > 0);
    rt_compile_result_free(&r);
}

static void test_syntax_error(void)
{
    const char *src = "extern \"C\" __global__ void bad_kernel(float *y) { y[0] = 1.0f +; }\n";
    rt_compile_result r;
    CHECK(rt_nvrtc_compile("bad_kernel", src, NULL, RT_TARGET_CUBIN, &r) == RT_ERR_COMPILE);
    CHECK(r.status == RT_ERR_COMPILE);
    CHECK(r.code.data == NULL && r.code.size == 0);
    CHECK_MSG(r.log && strstr(r.log, "error"), "log: [%s]", r.log ? r.log : "(null)");
    CHECK_MSG(r.message && strstr(r.message, "kernel 'bad_kernel'"), "message: [%s]",
              r.message ? r.message : "(null)");
    CHECK(r.message && r.log && strstr(r.message, r.log));
    CHECK(r.message && strstr(r.message, "bad_kernel(1): error"));
    rt_compile_result_free(&r);

    /* PTX too */
    CHECK(rt_nvrtc_compile("bad_kernel", src, NULL, RT_TARGET_PTX, &r) == RT_ERR_COMPILE);
    CHECK(r.message && strstr(r.message, "kernel 'bad_kernel'"));
    rt_compile_result_free(&r);
}

static void test_bad_options(void)
{
    char src[512];
    plain_kernel(src, sizeof src, "k", 1);
    rt_compile_result r;
    const char *bad_arch[] = {"../../etc", "compute_90a", "sm_", "SM_90", "sm_90a/x", ""};
    for (size_t i = 0; i < sizeof bad_arch / sizeof *bad_arch; i++) {
        rt_compile_opts o = {.arch = bad_arch[i]};
        CHECK_MSG(rt_nvrtc_compile("k_opts", src, &o, RT_TARGET_CUBIN, &r) == RT_ERR_INVALID,
                  "arch '%s'", bad_arch[i]);
        CHECK(r.message && strstr(r.message, "kernel 'k_opts'"));
        rt_compile_result_free(&r);
    }
    const char *extra[] = {"-DX=1", "-arch=sm_80"};
    rt_compile_opts o = {.extra = extra, .nextra = 2};
    CHECK(rt_nvrtc_compile("k", src, &o, RT_TARGET_CUBIN, &r) == RT_ERR_INVALID);
    rt_compile_result_free(&r);
    CHECK(rt_nvrtc_compile("k", NULL, NULL, RT_TARGET_CUBIN, &r) == RT_ERR_INVALID);
    CHECK(r.message && strstr(r.message, "kernel 'k'"));
    rt_compile_result_free(&r);
    CHECK(rt_nvrtc_compile("k", src, NULL, RT_TARGET_CUBIN, NULL) == RT_ERR_INVALID);

    /* an unknown option is NVRTC's to reject: a status, not a crash */
    const char *unknown[] = {"--no-such-option"};
    rt_compile_opts u = {.extra = unknown, .nextra = 1};
    rt_status st = rt_nvrtc_compile("k_unknown", src, &u, RT_TARGET_CUBIN, &r);
    CHECK(st == RT_ERR_COMPILE);
    CHECK(r.message && strstr(r.message, "kernel 'k_unknown'"));
    rt_compile_result_free(&r);

    /* extra options reach NVRTC */
    const char *src_def = "extern \"C\" __global__ void kd(float *y) { y[0] = VALUE; }\n";
    const char *def[] = {"-DVALUE=3.0f", "--use_fast_math"};
    rt_compile_opts d = {.extra = def, .nextra = 2, .lineinfo = true};
    CHECK(rt_nvrtc_compile("kd", src_def, &d, RT_TARGET_PTX, &r) == RT_OK);
    CHECK(r.code.data && strstr((char *)r.code.data, ".loc")); /* -lineinfo */
    rt_compile_result_free(&r);
    CHECK(rt_nvrtc_compile("kd", src_def, NULL, RT_TARGET_PTX, &r) == RT_ERR_COMPILE);
    rt_compile_result_free(&r);
}

static void test_include_dir(void)
{
    char buf[4096];
    const char *env1[] = {"KILN_CUDA_INCLUDE", "/nonexistent", "CUDA_HOME", "/usr/local/cuda", NULL};
    fake_env e1 = {env1};
    CHECK(rt_nvrtc_include_dir(fake_getenv, &e1, buf, sizeof buf));
    CHECK_MSG(!strcmp(buf, "/usr/local/cuda/include"), "got %s", buf);
    const char *env2[] = {"KILN_CUDA_INCLUDE", "/usr/local/cuda/include/", NULL};
    fake_env e2 = {env2};
    CHECK(rt_nvrtc_include_dir(fake_getenv, &e2, buf, sizeof buf));
    CHECK(!strcmp(buf, "/usr/local/cuda/include/"));
    const char *env3[] = {NULL};
    fake_env e3 = {env3};
    CHECK(rt_nvrtc_include_dir(fake_getenv, &e3, buf, sizeof buf)); /* build-time default */
    CHECK(!rt_nvrtc_include_dir(fake_getenv, &e3, buf, 4)); /* too small */

    /* No include directory: a bf16 kernel fails and the message says why. */
    char src[1024];
    bf16_kernel(src, sizeof src, "needs_headers", 1);
    rt_compile_opts o = {.include_dir = ""};
    rt_compile_result r;
    CHECK(rt_nvrtc_compile("needs_headers", src, &o, RT_TARGET_PTX, &r) == RT_ERR_COMPILE);
    CHECK(r.message && strstr(r.message, "cuda_bf16.h") && strstr(r.message, "KILN_CUDA_INCLUDE"));
    rt_compile_result_free(&r);
}

typedef struct progress_log {
    int calls, last_done, seen[16];
    bool bad;
} progress_log;

static void on_progress(void *user, int done, int total, int index, const rt_compile_result *r)
{
    progress_log *p = user;
    p->calls++;
    if (done != p->last_done + 1 || total != 8 || index < 0 || index >= 8 || !r) p->bad = true;
    else p->seen[index]++;
    p->last_done = done;
}

static void test_compile_many(void)
{
    enum { N = 8 };
    char srcs[N][1024], names[N][32];
    const char *sp[N], *np[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i);
        if (i % 2) bf16_kernel(srcs[i], sizeof srcs[i], names[i], i + 1);
        else plain_kernel(srcs[i], sizeof srcs[i], names[i], i + 1);
        sp[i] = srcs[i];
        np[i] = names[i];
    }
    rt_compile_result one[N], many[N];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) CHECK(rt_nvrtc_compile(np[i], sp[i], NULL, RT_TARGET_CUBIN, &one[i]) == RT_OK);
    double serial = ms_since(&t0);

    progress_log pl = {0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(rt_nvrtc_compile_many(N, np, sp, NULL, RT_TARGET_CUBIN, many, 0, on_progress, &pl) == RT_OK);
    double par = ms_since(&t0);
    printf("%d kernels: serial %.0f ms, parallel (%ld cpus) %.0f ms\n", N, serial,
           sysconf(_SC_NPROCESSORS_ONLN), par);
    CHECK(pl.calls == N && !pl.bad && pl.last_done == N);
    for (int i = 0; i < N; i++) {
        CHECK(pl.seen[i] == 1);
        CHECK(many[i].status == RT_OK && many[i].log && many[i].log[0] == '\0');
        CHECK_MSG(one[i].code.size == many[i].code.size && one[i].code.size > 0 &&
                      !memcmp(one[i].code.data, many[i].code.data, one[i].code.size),
                  "unit %d differs", i);
        rt_compile_result_free(&one[i]);
        rt_compile_result_free(&many[i]);
    }

    /* one bad unit among good ones, more threads than units, PTX */
    sp[5] = "extern \"C\" __global__ void k5(float *y) { y[0] = ; }\n";
    CHECK(rt_nvrtc_compile_many(6, np, sp, NULL, RT_TARGET_PTX, many, 64, NULL, NULL) == RT_ERR_COMPILE);
    for (int i = 0; i < 6; i++) {
        if (i == 5) {
            CHECK(many[i].status == RT_ERR_COMPILE);
            CHECK(many[i].message && strstr(many[i].message, "kernel 'k5'"));
        } else {
            CHECK(many[i].status == RT_OK && many[i].code.size > 0);
        }
        rt_compile_result_free(&many[i]);
    }
    /* single thread, n = 0, bad args */
    CHECK(rt_nvrtc_compile_many(2, np, sp, NULL, RT_TARGET_CUBIN, many, 1, NULL, NULL) == RT_OK);
    for (int i = 0; i < 2; i++) rt_compile_result_free(&many[i]);
    CHECK(rt_nvrtc_compile_many(0, NULL, NULL, NULL, RT_TARGET_CUBIN, NULL, 0, NULL, NULL) == RT_OK);
    CHECK(rt_nvrtc_compile_many(2, np, NULL, NULL, RT_TARGET_CUBIN, many, 0, NULL, NULL) == RT_ERR_INVALID);
}

static void test_key_options(void)
{
    const char *argv[16];
    const char *extra[] = {"-DA=1", "-DB=2"};
    rt_compile_opts o = {.extra = extra, .nextra = 2, .lineinfo = true};
    int n = rt_nvrtc_key_options(&o, RT_TARGET_CUBIN, argv, 16);
    CHECK(n == 6);
    bool has_a = false, has_li = false;
    for (int i = 0; i < n && i < 16; i++) {
        if (!strcmp(argv[i], "-DA=1")) has_a = true;
        if (!strcmp(argv[i], "-lineinfo")) has_li = true;
        CHECK(strncmp(argv[i], "-I", 2) != 0);
    }
    CHECK(has_a && has_li);
    CHECK(rt_nvrtc_key_options(&o, RT_TARGET_CUBIN, argv, 2) == 6); /* count beyond max */
    rt_compile_opts bad = {.arch = "sm_90a/../x"};
    CHECK(rt_nvrtc_key_options(&bad, RT_TARGET_CUBIN, argv, 16) == -1);
    CHECK(rt_nvrtc_arch_valid("sm_90a") && rt_nvrtc_arch_valid("sm_100a") && !rt_nvrtc_arch_valid(NULL));
    CHECK(!strcmp(rt_status_str(RT_ERR_COMPILE), "compile error"));
}

int main(void)
{
    test_version();
    test_bf16_ptx_and_cubin();
    test_log_on_success();
    test_syntax_error();
    test_bad_options();
    test_include_dir();
    test_compile_many();
    test_key_options();
    return CHECK_DONE();
}
