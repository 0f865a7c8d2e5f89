// Tests of the split cuBLAS GEMM (linear_gemm_split.h) for the weights the 4-bit GEMM does not take: the device
// dequantization against ggml_dequantize / weight_row (bit for bit), and y against the fp64 reference (linear_ref)
// on random blocks of every GGML type, dense f32/f16/bf16 and affine 3/5/6-bit, ragged rows and tokens, several
// panels, NaN-poisoned outputs with a guard; both precisions (BF16 measurably worse); determinism; linear()'s
// dispatch for n > 8. Skips without a GPU.
//
// Budgets (A = Σ|w||x| per output): FP32 = three bf16 products of hi + lo splits, each term's error ≤ ~3·2⁻¹⁶|w||x|
// in the worst case: 5e-5·A + 1e-6; BF16 (w and x rounded once, ≤ 2⁻⁸ each): 8e-3·A + 1e-6.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/linear/ggml_random_blocks.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "ops/linear/linear_gemm_split.h"

namespace ember::cuda {
namespace {

using namespace lintest;

const GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// A host weight and its device copy (at a 2-byte offset for GGML: GGUF blocks are only 2-byte aligned).
struct SCase {
    std::vector<uint8_t> bytes;
    std::unique_ptr<Case> affine_or_dense;  // for DENSE / AFFINE sources
    Weight hw, dw;
    DeviceBuffer d_data, d_x;
    std::vector<float> x, ref, A;
};

std::unique_ptr<SCase> ggml_case(GgmlType t, int64_t rows, int64_t cols, int64_t n, uint32_t seed) {
    auto c = std::make_unique<SCase>();
    const float amp = t == GgmlType::Q8_0 ? 0.002f : t == GgmlType::Q6_K ? 0.0005f : 0.01f;
    c->hw = testing_blocks::random_ggml_blocks(t, rows, cols, seed, amp, c->bytes);
    c->d_data = dalloc(c->bytes.size() + 16);
    copy_to_device(static_cast<uint8_t*>(c->d_data.get()) + 2, c->bytes.data(), c->bytes.size());
    c->dw = c->hw;
    c->dw.data = static_cast<uint8_t*>(c->d_data.get()) + 2;
    std::mt19937 rng(seed + 1);
    std::normal_distribution<float> nd(0.f, 1.f);
    c->x.resize(size_t(n * cols));
    for (float& v : c->x) v = nd(rng);
    c->d_x = dalloc(c->x.size() * 4);
    copy_to_device(c->d_x.get(), c->x.data(), c->x.size() * 4);
    c->ref.resize(size_t(n * rows));
    linear_ref(c->hw, c->x.data(), n, c->ref.data());
    c->A = abs_products(c->hw, c->x, n);
    return c;
}

std::unique_ptr<SCase> fmt_case(const Fmt& f, int64_t rows, int64_t cols, int64_t n, uint32_t seed) {
    auto c = std::make_unique<SCase>();
    c->affine_or_dense = make_case(f, rows, cols, n, seed);
    const Case& k = *c->affine_or_dense;
    c->hw = k.hw, c->dw = k.dw, c->x = k.x, c->ref = k.ref;
    c->A.assign(k.A.begin(), k.A.end());
    c->d_x = dalloc(c->x.size() * 4);
    copy_to_device(c->d_x.get(), c->x.data(), c->x.size() * 4);
    return c;
}

void run_split(const SCase& c, int64_t n, float* y, GemmPrecision p) {
    const size_t b = gemm_split_workspace_bytes(c.dw, n);
    DeviceBuffer ws = dalloc(b);
    gemm_split(c.dw, c.d_x.as<float>(), n, y, nullptr, ws.get(), b, p);
}

// Max |error| / A over the outputs (and the budget check).
double check_split(const SCase& c, int64_t n, GemmPrecision p, const std::string& what) {
    SCOPED_TRACE(testing::Message() << what << " rows=" << c.hw.rows << " cols=" << c.hw.cols << " n=" << n << " "
                                    << (p == GemmPrecision::FP32 ? "fp32" : "bf16"));
    const double k = p == GemmPrecision::FP32 ? 5e-5 : 8e-3;
    check_poisoned(size_t(n * c.hw.rows), c.hw.rows, c.ref, [&](size_t i) { return k * c.A[i] + 1e-6; },
                   [&](float* y) { run_split(c, n, y, p); });
    std::vector<float> y(size_t(n * c.hw.rows));
    DeviceBuffer dy = dalloc(y.size() * 4);
    run_split(c, n, dy.as<float>(), p);
    copy_to_host(y.data(), dy.get(), y.size() * 4);
    double worst = 0;
    for (size_t i = 0; i < y.size(); ++i)
        worst = std::max(worst, std::fabs(double(y[i]) - c.ref[i]) / (double(c.A[i]) + 1e-30));
    return worst;
}

// The device panel equals the CPU dequantization bit for bit (GGML: ggml_dequantize; dense: the stored values),
// for a row range not starting at 0.
TEST(GemmSplitCuda, DequantMatchesCpuBitForBit) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 700;
    auto compare = [](const SCase& c, const char* what) {
        SCOPED_TRACE(what);
        const int64_t r0 = 3, rows = c.hw.rows - 3, K = c.hw.cols;
        DeviceBuffer d = dalloc(size_t(rows * K) * 4);
        gemm_split_dequant_rows(c.dw, r0, rows, d.as<float>(), nullptr);
        std::vector<float> got(static_cast<size_t>(rows * K)), want(static_cast<size_t>(K));
        copy_to_host(got.data(), d.get(), got.size() * 4);
        int bad = 0;
        for (int64_t r = 0; r < rows && bad < 5; ++r) {
            weight_row(c.hw, r0 + r, want.data());
            if (std::memcmp(want.data(), got.data() + r * K, size_t(K) * 4) != 0) {
                ADD_FAILURE() << "row " << r0 + r << " differs";
                ++bad;
            }
        }
    };
    for (GgmlType t : kTypes) compare(*ggml_case(t, 19, 512, 1, seed++), ggml_type_traits(t).name);
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) compare(*fmt_case({false, dt, 0, 0}, 19, 264, 1, seed++), "dense");
}

// y against the fp64 reference: every GGML type at ragged rows / tokens, both precisions; BF16 measurably worse.
TEST(GemmSplitCuda, GgmlMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 800;
    for (GgmlType t : kTypes)
        for (int64_t n : {9, 67}) {
            auto c = ggml_case(t, 301, 768, n, seed++);
            const double e32 = check_split(*c, n, GemmPrecision::FP32, ggml_type_traits(t).name);
            const double e16 = check_split(*c, n, GemmPrecision::BF16, ggml_type_traits(t).name);
            EXPECT_GT(e16, 4 * e32) << ggml_type_traits(t).name << ": the bf16 mode is not a different path";
        }
}

// Dense f32 / f16 / bf16 (bf16: wl = 0, no panel) and affine widths the 4-bit GEMM does not take.
TEST(GemmSplitCuda, DenseAndAffineMatchReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 900;
    std::vector<Fmt> fmts = {{false, DType::F32, 0, 0}, {false, DType::F16, 0, 0}, {false, DType::BF16, 0, 0},
                             {true, DType::BF16, 3, 64}, {true, DType::F16, 5, 32}, {true, DType::F32, 6, 128},
                             {true, DType::BF16, 2, 64}};
    for (const Fmt& f : fmts) {
        auto c = fmt_case(f, 133, f.affine ? 3 * f.gs : 200, 41, seed++);
        check_split(*c, 41, GemmPrecision::FP32, fmt_name(f));
        check_split(*c, 41, GemmPrecision::BF16, fmt_name(f));
    }
}

// Rows beyond one panel (P = 64 MiB / (4·K) rounded to 128: 2,048 rows at K = 8,192), and a ragged last panel.
TEST(GemmSplitCuda, SeveralPanels) {
    SKIP_WITHOUT_GPU();
    auto c = ggml_case(GgmlType::Q6_K, 2048 + 77, 8192, 9, 1001);
    check_split(*c, 9, GemmPrecision::FP32, "Q6_K panels");
}

// Same inputs, same bits; linear() routes n > 8 GGML prefill here when given linear_workspace_bytes.
TEST(GemmSplitCuda, DeterministicAndDispatched) {
    SKIP_WITHOUT_GPU();
    auto c = ggml_case(GgmlType::Q5_K, 515, 1024, 100, 1100);
    const size_t ny = size_t(100 * 515);
    DeviceBuffer a = dalloc(ny * 4), b = dalloc(ny * 4);
    run_split(*c, 100, a.as<float>(), GemmPrecision::FP32);
    const size_t wb = linear_workspace_bytes(c->dw, 100);
    ASSERT_EQ(wb, gemm_split_workspace_bytes(c->dw, 100));
    DeviceBuffer ws = dalloc(wb);
    linear(c->dw, c->d_x.as<float>(), 100, b.as<float>(), nullptr, ws.get(), wb);
    std::vector<float> ha(ny), hb(ny);
    copy_to_host(ha.data(), a.get(), ny * 4);
    copy_to_host(hb.data(), b.get(), ny * 4);
    EXPECT_EQ(0, std::memcmp(ha.data(), hb.data(), ny * 4)) << "linear() did not take the split GEMM, or it moved";
}

}  // namespace
}  // namespace ember::cuda
