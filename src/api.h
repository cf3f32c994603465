/* src/api.h — what the C API's files (src/kiln.c, src/kiln_dlpack.c) share
 * beyond include/kiln.h. Not exported. */
#ifndef KILN_SRC_API_H
#define KILN_SRC_API_H
#include "kiln.h"

/* Records a failure as every API call does (the thread's last error and
 * the model's, m may be NULL) and returns s. */
kiln_status api_fail(kiln_status s, kiln_model *m, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int api_context_device(const kiln_context *ctx);    /* the CUDA device ordinal */
kiln_context *api_model_context(const kiln_model *m);

#endif
