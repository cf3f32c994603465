#!/usr/bin/env python3
"""bench/bench.py -- one Llama-3 decoder layer: Kiln against PyTorch, on one GPU.

For each case (PERFORMANCE.md's table) the same layer is built twice on the
SAME random bf16 weights (torch tensors; their device pointers are bound to
Kiln, no copies), the same input, the same KV-cache contents and positions:

  * in Kiln: samples/llama3_{1b,8b}_layer.kiln compiled through libkiln.so
    (ctypes, include/kiln.h), run with kiln_model_run on torch's stream, so
    that Kiln replays its own CUDA graph after the first call;
  * in PyTorch: the layer written out below (RMSNorm, q/k/v projections,
    rotate-half RoPE, the cache write, GQA attention through
    scaled_dot_product_attention, o-projection + residual, RMSNorm, SwiGLU
    MLP + residual), timed eager, eager captured in a CUDA graph,
    torch.compile, and torch.compile captured in a CUDA graph.

Kiln's output is checked against PyTorch's (and both against a float32
reference), then every variant is timed with CUDA events after a warm-up
(median of many runs). The floors come from the same run: read bandwidth
(a large device-to-device copy and a large reduction) and the bf16 matrix
rate (an 8192^3 torch.matmul).

  python3 bench/bench.py --lib build/libkiln.so            all cases, all variants
  python3 bench/bench.py --lib build/libkiln.so --cases 8b-decode --variants kiln,eager
  python3 bench/bench.py --table DIR/*.json                 merge per-case results into one table
  python3 bench/bench.py --dry-run [--lib build/libkiln.so] no GPU, no torch: checks the pure-Python parts

bench/run.sh runs one process per case (a crash or a timeout loses one row,
not the table) and prints the merged table last.
"""

import argparse
import ctypes
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# --------------------------------------------------------------------------------------
# The layers and the cases
# --------------------------------------------------------------------------------------

MODELS = {
    # The 1B sample's RoPE is scaled as Llama-3.2-1B's config says (rope_type llama3).
    "1b": dict(file="samples/llama3_1b_layer.kiln", name="Llama-3.2-1B", D=2048, H=32, KV=8, HD=64, F=8192,
               rope_scaling=dict(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_pos=8192)),
    "8b": dict(file="samples/llama3_8b_layer.kiln", name="Llama-3-8B", D=4096, H=32, KV=8, HD=128, F=14336),
}
EPS = 1e-5
THETA = 500000.0


def rope_freqs(cfg, torch, device, dtype):
    """Inverse frequencies of a head's HD/2 rotation pairs, with the model's llama3 scaling if any
    (the formula of Hugging Face's _compute_llama3_parameters)."""
    HD = cfg["HD"]
    i = torch.arange(HD // 2, device=device, dtype=torch.float64)
    f = THETA ** (-2.0 * i / HD)
    r = cfg.get("rope_scaling")
    if r:
        L, lo, hi, fac = r["original_max_pos"], r["low_freq_factor"], r["high_freq_factor"], r["factor"]
        w = 2 * math.pi / f
        smooth = ((L / w - lo) / (hi - lo)).clamp(0.0, 1.0)
        mid = (1 - smooth) * f / fac + smooth * f
        f = torch.where(w < L / hi, f, torch.where(w > L / lo, f / fac, mid))
    return f.to(dtype)
# The query projection is drawn twice as large as the others so that the
# attention logits have a standard deviation of about 2: the softmax is then
# peaked enough that a wrong mask, position or RoPE changes the output by a
# lot (with flat attention the attention block adds almost nothing to y and
# the check would not see it). It does not change any timing.
WQ_GAIN = 2.0


class Case:
    def __init__(self, key, model, kind, B, S, T, pos):
        self.key, self.model, self.kind = key, model, kind
        self.B, self.S, self.T, self.pos = B, S, T, pos
        m = MODELS[model]
        if kind == "decode":
            self.title = "%s decode, B=%d, ctx %d" % (m["name"], B, pos + S)
        else:
            self.title = "%s prefill, B=%d, S=%d" % (m["name"], B, S)
        assert pos + S <= T

    @property
    def cfg(self):
        return MODELS[self.model]

    @property
    def unit(self):  # how the table shows times
        return "ms" if self.kind == "prefill" else "us"

    def dims(self):
        return {"B": self.B, "S": self.S, "T": self.T}


# "ctx 1024": the new token attends to 1024 keys: cache capacity T = 1024,
# pos = 1023. Prefill: T = S, pos = 0.
CASES = [
    Case("1b-decode", "1b", "decode", B=1, S=1, T=1024, pos=1023),
    Case("8b-decode", "8b", "decode", B=1, S=1, T=1024, pos=1023),
    Case("8b-decode-b32", "8b", "decode", B=32, S=1, T=1024, pos=1023),
    Case("8b-prefill-2k", "8b", "prefill", B=1, S=2048, T=2048, pos=0),
    Case("8b-prefill-b4-4k", "8b", "prefill", B=4, S=4096, T=4096, pos=0),
]
CASE_BY_KEY = {c.key: c for c in CASES}

VARIANTS = ["kiln", "eager", "graph", "compile", "compile-graph"]
VARIANT_TITLES = {
    "kiln": "Kiln",
    "eager": "PyTorch eager",
    "graph": "eager+graph",
    "compile": "torch.compile",
    "compile-graph": "compile+graph",
}

TOL = 2e-2  # bf16
L2_BYTES = 60e6  # H200 (torch reports 60 MB)


def weight_shapes(cfg):
    """name -> shape, in the .kiln files' declaration order ([out, in] like nn.Linear)."""
    D, H, KV, HD, F = cfg["D"], cfg["H"], cfg["KV"], cfg["HD"], cfg["F"]
    return [
        ("ln1", (D,)),
        ("wq", (H * HD, D)),
        ("wk", (KV * HD, D)),
        ("wv", (KV * HD, D)),
        ("wo", (D, H * HD)),
        ("ln2", (D,)),
        ("wg", (F, D)),
        ("wu", (F, D)),
        ("wd", (D, F)),
    ]


def weight_init(name, shape):
    """(mean, std) of the random weight: norm gains near 1, matrices ~ 1/sqrt(fan-in)."""
    if len(shape) == 1:
        return 1.0, 0.1
    std = 1.0 / math.sqrt(shape[1])
    if name == "wq":
        std *= WQ_GAIN
    return 0.0, std


def io_shapes(case):
    cfg = case.cfg
    B, S, T = case.B, case.S, case.T
    return {
        "x": ("input", "bf16", (B, S, cfg["D"])),
        "pos": ("input", "i32", (B,)),
        "kc": ("state", "bf16", (B, cfg["KV"], T, cfg["HD"])),
        "vc": ("state", "bf16", (B, cfg["KV"], T, cfg["HD"])),
        "y": ("output", "bf16", (B, S, cfg["D"])),
    }


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# --------------------------------------------------------------------------------------
# Floors: bytes and FLOPs
# --------------------------------------------------------------------------------------


def weight_bytes(cfg):
    return 2 * sum(numel(s) for _, s in weight_shapes(cfg))


def kv_bytes_read(case):
    """K and V of every attended key (pos + S of them per sequence), bf16."""
    cfg = case.cfg
    return 2 * 2 * case.B * cfg["KV"] * (case.pos + case.S) * cfg["HD"]


def layer_flops(case):
    """2*M*N*K for every projection, plus QK^T and PV over the keys each query
    sees (causal: query s sees pos + s + 1 keys)."""
    cfg = case.cfg
    D, H, KV, HD, F = cfg["D"], cfg["H"], cfg["KV"], cfg["HD"], cfg["F"]
    M = case.B * case.S
    proj = 2 * M * (D * H * HD + 2 * D * KV * HD + H * HD * D + 2 * D * F + F * D)
    keys = case.S * case.pos + case.S * (case.S + 1) // 2  # sum over s of (pos + s + 1)
    attn = 2 * 2 * case.B * H * HD * keys
    return proj + attn


def floor_of(case, read_bw, mm_rate):
    """Returns dict: bytes, flops, t_bytes_us, t_flops_us, floor_us, bound."""
    by = weight_bytes(case.cfg) + kv_bytes_read(case)
    fl = layer_flops(case)
    tb = by / read_bw * 1e6
    tf = fl / mm_rate * 1e6
    return {
        "bytes": by,
        "flops": fl,
        "t_bytes_us": tb,
        "t_flops_us": tf,
        "floor_us": max(tb, tf),
        "bound": "bytes" if tb >= tf else "FLOPs",
    }


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------


def fmt_time(us, unit):
    if us is None:
        return "-"
    if unit == "ms":
        v = us / 1e3
        return "%.2f ms" % v if v < 100 else "%.1f ms" % v
    return "%.1f µs" % us if us < 1000 else "%.0f µs" % us


def cell_of(res, unit):
    """A table cell from one variant's result dict."""
    if res is None:
        return "not run"
    if "median_us" in res:
        return fmt_time(res["median_us"], unit)
    if "error" in res:
        msg = " ".join(str(res["error"]).split())
        return "error: " + (msg[:60] + "…" if len(msg) > 60 else msg)
    if "skipped" in res:
        return "skipped (%s)" % res["skipped"]
    return "?"


def fmt_err(e):
    if e is None:
        return "-"
    if isinstance(e, float) and (math.isnan(e) or math.isinf(e)):
        return "NaN"
    return "%.1e" % e


def table_rows(results):
    header = ["case", "floor"] + [VARIANT_TITLES[v] for v in VARIANTS] + ["Kiln % of floor", "Kiln rel err"]
    rows = []
    for r in results:
        case = CASE_BY_KEY.get(r.get("case"))
        unit = case.unit if case else "us"
        title = r.get("title", r.get("case", "?"))
        fl = r.get("floor") or {}
        floor_us = fl.get("floor_us")
        times = r.get("times", {})
        row = [title, fmt_time(floor_us, unit) + (" (%s)" % fl["bound"] if fl.get("bound") else "")]
        for v in VARIANTS:
            res = times.get(v)
            if res is None and not r.get("done", False) and v in r.get("variants", VARIANTS):
                res = {"skipped": "not reached"}
            row.append(cell_of(res, unit))
        k = times.get("kiln") or {}
        if floor_us and k.get("median_us"):
            row.append("%.0f%%" % (floor_us / k["median_us"] * 100))
        else:
            row.append("-")
        chk = r.get("check") or {}
        err = chk.get("kiln_vs_torch")
        cell = fmt_err(err)
        if chk.get("failed"):
            cell = "FAIL " + cell
        row.append(cell)
        rows.append(row)
    return header, rows


def markdown_table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def notes_of(results, floors):
    out = []
    if floors and floors.get("source") == "kiln":
        out.append(
            "Floors from Kiln's ceilings (`kiln ceilings`: a streaming read of 2 GiB, cuBLAS bf16 8192^3 sustained "
            ">= 100 ms): read %.2f TB/s, bf16 matmul %.0f TFLOP/s." % (floors["read_bw"] / 1e12, floors["mm_rate"] / 1e12)
        )
        if floors.get("device"):
            out.append("Device: %s; %s." % (floors["device"], floors.get("software", "")))
    elif floors:
        out.append(
            "Floors measured in this run: device-to-device copy %.2f TB/s (bytes read + written), "
            "read-only (sum reduction) %.2f TB/s, floor uses %.2f TB/s; bf16 matmul 8192^3 %.0f TFLOP/s."
            % (floors["copy_bw"] / 1e12, floors["read_bw_sum"] / 1e12, floors["read_bw"] / 1e12, floors["mm_rate"] / 1e12)
        )
        if floors.get("device"):
            out.append("Device: %s; %s." % (floors["device"], floors.get("software", "")))
    out.append(
        "Floor = max(bytes / read bandwidth, FLOPs / matmul rate); bytes = weights + K/V of the attended keys; "
        "FLOPs = 2*M*N*K per projection + QK^T and PV over the causal keys. Kiln %% of floor = floor / Kiln * 100. "
        "Times: median over CUDA-event-timed calls after a warm-up. Rel err: ||y_kiln - y_torch|| / ||y_torch - x|| "
        "(the layer's own contribution, not diluted by the residual), tolerance %.0e." % TOL
    )
    for r in results:
        k = r.get("kiln") or {}
        chk = r.get("check") or {}
        bits = []
        if "compile_s" in k:
            bits.append(
                "compile %.2f s cold (%s kernels compiled by NVRTC, %s from the cache), %s warm (disk cache, new context)"
                % (
                    k["compile_s"],
                    k.get("compiled", "?"),
                    k.get("cache_hits", "?"),
                    ("%.1f ms" % (k["warm_compile_s"] * 1e3)) if k.get("warm_compile_s") is not None else "?",
                )
            )
        if "first_run_s" in k:
            bits.append("first run %.2f s (packs weights, captures the graph)" % k["first_run_s"])
        if "kernels" in k:
            bits.append("%s kernels" % k["kernels"])
        kt = (r.get("times") or {}).get("kiln") or {}
        if "p10_us" in kt:
            case = CASE_BY_KEY.get(r.get("case"))
            u = case.unit if case else "us"
            bits.append("Kiln p10-p90 %s-%s over %d calls" % (fmt_time(kt["p10_us"], u), fmt_time(kt["p90_us"], u), kt.get("n", 0)))
        c = k.get("counters_timed")
        if c:
            bits.append(
                "timed runs: %d graph replays, %d captures, %d updates, %d eager"
                % (c["graph_replays"], c["graph_captures"], c["graph_updates"], c["eager_runs"])
            )
        if chk:
            parts = []
            for key, label in [
                ("kiln_vs_torch", "Kiln vs torch"),
                ("kiln_vs_ref", "Kiln vs fp32 ref"),
                ("torch_vs_ref", "torch vs fp32 ref"),
                ("kc_new", "k cache"),
                ("vc_new", "v cache"),
                ("randpos_kiln_vs_torch", "random positions: Kiln vs torch"),
                ("randpos_kiln_vs_ref", "random positions: Kiln vs fp32 ref"),
                ("compile_vs_eager", "torch.compile vs eager"),
            ]:
                if chk.get(key) is not None:
                    parts.append("%s %s" % (label, fmt_err(chk[key])))
            if chk.get("kiln_nonfinite"):
                parts.append("%d non-finite Kiln outputs" % chk["kiln_nonfinite"])
            if chk.get("problems"):
                parts.append("PROBLEMS: " + "; ".join(chk["problems"]))
            bits.append("check: " + ", ".join(parts))
        for v in VARIANTS:
            res = (r.get("times") or {}).get(v) or {}
            if "error" in res:
                bits.append("%s error: %s" % (VARIANT_TITLES[v], " ".join(str(res["error"]).split())[:400]))
            if "compile_s" in res:
                bits.append("%s compile %.1f s" % (VARIANT_TITLES[v], res["compile_s"]))
        if r.get("stopped"):
            bits.append("stopped: %s" % r["stopped"])
        elif not r.get("done", True):
            bits.append("the process ended before finishing this case (a timeout or a crash: see the log)")
        if bits:
            out.append("%s: %s." % (r.get("title", r.get("case")), "; ".join(bits)))
    return out


def render_report(results, floors):
    header, rows = table_rows(results)
    text = [markdown_table(header, rows), ""]
    text += ["- " + n for n in notes_of(results, floors)]
    return "\n".join(text) + "\n"


# --------------------------------------------------------------------------------------
# ctypes: include/kiln.h, from the kiln Python package (python/kiln/_capi.py)
# --------------------------------------------------------------------------------------

sys.path.insert(0, os.path.join(ROOT, "python"))
from kiln import _capi  # noqa: E402
from kiln._capi import (  # noqa: E402,F401
    COUNTER_FIELDS, KILN_BF16, KILN_ERR_NO_DEVICE, KILN_F16, KILN_F32, KILN_I32, KILN_INPUT, KILN_MAX_RANK, KILN_OK,
    KILN_OUTPUT, KILN_STATE, KILN_WEIGHT, POINTER, STRUCTS, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p,
    kiln_context_options, kiln_counters, kiln_define, kiln_dim, kiln_model_options, kiln_tensor_arg,
    kiln_tensor_info)

DTYPE_NAMES = {KILN_F32: "f32", KILN_F16: "f16", KILN_BF16: "bf16", KILN_I32: "i32"}
KIND_NAMES = {KILN_INPUT: "input", KILN_OUTPUT: "output", KILN_WEIGHT: "weight", KILN_STATE: "state"}


class KilnError(RuntimeError):
    pass


class Kiln:
    """libkiln.so with every function declared."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        os.environ["KILN_LIB"] = self.path  # the package's loader declares every function
        self.lib = _capi.load()
        self.optional = {"kiln_copy_to_device", "kiln_copy_to_host"}

    def version(self):
        return self.lib.kiln_version().decode()

    def check(self, st, what):
        if st != KILN_OK:
            msg = (self.lib.kiln_last_error() or b"").decode(errors="replace")
            name = (self.lib.kiln_status_str(st) or b"?").decode()
            raise KilnError("%s failed: %s (%d):\n%s" % (what, name, st, msg))

    def context(self, compile_only=False, cache_dir=None, stream=None):
        o = kiln_context_options()
        o.device = 0
        o.stream = stream
        o.cache_dir = cache_dir.encode() if cache_dir else None
        o.compile_only = 1 if compile_only else 0
        ctx = c_void_p()
        self.check(self.lib.kiln_context_create(ctypes.byref(ctx), ctypes.byref(o)), "kiln_context_create")
        return ctx

    @staticmethod
    def dims_array(dims):
        arr = (kiln_dim * len(dims))()
        for i, (k, v) in enumerate(dims.items()):
            arr[i].name = k.encode()
            arr[i].value = int(v)
        return arr

    def compile(self, ctx, path, max_dims, lazy=False, decode_max_rows=0, no_graphs=False, no_pdl=False):
        md = self.dims_array(max_dims)
        o = kiln_model_options()
        o.max_dims = ctypes.cast(md, POINTER(kiln_dim))
        o.nmax_dims = len(max_dims)
        o.lazy = 1 if lazy else 0
        o.decode_max_rows = decode_max_rows
        o.no_graphs = 1 if no_graphs else 0
        o.no_pdl = 1 if no_pdl else 0
        m = c_void_p()
        self.check(self.lib.kiln_model_compile_file(ctx, path.encode(), ctypes.byref(o), ctypes.byref(m)), "compile " + path)
        return m

    def tensor_info(self, m, name, dims=None):
        d = self.dims_array(dims) if dims else None
        info = kiln_tensor_info()
        self.check(
            self.lib.kiln_model_find_tensor(m, name.encode(), d, len(dims) if dims else 0, ctypes.byref(info)),
            "kiln_model_find_tensor " + name,
        )
        return {
            "name": info.name.decode(),
            "kind": KIND_NAMES.get(info.kind, info.kind),
            "dtype": DTYPE_NAMES.get(info.dtype, info.dtype),
            "shape": tuple(info.shape[i] for i in range(info.rank)),
            "bytes": info.bytes,
            "type": info.type.decode() if info.type else None,
        }

    def tensors(self, m, kind):
        out = []
        for i in range(self.lib.kiln_model_num_tensors(m, kind)):
            info = kiln_tensor_info()
            self.check(self.lib.kiln_model_tensor(m, kind, i, None, 0, ctypes.byref(info)), "kiln_model_tensor")
            out.append((info.name.decode(), tuple(info.shape[j] for j in range(info.rank)), DTYPE_NAMES.get(info.dtype)))
        return out

    def bind(self, m, name, shape, ptr, dtype=KILN_BF16):
        sh = (c_int64 * len(shape))(*shape)
        self.check(
            self.lib.kiln_model_bind_weight_checked(m, name.encode(), dtype, len(shape), sh, c_void_p(ptr)),
            "bind weight " + name,
        )

    def state_ptr(self, m, name):
        p, n = c_void_p(), c_size_t()
        self.check(self.lib.kiln_model_state_ptr(m, name.encode(), ctypes.byref(p), ctypes.byref(n)), "state_ptr " + name)
        return p.value, n.value

    def counters(self, m):
        c = kiln_counters()
        self.check(self.lib.kiln_model_counters(m, ctypes.byref(c)), "kiln_model_counters")
        return {f: int(getattr(c, f)) for f in COUNTER_FIELDS}


class KilnRunner:
    """Argument arrays built once, so a timed call is one ctypes call."""

    def __init__(self, kiln, m, dims, inputs, outputs, stream):
        self.k, self.m = kiln, m
        self.dims = Kiln.dims_array(dims)
        self.nd = len(dims)
        self.ins = (kiln_tensor_arg * len(inputs))()
        for i, (n, p) in enumerate(inputs):
            self.ins[i].name, self.ins[i].ptr = n.encode(), p
        self.outs = (kiln_tensor_arg * len(outputs))()
        for i, (n, p) in enumerate(outputs):
            self.outs[i].name, self.outs[i].ptr = n.encode(), p
        self.nin, self.nout = len(inputs), len(outputs)
        self.stream = c_void_p(stream)
        self.run_fn = kiln.lib.kiln_model_run

    def __call__(self):
        st = self.run_fn(self.m, self.dims, self.nd, self.ins, self.nin, self.outs, self.nout, self.stream)
        if st != KILN_OK:
            self.k.check(st, "kiln_model_run")


# --------------------------------------------------------------------------------------
# The GPU part (torch imported here only)
# --------------------------------------------------------------------------------------


def import_torch():
    global torch, Fn
    import torch  # noqa: F401
    import torch.nn.functional as Fn  # noqa: F401

    return torch


def has_enable_gqa(device="cuda"):
    q = torch.randn(1, 4, 2, 8, device=device, dtype=torch.bfloat16)
    k = torch.randn(1, 2, 2, 8, device=device, dtype=torch.bfloat16)
    try:
        Fn.scaled_dot_product_attention(q, k, k, enable_gqa=True)
        return True
    except TypeError:
        return False


def make_torch_layer(cfg, attn_mode, gqa_native, device="cuda"):
    """The layer as the .kiln samples define it. attn_mode:
      'all'    every cached key is visible to every query (decode with pos + S == T, S == 1),
      'causal' pos == 0 and S == T: plain causal attention,
      'mask'   any positions: explicit mask j <= pos[b] + s.
    Graph-capturable: no host synchronization, positions stay on the device."""
    D, H, KV, HD = cfg["D"], cfg["H"], cfg["KV"], cfg["HD"]
    G = H // KV
    inv_freq = rope_freqs(cfg, torch, device, torch.float32)  # [HD/2]

    def rmsnorm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(torch.bfloat16)

    def rope(t, cos, sin):  # t [B, S, N, HD]; rotate-half, in float32
        tf = t.float()
        a, b = tf[..., : HD // 2], tf[..., HD // 2 :]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1).to(torch.bfloat16)

    def layer(x, pos, kc, vc, w):
        B, S, _ = x.shape
        T = kc.shape[2]
        h = rmsnorm(x, w["ln1"])
        q = Fn.linear(h, w["wq"]).view(B, S, H, HD)
        k = Fn.linear(h, w["wk"]).view(B, S, KV, HD)
        v = Fn.linear(h, w["wv"]).view(B, S, KV, HD)
        p = pos.to(torch.int64)[:, None] + torch.arange(S, device=x.device, dtype=torch.int64)[None, :]  # [B, S]
        ang = p[:, :, None].to(torch.float32) * inv_freq  # [B, S, HD/2]
        cos, sin = torch.cos(ang)[:, :, None, :], torch.sin(ang)[:, :, None, :]
        q = rope(q, cos, sin)
        k = rope(k, cos, sin)
        # the cache write: kc[b, :, pos[b] + s, :] = k[b, s]
        idx = p[:, None, :, None].expand(B, KV, S, HD)
        kc.scatter_(2, idx, k.transpose(1, 2))
        vc.scatter_(2, idx, v.transpose(1, 2))
        qt = q.transpose(1, 2)  # [B, H, S, HD]
        kk, vv = kc, vc
        extra = {}
        if gqa_native:
            extra["enable_gqa"] = True
        else:
            kk, vv = kc.repeat_interleave(G, dim=1), vc.repeat_interleave(G, dim=1)
        if attn_mode == "all":
            o = Fn.scaled_dot_product_attention(qt, kk, vv, **extra)
        elif attn_mode == "causal":
            o = Fn.scaled_dot_product_attention(qt, kk, vv, is_causal=True, **extra)
        else:
            j = torch.arange(T, device=x.device, dtype=torch.int64)
            mask = (j[None, None, :] <= p[:, :, None])[:, None, :, :]  # [B, 1, S, T]
            o = Fn.scaled_dot_product_attention(qt, kk, vv, attn_mask=mask, **extra)
        a = o.transpose(1, 2).reshape(B, S, H * HD)
        x1 = x + Fn.linear(a, w["wo"])
        h2 = rmsnorm(x1, w["ln2"])
        return x1 + Fn.linear(Fn.silu(Fn.linear(h2, w["wg"])) * Fn.linear(h2, w["wu"]), w["wd"])

    return layer


def attn_mode_for(case):
    if case.S == 1 and case.pos + case.S == case.T:
        return "all"
    if case.pos == 0 and case.S == case.T:
        return "causal"
    return "mask"


def reference_fp32(cfg, x, pos_list, kc0, vc0, w):
    """A float32 reference written out op by op (no SDPA, no scatter), from the
    initial caches. Returns y (float32) and the caches after the write."""
    D, H, KV, HD = cfg["D"], cfg["H"], cfg["KV"], cfg["HD"]
    G = H // KV
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        B, S, _ = x.shape
        T = kc0.shape[2]
        dev = x.device
        xf = x.float()
        W = {n: t.float() for n, t in w.items()}

        def rms(t, g):
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + EPS) * g

        h = rms(xf, W["ln1"])
        q = (h @ W["wq"].t()).view(B, S, H, HD)
        k = (h @ W["wk"].t()).view(B, S, KV, HD)
        v = (h @ W["wv"].t()).view(B, S, KV, HD)
        freq = rope_freqs(cfg, torch, dev, torch.float64)
        kc, vc = kc0.float().clone(), vc0.float().clone()
        out = torch.empty(B, S, H, HD, device=dev, dtype=torch.float32)
        scale = 1.0 / math.sqrt(HD)
        for b in range(B):
            p = (pos_list[b] + torch.arange(S, device=dev, dtype=torch.float64))[:, None] * freq  # [S, HD/2]
            c, s = torch.cos(p).float()[:, None, :], torch.sin(p).float()[:, None, :]

            def rot(t):
                a1, a2 = t[..., : HD // 2], t[..., HD // 2 :]
                return torch.cat([a1 * c - a2 * s, a2 * c + a1 * s], dim=-1)

            qb, kb = rot(q[b]), rot(k[b])  # [S, N, HD]
            kc[b, :, pos_list[b] : pos_list[b] + S, :] = kb.transpose(0, 1)
            vc[b, :, pos_list[b] : pos_list[b] + S, :] = v[b].transpose(0, 1)
            kh = kc[b].repeat_interleave(G, dim=0)  # [H, T, HD]
            vh = vc[b].repeat_interleave(G, dim=0)
            sc = torch.einsum("shd,htd->hst", qb, kh) * scale  # [H, S, T]
            j = torch.arange(T, device=dev)
            allowed = j[None, :] <= (pos_list[b] + torch.arange(S, device=dev))[:, None]  # [S, T]
            sc = sc.masked_fill(~allowed[None], float("-inf"))
            out[b] = torch.einsum("hst,htd->shd", torch.softmax(sc, dim=-1), vh)
            del sc, kh, vh
        x1 = xf + out.reshape(B, S, H * HD) @ W["wo"].t()
        h2 = rms(x1, W["ln2"])
        y = x1 + (Fn.silu(h2 @ W["wg"].t()) * (h2 @ W["wu"].t())) @ W["wd"].t()
        return y, kc, vc
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32


def rel(a, b, denom=None):
    """||a - b|| / ||denom or b||, in float64."""
    a64, b64 = a.double(), b.double()
    d = (denom if denom is not None else b).double()
    num = torch.linalg.vector_norm(a64 - b64).item()
    den = torch.linalg.vector_norm(d).item()
    return num / den if den > 0 else num


def sync():
    torch.cuda.synchronize()


def time_calls(fn, iters, warmup):
    """Median (and spread) of CUDA-event-timed calls on the current stream, in µs."""
    for _ in range(warmup):
        fn()
    sync()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        st[i].record()
        fn()
        en[i].record()
    sync()
    ts = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(st, en))
    return {
        "median_us": statistics.median(ts),
        "min_us": ts[0],
        "p10_us": ts[len(ts) // 10],
        "p90_us": ts[(len(ts) * 9) // 10],
        "max_us": ts[-1],
        "n": iters,
    }


def capture_graph(fn):
    """Warm up on a side stream, capture one call into a torch.cuda.CUDAGraph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    sync()
    return g, out


class _CAI:
    """A device pointer as __cuda_array_interface__ (version 2: no stream)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, False),
            "version": 2,
            "strides": None,
        }


def wrap_bf16(ptr, shape):
    """A torch bf16 view of device memory owned by Kiln, or None if torch made a copy."""
    try:
        t = torch.as_tensor(_CAI(ptr, shape, "<i2"), device="cuda")
    except Exception as e:  # noqa: BLE001
        print("  (no zero-copy view of Kiln's state: %s: %s)" % (type(e).__name__, e))
        return None
    if t.data_ptr() != ptr:
        print("  (torch copied Kiln's state instead of viewing it)")
        return None
    return t.view(torch.bfloat16)


class KilnState:
    """One of Kiln's states, read and written from torch: through a zero-copy
    view when torch accepts one, else through kiln_copy_to_device/host."""

    def __init__(self, kiln, ctx, m, name, shape):
        self.k, self.ctx, self.name, self.shape = kiln, ctx, name, tuple(shape)
        self.ptr, nbytes = kiln.state_ptr(m, name)
        want = 2 * numel(shape)
        if nbytes != want:
            raise KilnError("state %s: Kiln says %d bytes, the case needs %d (shape %s)" % (name, nbytes, want, shape))
        self.view = wrap_bf16(self.ptr, shape)
        if self.view is None and not {"kiln_copy_to_device", "kiln_copy_to_host"} <= kiln.optional:
            raise KilnError("cannot reach Kiln's state %s from torch (no zero-copy view, no kiln_copy_* in the library)" % name)

    def load(self, src):
        if self.view is not None:
            self.view.copy_(src)
            return
        sync()
        host = src.contiguous().cpu()
        self.k.check(self.k.lib.kiln_copy_to_device(self.ctx, c_void_p(self.ptr), c_void_p(host.data_ptr()), 2 * host.numel()), "kiln_copy_to_device")

    def read(self):
        if self.view is not None:
            return self.view.clone()
        sync()
        host = torch.empty(self.shape, dtype=torch.bfloat16)
        self.k.check(self.k.lib.kiln_copy_to_host(self.ctx, c_void_p(host.data_ptr()), c_void_p(self.ptr), 2 * host.numel()), "kiln_copy_to_host")
        return host.cuda()


def floors_from_kiln(spec):
    """The floors from Kiln's ceilings, the one source of them: spec is the kiln
    binary (runs `kiln ceilings --json`, measuring once per device) or a JSON
    file holding that output (or the cache's ceilings/<device>-<key>.json)."""
    if os.path.isfile(spec) and os.access(spec, os.X_OK) and not spec.endswith(".json"):
        out = subprocess.run([spec, "ceilings", "--json"], check=True, capture_output=True, text=True).stdout
        c = json.loads(out)
    else:
        with open(spec) as f:
            c = json.load(f)
    for k in ("read_bw", "bf16_rate", "device", "measured"):
        if k not in c:
            raise SystemExit("bench: %s: no %r in Kiln's ceilings" % (spec, k))
    return {
        "copy_bw": None,
        "read_bw_sum": None,
        "read_bw": float(c["read_bw"]),
        "mm_rate": float(c["bf16_rate"]),
        "device": c["device"],
        "software": "Kiln ceilings measured %s (driver %s, Kiln %s)" % (c["measured"], c.get("driver"), c.get("kiln")),
        "source": "kiln",
    }


def measure_floors(log):
    """Copy bandwidth, read-only bandwidth and the bf16 matmul rate."""
    torch.manual_seed(1)
    n = 1 << 30  # 1 GiB of bf16 each way (2 GiB moved per copy)
    src = torch.randn(n // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t = time_calls(lambda: dst.copy_(src), iters=20, warmup=3)
    copy_bw = 2 * n / (t["median_us"] * 1e-6)
    big = torch.randn(2 * n // 2, device="cuda", dtype=torch.bfloat16)  # 2 GiB read
    t2 = time_calls(lambda: big.sum(dtype=torch.float32), iters=20, warmup=3)
    sum_bw = 2 * n / (t2["median_us"] * 1e-6)
    del src, dst, big
    N = 8192
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(N, N, device="cuda", dtype=torch.bfloat16)
    t3 = time_calls(lambda: torch.matmul(a, b, out=c), iters=20, warmup=5)
    mm = 2 * N ** 3 / (t3["median_us"] * 1e-6)
    del a, b, c
    torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(0)
    f = {
        "copy_bw": copy_bw,
        "read_bw_sum": sum_bw,
        "read_bw": max(copy_bw, sum_bw),
        "mm_rate": mm,
        "device": "%s, %d SMs" % (props.name, props.multi_processor_count),
        "software": "torch %s, CUDA %s" % (torch.__version__, torch.version.cuda),
    }
    log(
        "floors: copy %.2f TB/s (read+write), sum %.2f TB/s (read), bf16 matmul %.0f TFLOP/s (%s)"
        % (copy_bw / 1e12, sum_bw / 1e12, mm / 1e12, f["device"])
    )
    return f


class Runner:
    """Runs the cases of one process; results written as they come."""

    def __init__(self, args):
        self.args = args
        self.t0 = time.monotonic()
        self.results = []
        self.floors = None
        self.weights = {}

    def log(self, msg):
        print("[%6.1fs] %s" % (time.monotonic() - self.t0, msg), flush=True)

    def left(self):
        return self.args.deadline - (time.monotonic() - self.t0) if self.args.deadline else float("inf")

    def save(self):
        if self.args.json:
            tmp = self.args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"floors": self.floors, "results": self.results}, f, indent=1)
            os.replace(tmp, self.args.json)

    def model_weights(self, model):
        if model not in self.weights:
            g = torch.Generator(device="cuda")
            g.manual_seed(1234 + (1 if model == "8b" else 0))
            w = {}
            for name, shape in weight_shapes(MODELS[model]):
                mean, std = weight_init(name, shape)
                t = torch.randn(shape, device="cuda", dtype=torch.float32, generator=g) * std + mean
                w[name] = t.to(torch.bfloat16).contiguous()
            self.weights = {model: w}  # one model's weights at a time
        return self.weights[model]

    def run(self):
        a = self.args
        import_torch()
        if not torch.cuda.is_available():
            raise SystemExit("bench: torch sees no CUDA device")
        self.log("torch %s (CUDA %s), %s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)))
        self.stream = torch.cuda.Stream()  # Kiln and torch share it; a non-default stream so that graphs capture
        self.kiln = Kiln(a.lib)
        self.log("%s from %s" % (self.kiln.version(), self.kiln.path))
        with torch.cuda.stream(self.stream):
            if a.ceilings:
                self.floors = floors_from_kiln(a.ceilings)
                self.log("floors from Kiln's ceilings (%s): read %.2f TB/s, bf16 %.0f TFLOP/s" % (
                    a.ceilings, self.floors["read_bw"] / 1e12, self.floors["mm_rate"] / 1e12))
            elif a.floors and os.path.exists(a.floors):
                with open(a.floors) as f:
                    self.floors = json.load(f)["floors"]
                self.log("floors from %s" % a.floors)
            else:
                self.floors = measure_floors(self.log)
            self.save()
            if a.floors_only:
                return
            self.gqa = has_enable_gqa()
            self.log("scaled_dot_product_attention enable_gqa: %s" % ("yes" if self.gqa else "no (repeat_interleave)"))
            ctx = self.kiln.context(stream=self.stream.cuda_stream)
            self.log("Kiln context on %s; KILN_CACHE_DIR=%s" % (self.kiln.lib.kiln_context_arch(ctx).decode(), os.environ.get("KILN_CACHE_DIR", "(default)")))
            try:
                for key in a.cases:
                    case = CASE_BY_KEY[key]
                    r = {"case": case.key, "title": case.title, "times": {}, "done": False, "variants": list(a.variants)}
                    r["floor"] = floor_of(case, self.floors["read_bw"], self.floors["mm_rate"])
                    self.results.append(r)
                    self.save()
                    try:
                        self.run_case(case, ctx, r)
                        r["done"] = True
                    except Exception as e:  # noqa: BLE001
                        traceback.print_exc()
                        r["stopped"] = "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:300])
                        self.log("CASE %s STOPPED: %s" % (case.key, r["stopped"]))
                    self.save()
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
            finally:
                sync()
                self.kiln.lib.kiln_context_free(ctx)

    # ---- one case ------------------------------------------------------------------------

    def run_case(self, case, ctx, r):
        a, K = self.args, self.kiln
        cfg = case.cfg
        B, S, T, pos0 = case.B, case.S, case.T, case.pos
        dims = case.dims()
        fl = r["floor"]
        self.log("=== %s: B=%d S=%d T=%d pos=%d; floor %s (%s-bound: %.1f MB, %.3f TFLOP)" % (
            case.title, B, S, T, pos0, fmt_time(fl["floor_us"], case.unit), fl["bound"], fl["bytes"] / 1e6, fl["flops"] / 1e12))
        ws = weight_bytes(cfg) + kv_bytes_read(case)
        self.log("working set %.1f MB %s the %.0f MB L2: %s" % (
            ws / 1e6, ">" if ws > L2_BYTES else "<=", L2_BYTES / 1e6,
            "one input set (weights and caches stream from HBM every call)" if ws > L2_BYTES
            else "it fits: the times may be flattered by the L2 (no rotation here)"))
        check = r["check"] = {"problems": []}
        times = r["times"]

        # ---- data: weights, input, positions, initial caches ----
        w = self.model_weights(case.model)
        g = torch.Generator(device="cuda")
        g.manual_seed(99 + CASES.index(case))
        x = torch.randn(B, S, cfg["D"], device="cuda", dtype=torch.float32, generator=g).to(torch.bfloat16)
        cache_shape = (B, cfg["KV"], T, cfg["HD"])
        kc0 = torch.randn(cache_shape, device="cuda", dtype=torch.float32, generator=g).to(torch.bfloat16)
        vc0 = torch.randn(cache_shape, device="cuda", dtype=torch.float32, generator=g).to(torch.bfloat16)
        pos_list = [pos0] * B
        pos = torch.tensor(pos_list, device="cuda", dtype=torch.int32)
        kc, vc = kc0.clone(), vc0.clone()  # torch's caches
        mode = attn_mode_for(case)
        layer = make_torch_layer(cfg, mode, self.gqa)
        self.log("torch attention: %s" % {"all": "every cached key (no mask)", "causal": "is_causal=True", "mask": "explicit mask"}[mode])

        # ---- torch eager: the reference output ----
        y_t = layer(x, pos, kc, vc, w)
        sync()
        ref = None
        if not a.no_ref:
            ref = reference_fp32(cfg, x, pos_list, kc0, vc0, w)
            check["torch_vs_ref"] = rel(y_t, ref[0], ref[0] - x.float())
            self.log("torch bf16 vs fp32 reference: %.2e" % check["torch_vs_ref"])

        # ---- Kiln: compile (cold), bind, states ----
        kr = r["kiln"] = {}
        m = None
        try:
            path = os.path.join(a.root, cfg["file"])
            t0 = time.perf_counter()
            m = K.compile(ctx, path, dims, decode_max_rows=a.decode_max_rows)
            K.check(K.lib.kiln_model_prepare(m, Kiln.dims_array(dims), 3), "kiln_model_prepare")
            kr["compile_s"] = time.perf_counter() - t0
            c = K.counters(m)
            kr["compiled"] = c["kernels_compiled"]
            kr["cache_hits"] = c["cache_hits_memory"] + c["cache_hits_disk"]
            kr["kernels"] = K.lib.kiln_model_num_kernels(m)
            kr["variants"] = c["variants"]
            self.log("Kiln compile + prepare: %.2f s (%d kernels compiled, %d cache hits, %d variants, %d kernels in the large-shape plan)" % (
                kr["compile_s"], kr["compiled"], kr["cache_hits"], c["variants"], kr["kernels"]))
            if a.verbose:
                print((K.lib.kiln_model_describe(m) or b"").decode())
            self.warm_compile(path, dims, kr)
            # the declared shapes must be the ones built here
            for name, shape in weight_shapes(cfg):
                info = K.tensor_info(m, name, dims)
                if info["shape"] != shape or info["dtype"] != "bf16":
                    raise KilnError("weight %s: Kiln declares %s %s, the bench built %s" % (name, info["dtype"], info["shape"], shape))
                K.bind(m, name, shape, w[name].data_ptr())
            for name, (kind, dt, shape) in io_shapes(case).items():
                info = K.tensor_info(m, name, dims)
                if info["shape"] != shape or info["dtype"] != dt or info["kind"] != kind:
                    raise KilnError("%s: Kiln declares %s %s %s, the bench built %s %s %s" % (
                        name, info["kind"], info["dtype"], info["shape"], kind, dt, shape))
            K.check(K.lib.kiln_model_alloc_states(m), "kiln_model_alloc_states")
            st_k = KilnState(K, ctx, m, "kc", cache_shape)
            st_v = KilnState(K, ctx, m, "vc", cache_shape)
            y_k = torch.full_like(x, float("nan"))
            run = KilnRunner(K, m, dims, [("x", x.data_ptr()), ("pos", pos.data_ptr())], [("y", y_k.data_ptr())], self.stream.cuda_stream)

            # ---- check at the case's positions, from the initial caches ----
            st_k.load(kc0)
            st_v.load(vc0)
            sync()  # torch wrote the weights on its stream; Kiln packs them from the host side
            t0 = time.perf_counter()
            run()
            K.check(K.lib.kiln_model_sync(m), "kiln_model_sync")
            sync()
            kr["first_run_s"] = time.perf_counter() - t0
            self.log("Kiln first run: %.2f s" % kr["first_run_s"])
            self.compare(check, "", y_k, y_t, x, ref, st_k, st_v, kc, vc, pos_list, S)

            # ---- check at random positions (decode): per-sequence pos, masks, stale keys beyond pos ----
            if case.kind == "decode" and not a.no_randpos:
                gg = torch.Generator()
                gg.manual_seed(7)
                rp = [int(v) for v in torch.randint(0, T - S + 1, (B,), generator=gg)]
                rp[0] = min(rp[0], 5)  # a short one: few keys
                pos.copy_(torch.tensor(rp, dtype=torch.int32))
                kc_r, vc_r = kc0.clone(), vc0.clone()
                y_tr = make_torch_layer(cfg, "mask", self.gqa)(x, pos, kc_r, vc_r, w)
                st_k.load(kc0)
                st_v.load(vc0)
                y_k.fill_(float("nan"))
                run()
                sync()
                ref_r = reference_fp32(cfg, x, rp, kc0, vc0, w) if not a.no_ref else None
                self.compare(check, "randpos_", y_k, y_tr, x, ref_r, st_k, st_v, kc_r, vc_r, rp, S)
                self.log("random positions %s: Kiln vs torch %.2e" % (rp[:4] + (["..."] if B > 4 else []), check["randpos_kiln_vs_torch"]))
                pos.copy_(torch.tensor(pos_list, dtype=torch.int32))
                del kc_r, vc_r, y_tr, ref_r
            check["failed"] = bool(check["problems"])
            if check["failed"]:
                self.log("!!!!!!!! CHECK FAILED: %s" % "; ".join(check["problems"]))
            st_k.load(kc0)
            st_v.load(vc0)
            sync()
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            times["kiln"] = {"error": "%s: %s" % (type(e).__name__, e)}
            check["problems"].append("Kiln did not run: %s" % " ".join(str(e).split())[:200])
            check["failed"] = True
            if m is not None:
                sync()
                K.lib.kiln_model_free(m)
            m = None
        del ref
        self.save()

        it = a.iters_prefill if case.kind == "prefill" else a.iters_decode
        wu = a.warmup_prefill if case.kind == "prefill" else a.warmup_decode

        # ---- Kiln timing ----
        if m is not None and "kiln" in a.variants:
            try:
                c0 = K.counters(m)
                times["kiln"] = time_calls(run, it, wu)
                K.check(K.lib.kiln_model_sync(m), "kiln_model_sync")
                c1 = K.counters(m)
                kr["counters_timed"] = {f: c1[f] - c0[f] for f in COUNTER_FIELDS}
                kr["counters"] = c1
                ct = kr["counters_timed"]
                self.log("Kiln: %s  (timed calls: %d graph replays, %d captures, %d updates, %d eager)" % (
                    fmt_time(times["kiln"]["median_us"], case.unit), ct["graph_replays"], ct["graph_captures"], ct["graph_updates"], ct["eager_runs"]))
                if ct["graph_replays"] != it + wu:
                    check["problems"].append("Kiln replayed its graph %d times in %d timed calls" % (ct["graph_replays"], it + wu))
                if not torch.isfinite(y_k).all():
                    check["problems"].append("Kiln's output is not finite after the timed runs")
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                times["kiln"] = {"error": "%s: %s" % (type(e).__name__, e)}
        if m is not None:
            sync()
            K.lib.kiln_model_free(m)
            m = None
        self.save()

        # ---- PyTorch ----
        fn = lambda: layer(x, pos, kc, vc, w)  # noqa: E731
        if "eager" in a.variants:
            self.timed(times, "eager", fn, it, wu, case)
        if "graph" in a.variants:
            self.timed_graph(times, "graph", fn, it, wu, case)
        if "compile" in a.variants or "compile-graph" in a.variants:
            left = self.left()
            if left < a.compile_reserve:
                for v in ("compile", "compile-graph"):
                    if v in a.variants:
                        times[v] = {"skipped": "%.0f s left of the deadline" % max(left, 0)}
                self.log("torch.compile skipped: %.0f s left" % left)
            else:
                self.compiled_variants(case, layer, x, pos, kc, vc, w, y_t, times, check, it, wu)
        check["failed"] = bool(check["problems"])
        self.save()

    def warm_compile(self, path, dims, kr):
        """A second compile from a fresh context: the disk cache's warm start."""
        K = self.kiln
        ctx2 = m2 = None
        try:
            ctx2 = K.context(compile_only=True)
            t0 = time.perf_counter()
            m2 = K.compile(ctx2, path, dims, decode_max_rows=self.args.decode_max_rows)
            K.check(K.lib.kiln_model_prepare(m2, Kiln.dims_array(dims), 3), "kiln_model_prepare")
            kr["warm_compile_s"] = time.perf_counter() - t0
            c = K.counters(m2)
            self.log("Kiln warm compile (new context, disk cache): %.1f ms (%d compiled, %d disk hits)" % (
                kr["warm_compile_s"] * 1e3, c["kernels_compiled"], c["cache_hits_disk"]))
        except Exception as e:  # noqa: BLE001
            self.log("warm compile failed (not fatal): %s" % e)
        finally:
            if m2:
                K.lib.kiln_model_free(m2)
            if ctx2:
                K.lib.kiln_context_free(ctx2)

    def compare(self, check, pre, y_k, y_t, x, ref, st_k, st_v, kc_t, vc_t, pos_list, S):
        probs = check["problems"]
        nf = int((~torch.isfinite(y_k)).sum().item())
        if nf:
            check[pre + "kiln_nonfinite"] = nf
            probs.append("%s%d of Kiln's outputs are not finite (poisoned with NaN before the run)" % (pre, nf))
        e = rel(y_k, y_t, y_t.float() - x.float())
        check[pre + "kiln_vs_torch"] = e
        if not e <= TOL:
            probs.append("%sKiln vs torch: %.3g > %.0e" % (pre, e, TOL))
        if ref is not None:
            yr = ref[0]
            check[pre + "kiln_vs_ref"] = rel(y_k, yr, yr - x.float())
            check.setdefault(pre + "torch_vs_ref", rel(y_t, yr, yr - x.float()))
            if not check[pre + "kiln_vs_ref"] <= TOL:
                probs.append("%sKiln vs fp32 reference: %.3g" % (pre, check[pre + "kiln_vs_ref"]))
        kk, vk = st_k.read(), st_v.read()
        for name, got, want in (("kc", kk, kc_t), ("vc", vk, vc_t)):
            num = den = 0.0
            for b, p in enumerate(pos_list):
                gs, ws_ = got[b, :, p : p + S].double(), want[b, :, p : p + S].double()
                num += torch.linalg.vector_norm(gs - ws_).item() ** 2
                den += torch.linalg.vector_norm(ws_).item() ** 2
            e = math.sqrt(num / den) if den > 0 else math.sqrt(num)
            check[pre + name + "_new"] = e
            if not e <= TOL:
                probs.append("%sKiln's %s at pos..pos+S-1 vs torch: %.3g" % (pre, name, e))
            # the rest of the cache must be untouched: equal to torch's (same initial contents)
            diff = (got != want)
            for b, p in enumerate(pos_list):
                diff[b, :, p : p + S] = False
            nd = int(diff.sum().item())
            if nd:
                probs.append("%sKiln changed %d elements of %s outside pos..pos+S-1" % (pre, nd, name))
        self.log("check%s: Kiln vs torch %.2e%s; k cache %.2e, v cache %.2e" % (
            " (" + pre.rstrip("_") + ")" if pre else "", check[pre + "kiln_vs_torch"],
            ", Kiln vs fp32 ref %.2e" % check[pre + "kiln_vs_ref"] if ref is not None else "",
            check[pre + "kc_new"], check[pre + "vc_new"]))

    def timed(self, times, v, fn, it, wu, case):
        try:
            times[v] = time_calls(fn, it, wu)
            self.log("%s: %s" % (VARIANT_TITLES[v], fmt_time(times[v]["median_us"], case.unit)))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            times[v] = {"error": "%s: %s" % (type(e).__name__, e)}
        self.save()

    def timed_graph(self, times, v, fn, it, wu, case):
        try:
            gr, _ = capture_graph(fn)
            self.timed(times, v, gr.replay, it, wu, case)
            del gr
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            times[v] = {"error": "%s: %s" % (type(e).__name__, e)}
            self.save()
        sync()
        torch.cuda.empty_cache()

    def compiled_variants(self, case, layer, x, pos, kc, vc, w, y_t, times, check, it, wu):
        a = self.args
        try:
            import torch._dynamo as dynamo

            for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
                if hasattr(dynamo.config, knob):
                    setattr(dynamo.config, knob, 64)
            cl = torch.compile(layer, dynamic=False)
            t0 = time.perf_counter()
            y_c = cl(x, pos, kc, vc, w)
            sync()
            ct = time.perf_counter() - t0
            self.log("torch.compile: first call %.1f s" % ct)
            check["compile_vs_eager"] = rel(y_c, y_t, y_t.float() - x.float())
            del y_c
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            msg = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
            for v in ("compile", "compile-graph"):
                if v in a.variants:
                    times[v] = {"error": msg}
            self.save()
            return
        fn = lambda: cl(x, pos, kc, vc, w)  # noqa: E731
        if "compile" in a.variants:
            self.timed(times, "compile", fn, it, wu, case)
            times["compile"]["compile_s"] = ct
        if "compile-graph" in a.variants:
            self.timed_graph(times, "compile-graph", fn, it, wu, case)
        self.save()


# --------------------------------------------------------------------------------------
# Merging per-case results
# --------------------------------------------------------------------------------------


def load_results(paths):
    results, floors = [], None
    for p in paths:
        try:
            with open(p) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            print("bench: cannot read %s: %s" % (p, e), file=sys.stderr)
            continue
        floors = floors or d.get("floors")
        results += d.get("results", [])
    order = {c.key: i for i, c in enumerate(CASES)}
    results.sort(key=lambda r: order.get(r.get("case"), 99))
    return results, floors


def with_missing_cases(results, floors, keys):
    """A row for every case asked for: those without a result say so."""
    have = {r.get("case") for r in results}
    out = list(results)
    for k in keys:
        if k not in have:
            c = CASE_BY_KEY[k]
            r = {"case": k, "title": c.title, "times": {}, "done": False, "stopped": "no result (crashed, timed out or skipped)"}
            if floors:
                r["floor"] = floor_of(c, floors["read_bw"], floors["mm_rate"])
            out.append(r)
    order = {c.key: i for i, c in enumerate(CASES)}
    out.sort(key=lambda r: order.get(r.get("case"), 99))
    return out


def emit_report(results, floors, md_path=None):
    text = render_report(results, floors)
    print()
    print(text, end="")
    if md_path:
        with open(md_path, "w") as f:
            f.write("# Kiln vs PyTorch, one Llama-3 layer\n\n")
            f.write(text)
        print("(written to %s)" % md_path)


# --------------------------------------------------------------------------------------
# Dry run: no GPU, no torch
# --------------------------------------------------------------------------------------

C_LAYOUT_PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "kiln.h"
#define S(T) printf("%s size %zu\n", #T, sizeof(T));
#define F(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f));
int main(void) {
@FIELDS@
    return 0;
}
"""


def c_layout_lines():
    lines = []
    for st in STRUCTS:
        lines.append("    S(%s)" % st.__name__)
        for f, _ in st._fields_:
            lines.append("    F(%s, %s)" % (st.__name__, f))
    return "\n".join(lines)


def ctypes_layout():
    out = {}
    for st in STRUCTS:
        out["%s size" % st.__name__] = ctypes.sizeof(st)
        for f, _ in st._fields_:
            out["%s.%s" % (st.__name__, f)] = getattr(st, f).offset
    return out


def dry_run(args):
    ok = True

    def expect(cond, msg):
        nonlocal ok
        print(("  ok    " if cond else "  FAIL  ") + msg)
        ok = ok and bool(cond)

    print("dry run: no GPU, no torch")
    assert "torch" not in sys.modules

    # 1. floor arithmetic against PERFORMANCE.md's table (read 4.29 TB/s, matmul 760 TFLOP/s)
    print("floors (PERFORMANCE.md's rates: read 4.29 TB/s, bf16 760 TFLOP/s):")
    doc = {
        "1b-decode": (121.6e6, 28.8),
        "8b-decode": (436.2e6, 102.5),
        "8b-decode-b32": (436.2e6, 133.0),
        "8b-prefill-2k": (None, 1220.0),
        "8b-prefill-b4-4k": (None, 10100.0),
    }
    doc_flops = {"8b-prefill-2k": 0.93e12, "8b-prefill-b4-4k": 7.7e12}
    for c in CASES:
        f = floor_of(c, 4.29e12, 760e12)
        wb, want = doc[c.key]
        if wb:
            expect(abs(weight_bytes(c.cfg) - wb) / wb < 0.001, "%s: weights %.1f MB (doc %.1f MB)" % (c.key, weight_bytes(c.cfg) / 1e6, wb / 1e6))
        if c.key in doc_flops:
            expect(abs(f["flops"] - doc_flops[c.key]) / doc_flops[c.key] < 0.01, "%s: %.3f TFLOP (doc %.2f)" % (c.key, f["flops"] / 1e12, doc_flops[c.key] / 1e12))
        expect(abs(f["floor_us"] - want) / want < 0.01, "%s: floor %s, %s-bound, KV %.1f MB (doc %s)" % (
            c.key, fmt_time(f["floor_us"], c.unit), f["bound"], kv_bytes_read(c) / 1e6, fmt_time(want, c.unit)))
    c = CASE_BY_KEY["8b-decode-b32"]
    expect(abs(kv_bytes_read(c) - 134.2e6) / 134.2e6 < 0.001, "8b-decode-b32: KV %.1f MB (doc 134 MB)" % (kv_bytes_read(c) / 1e6))
    # Kiln's ceilings as the one source of the floors' rates
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"read_bw": 4.3e12, "bf16_rate": 8.1e14, "f16_rate": 8.2e14, "device": "NVIDIA H200",
                   "measured": "2026-12-01T09:00:00Z", "driver": 13000, "kiln": "0.1.0"}, f)
    fk = floors_from_kiln(f.name)
    os.unlink(f.name)
    expect(fk["read_bw"] == 4.3e12 and fk["mm_rate"] == 8.1e14 and fk["source"] == "kiln", "floors from Kiln's ceilings (a JSON file)")
    expect("Kiln's ceilings" in " ".join(notes_of([], fk)), "the notes name Kiln's ceilings as the floors' source")
    # causal FLOPs by brute force on a small case
    small = Case("t", "1b", "prefill", B=2, S=5, T=9, pos=3)
    cfg = small.cfg
    keys = sum(small.pos + s + 1 for s in range(small.S))
    brute = 2 * small.B * small.S * sum(numel(s) for n, s in weight_shapes(cfg) if len(s) == 2) + 4 * small.B * cfg["H"] * cfg["HD"] * keys
    expect(layer_flops(small) == brute, "FLOPs formula = brute-force count on B=2 S=5 pos=3 (%d)" % brute)
    expect(attn_mode_for(CASE_BY_KEY["8b-decode"]) == "all" and attn_mode_for(CASE_BY_KEY["8b-prefill-2k"]) == "causal" and attn_mode_for(small) == "mask",
           "torch attention mode: decode ctx=T -> all keys, prefill pos=0 S=T -> is_causal, else mask")

    # 2. weights: the names and shapes the .kiln samples declare
    print("weights and shapes vs the .kiln files:")
    for model, cfg in MODELS.items():
        text = open(os.path.join(args.root, cfg["file"])).read()
        for name, shape in weight_shapes(cfg):
            expect(re.search(r"\bweight\s+%s\s*:\s*bf16\[" % name, text), "%s: weight %s : bf16[...] declared" % (model, name))
        for k in ("D", "H", "KV", "F"):
            expect(("%s = %d" % (k, cfg[k])) in text, "%s: const %s = %d in %s" % (model, k, cfg[k], cfg["file"]))
        mean, std = weight_init("wd", (cfg["D"], cfg["F"]))
        expect(abs(std - 1 / math.sqrt(cfg["F"])) < 1e-12 and mean == 0, "%s: wd std 1/sqrt(F)" % model)

    # 3. the table: formatting, errors, missing variants, merge of per-case JSON files
    print("table (made-up numbers):")
    floors = {"copy_bw": 4.29e12, "read_bw_sum": 4.1e12, "read_bw": 4.29e12, "mm_rate": 780e12, "device": "fake", "software": "none"}
    fake = []
    for i, c in enumerate(CASES):
        f = floor_of(c, floors["read_bw"], floors["mm_rate"])
        t = {v: {"median_us": f["floor_us"] * (1.3 + 0.4 * j), "n": 10} for j, v in enumerate(VARIANTS)}
        r = {"case": c.key, "title": c.title, "floor": f, "times": t, "done": True,
             "check": {"kiln_vs_torch": 3.2e-3, "problems": [], "failed": False},
             "kiln": {"compile_s": 2.5, "compiled": 14, "cache_hits": 0, "warm_compile_s": 0.0012, "kernels": 7, "first_run_s": 0.4,
                      "counters_timed": {f_: 0 for f_ in COUNTER_FIELDS}}}
        if i == 1:
            t["compile"] = {"error": "BackendCompilerFailed: backend='inductor' raised:\nRuntimeError: something long " + "x" * 100}
            t["compile-graph"] = {"error": "BackendCompilerFailed"}
        if i == 2:
            r["check"] = {"kiln_vs_torch": 0.31, "problems": ["Kiln vs torch: 0.31 > 2e-02"], "failed": True}
        if i == 3:
            t["compile"] = {"skipped": "20 s left of the deadline"}
            del t["compile-graph"]
        if i == 4:
            del t["compile"], t["compile-graph"]
            r["done"] = False
            r["stopped"] = "timeout"
        fake.append(r)
    with tempfile.TemporaryDirectory() as d:
        for r in fake:
            with open(os.path.join(d, r["case"] + ".json"), "w") as f:
                json.dump({"floors": floors, "results": [r]}, f)
        open(os.path.join(d, "broken.json"), "w").write("{not json")
        res, fl = load_results(sorted(glob.glob(os.path.join(d, "*.json"))))
        expect([r["case"] for r in res] == [c.key for c in CASES], "per-case JSON files merge in case order (a broken file is skipped)")
        md = os.path.join(d, "results.md")
        emit_report(res, fl, md)
        text = open(md).read()
    header, rows = table_rows(res)
    expect(len(header) == 9 and all(len(r) == 9 for r in rows), "9 columns: case | floor | 5 variants | %% of floor | rel err")
    expect(rows[0][1].endswith("(bytes)") and "µs" in rows[0][1] and "ms" in rows[3][1], "decode in µs, prefill in ms")
    expect(rows[0][7] == "%.0f%%" % (100 / 1.3), "Kiln %% of floor = floor / Kiln * 100")
    expect(rows[1][5].startswith("error:") and len(rows[1][5]) < 80, "a torch.compile error shows in its cell, shortened")
    expect(rows[2][8].startswith("FAIL"), "a failed check is marked FAIL")
    expect(rows[3][6] == "not run" and rows[3][5].startswith("skipped"), "skipped / not run cells")
    expect(rows[4][5] == "skipped (not reached)", "a case stopped early marks its missing variants")
    res2 = with_missing_cases([r for r in res if r["case"] != "8b-decode"], fl, [c.key for c in CASES])
    h2, rows2 = table_rows(res2)
    expect(len(rows2) == len(CASES) and rows2[1][0] == CASE_BY_KEY["8b-decode"].title and rows2[1][2] == "skipped (not reached)"
           and "µs" in rows2[1][1], "a case without a result file still has its row (floor, 'not reached')")
    expect("Kiln % of floor" in text and "Floors measured" in text, "markdown file written")
    expect(fmt_time(28.8, "us") == "28.8 µs" and fmt_time(1220.0, "ms") == "1.22 ms" and fmt_time(10130.0, "ms") == "10.13 ms", "time formatting")

    # 4. ctypes layouts against a C compiler's
    print("ctypes structs vs include/kiln.h:")
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "probe.c")
        exe = os.path.join(d, "probe")
        open(src, "w").write(C_LAYOUT_PROBE.replace("@FIELDS@", c_layout_lines()))
        try:
            subprocess.run([cc, "-std=c11", "-I", os.path.join(args.root, "include"), src, "-o", exe], check=True, capture_output=True, text=True)
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
            c_layout = {}
            for line in out.splitlines():
                k, v = line.rsplit(" ", 1)
                c_layout[k] = int(v)
            py = ctypes_layout()
            bad = [k for k in py if c_layout.get(k) != py[k]]
            expect(not bad and len(c_layout) == len(py), "%d sizes and offsets agree%s" % (len(py), (": differ " + ", ".join(bad)) if bad else ""))
        except (OSError, subprocess.CalledProcessError) as e:
            print("  skip  no C compiler to compare layouts (%s)" % getattr(e, "stderr", e))
    # every declared function is in kiln.h with that name
    hdr = open(os.path.join(args.root, "include", "kiln.h")).read()
    missing = [n for n in _capi.FUNCS if (n + "(") not in hdr]
    expect(not missing, "every function bench.py declares is in kiln.h%s" % (": missing " + ", ".join(missing) if missing else ""))

    # 5. the library through ctypes, compile-only
    lib = args.lib if os.path.exists(args.lib) else None
    if not lib:
        for cand in sorted(glob.glob(os.path.join(args.root, "build*", "libkiln.so"))):
            lib = cand
            break
    if not lib:
        print("  skip  no libkiln.so found (build the kiln_shared target)")
    else:
        print("libkiln.so through ctypes (%s):" % lib)
        K = Kiln(lib)
        expect(K.version().startswith("Kiln"), "kiln_version: %s" % K.version())
        ctxp = c_void_p()
        st = K.lib.kiln_context_create(ctypes.byref(ctxp), None)
        if st == KILN_OK:
            K.lib.kiln_context_free(ctxp)
        expect(st in (KILN_OK, KILN_ERR_NO_DEVICE), "kiln_context_create(NULL options): %s" % K.lib.kiln_status_str(st).decode())
        if st == KILN_ERR_NO_DEVICE:
            expect(len(K.lib.kiln_last_error() or b"") > 0, "kiln_last_error after NO_DEVICE: %s" % (K.lib.kiln_last_error() or b"").decode().splitlines()[0])
        with tempfile.TemporaryDirectory() as cache:
            ctx = K.context(compile_only=True, cache_dir=cache)
            expect(K.lib.kiln_context_arch(ctx) == b"sm_90a", "compile-only context, arch %s" % K.lib.kiln_context_arch(ctx).decode())
            try:
                for c in CASES:
                    path = os.path.join(args.root, c.cfg["file"])
                    full = c.key == "1b-decode" and not args.dry_run_lazy
                    t0 = time.perf_counter()
                    m = K.compile(ctx, path, c.dims(), lazy=not full)
                    if full:
                        K.check(K.lib.kiln_model_prepare(m, Kiln.dims_array(c.dims()), 3), "kiln_model_prepare")
                    dt = time.perf_counter() - t0
                    try:
                        nd = K.lib.kiln_model_num_dims(m)
                        dn = {K.lib.kiln_model_dim_name(m, i).decode(): K.lib.kiln_model_max_dim(m, i) for i in range(nd)}
                        expect(dn == c.dims(), "%s: max dims %s" % (c.key, dn))
                        ws = K.tensors(m, KILN_WEIGHT)
                        expect([(n, s) for n, s, _ in ws] == weight_shapes(c.cfg) and all(t == "bf16" for _, _, t in ws),
                               "%s: weights (names, order, shapes, bf16) as the bench builds them" % c.key)
                        for name, (kind, dt_, shape) in io_shapes(c).items():
                            info = K.tensor_info(m, name, c.dims())
                            expect(info["shape"] == shape and info["dtype"] == dt_ and info["kind"] == kind and info["bytes"] == numel(shape) * (4 if dt_ == "i32" else 2),
                                   "%s: %s %s %s%s, %d bytes" % (c.key, kind, name, dt_, list(shape), info["bytes"]))
                        cn = K.counters(m)
                        if full:
                            expect(cn["kernels_compiled"] > 0 and cn["variants"] >= 2,
                                   "%s: compiled (with the decode variant) in %.1f s: %d kernels by NVRTC, %d variants, %d kernels in the plan" % (
                                       c.key, dt, cn["kernels_compiled"], cn["variants"], K.lib.kiln_model_num_kernels(m)))
                            expect(len(K.lib.kiln_model_describe(m) or b"") > 0, "kiln_model_describe")
                        # device-only calls fail cleanly with NO_DEVICE and a message
                        try:
                            K.bind(m, "wq", weight_shapes(c.cfg)[1][1], 0x7F0000000000)
                            expect(False, "bind without a device fails")
                        except KilnError as e:
                            expect("no device" in str(e).lower() or "no_device" in str(e).lower() or "(9)" in str(e), "bind without a device: %s" % str(e).splitlines()[0])
                        runner = KilnRunner(K, m, c.dims(), [("x", 0x7F0000001000), ("pos", 0x7F0000002000)], [("y", 0x7F0000003000)], 0)
                        try:
                            runner()
                            expect(False, "run without a device fails")
                        except KilnError as e:
                            expect("(9)" in str(e) or "(6)" in str(e) or "(7)" in str(e), "run without a device: %s" % str(e).splitlines()[0])
                    finally:
                        K.lib.kiln_model_free(m)
                    if c.key != "1b-decode":
                        continue
                    # a second compile from a fresh context: disk cache hits
                    if full:
                        ctx2 = K.context(compile_only=True, cache_dir=cache)
                        t0 = time.perf_counter()
                        m2 = K.compile(ctx2, path, c.dims())
                        K.check(K.lib.kiln_model_prepare(m2, Kiln.dims_array(c.dims()), 3), "kiln_model_prepare")
                        c2 = K.counters(m2)
                        expect(c2["kernels_compiled"] == 0 and c2["cache_hits_disk"] > 0,
                               "warm compile from the disk cache: %.1f ms, %d disk hits" % ((time.perf_counter() - t0) * 1e3, c2["cache_hits_disk"]))
                        K.lib.kiln_model_free(m2)
                        K.lib.kiln_context_free(ctx2)
                # a bad path: the error message comes back
                try:
                    K.compile(ctx, os.path.join(args.root, "no-such-model.kiln"), {"B": 1})
                    expect(False, "compiling a missing file fails")
                except KilnError as e:
                    expect("no-such-model" in str(e), "error path: %s" % " ".join(str(e).split())[:100])
            finally:
                K.lib.kiln_context_free(ctx)

    # 6. the command line
    expect(parse_args(["--lib", "x.so", "--cases", "8b-decode,1b-decode", "--variants", "kiln,eager"]).cases == ["8b-decode", "1b-decode"], "--cases")
    try:
        with open(os.devnull, "w") as devnull:
            old, sys.stderr = sys.stderr, devnull
            try:
                parse_args(["--cases", "nope"])
            finally:
                sys.stderr = old
        expect(False, "unknown case refused")
    except SystemExit:
        expect(True, "unknown case refused")
    print("dry run: %s" % ("all checks passed" if ok else "SOME CHECKS FAILED"))
    assert "torch" not in sys.modules
    return 0 if ok else 1


# --------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description="Kiln vs PyTorch on one Llama-3 layer (bench/README.md)")
    p.add_argument("--lib", default=os.path.join(ROOT, "build", "libkiln.so"), help="libkiln.so (the kiln_shared target)")
    p.add_argument("--root", default=ROOT, help="the repository (samples/ are read from it)")
    p.add_argument("--cases", default=",".join(c.key for c in CASES), help="comma list of: " + ", ".join(c.key for c in CASES))
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma list of: " + ", ".join(VARIANTS))
    p.add_argument("--iters-decode", type=int, default=200)
    p.add_argument("--iters-prefill", type=int, default=20)
    p.add_argument("--warmup-decode", type=int, default=20)
    p.add_argument("--warmup-prefill", type=int, default=3)
    p.add_argument("--decode-max-rows", type=int, default=0, help="Kiln's decode_max_rows (0: Kiln's default)")
    p.add_argument("--no-ref", action="store_true", help="skip the float32 reference")
    p.add_argument("--no-randpos", action="store_true", help="skip the decode check at random positions")
    p.add_argument("--json", help="write this process's results here (updated as they come)")
    p.add_argument("--floors", help="read the floors from this JSON (else measure them)")
    p.add_argument("--floors-only", action="store_true", help="measure the floors, write --json, exit")
    p.add_argument("--ceilings", help="take the floors' rates from Kiln's ceilings: the kiln binary (runs `kiln ceilings --json`) or a JSON file of them")
    p.add_argument("--deadline", type=float, default=0, help="seconds this process may take (0: no limit); torch.compile is skipped when less than --compile-reserve is left")
    p.add_argument("--compile-reserve", type=float, default=45)
    p.add_argument("--table", nargs="*", help="print the table merged from these JSON files and exit")
    p.add_argument("--md", help="also write the table here (default with --table: $OUT/results.md when OUT is set)")
    p.add_argument("--verbose", action="store_true", help="print Kiln's plan of each model")
    p.add_argument("--dry-run", action="store_true", help="no GPU, no torch: check the pure-Python parts and the ctypes bindings")
    p.add_argument("--dry-run-lazy", action="store_true", help="dry run without NVRTC compiles")
    a = p.parse_args(argv)
    a.cases = [c for c in a.cases.split(",") if c]
    a.variants = [v for v in a.variants.split(",") if v]
    for c in a.cases:
        if c not in CASE_BY_KEY:
            p.error("unknown case %r (known: %s)" % (c, ", ".join(CASE_BY_KEY)))
    for v in a.variants:
        if v not in VARIANTS:
            p.error("unknown variant %r (known: %s)" % (v, ", ".join(VARIANTS)))
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.dry_run:
        return dry_run(a)
    md = a.md or (os.path.join(os.environ["OUT"], "results.md") if os.environ.get("OUT") else None)
    if a.table is not None:
        results, floors = load_results(a.table)
        results = with_missing_cases(results, floors, a.cases)
        emit_report(results, floors, md)
        if os.environ.get("OUT"):
            with open(os.path.join(os.environ["OUT"], "results.json"), "w") as f:
                json.dump({"floors": floors, "results": results}, f, indent=1)
        return 0
    r = Runner(a)
    try:
        r.run()
    finally:
        if r.results and not a.json:  # with --json (bench/run.sh), the merged table comes at the end
            emit_report(r.results, r.floors, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
