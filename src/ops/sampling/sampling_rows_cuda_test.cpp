// GPU tests of the rows forms (sampling_rows_cuda.h) against their definition, the single-row ops run row by row:
// random ragged rows (1, 3, 17, 64; the Qwen3.5 vocabulary and a small odd one), random per-row parameters
// (greedy, top_k = 1, temperature only, top-k, top-p, min-p, all three, with and without penalties), rows
// scattered over a larger pool of slots through a strided row → slot map, random RNG states and counts, outputs
// poisoned first. Every row's id, chosen logit, penalised logits and RNG state must equal the single-row result
// exactly (bit for bit; three draws in a row), slots outside the step and greedy rows keep their states, the
// penalised logits equal the CPU apply_penalties, and one captured graph replayed with new slots, parameters and
// logits still matches; a timing print of the selection of 8 and 64 rows (graph replay). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/sampling/sampling.h"
#include "ops/sampling/sampling_rows_cuda.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

DeviceBuffer dev_alloc(size_t bytes) {
    auto b = DeviceBuffer::alloc(bytes < 16 ? 16 : bytes, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

// One step's inputs: rows logits rows, their params, a pool of `slots` slots (RNG states, counts, the histories
// the counts come from) and the strided row → slot map (slot of row r at map[2r]; map[2r + 1] is filler).
struct Case {
    int64_t rows, vocab, slots;
    std::vector<float> logits;             // [rows, vocab]
    std::vector<SamplingParams> params;    // [rows]
    std::vector<int32_t> map;              // [2·rows]
    std::vector<uint64_t> state;           // [slots]
    std::vector<std::vector<int32_t>> history;  // [slots]
    std::vector<int32_t> counts;           // [slots, vocab]: each slot's whole history counted
    int32_t slot(int64_t r) const { return map[size_t(2 * r)]; }
};

SamplingParams random_params(std::mt19937_64& g, int64_t vocab) {
    std::uniform_real_distribution<float> u(0.f, 1.f);
    SamplingParams p;
    p.temperature = 0.3f + 1.2f * u(g);
    switch (g() % 8) {
        case 0: p.temperature = g() % 2 ? 0.f : -1.f; break;  // greedy
        case 1: p.top_k = 1; break;                            // greedy through top_k
        case 2: break;                                         // temperature only
        case 3: p.top_k = 2 + int(g() % uint64_t(std::min<int64_t>(kMaxTopK, vocab + 8) - 1)); break;
        case 4: p.top_p = 0.3f + 0.69f * u(g); break;
        case 5: p.min_p = 0.01f + 0.3f * u(g); break;
        case 6:
            p.top_k = 2 + int(g() % 200);
            p.top_p = 0.5f + 0.49f * u(g);
            p.min_p = 0.05f * u(g);
            break;
        default: p.top_p = 0.95f, p.min_p = 0.02f; break;
    }
    if (g() % 2) {
        p.repetition_penalty = 0.8f + 0.7f * u(g);
        p.presence_penalty = g() % 2 ? 1.5f * u(g) - 0.5f : 0.f;
        p.frequency_penalty = g() % 2 ? 0.8f * u(g) - 0.3f : 0.f;
    }
    p.penalty_last_n = -1;  // the counts are of each slot's whole history
    return p;
}

Case make_case(int64_t rows, int64_t vocab, uint64_t seed) {
    std::mt19937_64 g(seed);
    Case c;
    c.rows = rows, c.vocab = vocab, c.slots = rows + 5;
    c.logits.resize(size_t(rows * vocab));
    std::normal_distribution<float> nd(0.f, 3.f);
    for (int64_t r = 0; r < rows; ++r) {
        float* l = &c.logits[size_t(r * vocab)];
        const bool tied = g() % 4 == 0;  // a coarse grid: exact ties at every cut
        for (int64_t i = 0; i < vocab; ++i) l[i] = tied ? std::round(nd(g)) / 2.f : nd(g);
        c.params.push_back(random_params(g, vocab));
    }
    std::vector<int32_t> perm(size_t(c.slots));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    for (int64_t r = 0; r < rows; ++r) c.map.insert(c.map.end(), {perm[size_t(r)], int32_t(g() % 1000)});
    c.counts.assign(size_t(c.slots * vocab), 0);
    for (int64_t q = 0; q < c.slots; ++q) {
        c.state.push_back(g());
        std::vector<int32_t> h(size_t(g() % 60));
        for (auto& t : h) t = int32_t(g() % uint64_t(std::min<int64_t>(vocab, 300)));  // repeats
        for (int32_t t : h) c.counts[size_t(q * vocab + t)]++;
        c.history.push_back(std::move(h));
    }
    return c;
}

struct RowResult {
    std::vector<int32_t> ids;
    std::vector<float> out_logit, pen_logits;
    std::vector<uint64_t> state;  // [slots]
};

// The definition: apply_penalties + sample, one row at a time, with that row's slot's state and counts;
// `draws` draws in a row (the state advancing between them).
std::vector<RowResult> single_rows(const Case& c, int draws) {
    const int64_t V = c.vocab;
    DeviceBuffer logits = dev_alloc(size_t(V) * 4), params = dev_alloc(sizeof(DeviceSamplingParams)),
                 counts = dev_alloc(size_t(V) * 4), state = dev_alloc(8), out = dev_alloc(4),
                 ws = dev_alloc(sample_workspace_bytes(V));
    std::vector<RowResult> res(static_cast<size_t>(draws));
    for (auto& x : res) x.state = c.state;
    for (int64_t r = 0; r < c.rows; ++r) {
        const int32_t q = c.slot(r);
        const DeviceSamplingParams d = to_device_params(c.params[size_t(r)]);
        copy_to_device(logits.get(), &c.logits[size_t(r * V)], size_t(V) * 4);
        copy_to_device(params.get(), &d, sizeof d);
        copy_to_device(counts.get(), &c.counts[size_t(q * V)], size_t(V) * 4);
        copy_to_device(state.get(), &c.state[size_t(q)], 8);
        apply_penalties(logits.as<float>(), V, counts.as<int32_t>(), params.as<DeviceSamplingParams>(), nullptr);
        std::vector<float> pen(static_cast<size_t>(V));
        copy_to_host(pen.data(), logits.get(), size_t(V) * 4);
        for (int k = 0; k < draws; ++k) {
            sample(logits.as<float>(), V, params.as<DeviceSamplingParams>(), state.as<uint64_t>(), out.as<int32_t>(),
                   ws.get(), nullptr);
            CUDA_CHECK(cudaDeviceSynchronize());
            int32_t id;
            copy_to_host(&id, out.get(), 4);
            copy_to_host(&res[size_t(k)].state[size_t(q)], state.get(), 8);
            res[size_t(k)].ids.push_back(id);
            res[size_t(k)].out_logit.push_back(id >= 0 && id < V ? pen[size_t(id)] : NAN);
            res[size_t(k)].pen_logits.insert(res[size_t(k)].pen_logits.end(), pen.begin(), pen.end());
        }
    }
    return res;
}

// The rows ops under test, with every output poisoned first. Device buffers live in the struct so that a captured
// graph can be replayed over new contents.
struct RowsDev {
    int64_t rows, vocab, slots;
    DeviceBuffer logits, params, map, state, counts, ids, out_logit, ws;
    RowsDev(int64_t R, int64_t V, int64_t S) : rows(R), vocab(V), slots(S) {
        logits = dev_alloc(size_t(R * V) * 4);
        params = dev_alloc(size_t(R) * sizeof(DeviceSamplingParams));
        map = dev_alloc(size_t(2 * R) * 4);
        state = dev_alloc(size_t(S) * 8);
        counts = dev_alloc(size_t(S * V) * 4);
        ids = dev_alloc(size_t(R) * 4);
        out_logit = dev_alloc(size_t(R) * 4);
        ws = dev_alloc(sample_rows_workspace_bytes(R, V));
    }
    void load(const Case& c) {
        EMBER_CHECK(c.rows == rows && c.vocab == vocab && c.slots == slots, "RowsDev::load: shape");
        copy_to_device(logits.get(), c.logits.data(), c.logits.size() * 4);
        std::vector<DeviceSamplingParams> d;
        for (const auto& p : c.params) d.push_back(to_device_params(p));
        copy_to_device(params.get(), d.data(), d.size() * sizeof(DeviceSamplingParams));
        copy_to_device(map.get(), c.map.data(), c.map.size() * 4);
        copy_to_device(state.get(), c.state.data(), c.state.size() * 8);
        copy_to_device(counts.get(), c.counts.data(), c.counts.size() * 4);
    }
    void poison() {
        CUDA_CHECK(cudaMemset(ids.get(), 0xff, ids.bytes()));
        CUDA_CHECK(cudaMemset(out_logit.get(), 0xff, out_logit.bytes()));  // NaN
    }
    void penalties(cudaStream_t s) {
        apply_penalties_rows(logits.as<float>(), rows, vocab, counts.as<int32_t>(), params.as<DeviceSamplingParams>(),
                             map.as<int32_t>(), 2, s);
    }
    void draw(cudaStream_t s) {
        sample_rows(logits.as<float>(), rows, vocab, params.as<DeviceSamplingParams>(), state.as<uint64_t>(),
                    map.as<int32_t>(), 2, ids.as<int32_t>(), out_logit.as<float>(), ws.get(), s);
    }
    RowResult read() {
        RowResult x;
        x.ids = download<int32_t>(ids, size_t(rows));
        x.out_logit = download<float>(out_logit, size_t(rows));
        x.pen_logits = download<float>(logits, size_t(rows * vocab));
        x.state = download<uint64_t>(state, size_t(slots));
        return x;
    }
};

bool bits_equal(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

void expect_same(const Case& c, const RowResult& want, const RowResult& got, const char* what) {
    for (int64_t r = 0; r < c.rows; ++r) {
        const SamplingParams& p = c.params[size_t(r)];
        SCOPED_TRACE(testing::Message() << what << ": row " << r << " of " << c.rows << ", vocab " << c.vocab
                                        << ", slot " << c.slot(r) << ", T " << p.temperature << " top_k " << p.top_k
                                        << " top_p " << p.top_p << " min_p " << p.min_p << " rp "
                                        << p.repetition_penalty);
        EXPECT_EQ(got.ids[size_t(r)], want.ids[size_t(r)]);
        EXPECT_TRUE(bits_equal(got.out_logit[size_t(r)], want.out_logit[size_t(r)]))
            << got.out_logit[size_t(r)] << " vs " << want.out_logit[size_t(r)];
        EXPECT_EQ(0, std::memcmp(&got.pen_logits[size_t(r * c.vocab)], &want.pen_logits[size_t(r * c.vocab)],
                                 size_t(c.vocab) * 4))
            << "penalised logits differ";
    }
    for (int64_t q = 0; q < c.slots; ++q) EXPECT_EQ(got.state[size_t(q)], want.state[size_t(q)]) << "slot " << q;
}

TEST(SamplingRowsCuda, EveryRowEqualsTheSingleRowOps) {
    SKIP_WITHOUT_GPU();
    int checked = 0, greedy = 0, penalised = 0;
    for (int64_t V : {int64_t(248320), int64_t(1009)}) {
        for (int64_t R : {1, 3, 17, 64}) {
            const Case c = make_case(R, V, uint64_t(R * 1000 + V));
            const std::vector<RowResult> want = single_rows(c, 3);
            RowsDev d(R, V, c.slots);
            d.load(c);
            d.poison();
            d.penalties(nullptr);
            for (int k = 0; k < 3; ++k) {
                d.poison();
                d.draw(nullptr);
                CUDA_CHECK(cudaDeviceSynchronize());
                expect_same(c, want[size_t(k)], d.read(), k == 0 ? "first draw" : "later draw");
            }
            // What the single-row ops are themselves held to: slots outside the step and greedy rows keep their
            // states, sampled rows advance by one per draw; penalties equal the CPU op; a row without penalties
            // is untouched.
            const RowResult got = d.read();
            std::vector<bool> in_step(size_t(c.slots), false);
            for (int64_t r = 0; r < R; ++r) {
                const SamplingParams& p = c.params[size_t(r)];
                const int32_t q = c.slot(r);
                in_step[size_t(q)] = true;
                const bool g = p.temperature <= 0.f || p.top_k == 1;
                EXPECT_EQ(got.state[size_t(q)], c.state[size_t(q)] + (g ? 0 : 3)) << "row " << r;
                std::vector<float> cpu(&c.logits[size_t(r * V)], &c.logits[size_t((r + 1) * V)]);
                std::vector<int32_t> scratch;
                apply_penalties(cpu.data(), V, c.history[size_t(q)], p, scratch);
                EXPECT_EQ(0, std::memcmp(cpu.data(), &got.pen_logits[size_t(r * V)], size_t(V) * 4))
                    << "row " << r << ": penalties differ from the CPU op";
                const bool pen = p.repetition_penalty != 1.f || p.presence_penalty != 0.f || p.frequency_penalty != 0.f;
                if (!pen) {
                    EXPECT_EQ(0, std::memcmp(&c.logits[size_t(r * V)], &got.pen_logits[size_t(r * V)], size_t(V) * 4));
                }
                greedy += g;
                penalised += pen && !c.history[size_t(q)].empty();
                ++checked;
            }
            for (int64_t q = 0; q < c.slots; ++q)
                if (!in_step[size_t(q)]) {
                    EXPECT_EQ(got.state[size_t(q)], c.state[size_t(q)]) << "idle slot " << q;
                }
        }
    }
    std::printf("rows checked: %d (greedy %d, with penalties %d)\n", checked, greedy, penalised);
    EXPECT_GT(greedy, 5);
    EXPECT_GT(penalised, 10);
    EXPECT_GT(checked - greedy, 30);
}

// One graph captured for 17 rows, replayed over new logits, parameters, slots, states and counts.
TEST(SamplingRowsCuda, CapturedGraphReadsEverythingAtRunTime) {
    SKIP_WITHOUT_GPU();
    const int64_t R = 17, V = 248320;
    RowsDev d(R, V, R + 5);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    d.penalties(st);
    d.draw(st);
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (uint64_t seed : {5u, 6u, 7u}) {
        const Case c = make_case(R, V, 7000 + seed);
        const std::vector<RowResult> want = single_rows(c, 1);
        d.load(c);
        d.poison();
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        expect_same(c, want[0], d.read(), "graph replay");
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
}

TEST(SamplingRowsCuda, CountsUpdateOfRows) {
    SKIP_WITHOUT_GPU();
    for (int64_t V : {int64_t(1009), int64_t(248320)}) {
        const int64_t R = 40, S = 47;
        std::mt19937_64 g(static_cast<uint64_t>(V));
        std::vector<int32_t> counts(size_t(S * V)), map, win;
        for (auto& x : counts) x = int32_t(g() % 5);
        std::vector<int32_t> perm(static_cast<size_t>(S));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), g);
        std::vector<int32_t> want = counts;
        for (int64_t r = 0; r < R; ++r) {
            map.insert(map.end(), {perm[size_t(r)], -7});
            auto pick = [&] {  // −1 (nothing), out of range (ignored), or a token
                const uint64_t k = g() % 6;
                return k == 0 ? -1 : k == 1 ? int32_t(V) : int32_t(g() % uint64_t(V));
            };
            const int32_t e = pick(), l = pick();
            win.insert(win.end(), {e, l});
            int32_t* c = &want[size_t(int64_t(perm[size_t(r)]) * V)];
            if (e >= 0 && e < V) c[e] += 1;
            if (l >= 0 && l < V) c[l] -= 1;
        }
        auto dc = upload(counts, "counts");
        auto dm = upload(map, "map");
        auto dw = upload(win, "win");
        ASSERT_TRUE(dc.is_ok() && dm.is_ok() && dw.is_ok());
        token_counts_update_rows(dc->as<int32_t>(), R, V, dw->as<int32_t>(), dm->as<int32_t>(), 2, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_EQ(download<int32_t>(*dc, counts.size()), want) << "vocab " << V;
    }
}

// What the selection adds to a batched step (vocab 248320, graph replay): argmax_rows vs per-row top-p sampling,
// with and without penalties. A print; the checks are above.
TEST(SamplingRowsCuda, TimingPrint) {
    SKIP_WITHOUT_GPU();
    const int64_t V = 248320;
    for (int64_t R : {8, 64}) {
        Case c = make_case(R, V, 99);
        for (auto& p : c.params) p = SamplingParams{}, p.temperature = 0.8f, p.top_p = 0.9f, p.repetition_penalty = 1.1f;
        RowsDev d(R, V, c.slots);
        d.load(c);
        DeviceBuffer aws = dev_alloc(argmax_rows_workspace_bytes(R, V)), win = dev_alloc(size_t(2 * R) * 4);
        CUDA_CHECK(cudaMemset(win.get(), 0xff, win.bytes()));
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        auto time_us = [&](const std::function<void()>& body) {
            cudaGraph_t g;
            CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            body();
            CUDA_CHECK(cudaStreamEndCapture(st, &g));
            cudaGraphExec_t e;
            CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
            cudaEvent_t a, b;
            CUDA_CHECK(cudaEventCreate(&a));
            CUDA_CHECK(cudaEventCreate(&b));
            for (int i = 0; i < 5; ++i) CUDA_CHECK(cudaGraphLaunch(e, st));
            const int n = 50;
            CUDA_CHECK(cudaEventRecord(a, st));
            for (int i = 0; i < n; ++i) CUDA_CHECK(cudaGraphLaunch(e, st));
            CUDA_CHECK(cudaEventRecord(b, st));
            CUDA_CHECK(cudaEventSynchronize(b));
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
            CUDA_CHECK(cudaEventDestroy(a));
            CUDA_CHECK(cudaEventDestroy(b));
            CUDA_CHECK(cudaGraphExecDestroy(e));
            CUDA_CHECK(cudaGraphDestroy(g));
            return 1e3 * ms / n;
        };
        const double greedy = time_us([&] {
            argmax_rows(d.logits.as<float>(), R, V, d.ids.as<int32_t>(), d.out_logit.as<float>(), aws.get(), st);
        });
        const double topp = time_us([&] { d.draw(st); });
        const double pen = time_us([&] {
            token_counts_update_rows(d.counts.as<int32_t>(), R, V, win.as<int32_t>(), d.map.as<int32_t>(), 2, st);
            d.penalties(st);
            d.draw(st);
        });
        std::printf("selection of %lld rows, vocab %lld: argmax_rows %.1f us, sample_rows (T 0.8, top-p 0.9) %.1f us, "
                    "+ counts and penalties %.1f us\n",
                    (long long)R, (long long)V, greedy, topp, pen);
        CUDA_CHECK(cudaStreamDestroy(st));
    }
}

}  // namespace
}  // namespace ember::cuda
