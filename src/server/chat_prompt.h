// chat_prompt.h: a model's chat template, loaded once, rendering OpenAI messages into the prompt text the way
// transformers' apply_chat_template does (src/template), with the special tokens the model defines
// (GGUF vocabulary, or tokenizer_config.json / special_tokens_map.json); ChatML when the model has no template.
// Shared by `ember serve`, `ember chat` and `ember generate --chat`.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "server/openai_types.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

class ChatFormatter {
public:
    // model_path: a .gguf file or a model directory ("" → ChatML).
    static Expected<ChatFormatter> load(const std::string& model_path, const Tokenizer& tok);
    // messages: [{"role", "content", ...}]; kwargs: extra template variables (enable_thinking, ...). Template
    // errors (raise_exception, bad syntax at render) come back as a Status.
    // tools (an OpenAI tools array, or null): passed to the template as `tools`; a model directory's "tool_use"
    // template is used when it has one (transformers' get_chat_template).
    Expected<std::string> render(const ojson& messages, bool add_generation_prompt,
                                 const ojson& kwargs = ojson::object(), const ojson& tools = ojson()) const;
    // The source of the template used with tools ("" for ChatML).
    const std::string& tools_source() const;
    // The template writes "<think>" blocks (Qwen3 / Qwen3.5 / DeepSeek-R1 / QwQ style): replies are split into
    // reasoning and content.
    bool reasoning() const { return reasoning_; }
    bool is_chatml_fallback() const { return !tmpl_; }

private:
    std::shared_ptr<const ChatTemplate> tmpl_;  // null → ChatML
    std::shared_ptr<const ChatTemplate> tools_tmpl_;  // the "tool_use" template (null: tmpl_)
    ojson special_ = ojson::object();            // bos_token, eos_token, ...
    bool reasoning_ = false;
};

// The prompt's ids as `ember generate` makes them (llama.cpp semantics): special tokens parsed, BOS added when
// the tokenizer asks for it unless the text already starts with it.
std::vector<int32_t> encode_prompt(const Tokenizer& tok, const std::string& text);

}  // namespace ember::server
