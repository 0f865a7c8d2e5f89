// ops/linear/linear_ggml_cuda_test.cpp: the CUDA linear (linear_cuda.h) on GGML block-quantized weights
// (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K; F16/BF16/F32 as dense) vs the fp64 reference linear_ref (which
// dequantizes with quant/ggml_blocks.h, itself checked against gguf-py) on random blocks: every code bit
// pattern, random fp16 d/dmin of either sign, random 6-bit / int8 sub-block scales; ragged rows (1, 17, 67,
// 4099), columns of 1, 3, 18 (SmolLM2's 576), odd and many blocks (up to 14336), n = 1..8 and prefill chunks
// (9, 17), data at 2/4/6-byte offsets (unaligned block paths) and a row view starting mid-allocation, x at a
// 4-byte offset, and CUDA-graph capture (bit-identical to eager). Outputs are NaN-poisoned, a guard after y must
// stay untouched.
//
// Error budget per output: the kernel decodes the codes exactly and accumulates in fp32 (per code at most one
// rounding of the weight, ≤ 2⁻²⁴|w|), so |Δ| ≤ c·2⁻²⁴·Σ|w||x| with c the accumulation depth; budget
// 2e-5·Σ|w_c||x_c| + 1e-6 (w from the fp32 dequantized row). One wrongly decoded code moves y by ~|w||x| ≈
// Σ|w||x|/K, far above the budget for K ≤ 14336.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "core/dtype.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "ops/linear/linear_gemm_split.h"
#include "ops/linear/weight_repack.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_type.h"

namespace ember::cuda {
namespace {

using lintest::check_poisoned;
using lintest::dalloc;

const GgmlType kQuantTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                                GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// Byte offsets of the fp16 fields (d, m / dmin) of a block.
std::vector<int> half_fields(GgmlType t) {
    switch (t) {
        case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: return {0};
        case GgmlType::Q4_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
        case GgmlType::Q6_K: return {208};
        default: return {};
    }
}

struct GCase {
    GgmlType type{};
    int64_t rows = 0, cols = 0, ntok = 0;
    std::vector<uint8_t> host;  // blocks (quantized) or elements (plain types)
    Weight hw, dw;
    DeviceBuffer d_data, d_x;
    std::vector<float> x, ref;
    std::vector<double> A;  // Σ |w||x| per output
};

// Random weight of `type` (rows × cols), device copy at `offset` bytes into its allocation, random x, reference.
std::unique_ptr<GCase> make_gcase(GgmlType type, int64_t rows, int64_t cols, int64_t ntok, uint32_t seed,
                                  int offset = 0) {
    auto c = std::make_unique<GCase>();
    c->type = type, c->rows = rows, c->cols = cols, c->ntok = ntok;
    const GgmlTypeTraits tr = ggml_type_traits(type);
    EMBER_CHECK(cols % tr.block_elems == 0, "test: %s cols %lld", tr.name, (long long)cols);
    std::mt19937 rng(seed);
    const int64_t row_bytes = cols / tr.block_elems * tr.block_bytes;
    c->host.resize(size_t(rows * row_bytes));
    std::normal_distribution<float> nd(0.f, 1.f);
    if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) {
        const DType dt = type == GgmlType::F32 ? DType::F32 : type == GgmlType::F16 ? DType::F16 : DType::BF16;
        for (int64_t i = 0; i < rows * cols; ++i) store_float(c->host.data(), dt, size_t(i), 0.05f * nd(rng));
    } else {
        for (uint8_t& b : c->host) b = uint8_t(rng());  // every code / scale bit pattern
        const float amp = type == GgmlType::Q8_0 ? 0.002f : type == GgmlType::Q6_K ? 0.0005f : 0.01f;
        for (int64_t blk = 0; blk < rows * (cols / tr.block_elems); ++blk)
            for (int off : half_fields(type)) {
                const uint16_t h = f32_to_f16(amp * nd(rng));  // finite, either sign
                std::memcpy(c->host.data() + blk * tr.block_bytes + off, &h, 2);
            }
    }
    Weight& W = c->hw;
    W.format = WeightFormat::GGML, W.ggml_type = type, W.rows = rows, W.cols = cols, W.data = c->host.data();
    c->dw = W;
    c->d_data = dalloc(c->host.size() + 16);
    copy_to_device(static_cast<uint8_t*>(c->d_data.get()) + offset, c->host.data(), c->host.size());
    c->dw.data = static_cast<uint8_t*>(c->d_data.get()) + offset;
    c->x.resize(size_t(ntok * cols));
    for (float& v : c->x) v = nd(rng);
    c->d_x = dalloc(c->x.size() * 4 + 16);
    copy_to_device(c->d_x.get(), c->x.data(), c->x.size() * 4);
    c->ref.resize(size_t(ntok * rows));
    linear_ref(W, c->x.data(), ntok, c->ref.data());
    c->A.assign(size_t(ntok * rows), 0.0);
    std::vector<float> w(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        weight_row(W, r, w.data());
        for (int64_t t = 0; t < ntok; ++t) {
            double s = 0;
            for (int64_t k = 0; k < cols; ++k) s += std::fabs(double(w[size_t(k)]) * c->x[size_t(t * cols + k)]);
            c->A[size_t(t * rows + r)] = s;
        }
    }
    return c;
}

template <class Fn>
void check(const GCase& c, int64_t n, const std::string& what, Fn&& fn) {
    SCOPED_TRACE(testing::Message() << ggml_type_traits(c.type).name << " rows=" << c.rows << " cols=" << c.cols
                                    << " n=" << n << " " << what);
    check_poisoned(size_t(n * c.rows), c.rows, c.ref, [&](size_t i) { return 2e-5 * c.A[i] + 1e-6; }, fn);
}

void run(const GCase& c, int64_t n, float* y, const float* x = nullptr) {
    linear(c.dw, x ? x : c.d_x.as<float>(), n, y, nullptr, nullptr, 0);
}

// Every quantized type: column counts of 1, 3, 18 (576 for 32-element blocks), an odd count and many blocks;
// rows 1, 17, 67; n = 1..8 (one GEMV) and 9, 17 (prefill in 8-token chunks).
TEST(LinearGgmlCuda, AllTypesMatchReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 1;
    for (GgmlType t : kQuantTypes) {
        const int64_t be = ggml_type_traits(t).block_elems;
        const std::vector<int64_t> cols = be == 32 ? std::vector<int64_t>{32, 96, 576, 32 * 37, 4096 + 32}
                                                   : std::vector<int64_t>{256, 768, 256 * 7, 4096 + 256};
        for (int64_t k : cols)
            for (int64_t rows : {1, 17, 67}) {
                auto c = make_gcase(t, rows, k, 17, seed++);
                for (int64_t n = 1; n <= 8; ++n) check(*c, n, "linear", [&](float* y) { run(*c, n, y); });
                for (int64_t n : {9, 17}) check(*c, n, "linear (chunks of 8)", [&](float* y) { run(*c, n, y); });
            }
    }
}

// More rows than the resident blocks' warps cover in one pass: with x staged in shared memory the grid is capped at
// the resident blocks and each warp walks several row groups (the test above never leaves the first pass).
TEST(LinearGgmlCuda, ManyRowsWalkRowGroups) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 900;
    for (GgmlType t : kQuantTypes) {
        const int64_t k = ggml_type_traits(t).block_elems == 32 ? 96 : 256;
        auto c = make_gcase(t, 40013, k, 3, seed++);
        for (int64_t n : {1, 3}) check(*c, n, "linear", [&](float* y) { run(*c, n, y); });
    }
}

// Q4_0 / Q4_1 / Q8_0 / Q4_K as the CUDA backend stores them (weight_repack.h: exact affine group 32), run by the affine
// kernels, against the reference of the GGML blocks: rows 1, 17, 67, 4099; n = 1..8 and 9, 17.
TEST(LinearGgmlCuda, RepackedAffineMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 500;
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K})
        for (int64_t k : {32, 576, 768, 4096 + 32, 4096 + 256})
            for (int64_t rows : {1, 17, 67, 4099}) {
                if ((t == GgmlType::Q4_K) != (k % 256 == 0) || (rows == 4099 && k != 576 && k != 768)) continue;
                auto c = make_gcase(t, rows, k, 17, seed++);
                auto r = ggml_to_affine(c->hw);
                ASSERT_TRUE(r.is_ok()) << r.message();
                const RepackedWeight R = std::move(r).value();
                DeviceBuffer dc = dalloc(R.codes.size()), ds = dalloc(R.scales.size()), db = dalloc(R.biases.size());
                copy_to_device(dc.get(), R.codes.data(), R.codes.size());
                copy_to_device(ds.get(), R.scales.data(), R.scales.size());
                copy_to_device(db.get(), R.biases.data(), R.biases.size());
                Weight dw = R.w;
                dw.data = dc.get(), dw.scales = ds.get(), dw.biases = db.get();
                for (int64_t n : {1, 2, 3, 5, 8, 9, 17})
                    check(*c, n, "repacked affine", [&](float* y) {
                        linear(dw, c->d_x.as<float>(), n, y, nullptr, nullptr, 0);
                    });
            }
}

// Larger matrices: 4099 rows (a ragged last warp), and long rows (Llama-8B down projection width).
TEST(LinearGgmlCuda, LargeShapesMatchReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 300;
    for (GgmlType t : kQuantTypes) {
        auto c = make_gcase(t, 4099, 1024, 8, seed++);
        for (int64_t n : {1, 3, 8}) check(*c, n, "linear", [&](float* y) { run(*c, n, y); });
    }
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
        auto c = make_gcase(t, 33, 14336, 8, seed++);
        for (int64_t n : {1, 2, 8}) check(*c, n, "linear", [&](float* y) { run(*c, n, y); });
    }
}

// Blocks at 2-, 4- and 6-byte offsets (no 16-byte alignment: the funnel-shift loads everywhere, incl. the last
// block of the matrix), a row view starting at an odd row of a stacked matrix, and x at a 4-byte offset.
TEST(LinearGgmlCuda, UnalignedDataAndX) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 500;
    for (GgmlType t : kQuantTypes)
        for (int off : {2, 4, 6}) {
            const int64_t k = ggml_type_traits(t).block_elems == 32 ? 32 * 19 : 256 * 3;
            auto c = make_gcase(t, 19, k, 8, seed++, off);
            for (int64_t n : {1, 4, 8}) check(*c, n, "data+" + std::to_string(off), [&](float* y) { run(*c, n, y); });
            DeviceBuffer xs = dalloc(c->x.size() * 4 + 16);
            copy_to_device(xs.as<float>() + 1, c->x.data(), c->x.size() * 4);
            check(*c, 3, "x+1", [&](float* y) { run(*c, 3, y, xs.as<float>() + 1); });
            // rows [5, 19) of the same device matrix (starts 5 rows in: any 2-byte alignment)
            auto v = make_gcase(t, 19, k, 8, seed - 1, off);  // same data and x (same seed)
            Weight view = v->dw.rows_view(5, 19);
            GCase sub;
            sub.type = t, sub.rows = 14, sub.cols = k, sub.ntok = 8, sub.dw = view;
            sub.ref.assign(v->ref.begin(), v->ref.end());
            sub.A.assign(v->A.begin(), v->A.end());
            // re-index the reference rows 5..18 of each token
            for (int64_t tt = 0; tt < 8; ++tt)
                for (int64_t r = 0; r < 14; ++r) {
                    sub.ref[size_t(tt * 14 + r)] = v->ref[size_t(tt * 19 + 5 + r)];
                    sub.A[size_t(tt * 14 + r)] = v->A[size_t(tt * 19 + 5 + r)];
                }
            for (int64_t n : {1, 8})
                check(sub, n, "rows_view(5, 19)",
                      [&](float* y) { linear(view, v->d_x.as<float>(), n, y, nullptr, nullptr, 0); });
        }
}

// GGML F32/F16/BF16 tensors run as dense matrices.
TEST(LinearGgmlCuda, PlainTypesRunAsDense) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 700;
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
        auto c = make_gcase(t, 37, 576, 8, seed++);
        for (int64_t n : {1, 5, 8}) check(*c, n, "dense", [&](float* y) { run(*c, n, y); });
    }
}

// Captured in a CUDA graph (first use of the kernels inside the capture), replayed: bit-identical to eager.
TEST(LinearGgmlCuda, GraphCaptureMatchesEager) {
    SKIP_WITHOUT_GPU();
    std::vector<std::unique_ptr<GCase>> cases;
    uint32_t seed = 900;
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0})
        cases.push_back(make_gcase(t, 45, ggml_type_traits(t).block_elems == 32 ? 576 : 1024, 8, seed++));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int64_t n : {1, 4, 8}) {
        std::vector<DeviceBuffer> yg, ye;
        for (auto& c : cases) {
            yg.push_back(dalloc(size_t(n * c->rows) * 4));
            ye.push_back(dalloc(size_t(n * c->rows) * 4));
            CUDA_CHECK(cudaMemset(yg.back().get(), 0xff, yg.back().bytes()));
        }
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (size_t i = 0; i < cases.size(); ++i)
            linear(cases[i]->dw, cases[i]->d_x.as<float>(), n, yg[i].as<float>(), st, nullptr, 0);
        CUDA_CHECK(cudaStreamEndCapture(st, &graph));
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        for (size_t i = 0; i < cases.size(); ++i)
            linear(cases[i]->dw, cases[i]->d_x.as<float>(), n, ye[i].as<float>(), st, nullptr, 0);
        CUDA_CHECK(cudaStreamSynchronize(st));
        for (size_t i = 0; i < cases.size(); ++i) {
            SCOPED_TRACE(testing::Message() << ggml_type_traits(cases[i]->type).name << " n=" << n);
            const auto g = download<float>(yg[i], size_t(n * cases[i]->rows));
            const auto e = download<float>(ye[i], size_t(n * cases[i]->rows));
            EXPECT_EQ(0, std::memcmp(g.data(), e.data(), g.size() * 4)) << "graph replay differs from eager";
            check(*cases[i], n, "graph", [&](float* y) {
                CUDA_CHECK(cudaMemcpy(y, yg[i].get(), g.size() * 4, cudaMemcpyDeviceToDevice));
            });
        }
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaStreamDestroy(st));
}

// The dispatch names the GGML kernel; prefill (n > 8) asks for the split GEMM's workspace (linear_gemm_split.h),
// decode for none.
TEST(LinearGgmlCuda, DescribeAndWorkspace) {
    std::vector<uint8_t> bytes(16);
    Weight W;
    W.format = WeightFormat::GGML, W.ggml_type = GgmlType::Q4_K, W.rows = 4096, W.cols = 4096, W.data = bytes.data();
    char buf[64];
    EXPECT_STREQ("ggml Q4_K fp32", linear_gemv_describe(W, 1, buf, sizeof buf));
    EXPECT_EQ(0u, linear_workspace_bytes(W, 8));
    EXPECT_EQ(gemm_split_workspace_bytes(W, 512), linear_workspace_bytes(W, 512));
}

}  // namespace
}  // namespace ember::cuda
