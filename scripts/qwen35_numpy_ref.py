#!/usr/bin/env python3
"""Independent float64 numpy implementation of the Qwen3.5 text model, written from
shared/design/qwen35.md (not from transformers), reading checkpoint directories the way an engine has to:
HF multimodal / HF flat / MLX-affine layouts, sharded or not.

Used by scripts/check_fixtures.py to cross-check the committed fixtures (ref_logits.bin from transformers)
with a second implementation: token-by-token recurrent gated delta rule (transformers' prefill uses the
chunked form), own safetensors parser, own MLX dequantizer.

    from qwen35_numpy_ref import load_model, forward
    m = load_model("tests/fixtures/qwen35/mm_tied"); logits = forward(m, tokens)  # float64 [n, vocab]
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

_DT = {"F32": np.float32, "F16": np.float16, "BF16": "bf16", "U32": np.uint32, "I32": np.int32,
       "F64": np.float64, "U8": np.uint8, "I64": np.int64}


def read_safetensors(path: Path) -> dict:
    """Minimal safetensors reader (header length u64 LE, JSON header, raw little-endian data)."""
    buf = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = buf[base + lo:base + hi]
        dt = _DT[info["dtype"]]
        if dt == "bf16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, dtype=np.dtype(dt).newbyteorder("<"))
        out[name] = a.reshape(info["shape"]).copy()
    return out


def dequant_affine(wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, bits: int) -> np.ndarray:
    rows, packed = wq.shape
    per = 32 // bits
    cols = packed * per
    group = cols // scales.shape[1]
    shifts = np.arange(per, dtype=np.uint32) * bits
    q = ((wq[:, :, None] >> shifts) & np.uint32((1 << bits) - 1)).reshape(rows, cols).astype(np.float64)
    return q * np.repeat(scales.astype(np.float64), group, 1) + np.repeat(biases.astype(np.float64), group, 1)


def _strip(name: str):
    if name.startswith(("mtp.", "model.mtp.", "model.visual.", "vision_tower.", "model.vision_tower.")):
        return None
    for p in ("model.language_model.", "language_model.model.", "model."):
        if name.startswith(p):
            return name[len(p):]
    if name.startswith("language_model.lm_head."):
        return name[len("language_model."):]
    if name.startswith("lm_head."):
        return name
    raise ValueError(f"unknown tensor name {name}")


def load_model(model_dir) -> dict:
    d = Path(model_dir)
    cfg = json.loads((d / "config.json").read_text())
    tc = cfg.get("text_config", cfg)
    raw = {}
    for f in sorted(d.glob("*.safetensors")):
        raw.update(read_safetensors(f))
    quant = cfg.get("quantization")
    W = {}
    for k, v in raw.items():
        if k.endswith((".scales", ".biases")):
            continue
        s = _strip(k)
        if s is None:
            continue
        base = k[:-len(".weight")]
        if k.endswith(".weight") and (base + ".scales") in raw:
            ov = quant.get(base) if isinstance(quant.get(base), dict) else {}
            bits = ov.get("bits", quant["bits"])
            v = dequant_affine(v, raw[base + ".scales"], raw[base + ".biases"], bits)
            assert v.shape[1] // raw[base + ".scales"].shape[1] == ov.get("group_size", quant["group_size"])
        W[s] = v.astype(np.float64)
    # MLX layout: conv [C,K,1] and zero-centred norms already stored as 1 + w
    mlx = any(k.endswith("conv1d.weight") and v.shape[-1] == 1 for k, v in W.items())
    n_layers = tc["num_hidden_layers"]
    lt = tc.get("layer_types")
    if lt is None:
        iv = tc.get("full_attention_interval", 4)
        lt = ["linear_attention" if (i + 1) % iv else "full_attention" for i in range(n_layers)]
    rp = tc.get("rope_parameters") or {}
    theta = rp.get("rope_theta", tc.get("rope_theta", 10000.0))
    prf = rp.get("partial_rotary_factor", tc.get("partial_rotary_factor", 0.25))

    def zc(w):  # zero-centred norm weight -> effective multiplier
        return w if mlx else 1.0 + w

    for k in list(W):
        if k.endswith(("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight",
                       "k_norm.weight")) or k == "norm.weight":
            W[k] = zc(W[k])
        if k.endswith("conv1d.weight"):
            W[k] = W[k][:, :, 0] if mlx else W[k][:, 0, :]  # -> [C, K]
    if "lm_head.weight" not in W:
        assert tc.get("tie_word_embeddings", cfg.get("tie_word_embeddings")), "untied but no lm_head"
        W["lm_head.weight"] = W["embed_tokens.weight"]
    return {"W": W, "tc": tc, "layer_types": lt, "theta": float(theta), "prf": float(prf), "mlx": mlx}


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def _attention(m, i, x, pos):
    W, tc = m["W"], m["tc"]
    p = f"layers.{i}.self_attn."
    nh, nkv, hd, eps = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"], tc["rms_norm_eps"]
    T = x.shape[0]
    qg = (x @ W[p + "q_proj.weight"].T).reshape(T, nh, 2 * hd)
    q, gate = qg[:, :, :hd], qg[:, :, hd:].reshape(T, nh * hd)
    k = (x @ W[p + "k_proj.weight"].T).reshape(T, nkv, hd)
    v = (x @ W[p + "v_proj.weight"].T).reshape(T, nkv, hd)
    q, k = _rms(q, W[p + "q_norm.weight"], eps), _rms(k, W[p + "k_norm.weight"], eps)
    rd = int(hd * m["prf"])
    half = rd // 2
    inv = 1.0 / (m["theta"] ** (np.arange(half) * 2.0 / rd))
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(t):
        t = t.copy()
        a, b = t[..., :half].copy(), t[..., half:rd].copy()
        t[..., :half], t[..., half:rd] = a * cos - b * sin, b * cos + a * sin
        return t

    q, k = rope(q), rope(k)
    grp = nh // nkv
    out = np.zeros((T, nh, hd), dtype=x.dtype)
    mask = np.triu(np.full((T, T), -np.inf, dtype=x.dtype), 1)
    for h in range(nh):
        s = q[:, h] @ k[:, h // grp].T / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        out[:, h] = (s / s.sum(-1, keepdims=True)) @ v[:, h // grp]
    o = out.reshape(T, nh * hd) * (1.0 / (1.0 + np.exp(-gate)))
    return o @ W[p + "o_proj.weight"].T


def _gdn(m, i, x):
    """Gated DeltaNet, recurrent rule token by token (qwen35.md §2.6)."""
    W, tc = m["W"], m["tc"]
    p = f"layers.{i}.linear_attn."
    nk, nv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    dk, dv, K = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]
    T = x.shape[0]
    mqkv = x @ W[p + "in_proj_qkv.weight"].T  # [T, 2*nk*dk + nv*dv]
    z = (x @ W[p + "in_proj_z.weight"].T).reshape(T, nv, dv)
    b = x @ W[p + "in_proj_b.weight"].T
    a = x @ W[p + "in_proj_a.weight"].T
    cw = W[p + "conv1d.weight"]  # [C, K]
    padded = np.concatenate([np.zeros((K - 1, mqkv.shape[1]), dtype=x.dtype), mqkv], 0)
    conv = np.stack([(padded[t:t + K] * cw.T).sum(0) for t in range(T)])
    c = _silu(conv)
    kd = nk * dk
    q, k, v = c[:, :kd].reshape(T, nk, dk), c[:, kd:2 * kd].reshape(T, nk, dk), c[:, 2 * kd:].reshape(T, nv, dv)
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(dk)
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    beta = 1.0 / (1.0 + np.exp(-b))
    g = -np.exp(W[p + "A_log"]) * _softplus(a + W[p + "dt_bias"])
    r = nv // nk
    S = np.zeros((nv, dk, dv), dtype=x.dtype)
    o = np.zeros((T, nv, dv), dtype=x.dtype)
    for t in range(T):
        for h in range(nv):
            kh, qh = k[t, h // r], q[t, h // r]
            S[h] *= np.exp(g[t, h])
            u = S[h].T @ kh
            S[h] += np.outer(kh, beta[t, h] * (v[t, h] - u))
            o[t, h] = S[h].T @ qh
    y = _rms(o, W[p + "norm.weight"], tc["rms_norm_eps"]) * _silu(z)
    return y.reshape(T, nv * dv) @ W[p + "out_proj.weight"].T


def forward(m, tokens, dtype=np.float64) -> np.ndarray:
    """Logits [n_tokens, vocab]; dtype=np.float32 gives an fp32 run of the same (recurrent) algorithm."""
    if dtype != np.float64:
        m = dict(m, W={k: v.astype(dtype) for k, v in m["W"].items()})
    W, tc, eps = m["W"], m["tc"], m["tc"]["rms_norm_eps"]
    x = W["embed_tokens.weight"][np.asarray(tokens)]
    pos = np.arange(len(tokens), dtype=np.float64).astype(dtype)
    for i, t in enumerate(m["layer_types"]):
        h = _rms(x, W[f"layers.{i}.input_layernorm.weight"], eps)
        x = x + (_gdn(m, i, h) if t == "linear_attention" else _attention(m, i, h, pos))
        h = _rms(x, W[f"layers.{i}.post_attention_layernorm.weight"], eps)
        mp = f"layers.{i}.mlp."
        x = x + (_silu(h @ W[mp + "gate_proj.weight"].T) * (h @ W[mp + "up_proj.weight"].T)) @ W[mp + "down_proj.weight"].T
    return _rms(x, W["norm.weight"], eps) @ W["lm_head.weight"].T
