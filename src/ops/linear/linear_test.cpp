// ops/linear/linear_test.cpp: linear() (AVX2 and portable paths) vs linear_ref on random data, every dtype,
// bit width, group size and scale dtype, ragged shapes; weight_row; tiling/thread-count determinism.
#include "ops/linear/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "ops/linear/linear_kernels.h"
#include "quant/affine.h"

namespace ember {
namespace {

struct Config {
    bool affine = false;
    DType dtype = DType::F32;  // dense element type, or scale/bias dtype for affine
    int bits = 0, group_size = 0;
};

std::string config_name(const Config& c) {
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

// Error budget per output: 1e-5 · Σ_c |terms| + 1e-6, where the terms are what fp32 actually adds:
// dense |w||x|; affine (s·q·x and b·x separately, per the Σx trick) (|s·q| + |b|)·|x|.
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
    const int64_t gs = cfg.affine ? cfg.group_size : 64;
    std::vector<int64_t> col_list = {gs, 3 * gs, 2048 + gs};
    if (!cfg.affine) col_list.push_back(13);  // dense: a column tail shorter than one vector
    uint32_t seed = 1;
    for (int64_t rows : {1, 7, 33, 250}) {
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
    const int64_t rows = 5, cols = 3 * (cfg.affine ? cfg.group_size : 64);
    auto tw = make_weight(cfg, rows, cols, 77);
    std::vector<float> got(cols), want(cols);
    for (int64_t r = 0; r < rows; ++r) {
        std::fill(got.begin(), got.end(), NAN);
        weight_row(tw->W, r, got.data());
        if (cfg.affine) {
            affine_dequantize_row(tw->W, r, want.data());
        } else {
            for (int64_t c = 0; c < cols; ++c)
                want[c] = load_float(tw->W.data, cfg.dtype, static_cast<size_t>(r * cols + c));
        }
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(got[c], want[c]) << "r=" << r << " c=" << c;
    }
}

// Row t of linear(x, n) equals linear(x_t, 1) bit for bit (also with the AVX-512 single-token tile), and
// the thread count does not matter.
TEST_P(LinearTest, TilingAndThreadsAreBitwiseDeterministic) {
    const Config cfg = GetParam();
    const int64_t rows = 37, cols = 2048 + (cfg.affine ? cfg.group_size : 64), n = 19;
    auto tw = make_weight(cfg, rows, cols, 5);
    const std::vector<float> x = rand_x(n, cols, 6);
    for (Isa isa : isas()) {
        linear_detail::set_isa_limit(isa);
        std::vector<float> all(n * rows, NAN), one(rows, NAN), single(n * rows, NAN);
        linear(tw->W, x.data(), n, all.data());
        for (Isa isa1 : isas()) {
            if ((isa1 == Isa::Portable) != (isa == Isa::Portable) || isa1 < isa) continue;
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

INSTANTIATE_TEST_SUITE_P(All, LinearTest, ::testing::ValuesIn(all_configs()),
                         [](const ::testing::TestParamInfo<Config>& info) { return config_name(info.param); });

}  // namespace
}  // namespace ember
