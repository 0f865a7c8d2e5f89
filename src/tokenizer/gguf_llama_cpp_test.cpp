// gguf_llama_cpp_test.cpp: Tokenizer::from_gguf_vocab vs llama.cpp (llama-cpp-python, the oracle) on the real
// SmolLM2-135M-Instruct vocabulary: ids with and without parse_special, token_to_piece decodes, the stream
// decoder; that vocabulary and a small one trained with the Qwen3.5 regex under every tokenizer.ggml.pre preset.
// Fixtures: tests/fixtures/smollm2/{vocab.json, llama_cpp_tokens.json},
// tests/fixtures/gguf_tokenizer/{presets.json, qwen35_like_vocab.json} (scripts/make_gguf_tokenizer_fixtures.py;
// vocab.json is scripts/gguf_vocab_dump.py's dump of the GGUF).
// With EMBER_LLAMA_VOCAB_DIR set, also llama.cpp's own vocabulary tests (scripts/prepare_llama_vocab_tests.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/gguf_vocab.h"
#include "tokenizer/gguf_vocab_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ember {
namespace {

const std::string kFixtures = std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/";

// The parsed file, or null (with a test failure) if it cannot be read or parsed.
nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (!f.good() || j.is_discarded()) {
        ADD_FAILURE() << "cannot read " << path;
        return nullptr;
    }
    return j;
}

// The JSON written by scripts/gguf_vocab_dump.py -> GgufVocab (stands in for the GGUF reader).
GgufVocab vocab_from_json(const nlohmann::json& j) {
    auto v = gguf_vocab_from_json(j);
    EXPECT_TRUE(v) << v.message();
    return v ? *v : GgufVocab{};
}

std::string show(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += std::to_string(id) + ",";
    return s;
}

std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
    StreamDecoder sd(tok, skip_special);
    std::string all;
    for (int32_t id : ids) {
        std::string chunk = sd.push(id);
        EXPECT_TRUE(utf8::is_valid(chunk)) << "invalid UTF-8 chunk after id " << id;
        all += chunk;
    }
    return all + sd.flush();
}

TEST(GgufLlamaCpp, SmolLM2MatchesLlamaCpp) {
    auto vj = read_json(kFixtures + "smollm2/vocab.json");
    auto want = read_json(kFixtures + "smollm2/llama_cpp_tokens.json");
    ASSERT_FALSE(vj.is_null() || want.is_null());
    GgufVocab v = vocab_from_json(vj);
    EXPECT_EQ(v.pre, "smollm");
    EXPECT_EQ(v.tokens.size(), 49152u);
    auto loaded = Tokenizer::from_gguf_vocab(v);
    ASSERT_TRUE(loaded.is_ok()) << loaded.message();
    const Tokenizer& tok = loaded.value();
    int equal = 0, n = 0;
    for (const auto& c : want["cases"]) {
        const std::string text = c["text"].get<std::string>();
        auto ids = c["ids"].get<std::vector<int32_t>>(), plain = c["ids_plain"].get<std::vector<int32_t>>();
        auto got = tok.encode(text, false, true), got_plain = tok.encode(text, false, false);
        EXPECT_EQ(got, ids) << nlohmann::json(text).dump() << "\n got  " << show(got) << "\n want " << show(ids);
        EXPECT_EQ(got_plain, plain) << "(no parse_special) " << nlohmann::json(text).dump();
        equal += (got == ids) + (got_plain == plain);
        n += 2;
        const std::string dec = c["decoded"].get<std::string>();
        const std::string dec_skip = c["decoded_skip_special"].get<std::string>();
        EXPECT_EQ(tok.decode(ids), dec) << nlohmann::json(text).dump();
        EXPECT_EQ(tok.decode(ids, true), dec_skip) << nlohmann::json(text).dump();
        EXPECT_EQ(stream(tok, ids, false), dec);
        EXPECT_EQ(stream(tok, ids, true), dec_skip);
        EXPECT_EQ(tok.decode(plain), text);  // every text is valid UTF-8 and byte-level BPE is lossless
    }
    std::printf("[smollm2] %d / %d tokenizations identical to llama.cpp (llama-cpp-python %s)\n", equal, n,
                want["llama_cpp_python_version"].get<std::string>().c_str());
    // SmolLM2: <|im_start|> = 1 is BOS (not added), <|im_end|> = 2 is EOS; <|endoftext|> = 0 ends too.
    EXPECT_EQ(tok.bos_id(), 1);
    EXPECT_FALSE(tok.add_bos());
    EXPECT_EQ(tok.eos_ids(), (std::vector<int32_t>{2, 0}));
}

// tests/fixtures/smollm2/tokenize.json: the model-level goldens (scripts/make_smollm2_goldens.py, another run of
// the same oracle on other texts): ids without / with parse_special, token_to_piece(special) decodes.
TEST(GgufLlamaCpp, SmolLM2MatchesModelGoldens) {
    const std::string path = kFixtures + "smollm2/tokenize.json";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
    auto vj = read_json(kFixtures + "smollm2/vocab.json"), want = read_json(path);
    ASSERT_FALSE(vj.is_null() || want.is_null());
    auto loaded = Tokenizer::from_gguf_vocab(vocab_from_json(vj));
    ASSERT_TRUE(loaded.is_ok()) << loaded.message();
    const Tokenizer& tok = loaded.value();
    int n = 0;
    for (const auto& c : want["cases"]) {
        const std::string text = c["text"].get<std::string>();
        auto ids = c["ids"].get<std::vector<int32_t>>();
        auto ids_special = c["ids_parse_special"].get<std::vector<int32_t>>();
        EXPECT_EQ(tok.encode(text, true, false), ids) << nlohmann::json(text).dump();
        EXPECT_EQ(tok.encode(text, true, true), ids_special) << nlohmann::json(text).dump();
        EXPECT_EQ(tok.decode(ids), c["detok"].get<std::string>()) << nlohmann::json(text).dump();
        EXPECT_EQ(tok.decode(ids_special), c["detok_parse_special"].get<std::string>()) << nlohmann::json(text).dump();
        ++n;
    }
    EXPECT_GT(n, 0);
}

TEST(GgufLlamaCpp, PresetsMatchLlamaCpp) {
    auto want = read_json(kFixtures + "gguf_tokenizer/presets.json");
    ASSERT_FALSE(want.is_null());
    const auto texts = want["texts"].get<std::vector<std::string>>();
    int n_vocabs = 0;
    for (const auto& [name, spec] : want["vocabs"].items()) {
        auto vj = read_json(kFixtures + "gguf_tokenizer/" + spec["vocab"].get<std::string>());
        ASSERT_FALSE(vj.is_null());
        GgufVocab v = vocab_from_json(vj);
        for (int32_t id : spec["user_defined_ids"].get<std::vector<int32_t>>())
            v.token_types.at(id) = GGUF_TOKEN_USER_DEFINED;
        for (const auto& [pre, cases] : spec["presets"].items()) {
            v.pre = pre;
            auto loaded = Tokenizer::from_gguf_vocab(v);
            ASSERT_TRUE(loaded.is_ok()) << pre << ": " << loaded.message();
            const Tokenizer& tok = loaded.value();
            ASSERT_EQ(cases.size(), texts.size());
            int equal = 0;
            for (size_t i = 0; i < texts.size(); ++i) {
                auto ids = cases[i]["ids"].get<std::vector<int32_t>>();
                auto plain = cases[i]["ids_plain"].get<std::vector<int32_t>>();
                auto got = tok.encode(texts[i], false, true), got_plain = tok.encode(texts[i], false, false);
                EXPECT_EQ(got, ids) << name << " pre=" << pre << " text #" << i << " "
                                    << nlohmann::json(texts[i]).dump() << "\n got  " << show(got) << "\n want "
                                    << show(ids);
                EXPECT_EQ(got_plain, plain) << name << " pre=" << pre << " (no parse_special) text #" << i;
                equal += (got == ids) + (got_plain == plain);
            }
            std::printf("[%s pre=%s] %d / %zu tokenizations identical to llama.cpp\n", name.c_str(), pre.c_str(),
                        equal, 2 * texts.size());
        }
        ++n_vocabs;
    }
    EXPECT_EQ(n_vocabs, 2);
}

// A SentencePiece ("llama") vocabulary trained by scripts/make_spm_fixtures.py (BPE, byte fallback, user-defined
// symbols, 700 pieces: many characters fall back to bytes) with add_space_prefix true and false: ids with and
// without parse_special and with BOS, token_to_piece decodes, the stream decoder — all against llama.cpp.
TEST(GgufLlamaCpp, SentencePieceMatchesLlamaCpp) {
    auto vj = read_json(kFixtures + "gguf_tokenizer/spm_vocab.json");
    auto want = read_json(kFixtures + "gguf_tokenizer/spm_tokens.json");
    ASSERT_FALSE(vj.is_null() || want.is_null());
    GgufVocab v = vocab_from_json(vj);
    ASSERT_EQ(v.model, "llama");
    ASSERT_EQ(v.scores.size(), v.tokens.size());
    const auto texts = want["texts"].get<std::vector<std::string>>();
    int variants = 0;
    for (const auto& [name, cases] : want["variants"].items()) {
        v.add_space_prefix = name == "space_prefix";
        auto loaded = Tokenizer::from_gguf_vocab(v);
        ASSERT_TRUE(loaded.is_ok()) << loaded.message();
        const Tokenizer& tok = loaded.value();
        EXPECT_TRUE(tok.add_bos());
        ASSERT_EQ(cases.size(), texts.size());
        int equal = 0;
        for (size_t i = 0; i < texts.size(); ++i) {
            const auto& c = cases[i];
            const std::string& text = texts[i];
            auto ids = c["ids"].get<std::vector<int32_t>>(), plain = c["ids_plain"].get<std::vector<int32_t>>();
            auto bos = c["ids_bos"].get<std::vector<int32_t>>();
            auto got = tok.encode(text, false, true), got_plain = tok.encode(text, false, false);
            auto got_bos = tok.encode(text, true, true);
            EXPECT_EQ(got, ids) << name << " #" << i << " " << nlohmann::json(text).dump() << "\n got  " << show(got)
                                << "\n want " << show(ids);
            EXPECT_EQ(got_plain, plain) << name << " (no parse_special) #" << i;
            EXPECT_EQ(got_bos, bos) << name << " (add_special) #" << i;
            equal += (got == ids) + (got_plain == plain) + (got_bos == bos);
            const std::string dec = c["decoded"].get<std::string>();
            const std::string dec_skip = c["decoded_skip_special"].get<std::string>();
            EXPECT_EQ(tok.decode(ids), dec) << name << " #" << i;
            EXPECT_EQ(tok.decode(ids, true), dec_skip) << name << " #" << i;
            EXPECT_EQ(stream(tok, ids, false), dec);
        }
        std::printf("[spm %s] %d / %zu tokenizations identical to llama.cpp (llama-cpp-python %s)\n", name.c_str(),
                    equal, 3 * texts.size(), want["llama_cpp_python_version"].get<std::string>().c_str());
        ++variants;
    }
    EXPECT_EQ(variants, 2);
    // Scores of the wrong length are an error naming the key.
    v.scores.pop_back();
    auto bad = Tokenizer::from_gguf_vocab(v);
    ASSERT_FALSE(bad.is_ok());
    EXPECT_NE(bad.message().find("tokenizer.ggml.scores"), std::string::npos) << bad.message();
}

// llama.cpp's own tokenizer tests (models/ggml-vocab-NAME.gguf{,.inp,.out}; the .out ids come from HF tokenizers),
// prepared by scripts/prepare_llama_vocab_tests.py into $EMBER_LLAMA_VOCAB_DIR as NAME.json + NAME.inp/.out.
TEST(GgufLlamaCpp, LlamaCppVocabTests) {
    const char* dir = std::getenv("EMBER_LLAMA_VOCAB_DIR");
    if (!dir) GTEST_SKIP() << "EMBER_LLAMA_VOCAB_DIR not set";
    auto split = [](const std::string& s, const std::string& sep) {
        std::vector<std::string> out;
        for (size_t b = 0;;) {
            size_t e = s.find(sep, b);
            out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
            if (e == std::string::npos) return out;
            b = e + sep.size();
        }
    };
    auto slurp = [](const std::filesystem::path& p) {
        std::ifstream f(p, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    };
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() != ".json") continue;
        auto stem = e.path().parent_path() / e.path().stem();
        auto loaded = Tokenizer::from_gguf_vocab(vocab_from_json(read_json(e.path().string())));
        if (!loaded) {
            ADD_FAILURE() << e.path() << ": " << loaded.message();
            continue;
        }
        const Tokenizer& tok = loaded.value();
        // .inp: texts separated by "\n__ggml_vocab_test__\n"; .out: one line of ids per text.
        auto inputs = split(slurp(stem.string() + ".inp"), "\n__ggml_vocab_test__\n");
        auto lines = split(slurp(stem.string() + ".out"), "\n");
        int equal = 0;
        for (size_t i = 0; i < inputs.size() && i < lines.size(); ++i) {
            std::vector<int32_t> want;
            std::istringstream ls(lines[i]);
            for (int32_t id; ls >> id;) want.push_back(id);
            auto got = tok.encode(inputs[i], false, false);
            EXPECT_EQ(got, want) << stem.filename() << " #" << i << " " << nlohmann::json(inputs[i]).dump();
            equal += got == want;
        }
        std::printf("[%s] %d / %zu texts identical\n", stem.filename().c_str(), equal, inputs.size());
        ++files;
    }
    EXPECT_GT(files, 0);
}

}  // namespace
}  // namespace ember
