// Branch-free fp32 exp and SiLU that compilers vectorise (std::exp does not vectorise without -ffast-math);
// used by the gated RMSNorm (norm.cpp) and the causal conv (causal_conv1d.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ember {

// max(a, 0), exactly: a + |a| is 2a or 0 without rounding. No compare/select, so loops using it vectorise
// (GCC will not if-convert a float select that feeds further float math under the default -ftrapping-math).
inline float relu_exact(float a) { return 0.5f * (a + std::fabs(a)); }

// exp(x): Cephes expf (x = n·ln2 + r, |r| ≤ ln2/2, polynomial), ≤ 2 ulp for x in [−87.3, 88]. x is clamped to
// that range (x < −87.3 gives ≈ 1.2e-38, x > 88 gives ≈ 1.7e38, never 0 or inf); NaN and ±inf give NaN.
inline float exp_vec(float x) {
    x = x + relu_exact(-87.33654f - x);  // max(x, −87.33654): unchanged (exactly) when x ≥ −87.33654
    x = x - relu_exact(x - 88.0f);       // min(x, 88)
    const float magic = 12582912.0f;     // 1.5·2^23: (t + magic) − magic rounds t to the nearest integer
    const float t = x * 1.44269504088896341f + magic;  // magic + n, exactly (the ulp of magic is 1)
    const float n = t - magic;                          // ∈ [−126, 127]
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * (r * r) + (r + 1.0f);
    // 2^n from t's bits (n = bits(t) − bits(magic)), not static_cast<int>(n): for NaN x that cast is undefined
    // behaviour (found by fuzz_gguf_model); unsigned arithmetic wraps, and y is NaN then anyway.
    uint32_t tb;
    std::memcpy(&tb, &t, sizeof tb);
    const uint32_t bits = (tb - 0x4B400000u + 127u) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

// silu(x) = x / (1 + e^−x).
inline float silu_vec(float x) { return x / (1.0f + exp_vec(-x)); }

}  // namespace ember
