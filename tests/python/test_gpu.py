#!/usr/bin/env python3
"""The kiln Python package on a GPU with torch tensors: weights bound and
inputs and outputs passed through DLPack, outputs returned as kiln.Tensor,
states viewed by torch without copies, dims read from the tensors, runs on
torch's stream, the profile as objects. Exit 77 without torch or a device.
Usage: test_gpu.py ROOT"""
import os
import sys
import tempfile

root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "python"))
try:
    import torch
except ImportError:
    print("skip: no torch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("skip: no CUDA device")
    sys.exit(77)
import kiln  # noqa: E402

os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp())
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    fails += 0 if cond else 1


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


torch.manual_seed(0)
ctx = kiln.Context()
check(ctx.has_device, "a device")

# a matmul with a bias and SiLU, bf16: weights bound from torch, dims from the tensors
LIN = """model lin {
  dims B, S
  input x : bf16[B, S, 256]
  weight w : bf16[512, 256]
  weight b : bf16[512]
  output y = silu(linear(x, w) + b)
}
"""
m = ctx.compile(text=LIN, name="lin.kiln", max_dims={"B": 4, "S": 64})
w = (torch.randn(512, 256, device="cuda") / 16).bfloat16()
b = torch.randn(512, device="cuda").bfloat16()
m.bind_weights({"w": w, "b": b})
for B, S in [(1, 1), (2, 64), (4, 17)]:
    x = torch.randn(B, S, 256, device="cuda").bfloat16()
    ref = torch.nn.functional.silu(x.float() @ w.float().t() + b.float())
    out = m.run({"x": x})                                   # new kiln.Tensor outputs
    y = torch.from_dlpack(out["y"])
    check(y.shape == (B, S, 512) and y.dtype == torch.bfloat16 and rel(y, ref) < 2e-2,
          "lin B=%d S=%d: kiln.Tensor output, rel err %.2e" % (B, S, rel(y, ref)))
    y2 = torch.empty(B, S, 512, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())                # x and y2 were made on the default stream
    with torch.cuda.stream(s):
        m.run({"x": x}, {"y": y2})                            # torch's stream, torch's output
    s.synchronize()
    check(rel(y2, ref) < 2e-2, "lin B=%d S=%d: torch output on torch's stream, rel err %.2e" % (B, S, rel(y2, ref)))
try:
    m.run({"x": torch.randn(2, 8, 256, device="cuda")})       # f32, not bf16
    check(False, "a f32 tensor for a bf16 input is refused")
except kiln.KilnError as e:
    check("DLPack dtype" in str(e), "a f32 tensor for a bf16 input is refused")
try:
    m.run({"x": torch.randn(2, 256, 8, device="cuda").bfloat16().transpose(1, 2)})
    check(False, "a transposed view is refused")
except kiln.KilnError as e:
    check("not contiguous" in str(e), "a transposed view is refused")

# the 1B layer at small dims: states as torch views, decode steps advance them
L = ctx.compile(os.path.join(root, "samples/llama3_1b_layer.kiln"), max_dims={"B": 1, "S": 4, "T": 64})
for t in L.weights:
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[t.dtype]
    scale = 1.0 / (t.shape[-1] ** 0.5) if len(t.shape) > 1 else 1.0
    L.bind(t.name, (torch.randn(*t.shape, device="cuda") * scale + (1.0 if len(t.shape) == 1 else 0.0)).to(dt))
L.alloc_states()
st = L.states
kc = torch.from_dlpack(st["kc"])
check(kc.shape == tuple(L.tensor("kc").shape) and kc.abs().sum().item() == 0, "states are zeroed torch views")
x = torch.randn(1, 4, L.tensor("x").shape[-1], device="cuda").bfloat16()
pos = torch.zeros(1, dtype=torch.int32, device="cuda")
out = L.run({"x": x, "pos": pos}, dims={"B": 1, "S": 4, "T": 64})
y = torch.from_dlpack(out["y"])
check(torch.isfinite(y.float()).all().item() and y.abs().sum().item() > 0, "1B layer output is finite")
check(kc[:, :, :4].abs().sum().item() > 0 and kc[:, :, 4:].abs().sum().item() == 0,
      "the run wrote cache rows 0..3 (seen through the torch view)")
c = L.counters
check(c["runs"] == 1 and c["launches"] > 0, "counters %s" % c)

# the profile as objects
try:
    p = L.profile({"x": x[:, :1].contiguous(), "pos": torch.full((1,), 4, dtype=torch.int32, device="cuda")},
                  dims={"B": 1, "S": 1, "T": 64}, runs=5)
    check(p.kernels and all(k.median_us > 0 for k in p.kernels) and "layer: median" in p.text,
          "profile: %d kernels, layer median %.1f us" % (len(p.kernels), p.layer_median_us))
except kiln.KilnError as e:
    check(e.status == 2 and "CUPTI" in str(e).upper(), "profile needs CUPTI: %s" % e)
del kc, st, y, out
L.close()
m.close()
ctx.close()
print("%d failed" % fails)
sys.exit(1 if fails else 0)
