/* src/kiln_generate.h — what the generation API (src/kiln_generate.c) takes
 * from src/kiln.c. Internal. */
#ifndef KILN_SRC_GENERATE_H
#define KILN_SRC_GENERATE_H
#include "kiln.h"
#include "runtime/rt_model.h"

rt_model *kiln_model_rt_(kiln_model *m);
/* Record a failure on the model and the thread (kiln_last_error). */
kiln_status kiln_model_fail_(kiln_model *m, kiln_status s, const char *msg);

#endif
