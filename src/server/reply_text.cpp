// reply_text.cpp: stop strings across token boundaries and the reasoning split.
#include "server/reply_text.h"

#include <algorithm>

namespace ember::server {

namespace {
constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

// Length of the longest suffix of `s` that is a proper prefix of `pat`.
size_t partial_suffix(std::string_view s, std::string_view pat) {
    for (size_t k = std::min(s.size(), pat.size() - 1); k > 0; --k)
        if (s.substr(s.size() - k) == pat.substr(0, k)) return k;
    return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

std::string StopMatcher::push(std::string_view text) {
    if (stopped_) return "";
    pending_ += text;
    // The match that ends first wins (ties: the one that starts first): that is where a stream that grows
    // piece by piece first contains a stop string, whatever the pieces.
    size_t best = std::string::npos, best_end = std::string::npos;
    for (const auto& s : stops_) {
        const size_t at = pending_.find(s);
        if (at == std::string::npos) continue;
        if (at + s.size() < best_end || (at + s.size() == best_end && at < best)) best = at, best_end = at + s.size();
    }
    if (best != std::string::npos) {
        stopped_ = true;
        std::string out = pending_.substr(0, best);
        pending_.clear();
        return out;
    }
    size_t hold = 0;
    for (const auto& s : stops_) hold = std::max(hold, partial_suffix(pending_, s));
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopMatcher::flush() {
    std::string out = stopped_ ? "" : pending_;
    pending_.clear();
    return out;
}

bool prompt_opens_reasoning(std::string_view prompt) {
    size_t e = prompt.size();
    while (e > 0 && is_space(prompt[e - 1])) --e;
    return e >= kThinkOpen.size() && prompt.substr(e - kThinkOpen.size(), kThinkOpen.size()) == kThinkOpen;
}

void ReasoningSplitter::push(std::string_view text, ReplyDelta& out) {
    pending_ += text;
    for (;;) {
        switch (state_) {
            case CONTENT:
                out.content += pending_;
                pending_.clear();
                return;
            case START: {
                size_t i = 0;
                while (i < pending_.size() && is_space(pending_[i])) ++i;
                std::string_view rest = std::string_view(pending_).substr(i);
                if (rest.size() >= kThinkOpen.size() && rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
                    pending_.erase(0, i + kThinkOpen.size());
                    state_ = REASONING;
                    continue;
                }
                if (rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest) return;  // undecided
                state_ = CONTENT;
                continue;
            }
            case REASONING: {
                const size_t at = pending_.find(kThinkClose);
                if (at != std::string::npos) {
                    out.reasoning += pending_.substr(0, at);
                    pending_.erase(0, at + kThinkClose.size());
                    state_ = AFTER_THINK;
                    continue;
                }
                const size_t hold = partial_suffix(pending_, kThinkClose);
                out.reasoning += pending_.substr(0, pending_.size() - hold);
                pending_.erase(0, pending_.size() - hold);
                return;
            }
            case AFTER_THINK: {
                size_t i = 0;
                while (i < pending_.size() && is_space(pending_[i])) ++i;
                pending_.erase(0, i);
                if (pending_.empty()) return;
                state_ = CONTENT;
                continue;
            }
        }
    }
}

void ReasoningSplitter::flush(ReplyDelta& out) {
    if (state_ == REASONING) out.reasoning += pending_;
    else if (state_ != AFTER_THINK) out.content += pending_;
    pending_.clear();
}

void ReplyText::push(int32_t id, ReplyDelta& out) {
    if (stop_.stopped()) return;
    const std::string text = stop_.push(dec_.push(id));
    split_.push(text, out);
    if (stop_.stopped()) split_.flush(out);
}

void ReplyText::finish(ReplyDelta& out) {
    if (stop_.stopped()) return;
    split_.push(stop_.push(dec_.flush()), out);
    if (!stop_.stopped()) split_.push(stop_.flush(), out);
    split_.flush(out);
}

}  // namespace ember::server
