// GPU tests of batch_decode_sample (backend/cuda/cuda_batch_sample.cpp) on the synthetic models.
// The oracle of a row's draw is the single-row device ops on that row's logits (CPU penalties, bit-identical to
// the device's, then sample() with the row's RNG state = seed + sampled steps so far): checked for every row of
// every step whose logits the test asks for. Around it:
//  * batch invariance of one sequence (seed 1234, T 0.8, top-p 0.9, repetition 1.1) over 32 steps: alone, again
//    after batch_reset, among 7 and among 40 other rows with other parameters, fed the alone run's tokens so every
//    step compares: logits within 1e-3 of alone (8 rows: GEMV, bit-equal on the Qwen3.5 fixture but not on the
//    Q8_0 Llama file; 41 rows: the GEMM path), the alone token wherever the logits are bit-equal, elsewhere a
//    different token only at a near tie (counted, printed, at most 2); a second run of the same rows without
//    logits (the one-graph step) must repeat the first exactly;
//  * greedy rows equal batch_decode_greedy; one row equals decode_sample on a single-sequence state;
//  * bad input is an error that leaves the pool as it was. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "models/batch_test_util.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

const char* kModels[] = {"qwen35/flat_untied_gqa3", "gguf_models/llama_gqa_untied/model-q8_0.gguf"};
constexpr int kSteps = 32;
constexpr double kTol = 1e-3;  // the GEMM path's logits vs a row alone (cuda_batch_cuda_test.cpp)

std::unique_ptr<CausalLM> load_gpu(const std::string& rel) {
    auto cpu = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel);
    EMBER_CHECK(cpu.is_ok(), "%s", cpu.message().c_str());
    CudaOptions opt;
    opt.context = 512;
    auto m = make_cuda_model(std::move(cpu.value()), opt);
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

bool greedy(const SamplingParams& p) { return p.temperature <= 0.f || p.top_k == 1; }

SamplingParams target_params() {
    SamplingParams p;
    p.temperature = 0.8f, p.top_p = 0.9f, p.repetition_penalty = 1.1f, p.seed = 1234;
    return p;
}

SamplingParams other_params(int k) {
    SamplingParams p;
    switch (k % 7) {
        case 0: break;  // greedy
        case 1: p.temperature = 1.f, p.top_k = 40; break;
        case 2: p.temperature = 0.7f, p.top_p = 0.5f; break;
        case 3: p.temperature = 1.2f, p.min_p = 0.1f; break;
        case 4: p.temperature = 0.9f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.2f, p.penalty_last_n = 16; break;
        case 5: p.repetition_penalty = 1.3f; break;  // greedy with a penalty
        default: p.temperature = 1.f, p.top_k = 1; break;  // greedy through top_k
    }
    p.seed = 100 + uint64_t(k);
    return p;
}

// A sequence of a batch run.
struct Seq {
    int32_t slot = 0;
    SamplingParams sp;
    size_t prompt_len = 0;
    std::vector<int32_t> hist;     // the prompt, its first token (argmax of the prefill), then every token fed
    std::vector<int32_t> forced;   // when not empty: the token fed after step i is forced[i], not the draw
    std::vector<int32_t> drawn;    // the token selected at each step
    std::vector<std::vector<float>> logits;  // the step's logits before penalties (empty: not requested)
};

Seq make_seq(int64_t V, int32_t slot, const SamplingParams& sp, uint64_t prompt_seed) {
    Seq q;
    q.slot = slot;
    q.sp = sp;
    q.hist = batchtest::make_prompt(V, 3 + int64_t(prompt_seed % 9), prompt_seed);
    q.prompt_len = q.hist.size();
    return q;
}

// Prefills every sequence, then `steps` steps of all of them as rows of one batch (in the order given);
// logits_at(i): the step asks for the logits.
void run(const CausalLM& m, BatchState& B, std::vector<Seq>& seqs, int steps, const std::function<bool(int)>& logits_at) {
    const int64_t V = m.info().vocab_size, R = int64_t(seqs.size());
    std::vector<float> lg(static_cast<size_t>(V)), all(static_cast<size_t>(R * V));
    for (Seq& q : seqs) {
        const Status s = m.batch_prefill(B, q.slot, q.hist.data(), int64_t(q.hist.size()), lg.data());
        ASSERT_TRUE(s.is_ok()) << s.message();
        q.hist.push_back(ember::argmax(lg.data(), V));
    }
    for (int i = 0; i < steps; ++i) {
        std::vector<int32_t> slots, toks, ids(static_cast<size_t>(R), -1);
        std::vector<const SamplingParams*> P;
        std::vector<const std::vector<int32_t>*> H;
        for (const Seq& q : seqs) {
            slots.push_back(q.slot);
            toks.push_back(q.hist.back());
            P.push_back(&q.sp);
            H.push_back(&q.hist);
        }
        const bool wl = logits_at(i);
        const Status s = m.batch_decode_sample(B, slots.data(), toks.data(), R, P.data(), H.data(), ids.data(),
                                               wl ? all.data() : nullptr);
        ASSERT_TRUE(s.is_ok()) << s.message();
        for (int64_t r = 0; r < R; ++r) {
            Seq& q = seqs[size_t(r)];
            q.drawn.push_back(ids[size_t(r)]);
            q.logits.push_back(wl ? std::vector<float>(&all[size_t(r * V)], &all[size_t((r + 1) * V)])
                                  : std::vector<float>{});
            q.hist.push_back(q.forced.empty() ? ids[size_t(r)] : q.forced[size_t(i)]);
            EXPECT_EQ(B.pos[size_t(q.slot)], int64_t(q.prompt_len) + 1 + i);
        }
    }
}

// The single-row ops as the oracle of one draw.
struct Oracle {
    int64_t V;
    DeviceBuffer lg, prm, st, out, ws;
    explicit Oracle(int64_t v) : V(v) {
        auto a = [](size_t n) {
            auto b = DeviceBuffer::alloc(n, "oracle");
            EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
            return std::move(b).value();
        };
        lg = a(size_t(V) * 4), prm = a(sizeof(DeviceSamplingParams)), st = a(8), out = a(4);
        ws = a(sample_workspace_bytes(V));
    }
    int32_t draw(std::vector<float> l, const SamplingParams& sp, const std::vector<int32_t>& window, uint64_t state) {
        std::vector<int32_t> scratch;
        apply_penalties(l.data(), V, window, sp, scratch);
        const DeviceSamplingParams d = to_device_params(sp);
        copy_to_device(lg.get(), l.data(), size_t(V) * 4);
        copy_to_device(prm.get(), &d, sizeof d);
        copy_to_device(st.get(), &state, 8);
        CUDA_CHECK(cudaMemset(out.get(), 0xff, 4));
        sample(lg.as<float>(), V, prm.as<DeviceSamplingParams>(), st.as<uint64_t>(), out.as<int32_t>(), ws.get(),
               nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        int32_t id;
        copy_to_host(&id, out.get(), 4);
        return id;
    }
    // Every step of q whose logits were kept: the draw equals the oracle's. Returns the steps checked.
    int check(const Seq& q) {
        int n = 0;
        for (size_t i = 0; i < q.drawn.size(); ++i) {
            if (q.logits[i].empty()) continue;
            const std::vector<int32_t> window(q.hist.begin(), q.hist.begin() + long(q.prompt_len + 1 + i));
            const uint64_t state = q.sp.seed + (greedy(q.sp) ? 0 : i);  // one counter step per sampled step
            EXPECT_EQ(q.drawn[i], draw(q.logits[i], q.sp, window, state)) << "slot " << q.slot << " step " << i;
            ++n;
        }
        return n;
    }
};

TEST(BatchSampleCuda, SampledSequenceIsBatchInvariant) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        const int64_t V = m->info().vocab_size;
        Oracle o(V);
        auto all = [](int) { return true; };
        auto none = [](int) { return false; };
        // Alone (the logits of every step: every draw checked), then again after batch_reset without logits.
        auto b = m->new_batch(48);
        ASSERT_TRUE(b.is_ok()) << b.message();
        std::vector<Seq> alone = {make_seq(V, 45, target_params(), 42)};
        run(*m, **b, alone, kSteps, all);
        EXPECT_EQ(o.check(alone[0]), kSteps);
        const std::vector<int32_t> A = alone[0].drawn;
        ASSERT_TRUE(m->batch_reset(**b, 45).is_ok());
        std::vector<Seq> again = {make_seq(V, 45, target_params(), 42)};
        run(*m, **b, again, kSteps, none);
        EXPECT_EQ(again[0].drawn, A) << "batch_reset restarts the stream";

        // Among 7 other rows (8 rows: the GEMV path) and among 40 (41 rows: the GEMM path), the target row in the
        // middle, fed the alone run's tokens so that every step compares; twice: with the logits of every step
        // (every draw checked by the oracle), then without (the one-graph step) — which must repeat the first
        // run exactly, every row. A step whose logits are bit-equal to alone must draw the alone token; the others
        // are within kTol and may differ only at a near tie.
        for (const int R : {8, 41}) {
            SCOPED_TRACE(testing::Message() << R << " rows");
            const int target = R / 2;
            std::vector<std::vector<Seq>> runs;
            for (int pass = 0; pass < 2; ++pass) {
                auto bb = m->new_batch(48);
                ASSERT_TRUE(bb.is_ok());
                std::vector<Seq> rows;
                for (int k = 0; k < R; ++k)
                    rows.push_back(k == target ? make_seq(V, 2, target_params(), 42)
                                               : make_seq(V, int32_t(47 - k), other_params(k), 900 + uint64_t(k)));
                rows[size_t(target)].forced = A;
                run(*m, **bb, rows, kSteps, pass == 0 ? all : none);
                runs.push_back(std::move(rows));
            }
            int checked = 0, differ = 0, bit_equal = 0;
            double worst = 0;
            for (const Seq& q : runs[0]) checked += o.check(q);
            EXPECT_EQ(checked, R * kSteps);
            const Seq& t = runs[0][size_t(target)];
            for (int i = 0; i < kSteps; ++i) {
                const double e = batchtest::rel_err(t.logits[size_t(i)].data(), alone[0].logits[size_t(i)]);
                worst = std::max(worst, e);
                EXPECT_LE(e, kTol) << "step " << i;
                const bool same = std::memcmp(t.logits[size_t(i)].data(), alone[0].logits[size_t(i)].data(),
                                              size_t(V) * 4) == 0;
                bit_equal += same;
                if (same) {
                    EXPECT_EQ(t.drawn[size_t(i)], A[size_t(i)]) << "step " << i << ": bit-equal logits";
                }
                differ += t.drawn[size_t(i)] != A[size_t(i)];
            }
            for (int k = 0; k < R; ++k)
                EXPECT_EQ(runs[1][size_t(k)].drawn, runs[0][size_t(k)].drawn) << "row " << k << ": run without logits";
            std::printf("%s: %d rows: logits vs alone %.2e (bit-equal at %d of %d steps), tokens differing from alone "
                        "%d of %d\n",
                        f, R, worst, bit_equal, kSteps, differ, kSteps);
            EXPECT_LE(differ, 2) << "more than near ties";
        }
    }
}

TEST(BatchSampleCuda, GreedyRowsEqualBatchDecodeGreedy) {
    SKIP_WITHOUT_GPU();
    auto m = load_gpu(kModels[0]);
    const int64_t V = m->info().vocab_size;
    auto x = m->new_batch(6), y = m->new_batch(6);
    ASSERT_TRUE(x.is_ok() && y.is_ok());
    SamplingParams g0, g1, g2, s0;
    g1.temperature = 0.7f, g1.top_k = 1, g1.seed = 3;
    g2.temperature = -1.f;
    s0.temperature = 0.9f, s0.seed = 9;
    const std::vector<const SamplingParams*> P = {&g0, &s0, &g1, &g2};
    std::vector<std::vector<int32_t>> hist;
    const std::vector<int32_t> slots = {4, 0, 2, 5};
    std::vector<float> lg(static_cast<size_t>(V)), all(static_cast<size_t>(4 * V));
    for (size_t r = 0; r < 4; ++r) {
        hist.push_back(batchtest::make_prompt(V, 4 + int64_t(r), 60 + r));
        ASSERT_TRUE(m->batch_prefill(**x, slots[r], hist[r].data(), int64_t(hist[r].size()), nullptr).is_ok());
        ASSERT_TRUE(m->batch_prefill(**y, slots[r], hist[r].data(), int64_t(hist[r].size()), lg.data()).is_ok());
        hist[r].push_back(ember::argmax(lg.data(), V));
    }
    for (int i = 0; i < 12; ++i) {
        // Steps 0..7: a sampled row among them (the sampling graph); 8..9: greedy rows only (argmax_rows);
        // 10..11: greedy rows only with logits (forward graph, then the selection graph).
        const int64_t R = i < 8 ? 4 : 3;
        std::vector<int32_t> sl, toks, want(4), got(4, -1);
        std::vector<const SamplingParams*> p;
        std::vector<const std::vector<int32_t>*> h;
        for (size_t r = 0; r < 4; ++r) {
            if (R == 3 && r == 1) continue;
            sl.push_back(slots[r]);
            toks.push_back(hist[r].back());
            p.push_back(P[r]);
            h.push_back(&hist[r]);
        }
        ASSERT_TRUE(m->batch_decode_greedy(**x, sl.data(), toks.data(), R, want.data()).is_ok());
        const Status s = m->batch_decode_sample(**y, sl.data(), toks.data(), R, p.data(), h.data(), got.data(),
                                                i >= 10 ? all.data() : nullptr);
        ASSERT_TRUE(s.is_ok()) << s.message();
        for (int64_t r = 0, k = 0; r < 4; ++r) {
            if (R == 3 && r == 1) continue;
            if (r != 1) {
                EXPECT_EQ(got[size_t(k)], want[size_t(k)]) << "greedy row " << r << " step " << i;
            }
            if (i >= 10) {
                EXPECT_EQ(got[size_t(k)], ember::argmax(&all[size_t(k * V)], V)) << "row " << r << " step " << i;
            }
            hist[size_t(r)].push_back(got[size_t(k)]);  // both pools are fed the same tokens (y's draws)
            ++k;
        }
    }
}

TEST(BatchSampleCuda, OneRowEqualsDecodeSample) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        const int64_t V = m->info().vocab_size;
        auto b = m->new_batch(4);
        ASSERT_TRUE(b.is_ok());
        std::vector<Seq> one = {make_seq(V, 1, target_params(), 77)};
        run(*m, **b, one, kSteps, [](int) { return false; });
        auto st = m->new_state();
        std::vector<int32_t> hist(one[0].hist.begin(), one[0].hist.begin() + long(one[0].prompt_len));
        std::vector<float> lg(static_cast<size_t>(V));
        ASSERT_TRUE(m->forward(*st, hist.data(), int64_t(hist.size()), lg.data(), false).is_ok());
        hist.push_back(ember::argmax(lg.data(), V));
        std::vector<int32_t> single;
        for (int i = 0; i < kSteps; ++i) {
            auto id = m->decode_sample(*st, hist.back(), target_params(), hist);
            ASSERT_TRUE(id.is_ok()) << id.message();
            single.push_back(*id);
            hist.push_back(*id);
        }
        EXPECT_EQ(one[0].drawn, single);
    }
}

TEST(BatchSampleCuda, BadInputIsAnError) {
    SKIP_WITHOUT_GPU();
    auto m = load_gpu(kModels[0]);
    const int64_t V = m->info().vocab_size;
    auto b = m->new_batch(3);
    ASSERT_TRUE(b.is_ok());
    std::vector<int32_t> hist = batchtest::make_prompt(V, 5, 3);
    ASSERT_TRUE(m->batch_prefill(**b, 2, hist.data(), int64_t(hist.size()), nullptr).is_ok());
    const int32_t slot = 2, tok = hist.back() == 1 ? 2 : 1;
    hist.push_back(tok);
    SamplingParams ok = target_params(), big_k = ok;
    big_k.top_k = kMaxTopK + 1;
    const std::vector<int32_t> wrong_end(hist.begin(), hist.end() - 1), empty;
    const SamplingParams* P = &ok;
    const SamplingParams* Pk = &big_k;
    const SamplingParams* Pnull = nullptr;
    const std::vector<int32_t>* H = &hist;
    const std::vector<int32_t>* Hw = &wrong_end;
    const std::vector<int32_t>* He = &empty;
    int32_t id = -1;
    auto expect_error = [&](const Status& s, const char* needle, const char* what) {
        EXPECT_FALSE(s.is_ok()) << what;
        EXPECT_NE(s.message().find(needle), std::string::npos) << what << ": " << s.message();
    };
    expect_error(m->batch_decode_sample(**b, &slot, &tok, 1, &P, &Hw, &id), "must end with", "history not ending");
    expect_error(m->batch_decode_sample(**b, &slot, &tok, 1, &P, &He, &id), "is empty", "empty history");
    expect_error(m->batch_decode_sample(**b, &slot, &tok, 1, &Pk, &H, &id), "top_k", "top_k > kMaxTopK");
    expect_error(m->batch_decode_sample(**b, &slot, &tok, 1, &Pnull, &H, &id), "no sampling parameters", "null params");
    expect_error(m->batch_decode_sample(**b, &slot, &tok, 1, nullptr, &H, &id), "required", "no params array");
    expect_error(m->batch_decode_sample(**b, &slot, &tok, 0, &P, &H, &id), "", "no rows");
    EXPECT_EQ((*b)->pos[2], int64_t(hist.size()) - 1) << "refused steps leave the pool as it was";
    EXPECT_EQ(id, -1);
    const Status s = m->batch_decode_sample(**b, &slot, &tok, 1, &P, &H, &id);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_TRUE(id >= 0 && id < V);
    EXPECT_EQ((*b)->pos[2], int64_t(hist.size()));
}

}  // namespace
}  // namespace ember::cuda
