#!/usr/bin/env python3
"""bench/peers/torch_int4.py: peers for bench/gpu/gemv_bench.cu on the same Qwen3.5 shapes and n = 1, 4, 8.

  - torch int4 weight-only GEMM (tinygemm: torch.ops.aten._weight_int4pack_mm, group 64, bf16 scales+zeros),
    weights prepared with torch.ops.aten._convert_weight_to_int4pack(…, innerKTiles=8)
    (torch ≥ 2.5 takes uint8 [N, K/2]; older releases int32 [N, K] codes — both are tried);
  - cuBLAS bf16: torch.matmul(x [n, K] bf16, W [K, N] bf16).

Same method as gemv_bench: copy bandwidth of a 2 GiB device-to-device copy measured in this run; per shape
≥ 3 weight copies together ≥ 4× the L2, rotated so that every call reads HBM; median of 100 event-timed calls
and per-call time of a replayed CUDA graph of rotating calls; bytes = weights + scales/zeros + x + y.
Random data, never zeros. Run on the GPU machine: python3 bench/peers/torch_int4.py [--quick]
"""
import statistics
import sys

import torch

SHAPES = [  # (model, projection, rows = N = out features, cols = K = in features) — qwen35_config.cpp presets
    ("2B", "gdn qkv", 6144, 2048), ("2B", "gdn z / out", 2048, 2048), ("2B", "mlp gate/up", 6144, 2048),
    ("2B", "mlp down", 2048, 6144), ("2B", "attn k/v", 512, 2048), ("2B", "lm head", 248320, 2048),
    ("9B", "gdn qkv", 8192, 4096), ("9B", "gdn z / out", 4096, 4096), ("9B", "mlp gate/up", 12288, 4096),
    ("9B", "mlp down", 4096, 12288), ("9B", "lm head", 248320, 4096), ("27B", "gdn qkv", 10240, 5120),
    ("27B", "gdn z", 6144, 5120), ("27B", "gdn out", 5120, 6144), ("27B", "mlp gate/up", 17408, 5120),
    ("27B", "mlp down", 5120, 17408), ("27B", "lm head", 248320, 5120),
]
GROUP = 64


def copy_bandwidth():
    n = 2 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    b = torch.empty_like(a)
    times = []
    for i in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        if i:
            times.append(e0.elapsed_time(e1) * 1e-3)
    del a, b
    return 2 * n / statistics.median(times)


def int4_weight(N, K):
    try:
        w = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, device="cuda")
        return torch.ops.aten._convert_weight_to_int4pack(w, 8)
    except RuntimeError:
        w = torch.randint(0, 16, (N, K), dtype=torch.int32, device="cuda")
        return torch.ops.aten._convert_weight_to_int4pack(w, 8)


def time_calls(fns, reps):
    """fns: one zero-argument call per weight copy. Returns (median event-timed seconds, graph seconds per call)."""
    for i in range(max(len(fns), 5)):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (a, b) in enumerate(ev):
        a.record()
        fns[i % len(fns)]()
        b.record()
    torch.cuda.synchronize()
    t_event = statistics.median(a.elapsed_time(b) * 1e-3 for a, b in ev)
    t_graph = float("nan")
    try:
        per = max(len(fns), 20)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(3):
                fns[i % len(fns)]()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(per):
                fns[i % len(fns)]()
        g.replay()
        gt = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            gt.append(a.elapsed_time(b) * 1e-3 / per)
        t_graph = statistics.median(gt)
        del g
    except Exception as e:  # capture not supported by this op/version: report events only
        print(f"<!-- graph capture failed: {e} -->")
    return t_event, t_graph


def main():
    quick = "--quick" in sys.argv
    reps = 50 if quick else 100
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
    bw = copy_bandwidth()
    print(f"# torch peers — {props.name}, torch {torch.__version__}, L2 {l2 / 1e6:.0f} MB\n")
    print(f"copy bandwidth (2 GiB D2D, read+write): **{bw / 1e9:.0f} GB/s**\n")
    print("| model | shape | rows×cols | peer | n | µs (event median) | µs (graph) | MB | GB/s (graph) | floor µs "
          "| ratio | % of copy bw |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for model, name, N, K in SHAPES:
        for peer in ("int4 tinygemm g64", "cuBLAS bf16"):
            if peer.startswith("int4"):
                one = N * K // 2 + (K // GROUP) * N * 2 * 2
            else:
                one = N * K * 2
            copies = max(3, -(-4 * l2 // one))
            try:
                if peer.startswith("int4"):
                    ws = [(int4_weight(N, K),
                           (torch.randn(K // GROUP, N, 2, device="cuda") * 0.05).to(torch.bfloat16))
                          for _ in range(copies)]
                else:
                    ws = [(torch.randn(K, N, device="cuda", dtype=torch.bfloat16) * 0.02,) for _ in range(copies)]
            except (RuntimeError, torch.OutOfMemoryError) as e:
                print(f"| {model} | {name} | {N}×{K} | {peer} | - | failed: {str(e).splitlines()[0]} |")
                continue
            for n in (1, 4, 8):
                x = torch.randn(n, K, device="cuda", dtype=torch.bfloat16)
                if peer.startswith("int4"):
                    fns = [lambda w=w: torch.ops.aten._weight_int4pack_mm(x, w[0], GROUP, w[1]) for w in ws]
                else:
                    fns = [lambda w=w: torch.matmul(x, w[0]) for w in ws]
                te, tg = time_calls(fns, reps)
                t = tg if tg == tg else te
                nbytes = one + 2 * n * (K + N)
                floor = nbytes / bw
                print(f"| {model} | {name} | {N}×{K} | {peer} | {n} | {te * 1e6:.1f} | {tg * 1e6:.1f} | "
                      f"{nbytes / 1e6:.1f} | {nbytes / t / 1e9:.0f} | {floor * 1e6:.1f} | {t / floor:.2f} | "
                      f"{100 * floor / t:.0f} % |", flush=True)
            del ws
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
