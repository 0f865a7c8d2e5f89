#!/usr/bin/env python3
"""llama.cpp (llama-cpp-python, CPU) as an oracle: logits of a token sequence, and quantization.
Run with the peer venv (scripts/setup-peer.sh).

  llama_eval.py logits MODEL.gguf TOKENS.json OUT.bin [--kv f32|f16] [--n-ctx N]
      TOKENS.json = {"tokens": [...]}; one llama_decode over all tokens (n_batch = n_ubatch = n_ctx),
      writes raw LE float32 [n_tokens, n_vocab]. KV cache F32 by default (no extra rounding), flash
      attention off.
  llama_eval.py quantize SRC.gguf DST.gguf TYPE      TYPE: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K_M Q4_K_S Q5_K_M Q6_K ...
      llama_cpp.llama_model_quantize with default parameters (same as `llama-quantize SRC DST TYPE`).
  llama_eval.py dequant-to-f32 SRC.gguf DST.gguf      every tensor dequantized to F32 by PyPI gguf-py
  llama_eval.py info MODEL.gguf                         prints llama-cpp-python version, model metadata
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys

import numpy as np
import llama_cpp

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1


def load(path: str, n_ctx: int, kv: str = "f32", logits_all: bool = True, verbose: bool = False) -> llama_cpp.Llama:
    t = GGML_TYPE_F32 if kv == "f32" else GGML_TYPE_F16
    try:
        return llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, n_threads=2,
                               n_threads_batch=2, logits_all=logits_all, flash_attn=False, type_k=t, type_v=t,
                               seed=1234, n_gpu_layers=0, verbose=verbose)
    except ValueError:
        if not verbose:  # once more with llama.cpp's log on stderr, so the reason is visible
            load(path, n_ctx, kv, logits_all, verbose=True)
        raise


def logits_of(llm: llama_cpp.Llama, tokens: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32)


def cmd_logits(a) -> None:
    tokens = json.load(open(a.tokens))["tokens"]
    n_ctx = max(a.n_ctx, 64 * ((len(tokens) + 63) // 64))
    llm = load(a.model, n_ctx, a.kv)
    out = logits_of(llm, tokens)
    assert np.isfinite(out).all()
    out.astype("<f4").tofile(a.out)
    print(json.dumps({"n_tokens": len(tokens), "n_vocab": int(out.shape[1])}))


FTYPES = {
    "F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10,
    "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17,
    "Q6_K": 18, "BF16": 32,
}


def cmd_quantize(a) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[a.type.upper()]
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(a.src.encode(), a.dst.encode(), ctypes.byref(params))
    if rc != 0:
        sys.exit(f"llama_model_quantize failed: {rc}")
    print(json.dumps({"dst": a.dst, "type": a.type}))


def cmd_dequant_to_f32(a) -> None:
    """Same file with every tensor dequantized to F32 by PyPI gguf-py (metadata copied, file_type set to
    ALL_F32): llama.cpp's F32 path on it computes with exactly the quantized file's weight values and no
    activation quantization, i.e. an fp32 oracle for a quantized file."""
    import gguf
    from gguf import quants
    r = gguf.GGUFReader(a.src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(a.dst, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        val = f.contents()
        if key == "general.file_type":
            val = 0
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, val, vtype, sub)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]
        data = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        w.add_tensor(t.name, np.ascontiguousarray(data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(json.dumps({"dst": a.dst, "n_tensors": len(r.tensors)}))


def cmd_info(a) -> None:
    llm = load(a.model, 256, logits_all=False)
    print(json.dumps({"llama_cpp_python": llama_cpp.__version__, "n_vocab": llm.n_vocab(),
                      "metadata": llm.metadata}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("logits")
    p.add_argument("model")
    p.add_argument("tokens")
    p.add_argument("out")
    p.add_argument("--kv", default="f32", choices=["f32", "f16"])
    p.add_argument("--n-ctx", type=int, default=512)
    p.set_defaults(fn=cmd_logits)
    p = sub.add_parser("quantize")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("type")
    p.set_defaults(fn=cmd_quantize)
    p = sub.add_parser("dequant-to-f32")
    p.add_argument("src")
    p.add_argument("dst")
    p.set_defaults(fn=cmd_dequant_to_f32)
    p = sub.add_parser("info")
    p.add_argument("model")
    p.set_defaults(fn=cmd_info)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
