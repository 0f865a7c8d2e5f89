// GPU tests for add_rmsnorm / rmsnorm (norm_cuda.h) against rmsnorm_ref: ragged widths (vector, scalar,
// register and re-read paths), with and without the residual add, misaligned pointers, aliasing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/norm/norm.h"
#include "ops/norm/norm_cuda.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

std::vector<float> randn(size_t n, uint64_t seed, float mean = 0.f, float sd = 1.f) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

DeviceBuffer alloc_floats(size_t n) {
    auto b = DeviceBuffer::alloc(n * sizeof(float) + 16, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

// Tolerance: the kernel's only differences from the fp64 reference are the fp32 Σx² (tree of per-thread
// partials, error ≲ log2(H)·ε relative) and three fp32 roundings per element; 8·(log2 H + 4)·ε covers both.
float rel_tol(int64_t H) { return 8.f * (std::log2(float(H)) + 4.f) * 1.1920929e-7f; }

struct Case {
    int64_t n, H;
};

// offset: element offset applied to every device pointer (1 → misaligned, forcing the scalar path).
void run_case(const Case& c, bool with_y, int offset, uint64_t seed) {
    const int64_t N = c.n * c.H;
    std::vector<float> x = randn(size_t(N), seed, 0.3f, 2.f), y = randn(size_t(N), seed + 1),
                       w = randn(size_t(c.H), seed + 2, 1.f, 0.2f);
    DeviceBuffer dx = alloc_floats(size_t(N) + 4), dy = alloc_floats(size_t(N) + 4), dw = alloc_floats(size_t(c.H) + 4),
                 dout = alloc_floats(size_t(N) + 4);
    float* px = dx.as<float>() + offset;
    float* py = dy.as<float>() + offset;
    float* pw = dw.as<float>() + offset;
    float* pout = dout.as<float>() + offset;
    copy_to_device(px, x.data(), size_t(N) * 4);
    copy_to_device(py, y.data(), size_t(N) * 4);
    copy_to_device(pw, w.data(), size_t(c.H) * 4);
    CUDA_CHECK(cudaMemset(dout.get(), 0xff, dout.bytes()));  // NaN poison
    add_rmsnorm(px, with_y ? py : nullptr, pw, pout, c.n, c.H, 1e-6f, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got_x(static_cast<size_t>(N)), got(static_cast<size_t>(N));
    copy_to_host(got_x.data(), px, size_t(N) * 4);
    copy_to_host(got.data(), pout, size_t(N) * 4);

    std::vector<float> xs = x;
    if (with_y)
        for (int64_t i = 0; i < N; ++i) xs[size_t(i)] = x[size_t(i)] + y[size_t(i)];  // fp32 add, as the kernel
    std::vector<float> want(static_cast<size_t>(N));
    rmsnorm_ref(xs.data(), w.data(), want.data(), c.n, c.H, 1e-6f);

    const float tol = rel_tol(c.H);
    int bad = 0;
    double err2 = 0, ref2 = 0;
    for (int64_t i = 0; i < N && bad < 5; ++i) {
        const size_t k = size_t(i);
        if (std::memcmp(&got_x[k], &xs[k], 4) != 0) {
            ADD_FAILURE() << "residual mismatch at " << i << ": " << got_x[k] << " vs " << xs[k];
            ++bad;
        }
        const float e = std::fabs(got[k] - want[k]);
        if (!(e <= tol * std::fabs(want[k]) + 1e-30f)) {
            ADD_FAILURE() << "out mismatch at row " << i / c.H << " col " << i % c.H << ": " << got[k] << " vs "
                          << want[k];
            ++bad;
        }
        err2 += double(e) * e;
        ref2 += double(want[k]) * want[k];
    }
    EXPECT_LE(err2 / ref2, double(tol) * tol) << "NMSE, n=" << c.n << " H=" << c.H;
}

TEST(NormCuda, AddRmsnormMatchesReference) {
    SKIP_WITHOUT_GPU();
    // Widths: vectorised register path (K = 1..16), scalar path (H % 4 != 0), re-read paths (H/4 > 4096 and
    // H > 4096 scalar), tiny rows.
    const Case cases[] = {{1, 2048}, {7, 4096}, {3, 256}, {5, 1000}, {2, 16384}, {2, 20000}, {3, 4095},
                          {2, 5001},  {4, 1},    {1, 33},   {9, 7},    {1, 12},    {3, 64 * 1024 + 4}};
    uint64_t seed = 100;
    for (const Case& c : cases)
        for (bool with_y : {false, true}) {
            SCOPED_TRACE(testing::Message() << "n=" << c.n << " H=" << c.H << " y=" << with_y);
            run_case(c, with_y, 0, seed += 7);
        }
}

TEST(NormCuda, MisalignedPointersUseScalarPath) {
    SKIP_WITHOUT_GPU();
    for (int64_t H : {2048, 4096, 8})
        for (bool with_y : {false, true}) {
            SCOPED_TRACE(testing::Message() << "H=" << H << " y=" << with_y);
            run_case({3, H}, with_y, 1, 900 + uint64_t(H));
        }
}

TEST(NormCuda, InPlaceAndAliasing) {
    SKIP_WITHOUT_GPU();
    const int64_t n = 3, H = 2048, N = n * H;
    std::vector<float> x = randn(size_t(N), 5), y = randn(size_t(N), 6), w = randn(size_t(H), 7, 1.f, 0.2f);
    std::vector<float> want(static_cast<size_t>(N));
    // rmsnorm in place (out == x).
    {
        DeviceBuffer dx = alloc_floats(size_t(N)), dw = alloc_floats(size_t(H));
        copy_to_device(dx.get(), x.data(), size_t(N) * 4);
        copy_to_device(dw.get(), w.data(), size_t(H) * 4);
        rmsnorm(dx.as<float>(), dw.as<float>(), dx.as<float>(), n, H, 1e-6f, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got(static_cast<size_t>(N));
        copy_to_host(got.data(), dx.get(), size_t(N) * 4);
        rmsnorm_ref(x.data(), w.data(), want.data(), n, H, 1e-6f);
        for (int64_t i = 0; i < N; ++i)
            ASSERT_NEAR(got[size_t(i)], want[size_t(i)], rel_tol(H) * std::fabs(want[size_t(i)])) << i;
    }
    // add_rmsnorm with out == y.
    {
        DeviceBuffer dx = alloc_floats(size_t(N)), dy = alloc_floats(size_t(N)), dw = alloc_floats(size_t(H));
        copy_to_device(dx.get(), x.data(), size_t(N) * 4);
        copy_to_device(dy.get(), y.data(), size_t(N) * 4);
        copy_to_device(dw.get(), w.data(), size_t(H) * 4);
        add_rmsnorm(dx.as<float>(), dy.as<float>(), dw.as<float>(), dy.as<float>(), n, H, 1e-6f, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got(static_cast<size_t>(N)), xs(static_cast<size_t>(N));
        copy_to_host(got.data(), dy.get(), size_t(N) * 4);
        for (int64_t i = 0; i < N; ++i) xs[size_t(i)] = x[size_t(i)] + y[size_t(i)];
        rmsnorm_ref(xs.data(), w.data(), want.data(), n, H, 1e-6f);
        for (int64_t i = 0; i < N; ++i)
            ASSERT_NEAR(got[size_t(i)], want[size_t(i)], rel_tol(H) * std::fabs(want[size_t(i)])) << i;
    }
}

}  // namespace
}  // namespace ember::cuda
