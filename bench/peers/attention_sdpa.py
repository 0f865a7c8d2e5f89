#!/usr/bin/env python3
"""bench/peers/attention_sdpa.py: the peer of AttentionPrefillCuda.DISABLED_Timing (ember's prefill attention,
src/ops/attention/attention_prefill_cuda_test.cpp) on the same shapes: torch scaled_dot_product_attention, bf16,
flash backend forced (SDPBackend.FLASH_ATTENTION), GQA through enable_gqa (or K/V repeated per query head where
that is refused), causal aligned to the bottom right for pos0 > 0 (query t sees keys 0 .. pos0 + t:
torch.nn.attention.bias.causal_lower_right), head dim 256; Qwen3.5-2B / 9B / 27B heads (8/2, 16/4, 24/4);
n = 512 at pos0 = 0 and 4096, n = 2048 and 8192 at pos0 = 0.

Timing: torch_int4.time_calls (beside this file): the per-call time of a replayed CUDA graph of ≥ 20 calls,
median of 5 replays (as the C++ side); the event-timed median is printed too.
TFLOP/s = 4·H·d·Σ_t (pos0 + t + 1) / time: the causal useful work, the same count as the C++ table.
Run on the GPU machine: python3 bench/peers/attention_sdpa.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from torch_int4 import time_calls

SHAPES = [("2B", 8, 2), ("9B", 16, 4), ("27B", 24, 4)]
CASES = [(512, 0), (512, 4096), (2048, 0), (8192, 0)]
D = 256


def sdpa_call(H, G, n, pos0):
    T = pos0 + n
    q = torch.randn(1, H, n, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, G, T, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, G, T, D, device="cuda", dtype=torch.bfloat16)
    mask = causal_lower_right(n, T) if pos0 > 0 else None

    def gqa():
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    kr, vr = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)

    def repeated():
        if mask is None:
            return F.scaled_dot_product_attention(q, kr, vr, is_causal=True)
        return F.scaled_dot_product_attention(q, kr, vr, attn_mask=mask)

    return gqa, repeated


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"{'':4} {'n':>5} {'pos0':>5} | {'sdpa us':>9} {'TFLOP/s':>8} {'events us':>10} | how")
    for name, H, G in SHAPES:
        for n, pos0 in CASES:
            flops = 4.0 * H * D * (n * pos0 + 0.5 * n * (n + 1))
            gqa, repeated = sdpa_call(H, G, n, pos0)
            us, how = None, ""
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                for fn, label in ((gqa, "flash, enable_gqa"), (repeated, "flash, K/V repeated per head")):
                    try:
                        t_event, t_graph = time_calls([fn], 10)
                        us, ev_us, how = t_graph * 1e6, t_event * 1e6, label
                        break
                    except RuntimeError as e:  # backend refused the combination: try the next form
                        how = f"refused: {str(e).splitlines()[0][:80]}"
            if us is None:
                print(f"{name:4} {n:5d} {pos0:5d} | {'-':>9} {'-':>8} | {how}")
            else:
                print(f"{name:4} {n:5d} {pos0:5d} | {us:9.1f} {flops / us * 1e-6:8.1f} {ev_us:10.1f} | {how}")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
