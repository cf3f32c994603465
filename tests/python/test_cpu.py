#!/usr/bin/env python3
"""The kiln Python package without a GPU: compile_only contexts, introspection,
the fusion report, progress, errors, and the DLPack checks that come before
any device work (dims read from the tensors, dtype, shape, layout, device).
Usage: test_cpu.py ROOT (the package is imported from ROOT/python)."""
import os
import sys
import tempfile

root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402
from fake_dlpack import KDL_CUDA, Fake  # noqa: E402

fails = 0


def check(cond, what):
    global fails
    if cond:
        print("ok   " + what)
    else:
        fails += 1
        print("FAIL " + what)


def raises(fn, status, text, what):
    try:
        fn()
    except kiln.KilnError as e:
        check(e.status == status and text in str(e), "%s (%s)" % (what, e))
        return
    check(False, what + ": no error")


TINY = """model tiny {
  dims N
  input x : f32[N, 64]
  weight w : f32[64]
  output y = x * w + 1.0
}
"""
os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp())
ctx = kiln.Context(compile_only=True)
check(ctx.arch == "sm_90a" and not ctx.has_device, "compile_only context: sm_90a, no device")
check(kiln.version().startswith("Kiln "), "version " + kiln.version())
calls = []
m = ctx.compile(text=TINY, name="tiny.kiln", max_dims={"N": 16}, progress=lambda *a: calls.append(a))
check(m.name == "tiny" and m.dims == {"N": 16}, "name and dims")
check([(t.name, t.dtype, t.shape, t.type) for t in m.inputs] == [("x", "f32", (16, 64), "f32[N, 64]")], "inputs")
check([t.name for t in m.outputs] == ["y"] and [t.name for t in m.weights] == ["w"], "outputs and weights")
check(m.tensor("x", {"N": 3}).shape == (3, 64), "a shape at other dims")
k = m.kernels
check(len(k) == 1 and k[0].kind == "elementwise" and k[0].template == "elementwise.cuh", "kernels %s" % (k,))
check(len(calls) in (0, 1) and all(c[2] == "kiln_tiny_k0_elementwise" for c in calls), "progress %s" % (calls,))
rep = m.report
check(rep["model"] == "tiny" and len(rep["kernels"]) == 1 and "memory" in rep, "report")
check("kernels (1)" in m.describe(), "describe")
check(m.counters["kernels_compiled"] + m.counters["cache_hits_disk"] + m.counters["cache_hits_memory"] >= 1,
      "counters")

# the 1B layer: the report lists decisions, taken and refused, with rules
big = ctx.compile(os.path.join(root, "samples/llama3_1b_layer.kiln"), max_dims={"B": 1, "S": 1, "T": 64}, lazy=True)
rules = {(d["rule"], d["taken"]) for d in big.report["decisions"]}
check(("epilogue-swiglu", True) in rules and any(not t for _, t in rules), "report decisions of the 1B layer")
check(any(kk.kind == "attention" for kk in big.kernels), "1B kernels")

# errors
raises(lambda: ctx.compile(text="model m {", name="bad.kiln"), 3, "bad.kiln:1:", "model errors are located")
raises(lambda: m.alloc_states(), 9, "no CUDA device", "states need a device")
raises(lambda: ctx.empty([4], "f32"), 9, "", "device memory needs a device")

raises(lambda: kiln.Context(compile_only=True, arch="sm_75"), 1, "sm_75: Kiln's kernels target sm_80, sm_86",
       "an arch Kiln does not target, in one line")

# DLPack: checked before any device work
x, w, y = Fake([4, 64]), Fake([64]), Fake([4, 64])
raises(lambda: m.run({"x": x}, {"y": y}), 1, "'x' is not CUDA memory", "a CPU tensor is refused (dims read: N=4)")
raises(lambda: m.run({"x": Fake([4, 64], "f64")}, {"y": y}), 1, "DLPack dtype", "a wrong dtype")
raises(lambda: m.run({"x": Fake([4, 64])}, {"y": Fake([5, 64])}), 1, "gives N=4, but 'y' gives N=5",
       "dims that disagree")
raises(lambda: m.run({"x": Fake([4, 63], device=KDL_CUDA)}, {"y": Fake([4, 64], device=KDL_CUDA)}), 1,
       "has shape [4, 63], but the model declares f32[N, 64]: [4, 64]", "a wrong shape")
raises(lambda: m.run({"x": Fake([4, 64], device=KDL_CUDA, strides=[1, 4])}, {"y": Fake([4, 64], device=KDL_CUDA)}),
       1, "not contiguous", "a transposed view")
raises(lambda: m.run({"x": Fake([4, 64], device=KDL_CUDA, device_id=3)}, {"y": Fake([4, 64], device=KDL_CUDA)}),
       1, "on CUDA device 3", "another device")
raises(lambda: m.run({"y": Fake([4, 64], device=KDL_CUDA)}, {"x": Fake([4, 64], device=KDL_CUDA)}), 1,
       "not an input", "an output given as input")
raises(lambda: m.bind("w", Fake([63], device=KDL_CUDA)), 1, "has shape [63]", "a weight of the wrong shape")
raises(lambda: m.run({"x": Fake([4, 64], device=KDL_CUDA)}, {"y": Fake([4, 64], device=KDL_CUDA)}), 6,
       "not bound: w", "valid tensors pass the checks and reach kiln_model_run")
try:
    m.run({"x": [1, 2]}, {"y": y})
    check(False, "a list is not a tensor")
except TypeError as e:
    check("not a DLPack tensor" in str(e), "a list is not a tensor")
ctx.close()
print("%d failed" % fails)
sys.exit(1 if fails else 0)
