// Grammar constraint for `ember generate` (grammar_option.h).
#include "grammar_option.h"

#include <fstream>
#include <sstream>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "server/grammar_constraint.h"

namespace ember::cli {

namespace {

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
    return std::unique_ptr<TokenConstraint>(new server::GrammarConstraint(std::move(g)));
}

}  // namespace ember::cli
