// ops/attention/attention_cuda_test_util.h: shared pieces of the CUDA attention tests (attention_cuda_test.cpp,
// attention_prefill_cuda_test.cpp): random layer inputs, the CPU composition of the fp64 references as
// layers/gated_attention.cpp does it (rmsnorm_ref, rope_ref, attention_causal_ref, sigmoid_mul_ref), the error
// check, and the device state of one configuration (inputs, caches, position, NaN-poisoned output, workspace).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "core/dtype.h"
#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_cuda.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"

namespace ember::cuda::attntest {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

// Fast uniform fill for the large caches (splitmix64 → [lo, hi)).
inline void fill_uniform(float* p, size_t n, uint64_t seed, float lo, float hi) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < n; ++i) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        p[i] = lo + (hi - lo) * float(double(z >> 40) * 0x1.0p-24);
    }
}

inline std::vector<float> randn(size_t n, uint64_t seed, float mean = 0.f, float sd = 1.f) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

inline DeviceBuffer dev_alloc(size_t bytes) {
    auto b = DeviceBuffer::alloc(bytes, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

// KV cache elements (GatedAttentionDims::kv_bf16): bytes each, host fp32 ↔ device elements, bf16 rounding.
inline size_t kv_elem(const GatedAttentionDims& d) { return d.kv_bf16 ? 2 : 4; }
inline void round_bf16(float* p, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
}
inline void kv_upload(const GatedAttentionDims& d, void* dst, const float* src, size_t n) {
    if (!d.kv_bf16) return copy_to_device(dst, src, n * 4);
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
    copy_to_device(dst, h.data(), n * 2);
}
inline std::vector<float> kv_download(const GatedAttentionDims& d, const void* src, size_t n) {
    std::vector<float> o(n);
    if (!d.kv_bf16) {
        copy_to_host(o.data(), src, n * 4);
        return o;
    }
    std::vector<uint16_t> h(n);
    copy_to_host(h.data(), src, n * 2);
    for (size_t i = 0; i < n; ++i) o[i] = bf16_to_f32(h[i]);
    return o;
}
inline void* kv_at(const GatedAttentionDims& d, const DeviceBuffer& C, size_t elem) {
    return C.as<char>() + elem * kv_elem(d);
}

inline GatedAttentionDims make_dims(int64_t H, int64_t G, int64_t D, int64_t rot, int64_t cap) {
    GatedAttentionDims d;
    d.n_heads = H;
    d.n_kv = G;
    d.head_dim = D;
    d.rot_dim = rot;
    d.rope_theta = 1e7f;
    d.eps = 1e-6f;
    d.capacity = cap;
    return d;
}

// One token batch of layer inputs (projection outputs) and the norm weights.
struct Inputs {
    std::vector<float> qg, k, v, qn, kn;
};
inline Inputs make_inputs(const GatedAttentionDims& d, int64_t n, uint64_t seed) {
    Inputs in;
    in.qg = randn(size_t(n * d.n_heads * 2 * d.head_dim), seed, 0.f, 1.5f);
    in.k = randn(size_t(n * d.n_kv * d.head_dim), seed + 1, 0.2f, 1.f);
    in.v = randn(size_t(n * d.n_kv * d.head_dim), seed + 2);
    in.qn = randn(size_t(d.head_dim), seed + 3, 1.f, 0.3f);
    in.kn = randn(size_t(d.head_dim), seed + 4, 1.f, 0.3f);
    return in;
}

// The layer's composition with the fp64 references, for the query tokens in `rows` (all n when empty). Kh, Vh
// [G, cap, D] hold rows [0, pos0) and get the new rows; returns out [n, H·D] (rows not asked for stay 0);
// k_new [n, G, D] receives the normed + rotated keys. A bf16 cache (d.kv_bf16) stores rounded rows: V rounded
// here, K as `k_stored` [n, G, D] gives it (the kernel's stored rows, checked against k_new by the caller: a
// rounding of the fp32 key can land one bf16 step away from the rounding of this fp64-composed key) or rounded
// here when null.
inline std::vector<float> cpu_attention(const GatedAttentionDims& d, const Inputs& in, std::vector<float>& Kh,
                                        std::vector<float>& Vh, int64_t pos0, int64_t n, std::vector<float>* k_new,
                                        bool use_norm = true, const std::vector<int64_t>& rows = {},
                                        const std::vector<float>* k_stored = nullptr) {
    const int64_t H = d.n_heads, G = d.n_kv, D = d.head_dim, cap = d.capacity;
    std::vector<float> q(size_t(n * H * D)), gate(size_t(n * H * D)), k = in.k, o(size_t(n * H * D));
    if (d.gated) {
        for (int64_t t = 0; t < n; ++t)
            for (int64_t h = 0; h < H; ++h) {
                std::memcpy(&q[size_t((t * H + h) * D)], &in.qg[size_t((t * H + h) * 2 * D)], size_t(D) * 4);
                std::memcpy(&gate[size_t((t * H + h) * D)], &in.qg[size_t((t * H + h) * 2 * D + D)], size_t(D) * 4);
            }
    } else {  // plain q [n, H, D]: the first n·H·D inputs
        std::memcpy(q.data(), in.qg.data(), q.size() * 4);
    }
    if (use_norm) {
        rmsnorm_ref(q.data(), in.qn.data(), q.data(), n * H, D, d.eps);
        rmsnorm_ref(k.data(), in.kn.data(), k.data(), n * G, D, d.eps);
    }
    const RopeStyle style = d.rope_interleaved ? RopeStyle::INTERLEAVED : RopeStyle::NEOX;
    rope_ref(q.data(), n, H, D, d.rot_dim, pos0, d.rope_theta, style, d.freq_factors);
    rope_ref(k.data(), n, G, D, d.rot_dim, pos0, d.rope_theta, style, d.freq_factors);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t g = 0; g < G; ++g) {
            float* kr = &Kh[size_t((g * cap + pos0 + t) * D)];
            float* vr = &Vh[size_t((g * cap + pos0 + t) * D)];
            const std::vector<float>& ks = k_stored ? *k_stored : k;
            std::memcpy(kr, &ks[size_t((t * G + g) * D)], size_t(D) * 4);
            std::memcpy(vr, &in.v[size_t((t * G + g) * D)], size_t(D) * 4);
            if (d.kv_bf16) {
                round_bf16(kr, size_t(D));
                round_bf16(vr, size_t(D));
            }
        }
    const float scale = d.score_mul / std::sqrt(static_cast<float>(D));
    if (rows.empty()) {
        attention_causal_ref(q.data(), n, H, G, D, Kh.data(), Vh.data(), cap, pos0, scale, o.data());
    } else {  // token t alone is the 1-token call at position pos0 + t; independent, so in parallel
#pragma omp parallel for schedule(dynamic)
        for (size_t i = 0; i < rows.size(); ++i) {
            const int64_t t = rows[i];
            attention_causal_ref(&q[size_t(t * H * D)], 1, H, G, D, Kh.data(), Vh.data(), cap, pos0 + t, scale,
                                 &o[size_t(t * H * D)]);
        }
    }
    if (d.gated) sigmoid_mul_ref(o.data(), gate.data(), n * H * D);
    if (k_new) *k_new = k;
    return o;
}

// Error statistics of got against want over the rows [t, t + 1) · row_len for t in `rows` (all when empty).
struct ErrStats {
    double nmse = 0, max_rel_rms = 0;  // Σe² / Σw², max |e| / rms(want)
    double bias = 0;                   // Σ e·w / Σ w²: a systematic relative scaling error
    double worst_want = 0;             // |want| / rms at the worst element
    size_t worst = 0, first_bad = SIZE_MAX;
    int bad = 0;
};
// Counts elements with |e| > a·rms + r·|want| (NaN counts) and records the first one.
inline ErrStats err_stats(const std::vector<float>& got, const std::vector<float>& want, size_t row_len,
                          const std::vector<int64_t>& rows, double a, double r) {
    ErrStats s;
    std::vector<size_t> idx;
    if (rows.empty()) {
        idx.resize(want.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    } else {
        for (int64_t t : rows)
            for (size_t c = 0; c < row_len; ++c) idx.push_back(size_t(t) * row_len + c);
    }
    double e2 = 0, r2 = 0, ew = 0, emax = -1;
    for (size_t i : idx) r2 += double(want[i]) * want[i];
    const double rms = std::sqrt(r2 / double(idx.size()));
    for (size_t i : idx) {
        const double e = std::fabs(double(got[i]) - want[i]);
        e2 += std::isnan(e) ? INFINITY : e * e;
        ew += (double(got[i]) - want[i]) * want[i];
        if (!(e <= emax)) emax = e, s.worst = i;
        if (!(e <= a * rms + r * std::fabs(want[i])) && s.bad++ == 0) s.first_bad = i;
    }
    s.nmse = e2 / r2;
    s.bias = ew / r2;
    s.max_rel_rms = emax / rms;
    s.worst_want = std::fabs(want[s.worst]) / rms;
    return s;
}

// Element-wise |e| ≤ a·rms + r·|want| and NMSE ≤ nmse. The default: every stage is fp32 with reductions of length
// d (norm, scores) or ≤ a few hundred keys per split plus a ≤ 1024-term merge; relative errors are ~1e-6, so an
// NMSE of 1e-9 (≈ 3e-5 rms) and an element-wise 1e-4·rms + 1e-4·|x| leave about 10× margin while still catching
// any indexing or masking error.
struct Budget {
    double a = 1e-4, r = 1e-4, nmse = 1e-9;
};
inline ErrStats expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                             const std::vector<int64_t>& rows = {}, size_t row_len = 0, const Budget& b = {}) {
    EXPECT_EQ(got.size(), want.size());
    if (got.size() != want.size()) return {};
    const ErrStats s = err_stats(got, want, row_len, rows, b.a, b.r);
    if (s.bad)
        ADD_FAILURE() << what << ": " << s.bad << " elements off, first [" << s.first_bad << "]: got "
                      << got[s.first_bad] << " want " << want[s.first_bad] << "; worst [" << s.worst << "] "
                      << got[s.worst] << " vs " << want[s.worst] << " (max |e| / rms " << s.max_rel_rms << ")";
    EXPECT_LE(s.nmse, b.nmse) << what << " NMSE";
    return s;
}

// A random page list for a sequence of `cap` rows in a pool with `spare` more pages than it needs (kKvPage
// rows each; the pages in a shuffled order, so that consecutive pages are not neighbours).
inline std::vector<int32_t> random_pages(int64_t cap, int64_t spare, uint64_t seed, int64_t* n_pages) {
    const int64_t need = (cap + kKvPage - 1) / kKvPage;
    *n_pages = need + spare;
    std::vector<int32_t> all(static_cast<size_t>(*n_pages));
    for (size_t i = 0; i < all.size(); ++i) all[i] = int32_t(i);
    std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
    all.resize(size_t(need));
    return all;
}

// Device state for one configuration: inputs, caches, position, output, workspace. paged: the caches are a page
// pool ([page][G][kKvPage][D], attention_cuda.h) with three spare pages, the sequence's pages in a random order.
struct Gpu {
    GatedAttentionDims d;
    int64_t n_max;
    DeviceBuffer qg, k, v, qn, kn, K, V, pos, out, ws, pg;
    size_t ws_bytes;
    bool use_norm = true;  // false: q/k norm pointers are nullptr (Llama)
    std::vector<int32_t> pages;  // empty: contiguous [G][cap][D]
    int64_t n_pages = 0;
    // Element offset of cache row `row` of kv head g.
    size_t off(int64_t g, int64_t row) const {
        const int64_t D = d.head_dim;
        if (pages.empty()) return size_t((g * d.capacity + row) * D);
        return size_t(kv_page_elem(pages[size_t(row / kKvPage)], g, row, d.n_kv, D));
    }
    Gpu(const GatedAttentionDims& dims, int64_t n_max_, bool paged = false, uint64_t seed = 1) : d(dims), n_max(n_max_) {
        if (paged) {
            pages = random_pages(d.capacity, 3, seed, &n_pages);
            pg = dev_alloc(pages.size() * 4);
            copy_to_device(pg.get(), pages.data(), pages.size() * 4);
        }
        const size_t H = size_t(d.n_heads), G = size_t(d.n_kv), D = size_t(d.head_dim), N = size_t(n_max);
        qg = dev_alloc(N * H * 2 * D * 4);
        k = dev_alloc(N * G * D * 4);
        v = dev_alloc(N * G * D * 4);
        qn = dev_alloc(D * 4);
        kn = dev_alloc(D * 4);
        const size_t rows = paged ? size_t(n_pages * kKvPage) : size_t(d.capacity);
        K = dev_alloc(G * rows * D * kv_elem(d));
        V = dev_alloc(G * rows * D * kv_elem(d));
        pos = dev_alloc(4);
        out = dev_alloc(N * H * D * 4);
        ws_bytes = gated_attention_workspace_bytes(d, n_max);
        ws = dev_alloc(ws_bytes);
    }
    // Uploads inputs, the first `rows` cache rows of every kv head (all other rows NaN), pos0; poisons out.
    void stage(const Inputs& in, const std::vector<float>& Kh, const std::vector<float>& Vh, int64_t rows,
               int64_t pos0) {
        const int64_t D = d.head_dim, cap = d.capacity;
        copy_to_device(qg.get(), in.qg.data(), in.qg.size() * 4);
        copy_to_device(k.get(), in.k.data(), in.k.size() * 4);
        copy_to_device(v.get(), in.v.data(), in.v.size() * 4);
        copy_to_device(qn.get(), in.qn.data(), in.qn.size() * 4);
        copy_to_device(kn.get(), in.kn.data(), in.kn.size() * 4);
        CUDA_CHECK(cudaMemset(K.get(), 0xff, K.bytes()));
        CUDA_CHECK(cudaMemset(V.get(), 0xff, V.bytes()));
        if (pages.empty()) {
            for (int64_t g = 0; g < d.n_kv && rows > 0; ++g) {
                kv_upload(d, kv_at(d, K, size_t(g * cap * D)), Kh.data() + g * cap * D, size_t(rows * D));
                kv_upload(d, kv_at(d, V, size_t(g * cap * D)), Vh.data() + g * cap * D, size_t(rows * D));
            }
        } else if (rows > 0) {  // the pool's image on the host (NaN elsewhere), uploaded at once
            const size_t n = K.bytes() / kv_elem(d);
            std::vector<float> ki(n, NAN), vi(n, NAN);
            for (int64_t g = 0; g < d.n_kv; ++g)
                for (int64_t r = 0; r < rows; ++r) {
                    std::memcpy(&ki[off(g, r)], &Kh[size_t((g * cap + r) * D)], size_t(D) * 4);
                    std::memcpy(&vi[off(g, r)], &Vh[size_t((g * cap + r) * D)], size_t(D) * 4);
                }
            kv_upload(d, K.get(), ki.data(), n);
            kv_upload(d, V.get(), vi.data(), n);
        }
        const int32_t p = static_cast<int32_t>(pos0);
        copy_to_device(pos.get(), &p, 4);
        CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
    }
    void call(int64_t n, cudaStream_t s) {
        gated_attention_core(d, qg.as<float>(), k.as<float>(), v.as<float>(), use_norm ? qn.as<float>() : nullptr,
                             use_norm ? kn.as<float>() : nullptr,
                             K.get(), V.get(), pos.as<int32_t>(), n, out.as<float>(), ws.get(), ws_bytes, s,
                             pages.empty() ? nullptr : pg.as<int32_t>());
    }
    std::vector<float> result(int64_t n) {
        std::vector<float> o(size_t(n * d.n_heads * d.head_dim));
        copy_to_host(o.data(), out.get(), o.size() * 4);
        return o;
    }
    std::vector<float> cache_row(const DeviceBuffer& C, int64_t g, int64_t row) {
        return kv_download(d, kv_at(d, C, off(g, row)), size_t(d.head_dim));
    }
    // Rows [pos0, pos0 + n) of the K cache as [n, G, D].
    std::vector<float> new_rows(int64_t pos0, int64_t n) {
        const int64_t G = d.n_kv, D = d.head_dim;
        std::vector<float> o(size_t(n * G * D));
        for (int64_t g = 0; g < G; ++g)
            for (int64_t t = 0; t < n; ++t) {
                const std::vector<float> r = cache_row(K, g, pos0 + t);
                std::memcpy(&o[size_t((t * G + g) * D)], r.data(), size_t(D) * 4);
            }
        return o;
    }
};

// Host caches [G, cap, D]: rows [0, rows) random (keys roughly unit-scale like normed keys).
inline void make_host_cache(const GatedAttentionDims& d, int64_t rows, uint64_t seed, std::vector<float>& Kh,
                            std::vector<float>& Vh) {
    const size_t G = size_t(d.n_kv), D = size_t(d.head_dim), cap = size_t(d.capacity);
    Kh.assign(G * cap * D, 0.f);
    Vh.assign(G * cap * D, 0.f);
    for (size_t g = 0; g < G; ++g) {
        fill_uniform(&Kh[g * cap * D], size_t(rows) * D, seed + 2 * g, -1.7f, 1.7f);
        fill_uniform(&Vh[g * cap * D], size_t(rows) * D, seed + 2 * g + 1, -1.7f, 1.7f);
    }
}

// A stored bf16 key against the fp64-composed one: round to nearest even is within 2⁻⁹ relative, and a rounding
// of the kernel's fp32 key may land one bf16 step (2⁻⁸) away.
inline Budget bf16_row_budget() { return Budget{1e-6, 4e-3, 1e-5}; }

// Runs one call at pos0 with n tokens on gpu (caches staged from Kh/Vh, rounded to bf16 first for a bf16 cache)
// and checks: the output of the tokens in `rows` (all when empty) against the reference within `b`, every output
// element written (the poison is NaN), the new cache rows, and that a second call on the same state gives the
// same bits. Returns the error statistics.
inline ErrStats check_call(Gpu& gpu, std::vector<float>& Kh, std::vector<float>& Vh, int64_t pos0, int64_t n,
                           uint64_t seed, const std::vector<int64_t>& rows = {}, const Budget& b = {}) {
    SCOPED_TRACE(testing::Message() << "H=" << gpu.d.n_heads << " G=" << gpu.d.n_kv << " D=" << gpu.d.head_dim
                                    << " rot=" << gpu.d.rot_dim << " cap=" << gpu.d.capacity << " pos0=" << pos0
                                    << " n=" << n << (gpu.d.prefill_bf16 ? " bf16" : ""));
    const Inputs in = make_inputs(gpu.d, n, seed);
    const bool bf16 = gpu.d.kv_bf16;
    if (bf16) {
        round_bf16(Kh.data(), Kh.size());
        round_bf16(Vh.data(), Vh.size());
    }
    gpu.stage(in, Kh, Vh, pos0, pos0);
    gpu.call(n, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = gpu.result(n);
    std::vector<float> k_new;
    const std::vector<float> k_stored = bf16 ? gpu.new_rows(pos0, n) : std::vector<float>();
    const std::vector<float> want =
        cpu_attention(gpu.d, in, Kh, Vh, pos0, n, &k_new, gpu.use_norm, rows, bf16 ? &k_stored : nullptr);
    if (bf16) expect_close(k_stored, k_new, "stored bf16 keys", {}, 0, bf16_row_budget());
    const size_t row_len = size_t(gpu.d.n_heads * gpu.d.head_dim);
    const ErrStats st = expect_close(got, want, "out", rows, row_len, b);
    size_t unwritten = 0;
    for (float x : got) unwritten += std::isnan(x);
    EXPECT_EQ(unwritten, 0u) << "output elements left NaN (not written)";
    const int64_t D = gpu.d.head_dim;
    for (int64_t t = 0; t < n; t += (n > 8 ? 7 : 1))
        for (int64_t g = 0; g < gpu.d.n_kv; ++g) {
            const std::vector<float> kr = gpu.cache_row(gpu.K, g, pos0 + t), vr = gpu.cache_row(gpu.V, g, pos0 + t);
            std::vector<float> kw(&k_new[size_t((t * gpu.d.n_kv + g) * D)], &k_new[size_t((t * gpu.d.n_kv + g + 1) * D)]);
            expect_close(kr, kw, "K cache row", {}, 0, bf16 ? bf16_row_budget() : Budget{});
            std::vector<float> vw(&in.v[size_t((t * gpu.d.n_kv + g) * D)], &in.v[size_t((t * gpu.d.n_kv + g + 1) * D)]);
            if (bf16) round_bf16(vw.data(), vw.size());
            EXPECT_EQ(std::memcmp(vr.data(), vw.data(), size_t(D) * 4), 0) << "V row";
        }
    if (pos0 + n < gpu.d.capacity) {  // the row after the last token is untouched (still NaN poison)
        EXPECT_TRUE(std::isnan(gpu.cache_row(gpu.K, 0, pos0 + n)[0]));
    }
    CUDA_CHECK(cudaMemset(gpu.out.get(), 0xff, gpu.out.bytes()));  // again on the same state: the same bits
    gpu.call(n, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(std::memcmp(gpu.result(n).data(), got.data(), got.size() * 4), 0) << "second run differs";
    return st;
}

}  // namespace ember::cuda::attntest
