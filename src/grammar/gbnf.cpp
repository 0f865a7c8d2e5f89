// GBNF parser (gbnf.h): recursive descent over the text, rules resolved by name at the end.
#include "grammar/gbnf.h"

#include <map>
#include <string>

#include "grammar/regex.h"
#include "grammar/utf8.h"

namespace ember::grammar {

namespace {

bool is_word(char c) { return isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

class GbnfParser {
public:
    explicit GbnfParser(std::string_view t) : t_(t) {}

    Expected<GrammarIR> parse() {
        skip(true);
        while (i_ < t_.size()) {
            EMBER_TRY(parse_rule());
            skip(true);
        }
        for (auto& [name, line] : used_)
            if (g_.rule(rule_id(name)).body < 0)
                return errorf("gbnf line %d: undefined rule '%s'", line, name.c_str());
        const int root = g_.find_rule("root");
        EMBER_REQUIRE(root >= 0 && g_.rule(root).body >= 0, "gbnf: no 'root' rule");
        g_.root = root;
        return std::move(g_);
    }

private:
    Status err(const std::string& what) const { return errorf("gbnf line %d: %s", line_, what.c_str()); }

    // Skips spaces and comments; newlines only when newline_ok.
    void skip(bool newline_ok) {
        while (i_ < t_.size()) {
            const char c = t_[i_];
            if (c == '#') {
                while (i_ < t_.size() && t_[i_] != '\n') ++i_;
            } else if (c == '\n' || c == '\r') {
                if (!newline_ok) return;
                if (c == '\n') ++line_;
                ++i_;
            } else if (c == ' ' || c == '\t') {
                ++i_;
            } else if (c == '\\' && i_ + 1 < t_.size() && (t_[i_ + 1] == '\n' || t_[i_ + 1] == '\r')) {
                i_ += 2;  // line continuation
            } else {
                return;
            }
        }
    }

    int rule_id(const std::string& name) {
        auto it = ids_.find(name);
        if (it != ids_.end()) return it->second;
        const int id = g_.add_rule(name);
        ids_.emplace(name, id);
        return id;
    }

    std::string word() {
        const size_t s = i_;
        while (i_ < t_.size() && is_word(t_[i_])) ++i_;
        return std::string(t_.substr(s, i_ - s));
    }

    Status parse_rule() {
        const std::string name = word();
        if (name.empty()) return err("expected a rule name");
        skip(false);
        if (t_.substr(i_, 3) != "::=") return err("expected '::=' after '" + name + "'");
        i_ += 3;
        skip(true);
        const int id = rule_id(name);
        if (g_.rule(id).body >= 0) return err("rule '" + name + "' defined twice");
        EMBER_ASSIGN(int body, parse_alts(false));
        g_.define(id, body);
        if (i_ < t_.size() && t_[i_] != '\n' && t_[i_] != '\r') return err("unexpected character after rule");
        return Status::ok();
    }

    Expected<int> parse_alts(bool nested) {
        std::vector<int> alts;
        while (true) {
            EMBER_ASSIGN(int s, parse_seq(nested));
            alts.push_back(s);
            // A '|' may start the next line of a top-level rule.
            const size_t save = i_;
            const int save_line = line_;
            skip(true);
            if (i_ < t_.size() && t_[i_] == '|') {
                ++i_;
                skip(true);
                continue;
            }
            i_ = save;
            line_ = save_line;
            break;
        }
        return g_.alt(std::move(alts));
    }

    Expected<int> parse_seq(bool nested) {
        std::vector<int> items;
        while (i_ < t_.size()) {
            const char c = t_[i_];
            int e;
            if (c == '"') {
                EMBER_ASSIGN(e, parse_literal());
            } else if (c == '[') {
                EMBER_ASSIGN(e, parse_class());
            } else if (c == '.') {
                ++i_;
                e = utf8_expr(g_, cp_any());
            } else if (c == '(') {
                ++i_;
                skip(true);
                EMBER_ASSIGN(e, parse_alts(true));
                skip(true);
                if (i_ >= t_.size() || t_[i_] != ')') return err("expected ')'");
                ++i_;
            } else if (c == '<') {
                return err("token references (<...>) are not supported");
            } else if (is_word(c)) {
                const size_t save = i_;
                const std::string name = word();
                // `name ::=` starts the next rule (only possible after a newline, which ended this one).
                size_t k = i_;
                while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t')) ++k;
                if (t_.substr(k, 3) == "::=") {
                    i_ = save;
                    break;
                }
                used_.emplace(name, line_);
                e = g_.ref(rule_id(name));
            } else {
                break;
            }
            EMBER_ASSIGN(e, parse_postfix(e));
            items.push_back(e);
            skip(nested);
        }
        return g_.seq(std::move(items));
    }

    Expected<int> parse_postfix(int e) {
        while (i_ < t_.size()) {
            const char c = t_[i_];
            if (c == '*') { ++i_; e = g_.star(e); }
            else if (c == '+') { ++i_; e = g_.plus(e); }
            else if (c == '?') { ++i_; e = g_.opt(e); }
            else if (c == '{') {
                ++i_;
                skip(false);
                auto num = [&](int& v) {
                    const size_t s = i_;
                    long x = 0;
                    while (i_ < t_.size() && isdigit(static_cast<unsigned char>(t_[i_]))) {
                        x = x * 10 + (t_[i_++] - '0');
                        if (x > 100000) x = 100001;
                    }
                    v = int(x);
                    return i_ > s;
                };
                int lo = 0, hi;
                const bool has_lo = num(lo);
                skip(false);
                if (i_ < t_.size() && t_[i_] == ',') {
                    ++i_;
                    skip(false);
                    if (!num(hi)) hi = -1;
                } else {
                    if (!has_lo) return err("expected a number in {}");
                    hi = lo;
                }
                skip(false);
                if (i_ >= t_.size() || t_[i_] != '}') return err("expected '}'");
                ++i_;
                if (lo > 100000 || hi > 100000) return err("repetition count too large");
                if (hi >= 0 && hi < lo) return err("repetition {m,n} with n < m");
                e = g_.repeat(e, lo, hi);
            } else {
                break;
            }
        }
        return e;
    }

    // One (possibly escaped) code point inside a literal or class.
    Expected<uint32_t> parse_char() {
        if (i_ >= t_.size()) return err("unexpected end of input");
        if (t_[i_] == '\\') {
            ++i_;
            if (i_ >= t_.size()) return err("unexpected end of input");
            const char c = t_[i_++];
            auto hex = [&](int n) -> Expected<uint32_t> {
                uint32_t v = 0;
                for (int k = 0; k < n; ++k) {
                    if (i_ >= t_.size() || !isxdigit(static_cast<unsigned char>(t_[i_]))) return err("bad hex escape");
                    const char h = t_[i_++];
                    v = v * 16 + uint32_t(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                }
                if (v > kMaxCodePoint) return err("escape beyond U+10FFFF");
                return v;
            };
            switch (c) {
                case 'n': return uint32_t('\n');
                case 'r': return uint32_t('\r');
                case 't': return uint32_t('\t');
                case 'x': return hex(2);
                case 'u': return hex(4);
                case 'U': return hex(8);
                case '\\': case '"': case '[': case ']': case '-': case '^': return uint32_t(c);
                default: return err(std::string("unknown escape \\") + c);
            }
        }
        std::string s(t_.substr(i_, 4));
        size_t k = 0;
        uint32_t c;
        if (!utf8_next(s, k, c)) return err("invalid UTF-8");
        i_ += k;
        return c;
    }

    Expected<int> parse_literal() {
        ++i_;
        std::string bytes;
        while (i_ < t_.size() && t_[i_] != '"') {
            if (t_[i_] == '\n') return err("newline in a literal");
            EMBER_ASSIGN(uint32_t c, parse_char());
            utf8_append(bytes, c);
        }
        if (i_ >= t_.size()) return err("unterminated literal");
        ++i_;
        return g_.literal(bytes);
    }

    Expected<int> parse_class() {
        ++i_;
        bool neg = false;
        if (i_ < t_.size() && t_[i_] == '^') { neg = true; ++i_; }
        CpSet set;
        while (i_ < t_.size() && t_[i_] != ']') {
            EMBER_ASSIGN(uint32_t lo, parse_char());
            uint32_t hi = lo;
            if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
                ++i_;
                EMBER_ASSIGN(hi, parse_char());
                if (hi < lo) return err("class range out of order");
            }
            set.push_back({lo, hi});
        }
        if (i_ >= t_.size()) return err("unterminated character class");
        ++i_;
        set = cp_normalize(set);
        if (neg) set = cp_complement(set);
        return utf8_expr(g_, set);
    }

    std::string_view t_;
    size_t i_ = 0;
    int line_ = 1;
    GrammarIR g_;
    std::map<std::string, int> ids_;
    std::multimap<std::string, int> used_;
};

}  // namespace

Expected<GrammarIR> parse_gbnf(std::string_view text) {
    GbnfParser p(text);
    return p.parse();
}

Expected<GrammarIR> regex_grammar(std::string_view pattern) {
    GrammarIR g;
    const int root = g.add_rule("root");
    EMBER_ASSIGN(int e, regex_to_ir(g, pattern, RegexMatch::FULL));
    g.define(root, e);
    g.root = root;
    return g;
}

}  // namespace ember::grammar
