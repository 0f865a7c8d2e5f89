// Tests for ops/gated_delta_rule: the ref on a hand-computed case, recurrent and chunked kernels (every kernel
// table this CPU runs) vs the fp64 ref, sequence splitting, head maps, gates; plus a disabled timing test.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <time.h>
#include <vector>

#include "core/parallel.h"
#include "ops/gated_delta_rule/gated_delta_rule.h"
#include "ops/gated_delta_rule/gated_delta_rule_kernels.h"

namespace ember {
namespace {

constexpr double kEps32 = std::numeric_limits<float>::epsilon();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

enum class Decay { REALISTIC, WEAK };  // WEAK: g ≈ 0, β ≈ 1, the worst conditioning for (I + A)⁻¹

struct Problem {
    GdnShape s;
    int64_t T;
    std::vector<float> q, k, v, g, beta, S0;
};

Problem make_problem(const GdnShape& s, int64_t T, uint32_t seed, Decay decay = Decay::REALISTIC) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.0f, 1.0f);
    Problem p{s, T, {}, {}, {}, {}, {}, {}};
    auto randn = [&](int64_t n, float scale) {
        std::vector<float> x(n);
        for (auto& e : x) e = scale * nd(gen);
        return x;
    };
    // q̂, k̂: random directions, L2-normalised; q̂ scaled by dk^-0.5 (what the op expects).
    p.q = randn(T * s.nk * s.dk, 1.0f);
    p.k = randn(T * s.nk * s.dk, 1.0f);
    for (int64_t r = 0; r < T * s.nk; ++r) {
        double nq = 0, nk = 0;
        for (int64_t i = 0; i < s.dk; ++i) {
            nq += double(p.q[r * s.dk + i]) * p.q[r * s.dk + i];
            nk += double(p.k[r * s.dk + i]) * p.k[r * s.dk + i];
        }
        for (int64_t i = 0; i < s.dk; ++i) {
            p.q[r * s.dk + i] = float(p.q[r * s.dk + i] / std::sqrt(nq * s.dk));
            p.k[r * s.dk + i] = float(p.k[r * s.dk + i] / std::sqrt(nk));
        }
    }
    p.v = randn(T * s.nv * s.dv, 1.0f);
    p.S0 = randn(s.nv * s.dk * s.dv, 0.5f);
    // Gates as the model makes them: A_log ∈ [0, 2.5], dt_bias ∈ [−4, 0] (verification.md), a, b ~ N(0, 1).
    auto a = randn(T * s.nv, 1.0f), b = randn(T * s.nv, 1.0f);
    std::vector<float> A_log(s.nv), dt_bias(s.nv);
    for (int64_t h = 0; h < s.nv; ++h) {
        A_log[h] = 2.5f * ud(gen);
        dt_bias[h] = -4.0f * ud(gen);
    }
    p.g.resize(T * s.nv);
    p.beta.resize(T * s.nv);
    gdn_gates_ref(a.data(), b.data(), A_log.data(), dt_bias.data(), T, s.nv, p.g.data(), p.beta.data());
    if (decay == Decay::WEAK)
        for (int64_t i = 0; i < T * s.nv; ++i) {
            p.g[i] = -0.01f * ud(gen);
            p.beta[i] = 0.9f + 0.1f * ud(gen);
        }
    return p;
}

struct Out {
    std::vector<float> o, S;
};

Out run_ref(const Problem& p) {
    Out r{std::vector<float>(p.T * p.s.nv * p.s.dv, kNaN), p.S0};
    gated_delta_rule_ref(p.s, p.T, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(), r.S.data(),
                         r.o.data());
    return r;
}

// chunk == 0: recurrent.
Out run_kernel(const gdn::Kernels& kern, const Problem& p, int64_t chunk) {
    Out r{std::vector<float>(p.T * p.s.nv * p.s.dv, kNaN), p.S0};
    if (chunk == 0)
        gdn::recurrent_with(kern, p.s, p.T, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(),
                            r.S.data(), r.o.data());
    else
        gdn::chunked_with(kern, p.s, p.T, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(),
                          r.S.data(), r.o.data(), chunk);
    return r;
}

double rms(const std::vector<float>& x) {
    double s = 0;
    for (float e : x) s += double(e) * e;
    return std::sqrt(s / std::max<size_t>(1, x.size()));
}

// max |got − want| / RMS(want); NaN (an unwritten element) propagates.
double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
    double m = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(double(got[i]) - want[i]);
        if (std::isnan(e)) return e;  // a NaN anywhere fails, even if finite values follow
        if (e > m) m = e;
    }
    return m / rms(want);
}

// Error budget, relative to RMS(o), derived from fp32 round-off: each token's output and state update are dot
// products of length ≤ dk + C (C = chunk, 1 for the recurrent form), so one token adds ≈ √(dk + C)·ε of
// relative error; the state carries errors forward (contracted by e^g ≤ 1 and ‖I − βkkᵀ‖ ≤ 1), so over T
// tokens they add up at most like a random walk, √T. Factor 8 covers max-vs-RMS (≈ 4σ) and the 2–3 roundings
// per element. For dk = 16, C = 64, T = 200: 1.4e-4; T = 1: 8.5e-6.
double budget(const GdnShape& s, int64_t T, int64_t chunk) {
    return 8.0 * kEps32 * std::sqrt(double(s.dk + std::max<int64_t>(chunk, 1)) * double(T));
}

std::vector<const gdn::Kernels*> all_kernels() {
    std::vector<const gdn::Kernels*> ks{&gdn::kernels_portable()};
    if (gdn::kernels_avx2()) ks.push_back(gdn::kernels_avx2());
    return ks;
}

const GdnShape kShapes[] = {
    {2, 2, 16, 16, KeyHeadMap::GROUPED}, {2, 2, 16, 16, KeyHeadMap::TILED},
    {2, 6, 16, 24, KeyHeadMap::GROUPED}, {2, 6, 16, 24, KeyHeadMap::TILED},
    {1, 2, 128, 128, KeyHeadMap::GROUPED},  // model-sized heads: full AVX2 blocks
    {3, 3, 40, 13, KeyHeadMap::GROUPED},    // odd sizes: every tail path
};
const int64_t kTs[] = {1, 2, 3, 63, 64, 65, 129, 200};

std::string shape_str(const GdnShape& s) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "nk=%lld nv=%lld dk=%lld dv=%lld %s", (long long)s.nk, (long long)s.nv,
                  (long long)s.dk, (long long)s.dv, s.map == KeyHeadMap::GROUPED ? "GROUPED" : "TILED");
    return buf;
}

// RMS(got − want) / RMS(want), i.e. √NMSE.
double rms_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
    double e = 0;
    for (size_t i = 0; i < got.size(); ++i) e += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    return std::sqrt(e / std::max<size_t>(1, got.size())) / rms(want);
}

// max-abs error within `tol`, and √NMSE within tol/8 (the budget's factor 8 is for max-vs-RMS).
void check_against_ref(const Out& got, const Out& want, double tol, double* worst) {
    const double eo = max_rel_err(got.o, want.o), eS = max_rel_err(got.S, want.S);
    EXPECT_LE(eo, tol) << "o";
    EXPECT_LE(eS, tol) << "S";
    EXPECT_LE(rms_rel_err(got.o, want.o), tol / 8) << "o";
    EXPECT_LE(rms_rel_err(got.S, want.S), tol / 8) << "S";
    if (worst) *worst = std::max({*worst, eo / tol, eS / tol});
}

TEST(GatedDeltaRule, RecurrentMatchesRef) {
    uint32_t seed = 10000;
    double worst = 0;
    for (const auto* kern : all_kernels())
        for (const GdnShape& s : kShapes)
            for (int64_t T : kTs) {
                SCOPED_TRACE(testing::Message() << kern->name << " " << shape_str(s) << " T=" << T << " seed=" << seed);
                Problem p = make_problem(s, T, seed++);
                check_against_ref(run_kernel(*kern, p, 0), run_ref(p), budget(s, T, 1), &worst);
            }
    std::printf("recurrent: worst error / budget = %.3f\n", worst);
}

TEST(GatedDeltaRule, ChunkedMatchesRef) {
    uint32_t seed = 20000;
    double worst = 0;
    for (const auto* kern : all_kernels())
        for (const GdnShape& s : kShapes)
            for (int64_t T : kTs)
                for (int64_t chunk : {64, 16, 1}) {
                    SCOPED_TRACE(testing::Message() << kern->name << " " << shape_str(s) << " T=" << T
                                                    << " chunk=" << chunk << " seed=" << seed);
                    Problem p = make_problem(s, T, seed++);
                    check_against_ref(run_kernel(*kern, p, chunk), run_ref(p), budget(s, T, chunk), &worst);
                }
    std::printf("chunked: worst error / budget = %.3f\n", worst);
}

// g ≈ 0 and β ≈ 1: nothing decays, A has entries near ±1 and (I + A)⁻¹ is at its largest.
TEST(GatedDeltaRule, WeakDecayStress) {
    uint32_t seed = 30000;
    double worst = 0;
    for (const auto* kern : all_kernels())
        for (const GdnShape& s : {kShapes[0], kShapes[2], kShapes[4]})
            for (int64_t T : {65, 200}) {
                SCOPED_TRACE(testing::Message() << kern->name << " " << shape_str(s) << " T=" << T << " seed=" << seed);
                Problem p = make_problem(s, T, seed++, Decay::WEAK);
                const Out want = run_ref(p);
                check_against_ref(run_kernel(*kern, p, 0), want, budget(s, T, 1), &worst);
                check_against_ref(run_kernel(*kern, p, 64), want, budget(s, T, 64), &worst);
            }
    std::printf("weak decay: worst error / budget = %.3f\n", worst);
}

// Splitting the sequence (prefill A then B; chunked prefill then recurrent decode) ≡ one call.
TEST(GatedDeltaRule, SplitSequenceMatchesOneCall) {
    uint32_t seed = 40000;
    for (const auto* kern : all_kernels())
        for (const GdnShape& s : {kShapes[1], kShapes[2]})
            for (auto [T, T1] : {std::pair<int64_t, int64_t>{200, 70}, {129, 64}, {65, 1}, {3, 2}}) {
                for (int64_t second_chunk : {64, 0}) {  // 0: the second part runs recurrent
                    SCOPED_TRACE(testing::Message() << kern->name << " " << shape_str(s) << " T=" << T << " T1=" << T1
                                                    << " second=" << second_chunk << " seed=" << seed);
                    Problem p = make_problem(s, T, seed++);
                    const Out one = run_kernel(*kern, p, 64);
                    Out two{std::vector<float>(one.o.size(), kNaN), p.S0};
                    const int64_t qk = s.nk * s.dk, vo = s.nv * s.dv;
                    gdn::chunked_with(*kern, s, T1, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(),
                                      two.S.data(), two.o.data(), 64);
                    const int64_t T2 = T - T1;
                    const float *q2 = p.q.data() + T1 * qk, *k2 = p.k.data() + T1 * qk, *v2 = p.v.data() + T1 * vo;
                    const float *g2 = p.g.data() + T1 * s.nv, *b2 = p.beta.data() + T1 * s.nv;
                    if (second_chunk)
                        gdn::chunked_with(*kern, s, T2, q2, k2, v2, g2, b2, two.S.data(), two.o.data() + T1 * vo, 64);
                    else
                        gdn::recurrent_with(*kern, s, T2, q2, k2, v2, g2, b2, two.S.data(), two.o.data() + T1 * vo);
                    const Out want = run_ref(p);
                    const double tol = budget(s, T, 64);
                    check_against_ref(two, want, tol, nullptr);
                    check_against_ref(two, one, 2 * tol, nullptr);
                }
            }
}

// The head map: GROUPED ≡ ref on q, k repeat_interleave'd to nv heads; TILED ≡ ref on q, k tiled nv/nk times.
TEST(GatedDeltaRule, HeadMapsMatchExpandedHeads) {
    for (KeyHeadMap map : {KeyHeadMap::GROUPED, KeyHeadMap::TILED}) {
        const GdnShape s{2, 6, 16, 24, map};
        Problem p = make_problem(s, 5, map == KeyHeadMap::GROUPED ? 50001 : 50002);
        Problem e = p;
        e.s = {6, 6, 16, 24, KeyHeadMap::GROUPED};
        e.q.assign(5 * 6 * 16, 0.0f);
        e.k.assign(5 * 6 * 16, 0.0f);
        for (int64_t t = 0; t < 5; ++t)
            for (int64_t h = 0; h < 6; ++h) {
                const int64_t kh = map == KeyHeadMap::GROUPED ? h / 3 : h % 2;
                for (int64_t i = 0; i < 16; ++i) {
                    e.q[(t * 6 + h) * 16 + i] = p.q[(t * 2 + kh) * 16 + i];
                    e.k[(t * 6 + h) * 16 + i] = p.k[(t * 2 + kh) * 16 + i];
                }
            }
        const Out a = run_ref(p), b = run_ref(e);
        EXPECT_EQ(a.o, b.o);
        EXPECT_EQ(a.S, b.S);
        const Out c = run_kernel(gdn::kernels_best(), p, 64);
        check_against_ref(c, a, budget(s, 5, 64), nullptr);
    }
}

// Hand-computed, nk = nv = 1, dk = dv = 2, S0 = [[1, 0], [0, 2]] (rows = k index):
//  t=1: α = 0.5, β = 0.5, k = [1, 0], q = [0, 1], v = [3, 4]
//       S = αS0 = [[.5, 0], [0, 1]]; u = Sᵀk = [.5, 0]; δ = .5([3, 4] − u) = [1.25, 2]
//       S += kδᵀ → [[1.75, 2], [0, 1]];  o1 = Sᵀq = [0, 1]
//  t=2: α = 1, β = 1, k = [.6, .8], q = [1, 0], v = [1, −1]
//       u = .6·[1.75, 2] + .8·[0, 1] = [1.05, 2]; δ = [−.05, −3]
//       S += kδᵀ → [[1.72, .2], [−.04, −1.4]];  o2 = Sᵀq = [1.72, .2]
TEST(GatedDeltaRule, HandComputedTwoTokens) {
    const GdnShape s{1, 1, 2, 2};
    const float q[4] = {0, 1, 1, 0}, k[4] = {1, 0, 0.6f, 0.8f}, v[4] = {3, 4, 1, -1};
    const float g[2] = {std::log(0.5f), 0.0f}, beta[2] = {0.5f, 1.0f};
    const float o_want[4] = {0, 1, 1.72f, 0.2f}, S_want[4] = {1.72f, 0.2f, -0.04f, -1.4f};
    auto check = [&](const char* what, auto fn) {
        SCOPED_TRACE(what);
        float S[4] = {1, 0, 0, 2}, o[4] = {kNaN, kNaN, kNaN, kNaN};
        fn(S, o);
        for (int i = 0; i < 4; ++i) {
            EXPECT_NEAR(o[i], o_want[i], 1e-6) << i;
            EXPECT_NEAR(S[i], S_want[i], 1e-6) << i;
        }
    };
    check("ref", [&](float* S, float* o) { gated_delta_rule_ref(s, 2, q, k, v, g, beta, S, o); });
    for (const auto* kern : all_kernels()) {
        check(kern->name, [&](float* S, float* o) { gdn::recurrent_with(*kern, s, 2, q, k, v, g, beta, S, o); });
        check(kern->name, [&](float* S, float* o) { gdn::chunked_with(*kern, s, 2, q, k, v, g, beta, S, o, 64); });
    }
}

TEST(GatedDeltaRule, GatesMatchRef) {
    const int64_t T = 37, nv = 6;
    std::mt19937 gen(60000);
    std::normal_distribution<float> nd(0.0f, 6.0f);  // wide: reaches the softplus threshold (x > 20) and beyond
    std::vector<float> a(T * nv), b(T * nv), A_log(nv), dt_bias(nv);
    for (auto& x : a) x = nd(gen);
    for (auto& x : b) x = nd(gen);
    for (int64_t h = 0; h < nv; ++h) {
        A_log[h] = 0.4f * h;
        dt_bias[h] = -0.7f * h + 1.0f;
    }
    a[0] = 19.9f - dt_bias[0];  // just below and above the threshold
    a[1] = 20.1f - dt_bias[1];
    std::vector<float> g(T * nv), be(T * nv), gr(T * nv), br(T * nv);
    gdn_gates(a.data(), b.data(), A_log.data(), dt_bias.data(), T, nv, g.data(), be.data());
    gdn_gates_ref(a.data(), b.data(), A_log.data(), dt_bias.data(), T, nv, gr.data(), br.data());
    for (int64_t i = 0; i < T * nv; ++i) {
        EXPECT_LE(g[i], 0.0f);
        // fp32: a + dt_bias rounds (≤ ε|x|, and softplus' ≤ 1), exp/log1p/multiply add a few ε relative.
        const double x = double(a[i]) + dt_bias[i % nv];
        EXPECT_NEAR(g[i], gr[i], 8 * kEps32 * (std::fabs(gr[i]) + std::exp(A_log[i % nv]) * std::fabs(x))) << i;
        EXPECT_NEAR(be[i], br[i], 4 * kEps32) << i;
    }
}

TEST(GatedDeltaRule, EmptySequenceLeavesStateAlone) {
    const GdnShape s{2, 6, 16, 24};
    Problem p = make_problem(s, 1, 80000);
    for (const auto* kern : all_kernels()) {
        std::vector<float> S = p.S0;
        gdn::recurrent_with(*kern, s, 0, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(), S.data(),
                            nullptr);
        gdn::chunked_with(*kern, s, 0, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(), S.data(),
                          nullptr, 64);
        EXPECT_EQ(S, p.S0);
    }
}

double thread_cpu_ms() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// Timing (run with --gtest_also_run_disabled_tests): Qwen3.5-2B GDN shapes (nk = nv = 16, dk = dv = 128).
// One thread is timed in thread CPU time (robust on a shared machine), all threads in wall time; best of 7.
TEST(GatedDeltaRuleBench, DISABLED_Prefill512) {
    const GdnShape s{16, 16, 128, 128};
    const int saved = num_threads();
    for (int64_t T : {512, 1}) {
        Problem p = make_problem(s, T, 70000);
        std::vector<float> S(p.S0.size()), o(T * s.nv * s.dv);
        auto time = [&](int64_t chunk, bool cpu) {
            double best = 1e30;
            for (int rep = 0; rep < 7; ++rep) {
                S = p.S0;
                const auto w0 = std::chrono::steady_clock::now();
                const double c0 = thread_cpu_ms();
                if (chunk == 0)
                    gated_delta_rule_recurrent(s, T, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(),
                                               S.data(), o.data());
                else
                    gated_delta_rule_chunked(s, T, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(),
                                             S.data(), o.data(), chunk);
                const auto wall = std::chrono::steady_clock::now() - w0;
                const double ms = cpu ? thread_cpu_ms() - c0 : std::chrono::duration<double, std::milli>(wall).count();
                best = std::min(best, ms);
            }
            return best;
        };
        for (int threads : {1, saved}) {
            set_num_threads(threads);
            const bool cpu = threads == 1;
            std::printf("T=%lld %s, %d thread(s), %s: recurrent %.3f ms", (long long)T, gdn::kernels_best().name,
                        threads, cpu ? "thread CPU time" : "wall", time(0, cpu));
            for (int64_t chunk : {64, 32, 16})
                std::printf(", chunked C=%lld %.3f ms", (long long)chunk, time(chunk, cpu));
            std::printf("\n");
        }
        set_num_threads(saved);
    }
}

}  // namespace
}  // namespace ember
