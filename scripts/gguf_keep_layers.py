#!/usr/bin/env python3
"""Writes a copy of a GGUF file that keeps only its first N transformer blocks (blk.0 … blk.N-1) and sets
<arch>.block_count = N; every other key, the vocabulary and all non-block tensors are copied byte for byte.

For the GPU machine, whose working-tree copy is size-limited and which has no network: a real model's tokenizer,
template and shapes (SmolLM2-135M: 30 → 8 blocks is 98 → 42 MB) for benchmarks that measure the engine and the
server rather than the model's answers. Standard library only (GGUF v2/v3 little-endian, format as documented in
ggml's docs/gguf.md).

  python3 scripts/gguf_keep_layers.py IN.gguf OUT.gguf N [--q8-to-q4_0]

--q8-to-q4_0: Q8_0 tensors (SmolLM2's tied embedding) are re-quantized to Q4_0 (numpy; d = the signed absmax / -8,
q = round(x / d) + 8 clamped to 0..15, as ggml's reference quantizer) — about half the bytes.
"""
import re
import struct
import sys

# value type → struct format of a scalar (8 = string, 9 = array)
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        if n > len(self.d) - self.o:
            raise ValueError(f"string of {n} bytes at offset {self.o} runs past the file")
        s = self.d[self.o:self.o + n]
        self.o += n
        return s

    def skip_value(self, t):
        if t in SCALAR:
            self.take(SCALAR[t])
        elif t == 8:
            self.string()
        elif t == 9:
            et, n = self.take("I"), self.take("Q")
            if et in SCALAR:
                self.o += n * struct.calcsize("<" + SCALAR[et])
            else:
                for _ in range(n):
                    self.skip_value(et)
        else:
            raise ValueError(f"unknown GGUF value type {t} at offset {self.o}")


def q8_0_to_q4_0(raw):
    import numpy as np
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    x = b[:, 2:].copy().view(np.int8).astype(np.float32) * d  # [blocks, 32]
    idx = np.abs(x).argmax(axis=1)
    mx = x[np.arange(len(x)), idx]
    d4 = mx / -8.0
    inv = np.where(d4 != 0, 1.0 / np.where(d4 != 0, d4, 1), 0.0)
    q = np.clip(np.trunc(x * inv[:, None] + 8.5), 0, 15).astype(np.uint8)
    out = np.empty((len(x), 18), dtype=np.uint8)
    out[:, :2] = d4.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    requant = "--q8-to-q4_0" in sys.argv
    if len(args) != 3:
        sys.exit(__doc__)
    src, dst, keep = args[0], args[1], int(args[2])
    data = open(src, "rb").read()
    r = Reader(data)
    if r.take("I") != 0x46554747:
        sys.exit(f"{src}: not a GGUF file")
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    if version not in (2, 3):
        sys.exit(f"{src}: GGUF version {version} (2 or 3 supported)")
    kvs, alignment, arch = [], 32, None
    for _ in range(n_kv):
        start = r.o
        key = r.string().decode()
        t = r.take("I")
        vstart = r.o
        r.skip_value(t)
        kvs.append((key, t, data[start:r.o], data[vstart:r.o]))
        if key == "general.alignment":
            alignment = struct.unpack_from("<I", data, vstart)[0]
        if key == "general.architecture":
            arch = data[vstart + 8:r.o].decode()
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("I")
        dims = [r.take("Q") for _ in range(nd)]
        ttype, off = r.take("I"), r.take("Q")
        tensors.append((name, dims, ttype, off))
    base = (r.o + alignment - 1) // alignment * alignment
    offs = sorted(o for _, _, _, o in tensors) + [len(data) - base]
    size = {o: offs[i + 1] - o for i, o in enumerate(offs[:-1])}  # stored size incl. padding
    bc_key = f"{arch}.block_count"
    if not any(k == bc_key for k, *_ in kvs):
        sys.exit(f"{src}: no {bc_key}")
    blk = re.compile(rb"^blk\.(\d+)\.")
    kept = [t for t in tensors if not blk.match(t[0]) or int(blk.match(t[0]).group(1)) < keep]
    out = bytearray(struct.pack("<IIQQ", 0x46554747, version, len(kept), len(kvs)))
    for key, t, raw, _ in kvs:
        if key == bc_key:
            out += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<II", 4, keep)
        else:
            out += raw
    new_off, body = 0, bytearray()
    for name, dims, ttype, off in kept:
        n_el = 1
        for d in dims:
            n_el *= d
        chunk = data[base + off:base + off + size[off]]
        if requant and ttype == 8:  # Q8_0 → Q4_0
            chunk, ttype = q8_0_to_q4_0(chunk[:n_el // 32 * 34]), 2
        out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, new_off)
        chunk += b"\0" * (-len(chunk) % alignment)
        body += chunk
        new_off += len(chunk)
    out += b"\0" * (-len(out) % alignment)
    with open(dst, "wb") as f:
        f.write(out + body)
    print(f"{dst}: {len(kept)} of {len(tensors)} tensors, {bc_key} = {keep}, {len(out) + len(body)} bytes")


if __name__ == "__main__":
    main()
