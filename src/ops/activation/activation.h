// Elementwise activations in fp32: SiLU, sigmoid, softplus (torch semantics), SwiGLU and the sigmoid output
// gate of Qwen3.5 gated attention (qwen35.md §2.3 MLP, §2.4 step 6, §2.6 decay g = −exp(A_log)·softplus(·)).
#pragma once
#include <cmath>
#include <cstdint>

namespace ember {

// sigmoid(x) = 1 / (1 + e^−x)   (e^−x = inf for x < −88 gives exactly 0, as torch does)
inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// silu(x) = x · sigmoid(x), computed as x / (1 + e^−x) like torch's CPU kernel
inline float silu(float x) { return x / (1.f + std::exp(-x)); }

// softplus(x) = log(1 + e^x) with torch's defaults beta = 1, threshold = 20: returns x when x > 20
inline float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

// gate, up, out [n]: out = silu(gate) · up.  out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// x, gate [n]: x *= sigmoid(gate)   (gated attention: o = o · sigmoid(gate), same flattening [n_h·d])
void sigmoid_mul(float* x, const float* gate, int64_t n);

// References in double, rounded once.
void swiglu_ref(const float* gate, const float* up, float* out, int64_t n);
void sigmoid_mul_ref(float* x, const float* gate, int64_t n);
double silu_ref(double x);
double sigmoid_ref(double x);
double softplus_ref(double x);  // log(1 + e^x), no threshold (the threshold is part of the fast op's spec)

}  // namespace ember
