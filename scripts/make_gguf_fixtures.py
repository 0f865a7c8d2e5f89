#!/usr/bin/env python3
"""Independent oracle for ember's GGUF reader (src/io/gguf.cpp).

Writes tests/fixtures/gguf/sample.gguf with gguf-py's GGUFWriter (PyPI `gguf`, the llama.cpp project's
Python package) and tests/fixtures/gguf/sample.json listing what the file must contain: every metadata key in
file order with its GGUF value type and value (taken from what we asked gguf-py to write), every tensor's
name, ne (innermost first), ggml type, offset in the data section and its bytes as hex. The file is read
back with gguf-py's GGUFReader and checked against the same description before anything is written.

    /opt/venv/bin/pip install gguf numpy
    /opt/venv/bin/python scripts/make_gguf_fixtures.py            # (re)write the fixture
    /opt/venv/bin/python scripts/make_gguf_fixtures.py --check F  # print what GGUFReader sees in F (json)
"""
import argparse
import json
import os
import sys
from importlib.metadata import version

import numpy as np
import gguf
from gguf import GGUFValueType as VT, GGMLQuantizationType as QT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf")

TYPE_NAME = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
             VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "str", VT.ARRAY: "arr",
             VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}


def f32(x):
    return float(np.float32(x))


def describe(val, vtype, sub_type=None):
    """json description {type, value} or {type: arr, array_type, items: [...]} of a value as gguf-py writes it."""
    if vtype != VT.ARRAY:
        return {"type": TYPE_NAME[vtype], "value": f32(val) if vtype == VT.FLOAT32 else val}
    elem = sub_type if sub_type is not None else VT.get_type(val[0])  # gguf-py's own rule
    if elem == VT.ARRAY:
        items = [describe(v, VT.ARRAY) for v in val]
    else:
        items = [describe(v, elem)["value"] for v in val]
    return {"type": "arr", "array_type": TYPE_NAME[elem], "items": items}


def build(path):
    rng = np.random.default_rng(20240611)
    w = gguf.GGUFWriter(path, arch="embertest")  # adds general.architecture first
    meta = [("general.architecture", "embertest", VT.STRING, None)]

    def kv(key, val, vtype, sub_type=None):
        w.add_key_value(key, val, vtype, sub_type=sub_type)
        meta.append((key, val, vtype, sub_type))

    w.add_custom_alignment(64)  # non-default alignment, stored as general.alignment (u32)
    meta.append(("general.alignment", 64, VT.UINT32, None))
    # every scalar type, with extreme values
    kv("test.u8", 255, VT.UINT8)
    kv("test.i8", -128, VT.INT8)
    kv("test.u16", 65535, VT.UINT16)
    kv("test.i16", -32768, VT.INT16)
    kv("test.u32", 4294967295, VT.UINT32)
    kv("test.i32", -2147483648, VT.INT32)
    kv("test.f32", 3.14159, VT.FLOAT32)
    kv("test.f32_neg_tiny", -1.5e-40, VT.FLOAT32)  # subnormal
    kv("test.bool_true", True, VT.BOOL)
    kv("test.bool_false", False, VT.BOOL)
    kv("test.string", "héllo wörld ✓ 中文 🙂 \"quoted\"\nline2\ttab", VT.STRING)
    kv("test.string_empty", "", VT.STRING)
    kv("test.string_nul", "a\x00b", VT.STRING)
    kv("test.u64", 18446744073709551615, VT.UINT64)
    kv("test.u64_small", 1234567890123, VT.UINT64)
    kv("test.i64", -9223372036854775808, VT.INT64)
    kv("test.f64", 2.718281828459045, VT.FLOAT64)
    kv("test.f64_big", -1.7976931348623157e308, VT.FLOAT64)
    # arrays of every item type
    ints = [int(x) for x in rng.integers(0, 200, 5)]
    kv("arr.u8", ints, VT.ARRAY, VT.UINT8)
    kv("arr.i8", [-128, -1, 0, 127], VT.ARRAY, VT.INT8)
    kv("arr.u16", [0, 65535, 7], VT.ARRAY, VT.UINT16)
    kv("arr.i16", [-32768, 32767], VT.ARRAY, VT.INT16)
    kv("arr.u32", [4294967295, 0, 42], VT.ARRAY, VT.UINT32)
    kv("arr.i32", [int(x) for x in rng.integers(-2**31, 2**31 - 1, 9)], VT.ARRAY, VT.INT32)
    kv("arr.f32", [f32(x) for x in rng.standard_normal(6)], VT.ARRAY, VT.FLOAT32)
    kv("arr.bool", [True, False, True, True], VT.ARRAY, VT.BOOL)
    kv("arr.u64", [18446744073709551615, 1], VT.ARRAY, VT.UINT64)
    kv("arr.i64", [-9223372036854775808, 9223372036854775807, -5], VT.ARRAY, VT.INT64)
    kv("arr.f64", [float(x) for x in rng.standard_normal(3)], VT.ARRAY, VT.FLOAT64)
    tokens = ["<unk>", "<s>", "</s>", "", "Ġthe", "▁hello", "中", "🙂", "\n", "a\"b\\c"]
    tokens += ["tok%d_%s" % (i, "x" * int(rng.integers(0, 12))) for i in range(40)]
    kv("tokenizer.ggml.tokens", tokens, VT.ARRAY, VT.STRING)
    kv("arr.one_string", ["only"], VT.ARRAY, VT.STRING)
    # nested arrays (item types inferred by gguf-py: int -> i32, float -> f32, str -> str)
    kv("nested.ints", [[1, 2, 3], [4], [-5, 6]], VT.ARRAY)
    kv("nested.strings", [["a", "bc"], ["", "déf"]], VT.ARRAY)
    kv("nested.mixed", [[1, 2], ["x"], [0.5, -2.25]], VT.ARRAY)
    kv("nested.deep", [[[1], [2, 3]], [[4, 5, 6]]], VT.ARRAY)

    tensors = []

    def tensor(name, arr, raw_dtype=None):
        w.add_tensor(name, arr, raw_dtype=raw_dtype)
        tensors.append((name, arr))

    tensor("token_embd.weight", rng.standard_normal((3, 5)).astype(np.float32))           # F32 2-D ne [5, 3]
    tensor("output_norm.weight", rng.standard_normal(7).astype(np.float16))               # F16 1-D ne [7]
    tensor("blk.0.attn_q.weight", rng.integers(0, 256, (2, 3, 2 * 34), dtype=np.uint8),   # Q8_0 3-D ne [64, 3, 2]
           raw_dtype=QT.Q8_0)
    tensor("blk.0.ffn_down.weight", rng.integers(0, 256, (5, 18), dtype=np.uint8),        # Q4_0 2-D ne [32, 5]
           raw_dtype=QT.Q4_0)
    tensor("blk.0.ffn_up.weight", rng.integers(0, 256, (2, 84), dtype=np.uint8),          # Q2_K (not supported)
           raw_dtype=QT.Q2_K)
    tensor("blk.0.ids", rng.integers(-1000, 1000, 4).astype(np.int32))                   # I32 1-D
    tensor("blk.0.four_d", rng.standard_normal((2, 1, 3, 2)).astype(np.float32))         # F32 4-D ne [2, 3, 1, 2]

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return meta, tensors


def reader_dump(path):
    r = gguf.GGUFReader(path)
    out = {"alignment": int(r.alignment), "data_offset": int(r.data_offset), "metadata": [], "tensors": []}
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        t = f.types
        e = {"key": name, "types": [TYPE_NAME[x] for x in t]}
        try:
            e["value"] = f.contents()
        except Exception:  # nested arrays: gguf-py flattens them
            e["value"] = [p.tolist() for p in f.parts[f.data[0]:]] if f.data else None
        out["metadata"].append(e)
    for t in r.tensors:
        out["tensors"].append({"name": t.name, "ne": [int(x) for x in t.shape], "type": t.tensor_type.name,
                               "offset": int(t.data_offset - r.data_offset), "nbytes": int(t.n_bytes),
                               "hex": bytes(np.ascontiguousarray(t.data).view(np.uint8).ravel()).hex()})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", help="print what gguf-py's GGUFReader reads from this file and exit")
    args = ap.parse_args()
    if args.check:
        print(json.dumps(reader_dump(args.check), indent=1, ensure_ascii=False, default=str))
        return
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "sample.gguf")
    meta, tensors = build(path)

    desc = {
        "generator": "scripts/make_gguf_fixtures.py with gguf-py %s, numpy %s" % (version("gguf"), np.__version__),
        "version": gguf.GGUF_VERSION,
        "alignment": 64,
        "file_size": os.path.getsize(path),
        "metadata": [dict(key=k, **describe(v, t, s)) for k, v, t, s in meta],
        "tensors": [],
    }
    dump = reader_dump(path)
    desc["data_offset"] = dump["data_offset"]
    assert dump["alignment"] == 64 and dump["data_offset"] % 64 == 0
    assert [m["key"] for m in dump["metadata"]] == [k for k, *_ in meta], "key order differs from GGUFReader"
    for (k, v, t, s), m in zip(meta, dump["metadata"]):
        assert m["types"][0] == TYPE_NAME[t], k
        if t != VT.ARRAY or not isinstance(v[0], list):
            want = v if t != VT.FLOAT32 else f32(v)
            if t == VT.ARRAY and s == VT.FLOAT32:
                want = [f32(x) for x in v]
            assert m["value"] == want, (k, m["value"], want)
    by_name = {t["name"]: t for t in dump["tensors"]}
    for name, arr in tensors:
        rt = by_name[name]
        raw = np.ascontiguousarray(arr).view(np.uint8).ravel().tobytes()
        assert rt["hex"] == raw.hex(), name
        assert rt["offset"] % 64 == 0
        # ne: innermost first; quantized tensors were given as bytes per row
        tt = QT[rt["type"]]
        shape = list(arr.shape)
        if arr.dtype == np.uint8:
            block, size = gguf.GGML_QUANT_SIZES[tt]
            shape[-1] = shape[-1] // size * block
        ne = shape[::-1]
        assert rt["ne"] == ne, (name, rt["ne"], ne)
        desc["tensors"].append({"name": name, "ne": ne, "type": rt["type"], "type_id": int(tt),
                                "offset": rt["offset"], "nbytes": len(raw), "hex": raw.hex()})
    with open(os.path.join(OUT, "sample.json"), "w", encoding="utf-8") as f:
        json.dump(desc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote %s (%d bytes) and sample.json: %d keys, %d tensors" %
          (path, desc["file_size"], len(meta), len(tensors)), file=sys.stderr)


if __name__ == "__main__":
    main()
