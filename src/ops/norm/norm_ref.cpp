// Reference RMSNorm / gated RMSNorm / L2 norm: the formulas of norm.h in plain loops, fp64 accumulation.
#include <cmath>

#include "ops/norm/norm.h"

namespace ember {

namespace {
double sum_sq(const float* x, int64_t d) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
}
}  // namespace

void rmsnorm_ref(const float* x, const float* w, float* y, int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        double inv = 1.0 / std::sqrt(sum_sq(xr, d) / static_cast<double>(d) + eps);
        for (int64_t i = 0; i < d; ++i) y[r * d + i] = static_cast<float>(xr[i] * inv * w[i]);
    }
}

void rmsnorm_gated_ref(const float* x, const float* z, const float* w, float* y, int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        double inv = 1.0 / std::sqrt(sum_sq(xr, d) / static_cast<double>(d) + eps);
        for (int64_t i = 0; i < d; ++i) {
            double zi = z[r * d + i];
            double silu = zi / (1.0 + std::exp(-zi));
            y[r * d + i] = static_cast<float>(w[i] * (xr[i] * inv) * silu);
        }
    }
}

void l2norm_ref(const float* x, float* y, int64_t rows, int64_t d, float eps, float scale) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        double inv = 1.0 / std::sqrt(sum_sq(xr, d) + eps);
        for (int64_t i = 0; i < d; ++i) y[r * d + i] = static_cast<float>(xr[i] * inv * scale);
    }
}

}  // namespace ember
