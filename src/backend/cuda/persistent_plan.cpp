// PdRecorder / pd_finalize (persistent_plan.h): a fused decode step's ops → phases and launch groups.
#include "backend/cuda/persistent_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/env.h"
#include "ops/rope/rope.h"

namespace ember::cuda {

bool persistent_decode_requested() {
    static const bool on = env_is("EMBER_DECODE", "persistent");
    return on;
}

namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool PdRecorder::take(const pd::PdPhase& ph) {
    if (mode_ == DRY) {
        if (open_ < 0) open_ = int(p_.phases.size());
        p_.phases.push_back(ph);
        p_.taken.push_back(1);
    } else {
        EMBER_CHECK(size_t(op_) < p_.taken.size() && p_.taken[size_t(op_)], "persistent decode: the forward changed "
                    "between its recording and its capture (op %d)", op_);
        pending_ = true;
    }
    ++op_;
    return true;
}

bool PdRecorder::other() {
    if (mode_ == DRY) {
        if (open_ >= 0) {
            p_.groups.push_back({open_, int(p_.phases.size()) - open_, 0, {}});
            open_ = -1;
        }
        p_.taken.push_back(0);
    } else {
        EMBER_CHECK(size_t(op_) < p_.taken.size() && !p_.taken[size_t(op_)], "persistent decode: the forward changed "
                    "between its recording and its capture (op %d)", op_);
        launch_pending();
    }
    ++op_;
    return false;
}

void PdRecorder::launch_pending() {
    if (!pending_) return;
    EMBER_CHECK(next_group_ < p_.groups.size(), "persistent decode: more launch groups than recorded");
    const PdProgram::Group& g = p_.groups[next_group_++];
    pd::pd_launch(g.L, g.smem, st_);
    pending_ = false;
}

void PdRecorder::finish() {
    if (mode_ == DRY) {
        if (open_ >= 0) p_.groups.push_back({open_, int(p_.phases.size()) - open_, 0, {}});
        open_ = -1;
        p_.ops = op_;
    } else {
        EMBER_CHECK(op_ == p_.ops, "persistent decode: %d ops captured, %d recorded", op_, p_.ops);
        launch_pending();
        EMBER_CHECK(next_group_ == p_.groups.size(), "persistent decode: %zu of %zu groups launched", next_group_,
                    p_.groups.size());
    }
}

bool PdRecorder::gemv(const Weight& w, const float* x, float* y, const LinearFusion& f) {
    const int es = w.sb_dtype == DType::F32 ? 4 : (w.sb_dtype == DType::BF16 || w.sb_dtype == DType::F16) ? 2 : 0;
    if (w.format != WeightFormat::AFFINE || es == 0 ||
        !pd::pd_gemv_supported(w.bits, w.group_size, es, w.rows, w.cols, w.data, w.scales, w.biases) ||
        !aligned16(x) || (f.norm_w && !aligned16(f.norm_w)) || (f.norm_w && f.swiglu) ||
        (f.norm_w && w.cols > 8192))  // an RMSNorm input is staged in one batch (persistent_decode_gemv.cuh)
        return other();
    pd::PdPhase ph{};
    ph.kind = pd::PD_GEMV;
    pd::PdGemv& g = ph.gemv;
    g.w = static_cast<const uint8_t*>(w.data), g.scales = w.scales, g.biases = w.biases;
    g.x = x, g.y = y, g.norm_w = f.norm_w;
    g.rows = int32_t(w.rows), g.K = int32_t(w.cols), g.gs = w.group_size;
    g.st = w.sb_dtype == DType::BF16 ? pd::PD_BF16 : w.sb_dtype == DType::F16 ? pd::PD_F16 : pd::PD_F32;
    g.pre = f.norm_w ? pd::PD_PRE_RMSNORM : f.swiglu ? pd::PD_PRE_SWIGLU : pd::PD_PRE_NONE;
    g.accum = f.accumulate ? 1 : 0;
    g.eps = f.eps;
    return take(ph);
}

bool PdRecorder::gdn(const GdnDecodeArgs& a) {
    const GdnShape& s = a.shape;
    if (!pd::pd_gdn_supported(s.nk, s.nv, s.dk, s.dv, a.K) || !aligned16(a.S) || (s.dk * s.dv) % 4 != 0)
        return other();
    pd::PdPhase ph{};
    ph.kind = pd::PD_GDN;
    pd::PdGdn& g = ph.gdn;
    g.qkv = a.qkv, g.z = a.z, g.a = a.a, g.b = a.b, g.conv_w = a.conv_w, g.A_log = a.A_log, g.dt_bias = a.dt_bias;
    g.norm_w = a.norm_w, g.conv_state = a.conv_state, g.S = a.S, g.y = a.y;
    g.nk = int32_t(s.nk), g.nv = int32_t(s.nv), g.dk = int32_t(s.dk), g.dv = int32_t(s.dv), g.K = a.K;
    g.tiled_map = s.map == KeyHeadMap::TILED ? 1 : 0;
    g.eps = a.eps;
    return take(ph);
}

bool PdRecorder::attention(const GatedAttentionDims& d, const float* qg, const float* k, const float* v,
                           const float* q_norm, const float* k_norm, void* K, void* V, const int32_t* pos_dev,
                           float* out) {
    if (!pd::pd_attention_supported(d.n_heads, d.n_kv, d.head_dim, d.rot_dim) || !aligned16(qg) || !aligned16(k) ||
        !aligned16(K) || !aligned16(V) || !aligned16(out) || d.capacity > INT32_MAX)
        return other();
    (void)pos_dev;  // the launch's pos_dev (pd_finalize) is the same state's
    pd::PdPhase ph{};
    ph.kind = pd::PD_ATTN;
    pd::PdAttn& a = ph.attn;
    a.qg = qg, a.k = k, a.v = v, a.q_norm = q_norm, a.k_norm = k_norm, a.Kc = K, a.Vc = V, a.out = out;
    a.H = int32_t(d.n_heads), a.G = int32_t(d.n_kv), a.D = int32_t(d.head_dim), a.half = int32_t(d.rot_dim / 2);
    a.cap = int32_t(d.capacity), a.gated = d.gated ? 1 : 0, a.interleaved = d.rope_interleaved ? 1 : 0;
    a.has_factor = d.freq_factors ? 1 : 0;
    a.max_splits = pd::pd_attention_max_splits(d.n_kv);
    a.eps = d.eps;
    a.kv_bf16 = d.kv_bf16 ? 1 : 0;
    a.q_scale = (d.score_mul / std::sqrt(static_cast<float>(d.head_dim))) * 1.4426950408889634f;
    if (mode_ == DRY) {  // the rope table: inv_freq then factors (patched to a device pointer by pd_finalize)
        std::vector<float> t(size_t(d.rot_dim), 1.f);
        rope_inv_freq(d.rot_dim, d.rope_theta, t.data());
        for (int64_t j = 0; d.freq_factors && j < d.rot_dim / 2; ++j) t[size_t(d.rot_dim / 2 + j)] = d.freq_factors[j];
        p_.rope_phase.push_back(int(p_.phases.size()));
        p_.rope_host.insert(p_.rope_host.end(), t.begin(), t.end());
        p_.part_floats = std::max(p_.part_floats, int64_t(a.max_splits) * d.n_heads * (d.head_dim + 2));
    }
    // Two phases, one op: the split pass and the combine (EMIT counts the op once).
    if (mode_ == DRY) {
        take(ph);
        --op_;
        p_.taken.pop_back();
    }
    ph.kind = pd::PD_COMBINE;
    return take(ph);
}

namespace {

int trace_level() {
    static const int v = env_int("EMBER_PD_TRACE");
    return v;
}

const char* kind_name(int k) {
    return k == pd::PD_GEMV ? "gemv" : k == pd::PD_GDN ? "gdn" : k == pd::PD_ATTN ? "attn" : "combine";
}

}  // namespace

// The last run's timeline: per phase, the sync latency (the earliest block past its wait − the latest block done
// with the previous phase), the work (latest done − earliest past the wait), the longest ring wait of a block.
PdProgram::~PdProgram() {
    if (!trace.get() || groups.empty()) return;
    const int G = groups[0].L.grid;
    const size_t n = phases.size();
    std::vector<uint64_t> t(n * size_t(G) * 4);
    if (cudaMemcpy(t.data(), trace.get(), t.size() * 8, cudaMemcpyDeviceToHost) != cudaSuccess || t[2] == 0) return;
    if (const char* path = env_str("EMBER_PD_TRACE_FILE")) {  // raw: header, per phase (kind, rows, K), stamps
        if (FILE* f = std::fopen(path, "ab")) {
            const int64_t head[2] = {int64_t(n), G};
            std::fwrite(head, 8, 2, f);
            for (const pd::PdPhase& ph : phases) {
                const int32_t d[3] = {ph.kind, ph.kind == pd::PD_GEMV ? ph.gemv.rows : 0,
                                      ph.kind == pd::PD_GEMV ? ph.gemv.K : 0};
                std::fwrite(d, 4, 3, f);
            }
            std::fwrite(t.data(), 8, t.size(), f);
            std::fclose(f);
        }
    }
    struct Agg { int count = 0; double sync = 0, work = 0, ring = 0; };
    std::vector<Agg> by_kind(4);
    double total = 0;
    std::fprintf(stderr, "persistent decode trace (%zu phases, %d blocks, last run; us)\n", n, G);
    for (const Group& g : groups) {
        uint64_t prev_end = UINT64_MAX;
        for (int q = g.first; q < g.first + g.count; ++q) {
            uint64_t entry = UINT64_MAX, after = UINT64_MAX, end = 0, ring = 0;
            for (int b = 0; b < G; ++b) {
                const uint64_t* r = &t[(size_t(q) * G + b) * 4];
                entry = std::min(entry, r[0]), after = std::min(after, r[1]), end = std::max(end, r[2]);
                ring = std::max(ring, r[3]);
            }
            const uint64_t from = prev_end == UINT64_MAX ? entry : prev_end;
            const double sync = after > from ? double(after - from) / 1e3 : 0.0, work = double(end - std::max(after, from)) / 1e3;
            Agg& a = by_kind[size_t(phases[size_t(q)].kind)];
            a.count++, a.sync += sync, a.work += work, a.ring += double(ring) / 1e3;
            total += sync + work;
            if (trace_level() >= 2) {
                const pd::PdPhase& ph = phases[size_t(q)];
                std::fprintf(stderr, "  %3d %-7s %6d x %-6d sync %6.2f work %7.2f ring-wait %6.2f\n", q, kind_name(ph.kind),
                             ph.kind == pd::PD_GEMV ? ph.gemv.rows : 0, ph.kind == pd::PD_GEMV ? ph.gemv.K : 0, sync, work,
                             double(ring) / 1e3);
            }
            prev_end = end;
        }
    }
    for (int k = 0; k < 4; ++k)
        if (by_kind[size_t(k)].count)
            std::fprintf(stderr, "  %-8s %4d phases: sync %8.1f  work %8.1f  (longest ring waits summed %8.1f)\n",
                         kind_name(k), by_kind[size_t(k)].count, by_kind[size_t(k)].sync, by_kind[size_t(k)].work,
                         by_kind[size_t(k)].ring);
    std::fprintf(stderr, "  total    %8.1f us in the persistent launches\n", total);
}

void pd_finalize(PdProgram& p, const int32_t* pos_dev) {
    if (p.groups.empty()) {
        p.why_not = "no op of the decode step runs in the persistent kernel";
        return;
    }
    const size_t n = p.phases.size();
    auto buf = [&](DeviceBuffer& b, size_t bytes, const char* what) {
        auto r = DeviceBuffer::alloc(std::max<size_t>(bytes, 256), what);
        if (!r) {
            p.why_not = r.message();
            return false;
        }
        b = std::move(r.value());
        return true;
    };
    if (!buf(p.table, n * sizeof(pd::PdPhase), "persistent decode table") ||
        !buf(p.counters, (n + 2) * sizeof(uint32_t), "persistent decode counters") ||
        !buf(p.part, size_t(p.part_floats) * sizeof(float), "persistent decode attention partials") ||
        !buf(p.rope, p.rope_host.size() * sizeof(float), "persistent decode rope tables"))
        return;
    // Device pointers of the attention phases' partials and rope tables (each table: rot_dim floats).
    size_t off = 0;
    for (int ph : p.rope_phase) {
        const float* rope = p.rope.as<float>() + off;
        for (int q = ph; q < ph + 2; ++q) {
            p.phases[size_t(q)].attn.rope = rope;
            p.phases[size_t(q)].attn.part = p.part.as<float>();
        }
        off += size_t(2 * p.phases[size_t(ph)].attn.half);
    }
    copy_to_device(p.table.get(), p.phases.data(), n * sizeof(pd::PdPhase));
    if (!p.rope_host.empty()) copy_to_device(p.rope.get(), p.rope_host.data(), p.rope_host.size() * sizeof(float));
    CUDA_CHECK(cudaMemset(p.counters.get(), 0, (n + 2) * sizeof(uint32_t)));
    if (trace_level() > 0) {
        if (!buf(p.trace, n * size_t(pd::pd_grid()) * 4 * sizeof(uint64_t), "persistent decode trace")) return;
        CUDA_CHECK(cudaMemset(p.trace.get(), 0, p.trace.bytes()));
    }
    for (size_t i = 0; i < p.groups.size(); ++i) {
        PdProgram::Group& g = p.groups[i];
        int64_t max_k = 128;
        for (int q = g.first; q < g.first + g.count; ++q)
            if (p.phases[size_t(q)].kind == pd::PD_GEMV) max_k = std::max<int64_t>(max_k, p.phases[size_t(q)].gemv.K);
        const int64_t kc = std::min<int64_t>(2048, (max_k + 127) / 128 * 128);
        int scale_bytes = 16;
        for (int q = g.first; q < g.first + g.count; ++q) {
            const pd::PdPhase& ph = p.phases[size_t(q)];
            if (ph.kind == pd::PD_GEMV)
                scale_bytes = std::max<int>(scale_bytes, int(kc / ph.gemv.gs) * (ph.gemv.st == pd::PD_F32 ? 4 : 2));
        }
        pd::PdLaunch& L = g.L;
        L.phases = p.table.as<pd::PdPhase>();
        L.first = g.first, L.count = g.count;
        L.flags = p.counters.as<uint32_t>();
        L.sync = L.flags + n;
        L.pos_dev = pos_dev;
        L.last = i + 1 == p.groups.size() ? 1 : 0;
        L.grid = pd::pd_grid();
        L.trace = p.trace.get() ? p.trace.as<uint64_t>() : nullptr;
        static const int backoff = [] {  // experiments: EMBER_PD_BACKOFF=ns between counter polls
            return env_int("EMBER_PD_BACKOFF");
        }();
        L.backoff_ns = backoff;
        static const int debug = [] {
            return env_int("EMBER_PD_DEBUG");
        }();
        L.debug = debug;
        g.smem = pd::pd_smem_plan(max_k, scale_bytes, L);
    }
}

}  // namespace ember::cuda
