// ops/decode/persistent_decode_cuda_test.cpp: the persistent decode kernel's phases (persistent_decode.h) against
// the fp64 CPU references of the ops they replace, on random data with NaN-poisoned outputs:
//   - GEMV: affine 4-bit at groups 32/64/128 with bf16/f16/f32 scales, ragged rows (not multiples of the 16-row
//     tile) and columns (multiples of 32 that are not multiples of the 128-column segment or the 2048-column
//     ring slot), each prologue (none, RMSNorm, SwiGLU) with and without the residual add — budget as
//     linear_fused_cuda_test.cpp (2e-5·A + 1e-6); a guard after y must stay untouched.
//   - A chain of GEMV phases run three times by the same program (the phase counters' targets advance with each
//     run; every phase reads what other blocks wrote in the previous one) and bit-equal on a rerun.
//   - GDN: gdn_cuda_test_util.h's reference over 3 tokens (y, state, conv state), key-head maps GROUPED / TILED,
//     nv / nk = 1, 2, 3 (the deferred q/k conv rows).
//   - ATTN + COMBINE: attention_cuda_test_util.h's reference at positions 0 … 4100 (one to many key splits),
//     gated and ungated, q/k norms or none, NeoX and interleaved RoPE, frequency factors; the appended K/V row.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/attention/attention_cuda_test_util.h"
#include "ops/decode/persistent_decode.h"
#include "ops/gated_delta_rule/gdn_cuda_test_util.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"

namespace ember::cuda {
namespace {

using lintest::dalloc;
using namespace pd;

// One launch over `phases` (device table, counters), reusable across runs.
struct Prog {
    DeviceBuffer table, counters;
    PdLaunch L{};
    size_t smem = 0;
    Prog(const std::vector<PdPhase>& phases, const int32_t* pos_dev, int64_t max_k, int scale_bytes) {
        const size_t n = phases.size();
        table = dalloc(n * sizeof(PdPhase));
        copy_to_device(table.get(), phases.data(), n * sizeof(PdPhase));
        counters = dalloc((n + 2) * 4);
        CUDA_CHECK(cudaMemset(counters.get(), 0, (n + 2) * 4));
        L.phases = table.as<PdPhase>();
        L.first = 0, L.count = int(n);
        L.flags = counters.as<uint32_t>();
        L.sync = L.flags + n;
        L.pos_dev = pos_dev;
        L.last = 1;
        L.grid = pd_grid();
        smem = pd_smem_plan(max_k, scale_bytes, L);
    }
    void run() {
        pd_launch(L, smem, nullptr);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());
    }
};

int sb_code(DType t) { return t == DType::BF16 ? PD_BF16 : t == DType::F16 ? PD_F16 : PD_F32; }
int sb_bytes(const lintest::Case& c) { return int(2048 / c.f.gs) * int(dtype_size(c.f.dt)); }

PdPhase gemv_phase(const lintest::Case& c, const float* x, float* y, const float* norm_w, int pre, bool acc) {
    PdPhase ph{};
    ph.kind = PD_GEMV;
    PdGemv& g = ph.gemv;
    g.w = static_cast<const uint8_t*>(c.dw.data), g.scales = c.dw.scales, g.biases = c.dw.biases;
    g.x = x, g.y = y, g.norm_w = norm_w;
    g.rows = int(c.rows), g.K = int(c.cols), g.gs = c.f.gs, g.st = sb_code(c.f.dt);
    g.pre = pre, g.accum = acc ? 1 : 0, g.eps = 1e-6f;
    return ph;
}

// One GEMV phase in a one-phase program: prologue `pre` on a raw input, optional residual.
void check_gemv(const lintest::Fmt& f, int64_t rows, int64_t cols, int pre, bool acc, uint32_t seed) {
    auto c = lintest::make_case(f, rows, cols, 1, seed);
    std::mt19937 rng(seed ^ 0x77u);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int64_t xw = pre == PD_PRE_SWIGLU ? 2 * cols : cols;
    std::vector<float> raw(static_cast<size_t>(xw)), nw(static_cast<size_t>(cols)), xp(static_cast<size_t>(cols));
    for (float& v : raw) v = 0.3f + 2.f * nd(rng);
    for (float& v : nw) v = 1.f + 0.3f * nd(rng);
    if (pre == PD_PRE_RMSNORM) rmsnorm_ref(raw.data(), nw.data(), xp.data(), 1, cols, 1e-6f);
    else if (pre == PD_PRE_SWIGLU) swiglu_ref(raw.data(), raw.data() + cols, xp.data(), cols);
    else xp = raw;
    lintest::set_x(*c, xp);
    std::vector<float> res;
    if (acc) {
        res.resize(size_t(rows));
        for (size_t i = 0; i < res.size(); ++i) {
            res[i] = nd(rng);
            c->ref[i] += res[i];
            c->A[i] += std::fabs(res[i]);
        }
    }
    DeviceBuffer d_raw = dalloc(raw.size() * 4), d_nw = dalloc(nw.size() * 4), d_res = dalloc(res.size() * 4 + 4);
    copy_to_device(d_raw.get(), raw.data(), raw.size() * 4);
    copy_to_device(d_nw.get(), nw.data(), nw.size() * 4);
    if (acc) copy_to_device(d_res.get(), res.data(), res.size() * 4);
    char what[96];
    std::snprintf(what, sizeof what, "persistent gemv pre=%d acc=%d", pre, int(acc));
    lintest::check(*c, 1, lintest::Path::GEMV, what, [&](float* y) {
        if (acc) CUDA_CHECK(cudaMemcpy(y, d_res.get(), size_t(rows) * 4, cudaMemcpyDeviceToDevice));
        Prog p({gemv_phase(*c, d_raw.as<float>(), y, pre == PD_PRE_RMSNORM ? d_nw.as<float>() : nullptr, pre, acc)},
               nullptr, cols, sb_bytes(*c));
        p.run();
    });
}

TEST(PersistentDecodeCuda, GemvMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 1;
    for (int gs : {32, 64, 128})
        for (DType st : {DType::BF16, DType::F16, DType::F32}) {
            const lintest::Fmt f{true, st, 4, gs};
            // ragged rows; columns: one partial segment, several segments, one slot, a partial second slot, 3 slots
            for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
                     {37, 128}, {200, 384}, {1000, 2048}, {133, 2560}, {64, 6144}, {517, 4224}})
                for (int pre : {PD_PRE_NONE, PD_PRE_RMSNORM, PD_PRE_SWIGLU})
                    for (bool acc : {false, true}) {
                        if (cols % gs) continue;
                        check_gemv(f, rows, cols, pre, acc, seed++);
                    }
            // columns that are not a multiple of the 128-column segment (fixture shapes)
            if (gs == 32) {
                check_gemv(f, 332, 96, PD_PRE_RMSNORM, false, seed++);
                check_gemv(f, 21, 32, PD_PRE_NONE, true, seed++);
            }
        }
}

// x ← x + W2·SwiGLU(W1·RMSNorm(x)) as two phases, three runs of one program, then a rerun from the same start.
TEST(PersistentDecodeCuda, ChainedPhasesAcrossRunsAreExactAndDeterministic) {
    SKIP_WITHOUT_GPU();
    const int64_t H = 1024, I = 1536;
    const lintest::Fmt f{true, DType::BF16, 4, 64};
    auto w1 = lintest::make_case(f, 2 * I, H, 1, 11), w2 = lintest::make_case(f, H, I, 1, 12);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x0(static_cast<size_t>(H)), nw(static_cast<size_t>(H));
    for (float& v : x0) v = nd(rng);
    for (float& v : nw) v = 1.f + 0.2f * nd(rng);
    DeviceBuffer dx = dalloc(size_t(H) * 4), dt = dalloc(size_t(2 * I) * 4), dnw = dalloc(size_t(H) * 4);
    copy_to_device(dnw.get(), nw.data(), nw.size() * 4);
    std::vector<PdPhase> ph{gemv_phase(*w1, dx.as<float>(), dt.as<float>(), dnw.as<float>(), PD_PRE_RMSNORM, false),
                            gemv_phase(*w2, dt.as<float>(), dx.as<float>(), nullptr, PD_PRE_SWIGLU, true)};
    Prog p(ph, nullptr, I, 2048 / 64 * 2);
    auto run3 = [&] {
        copy_to_device(dx.get(), x0.data(), x0.size() * 4);
        for (int r = 0; r < 3; ++r) p.run();
        std::vector<float> out(static_cast<size_t>(H));
        copy_to_host(out.data(), dx.get(), out.size() * 4);
        return out;
    };
    const std::vector<float> got = run3();
    // Host: the same three steps with the fp64 references.
    std::vector<float> x = x0, xn(static_cast<size_t>(H)), t(static_cast<size_t>(2 * I)), s(static_cast<size_t>(I));
    std::vector<float> y(static_cast<size_t>(H));
    for (int r = 0; r < 3; ++r) {
        rmsnorm_ref(x.data(), nw.data(), xn.data(), 1, H, 1e-6f);
        linear_ref(w1->hw, xn.data(), 1, t.data());
        swiglu_ref(t.data(), t.data() + I, s.data(), I);
        linear_ref(w2->hw, s.data(), 1, y.data());
        for (int64_t i = 0; i < H; ++i) x[size_t(i)] += y[size_t(i)];
    }
    double worst;
    gdntest::expect_close("chained x", got, x, 1e-4, &worst);
    const std::vector<float> again = run3();
    EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * 4)) << "a rerun moved: a race";
}

TEST(PersistentDecodeCuda, GdnMatchesReference) {
    SKIP_WITHOUT_GPU();
    using namespace gdntest;
    const std::vector<ShapeCase> cases = {
        {{2, 6, 32, 16, KeyHeadMap::GROUPED}, 4},  {{16, 16, 128, 128, KeyHeadMap::GROUPED}, 4},
        {{16, 32, 128, 128, KeyHeadMap::TILED}, 4}, {{16, 48, 128, 128, KeyHeadMap::GROUPED}, 4},
        {{4, 8, 64, 96, KeyHeadMap::TILED}, 3},     {{3, 3, 100, 52, KeyHeadMap::GROUPED}, 2}};
    uint32_t seed = 100;
    for (const auto& sc : cases) {
        SCOPED_TRACE(shape_str(sc.s, sc.K));
        Layer L = make_layer(sc.s, sc.K, seed++);
        DevLayer d(L);
        for (int t = 0; t < 3; ++t) {
            const Inputs in = make_inputs(L, 1, seed++);
            DevInputs din(in, size_t(sc.s.nv * sc.s.dv));
            const GdnDecodeArgs a = make_args(L, d, din);
            PdPhase ph{};
            ph.kind = PD_GDN;
            PdGdn& g = ph.gdn;
            g.qkv = a.qkv, g.z = a.z, g.a = a.a, g.b = a.b, g.conv_w = a.conv_w, g.A_log = a.A_log;
            g.dt_bias = a.dt_bias, g.norm_w = a.norm_w, g.conv_state = a.conv_state, g.S = a.S, g.y = a.y;
            g.nk = int(sc.s.nk), g.nv = int(sc.s.nv), g.dk = int(sc.s.dk), g.dv = int(sc.s.dv), g.K = sc.K;
            g.tiled_map = sc.s.map == KeyHeadMap::TILED, g.eps = L.eps;
            ASSERT_TRUE(pd_gdn_supported(sc.s.nk, sc.s.nv, sc.s.dk, sc.s.dv, sc.K));
            Prog p({ph}, nullptr, 128, 16);
            p.run();
            const std::vector<float> want = ref_step(L, in, 1);
            double worst = 0;
            expect_close("y", download<float>(din.y, want.size()), want, budget(sc.s, sc.K, t + 1), &worst);
            expect_close("S", download<float>(d.S, L.S.size()), L.S, budget(sc.s, sc.K, t + 1), &worst);
            expect_equal("conv state", download<float>(d.conv_state, L.conv_state.size()), L.conv_state);
        }
    }
}

struct AttnCase {
    int64_t H, G, D, rot;
    bool gated, norm, interleaved, factors;
};

TEST(PersistentDecodeCuda, AttentionMatchesReference) {
    SKIP_WITHOUT_GPU();
    using namespace attntest;
    const std::vector<AttnCase> cases = {{8, 2, 256, 64, true, true, false, false},
                                         {4, 1, 64, 32, true, true, false, false},
                                         {24, 4, 256, 64, true, true, false, false},
                                         {16, 4, 128, 128, false, false, true, true},
                                         {9, 3, 64, 64, false, false, true, false}};
    const int64_t cap = 4224;
    uint64_t seed = 9;
    for (bool kv16 : {false, true})  // fp32 and bf16 caches (a bf16 cache: the reference on the rounded rows)
    for (const AttnCase& ac : cases) {
        GatedAttentionDims d = make_dims(ac.H, ac.G, ac.D, ac.rot, cap);
        d.kv_bf16 = kv16;
        d.gated = ac.gated;
        d.rope_interleaved = ac.interleaved;
        d.score_mul = ac.gated ? 1.f : 0.7f;
        std::vector<float> factors(static_cast<size_t>(ac.rot / 2));
        for (size_t j = 0; j < factors.size(); ++j) factors[j] = 1.f + 0.37f * float(j % 5);
        if (ac.factors) d.freq_factors = factors.data();
        ASSERT_TRUE(pd_attention_supported(d.n_heads, d.n_kv, d.head_dim, d.rot_dim));
        Gpu g(d, 1);
        g.use_norm = ac.norm;
        std::vector<float> rope(size_t(ac.rot), 1.f);
        rope_inv_freq(ac.rot, d.rope_theta, rope.data());
        if (ac.factors)
            for (int64_t j = 0; j < ac.rot / 2; ++j) rope[size_t(ac.rot / 2 + j)] = factors[size_t(j)];
        DeviceBuffer d_rope = dalloc(rope.size() * 4);
        copy_to_device(d_rope.get(), rope.data(), rope.size() * 4);
        const int ms = pd_attention_max_splits(d.n_kv);
        DeviceBuffer part = dalloc(size_t(ms) * size_t(d.n_heads) * size_t(d.head_dim + 2) * 4);
        PdPhase ph{};
        ph.kind = PD_ATTN;
        PdAttn& a = ph.attn;
        a.qg = g.qg.as<float>(), a.k = g.k.as<float>(), a.v = g.v.as<float>();
        a.q_norm = ac.norm ? g.qn.as<float>() : nullptr, a.k_norm = ac.norm ? g.kn.as<float>() : nullptr;
        a.Kc = g.K.get(), a.Vc = g.V.get(), a.part = part.as<float>(), a.out = g.out.as<float>();
        a.kv_bf16 = kv16;
        a.rope = d_rope.as<float>();
        a.H = int(d.n_heads), a.G = int(d.n_kv), a.D = int(d.head_dim), a.half = int(d.rot_dim / 2);
        a.cap = int(cap), a.gated = d.gated, a.interleaved = d.rope_interleaved, a.has_factor = ac.factors;
        a.max_splits = ms, a.eps = d.eps;
        a.q_scale = (d.score_mul / std::sqrt(float(d.head_dim))) * 1.4426950408889634f;
        PdPhase comb = ph;
        comb.kind = PD_COMBINE;
        Prog p({ph, comb}, g.pos.as<int32_t>(), 128, 16);
        for (int64_t pos0 : {0, 1, 63, 64, 65, 200, 4100}) {
            SCOPED_TRACE(testing::Message() << "H=" << ac.H << " G=" << ac.G << " D=" << ac.D << " pos=" << pos0
                                            << (ac.gated ? " gated" : "") << (ac.interleaved ? " interleaved" : "")
                                            << (kv16 ? " bf16 cache" : ""));
            const Inputs in = make_inputs(d, 1, seed++);
            std::vector<float> Kh, Vh, k_new;
            make_host_cache(d, pos0, seed++, Kh, Vh);
            if (kv16) {
                round_bf16(Kh.data(), Kh.size());
                round_bf16(Vh.data(), Vh.size());
            }
            g.stage(in, Kh, Vh, pos0, pos0);
            p.run();
            const std::vector<float> k_stored = kv16 ? g.new_rows(pos0, 1) : std::vector<float>();
            const std::vector<float> want =
                cpu_attention(d, in, Kh, Vh, pos0, 1, &k_new, ac.norm, {}, kv16 ? &k_stored : nullptr);
            expect_close(g.result(1), want, "out");
            for (int64_t kv = 0; kv < d.n_kv; ++kv) {
                const std::vector<float> kr = g.cache_row(g.K, kv, pos0), vr = g.cache_row(g.V, kv, pos0);
                const std::vector<float> kw(k_new.begin() + kv * d.head_dim, k_new.begin() + (kv + 1) * d.head_dim);
                std::vector<float> vw(in.v.begin() + kv * d.head_dim, in.v.begin() + (kv + 1) * d.head_dim);
                if (kv16) round_bf16(vw.data(), vw.size());
                expect_close(kr, kw, "new K row", {}, 0, kv16 ? bf16_row_budget() : Budget{});
                EXPECT_EQ(0, std::memcmp(vr.data(), vw.data(), vr.size() * 4)) << "new V row";
            }
        }
    }
}

}  // namespace
}  // namespace ember::cuda
