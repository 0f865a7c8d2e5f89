// Saved sessions (Session::save / load, runtime/session_file.h) on the committed fixtures, hybrid Qwen3.5 and
// Llama family: save → load → continue gives the logits and the sampled tokens of the uninterrupted run bit for
// bit (same CPU code path), and truncated, corrupted, foreign-model and wrong-version files are clear errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/temp_dir.h"
#include "models/model.h"
#include "runtime/session.h"
#include "runtime/session_file.h"

namespace ember {
namespace {

const char* kModels[] = {
    "qwen35/mm_tied",                                     // hybrid, tied head, safetensors
    "gguf_models/qwen35_flat_gqa3_dkdv/model-q8_0.gguf",  // hybrid, GGUF (tiled value heads)
    "gguf_models/llama_gqa_untied/model-q8_0.gguf",       // Llama
    "gguf_models/qwen3_qknorm/model-q8_0.gguf",           // qwen3 (q/k norm)
};

std::string fixture(const std::string& rel) { return std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel; }

std::unique_ptr<CausalLM> load(const std::string& rel) {
    auto m = load_model(fixture(rel));
    EXPECT_TRUE(m.is_ok()) << m.message();
    return m.is_ok() ? std::move(m.value()) : nullptr;
}

std::vector<int32_t> tokens(int64_t n, int64_t vocab, int64_t salt = 0) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 131 + 17 + salt * 7) % vocab));
    return t;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

class SessionSave : public ::testing::TestWithParam<const char*> {};

// prefill(N) + decode(k) in one session ≡ prefill(N) + decode(j) → save → load → decode(k − j), bit for bit.
TEST_P(SessionSave, LogitsAfterRestoreEqualUninterrupted) {
    auto m = load(GetParam());
    ASSERT_TRUE(m);
    TempDir dir;
    const int64_t V = m->info().vocab_size;
    for (int64_t N : {1, 7, 70}) {
        const std::vector<int32_t> all = tokens(N + 6, V);
        const std::vector<int32_t> prompt(all.begin(), all.begin() + N);
        Session full(*m);
        ASSERT_TRUE(full.prefill(prompt).is_ok());
        std::vector<std::vector<float>> want;
        for (int64_t k = N; k < N + 6; ++k) {
            auto d = full.decode(all[k]);
            ASSERT_TRUE(d.is_ok()) << d.message();
            want.push_back(std::move(d.value()));
        }
        for (int64_t j : {0, 2}) {
            const std::string path = dir.path().string() + "/s" + std::to_string(N) + "_" + std::to_string(j) + ".session";
            {
                Session a(*m);
                ASSERT_TRUE(a.prefill(prompt).is_ok());
                for (int64_t k = 0; k < j; ++k) ASSERT_TRUE(a.decode(all[N + k]).is_ok());
                Status st = a.save(path);
                ASSERT_TRUE(st.is_ok()) << st.message();
            }
            Session b(*m);
            Status st = b.load(path);
            ASSERT_TRUE(st.is_ok()) << st.message();
            EXPECT_EQ(b.pos(), N + j);
            EXPECT_EQ(b.tokens(), std::vector<int32_t>(all.begin(), all.begin() + N + j));
            for (int64_t k = j; k < 6; ++k) {
                auto d = b.decode(all[N + k]);
                ASSERT_TRUE(d.is_ok()) << d.message();
                EXPECT_EQ(0, std::memcmp(d->data(), want[k].data(), V * sizeof(float)))
                    << "N=" << N << " saved after " << j << ", decode step " << k;
            }
        }
    }
}

// generate(P, 14) ≡ generate(P, 5) → save → load → generate({}, 9) (continues from the pending token and the
// saved RNG), with temperature sampling + penalties and greedy; a prompt given after load is appended.
TEST_P(SessionSave, SamplingContinuesIdentically) {
    auto m = load(GetParam());
    ASSERT_TRUE(m);
    TempDir dir;
    const std::vector<int32_t> prompt = tokens(9, m->info().vocab_size, 3);
    SamplingParams hot;
    hot.temperature = 1.3f, hot.top_k = 50, hot.top_p = 0.95f, hot.repetition_penalty = 1.2f, hot.seed = 42;
    for (const SamplingParams& sp : {hot, SamplingParams{}}) {
        auto run = [&](Session& s, const std::vector<int32_t>& p, int64_t n) {
            std::vector<int32_t> out;
            auto st = s.generate(p, n, sp, {}, [&](int32_t id) { out.push_back(id); return true; });
            EXPECT_TRUE(st.is_ok()) << st.message();
            return out;
        };
        Session full(*m);
        const std::vector<int32_t> want = run(full, prompt, 14);
        ASSERT_EQ(want.size(), 14u);
        const std::string path = dir.path().string() + "/gen.session";
        {
            Session a(*m);
            std::vector<int32_t> first = run(a, prompt, 5);
            EXPECT_EQ(first, std::vector<int32_t>(want.begin(), want.begin() + 5));
            ASSERT_EQ(a.pending(), std::vector<int32_t>{first.back()});
            Status st = a.save(path);
            ASSERT_TRUE(st.is_ok()) << st.message();
        }
        Session b(*m);
        ASSERT_TRUE(b.load(path).is_ok());
        EXPECT_EQ(b.pos(), static_cast<int64_t>(prompt.size()) + 4);
        std::vector<int32_t> rest = run(b, {}, 9);
        EXPECT_EQ(rest, std::vector<int32_t>(want.begin() + 5, want.end())) << "temperature " << sp.temperature;
        // Appending a prompt: the same as prefilling [pending, prompt...] after the saved tokens.
        Session c(*m);
        ASSERT_TRUE(c.load(path).is_ok());
        const std::vector<int32_t> more = tokens(3, m->info().vocab_size, 11);
        ASSERT_EQ(run(c, more, 2).size(), 2u);
        std::vector<int32_t> expect_tokens = full.tokens();
        expect_tokens.resize(prompt.size() + 4);
        expect_tokens.push_back(want[4]);
        expect_tokens.insert(expect_tokens.end(), more.begin(), more.end());
        expect_tokens.resize(expect_tokens.size() + 1, c.tokens().back());
        EXPECT_EQ(c.tokens(), expect_tokens);
    }
}

// Every cut point of the file, flipped bytes, a wrong version: each an error; the session is left as it was.
TEST_P(SessionSave, DamagedFilesAreClearErrors) {
    auto m = load(GetParam());
    ASSERT_TRUE(m);
    TempDir dir;
    const std::string good = dir.path().string() + "/good.session", bad = dir.path().string() + "/bad.session";
    {
        Session a(*m);
        ASSERT_TRUE(a.prefill(tokens(5, m->info().vocab_size)).is_ok());
        ASSERT_TRUE(a.save(good).is_ok());
    }
    const std::vector<uint8_t> bytes = read_bytes(good);
    ASSERT_GT(bytes.size(), 64u);
    Session s(*m);
    ASSERT_TRUE(s.prefill(tokens(2, m->info().vocab_size)).is_ok());
    auto expect_error = [&](const std::vector<uint8_t>& b, const char* what, const char* needle) {
        write_bytes(bad, b);
        Status st = s.load(bad);
        ASSERT_FALSE(st.is_ok()) << what;
        EXPECT_NE(st.message().find(needle), std::string::npos) << what << ": " << st.message();
        EXPECT_EQ(s.pos(), 2) << what;
    };
    const size_t step = std::max<size_t>(1, bytes.size() / 211);
    for (size_t cut = 0; cut < bytes.size(); cut += (cut < 80 || cut + 80 > bytes.size()) ? 1 : step)
        expect_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut), "truncated",
                     cut < 8 ? "not an ember saved session" : "truncated");
    for (size_t at : {size_t(20), size_t(40), bytes.size() / 2, bytes.size() - 20, bytes.size() - 1}) {
        std::vector<uint8_t> b = bytes;
        b[at] ^= 0x10;
        expect_error(b, "flipped", "checksum");
    }
    std::vector<uint8_t> v2 = bytes;
    v2[8] = 2;
    expect_error(v2, "version", "version 2; this build reads version 1");
    // A well-formed file (checksum recomputed) that lies about its lengths: refused before any allocation.
    std::vector<uint8_t> lie = bytes;
    const int64_t huge = int64_t(1) << 40;
    const size_t pos_at = 16 + 16 + 4 + m->info().architecture.size() + 8;
    std::memcpy(&lie[pos_at], &huge, 8);
    const uint64_t sum = session_checksum(lie.data(), lie.size() - 8);
    std::memcpy(&lie[lie.size() - 8], &sum, 8);
    expect_error(lie, "position", "corrupt saved session (position");
    ASSERT_TRUE(s.load(good).is_ok());
    EXPECT_EQ(s.pos(), 5);
    EXPECT_FALSE(s.load(dir.path().string() + "/missing").is_ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SessionSave, ::testing::ValuesIn(kModels));

// A file of another model is refused: another architecture / shape, and the same shape with other weights.
TEST(SessionSaveErrors, ForeignModelIsRefused) {
    TempDir dir;
    auto saved = [&](const CausalLM& m, const std::string& name) {
        const std::string path = dir.path().string() + "/" + name;
        Session a(m);
        EXPECT_TRUE(a.prefill({1, 2, 3}).is_ok());
        EXPECT_TRUE(a.save(path).is_ok());
        return path;
    };
    auto qwen = load("qwen35/mm_tied");
    auto llama = load("gguf_models/llama_gqa_untied/model-q8_0.gguf");
    auto bf16 = load("gguf_models/qwen35_mm_tied_bf16/model-bf16.gguf");
    auto q8 = load("gguf_models/qwen35_mm_tied_q8_0/model-q8_0.gguf");
    ASSERT_TRUE(qwen && llama && bf16 && q8);
    Session s(*llama);
    Status st = s.load(saved(*qwen, "qwen.session"));
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("saved by another model"), std::string::npos) << st.message();
    Session t(*q8);
    st = t.load(saved(*bf16, "bf16.session"));
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("other weights"), std::string::npos) << st.message();
    EXPECT_TRUE(t.load(saved(*q8, "q8.session")).is_ok());
}

// After a plain prefill there is no pending token: generate() after load() needs a prompt.
TEST(SessionSaveErrors, NothingPendingNeedsAPrompt) {
    auto m = load("qwen35/mm_tied");
    ASSERT_TRUE(m);
    TempDir dir;
    Session a(*m);
    ASSERT_TRUE(a.prefill({4, 5, 6}).is_ok());
    ASSERT_TRUE(a.save(dir.path().string() + "/p.session").is_ok());
    Session b(*m);
    ASSERT_TRUE(b.load(dir.path().string() + "/p.session").is_ok());
    auto st = b.generate({}, 3, SamplingParams{}, {}, nullptr);
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("no pending token"), std::string::npos) << st.message();
    EXPECT_TRUE(b.generate({7}, 3, SamplingParams{}, {}, nullptr).is_ok());
}

}  // namespace
}  // namespace ember
