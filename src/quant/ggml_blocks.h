// llama.cpp block quantization formats (as stored in GGUF files): layouts, dequantization, references.
//
// Block layouts (little-endian, `d`/`m`/`dmin` are IEEE fp16; every block is packed, no padding):
//   Q4_0 (32 el, 18 B): d; qs[16]         w[j] = d·((qs[j] & 15) − 8), w[j+16] = d·((qs[j] >> 4) − 8)
//   Q4_1 (32 el, 20 B): d, m; qs[16]      w[j] = d·(qs[j] & 15) + m,   w[j+16] = d·(qs[j] >> 4) + m
//   Q5_0 (32 el, 22 B): d; qh[4]; qs[16]  5th bit of element j is bit j of qh (u32); value − 16
//   Q8_0 (32 el, 34 B): d; int8 qs[32]    w[j] = d·qs[j]
//   Q4_K (256 el, 144 B): d, dmin; scales[12] (8 × 6-bit scale + 8 × 6-bit min); qs[128]
//   Q5_K (256 el, 176 B): d, dmin; scales[12]; qh[32]; qs[128]
//   Q6_K (256 el, 210 B): ql[128]; qh[64]; int8 scales[16]; d
// (exact bit placement of the K-quants: see ggml_blocks.cpp; the oracle is gguf-py's numpy dequantizer,
//  tests/fixtures/ggml_blocks/ made by scripts/make_ggml_block_fixtures.py)
#pragma once
#include <cstdint>

#include "quant/ggml_type.h"

namespace ember {

// Dequantize `n_elems` elements (a multiple of the type's block size) starting at the block `blocks`.
// Supported: every type with ggml_type_traits(t).supported (F32/F16/BF16 too). Aborts on others (callers
// validate the type when loading).
void ggml_dequantize(GgmlType t, const void* blocks, int64_t n_elems, float* out);

}  // namespace ember
