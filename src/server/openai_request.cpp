// openai_request.cpp: JSON bodies → ChatRequest / CompletionRequest / TokenizeRequest / DetokenizeRequest.
// Field names, types and ranges follow the OpenAI API reference (chat/completions, completions); top_k, min_p,
// repetition_penalty and chat_template_kwargs are the vLLM / llama.cpp server extensions.
#include <limits>

#include "server/json_fields.h"
#include "server/openai_types.h"
#include "server/structured_request.h"

namespace ember::server {

ApiError bad_request(std::string message, std::string param, std::string code) {
    ApiError e;
    e.status = 400;
    e.message = std::move(message);
    e.param = std::move(param);
    e.code = std::move(code);
    return e;
}

namespace {
constexpr size_t kMaxStopStrings = 16, kMaxStopBytes = 1024, kMaxModelName = 256;
constexpr int kMaxTopLogprobs = 20;

template <class T>
Expected<T> failure(const ApiError& e, ApiError* out) {
    if (out) *out = e;
    return errorf("%s", e.message.c_str());
}

// The body as a JSON object, or an error (malformed JSON, not an object).
bool parse_body(std::string_view body, ojson& j, ApiError& err) {
    j = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        // nlohmann rejects ill-formed UTF-8 in strings as malformed JSON too.
        err = bad_request("the request body is not valid JSON (RFC 8259, UTF-8)", "", "invalid_json");
        return false;
    }
    if (!j.is_object()) {
        err = bad_request(strfmt("the request body must be a JSON object, not %s", json_type_name(j)), "",
                          "invalid_json");
        return false;
    }
    return true;
}

bool read_stop(Fields& f, std::vector<std::string>& stop) {
    const ojson* v = f.get("stop");
    if (!v) return true;
    if (v->is_string()) {
        if (v->get_ref<const std::string&>().size() > kMaxStopBytes)
            return f.fail(strfmt("'stop' is longer than %zu bytes", kMaxStopBytes), "stop");
        if (!v->get_ref<const std::string&>().empty()) stop.push_back(v->get<std::string>());
        return true;
    }
    if (!v->is_array()) return f.fail(strfmt("'stop' must be a string or an array of strings, not %s", json_type_name(*v)), "stop");
    if (v->size() > kMaxStopStrings) return f.fail(strfmt("'stop' has more than %zu strings", kMaxStopStrings), "stop");
    for (const auto& s : *v) {
        if (!s.is_string()) return f.fail(strfmt("'stop' entries must be strings, not %s", json_type_name(s)), "stop");
        if (s.get_ref<const std::string&>().size() > kMaxStopBytes)
            return f.fail(strfmt("a 'stop' string is longer than %zu bytes", kMaxStopBytes), "stop");
        if (!s.get_ref<const std::string&>().empty()) stop.push_back(s.get<std::string>());
    }
    return true;
}

// Fields common to both endpoints (sampling, stop, stream, refusals).
bool read_common(Fields& f, GenerationOptions& g) {
    SamplingParams& sp = g.sampling;
    sp.temperature = 1.f;  // OpenAI's default
    if (!f.string("model", kMaxModelName, g.model)) return false;
    std::optional<int64_t> top_k, seed;
    if (!f.number("temperature", 0, 2, sp.temperature) || !f.number("top_p", 0, 1, sp.top_p) ||
        !f.number("min_p", 0, 1, sp.min_p) || !f.number("presence_penalty", -2, 2, sp.presence_penalty) ||
        !f.number("frequency_penalty", -2, 2, sp.frequency_penalty) ||
        !f.number("repetition_penalty", 1e-3, 100, sp.repetition_penalty) ||
        !f.integer("top_k", -1, std::numeric_limits<int32_t>::max(), top_k) ||
        !f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), seed) ||
        !f.boolean("stream", g.stream) || !f.boolean("return_tokens_as_token_ids", g.tokens_as_ids) ||
        !f.boolean("ignore_eos", g.ignore_eos) ||
        !read_stop(f, g.stop) || !read_structured(f, g))
        return false;
    if (top_k) sp.top_k = *top_k < 0 ? 0 : static_cast<int>(*top_k);  // −1 (vLLM) and 0 (llama.cpp): off
    if (g.ignore_eos && !g.structured.empty())
        return f.fail("'ignore_eos' cannot be combined with structured output (the grammar decides the end)",
                      "ignore_eos", "unsupported_parameter");
    if (seed) g.seed_given = true, sp.seed = static_cast<uint64_t>(*seed);
    if (const ojson* so = f.get("stream_options")) {
        if (!so->is_object()) return f.fail("'stream_options' must be an object", "stream_options");
        Fields s(*so, "stream_options.");
        if (!s.boolean("include_usage", g.include_usage)) return f.fail(s.error().message, "stream_options");
        s.ignore("continuous_usage_stats");  // vLLM; only changes where usage is reported
        if (!s.no_unknown()) return f.fail(s.error().message, "stream_options");
        if (!g.stream) return f.fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
    }
    f.ignore("user");
    f.ignore("metadata");
    f.ignore("service_tier");
    return f.refuse("store", "responses are not stored", false) &&
           f.refuse("n", "only one choice per request (n = 1)", 1) &&
           f.refuse("best_of", "best_of > 1 is not implemented", 1) &&
           f.refuse("logit_bias", "logit_bias is not implemented", ojson::object()) &&
           f.refuse("guided_json", "vLLM's guided_* fields are not implemented (use response_format)") &&
           f.refuse("guided_regex", "vLLM's guided_* fields are not implemented (use response_format or grammar)") &&
           f.refuse("guided_choice", "vLLM's guided_* fields are not implemented (use response_format)") &&
           f.refuse("guided_grammar", "vLLM's guided_* fields are not implemented (use grammar)") &&
           f.refuse("min_tokens", "min_tokens is not implemented", 0);
}

// One message's content: a string, null, or an array of {"type": "text", "text": ...} parts (joined by "\n").
bool read_content(Fields& mf, const ojson& msg, ojson& out) {
    const ojson* c = mf.get("content");
    if (!c) return true;
    if (c->is_string()) {
        out["content"] = *c;
        return true;
    }
    if (!c->is_array()) return mf.fail(strfmt("'%s' must be a string or an array of content parts, not %s",
                                              mf.name("content").c_str(), json_type_name(*c)), "content");
    std::string text;
    for (size_t k = 0; k < c->size(); ++k) {
        const ojson& part = (*c)[k];
        const std::string where = strfmt("content[%zu]", k);
        if (!part.is_object()) return mf.fail(strfmt("'%s' must be an object", mf.name(where).c_str()), where);
        Fields pf(part, mf.name(where) + ".");
        std::string type, t;
        if (!pf.string("type", 64, type)) return mf.fail(pf.error().message, where);
        if (type != "text")
            return mf.fail(strfmt("content part type '%s' is not supported (only 'text')", type.c_str()), where + ".type",
                           "unsupported_parameter");
        const ojson* tv = pf.get("text");
        if (!tv || !tv->is_string()) return mf.fail(strfmt("'%s.text' must be a string", mf.name(where).c_str()), where);
        if (!pf.no_unknown("field")) return mf.fail(pf.error().message, where);
        if (k) text += "\n";
        text += tv->get_ref<const std::string&>();
    }
    out["content"] = text;
    return true;
}

// Tool calls of an assistant message, passed to the template with their arguments parsed (as vLLM does, since
// templates iterate over arguments|items).
bool read_tool_calls(Fields& mf, ojson& out) {
    const ojson* tc = mf.get("tool_calls");
    if (!tc) return true;
    if (!tc->is_array()) return mf.fail(strfmt("'%s' must be an array", mf.name("tool_calls").c_str()), "tool_calls");
    ojson calls = *tc;
    for (auto& call : calls) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
            return mf.fail(strfmt("'%s' entries must be objects with a 'function' object", mf.name("tool_calls").c_str()),
                           "tool_calls");
        ojson& fn = call["function"];
        if (fn.contains("arguments") && fn["arguments"].is_string()) {
            ojson args = ojson::parse(fn["arguments"].get<std::string>(), nullptr, false);
            if (!args.is_discarded() && args.is_object()) fn["arguments"] = args;
        }
    }
    out["tool_calls"] = calls;
    return true;
}

bool read_messages(Fields& f, ojson& messages) {
    const ojson* v = f.get("messages");
    if (!v) return f.fail("'messages' is required", "messages");
    if (!v->is_array()) return f.fail(strfmt("'messages' must be an array, not %s", json_type_name(*v)), "messages");
    if (v->empty()) return f.fail("'messages' must not be empty", "messages");
    for (size_t i = 0; i < v->size(); ++i) {
        const ojson& m = (*v)[i];
        const std::string where = strfmt("messages[%zu]", i);
        if (!m.is_object()) return f.fail(strfmt("'%s' must be an object, not %s", where.c_str(), json_type_name(m)), where);
        Fields mf(m, where + ".");
        std::string role, name, tool_call_id, reasoning;
        if (!mf.string("role", 64, role)) return f.fail(mf.error().message, mf.error().param);
        if (role == "developer") role = "system";  // OpenAI's newer name for the system role
        if (role != "system" && role != "user" && role != "assistant" && role != "tool")
            return f.fail(strfmt("'%s.role' must be system, developer, user, assistant or tool (got '%s')",
                                 where.c_str(), role.c_str()), where + ".role");
        ojson out = ojson::object();
        out["role"] = role;
        if (!read_content(mf, m, out) || !mf.string("name", 256, name) ||
            !mf.string("tool_call_id", 256, tool_call_id) || !mf.string("reasoning_content", SIZE_MAX, reasoning) ||
            (role == "assistant" && !read_tool_calls(mf, out)) || !mf.no_unknown("field"))
            return f.fail(mf.error().message, mf.error().param);
        if (!out.contains("content") && !(role == "assistant" && out.contains("tool_calls")))
            return f.fail(strfmt("'%s.content' is required", where.c_str()), where + ".content");
        // An assistant message of tool calls only (content null, as OpenAI clients send it): "" for the templates,
        // which read message.content (llama-server does the same).
        if (!out.contains("content")) out["content"] = "";
        if (!name.empty()) out["name"] = name;
        if (!tool_call_id.empty()) out["tool_call_id"] = tool_call_id;
        if (!reasoning.empty()) out["reasoning_content"] = reasoning;
        messages.push_back(std::move(out));
    }
    return true;
}

bool read_template_kwargs(Fields& f, ojson& kwargs) {
    const ojson* v = f.get("chat_template_kwargs");
    if (!v) return true;
    if (!v->is_object()) return f.fail("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (auto it = v->begin(); it != v->end(); ++it) {
        const std::string& k = it.key();
        if (k == "messages" || k == "add_generation_prompt" || k == "tools" || k == "documents")
            return f.fail(strfmt("'chat_template_kwargs.%s' cannot be set here", k.c_str()), "chat_template_kwargs");
        if (k == "enable_thinking" && !it->is_boolean())
            return f.fail("'chat_template_kwargs.enable_thinking' must be a boolean", "chat_template_kwargs");
    }
    kwargs = *v;
    return true;
}

bool read_chat_body(Fields& f, ChatRequest& r) {
    GenerationOptions& g = r.gen;
    std::optional<int64_t> max_tokens, max_completion_tokens;
    bool logprobs = false;
    std::optional<int64_t> top_logprobs;
    if (!read_common(f, g) || !read_messages(f, r.messages) ||
        !f.integer("max_tokens", 1, std::numeric_limits<int32_t>::max(), max_tokens) ||
        !f.integer("max_completion_tokens", 1, std::numeric_limits<int32_t>::max(), max_completion_tokens) ||
        !f.boolean("logprobs", logprobs) || !f.integer("top_logprobs", 0, kMaxTopLogprobs, top_logprobs) ||
        !f.boolean("add_generation_prompt", r.add_generation_prompt) || !read_template_kwargs(f, r.template_kwargs))
        return false;
    g.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
    if (top_logprobs && !logprobs) return f.fail("'top_logprobs' requires 'logprobs': true", "top_logprobs");
    if (logprobs) g.top_logprobs = static_cast<int>(top_logprobs.value_or(0));
    if (!read_tools(f, r)) return false;
    if (!r.tools.is_null() && r.tool_choice.kind != grammar::ToolChoice::NONE && !g.structured.empty())
        return f.fail("'response_format' / 'grammar' cannot be combined with tool calling", "response_format",
                      "unsupported_parameter");
    return f.refuse("functions", "function calling is not implemented") &&
           f.refuse("function_call", "function calling is not implemented", "none") &&
           f.refuse("audio", "audio output is not supported") &&
           f.refuse("modalities", "only text output", ojson::array({"text"})) &&
           f.refuse("prediction", "predicted outputs are not implemented") &&
           f.refuse("reasoning_effort", "reasoning effort is not implemented") &&
           f.refuse("web_search_options", "web search is not supported") &&
           f.no_unknown();
}

bool read_completion_prompt(Fields& f, CompletionRequest& r) {
    const ojson* v = f.get("prompt");
    if (!v) return f.fail("'prompt' is required", "prompt");
    const ojson* p = v;
    if (v->is_array() && !v->empty() && (v->front().is_array() || v->front().is_string())) {
        if (v->size() != 1) return f.fail("several prompts in one request are not supported (send one per request)",
                                          "prompt", "unsupported_parameter");
        p = &v->front();
    }
    if (p->is_string()) {
        r.prompt = p->get<std::string>();
        return true;
    }
    if (!p->is_array()) return f.fail(strfmt("'prompt' must be a string or an array of token ids, not %s",
                                             json_type_name(*p)), "prompt");
    if (p->empty()) return f.fail("'prompt' must not be empty", "prompt");
    r.prompt_is_ids = true;
    for (const auto& t : *p) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
            return f.fail("'prompt' token ids must be non-negative integers", "prompt");
        r.prompt_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return true;
}

bool read_completion_body(Fields& f, CompletionRequest& r) {
    GenerationOptions& g = r.gen;
    std::optional<int64_t> max_tokens, logprobs;
    if (!read_common(f, g) || !read_completion_prompt(f, r) ||
        !f.integer("max_tokens", 1, std::numeric_limits<int32_t>::max(), max_tokens) ||
        !f.integer("logprobs", 0, kMaxTopLogprobs, logprobs))
        return false;
    g.max_tokens = max_tokens ? *max_tokens : 16;  // OpenAI's default for completions
    if (logprobs) g.top_logprobs = static_cast<int>(*logprobs);
    return f.refuse("echo", "echo is not implemented", false) &&
           f.refuse("suffix", "suffix (insertion) is not implemented", "") && f.no_unknown();
}

template <class R, class Read>
Expected<R> parse_with(std::string_view body, ApiError* error, Read read) {
    ApiError e;
    ojson j;
    if (!parse_body(body, j, e)) return failure<R>(e, error);
    R r;
    Fields f(j);
    if (!read(f, r)) return failure<R>(f.failed() ? f.error() : bad_request("invalid request"), error);
    return r;
}
}  // namespace

Expected<ChatRequest> parse_chat_request(std::string_view body, ApiError* error) {
    return parse_with<ChatRequest>(body, error, read_chat_body);
}

Expected<CompletionRequest> parse_completion_request(std::string_view body, ApiError* error) {
    return parse_with<CompletionRequest>(body, error, read_completion_body);
}

Expected<TokenizeRequest> parse_tokenize_request(std::string_view body, ApiError* error) {
    return parse_with<TokenizeRequest>(body, error, [](Fields& f, TokenizeRequest& r) {
        if (!f.string("model", kMaxModelName, r.model) || !f.boolean("add_special_tokens", r.add_special)) return false;
        const bool has_prompt = f.get("prompt") != nullptr, has_messages = f.get("messages") != nullptr;
        if (has_prompt == has_messages) return f.fail("give exactly one of 'prompt' (a string) and 'messages'", "prompt");
        r.chat = has_messages;
        if (r.chat)
            return read_messages(f, r.messages.messages) &&
                   f.boolean("add_generation_prompt", r.messages.add_generation_prompt) &&
                   read_template_kwargs(f, r.messages.template_kwargs) && f.no_unknown();
        return f.string("prompt", SIZE_MAX, r.prompt) && f.no_unknown();
    });
}

Expected<DetokenizeRequest> parse_detokenize_request(std::string_view body, ApiError* error) {
    return parse_with<DetokenizeRequest>(body, error, [](Fields& f, DetokenizeRequest& r) {
        if (!f.string("model", kMaxModelName, r.model)) return false;
        const ojson* t = f.get("tokens");
        if (!t || !t->is_array()) return f.fail("'tokens' must be an array of token ids", "tokens");
        for (const auto& v : *t) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max())
                return f.fail("'tokens' must hold non-negative integers", "tokens");
            r.tokens.push_back(static_cast<int32_t>(v.get<int64_t>()));
        }
        return f.no_unknown();
    });
}

}  // namespace ember::server
