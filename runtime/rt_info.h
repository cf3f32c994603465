/* runtime/rt_info.h — versions of the CUDA components Kiln links. None of
 * these calls needs a GPU or a driver. */
#ifndef KILN_RT_INFO_H
#define KILN_RT_INFO_H
#include <stddef.h>

/* "NVRTC 13.0, CUDA runtime 13.0, cuBLAS 13.1.0"; a component whose query
 * fails is reported as "unavailable (reason)". */
void rt_versions(char *buf, size_t n);

#endif
