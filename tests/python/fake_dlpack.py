"""A DLPack producer without numpy or torch, for the CPU tests: a tensor
described by hand (any device type, shape, strides), data never touched."""
import ctypes

import kiln
from kiln import _capi as C

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

KDL_CPU, KDL_CUDA = 1, 2
CODES = {"f32": (2, 32), "f16": (2, 16), "bf16": (4, 16), "i32": (0, 32), "f64": (2, 64)}


@C.DL_DELETER
def _noop(p):
    pass


class Fake:
    def __init__(self, shape, dtype="f32", device=KDL_CPU, device_id=0, strides=None, data=0x1000):
        self.shape = tuple(shape)
        self._shape = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        self._strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        code, bits = CODES[dtype]
        self.mt = C.DLManagedTensor()
        self.mt.dl_tensor = C.DLTensor(data, C.DLDevice(device, device_id), len(shape), C.DLDataType(code, bits, 1),
                                       self._shape, self._strides, 0)
        self.mt.deleter = _noop

    def __dlpack__(self, stream=None):
        return _api.PyCapsule_New(ctypes.addressof(self.mt), b"dltensor", None)

    def __dlpack_device__(self):
        return (self.mt.dl_tensor.device.device_type, 0)
