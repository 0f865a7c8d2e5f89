// Gated DeltaNet layer, written in terms of ops (qwen35.md §2.6).
#include "layers/gated_delta_net.h"

#include <cmath>
#include <cstring>

#include "ops/causal_conv1d/causal_conv1d.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"

namespace ember {

void DeltaNetState::init(const DeltaNetShape& s) {
    conv.assign(static_cast<size_t>((s.conv_kernel - 1) * s.conv_dim()), 0.0f);
    S.assign(static_cast<size_t>(s.heads.nv * s.heads.dk * s.heads.dv), 0.0f);
}

void gated_delta_net_in(const GatedDeltaNetWeights& w, const DeltaNetShape& s, const float* x, int64_t n,
                        DeltaNetRows& p) {
    const GdnShape& hs = s.heads;
    p.qkv.resize(n * s.conv_dim()), p.z.resize(n * hs.nv * hs.dv), p.b.resize(n * hs.nv), p.a.resize(n * hs.nv);
    linear(w.in_proj_qkv, x, n, p.qkv.data());  // [n, C] = q | k | v
    linear(w.in_proj_z, x, n, p.z.data());      // [n, nv*dv]
    linear(w.in_proj_b, x, n, p.b.data());      // [n, nv]
    linear(w.in_proj_a, x, n, p.a.data());      // [n, nv]
}

void gated_delta_net_core(const GatedDeltaNetWeights& w, const DeltaNetShape& s, DeltaNetState& st,
                          const DeltaNetRows& p, int64_t r0, int64_t m, float* y) {
    const GdnShape& hs = s.heads;
    const int64_t C = s.conv_dim(), kd = hs.nk * hs.dk, vd = hs.nv * hs.dv;
    std::vector<float> c(m * C);
    causal_conv1d_silu(&p.qkv[r0 * C], m, C, w.conv.data(), static_cast<int>(s.conv_kernel), st.conv.data(), c.data());
    std::vector<float> q(m * kd), k(m * kd), v(m * vd), g(m * hs.nv), beta(m * hs.nv), o(m * vd);
    for (int64_t t = 0; t < m; ++t) {  // split channels q | k | v
        std::memcpy(&q[t * kd], &c[t * C], kd * sizeof(float));
        std::memcpy(&k[t * kd], &c[t * C + kd], kd * sizeof(float));
        std::memcpy(&v[t * vd], &c[t * C + 2 * kd], vd * sizeof(float));
    }
    l2norm(q.data(), q.data(), m * hs.nk, hs.dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(hs.dk)));
    l2norm(k.data(), k.data(), m * hs.nk, hs.dk, 1e-6f, 1.0f);
    gdn_gates(&p.a[r0 * hs.nv], &p.b[r0 * hs.nv], w.A_log.data(), w.dt_bias.data(), m, hs.nv, g.data(), beta.data());
    if (m == 1)
        gated_delta_rule_recurrent(hs, m, q.data(), k.data(), v.data(), g.data(), beta.data(), st.S.data(), o.data());
    else
        gated_delta_rule_chunked(hs, m, q.data(), k.data(), v.data(), g.data(), beta.data(), st.S.data(), o.data());
    rmsnorm_gated(o.data(), &p.z[r0 * vd], w.norm.data(), y + r0 * vd, m * hs.nv, hs.dv, s.eps);
}

}  // namespace ember
