// The library API (include/ember/) on the committed GGUF fixtures, hybrid Qwen3.5 and Llama: sequences stepped
// together equal each run alone (greedy and seeded sampling, logits bit for bit) and Session::generate; cancel frees
// the slot; save → restore (and extend) continue exactly; a prompt-only sequence returns its logits; a prefix-cache
// hit equals the miss; bad input is an error, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "api/model_impl.h"
#include "core/temp_dir.h"
#include "ember/ember.h"
#include "models/decoder.h"
#include "runtime/engine_test_util.h"
#include "runtime/session.h"

namespace ember {
namespace {

using namespace enginetest;

const auto& kModels = kFixtures;

std::string fixture(const std::string& rel) { return std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel; }

Model load(const std::string& rel) {
    ModelOptions o;
    o.device = "cpu";
    auto m = Model::load(fixture(rel), o);
    EXPECT_TRUE(m.is_ok()) << m.message();
    return std::move(m.value());
}

Engine engine(const Model& m, int slots, int64_t chunk = 256, int64_t cache_bytes = 0) {
    auto e = Engine::create(m, EngineOptions{slots, chunk, cache_bytes});
    EXPECT_TRUE(e.is_ok()) << e.message();
    return std::move(e.value());
}

TEST(Engine, SequencesTogetherEqualEachAlone) {
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        Model m = load(f);
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            const auto todo = mixed(m.vocab_size(), temp);
            Engine together = engine(m, 3, 8);
            const std::vector<SeqRun> all = run(together, todo);
            for (size_t i = 0; i < todo.size(); ++i) {
                Engine solo = engine(m, 1, 8);
                const SeqRun alone = run(solo, {todo[i]}).at(0);
                EXPECT_EQ(all[i].tokens, alone.tokens) << i;
                EXPECT_EQ(all[i].logits, alone.logits) << i;  // same chunks, each row alone in every op: bit-equal
                EXPECT_EQ(int64_t(all[i].tokens.size()), todo[i].max_tokens) << i;
                EXPECT_EQ(all[i].end, SequenceEnd::LENGTH);
            }
        }
    }
}

// Rounds as one mixed call (prompt chunks beside decode rows, Decoder::set_mixed_steps; off by default on the CPU)
// give every sequence the tokens and logits of the rounds run apart, bit for bit (same chunks, each row alone in
// every op), in fewer model calls.
TEST(Engine, MixedRoundsEqualRoundsApart) {
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        Model m = load(f);
        auto* d = dynamic_cast<Decoder*>(m.impl()->lm.get());
        ASSERT_NE(d, nullptr);
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            const auto todo = mixed(m.vocab_size(), temp);
            d->set_mixed_steps(false);
            Engine apart = engine(m, 3, 8);
            const std::vector<SeqRun> a = run(apart, todo);
            d->set_mixed_steps(true);
            Engine one = engine(m, 3, 8);
            const std::vector<SeqRun> b = run(one, todo);
            d->set_mixed_steps(false);
            ASSERT_EQ(a.size(), b.size());
            for (size_t i = 0; i < a.size(); ++i) {
                EXPECT_EQ(a[i].tokens, b[i].tokens) << i;
                EXPECT_EQ(a[i].logits, b[i].logits) << i;
            }
            EXPECT_LT(one.stats().model_calls, apart.stats().model_calls);
        }
    }
}

TEST(Engine, EqualsSessionGenerate) {
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        Model m = load(f);
        for (float temp : {0.f, 0.9f}) {
            const auto todo = mixed(m.vocab_size(), temp);
            Engine e = engine(m, 3);
            const std::vector<SeqRun> all = run(e, todo);
            for (size_t i = 0; i < todo.size(); ++i) {
                Session s(*m.impl()->lm);
                std::vector<int32_t> ref;
                auto st = s.generate(todo[i].prompt, todo[i].max_tokens, todo[i].sampling, {}, [&](int32_t id) {
                    ref.push_back(id);
                    return true;
                });
                ASSERT_TRUE(st.is_ok()) << st.message();
                EXPECT_EQ(all[i].tokens, ref) << "temp " << temp << " sequence " << i;
            }
        }
    }
}

TEST(Engine, CancelFreesTheSlotForReuse) {
    Model m = load(kModels[0]);
    Engine e = engine(m, 1);
    auto a = e.add(params(prompt(6, m.vocab_size(), 1), 50));
    ASSERT_TRUE(a.is_ok());
    e.step();
    e.step();
    EXPECT_EQ(e.free_slots(), 0);
    auto refused = e.add(params(prompt(4, m.vocab_size(), 2), 7));
    ASSERT_FALSE(refused.is_ok());
    EXPECT_NE(refused.message().find("no free slot"), std::string::npos) << refused.message();
    ASSERT_TRUE(e.cancel(*a).is_ok());
    EXPECT_EQ(e.free_slots(), 1);
    EXPECT_EQ(e.live(), 0);
    EXPECT_FALSE(e.cancel(*a).is_ok());  // gone
    // The reused slot starts clean: B equals B run in a fresh engine.
    const SeqRun b = run(e, {params(prompt(4, m.vocab_size(), 2), 7)}).at(0);
    Engine fresh = engine(m, 1);
    const SeqRun ref = run(fresh, {params(prompt(4, m.vocab_size(), 2), 7)}).at(0);
    EXPECT_EQ(b.tokens, ref.tokens);
    EXPECT_EQ(b.logits, ref.logits);
}

// 5 tokens, save, continue 9 (in another engine from the file; in the same engine by extend) ≡ one run of 14.
TEST(Engine, SaveRestoreAndExtendContinueExactly) {
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        Model m = load(f);
        TempDir dir;
        const std::string path = (dir.path() / "seq.session").string();
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            const SequenceParams whole = params(prompt(11, m.vocab_size(), 3), 14, temp, 7);
            Engine e0 = engine(m, 2, 4);
            const SeqRun ref = run(e0, {whole}).at(0);
            ASSERT_EQ(ref.tokens.size(), 14u);

            Engine e1 = engine(m, 2, 4);
            SequenceParams head = whole;
            head.max_tokens = 5;
            const SequenceId id = run_kept(e1, head);
            ASSERT_NE(id, 0);
            auto info = e1.info(id);
            ASSERT_TRUE(info.is_ok());
            EXPECT_EQ(info->end, SequenceEnd::LENGTH);
            EXPECT_EQ(info->position, 11 + 4);  // the 5th token is pending
            ASSERT_TRUE(e1.save(id, path).is_ok());

            SequenceParams tail = whole;
            tail.prompt.clear();
            tail.max_tokens = 9;
            Engine e2 = engine(m, 1, 4);
            const SeqRun restored = run_restored(e2, path, tail);
            EXPECT_EQ(restored.tokens, std::vector<int32_t>(ref.tokens.begin() + 5, ref.tokens.end()));
            EXPECT_EQ(restored.logits, std::vector<std::vector<float>>(ref.logits.begin() + 5, ref.logits.end()));
            std::vector<int32_t> got;

            {  // the file is a saved session: `ember generate --load-session` (Session::load) continues it alike
                Session sess(*m.impl()->lm);
                ASSERT_TRUE(sess.load(path).is_ok());
                got.clear();
                ASSERT_TRUE(sess.generate({}, 9, whole.sampling, {}, [&](int32_t t) {
                                    got.push_back(t);
                                    return true;
                                }).is_ok());
                EXPECT_EQ(got, std::vector<int32_t>(ref.tokens.begin() + 5, ref.tokens.end()));
            }

            ASSERT_TRUE(e1.extend(id, tail).is_ok());
            got.clear();
            while (e1.running() > 0)
                for (const StepEvent& ev : e1.step())
                    if (ev.has_token) got.push_back(ev.token.id);
            EXPECT_EQ(got, std::vector<int32_t>(ref.tokens.begin() + 5, ref.tokens.end()));
            EXPECT_EQ(e1.free_slots(), 2);  // kept for the first generation only (tail.keep is false)

            // A running sequence saved between steps (its 5th token pending) continues the same way.
            Engine e3 = engine(m, 1, 4);
            auto r3 = e3.add(whole);
            ASSERT_TRUE(r3.is_ok());
            for (size_t n = 0; n < 5;)
                for (const StepEvent& ev : e3.step()) n += ev.has_token;
            ASSERT_TRUE(e3.save(*r3, path).is_ok());
            Engine e4 = engine(m, 1, 4);
            EXPECT_EQ(run_restored(e4, path, tail).tokens, std::vector<int32_t>(ref.tokens.begin() + 5, ref.tokens.end()));
        }
    }
}

TEST(Engine, PromptOnlyReturnsItsLogits) {
    Model m = load(kModels[1]);
    const std::vector<int32_t> p = prompt(9, m.vocab_size(), 4);
    Engine e = engine(m, 1);
    EXPECT_TRUE(e.step().empty());  // nothing to do
    ASSERT_TRUE(e.add(params(p, 0)).is_ok());
    const std::vector<StepEvent> got = e.step();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].has_token);
    EXPECT_EQ(got[0].end, SequenceEnd::LENGTH);
    Session s(*m.impl()->lm);
    auto want = s.prefill(p);
    ASSERT_TRUE(want.is_ok());
    EXPECT_EQ(got[0].logits, *want);
    EXPECT_EQ(e.live(), 0);
}

TEST(Engine, PrefixCacheHitEqualsMiss) {
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        Model m = load(f);
        Engine e = engine(m, 2, 8, int64_t(64) << 20);
        const SequenceParams p = params(prompt(30, m.vocab_size(), 5), 6);
        const SeqRun miss = run(e, {p}).at(0);
        ASSERT_TRUE(e.add(p).is_ok());
        SeqRun hit;
        while (e.running() > 0)
            for (const StepEvent& ev : e.step()) {
                EXPECT_EQ(ev.cached_tokens, 24);  // 3 checkpoints of 8; the rest is computed
                if (ev.has_token) hit.tokens.push_back(ev.token.id), hit.logits.push_back(ev.logits);
            }
        EXPECT_EQ(hit.tokens, miss.tokens);
        EXPECT_EQ(hit.logits, miss.logits);
        EXPECT_GE(e.stats().prefix_cache_hits, 1);
    }
}

TEST(Engine, BadInputIsAnError) {
    Model m = load(kModels[0]);
    const int64_t V = m.vocab_size();
    Engine e = engine(m, 2);
    auto expect_error = [](const Status& st, const char* what) {
        EXPECT_FALSE(st.is_ok());
        EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    };
    // Unknown ids.
    expect_error(e.cancel(42), "no sequence 42");
    expect_error(e.save(42, "/tmp/x"), "no sequence 42");
    expect_error(e.extend(42, {}), "no sequence 42");
    expect_error(e.info(42).status(), "no sequence 42");
    // Bad sequences.
    expect_error(e.add(params({}, 3)).status(), "no tokens");
    expect_error(e.add(params({1, int32_t(V)}, 3)).status(), "outside the vocabulary");
    expect_error(e.add(params(prompt(m.context() + 1, V, 0), 3)).status(), "does not fit the context");
    expect_error(e.add(params({1, 2}, -1)).status(), "max_tokens");
    SequenceParams bad_p = params({1, 2}, 3, 0.8f);
    bad_p.sampling.top_p = 0;
    expect_error(e.add(bad_p).status(), "top_p");
    EXPECT_EQ(e.free_slots(), 2);  // nothing was taken
    // Wrong moments.
    auto id = e.add(params(prompt(600, V, 1), 3));  // longer than one chunk
    ASSERT_TRUE(id.is_ok());
    expect_error(e.save(*id, "/tmp/x"), "still consuming its prompt");
    e.step();  // the first chunk
    expect_error(e.extend(*id, params({}, 1)), "has not ended");
    while (e.running() > 0) e.step();
    expect_error(e.info(*id).status(), "no sequence");  // not kept: freed
    // Files.
    expect_error(Model::load(fixture("no/such/model.gguf")).status(), "no/such/model.gguf");
    TempDir dir;
    const std::string path = (dir.path() / "a.session").string();
    expect_error(e.restore((dir.path() / "missing.session").string(), params({1}, 1)).status(), "missing.session");
    SequenceParams kept = params(prompt(5, V, 2), 0);  // prompt only: nothing pending
    kept.keep = true;
    auto k = e.add(kept);
    ASSERT_TRUE(k.is_ok());
    e.step();
    ASSERT_TRUE(e.save(*k, path).is_ok());
    expect_error(e.restore(path, params({}, 2)).status(), "no pending token");
    EXPECT_TRUE(e.restore(path, params({7}, 2)).is_ok());  // with a prompt it continues
    Model other = load(kModels[1]);
    Engine e2 = engine(other, 1);
    const Status foreign = e2.restore(path, params({1}, 2)).status();
    EXPECT_FALSE(foreign.is_ok());
    EXPECT_NE(foreign.message().find("model"), std::string::npos) << foreign.message();
    {  // truncated
        const auto size = std::filesystem::file_size(path);
        std::filesystem::resize_file(path, size / 2);
        EXPECT_FALSE(engine(m, 1).restore(path, params({1}, 2)).is_ok());
    }
    EXPECT_EQ(e2.free_slots(), 1);  // a refused restore keeps no slot
}

}  // namespace
}  // namespace ember
