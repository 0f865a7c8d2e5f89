// grammar_constraint.cpp: the matcher as a TokenConstraint, with closing near the token limit (grammar_constraint.h).
#include "server/grammar_constraint.h"

namespace ember::server {

// The plan is fixed when closing starts; kMargin leaves room for a last free token that lengthens it.
void GrammarConstraint::fill_mask(uint32_t* words) {
    static constexpr int64_t kMargin = 8;
    if (!closing_ && remaining_ >= 0 && remaining_ <= m_.completion_tokens() + kMargin) {
        closing_ = true;
        cut_ = !m_.is_complete();
        plan_ = m_.completion_plan();
        next_ = 0;
    }
    failure_.clear();
    if (!closing_) {
        if (Status st = m_.fill_mask(words); !st) failure_ = st.message();
    } else if (next_ < plan_.size()) {
        for (int64_t i = 0; i < m_.mask_words(); ++i) words[i] = 0;
        words[size_t(plan_[next_]) >> 5] |= 1u << (plan_[next_] & 31);
    } else {
        m_.fill_closing_mask(words);  // complete: end of sequence
    }
}

Status GrammarConstraint::accept(int32_t token) {
    if (!failure_.empty()) return Status::error(failure_);  // a device row may select from an unmasked row
    if (closing_ && next_ < plan_.size()) ++next_;
    return m_.accept(token);
}

}  // namespace ember::server
