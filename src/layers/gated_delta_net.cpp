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

void gated_delta_net(const GatedDeltaNetWeights& w, const DeltaNetShape& s, DeltaNetState& st, const float* x,
                     int64_t n, float* out) {
    const GdnShape& hs = s.heads;
    const int64_t C = s.conv_dim(), kd = hs.nk * hs.dk, vd = hs.nv * hs.dv;
    std::vector<float> m(n * C), c(n * C), z(n * vd), a(n * hs.nv), b(n * hs.nv);
    linear(w.in_proj_qkv, x, n, m.data());  // [n, C] = q | k | v
    linear(w.in_proj_z, x, n, z.data());    // [n, nv*dv]
    linear(w.in_proj_b, x, n, b.data());    // [n, nv]
    linear(w.in_proj_a, x, n, a.data());    // [n, nv]
    causal_conv1d_silu(m.data(), n, C, w.conv.data(), static_cast<int>(s.conv_kernel), st.conv.data(), c.data());

    std::vector<float> q(n * kd), k(n * kd), v(n * vd), g(n * hs.nv), beta(n * hs.nv), o(n * vd), y(n * vd);
    for (int64_t t = 0; t < n; ++t) {  // split channels q | k | v
        std::memcpy(&q[t * kd], &c[t * C], kd * sizeof(float));
        std::memcpy(&k[t * kd], &c[t * C + kd], kd * sizeof(float));
        std::memcpy(&v[t * vd], &c[t * C + 2 * kd], vd * sizeof(float));
    }
    l2norm(q.data(), q.data(), n * hs.nk, hs.dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(hs.dk)));
    l2norm(k.data(), k.data(), n * hs.nk, hs.dk, 1e-6f, 1.0f);
    gdn_gates(a.data(), b.data(), w.A_log.data(), w.dt_bias.data(), n, hs.nv, g.data(), beta.data());
    if (n == 1)
        gated_delta_rule_recurrent(hs, n, q.data(), k.data(), v.data(), g.data(), beta.data(), st.S.data(), o.data());
    else
        gated_delta_rule_chunked(hs, n, q.data(), k.data(), v.data(), g.data(), beta.data(), st.S.data(), o.data());
    rmsnorm_gated(o.data(), z.data(), w.norm.data(), y.data(), n * hs.nv, hs.dv, s.eps);
    linear(w.out_proj, y.data(), n, out);
}

}  // namespace ember
