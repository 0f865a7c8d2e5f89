// quant/ggml_act.cpp: 8-bit activation blocks as llama.cpp's CPU backend makes them (see ggml_act.h). Scalar.
#include "quant/ggml_act.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace ember {
namespace {

float f16_round(float v) { return f16_to_f32(f32_to_f16(v)); }

// Round to nearest, ties to even, for |v| < 2^22 (the float add moves the fraction out of the mantissa).
int round_even(float v) {
    const float t = v + 12582912.0f;  // 1.5 · 2^23
    int32_t i;
    std::memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

void block32(bool with_s, const float* x, int8_t* q, float* d32, float* s32) {
    float a = 0.0f;
    for (int j = 0; j < 32; ++j) a = std::fmax(a, std::fabs(x[j]));
    const float d = a / 127.0f, id = a != 0.0f ? 127.0f / a : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        const int v = round_even(x[j] * id);
        q[j] = static_cast<int8_t>(v);
        sum += v;
    }
    *d32 = f16_round(d);
    *s32 = with_s ? f16_round(d * static_cast<float>(sum)) : *d32 * static_cast<float>(sum);
}

void block256(const float* x, int8_t* q, float* d32, float* s32) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < 256; ++j)
        if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), m = x[j];
    const float iscale = amax != 0.0f ? -127.0f / m : 0.0f, d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    for (int s = 0; s < 8; ++s) {
        int sum = 0;
        for (int l = 0; l < 32; ++l) {
            int v = round_even(iscale * x[32 * s + l]);
            v = v < 127 ? v : 127;
            q[32 * s + l] = static_cast<int8_t>(v);
            sum += v;
        }
        d32[s] = d;
        s32[s] = d * static_cast<float>(sum);
    }
}

}  // namespace

ActBlocks ggml_act_blocks(GgmlType w) {
    switch (w) {
        case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: return ActBlocks::Q8_0;
        case GgmlType::Q4_1: return ActBlocks::Q8_1;
        case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: return ActBlocks::Q8_K;
        default: break;
    }
    EMBER_CHECK(false, "ggml_act_blocks: no 8-bit activation pairing for %s", ggml_type_traits(w).name);
    return ActBlocks::Q8_0;
}

int ggml_act_block_elems(ActBlocks t) { return t == ActBlocks::Q8_K ? 256 : 32; }

void ggml_quantize_act(ActBlocks t, const float* x, int64_t K, int8_t* q, float* d32, float* s32) {
    const int B = ggml_act_block_elems(t);
    EMBER_CHECK(K % B == 0, "ggml_quantize_act: %lld columns is not a multiple of %d", static_cast<long long>(K), B);
    for (int64_t c = 0; c < K; c += B) {
        if (t == ActBlocks::Q8_K) block256(x + c, q + c, d32 + c / 32, s32 + c / 32);
        else block32(t == ActBlocks::Q8_1, x + c, q + c, d32 + c / 32, s32 + c / 32);
    }
}

}  // namespace ember
