/* runtime/rt_err.h — the runtime's error-message helper. Runtime functions
 * report a failure as a status plus a message in the caller's buffer
 * (`char *err, size_t n`); rt_fail does both in one statement:
 *
 *     return rt_fail(-1, err, n, "weight '%s': %s", name, why);
 */
#ifndef KILN_RT_ERR_H
#define KILN_RT_ERR_H
#include <stddef.h>

/* Formats the message into err (truncated to n bytes, NUL-terminated) when
 * err is not NULL and n > 0; returns status. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
int rt_fail(int status, char *err, size_t n, const char *fmt, ...);

#endif
