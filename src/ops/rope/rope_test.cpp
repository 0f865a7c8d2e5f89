// Tests for partial NeoX RoPE: fast vs reference, pass-through dims, a hand case, and torch/HF goldens.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/rope/rope.h"

namespace ember {
namespace {

std::vector<float> rand_normal(size_t n, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

TEST(Rope, FastMatchesRefAndLeavesTailUntouched) {
    struct Case { int64_t n, h, d, rot, pos0; float theta; };
    const Case cases[] = {{1, 8, 256, 64, 0, 1e7f},     {7, 2, 256, 64, 13, 1e7f},  {33, 3, 80, 16, 1000, 1e4f},
                          {5, 1, 64, 64, 4095, 1e6f},  {130, 5, 34, 2, 7, 1e7f},   {3, 7, 72, 64, 262140, 1e7f},
                          {17, 4, 128, 128, 0, 5e5f}};
    uint64_t seed = 1;
    for (const Case& c : cases) {
        const size_t total = size_t(c.n * c.h * c.d);
        std::vector<float> x0 = rand_normal(total, seed++), fast = x0, ref = x0;
        rope_neox(fast.data(), c.n, c.h, c.d, c.rot, c.pos0, c.theta);
        rope_neox_ref(ref.data(), c.n, c.h, c.d, c.rot, c.pos0, c.theta);
        double max_err = 0;
        for (size_t i = 0; i < total; ++i) {
            const int64_t dim = int64_t(i) % c.d;
            if (dim >= c.rot) {
                ASSERT_EQ(fast[i], x0[i]) << "pass-through dim " << dim << " changed";
                ASSERT_EQ(ref[i], x0[i]);
            } else {
                max_err = std::max(max_err, double(std::fabs(fast[i] - ref[i])));
            }
        }
        // fast = float rounding of cos/sin (0.5 ulp each) plus 2 products + 1 add: a few ulp of |x| ~ 4.
        EXPECT_LE(max_err, 2e-6) << "n=" << c.n << " h=" << c.h << " d=" << c.d << " rot=" << c.rot;
    }
}

TEST(Rope, SmallPositionsMatchExactDoubleRope) {
    // With a double angle the result differs from the float32-angle spec only by the angle's rounding,
    // ~pos·inv_freq·2^-24, which is < 1e-5 for positions below ~64.
    const int64_t n = 40, h = 3, d = 48, rot = 32;
    std::vector<float> x = rand_normal(size_t(n * h * d), 77), got = x;
    rope_neox(got.data(), n, h, d, rot, 3, 1e4f);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t hh = 0; hh < h; ++hh)
            for (int64_t j = 0; j < rot / 2; ++j) {
                const double inv = std::pow(1e4, -2.0 * double(j) / double(rot));
                const double phi = double(3 + t) * inv;
                const float* v = x.data() + (t * h + hh) * d;
                const float* g = got.data() + (t * h + hh) * d;
                const double a = v[j], b = v[j + rot / 2];
                EXPECT_NEAR(g[j], a * std::cos(phi) - b * std::sin(phi), 1e-5);
                EXPECT_NEAR(g[j + rot / 2], b * std::cos(phi) + a * std::sin(phi), 1e-5);
            }
}

TEST(Rope, HandComputedTinyCase) {
    // head_dim 6, rot_dim 4, theta 100: inv_freq = {1, 1/10}. Position 1 and 2 (pos0 = 1), one head.
    float x[12] = {1, 2, 3, 4, 5, 6, /*token 1*/ 1, 0, 0, 1, 7, 8};
    rope_neox(x, 2, 1, 6, 4, 1, 100.f);
    // token 0, pos 1: pairs (x0,x2) at φ=1, (x1,x3) at φ=0.1
    const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.1), s2 = std::sin(0.1);
    EXPECT_NEAR(x[0], 1 * c1 - 3 * s1, 1e-6);
    EXPECT_NEAR(x[2], 3 * c1 + 1 * s1, 1e-6);
    EXPECT_NEAR(x[1], 2 * c2 - 4 * s2, 1e-6);
    EXPECT_NEAR(x[3], 4 * c2 + 2 * s2, 1e-6);
    EXPECT_EQ(x[4], 5.f);
    EXPECT_EQ(x[5], 6.f);
    // token 1, pos 2: (1,0) rotated by 2 rad; (0,1) rotated by 0.2 rad
    EXPECT_NEAR(x[6], std::cos(2.0), 1e-6);
    EXPECT_NEAR(x[8], std::sin(2.0), 1e-6);
    EXPECT_NEAR(x[7], -std::sin(0.2), 1e-6);
    EXPECT_NEAR(x[9], std::cos(0.2), 1e-6);
    EXPECT_EQ(x[10], 7.f);
    EXPECT_EQ(x[11], 8.f);
}

TEST(Rope, InvFreqBitExactVsTorch) {
    // torch 2.15 CPU: 1.0 / (1e7 ** (torch.arange(0, 64, 2, dtype=torch.float) / 64))  (Qwen3.5 rope)
    const float want[32] = {
        0x1.0000000000000p+0f, 0x1.3566560000000p-1f, 0x1.75f0360000000p-2f, 0x1.c3f06a0000000p-3f,
        0x1.111aee0000000p-3f, 0x1.4a12ac0000000p-4f, 0x1.8eec7e0000000p-5f, 0x1.e222ee0000000p-6f,
        0x1.235a720000000p-6f, 0x1.6020a40000000p-7f, 0x1.a9942a0000000p-8f, 0x1.012cfa0000000p-8f,
        0x1.36d21a0000000p-9f, 0x1.77a7da0000000p-10f, 0x1.c603c40000000p-11f, 0x1.125c040000000p-11f,
        0x1.4b96c00000000p-12f, 0x1.90c1820000000p-13f, 0x1.e459c40000000p-14f, 0x1.24b0fc0000000p-14f,
        0x1.61bea40000000p-15f, 0x1.ab88820000000p-16f, 0x1.025b560000000p-16f, 0x1.383f880000000p-17f,
        0x1.7961820000000p-18f, 0x1.c8198c0000000p-19f, 0x1.139e940000000p-19f, 0x1.4d1c980000000p-20f,
        0x1.9298ae0000000p-21f, 0x1.e6933a0000000p-22f, 0x1.26091c0000000p-22f, 0x1.635e880000000p-23f};
    float got[32];
    rope_inv_freq(64, 1e7f, got);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(got[j], want[j]) << "j=" << j;
}

TEST(Rope, MatchesHfQwen35Golden) {
    // transformers 5.24 Qwen3_5TextRotaryEmbedding + apply_rotary_pos_emb in fp32 (CPU), head_dim 72,
    // rot_dim 64, theta 1e7, 2 heads, 3 tokens at positions 12345..12347, x[k] = ((37k) % 101 − 50) / 16.
    const int64_t n = 3, h = 2, d = 72;
    std::vector<float> x(static_cast<size_t>(n * h * d));
    for (size_t k = 0; k < x.size(); ++k) x[k] = float(int64_t((k * 37) % 101) - 50) / 16.f;
    rope_neox(x.data(), n, h, d, 64, 12345, 1e7f);
    const int idx[] = {0, 5, 31, 32, 33, 63, 64, 71, 72, 100, 140, 143, 144, 170, 200, 287, 431};
    const float want[] = {0x1.148f300000000p+0f,  -0x1.5837a80000000p+0f, -0x1.bd40e20000000p-1f,
                          0x1.a203480000000p+1f,  0x1.be27200000000p-5f,  -0x1.503a640000000p+1f,
                          -0x1.4000000000000p-2f, -0x1.8800000000000p+1f, -0x1.48b46c0000000p+1f,
                          0x1.c420ca0000000p-1f,  -0x1.5000000000000p+0f, -0x1.6000000000000p-1f,
                          0x1.66bcc00000000p+0f,  -0x1.4b9b560000000p+0f, -0x1.6990540000000p+0f,
                          -0x1.2000000000000p+1f, 0x1.4000000000000p+1f};
    // torch's Sleef cos/sin may be 1 ulp off ours: allow ~2 ulp of |x| ≤ 3.2 per product.
    for (size_t i = 0; i < sizeof(idx) / sizeof(idx[0]); ++i) EXPECT_NEAR(x[idx[i]], want[i], 1e-6) << idx[i];
}

// INTERLEAVED on x equals NEOX on x with each head's first rot_dim dims permuted (2j, 2j+1) → (j, j + half):
// the identity the GGUF converter relies on. Also fast vs reference for both styles with frequency factors.
TEST(Rope, InterleavedIsPermutedNeoxAndFastMatchesRef) {
    struct Case { int64_t n, h, d, rot, pos0; float theta; bool factors; };
    const Case cases[] = {{1, 9, 64, 64, 0, 1e5f, false}, {19, 3, 64, 64, 77, 1e5f, true},
                          {5, 2, 128, 96, 4000, 5e5f, true}, {40, 1, 34, 2, 3, 1e4f, false}};
    uint64_t seed = 50;
    for (const Case& c : cases) {
        const int64_t half = c.rot / 2;
        std::vector<float> ff(half);
        for (int64_t j = 0; j < half; ++j) ff[j] = 1.f + 0.37f * float(j % 5);
        const float* fptr = c.factors ? ff.data() : nullptr;
        const size_t total = size_t(c.n * c.h * c.d);
        std::vector<float> x0 = rand_normal(total, seed++);
        std::vector<float> perm = x0;  // NeoX layout of the interleaved pairs
        for (int64_t r = 0; r < c.n * c.h; ++r)
            for (int64_t j = 0; j < half; ++j) {
                perm[r * c.d + j] = x0[r * c.d + 2 * j];
                perm[r * c.d + j + half] = x0[r * c.d + 2 * j + 1];
            }
        std::vector<float> inter = x0, inter_ref = x0;
        rope(inter.data(), c.n, c.h, c.d, c.rot, c.pos0, c.theta, RopeStyle::INTERLEAVED, fptr);
        rope_ref(inter_ref.data(), c.n, c.h, c.d, c.rot, c.pos0, c.theta, RopeStyle::INTERLEAVED, fptr);
        rope_ref(perm.data(), c.n, c.h, c.d, c.rot, c.pos0, c.theta, RopeStyle::NEOX, fptr);
        std::vector<float> neox_fast = x0, neox_ref = x0;
        rope(neox_fast.data(), c.n, c.h, c.d, c.rot, c.pos0, c.theta, RopeStyle::NEOX, fptr);
        rope_ref(neox_ref.data(), c.n, c.h, c.d, c.rot, c.pos0, c.theta, RopeStyle::NEOX, fptr);
        for (int64_t r = 0; r < c.n * c.h; ++r)
            for (int64_t i = 0; i < c.d; ++i) {
                const size_t k = size_t(r * c.d + i);
                ASSERT_NEAR(inter[k], inter_ref[k], 2e-6f * (1 + std::fabs(inter_ref[k])));
                ASSERT_NEAR(neox_fast[k], neox_ref[k], 2e-6f * (1 + std::fabs(neox_ref[k])));
                float want;
                if (i >= c.rot) want = x0[k];
                else if (i % 2 == 0) want = perm[r * c.d + i / 2];
                else want = perm[r * c.d + i / 2 + half];
                ASSERT_EQ(inter_ref[k], want) << "row " << r << " dim " << i;
            }
        if (c.factors) {  // the factors must matter
            std::vector<float> plain = x0;
            rope_ref(plain.data(), c.n, c.h, c.d, c.rot, c.pos0 + 1, c.theta, RopeStyle::NEOX);
            EXPECT_NE(plain, neox_ref);
        }
    }
}

}  // namespace
}  // namespace ember
