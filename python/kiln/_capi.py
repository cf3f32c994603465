"""ctypes declarations of include/kiln.h (tests/python/test_abi.py compares
every struct here with a C compiler's layout of the header's)."""
import ctypes
import os

c_int, c_int64, c_uint64, c_size_t, c_double = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_double
c_char_p, c_void_p, POINTER = ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER

KILN_OK = 0
KILN_ERR_NO_DEVICE = 9
KILN_F32, KILN_F16, KILN_BF16, KILN_I32 = 0, 1, 2, 3
KILN_INPUT, KILN_OUTPUT, KILN_WEIGHT, KILN_STATE = 0, 1, 2, 3
KILN_MAX_RANK = 8
KILN_LOAD_IGNORE_UNKNOWN, KILN_LOAD_ALLOW_MISSING = 1, 2

PROGRESS_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_int, c_char_p, c_double)


class kiln_context_options(ctypes.Structure):
    _fields_ = [
        ("device", c_int),
        ("stream", c_void_p),
        ("cache_dir", c_char_p),
        ("no_cache", c_int),
        ("no_disk_cache", c_int),
        ("arch", c_char_p),
        ("compile_only", c_int),
        ("compile_threads", c_int),
    ]


class kiln_define(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("value", c_char_p)]


class kiln_dim(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("value", c_int64)]


class kiln_model_options(ctypes.Structure):
    _fields_ = [
        ("defines", POINTER(kiln_define)),
        ("ndefines", c_int),
        ("disabled", POINTER(c_char_p)),
        ("ndisabled", c_int),
        ("max_dims", POINTER(kiln_dim)),
        ("nmax_dims", c_int),
        ("no_graphs", c_int),
        ("max_graphs", c_int),
        ("lazy", c_int),
        ("decode_max_rows", c_int),
        ("warning_flags", POINTER(c_char_p)),
        ("nwarning_flags", c_int),
        ("progress", PROGRESS_FN),
        ("progress_user", c_void_p),
        ("enabled", POINTER(c_char_p)),
        ("nenabled", c_int),
        ("no_pdl", c_int),
        ("autotune", c_int),
        ("head_sample", c_int),
        ("packed", c_int),
    ]


class kiln_tensor_info(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("kind", c_int),
        ("dtype", c_int),
        ("rank", c_int),
        ("shape", c_int64 * KILN_MAX_RANK),
        ("bytes", c_size_t),
        ("type", c_char_p),
    ]


class kiln_kernel_info(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("kind", c_char_p),
        ("template_file", c_char_p),
        ("config", c_char_p),
        ("fallback", c_char_p),
        ("implementation", c_char_p),
    ]


class kiln_tensor_arg(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("ptr", c_void_p)]


COUNTER_FIELDS = [
    "kernels_compiled", "cache_hits_memory", "cache_hits_disk", "variants", "runs", "launches", "graph_captures",
    "graph_replays", "graph_updates", "eager_runs", "eager_fallbacks", "weight_packs", "tma_fallbacks",
    "weight_bytes_released", "plan_cache_hits", "codegen_runs", "packed_bytes_device", "packed_bytes_host",
]


class kiln_counters(ctypes.Structure):
    _fields_ = [(f, c_uint64) for f in COUNTER_FIELDS]


class kiln_kernel_profile(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("kind", c_char_p),
        ("template_name", c_char_p),
        ("constants", c_char_p),
        ("lines", c_char_p),
        ("group", c_int),
        ("samples", c_int),
        ("median_us", c_double),
        ("p10_us", c_double),
        ("p90_us", c_double),
        ("bytes", c_int64),
        ("flops", c_int64),
        ("tbps", c_double),
        ("tflops", c_double),
        ("floor_us", c_double),
        ("flops_bound", c_int),
        ("pct_floor", c_double),
        ("share", c_double),
    ]


class kiln_profile(ctypes.Structure):
    _fields_ = [
        ("runs", c_int),
        ("nkernels", c_int),
        ("kernels", POINTER(kiln_kernel_profile)),
        ("layer_median_us", c_double),
        ("layer_p10_us", c_double),
        ("layer_p90_us", c_double),
        ("bubbles_median_us", c_double),
        ("bubbles_p10_us", c_double),
        ("bubbles_p90_us", c_double),
        ("layer_floor_us", c_double),
        ("layer_flops_bound", c_int),
        ("layer_bytes", c_int64),
        ("layer_flops", c_int64),
        ("sum_floor_us", c_double),
        ("peak_bw", c_double),
        ("peak_flops", c_double),
        ("text", c_char_p),
    ]


class kiln_profile_options(ctypes.Structure):
    _fields_ = [
        ("runs", c_int),
        ("peak_bw", c_double),
        ("peak_flops", c_double),
        ("json_path", c_char_p),
        ("trace_path", c_char_p),
        ("roofline_path", c_char_p),
    ]


# dlpack/dlpack.h (0.6): what Kiln reads and hands out
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DL_DELETER = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DL_DELETER)]


class kiln_dlpack_arg(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("tensor", POINTER(DLManagedTensor)), ("versioned", c_void_p)]


# the structs whose layout must match the header's (tests/python/test_abi.py)
STRUCTS = [kiln_context_options, kiln_define, kiln_dim, kiln_model_options, kiln_tensor_info, kiln_kernel_info,
           kiln_tensor_arg, kiln_counters, kiln_kernel_profile, kiln_profile, kiln_profile_options, kiln_dlpack_arg]

P = c_void_p
FUNCS = {
    "kiln_status_str": (c_char_p, [c_int]),
    "kiln_last_error": (c_char_p, []),
    "kiln_version": (c_char_p, []),
    "kiln_dtype_size": (c_size_t, [c_int]),
    "kiln_context_create": (c_int, [POINTER(P), POINTER(kiln_context_options)]),
    "kiln_context_free": (None, [P]),
    "kiln_context_arch": (c_char_p, [P]),
    "kiln_context_has_device": (c_int, [P]),
    "kiln_device_alloc": (c_int, [P, c_size_t, POINTER(P)]),
    "kiln_device_free": (c_int, [P, P]),
    "kiln_copy_to_device": (c_int, [P, P, P, c_size_t]),
    "kiln_copy_to_host": (c_int, [P, P, P, c_size_t]),
    "kiln_model_compile_file": (c_int, [P, c_char_p, POINTER(kiln_model_options), POINTER(P)]),
    "kiln_model_compile_string": (c_int, [P, c_char_p, c_char_p, POINTER(kiln_model_options), POINTER(P)]),
    "kiln_model_free": (None, [P]),
    "kiln_model_last_error": (c_char_p, [P]),
    "kiln_model_warnings": (c_char_p, [P]),
    "kiln_model_name": (c_char_p, [P]),
    "kiln_model_prepare": (c_int, [P, POINTER(kiln_dim), c_int]),
    "kiln_model_num_dims": (c_int, [P]),
    "kiln_model_dim_name": (c_char_p, [P, c_int]),
    "kiln_model_max_dim": (c_int64, [P, c_int]),
    "kiln_model_num_tensors": (c_int, [P, c_int]),
    "kiln_model_tensor": (c_int, [P, c_int, c_int, POINTER(kiln_dim), c_int, POINTER(kiln_tensor_info)]),
    "kiln_model_find_tensor": (c_int, [P, c_char_p, POINTER(kiln_dim), c_int, POINTER(kiln_tensor_info)]),
    "kiln_model_num_kernels": (c_int, [P]),
    "kiln_model_describe": (c_char_p, [P]),
    "kiln_model_kernel": (c_int, [P, c_int, POINTER(kiln_kernel_info)]),
    "kiln_model_report_json": (c_char_p, [P]),
    "kiln_model_bind_weight": (c_int, [P, c_char_p, P]),
    "kiln_model_load_safetensors_ex": (c_int, [P, c_char_p, ctypes.c_uint]),
    "kiln_model_alloc_states": (c_int, [P]),
    "kiln_model_zero_states": (c_int, [P]),
    "kiln_model_state_ptr": (c_int, [P, c_char_p, POINTER(P), POINTER(c_size_t)]),
    "kiln_model_run": (c_int, [P, POINTER(kiln_dim), c_int, POINTER(kiln_tensor_arg), c_int,
                               POINTER(kiln_tensor_arg), c_int, P]),
    "kiln_model_sync": (c_int, [P]),
    "kiln_model_counters": (c_int, [P, POINTER(kiln_counters)]),
    "kiln_model_profile": (c_int, [P, POINTER(kiln_dim), c_int, POINTER(kiln_tensor_arg), c_int,
                                   POINTER(kiln_tensor_arg), c_int, POINTER(kiln_profile_options),
                                   POINTER(kiln_profile)]),
    "kiln_model_run_dlpack": (c_int, [P, POINTER(kiln_dim), c_int, POINTER(kiln_dlpack_arg), c_int,
                                      POINTER(kiln_dlpack_arg), c_int, P]),
    "kiln_model_bind_weight_dlpack": (c_int, [P, POINTER(kiln_dlpack_arg)]),
    "kiln_model_state_dlpack": (c_int, [P, c_char_p, POINTER(POINTER(DLManagedTensor))]),
    "kiln_tensor_alloc_dlpack": (c_int, [P, c_int, c_int, POINTER(c_int64), POINTER(POINTER(DLManagedTensor))]),
}


def _candidates():
    env = os.environ.get("KILN_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = sorted(os.path.join(here, f) for f in os.listdir(here) if f.startswith("libkiln.so"))
    # importable from the source tree: python/kiln/ next to build/
    out.append(os.path.join(here, "..", "..", "build", "libkiln.so"))
    out.append("libkiln.so.0")  # the library path (ld.so.conf, LD_LIBRARY_PATH)
    return out


def load():
    """The library with every declared function typed."""
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        for name, (res, args) in FUNCS.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        lib.kiln_path = path
        return lib
    raise OSError("kiln: cannot load libkiln.so (set KILN_LIB to its path): " + "; ".join(errors))
