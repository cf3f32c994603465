/* tests/fault/fault.h — fault injection in the SQLite manner: the N-th host
 * allocation, file operation or CUDA call fails.
 *
 * The test executables that use it are linked with --wrap for every such
 * function the library calls (tests/fault/CMakeLists.txt lists them), so the
 * library's calls go through fault.c, which counts them and fails the N-th
 * of the armed class: allocations return NULL (errno ENOMEM), file
 * operations -1 / NULL with errno EIO, CUDA calls cudaErrorMemoryAllocation
 * (allocations) or the armed error. Allocations made through the wrappers
 * are tracked, so a test can check that a failed call leaked nothing
 * (LeakSanitizer checks the same in the sanitizer build). NVRTC compiles can
 * be refused outright, so a sweep never waits for NVRTC. */
#ifndef KILN_TESTS_FAULT_H
#define KILN_TESTS_FAULT_H
#include <stdbool.h>
#include <stdint.h>

typedef enum fault_class { FAULT_ALLOC, FAULT_FILE, FAULT_CUDA, FAULT_NCLASSES } fault_class;

/* Count the calls of cls and fail the n-th (n 0: count only). */
void fault_arm(fault_class cls, uint64_t n);
/* Stops; returns how many calls of the armed class were made. */
uint64_t fault_disarm(void);
/* Whether the armed call was reached (and failed) since fault_arm. */
bool fault_fired(void);
/* The CUDA error an armed non-allocating CUDA call returns (default
 * cudaErrorInvalidValue). */
void fault_set_cuda_error(int cuda_error);
/* NVRTC compiles fail at once while true. */
void fault_block_nvrtc(bool on);
/* Allocations made through the wrappers and not yet freed. */
int64_t fault_live(void);
/* A mark in the allocation sequence, and the callers of the allocations
 * made after it that are still live (to find a leak). */
uint64_t fault_mark(void);
void fault_print_live(uint64_t since);
/* The name of the function that failed last (for messages). */
const char *fault_last_call(void);
const char *fault_class_name(fault_class cls);

#endif
