/* tests/check.h — the tiny assertion layer shared by the C tests.
 * A failed CHECK prints file:line and the expression and counts a failure;
 * CHECK_DONE() prints "N passed, N failed" and returns the exit status. */
#ifndef KILN_TESTS_CHECK_H
#define KILN_TESTS_CHECK_H
#include <math.h>
#include <stdio.h>

static int check_pass_, check_fail_;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) check_pass_++;                                               \
        else {                                                                 \
            check_fail_++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                   \
    do {                                                                       \
        if (cond) check_pass_++;                                               \
        else {                                                                 \
            check_fail_++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_NEAR(a, b, atol, rtol)                                           \
    do {                                                                       \
        double a_ = (a), b_ = (b);                                             \
        CHECK_MSG(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_), "%s = %.9g, expected %.9g", #a, a_, b_); \
    } while (0)

#define CHECK_DONE()                                                           \
    (printf("%d passed, %d failed\n", check_pass_, check_fail_), check_fail_ ? 1 : 0)

#endif
