// Causal grouped-query attention over a contiguous per-head KV cache (fp32), as used by Qwen3.5's gated
// full-attention layers (qwen35.md §2.4 step 5; the sigmoid output gate is ops/activation sigmoid_mul).
//
// For query token i (position p_i = pos0 + i) and query head h, with kv head g = h / (n_heads / n_kv)
// (HF repeat_kv = repeat_interleave, so consecutive query heads share a kv head):
//   s_t   = scale · (q[i,h,:] · K[g,t,:])         for t = 0 .. p_i   (causal: keys t > p_i are masked)
//   a_t   = exp(s_t − max_t s_t) / Σ_t exp(s_t − max_t s_t)        (fp32 softmax with max subtraction)
//   out[i,h,:] = Σ_t a_t · V[g,t,:]
// Qwen3.5-2B: n_heads 8, n_kv 2, d 256, scale = d^-0.5.
//
// Fast path: work items (token, kv head[, key block]); an item handles the n_heads / n_kv query heads that share
// the kv head, so each K/V row is read once per group: two-pass softmax (scores into a scratch row, max, exp,
// Σ p·V). When (token, kv head) items alone cannot keep the threads busy (decode) and there are ≥ 512 keys,
// the keys are split into blocks whose partial (max, Σ, acc) are merged as in an online softmax.
#pragma once
#include <cstdint>

namespace ember {

// q   [n, n_heads, d]          queries for tokens at positions pos0 .. pos0 + n − 1
// K   [n_kv, capacity, d]      key cache: row t of kv head g at K + (g·capacity + t)·d; rows 0 .. pos0+n−1 valid
// V   [n_kv, capacity, d]      value cache, same layout
// out [n, n_heads, d]          must not alias q, K or V
// n_heads % n_kv == 0, pos0 + n <= capacity.
void attention_causal(const float* q, int64_t n, int64_t n_heads, int64_t n_kv, int64_t d, const float* K,
                      const float* V, int64_t capacity, int64_t pos0, float scale, float* out);

// Reference: the formula above in plain loops, scores / softmax / weighted sum in double.
void attention_causal_ref(const float* q, int64_t n, int64_t n_heads, int64_t n_kv, int64_t d, const float* K,
                          const float* V, int64_t capacity, int64_t pos0, float scale, float* out);

}  // namespace ember
