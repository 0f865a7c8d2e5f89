#!/usr/bin/env python3
"""Check an `ember convert` output directory against the python ecosystem.

  1. every weight file reads with the `safetensors` package (torch) and agrees bit for bit with mx.load;
     __metadata__ format == "mlx"; model.safetensors.index.json lists exactly the stored tensors, total_size right
  2. mlx_lm loads the directory (mlx_lm.load; mlx_lm.utils.load_model when there is no tokenizer) and a forward
     on a few tokens gives finite logits of the right shape
  3. with --hf HF_DIR: runs mlx_lm.convert on the same HF checkpoint (same bits / group size; a tiny word-level
     tokenizer is added to a temp copy if the HF dir has none) and compares: tensor names, shapes, dtypes, packed
     codes, scales/biases, dequantized weights (max abs diff), unquantized tensors, config.json, forward logits;
     and compares the dequantized weights with the HF originals (error relative to the group scale).
     --mlx-ref DIR compares against an existing mlx-lm conversion instead of running mlx_lm.convert.

Usage: /opt/venv/bin/python scripts/check_convert_mlx.py MLX_DIR [--hf HF_DIR | --mlx-ref DIR] [--tokens N]
Exit status 0 when every check passes.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import mlx.core as mx  # noqa: E402

mx.set_default_device(mx.cpu)

FAILS = []


def short(e: Exception) -> str:
    m = f"{type(e).__name__}: {e}"
    return m if len(m) < 300 else m[:300] + " …"


def check(cond, msg):
    print(("  ok    " if cond else "  FAIL  ") + msg)
    if not cond:
        FAILS.append(msg)
    return cond


def load_dir(d: Path) -> dict:
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update(mx.load(str(f)))
    return out


def np32(a: mx.array) -> np.ndarray:
    return np.array(a.astype(mx.float32)) if mx.issubdtype(a.dtype, mx.floating) else np.array(a)


def check_files(d: Path) -> None:
    """The safetensors package (independent reader) sees the same tensors as mlx; the index is consistent."""
    import torch
    from safetensors import safe_open

    print(f"[files] {d}")
    stored = {}
    for f in sorted(d.glob("*.safetensors")):
        m = mx.load(str(f))
        with safe_open(str(f), framework="pt") as sf:
            check((sf.metadata() or {}).get("format") == "mlx", f"{f.name}: __metadata__ format = mlx")
            keys = set(sf.keys())
            check(keys == set(m), f"{f.name}: safetensors and mx.load list the same {len(keys)} tensors")
            bad = []
            for k in keys:
                t = sf.get_tensor(k)
                a = np.array(m[k].view(mx.uint16)) if m[k].dtype == mx.bfloat16 else np.array(m[k])
                b = t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()
                if a.shape != b.shape or a.tobytes() != b.tobytes():
                    bad.append(k)
            check(not bad, f"{f.name}: bytes identical in both readers" + (f" (differ: {bad[:3]})" if bad else ""))
        raw = f.read_bytes()[:8]
        n = int.from_bytes(raw, "little")
        check(n % 8 == 0, f"{f.name}: header length {n} is a multiple of 8")
        for k in m:
            stored[k] = f.name
    idx_path = d / "model.safetensors.index.json"
    if check(idx_path.exists(), "model.safetensors.index.json present"):
        idx = json.loads(idx_path.read_text())
        check(idx["weight_map"] == stored, "index weight_map matches the files")
        total = sum(v.nbytes for v in load_dir(d).values())
        check(idx["metadata"]["total_size"] == total, f"index total_size = {total}")


def load_model(d: Path):
    import mlx_lm
    from mlx_lm.utils import load_model as lm

    if (d / "tokenizer.json").exists() or (d / "tokenizer_config.json").exists():
        model, _ = mlx_lm.load(str(d))
        how = "mlx_lm.load"
    else:
        model, _ = lm(d)
        how = "mlx_lm.utils.load_model (no tokenizer files)"
    return model, how


def forward(d: Path, tokens):
    print(f"[forward] {d}")
    try:
        model, how = load_model(d)
    except Exception as e:  # noqa: BLE001 - report any loader failure
        check(False, f"mlx-lm loads the directory: {short(e)}")
        return None
    logits = np.array(model(mx.array([tokens]))[0].astype(mx.float32))
    check(np.isfinite(logits).all() and logits.shape[0] == len(tokens),
          f"{how}: forward on {len(tokens)} tokens → logits {logits.shape}, finite")
    return logits


def write_tiny_tokenizer(d: Path, vocab: int) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    v = {f"t{i}": i for i in range(vocab - 1)}
    v["<|endoftext|>"] = vocab - 1
    tok = Tokenizer(models.WordLevel(vocab=v, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}))


def run_mlx_lm_convert(hf: Path, out: Path, bits: int, group: int) -> bool:
    from mlx_lm import convert

    src = out.parent / "hf_copy"
    src.mkdir()
    for p in hf.iterdir():  # link the weights, copy the small files
        (src / p.name).symlink_to(p.resolve()) if p.suffix == ".safetensors" else shutil.copy(p, src / p.name)
    cfg = json.loads((src / "config.json").read_text())
    if cfg.get("model_type") == "qwen3_5_text":  # mlx-lm has no qwen3_5_text; its qwen3_5 reads flat configs
        print("        (temp copy: model_type qwen3_5_text → qwen3_5 so that mlx-lm accepts it,"
              " as ember convert does)")
        cfg["model_type"] = "qwen3_5"
        (src / "config.json").write_text(json.dumps(cfg, indent=2))
    if not (src / "tokenizer.json").exists():
        cfg = json.loads((hf / "config.json").read_text())
        write_tiny_tokenizer(src, cfg.get("text_config", cfg)["vocab_size"])
    print(f"[mlx_lm.convert] {hf} → {out} (bits {bits}, group {group})")
    try:
        convert(str(src), str(out), quantize=True, q_group_size=group, q_bits=bits)
    except Exception as e:  # noqa: BLE001
        check(False, f"mlx_lm.convert succeeds: {short(e)}")
        return False
    return True


def compare(ours_d: Path, ref_d: Path, bits: int, group: int) -> None:
    print(f"[compare] ember {ours_d}  vs  mlx-lm {ref_d}")
    a, b = load_dir(ours_d), load_dir(ref_d)
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    check(not only_a and not only_b, f"same tensor names ({len(a)} vs {len(b)})"
          + (f"; only ember: {only_a[:5]}; only mlx-lm: {only_b[:5]}" if only_a or only_b else ""))
    common = sorted(set(a) & set(b))
    layout = [k for k in common if a[k].shape != b[k].shape or a[k].dtype != b[k].dtype]
    check(not layout, "same shapes and dtypes" + "".join(
        f"\n          {k}: ember {a[k].dtype}{list(a[k].shape)} mlx-lm {b[k].dtype}{list(b[k].shape)}"
        for k in layout[:10]))
    stats = {"packed_words_differ": 0, "packed_words": 0, "scales_max_diff": 0.0, "biases_max_diff": 0.0,
             "dequant_max_abs_diff": 0.0, "dense_max_abs_diff": 0.0, "quantized": 0, "dense": 0}
    max_scale = 0.0
    for k in common:
        if k in layout or k.endswith((".scales", ".biases")):
            continue
        base = k[: -len(".weight")] if k.endswith(".weight") else None
        if base and base + ".scales" in a and base + ".scales" in b:
            stats["quantized"] += 1
            stats["packed_words"] += a[k].size
            stats["packed_words_differ"] += int((np.array(a[k]) != np.array(b[k])).sum())
            for s in ("scales", "biases"):
                d = np.abs(np32(a[f"{base}.{s}"]) - np32(b[f"{base}.{s}"])).max()
                stats[f"{s}_max_diff"] = max(stats[f"{s}_max_diff"], float(d))
            da = mx.dequantize(a[k], a[base + ".scales"], a[base + ".biases"], group, bits)
            db = mx.dequantize(b[k], b[base + ".scales"], b[base + ".biases"], group, bits)
            stats["dequant_max_abs_diff"] = max(stats["dequant_max_abs_diff"], float(np.abs(np32(da) - np32(db)).max()))
            max_scale = max(max_scale, float(np.abs(np32(b[base + ".scales"])).max()))
        else:
            stats["dense"] += 1
            stats["dense_max_abs_diff"] = max(stats["dense_max_abs_diff"], float(np.abs(np32(a[k]) - np32(b[k])).max()))
    for k, v in stats.items():
        print(f"        {k}: {v}")
    check(stats["dequant_max_abs_diff"] <= max_scale + 1e-6,
          f"dequantized weights within one quantization step (max diff {stats['dequant_max_abs_diff']:.3g},"
          f" max |scale| {max_scale:.3g})")
    check(stats["dense_max_abs_diff"] == 0.0, "unquantized tensors (norms +1, conv, A_log, dt_bias) identical")
    ca, cb = json.loads((ours_d / "config.json").read_text()), json.loads((ref_d / "config.json").read_text())
    diffs = []

    def walk(x, y, path):
        for key in sorted(set(x) | set(y)):
            p = f"{path}.{key}" if path else key
            if isinstance(x.get(key), dict) and isinstance(y.get(key), dict):
                walk(x[key], y[key], p)
            elif x.get(key, "<absent>") != y.get(key, "<absent>"):
                diffs.append(f"{p}: ember {x.get(key, '<absent>')!r} / mlx-lm {y.get(key, '<absent>')!r}")

    walk(ca, cb, "")
    print("        config.json differences: " + ("none" if not diffs else ""))
    for d in diffs:
        print("          " + d)
    check(ca.get("quantization") == cb.get("quantization"), "config quantization block identical")


def compare_hf(ours_d: Path, hf: Path, bits: int, group: int) -> None:
    """Dequantized ember weights vs the HF originals, per element, in units of the group's |scale|.

    mx.quantize makes the edge value of each group exact and rounds the others to the nearest code, so an
    unclamped code is within |s|/2; the code at the far end may be clamped and then be up to |s| off. Storing
    scale and bias in bf16 adds at most (n·|s| + |b|)·2^-8 (n = 2^bits − 1)."""
    print(f"[vs HF] {ours_d}  vs  {hf}")
    a, h = load_dir(ours_d), load_dir(hf)
    n = 2 ** bits - 1

    def hf_name(k):
        k = k[len("language_model."):]
        for cand in (k, "model.language_model." + k[len("model."):] if k.startswith("model.") else k):
            if cand in h:
                return cand
        return None

    worst, worst_abs, n_half, n_inner, n_all, bad_inner, bad_all = 0.0, 0.0, 0, 0, 0, 0, 0
    for k in sorted(a):
        if not k.endswith(".weight") or k[:-7] + ".scales" not in a:
            continue
        base = k[:-7]
        orig = np32(h[hf_name(k)])
        s = np.repeat(np32(a[base + ".scales"]), group, axis=-1)
        b = np.repeat(np32(a[base + ".biases"]), group, axis=-1)
        # fp32 dequantization (as ember does it): mx.dequantize on bf16 scales rounds s·q to bf16 first
        deq = np32(mx.dequantize(a[k], a[base + ".scales"].astype(mx.float32), a[base + ".biases"].astype(mx.float32),
                                 group, bits))
        code = np.rint((deq - b) / np.where(s == 0, 1, s))
        err, step = np.abs(deq - orig), np.abs(s)
        slack = (n * step + np.abs(b)) * 2.0 ** -8 + 1e-7
        inner = (code > 0) & (code < n)
        worst = max(worst, float((err / np.maximum(step, 1e-30)).max()))
        worst_abs = max(worst_abs, float(err.max()))
        n_half += int((err <= 0.5 * step + slack).sum())
        n_inner += int(inner.sum())
        n_all += err.size
        bad_inner += int((inner & (err > 0.5 * step + slack)).sum())
        bad_all += int((err > step + slack).sum())
    print(f"        quantized weights: max |deq − hf| = {worst_abs:.4g}, max |deq − hf| / |scale| = {worst:.4f}, "
          f"{100.0 * n_half / max(n_all, 1):.3f}% within |scale|/2 (+bf16 slack)")
    check(bad_inner == 0, f"all {n_inner} unclamped codes within |scale|/2 of the HF value (+bf16 slack)")
    check(bad_all == 0, f"all {n_all} weights within one |scale| of the HF value (+bf16 slack)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mlx_dir", type=Path)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--hf", type=Path, help="HF checkpoint that was converted: run mlx_lm.convert on it and compare")
    g.add_argument("--mlx-ref", type=Path, help="existing mlx-lm conversion to compare against")
    ap.add_argument("--tokens", type=int, default=8)
    args = ap.parse_args()

    cfg = json.loads((args.mlx_dir / "config.json").read_text())
    q = cfg.get("quantization") or {}
    bits, group = q.get("bits", 4), q.get("group_size", 64)
    vocab = cfg.get("text_config", cfg)["vocab_size"]
    tokens = [(7 * i + 3) % vocab for i in range(args.tokens)]

    check_files(args.mlx_dir)
    ours_logits = forward(args.mlx_dir, tokens)
    with tempfile.TemporaryDirectory() as td:
        ref = args.mlx_ref
        if args.hf is not None:
            ref = Path(td) / "mlx_lm_out"
            if not run_mlx_lm_convert(args.hf, ref, bits, group):
                ref = None
        if ref is not None:
            compare(args.mlx_dir, ref, bits, group)
            ref_logits = forward(ref, tokens)
            if ours_logits is not None and ref_logits is not None:
                d = float(np.abs(ours_logits - ref_logits).max())
                print(f"        logits max |ember − mlx-lm| = {d:.4g} (scale {np.abs(ref_logits).max():.3g})")
        if args.hf is not None:
            compare_hf(args.mlx_dir, args.hf, bits, group)
    print("PASS" if not FAILS else f"FAILED: {len(FAILS)} check(s)")
    return 0 if not FAILS else 1


if __name__ == "__main__":
    sys.exit(main())
