// ops/linear/linear_fused_cuda_test.cpp: linear_fused (linear_cuda.h) — RMSNorm or SwiGLU prologue and the
// accumulating (residual) epilogue — against the fp64 references rmsnorm_ref / swiglu_ref → linear_ref → + y, on
// random data: formats the streaming q kernel fuses (affine 4/8-bit, groups 32/64/128, bf16/f16/f32 scales) and
// ones that fall back to separate kernels (affine 3-bit, dense bf16), ragged rows and columns, n = 1..8, forced
// q-kernel work splits (K slices: the shared-memory reduction; chunked x: the prologue re-applied per chunk;
// capped grids). y is NaN-poisoned (or holds the residual) before each call; a guard after y must stay untouched.
// Budget: linear_cuda_test.cpp's 2e-5·A + 1e-6 with A over the exact x' (the fp32 prologue's few-ulp rounding
// is ≪ 2⁻¹⁶), plus 2e-5·|residual|.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "ops/norm/norm.h"

namespace ember::cuda {
namespace {

using namespace lintest;

constexpr int NORM = 1, SWIGLU = 2, ACC = 4;  // fusion modes (bits)

std::string mode_name(int m) {
    std::string s = (m & NORM) ? "rmsnorm" : (m & SWIGLU) ? "swiglu" : "plain";
    if (m & ACC) s += "+accumulate";
    return s;
}

// One weight, one fusion mode: builds the raw input, x' and the expected y, then checks each (n, tuning).
void check_fused(const Fmt& f, int64_t rows, int64_t cols, int mode, uint32_t seed,
                 const std::vector<std::pair<int64_t, GemvTuning>>& runs, bool tiled = false) {
    auto c = make_case(f, rows, cols, 8, seed);
    if (tiled) to_tiled(*c);
    std::mt19937 rng(seed ^ 0x5eedu);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int64_t xw = (mode & SWIGLU) ? 2 * cols : cols;  // raw row width
    std::vector<float> raw(static_cast<size_t>(8 * xw));
    std::vector<float> nw(static_cast<size_t>(cols)), xp(static_cast<size_t>(8 * cols));
    for (float& v : raw) v = 0.3f + 2.f * nd(rng);  // non-zero mean: the norm is not ≈ the identity
    for (float& v : nw) v = 1.f + 0.3f * nd(rng);
    const float eps = 1e-6f;
    if (mode & NORM) {
        rmsnorm_ref(raw.data(), nw.data(), xp.data(), 8, cols, eps);
    } else if (mode & SWIGLU) {
        for (int64_t t = 0; t < 8; ++t)
            swiglu_ref(raw.data() + t * xw, raw.data() + t * xw + cols, xp.data() + t * cols, cols);
    } else {
        xp = raw;
    }
    set_x(*c, xp);  // reference W·x'
    std::vector<float> res;
    if (mode & ACC) {
        res.resize(size_t(8 * rows));
        for (size_t i = 0; i < res.size(); ++i) {
            res[i] = nd(rng);
            c->ref[i] += res[i];
            c->A[i] += std::fabs(res[i]);
        }
    }
    DeviceBuffer d_raw = dalloc(raw.size() * 4);
    DeviceBuffer d_nw = dalloc(nw.size() * 4);
    DeviceBuffer d_res = dalloc(res.size() * 4 + 4);
    copy_to_device(d_raw.get(), raw.data(), raw.size() * 4);
    copy_to_device(d_nw.get(), nw.data(), nw.size() * 4);
    if (!res.empty()) copy_to_device(d_res.get(), res.data(), res.size() * 4);
    LinearFusion fz;
    if (mode & NORM) fz.norm_w = d_nw.as<float>(), fz.eps = eps;
    fz.swiglu = (mode & SWIGLU) != 0;
    fz.accumulate = (mode & ACC) != 0;
    const size_t sf = linear_fused_scratch_floats(c->dw, 8);
    DeviceBuffer scratch = dalloc(sf * 4);
    for (const auto& [n, tune] : runs) {
        char what[128];
        std::snprintf(what, sizeof what, "%s G=%d S=%d max_blocks=%d chunk=%d", mode_name(mode).c_str(), tune.q_groups,
                      tune.q_slices, tune.q_max_blocks, tune.q_chunk);
        check(*c, n, Path::GEMV, what, [&](float* y) {
            if (mode & ACC)
                CUDA_CHECK(cudaMemcpy(y, d_res.get(), size_t(n * rows) * 4, cudaMemcpyDeviceToDevice));
            linear_fused(c->dw, d_raw.as<float>(), n, y, fz, nullptr, scratch.as<float>(), sf, &tune);
        });
    }
}

// Each mode on the fused formats and on two fallback formats; ragged rows and columns, n = 1..8.
TEST(LinearFusedCuda, ModesMatchReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 2100;
    const Fmt fused[] = {{true, DType::BF16, 4, 64}, {true, DType::F16, 8, 32}, {true, DType::F32, 4, 128}};
    const Fmt fallback[] = {{true, DType::BF16, 3, 64}, {false, DType::BF16, 0, 0}};
    struct Sh { int64_t rows, cols; };
    const Sh shapes[] = {{67, 2048 + 128}, {1, 384}, {4099, 64 * 9}, {33, 12288}};
    for (int mode : {NORM, SWIGLU, ACC, NORM | ACC, SWIGLU | ACC}) {
        for (const Fmt& f : fused)
            for (const Sh& sh : shapes) {
                if (sh.cols % f.gs) continue;
                check_fused(f, sh.rows, sh.cols, mode, seed++, every_n());
            }
        for (const Fmt& f : fallback) check_fused(f, 67, 2048 + 128, mode, seed++, {{1, {}}, {3, {}}, {8, {}}});
    }
}

// The tiled stream kernel (linear_gemv_stream.cu) applies every prologue / epilogue itself (one launch per token):
// 4-bit groups 32 / 64 and 8-bit group 32, bf16 / f16 / f32 scales, warps per block 8 / 16 / 17 / 20, ragged rows.
TEST(LinearFusedCuda, TiledStreamModes) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 2900;
    const Fmt fmts[] = {{true, DType::BF16, 4, 64}, {true, DType::F16, 4, 32}, {true, DType::F32, 4, 32},
                        {true, DType::F16, 8, 32}};
    struct Sh { int64_t rows, cols; };
    const Sh shapes[] = {{67, 2176}, {1, 1024}, {301, 2560}};
    for (int mode : {NORM, SWIGLU, ACC, NORM | ACC, SWIGLU | ACC})
        for (const Fmt& f : fmts)
            for (const Sh& sh : shapes) {
                Weight probe;
                probe.format = WeightFormat::TILED, probe.rows = sh.rows, probe.cols = sh.cols, probe.bits = f.bits;
                probe.group_size = f.gs, probe.sb_dtype = f.dt;
                ASSERT_TRUE(detail::gemv_stream_fits(probe));
                EXPECT_TRUE(linear_fused_native(probe, 1));
                check_fused(f, sh.rows, sh.cols, mode, seed++, {{1, {}}, {2, {}}, {8, {}}}, true);
            }
}

// Forced q-kernel work splits with each fusion: K slices (the epilogue in the shared-memory reduction), x in
// chunks of 1 or 3 K-units (the prologue applied per chunk; norm factors computed once), capped grids.
TEST(LinearFusedCuda, QKernelWorkSplits) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 2300;
    for (int mode : {NORM | ACC, SWIGLU | ACC, NORM}) {
        std::vector<std::pair<int64_t, GemvTuning>> runs;
        for (int S : {1, 4, 16})
            for (int ch : {0, 1, 3})
                for (int mb : {0, 3}) {
                    GemvTuning t;
                    t.kernel = 1, t.q_groups = (S + ch) % 2 ? 1 : 2, t.q_slices = S, t.q_chunk = ch, t.q_max_blocks = mb;
                    runs.push_back({1 + (S + ch + mb) % (8 / t.q_groups), t});
                }
        check_fused({true, DType::BF16, 4, 64}, 83, 7 * 128 + 64, mode, seed++, runs);
        check_fused({true, DType::F16, 8, 32}, 83, 5 * 32 * 4, mode, seed++, runs);
    }
}

TEST(LinearFusedCuda, NativeWhereTheQKernelRuns) {
    SKIP_WITHOUT_GPU();
    auto q4 = make_case({true, DType::BF16, 4, 64}, 64, 256, 1, 2400);
    auto q3 = make_case({true, DType::BF16, 3, 64}, 64, 256, 1, 2401);
    auto dn = make_case({false, DType::BF16, 0, 0}, 64, 256, 1, 2402);
    EXPECT_TRUE(linear_fused_native(q4->dw, 1));
    EXPECT_TRUE(linear_fused_native(q4->dw, 8));
    EXPECT_FALSE(linear_fused_native(q3->dw, 1));
    EXPECT_FALSE(linear_fused_native(dn->dw, 1));
}

}  // namespace
}  // namespace ember::cuda
