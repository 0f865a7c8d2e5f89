// quant/ggml_blocks.cpp: scalar dequantization of llama.cpp blocks, written from the layouts in ggml_blocks.h.
// Plain loops, no SIMD; each value is computed in the order stated in the header (bit-exact to gguf-py).
#include "quant/ggml_blocks.h"

#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace ember {
namespace {

float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
}

void q4_0(const uint8_t* b, float* w) {
    const float d = f16_at(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
        w[j] = d * static_cast<float>((qs[j] & 15) - 8);
        w[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
}

void q4_1(const uint8_t* b, float* w) {
    const float d = f16_at(b), m = f16_at(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < 16; ++j) {
        w[j] = d * static_cast<float>(qs[j] & 15) + m;
        w[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
    }
}

void q5_0(const uint8_t* b, float* w) {
    const float d = f16_at(b);
    uint32_t qh;
    std::memcpy(&qh, b + 2, 4);
    const uint8_t* qs = b + 6;
    for (int j = 0; j < 16; ++j) {
        const int lo = (qs[j] & 15) | static_cast<int>((qh >> j) & 1u) << 4;
        const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        w[j] = d * static_cast<float>(lo - 16);
        w[j + 16] = d * static_cast<float>(hi - 16);
    }
}

void q8_0(const uint8_t* b, float* w) {
    const float d = f16_at(b);
    const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
    for (int j = 0; j < 32; ++j) w[j] = d * static_cast<float>(qs[j]);
}

}  // namespace

void ggml_k_scale_min(const uint8_t* sc12, int s, int* sc, int* mn) {
    if (s < 4) {
        *sc = sc12[s] & 63;
        *mn = sc12[s + 4] & 63;
    } else {
        *sc = (sc12[s + 4] & 15) | (sc12[s - 4] >> 6) << 4;
        *mn = (sc12[s + 4] >> 4) | (sc12[s] >> 6) << 4;
    }
}

namespace {

// Q4_K (qh == nullptr) and Q5_K.
void q45_k(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* w) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    for (int s = 0; s < 8; ++s) {
        int sc, mn;
        ggml_k_scale_min(b + 4, s, &sc, &mn);
        const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(mn);
        const int c = s / 2, shift = (s & 1) * 4;
        for (int l = 0; l < 32; ++l) {
            int q = (qs[32 * c + l] >> shift) & 15;
            if (qh) q |= ((qh[l] >> s) & 1) << 4;
            w[32 * s + l] = ds * static_cast<float>(q) - dm;
        }
    }
}

void q6_k(const uint8_t* b, float* w) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = f16_at(b + 208);
    for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 4; ++k)
            for (int l = 0; l < 32; ++l) {
                const int j = 128 * h + 32 * k + l;
                const uint8_t byte = ql[64 * h + 32 * (k & 1) + l];
                const int q = (k >= 2 ? byte >> 4 : byte & 15) | ((qh[32 * h + l] >> (2 * k)) & 3) << 4;
                w[j] = (d * static_cast<float>(scales[j / 16])) * static_cast<float>(q - 32);
            }
}

}  // namespace

void ggml_dequantize(GgmlType t, const void* blocks, int64_t n_elems, float* out) {
    const GgmlTypeTraits tr = ggml_type_traits(t);
    EMBER_CHECK(tr.supported, "ggml_dequantize: unsupported type %s", tr.name ? tr.name : "(unknown)");
    EMBER_CHECK(n_elems >= 0 && n_elems % tr.block_elems == 0, "ggml_dequantize: %lld elements of %s",
                static_cast<long long>(n_elems), tr.name);
    const uint8_t* p = static_cast<const uint8_t*>(blocks);
    switch (t) {
        case GgmlType::F32: std::memcpy(out, p, static_cast<size_t>(n_elems) * 4); return;
        case GgmlType::F16:
            for (int64_t i = 0; i < n_elems; ++i) out[i] = f16_at(p + 2 * i);
            return;
        case GgmlType::BF16:
            for (int64_t i = 0; i < n_elems; ++i) {
                uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                out[i] = bf16_to_f32(h);
            }
            return;
        default: break;
    }
    const int64_t nb = n_elems / tr.block_elems;
    for (int64_t i = 0; i < nb; ++i, p += tr.block_bytes, out += tr.block_elems) {
        switch (t) {
            case GgmlType::Q4_0: q4_0(p, out); break;
            case GgmlType::Q4_1: q4_1(p, out); break;
            case GgmlType::Q5_0: q5_0(p, out); break;
            case GgmlType::Q8_0: q8_0(p, out); break;
            case GgmlType::Q4_K: q45_k(p, nullptr, p + 16, out); break;
            case GgmlType::Q5_K: q45_k(p, p + 16, p + 48, out); break;
            case GgmlType::Q6_K: q6_k(p, out); break;
            default: EMBER_CHECK(false, "ggml_dequantize: no decoder for %s", tr.name);
        }
    }
}

GgmlBlockParts ggml_decompose(GgmlType t, const void* block, int8_t* codes, float* scale, float* min) {
    const uint8_t* b = static_cast<const uint8_t*>(block);
    auto nib = [](const uint8_t* qs, int j) {  // element j < 32 of a 16-byte nibble array
        return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    };
    switch (t) {
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0: {
            scale[0] = f16_at(b), min[0] = t == GgmlType::Q4_1 ? f16_at(b + 2) : 0.0f;
            uint32_t qh = 0;
            if (t == GgmlType::Q5_0) std::memcpy(&qh, b + 2, 4);
            for (int j = 0; j < 32; ++j) {
                if (t == GgmlType::Q4_0) codes[j] = static_cast<int8_t>(nib(b + 2, j) - 8);
                else if (t == GgmlType::Q4_1) codes[j] = static_cast<int8_t>(nib(b + 4, j));
                else if (t == GgmlType::Q5_0)
                    codes[j] = static_cast<int8_t>((nib(b + 6, j) | static_cast<int>((qh >> j) & 1u) << 4) - 16);
                else codes[j] = static_cast<int8_t>(b[2 + j]);
            }
            return {32};
        }
        case GgmlType::Q4_K:
        case GgmlType::Q5_K: {
            const float d = f16_at(b), dmin = f16_at(b + 2);
            const uint8_t* qh = t == GgmlType::Q5_K ? b + 16 : nullptr;
            const uint8_t* qs = t == GgmlType::Q5_K ? b + 48 : b + 16;
            for (int s = 0; s < 8; ++s) {
                int sc, mn;
                ggml_k_scale_min(b + 4, s, &sc, &mn);
                scale[s] = d * static_cast<float>(sc), min[s] = -(dmin * static_cast<float>(mn));
                for (int l = 0; l < 32; ++l) {
                    int q = (qs[32 * (s / 2) + l] >> ((s & 1) * 4)) & 15;
                    if (qh) q |= ((qh[l] >> s) & 1) << 4;
                    codes[32 * s + l] = static_cast<int8_t>(q);
                }
            }
            return {32};
        }
        case GgmlType::Q6_K: {
            const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
            const float d = f16_at(b + 208);
            for (int s = 0; s < 16; ++s) scale[s] = d * static_cast<float>(sc[s]), min[s] = 0.0f;
            for (int h = 0; h < 2; ++h)
                for (int k = 0; k < 4; ++k)
                    for (int l = 0; l < 32; ++l) {
                        const uint8_t byte = b[64 * h + 32 * (k & 1) + l];
                        const int q = (k >= 2 ? byte >> 4 : byte & 15) | ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
                        codes[128 * h + 32 * k + l] = static_cast<int8_t>(q - 32);
                    }
            return {16};
        }
        default: break;
    }
    EMBER_CHECK(false, "ggml_decompose: %s is not a block-quantized type", ggml_type_traits(t).name);
    return {0};
}

}  // namespace ember
