// GPU tests for gated_attention_core (attention_cuda.h) against the CPU references composed as
// layers/gated_attention.cpp does (rmsnorm_ref, rope_neox_ref, attention_causal_ref, sigmoid_mul_ref):
// decode at short and long positions and split boundaries, prefill, odd shapes, CUDA-graph replay with a new
// position, capacity overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ops/attention/attention_cuda_test_util.h"

namespace ember::cuda {
namespace {

using namespace attntest;

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

// Decode cases: each shape at its positions, with a bf16 and / or paged cache (Gpu: the pages shuffled in a pool
// with spare pages).
struct DecodeCase {
    int64_t H, G, D, rot, cap;
    std::vector<int64_t> pos;
};
void run_decode_cases(const std::vector<DecodeCase>& cases, bool kv_bf16, bool paged, uint64_t seed) {
    for (const DecodeCase& c : cases) {
        GatedAttentionDims d = make_dims(c.H, c.G, c.D, c.rot, c.cap);
        d.kv_bf16 = kv_bf16;
        Gpu gpu(d, 1, paged, seed);
        std::vector<float> Kh, Vh;
        make_host_cache(d, c.cap, seed++, Kh, Vh);
        for (int64_t p : c.pos) check_call(gpu, Kh, Vh, p, 1, seed += 10);
    }
}

// A bf16 cache (GatedAttentionDims::kv_bf16): rows stored rounded, read back exactly; against the reference on
// the rounded rows with the fp32 budget, at short and long context, Qwen shapes and every other head dim.
TEST(AttentionCuda, Bf16CacheDecodeMatchesReference) {
    SKIP_WITHOUT_GPU();
    run_decode_cases({{8, 2, 256, 64, 65536, {0, 1, 63, 64, 5000, 16384, 65535}},
                      {24, 4, 256, 64, 20000, {0, 100, 19999}},
                      {6, 3, 128, 32, 257, {0, 63, 64, 256}},
                      {18, 1, 64, 8, 300, {0, 100, 299}},
                      {4, 1, 32, 32, 5000, {0, 64, 4999}},
                      {4, 2, 16, 16, 3000, {0, 15, 2999}},
                      {5, 1, 96, 48, 4000, {0, 31, 3999}}},
                     true, false, 8100);
}

// A paged cache (the sequence's pages shuffled in a pool with spare pages): decode writes and reads through the page
// list, fp32 and bf16 caches, positions at page edges (63 / 64 / 127 / 128) and deep in the context.
TEST(AttentionCuda, PagedCacheDecodeMatchesReference) {
    SKIP_WITHOUT_GPU();
    for (bool kv16 : {false, true})
        run_decode_cases({{8, 2, 256, 64, 9000, {0, 1, 63, 64, 127, 128, 5000, 8999}},
                          {6, 3, 128, 32, 300, {0, 64, 299}},
                          {4, 2, 16, 16, 3000, {0, 15, 64, 2999}},
                          {5, 1, 96, 48, 700, {0, 31, 699}}},
                         kv16, true, kv16 ? 8800 : 8700);
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
