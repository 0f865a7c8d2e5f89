// grammar_constraint.h: a grammar matcher (src/grammar) as the Session's / the engine queue's TokenConstraint —
// the structured output of `ember serve` (response_format, grammar, tool calls) and `ember generate --json-schema`.
//
// Running out of tokens: when the tokens left (set_remaining) are within a small margin of the tokens the shortest
// completion needs, the constraint switches to closing — it forces the shortest completion (its tokens, longest
// first, then end of sequence) so that the text still parses. cut() says it did so before the text was complete:
// the text parses but was cut short (the server reports finish_reason "length").
#pragma once
#include <memory>

#include "grammar/matcher.h"
#include "runtime/session.h"

namespace ember::server {

class GrammarConstraint : public TokenConstraint {
public:
    explicit GrammarConstraint(std::shared_ptr<grammar::Grammar> g) : m_(std::move(g)) {}
    void fill_mask(uint32_t* words) override;
    Status accept(int32_t token) override;
    void set_remaining(int64_t tokens) override { remaining_ = tokens; }
    bool done() const override { return m_.is_terminated(); }
    std::string failure() const override { return failure_; }
    bool complete() const { return m_.is_complete(); }
    bool cut() const { return cut_; }

private:
    grammar::Matcher m_;
    int64_t remaining_ = -1;
    bool closing_ = false, cut_ = false;
    std::vector<int32_t> plan_;
    size_t next_ = 0;
    std::string failure_;  // the matcher's error from the last fill_mask
};

}  // namespace ember::server
