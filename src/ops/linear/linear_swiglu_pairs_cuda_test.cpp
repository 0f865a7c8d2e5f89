// ops/linear/linear_swiglu_pairs_cuda_test.cpp: linear_swiglu_pairs (linear_cuda.h) — the [gate; up] GEMV whose
// tiles pair gate row j with up row I + j and store h = silu(gate)·up — on random data: affine 4/8-bit, groups
// 32/64/128, bf16/f16/f32 scales, ragged I and K, n = 1..8, plain x and the RMSNorm prologue, forced q-kernel work
// splits (K slices: the product formed in the shared-memory reduction; x in chunks: the sums kept per tile between
// chunks; capped grids). h is NaN-poisoned with a guard after it. Two checks per run:
//  - against the fp64 reference silu(g)·u of g, u = W·x' (linear_ref), within the GEMV budget (2e-5·A + 1e-6 on
//    g and u, linear_cuda_test.cpp) carried through silu(g)·u;
//  - bit for bit against linear_fused with the same tuning followed by swiglu_fused (the separate kernels the
//    batched step ran before): the same tile math on the same rows.
// And where it must refuse (nothing written): odd rows, a tiled weight, 3-bit, n = 0 or 9.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/env.h"
#include "ops/activation/activation.h"
#include "ops/activation/activation_cuda.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "ops/norm/norm.h"

namespace ember::cuda {
namespace {

using namespace lintest;

double silu(double g) { return g / (1.0 + std::exp(-g)); }

// One [gate; up] weight of 2·I rows × K, x' plain or normed; every (n, tuning) of `runs`.
void check_pairs(const Fmt& f, int64_t I, int64_t K, bool norm, uint32_t seed,
                 const std::vector<std::pair<int64_t, GemvTuning>>& runs) {
    auto c = make_case(f, 2 * I, K, 8, seed);
    std::mt19937 rng(seed ^ 0x9a1du);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> raw(size_t(8 * K)), nw(static_cast<size_t>(K)), xp(size_t(8 * K));
    for (float& v : raw) v = 0.3f + 2.f * nd(rng);
    for (float& v : nw) v = 1.f + 0.3f * nd(rng);
    const float eps = 1e-6f;
    if (norm) rmsnorm_ref(raw.data(), nw.data(), xp.data(), 8, K, eps);
    else xp = raw;
    set_x(*c, xp);  // c->ref = W·x' [8, 2I], c->A its budget magnitudes
    std::vector<float> href(size_t(8 * I));
    std::vector<double> hb(size_t(8 * I));
    for (int64_t t = 0; t < 8; ++t)
        for (int64_t j = 0; j < I; ++j) {
            const size_t ig = size_t(t * 2 * I + j), iu = ig + size_t(I), ih = size_t(t * I + j);
            const double g = c->ref[ig], u = c->ref[iu];
            const double bg = 2e-5 * c->A[ig] + 1e-6, bu = 2e-5 * c->A[iu] + 1e-6;
            href[ih] = float(silu(g) * u);
            // |silu'| ≤ 1.1; fp32 rounding of silu and of the product: a few ulp of |h|
            hb[ih] = 1.1 * (std::fabs(u) + bu) * bg + (std::fabs(silu(g)) + 1.1 * bg) * bu + 1e-6 * std::fabs(href[ih]) +
                     1e-7;
        }
    DeviceBuffer d_raw = dalloc(raw.size() * 4), d_nw = dalloc(nw.size() * 4);
    copy_to_device(d_raw.get(), raw.data(), raw.size() * 4);
    copy_to_device(d_nw.get(), nw.data(), nw.size() * 4);
    LinearFusion fz;
    if (norm) fz.norm_w = d_nw.as<float>(), fz.eps = eps;
    DeviceBuffer gu = dalloc(size_t(8 * 2 * I) * 4), h2 = dalloc(size_t(8 * I) * 4);
    const size_t sf = linear_fused_scratch_floats(c->dw, 8);
    DeviceBuffer scratch = dalloc(sf * 4);
    for (const auto& [n, tune] : runs) {
        SCOPED_TRACE(testing::Message() << fmt_name(f) << " I=" << I << " K=" << K << " n=" << n
                                        << (norm ? " rmsnorm" : " plain") << " kernel=" << tune.kernel
                                        << " G=" << tune.q_groups << " S=" << tune.q_slices << " chunk=" << tune.q_chunk
                                        << " max_blocks=" << tune.q_max_blocks);
        GemvTuning t = tune;
        t.kernel = 1;  // the comparison below runs the q kernel with the same work split
        std::vector<float> got(size_t(n * I));
        check_poisoned(size_t(n * I), I, href, [&](size_t i) { return hb[i]; }, [&](float* h) {
            ASSERT_TRUE(linear_swiglu_pairs(c->dw, d_raw.as<float>(), n, h, fz, nullptr, &t));
            CUDA_CHECK(cudaDeviceSynchronize());
            copy_to_host(got.data(), h, got.size() * 4);
        });
        linear_fused(c->dw, d_raw.as<float>(), n, gu.as<float>(), fz, nullptr, scratch.as<float>(), sf, &t);
        swiglu_fused(gu.as<float>(), h2.as<float>(), n, I, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> sep(size_t(n * I));
        copy_to_host(sep.data(), h2.get(), sep.size() * 4);
        int bad = 0;
        for (size_t i = 0; i < sep.size() && bad < 5; ++i)
            if (std::memcmp(&got[i], &sep[i], 4) != 0) {
                ADD_FAILURE() << "h[" << i / size_t(I) << ", " << i % size_t(I) << "] = " << got[i]
                              << ", the GEMV then swiglu_fused: " << sep[i];
                ++bad;
            }
    }
}

// Formats and ragged shapes: I not a multiple of 8 (a last tile with fewer pairs), K of 3 to 48 K-units, the
// 2B's gate_up (I = 6144, K = 2048) at every n.
TEST(LinearSwigluPairsCuda, MatchesReferenceAndSeparateKernels) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 5100;
    const Fmt fmts[] = {{true, DType::BF16, 4, 64}, {true, DType::F16, 8, 32}, {true, DType::F32, 4, 128},
                        {true, DType::BF16, 8, 128}};
    struct Sh { int64_t I, K; };
    const Sh shapes[] = {{67, 2048 + 128}, {1, 384}, {8, 64 * 9}, {1029, 1024}};
    for (bool norm : {false, true}) {
        for (const Fmt& f : fmts)
            for (const Sh& sh : shapes) {
                if (sh.K % f.gs) continue;
                check_pairs(f, sh.I, sh.K, norm, seed++, every_n());
            }
        check_pairs({true, DType::BF16, 4, 64}, 6144, 2048, norm, seed++, every_n());
    }
}

// Forced work splits: K slices (the product formed in reduce_round), x in chunks of 1 or 3 K-units (the gate and up
// partial sums kept per tile between chunks), capped grids (several rounds per block), G = 1 / 2 / 4.
TEST(LinearSwigluPairsCuda, QKernelWorkSplits) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 5300;
    std::vector<std::pair<int64_t, GemvTuning>> runs;
    for (int S : {1, 4, 16})
        for (int ch : {0, 1, 3})
            for (int mb : {0, 3}) {
                GemvTuning t;
                t.q_groups = 1 << ((S + ch + mb) % 3), t.q_slices = S, t.q_chunk = ch, t.q_max_blocks = mb;
                runs.push_back({1 + (S + ch + mb) % (8 / t.q_groups), t});
            }
    for (bool norm : {false, true}) {
        check_pairs({true, DType::BF16, 4, 64}, 83, 7 * 128 + 64, norm, seed++, runs);
        check_pairs({true, DType::F16, 8, 32}, 45, 5 * 32 * 4, norm, seed++, runs);
    }
}

TEST(LinearSwigluPairsCuda, RefusesWhatItCannotRun) {
    SKIP_WITHOUT_GPU();
    auto odd = make_case({true, DType::BF16, 4, 64}, 65, 256, 1, 5400);
    auto q3 = make_case({true, DType::BF16, 3, 64}, 64, 256, 1, 5401);
    auto ok = make_case({true, DType::BF16, 4, 64}, 64, 256, 1, 5402);
    DeviceBuffer h = dalloc(64 * 9 * 4);
    CUDA_CHECK(cudaMemset(h.get(), 0xff, h.bytes()));
    const float* x = ok->d_x.as<float>();
    EXPECT_FALSE(linear_swiglu_pairs(odd->dw, x, 1, h.as<float>(), {}, nullptr));
    EXPECT_FALSE(linear_swiglu_pairs(q3->dw, x, 1, h.as<float>(), {}, nullptr));
    EXPECT_FALSE(linear_swiglu_pairs(ok->dw, x, 0, h.as<float>(), {}, nullptr));
    EXPECT_FALSE(linear_swiglu_pairs(ok->dw, x, 9, h.as<float>(), {}, nullptr));
    Weight tiled = ok->dw;
    tiled.format = WeightFormat::TILED;
    EXPECT_FALSE(linear_swiglu_pairs(tiled, x, 1, h.as<float>(), {}, nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> got(64 * 9);
    copy_to_host(got.data(), h.get(), got.size() * 4);
    for (uint32_t g : got) ASSERT_EQ(g, 0xffffffffu) << "a refused call wrote h";
    EXPECT_TRUE(linear_swiglu_pairs(ok->dw, x, 1, h.as<float>(), {}, nullptr));
}

}  // namespace
}  // namespace ember::cuda
