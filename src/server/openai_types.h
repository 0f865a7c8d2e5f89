// openai_types.h: the OpenAI-compatible requests and responses as structs, and their JSON forms
// (parsing: openai_request.cpp; serialization: openai_response.cpp).
//
// Parsing is strict, because a parameter that is silently ignored gives a client a different result from the
// one it asked for: every field is type-checked and range-checked, and any field that would change the result
// and is not implemented (n > 1, logit_bias, best_of, echo, vLLM's guided_*, ...) or is unknown is
// refused with an error naming it. Harmless metadata (user, metadata, store: false, service_tier) is accepted.
// A JSON null counts as the field being absent (some clients send nulls for defaults).
// The parsers never throw and never abort: any byte string gives a request or an ApiError.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/tool_calls.h"
#include "ops/sampling/sampling.h"

namespace ember::server {

using ojson = nlohmann::ordered_json;

// An OpenAI-style error: HTTP status and the body {"error": {"message", "type", "param", "code"}}.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // the offending field ("" → null)
    std::string code;   // machine-readable ("" → null)
};
std::string error_body(const ApiError& e);
ApiError bad_request(std::string message, std::string param = "", std::string code = "");

// How a chat template writes tool calls: <tool_call> JSON (Qwen2.5 / Qwen3 / Hermes), Llama 3.x JSON, or the
// <tool_call><function=...> XML of Qwen3-Coder / Qwen3.5.
enum class ToolSyntax { QWEN_JSON, LLAMA3_JSON, QWEN_XML };

// Parameters shared by chat and text completions.
struct GenerationOptions {
    std::string model;                    // "" when the client gave none (the server's one model is used)
    std::optional<int64_t> max_tokens;    // absent: chat → up to the context; completions → 16 (OpenAI)
    SamplingParams sampling;              // temperature defaults to 1 (OpenAI), penalties window 64 tokens
    bool seed_given = false;              // else the server draws a seed
    std::vector<std::string> stop;        // stop strings (matched across token boundaries)
    bool stream = false;
    bool include_usage = false;           // stream_options.include_usage
    int top_logprobs = -1;                // −1: no logprobs; 0..20: the sampled token's logprob + that many
    bool tokens_as_ids = false;           // return_tokens_as_token_ids (vLLM): logprob tokens as "token_id:N"
    bool ignore_eos = false;              // ignore_eos (vLLM): generate max_tokens tokens (benchmarks)
    // Structured output: the request's response_format / grammar / json_schema fields as given (shape-checked;
    // compiled by server/structured.h), {} when none.
    ojson structured = ojson::object();
    // Set by the chat route when the reply may hold tool calls: their syntax, and the request's tools.
    std::optional<ToolSyntax> tool_syntax;
    ojson tools;
};

struct ChatRequest {
    GenerationOptions gen;
    ojson messages = ojson::array();  // normalised for the template: text parts joined, tool-call arguments parsed
    bool add_generation_prompt = true;
    ojson template_kwargs = ojson::object();  // chat_template_kwargs (enable_thinking, ...): template variables
    ojson tools;                                // the OpenAI `tools` array (shape-checked), null when absent
    grammar::ToolChoice tool_choice;            // auto unless given (none when there are no tools)
    bool parallel_tool_calls = true;
};

struct CompletionRequest {
    GenerationOptions gen;
    bool prompt_is_ids = false;
    std::string prompt;             // when !prompt_is_ids
    std::vector<int32_t> prompt_ids;  // when prompt_is_ids (checked against the vocabulary later)
};

// POST /tokenize: {"prompt": "..."} or {"messages": [...], "add_generation_prompt", "chat_template_kwargs"};
// "add_special_tokens" (default true) as vLLM. POST /detokenize: {"tokens": [ids]}.
struct TokenizeRequest {
    std::string model;
    bool chat = false;
    std::string prompt;
    ChatRequest messages;  // when chat (only messages / add_generation_prompt / template_kwargs are used)
    bool add_special = true;
};
struct DetokenizeRequest {
    std::string model;
    std::vector<int32_t> tokens;
};

// Body → request. On failure the Status message is the client-facing message and *error (when given) holds the
// full ApiError (status, param, code).
Expected<ChatRequest> parse_chat_request(std::string_view body, ApiError* error = nullptr);
Expected<CompletionRequest> parse_completion_request(std::string_view body, ApiError* error = nullptr);
Expected<TokenizeRequest> parse_tokenize_request(std::string_view body, ApiError* error = nullptr);
Expected<DetokenizeRequest> parse_detokenize_request(std::string_view body, ApiError* error = nullptr);

// ---- responses ----

enum class FinishReason { STOP, LENGTH, TOOL_CALLS };
const char* finish_reason_name(FinishReason r);

struct Usage {
    int64_t prompt_tokens = 0, completion_tokens = 0;
    int64_t cached_tokens = 0;  // of prompt_tokens, restored from the prefix cache (prompt_tokens_details)
};

// One generated token's log-probabilities (log-softmax of the model's logits before penalties and temperature).
struct TokenLogprob {
    std::string token;           // its text (lossy UTF-8)
    std::string bytes;           // its raw bytes
    float logprob = 0;
    struct Alt {
        std::string token, bytes;
        float logprob;
    };
    std::vector<Alt> top;        // the top_logprobs most likely tokens, most likely first
};

// The pieces of one reply (or of one streamed chunk's delta).
struct ReplyDelta {
    std::string content, reasoning;
    std::vector<TokenLogprob> logprobs;
    // Tool calls: streamed, delta.tool_calls entries ({index, id, type, function: {name, arguments: ""}}, then
    // {index, function: {arguments: piece}}); whole, message.tool_calls entries. Empty array: none.
    ojson tool_calls = ojson::array();
};

struct ResponseMeta {
    std::string id, model;
    int64_t created = 0;  // unix seconds
};

// chat.completion (non-streamed). reasoning "" → no reasoning_content field; logprobs present iff `with_logprobs`.
ojson chat_completion_json(const ResponseMeta& m, const ReplyDelta& reply, FinishReason fr, const Usage& u,
                           bool with_logprobs);
// chat.completion.chunk: role (first chunk only), delta, finish_reason (last chunk), usage (the usage chunk).
ojson chat_chunk_json(const ResponseMeta& m, const ReplyDelta* delta, bool with_role, const FinishReason* fr,
                      bool with_logprobs);
ojson chat_usage_chunk_json(const ResponseMeta& m, const Usage& u);
// text_completion (non-streamed and chunks): completions-style logprobs (tokens / token_logprobs / top_logprobs /
// text_offset; text_offset counts bytes from the start of the generated text, `offset` = bytes before `delta`).
ojson completion_json(const ResponseMeta& m, const ReplyDelta& text, const FinishReason* fr, const Usage* u,
                      bool with_logprobs, int64_t offset);
ojson usage_json(const Usage& u);

// Serializes without throwing (invalid UTF-8 in strings is replaced by U+FFFD).
std::string dump_json(const ojson& j);

}  // namespace ember::server
