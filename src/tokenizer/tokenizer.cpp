// tokenizer.cpp: loads tokenizer.json (+ tokenizer_config.json) and runs the encode/decode pipeline.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "io/json_file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ember {

namespace {

Expected<std::string> read_file(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return errorf("cannot open '%s': %s", p.c_str(), std::strerror(errno));
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) return errorf("cannot read '%s'", p.c_str());
    return ss.str();
}

// tokenizer_config.json "eos_token": a string or {"content": ...}.
std::string config_eos(const nlohmann::json& cfg) {
    if (!cfg.is_object() || !cfg.contains("eos_token")) return "";
    const auto& e = cfg["eos_token"];
    if (e.is_string()) return e.get<std::string>();
    if (e.is_object() && e.contains("content") && e["content"].is_string()) return e["content"].get<std::string>();
    return "";
}

}  // namespace

Expected<Tokenizer> Tokenizer::load(const std::string& path) {
    namespace fs = std::filesystem;
    fs::path p(path);
    if (p.extension() == ".gguf") return errorf("%s: GGUF tokenizers are not supported yet", path.c_str());
    std::error_code ec;
    if (fs::is_directory(p, ec)) p /= "tokenizer.json";
    EMBER_ASSIGN(std::string text, read_file(p));
    std::string config;
    fs::path cfg = p.parent_path() / "tokenizer_config.json";
    if (fs::exists(cfg, ec)) {
        EMBER_ASSIGN(config, read_file(cfg));
    }
    auto tok = from_json(text, config);
    if (!tok) return tok.status().with_context(p.string());
    return tok;
}

Expected<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
    using nlohmann::json;
    auto impl = std::make_shared<Impl>();
    try {
        EMBER_ASSIGN(json j, parse_json_text(tokenizer_json, "tokenizer.json"));  // depth-limited, no exception
        EMBER_REQUIRE(j.is_object(), "tokenizer.json: top level is not an object");
        EMBER_REQUIRE(j.contains("model"), "tokenizer.json: missing \"model\"");
        EMBER_ASSIGN(impl->normalizer, Normalizer::from_json(j.value("normalizer", json())));
        EMBER_ASSIGN(impl->pre_tokenizer, PreTokenizer::from_json(j.value("pre_tokenizer", json())));
        EMBER_ASSIGN(impl->bpe, Bpe::from_json(j["model"]));
        // The decoder is taken to be ByteLevel whatever it says (the pre-tokenizer is byte-level).

        std::vector<AddedToken> added;
        if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
            EMBER_REQUIRE(j["added_tokens"].is_array(), "tokenizer.json: \"added_tokens\" is not an array");
            for (const auto& a : j["added_tokens"]) {
                EMBER_REQUIRE(a.is_object() && a.contains("id") && a["id"].is_number_integer() &&
                                  a.contains("content") && a["content"].is_string(),
                              "tokenizer.json: added token without integer \"id\" and string \"content\"");
                AddedToken t;
                int64_t id = a["id"].get<int64_t>();
                EMBER_REQUIRE(id >= 0 && id < INT32_MAX, "tokenizer.json: bad added token id %lld",
                              static_cast<long long>(id));
                t.id = static_cast<int32_t>(id);
                t.content = a["content"].get<std::string>();
                t.special = a.value("special", false);
                t.single_word = a.value("single_word", false);
                t.lstrip = a.value("lstrip", false);
                t.rstrip = a.value("rstrip", false);
                t.normalized = a.value("normalized", !t.special);
                added.push_back(std::move(t));
            }
        }

        // id -> bytes table over vocab and added tokens (an added token's content wins, as in HF's decode).
        const auto& vocab = impl->bpe->vocab();
        int64_t n = 0;
        for (const auto& [s, id] : vocab) n = std::max<int64_t>(n, id + 1);
        for (const AddedToken& t : added) n = std::max<int64_t>(n, t.id + 1);
        EMBER_REQUIRE(n <= 4 * static_cast<int64_t>(vocab.size() + added.size()) + 1024,
                      "token ids are too sparse (max id %lld for %zu tokens)", static_cast<long long>(n - 1),
                      vocab.size() + added.size());
        impl->bytes.resize(n);
        impl->special.assign(n, 0);
        for (const auto& [s, id] : vocab) impl->bytes[id] = byte_level::decode(s);
        for (AddedToken& t : added) {
            impl->bytes[t.id] = byte_level::decode(t.content);
            impl->special[t.id] = t.special;
            impl->added_ids[t.content] = t.id;
            if (t.normalized) {  // matched in normalized text, so the pattern is normalized too
                t.content = impl->normalizer.apply(t.content);
                impl->norm_added.add(std::move(t));
            } else {
                impl->raw_added.add(std::move(t));
            }
        }

        Tokenizer tok;
        tok.impl_ = impl;
        for (const char* s : kEosTokenNames)
            if (int32_t id = tok.token_id(s); id >= 0) impl->eos.push_back(id);
        if (!config_json.empty()) {
            auto cfg_parsed = parse_json_text(config_json, "tokenizer_config.json");
            EMBER_REQUIRE(cfg_parsed.is_ok(), "tokenizer_config.json: invalid JSON (%s)", cfg_parsed.message().c_str());
            const json& cfg = *cfg_parsed;
            std::string eos = config_eos(cfg);
            int32_t id = eos.empty() ? -1 : tok.token_id(eos);
            if (id >= 0 && std::find(impl->eos.begin(), impl->eos.end(), id) == impl->eos.end())
                impl->eos.push_back(id);
        }
        return tok;
    } catch (const nlohmann::json::exception& e) {
        return errorf("bad tokenizer JSON: %s", e.what());
    } catch (const std::exception& e) {  // e.g. std::bad_alloc: nothing escapes the API
        return errorf("loading tokenizer: %s", e.what());
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view input) const { return encode(input, false, true); }

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special, bool parse_special) const {
    const Impl& m = *impl_;
    std::string repaired;
    if (!utf8::is_valid(input)) input = repaired = utf8::lossy(input);
    std::vector<int32_t> ids;
    std::vector<std::string> words;
    if (add_special && m.add_bos) ids.push_back(m.bos_id);
    if (m.from_gguf && m.spm) {  // llama.cpp SPM: partition, then per text fragment [" " +] escape + merges
        bool prev_special = true;
        for (const Segment& seg : m.gguf_special.split(input, parse_special)) {
            if (seg.id >= 0) {
                ids.push_back(seg.id);
                prev_special = true;
                continue;
            }
            if (seg.end == seg.begin) continue;
            std::string text = m.add_space_prefix && prev_special ? " " : "";
            text += input.substr(seg.begin, seg.end - seg.begin);
            m.spm->encode(spm_escape_spaces(text), ids);
            prev_special = false;
        }
        if (add_special && m.add_eos) ids.push_back(m.eos_id);
        return ids;
    }
    if (m.from_gguf) {  // llama.cpp: special-token partition, then regex pre-tokenizer and BPE per text fragment
        for (const Segment& seg : m.gguf_special.split(input, parse_special)) {
            if (seg.id >= 0) {
                ids.push_back(seg.id);
                continue;
            }
            words.clear();
            m.pre_tokenizer.apply(input.substr(seg.begin, seg.end - seg.begin), words);
            for (const std::string& w : words) m.bpe->encode(w, ids);
        }
        if (add_special && m.add_eos) ids.push_back(m.eos_id);
        return ids;
    }
    for (const Segment& raw : m.raw_added.split(input, parse_special)) {
        if (raw.id >= 0) {
            ids.push_back(raw.id);
            continue;
        }
        if (raw.end == raw.begin) continue;
        std::string norm = m.normalizer.apply(input.substr(raw.begin, raw.end - raw.begin));
        for (const Segment& seg : m.norm_added.split(norm, parse_special)) {
            if (seg.id >= 0) {
                ids.push_back(seg.id);
                continue;
            }
            words.clear();
            m.pre_tokenizer.apply(std::string_view(norm).substr(seg.begin, seg.end - seg.begin), words);
            for (const std::string& w : words) m.bpe->encode(w, ids);
        }
    }
    if (add_special && m.add_eos) ids.push_back(m.eos_id);
    return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    std::string bytes;
    for (int32_t id : ids)
        if (!(skip_special && is_special(id))) bytes += token_bytes(id);
    return utf8::lossy(bytes);
}

std::string Tokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size()) return "";
    return impl_->bytes[id];
}

int32_t Tokenizer::token_id(std::string_view token) const {
    std::string key(token);
    if (auto it = impl_->added_ids.find(key); it != impl_->added_ids.end()) return it->second;
    const auto& v = impl_->bpe->vocab();
    if (auto it = v.find(key); it != v.end()) return it->second;
    return -1;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->bytes.size()); }

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < vocab_size() && impl_->special[id]; }

std::vector<int32_t> Tokenizer::eos_ids() const { return impl_->eos; }

int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }

}  // namespace ember
