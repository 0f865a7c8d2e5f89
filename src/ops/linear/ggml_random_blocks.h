// ops/linear/ggml_random_blocks.h: random GGML blocks for the linear tests (CPU and CUDA): every code bit random,
// the fp16 scale fields (d; Q4_1 m, K-quant dmin) set to finite N(0, d_amp) values so the blocks dequantize to
// finite weights. Header-only, no GPU dependency.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "ops/linear/weight.h"
#include "quant/ggml_type.h"

namespace ember::testing_blocks {

// Bytes of rows × cols of type t and a GGML Weight viewing them (valid while `bytes` lives and is not resized).
inline Weight random_ggml_blocks(GgmlType t, int64_t rows, int64_t cols, uint32_t seed, float d_amp,
                                 std::vector<uint8_t>& bytes) {
    const GgmlTypeTraits tr = ggml_type_traits(t);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    bytes.resize(size_t(rows * (cols / tr.block_elems) * tr.block_bytes));
    for (uint8_t& b : bytes) b = uint8_t(rng());
    std::vector<int> fields = {0};  // offsets of the fp16 scale fields in a block
    if (t == GgmlType::Q4_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K) fields = {0, 2};
    if (t == GgmlType::Q6_K) fields = {208};
    for (size_t blk = 0; blk < bytes.size() / size_t(tr.block_bytes); ++blk)
        for (int off : fields) {
            const uint16_t h = f32_to_f16(d_amp * nd(rng));
            std::memcpy(bytes.data() + blk * size_t(tr.block_bytes) + size_t(off), &h, 2);
        }
    Weight w;
    w.format = WeightFormat::GGML, w.ggml_type = t, w.rows = rows, w.cols = cols, w.data = bytes.data();
    return w;
}

}  // namespace ember::testing_blocks
