// Depthwise causal conv1d over time + SiLU with a rolling state: the Qwen3.5 GDN short conv (qwen35.md §2.6).
#pragma once
#include <cstdint>

namespace ember {

// Per channel c and token t, with xx = [state (K−1 rows, oldest first) ; x (T rows)]  ([K−1+T, C]):
//   y[t, c] = silu( Σ_{j<K} w[c, j] · xx[t + j, c] ),   silu(s) = s / (1 + e^−s)
// i.e. F.conv1d(groups=C, padding=K−1)[..., :T] when the state is zeros; w[c, K−1] multiplies the current token.
// Afterwards state = the last K−1 rows of xx (works for T < K−1 too), ready for the next call.
//   x [T, C]   w [C, K] (HF conv1d.weight [C, 1, K] squeezed)   state [K−1, C] in/out   y [T, C]
// y must not alias x or state. T ≥ 0, K ≥ 1 (K = 1: no state).
void causal_conv1d_silu(const float* x, int64_t T, int64_t C, const float* w, int K, float* state, float* y);

// Reference: the formula above in plain loops (fp64 accumulation), same contract.
void causal_conv1d_silu_ref(const float* x, int64_t T, int64_t C, const float* w, int K, float* state, float* y);

}  // namespace ember
