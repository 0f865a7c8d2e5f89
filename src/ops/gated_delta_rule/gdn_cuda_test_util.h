// Shared pieces of the GPU Gated DeltaNet tests (gdn_cuda_test.cpp: the step kernel; gdn_chunked_cuda_test.cpp:
// the chunked prefill): a random layer and inputs, the CPU composition of the fp64 references, device copies
// with NaN-poisoned outputs, and the error measures and budget (derivation at budget()).
#pragma once
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/causal_conv1d/causal_conv1d.h"
#include "ops/gated_delta_rule/gated_delta_rule.h"
#include "ops/gated_delta_rule/gdn_cuda.h"
#include "ops/norm/norm.h"

namespace ember::cuda::gdntest {

inline constexpr double kEps32 = std::numeric_limits<float>::epsilon();

#ifndef SKIP_WITHOUT_GPU
#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"
#endif

// One GDN layer: weights and recurrent state (host copies).
struct Layer {
    GdnShape s;
    int K;
    float eps;
    std::vector<float> conv_w, A_log, dt_bias, norm_w;  // [C, K]  [nv]  [nv]  [dv]
    std::vector<float> conv_state, S;                   // [K−1, C]  [nv, dk, dv]
    int64_t C() const { return 2 * s.nk * s.dk + s.nv * s.dv; }
};

struct Inputs {
    std::vector<float> qkv, z, a, b;  // [T, C]  [T, nv·dv]  [T, nv]  [T, nv]
};

inline std::vector<float> randn(std::mt19937& gen, int64_t n, float mean, float sd) {
    std::normal_distribution<float> nd(mean, sd);
    std::vector<float> x(n);
    for (auto& e : x) e = nd(gen);
    return x;
}

inline Layer make_layer(const GdnShape& s, int K, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> ud(0.0f, 1.0f);
    Layer L{s, K, 1e-6f, {}, {}, {}, {}, {}, {}};
    const int64_t C = L.C();
    L.conv_w = randn(gen, C * K, 0.0f, 0.5f);
    L.A_log.resize(s.nv);
    L.dt_bias.resize(s.nv);
    // Gates as the model makes them (verification.md): A_log ∈ [0, 2.5], dt_bias ∈ [−4, 0].
    for (int64_t h = 0; h < s.nv; ++h) {
        L.A_log[h] = 2.5f * ud(gen);
        L.dt_bias[h] = -4.0f * ud(gen);
    }
    L.norm_w = randn(gen, s.dv, 1.0f, 0.2f);
    L.conv_state = randn(gen, (K - 1) * C, 0.0f, 1.0f);  // non-zero incoming state
    L.S = randn(gen, s.nv * s.dk * s.dv, 0.0f, 0.5f);
    return L;
}

inline Inputs make_inputs(const Layer& L, int64_t T, uint32_t seed) {
    std::mt19937 gen(seed);
    return {randn(gen, T * L.C(), 0.0f, 1.0f), randn(gen, T * L.s.nv * L.s.dv, 0.0f, 1.0f),
            randn(gen, T * L.s.nv, 0.0f, 1.0f), randn(gen, T * L.s.nv, 0.0f, 1.0f)};
}

// The CPU composition (layers/gated_delta_net.cpp without the projections), every op its fp64 reference.
// Advances L.conv_state and L.S by T tokens; returns y [T, nv·dv].
inline std::vector<float> ref_step(Layer& L, const Inputs& in, int64_t T) {
    const GdnShape& s = L.s;
    const int64_t C = L.C(), kd = s.nk * s.dk, vd = s.nv * s.dv;
    std::vector<float> c(T * C), q(T * kd), k(T * kd), v(T * vd), g(T * s.nv), beta(T * s.nv), o(T * vd), y(T * vd);
    causal_conv1d_silu_ref(in.qkv.data(), T, C, L.conv_w.data(), L.K, L.conv_state.data(), c.data());
    for (int64_t t = 0; t < T; ++t) {
        std::memcpy(&q[t * kd], &c[t * C], kd * sizeof(float));
        std::memcpy(&k[t * kd], &c[t * C + kd], kd * sizeof(float));
        std::memcpy(&v[t * vd], &c[t * C + 2 * kd], vd * sizeof(float));
    }
    l2norm_ref(q.data(), q.data(), T * s.nk, s.dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(s.dk)));
    l2norm_ref(k.data(), k.data(), T * s.nk, s.dk, 1e-6f, 1.0f);
    gdn_gates_ref(in.a.data(), in.b.data(), L.A_log.data(), L.dt_bias.data(), T, s.nv, g.data(), beta.data());
    gated_delta_rule_ref(s, T, q.data(), k.data(), v.data(), g.data(), beta.data(), L.S.data(), o.data());
    rmsnorm_gated_ref(o.data(), in.z.data(), L.norm_w.data(), y.data(), T * s.nv, s.dv, L.eps);
    return y;
}

inline DeviceBuffer dev(const std::vector<float>& v) {
    auto b = upload(v, "gdn test buffer");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}
inline DeviceBuffer dev_alloc(size_t n_floats) {
    auto b = DeviceBuffer::alloc(n_floats * sizeof(float), "gdn test buffer");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

// Device copy of a layer (weights + state) and of one batch of inputs; y poisoned with NaN.
struct DevLayer {
    DeviceBuffer conv_w, A_log, dt_bias, norm_w, conv_state, S;
    explicit DevLayer(const Layer& L)
        : conv_w(dev(L.conv_w)), A_log(dev(L.A_log)), dt_bias(dev(L.dt_bias)), norm_w(dev(L.norm_w)),
          conv_state(dev(L.conv_state)), S(dev(L.S)) {}
};
struct DevInputs {
    DeviceBuffer qkv, z, a, b, y;
    DevInputs(const Inputs& in, size_t y_floats)
        : qkv(dev(in.qkv)), z(dev(in.z)), a(dev(in.a)), b(dev(in.b)), y(dev_alloc(y_floats)) {
        CUDA_CHECK(cudaMemset(y.get(), 0xFF, y_floats * sizeof(float)));  // all-ones bits: NaN
    }
};

inline GdnDecodeArgs make_args(const Layer& L, const DevLayer& d, const DevInputs& in) {
    return {in.qkv.as<float>(), in.z.as<float>(), in.a.as<float>(), in.b.as<float>(), d.conv_w.as<float>(),
            d.A_log.as<float>(), d.dt_bias.as<float>(), d.norm_w.as<float>(), d.conv_state.as<float>(),
            d.S.as<float>(), in.y.as<float>(), L.s, L.K, L.eps};
}

inline double rms(const std::vector<float>& x) {
    double s = 0;
    for (float e : x) s += double(e) * e;
    return std::sqrt(s / std::max<size_t>(1, x.size()));
}

// max |got − want| / RMS(want) and RMS(got − want) / RMS(want); any NaN or inf (an unwritten element: outputs
// are poisoned with NaN) makes both NaN.
inline void rel_errs(const std::vector<float>& got, const std::vector<float>& want, double* max_err,
                     double* rms_err) {
    double m = 0, e2 = 0;
    bool bad = false;
    for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(double(got[i]) - want[i]);
        bad |= !std::isfinite(e);
        m = std::max(m, e);
        e2 += e * e;
    }
    const double r = rms(want), nan = std::numeric_limits<double>::quiet_NaN();
    *max_err = bad ? nan : m / r;
    *rms_err = bad ? nan : std::sqrt(e2 / std::max<size_t>(1, got.size())) / r;
}

// Error budget relative to RMS, from fp32 round-off (as gated_delta_rule_test.cpp): per token the state update
// and output are dot products of length dk (plus the K-tap conv, the norms and the gates, a few ε each), so one
// token adds ≈ √(dk + K)·ε; the state carries errors forward contracted (e^g ≤ 1, ‖I − βkkᵀ‖ ≤ 1), adding up like
// a random walk over the tokens seen so far. Factor 16: max-vs-RMS (≈ 4σ) × the extra fp32 stages around the core
// (the CPU-only test uses 8 for the core alone). dk = 128, T = 1: 2.2e-5; T = 130: 2.5e-4. The chunked form
// (chunk > 0) sums within-chunk products of length up to dk + chunk as well (gated_delta_rule_test.cpp).
inline double budget(const GdnShape& s, int K, int64_t tokens_so_far, int64_t chunk = 0) {
    return 16.0 * kEps32 * std::sqrt(double(s.dk + K + chunk) * double(std::max<int64_t>(tokens_so_far, 1)));
}

inline void expect_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                         double tol, double* worst) {
    ASSERT_EQ(got.size(), want.size());
    double emax, erms;
    rel_errs(got, want, &emax, &erms);
    EXPECT_LE(emax, tol) << what << " max error / RMS";
    EXPECT_LE(erms, tol / 8) << what << " RMS error / RMS";
    if (worst && std::isfinite(emax)) *worst = std::max(*worst, emax / tol);
}

// The conv state is a copy of inputs: bit-exact.
inline void expect_equal(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0u) << what << ": first mismatch at " << first << " got " << got[first] << " want "
                       << want[first];
}

inline std::string shape_str(const GdnShape& s, int K) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "nk=%lld nv=%lld dk=%lld dv=%lld %s K=%d", (long long)s.nk, (long long)s.nv,
                  (long long)s.dk, (long long)s.dv, s.map == KeyHeadMap::GROUPED ? "GROUPED" : "TILED", K);
    return buf;
}

struct ShapeCase {
    GdnShape s;
    int K;
};

inline float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace ember::cuda::gdntest
