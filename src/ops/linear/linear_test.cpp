// ops/linear/linear_test.cpp: linear() (AVX2 and portable paths) vs linear_ref on random data, every dtype,
// bit width, group size and scale dtype, every GGML block type, ragged shapes; weight_row; tiling/thread-count
// determinism.
#include "ops/linear/linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "ops/linear/linear_kernels.h"
#include "quant/affine.h"
#include "quant/ggml_blocks.h"

namespace ember {
namespace {

struct Config {
    bool affine = false;
    DType dtype = DType::F32;  // dense element type, or scale/bias dtype for affine
    int bits = 0, group_size = 0;
    bool ggml = false;
    GgmlType ggml_type = GgmlType::F32;
    bool act_q8 = false;  // GGML: 8-bit activations as llama.cpp (Weight::act_q8)
};

// Column granularity of a config: the affine group, the GGML block (32 or 256; plain GGML types: 64), else 64.
int64_t col_unit(const Config& c) {
    if (c.affine) return c.group_size;
    if (c.ggml) {
        const int be = ggml_type_traits(c.ggml_type).block_elems;
        return be == 1 ? 64 : be;
    }
    return 64;
}
bool ggml_plain(const Config& c) { return c.ggml && ggml_type_traits(c.ggml_type).block_elems == 1; }

std::string config_name(const Config& c) {
    if (c.ggml) return std::string("ggml_") + ggml_type_traits(c.ggml_type).name + (c.act_q8 ? "_q8act" : "");
    if (!c.affine) return std::string("dense_") + dtype_name(c.dtype);
    std::string s = "q";  // (built with += : GCC 12 has a -Wrestrict false positive on "lit" + std::string)
    s += std::to_string(c.bits);
    s += "_g";
    s += std::to_string(c.group_size);
    s += "_sb";
    s += dtype_name(c.dtype);
    return s;
}

// A random weight that owns its storage. Affine: uniform codes, scales/biases ~ N(0, 0.05) of either sign.
struct TestWeight {
    Weight W;
    std::vector<uint8_t> bytes;
    std::vector<uint32_t> packed;
    std::vector<uint16_t> h, hs, hb;
    std::vector<float> f, fs, fb;
};

std::unique_ptr<TestWeight> make_weight(const Config& cfg, int64_t rows, int64_t cols, uint32_t seed) {
    auto tw = std::make_unique<TestWeight>();
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    Weight& W = tw->W;
    W.rows = rows, W.cols = cols;
    auto fill = [&](DType t, int64_t count, float sd, std::vector<uint16_t>& h, std::vector<float>& f) -> const void* {
        if (t == DType::F32) {
            f.resize(count);
            for (float& v : f) v = sd * nd(rng);
            return f.data();
        }
        h.resize(count);
        for (uint16_t& v : h) v = t == DType::BF16 ? f32_to_bf16(sd * nd(rng)) : f32_to_f16(sd * nd(rng));
        return h.data();
    };
    if (cfg.ggml) {  // random bytes for the codes; fp16 scales of random sign, |d| in [2^-10, 2^-4)
        W.format = WeightFormat::GGML, W.ggml_type = cfg.ggml_type, W.act_q8 = cfg.act_q8;
        const GgmlTypeTraits tr = ggml_type_traits(cfg.ggml_type);
        const int64_t nblk = rows * cols / tr.block_elems;
        tw->bytes.resize(static_cast<size_t>(nblk * tr.block_bytes));
        W.data = tw->bytes.data();
        if (tr.block_elems == 1) {  // F32 / F16 / BF16
            const DType dt = cfg.ggml_type == GgmlType::F32 ? DType::F32 : cfg.ggml_type == GgmlType::F16 ? DType::F16 : DType::BF16;
            for (int64_t i = 0; i < rows * cols; ++i)
                store_float(tw->bytes.data(), dt, static_cast<size_t>(i), nd(rng) / std::sqrt(static_cast<float>(cols)));
            return tw;
        }
        for (uint8_t& b : tw->bytes) b = static_cast<uint8_t>(rng());
        std::vector<int> scale_at = {0};  // byte offsets of the fp16 scales in a block
        if (cfg.ggml_type == GgmlType::Q4_1 || cfg.ggml_type == GgmlType::Q4_K || cfg.ggml_type == GgmlType::Q5_K)
            scale_at.push_back(2);
        if (cfg.ggml_type == GgmlType::Q6_K) scale_at = {208};
        std::uniform_real_distribution<float> ue(-10.0f, -4.0f);
        for (int64_t b = 0; b < nblk; ++b)
            for (int off : scale_at) {
                const uint16_t h = f32_to_f16((rng() & 1 ? -1.0f : 1.0f) * std::exp2(ue(rng)));
                std::memcpy(&tw->bytes[b * tr.block_bytes + off], &h, 2);
            }
        return tw;
    }
    if (!cfg.affine) {
        W.format = WeightFormat::DENSE, W.dtype = cfg.dtype;
        W.data = fill(cfg.dtype, rows * cols, 1.0f / std::sqrt(static_cast<float>(cols)), tw->h, tw->f);
        return tw;
    }
    W.format = WeightFormat::AFFINE, W.bits = cfg.bits, W.group_size = cfg.group_size, W.sb_dtype = cfg.dtype;
    const int64_t nw = affine_row_words(cols, cfg.bits), ng = cols / cfg.group_size;
    tw->packed.assign(rows * nw, 0u);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) affine_put(&tw->packed[r * nw], c, cfg.bits, rng() & ((1u << cfg.bits) - 1u));
    W.data = tw->packed.data();
    W.scales = fill(cfg.dtype, rows * ng, 0.05f, tw->hs, tw->fs);
    W.biases = fill(cfg.dtype, rows * ng, 0.05f * static_cast<float>(1 << cfg.bits) / 2, tw->hb, tw->fb);
    return tw;
}

std::vector<float> rand_x(int64_t n, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(n * cols);
    for (float& v : x) v = nd(rng);
    return x;
}

// GGML types with a min (Q4_1: w = d·q + m; Q4_K/Q5_K: w = d·sc·q − dmin·mn): the offset o_c of each
// element, i.e. the row dequantized with all code bits zeroed (scales and mins kept); 0 for the other types.
void ggml_offsets(const Weight& W, int64_t r, float* out) {
    const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
    int code_begin = 0;  // code bytes [code_begin, block_bytes) of each block
    if (W.ggml_type == GgmlType::Q4_1) code_begin = 4;
    else if (W.ggml_type == GgmlType::Q4_K || W.ggml_type == GgmlType::Q5_K) code_begin = 16;
    if (code_begin == 0) {
        std::fill(out, out + W.cols, 0.0f);
        return;
    }
    const int64_t nb = W.cols / tr.block_elems;
    std::vector<uint8_t> row(static_cast<const uint8_t*>(W.data) + r * nb * tr.block_bytes,
                             static_cast<const uint8_t*>(W.data) + (r + 1) * nb * tr.block_bytes);
    for (int64_t b = 0; b < nb; ++b)
        std::fill(row.begin() + b * tr.block_bytes + code_begin, row.begin() + (b + 1) * tr.block_bytes, uint8_t{0});
    ggml_dequantize(W.ggml_type, row.data(), W.cols, out);
}

// Error budget per output: 1e-5 · Σ_c |terms| + 1e-6, where the terms are what fp32 actually adds:
// dense |w||x|; affine (s·q·x and b·x separately, per the Σx trick) (|s·q| + |b|)·|x|; GGML with a min
// (scale·q·x and o·x separately) (|w| + 2|o|)·|x| ≥ (|w − o| + |o|)·|x|; other GGML types |w||x|.
std::vector<double> bounds(const Weight& W, const std::vector<float>& x, int64_t n) {
    const int64_t K = W.cols;
    std::vector<double> wabs(K), out(n * W.rows);
    std::vector<float> row(K);
    for (int64_t r = 0; r < W.rows; ++r) {
        if (W.format == WeightFormat::AFFINE) {
            const int64_t ng = K / W.group_size;
            const uint32_t* p = static_cast<const uint32_t*>(W.data) + r * affine_row_words(K, W.bits);
            for (int64_t g = 0; g < ng; ++g) {
                const double s = load_float(W.scales, W.sb_dtype, static_cast<size_t>(r * ng + g));
                const double b = load_float(W.biases, W.sb_dtype, static_cast<size_t>(r * ng + g));
                for (int64_t c = g * W.group_size; c < (g + 1) * W.group_size; ++c)
                    wabs[c] = std::abs(s * affine_get(p, c, W.bits)) + std::abs(b);
            }
        } else {
            weight_row(W, r, row.data());
            for (int64_t c = 0; c < K; ++c) wabs[c] = std::abs(double{row[c]});
            if (W.format == WeightFormat::GGML) {
                ggml_offsets(W, r, row.data());
                for (int64_t c = 0; c < K; ++c) wabs[c] += 2 * std::abs(double{row[c]});
            }
        }
        for (int64_t t = 0; t < n; ++t) {
            double s = 0;
            for (int64_t c = 0; c < K; ++c) s += wabs[c] * std::abs(double{x[t * K + c]});
            out[t * W.rows + r] = 1e-5 * s + 1e-6;
        }
    }
    return out;
}

std::vector<Config> all_configs() {
    std::vector<Config> v;
    for (DType t : {DType::F32, DType::F16, DType::BF16}) v.push_back({false, t, 0, 0});
    for (int bits : {4, 8, 2, 3, 5, 6})
        for (int gs : {32, 64, 128})
            for (DType t : {DType::BF16, DType::F16, DType::F32}) v.push_back({true, t, bits, gs});
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                       GgmlType::Q6_K, GgmlType::F32, GgmlType::F16, GgmlType::BF16})
        v.push_back({false, DType::F32, 0, 0, true, t});
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                       GgmlType::Q6_K})
        v.push_back({false, DType::F32, 0, 0, true, t, true});
    return v;
}

using linear_detail::Isa;
std::vector<Isa> isas() {
    std::vector<Isa> v = {Isa::Portable};
    if (linear_detail::cpu_isa() >= Isa::Avx2) v.push_back(Isa::Avx2);
    if (linear_detail::cpu_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
    return v;
}
const char* isa_name(Isa i) { return i == Isa::Portable ? "portable" : i == Isa::Avx2 ? "avx2" : "avx512"; }

class LinearTest : public ::testing::TestWithParam<Config> {};

// Every kernel level this CPU has (portable, AVX2, AVX-512) against the fp64 reference.
TEST_P(LinearTest, MatchesRef) {
    const Config cfg = GetParam();
    const int64_t gs = col_unit(cfg);
    std::vector<int64_t> col_list = {gs, 3 * gs, 2048 + gs};
    if (cfg.ggml && !ggml_plain(cfg)) col_list = {gs, 2 * gs, 3 * gs, 2048 + gs};  // GGML: odd and even block counts
    if (!cfg.affine && (!cfg.ggml || ggml_plain(cfg))) col_list.push_back(13);  // a tail shorter than one vector
    std::vector<int64_t> row_list = {1, 7, 33, 250};
    if (cfg.ggml) row_list = {1, 3, 67, 259};
    uint32_t seed = 1;
    for (int64_t rows : row_list) {
        for (int64_t cols : col_list) {
            auto tw = make_weight(cfg, rows, cols, seed++);
            for (int64_t n : {1, 2, 3, 5, 8, 17, 64}) {
                if (rows * cols * n > 5'000'000) continue;  // keeps the fp64 reference quick (drops 250×2k×{17,64})
                const std::vector<float> x = rand_x(n, cols, seed++);
                std::vector<float> want(n * rows);
                linear_ref(tw->W, x.data(), n, want.data());
                const std::vector<double> tol = bounds(tw->W, x, n);
                for (Isa isa : isas()) {
                    std::vector<float> got(n * rows, NAN);
                    linear_detail::set_isa_limit(isa);
                    linear(tw->W, x.data(), n, got.data());
                    linear_detail::set_isa_limit(Isa::Avx512);
                    int bad = 0;
                    for (int64_t i = 0; i < n * rows; ++i) {
                        const double err = std::abs(double{got[i]} - double{want[i]});
                        if (!(err <= tol[i]) && bad++ < 5)  // also catches NaN (an unwritten output)
                            ADD_FAILURE() << isa_name(isa) << " rows=" << rows << " cols=" << cols
                                          << " n=" << n << " t=" << i / rows << " r=" << i % rows << " got=" << got[i]
                                          << " want=" << want[i] << " tol=" << tol[i];
                    }
                    ASSERT_EQ(bad, 0);
                }
            }
        }
    }
}

TEST_P(LinearTest, WeightRow) {
    const Config cfg = GetParam();
    const int64_t rows = 5, cols = 3 * col_unit(cfg);
    auto tw = make_weight(cfg, rows, cols, 77);
    std::vector<float> got(cols), want(cols);
    for (int64_t r = 0; r < rows; ++r) {
        std::fill(got.begin(), got.end(), NAN);
        weight_row(tw->W, r, got.data());
        if (cfg.ggml) {
            const GgmlTypeTraits tr = ggml_type_traits(cfg.ggml_type);
            ggml_dequantize(cfg.ggml_type, tw->bytes.data() + r * cols / tr.block_elems * tr.block_bytes, cols, want.data());
        } else if (cfg.affine) {
            affine_dequantize_row(tw->W, r, want.data());
        } else {
            for (int64_t c = 0; c < cols; ++c)
                want[c] = load_float(tw->W.data, cfg.dtype, static_cast<size_t>(r * cols + c));
        }
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(got[c], want[c]) << "r=" << r << " c=" << c;
    }
}

// Row t of linear(x, n) equals linear(x_t, 1) bit for bit (also with the AVX-512 single-token tile), and
// the thread count does not matter. GGML: at the same ISA level (its AVX2 and AVX-512 kernels sum in
// different orders).
TEST_P(LinearTest, TilingAndThreadsAreBitwiseDeterministic) {
    const Config cfg = GetParam();
    const int64_t rows = 37, cols = 2048 + col_unit(cfg), n = 19;
    auto tw = make_weight(cfg, rows, cols, 5);
    const std::vector<float> x = rand_x(n, cols, 6);
    for (Isa isa : isas()) {
        linear_detail::set_isa_limit(isa);
        std::vector<float> all(n * rows, NAN), one(rows, NAN), single(n * rows, NAN);
        linear(tw->W, x.data(), n, all.data());
        for (Isa isa1 : isas()) {
            if ((isa1 == Isa::Portable) != (isa == Isa::Portable) || isa1 < isa) continue;
            if (cfg.ggml && isa1 != isa) continue;
            linear_detail::set_isa_limit(isa1);
            for (int64_t t = 0; t < n; ++t) {
                std::fill(one.begin(), one.end(), NAN);
                linear(tw->W, x.data() + t * cols, 1, one.data());
                for (int64_t r = 0; r < rows; ++r)
                    ASSERT_EQ(all[t * rows + r], one[r]) << isa_name(isa) << "/" << isa_name(isa1) << " t=" << t << " r=" << r;
            }
        }
        linear_detail::set_isa_limit(isa);
        set_num_threads(1);
        linear(tw->W, x.data(), n, single.data());
        set_num_threads(0);
        for (int64_t i = 0; i < n * rows; ++i) ASSERT_EQ(all[i], single[i]) << isa_name(isa) << " i=" << i;
    }
    linear_detail::set_isa_limit(Isa::Avx512);
}

// GGML weights the loaders must never produce abort (programmer errors, EMBER_CHECK).
TEST(LinearDeathTest, GgmlBadWeightAborts) {
    std::vector<uint8_t> bytes(4096, 0);
    std::vector<float> x(256, 1.0f), y(4);
    Weight W;
    W.format = WeightFormat::GGML, W.rows = 1, W.cols = 256, W.data = bytes.data();
    W.ggml_type = GgmlType::Q2_K;  // a type ember does not compute with
    EXPECT_DEATH(linear(W, x.data(), 1, y.data()), "GGML");
    EXPECT_DEATH(linear_ref(W, x.data(), 1, y.data()), "GGML");
    W.ggml_type = GgmlType::Q4_K, W.cols = 96;  // not whole 256-element blocks
    EXPECT_DEATH(linear(W, x.data(), 1, y.data()), "GGML");
    EXPECT_DEATH(weight_row(W, 0, y.data()), "GGML");
}

INSTANTIATE_TEST_SUITE_P(All, LinearTest, ::testing::ValuesIn(all_configs()),
                         [](const ::testing::TestParamInfo<Config>& info) { return config_name(info.param); });

}  // namespace
}  // namespace ember
