#!/usr/bin/env python3
"""GPU correctness checks for scripts/gpu-check.sh (numpy only): prints markdown table rows.

1. `ember logits --device cuda` on every committed fixture vs the oracle logits (transformers / mlx-lm),
   with and without --decode-from: max rel. L2 per position, max KL, top-1 agreement.
2. GPU vs CPU on synthetic Qwen3.5-2B-shaped weights: top-1 agreement and KL over 64 positions,
   and greedy tokens over 128 steps.
The oracle checks run the GPU with the fp32 KV cache (--kv-cache-dtype f32); section 4 reports what the
default bf16 cache changes against the same oracles.
"""
import json, os, subprocess, sys, tempfile
import numpy as np

E, OUT = sys.argv[1], sys.argv[2]
root = os.path.join(os.path.dirname(__file__), "..")
fx = os.path.join(root, "tests", "fixtures", "qwen35")


def kv_f32(args):
    """GPU runs keep the fp32 KV cache unless the caller names one."""
    return args + ["--kv-cache-dtype", "f32"] if "cuda" in args and "--kv-cache-dtype" not in args else args


def logits(args, n, env=None):
    args = kv_f32(args)
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        r = subprocess.run([E, "logits", *args, "--out", f.name], capture_output=True, text=True,
                           env={**os.environ, **(env or {})})
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip())
        return np.fromfile(f.name, dtype=np.float32).reshape(n, -1)


def stats(a, b):
    rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
    def lsm(x):
        x = x.astype(np.float64); x = x - x.max(1, keepdims=True)
        return x - np.log(np.exp(x).sum(1, keepdims=True))
    pa, pb = lsm(a), lsm(b)
    kl = (np.exp(pb) * (pb - pa)).sum(1)
    return rel.max(), kl.max(), (a.argmax(1) == b.argmax(1)).mean()


for case in sorted(os.listdir(fx)):
    d = os.path.join(fx, case)
    if not os.path.isdir(d):
        continue
    toks = json.load(open(os.path.join(d, "prompt.json")))["tokens"]
    ts = ",".join(map(str, toks))
    for ref in ("ref_logits.bin", "mlx_logits.bin"):
        p = os.path.join(d, ref)
        if not os.path.exists(p):
            continue
        want = np.fromfile(p, dtype=np.float32).reshape(len(toks), -1)
        for extra in ([], ["--decode-from", "1"], ["--decode-from", "65"]):
            try:
                got = logits(["-m", d, "--device", "cuda", "--tokens", ts, *extra], len(toks))
                r, k, t = stats(got, want)
                ok = "ok" if (t == 1.0 and r <= 1e-3) else "FAIL"
                print(f"| {case} {ref} {' '.join(extra) or 'prefill'} | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.3f} {ok} |")
            except Exception as e:  # noqa: BLE001
                print(f"| {case} {ref} {' '.join(extra)} | ERROR {str(e)[:200]} |")

# GPU vs CPU on synthetic 2B weights
rng = np.random.default_rng(0)
toks = rng.integers(0, 248320, 64).tolist()
ts = ",".join(map(str, toks))
try:
    cpu = logits(["--synthetic", "qwen3.5-2b", "--device", "cpu", "--tokens", ts], 64)
    gpu = logits(["--synthetic", "qwen3.5-2b", "--device", "cuda", "--tokens", ts], 64)
    r, k, t = stats(gpu, cpu)
    print(f"| synthetic 2B GPU vs CPU, 64 positions | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.3f} {'ok' if t == 1 and k <= 1e-4 else 'FAIL'} |")
    gd = logits(["--synthetic", "qwen3.5-2b", "--device", "cuda", "--tokens", ts, "--decode-from", "32"], 64)
    r, k, t = stats(gd, cpu)
    print(f"| synthetic 2B GPU decode-from 32 vs CPU | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.3f} |")
except Exception as e:  # noqa: BLE001
    print(f"| synthetic 2B GPU vs CPU | ERROR {str(e)[:200]} |")
try:
    ids = {}
    for dev in ("cpu", "cuda"):
        r = subprocess.run(kv_f32([E, "generate", "--synthetic", "qwen3.5-2b", "--device", dev, "--tokens",
                                   ts[:200].rsplit(",", 1)[0], "-n", "128", "--ignore-eos"]), capture_output=True, text=True)
        ids[dev] = r.stdout.strip().split(",")
    same = sum(1 for a, b in zip(ids["cpu"], ids["cuda"]) if a == b)
    first_diff = next((i for i, (a, b) in enumerate(zip(ids["cpu"], ids["cuda"])) if a != b), None)
    print(f"| synthetic 2B greedy 128 steps GPU = CPU | {same}/{len(ids['cpu'])} equal, first difference at {first_diff} |")
except Exception as e:  # noqa: BLE001
    print(f"| greedy GPU vs CPU | ERROR {str(e)[:200]} |")

# 2b. GPU prefill vs CPU prefill across the GPU's chunk boundaries (GEMM tiles, GDN chunks of 64, 512-token
# forward calls), last position only: T = 1, 63, 64, 65, 129, 600, 2049, and 600 + 1449 as two prefill calls
# (a prompt continuing an earlier one); bar KL <= 1e-4, top-1 equal. Both precisions of the prefill GEMM on 600.
try:
    long_toks = np.random.default_rng(1).integers(0, 248320, 2049).tolist()
    cpu_last = {}
    for T, chunks, prec in [(1, None, "fp32"), (63, None, "fp32"), (64, None, "fp32"), (65, None, "fp32"),
                            (129, None, "fp32"), (600, None, "fp32"), (2049, None, "fp32"), (2049, "600,1449", "fp32"),
                            (600, None, "bf16")]:
        ts2 = ",".join(map(str, long_toks[:T]))
        extra = ["--last-only"] + (["--chunks", chunks] if chunks else [])
        if T not in cpu_last:
            cpu_last[T] = logits(["--synthetic", "qwen3.5-2b", "--device", "cpu", "--tokens", ts2, "--last-only"], 1)
        c = cpu_last[T]
        g = logits(["--synthetic", "qwen3.5-2b", "--device", "cuda", "--tokens", ts2, "--prefill-precision", prec,
                    *extra], 1)
        r, k, t = stats(g, c)
        ok = "ok" if t == 1 and k <= 1e-4 else ("(bf16 mode)" if prec == "bf16" else "FAIL")
        print(f"| synthetic 2B prefill T={T}{' chunks ' + chunks if chunks else ''} {prec} GPU vs CPU (last row) | "
              f"rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.0f} {ok} |")
except Exception as e:  # noqa: BLE001
    print(f"| synthetic 2B prefill chunks | ERROR {str(e)[:200]} |")

# 2c. The GGUF block mixes people download, at the real 2B shape (synthetic random blocks: Q4_K_M = Q4_K + Q5_K fused
# qkv + Q6_K output / more-bits down and v; Q4_0 + Q6_K output): GPU prefill (4-bit GEMM on the repacked Q4_K / Q4_0,
# the split cuBLAS GEMM on Q5_K / Q6_K / small blocks) vs the CPU, 64 positions and the last of 600; bar KL <= 1e-4.
for mix in ("q4_k_m", "q4_0"):
    try:
        name = "qwen3.5-2b:" + mix
        ts64 = ",".join(map(str, np.random.default_rng(2).integers(0, 248320, 64).tolist()))
        r, k, t = stats(logits(["--synthetic", name, "--device", "cuda", "--tokens", ts64], 64),
                        logits(["--synthetic", name, "--device", "cpu", "--tokens", ts64], 64))
        print(f"| synthetic 2B {mix} GPU vs CPU, 64 positions | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.3f} "
              f"{'ok' if t == 1 and k <= 1e-4 else 'FAIL'} |")
        ts600 = ",".join(map(str, np.random.default_rng(3).integers(0, 248320, 600).tolist()))
        r, k, t = stats(logits(["--synthetic", name, "--device", "cuda", "--tokens", ts600, "--last-only"], 1),
                        logits(["--synthetic", name, "--device", "cpu", "--tokens", ts600, "--last-only"], 1))
        print(f"| synthetic 2B {mix} prefill T=600 GPU vs CPU (last row) | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.0f} "
              f"{'ok' if t == 1 and k <= 1e-4 else 'FAIL'} |")
    except Exception as e:  # noqa: BLE001
        print(f"| synthetic 2B {mix} GPU vs CPU | ERROR {str(e)[:200]} |")

# 3. Llama-family GGUF files (llama, qwen2 biases, qwen3 q/k norm) on the GPU (tests/fixtures/gguf_models: transformers oracle, dequantized weights)
gm = os.path.join(root, "tests", "fixtures", "gguf_models")
for case, gguf, oracle in [("llama_gqa_untied", "model-f32.gguf", "ref_logits.bin"),
                           ("llama_gqa_untied", "model-q8_0.gguf", "dequant_logits_q8_0.bin"),
                           ("llama_mqa_tied", "model-q8_0.gguf", "dequant_logits_q8_0.bin"),
                           ("qwen3_qknorm", "model-q8_0.gguf", "dequant_logits_q8_0.bin"),
                           ("qwen2_bias", "model-f32.gguf", "ref_logits.bin"),
                           ("qwen2_bias", "model-q8_0.gguf", "dequant_logits_q8_0.bin"),
                           ("llama_rope_linear", "model-f32.gguf", "ref_logits.bin"),
                           ("qwen2_yarn", "model-f32.gguf", "ref_logits.bin"),
                           ("llama_kquant", "model-q4_0.gguf", "dequant_logits_q4_0.bin"),
                           ("llama_kquant", "model-q4_k_m.gguf", "dequant_logits_q4_k_m.bin"),
                           ("qwen35_flat_gqa3_dkdv", "model-q8_0.gguf", "llama_f32dequant_logits_q8_0.bin"),
                           ("qwen35_mm_tied_q8_0", "model-q8_0.gguf", "llama_f32dequant_logits_q8_0.bin")]:
    d = os.path.join(gm, case)
    try:
        pj = os.path.join(d, "prompt.json")
        if not os.path.exists(pj):
            pj = os.path.join(fx, "mm_tied", "prompt.json")
        toks = json.load(open(pj))["tokens"]
        want = np.fromfile(os.path.join(d, oracle), dtype=np.float32).reshape(len(toks), -1)
        # Q4_0 / Q8_0 / Q4_K_M files also with every Q4_0 / Q4_1 / Q8_0 / Q4_K matrix repacked to affine (EMBER_GGML_REPACK=all; by default only
        # matrices of >= 8 MiB are, and these fixtures are small).
        modes = ["auto", "all"] if any(q in gguf for q in ("q4_0", "q8_0", "q4_k")) else ["auto"]
        for mode, extra in [(m, x) for m in modes for x in ([], ["--decode-from", "1"])]:
            got = logits(["-m", os.path.join(d, gguf), "--device", "cuda", "--tokens", ",".join(map(str, toks)), *extra],
                         len(toks), {"EMBER_GGML_REPACK": mode})
            r, k, t = stats(got, want)
            ok = "ok" if (t == 1.0 and r <= 1e-3) else "FAIL"
            tag = " (repack all)" if mode == "all" else ""
            print(f"| gguf {case}/{gguf}{tag} {' '.join(extra) or 'prefill'} | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.3f} {ok} |")
    except Exception as e:  # noqa: BLE001
        print(f"| gguf {case}/{gguf} | ERROR {str(e)[:200]} |")

# 4. The bf16 KV cache (the CUDA default) against the same oracles: fixtures (transformers logits, prefill and
# decode), synthetic 2B GPU vs CPU over 64 positions and at the end of a 2049-token prompt. Reported, not gated.
for case in sorted(os.listdir(fx)):
    d = os.path.join(fx, case)
    p = os.path.join(d, "ref_logits.bin")
    if not os.path.isdir(d) or not os.path.exists(p):
        continue
    toks = json.load(open(os.path.join(d, "prompt.json")))["tokens"]
    want = np.fromfile(p, dtype=np.float32).reshape(len(toks), -1)
    for extra in ([], ["--decode-from", "1"]):
        try:
            bf = logits(["-m", d, "--device", "cuda", "--kv-cache-dtype", "bf16", "--tokens", ",".join(map(str, toks)),
                         *extra], len(toks))
            r, k, t = stats(bf, want)
            print(f"| bf16 KV: {case} ref_logits {' '.join(extra) or 'prefill'} | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.3f} |")
        except Exception as e:  # noqa: BLE001
            print(f"| bf16 KV: {case} | ERROR {str(e)[:200]} |")
try:
    ts = ",".join(map(str, np.random.default_rng(0).integers(0, 248320, 64).tolist()))
    cpu = logits(["--synthetic", "qwen3.5-2b", "--device", "cpu", "--tokens", ts], 64)
    for extra in ([], ["--decode-from", "32"]):
        g = logits(["--synthetic", "qwen3.5-2b", "--device", "cuda", "--kv-cache-dtype", "bf16", "--tokens", ts, *extra], 64)
        r, k, t = stats(g, cpu)
        print(f"| bf16 KV: synthetic 2B GPU vs CPU, 64 positions {' '.join(extra)} | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.3f} |")
    long_toks = ",".join(map(str, np.random.default_rng(1).integers(0, 248320, 2049).tolist()))
    c = logits(["--synthetic", "qwen3.5-2b", "--device", "cpu", "--tokens", long_toks, "--last-only"], 1)
    for prec in ("fp32", "bf16"):
        g = logits(["--synthetic", "qwen3.5-2b", "--device", "cuda", "--kv-cache-dtype", "bf16", "--tokens", long_toks,
                    "--last-only", "--prefill-precision", prec], 1)
        r, k, t = stats(g, c)
        print(f"| bf16 KV: synthetic 2B prefill T=2049 {prec} GPU vs CPU (last row) | rel L2 {r:.2e}, KL {k:.1e}, top-1 {t:.0f} |")
except Exception as e:  # noqa: BLE001
    print(f"| bf16 KV: synthetic 2B | ERROR {str(e)[:200]} |")
