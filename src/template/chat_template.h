// chat_template.h: renders Hugging Face chat templates (Jinja2) the way transformers does.
//
// transformers renders `tokenizer.chat_template` with jinja2's ImmutableSandboxedEnvironment
// (trim_blocks=True, lstrip_blocks=True, loopcontrols), a `tojson` filter that is
// json.dumps(ensure_ascii=False), and the globals raise_exception, strftime_now, namespace and dict.
// ChatTemplate reproduces that environment for the subset of Jinja real chat templates use (see
// src/template/README.md); its output is byte-identical to transformers' on the fixtures in
// tests/fixtures/templates/ (made by scripts/make_template_fixtures.py).
//
//   EMBER_ASSIGN(ChatTemplate t, ChatTemplate::parse(source));          // syntax errors: line:column
//   EMBER_ASSIGN(std::string prompt, t.render(context));                 // runtime errors: Status
//
// `context` is a JSON object of template variables: messages, add_generation_prompt, bos_token,
// eos_token, tools, enable_thinking, ... Pass an nlohmann::ordered_json to keep the key order of
// objects (it shows in `tojson` and `items()` output, e.g. tool-call arguments); nlohmann::json
// sorts keys.
// apply_chat_template() also does what tokenizer.apply_chat_template(..., tokenize=False) does to
// the inputs first: drops null-valued message keys, copies a message's reasoning_content /
// thinking / reasoning to both `thinking` and `reasoning_content`, and passes tools and documents
// (None when absent).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ember {

struct ChatTemplateOptions {
    std::optional<std::tm> now;                   // the clock strftime_now() reads; default: local time
    // Real chat templates need ~10 steps per message (the 27 fixture templates: at most 49 steps) and a few KiB
    // of output; these bounds allow 20k-message conversations and bound a hostile template's work (README).
    size_t max_output_bytes = size_t{16} << 20;  // output (and any string built) larger than this fails
    int64_t max_steps = 200'000;                 // loop iterations + macro calls + KiB / 8 items read or built
    int max_call_depth = 100;                    // nested macro calls (recursion)
};

class ChatTemplate {
public:
    static Expected<ChatTemplate> parse(std::string_view source);

    Expected<std::string> render(const nlohmann::ordered_json& context, const ChatTemplateOptions& opt = {}) const;
    Expected<std::string> render(const nlohmann::json& context, const ChatTemplateOptions& opt = {}) const;

    const std::string& source() const;

    struct Impl;

private:
    explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

// Builds the context transformers' apply_chat_template builds (see above) and renders. `extra`
// holds the other keyword arguments (bos_token, eos_token, tools, enable_thinking, ...); null or an
// object.
Expected<std::string> apply_chat_template(std::string_view tmpl, const nlohmann::ordered_json& messages,
                                          bool add_generation_prompt,
                                          const nlohmann::ordered_json& extra = nlohmann::ordered_json(),
                                          const ChatTemplateOptions& opt = {});
Expected<std::string> apply_chat_template(std::string_view tmpl, const nlohmann::json& messages,
                                          bool add_generation_prompt, const nlohmann::json& extra = nlohmann::json(),
                                          const ChatTemplateOptions& opt = {});

// Only the context-building half of apply_chat_template.
Expected<nlohmann::ordered_json> chat_template_context(const nlohmann::ordered_json& messages,
                                                       bool add_generation_prompt,
                                                       const nlohmann::ordered_json& extra);

}  // namespace ember
