// openai_response.cpp: response structs → the JSON objects of the OpenAI API (chat.completion,
// chat.completion.chunk, text_completion, error).
#include "server/openai_types.h"

namespace ember::server {

namespace {
ojson null_or(const std::string& s) { return s.empty() ? ojson() : ojson(s); }

ojson byte_list(const std::string& b) {
    ojson a = ojson::array();
    for (unsigned char c : b) a.push_back(int(c));
    return a;
}

// chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
ojson chat_logprobs(const std::vector<TokenLogprob>& lps) {
    ojson content = ojson::array();
    for (const auto& t : lps) {
        ojson top = ojson::array();
        for (const auto& a : t.top) top.push_back({{"token", a.token}, {"logprob", a.logprob}, {"bytes", byte_list(a.bytes)}});
        content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", byte_list(t.bytes)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
}

ojson header(const ResponseMeta& m, const char* object) {
    return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}
}  // namespace

std::string error_body(const ApiError& e) {
    ojson j = {{"error",
                {{"message", e.message}, {"type", e.type}, {"param", null_or(e.param)}, {"code", null_or(e.code)}}}};
    return dump_json(j);
}

const char* finish_reason_name(FinishReason r) {
    return r == FinishReason::STOP ? "stop" : r == FinishReason::LENGTH ? "length" : "tool_calls";
}

std::string dump_json(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

ojson usage_json(const Usage& u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

ojson chat_completion_json(const ResponseMeta& m, const ReplyDelta& reply, FinishReason fr, const Usage& u,
                           bool with_logprobs) {
    ojson msg = {{"role", "assistant"}, {"content", reply.content}};
    if (!reply.tool_calls.empty()) {  // OpenAI: content null when the message is only tool calls
        if (reply.content.find_first_not_of(" \t\r\n") == std::string::npos) msg["content"] = nullptr;
        msg["tool_calls"] = reply.tool_calls;
    }
    if (!reply.reasoning.empty()) msg["reasoning_content"] = reply.reasoning;
    ojson choice = {{"index", 0},
                    {"message", msg},
                    {"logprobs", with_logprobs ? chat_logprobs(reply.logprobs) : ojson()},
                    {"finish_reason", finish_reason_name(fr)}};
    ojson j = header(m, "chat.completion");
    j["choices"] = ojson::array({choice});
    j["usage"] = usage_json(u);
    return j;
}

ojson chat_chunk_json(const ResponseMeta& m, const ReplyDelta* d, bool with_role, const FinishReason* fr,
                      bool with_logprobs) {
    ojson delta = ojson::object();
    if (with_role) delta["role"] = "assistant";
    if (d && !d->reasoning.empty()) delta["reasoning_content"] = d->reasoning;
    if (d && (!d->content.empty() || with_role)) delta["content"] = d->content;
    if (d && !d->tool_calls.empty()) delta["tool_calls"] = d->tool_calls;
    ojson choice = {{"index", 0},
                    {"delta", delta},
                    {"logprobs", with_logprobs && d && !d->logprobs.empty() ? chat_logprobs(d->logprobs) : ojson()},
                    {"finish_reason", fr ? ojson(finish_reason_name(*fr)) : ojson()}};
    ojson j = header(m, "chat.completion.chunk");
    j["choices"] = ojson::array({choice});
    return j;
}

ojson chat_usage_chunk_json(const ResponseMeta& m, const Usage& u) {
    ojson j = header(m, "chat.completion.chunk");
    j["choices"] = ojson::array();
    j["usage"] = usage_json(u);
    return j;
}

ojson completion_json(const ResponseMeta& m, const ReplyDelta& text, const FinishReason* fr, const Usage* u,
                      bool with_logprobs, int64_t offset) {
    ojson lp;
    if (with_logprobs) {
        ojson tokens = ojson::array(), token_lps = ojson::array(), tops = ojson::array(), offsets = ojson::array();
        for (const auto& t : text.logprobs) {
            tokens.push_back(t.token);
            token_lps.push_back(t.logprob);
            ojson top = ojson::object();
            for (const auto& a : t.top) top[a.token] = a.logprob;
            tops.push_back(top);
            offsets.push_back(offset);
            offset += static_cast<int64_t>(t.bytes.size());
        }
        lp = {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
    }
    ojson choice = {{"text", text.content},
                    {"index", 0},
                    {"logprobs", lp},
                    {"finish_reason", fr ? ojson(finish_reason_name(*fr)) : ojson()}};
    ojson j = header(m, "text_completion");
    j["choices"] = ojson::array({choice});
    if (u) j["usage"] = usage_json(*u);
    return j;
}

}  // namespace ember::server
