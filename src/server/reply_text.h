// reply_text.h: generated tokens → the reply's text deltas. Detokenizes incrementally (complete UTF-8 only), cuts
// the reply at the first stop string — matched across token boundaries, by holding back any tail that could be
// the start of one — and splits "<think>…</think>" reasoning from the content.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_types.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

// Emits text except a held-back tail that may begin a stop string. The reply ends before the stop string that
// completes first (the earliest-ending match; ties: the longer one), whatever the pieces; after it, nothing more.
class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
    std::string push(std::string_view text);  // what can be emitted now (before the stop string if one matched)
    std::string flush();                      // end of the reply: the held-back tail ("" after a match)
    bool stopped() const { return stopped_; }

private:
    std::vector<std::string> stops_;
    std::string pending_;
    bool stopped_ = false;
};

// Splits a reply into reasoning and content at "<think>" / "</think>". The reply is reasoning from the start when
// the prompt ends with an open "<think>" (Qwen3.5, DeepSeek-R1 templates), or when the reply itself begins with
// "<think>" (Qwen3); content after "</think>" has its leading whitespace dropped. Disabled: everything is content.
class ReasoningSplitter {
public:
    ReasoningSplitter(bool enabled, bool start_in_reasoning)
        : state_(!enabled ? CONTENT : start_in_reasoning ? REASONING : START) {}
    void push(std::string_view text, ReplyDelta& out);
    void flush(ReplyDelta& out);

private:
    enum State { START, REASONING, AFTER_THINK, CONTENT } state_;
    std::string pending_;
};

// True when `prompt` ends with "<think>" (and whitespace): the template opened the reasoning block.
bool prompt_opens_reasoning(std::string_view prompt);

// The whole pipeline for one reply.
class ReplyText {
public:
    ReplyText(const Tokenizer& tok, std::vector<std::string> stop, bool reasoning, bool start_in_reasoning)
        : dec_(tok), stop_(std::move(stop)), split_(reasoning, start_in_reasoning) {}
    void push(int32_t id, ReplyDelta& out);  // appends this token's text to out.content / out.reasoning
    void finish(ReplyDelta& out);            // end of the reply (not needed after stopped())
    bool stopped() const { return stop_.stopped(); }

private:
    StreamDecoder dec_;
    StopMatcher stop_;
    ReasoningSplitter split_;
};

}  // namespace ember::server
