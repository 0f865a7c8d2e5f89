#!/usr/bin/env python3
"""Re-check the committed Qwen3.5 fixtures with an independent implementation (no transformers, no mlx):
scripts/qwen35_numpy_ref.py reads each case directory like an engine would (config forms, name prefixes,
shards, MLX affine dequantization, +1 norms, conv layouts) and runs a float64 recurrent forward.
The stored oracle files must agree with it within each case's tolerance (meta.json).

Usage: /opt/venv/bin/python scripts/check_fixtures.py [--dir tests/fixtures/qwen35]   (numpy only)
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen35_numpy_ref as qnp  # noqa: E402


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path(__file__).resolve().parents[1] / "tests/fixtures/qwen35")
    args = ap.parse_args()
    ok = True
    cases = sorted(p for p in args.dir.iterdir() if (p / "meta.json").exists())
    if not cases:
        sys.exit(f"no cases under {args.dir}")
    for case in cases:
        meta = json.loads((case / "meta.json").read_text())
        tokens = json.loads((case / "prompt.json").read_text())["tokens"]
        n, V = meta["n_tokens"], meta["vocab_size"]
        assert len(tokens) == n
        ours = qnp.forward(qnp.load_model(case), tokens)
        assert ours.shape == (n, V), ours.shape
        for fname, tol in meta["tolerance"].items():
            ref = np.fromfile(case / fname, dtype="<f4").astype(np.float64)
            assert ref.size == n * V, f"{case.name}/{fname}: {ref.size} floats, expected {n}x{V}"
            ref = ref.reshape(n, V)
            rel = np.linalg.norm(ours - ref, axis=-1) / np.linalg.norm(ref, axis=-1)
            lp, lq = log_softmax(ref), log_softmax(ours)
            kl = (np.exp(lp) * (lp - lq)).sum(-1)
            am = bool((ours.argmax(-1) == ref.argmax(-1)).all())
            val = rel.max() if tol["metric"] == "rel_l2" else kl.max()
            good = val <= tol["max"] and (am or not tol.get("argmax_equal", False))
            ok &= good
            print(f"{case.name:18s} {fname:15s} max_rel_l2 {rel.max():.2e} max_kl {kl.max():.2e} argmax_equal {am} "
                  f"[{tol['metric']} <= {tol['max']:g}] {'OK' if good else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
