// RMSNorm, gated RMSNorm and L2 norm over rows, fp32 (formulas in norm.h; references in norm_ref.cpp).
#include "ops/norm/norm.h"

#include <cmath>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/norm/silu.h"

namespace ember {

namespace {

// Σ x² in fp32 with 16 independent partial sums, so the loop vectorises without -ffast-math and the
// round-off grows like √(d/16)·ε rather than d·ε.
float sum_sq(const float* __restrict x, int64_t d) {
    float acc[16] = {};
    int64_t i = 0;
    for (; i + 16 <= d; i += 16)
        for (int l = 0; l < 16; ++l) acc[l] += x[i + l] * x[i + l];
    for (; i < d; ++i) acc[i & 15] += x[i] * x[i];
    float s = 0;
    for (int l = 0; l < 16; ++l) s += acc[l];
    return s;
}

// Rows per parallel chunk: about 16K elements of work each.
int64_t row_grain(int64_t d) { return d >= 16384 ? 1 : 16384 / (d > 0 ? d : 1); }

}  // namespace

void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t d, float eps) {
    EMBER_CHECK(rows >= 0 && d > 0, "rmsnorm: rows=%lld d=%lld", (long long)rows, (long long)d);
    parallel_for(rows, row_grain(d), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = x + r * d;
            float* yr = y + r * d;
            const float inv = 1.0f / std::sqrt(sum_sq(xr, d) / static_cast<float>(d) + eps);
            for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * w[i];
        }
    });
}

void rmsnorm_gated(const float* x, const float* z, const float* w, float* y, int64_t rows, int64_t d, float eps) {
    EMBER_CHECK(rows >= 0 && d > 0, "rmsnorm_gated: rows=%lld d=%lld", (long long)rows, (long long)d);
    parallel_for(rows, row_grain(d), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = x + r * d;
            const float* zr = z + r * d;
            float* yr = y + r * d;
            const float inv = 1.0f / std::sqrt(sum_sq(xr, d) / static_cast<float>(d) + eps);
            for (int64_t i = 0; i < d; ++i) {
                yr[i] = (w[i] * (xr[i] * inv)) * silu_vec(zr[i]);
            }
        }
    });
}

void l2norm(const float* x, float* y, int64_t rows, int64_t d, float eps, float scale) {
    EMBER_CHECK(rows >= 0 && d > 0, "l2norm: rows=%lld d=%lld", (long long)rows, (long long)d);
    parallel_for(rows, row_grain(d), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = x + r * d;
            float* yr = y + r * d;
            const float f = scale / std::sqrt(sum_sq(xr, d) + eps);
            for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * f;
        }
    });
}

}  // namespace ember
