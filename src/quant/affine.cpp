// quant/affine.cpp: scalar reference for MLX affine quantization (dequantize a row, quantize a row like mlx).
#include "quant/affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace ember {

bool affine_params_valid(int bits, int group_size) {
    bool b = bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
    bool g = group_size == 32 || group_size == 64 || group_size == 128;
    return b && g;
}

void affine_dequantize_row(const Weight& W, int64_t r, float* out) {
    EMBER_CHECK(W.format == WeightFormat::AFFINE, "affine_dequantize_row on a dense weight");
    EMBER_CHECK(affine_params_valid(W.bits, W.group_size), "bits=%d group_size=%d", W.bits, W.group_size);
    EMBER_CHECK(r >= 0 && r < W.rows && W.cols % W.group_size == 0, "row %lld", static_cast<long long>(r));
    const int64_t ng = W.cols / W.group_size;
    const uint32_t* row = static_cast<const uint32_t*>(W.data) + r * affine_row_words(W.cols, W.bits);
    for (int64_t g = 0; g < ng; ++g) {
        const float s = load_float(W.scales, W.sb_dtype, static_cast<size_t>(r * ng + g));
        const float b = load_float(W.biases, W.sb_dtype, static_cast<size_t>(r * ng + g));
        for (int64_t c = g * W.group_size; c < (g + 1) * W.group_size; ++c) {
            const float sq = s * static_cast<float>(affine_get(row, c, W.bits));
            out[c] = sq + b;
        }
    }
}

void affine_quantize_row(const float* w, int64_t cols, int bits, int group_size, uint32_t* packed,
                         float* scales, float* biases) {
    EMBER_CHECK(affine_params_valid(bits, group_size), "bits=%d group_size=%d", bits, group_size);
    EMBER_CHECK(cols % group_size == 0, "cols=%lld group_size=%d", static_cast<long long>(cols), group_size);
    const float n_bins = static_cast<float>((1 << bits) - 1);
    const float eps = 1e-7f;
    std::memset(packed, 0, static_cast<size_t>(affine_row_words(cols, bits)) * sizeof(uint32_t));
    for (int64_t g = 0; g < cols / group_size; ++g) {
        const float* wg = w + g * group_size;
        float w_min = std::numeric_limits<float>::infinity(), w_max = -w_min;
        for (int j = 0; j < group_size; ++j) {
            w_max = std::max(w_max, wg[j]);
            w_min = std::min(w_min, wg[j]);
        }
        const bool mask = std::abs(w_min) > std::abs(w_max);
        float scale = std::max((w_max - w_min) / n_bins, eps);
        scale = mask ? scale : -scale;
        const float edge = mask ? w_min : w_max;
        const float q0 = std::rint(edge / scale);
        float bias = 0.0f;
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        for (int j = 0; j < group_size; ++j) {
            float q = std::rint((wg[j] - bias) / scale);
            q = std::min(std::max(q, 0.0f), n_bins);
            affine_put(packed, g * group_size + j, bits, static_cast<uint32_t>(q));
        }
        scales[g] = scale;
        biases[g] = bias;
    }
}

}  // namespace ember
