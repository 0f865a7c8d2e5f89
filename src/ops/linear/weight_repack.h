// ops/linear/weight_repack.h: exact re-expressions of a weight in another storage format, for backends whose
// fastest kernel reads a different layout than the checkpoint's (the CUDA backend runs large GGML Q4_0 / Q4_1 /
// Q8_0 / Q4_K matrices through the streaming affine GEMV instead of the per-type block kernels).
//
// GGML → affine (group 32, one GGML block = one group; codes in MLX bit order):
//   Q4_0  w = d·(q − 8)       → 4-bit, scale d, bias −8d
//   Q4_1  w = d·q + m         → 4-bit, scale d, bias m
//   Q8_0  w = d·q (q signed)  → 8-bit code u = q + 128, scale d, bias −128d
//   Q4_K  w = (d·sc)·q − dmin·m per 32-element sub-block (6-bit sc, m) → 4-bit, scale d·sc, bias −dmin·m (F32:
//         a third more bytes than the Q4_K blocks)
// Scales and biases stay F16 when every bias is exact in F16 (always for Q4_1; for Q4_0 / Q8_0 unless
// |8d| / |128d| exceeds the F16 range), else both are stored as F32 (always for Q4_K). Every dequantized value equals the
// block's exactly (weight_row of the result == weight_row of the source; weight_repack_test.cpp), except that a
// zero of a negative-d block comes out +0 instead of −0 (d·q − 8d vs d·(q − 8)), which no sum can tell apart.
#pragma once
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "ops/linear/weight.h"

namespace ember {

// A repacked weight and the storage its pointers refer to (moving the struct keeps the pointers valid).
struct RepackedWeight {
    Weight w;
    std::vector<uint8_t> codes, scales, biases;
};

// True for the GGML block types ggml_to_affine converts exactly.
bool ggml_affine_exact(GgmlType t);

// W (format GGML, a type ggml_affine_exact accepts) as an affine weight; an error names any other input.
Expected<RepackedWeight> ggml_to_affine(const Weight& W);

}  // namespace ember
