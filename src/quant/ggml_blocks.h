// llama.cpp block quantization formats (as stored in GGUF files): layouts and the scalar dequantization.
//
// Block layouts (little-endian; d, m, dmin are IEEE fp16; every block is packed, no padding). Element j of a
// block is w[j]; nibble lo(b) = b & 15, hi(b) = b >> 4; all arithmetic below is fp32, each product and sum
// rounded separately in the order written (this is what gguf-py's numpy dequantizers compute):
//
//   Q4_0 (32 el, 18 B): d; qs[16]
//        w[j] = d·(lo(qs[j]) − 8),  w[j+16] = d·(hi(qs[j]) − 8)                     j < 16
//   Q4_1 (32 el, 20 B): d, m; qs[16]
//        w[j] = d·lo(qs[j]) + m,    w[j+16] = d·hi(qs[j]) + m
//   Q5_0 (32 el, 22 B): d; qh[4] (one u32, LE); qs[16]
//        q[j] = lo(qs[j]) | bit_j(qh)<<4,  q[j+16] = hi(qs[j]) | bit_{j+16}(qh)<<4;   w = d·(q − 16)
//   Q8_0 (32 el, 34 B): d; int8 qs[32]                w[j] = d·qs[j]
//
//   K-quants: 256-element super-blocks.
//   Q4_K (256 el, 144 B): d, dmin; scales[12]; qs[128]
//        8 sub-blocks of 32, each with a 6-bit scale sc[s] and a 6-bit min mn[s] packed in scales[12]:
//          s < 4:  sc[s] = scales[s] & 63,                        mn[s] = scales[s+4] & 63
//          s ≥ 4:  sc[s] = lo(scales[s+4]) | (scales[s−4] >> 6) << 4,
//                  mn[s] = hi(scales[s+4]) | (scales[s]   >> 6) << 4
//        codes: for chunk c < 4 and l < 32:  q[64c + l] = lo(qs[32c + l]),  q[64c + 32 + l] = hi(qs[32c + l])
//        w[j] = (d·sc[s])·q[j] − dmin·mn[s]          s = j / 32
//   Q5_K (256 el, 176 B): d, dmin; scales[12]; qh[32]; qs[128]
//        as Q4_K, plus a 5th bit: q[j] |= bit_s(qh[j % 32]) << 4   (s = j / 32)
//   Q6_K (256 el, 210 B): ql[128]; qh[64]; int8 scales[16]; d
//        two halves h < 2 of 128; within a half, e = 32k + l (k < 4, l < 32):
//          q = (nibble (k ≥ 2 ? hi : lo) of ql[64h + 32(k & 1) + l]) | ((qh[32h + l] >> 2k) & 3) << 4
//        w[j] = (d·scales[j / 16])·(q − 32)
//   F32 / F16 / BF16: one element per "block", converted exactly.
//
// The oracle is gguf-py's numpy dequantizer (tests/fixtures/ggml_blocks/, scripts/make_ggml_block_fixtures.py):
// ggml_dequantize matches it bit for bit. (Compile ggml_blocks.cpp without FMA contraction — the default
// x86-64 baseline has no FMA — or products and sums would fuse and differ in the last bit.)
#pragma once
#include <cstdint>

#include "quant/ggml_type.h"

namespace ember {

// Dequantize `n_elems` elements (a multiple of the type's block size) starting at the block `blocks`.
// Supported: every type with ggml_type_traits(t).supported (F32/F16/BF16 too). Aborts on others (callers
// validate the type when loading).
void ggml_dequantize(GgmlType t, const void* blocks, int64_t n_elems, float* out);

// The 6-bit scale and min of sub-block s (0..7) from the 12 packed scale bytes of a Q4_K / Q5_K block.
void ggml_k_scale_min(const uint8_t* sc12, int s, int* sc, int* mn);

// One block as integer codes and per-sub-block affine parameters: w[j] = scale[s]·code[j] + min[s] with
// s = j / sub_len, each computed in fp32 exactly as ggml_dequantize does (so it reproduces it bit for bit):
//   Q4_0 code = q − 8, Q5_0 q − 16, Q8_0 q, Q6_K q − 32 (min 0); Q4_1 code = q, min = m;
//   Q4_K / Q5_K code = q, scale = d·sc[s], min = −(dmin·mn[s]).  sub_len: 32, or 16 for Q6_K.
// codes: block_elems entries; scale, min: block_elems / sub_len entries. Block-quantized types only.
struct GgmlBlockParts { int sub_len; };
GgmlBlockParts ggml_decompose(GgmlType t, const void* block, int8_t* codes, float* scale, float* min);

}  // namespace ember
