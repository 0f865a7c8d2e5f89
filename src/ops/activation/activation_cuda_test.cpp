// GPU tests for swiglu / swiglu_fused (activation_cuda.h) against swiglu_ref: ragged and misaligned lengths,
// extreme gate values, aliasing, fused [gate | up] rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/activation/activation.h"
#include "ops/activation/activation_cuda.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

std::vector<float> randn(size_t n, uint64_t seed, float sd) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(0.f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    // A few extremes: e^−g overflows for g < −88.7 (silu → −0), saturates for large g.
    const float ext[] = {-100.f, -88.5f, -30.f, 0.f, -0.f, 30.f, 100.f};
    for (size_t i = 0; i < n && i < 7; ++i) v[(i * 7919) % n] = ext[i];
    return v;
}

DeviceBuffer alloc_floats(size_t n) {
    auto b = DeviceBuffer::alloc(n * sizeof(float) + 64, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

// expf (≤ 2 ulp), one division, one product: within 8 ulp of the fp64 reference; atol for the results that
// underflow (the reference keeps 1e-37 where fp32 gives −0).
void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size() && bad < 5; ++i) {
        const float tol = 8 * 1.1920929e-7f * std::fabs(want[i]) + 1e-30f;
        if (!(std::fabs(got[i] - want[i]) <= tol)) {
            ADD_FAILURE() << "at " << i << ": got " << got[i] << " want " << want[i];
            ++bad;
        }
    }
}

TEST(ActivationCuda, SwigluMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 1;
    for (int64_t n : {1, 3, 4, 5, 1000, 1023, 6144 * 7, (1 << 20) + 3})
        for (int offset : {0, 1, 3}) {
            SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
            std::vector<float> g = randn(size_t(n), seed++, 3.f), u = randn(size_t(n), seed++, 1.f);
            DeviceBuffer dg = alloc_floats(size_t(n) + 4), du = alloc_floats(size_t(n) + 4),
                         dout = alloc_floats(size_t(n) + 4);
            copy_to_device(dg.as<float>() + offset, g.data(), size_t(n) * 4);
            copy_to_device(du.as<float>() + offset, u.data(), size_t(n) * 4);
            CUDA_CHECK(cudaMemset(dout.get(), 0xff, dout.bytes()));
            swiglu(dg.as<float>() + offset, du.as<float>() + offset, dout.as<float>() + offset, n, nullptr);
            CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
            copy_to_host(got.data(), dout.as<float>() + offset, size_t(n) * 4);
            swiglu_ref(g.data(), u.data(), want.data(), n);
            expect_close(got, want);
        }
}

TEST(ActivationCuda, SwigluInPlace) {
    SKIP_WITHOUT_GPU();
    const int64_t n = 4099;
    std::vector<float> g = randn(size_t(n), 11, 3.f), u = randn(size_t(n), 12, 1.f), want(static_cast<size_t>(n));
    swiglu_ref(g.data(), u.data(), want.data(), n);
    DeviceBuffer dg = alloc_floats(size_t(n)), du = alloc_floats(size_t(n));
    copy_to_device(dg.get(), g.data(), size_t(n) * 4);
    copy_to_device(du.get(), u.data(), size_t(n) * 4);
    swiglu(dg.as<float>(), du.as<float>(), dg.as<float>(), n, nullptr);  // out == gate
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got(static_cast<size_t>(n));
    copy_to_host(got.data(), dg.get(), size_t(n) * 4);
    expect_close(got, want);
}

TEST(ActivationCuda, SwigluFusedMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 50;
    for (int64_t rows : {1, 5, 64})
        for (int64_t I : {6144, 1001, 4, 3}) {
            SCOPED_TRACE(testing::Message() << "rows=" << rows << " I=" << I);
            std::vector<float> gu = randn(size_t(rows * 2 * I), seed++, 3.f);
            std::vector<float> g(size_t(rows * I)), u(size_t(rows * I)), want(size_t(rows * I));
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < I; ++j) {
                    g[size_t(r * I + j)] = gu[size_t(r * 2 * I + j)];
                    u[size_t(r * I + j)] = gu[size_t(r * 2 * I + I + j)];
                }
            swiglu_ref(g.data(), u.data(), want.data(), rows * I);
            DeviceBuffer dgu = alloc_floats(gu.size()), dout = alloc_floats(size_t(rows * I));
            copy_to_device(dgu.get(), gu.data(), gu.size() * 4);
            CUDA_CHECK(cudaMemset(dout.get(), 0xff, dout.bytes()));
            swiglu_fused(dgu.as<float>(), dout.as<float>(), rows, I, nullptr);
            CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<float> got(size_t(rows * I));
            copy_to_host(got.data(), dout.get(), got.size() * 4);
            expect_close(got, want);
        }
}

}  // namespace
}  // namespace ember::cuda
