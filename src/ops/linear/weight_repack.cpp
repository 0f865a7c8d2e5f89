// ops/linear/weight_repack.cpp: GGML Q4_0 / Q4_1 / Q8_0 → affine group 32 (spec: weight_repack.h).
#include "ops/linear/weight_repack.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "quant/ggml_blocks.h"

namespace ember {
namespace {

uint16_t u16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
}

// Bias of a Q4_0 / Q8_0 block: −off·d, exact in F32; `f16_ok` is cleared when it is not exact in F16.
float neg_off_bias(float d, float off, bool& f16_ok) {
    const float b = -off * d;
    if (f16_to_f32(f32_to_f16(b)) != b) f16_ok = false;
    return b;
}

// Q4_K: each 256-element block becomes 8 groups of 32 with F32 scale d·sc and bias −dmin·m (both exact products
// of an fp16 and a 6-bit integer; d·sc·q − dmin·m then rounds exactly as the block's ds·q − dm does).
Expected<RepackedWeight> q4_k_to_affine(const Weight& W) {
    const int64_t blocks = W.rows * (W.cols / 256);
    RepackedWeight R;
    R.codes.resize(static_cast<size_t>(blocks * 128));
    std::vector<float> s(static_cast<size_t>(blocks * 8)), b(static_cast<size_t>(blocks * 8));
    const auto* src = static_cast<const uint8_t*>(W.data);
    for (int64_t i = 0; i < blocks; ++i) {
        const uint8_t* blk = src + i * 144;
        const float d = f16_to_f32(u16_at(blk)), dmin = f16_to_f32(u16_at(blk + 2));
        EMBER_REQUIRE(std::isfinite(d) && std::isfinite(dmin), "ggml_to_affine: block %lld has a non-finite scale",
                      static_cast<long long>(i));
        const uint8_t* qs = blk + 16;
        for (int sb = 0; sb < 8; ++sb) {
            int sc, mn;
            ggml_k_scale_min(blk + 4, sb, &sc, &mn);
            s[size_t(i * 8 + sb)] = d * static_cast<float>(sc);
            b[size_t(i * 8 + sb)] = -(dmin * static_cast<float>(mn));
            // Element l of sub-block sb: nibble (sb & 1) of qs[32·(sb / 2) + l]; MLX: nibble l % 2 of byte l / 2.
            const uint8_t* q = qs + 32 * (sb / 2);
            const int sh = 4 * (sb & 1);
            uint8_t* out = R.codes.data() + (i * 8 + sb) * 16;
            for (int k = 0; k < 16; ++k)
                out[k] = static_cast<uint8_t>(((q[2 * k] >> sh) & 15) | ((q[2 * k + 1] >> sh) & 15) << 4);
        }
    }
    R.scales.resize(s.size() * 4), R.biases.resize(b.size() * 4);
    std::memcpy(R.scales.data(), s.data(), R.scales.size());
    std::memcpy(R.biases.data(), b.data(), R.biases.size());
    Weight& A = R.w;
    A.format = WeightFormat::AFFINE, A.rows = W.rows, A.cols = W.cols, A.bits = 4, A.group_size = 32;
    A.sb_dtype = DType::F32;
    A.data = R.codes.data(), A.scales = R.scales.data(), A.biases = R.biases.data();
    return R;
}

}  // namespace

bool ggml_affine_exact(GgmlType t) {
    return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q8_0 || t == GgmlType::Q4_K;
}

Expected<RepackedWeight> ggml_to_affine(const Weight& W) {
    EMBER_REQUIRE(W.format == WeightFormat::GGML && ggml_affine_exact(W.ggml_type) && W.data && W.rows >= 0,
                  "ggml_to_affine: only GGML Q4_0, Q4_1, Q8_0 and Q4_K weights convert exactly");
    if (W.ggml_type == GgmlType::Q4_K) {
        EMBER_REQUIRE(W.cols > 0 && W.cols % 256 == 0, "ggml_to_affine: %lld columns", static_cast<long long>(W.cols));
        return q4_k_to_affine(W);
    }
    const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
    EMBER_REQUIRE(W.cols > 0 && W.cols % 32 == 0, "ggml_to_affine: %lld columns", static_cast<long long>(W.cols));
    const int bits = W.ggml_type == GgmlType::Q8_0 ? 8 : 4;
    const int64_t groups = W.rows * (W.cols / 32);
    RepackedWeight R;
    R.codes.resize(static_cast<size_t>(groups * 32 * bits / 8));
    std::vector<float> s(static_cast<size_t>(groups)), b(static_cast<size_t>(groups));
    std::vector<uint16_t> s16(static_cast<size_t>(groups)), b16(static_cast<size_t>(groups));
    bool f16_ok = true;
    const auto* src = static_cast<const uint8_t*>(W.data);
    for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* blk = src + g * tr.block_bytes;
        uint8_t* out = R.codes.data() + g * 32 * bits / 8;
        const uint16_t dh = u16_at(blk);
        const float d = f16_to_f32(dh);
        EMBER_REQUIRE(std::isfinite(d), "ggml_to_affine: block %lld has a non-finite scale", static_cast<long long>(g));
        s16[size_t(g)] = dh, s[size_t(g)] = d;
        if (W.ggml_type == GgmlType::Q4_0 || W.ggml_type == GgmlType::Q4_1) {
            const uint8_t* qs = blk + (W.ggml_type == GgmlType::Q4_0 ? 2 : 4);
            // GGML: element j < 16 in the low nibble of byte j, element j + 16 in its high nibble.
            // MLX: element e in nibble e % 2 of byte e / 2.
            auto code = [&](int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; };
            for (int k = 0; k < 16; ++k) out[k] = static_cast<uint8_t>(code(2 * k) | code(2 * k + 1) << 4);
            if (W.ggml_type == GgmlType::Q4_1) {
                const uint16_t mh = u16_at(blk + 2);
                EMBER_REQUIRE(std::isfinite(f16_to_f32(mh)), "ggml_to_affine: block %lld has a non-finite min",
                              static_cast<long long>(g));
                b16[size_t(g)] = mh, b[size_t(g)] = f16_to_f32(mh);
            } else {
                b[size_t(g)] = neg_off_bias(d, 8.f, f16_ok);
            }
        } else {  // Q8_0: u = q + 128
            for (int k = 0; k < 32; ++k) out[k] = static_cast<uint8_t>(blk[2 + k] ^ 0x80u);
            b[size_t(g)] = neg_off_bias(d, 128.f, f16_ok);
        }
    }
    if (f16_ok) {
        if (W.ggml_type != GgmlType::Q4_1)
            for (int64_t g = 0; g < groups; ++g) b16[size_t(g)] = f32_to_f16(b[size_t(g)]);
        R.scales.resize(s16.size() * 2), R.biases.resize(b16.size() * 2);
        std::memcpy(R.scales.data(), s16.data(), R.scales.size());
        std::memcpy(R.biases.data(), b16.data(), R.biases.size());
    } else {
        R.scales.resize(s.size() * 4), R.biases.resize(b.size() * 4);
        std::memcpy(R.scales.data(), s.data(), R.scales.size());
        std::memcpy(R.biases.data(), b.data(), R.biases.size());
    }
    Weight& A = R.w;
    A.format = WeightFormat::AFFINE, A.rows = W.rows, A.cols = W.cols, A.bits = bits, A.group_size = 32;
    A.sb_dtype = f16_ok ? DType::F16 : DType::F32;
    A.data = R.codes.data(), A.scales = R.scales.data(), A.biases = R.biases.data();
    return R;
}

}  // namespace ember
