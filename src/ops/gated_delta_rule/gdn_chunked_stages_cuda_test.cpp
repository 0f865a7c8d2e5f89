// White-box GPU test of the chunked GDN prefill: after one piece, every section of the workspace (gdn_chunked.cuh:
// q̂, k̂, W, U', P, S_n, gate factors) against this file's fp64 evaluation of the chunked form — the formulas of
// gated_delta_rule.h written out in double, independent of the kernels — including the zeros the layout
// promises past the tokens and the head dims. Localises a fault to one kernel and one index (printed).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "ops/gated_delta_rule/gdn_chunked.cuh"
#include "ops/gated_delta_rule/gdn_chunked_cuda.h"
#include "ops/gated_delta_rule/gdn_cuda_test_util.h"

namespace ember::cuda {
namespace {

using namespace gdntest;
using gdn_chunked::kBT;

// Expected workspace (same padded layout), fp64 → float. Sections not written by the kernels are NaN here too.
struct Expected {
    std::vector<double> q, k, w, u, p, s, gate;
};

Expected evaluate_chunked(const Layer& L, const Inputs& in, int64_t T, int nc) {
    const GdnShape& s = L.s;
    const int nk = int(s.nk), nv = int(s.nv), dk = int(s.dk), dv = int(s.dv), K = L.K;
    const int DK = gdn_chunked::padded_dk(dk), DV = gdn_chunked::padded_dv(dv);
    const int64_t C = L.C(), kd = int64_t(nk) * dk;
    const double nan = std::nan("");
    Expected e;
    e.q.assign(size_t(nk) * nc * kBT * DK, 0.0);
    e.k = e.q;
    e.w.assign(size_t(nv) * nc * kBT * DK, 0.0);
    e.u.assign(size_t(nv) * nc * kBT * DV, 0.0);
    e.p.assign(size_t(nv) * nc * kBT * kBT, nan);  // tiles above the diagonal are never written
    e.s.assign(size_t(nv) * nc * DK * DV, 0.0);
    e.gate.assign(size_t(nv) * nc * 2 * kBT, 0.0);
    // conv + SiLU over [state ; x], then L2 norms
    std::vector<double> cv(T * C);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t ch = 0; ch < C; ++ch) {
            double a = 0;
            for (int j = 0; j < K; ++j) {
                const int64_t r = t - (K - 1) + j;
                a += double(L.conv_w[ch * K + j]) * (r < 0 ? L.conv_state[(K - 1 + r) * C + ch] : in.qkv[r * C + ch]);
            }
            cv[t * C + ch] = a / (1.0 + std::exp(-a));
        }
    auto normed = [&](int64_t t, int64_t off, double scale, std::vector<double>& out) {
        double ss = 0;
        for (int d = 0; d < dk; ++d) ss += cv[t * C + off + d] * cv[t * C + off + d];
        const double f = scale / std::sqrt(ss + 1e-6);
        for (int d = 0; d < dk; ++d) out[d] = cv[t * C + off + d] * f;
    };
    for (int h = 0; h < nv; ++h) {
        const int kh = gdn_chunked::key_head_of(s, h);
        std::vector<double> S(size_t(dk) * dv);
        for (size_t i = 0; i < S.size(); ++i) S[i] = L.S[size_t(h) * dk * dv + i];
        for (int n = 0; n < nc; ++n) {
            const int64_t t0 = int64_t(n) * kBT;
            const int c = int(std::min<int64_t>(kBT, T - t0));
            std::vector<double> Q(kBT * dk, 0.0), Kh(kBT * dk, 0.0), V(kBT * dv, 0.0), gam(kBT), beta(kBT, 0.0);
            double acc = 0;
            for (int i = 0; i < kBT; ++i) {
                if (i < c) {
                    const int64_t t = t0 + i;
                    std::vector<double> tmp(dk);
                    normed(t, int64_t(kh) * dk, 1.0 / std::sqrt(double(dk)), tmp);
                    std::copy(tmp.begin(), tmp.end(), Q.begin() + i * dk);
                    normed(t, kd + int64_t(kh) * dk, 1.0, tmp);
                    std::copy(tmp.begin(), tmp.end(), Kh.begin() + i * dk);
                    for (int d = 0; d < dv; ++d) V[i * dv + d] = cv[t * C + 2 * kd + int64_t(h) * dv + d];
                    const double x = double(in.a[t * nv + h]) + L.dt_bias[h];
                    acc += -std::exp(double(L.A_log[h])) * (x > 20 ? x : std::log1p(std::exp(x)));
                    beta[i] = 1.0 / (1.0 + std::exp(-double(in.b[t * nv + h])));
                }
                gam[i] = acc;
            }
            const size_t hn = size_t(h) * nc + n, knn = size_t(kh) * nc + n;
            for (int i = 0; i < kBT; ++i) {
                e.gate[hn * 2 * kBT + i] = std::exp(gam[i]);
                e.gate[hn * 2 * kBT + kBT + i] = std::exp(gam[kBT - 1] - gam[i]);
                for (int d = 0; d < dk; ++d) {
                    e.q[(knn * kBT + i) * DK + d] = Q[i * dk + d];
                    e.k[(knn * kBT + i) * DK + d] = Kh[i * dk + d];
                }
            }
            // A, T = (I + A)⁻¹ (forward substitution), W, U, P
            auto dot = [&](const std::vector<double>& X, int i, const std::vector<double>& Y, int j) {
                double r = 0;
                for (int d = 0; d < dk; ++d) r += X[i * dk + d] * Y[j * dk + d];
                return r;
            };
            std::vector<double> A(kBT * kBT, 0.0), Ti(kBT * kBT, 0.0);
            for (int i = 0; i < kBT; ++i)
                for (int j = 0; j < i; ++j) A[i * kBT + j] = beta[i] * dot(Kh, i, Kh, j) * std::exp(gam[i] - gam[j]);
            for (int i = 0; i < kBT; ++i) {
                for (int j = 0; j < i; ++j) {
                    double x = 0;
                    for (int m = j; m < i; ++m) x -= A[i * kBT + m] * Ti[m * kBT + j];
                    Ti[i * kBT + j] = x;
                }
                Ti[i * kBT + i] = 1.0;
            }
            std::vector<double> W(kBT * dk, 0.0), U(kBT * dv, 0.0);
            for (int i = 0; i < kBT; ++i)
                for (int m = 0; m <= i; ++m) {
                    const double f = Ti[i * kBT + m] * beta[m];
                    for (int d = 0; d < dk; ++d) W[i * dk + d] += f * std::exp(gam[m]) * Kh[m * dk + d];
                    for (int d = 0; d < dv; ++d) U[i * dv + d] += f * V[m * dv + d];
                }
            for (int i = 0; i < kBT; ++i) {
                for (int d = 0; d < dk; ++d) e.w[(hn * kBT + i) * DK + d] = W[i * dk + d];
                for (int j = 0; j < 16 * (i / 16 + 1); ++j)
                    e.p[(hn * kBT + i) * kBT + j] = j <= i ? dot(Q, i, Kh, j) * std::exp(gam[i] - gam[j]) : 0.0;
            }
            // S_n, U' = U − W S, S ← e^{γ_last} S + Σ_t e^{γ_last − γ_t} k̂_t U'_tᵀ
            for (int i = 0; i < dk; ++i)
                for (int d = 0; d < dv; ++d) e.s[(hn * DK + i) * DV + d] = S[i * dv + d];
            std::vector<double> Up(kBT * dv);
            for (int i = 0; i < kBT; ++i)
                for (int d = 0; d < dv; ++d) {
                    double x = U[i * dv + d];
                    for (int m = 0; m < dk; ++m) x -= W[i * dk + m] * S[m * dv + d];
                    Up[i * dv + d] = x;
                    e.u[(hn * kBT + i) * DV + d] = x;
                }
            const double gl = gam[kBT - 1];
            for (int m = 0; m < dk; ++m)
                for (int d = 0; d < dv; ++d) {
                    double x = std::exp(gl) * S[m * dv + d];
                    for (int i = 0; i < c; ++i) x += std::exp(gl - gam[i]) * Kh[i * dk + m] * Up[i * dv + d];
                    S[m * dv + d] = x;
                }
        }
    }
    return e;
}

// Section check: max |got − want| / RMS(want) within tol; want = 0 must be exactly 0; NaN in want: not compared.
void check_section(const char* name, const float* got, const std::vector<double>& want, double tol) {
    double ss = 0;
    size_t n = 0;
    for (double w : want)
        if (!std::isnan(w)) ss += w * w, ++n;
    const double rms_w = std::sqrt(ss / std::max<size_t>(n, 1));
    double worst = 0;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) continue;
        const double e = want[i] == 0.0 ? (got[i] == 0.0f ? 0.0 : INFINITY) : std::fabs(got[i] - want[i]) / rms_w;
        if (!(e <= tol) && bad++ == 0) first = i;
        if (std::isfinite(e)) worst = std::max(worst, e);
    }
    std::printf("    %-6s max err / RMS %.2e (RMS %.3e, %zu values)\n", name, worst, rms_w, n);
    EXPECT_EQ(bad, 0u) << name << ": " << bad << " bad values, first at flat index " << first << ": got "
                       << got[first] << " want " << want[first] << " (tol " << tol << " × RMS " << rms_w << ")";
}

TEST(GdnChunkedCuda, WorkspaceMatchesFp64ChunkedForm) {
    SKIP_WITHOUT_GPU();
    struct Case {
        GdnShape s;
        int K;
        int64_t T;
    };
    for (const Case& c : {Case{{2, 6, 32, 16, KeyHeadMap::TILED}, 4, 100}, Case{{3, 3, 40, 13}, 3, 70},
                          Case{{16, 16, 128, 128}, 4, 130}, Case{{16, 32, 128, 128, KeyHeadMap::TILED}, 4, 64}}) {
        SCOPED_TRACE(testing::Message() << shape_str(c.s, c.K) << " T=" << c.T);
        std::printf("  %s T=%lld\n", shape_str(c.s, c.K).c_str(), (long long)c.T);
        const Layer L = make_layer(c.s, c.K, 61);
        const Inputs in = make_inputs(L, c.T, 62);
        DevLayer d(L);
        DevInputs din(in, c.T * c.s.nv * c.s.dv);
        const size_t bytes = gated_delta_net_prefill_workspace_bytes(c.s, c.T);
        DeviceBuffer ws = dev_alloc(bytes / sizeof(float));
        CUDA_CHECK(cudaMemset(ws.get(), 0xFF, bytes));
        gated_delta_net_prefill(make_args(L, d, din), c.T, ws.get(), bytes, nullptr);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());
        const int nc = int((c.T + kBT - 1) / kBT);
        const std::vector<float> host = download<float>(ws, bytes / sizeof(float));
        const gdn_chunked::Layout lay = gdn_chunked::make_layout(c.s, nc, ws.as<float>());
        auto at = [&](const float* p) { return host.data() + (p - ws.as<float>()); };
        const Expected e = evaluate_chunked(L, in, c.T, nc);
        const double tol = budget(c.s, c.K, c.T, kBT);
        check_section("q", at(lay.q), e.q, tol);
        check_section("k", at(lay.k), e.k, tol);
        check_section("gate", at(lay.gate), e.gate, tol);
        check_section("P", at(lay.p), e.p, tol);
        check_section("W", at(lay.w), e.w, tol);
        check_section("S_n", at(lay.s), e.s, tol);
        check_section("U'", at(lay.u), e.u, tol);
    }
}

}  // namespace
}  // namespace ember::cuda
