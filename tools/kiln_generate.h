/* tools/kiln_generate.h — `kiln generate` (tools/kiln_generate.c). */
#ifndef KILN_TOOLS_GENERATE_H
#define KILN_TOOLS_GENERATE_H

/* argv[0] is "generate". Returns a sysexits-style status: 0, 1 (model
 * errors), 64 usage, 66 unreadable input, 69 no device, 70 other failures. */
int kiln_generate_command(int argc, char **argv);

#endif
