// ops/linear/linear_ref.cpp: reference y = x · Wᵀ (one row of W decoded at a time, fp64 accumulation),
// and weight_row (row gather as f32). GGML rows are dequantized by quant/ggml_blocks.h (gguf-py-exact fp32).
#include <vector>

#include "core/check.h"
#include "ops/linear/linear.h"
#include "quant/affine.h"
#include "quant/ggml_act.h"
#include "quant/ggml_blocks.h"

namespace ember {
namespace {

// Row r of a GGML weight (any supported type, plain ones included) as f32.
void ggml_row(const Weight& W, int64_t r, float* out) {
    const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
    EMBER_CHECK(tr.supported && W.cols % tr.block_elems == 0, "GGML weight: type %s, cols=%lld",
                tr.name ? tr.name : "(unknown)", static_cast<long long>(W.cols));
    const int64_t row_bytes = W.cols / tr.block_elems * tr.block_bytes;
    ggml_dequantize(W.ggml_type, static_cast<const uint8_t*>(W.data) + r * row_bytes, W.cols, out);
}

// GGML weight with 8-bit activations (Weight::act_q8): each token row is rounded by ggml_quantize_act, then per
// sub-block  scale·d32·Σ code·q  +  min·s32  (the offset term of Q4_1 / Q4_K / Q5_K uses the activation block's
// s32, as llama.cpp does), in fp64 from exact integer sums.
void linear_ref_act_q8(const Weight& W, const float* x, int64_t n, float* y) {
    const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
    const int64_t K = W.cols, be = tr.block_elems, nb = K / be;
    const ActBlocks at = ggml_act_blocks(W.ggml_type);
    std::vector<int8_t> q(static_cast<size_t>(n * K)), codes(static_cast<size_t>(be));
    std::vector<float> d32(static_cast<size_t>(n * K / 32)), s32(d32.size()), sc(16), mn(16);
    for (int64_t t = 0; t < n; ++t)
        ggml_quantize_act(at, x + t * K, K, q.data() + t * K, d32.data() + t * K / 32, s32.data() + t * K / 32);
    for (int64_t r = 0; r < W.rows; ++r)
        for (int64_t t = 0; t < n; ++t) {
            double acc = 0.0;
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* blk = static_cast<const uint8_t*>(W.data) + (r * nb + b) * tr.block_bytes;
                const int sl = ggml_decompose(W.ggml_type, blk, codes.data(), sc.data(), mn.data()).sub_len;
                for (int64_t s = 0; s < be / sl; ++s) {
                    const int64_t c0 = b * be + s * sl;
                    int64_t dot = 0;
                    for (int64_t l = 0; l < sl; ++l) dot += codes[s * sl + l] * q[t * K + c0 + l];
                    acc += double(sc[s]) * d32[t * K / 32 + c0 / 32] * double(dot);
                    if (mn[s] != 0.0f) acc += double(mn[s]) * s32[t * K / 32 + c0 / 32];
                }
            }
            y[t * W.rows + r] = static_cast<float>(acc);
        }
}

}  // namespace

void weight_row(const Weight& W, int64_t r, float* out) {
    EMBER_CHECK(!W.empty() && r >= 0 && r < W.rows, "weight_row: row %lld of %lld", static_cast<long long>(r),
                static_cast<long long>(W.rows));
    if (W.format == WeightFormat::AFFINE) {
        affine_dequantize_row(W, r, out);
        return;
    }
    if (W.format == WeightFormat::GGML) {
        ggml_row(W, r, out);
        return;
    }
    EMBER_CHECK(dtype_is_float(W.dtype), "weight_row: dense dtype %s", dtype_name(W.dtype));
    for (int64_t c = 0; c < W.cols; ++c) out[c] = load_float(W.data, W.dtype, static_cast<size_t>(r * W.cols + c));
}

void linear_ref(const Weight& W, const float* x, int64_t n, float* y) {
    EMBER_CHECK(!W.empty(), "linear_ref: empty weight");
    if (W.format == WeightFormat::GGML && W.act_q8 && ggml_type_traits(W.ggml_type).block_elems > 1)
        return linear_ref_act_q8(W, x, n, y);
    const int64_t K = W.cols;
    std::vector<double> w(static_cast<size_t>(K));
    std::vector<float> wf(W.format == WeightFormat::GGML ? static_cast<size_t>(K) : 0);
    for (int64_t r = 0; r < W.rows; ++r) {
        if (W.format == WeightFormat::GGML) {  // the fp32 dequantized row, exactly
            ggml_row(W, r, wf.data());
            for (int64_t c = 0; c < K; ++c) w[c] = wf[c];
        } else if (W.format == WeightFormat::AFFINE) {  // w = s·q + b, exact in fp64
            EMBER_CHECK(affine_params_valid(W.bits, W.group_size) && K % W.group_size == 0, "linear_ref: bad affine");
            const int64_t ng = K / W.group_size;
            const uint32_t* row = static_cast<const uint32_t*>(W.data) + r * affine_row_words(K, W.bits);
            for (int64_t g = 0; g < ng; ++g) {
                const double s = load_float(W.scales, W.sb_dtype, static_cast<size_t>(r * ng + g));
                const double b = load_float(W.biases, W.sb_dtype, static_cast<size_t>(r * ng + g));
                for (int64_t c = g * W.group_size; c < (g + 1) * W.group_size; ++c) w[c] = s * affine_get(row, c, W.bits) + b;
            }
        } else {
            for (int64_t c = 0; c < K; ++c) w[c] = load_float(W.data, W.dtype, static_cast<size_t>(r * K + c));
        }
        for (int64_t t = 0; t < n; ++t) {
            double acc = 0.0;
            for (int64_t c = 0; c < K; ++c) acc += w[c] * static_cast<double>(x[t * K + c]);
            y[t * W.rows + r] = static_cast<float>(acc);
        }
    }
}

}  // namespace ember
