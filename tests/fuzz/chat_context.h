// A fixed chat-template context for the template fuzz targets: a conversation with a system prompt, tool
// calls, a tool result and reasoning, as transformers' apply_chat_template passes it.
#pragma once
#include <ctime>
#include <nlohmann/json.hpp>

#include "template/chat_template.h"

namespace ember::fuzz {

inline const nlohmann::ordered_json& default_messages() {
    static const nlohmann::ordered_json m = nlohmann::ordered_json::parse(R"([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2? <b>&</b>"},
        {"role": "assistant", "content": "", "reasoning_content": "Add them.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "assistant", "content": "It is 4. 日本語 🙂"},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ])");
    return m;
}

inline const nlohmann::ordered_json& default_extra() {
    static const nlohmann::ordered_json e = nlohmann::ordered_json::parse(R"({
        "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": true,
        "tools": [{"type": "function", "function": {"name": "add", "description": "Adds.",
                   "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
    })");
    return e;
}

// The engine's limits (ChatTemplateOptions defaults) with a fixed clock, so that runs repeat, except a hundredth
// of its step budget: under ASan + UBSan a step costs ~25× its native time, and a template that spends the whole
// default budget takes ~0.35 s natively (nested loops printing loop.index, 200k steps: each iteration builds its
// `loop` object) — ~9 s under ASan. At a tenth, three nested-loop templates of ~8k iterations took 1.7-2.6 s
// under ASan on a loaded machine (2026-12-03; 62-128 ms natively; corpus regress-timeout-*), 0.41-0.46 s at a
// fortieth (9 ms natively: ASan + UBSan + coverage cost ~45× here). The limits' code paths are the same; only
// where they stop differs (2,000 steps: real templates take ≤ 49, ~10 per message).
inline ChatTemplateOptions options() {
    ChatTemplateOptions o;
    o.max_steps = ChatTemplateOptions{}.max_steps / 100;
    std::tm t{};
    t.tm_year = 125, t.tm_mon = 2, t.tm_mday = 14, t.tm_hour = 15, t.tm_min = 9, t.tm_sec = 26;
    o.now = t;
    return o;
}

}  // namespace ember::fuzz
