/* tests/runtime/test_cache_trust.c — what the kernel cache trusts and what
 * it records (runtime/rt_cache_trust.c, rt_cache_manifest.c, the size cap in
 * rt_cache_maint.c), without NVRTC (fake blobs and keys):
 *   - an entry re-headed under another key with its checksum recomputed is
 *     not loaded, and verify deletes it;
 *   - a root or directory under it that is group- or world-writable, owned
 *     by someone else (when the test runs as root), or a symlinked arch
 *     directory: one warning, memory only; a bad secret file likewise;
 *     directories created 0700, files 0600;
 *   - a FIFO, a symlink, a 4 GiB sparse file or another user's file as an
 *     entry: no hang, nothing read, the right fate; verify reports what it
 *     cannot check or delete;
 *   - manifests: ls shows them, explain finds the hit or the nearest entry
 *     and names the changed input;
 *   - KILN_CACHE_MAX_MB evicts the least recently used entries (a hit is a
 *     use); a relative XDG_CACHE_HOME is ignored. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <xxhash.h>

#include "check.h"
#include "runtime/rt_cache.h"
#include "runtime/rt_cache_internal.h"
#include "rt_test_util.h"

static rt_cache *open_env(const char *dir, const char *const *env)
{
    rt_cache *c = NULL;
    fake_env fe = {env};
    rt_cache_config cfg = {.dir = dir, .getenv = env ? fake_getenv : NULL, .getenv_user = &fe};
    CHECK(rt_cache_open(&c, &cfg) == RT_OK && c);
    return c;
}
static rt_cache *open_dir(const char *dir) { return open_env(dir, NULL); }

static rt_cache_key key_of(unsigned seed) { return (rt_cache_key){0x1234000000000000ull + seed, 0xabcdull * (seed + 1)}; }

static void blob_of(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 31 + seed);
}

static char *entry_path(const char *dir, rt_cache_key k)
{
    char hex[33], *p = malloc(strlen(dir) + 128);
    rt_cache_key_hex(k, hex);
    sprintf(p, "%s/v1/sm_90a/%s.cubin", dir, hex);
    return p;
}

static bool warned(rt_cache *c, const char *what)
{
    char *w = rt_cache_take_warnings(c);
    bool ok = w && strstr(w, what);
    if (!ok) fprintf(stderr, "warnings: %s\n", w ? w : "(none)");
    free(w);
    return ok;
}

static unsigned char *slurp(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)*n);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void spit(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, (size_t)n, f) == (size_t)n);
    if (f) fclose(f);
}

/* ---- re-headed entries ---------------------------------------------------------------- */

static void test_reheaded(void)
{
    char *dir = make_tmpdir();
    rt_cache *c = open_dir(dir);
    unsigned char a[500], b[700];
    blob_of(a, sizeof a, 1);
    blob_of(b, sizeof b, 2);
    CHECK(rt_cache_put(c, key_of(1), "sm_90a", &(rt_blob){a, sizeof a}) == RT_OK);
    CHECK(rt_cache_put(c, key_of(2), "sm_90a", &(rt_blob){b, sizeof b}) == RT_OK);
    rt_cache_close(c);
    char *pa = entry_path(dir, key_of(1)), *pb = entry_path(dir, key_of(2));
    long n;
    unsigned char *f = slurp(pa, &n);
    CHECK(f && n > RT_CACHE_HEADER_SIZE);
    /* A's payload under B's key, the checksum recomputed as anyone without
     * the cache's secret can: plain XXH3-64 over the payload (the format
     * before the secret) and over everything the keyed sum covers */
    rt_cache_key kb = key_of(2);
    put_be64(f + 32, kb.hi);
    put_be64(f + 40, kb.lo);
    uint64_t mlen = get_le32(f + 12);
    for (int variant = 0; variant < 2; variant++) {
        uint64_t sum;
        if (variant == 0) {
            sum = XXH3_64bits(f + RT_CACHE_HEADER_SIZE + mlen, (size_t)(n - RT_CACHE_HEADER_SIZE - (long)mlen));
        } else {
            XXH3_state_t *s = XXH3_createState();
            XXH3_64bits_reset(s);
            XXH3_64bits_update(s, f + 8, 16);
            XXH3_64bits_update(s, f + 32, 16);
            XXH3_64bits_update(s, f + RT_CACHE_HEADER_SIZE, (size_t)(n - RT_CACHE_HEADER_SIZE));
            sum = XXH3_64bits_digest(s);
            XXH3_freeState(s);
        }
        put_le64(f + 24, sum);
        spit(pb, f, n);
        c = open_dir(dir);
        rt_blob got = {0};
        CHECK_MSG(rt_cache_get(c, kb, "sm_90a", &got) == RT_CACHE_MISS && !got.data, "variant %d loaded", variant);
        CHECK(!file_exists(pb) && warned(c, "checksum mismatch"));
        rt_cache_close(c);
        spit(pb, f, n);
        c = open_dir(dir);
        rt_cache_verify_stats vs;
        CHECK(rt_cache_verify(c, &vs) == RT_OK && vs.ok == 1 && vs.corrupt_removed == 1 && !file_exists(pb));
        rt_cache_close(c);
    }
    /* an entry copied from another cache (another secret) is not loaded either */
    char *other = make_tmpdir();
    c = open_dir(other);
    rt_cache_close(c);
    char *po = entry_path(other, key_of(1)), odir[600];
    snprintf(odir, sizeof odir, "%s/v1/sm_90a", other);
    CHECK(mkdir(odir, 0700) == 0);
    free(f);
    f = slurp(pa, &n);
    spit(po, f, n);
    c = open_dir(other);
    rt_blob got = {0};
    CHECK(rt_cache_get(c, key_of(1), "sm_90a", &got) == RT_CACHE_MISS && !got.data);
    rt_cache_close(c);
    /* and the original still loads where it was made */
    c = open_dir(dir);
    CHECK(rt_cache_get(c, key_of(1), "sm_90a", &got) == RT_CACHE_HIT_DISK && got.size == sizeof a &&
          !memcmp(got.data, a, sizeof a));
    rt_blob_free(&got);
    rt_cache_close(c);
    free(f);
    free(pa);
    free(pb);
    free(po);
    rm_tree(dir);
    rm_tree(other);
    free(dir);
    free(other);
}

/* ---- ownership and modes --------------------------------------------------------------- */

static mode_t mode_of(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? st.st_mode & 0777 : 07777;
}

static void test_modes(void)
{
    char *parent = make_tmpdir(), root[600], path[700];
    snprintf(root, sizeof root, "%s/a/b/kiln", parent);
    rt_cache *c = open_dir(root);
    CHECK(rt_cache_disk_enabled(c));
    unsigned char buf[300];
    blob_of(buf, sizeof buf, 3);
    CHECK(rt_cache_put(c, key_of(3), "sm_90a", &(rt_blob){buf, sizeof buf}) == RT_OK);
    rt_cache_close(c);
    const char *dirs[] = {"a", "a/b", "a/b/kiln", "a/b/kiln/v1", "a/b/kiln/v1/sm_90a"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", parent, dirs[i]);
        CHECK_MSG(mode_of(path) == 0700, "%s: mode %o", path, (unsigned)mode_of(path));
    }
    char *e = entry_path(root, key_of(3));
    CHECK_MSG(mode_of(e) == 0600, "entry mode %o", (unsigned)mode_of(e));
    snprintf(path, sizeof path, "%s/v1/.secret", root);
    CHECK(mode_of(path) == 0600 && file_size(path) == RT_CACHE_SECRET_SIZE);

    /* group- or world-writable: warned once, memory only */
    const char *which[] = {"", "/v1", "/v1/sm_90a"};
    for (int i = 0; i < 3; i++)
        for (int m = 0; m < 2; m++) {
            snprintf(path, sizeof path, "%s%s", root, which[i]);
            CHECK(chmod(path, m ? 0707 : 0770) == 0);
            c = open_dir(root);
            CHECK_MSG(!rt_cache_disk_enabled(c), "%s mode %o trusted", path, m ? 0707 : 0770);
            CHECK(warned(c, m ? "writable by everyone" : "writable by its group") );
            rt_blob got = {0};
            CHECK(rt_cache_get(c, key_of(3), "sm_90a", &got) == RT_CACHE_MISS);
            rt_cache_close(c);
            CHECK(chmod(path, 0700) == 0);
        }
    /* owned by someone else (root can hand it over) */
    if (geteuid() == 0) {
        snprintf(path, sizeof path, "%s/v1/sm_90a", root);
        CHECK(chown(path, 65534, 65534) == 0);
        c = open_dir(root);
        CHECK(!rt_cache_disk_enabled(c) && warned(c, "not by you"));
        rt_cache_close(c);
        CHECK(chown(path, 0, 0) == 0);
        /* an entry owned by another user: not loaded, not deleted, reported */
        CHECK(chown(e, 65534, 65534) == 0);
        c = open_dir(root);
        rt_blob got = {0};
        CHECK(rt_cache_get(c, key_of(3), "sm_90a", &got) == RT_CACHE_MISS && file_exists(e));
        rt_cache_verify_stats vs;
        CHECK(rt_cache_verify(c, &vs) == RT_OK && vs.unchecked == 1 && vs.ok == 0 && file_exists(e));
        rt_cache_close(c);
        CHECK(chown(e, 0, 0) == 0);
    }
    /* a secret anyone can read is no secret */
    snprintf(path, sizeof path, "%s/v1/.secret", root);
    CHECK(chmod(path, 0644) == 0);
    c = open_dir(root);
    CHECK(!rt_cache_disk_enabled(c) && warned(c, "readable by you alone"));
    rt_cache_close(c);
    CHECK(chmod(path, 0600) == 0);
    c = open_dir(root);
    rt_blob got = {0};
    CHECK(rt_cache_disk_enabled(c) && rt_cache_get(c, key_of(3), "sm_90a", &got) == RT_CACHE_HIT_DISK);
    rt_blob_free(&got);
    rt_cache_close(c);
    free(e);
    rm_tree(parent);
    free(parent);
}

/* ---- entries that are not files ------------------------------------------------------------ */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_cache_trust: hung reading an entry\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

typedef struct problems {
    int n;
    char last[800];
} problems;

static void on_problem(void *user, const char *path, const char *what)
{
    problems *p = user;
    p->n++;
    snprintf(p->last, sizeof p->last, "%s: %s", path, what);
}

static bool count_entry(void *user, const rt_cache_entry *e)
{
    (*(int *)user)++;
    return true;
}

static void test_odd_entries(void)
{
    signal(SIGALRM, on_alarm);
    alarm(20);
    char *dir = make_tmpdir();
    rt_cache *c = open_dir(dir);
    unsigned char buf[400];
    blob_of(buf, sizeof buf, 4);
    CHECK(rt_cache_put(c, key_of(4), "sm_90a", &(rt_blob){buf, sizeof buf}) == RT_OK);
    rt_cache_close(c);
    char *good = entry_path(dir, key_of(4)), *p = entry_path(dir, key_of(5));

    /* a FIFO: no hang; not an entry, deleted */
    CHECK(mkfifo(p, 0600) == 0);
    c = open_dir(dir);
    rt_blob got = {0};
    CHECK(rt_cache_get(c, key_of(5), "sm_90a", &got) == RT_CACHE_MISS && !file_exists(p));
    CHECK(warned(c, "not a regular file"));
    CHECK(mkfifo(p, 0600) == 0);
    rt_cache_verify_stats vs;
    CHECK(rt_cache_verify(c, &vs) == RT_OK && vs.corrupt_removed == 1 && vs.ok == 1);
    rt_cache_close(c);

    /* 4 GiB, sparse, with a valid header: refused by its size, nothing read */
    long n;
    unsigned char *g = slurp(good, &n);
    int fd = open(p, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && write(fd, g, RT_CACHE_HEADER_SIZE) == RT_CACHE_HEADER_SIZE && ftruncate(fd, 4ll << 30) == 0);
    close(fd);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    c = open_dir(dir);
    CHECK(rt_cache_get(c, key_of(5), "sm_90a", &got) == RT_CACHE_MISS && !file_exists(p));
    CHECK(warned(c, "larger than any entry") && ms_since(&t0) < 2000);
    rt_cache_close(c);

    /* a symlink to a good entry: not followed; the link goes, the target stays */
    CHECK(symlink(good, p) == 0);
    c = open_dir(dir);
    CHECK(rt_cache_get(c, key_of(5), "sm_90a", &got) == RT_CACHE_MISS && !file_exists(p) && file_exists(good));
    CHECK(warned(c, "symbolic link"));
    CHECK(symlink(good, p) == 0);
    problems pr = {0};
    rt_cache_set_problem_fn(c, on_problem, &pr);
    CHECK(rt_cache_verify(c, &vs) == RT_OK && vs.corrupt_removed == 1 && vs.ok == 1 && pr.n == 1);
    CHECK(strstr(pr.last, "symbolic link"));
    rt_cache_close(c);

    /* a corrupt entry that cannot be deleted (an immutable directory, when
     * the file system and privileges allow one): reported, counted */
    char adir[600], cmd[800];
    snprintf(adir, sizeof adir, "%s/v1/sm_90a", dir);
    spit(p, g, n - 1); /* truncated */
    snprintf(cmd, sizeof cmd, "chattr +i '%s' 2>/dev/null", adir);
    if (system(cmd) == 0) {
        c = open_dir(dir);
        pr = (problems){0};
        rt_cache_set_problem_fn(c, on_problem, &pr);
        CHECK(rt_cache_verify(c, &vs) == RT_OK && vs.undeletable == 1 && vs.corrupt_removed == 0 && pr.n == 1);
        CHECK(strstr(pr.last, "cannot be deleted"));
        rt_cache_close(c);
        snprintf(cmd, sizeof cmd, "chattr -i '%s'", adir);
        CHECK(system(cmd) == 0);
    } else {
        printf("skip: chattr +i unavailable; the undeletable-entry case is not checked here\n");
    }
    unlink(p);

    /* a symlinked arch directory: refused at open; and when it appears
     * later, get and put refuse it, ls and verify report it, clear leaves it */
    char elsewhere[600], link[600];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", dir);
    CHECK(mkdir(elsewhere, 0700) == 0);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/'", good, elsewhere);
    CHECK(system(cmd) == 0);
    snprintf(link, sizeof link, "%s/v1/sm_80", dir);
    CHECK(symlink(elsewhere, link) == 0);
    c = open_dir(dir);
    CHECK(!rt_cache_disk_enabled(c) && warned(c, "symbolic link"));
    rt_cache_close(c);
    CHECK(unlink(link) == 0);
    c = open_dir(dir);
    CHECK(rt_cache_disk_enabled(c));
    CHECK(symlink(elsewhere, link) == 0);
    CHECK(rt_cache_get(c, key_of(4), "sm_80", &got) == RT_CACHE_MISS);
    CHECK(rt_cache_put(c, key_of(6), "sm_80", &(rt_blob){buf, sizeof buf}) == RT_OK);
    CHECK(warned(c, "not using"));
    char *in_link = malloc(strlen(elsewhere) + 64), hex[33];
    rt_cache_key_hex(key_of(6), hex);
    sprintf(in_link, "%s/%s.cubin", elsewhere, hex);
    CHECK(!file_exists(in_link));
    pr = (problems){0};
    rt_cache_set_problem_fn(c, on_problem, &pr);
    int entries = 0;
    CHECK(rt_cache_list(c, count_entry, &entries) == RT_OK && entries == 1 && pr.n == 1 && strstr(pr.last, "sm_80"));
    pr = (problems){0};
    CHECK(rt_cache_verify(c, &vs) == RT_OK && vs.ok == 1 && vs.unchecked == 1 && pr.n == 1);
    uint64_t removed = 0;
    CHECK(rt_cache_clear(c, &removed) == RT_OK && removed == 1);
    snprintf(cmd, sizeof cmd, "%s/%s", elsewhere, strrchr(good, '/') + 1);
    CHECK(file_exists(cmd) && file_exists(link)); /* through the link: untouched */
    rt_cache_close(c);
    alarm(0);
    free(in_link);
    free(g);
    free(good);
    free(p);
    rm_tree(dir);
    free(dir);
}

/* ---- manifests and explanations ------------------------------------------------------------- */

static const char SRC[] =
    "// codegen/kernels/common.cuh — shared\n#define A 1\n"
    "// group kind row, anchor %3 rmsnorm (line 7); family row\nstruct KilnArgs { float *x; };\n"
    "// codegen/kernels/row.cuh — the row template\nextern \"C\" __global__ void kiln_m_k0_row(KilnArgs a) {}\n";

static bool first_manifest(void *user, const rt_cache_entry *e)
{
    char **m = user;
    *m = e->manifest ? strdup(e->manifest) : NULL;
    return false;
}

static void put_compiled(rt_cache *c, const char *name, const char *src, const rt_compile_opts *o)
{
    rt_cache_key k;
    CHECK(rt_cache_key_for(src, o, &k) == RT_OK);
    char *m = rt_cache_manifest_make(name, src, o);
    unsigned char buf[256];
    blob_of(buf, sizeof buf, 7);
    CHECK(m && rt_cache_put_ex(c, k, o && o->arch ? o->arch : "sm_90a", &(rt_blob){buf, sizeof buf}, m) == RT_OK);
    free(m);
}

static void test_manifest_and_why(void)
{
    char *dir = make_tmpdir();
    rt_cache *c = open_dir(dir);
    put_compiled(c, "kiln_m_k0_row", SRC, NULL);
    char *m = NULL;
    CHECK(rt_cache_list(c, first_manifest, &m) == RT_OK && m);
    CHECK_MSG(m && strstr(m, "\"kernel\":\"kiln_m_k0_row\"") && strstr(m, "rmsnorm (line 7)") &&
              strstr(m, "\"arch\":\"sm_90a\"") && strstr(m, "codegen/kernels/row.cuh") && strstr(m, "-std=c++17"),
              "%s", m ? m : "(null)");
    char words[2048];
    CHECK(rt_cache_manifest_describe(m, words, sizeof words) && strstr(words, "kiln_m_k0_row  Kiln ") &&
          strstr(words, "rmsnorm (line 7)"));
    free(m);

    rt_cache_explanation x;
    CHECK(rt_cache_explain(c, "kiln_m_k0_row", SRC, NULL, &x) == RT_OK && x.hit && x.ndiff == -1);
    /* the template changed */
    char src2[sizeof SRC + 16];
    snprintf(src2, sizeof src2, "%s", SRC);
    *strstr(src2, "a) {}") = 'b';
    CHECK(rt_cache_explain(c, "kiln_m_k0_row", src2, NULL, &x) == RT_OK && !x.hit && x.ndiff == 1);
    CHECK_MSG(strstr(x.diff, "codegen/kernels/row.cuh changed") && !strstr(x.diff, "common.cuh"), "%s", x.diff);
    /* the generated part changed */
    snprintf(src2, sizeof src2, "%s", SRC);
    *strstr(src2, "float *x") = 'd';
    CHECK(rt_cache_explain(c, "kiln_m_k0_row", src2, NULL, &x) == RT_OK && x.ndiff == 1);
    CHECK_MSG(strstr(x.diff, "the code generated from the model changed"), "%s", x.diff);
    /* an option and the arch */
    const char *extra[] = {"-DTILE=64"};
    rt_compile_opts o = {.extra = extra, .nextra = 1};
    CHECK(rt_cache_explain(c, "kiln_m_k0_row", SRC, &o, &x) == RT_OK && x.ndiff == 1);
    CHECK_MSG(strstr(x.diff, "options +-DTILE=64"), "%s", x.diff);
    put_compiled(c, "kiln_m_k0_row", SRC, &o);
    CHECK(rt_cache_explain(c, "kiln_m_k0_row", SRC, NULL, &x) == RT_OK && x.hit && x.same_kernel == 1);
    /* nearest of two: the one with fewer differences */
    rt_compile_opts o2 = {.extra = extra, .nextra = 1, .arch = "sm_80"};
    CHECK(rt_cache_explain(c, "kiln_m_k0_row", src2, &o2, &x) == RT_OK && !x.hit && x.ndiff == 2);
    CHECK_MSG(strstr(x.diff, "arch sm_90a -> sm_80") && strstr(x.diff, "generated from the model"), "%s", x.diff);
    /* another kernel: nothing to compare with */
    CHECK(rt_cache_explain(c, "kiln_m_k1_row", src2, NULL, &x) == RT_OK && !x.hit && x.ndiff == -1 && x.same_kernel == 0);
    rt_cache_close(c);
    rm_tree(dir);
    free(dir);
}

/* ---- the size cap, the environment ------------------------------------------------------------- */

static void set_age(const char *p, int seconds_ago)
{
    struct timeval t[2] = {{time(NULL) - seconds_ago, 0}, {time(NULL) - seconds_ago, 0}};
    CHECK(utimes(p, t) == 0);
}

static void test_cap(void)
{
    char *dir = make_tmpdir();
    const char *env[] = {"KILN_CACHE_MAX_MB", "1", NULL};
    rt_cache *c = open_env(dir, env);
    size_t n = 300 << 10;
    unsigned char *buf = malloc(n);
    for (unsigned i = 0; i < 3; i++) {
        blob_of(buf, n, i);
        CHECK(rt_cache_put(c, key_of(10 + i), "sm_90a", &(rt_blob){buf, n}) == RT_OK);
    }
    rt_cache_close(c);
    char *p[6];
    for (int i = 0; i < 6; i++) p[i] = entry_path(dir, key_of(10 + (unsigned)i));
    for (int i = 0; i < 3; i++) set_age(p[i], 1000 - 100 * i); /* p0 the oldest */
    c = open_env(dir, env);
    rt_blob got = {0};
    CHECK(rt_cache_get(c, key_of(10), "sm_90a", &got) == RT_CACHE_HIT_DISK); /* a use: p0 is now the newest */
    rt_blob_free(&got);
    blob_of(buf, n, 3);
    CHECK(rt_cache_put(c, key_of(13), "sm_90a", &(rt_blob){buf, n}) == RT_OK); /* 1.2 MB > 1 MiB */
    CHECK_MSG(file_exists(p[0]) && !file_exists(p[1]) && file_exists(p[2]) && file_exists(p[3]), "%d %d %d %d",
              file_exists(p[0]), file_exists(p[1]), file_exists(p[2]), file_exists(p[3]));
    rt_cache_close(c);
    /* 0: no cap; a bad value: the default, with a warning */
    const char *nocap[] = {"KILN_CACHE_MAX_MB", "0", NULL}, *bad[] = {"KILN_CACHE_MAX_MB", "lots", NULL};
    c = open_env(dir, nocap);
    for (unsigned i = 4; i < 6; i++) {
        blob_of(buf, n, i);
        CHECK(rt_cache_put(c, key_of(10 + i), "sm_90a", &(rt_blob){buf, n}) == RT_OK);
    }
    CHECK(file_exists(p[0]) && file_exists(p[2]) && file_exists(p[3]) && file_exists(p[4]) && file_exists(p[5]));
    rt_cache_close(c);
    c = open_env(dir, bad);
    CHECK(warned(c, "KILN_CACHE_MAX_MB=lots"));
    rt_cache_close(c);
    for (int i = 0; i < 6; i++) free(p[i]);
    free(buf);
    rm_tree(dir);
    free(dir);
}

static void test_relative_xdg(void)
{
    const char *env[] = {"XDG_CACHE_HOME", "relative/cache", "HOME", "/home/u", NULL};
    fake_env fe = {env};
    char *d = NULL;
    CHECK(rt_cache_resolve_dir(fake_getenv, &fe, &d) == RT_OK && d && !strcmp(d, "/home/u/.cache/kiln"));
    free(d);
    const char *abs[] = {"XDG_CACHE_HOME", "/x/cache", "HOME", "/home/u", NULL};
    fe.pairs = abs;
    CHECK(rt_cache_resolve_dir(fake_getenv, &fe, &d) == RT_OK && d && !strcmp(d, "/x/cache/kiln"));
    free(d);
    const char *only[] = {"XDG_CACHE_HOME", "cache", NULL};
    fe.pairs = only;
    CHECK(rt_cache_resolve_dir(fake_getenv, &fe, &d) == RT_ERR_IO && !d);
}

int main(void)
{
    umask(022);
    test_reheaded();
    test_modes();
    test_odd_entries();
    test_manifest_and_why();
    test_cap();
    test_relative_xdg();
    return CHECK_DONE();
}
