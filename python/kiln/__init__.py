"""Kiln from Python: compile a transformer layer written in the Kiln language
into fused CUDA kernels, bind weights, and run it on tensors of any framework
through DLPack (PyTorch, CuPy, JAX), over libkiln.so's C API with ctypes.

    import kiln
    ctx = kiln.Context()                          # kiln.Context(compile_only=True) without a GPU
    m = ctx.compile("llama.kiln", max_dims={"B": 1, "S": 128, "T": 1024})
    m.load_safetensors("layer0.safetensors")      # or m.bind("wq", tensor)
    m.alloc_states()
    out = m.run({"x": x, "pos": pos})             # torch/CuPy tensors in, kiln.Tensor out
    y = torch.from_dlpack(out["y"])
"""
import collections
import ctypes
import json
import sys
import weakref

from . import _capi as C

__all__ = ["Context", "Model", "Tensor", "TensorInfo", "KernelInfo", "Profile", "KilnError", "library", "version"]

_lib = None


def library():
    """The loaded libkiln.so (ctypes.CDLL; its path in .kiln_path)."""
    global _lib
    if _lib is None:
        _lib = C.load()
    return _lib


def version():
    return library().kiln_version().decode()


class KilnError(RuntimeError):
    """A failed call: .status is the kiln_status, the message kiln_last_error()."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _check(st, what):
    if st != C.KILN_OK:
        lib = library()
        raise KilnError(st, "%s: %s" % (what, (lib.kiln_last_error() or lib.kiln_status_str(st)).decode()))


def _b(s):
    return None if s is None else s.encode() if isinstance(s, str) else s


def _s(b):
    return None if b is None else b.decode()


DTYPES = {C.KILN_F32: "f32", C.KILN_F16: "f16", C.KILN_BF16: "bf16", C.KILN_I32: "i32"}
KINDS = {C.KILN_INPUT: "input", C.KILN_OUTPUT: "output", C.KILN_WEIGHT: "weight", C.KILN_STATE: "state"}
TensorInfo = collections.namedtuple("TensorInfo", "name kind dtype shape bytes type")
KernelInfo = collections.namedtuple("KernelInfo", "name kind template config fallback implementation")
KernelProfile = collections.namedtuple("KernelProfile", [f for f, _ in C.kiln_kernel_profile._fields_])

# ---- DLPack through the CPython capsule API --------------------------------------------------

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # the DLPack protocol: a capsule still named "dltensor" was never consumed,
    # so its producer (Kiln) deletes the tensor
    cap = ctypes.cast(capsule, ctypes.py_object)
    if _api.PyCapsule_IsValid(cap, b"dltensor"):
        p = _api.PyCapsule_GetPointer(cap, b"dltensor")
        mt = ctypes.cast(p, ctypes.POINTER(C.DLManagedTensor))
        mt.contents.deleter(mt)


class Tensor:
    """Device memory Kiln hands out (a state, or a run's output), given to any
    framework without a copy: torch.from_dlpack(t), cupy.from_dlpack(t). Each
    __dlpack__ call hands out a view that keeps this object (and the model or
    context owning the memory) alive until the consumer lets it go."""

    def __init__(self, base, owner):
        self._base = base    # POINTER(DLManagedTensor) from Kiln, deleted with this object
        self._owner = owner  # the Model (states) or Context (new memory)
        t = base.contents.dl_tensor
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        self.dtype = {(2, 32): "f32", (2, 16): "f16", (4, 16): "bf16", (0, 32): "i32"}[(t.dtype.code, t.dtype.bits)]

    @staticmethod
    def _alloc(ctx, dtype, shape):
        shp = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        mt = ctypes.POINTER(C.DLManagedTensor)()
        _check(library().kiln_tensor_alloc_dlpack(ctx._h, dtype, len(shape), shp, ctypes.byref(mt)),
               "kiln_tensor_alloc_dlpack")
        t = Tensor(mt, ctx)
        ctx._tensors.add(t)  # freed before the context (Context.close)
        return t

    @property
    def data_ptr(self):
        return self._base.contents.dl_tensor.data

    def __dlpack_device__(self):
        d = self._base.contents.dl_tensor.device
        return (d.device_type, d.device_id)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # Kiln's work on this memory is done when the call that wrote it returns
        # (Model.run waits, or ran on the caller's stream): nothing to order.
        v = _View(self._base, self)
        return _api.PyCapsule_New(ctypes.cast(v.ptr, ctypes.c_void_p), b"dltensor",
                                  ctypes.cast(_capsule_destructor, ctypes.c_void_p))

    def _release(self):
        base, self._base = getattr(self, "_base", None), None
        if base:
            base.contents.deleter(base)

    def __del__(self):
        self._release()

    def __repr__(self):
        return "kiln.Tensor(%s%s)" % (self.dtype, list(self.shape))


_views = {}  # id -> _View kept alive until its deleter runs


class _View:
    """A DLManagedTensor that borrows another's memory; its deleter drops the
    reference to the Python object owning that memory."""

    @staticmethod
    @C.DL_DELETER
    def _deleter(p):
        _views.pop(ctypes.cast(p, ctypes.c_void_p).value, None)

    def __init__(self, base, owner):
        self.mt = C.DLManagedTensor()
        b = base.contents.dl_tensor
        self.shape = (ctypes.c_int64 * max(1, b.ndim))(*[b.shape[i] for i in range(b.ndim)])
        self.mt.dl_tensor = C.DLTensor(b.data, b.device, b.ndim, b.dtype, self.shape, None, b.byte_offset)
        self.mt.deleter = _View._deleter
        self.owner = owner
        self.ptr = ctypes.pointer(self.mt)
        _views[ctypes.addressof(self.mt)] = self


def _dlpack_args(tensors, stream):
    """[(name, obj)] -> (kiln_dlpack_arg array, the capsules to keep alive)."""
    arr = (C.kiln_dlpack_arg * max(1, len(tensors)))()
    keep = []
    for i, (name, obj) in enumerate(tensors):
        if not hasattr(obj, "__dlpack__"):
            raise TypeError("kiln: '%s' is a %s, not a DLPack tensor (torch, CuPy, JAX, kiln.Tensor)"
                            % (name, type(obj).__name__))
        try:
            cap = obj.__dlpack__(stream=stream) if stream is not None else obj.__dlpack__()
        except (TypeError, BufferError):
            cap = obj.__dlpack__()
        p = _api.PyCapsule_GetPointer(cap, b"dltensor")
        keep.append(cap)  # the capsule's destructor releases the producer's tensor
        arr[i].name = _b(name)
        arr[i].tensor = ctypes.cast(p, ctypes.POINTER(C.DLManagedTensor))
    return arr, keep


def _stream_of(stream):
    """(the cudaStream_t for Kiln, the DLPack stream for producers)."""
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            stream = torch.cuda.current_stream()
    if stream is None:
        return None, None
    s = getattr(stream, "cuda_stream", getattr(stream, "ptr", stream))
    s = int(s)
    # the legacy default stream cannot be captured into a CUDA graph: Kiln then
    # runs on its own stream after the producers are done (DLPack stream 1)
    return (s or None), (s or 1)


def _dims(d):
    d = d or {}
    arr = (C.kiln_dim * max(1, len(d)))()
    for i, (k, v) in enumerate(d.items()):
        arr[i].name, arr[i].value = _b(k), int(v)
    return arr, len(d)


# ---- context -------------------------------------------------------------------------------


class Context:
    """A device (or, with compile_only=True, none: models compile and can be
    inspected, nothing runs)."""

    def __init__(self, device=0, compile_only=False, cache_dir=None, no_cache=False, arch=None, stream=None):
        lib = library()
        o = C.kiln_context_options(device=device, compile_only=int(compile_only), cache_dir=_b(cache_dir),
                                   no_cache=int(no_cache), arch=_b(arch), stream=stream)
        self._h = ctypes.c_void_p()
        _check(lib.kiln_context_create(ctypes.byref(self._h), ctypes.byref(o)), "kiln_context_create")
        self._models = []
        self._tensors = weakref.WeakSet()  # device memory it handed out (Context.empty, run outputs)

    @property
    def arch(self):
        return _s(library().kiln_context_arch(self._h))

    @property
    def has_device(self):
        return bool(library().kiln_context_has_device(self._h))

    def compile(self, path=None, text=None, name=None, max_dims=None, defines=None, disabled=None, progress=None,
                lazy=False, no_graphs=False, decode_max_rows=0):
        """A Model from a file or from text. progress(done, total, kernel, ms)
        is called as NVRTC finishes each kernel."""
        lib = library()
        md, nmd = _dims(max_dims)
        defs = list((defines or {}).items())
        darr = (C.kiln_define * max(1, len(defs)))(*[C.kiln_define(_b(k), _b(str(v))) for k, v in defs])
        dis = list(disabled or [])
        disarr = (ctypes.c_char_p * max(1, len(dis)))(*[_b(x) for x in dis])
        cb = C.PROGRESS_FN(lambda user, done, total, kernel, ms: progress(done, total, _s(kernel), ms)) \
            if progress else C.PROGRESS_FN()
        o = C.kiln_model_options(defines=darr, ndefines=len(defs), disabled=disarr, ndisabled=len(dis),
                                 max_dims=md, nmax_dims=nmd, lazy=int(lazy), no_graphs=int(no_graphs),
                                 decode_max_rows=decode_max_rows, progress=cb)
        h = ctypes.c_void_p()
        if text is not None:
            st = lib.kiln_model_compile_string(self._h, _b(name or "<string>"), _b(text), ctypes.byref(o),
                                               ctypes.byref(h))
        else:
            st = lib.kiln_model_compile_file(self._h, _b(path), ctypes.byref(o), ctypes.byref(h))
        _check(st, "compile %s" % (path or name or "<string>"))
        return Model(self, h, cb)

    def empty(self, shape, dtype="bf16"):
        """Uninitialized device memory as a kiln.Tensor."""
        code = {v: k for k, v in DTYPES.items()}[dtype]
        return Tensor._alloc(self, code, list(shape))

    def close(self):
        """Frees the models and the memory handed out (views of it are invalid after)."""
        for m in self._models:
            m.close()
        for t in list(getattr(self, "_tensors", ())):
            t._release()
        if self._h:
            library().kiln_context_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


# ---- model ---------------------------------------------------------------------------------


class Profile:
    """kiln_model_profile's result: .kernels (KernelProfile rows, longest
    first), the layer's median/p10/p90, its floor, the bubbles, and .text (the
    table `kiln run --profile` prints)."""

    def __init__(self, p):
        self.runs = p.runs
        self.kernels = [KernelProfile(*[_s(v) if isinstance(v, bytes) else v
                                        for v in (getattr(p.kernels[i], f) for f, _ in C.kiln_kernel_profile._fields_)])
                        for i in range(p.nkernels)]
        for f, _ in C.kiln_profile._fields_:
            if f not in ("kernels", "text", "runs"):
                setattr(self, f, getattr(p, f))
        self.text = _s(p.text)

    def __str__(self):
        return self.text


class Model:
    def __init__(self, ctx, h, progress_cb):
        self.ctx, self._h = ctx, h
        self._progress_cb = progress_cb  # the C side may call it at a variant's first run
        self._bound = {}                 # weights bound from DLPack: kept alive while bound
        ctx._models.append(self)

    def close(self):
        if self._h:
            library().kiln_model_free(self._h)
            self._h = None
            self._bound.clear()

    # introspection
    @property
    def name(self):
        return _s(library().kiln_model_name(self._h))

    @property
    def warnings(self):
        return _s(library().kiln_model_warnings(self._h))

    @property
    def dims(self):
        """{dim: its max value}"""
        lib = library()
        return {_s(lib.kiln_model_dim_name(self._h, i)): lib.kiln_model_max_dim(self._h, i)
                for i in range(lib.kiln_model_num_dims(self._h))}

    def _info(self, i):
        return TensorInfo(_s(i.name), KINDS[i.kind], DTYPES[i.dtype], tuple(i.shape[:i.rank]), i.bytes, _s(i.type))

    def tensors(self, kind, dims=None):
        lib = library()
        code = {v: k for k, v in KINDS.items()}[kind]
        d, nd = _dims(dims)
        out = []
        for i in range(lib.kiln_model_num_tensors(self._h, code)):
            info = C.kiln_tensor_info()
            _check(lib.kiln_model_tensor(self._h, code, i, d, nd, ctypes.byref(info)), "kiln_model_tensor")
            out.append(self._info(info))
        return out

    def tensor(self, name, dims=None):
        d, nd = _dims(dims)
        info = C.kiln_tensor_info()
        _check(library().kiln_model_find_tensor(self._h, _b(name), d, nd, ctypes.byref(info)), "tensor " + name)
        return self._info(info)

    inputs = property(lambda self: self.tensors("input"))
    outputs = property(lambda self: self.tensors("output"))
    weights = property(lambda self: self.tensors("weight"))

    @property
    def kernels(self):
        lib = library()
        out = []
        for i in range(lib.kiln_model_num_kernels(self._h)):
            k = C.kiln_kernel_info()
            _check(lib.kiln_model_kernel(self._h, i, ctypes.byref(k)), "kiln_model_kernel")
            out.append(KernelInfo(_s(k.name), _s(k.kind), _s(k.template_file), _s(k.config), _s(k.fallback),
                                  _s(k.implementation)))
        return out

    def describe(self):
        """The kernels and the memory plan, as `kiln compile --emit=plan` prints them."""
        return _s(library().kiln_model_describe(self._h))

    @property
    def report(self):
        """The fusion report (as `kiln compile --report` writes it): a dict with
        "kernels", "decisions" (taken or refused, rule, lines, bytes saved) and "memory"."""
        return json.loads(_s(library().kiln_model_report_json(self._h)))

    # weights and states
    def bind(self, name, tensor):
        """Bind a weight to a DLPack tensor (borrowed: kept alive here while bound)."""
        arr, keep = _dlpack_args([(name, tensor)], None)
        _check(library().kiln_model_bind_weight_dlpack(self._h, arr), "bind " + name)
        self._bound[name] = tensor

    def bind_weights(self, tensors):
        for k, v in tensors.items():
            self.bind(k, v)

    def load_safetensors(self, path, ignore_unknown=False, allow_missing=False):
        flags = (C.KILN_LOAD_IGNORE_UNKNOWN if ignore_unknown else 0) | (C.KILN_LOAD_ALLOW_MISSING if allow_missing else 0)
        _check(library().kiln_model_load_safetensors_ex(self._h, _b(path), flags), "load " + path)

    def alloc_states(self):
        _check(library().kiln_model_alloc_states(self._h), "kiln_model_alloc_states")

    def zero_states(self):
        _check(library().kiln_model_zero_states(self._h), "kiln_model_zero_states")

    @property
    def states(self):
        """{name: kiln.Tensor viewing the state's device memory (max dims)}"""
        out = {}
        for info in self.tensors("state"):
            mt = ctypes.POINTER(C.DLManagedTensor)()
            _check(library().kiln_model_state_dlpack(self._h, _b(info.name), ctypes.byref(mt)), "state " + info.name)
            out[info.name] = Tensor(mt, self)
        return out

    # running
    def _outputs_for(self, inputs, dims):
        """Output tensors for a run: new device memory of each output's shape."""
        if dims is None:
            dims = self._infer_dims(inputs)
        out = {}
        for info in self.tensors("output", dims):
            code = {v: k for k, v in DTYPES.items()}[info.dtype]
            out[info.name] = Tensor._alloc(self.ctx, code, list(info.shape))
        return out

    def _infer_dims(self, inputs):
        # the C side infers from the tensors at the run; outputs need the dims first
        dims = {}
        names = list(self.dims)
        for name, t in inputs.items():
            decl = self.tensor(name).type
            axes = [a.strip() for a in decl[decl.index("[") + 1:decl.rindex("]")].split(",")] if "[" in decl else []
            shape = tuple(t.shape)
            for a, n in zip(axes, shape):
                if a in names:
                    dims[a] = int(n)
        return dims

    def run(self, inputs, outputs=None, dims=None, stream=None):
        """Run once. inputs: {name: DLPack tensor}; outputs: {name: DLPack
        tensor} or None (new kiln.Tensor each); dims: {dim: value} or None
        (read from the tensors). Runs on `stream` (an int cudaStream_t or an
        object with .cuda_stream), else torch's current stream when torch is in
        use; when that is the legacy default stream or there is none, Kiln runs
        on its own stream and the call waits for it. Returns the outputs."""
        lib = library()
        if outputs is None:
            outputs = self._outputs_for(inputs, dims)
        kstream, dlstream = _stream_of(stream)
        ins, keep_in = _dlpack_args(list(inputs.items()), dlstream)
        outs, keep_out = _dlpack_args(list(outputs.items()), dlstream)
        d, nd = _dims(dims)
        if kstream is None and dlstream == 1:
            sys.modules["torch"].cuda.current_stream().synchronize()
        st = lib.kiln_model_run_dlpack(self._h, d if dims else None, nd, ins, len(inputs), outs, len(outputs),
                                       ctypes.c_void_p(kstream) if kstream else None)
        _check(st, "run")
        if kstream is None:
            _check(lib.kiln_model_sync(self._h), "kiln_model_sync")
        del keep_in, keep_out
        return outputs

    def sync(self):
        _check(library().kiln_model_sync(self._h), "kiln_model_sync")

    def profile(self, inputs, outputs=None, dims=None, runs=50, json_path=None, trace_path=None, roofline_path=None):
        """Time every kernel inside `runs` CUDA-graph replays (CUPTI): a Profile."""
        lib = library()
        if dims is None:
            dims = self._infer_dims(inputs)
        if outputs is None:
            outputs = self._outputs_for(inputs, dims)
        ins, keep_in = _dlpack_args(list(inputs.items()), None)
        outs, keep_out = _dlpack_args(list(outputs.items()), None)

        def raw(arr, n):
            a = (C.kiln_tensor_arg * max(1, n))()
            for i in range(n):
                t = arr[i].tensor.contents.dl_tensor
                a[i].name, a[i].ptr = arr[i].name, (t.data or 0) + t.byte_offset
            return a
        d, nd = _dims(dims)
        o = C.kiln_profile_options(runs=runs, json_path=_b(json_path), trace_path=_b(trace_path),
                                   roofline_path=_b(roofline_path))
        p = C.kiln_profile()
        _check(lib.kiln_model_profile(self._h, d, nd, raw(ins, len(inputs)), len(inputs), raw(outs, len(outputs)),
                                      len(outputs), ctypes.byref(o), ctypes.byref(p)), "profile")
        del keep_in, keep_out
        return Profile(p)

    @property
    def counters(self):
        c = C.kiln_counters()
        _check(library().kiln_model_counters(self._h, ctypes.byref(c)), "kiln_model_counters")
        return {f: getattr(c, f) for f in C.COUNTER_FIELDS}

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
