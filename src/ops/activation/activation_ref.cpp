// Elementwise activation references: the textbook formulas in double.
#include <cmath>

#include "ops/activation/activation.h"

namespace ember {

double sigmoid_ref(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }
double silu_ref(double x) { return x * sigmoid_ref(x); }
double softplus_ref(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

void swiglu_ref(const float* gate, const float* up, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = float(silu_ref(gate[i]) * double(up[i]));
}

void sigmoid_mul_ref(float* x, const float* gate, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = float(double(x[i]) * sigmoid_ref(gate[i]));
}

}  // namespace ember
