#!/usr/bin/env python3
"""Writes the safetensors harness's hand-made seeds into corpus/safetensors/
(run from anywhere; the committed corpus is these plus what fuzzing added,
minimized with scripts/fuzz.sh --merge). Each seed is aimed at the model in
fuzz_safetensors.c: valid files, and one of each kind of mistake."""
import json, os, struct, sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")
SIZES = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4, "F64": 8, "U8": 1, "BOOL": 1}
MODEL = [("w", "F32", [4, 4]), ("b", "F32", [4]), ("h", "BF16", [2, 2, 2]), ("e", "F16", [2]), ("k", "I32", [3])]


def pack(entries, meta=None, pad=True, extra=b"", data=None):
    hdr, off, blob = {}, 0, b""
    for name, dt, shape in entries:
        n = SIZES.get(dt, 1)
        for d in shape:
            n *= d
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        blob += bytes((i * 7 + 3) & 255 for i in range(n))
        off += n
    if meta is not None:
        hdr["__metadata__"] = meta
    text = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + (blob if data is None else data) + extra


def raw(text, data=b""):
    return struct.pack("<Q", len(text)) + text + data


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "valid_model": pack(MODEL, meta={"format": "pt"}),
        "valid_empty": pack([]),
        "unknown_tensor": pack(MODEL + [("zz", "F32", [1])]),
        "missing_weights": pack(MODEL[:2]),
        "state_not_weight": pack(MODEL + [("s", "F32", [2, 4])]),
        "input_not_weight": pack(MODEL + [("x", "F32", [2, 4])]),
        "wrong_dtype": pack([("w", "F16", [4, 4])] + MODEL[1:]),
        "foreign_dtype": pack([("w", "F64", [4, 4]), ("u", "U8", [3]), ("o", "BOOL", [1])] + MODEL[1:]),
        "wrong_shape": pack([("w", "F32", [4, 2])] + MODEL[1:]),
        "wrong_rank": pack([("w", "F32", [16])] + MODEL[1:]),
        "scalar": pack([("b", "F32", [])]),
        "truncated": pack(MODEL)[:-5],
        "trailing": pack(MODEL, extra=b"\0" * 8),
        "bad_json": raw(b'{"w":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]'),
        "dup_key": raw(b'{"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
        "overlap": raw(b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', b"\0" * 12),
        "hole": raw(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}', b"\0" * 12),
        "offsets_reversed": raw(b'{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}', b"\0" * 4),
        "numel_mismatch": raw(b'{"b":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}}', b"\0" * 4),
        "huge_shape": raw(b'{"b":{"dtype":"F32","shape":[9223372036854775807,9223372036854775807],"data_offsets":[0,4]}}', b"\0" * 4),
        "negative_dim": raw(b'{"b":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', b"\0" * 4),
        "header_too_long": struct.pack("<Q", 1 << 40) + b"{}",
        "short": b"\x02\0\0",
        "not_object": raw(b"[1,2]"),
        "metadata_not_strings": pack([], meta={"a": 1}),
    }
    for name, blob in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
    print(f"{len(seeds)} seeds in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
