// Element types of stored tensors and the scalar conversions between them (round-to-nearest-even).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ember {

enum class DType : uint8_t { F32, F16, BF16, F64, I8, U8, I16, U16, I32, U32, I64, U64, BOOL };

size_t dtype_size(DType t);
const char* dtype_name(DType t);                  // safetensors spelling: "F32", "BF16", ...
bool dtype_from_name(std::string_view s, DType* out);
inline bool dtype_is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

inline float bf16_to_f32(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Read element i of a float tensor of type t (F32/F16/BF16) as float.
inline float load_float(const void* p, DType t, size_t i) {
    switch (t) {
        case DType::F32: return static_cast<const float*>(p)[i];
        case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
        case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
        default: return 0.0f;
    }
}
// Write element i of a float tensor of type t from a float (rounding to nearest even).
inline void store_float(void* p, DType t, size_t i, float v) {
    switch (t) {
        case DType::F32: static_cast<float*>(p)[i] = v; break;
        case DType::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); break;
        case DType::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); break;
        default: break;
    }
}

}  // namespace ember
