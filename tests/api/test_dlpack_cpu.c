/* tests/api/test_dlpack_cpu.c — the DLPack entry points without a device
 * (compile_only): dims read from the tensors' shapes, every check that comes
 * before device work (dtype, shape, layout, device, input/output roles), the
 * versioned entry points of a library built with DLPack 0.6, and the
 * argument errors. Python's tests/python/test_cpu.py drives the same paths
 * through ctypes; this one also runs in the sanitizer build. */
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kiln.h"

static const char *TINY = "model tiny {\n  dims N\n  input x : f32[N, 64]\n  weight w : f32[64]\n"
                          "  output y = x * w + 1.0\n}\n";

static void noop(DLManagedTensor *self) { (void)self; }

typedef struct fake {
    DLManagedTensor mt;
    int64_t shape[4], strides[4];
} fake;

static DLManagedTensor *mk(fake *f, int dev, int bits, int n0, int n1, const int64_t *strides)
{
    memset(f, 0, sizeof *f);
    f->shape[0] = n0, f->shape[1] = n1;
    f->mt.dl_tensor.data = (void *)0x1000;
    f->mt.dl_tensor.device = (DLDevice){dev, 0};
    f->mt.dl_tensor.ndim = n1 ? 2 : 1;
    f->mt.dl_tensor.dtype = (DLDataType){kDLFloat, (uint8_t)bits, 1};
    f->mt.dl_tensor.shape = f->shape;
    if (strides) {
        memcpy(f->strides, strides, sizeof f->strides[0] * 2);
        f->mt.dl_tensor.strides = f->strides;
    }
    f->mt.deleter = noop;
    return &f->mt;
}

/* got is want and the message holds text (a CHECK) */
static void expect(kiln_status got, kiln_status want, const char *text, const char *what)
{
    CHECK_MSG(got == want && strstr(kiln_last_error(), text) != NULL, "%s: status %d (want %d), '%s' (want '%s')",
              what, got, want, kiln_last_error(), text);
}

int main(void)
{
    kiln_context *ctx;
    kiln_context_options co = {.compile_only = 1, .no_disk_cache = 1};
    if (kiln_context_create(&ctx, &co) != KILN_OK) {
        fprintf(stderr, "%s\n", kiln_last_error());
        return 1;
    }
    kiln_dim maxd[] = {{"N", 16}};
    kiln_model_options mo = {.max_dims = maxd, .nmax_dims = 1, .lazy = 1};
    kiln_model *m;
    if (kiln_model_compile_string(ctx, "tiny.kiln", TINY, &mo, &m) != KILN_OK) {
        fprintf(stderr, "%s\n", kiln_last_error());
        return 1;
    }
    fake fx, fy, fw;
    kiln_dlpack_arg in = {"x", mk(&fx, kDLCPU, 32, 4, 64, NULL), NULL}, out = {"y", mk(&fy, kDLCPU, 32, 4, 64, NULL), NULL};
    expect(kiln_model_run_dlpack(m, NULL, 0, &in, 1, &out, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "'x' is not CUDA memory", "a CPU tensor");
    mk(&fx, kDLCUDA, 32, 4, 64, NULL), mk(&fy, kDLCUDA, 32, 5, 64, NULL);
    expect(kiln_model_run_dlpack(m, NULL, 0, &in, 1, &out, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "'x' gives N=4, but 'y' gives N=5", "dims that disagree");
    kiln_dim d4[] = {{"N", 4}};
    expect(kiln_model_run_dlpack(m, d4, 1, &in, 1, &out, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "'y' has shape [5, 64], but the model declares f32[N, 64]: [4, 64]", "a shape against given dims");
    mk(&fy, kDLCUDA, 16, 4, 64, NULL);
    expect(kiln_model_run_dlpack(m, NULL, 0, &in, 1, &out, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "'y' has DLPack dtype (code 2, 16 bits", "a wrong dtype");
    int64_t transposed[] = {1, 4};
    mk(&fy, kDLCUDA, 32, 4, 64, transposed);
    expect(kiln_model_run_dlpack(m, NULL, 0, &in, 1, &out, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "'y' is not contiguous", "strides of a transpose");
    int64_t contiguous[] = {64, 1};
    mk(&fy, kDLCUDA, 32, 4, 64, contiguous);
    expect(kiln_model_run_dlpack(m, NULL, 0, &out, 1, &in, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "'y' is not an input", "roles swapped");
    expect(kiln_model_run_dlpack(m, NULL, 0, &in, 1, &out, 1, NULL), KILN_ERR_MISSING_WEIGHT, "not bound",
                    "valid tensors reach kiln_model_run");
    kiln_dlpack_arg w = {"w", mk(&fw, kDLCUDA, 32, 63, 0, NULL), NULL};
    expect(kiln_model_bind_weight_dlpack(m, &w), KILN_ERR_INVALID_ARGUMENT, "'w' has shape [63]", "a weight's shape");
    mk(&fw, kDLCUDA, 32, 64, 0, NULL);
    expect(kiln_model_bind_weight_dlpack(m, &w), KILN_ERR_NO_DEVICE, "", "a valid weight needs a device");
    kiln_dlpack_arg nameless = {NULL, &fx.mt, NULL};
    expect(kiln_model_run_dlpack(m, NULL, 0, &nameless, 1, &out, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "without a name", "a nameless tensor");
    expect(kiln_model_run_dlpack(m, NULL, 0, NULL, 1, &out, 1, NULL), KILN_ERR_INVALID_ARGUMENT,
                    "a count without its array", "a count without its array");
    DLManagedTensor *st = (DLManagedTensor *)0x1;
    expect(kiln_model_state_dlpack(m, "x", &st), KILN_ERR_NOT_FOUND, "'x' is not a state", "a state that is an input");
    CHECK(st == NULL);
    int64_t shape[] = {4};
    expect(kiln_tensor_alloc_dlpack(ctx, KILN_F32, 1, shape, &st), KILN_ERR_NO_DEVICE, "no CUDA device",
                    "new memory needs a device");
    expect(kiln_tensor_alloc_dlpack(ctx, KILN_F32, 9, shape, &st), KILN_ERR_INVALID_ARGUMENT, "rank",
                    "rank above KILN_MAX_RANK");
#if !defined(DLPACK_MAJOR_VERSION)
    struct DLManagedTensorVersioned *vt;
    expect(kiln_tensor_alloc_dlpack_versioned(ctx, KILN_F32, 1, shape, &vt), KILN_ERR_INVALID_ARGUMENT,
                    "without DLManagedTensorVersioned", "versioned entry points with DLPack 0.6");
#endif
    kiln_model_free(m);
    kiln_context_free(ctx);
    return CHECK_DONE();
}
