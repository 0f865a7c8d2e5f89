#!/usr/bin/env python3
"""A random-weight HF checkpoint of the Qwen3.5-2B shape, for llama.cpp's convert_hf_to_gguf.py.

Written with numpy only (no torch / transformers / safetensors needed): config.json shaped like the real
Qwen/Qwen3.5-2B one (Qwen3_5ForConditionalGeneration, text_config), one model.safetensors with the LM tensors
under `model.language_model.*` (names, shapes and dtypes of ../shared/design/qwen35.md §3a; no MTP block, no
vision tower: convert with --no-mtp), and a tokenizer: tests/fixtures/tokenizer/qwen35_like (a small
byte-level BPE with the Qwen3.5 pre-tokenizer regex, ids 0..3006) — the converter pads it to vocab_size with
[PADn] tokens, so the embedding / LM head keep the real 248320 rows. The converter cannot identify that
tokenizer by its hash; scripts/peer_llama_cpp/convert_hf.py --pre qwen35 names the pre-tokenizer.

Weights: linear layers N(0, 0.02) (the HF init std), norms 0 (zero-centred; plain 1 for linear_attn.norm),
A_log = log U(1, 16), dt_bias 1, conv1d N(0, 0.2): values only matter for speed in that they are finite.

Usage: make_q35_hf.py OUT_DIR [--layers N] [--hidden H --intermediate I] [--seed S]
       (env LAYERS also sets --layers; the defaults are the 2B shape: 24 layers, hidden 2048, FFN 6144)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "tests" / "fixtures" / "tokenizer" / "qwen35_like" / "tokenizer.json"


def text_config(layers: int, hidden: int, inter: int) -> dict:
    # Qwen3.5-2B (qwen35.md §1.2-1.3); eos = <|im_end|> of the qwen35_like tokenizer
    return {
        "model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": hidden, "intermediate_size": inter,
        "num_hidden_layers": layers, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
        "tie_word_embeddings": True, "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 16, "full_attention_interval": 4,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        "mamba_ssm_dtype": "float32", "mtp_num_hidden_layers": 0, "mtp_use_dedicated_embeddings": False,
        "initializer_range": 0.02, "use_cache": True, "dtype": "bfloat16", "bos_token_id": None,
        "eos_token_id": 3002, "pad_token_id": 3000,
    }


def tensor_specs(tc: dict):
    """(name, shape, kind) in file order; kind: w (N(0,.02) bf16), z (zeros bf16), one32, alog32, dt, conv"""
    H, I, V = tc["hidden_size"], tc["intermediate_size"], tc["vocab_size"]
    nh, nkv, hd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    nk, nv, dk, dv = (tc["linear_num_key_heads"], tc["linear_num_value_heads"], tc["linear_key_head_dim"],
                      tc["linear_value_head_dim"])
    conv = 2 * nk * dk + nv * dv
    p = "model.language_model."
    yield p + "embed_tokens.weight", (V, H), "w"
    for i in range(tc["num_hidden_layers"]):  # config has no layer_types: full attention every 4th layer
        lt = "full_attention" if (i + 1) % tc["full_attention_interval"] == 0 else "linear_attention"
        b = f"{p}layers.{i}."
        yield b + "input_layernorm.weight", (H,), "z"
        yield b + "post_attention_layernorm.weight", (H,), "z"
        yield b + "mlp.gate_proj.weight", (I, H), "w"
        yield b + "mlp.up_proj.weight", (I, H), "w"
        yield b + "mlp.down_proj.weight", (H, I), "w"
        if lt == "linear_attention":
            a = b + "linear_attn."
            yield a + "in_proj_qkv.weight", (conv, H), "w"
            yield a + "in_proj_z.weight", (nv * dv, H), "w"
            yield a + "in_proj_b.weight", (nv, H), "w"
            yield a + "in_proj_a.weight", (nv, H), "w"
            yield a + "conv1d.weight", (conv, 1, tc["linear_conv_kernel_dim"]), "conv"
            yield a + "dt_bias", (nv,), "dt"
            yield a + "A_log", (nv,), "alog32"
            yield a + "norm.weight", (dv,), "one32"
            yield a + "out_proj.weight", (H, nv * dv), "w"
        else:
            a = b + "self_attn."
            yield a + "q_proj.weight", (2 * nh * hd, H), "w"
            yield a + "k_proj.weight", (nkv * hd, H), "w"
            yield a + "v_proj.weight", (nkv * hd, H), "w"
            yield a + "o_proj.weight", (H, nh * hd), "w"
            yield a + "q_norm.weight", (hd,), "z"
            yield a + "k_norm.weight", (hd,), "z"
    yield p + "norm.weight", (H,), "z"


def to_bf16(x: np.ndarray) -> np.ndarray:
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even


def make(kind: str, shape, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(shape))
    if kind == "w" or kind == "conv":
        std = 0.02 if kind == "w" else 0.2
        out = np.empty(n, np.uint16)
        step = 1 << 24
        for s in range(0, n, step):  # in slices: the 248320 x 2048 embedding is 0.5 G values
            m = min(step, n - s)
            out[s:s + m] = to_bf16(rng.standard_normal(m, dtype=np.float32) * np.float32(std))
        return out.reshape(shape)
    if kind == "z":
        return np.zeros(shape, np.uint16)
    if kind == "dt":
        return to_bf16(np.ones(shape, np.float32))
    if kind == "one32":
        return np.ones(shape, np.float32)
    if kind == "alog32":
        return np.log(rng.uniform(1.0, 16.0, size=shape)).astype(np.float32)
    raise ValueError(kind)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=int(os.environ.get("LAYERS", "24")))
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=6144)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    t0 = time.time()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tc = text_config(a.layers, a.hidden, a.intermediate)
    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": tc,
           "tie_word_embeddings": True, "dtype": "bfloat16", "image_token_id": 248056, "video_token_id": 248057,
           "vision_start_token_id": 248053, "vision_end_token_id": 248054}
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    shutil.copyfile(TOKENIZER, out / "tokenizer.json")
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
         "model_max_length": 262144}, indent=1) + "\n")

    specs = list(tensor_specs(tc))
    header, off = {}, 0
    for name, shape, kind in specs:
        dt, size = ("F32", 4) if kind.endswith("32") else ("BF16", 2)
        nbytes = int(np.prod(shape)) * size
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    rng = np.random.default_rng(a.seed)
    tmp = out / "model.safetensors.tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, shape, kind in specs:
            arr = np.ascontiguousarray(make(kind, shape, rng))
            assert arr.nbytes == header[name]["data_offsets"][1] - header[name]["data_offsets"][0], name
            f.write(arr.tobytes())
    tmp.rename(out / "model.safetensors")
    n_params = sum(int(np.prod(s)) for _, s, _ in specs)
    print(json.dumps({"out": str(out), "layers": a.layers, "tensors": len(specs), "params": n_params,
                      "bytes": off, "seconds": round(time.time() - t0, 1)}))


if __name__ == "__main__":
    main()
