/* tests/runtime/test_cupti.c — finding libcupti (no GPU): the search order
 * of rt_cupti_candidates, and loading it without starting anything. */
#define _XOPEN_SOURCE 700
#include "check.h"
#include "runtime/rt_cupti.h"
#include "runtime/rt_test_util.h"

int main(void)
{
    char c[40][512];
    const char *pairs[] = {"KILN_CUPTI_LIB", "/opt/my/libcupti.so", "CUDA_HOME", "/opt/cuda", NULL, NULL};
    fake_env e = {pairs};
    int n = rt_cupti_candidates(fake_getenv, &e, c, 40);
    CHECK(n > 8);
    CHECK(!strcmp(c[0], "/opt/my/libcupti.so"));   /* the override first */
    CHECK(!strcmp(c[1], "libcupti.so.13"));        /* then the library path */
    CHECK(!strcmp(c[2], "libcupti.so"));
    CHECK(!strcmp(c[3], "/opt/cuda/lib64/libcupti.so.13")); /* then each toolkit root */
    CHECK(!strcmp(c[5], "/opt/cuda/extras/CUPTI/lib64/libcupti.so.13"));
    bool usr_local = false;
    for (int i = 0; i < n; i++) usr_local = usr_local || !strcmp(c[i], "/usr/local/cuda/lib64/libcupti.so.13");
    CHECK(usr_local);
    const char *none[] = {NULL, NULL};
    fake_env e2 = {none};
    CHECK(!strcmp(rt_cupti_candidates(fake_getenv, &e2, c, 40) > 0 ? c[0] : "", "libcupti.so.13"));
    CHECK(rt_cupti_candidates(fake_getenv, &e, c, 2) == 2); /* never more than max */

    /* loading opens the library only (no device needed); where it is absent, a reason */
    char err[2048] = "";
    const char *path = rt_cupti_load(err, sizeof err);
    if (path) printf("libcupti: %s\n", path);
    else printf("no libcupti here: %s\n", err);
    CHECK(path ? strstr(path, "cupti") != NULL : strstr(err, "KILN_CUPTI_LIB") != NULL);
    CHECK(rt_cupti_load(NULL, 0) == path); /* once per process */
    return CHECK_DONE();
}
