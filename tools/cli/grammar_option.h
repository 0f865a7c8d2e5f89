// `generate --json-schema FILE | --grammar FILE | --regex RE`: the grammar matcher as the Session's token
// constraint (src/grammar).
#pragma once
#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

struct GrammarOption {
    std::string json_schema_file, gbnf_file, regex;
    bool given() const { return !json_schema_file.empty() || !gbnf_file.empty() || !regex.empty(); }
};

// The constraint for the option (exactly one of the three), over the tokenizer's vocabulary padded to n_vocab.
Expected<std::unique_ptr<TokenConstraint>> make_grammar_constraint(const GrammarOption& opt, const Tokenizer& tok,
                                                                   int64_t n_vocab);

}  // namespace ember::cli
