#!/usr/bin/env python3
"""Generate small random-init Qwen3.5 checkpoints and reference logits (the oracle).

Usage:  /opt/venv/bin/python scripts/make_fixtures.py [--out tests/fixtures/qwen35] [--only CASE ...]

Cases (one directory each; see each meta.json for the exact meaning of every file):
  mm_tied           HF multimodal layout (Qwen3_5ForConditionalGeneration, `model.language_model.*`,
                    tiny real vision tower under `model.visual.*`, one MTP layer under `mtp.*`), tied
                    embeddings, nv == nk, default layer pattern (no layer_types), rope_parameters dict.
  flat_untied_gqa3  HF text-only layout (Qwen3_5ForCausalLM, `model.*` + `lm_head.weight`), untied,
                    nv = 3 nk, dk != dv, explicit non-default layer_types, legacy top-level rope fields,
                    two safetensors shards + model.safetensors.index.json.
  q4_affine         flat_untied_gqa3's weights written as an MLX affine 4-bit checkpoint by hand
                    (mx.quantize, group 64) with one 8-bit per-module override; reference = transformers
                    fp32 on the dequantized weights.
  mlx_lm_convert    the real `mlx_lm.convert(..., quantize=True, q_group_size=64, q_bits=4)` output for
                    mm_tied; ref_logits.bin = transformers fp32 on the dequantized weights,
                    mlx_logits.bin = mlx-lm's own forward (weights upcast to fp32, CPU).

Reference logits: transformers fp32, attn_implementation="eager", torch fallbacks for the gated delta rule
and the causal conv (flash-linear-attention / causal-conv1d / kernels are not installed; checked).
Everything is deterministic (fixed seeds, CPU).
"""
from __future__ import annotations

import argparse
import copy
import inspect
import json
import math
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("USE_HUB_KERNELS", "0")  # never pull kernels from the Hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import safetensors  # noqa: E402
from safetensors.torch import save_file, load_file  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    Qwen3_5Config,
    Qwen3_5TextConfig,
    Qwen3_5ForCausalLM,
    Qwen3_5ForConditionalGeneration,
)
import transformers.models.qwen3_5.modeling_qwen3_5 as hf_qwen35  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen35_numpy_ref as qnp  # noqa: E402

transformers.logging.set_verbosity_error()

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "qwen35"
VOCAB = 512
MARGIN_MIN = 0.02  # every position's reference top-1/top-2 logit gap is at least this (prompt is repaired)
NOISE_MAX = 2e-5  # every position's fp32 round-off (vs float64) is at most this (prompt is repaired)
REL_L2_TOL = 1e-4
KL_TOL = 1e-3

ZERO_CENTRED_SUFFIXES = (
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "q_norm.weight",
    "k_norm.weight",
)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
def versions() -> dict:
    import mlx.core as mx
    import mlx_lm

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
        "mlx": mx.__version__,
        "mlx_lm": getattr(mlx_lm, "__version__", "?"),
    }


def transformers_kernel_paths() -> dict:
    """Which implementation transformers dispatches to for the GDN / conv ops (must be torch fallbacks)."""
    import importlib.util

    out = {"importable": {m: importlib.util.find_spec(m) is not None for m in ("fla", "causal_conv1d", "kernels")}}
    for name in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
                 "causal_conv1d_update"):
        nl = inspect.getclosurevars(getattr(hf_qwen35, name)).nonlocals
        impl = nl.get("implementation")
        out[name] = {
            "implementation": f"{impl.__module__}.{impl.__qualname__}",
            "is_torch_fallback": not nl.get("is_new_implementation", True),
        }
        if not out[name]["is_torch_fallback"]:
            sys.exit(f"transformers uses a non-torch kernel for {name}; uninstall fla/causal-conv1d/kernels")
    out["attn_implementation"] = "eager"
    return out


def is_zero_centred_norm(name: str) -> bool:
    if "linear_attn.norm" in name:
        return False
    if name.endswith(ZERO_CENTRED_SUFFIXES):
        return True
    # final norm and the MTP norms
    return name.endswith(("model.norm.weight", "language_model.norm.weight", "mtp.norm.weight",
                          "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight"))


def random_value(name: str, shape: tuple, g: torch.Generator, *, embed_std: float, lm_head_std: float):
    """Random value for one parameter so that activations stay O(1) (verification.md)."""
    randn = lambda: torch.randn(shape, generator=g, dtype=torch.float32)  # noqa: E731
    unif = lambda lo, hi: lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float32)  # noqa: E731
    if "visual" in name:  # vision tower: never used by the text path, just make it non-trivial
        if len(shape) == 1:
            return (1.0 if "norm" in name and name.endswith("weight") else 0.0) + 0.1 * randn()
        return randn() / math.sqrt(float(np.prod(shape[1:])))
    if name.endswith("linear_attn.A_log"):
        return unif(0.0, 2.5)
    if name.endswith("linear_attn.dt_bias"):
        return unif(-4.0, 0.0)
    if name.endswith("linear_attn.norm.weight"):  # plain (not zero-centred) gated RMSNorm weight
        return 1.0 + 0.2 * randn()
    if name.endswith("conv1d.weight"):  # depthwise, fan_in = kernel size
        return randn() / math.sqrt(shape[-1])
    if is_zero_centred_norm(name):
        return 0.2 * randn()
    if name.endswith("embed_tokens.weight"):
        return embed_std * randn()
    if name.endswith("lm_head.weight"):
        return lm_head_std * randn()
    if name.endswith(".weight") and len(shape) == 2:
        return randn() / math.sqrt(shape[1])
    raise ValueError(f"no randomization rule for {name} {shape}")


def keep_fp32(name: str) -> bool:
    """Real Qwen3.5 HF checkpoints store exactly these in fp32, everything else in bf16."""
    return name.endswith("linear_attn.A_log") or name.endswith("linear_attn.norm.weight")


def randomize_model(model: torch.nn.Module, seed: int, **kw) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda x: x[0]):
            p.copy_(random_value(name, tuple(p.shape), g, **kw))


def mtp_tensors(tc: dict, seed: int) -> dict:
    """One MTP layer with the real checkpoint's names/shapes (qwen35.md §3a); transformers ignores `mtp.*`."""
    H, I = tc["hidden_size"], tc["intermediate_size"]
    nh, nkv, hd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    shapes = {
        "mtp.fc.weight": (H, 2 * H),
        "mtp.pre_fc_norm_embedding.weight": (H,),
        "mtp.pre_fc_norm_hidden.weight": (H,),
        "mtp.norm.weight": (H,),
        "mtp.layers.0.input_layernorm.weight": (H,),
        "mtp.layers.0.post_attention_layernorm.weight": (H,),
        "mtp.layers.0.self_attn.q_proj.weight": (2 * nh * hd, H),
        "mtp.layers.0.self_attn.k_proj.weight": (nkv * hd, H),
        "mtp.layers.0.self_attn.v_proj.weight": (nkv * hd, H),
        "mtp.layers.0.self_attn.o_proj.weight": (H, nh * hd),
        "mtp.layers.0.self_attn.q_norm.weight": (hd,),
        "mtp.layers.0.self_attn.k_norm.weight": (hd,),
        "mtp.layers.0.mlp.gate_proj.weight": (I, H),
        "mtp.layers.0.mlp.up_proj.weight": (I, H),
        "mtp.layers.0.mlp.down_proj.weight": (H, I),
    }
    g = torch.Generator().manual_seed(seed)
    return {n: random_value(n, s, g, embed_std=1.0, lm_head_std=1.0).to(torch.bfloat16) for n, s in shapes.items()}


def saved_tensors(model: torch.nn.Module) -> dict:
    """State dict as a real checkpoint stores it: bf16, except A_log and linear_attn.norm.weight in fp32.
    Tied lm_head is not stored (as save_pretrained does)."""
    out = {}
    for name, p in model.named_parameters():  # named_parameters dedups the tied lm_head
        t = p.detach().clone()
        out[name] = t.float().contiguous() if keep_fp32(name) else t.to(torch.bfloat16).contiguous()
    return out


def write_json(path: Path, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def write_shards(case_dir: Path, tensors: dict, n_shards: int, metadata: dict) -> list:
    names = sorted(tensors)
    if n_shards == 1:
        save_file(tensors, str(case_dir / "model.safetensors"), metadata=metadata)
        return ["model.safetensors"]
    total = sum(tensors[n].numel() * tensors[n].element_size() for n in names)
    files, weight_map, acc, part = [], {}, 0, 0
    groups = [[] for _ in range(n_shards)]
    for n in names:  # contiguous split by bytes (like save_pretrained's max_shard_size)
        groups[min(part, n_shards - 1)].append(n)
        acc += tensors[n].numel() * tensors[n].element_size()
        if acc >= total * (part + 1) / n_shards:
            part += 1
    for i, grp in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file({n: tensors[n] for n in grp}, str(case_dir / fname), metadata=metadata)
        files.append(fname)
        weight_map.update({n: fname for n in grp})
    n_params = sum(tensors[n].numel() for n in names)
    write_json(case_dir / "model.safetensors.index.json",
               {"metadata": {"total_parameters": n_params, "total_size": total}, "weight_map": weight_map})
    return files + ["model.safetensors.index.json"]


def load_dir_tensors(case_dir: Path) -> dict:
    out = {}
    for f in sorted(case_dir.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


@torch.no_grad()
def hf_logits(model, tokens) -> np.ndarray:
    ids = torch.tensor([tokens], dtype=torch.long)
    return model(input_ids=ids, use_cache=False).logits[0].float().numpy().astype(np.float32)


def _cache_of(out):
    c = getattr(out, "cache", None)
    return c if c is not None else getattr(out, "past_key_values")


@torch.no_grad()
def hf_logits_split(model, tokens, K: int, step: int) -> np.ndarray:
    """Prefill tokens[:K] in one batch, then feed the rest `step` tokens at a time through the cache.
    step == 1 uses transformers' recurrent GDN path; step > 1 its chunked path with an initial state."""
    ids = torch.tensor([tokens], dtype=torch.long)
    out = model(input_ids=ids[:, :K], use_cache=True)
    rows, cache = [out.logits[0]], _cache_of(out)
    for s in range(K, len(tokens), step):
        out = model(input_ids=ids[:, s:s + step], cache=cache, use_cache=True)
        cache = _cache_of(out)
        rows.append(out.logits[0])
    return torch.cat(rows, 0).float().numpy()


def rel_l2_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return np.linalg.norm(a64 - b64, axis=-1) / np.linalg.norm(b64, axis=-1)


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def kl_rows(p_logits: np.ndarray, q_logits: np.ndarray) -> np.ndarray:
    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return (np.exp(lp) * (lp - lq)).sum(-1)


def margins(logits: np.ndarray) -> np.ndarray:
    s = np.sort(logits.astype(np.float64), axis=-1)
    return s[:, -1] - s[:, -2]


def logit_stats(logits: np.ndarray) -> dict:
    am = logits.argmax(-1)
    return {
        "mean_row_std": float(logits.std(-1).mean()),
        "min_row_std": float(logits.std(-1).min()),
        "distinct_argmax": int(len(np.unique(am))),
        "min_top1_top2_margin": float(margins(logits).min()),
        "max_softmax_prob_mean": float(np.exp(log_softmax(logits)).max(-1).mean()),
        "finite": bool(np.isfinite(logits).all()),
    }


def repaired_prompt(n: int, seed: int, forward_fns, np_model=None) -> tuple:
    """Random prompt, then any position that is ill-posed for a 1e-4 comparison gets its token re-drawn
    (left to right; a token only influences its own and later positions):
      * top-1/top-2 logit gap below MARGIN_MIN under any forward in forward_fns ('argmax equal' well posed);
      * fp32 round-off above NOISE_MAX: rel. L2 of each forward (all fp32) and of the independent numpy fp32
        run against the numpy float64 run of the same checkpoint (qwen35_numpy_ref). Random models have
        occasional positions where the gated RMSNorm input cancels and fp32 noise reaches ~1e-4; screening
        them keeps the 1e-4 test tolerance >= 4x above honest fp32 round-off.
    Returns (tokens, [outputs of forward_fns], n_redraws, noise_report)."""
    rng = np.random.default_rng(seed)
    tokens = [int(t) for t in rng.integers(0, VOCAB, size=n)]
    redraws = 0
    while True:
        outs = [f(tokens) for f in forward_fns]
        bad = np.min(np.stack([margins(o) for o in outs]), axis=0) < MARGIN_MIN
        noise = None
        if np_model is not None:
            ref64 = qnp.forward(np_model, tokens)
            runs = outs + [qnp.forward(np_model, tokens, np.float32)]
            noise = np.max(np.stack([rel_l2_rows(o, ref64) for o in runs]), axis=0)
            bad |= noise > NOISE_MAX
        idx = np.nonzero(bad)[0]
        if len(idx) == 0:
            rep = None if noise is None else {
                "fp32_runs_vs_numpy_fp64_max_rel_l2": [float(rel_l2_rows(o, ref64).max()) for o in runs],
                "runs": ["transformers/mlx fp32 forwards in order of the tolerance files", "numpy fp32"],
                "noise_max_allowed": NOISE_MAX}
            return tokens, outs, redraws, rep
        tokens[int(idx[0])] = int(rng.integers(0, VOCAB))
        redraws += 1
        if redraws > 2000:
            raise RuntimeError("could not find a well-conditioned prompt")


def decode_points(n: int) -> list:
    return sorted({k for k in (1, 2, 63, 64, 65, 128, n - 1) if 1 <= k < n})


def split_checks(model, tokens, ref: np.ndarray) -> dict:
    """transformers itself: prefill(all) vs prefill(K)+decode (recurrent path) and prefill(K)+chunks."""
    res = {}
    for K in decode_points(len(tokens)):
        dec = hf_logits_split(model, tokens, K, 1)
        res[f"decode_from_{K}"] = {"max_rel_l2": float(rel_l2_rows(dec, ref).max()),
                                   "argmax_equal": bool((dec.argmax(-1) == ref.argmax(-1)).all())}
    for K, step in ((64, 37), (1, 70)):
        if K < len(tokens):
            ch = hf_logits_split(model, tokens, K, step)
            res[f"prefill_{K}_then_chunks_of_{step}"] = {"max_rel_l2": float(rel_l2_rows(ch, ref).max()),
                                                        "argmax_equal": bool((ch.argmax(-1) == ref.argmax(-1)).all())}
    worst = max(v["max_rel_l2"] for v in res.values())
    if worst > 5e-5 or not all(v["argmax_equal"] for v in res.values()):
        raise RuntimeError(f"transformers prefill vs decode disagree: {res}")
    return res


@torch.no_grad()
def bf16_sensitivity(cls, case_dir: Path, tokens, ref: np.ndarray) -> dict:
    """Informational: the same transformers model run in bf16 vs the fp32 reference (how fragile the random
    model is under bf16 activations; do not judge bf16 paths on these fixtures with tight bars)."""
    model = cls.from_pretrained(str(case_dir), dtype=torch.bfloat16, attn_implementation="eager").eval()
    lb = model(input_ids=torch.tensor([tokens]), use_cache=False).logits[0].float().numpy()
    e = rel_l2_rows(lb, ref)
    return {"mean_rel_l2": float(e.mean()), "max_rel_l2": float(e.max()),
            "mean_kl": float(kl_rows(ref, lb).mean()),
            "argmax_agreement": float((lb.argmax(-1) == ref.argmax(-1)).mean())}


def file_sizes(case_dir: Path) -> dict:
    return {p.name: p.stat().st_size for p in sorted(case_dir.iterdir()) if p.is_file()}


def hf_load(cls, case_dir: Path):
    model, info = cls.from_pretrained(str(case_dir), dtype=torch.float32, attn_implementation="eager",
                                      output_loading_info=True)
    if info["missing_keys"] or info["mismatched_keys"] or info["error_msgs"]:
        raise RuntimeError(f"transformers failed to load {case_dir}: {info}")
    model.eval()
    return model, {k: sorted(v) if isinstance(v, set) else v for k, v in info.items()}


def check_loaded_equal(model, saved: dict, rename) -> int:
    """Every saved LM tensor was loaded bit-exactly (upcast to fp32) into the transformers model."""
    sd = model.state_dict()
    n = 0
    for name, t in saved.items():
        hf = rename(name)
        if hf is None:
            continue
        if not torch.equal(sd[hf], t.float()):
            raise RuntimeError(f"loaded value differs for {name} -> {hf}")
        n += 1
    return n


# ----------------------------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------------------------
def mm_text_config() -> dict:
    return dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=32, linear_value_head_dim=32,
        linear_conv_kernel_dim=4, rms_norm_eps=1e-6, hidden_act="silu", max_position_embeddings=4096,
        tie_word_embeddings=True, eos_token_id=VOCAB - 1,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    )


MM_VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, in_channels=3, patch_size=4,
                 temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=16)

FLAT_LAYER_TYPES = ["linear_attention", "full_attention", "linear_attention", "linear_attention",
                    "full_attention", "linear_attention"]


def flat_text_config() -> dict:
    return dict(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=128, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=1, head_dim=64,
        linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=32, linear_value_head_dim=16,
        linear_conv_kernel_dim=4, rms_norm_eps=1e-6, hidden_act="silu", max_position_embeddings=4096,
        tie_word_embeddings=False, layer_types=list(FLAT_LAYER_TYPES),
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5},
    )


def common_meta(name: str, seed: int, tokens, vocab: int) -> dict:
    n = len(tokens)
    return {
        "case": name,
        "seed": seed,
        "n_tokens": n,
        "vocab_size": vocab,
        "decode_from": decode_points(n),
        "versions": versions(),
        "transformers_paths": transformers_kernel_paths(),
        "generator": "scripts/make_fixtures.py",
        "prompt_margin_min": MARGIN_MIN,
    }


# ----------------------------------------------------------------------------------------------
# case 1: mm_tied
# ----------------------------------------------------------------------------------------------
def make_mm_tied(out: Path, seed: int = 1001) -> dict:
    case_dir = out / "mm_tied"
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    tc = mm_text_config()
    cfg = Qwen3_5Config(text_config=dict(tc), vision_config=dict(MM_VISION), tie_word_embeddings=True)
    cfg.architectures = ["Qwen3_5ForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(cfg).float()
    H = tc["hidden_size"]
    randomize_model(model, seed, embed_std=2.5 / math.sqrt(H), lm_head_std=0.0)
    tensors = saved_tensors(model)
    assert not any(k.startswith("lm_head") for k in tensors)
    tensors.update(mtp_tensors(tc, seed + 1))
    write_shards(case_dir, tensors, 1, {"format": "pt"})

    # config.json as save_pretrained writes it, then shaped like the real Qwen3.5 checkpoints:
    # dtype bfloat16, no layer_types (default interval pattern), the real checkpoints' extra keys.
    cfg.dtype = torch.bfloat16
    cfg.text_config.dtype = torch.bfloat16
    cfg.save_pretrained(str(case_dir))
    cj = json.load(open(case_dir / "config.json"))
    t = cj["text_config"]
    t.pop("layer_types")
    t.update({"full_attention_interval": 4, "attn_output_gate": True, "mamba_ssm_dtype": "float32",
              "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False})
    write_json(case_dir / "config.json", cj)

    model_mm, info_mm = hf_load(Qwen3_5ForConditionalGeneration, case_dir)
    if model_mm.config.text_config.layer_types != ["linear_attention"] * 3 + ["full_attention"] + \
            ["linear_attention"] * 3 + ["full_attention"]:
        raise RuntimeError("unexpected layer pattern")
    n_eq = check_loaded_equal(model_mm, tensors, lambda k: None if k.startswith("mtp.") else k)
    model_lm, info_lm = hf_load(Qwen3_5ForCausalLM, case_dir)
    n_eq_lm = check_loaded_equal(model_lm, tensors, lambda k: k.replace("model.language_model.", "model.")
                                 if k.startswith("model.language_model.") else None)

    tokens, (ref,), redraws, noise = repaired_prompt(160, seed + 2, [lambda tk: hf_logits(model_mm, tk)],
                                                     qnp.load_model(case_dir))
    ref_lm = hf_logits(model_lm, tokens)
    write_json(case_dir / "prompt.json", {"tokens": tokens})
    ref.astype("<f4").tofile(case_dir / "ref_logits.bin")

    meta = common_meta("mm_tied", seed, tokens, VOCAB)
    meta.update({
        "format": "hf",
        "description": "Multimodal-layout Qwen3.5 checkpoint (Qwen3_5ForConditionalGeneration), random init.",
        "covers": [
            "config.json with model_type qwen3_5 + text_config (qwen3_5_text) + tiny vision_config",
            "tensor prefix model.language_model.*; model.visual.* (tiny real vision tower) and mtp.* (one MTP "
            "layer, qwen35.md §3a names/shapes) must be skipped",
            "tied embeddings (no lm_head.weight in the file)",
            "nv == nk (2 == 2), dk == dv == 32",
            "default layer pattern: no layer_types, full_attention_interval 4 -> full attention at layers 3 and 7",
            "rope_parameters dict: theta 1e7, partial_rotary_factor 0.25 (16 of 64 head dims rotate)",
            "GQA 4 q heads / 2 kv heads, head_dim 64, gated q_proj",
            "bf16 weights, A_log and linear_attn.norm.weight fp32",
            "prompt of 160 tokens (crosses the 64- and 128-token chunk boundaries)",
        ],
        "dims": {"text_config": tc, "vision_config": MM_VISION},
        "files": {
            "config.json": "HF config (save_pretrained output; layer_types removed, real-checkpoint extra keys added)",
            "model.safetensors": "weights: model.language_model.* (LM), model.visual.* (vision, skip), mtp.* (MTP, skip)",
            "prompt.json": "{\"tokens\": [...]} input token ids",
            "ref_logits.bin": "raw little-endian float32 [n_tokens, vocab_size]: transformers "
                              "Qwen3_5ForConditionalGeneration fp32 eager, one prefill over all tokens",
            "meta.json": "this file",
        },
        "tolerance": {"ref_logits.bin": {"metric": "rel_l2", "max": REL_L2_TOL, "argmax_equal": True}},
        "python_checks": {
            "loaded_tensors_bit_exact": {"ConditionalGeneration": n_eq, "CausalLM": n_eq_lm},
            "load_info": {"ConditionalGeneration": info_mm, "CausalLM": info_lm},
            "CausalLM_vs_ConditionalGeneration_max_rel_l2": float(rel_l2_rows(ref_lm, ref).max()),
            "transformers_bf16_vs_fp32_info": bf16_sensitivity(Qwen3_5ForConditionalGeneration, case_dir, tokens, ref),
            "transformers_split_runs": split_checks(model_mm, tokens, ref),
            "prompt_tokens_redrawn": redraws,
            "fp32_noise_screen": noise,
            "logit_stats": logit_stats(ref),
        },
    })
    write_json(case_dir / "meta.json", meta)
    meta["sizes"] = file_sizes(case_dir)
    return meta


# ----------------------------------------------------------------------------------------------
# case 2: flat_untied_gqa3
# ----------------------------------------------------------------------------------------------
def make_flat(out: Path, seed: int = 2002) -> dict:
    case_dir = out / "flat_untied_gqa3"
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    tc = flat_text_config()
    cfg = Qwen3_5TextConfig(**tc)
    cfg.architectures = ["Qwen3_5ForCausalLM"]
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(cfg).float()
    H = tc["hidden_size"]
    randomize_model(model, seed, embed_std=1.0, lm_head_std=2.5 / math.sqrt(H))
    tensors = saved_tensors(model)
    assert "lm_head.weight" in tensors
    write_shards(case_dir, tensors, 2, {"format": "pt"})

    cfg.dtype = torch.bfloat16
    cfg.save_pretrained(str(case_dir))
    cj = json.load(open(case_dir / "config.json"))
    rp = cj.pop("rope_parameters")  # legacy form: top-level rope fields instead of the dict
    cj["rope_theta"] = rp["rope_theta"]
    cj["partial_rotary_factor"] = rp["partial_rotary_factor"]
    write_json(case_dir / "config.json", cj)

    model, info = hf_load(Qwen3_5ForCausalLM, case_dir)
    if model.config.rope_parameters.get("rope_theta") != rp["rope_theta"] or \
            model.config.rope_parameters.get("partial_rotary_factor") != rp["partial_rotary_factor"] or \
            model.config.layer_types != FLAT_LAYER_TYPES:
        raise RuntimeError(f"transformers did not pick up the legacy rope fields / layer_types: "
                           f"{model.config.rope_parameters}")
    n_eq = check_loaded_equal(model, tensors, lambda k: k)

    tokens, (ref,), redraws, noise = repaired_prompt(200, seed + 2, [lambda tk: hf_logits(model, tk)],
                                                     qnp.load_model(case_dir))
    write_json(case_dir / "prompt.json", {"tokens": tokens})
    ref.astype("<f4").tofile(case_dir / "ref_logits.bin")

    meta = common_meta("flat_untied_gqa3", seed, tokens, VOCAB)
    meta.update({
        "format": "hf",
        "description": "Text-only Qwen3.5 checkpoint (Qwen3_5ForCausalLM, model_type qwen3_5_text), random init.",
        "covers": [
            "flat config.json (no text_config), model_type qwen3_5_text",
            "tensor prefix model.* and a separate lm_head.weight (untied)",
            "linear_num_value_heads = 3 x linear_num_key_heads (6 / 2): value head h uses key head h // 3",
            "linear_key_head_dim 32 != linear_value_head_dim 16",
            "explicit non-default layer_types [L, F, L, L, F, L]",
            "legacy top-level rope_theta (1e6) / partial_rotary_factor (0.5 -> 32 of 64 dims rotate), "
            "no rope_parameters dict (transformers 5.24 accepts it)",
            "MQA-like GQA: 4 q heads / 1 kv head",
            "two shards + model.safetensors.index.json",
            "prompt of 200 tokens (crosses 64/128/192)",
        ],
        "dims": tc,
        "files": {
            "config.json": "HF config (save_pretrained output, rope_parameters rewritten as top-level fields)",
            "model-00001-of-00002.safetensors": "weights shard 1 (see index)",
            "model-00002-of-00002.safetensors": "weights shard 2 (see index)",
            "model.safetensors.index.json": "HF shard index: weight_map tensor name -> file",
            "prompt.json": "{\"tokens\": [...]} input token ids",
            "ref_logits.bin": "raw little-endian float32 [n_tokens, vocab_size]: transformers Qwen3_5ForCausalLM "
                              "fp32 eager, one prefill over all tokens",
            "meta.json": "this file",
        },
        "tolerance": {"ref_logits.bin": {"metric": "rel_l2", "max": REL_L2_TOL, "argmax_equal": True}},
        "python_checks": {
            "loaded_tensors_bit_exact": n_eq,
            "load_info": info,
            "transformers_config_rope_parameters": model.config.rope_parameters,
            "transformers_bf16_vs_fp32_info": bf16_sensitivity(Qwen3_5ForCausalLM, case_dir, tokens, ref),
            "transformers_split_runs": split_checks(model, tokens, ref),
            "prompt_tokens_redrawn": redraws,
            "fp32_noise_screen": noise,
            "logit_stats": logit_stats(ref),
        },
    })
    write_json(case_dir / "meta.json", meta)
    meta["sizes"] = file_sizes(case_dir)
    return meta


# ----------------------------------------------------------------------------------------------
# MLX helpers (layout of qwen35.md §3b)
# ----------------------------------------------------------------------------------------------
MLX_NORM_SUFFIXES = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
                     ".q_norm.weight", ".k_norm.weight")


def dequant_np(wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, group: int, bits: int) -> np.ndarray:
    """Independent numpy dequantization of the MLX affine format (little-endian bit stream per row)."""
    out_dim, packed = wq.shape
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    q = ((wq[:, :, None] >> shifts[None, None, :]) & np.uint32((1 << bits) - 1)).reshape(out_dim, packed * per)
    s = np.repeat(scales.astype(np.float64), group, axis=1)
    b = np.repeat(biases.astype(np.float64), group, axis=1)
    return (s * q.astype(np.float64) + b).astype(np.float32)


def mx_to_np_f32(a) -> np.ndarray:
    import mlx.core as mx
    return np.array(a.astype(mx.float32)) if a.dtype != mx.uint32 else np.array(a)


def mlx_to_hf_state(weights: dict, quant: dict) -> tuple:
    """MLX-layout tensors -> HF Qwen3_5ForCausalLM fp32 state dict with the exact values stored
    (dequantized in float64 -> fp32, norms -1, conv [C,K,1] -> [C,1,K])."""
    import mlx.core as mx
    hf, n_deq = {}, 0
    bases = {k[:-len(".scales")] for k in weights if k.endswith(".scales")}
    for k, v in weights.items():
        if k.endswith((".scales", ".biases")):
            continue
        name = k
        if name.startswith("language_model."):
            name = name[len("language_model."):]
        base = k[:-len(".weight")] if k.endswith(".weight") else None
        if base in bases:
            ov = quant.get(base, {}) if isinstance(quant.get(base), dict) else {}
            group, bits = ov.get("group_size", quant["group_size"]), ov.get("bits", quant["bits"])
            w = dequant_np(np.array(v), mx_to_np_f32(weights[base + ".scales"]),
                           mx_to_np_f32(weights[base + ".biases"]), group, bits)
            # cross-check against mlx's own dequantize (fp32 scales/biases)
            ref = np.array(mx.dequantize(v, weights[base + ".scales"].astype(mx.float32),
                                         weights[base + ".biases"].astype(mx.float32), group_size=group, bits=bits))
            if not np.allclose(w, ref, rtol=1e-6, atol=1e-6):
                raise RuntimeError(f"numpy dequant disagrees with mx.dequantize for {k}")
            t = torch.from_numpy(w)
            n_deq += 1
        else:
            t = torch.from_numpy(mx_to_np_f32(v))
            if k.endswith("conv1d.weight"):
                assert t.shape[-1] == 1, k
                t = t.permute(0, 2, 1).contiguous()  # [C, K, 1] -> [C, 1, K]
            if k.endswith(MLX_NORM_SUFFIXES) and t.ndim == 1:
                t = t - 1.0  # MLX stores 1 + w for the zero-centred norms (exact in fp32)
        hf[name] = t
    return hf, n_deq


def hf_model_from_state(tc: dict, state: dict):
    cfg = Qwen3_5TextConfig(**tc)
    model = Qwen3_5ForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    if cfg.tie_word_embeddings:
        state = dict(state)
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, strict=True)
    model.eval()
    sd = model.state_dict()
    for k, v in state.items():
        if not torch.equal(sd[k], v):
            raise RuntimeError(f"state not loaded exactly: {k}")
    return model


def write_mlx_index(case_dir: Path, weights: dict, fname: str, bits_of: dict) -> None:
    """model.safetensors.index.json as mlx-lm's save_model writes it (single shard)."""
    total = sum(v.nbytes for v in weights.values())
    n_params = 0
    for k, v in weights.items():
        if k.endswith((".scales", ".biases")):
            continue
        base = k[:-len(".weight")] if k.endswith(".weight") else k
        n_params += v.size * (32 // bits_of[base] if base in bits_of else 1)
    write_json(case_dir / "model.safetensors.index.json",
               {"metadata": {"total_parameters": n_params, "total_size": total},
                "weight_map": {k: fname for k in sorted(weights)}})


# ----------------------------------------------------------------------------------------------
# case 3: q4_affine (hand-made MLX checkpoint from flat_untied_gqa3)
# ----------------------------------------------------------------------------------------------
Q4_OVERRIDE_PATH = "language_model.model.layers.1.mlp.down_proj"
Q4_OVERRIDE = {"group_size": 64, "bits": 8, "mode": "affine"}


def make_q4_affine(out: Path, seed: int = 3003) -> dict:
    import mlx.core as mx
    mx.set_default_device(mx.cpu)
    src = out / "flat_untied_gqa3"
    case_dir = out / "q4_affine"
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    src_cfg = json.load(open(src / "config.json"))
    tc = flat_text_config()
    hf_tensors = load_dir_tensors(src)
    group, bits = 64, 4

    weights, skipped, bits_of = {}, [], {}
    for k in sorted(hf_tensors):
        t = hf_tensors[k]
        name = "language_model." + k  # model.X -> language_model.model.X, lm_head -> language_model.lm_head
        v = mx.array(t.float().numpy())
        if k.endswith("linear_attn.A_log"):
            weights[name] = v.astype(mx.float32)  # mlx-lm's cast_predicate keeps A_log fp32
            continue
        v = v.astype(mx.bfloat16)  # mlx-lm casts everything else to the config dtype (bf16)
        if k.endswith("conv1d.weight"):
            weights[name] = mx.contiguous(v.moveaxis(2, 1))  # [C,1,K] -> [C,K,1]
        elif k.endswith(MLX_NORM_SUFFIXES) and v.ndim == 1:
            weights[name] = v + 1.0  # mlx-lm sanitize: zero-centred norms stored as 1 + w (bf16)
        elif v.ndim == 2 and k.endswith(".weight"):  # nn.Linear / nn.Embedding -> quantized if possible
            base = name[:-len(".weight")]
            if v.shape[-1] % group != 0:
                weights[name] = v  # mlx-lm's quantize_model skips modules whose in-dim % group != 0
                skipped.append(base)
                continue
            g_, b_ = (Q4_OVERRIDE["group_size"], Q4_OVERRIDE["bits"]) if base == Q4_OVERRIDE_PATH else (group, bits)
            wq, sc, bi = mx.quantize(v, group_size=g_, bits=b_)
            bits_of[base] = b_
            weights[name], weights[base + ".scales"], weights[base + ".biases"] = wq, sc, bi
        else:
            weights[name] = v  # dt_bias, linear_attn.norm.weight (bf16 as mlx-lm writes them)
    mx.eval(weights)
    mx.save_safetensors(str(case_dir / "model.safetensors"), weights, metadata={"format": "mlx"})
    write_mlx_index(case_dir, weights, "model.safetensors", bits_of)

    quant = {"group_size": group, "bits": bits, "mode": "affine", Q4_OVERRIDE_PATH: dict(Q4_OVERRIDE)}
    cj = dict(src_cfg)
    cj["quantization"] = quant
    cj["quantization_config"] = copy.deepcopy(quant)
    write_json(case_dir / "config.json", dict(sorted(cj.items())))

    # reference: transformers fp32 on exactly the dequantized stored values
    stored = mx.load(str(case_dir / "model.safetensors"))
    state, n_deq = mlx_to_hf_state(stored, quant)
    model = hf_model_from_state(tc, state)
    # quantization error vs the bf16 source (sanity: 4-bit ~ 10 % rel rms, 8-bit ~ 0.5 %)
    qerr = {}
    for k, v in state.items():
        src_t = hf_tensors[k].float()
        if k.endswith(("_proj.weight", "embed_tokens.weight", "lm_head.weight")) and not torch.equal(src_t, v):
            qerr[k] = float((v - src_t).norm() / src_t.norm())
    src_model, _ = hf_load(Qwen3_5ForCausalLM, src)

    tokens, (ref,), redraws, noise = repaired_prompt(80, seed + 2, [lambda tk: hf_logits(model, tk)],
                                                     qnp.load_model(case_dir))
    write_json(case_dir / "prompt.json", {"tokens": tokens})
    ref.astype("<f4").tofile(case_dir / "ref_logits.bin")
    src_ref = hf_logits(src_model, tokens)

    meta = common_meta("q4_affine", seed, tokens, VOCAB)
    meta.update({
        "format": "mlx",
        "description": "flat_untied_gqa3 written as an MLX affine-quantized checkpoint by hand (mx.quantize).",
        "covers": [
            "MLX names language_model.model.* and language_model.lm_head.* (untied lm_head quantized)",
            "4-bit affine, group 64: uint32 packed .weight [out, in*bits/32], bf16 .scales/.biases [out, in/64]",
            f"one 8-bit per-module override: quantization['{Q4_OVERRIDE_PATH}'] = {Q4_OVERRIDE}",
            "quantized embedding (embed_tokens.weight/scales/biases)",
            "quantized tiny in_proj_a / in_proj_b",
            "linear_attn.out_proj NOT quantized (in-dim 96 is not a multiple of 64; mlx-lm skips such "
            "modules): plain bf16 .weight, no .scales -> the rule is 'quantized iff <path>.scales exists'",
            "zero-centred norms stored as 1 + w (bf16); linear_attn.norm.weight plain (bf16)",
            "conv1d.weight stored [C, K, 1]; A_log fp32; dt_bias bf16",
            "flat config.json (model_type qwen3_5_text, layer_types, legacy rope fields) + quantization block",
            "prompt of 80 tokens",
        ],
        "notes": [
            "mlx-lm itself cannot load this directory: it has no qwen3_5_text module and it ignores layer_types "
            "(it derives the pattern from full_attention_interval). It is a format test built by hand; the "
            "mlx_lm_convert case is the one produced by mlx-lm.",
        ],
        "unquantized_linears": skipped,
        "dims": tc,
        "files": {
            "config.json": "flat_untied_gqa3's config.json + quantization / quantization_config blocks",
            "model.safetensors": "MLX-layout weights (safetensors metadata format=mlx)",
            "model.safetensors.index.json": "shard index (as mlx-lm writes it, single shard)",
            "prompt.json": "{\"tokens\": [...]} input token ids",
            "ref_logits.bin": "raw little-endian float32 [n_tokens, vocab_size]: transformers Qwen3_5ForCausalLM "
                              "fp32 eager on the dequantized stored weights (w = scales*q + biases in fp64 -> "
                              "fp32; norms = stored - 1; conv transposed back), one prefill",
            "meta.json": "this file",
        },
        "tolerance": {"ref_logits.bin": {"metric": "rel_l2", "max": REL_L2_TOL, "argmax_equal": True}},
        "python_checks": {
            "dequantized_modules": n_deq,
            "dequant_rel_error_vs_bf16_source": qerr,
            "transformers_split_runs": split_checks(model, tokens, ref),
            "vs_unquantized_source_model": {
                "mean_kl": float(kl_rows(src_ref, ref).mean()),
                "argmax_agreement": float((src_ref.argmax(-1) == ref.argmax(-1)).mean()),
            },
            "prompt_tokens_redrawn": redraws,
            "fp32_noise_screen": noise,
            "logit_stats": logit_stats(ref),
        },
    })
    write_json(case_dir / "meta.json", meta)
    meta["sizes"] = file_sizes(case_dir)
    return meta


# ----------------------------------------------------------------------------------------------
# case 4: mlx_lm_convert (the real mlx_lm.convert on mm_tied)
# ----------------------------------------------------------------------------------------------
def compare_mlx_layouts(stored: dict, q4_dir: Path):
    """Check that the hand-made q4_affine follows the same conventions as real mlx_lm.convert output:
    for every tensor kind (name with layer index removed), same dtype and same rank/trailing-dim rule."""
    import mlx.core as mx
    import re
    if not (q4_dir / "model.safetensors").exists():
        return "q4_affine not built"
    q4 = mx.load(str(q4_dir / "model.safetensors"))
    kind = lambda k: re.sub(r"\.layers\.\d+\.", ".layers.N.", k)  # noqa: E731
    a = {kind(k): v for k, v in stored.items()}
    b = {kind(k): v for k, v in q4.items()}
    diffs = []
    for k in sorted(set(a) & set(b)):
        if a[k].dtype != b[k].dtype or a[k].ndim != b[k].ndim or \
                (k.endswith("conv1d.weight") and a[k].shape[1:] != b[k].shape[1:]):
            diffs.append(f"{k}: mlx_lm {a[k].dtype}{a[k].shape} vs q4_affine {b[k].dtype}{b[k].shape}")
    only = sorted(set(a) ^ set(b))
    return {"dtype_or_layout_differences": diffs, "kinds_in_only_one": only}


def write_tiny_tokenizer(d: Path) -> None:
    """mlx_lm.convert needs a tokenizer; a word-level one over the 512 ids is enough."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {f"t{i}": i for i in range(VOCAB - 1)}
    vocab["<|endoftext|>"] = VOCAB - 1
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(d / "tokenizer.json"))
    write_json(d / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast",
                                             "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                                             "model_max_length": 4096})


def make_mlx_lm_convert(out: Path, seed: int = 4004) -> dict:
    import mlx.core as mx
    import mlx_lm
    from mlx_lm import convert as mlx_convert
    mx.set_default_device(mx.cpu)
    src = out / "mm_tied"
    case_dir = out / "mlx_lm_convert"
    shutil.rmtree(case_dir, ignore_errors=True)
    with tempfile.TemporaryDirectory() as td:
        hf_dir = Path(td) / "hf"
        shutil.copytree(src, hf_dir)
        for f in ("prompt.json", "ref_logits.bin", "meta.json"):
            (hf_dir / f).unlink()
        write_tiny_tokenizer(hf_dir)
        mlx_dir = Path(td) / "mlx"
        mlx_convert(str(hf_dir), str(mlx_dir), quantize=True, q_group_size=64, q_bits=4)
        written = sorted(p.name for p in mlx_dir.iterdir())
        case_dir.mkdir(parents=True)
        for p in mlx_dir.iterdir():
            if p.name == "README.md":  # model card with the temp path; not needed
                continue
            shutil.copy(p, case_dir / p.name)

    cj = json.load(open(case_dir / "config.json"))
    tc = dict(cj["text_config"])
    quant = cj["quantization"]
    stored = {}
    for f in sorted(case_dir.glob("*.safetensors")):
        stored.update(mx.load(str(f)))
    state, n_deq = mlx_to_hf_state(stored, quant)
    tc_hf = mm_text_config()  # the source config; check mlx-lm kept every dimension
    for k, v in tc_hf.items():
        if k != "rope_parameters" and tc.get(k) != v:
            raise RuntimeError(f"mlx_lm.convert changed text_config[{k}]: {tc.get(k)} != {v}")
    model = hf_model_from_state(tc_hf, state)

    mlx_model, _ = mlx_lm.load(str(case_dir))
    mlx_model.set_dtype(mx.float32)  # exact upcast of bf16 scales/biases/norms: mlx-lm forward in fp32

    def mlx_forward(tk):
        return np.array(mlx_model(mx.array([tk]))[0].astype(mx.float32))

    tokens, (ref, mlx_logits), redraws, noise = repaired_prompt(
        150, seed + 2, [lambda tk: hf_logits(model, tk), mlx_forward], qnp.load_model(case_dir))
    write_json(case_dir / "prompt.json", {"tokens": tokens})
    ref.astype("<f4").tofile(case_dir / "ref_logits.bin")
    mlx_logits.astype("<f4").tofile(case_dir / "mlx_logits.bin")

    # mlx-lm as it runs by default (bf16 activations), informational only
    mlx_native, _ = mlx_lm.load(str(case_dir))
    native = np.array(mlx_native(mx.array([tokens]))[0].astype(mx.float32))

    dtypes = {k: str(v.dtype) for k, v in sorted(stored.items())}
    layout_diff = compare_mlx_layouts(stored, out / "q4_affine")
    meta = common_meta("mlx_lm_convert", seed, tokens, VOCAB)
    meta.update({
        "format": "mlx",
        "description": "mlx_lm.convert(mm_tied, quantize=True, q_group_size=64, q_bits=4) output, as written.",
        "covers": [
            "checkpoint produced by the real mlx-lm converter (nested text_config kept, vision_config dropped)",
            "names language_model.model.*; vision tower and mtp.* dropped by mlx-lm; tied -> no lm_head",
            "4-bit affine group 64 everywhere it applies (hidden 64 = one group per row; down_proj 2 groups)",
            "default layer pattern (full_attention_interval 4)",
            "prompt of 150 tokens",
        ],
        "mlx_lm_convert_call": "mlx_lm.convert(hf_path, mlx_path, quantize=True, q_group_size=64, q_bits=4)",
        "mlx_lm_wrote": written,
        "tensor_dtypes": dtypes,
        "dims": tc,
        "files": {
            "config.json": "written by mlx_lm.convert (sorted keys; quantization + quantization_config)",
            "model.safetensors": "written by mlx_lm.convert",
            "model.safetensors.index.json": "written by mlx_lm.convert",
            "tokenizer.json / tokenizer_config.json / others": "written by mlx_lm.convert from a dummy "
                                                               "word-level tokenizer (t0..t510, <|endoftext|>=511)",
            "prompt.json": "{\"tokens\": [...]} input token ids",
            "ref_logits.bin": "raw little-endian float32 [n_tokens, vocab_size]: transformers Qwen3_5ForCausalLM "
                              "fp32 eager on the dequantized stored weights, one prefill",
            "mlx_logits.bin": "raw little-endian float32 [n_tokens, vocab_size]: mlx-lm's own forward "
                              "(mlx_lm.load, then model.set_dtype(float32), model(mx.array([tokens]))), CPU",
            "meta.json": "this file",
        },
        "tolerance": {
            "ref_logits.bin": {"metric": "rel_l2", "max": REL_L2_TOL, "argmax_equal": True},
            "mlx_logits.bin": {"metric": "kl", "max": KL_TOL, "argmax_equal": True},
        },
        "python_checks": {
            "dequantized_modules": n_deq,
            "q4_affine_vs_mlx_lm_layout_differences": layout_diff,
            "mlx_fp32_vs_ref": {"max_rel_l2": float(rel_l2_rows(mlx_logits, ref).max()),
                                "max_kl": float(kl_rows(mlx_logits, ref).max()),
                                "argmax_equal": bool((mlx_logits.argmax(-1) == ref.argmax(-1)).all())},
            "mlx_native_bf16_vs_ref": {"max_rel_l2": float(rel_l2_rows(native, ref).max()),
                                       "max_kl": float(kl_rows(native, ref).max()),
                                       "mean_kl": float(kl_rows(native, ref).mean()),
                                       "argmax_agreement": float((native.argmax(-1) == ref.argmax(-1)).mean())},
            "transformers_split_runs": split_checks(model, tokens, ref),
            "prompt_tokens_redrawn": redraws,
            "fp32_noise_screen": noise,
            "logit_stats": logit_stats(ref),
        },
    })
    if meta["python_checks"]["mlx_fp32_vs_ref"]["max_rel_l2"] > REL_L2_TOL:
        raise RuntimeError(f"mlx-lm fp32 and transformers disagree: {meta['python_checks']['mlx_fp32_vs_ref']}")
    write_json(case_dir / "meta.json", meta)
    meta["sizes"] = file_sizes(case_dir)
    return meta


CASES = {
    "mm_tied": make_mm_tied,
    "flat_untied_gqa3": make_flat,
    "q4_affine": make_q4_affine,
    "mlx_lm_convert": make_mlx_lm_convert,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", choices=list(CASES), help="cases to (re)build (dependencies must exist)")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for name in args.only or list(CASES):
        meta = CASES[name](args.out)
        size = sum(meta["sizes"].values())
        total += size
        pc = meta["python_checks"]
        print(f"{name}: {meta['n_tokens']} tokens, {size / 1e6:.2f} MB, stats {pc['logit_stats']}")
    print(f"total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
