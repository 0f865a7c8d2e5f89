// GPU tests for argmax / sample / apply_penalties (sampling_cuda.h) against the CPU sampler (sampling.h):
// greedy equality with ties and NaN, every draw inside the CPU's allowed set (random and heavily tied logits,
// all filter combinations), seeding, empirical frequencies vs Sampler::distribution, penalties bit for bit,
// graph replay with new parameters, and a timing print.
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
#include "ops/sampling/sampling.h"
#include "ops/sampling/sampling_cuda.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

constexpr int64_t kVocab = 248320;  // Qwen3.5

std::vector<float> rand_logits(size_t n, uint64_t seed, float sd = 3.f) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(0.f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// Logits on a coarse grid: thousands of exact ties everywhere, including at every cut.
std::vector<float> tied_logits(size_t n, uint64_t seed) {
    std::vector<float> v = rand_logits(n, seed, 2.f);
    for (auto& x : v) x = std::round(x * 2.f) / 2.f;
    return v;
}

DeviceBuffer dev_alloc(size_t bytes) {
    auto b = DeviceBuffer::alloc(bytes, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

// Device buffers for one vocabulary size.
struct Dev {
    int64_t vocab;
    int max_out;
    DeviceBuffer logits, params, state, out, ws, aws;
    Dev(int64_t v, int max_out_ = 1) : vocab(v), max_out(max_out_) {
        logits = dev_alloc(size_t(v) * 4);
        params = dev_alloc(sizeof(DeviceSamplingParams));
        state = dev_alloc(8);
        out = dev_alloc(size_t(max_out) * 4);
        ws = dev_alloc(sample_workspace_bytes(v));
        aws = dev_alloc(argmax_workspace_bytes(v));
    }
    void set_logits(const std::vector<float>& l) { copy_to_device(logits.get(), l.data(), l.size() * 4); }
    void set_params(const SamplingParams& p) {
        const DeviceSamplingParams d = to_device_params(p);
        copy_to_device(params.get(), &d, sizeof d);
    }
    void set_state(uint64_t s) { copy_to_device(state.get(), &s, 8); }
    uint64_t get_state() {
        uint64_t s;
        copy_to_host(&s, state.get(), 8);
        return s;
    }
    void poison_out() { CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes())); }
    // n consecutive draws (the RNG state advances between them), one sync.
    std::vector<int32_t> draw(int n, cudaStream_t s = nullptr) {
        EMBER_CHECK(n <= max_out, "draw");
        poison_out();
        for (int i = 0; i < n; ++i)
            sample(logits.as<float>(), vocab, params.as<DeviceSamplingParams>(), state.as<uint64_t>(),
                   out.as<int32_t>() + i, ws.get(), s);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<int32_t> ids(static_cast<size_t>(n));
        copy_to_host(ids.data(), out.get(), size_t(n) * 4);
        return ids;
    }
    int32_t gpu_argmax() {
        poison_out();
        argmax(logits.as<float>(), vocab, out.as<int32_t>(), aws.get(), nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        int32_t id;
        copy_to_host(&id, out.get(), 4);
        return id;
    }
};

SamplingParams make_params(float T, int top_k, float top_p, float min_p) {
    SamplingParams p;
    p.temperature = T;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
}

TEST(SamplingCuda, ArgmaxMatchesCpuWithTiesNaNAndSignedZero) {
    SKIP_WITHOUT_GPU();
    for (int64_t V : {int64_t(1), int64_t(2), int64_t(7), int64_t(1000), int64_t(4097), kVocab}) {
        Dev d(V);
        for (uint64_t seed = 0; seed < 4; ++seed) {
            std::vector<float> l = rand_logits(size_t(V), seed + 17 * uint64_t(V));
            if (V > 10) {
                const float top = *std::max_element(l.begin(), l.end()) + 1.f;
                const size_t a = size_t(V / 3 + int64_t(seed)), b = size_t(V - 2);
                l[b] = top;  // tie: the lower id must win
                l[a] = top;
                l[0] = NAN;  // NaN never wins
                l[size_t(V / 2)] = NAN;
            }
            d.set_logits(l);
            EXPECT_EQ(d.gpu_argmax(), ember::argmax(l.data(), V)) << "V=" << V << " seed=" << seed;
        }
    }
    Dev d(6);
    d.set_logits({-1.f, -2.f, -0.f, 0.f, -3.f, 0.f});  // -0 == +0: the first of them
    EXPECT_EQ(d.gpu_argmax(), 2);
    d.set_logits({-INFINITY, -INFINITY, NAN, -INFINITY, -INFINITY, -INFINITY});
    EXPECT_EQ(d.gpu_argmax(), 0);
}

// argmax_rows: every row equals ember::argmax of that row (ties, NaN rows, signed zeros, ragged vocab sizes),
// the logits it reports are the rows' values at the ids, and nothing past `rows` is written (poison).
TEST(SamplingCuda, ArgmaxRowsMatchesCpuPerRow) {
    SKIP_WITHOUT_GPU();
    for (int64_t V : {int64_t(1), int64_t(7), int64_t(1000), int64_t(65537), kVocab}) {
        for (int64_t rows : {1, 3, 13}) {
            std::vector<float> l = rand_logits(size_t(V * rows), uint64_t(V * 31 + rows));
            if (rows > 1) {
                for (int64_t i = 0; i < V; ++i) l[size_t(V + i)] = std::nanf("");  // row 1: all NaN → 0
                if (rows > 2) {
                    for (int64_t i = 0; i < V; ++i) l[size_t(2 * V + i)] = (i % 2) ? 0.f : -0.f;  // ties: lowest id
                }
            }
            DeviceBuffer dl = dev_alloc(l.size() * 4), ids = dev_alloc(size_t(rows + 1) * 4),
                         lg = dev_alloc(size_t(rows + 1) * 4), ws = dev_alloc(argmax_rows_workspace_bytes(rows, V));
            copy_to_device(dl.get(), l.data(), l.size() * 4);
            CUDA_CHECK(cudaMemset(ids.get(), 0x7f, ids.bytes()));
            CUDA_CHECK(cudaMemset(lg.get(), 0x7f, lg.bytes()));
            argmax_rows(dl.as<float>(), rows, V, ids.as<int32_t>(), lg.as<float>(), ws.get(), nullptr);
            CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<int32_t> got(size_t(rows + 1));
            std::vector<float> got_l(size_t(rows + 1));
            copy_to_host(got.data(), ids.get(), got.size() * 4);
            copy_to_host(got_l.data(), lg.get(), got_l.size() * 4);
            for (int64_t r = 0; r < rows; ++r) {
                // An all-NaN row: the GPU picks 0, ember::argmax the last id; both report the NaN logit.
                const int32_t want = r == 1 && rows > 1 ? 0 : ember::argmax(&l[size_t(r * V)], V);
                EXPECT_EQ(got[size_t(r)], want) << "V=" << V << " row " << r;
                const float wl = l[size_t(r * V + want)];
                EXPECT_TRUE(std::isnan(wl) ? std::isnan(got_l[size_t(r)]) : got_l[size_t(r)] == wl) << "row " << r;
            }
            EXPECT_EQ(got[size_t(rows)], 0x7f7f7f7f) << "wrote past the rows";
        }
    }
}

TEST(SamplingCuda, GreedyPathsEqualArgmaxAndLeaveRngAlone) {
    SKIP_WITHOUT_GPU();
    Dev d(kVocab, 4);
    for (uint64_t seed = 0; seed < 6; ++seed) {
        std::vector<float> l = seed % 2 ? tied_logits(size_t(kVocab), seed) : rand_logits(size_t(kVocab), seed);
        d.set_logits(l);
        const int32_t want = ember::argmax(l.data(), kVocab);
        for (const SamplingParams& p : {make_params(0.f, 0, 1.f, 0.f), make_params(-1.f, 40, 0.9f, 0.1f),
                                        make_params(1.5f, 1, 0.9f, 0.f), make_params(0.3f, 1, 1.f, 0.f)}) {
            d.set_params(p);
            d.set_state(1234);
            const std::vector<int32_t> ids = d.draw(2);
            EXPECT_EQ(ids[0], want);
            EXPECT_EQ(ids[1], want);
            EXPECT_EQ(d.get_state(), 1234u) << "greedy must not consume randomness";
        }
    }
}

// The CPU's allowed set with cut-offs loosened by 1e-5 (a superset of any correct fp32 implementation's set).
std::vector<char> allowed_set(const std::vector<float>& l, const SamplingParams& p) {
    SamplingParams q = p;
    if (q.top_p < 1.f) q.top_p = std::min(1.f, q.top_p + 1e-5f);
    q.min_p = q.min_p * (1.f - 1e-5f);
    if (q.top_k > kMaxTopK) q.top_k = 0;  // the GPU clamps; the unclamped set contains the clamped one
    Sampler s(q);
    std::vector<char> ok(l.size(), 0);
    for (const TokenProb& t : s.distribution(l.data(), int64_t(l.size()), {})) ok[size_t(t.id)] = 1;
    return ok;
}

TEST(SamplingCuda, DrawsStayInsideTheAllowedSet) {
    SKIP_WITHOUT_GPU();
    const SamplingParams cfgs[] = {
        make_params(1.f, 50, 1.f, 0.f),      make_params(0.7f, 40, 0.9f, 0.f),  make_params(1.2f, 0, 0.95f, 0.f),
        make_params(1.f, 0, 0.5f, 0.f),      make_params(1.f, 0, 1.f, 0.1f),    make_params(0.8f, 1000, 0.98f, 0.02f),
        make_params(1.f, 1024, 1.f, 0.f),    make_params(2.f, 0, 0.3f, 0.05f),  make_params(1.f, 3000, 0.9f, 0.f),
        make_params(0.5f, 2, 1.f, 0.f),      make_params(5.f, 0, 0.999f, 0.f),  make_params(1.f, 0, 0.f, 0.f)};
    constexpr int kDraws = 48;
    for (int64_t V : {kVocab, int64_t(5000), int64_t(100)}) {
        Dev d(V, kDraws);
        for (int kind = 0; kind < 2; ++kind) {
            const std::vector<float> l = kind == 0 ? rand_logits(size_t(V), 7 + uint64_t(V)) : tied_logits(size_t(V), 9);
            d.set_logits(l);
            int ci = 0;
            for (const SamplingParams& p : cfgs) {
                SCOPED_TRACE(testing::Message() << "V=" << V << (kind ? " tied" : " random") << " cfg " << ci++
                                                << ": T=" << p.temperature << " k=" << p.top_k << " p=" << p.top_p
                                                << " min_p=" << p.min_p);
                const std::vector<char> ok = allowed_set(l, p);
                d.set_params(p);
                d.set_state(1000 + uint64_t(ci));
                const std::vector<int32_t> ids = d.draw(kDraws);
                for (int32_t id : ids) {
                    ASSERT_TRUE(id >= 0 && id < V) << id;
                    EXPECT_TRUE(ok[size_t(id)]) << "id " << id << " logit " << l[size_t(id)];
                }
                EXPECT_EQ(d.get_state(), 1000u + uint64_t(ci) + kDraws);
            }
        }
    }
}

TEST(SamplingCuda, SameStateSameToken) {
    SKIP_WITHOUT_GPU();
    Dev d(kVocab, 8);
    const std::vector<float> l = rand_logits(size_t(kVocab), 99, 2.f);
    d.set_logits(l);
    for (const SamplingParams& p : {make_params(1.f, 0, 1.f, 0.f), make_params(0.9f, 50, 0.9f, 0.f),
                                    make_params(1.3f, 0, 0.95f, 0.f), make_params(1.f, 0, 1.f, 0.05f)}) {
        d.set_params(p);
        d.set_state(42);
        const std::vector<int32_t> a = d.draw(8);
        d.set_state(42);
        const std::vector<int32_t> b = d.draw(8);
        EXPECT_EQ(a, b);
        d.set_state(43);
        const std::vector<int32_t> c = d.draw(8);
        EXPECT_EQ(std::vector<int32_t>(a.begin() + 1, a.end()), std::vector<int32_t>(c.begin(), c.end() - 1))
            << "state is a counter: starting one later shifts the stream by one";
    }
}

// Empirical frequencies over N draws against the CPU's distribution: every count within 5 sigma, nothing
// drawn outside the support.
void check_frequencies(Dev& d, const std::vector<float>& l, const SamplingParams& p, int N) {
    Sampler s(p);
    const std::vector<TokenProb> dist = s.distribution(l.data(), int64_t(l.size()), {});
    std::vector<double> want(l.size(), 0.0);
    for (const TokenProb& t : dist) want[size_t(t.id)] = t.p;
    d.set_params(p);
    d.set_state(777);
    const std::vector<int32_t> ids = d.draw(N);
    std::vector<int> got(l.size(), 0);
    for (int32_t id : ids) {
        ASSERT_TRUE(id >= 0 && size_t(id) < l.size());
        ++got[size_t(id)];
    }
    for (size_t i = 0; i < l.size(); ++i) {
        const double e = want[i] * N, sd = std::sqrt(N * want[i] * (1 - want[i]));
        if (want[i] == 0.0) {
            EXPECT_EQ(got[i], 0) << "token " << i << " outside the support";
        } else {
            EXPECT_NEAR(got[i], e, 5 * sd + 1) << "token " << i << " p=" << want[i];
        }
    }
}

TEST(SamplingCuda, FrequenciesMatchTheCpuDistribution) {
    SKIP_WITHOUT_GPU();
    constexpr int N = 20000;
    {
        std::vector<float> l(1000, -INFINITY);
        l[3] = std::log(0.5f);
        l[10] = std::log(0.3f);
        l[500] = std::log(0.15f);
        l[999] = std::log(0.05f);
        Dev d(1000, N);
        d.set_logits(l);
        for (const SamplingParams& p :
             {make_params(1.f, 0, 1.f, 0.f), make_params(2.f, 0, 1.f, 0.f), make_params(1.f, 3, 1.f, 0.f),
              make_params(1.f, 0, 0.7f, 0.f), make_params(1.f, 0, 1.f, 0.25f), make_params(1.f, 3, 0.6f, 0.f),
              make_params(0.5f, 0, 0.9f, 0.f)}) {
            SCOPED_TRACE(testing::Message() << "T=" << p.temperature << " k=" << p.top_k << " p=" << p.top_p
                                            << " min_p=" << p.min_p);
            check_frequencies(d, l, p, N);
        }
    }
    {
        // Equal logits: top-k and top-p cut inside a tie (lowest ids first), Gumbel over many blocks.
        std::vector<float> l(1000, 0.25f);
        Dev d(1000, N);
        d.set_logits(l);
        check_frequencies(d, l, make_params(1.f, 10, 1.f, 0.f), N);      // ids 0..9
        check_frequencies(d, l, make_params(1.f, 0, 0.0105f, 0.f), N);   // 11 tokens: ids 0..10
        check_frequencies(d, l, make_params(1.f, 0, 1.f, 0.f), N);       // all 1000
    }
    {
        std::vector<float> l(size_t(kVocab), -60.f);  // e^-60 per token: invisible next to the 9 below
        for (int i = 0; i < 9; ++i) l[size_t(i) * 31000] = 1.f + (i == 4 ? 0.5f : 0.f);
        Dev d(kVocab, N);
        d.set_logits(l);
        check_frequencies(d, l, make_params(1.f, 0, 1.f, 0.f), N);
        check_frequencies(d, l, make_params(1.f, 0, 0.5f, 0.f), N);
    }
}

TEST(SamplingCuda, PenaltiesBitExactAndCounts) {
    SKIP_WITHOUT_GPU();
    std::vector<float> l = rand_logits(size_t(kVocab), 5);
    std::mt19937_64 g(6);
    std::vector<int32_t> history;
    for (int i = 0; i < 200; ++i) history.push_back(int32_t(g() % 300));  // repeats
    history.push_back(17);
    l[17] = 0.f;  // l == 0 takes the multiply branch
    SamplingParams p = make_params(1.f, 0, 1.f, 0.f);
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.penalty_last_n = 64;
    std::vector<float> want = l;
    std::vector<int32_t> scratch;
    ember::apply_penalties(want.data(), kVocab, history, p, scratch);
    std::vector<int32_t> counts(size_t(kVocab), 0);
    for (size_t i = history.size() - 64; i < history.size(); ++i) ++counts[size_t(history[i])];
    Dev d(kVocab);
    d.set_logits(l);
    d.set_params(p);
    auto dc = upload(counts, "counts");
    ASSERT_TRUE(dc.is_ok());
    apply_penalties(d.logits.as<float>(), kVocab, dc->as<int32_t>(), d.params.as<DeviceSamplingParams>(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got = download<float>(d.logits, size_t(kVocab));
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);

    // token_counts_add: ids read from device memory; out-of-range ids ignored.
    std::vector<int32_t> ids = {5, 5, -1, int32_t(kVocab)};
    auto di = upload(ids, "ids");
    ASSERT_TRUE(di.is_ok());
    CUDA_CHECK(cudaMemset(dc->get(), 0, dc->bytes()));
    token_counts_add(dc->as<int32_t>(), kVocab, di->as<int32_t>() + 0, 1, nullptr);
    token_counts_add(dc->as<int32_t>(), kVocab, di->as<int32_t>() + 1, 1, nullptr);
    token_counts_add(dc->as<int32_t>(), kVocab, di->as<int32_t>() + 0, -1, nullptr);
    token_counts_add(dc->as<int32_t>(), kVocab, di->as<int32_t>() + 2, 1, nullptr);
    token_counts_add(dc->as<int32_t>(), kVocab, di->as<int32_t>() + 3, 1, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<int32_t> c = download<int32_t>(dc.value(), size_t(kVocab));
    EXPECT_EQ(c[5], 1);
    EXPECT_EQ(std::count(c.begin(), c.end(), 0), kVocab - 1);
}

TEST(SamplingCuda, GraphReplayWithNewParametersAndTiming) {
    SKIP_WITHOUT_GPU();
    Dev d(kVocab, 1);
    const std::vector<float> l = rand_logits(size_t(kVocab), 31, 2.5f);
    d.set_logits(l);
    d.set_params(make_params(0.f, 0, 1.f, 0.f));
    d.set_state(5);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    sample(d.logits.as<float>(), kVocab, d.params.as<DeviceSamplingParams>(), d.state.as<uint64_t>(),
           d.out.as<int32_t>(), d.ws.get(), s);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (const SamplingParams& p : {make_params(0.f, 0, 1.f, 0.f), make_params(1.f, 1, 1.f, 0.f),
                                    make_params(0.8f, 20, 0.9f, 0.f), make_params(1.f, 0, 0.9f, 0.f),
                                    make_params(1.f, 0, 1.f, 0.2f)}) {
        const std::vector<char> ok = allowed_set(l, p);
        d.set_params(p);
        for (int r = 0; r < 8; ++r) {
            CUDA_CHECK(cudaGraphLaunch(exec, s));
            CUDA_CHECK(cudaStreamSynchronize(s));
            int32_t id;
            copy_to_host(&id, d.out.get(), 4);
            ASSERT_TRUE(id >= 0 && id < kVocab);
            EXPECT_TRUE(ok[size_t(id)]) << "T=" << p.temperature << " k=" << p.top_k << " p=" << p.top_p;
            if (p.temperature <= 0.f || p.top_k == 1) {
                EXPECT_EQ(id, ember::argmax(l.data(), kVocab));
            }
        }
    }
    // Timing (information only): graph replays of sample() and of argmax().
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    for (const SamplingParams& p : {make_params(0.f, 0, 1.f, 0.f), make_params(0.8f, 40, 0.95f, 0.f),
                                    make_params(0.8f, 0, 0.95f, 0.f), make_params(1.f, 0, 1.f, 0.05f)}) {
        d.set_params(p);
        for (int r = 0; r < 10; ++r) CUDA_CHECK(cudaGraphLaunch(exec, s));
        CUDA_CHECK(cudaEventRecord(e0, s));
        for (int r = 0; r < 200; ++r) CUDA_CHECK(cudaGraphLaunch(exec, s));
        CUDA_CHECK(cudaEventRecord(e1, s));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        std::printf("sample(vocab %lld, T=%.1f k=%d p=%.2f min_p=%.2f): %.1f us per call (graph replay)\n",
                    (long long)kVocab, p.temperature, p.top_k, p.top_p, p.min_p, ms * 1000.f / 200.f);
    }
    CUDA_CHECK(cudaEventRecord(e0, s));
    for (int r = 0; r < 200; ++r) argmax(d.logits.as<float>(), kVocab, d.out.as<int32_t>(), d.aws.get(), s);
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("argmax(vocab %lld): %.1f us per call (eager, 2 kernels)\n", (long long)kVocab, ms * 1000.f / 200.f);
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace ember::cuda
