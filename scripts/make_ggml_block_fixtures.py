#!/usr/bin/env python3
# make_ggml_block_fixtures.py: random llama.cpp blocks of every type ember computes with, and the oracle's
# dequantization (gguf-py `gguf.quants.dequantize`, numpy) → tests/fixtures/ggml_blocks/.
#
#   /opt/venv/bin/pip install gguf
#   /opt/venv/bin/python scripts/make_ggml_block_fixtures.py [--out tests/fixtures/ggml_blocks]
#
# For each type, <TYPE>.bin = the raw blocks (n_blocks · block_bytes bytes) followed by the oracle output
# (n_elems little-endian float32). index.json lists type id, block size/bytes, n_blocks, n_elems and offsets.
# Quant bits (nibbles, high bits, int8 codes, packed 6-bit K-quant scales/mins, Q6_K int8 scales) are random
# bytes; the fp16 scales d / m / dmin are random finite fp16 values of either sign with magnitudes 2^-16 .. 2^2
# (normals and a few subnormals), plus some blocks with d = ±0. Plain types get random finite values.
import argparse
import json
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

# type → (n_blocks, byte offsets of the fp16 scale fields inside a block)
TYPES = {
    "Q4_0": (400, [0]),
    "Q4_1": (400, [0, 2]),
    "Q5_0": (400, [0]),
    "Q8_0": (400, [0]),
    "Q4_K": (200, [0, 2]),
    "Q5_K": (200, [0, 2]),
    "Q6_K": (200, [208]),
}
PLAIN = {"F32": 4096, "F16": 4096, "BF16": 4096}


def random_f16(rng, n):
    mag = np.exp2(rng.uniform(-16.0, 2.0, n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    v = (sign * mag).astype(np.float16)
    v[rng.random(n) < 0.03] = np.float16(0.0)
    v[rng.random(n) < 0.03] = np.float16(-0.0)
    assert np.all(np.isfinite(v))
    return v


def make_quant(rng, name):
    n_blocks, scale_offs = TYPES[name]
    qtype = T[name]
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for off in scale_offs:
        blocks[:, off:off + 2] = random_f16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    raw = blocks.reshape(-1)
    out = dequantize(raw, qtype).astype(np.float32, copy=False).reshape(-1)
    assert out.size == n_blocks * block_elems
    return qtype, block_elems, block_bytes, n_blocks, raw, out


def make_plain(rng, name):
    n = PLAIN[name]
    qtype = T[name]
    vals = rng.standard_normal(n) * np.exp2(rng.uniform(-8.0, 8.0, n))
    if name == "F32":
        raw = vals.astype(np.float32).view(np.uint8)
    elif name == "F16":
        raw = vals.astype(np.float16).view(np.uint8)
    else:  # BF16: the top halves of random float32 values
        raw = (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    out = dequantize(raw, qtype).astype(np.float32, copy=False).reshape(-1)
    assert out.size == n and np.all(np.isfinite(out))
    return qtype, 1, raw.size // n, n, raw, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "ggml_blocks"))
    ap.add_argument("--seed", type=int, default=20261201)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    index = {"oracle": "gguf-py gguf.quants.dequantize", "types": []}
    for name in list(TYPES) + list(PLAIN):
        qtype, be, bb, nb, raw, out = (make_quant if name in TYPES else make_plain)(rng, name)
        with open(os.path.join(args.out, f"{name}.bin"), "wb") as f:
            f.write(raw.tobytes())
            f.write(out.astype("<f4").tobytes())
        index["types"].append({"name": name, "type_id": int(qtype), "block_elems": be, "block_bytes": bb,
                               "n_blocks": nb, "n_elems": nb * be, "blocks_offset": 0, "blocks_size": raw.size,
                               "values_offset": raw.size, "file": f"{name}.bin"})
        print(f"{name}: {nb} blocks, {nb * be} values")
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
