// gguf_pre.cpp: the tokenizer.ggml.pre -> regex table (strings from llama.cpp llama-vocab.cpp) and the
// PreTokenizer built from it.
#include "tokenizer/gguf_pre.h"

#include <nlohmann/json.hpp>

namespace ember {
namespace {

// GPT-2 (llama.cpp's hand-written matcher for it also takes a lone whitespace run: the final "|\s+").
const char* kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
// Llama 3 (tokenizer.json has "(?i:'s|...)"; llama.cpp spells the case-insensitivity out).
const char* kLlama3 = R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)re"
                       R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen2: Llama 3 with single digits.
const char* kQwen2 = R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)re"
                      R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen3.5: Qwen2 with combining marks (\p{M}) kept inside words.
const char* kQwen35 = R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)re"
                       R"re(|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// DeepSeek LLM / Coder (character classes spelled as code points; "\s+$" is llama.cpp's).
const std::vector<std::string> kDeepseekLlm = {
    "[\r\n]",
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-"
    "\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D"
    "\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-"
    "\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113"
    "\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149"
    "\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B"
    "\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-"
    "\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0"
    "-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
    "\\s+$",
    "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
    "\\p{N}+"};
const std::vector<std::string> kDeepseekCoder = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                                 "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}"};

struct Entry {
    const char* names;  // space-separated aliases
    std::vector<std::string> regexes;
    bool ignore_merges, add_bos;
};

const std::vector<Entry>& table() {
    static const std::vector<Entry> t = {
        {"default", {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}, false, false},
        {"gpt-2 gpt2", {kGpt2}, false, false},
        {"llama-bpe llama3 llama-v3", {kLlama3}, true, true},
        {"smaug-bpe dbrx", {kLlama3}, false, false},
        {"qwen2 deepseek-r1-qwen", {kQwen2}, false, false},
        {"qwen35", {kQwen35}, false, false},
        {"smollm starcoder refact command-r", {R"re(\p{N})re", kGpt2}, false, false},
        {"mpt", {kGpt2}, false, false},
        {"falcon", {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}, false, false},
        {"deepseek-llm", kDeepseekLlm, false, false},
        {"deepseek-coder", kDeepseekCoder, false, false},
    };
    return t;
}

bool has_name(const char* names, const std::string& name) {
    std::string_view s(names);
    while (!s.empty()) {
        size_t sp = s.find(' ');
        if (s.substr(0, sp) == name) return true;
        if (sp == std::string_view::npos) break;
        s.remove_prefix(sp + 1);
    }
    return false;
}

}  // namespace

std::string gguf_pre_names() {
    std::string out;
    for (const Entry& e : table()) {
        std::string names = e.names;
        for (char& c : names)
            if (c == ' ') c = ',';
        out += (out.empty() ? "" : ",") + names;
    }
    for (size_t i = 0; (i = out.find(',', i)) != std::string::npos; i += 2) out.replace(i, 1, ", ");
    return out;
}

Expected<GgufPrePreset> gguf_pre_preset(const std::string& pre) {
    const std::string name = pre.empty() ? "default" : pre;
    for (const Entry& e : table())
        if (has_name(e.names, name)) return GgufPrePreset{e.regexes, e.ignore_merges, e.add_bos};
    return errorf("unsupported tokenizer.ggml.pre '%s' (supported: %s)", pre.c_str(), gguf_pre_names().c_str());
}

Expected<PreTokenizer> gguf_pre_tokenizer(const GgufPrePreset& preset) {
    using nlohmann::json;
    json steps = json::array();
    for (const std::string& r : preset.regexes)
        steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
    steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
    return PreTokenizer::from_json(json{{"type", "Sequence"}, {"pretokenizers", steps}});
}

}  // namespace ember
