/* tests/gpu/gpu_test_util.h — what the attention GPU tests (test_gpu_attention.c,
 * test_gpu_attention_wgmma.c) share: a CUDA check that ends the test, the splitmix64 random
 * numbers (seed in rng_state), the sm_90 device check, and bf16/f16 encoding of the case being built (g_bf16).
 * Header-only; include once per test. */
#ifndef KILN_TESTS_GPU_TEST_UTIL_H
#define KILN_TESTS_GPU_TEST_UTIL_H
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/ir.h"

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static uint64_t rng_state;
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unif(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }
/* roughly N(0, 1): sum of 4 uniforms */
static float rng_normal(void)
{
    double s = rng_unif() + rng_unif() + rng_unif() + rng_unif() - 2.0;
    return (float)(s * 1.7320508);
}

/* 0 when device 0 is of compute capability 9.x (the kernels are built for sm_90a), else 77 (skip)
 * after a line saying why. */
static int gpu_sm90_or_skip(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9) {
        printf("device is sm_%d%d, the kernels are built for sm_90a: skipped\n", prop.major, prop.minor);
        return 77;
    }
    return 0;
}

static int g_bf16 = 1; /* dtype of the case being built */
static uint16_t enc(float f) { return g_bf16 ? ir_f32_to_bf16_bits(f) : ir_f32_to_f16_bits(f); }
static float dec(uint16_t h) { return g_bf16 ? ir_bf16_bits_to_f32(h) : ir_f16_bits_to_f32(h); }

#endif
