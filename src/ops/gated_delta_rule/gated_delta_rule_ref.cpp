// Reference gated delta rule and gates: the formulas of gated_delta_rule.h in plain loops, fp64 state and sums.
#include <cmath>
#include <vector>

#include "core/check.h"
#include "ops/gated_delta_rule/gated_delta_rule.h"

namespace ember {

void gated_delta_rule_ref(const GdnShape& s, int64_t T, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* S, float* o) {
    EMBER_CHECK(s.nk > 0 && s.nv > 0 && s.dk > 0 && s.dv > 0 && s.nv % s.nk == 0, "bad GdnShape");
    const int64_t dk = s.dk, dv = s.dv, r = s.nv / s.nk;
    std::vector<double> St(dk * dv), u(dv), delta(dv);
    for (int64_t h = 0; h < s.nv; ++h) {
        const int64_t kh = s.map == KeyHeadMap::GROUPED ? h / r : h % s.nk;
        float* Sh = S + h * dk * dv;
        for (int64_t i = 0; i < dk * dv; ++i) St[i] = Sh[i];
        for (int64_t t = 0; t < T; ++t) {
            const float* qt = q + (t * s.nk + kh) * dk;
            const float* kt = k + (t * s.nk + kh) * dk;
            const float* vt = v + (t * s.nv + h) * dv;
            const double alpha = std::exp(static_cast<double>(g[t * s.nv + h]));
            const double bt = beta[t * s.nv + h];
            for (int64_t i = 0; i < dk * dv; ++i) St[i] *= alpha;                // S ← e^g S
            for (int64_t j = 0; j < dv; ++j) {                                    // u = Sᵀk
                u[j] = 0;
                for (int64_t i = 0; i < dk; ++i) u[j] += St[i * dv + j] * kt[i];
            }
            for (int64_t j = 0; j < dv; ++j) delta[j] = bt * (vt[j] - u[j]);     // δ = β(v − u)
            for (int64_t i = 0; i < dk; ++i)                                      // S ← S + k δᵀ
                for (int64_t j = 0; j < dv; ++j) St[i * dv + j] += kt[i] * delta[j];
            float* ot = o + (t * s.nv + h) * dv;                                  // o = Sᵀq
            for (int64_t j = 0; j < dv; ++j) {
                double acc = 0;
                for (int64_t i = 0; i < dk; ++i) acc += St[i * dv + j] * qt[i];
                ot[j] = static_cast<float>(acc);
            }
        }
        for (int64_t i = 0; i < dk * dv; ++i) Sh[i] = static_cast<float>(St[i]);
    }
}

void gdn_gates_ref(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t T, int64_t nv,
                   float* g, float* beta) {
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nv; ++h) {
            const double x = static_cast<double>(a[t * nv + h]) + dt_bias[h];
            const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
            g[t * nv + h] = static_cast<float>(-std::exp(static_cast<double>(A_log[h])) * sp);
            beta[t * nv + h] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(b[t * nv + h]))));
        }
}

}  // namespace ember
