// Weight: a 2-D matrix W [rows = out_features, cols = in_features] exactly as the checkpoint stores it
// (dense F32/F16/BF16, or MLX affine-quantized), usually pointing into an mmap'ed file. Never expanded.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "quant/ggml_type.h"

namespace ember {

enum class WeightFormat : uint8_t {
    DENSE,   // data: dtype [rows, cols], row-major
    AFFINE,  // MLX affine: data uint32 [rows, cols*bits/32], element c of row r occupies bits
             // [c*bits, (c+1)*bits) of the row's little-endian bit stream; w = scale*q + bias per group
    GGML,    // llama.cpp blocks (quant/ggml_blocks.h): data = rows × (cols / block_elems) blocks of ggml_type,
             // row-major, rows contiguous; only block-quantized types (Q4_0 ... Q6_K) use this format
    TILED,   // device only: a 4- or 8-bit AFFINE or GGML Q6_K weight re-laid out in 16-row × 128-column tiles for the streaming CUDA
             // GEMV (ops/linear/weight_tiles.h): data = codes, scales = interleaved scales and biases, biases
             // unused; bits, group_size, sb_dtype as the source. Rows are not viewable (rows_view) or stackable.
};

struct Weight {
    WeightFormat format = WeightFormat::DENSE;
    DType dtype = DType::F32;          // DENSE: element type (F32, F16, BF16)
    int64_t rows = 0, cols = 0;
    const void* data = nullptr;
    int bits = 0, group_size = 0;      // AFFINE: bits in {2,3,4,5,6,8}, group_size in {32,64,128}
    const void* scales = nullptr;      // AFFINE: sb_dtype [rows, cols/group_size]
    const void* biases = nullptr;      // AFFINE: sb_dtype [rows, cols/group_size]
    DType sb_dtype = DType::BF16;      // F32, F16 or BF16
    GgmlType ggml_type = GgmlType::F32;  // GGML: the block type
    bool act_q8 = false;               // GGML block types: x is first rounded to 8-bit blocks the way llama.cpp's
                                       // CPU backend does (quant/ggml_act.h) — its numerics, not exact ones
    // AFFINE on CUDA (optional): the tensor-core GEMM's {s, b − off·s} f32 pairs made once at upload, transposed
    // [cols / group_size][gemm_pairs_ld] (linear_gemm_q.h: gemm_q_make_pairs); null: the GEMM makes them per call.
    const void* gemm_pairs = nullptr;
    int64_t gemm_pairs_ld = 0;

    bool empty() const { return data == nullptr; }
    bool is_quantized() const { return format != WeightFormat::DENSE; }
    // Bytes of one packed row (AFFINE, GGML) or one dense row.
    int64_t row_bytes() const {
        if (format == WeightFormat::GGML) {
            const GgmlTypeTraits t = ggml_type_traits(ggml_type);
            return cols / t.block_elems * t.block_bytes;
        }
        if (format == WeightFormat::AFFINE || format == WeightFormat::TILED) return cols * bits / 8;
        return cols * static_cast<int64_t>(dtype_size(dtype));
    }
    // Bytes of the per-group scales (or biases) of one row (AFFINE), else 0.
    int64_t row_sb_bytes() const {
        return format == WeightFormat::AFFINE ? (cols / group_size) * static_cast<int64_t>(dtype_size(sb_dtype)) : 0;
    }
    // Rows [r0, r1) as a Weight viewing the same storage (rows are contiguous in every format).
    Weight rows_view(int64_t r0, int64_t r1) const {
        Weight v = *this;
        v.rows = r1 - r0;
        v.data = static_cast<const uint8_t*>(data) + r0 * row_bytes();
        if (format == WeightFormat::AFFINE) {
            v.scales = static_cast<const uint8_t*>(scales) + r0 * row_sb_bytes();
            v.biases = static_cast<const uint8_t*>(biases) + r0 * row_sb_bytes();
            if (gemm_pairs) v.gemm_pairs = static_cast<const uint8_t*>(gemm_pairs) + r0 * 8;  // same ld
        }
        return v;
    }
    // Same storage layout apart from the row count (so the two can be stacked into one matrix).
    bool same_layout(const Weight& o) const {
        return format == o.format && dtype == o.dtype && cols == o.cols && bits == o.bits &&
               group_size == o.group_size && sb_dtype == o.sb_dtype && ggml_type == o.ggml_type &&
               act_q8 == o.act_q8;
    }
    // Bytes read to use the whole matrix once (weights + scales + biases).
    int64_t total_bytes() const {
        if (format == WeightFormat::TILED) {  // (ops/linear/weight_tiles.h)
            const int64_t padded = (rows + 15) / 16 * 16;
            if (ggml_type == GgmlType::Q6_K) return padded / 16 * (cols / 128) * (1536 + 160);
            return padded * (cols * bits / 8) +
                   2 * padded * (cols / group_size) * static_cast<int64_t>(dtype_size(sb_dtype));
        }
        int64_t b = rows * row_bytes();
        if (format == WeightFormat::AFFINE)
            b += 2 * rows * (cols / group_size) * static_cast<int64_t>(dtype_size(sb_dtype));
        return b;
    }
};

}  // namespace ember
