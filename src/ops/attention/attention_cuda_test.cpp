// GPU tests for gated_attention_core (attention_cuda.h) against the CPU references composed as
// layers/gated_attention.cpp does (rmsnorm_ref, rope_neox_ref, attention_causal_ref, sigmoid_mul_ref):
// decode at short and long positions and split boundaries, prefill, odd shapes, CUDA-graph replay with a new
// position, capacity overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_cuda.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

// Fast uniform fill for the large caches (splitmix64 → [lo, hi)).
void fill_uniform(float* p, size_t n, uint64_t seed, float lo, float hi) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < n; ++i) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        p[i] = lo + (hi - lo) * float(double(z >> 40) * 0x1.0p-24);
    }
}

std::vector<float> randn(size_t n, uint64_t seed, float mean = 0.f, float sd = 1.f) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

DeviceBuffer dev_alloc(size_t bytes) {
    auto b = DeviceBuffer::alloc(bytes, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

GatedAttentionDims make_dims(int64_t H, int64_t G, int64_t D, int64_t rot, int64_t cap) {
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
Inputs make_inputs(const GatedAttentionDims& d, int64_t n, uint64_t seed) {
    Inputs in;
    in.qg = randn(size_t(n * d.n_heads * 2 * d.head_dim), seed, 0.f, 1.5f);
    in.k = randn(size_t(n * d.n_kv * d.head_dim), seed + 1, 0.2f, 1.f);
    in.v = randn(size_t(n * d.n_kv * d.head_dim), seed + 2);
    in.qn = randn(size_t(d.head_dim), seed + 3, 1.f, 0.3f);
    in.kn = randn(size_t(d.head_dim), seed + 4, 1.f, 0.3f);
    return in;
}

// CPU side: the layer's composition with the fp64 references. Kh, Vh [G, cap, D] hold rows [0, pos0) and get
// the new rows; returns out [n, H·D]; k_new [n, G, D] receives the normed + rotated keys.
std::vector<float> cpu_attention(const GatedAttentionDims& d, const Inputs& in, std::vector<float>& Kh,
                                 std::vector<float>& Vh, int64_t pos0, int64_t n, std::vector<float>* k_new,
                                 bool use_norm = true) {
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
            std::memcpy(&Kh[size_t((g * cap + pos0 + t) * D)], &k[size_t((t * G + g) * D)], size_t(D) * 4);
            std::memcpy(&Vh[size_t((g * cap + pos0 + t) * D)], &in.v[size_t((t * G + g) * D)], size_t(D) * 4);
        }
    attention_causal_ref(q.data(), n, H, G, D, Kh.data(), Vh.data(), cap, pos0,
                         d.score_mul / std::sqrt(static_cast<float>(D)), o.data());
    if (d.gated) sigmoid_mul_ref(o.data(), gate.data(), n * H * D);
    if (k_new) *k_new = k;
    return o;
}

// Budgets: every stage is fp32 with reductions of length d (norm, scores) or ≤ a few hundred keys per split
// plus a ≤ 1024-term merge; relative errors are ~1e-6, so an NMSE of 1e-9 (≈ 3e-5 rms) and an element-wise
// 1e-4·rms + 1e-4·|x| leave about 10× margin while still catching any indexing or masking error.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < want.size(); ++i) r2 += double(want[i]) * want[i];
    const double rms = std::sqrt(r2 / double(want.size()));
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double e = std::fabs(double(got[i]) - want[i]);
        e2 += e * e;
        if (!(e <= 1e-4 * rms + 1e-4 * std::fabs(want[i])) && bad++ < 5)
            ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i] << " (rms " << rms << ")";
    }
    EXPECT_LE(e2 / r2, 1e-9) << what << " NMSE";
}

// Device state for one configuration: inputs, caches, position, output, workspace.
struct Gpu {
    GatedAttentionDims d;
    int64_t n_max;
    DeviceBuffer qg, k, v, qn, kn, K, V, pos, out, ws;
    size_t ws_bytes;
    bool use_norm = true;  // false: q/k norm pointers are nullptr (Llama)
    Gpu(const GatedAttentionDims& dims, int64_t n_max_) : d(dims), n_max(n_max_) {
        const size_t H = size_t(d.n_heads), G = size_t(d.n_kv), D = size_t(d.head_dim), N = size_t(n_max);
        qg = dev_alloc(N * H * 2 * D * 4);
        k = dev_alloc(N * G * D * 4);
        v = dev_alloc(N * G * D * 4);
        qn = dev_alloc(D * 4);
        kn = dev_alloc(D * 4);
        K = dev_alloc(G * size_t(d.capacity) * D * 4);
        V = dev_alloc(G * size_t(d.capacity) * D * 4);
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
        for (int64_t g = 0; g < d.n_kv && rows > 0; ++g) {
            copy_to_device(K.as<float>() + g * cap * D, Kh.data() + g * cap * D, size_t(rows * D) * 4);
            copy_to_device(V.as<float>() + g * cap * D, Vh.data() + g * cap * D, size_t(rows * D) * 4);
        }
        const int32_t p = static_cast<int32_t>(pos0);
        copy_to_device(pos.get(), &p, 4);
        CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
    }
    void call(int64_t n, cudaStream_t s) {
        gated_attention_core(d, qg.as<float>(), k.as<float>(), v.as<float>(), use_norm ? qn.as<float>() : nullptr,
                             use_norm ? kn.as<float>() : nullptr,
                             K.as<float>(), V.as<float>(), pos.as<int32_t>(), n, out.as<float>(), ws.get(), ws_bytes,
                             s);
    }
    std::vector<float> result(int64_t n) {
        std::vector<float> o(size_t(n * d.n_heads * d.head_dim));
        copy_to_host(o.data(), out.get(), o.size() * 4);
        return o;
    }
    std::vector<float> cache_row(const DeviceBuffer& C, int64_t g, int64_t row) {
        std::vector<float> r(size_t(d.head_dim));
        copy_to_host(r.data(), C.as<float>() + (g * d.capacity + row) * d.head_dim, r.size() * 4);
        return r;
    }
};

// Host caches [G, cap, D]: rows [0, rows) random (keys roughly unit-scale like normed keys).
void make_host_cache(const GatedAttentionDims& d, int64_t rows, uint64_t seed, std::vector<float>& Kh,
                     std::vector<float>& Vh) {
    const size_t G = size_t(d.n_kv), D = size_t(d.head_dim), cap = size_t(d.capacity);
    Kh.assign(G * cap * D, 0.f);
    Vh.assign(G * cap * D, 0.f);
    for (size_t g = 0; g < G; ++g) {
        fill_uniform(&Kh[g * cap * D], size_t(rows) * D, seed + 2 * g, -1.7f, 1.7f);
        fill_uniform(&Vh[g * cap * D], size_t(rows) * D, seed + 2 * g + 1, -1.7f, 1.7f);
    }
}

// Runs one call at pos0 with n tokens on gpu (caches staged from Kh/Vh) and checks output and new cache rows.
void check_call(Gpu& gpu, std::vector<float>& Kh, std::vector<float>& Vh, int64_t pos0, int64_t n, uint64_t seed) {
    SCOPED_TRACE(testing::Message() << "H=" << gpu.d.n_heads << " G=" << gpu.d.n_kv << " D=" << gpu.d.head_dim
                                    << " rot=" << gpu.d.rot_dim << " cap=" << gpu.d.capacity << " pos0=" << pos0
                                    << " n=" << n);
    const Inputs in = make_inputs(gpu.d, n, seed);
    gpu.stage(in, Kh, Vh, pos0, pos0);
    gpu.call(n, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> k_new;
    const std::vector<float> want = cpu_attention(gpu.d, in, Kh, Vh, pos0, n, &k_new, gpu.use_norm);
    expect_close(gpu.result(n), want, "out");
    const int64_t D = gpu.d.head_dim;
    for (int64_t t = 0; t < n; t += (n > 8 ? 7 : 1))
        for (int64_t g = 0; g < gpu.d.n_kv; ++g) {
            const std::vector<float> kr = gpu.cache_row(gpu.K, g, pos0 + t), vr = gpu.cache_row(gpu.V, g, pos0 + t);
            std::vector<float> kw(&k_new[size_t((t * gpu.d.n_kv + g) * D)], &k_new[size_t((t * gpu.d.n_kv + g + 1) * D)]);
            expect_close(kr, kw, "K cache row");
            EXPECT_EQ(std::memcmp(vr.data(), &in.v[size_t((t * gpu.d.n_kv + g) * D)], size_t(D) * 4), 0) << "V row";
        }
    if (pos0 + n < gpu.d.capacity) {  // the row after the last token is untouched (still NaN poison)
        EXPECT_TRUE(std::isnan(gpu.cache_row(gpu.K, 0, pos0 + n)[0]));
    }
}

TEST(AttentionCuda, DecodeQwenShapesShortAndLongContext) {
    SKIP_WITHOUT_GPU();
    const int64_t cap = 65536;
    const int64_t cfgs[][2] = {{8, 2}, {16, 4}, {24, 4}};
    // 63/64: one split → two; 16383/16384: chunk 64 → 96 for 264 splits (G = 2); 65535: the last row.
    const int64_t positions[] = {0, 1, 63, 64, 100, 5000, 16383, 16384, 40000, 65535};
    uint64_t seed = 1000;
    for (const auto& c : cfgs) {
        const GatedAttentionDims d = make_dims(c[0], c[1], 256, 64, cap);
        Gpu gpu(d, 1);
        std::vector<float> Kh, Vh;
        make_host_cache(d, cap, seed++, Kh, Vh);
        for (int64_t p : positions) check_call(gpu, Kh, Vh, p, 1, seed += 10);
    }
}

TEST(AttentionCuda, DecodeSmallOddShapes) {
    SKIP_WITHOUT_GPU();
    struct C {
        int64_t H, G, D, rot, cap;
        std::vector<int64_t> pos;
    };
    const C cases[] = {{3, 1, 64, 16, 100, {0, 1, 50, 63, 64, 99}},
                       {6, 3, 128, 32, 257, {0, 63, 64, 200, 256}},
                       {2, 2, 64, 64, 64, {0, 31, 63}},
                       {18, 1, 64, 8, 300, {0, 100, 299}},  // 18 query heads per kv head: 3 head groups
                       {9, 9, 256, 256, 1000, {0, 999}},
                       {4, 1, 32, 32, 5000, {0, 31, 64, 700, 4999}},   // head dim 32: several splits
                       {4, 2, 16, 16, 3000, {0, 15, 64, 700, 2999}},   // head dim 16: lanes without a column
                       {3, 1, 16, 8, 100, {0, 1, 99}},
                       {5, 1, 96, 48, 4000, {0, 31, 64, 1500, 3999}}};  // head dim 96: 8 key subsets, 32-col combine
    uint64_t seed = 2000;
    for (const C& c : cases) {
        const GatedAttentionDims d = make_dims(c.H, c.G, c.D, c.rot, c.cap);
        Gpu gpu(d, 1);
        std::vector<float> Kh, Vh;
        make_host_cache(d, c.cap, seed++, Kh, Vh);
        for (int64_t p : c.pos) check_call(gpu, Kh, Vh, p, 1, seed += 10);
    }
}

// The Llama-family variants: no output gate, plain q, interleaved or NeoX RoPE with frequency factors, with and
// without q/k norm (SmolLM2: H 9 / G 3 / d 64; Llama 3: 32 / 8 / 128; Qwen3: q/k norm, NeoX; Phi-3: d 96, MHA),
// decode (up to 300 keys: several splits and the combine) and prefill.
TEST(AttentionCuda, StandardAttentionVariants) {
    SKIP_WITHOUT_GPU();
    struct C { int64_t H, G, D; bool interleaved, factors, norm; float score_mul = 1.f; };
    const C cases[] = {{9, 3, 64, true, false, false}, {32, 8, 128, true, true, false}, {16, 8, 128, false, false, true},
                       {6, 2, 64, false, true, false}, {4, 1, 32, true, false, false}, {8, 2, 32, false, false, true},
                       {4, 2, 16, true, false, false}, {2, 1, 16, false, true, true, 1.3f},
                       {8, 2, 64, false, true, false, 1.9f},  // score_mul: YaRN's mscale²
                       {6, 6, 96, false, false, false}, {8, 2, 96, true, true, true}};  // Phi-3's head dim, MHA
    uint64_t seed = 7000;
    for (const C& c : cases) {
        GatedAttentionDims d = make_dims(c.H, c.G, c.D, c.D, 300);
        d.rope_theta = 1e5f;
        d.gated = false;
        d.rope_interleaved = c.interleaved;
        d.score_mul = c.score_mul;
        std::vector<float> ff(size_t(c.D / 2));
        for (size_t j = 0; j < ff.size(); ++j) ff[j] = 1.f + 0.5f * float(j % 7);
        if (c.factors) d.freq_factors = ff.data();
        std::vector<float> Kh, Vh;
        make_host_cache(d, d.capacity, seed++, Kh, Vh);
        {
            Gpu gpu(d, 1);
            gpu.use_norm = c.norm;
            for (int64_t p : {0, 1, 77, 299}) check_call(gpu, Kh, Vh, p, 1, seed += 10);
        }
        Gpu gpu(d, 40);
        gpu.use_norm = c.norm;
        for (int64_t p : {0, 13}) check_call(gpu, Kh, Vh, p, 40, seed += 10);
    }
}

TEST(AttentionCuda, PrefillMatchesReference) {
    SKIP_WITHOUT_GPU();
    const int64_t cfgs[][4] = {{8, 2, 256, 64}, {24, 4, 256, 64}, {3, 1, 64, 16}, {18, 2, 128, 32}};
    uint64_t seed = 3000;
    for (const auto& c : cfgs) {
        const GatedAttentionDims d = make_dims(c[0], c[1], c[2], c[3], 512);
        Gpu gpu(d, 130);
        for (int64_t pos0 : {0, 37})
            for (int64_t n : {3, 64, 130}) {
                std::vector<float> Kh, Vh;
                make_host_cache(d, pos0, seed++, Kh, Vh);
                check_call(gpu, Kh, Vh, pos0, n, seed += 10);
            }
    }
}

TEST(AttentionCuda, GraphReplayWithNewPosition) {
    SKIP_WITHOUT_GPU();
    const GatedAttentionDims d = make_dims(8, 2, 256, 64, 65536);
    Gpu gpu(d, 1);
    std::vector<float> Kh, Vh;
    make_host_cache(d, 40000, 77, Kh, Vh);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // Capture once (position 5 staged only to have valid memory; the graph reads pos0 when it runs).
    gpu.stage(make_inputs(d, 1, 1), Kh, Vh, 5, 5);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    gpu.call(1, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    uint64_t seed = 4000;
    for (int64_t pos0 : {10, 700, 4999, 16384, 30000, 3}) {
        SCOPED_TRACE(testing::Message() << "replay at pos0=" << pos0);
        const Inputs in = make_inputs(d, 1, seed += 10);
        gpu.stage(in, Kh, Vh, pos0, pos0);  // new inputs and position in the same device buffers
        CUDA_CHECK(cudaGraphLaunch(exec, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        const std::vector<float> replay = gpu.result(1);
        std::vector<float> Kc = Kh, Vc = Vh;  // the reference appends to copies
        expect_close(replay, cpu_attention(d, in, Kc, Vc, pos0, 1, nullptr), "graph out");
        // Eager call on the same state gives the same bits.
        gpu.stage(in, Kh, Vh, pos0, pos0);
        gpu.call(1, s);
        CUDA_CHECK(cudaStreamSynchronize(s));
        const std::vector<float> eager = gpu.result(1);
        EXPECT_EQ(std::memcmp(replay.data(), eager.data(), replay.size() * 4), 0) << "graph != eager";
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// Information only: decode (graph replay, n = 1) and prefill times; bytes = K and V rows read once per kv head.
TEST(AttentionCuda, Timing) {
    SKIP_WITHOUT_GPU();
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    auto elapsed_us = [&](int reps) {
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        return ms * 1000.0 / reps;
    };
    for (const auto& c : {std::pair<int64_t, int64_t>{8, 2}, std::pair<int64_t, int64_t>{16, 4}}) {
        const GatedAttentionDims d = make_dims(c.first, c.second, 256, 64, 65536);
        Gpu gpu(d, 512);
        gpu.stage(make_inputs(d, 512, 3), {}, {}, 0, 0);
        CUDA_CHECK(cudaMemset(gpu.K.get(), 0x3c, gpu.K.bytes()));  // 0x3c3c3c3c ≈ 0.0115: finite data
        CUDA_CHECK(cudaMemset(gpu.V.get(), 0x3c, gpu.V.bytes()));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        gpu.call(1, s);
        CUDA_CHECK(cudaStreamEndCapture(s, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int64_t pos0 : {100, 1000, 4000, 16000, 40000, 65535}) {
            const int32_t p = static_cast<int32_t>(pos0);
            copy_to_device(gpu.pos.get(), &p, 4);
            for (int r = 0; r < 5; ++r) CUDA_CHECK(cudaGraphLaunch(exec, s));
            CUDA_CHECK(cudaEventRecord(e0, s));
            for (int r = 0; r < 50; ++r) CUDA_CHECK(cudaGraphLaunch(exec, s));
            CUDA_CHECK(cudaEventRecord(e1, s));
            const double us = elapsed_us(50);
            const double bytes = 2.0 * double(d.n_kv) * double(pos0 + 1) * double(d.head_dim) * 4;
            std::printf("decode  H=%lld G=%lld d=256 T=%-6lld splits=%lld: %7.1f us  %6.0f GB/s (K+V %.1f MB)\n",
                        (long long)d.n_heads, (long long)d.n_kv, (long long)(pos0 + 1),
                        (long long)gated_attention_decode_splits(d), us, bytes / us * 1e-3, bytes * 1e-6);
        }
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        for (int64_t pos0 : {0, 4096}) {
            const int32_t p = static_cast<int32_t>(pos0);
            copy_to_device(gpu.pos.get(), &p, 4);
            gpu.call(512, s);
            CUDA_CHECK(cudaEventRecord(e0, s));
            for (int r = 0; r < 5; ++r) gpu.call(512, s);
            CUDA_CHECK(cudaEventRecord(e1, s));
            std::printf("prefill H=%lld G=%lld d=256 n=512 pos0=%lld: %.1f us\n", (long long)d.n_heads,
                        (long long)d.n_kv, (long long)pos0, elapsed_us(5));
        }
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(AttentionCuda, CapacityOverflowIsCaughtAndHarmless) {
    SKIP_WITHOUT_GPU();
    EXPECT_TRUE(check_kv_capacity(0, 64, 64).is_ok());
    EXPECT_FALSE(check_kv_capacity(63, 2, 64).is_ok());
    EXPECT_FALSE(check_kv_capacity(-1, 1, 64).is_ok());
    // Called anyway: the in-range token is right, the overflowing one is NaN, and nothing is written past the
    // end of kv head 0 (which would land in row 0 of kv head 1).
    const GatedAttentionDims d = make_dims(4, 2, 64, 16, 64);
    Gpu gpu(d, 2);
    std::vector<float> Kh, Vh;
    make_host_cache(d, 64, 5, Kh, Vh);
    const Inputs in = make_inputs(d, 2, 6);
    gpu.stage(in, Kh, Vh, 63, 63);
    CUDA_CHECK(cudaMemcpy(gpu.K.as<float>() + 64 * 64, &Kh[64 * 64], 64 * 4, cudaMemcpyHostToDevice));  // g=1 row 0
    gpu.call(2, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = gpu.result(2);
    const size_t row = size_t(d.n_heads * d.head_dim);
    Inputs in0 = in;  // token 0 alone, as the reference sees it
    in0.qg.resize(row * 2);
    in0.k.resize(size_t(d.n_kv * d.head_dim));
    in0.v.resize(size_t(d.n_kv * d.head_dim));
    const std::vector<float> want0 = cpu_attention(d, in0, Kh, Vh, 63, 1, nullptr);
    expect_close(std::vector<float>(got.begin(), got.begin() + long(row)), want0, "token 0");
    for (size_t i = row; i < 2 * row; ++i) ASSERT_TRUE(std::isnan(got[i])) << i;
    const std::vector<float> g1r0 = gpu.cache_row(gpu.K, 1, 0);
    EXPECT_EQ(std::memcmp(g1r0.data(), &Kh[64 * 64], 64 * 4), 0);
}

}  // namespace
}  // namespace ember::cuda
