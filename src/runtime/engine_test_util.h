// runtime/engine_test_util.h: what the Engine tests share — the CPU tests (src/api/engine_test.cpp) and the GPU tests
// (backend/cuda/engine_cuda_test.cpp): prompts, sequence parameters, and driving an engine to the end of its
// sequences (adding them as slots free up) or of a restored one.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "ember/engine.h"

namespace ember::enginetest {

// The committed GGUF fixtures the engine tests run on (paths under tests/fixtures/).
inline const char* const kFixtures[] = {
    "gguf_models/qwen35_flat_gqa3_dkdv/model-q8_0.gguf",  // hybrid (GDN + gated attention)
    "gguf_models/llama_gqa_untied/model-q8_0.gguf",       // Llama
};

inline std::vector<int32_t> prompt(int64_t n, int64_t vocab, int64_t salt) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((i * 131 + 17 + salt * 53) % vocab));
    return t;
}

// Greedy at temp 0; else seeded sampling with top-k and a repetition penalty. logits: every token's logits come back
// (the rows are then selected on the host).
inline SequenceParams params(std::vector<int32_t> p, int64_t max_tokens, float temp = 0, uint64_t seed = 0,
                             bool logits = true) {
    SequenceParams s;
    s.prompt = std::move(p);
    s.max_tokens = max_tokens;
    s.sampling.temperature = temp;
    s.sampling.top_k = temp > 0 ? 20 : 0;
    s.sampling.repetition_penalty = temp > 0 ? 1.1f : 1.f;
    s.sampling.seed = seed;
    s.logits = logits;
    return s;
}

// Ragged prompts (some longer than a chunk of 8) and lengths; seeded sampling when temp > 0.
inline std::vector<SequenceParams> mixed(int64_t vocab, float temp, bool logits = true) {
    const int64_t lens[] = {1, 3, 17, 40, 9}, toks[] = {12, 5, 9, 12, 1};
    std::vector<SequenceParams> v;
    for (int i = 0; i < 5; ++i) v.push_back(params(prompt(lens[i], vocab, i), toks[i], temp, 100 + uint64_t(i), logits));
    return v;
}

struct SeqRun {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;
    SequenceEnd end = SequenceEnd::RUNNING;
};

inline void record(SeqRun& r, const StepEvent& ev) {
    if (ev.has_token) r.tokens.push_back(ev.token.id);
    if (!ev.logits.empty()) r.logits.push_back(ev.logits);
    if (ev.end != SequenceEnd::RUNNING) r.end = ev.end;
    EXPECT_NE(ev.end, SequenceEnd::FAILED) << ev.error;
}

// Adds `todo` as slots free up and steps until every sequence has ended; the runs in the order of `todo`.
inline std::vector<SeqRun> run(Engine& e, const std::vector<SequenceParams>& todo) {
    std::map<SequenceId, size_t> which;
    std::vector<SeqRun> out(todo.size());
    size_t next = 0;
    while (next < todo.size() || e.running() > 0) {
        for (; next < todo.size() && e.free_slots() > 0; ++next) {
            auto id = e.add(todo[next]);
            EXPECT_TRUE(id.is_ok()) << id.message();
            if (!id.is_ok()) return out;
            which[*id] = next;
        }
        for (const StepEvent& ev : e.step()) record(out[which.at(ev.id)], ev);
    }
    return out;
}

// Adds one sequence with `keep` and steps until it has ended: its id (its slot still held), 0 on error.
inline SequenceId run_kept(Engine& e, SequenceParams p) {
    p.keep = true;
    auto id = e.add(std::move(p));
    EXPECT_TRUE(id.is_ok()) << id.message();
    while (id.is_ok() && e.running() > 0) e.step();
    return id.is_ok() ? *id : 0;
}

// Restores the sequence saved in `path` with `tail` and steps it to its end.
inline SeqRun run_restored(Engine& e, const std::string& path, const SequenceParams& tail) {
    SeqRun r;
    auto id = e.restore(path, tail);
    EXPECT_TRUE(id.is_ok()) << id.message();
    while (id.is_ok() && e.running() > 0)
        for (const StepEvent& ev : e.step()) record(r, ev);
    return r;
}

}  // namespace ember::enginetest
