// llama.cpp / GGUF tensor types (ggml_type numbering as stored in GGUF files) and their block layout.
// The per-type bit layouts, dequantization and dot products live in quant/ggml_blocks.{h,cpp}.
#pragma once
#include <cstdint>

namespace ember {

enum class GgmlType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
    I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct GgmlTypeTraits {
    const char* name;      // "Q4_K", or nullptr for an unknown type id
    int block_elems;       // elements per block (1 for plain types)
    int block_bytes;       // bytes per block
    bool supported;        // ember can compute with it (F32/F16/BF16/Q4_0/Q4_1/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K)
};

// Traits of a type id as read from a file; .name == nullptr for ids ggml does not define.
GgmlTypeTraits ggml_type_traits(uint32_t type_id);
inline GgmlTypeTraits ggml_type_traits(GgmlType t) { return ggml_type_traits(static_cast<uint32_t>(t)); }

}  // namespace ember
