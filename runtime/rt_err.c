/* runtime/rt_err.c — rt_fail (runtime/rt_err.h). */
#include "runtime/rt_err.h"

#include <stdarg.h>
#include <stdio.h>

int rt_fail(int status, char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return status;
}
