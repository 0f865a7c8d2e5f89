// ops/linear/weight_tiles_test.cpp: the tiled storage (weight_tiles.h) is exact and means what the streaming
// kernel assumes. (1) tile → untile gives back every code, scale and bias bit for bit (random data, rows not a
// multiple of 16, 4-bit groups 32 / 64 / 128 and 8-bit groups 32 / 64, BF16 / F16 / F32 scales). (2) A CPU emulation of the kernel's reading — the PTX
// fragment layout of mma.m16n8k16 (lane g = lane/4, t = lane%4: A rows g / g+8 at k = 2t, 2t+1, 2t+8, 2t+9; B
// rows k = 2t, 2t+1 / 2t+8, 2t+9), codes taken as the kernel's pair16 takes them (nibbles j, j+4 of word s/2),
// scale entry g·NG + t — reproduces the fp64 reference GEMV of the source weight. (3) Unsupported inputs are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "ops/linear/linear.h"
#include "ops/linear/ggml_random_blocks.h"
#include "ops/linear/weight_tiles.h"
#include "quant/ggml_type.h"

namespace ember {
namespace {

struct Src {
    std::vector<uint8_t> codes, scales, biases;
    Weight w;
};

Src random_affine(int64_t rows, int64_t cols, int gs, DType st, uint32_t seed, int bits = 4) {
    Src s;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> us(0.001f, 0.05f), ub(-0.2f, 0.2f);
    s.codes.resize(size_t(rows * cols * bits / 8));
    for (auto& b : s.codes) b = uint8_t(rng());
    const size_t ng = size_t(rows * (cols / gs)), es = dtype_size(st);
    s.scales.resize(ng * es), s.biases.resize(ng * es);
    for (size_t i = 0; i < ng; ++i) {
        const float sv = us(rng), bv = ub(rng);
        if (st == DType::F32) {
            std::memcpy(&s.scales[i * 4], &sv, 4), std::memcpy(&s.biases[i * 4], &bv, 4);
        } else {
            const uint16_t a = st == DType::BF16 ? f32_to_bf16(sv) : f32_to_f16(sv);
            const uint16_t b = st == DType::BF16 ? f32_to_bf16(bv) : f32_to_f16(bv);
            std::memcpy(&s.scales[i * 2], &a, 2), std::memcpy(&s.biases[i * 2], &b, 2);
        }
    }
    Weight& w = s.w;
    w.format = WeightFormat::AFFINE, w.rows = rows, w.cols = cols, w.bits = bits, w.group_size = gs, w.sb_dtype = st;
    w.data = s.codes.data(), w.scales = s.scales.data(), w.biases = s.biases.data();
    return s;
}

double sb_value(const uint8_t* p, DType st) {
    if (st == DType::F32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return st == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// y = x·Wᵀ read from the tiled storage the way the kernel reads it (fp64 sums): nibble columns, x' = x for 4-bit,
// (x, 16x) per code for 8-bit (low, high nibble), X = Σ x over the group's codes.
std::vector<double> emulate(const Weight& T, const std::vector<float>& x) {
    const int v = T.bits / 4, gsv = T.group_size * v;  // nibbles per code, nibbles per group
    std::vector<float> xv(size_t(T.cols * v)), xr(size_t(T.cols * v));  // x' per nibble; x counted once per code
    for (int64_t c = 0; c < T.cols; ++c)
        for (int k = 0; k < v; ++k) xv[size_t(c * v + k)] = k ? 16.f * x[size_t(c)] : x[size_t(c)], xr[size_t(c * v + k)] = k ? 0.f : x[size_t(c)];
    const int64_t tiles = (T.rows + 15) / 16, nch = T.cols * v / 128;
    const int NG = 128 / gsv;
    const size_t es = dtype_size(T.sb_dtype), sbc = size_t(32 * NG) * es;
    const auto* codes = static_cast<const uint8_t*>(T.data);
    const auto* sb = static_cast<const uint8_t*>(T.scales);
    std::vector<double> y(size_t(tiles * 16), 0.0);
    auto nib = [&](int64_t blk, int h, int lane, int w, int p) {
        uint32_t word;
        std::memcpy(&word, codes + blk * 1024 + (h * 32 + lane) * 16 + w * 4, 4);
        return double((word >> (4 * p)) & 15);
    };
    for (int64_t tile = 0; tile < tiles; ++tile)
        for (int64_t ch = 0; ch < nch; ++ch) {
            const int64_t blk = tile * nch + ch;
            for (int g = 0; g < 8; ++g)
                for (int h = 0; h < 2; ++h) {
                    double C[4] = {0, 0, 0, 0}, X[4] = {0, 0, 0, 0};  // per group of the chunk: Σ q·x, Σ x
                    for (int s = 0; s < 8; ++s) {
                        const int G = s * 16 / gsv, w = s / 2, j = 2 * (s % 2);
                        for (int t = 0; t < 4; ++t) {
                            const int lane = 4 * g + t;
                            const size_t c0 = size_t(ch * 128 + 16 * s + 4 * t);
                            const float* xs = &xv[c0];
                            // B rows 2t, 2t+1 = x'[4t], x'[4t+1]; rows 2t+8, 2t+9 = x'[4t+2], x'[4t+3] of step s.
                            C[G] += nib(blk, h, lane, w, j) * xs[0] + nib(blk, h, lane, w, j + 4) * xs[1] +
                                    nib(blk, h, lane, w, j + 1) * xs[2] + nib(blk, h, lane, w, j + 5) * xs[3];
                            X[G] += double(xr[c0]) + xr[c0 + 1] + xr[c0 + 2] + xr[c0 + 3];
                        }
                    }
                    double acc = 0;
                    for (int G = 0; G < NG; ++G) {
                        const uint8_t* e = sb + size_t(blk) * sbc + ((g * NG + G) * 4 + 2 * h) * es;
                        acc += sb_value(e, T.sb_dtype) * C[G] + sb_value(e + es, T.sb_dtype) * X[G];
                    }
                    y[size_t(tile * 16 + g + 8 * h)] += acc;
                }
        }
    y.resize(size_t(T.rows));
    return y;
}

struct Kind {
    int bits, gs;
};
const Kind kKinds[] = {{4, 32}, {4, 64}, {4, 128}, {8, 32}, {8, 64}};

TEST(WeightTiles, RoundTripIsBitExact) {
    uint32_t seed = 3;
    for (Kind k : kKinds)
        for (DType st : {DType::BF16, DType::F16, DType::F32})
            for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1024}, {17, 2560}, {40, 5120}}) {
                const int gs = k.gs;
                SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " q" + std::to_string(k.bits) + " g" +
                             std::to_string(gs));
                const Src s = random_affine(rows, cols, gs, st, seed++, k.bits);
                auto t = tile_weight(s.w);
                ASSERT_TRUE(t.is_ok()) << t.message();
                EXPECT_EQ(t.value().w.format, WeightFormat::TILED);
                EXPECT_EQ(int64_t(t.value().codes.size()), tiled_code_bytes(s.w));
                std::vector<uint8_t> c, sc, bi;
                ASSERT_TRUE(untile_weight(t.value().w, c, sc, bi).is_ok());
                EXPECT_EQ(c, s.codes);
                EXPECT_EQ(sc, s.scales);
                EXPECT_EQ(bi, s.biases);
            }
}

TEST(WeightTiles, KernelReadingMatchesTheReferenceGemv) {
    uint32_t seed = 11;
    for (Kind k : kKinds)
        for (DType st : {DType::BF16, DType::F32})
            for (auto [rows, cols] : {std::pair<int64_t, int64_t>{21, 1024}, {5, 2560}}) {
                const int gs = k.gs;
                SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " q" + std::to_string(k.bits) + " g" +
                             std::to_string(gs));
                const Src s = random_affine(rows, cols, gs, st, seed++, k.bits);
                std::mt19937 rng(seed++);
                std::normal_distribution<float> nd(0.f, 1.f);
                std::vector<float> x(static_cast<size_t>(cols));
                for (float& v : x) v = nd(rng);
                auto t = tile_weight(s.w);
                ASSERT_TRUE(t.is_ok());
                const std::vector<double> y = emulate(t.value().w, x);
                std::vector<float> ref(static_cast<size_t>(rows));
                linear_ref(s.w, x.data(), 1, ref.data());  // fp64 sums rounded to fp32
                for (int64_t r = 0; r < rows; ++r)
                    ASSERT_NEAR(y[size_t(r)], ref[size_t(r)], 1e-6 * (1 + std::fabs(ref[size_t(r)]))) << r;
            }
}

// GGML Q6_K: the kernel's reading of the tiled blocks (pair128: the 6-bit code of A register r of k-step s at bits
// 6i..6i+5, i = 4·(s % 2) + r, of the 48-bit streams of the low / high halves of lane words 3·(s / 2)..+2; the
// scale d·sc from lane t = G % 4's sc byte 2·(G / 4) + h) reproduces the fp64 reference GEMV of the GGUF blocks
// (ggml_dequantize). Random blocks, ragged rows.
TEST(WeightTiles, Q6KReadingMatchesTheReferenceGemv) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{19, 1024}, {3, 2560}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
        std::mt19937 rng(uint32_t(rows * 7 + cols));
        std::normal_distribution<float> nd(0.f, 1.f);
        std::vector<uint8_t> blocks;
        const Weight W = testing_blocks::random_ggml_blocks(GgmlType::Q6_K, rows, cols, uint32_t(rows + cols), 0.002f, blocks);
        ASSERT_TRUE(tiles_supported(W));
        auto t = tile_weight(W);
        ASSERT_TRUE(t.is_ok()) << t.message();
        const Weight& T = t.value().w;
        EXPECT_EQ(T.total_bytes(), int64_t(t.value().codes.size() + t.value().sb.size()));
        std::vector<float> x(static_cast<size_t>(cols)), ref(static_cast<size_t>(rows));
        for (float& v : x) v = nd(rng);
        linear_ref(W, x.data(), 1, ref.data());
        const auto* codes = t.value().codes.data();
        const auto* sb = t.value().sb.data();
        const int64_t nch = cols / 128;
        for (int64_t row = 0; row < rows; ++row) {
            const int64_t tile = row / 16;
            const int g = int(row % 8), h = int(row % 16) / 8;
            double y = 0;
            for (int64_t ch = 0; ch < nch; ++ch) {
                const int64_t blk = tile * nch + ch;
                for (int G = 0; G < 8; ++G) {  // k-step s = G
                    double C = 0, X = 0;
                    for (int tt = 0; tt < 4; ++tt) {
                        const int lane = 4 * g + tt;
                        uint32_t w[12];
                        for (int wi = 0; wi < 12; ++wi)
                            std::memcpy(&w[wi], codes + blk * 1536 + ((wi / 4) * 32 + lane) * 16 + (wi % 4) * 4, 4);
                        for (int r = h; r < 4; r += 2)  // A registers of this row: rows g (0, 2) / g+8 (1, 3)
                            for (int e = 0; e < 2; ++e) {  // low / high half: k even / odd
                                uint64_t stream = 0;
                                for (int k = 0; k < 3; ++k) stream |= uint64_t((w[3 * (G / 2) + k] >> (16 * e)) & 0xffff) << (16 * k);
                                const int q = int((stream >> (6 * (4 * (G % 2) + r))) & 63);
                                const double xv = x[size_t(ch * 128 + 16 * G + 4 * tt + 2 * (r / 2) + e)];
                                C += q * xv, X += xv;
                            }
                    }
                    uint16_t d;
                    std::memcpy(&d, sb + blk * 160 + 128 + (g * 2 + h) * 2, 2);
                    const double scale = double(f16_to_f32(d)) * double(int8_t(sb[blk * 160 + (4 * g + G % 4) * 4 + 2 * (G / 4) + h]));
                    y += scale * (C - 32 * X);
                }
            }
            ASSERT_NEAR(y, ref[size_t(row)], 1e-5 * (1 + std::fabs(ref[size_t(row)]))) << row;
        }
    }
}

TEST(WeightTiles, RefusesWhatTheKernelCannotRead) {
    const Src ok = random_affine(4, 1024, 64, DType::BF16, 1);
    EXPECT_TRUE(tiles_supported(ok.w));
    Src bad = random_affine(4, 1024, 64, DType::BF16, 1);
    bad.w.bits = 3;
    EXPECT_FALSE(tile_weight(bad.w).is_ok());
    const Src q8g128 = random_affine(4, 1024, 128, DType::BF16, 1, 8);  // 256-nibble groups: not read
    EXPECT_FALSE(tiles_supported(q8g128.w));
    const Src narrow = random_affine(4, 896, 64, DType::BF16, 2);  // 7 chunks: no warp count in [8, 20]
    auto r = tile_weight(narrow.w);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.message().find("multiple of 128"), std::string::npos) << r.message();
    const Src g256 = random_affine(4, 1024, 256, DType::BF16, 3);
    EXPECT_FALSE(tiles_supported(g256.w));
    EXPECT_EQ(tiled_warps(2048), 16);
    EXPECT_EQ(tiled_warps(5120), 20);
    EXPECT_EQ(tiled_warps(576), 0);
}

}  // namespace
}  // namespace ember
