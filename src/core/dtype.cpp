// dtype names/sizes and IEEE half conversions.
#include "core/dtype.h"

#include <cmath>

namespace ember {

namespace {
struct Info { DType t; const char* name; size_t size; };
constexpr Info kInfo[] = {
    {DType::F32, "F32", 4},  {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2}, {DType::F64, "F64", 8},
    {DType::I8, "I8", 1},    {DType::U8, "U8", 1},   {DType::I16, "I16", 2},   {DType::U16, "U16", 2},
    {DType::I32, "I32", 4},  {DType::U32, "U32", 4}, {DType::I64, "I64", 8},   {DType::U64, "U64", 8},
    {DType::BOOL, "BOOL", 1},
};
}  // namespace

size_t dtype_size(DType t) {
    for (const auto& i : kInfo) if (i.t == t) return i.size;
    return 0;
}
const char* dtype_name(DType t) {
    for (const auto& i : kInfo) if (i.t == t) return i.name;
    return "?";
}
bool dtype_from_name(std::string_view s, DType* out) {
    for (const auto& i : kInfo) {
        if (s == i.name) { *out = i.t; return true; }
    }
    return false;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    float v;
    if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
    return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t au = u & 0x7fffffffu;
    if (au > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (au >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf (RNE boundary)
    if (au < 0x38800000u) {  // subnormal or zero: value = m * 2^-24
        float a;
        std::memcpy(&a, &au, 4);
        float m = std::nearbyint(a * 16777216.0f);  // RNE in default rounding mode
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(m));
    }
    uint32_t e = ((au >> 23) - 112u) << 10;
    uint32_t m = au & 0x7fffffu;
    uint32_t h = e | (m >> 13);
    uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1;
    return static_cast<uint16_t>(sign | h);
}

}  // namespace ember
