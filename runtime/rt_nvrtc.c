/* runtime/rt_nvrtc.c — NVRTC compilation, one unit or many in parallel.
 *
 * A compile is create -> compile -> log -> code -> destroy, each NVRTC call
 * checked through RT_NVRTC_CHECK (runtime/rt_err.h), whose message names the
 * kernel and the call. The log is fetched even on success so callers
 * can insist on a warning-free kernel. compile_many hands unit indices to
 * worker threads from a shared counter under one mutex; each worker owns its
 * nvrtcProgram, and results land in the caller's array slot for the unit, so
 * the output does not depend on scheduling. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_nvrtc.h"

#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rt_util.h"

#ifndef KILN_CUDA_INCLUDE_DIR
#define KILN_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

void rt_blob_free(rt_blob *b)
{
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->size = 0;
}

void rt_compile_result_free(rt_compile_result *r)
{
    if (!r) return;
    rt_blob_free(&r->code);
    free(r->log);
    free(r->message);
    memset(r, 0, sizeof *r);
}

rt_status rt_nvrtc_version(int *major, int *minor)
{
    if (!major || !minor) return RT_ERR_INVALID;
    return RT_NVRTC_CHECK(nvrtcVersion(major, minor), NULL, NULL, 0);
}

/* dir/cuda_bf16.h exists: write dir to buf. */
static bool try_include(const char *dir, const char *suffix, char *buf, size_t n)
{
    char probe[4096];
    int k = snprintf(probe, sizeof probe, "%s%s/cuda_bf16.h", dir, suffix);
    if (k < 0 || (size_t)k >= sizeof probe) return false;
    struct stat st;
    if (stat(probe, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    k = snprintf(buf, n, "%s%s", dir, suffix);
    return k >= 0 && (size_t)k < n;
}

bool rt_nvrtc_include_dir(rt_getenv_fn getenv_fn, void *user, char *buf, size_t n)
{
    const char *v;
    if (!buf || n == 0) return false;
    buf[0] = '\0';
    if ((v = rt_env_get(getenv_fn, user, "KILN_CUDA_INCLUDE")) && try_include(v, "", buf, n)) return true;
    if ((v = rt_env_get(getenv_fn, user, "CUDA_HOME")) && try_include(v, "/include", buf, n)) return true;
    if ((v = rt_env_get(getenv_fn, user, "CUDA_PATH")) && try_include(v, "/include", buf, n)) return true;
    if (try_include(KILN_CUDA_INCLUDE_DIR, "", buf, n)) return true;
    if (try_include("/usr/include", "", buf, n)) return true;
    buf[0] = '\0';
    return false;
}

/* ---- options --------------------------------------------------------------- */

#define ARCH_MAX 32

bool rt_nvrtc_arch_valid(const char *arch)
{
    if (!arch) return false;
    size_t len = strlen(arch);
    if (len < 4 || len >= ARCH_MAX || strncmp(arch, "sm_", 3) != 0) return false;
    for (const char *p = arch; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
    return true;
}

static bool sets_arch(const char *o)
{
    return strncmp(o, "-arch", 5) == 0 || strncmp(o, "--gpu-architecture", 18) == 0 ||
           strncmp(o, "-gpu-architecture", 17) == 0;
}

/* Writes "-arch=sm_90a" or "--gpu-architecture=compute_90a" into archopt
 * (ARCH_MAX + 32 bytes) and the option list (without -I) into argv; returns
 * the count or -1. */
static int build_options(const rt_compile_opts *o, rt_target target, char *archopt,
                         const char **argv, int max)
{
    const char *arch = o && o->arch ? o->arch : RT_DEFAULT_ARCH;
    if (!rt_nvrtc_arch_valid(arch)) return -1;
    if (target == RT_TARGET_CUBIN) snprintf(archopt, ARCH_MAX + 32, "-arch=%s", arch);
    else if (target == RT_TARGET_PTX) snprintf(archopt, ARCH_MAX + 32, "--gpu-architecture=compute_%s", arch + 3);
    else return -1;
    int nextra = o ? o->nextra : 0;
    if (nextra < 0 || (nextra > 0 && !o->extra)) return -1;
    for (int i = 0; i < nextra; i++)
        if (!o->extra[i] || sets_arch(o->extra[i])) return -1;
    int k = 0;
#define PUSH(s) do { if (k < max) argv[k] = (s); k++; } while (0)
    PUSH(archopt);
    PUSH("-std=c++17");
    PUSH("-default-device");
    if (o && o->lineinfo) PUSH("-lineinfo");
    for (int i = 0; i < nextra; i++) PUSH(o->extra[i]);
#undef PUSH
    return k;
}

int rt_nvrtc_key_options(const rt_compile_opts *opts, rt_target target, const char **argv, int max)
{
    /* As build_options, but the arch option (text in a local buffer) becomes
     * a static target tag: the cache key hashes the arch by itself. */
    char archopt[ARCH_MAX + 32];
    if (build_options(opts, target, archopt, NULL, 0) < 0) return -1;
    int j = 0;
#define PUSH(s) do { if (j < max) argv[j] = (s); j++; } while (0)
    PUSH(target == RT_TARGET_CUBIN ? "--kiln-target=cubin" : "--kiln-target=ptx");
    PUSH("-std=c++17");
    PUSH("-default-device");
    if (opts && opts->lineinfo) PUSH("-lineinfo");
    for (int i = 0; opts && i < opts->nextra; i++) PUSH(opts->extra[i]);
#undef PUSH
    return j;
}

/* ---- one compile ------------------------------------------------------------ */

static rt_status fail(rt_compile_result *out, rt_status st, char *msg)
{
    out->status = st;
    free(out->message);
    out->message = msg; /* NULL after OOM: status still says what happened */
    rt_blob_free(&out->code);
    return st;
}

rt_status rt_nvrtc_compile(const char *name, const char *source, const rt_compile_opts *opts,
                           rt_target target, rt_compile_result *out)
{
    if (!out) return RT_ERR_INVALID;
    memset(out, 0, sizeof *out);
    double t0 = rt_now_ms();
    if (!name) name = "(unnamed)";
    if (!source) return fail(out, RT_ERR_INVALID, rt_strf("kernel '%s': no source", name));

    char archopt[ARCH_MAX + 32];
    int nopt = build_options(opts, target, archopt, NULL, 0);
    if (nopt < 0)
        return fail(out, RT_ERR_INVALID,
                    rt_strf("kernel '%s': invalid options (arch must be sm_<n>[a]; set "
                            "the architecture through arch, not extra)", name));
    const char **argv = malloc(sizeof(char *) * ((size_t)nopt + 1));
    if (!argv) return fail(out, RT_ERR_NOMEM, NULL);
    build_options(opts, target, archopt, argv, nopt);

    char incdir[4096], incopt[4100];
    bool have_inc;
    if (opts && opts->include_dir) { /* "" = no include directory */
        have_inc = opts->include_dir[0] &&
                   snprintf(incdir, sizeof incdir, "%s", opts->include_dir) < (int)sizeof incdir;
    } else {
        have_inc = rt_nvrtc_include_dir(opts ? opts->getenv : NULL, opts ? opts->getenv_user : NULL,
                                        incdir, sizeof incdir);
    }
    if (have_inc) {
        snprintf(incopt, sizeof incopt, "-I%s", incdir);
        argv[nopt++] = incopt;
    }

    char who[300], why[1024] = "";
    snprintf(who, sizeof who, "kernel '%s'", name);
    rt_status st = RT_OK;
    nvrtcProgram prog = NULL;
    RT_TRY_GOTO(st, done, RT_NVRTC_CHECK(nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL), who, why, sizeof why));
    char compile_why[sizeof why];
    rt_status compiled = RT_NVRTC_CHECK(nvrtcCompileProgram(prog, nopt, argv), who, compile_why, sizeof compile_why);

    size_t logsize = 0;
    RT_TRY_GOTO(st, done, RT_NVRTC_CHECK(nvrtcGetProgramLogSize(prog, &logsize), who, why, sizeof why));
    out->log = malloc(logsize + 1);
    if (!out->log) { st = fail(out, RT_ERR_NOMEM, NULL); goto done; }
    out->log[0] = '\0';
    if (logsize > 0) RT_TRY_GOTO(st, done, RT_NVRTC_CHECK(nvrtcGetProgramLog(prog, out->log), who, why, sizeof why));
    out->log[logsize] = '\0';

    if (compiled != RT_OK) {
        st = fail(out, compiled,
                  rt_strf("%s%s\n%s", compile_why,
                          !have_inc && strstr(out->log, "could not open source file")
                              ? " [note: no CUDA include directory with cuda_bf16.h found; "
                                "set KILN_CUDA_INCLUDE or CUDA_HOME]"
                              : "",
                          out->log));
        goto done;
    }

    size_t size = 0;
    if (target == RT_TARGET_CUBIN) RT_TRY_GOTO(st, done, RT_NVRTC_CHECK(nvrtcGetCUBINSize(prog, &size), who, why, sizeof why));
    else RT_TRY_GOTO(st, done, RT_NVRTC_CHECK(nvrtcGetPTXSize(prog, &size), who, why, sizeof why));
    if (size == 0) {
        st = fail(out, RT_ERR_COMPILE, rt_strf("kernel '%s': NVRTC produced no %s", name,
                                               target == RT_TARGET_CUBIN ? "cubin" : "PTX"));
        goto done;
    }
    out->code.data = malloc(size + 1);
    if (!out->code.data) { st = fail(out, RT_ERR_NOMEM, NULL); goto done; }
    if (target == RT_TARGET_CUBIN) {
        RT_TRY_GOTO(st, done, RT_NVRTC_CHECK(nvrtcGetCUBIN(prog, (char *)out->code.data), who, why, sizeof why));
        out->code.size = size;
        out->code.data[size] = 0;
    } else {
        RT_TRY_GOTO(st, done, RT_NVRTC_CHECK(nvrtcGetPTX(prog, (char *)out->code.data), who, why, sizeof why));
        out->code.data[size] = 0;
        out->code.size = strlen((char *)out->code.data); /* size counts the NUL */
    }

done:
    /* A failed RT_NVRTC_CHECK left its message in why; the other failures set
     * out->message themselves (NULL after running out of memory). */
    if (st != RT_OK && !out->message && why[0]) fail(out, st, rt_strf("%s", why));
    if (prog) {
        rt_status destroyed = RT_NVRTC_CHECK(nvrtcDestroyProgram(&prog), who, why, sizeof why);
        if (destroyed != RT_OK && st == RT_OK) st = fail(out, destroyed, rt_strf("%s", why));
    }
    free(argv);
    out->status = st;
    out->ms = rt_now_ms() - t0;
    return st;
}

/* ---- many compiles ---------------------------------------------------------- */

typedef struct pool {
    pthread_mutex_t mu;
    int next, done, n;
    const char *const *names, *const *sources;
    const rt_compile_opts *opts;
    rt_target target;
    rt_compile_result *out;
    rt_progress_fn progress;
    void *user;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next < p->n ? p->next++ : -1;
        pthread_mutex_unlock(&p->mu);
        if (i < 0) break;
        rt_nvrtc_compile(p->names ? p->names[i] : NULL, p->sources[i], p->opts, p->target, &p->out[i]);
        pthread_mutex_lock(&p->mu);
        int done = ++p->done;
        if (p->progress) p->progress(p->user, done, p->n, i, &p->out[i]);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

rt_status rt_nvrtc_compile_many(int n, const char *const names[], const char *const sources[],
                                const rt_compile_opts *opts, rt_target target,
                                rt_compile_result out[], int nthreads,
                                rt_progress_fn progress, void *user)
{
    if (n < 0 || (n > 0 && (!sources || !out))) return RT_ERR_INVALID;
    if (n == 0) return RT_OK;
    if (nthreads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = cpus > RT_NVRTC_DEFAULT_THREADS_MAX ? RT_NVRTC_DEFAULT_THREADS_MAX
                   : cpus > 0                         ? (int)cpus
                                                      : 1;
    }
    if (nthreads > n) nthreads = n;
    for (int i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);

    pool p = {.next = 0, .done = 0, .n = n, .names = names, .sources = sources, .opts = opts,
              .target = target, .out = out, .progress = progress, .user = user};
    if (pthread_mutex_init(&p.mu, NULL) != 0) return RT_ERR_NOMEM;
    pthread_t *tids = nthreads > 1 ? malloc(sizeof(pthread_t) * (size_t)(nthreads - 1)) : NULL;
    int started = 0;
    if (tids)
        while (started < nthreads - 1 && pthread_create(&tids[started], NULL, worker, &p) == 0)
            started++;
    worker(&p); /* the caller works too; with no threads it does everything */
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    free(tids);
    pthread_mutex_destroy(&p.mu);

    for (int i = 0; i < n; i++)
        if (out[i].status != RT_OK) return out[i].status;
    return RT_OK;
}
