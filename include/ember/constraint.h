// ember/constraint.h: a constraint on the tokens a sequence may generate (structured output: the grammar matchers
// of src/grammar implement it; programs may write their own). Before each selection the engine asks for the mask
// of allowed tokens, reports the chosen token, and ends the sequence (COMPLETE) once the constraint is done.
#pragma once
#include <cstdint>
#include <string>

#include "ember/status.h"

namespace ember {

class TokenConstraint {
public:
    virtual ~TokenConstraint() = default;
    // Bit v % 32 of words[v / 32] set ⇔ token v is allowed; ceil(vocab / 32) words.
    virtual void fill_mask(uint32_t* words) = 0;
    virtual Status accept(int32_t token) = 0;  // an error ends generation with that error
    virtual bool done() const = 0;             // nothing more may follow (e.g. end of sequence accepted)
    // Why the last fill_mask allowed nothing when the constraint itself failed (a grammar too ambiguous for the
    // matcher's work bound, say); empty when the text simply cannot continue. The sequence ends with this error.
    virtual std::string failure() const { return {}; }
    // Tokens that may still be selected, this selection included (called before each fill_mask), so that a
    // constraint can steer towards an end in time.
    virtual void set_remaining(int64_t tokens) {}
};

}  // namespace ember
