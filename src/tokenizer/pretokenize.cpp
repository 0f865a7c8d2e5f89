// pretokenize.cpp: PCRE2 regex wrapper and the Split / ByteLevel / Sequence pre-tokenizers.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize.h"

#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace ember {
namespace {

// The regex HF's ByteLevel pre-tokenizer uses when use_regex is true (GPT-2).
const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Per-thread match context with a JIT stack large enough for long whitespace / letter runs.
struct MatchEnv {
    pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    MatchEnv() {
        if (ctx && stack) pcre2_jit_stack_assign(ctx, nullptr, stack);
    }
    ~MatchEnv() {
        pcre2_jit_stack_free(stack);
        pcre2_match_context_free(ctx);
    }
};

size_t char_len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

// Oniguruma (HF's engine) and PCRE2 disagree on some escapes under Unicode rules: onig's \s is White_Space
// (PCRE2 adds U+180E); onig's \w is Alphabetic|M|Nd|Pc (PCRE2: L|N|_), and outside brackets onig also counts
// the Latin-1 numbers ² ³ ¹ ¼ ½ ¾; onig's \h is a hex digit (PCRE2: horizontal space). These escapes are
// rewritten into explicit classes so PCRE2 matches what onig does (measured against HF tokenizers 0.23).
// \S, \W, \H inside a bracket class are left as they are.
std::string onig_to_pcre2(const std::string& p) {
    static const std::string kSpace = "\\t\\n\\x{0b}\\f\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}"
                                      "\\x{202f}\\x{205f}\\x{3000}";
    static const std::string kWord = "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{24b6}-\\x{24e9}\\x{1f130}-\\x{1f149}"
                                     "\\x{1f150}-\\x{1f169}\\x{1f170}-\\x{1f189}";
    static const std::string kWordOut = kWord + "\\x{b2}\\x{b3}\\x{b9}\\x{bc}-\\x{be}", kHex = "0-9a-fA-F";
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < p.size(); ++i) {
        char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            char e = p[++i];
            const std::string* set = e == 's' || e == 'S'   ? &kSpace
                                   : e == 'w' || e == 'W' ? (in_class ? &kWord : &kWordOut)
                                   : e == 'h' || e == 'H' ? &kHex
                                                          : nullptr;
            bool negated = e == 'S' || e == 'W' || e == 'H';
            if (!set || (in_class && negated)) out += {c, e};
            else if (in_class) out += *set;
            else out += (negated ? "[^" : "[") + *set + "]";
            continue;
        }
        if (!in_class && c == '[') {  // a ']' right after '[' or '[^' is a literal member
            in_class = true;
            out += c;
            if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
            if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
            continue;
        }
        if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:name:]
            size_t end = p.find(":]", i + 2);
            if (end != std::string::npos) {
                out.append(p, i, end + 2 - i);
                i = end + 1;
                continue;
            }
        }
        if (in_class && c == ']') in_class = false;
        out += c;
    }
    return out;
}

}  // namespace

Expected<Regex> Regex::compile(const std::string& pattern, bool literal) {
    int err = 0;
    PCRE2_SIZE off = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    const std::string pat = literal ? pattern : onig_to_pcre2(pattern);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), opts, &err, &off, nullptr);
    if (!code) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(err, buf, sizeof buf);
        return errorf("cannot compile pre-tokenizer regex '%s': %s (offset %zu after rewriting onig escapes)",
                      pattern.c_str(), reinterpret_cast<const char*>(buf), static_cast<size_t>(off));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
    Regex r;
    r.code_ = std::shared_ptr<void>(code, [](void* p) { pcre2_code_free(static_cast<pcre2_code*>(p)); });
    return r;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
    thread_local MatchEnv env;
    auto* code = static_cast<pcre2_code*>(code_.get());
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
    auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t start = 0;
    while (start < s.size()) {
        // Stops on no match; any other failure (resource limits) leaves the rest as one unmatched gap.
        if (pcre2_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, md, env.ctx) < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        out.emplace_back(ov[0], ov[1]);
        if (ov[1] > ov[0]) start = ov[1];
        else if (ov[0] < s.size()) start = ov[0] + char_len(static_cast<unsigned char>(s[ov[0]]));
        else break;  // empty match at the very end
    }
    pcre2_match_data_free(md);
    return out;
}

Status PreTokenizer::parse(const nlohmann::json& j, std::vector<Step>& steps) {
    EMBER_REQUIRE(j.is_object() && j.contains("type") && j["type"].is_string(), "pre_tokenizer: missing \"type\"");
    const std::string type = j["type"].get<std::string>();
    if (type == "Sequence") {
        EMBER_REQUIRE(j.contains("pretokenizers") && j["pretokenizers"].is_array(),
                      "pre_tokenizer Sequence: missing \"pretokenizers\" array");
        for (const auto& sub : j["pretokenizers"]) EMBER_TRY(parse(sub, steps));
        return Status::ok();
    }
    if (type == "ByteLevel") {
        Step st{Step::kByteLevel, {}, j.value("use_regex", true), j.value("add_prefix_space", true)};
        if (st.use_regex) {
            EMBER_ASSIGN(st.regex, Regex::compile(kGpt2Regex));
        }
        steps.push_back(std::move(st));
        return Status::ok();
    }
    if (type == "Split") {
        std::string behavior = j.value("behavior", std::string("Isolated"));
        EMBER_REQUIRE(behavior == "Isolated", "pre_tokenizer Split: unsupported behavior '%s' (only Isolated)",
                      behavior.c_str());
        EMBER_REQUIRE(!j.value("invert", false), "pre_tokenizer Split: invert=true is not supported");
        EMBER_REQUIRE(j.contains("pattern") && j["pattern"].is_object(), "pre_tokenizer Split: missing \"pattern\"");
        const auto& p = j["pattern"];
        Step st{Step::kSplit, {}, false, false};
        if (p.contains("Regex") && p["Regex"].is_string()) {
            EMBER_ASSIGN(st.regex, Regex::compile(p["Regex"].get<std::string>()));
        } else if (p.contains("String") && p["String"].is_string() && !p["String"].get<std::string>().empty()) {
            EMBER_ASSIGN(st.regex, Regex::compile(p["String"].get<std::string>(), /*literal=*/true));
        } else {
            return errorf("pre_tokenizer Split: pattern must be {\"Regex\": ...} or a non-empty {\"String\": ...}");
        }
        steps.push_back(std::move(st));
        return Status::ok();
    }
    return errorf("unsupported pre_tokenizer type '%s' (supported: ByteLevel, Split, Sequence)", type.c_str());
}

Expected<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j) {
    EMBER_REQUIRE(!j.is_null(), "pre_tokenizer is null; only byte-level BPE tokenizers are supported");
    PreTokenizer pt;
    EMBER_TRY(parse(j, pt.steps_));
    bool byte_level = false;
    for (const auto& s : pt.steps_) byte_level |= s.kind == Step::kByteLevel;
    EMBER_REQUIRE(byte_level, "pre_tokenizer has no ByteLevel step; only byte-level BPE tokenizers are supported");
    return pt;
}

void PreTokenizer::apply(std::string_view s, std::vector<std::string>& out) const {
    // Every step maps each current piece to sub-pieces; empty pieces are dropped (as HF does).
    std::vector<std::string> cur{std::string(s)}, next;
    auto split_into = [&next](std::string_view piece, const Regex& re) {  // Isolated: matches and gaps
        size_t prev = 0;
        for (auto [b, e] : re.find_all(piece)) {
            if (b > prev) next.emplace_back(piece.substr(prev, b - prev));
            if (e > b) next.emplace_back(piece.substr(b, e - b));
            prev = e;
        }
        if (prev < piece.size()) next.emplace_back(piece.substr(prev));
    };
    for (const Step& st : steps_) {
        next.clear();
        for (std::string& piece : cur) {
            if (piece.empty()) continue;
            if (st.kind == Step::kSplit) {
                split_into(piece, st.regex);
                continue;
            }
            if (st.add_prefix_space && piece[0] != ' ') piece.insert(piece.begin(), ' ');
            size_t first = next.size();
            if (st.use_regex) split_into(piece, st.regex);
            else next.push_back(std::move(piece));
            for (size_t i = first; i < next.size(); ++i) {  // map bytes to the GPT-2 alphabet
                std::string mapped;
                byte_level::encode(next[i], mapped);
                next[i] = std::move(mapped);
            }
        }
        std::swap(cur, next);
    }
    for (std::string& piece : cur)
        if (!piece.empty()) out.push_back(std::move(piece));
}

}  // namespace ember
