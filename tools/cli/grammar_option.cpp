// Grammar constraint for `ember generate` (grammar_option.h).
#include "grammar_option.h"

#include <fstream>
#include <sstream>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"

namespace ember::cli {

namespace {

class MatcherConstraint : public TokenConstraint {
public:
    explicit MatcherConstraint(std::shared_ptr<grammar::Grammar> g) : m_(std::move(g)) {}
    // Out of tokens soon: write the shortest completion (its tokens, longest first, then EOS), so the text still
    // ends. The plan is fixed when closing starts; kMargin leaves room for a last free token that lengthens it.
    void fill_mask(uint32_t* words) override {
        static constexpr int64_t kMargin = 8;
        if (!closing_ && remaining_ >= 0 && remaining_ <= m_.completion_tokens() + kMargin) {
            closing_ = true;
            plan_ = m_.completion_plan();
            next_ = 0;
        }
        if (!closing_) {
            m_.fill_mask(words);
        } else if (next_ < plan_.size()) {
            for (int64_t i = 0; i < m_.mask_words(); ++i) words[i] = 0;
            words[size_t(plan_[next_]) >> 5] |= 1u << (plan_[next_] & 31);
        } else {
            m_.fill_closing_mask(words);  // complete: end of sequence
        }
    }
    Status accept(int32_t token) override {
        if (closing_ && next_ < plan_.size()) ++next_;
        return m_.accept(token);
    }
    void set_remaining(int64_t tokens) override { remaining_ = tokens; }
    bool done() const override { return m_.is_terminated(); }

private:
    grammar::Matcher m_;
    int64_t remaining_ = -1;
    bool closing_ = false;
    std::vector<int32_t> plan_;
    size_t next_ = 0;
};

Expected<std::string> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    EMBER_REQUIRE(f.good(), "cannot read %s", path.c_str());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

}  // namespace

Expected<std::unique_ptr<TokenConstraint>> make_grammar_constraint(const GrammarOption& opt, const Tokenizer& tok,
                                                                   int64_t n_vocab) {
    const int given = !opt.json_schema_file.empty() + !opt.gbnf_file.empty() + !opt.regex.empty();
    EMBER_REQUIRE(given == 1, "give one of --json-schema, --grammar, --regex");
    Expected<grammar::GrammarIR> ir = errorf("no grammar");
    if (!opt.json_schema_file.empty()) {
        EMBER_ASSIGN(std::string text, read_file(opt.json_schema_file));
        ir = grammar::json_schema_grammar(text);
        if (!ir) return ir.status().with_context(opt.json_schema_file);
    } else if (!opt.gbnf_file.empty()) {
        EMBER_ASSIGN(std::string text, read_file(opt.gbnf_file));
        ir = grammar::parse_gbnf(text);
        if (!ir) return ir.status().with_context(opt.gbnf_file);
    } else {
        ir = grammar::regex_grammar(opt.regex);
        if (!ir) return ir.status();
    }
    EMBER_REQUIRE(!tok.eos_ids().empty(), "the tokenizer has no end-of-sequence token to end a grammar with");
    auto vocab = grammar::token_index_from_tokenizer(tok, n_vocab);
    EMBER_ASSIGN(auto g, grammar::Grammar::create(ir.value(), vocab));
    return std::unique_ptr<TokenConstraint>(new MatcherConstraint(std::move(g)));
}

}  // namespace ember::cli
