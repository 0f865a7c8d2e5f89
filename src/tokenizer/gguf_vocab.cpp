// gguf_vocab.cpp: Tokenizer::from_gguf_vocab, the GGUF metadata front end (llama.cpp llama-vocab.cpp semantics
// for BPE vocabularies; see gguf_vocab.h).
#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <climits>
#include <string_view>

#include "tokenizer/byte_level.h"
#include "tokenizer/gguf_pre.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer_impl.h"

namespace ember {
namespace {

// "<0xHH>" -> the byte, or -1.
int parse_byte_token(std::string_view t) {
    auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                      : -1;
    };
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
    int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Appends id to v unless it is -1 or already there.
void add_unique(std::vector<int32_t>& v, int32_t id) {
    if (id >= 0 && std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
}

Status build(const GgufVocab& v, Tokenizer::Impl& m) {
    const bool spm = v.model == "llama";
    EMBER_REQUIRE(v.model == "gpt2" || spm,
                  "tokenizer.ggml.model '%s' is not supported (supported: \"gpt2\" byte-level BPE, \"llama\" "
                  "SentencePiece)",
                  v.model.c_str());
    GgufPrePreset preset;  // SentencePiece: no pre-tokenizer, BOS added by default (llama.cpp)
    preset.add_bos = true;
    if (!spm) {
        EMBER_ASSIGN(preset, gguf_pre_preset(v.pre));
        EMBER_ASSIGN(m.pre_tokenizer, gguf_pre_tokenizer(preset));
    }
    const size_t n = v.tokens.size();
    EMBER_REQUIRE(n > 0, "tokenizer.ggml.tokens is empty");
    EMBER_REQUIRE(n < static_cast<size_t>(INT32_MAX), "tokenizer.ggml.tokens has too many entries (%zu)", n);
    EMBER_REQUIRE(v.token_types.empty() || v.token_types.size() == n,
                  "tokenizer.ggml.token_type has %zu entries for %zu tokens", v.token_types.size(), n);

    std::unordered_map<std::string, int32_t> vocab;  // every token, as llama.cpp's token_to_id
    vocab.reserve(n);
    m.bytes.resize(n);
    m.special.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
        const int32_t id = static_cast<int32_t>(i);
        // llama.cpp renames empty tokens so that the vocabulary stays a bijection.
        std::string text = v.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : v.tokens[i];
        const int32_t type = v.token_types.empty() ? GGUF_TOKEN_NORMAL : v.token_types[i];
        switch (type) {
            case GGUF_TOKEN_NORMAL: m.bytes[i] = spm ? spm_unescape_spaces(text) : byte_level::decode(text); break;
            case GGUF_TOKEN_UNKNOWN:
            case GGUF_TOKEN_CONTROL:  // matched only with parse_special; skipped by decode(skip_special)
                m.bytes[i] = text;
                m.special[i] = 1;
                m.gguf_special.add(id, text, /*control=*/true);
                break;
            case GGUF_TOKEN_USER_DEFINED:  // stored pre-normalized by the converter: matched and decoded as is
                m.bytes[i] = spm ? spm_unescape_spaces(text) : text;
                m.gguf_special.add(id, text, /*control=*/false);
                break;
            case GGUF_TOKEN_BYTE: {
                int b = parse_byte_token(text);
                EMBER_REQUIRE(b >= 0, "token %zu '%s' has type byte but is not of the form <0xHH>", i, text.c_str());
                m.bytes[i] = std::string(1, static_cast<char>(b));
                break;
            }
            case GGUF_TOKEN_UNDEFINED:
            case GGUF_TOKEN_UNUSED: break;  // decodes to nothing
            default: return errorf("token %zu '%s' has bad token type %d", i, text.c_str(), type);
        }
        auto [it, fresh] = vocab.emplace(std::move(text), id);
        EMBER_REQUIRE(fresh, "duplicate token in tokenizer.ggml.tokens: '%s' has ids %d and %zu", it->first.c_str(),
                      it->second, i);
    }
    m.gguf_special.finalize();
    if (spm) {
        EMBER_REQUIRE(v.scores.empty() || v.scores.size() == n, "tokenizer.ggml.scores has %zu entries for %zu tokens",
                      v.scores.size(), n);
        std::vector<int32_t> byte_ids(256, -1);
        for (size_t i = 0; i < n; ++i)
            if (!v.token_types.empty() && v.token_types[i] == GGUF_TOKEN_BYTE)
                byte_ids[static_cast<unsigned char>(m.bytes[i][0])] = static_cast<int32_t>(i);
        EMBER_REQUIRE(v.unk_id >= -1 && v.unk_id < static_cast<int32_t>(n),
                      "tokenizer.ggml.unknown_token_id %d is out of range (%zu tokens)", v.unk_id, n);
        m.spm = std::make_unique<Spm>(vocab, v.scores, std::move(byte_ids), v.unk_id);
        m.add_space_prefix = v.add_space_prefix.value_or(true);
    }
    {
        auto bpe = Bpe::from_vocab(std::move(vocab), v.merges, preset.ignore_merges);
        if (!bpe) return bpe.status().with_context("tokenizer.ggml.merges");
        m.bpe = std::move(bpe.value());
    }

    const int32_t n_ids = static_cast<int32_t>(n);
    for (auto [id, key] : {std::pair{v.bos_id, "bos_token_id"}, {v.eos_id, "eos_token_id"}, {v.eot_id, "eot_token_id"},
                           {v.eom_id, "eom_token_id"}, {v.unk_id, "unknown_token_id"}})
        EMBER_REQUIRE(id >= -1 && id < n_ids, "tokenizer.ggml.%s %d is out of range (%zu tokens)", key, id, n);
    for (int32_t id : v.extra_eos)
        EMBER_REQUIRE(id >= 0 && id < n_ids, "extra eos id %d is out of range (%zu tokens)", id, n);
    m.bos_id = v.bos_id;
    m.eos_id = v.eos_id;
    m.add_bos = v.add_bos.value_or(preset.add_bos);
    m.add_eos = v.add_eos.value_or(false);
    EMBER_REQUIRE(!m.add_bos || m.bos_id >= 0, "tokenizer.ggml.add_bos_token is true, but bos_token_id is not set");
    EMBER_REQUIRE(!m.add_eos || m.eos_id >= 0, "tokenizer.ggml.add_eos_token is true, but eos_token_id is not set");
    for (int32_t id : {v.eos_id, v.eot_id, v.eom_id}) add_unique(m.eos, id);
    for (int32_t id : v.extra_eos) add_unique(m.eos, id);
    for (const char* name : kEosTokenNames) {
        auto it = m.bpe->vocab().find(name);
        if (it != m.bpe->vocab().end()) add_unique(m.eos, it->second);
    }
    m.from_gguf = true;
    return Status::ok();
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_gguf_vocab(const GgufVocab& v) {
    auto impl = std::make_shared<Impl>();
    try {
        Status st = build(v, *impl);
        if (!st) return st.with_context("GGUF tokenizer");
    } catch (const std::exception& e) {  // e.g. std::bad_alloc: nothing escapes the API
        return errorf("GGUF tokenizer: %s", e.what());
    }
    Tokenizer tok;
    tok.impl_ = std::move(impl);
    return tok;
}

}  // namespace ember
