/* tests/runtime/test_cache.c — the kernel cache: keys, directory resolution,
 * memory and disk hits, corrupt entries (flipped byte, truncation, bad magic,
 * wrong key) deleted and rebuilt, an uncreatable directory, two processes
 * filling one cache at once, threads sharing one cache, and the ls / verify /
 * clear maintenance functions. Cache directories are mkdtemp'd under /tmp. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "check.h"
#include "runtime/rt_cache.h"
#include "rt_test_util.h"

static bool blob_eq(const rt_blob *a, const rt_blob *b)
{
    return a->size == b->size && a->size > 0 && !memcmp(a->data, b->data, a->size);
}

static rt_cache *open_dir(const char *dir)
{
    rt_cache *c = NULL;
    rt_cache_config cfg = {.dir = dir};
    CHECK(rt_cache_open(&c, &cfg) == RT_OK && c);
    return c;
}

static char *entry_file(const char *dir, rt_cache_key k, const char *arch)
{
    char hex[33], *p = malloc(strlen(dir) + 128);
    rt_cache_key_hex(k, hex);
    sprintf(p, "%s/v1/%s/%s.cubin", dir, arch, hex);
    return p;
}

/* ---- keys ------------------------------------------------------------------- */

static void test_keys(void)
{
    const char *opts[] = {"-std=c++17", "-DA=1", "-default-device"};
    const char *reordered[] = {"-default-device", "-std=c++17", "-DA=1"};
    const char *changed[] = {"-std=c++17", "-DA=2", "-default-device"};
    const char *fewer[] = {"-std=c++17", "-DA=1"};
    rt_cache_key_inputs base = {1, "0.1.0", 13, 0, "sm_90a", opts, 3, "__global__ void k() {}"};
    rt_cache_key k0, k;
    CHECK(rt_cache_key_make(&base, &k0) == RT_OK);
    CHECK(rt_cache_key_make(&base, &k) == RT_OK && rt_cache_key_equal(k, k0));

    rt_cache_key_inputs in = base;
    in.options = reordered;
    CHECK(rt_cache_key_make(&in, &k) == RT_OK && rt_cache_key_equal(k, k0));

    rt_cache_key_inputs vary[8];
    for (int i = 0; i < 8; i++) vary[i] = base;
    vary[0].format_version = 2;
    vary[1].kiln_version = "0.1.1";
    vary[2].nvrtc_major = 12;
    vary[3].nvrtc_minor = 1;
    vary[4].arch = "sm_100a";
    vary[5].options = changed;
    vary[6].options = fewer, vary[6].noptions = 2;
    vary[7].source = "__global__ void k() { }";
    rt_cache_key keys[8];
    for (int i = 0; i < 8; i++) {
        CHECK(rt_cache_key_make(&vary[i], &keys[i]) == RT_OK);
        CHECK_MSG(!rt_cache_key_equal(keys[i], k0), "variation %d kept the key", i);
        for (int j = 0; j < i; j++) CHECK(!rt_cache_key_equal(keys[i], keys[j]));
    }
    /* field boundaries are length-prefixed: moving a char between fields changes the key */
    const char *o1[] = {"-DAB", "C"}, *o2[] = {"-DA", "BC"};
    in = base, in.options = o1, in.noptions = 2;
    rt_cache_key ka, kb;
    CHECK(rt_cache_key_make(&in, &ka) == RT_OK);
    in.options = o2;
    CHECK(rt_cache_key_make(&in, &kb) == RT_OK && !rt_cache_key_equal(ka, kb));
    in = base, in.source = NULL;
    CHECK(rt_cache_key_make(&in, &k) == RT_ERR_INVALID);

    char hex[33];
    rt_cache_key_hex((rt_cache_key){0x0123456789abcdefull, 0xfedcba9876543210ull}, hex);
    CHECK(!strcmp(hex, "0123456789abcdeffedcba9876543210"));

    /* keys of real compiles: options (but not their order), arch and source matter */
    const char *src = "extern \"C\" __global__ void k(float *y) { y[0] = 1.0f; }\n";
    const char *e1[] = {"-DX=1", "-DY=2"}, *e2[] = {"-DY=2", "-DX=1"};
    rt_compile_opts a = {.extra = e1, .nextra = 2}, b = {.extra = e2, .nextra = 2};
    rt_compile_opts c90 = {.arch = "sm_90"}, li = {.lineinfo = true};
    rt_cache_key kd, kn, k1, k2, k3, k4, k5;
    CHECK(rt_cache_key_for(src, NULL, &kd) == RT_OK);
    rt_compile_opts dflt = {.arch = "sm_90a"};
    CHECK(rt_cache_key_for(src, &dflt, &kn) == RT_OK && rt_cache_key_equal(kd, kn));
    CHECK(rt_cache_key_for(src, &a, &k1) == RT_OK);
    CHECK(rt_cache_key_for(src, &b, &k2) == RT_OK && rt_cache_key_equal(k1, k2));
    CHECK(!rt_cache_key_equal(k1, kd));
    CHECK(rt_cache_key_for(src, &c90, &k3) == RT_OK && !rt_cache_key_equal(k3, kd));
    CHECK(rt_cache_key_for(src, &li, &k4) == RT_OK && !rt_cache_key_equal(k4, kd));
    CHECK(rt_cache_key_for("extern \"C\" __global__ void k(float *y) { y[0] = 2.0f; }\n", NULL, &k5) ==
              RT_OK && !rt_cache_key_equal(k5, kd));
    /* the include directory is not part of the key */
    rt_compile_opts inc = {.include_dir = "/somewhere/else"};
    CHECK(rt_cache_key_for(src, &inc, &k) == RT_OK && rt_cache_key_equal(k, kd));
    rt_compile_opts bad = {.arch = "../x"};
    CHECK(rt_cache_key_for(src, &bad, &k) == RT_ERR_INVALID);
}

/* ---- directory resolution ------------------------------------------------------ */

static void test_resolve_dir(void)
{
    char *d = NULL;
    const char *all[] = {"KILN_CACHE_DIR", "/k", "XDG_CACHE_HOME", "/x", "HOME", "/h", NULL};
    const char *no_kiln[] = {"KILN_CACHE_DIR", "", "XDG_CACHE_HOME", "/x", "HOME", "/h", NULL};
    const char *home_only[] = {"XDG_CACHE_HOME", "", "HOME", "/h", NULL};
    const char *none[] = {"HOME", "", NULL};
    fake_env e1 = {all}, e2 = {no_kiln}, e3 = {home_only}, e4 = {none};
    CHECK(rt_cache_resolve_dir(fake_getenv, &e1, &d) == RT_OK && d && !strcmp(d, "/k"));
    free(d);
    CHECK(rt_cache_resolve_dir(fake_getenv, &e2, &d) == RT_OK && d && !strcmp(d, "/x/kiln"));
    free(d);
    CHECK(rt_cache_resolve_dir(fake_getenv, &e3, &d) == RT_OK && d && !strcmp(d, "/h/.cache/kiln"));
    free(d);
    CHECK(rt_cache_resolve_dir(fake_getenv, &e4, &d) == RT_ERR_IO && d == NULL);

    /* open with no dir uses the environment: here a temp dir through KILN_CACHE_DIR */
    char *tmp = make_tmpdir();
    const char *env[] = {"KILN_CACHE_DIR", tmp, "HOME", "/nonexistent-home", NULL};
    fake_env e5 = {env};
    rt_cache_config cfg = {.getenv = fake_getenv, .getenv_user = &e5};
    rt_cache *c = NULL;
    CHECK(rt_cache_open(&c, &cfg) == RT_OK && rt_cache_dir(c) && !strcmp(rt_cache_dir(c), tmp));
    char v1[512];
    snprintf(v1, sizeof v1, "%s/v1", tmp);
    CHECK(file_exists(v1));
    rt_cache_close(c);

    /* no directory at all: one warning, memory only */
    cfg.getenv_user = &e4;
    CHECK(rt_cache_open(&c, &cfg) == RT_OK && !rt_cache_disk_enabled(c));
    char *w = rt_cache_take_warnings(c);
    CHECK(w && strstr(w, "KILN_CACHE_DIR"));
    free(w);
    rt_cache_close(c);
    rm_tree(tmp);
    free(tmp);
}

/* ---- hits and misses ------------------------------------------------------------ */

static void test_hits(void)
{
    char *dir = make_tmpdir();
    char src[1024];
    bf16_kernel(src, sizeof src, "cached_bf16", 3);
    rt_cache *c = open_dir(dir);
    rt_compile_result r1, r2, r3;
    rt_cache_lookup how;
    CHECK(rt_cache_compile(c, "cached_bf16", src, NULL, 0, &r1, &how) == RT_OK && how == RT_CACHE_MISS);
    CHECK(r1.log && r1.log[0] == '\0' && r1.code.size > 0);
    CHECK(rt_cache_compile(c, "cached_bf16", src, NULL, 0, &r2, &how) == RT_OK && how == RT_CACHE_HIT_MEMORY);
    CHECK(blob_eq(&r1.code, &r2.code) && r2.log && r2.log[0] == '\0');
    rt_cache_stats s;
    rt_cache_get_stats(c, &s);
    CHECK(s.misses == 1 && s.mem_hits == 1 && s.disk_hits == 0 && s.compiles == 1 && s.writes == 1);
    CHECK(s.mem_entries == 1 && s.mem_bytes == r1.code.size && s.warnings == 0);

    rt_cache_key k;
    CHECK(rt_cache_key_for(src, NULL, &k) == RT_OK);
    char *path = entry_file(dir, k, "sm_90a");
    CHECK_MSG(file_size(path) > (long)(RT_CACHE_HEADER_SIZE + r1.code.size), "%s", path); /* + its manifest */
    rt_cache_close(c);

    /* a new cache object on the same directory: a disk hit, the same bytes */
    c = open_dir(dir);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(rt_cache_compile(c, "cached_bf16", src, NULL, 0, &r3, &how) == RT_OK && how == RT_CACHE_HIT_DISK);
    printf("disk hit: %.3f ms\n", ms_since(&t0));
    CHECK(blob_eq(&r1.code, &r3.code));
    rt_compile_result_free(&r3);
    CHECK(rt_cache_compile(c, "cached_bf16", src, NULL, 0, &r3, &how) == RT_OK && how == RT_CACHE_HIT_MEMORY);
    CHECK(blob_eq(&r1.code, &r3.code));
    rt_cache_get_stats(c, &s);
    CHECK(s.disk_hits == 1 && s.mem_hits == 1 && s.misses == 0 && s.compiles == 0);

    /* get/put directly; on disk the wrong arch is another directory, so a miss */
    rt_blob b = {0};
    rt_cache *c2 = open_dir(dir);
    CHECK(rt_cache_get(c2, k, "sm_100a", &b) == RT_CACHE_MISS && b.data == NULL);
    rt_cache_close(c2);
    CHECK(rt_cache_get(c, k, "../../x", &b) == RT_CACHE_ERROR);
    CHECK(rt_cache_put(c, k, "sm_90a", &(rt_blob){NULL, 0}) == RT_ERR_INVALID);

    /* --no-cache: compiles, stores nothing */
    rt_compile_result_free(&r3);
    CHECK(rt_cache_compile(c, "cached_bf16", src, NULL, RT_CACHE_NO_CACHE, &r3, &how) == RT_OK &&
          how == RT_CACHE_MISS);
    CHECK(blob_eq(&r1.code, &r3.code));
    rt_cache_get_stats(c, &s);
    CHECK(s.compiles == 1 && s.writes == 0 && s.mem_hits == 1);
    rt_compile_result_free(&r3);
    /* no cache object at all */
    CHECK(rt_cache_compile(NULL, "cached_bf16", src, NULL, 0, &r3, &how) == RT_OK && how == RT_CACHE_MISS);
    rt_compile_result_free(&r3);

    /* a compile error through the cache is not stored */
    const char *bad = "extern \"C\" __global__ void oops(float *y) { y[0] = ; }\n";
    CHECK(rt_cache_compile(c, "oops", bad, NULL, 0, &r3, &how) == RT_ERR_COMPILE);
    CHECK(r3.message && strstr(r3.message, "kernel 'oops'"));
    rt_compile_result_free(&r3);
    CHECK(rt_cache_compile(c, "oops", bad, NULL, 0, &r3, &how) == RT_ERR_COMPILE && how == RT_CACHE_MISS);
    rt_compile_result_free(&r3);
    CHECK(rt_cache_take_warnings(c) == NULL);
    rt_cache_close(c);

    /* memory only */
    rt_cache_config mem = {.no_disk = true};
    CHECK(rt_cache_open(&c, &mem) == RT_OK && !rt_cache_disk_enabled(c) && !rt_cache_dir(c));
    CHECK(rt_cache_compile(c, "cached_bf16", src, NULL, 0, &r3, &how) == RT_OK && how == RT_CACHE_MISS);
    rt_compile_result_free(&r3);
    CHECK(rt_cache_compile(c, "cached_bf16", src, NULL, 0, &r3, &how) == RT_OK && how == RT_CACHE_HIT_MEMORY);
    rt_compile_result_free(&r3);
    CHECK(rt_cache_take_warnings(c) == NULL);
    rt_cache_close(c);

    free(path);
    rt_compile_result_free(&r1);
    rt_compile_result_free(&r2);
    rm_tree(dir);
    free(dir);
}

/* ---- corruption ------------------------------------------------------------------- */

typedef enum { FLIP_PAYLOAD, FLIP_CHECKSUM, TRUNCATE, TRUNCATE_HEADER, EXTEND, BAD_MAGIC, WRONG_KEY,
               BAD_VERSION, EMPTY, N_DAMAGE } damage;
static const char *const damage_name[] = {"flip payload", "flip checksum", "truncate", "truncate header",
                                          "extend", "bad magic", "wrong key", "bad version", "empty"};
static const char *const damage_why[] = {"checksum", "checksum", "length", "header", "length",
                                         "magic", "key", "version", "header"};

static void damage_file(const char *path, const char *other, damage d)
{
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    if (fd < 0) return;
    long size = file_size(path);
    unsigned char byte;
    off_t at = d == FLIP_PAYLOAD ? size - 7 : d == FLIP_CHECKSUM ? 27 : d == BAD_MAGIC ? 3 : 8;
    switch (d) {
    case FLIP_PAYLOAD: case FLIP_CHECKSUM: case BAD_MAGIC: case BAD_VERSION:
        CHECK(pread(fd, &byte, 1, at) == 1);
        byte ^= d == BAD_VERSION ? 0x02 : 0x10;
        CHECK(pwrite(fd, &byte, 1, at) == 1);
        break;
    case TRUNCATE: CHECK(ftruncate(fd, size - 10) == 0); break;
    case TRUNCATE_HEADER: CHECK(ftruncate(fd, 20) == 0); break;
    case EMPTY: CHECK(ftruncate(fd, 0) == 0); break;
    case EXTEND: CHECK(pwrite(fd, "junk", 4, size) == 4); break;
    case WRONG_KEY: {
        /* a valid entry of another key, copied under this key's name */
        close(fd);
        fd = -1;
        FILE *in = fopen(other, "rb"), *out = fopen(path, "wb");
        CHECK(in && out);
        int ch;
        while (in && out && (ch = fgetc(in)) != EOF) fputc(ch, out);
        if (in) fclose(in);
        if (out) fclose(out);
        break;
    }
    case N_DAMAGE: break;
    }
    if (fd >= 0) close(fd);
}

static void test_corruption(void)
{
    char *dir = make_tmpdir();
    char src[512], other_src[512];
    plain_kernel(src, sizeof src, "victim", 7);
    plain_kernel(other_src, sizeof other_src, "bystander", 8);
    rt_compile_result good, r;
    rt_cache_lookup how;
    rt_cache *c = open_dir(dir);
    CHECK(rt_cache_compile(c, "victim", src, NULL, 0, &good, &how) == RT_OK && how == RT_CACHE_MISS);
    CHECK(rt_cache_compile(c, "bystander", other_src, NULL, 0, &r, &how) == RT_OK);
    rt_compile_result_free(&r);
    rt_cache_close(c);
    rt_cache_key k, ko;
    CHECK(rt_cache_key_for(src, NULL, &k) == RT_OK && rt_cache_key_for(other_src, NULL, &ko) == RT_OK);
    char *path = entry_file(dir, k, "sm_90a"), *other = entry_file(dir, ko, "sm_90a");
    CHECK(file_exists(path) && file_exists(other));

    for (int d = 0; d < N_DAMAGE; d++) {
        damage_file(path, other, (damage)d);
        c = open_dir(dir);
        /* get alone: detected, deleted, a miss, no bytes */
        rt_blob b = {(unsigned char *)"x", 1};
        CHECK_MSG(rt_cache_get(c, k, "sm_90a", &b) == RT_CACHE_MISS, "%s", damage_name[d]);
        CHECK(b.data == NULL && b.size == 0);
        CHECK_MSG(!file_exists(path), "%s: corrupt file kept", damage_name[d]);
        rt_cache_stats s;
        rt_cache_get_stats(c, &s);
        CHECK(s.corrupt_removed == 1 && s.misses == 1 && s.disk_hits == 0);
        char *w = rt_cache_take_warnings(c);
        CHECK_MSG(w && strstr(w, "corrupt") && strstr(w, damage_why[d]), "%s: warning [%s]",
                  damage_name[d], w ? w : "(null)");
        free(w);
        /* rebuilt through compile and stored again */
        CHECK(rt_cache_compile(c, "victim", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_MISS);
        CHECK(blob_eq(&r.code, &good.code));
        rt_compile_result_free(&r);
        CHECK(file_exists(path));
        rt_cache_close(c);
        /* and now good again from disk */
        c = open_dir(dir);
        CHECK(rt_cache_compile(c, "victim", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_HIT_DISK);
        CHECK(blob_eq(&r.code, &good.code));
        rt_compile_result_free(&r);
        rt_cache_close(c);
    }

    /* damage found by compile directly (not get) also rebuilds */
    damage_file(path, other, FLIP_PAYLOAD);
    c = open_dir(dir);
    CHECK(rt_cache_compile(c, "victim", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_MISS);
    CHECK(blob_eq(&r.code, &good.code));
    rt_compile_result_free(&r);
    rt_cache_stats s;
    rt_cache_get_stats(c, &s);
    CHECK(s.corrupt_removed == 1 && s.compiles == 1 && s.writes == 1);
    free(rt_cache_take_warnings(c));
    rt_cache_close(c);

    rt_compile_result_free(&good);
    free(path);
    free(other);
    rm_tree(dir);
    free(dir);
}

/* ---- an uncreatable directory ------------------------------------------------------- */

static void on_warn(void *user, const char *msg)
{
    int *n = user;
    (*n)++;
    CHECK(msg && strstr(msg, "memory only"));
}

static void test_unwritable(void)
{
    /* A path under a regular file can never be created, even by root. */
    char *dir = make_tmpdir();
    char file[512], bad[600];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    FILE *f = fopen(file, "w");
    CHECK(f);
    if (f) fclose(f);
    snprintf(bad, sizeof bad, "%s/sub/cache", file);

    char src[512];
    plain_kernel(src, sizeof src, "homeless", 1);
    rt_cache *c = open_dir(bad);
    CHECK(c && !rt_cache_disk_enabled(c) && rt_cache_dir(c) == NULL);
    rt_compile_result r;
    rt_cache_lookup how;
    CHECK(rt_cache_compile(c, "homeless", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_MISS);
    CHECK(r.code.size > 0);
    rt_compile_result_free(&r);
    CHECK(rt_cache_compile(c, "homeless", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_HIT_MEMORY);
    rt_compile_result_free(&r);
    rt_cache_stats s;
    rt_cache_get_stats(c, &s);
    CHECK(s.warnings == 1 && s.writes == 0 && s.write_failures == 0);
    char *w = rt_cache_take_warnings(c);
    CHECK_MSG(w && strstr(w, "memory only") && strstr(w, bad) && !strchr(w, '\n')[1], "[%s]", w ? w : "");
    free(w);
    CHECK(rt_cache_take_warnings(c) == NULL); /* retrievable once */
    uint64_t removed = 1;
    CHECK(rt_cache_verify(c, NULL) == RT_ERR_INVALID && strstr(rt_cache_error(c), "memory-only"));
    CHECK(rt_cache_clear(c, &removed) == RT_OK && removed == 0);
    rt_cache_close(c);

    /* with a callback: it gets the one warning */
    int calls = 0;
    rt_cache_config cfg = {.dir = bad, .warn = on_warn, .warn_user = &calls};
    CHECK(rt_cache_open(&c, &cfg) == RT_OK);
    CHECK(rt_cache_compile(c, "homeless", src, NULL, 0, &r, &how) == RT_OK);
    rt_compile_result_free(&r);
    CHECK(calls == 1 && rt_cache_take_warnings(c) == NULL);
    rt_cache_close(c);

    /* the root exists but an arch directory cannot be made: writes fail,
     * counted, warned about once, compiles still work */
    char *root = make_tmpdir(), archfile[600];
    snprintf(archfile, sizeof archfile, "%s/v1", root);
    CHECK(mkdir(archfile, 0755) == 0);
    snprintf(archfile, sizeof archfile, "%s/v1/sm_90a", root);
    f = fopen(archfile, "w");
    if (f) fclose(f);
    c = open_dir(root);
    CHECK(rt_cache_disk_enabled(c));
    for (int i = 0; i < 2; i++) {
        plain_kernel(src, sizeof src, "nowrite", i);
        CHECK(rt_cache_compile(c, "nowrite", src, NULL, 0, &r, &how) == RT_OK && how == RT_CACHE_MISS);
        rt_compile_result_free(&r);
    }
    rt_cache_get_stats(c, &s);
    CHECK(s.write_failures == 2 && s.writes == 0 && s.warnings == 1);
    w = rt_cache_take_warnings(c);
    CHECK(w && strstr(w, "cannot write"));
    free(w);
    rt_cache_close(c);

    rm_tree(root);
    free(root);
    rm_tree(dir);
    free(dir);
}

/* ---- two processes at once ----------------------------------------------------------- */

enum { SHARED = 40, OWN = 40, ROUNDS = 3 };

static void fake_blob(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed * 2654435761u + i * 40503u);
}

static rt_cache_key fake_key(unsigned seed)
{
    return (rt_cache_key){0x1234000000000000ull | seed, 0x9876000000000000ull ^ ((uint64_t)seed * 7919)};
}

static size_t fake_size(unsigned seed) { return 256 + (seed * 37) % 4096; }

/* One writer process: shared keys 0..SHARED-1 and its own SHARED+who*OWN...
 * Returns 0 when every put and get succeeded. */
static int filler(const char *dir, int who, int go_fd)
{
    char ch;
    if (read(go_fd, &ch, 1) != 1) return 10;
    int bad = 0;
    unsigned char buf[8192];
    for (int round = 0; round < ROUNDS; round++) {
        rt_cache *c = NULL;
        rt_cache_config cfg = {.dir = dir};
        if (rt_cache_open(&c, &cfg) != RT_OK || !rt_cache_disk_enabled(c)) return 11;
        for (int i = 0; i < SHARED + OWN; i++) {
            unsigned seed = i < SHARED ? (unsigned)i : (unsigned)(SHARED + who * OWN + (i - SHARED));
            size_t n = fake_size(seed);
            fake_blob(buf, n, seed);
            rt_blob b = {0};
            rt_cache_lookup h = rt_cache_get(c, fake_key(seed), "sm_90a", &b);
            if (h == RT_CACHE_HIT_DISK) {
                if (b.size != n || memcmp(b.data, buf, n)) bad++;
            } else if (h == RT_CACHE_MISS) {
                if (rt_cache_put(c, fake_key(seed), "sm_90a", &(rt_blob){buf, n}) != RT_OK) bad++;
            } else {
                bad++;
            }
            rt_blob_free(&b);
        }
        /* and one real compile per process per round, same source in both */
        char src[512];
        plain_kernel(src, sizeof src, "racer", round);
        rt_compile_result r;
        if (rt_cache_compile(c, "racer", src, NULL, 0, &r, NULL) != RT_OK) bad++;
        rt_compile_result_free(&r);
        rt_cache_stats s;
        rt_cache_get_stats(c, &s);
        if (s.corrupt_removed || s.write_failures) bad += 100;
        rt_cache_close(c);
    }
    return bad;
}

static void test_two_processes(void)
{
    char *dir = make_tmpdir();
    int go[2];
    CHECK(pipe(go) == 0);
    fflush(NULL);
    pid_t pids[2];
    for (int who = 0; who < 2; who++) {
        pids[who] = fork();
        CHECK(pids[who] >= 0);
        if (pids[who] == 0) {
            close(go[1]);
            int bad = filler(dir, who, go[0]);
            _exit(bad > 255 ? 255 : bad);
        }
    }
    close(go[0]);
    CHECK(write(go[1], "gg", 2) == 2); /* release both at once */
    close(go[1]);
    for (int who = 0; who < 2; who++) {
        int status = 0;
        CHECK(waitpid(pids[who], &status, 0) == pids[who]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "filler %d: status %d", who, status);
    }

    /* every entry verifies; every key reads back with its bytes */
    rt_cache *c = open_dir(dir);
    rt_cache_verify_stats vs;
    CHECK(rt_cache_verify(c, &vs) == RT_OK);
    CHECK_MSG(vs.ok == SHARED + 2 * OWN + ROUNDS && vs.corrupt_removed == 0 && vs.other_files == 0,
              "ok %llu corrupt %llu other %llu", (unsigned long long)vs.ok,
              (unsigned long long)vs.corrupt_removed, (unsigned long long)vs.other_files);
    unsigned char buf[8192];
    int good = 0;
    for (unsigned seed = 0; seed < SHARED + 2 * OWN; seed++) {
        rt_blob b = {0};
        size_t n = fake_size(seed);
        fake_blob(buf, n, seed);
        if (rt_cache_get(c, fake_key(seed), "sm_90a", &b) == RT_CACHE_HIT_DISK && b.size == n &&
            !memcmp(b.data, buf, n))
            good++;
        rt_blob_free(&b);
    }
    CHECK(good == SHARED + 2 * OWN);
    rt_cache_close(c);
    rm_tree(dir);
    free(dir);
}

/* ---- threads sharing one cache ------------------------------------------------------ */

typedef struct thread_arg {
    rt_cache *c;
    int who, bad;
} thread_arg;

static void *hammer(void *p)
{
    thread_arg *a = p;
    unsigned char buf[8192];
    for (int round = 0; round < 4; round++)
        for (unsigned seed = 0; seed < 64; seed++) {
            unsigned s = (seed + (unsigned)a->who * 16) % 64;
            size_t n = fake_size(s);
            fake_blob(buf, n, s);
            rt_blob b = {0};
            rt_cache_lookup h = rt_cache_get(a->c, fake_key(s), "sm_90a", &b);
            if (h == RT_CACHE_MISS) {
                if (rt_cache_put(a->c, fake_key(s), "sm_90a", &(rt_blob){buf, n}) != RT_OK) a->bad++;
            } else if (h < 0 || b.size != n || memcmp(b.data, buf, n)) {
                a->bad++;
            }
            rt_blob_free(&b);
        }
    return NULL;
}

static void test_threads(void)
{
    char *dir = make_tmpdir();
    rt_cache *c = open_dir(dir);
    pthread_t t[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){c, i, 0};
        CHECK(pthread_create(&t[i], NULL, hammer, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(args[i].bad == 0);
    }
    rt_cache_stats s;
    rt_cache_get_stats(c, &s);
    CHECK(s.mem_entries == 64 && s.corrupt_removed == 0 && s.write_failures == 0);
    CHECK(s.mem_hits + s.disk_hits + s.misses == 4 * 4 * 64);
    rt_cache_close(c);
    rm_tree(dir);
    free(dir);
}

/* ---- compile_many through the cache --------------------------------------------------- */

typedef struct many_log {
    int calls, seen[8];
} many_log;

static void many_progress(void *user, int done, int total, int index, const rt_compile_result *r)
{
    many_log *m = user;
    m->calls++;
    CHECK(total == 2 && done >= 1 && done <= 2 && r && r->status == RT_OK);
    if (index >= 0 && index < 8) m->seen[index]++;
}

static void test_compile_many(void)
{
    char *dir = make_tmpdir();
    char srcs[4][512], names[4][16];
    const char *sp[4], *np[4];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "many%d", i);
        sp[i] = plain_kernel(srcs[i], sizeof srcs[i], names[i], i);
        np[i] = names[i];
    }
    rt_cache *c = open_dir(dir);
    rt_compile_result r[4];
    rt_cache_lookup how[4];
    /* units 1 and 3 cached first */
    for (int i = 1; i < 4; i += 2) {
        CHECK(rt_cache_compile(c, np[i], sp[i], NULL, 0, &r[i], NULL) == RT_OK);
        rt_compile_result_free(&r[i]);
    }
    many_log ml = {0};
    CHECK(rt_cache_compile_many(c, 4, np, sp, NULL, 0, r, how, 0, many_progress, &ml) == RT_OK);
    CHECK(how[0] == RT_CACHE_MISS && how[1] == RT_CACHE_HIT_MEMORY && how[2] == RT_CACHE_MISS &&
          how[3] == RT_CACHE_HIT_MEMORY);
    CHECK(ml.calls == 2 && ml.seen[0] == 1 && ml.seen[2] == 1);
    rt_compile_result single;
    for (int i = 0; i < 4; i++) {
        CHECK(r[i].status == RT_OK && r[i].code.size > 0);
        CHECK(rt_nvrtc_compile(np[i], sp[i], NULL, RT_TARGET_CUBIN, &single) == RT_OK);
        CHECK(blob_eq(&single.code, &r[i].code));
        rt_compile_result_free(&single);
        rt_compile_result_free(&r[i]);
    }
    /* all hits now; a bad unit fails alone */
    sp[2] = "extern \"C\" __global__ void many2(float *y) { y[0] = ; }\n";
    CHECK(rt_cache_compile_many(c, 4, np, sp, NULL, 0, r, how, 2, NULL, NULL) == RT_ERR_COMPILE);
    CHECK(how[0] == RT_CACHE_HIT_MEMORY && how[2] == RT_CACHE_MISS && how[3] == RT_CACHE_HIT_MEMORY);
    CHECK(r[2].status == RT_ERR_COMPILE && r[2].message && strstr(r[2].message, "kernel 'many2'"));
    CHECK(r[0].status == RT_OK && r[1].status == RT_OK && r[3].status == RT_OK);
    for (int i = 0; i < 4; i++) rt_compile_result_free(&r[i]);
    /* --no-cache: all compiled */
    rt_cache_stats s0, s1;
    rt_cache_get_stats(c, &s0);
    sp[2] = srcs[2];
    CHECK(rt_cache_compile_many(c, 4, np, sp, NULL, RT_CACHE_NO_CACHE, r, how, 0, NULL, NULL) == RT_OK);
    rt_cache_get_stats(c, &s1);
    CHECK(s1.compiles == s0.compiles + 4 && s1.writes == s0.writes && s1.mem_hits == s0.mem_hits);
    for (int i = 0; i < 4; i++) {
        CHECK(how[i] == RT_CACHE_MISS && r[i].status == RT_OK);
        rt_compile_result_free(&r[i]);
    }
    rt_cache_close(c);
    rm_tree(dir);
    free(dir);
}

/* ---- ls / verify / clear --------------------------------------------------------------- */

typedef struct ls_log {
    int n;
    uint64_t bytes;
    bool bad;
} ls_log;

static bool on_entry(void *user, const rt_cache_entry *e)
{
    ls_log *l = user;
    l->n++;
    l->bytes += e->size;
    if (strcmp(e->arch, "sm_90a") || strlen(e->hex) != 32 || !strstr(e->path, e->hex) ||
        e->size <= RT_CACHE_HEADER_SIZE || e->mtime <= 0 || (long)e->size != file_size(e->path))
        l->bad = true;
    return true;
}

static bool stop_at_one(void *user, const rt_cache_entry *e)
{
    (void)e;
    (*(int *)user)++;
    return false;
}

static void test_maintenance(void)
{
    char *dir = make_tmpdir();
    rt_cache *c = open_dir(dir);
    ls_log l = {0};
    CHECK(rt_cache_list(c, on_entry, &l) == RT_OK && l.n == 0);
    unsigned char buf[8192];
    for (unsigned seed = 0; seed < 5; seed++) {
        size_t n = fake_size(seed);
        fake_blob(buf, n, seed);
        CHECK(rt_cache_put(c, fake_key(seed), "sm_90a", &(rt_blob){buf, n}) == RT_OK);
    }
    CHECK(rt_cache_list(c, on_entry, &l) == RT_OK && l.n == 5 && !l.bad);
    int one = 0;
    CHECK(rt_cache_list(c, stop_at_one, &one) == RT_OK && one == 1);

    /* damage one entry, leave a stale temp file, a fresh temp file and a stray file */
    char *p2 = entry_file(dir, fake_key(2), "sm_90a");
    damage_file(p2, NULL, FLIP_PAYLOAD);
    char stale[600], fresh[600], stray[600];
    snprintf(stale, sizeof stale, "%s/v1/sm_90a/.deadbeef.abc123", dir);
    snprintf(fresh, sizeof fresh, "%s/v1/sm_90a/.cafebabe.abc123", dir);
    snprintf(stray, sizeof stray, "%s/v1/sm_90a/README", dir);
    const char *mk[] = {stale, fresh, stray};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(mk[i], "w");
        CHECK(f);
        if (f) fclose(f);
    }
    struct timeval old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    CHECK(utimes(stale, old) == 0);

    l = (ls_log){0};
    CHECK(rt_cache_list(c, on_entry, &l) == RT_OK && l.n == 5); /* temps and strays are not entries */
    rt_cache_verify_stats vs;
    CHECK(rt_cache_verify(c, &vs) == RT_OK);
    CHECK(vs.ok == 4 && vs.corrupt_removed == 1 && vs.stale_temps_removed == 1 && vs.other_files == 1);
    CHECK(vs.bytes_ok > 4 * RT_CACHE_HEADER_SIZE);
    CHECK(!file_exists(p2) && !file_exists(stale) && file_exists(fresh) && file_exists(stray));
    CHECK(rt_cache_verify(c, &vs) == RT_OK && vs.ok == 4 && vs.corrupt_removed == 0);

    uint64_t removed = 0;
    CHECK(rt_cache_clear(c, &removed) == RT_OK);
    /* Kiln's files only: 4 entries + the temp file; the stray file stays, and so its directory */
    CHECK_MSG(removed == 5, "removed %llu", (unsigned long long)removed);
    CHECK(file_exists(stray) && !file_exists(fresh));
    rt_blob b = {0};
    CHECK(rt_cache_get(c, fake_key(0), "sm_90a", &b) == RT_CACHE_MISS); /* memory emptied too */
    rt_cache_stats s;
    rt_cache_get_stats(c, &s);
    CHECK(s.mem_entries == 0 && s.mem_bytes == 0);
    CHECK(rt_cache_list(c, on_entry, &l) == RT_OK);
    CHECK(rt_cache_clear(c, &removed) == RT_OK && removed == 0);
    /* the cache keeps working after a clear */
    fake_blob(buf, 300, 9);
    CHECK(rt_cache_put(c, fake_key(9), "sm_90a", &(rt_blob){buf, 300}) == RT_OK);
    rt_cache_close(c);
    c = open_dir(dir);
    CHECK(rt_cache_get(c, fake_key(9), "sm_90a", &b) == RT_CACHE_HIT_DISK && b.size == 300);
    rt_blob_free(&b);
    rt_cache_close(c);

    free(p2);
    rm_tree(dir);
    free(dir);
}

int main(void)
{
    test_keys();
    test_resolve_dir();
    test_hits();
    test_corruption();
    test_unwritable();
    test_two_processes();
    test_threads();
    test_compile_many();
    test_maintenance();
    return CHECK_DONE();
}
