// Row-wise normalisations used by Qwen3.5 (qwen35.md §2.2, §2.6): RMSNorm, gated RMSNorm, L2 norm. fp32.
// Every function works in place (x == y). Reference versions (*_ref, fp64 accumulation) live in norm_ref.cpp.
#pragma once
#include <cstdint>

namespace ember {

// RMSNorm: y = x / sqrt(mean(x²) + eps) * w, per row of length d.
// w already includes any +1 offset (Qwen3_5RMSNorm's (1 + w) is folded in by the loader).
//   x [rows, d]   w [d]   y [rows, d]
void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t d, float eps);

// Gated RMSNorm (Qwen3_5RMSNormGated, linear_attn.norm; plain w, NOT 1 + w):
//   y = (w * (x / sqrt(mean(x²) + eps))) * silu(z),  silu(z) = z / (1 + e^-z), per row of length d.
//   x [rows, d]   z [rows, d]   w [d]   y [rows, d]
void rmsnorm_gated(const float* x, const float* z, const float* w, float* y, int64_t rows, int64_t d, float eps);

// L2 norm as HF/FLA l2norm: y = x * rsqrt(sum(x²) + eps) * scale, per row of length d.
// Qwen3.5 GDN: eps = 1e-6, scale = dk^-0.5 for q and 1 for k.
//   x [rows, d]   y [rows, d]
void l2norm(const float* x, float* y, int64_t rows, int64_t d, float eps, float scale);

// References: the formulas above in plain loops, sums accumulated in fp64 (norm_ref.cpp).
void rmsnorm_ref(const float* x, const float* w, float* y, int64_t rows, int64_t d, float eps);
void rmsnorm_gated_ref(const float* x, const float* z, const float* w, float* y, int64_t rows, int64_t d, float eps);
void l2norm_ref(const float* x, float* y, int64_t rows, int64_t d, float eps, float scale);

}  // namespace ember
