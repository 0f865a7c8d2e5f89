// chat_prompt.cpp: chat template loading and rendering.
#include "server/chat_prompt.h"

#include <filesystem>

#include "io/gguf.h"
#include "template/model_chat_templates.h"
#include "tokenizer/gguf_tokenizer.h"

namespace ember::server {

namespace {
bool is_gguf(const std::string& p) {
    return p.size() > 5 && p.compare(p.size() - 5, 5, ".gguf") == 0 && !std::filesystem::is_directory(p);
}
}  // namespace

Expected<ChatFormatter> ChatFormatter::load(const std::string& model_path, const Tokenizer& tok) {
    ChatFormatter f;
    std::string src, tools_src;
    if (is_gguf(model_path)) {
        EMBER_ASSIGN(auto g, GgufFile::open(model_path));
        EMBER_ASSIGN(src, chat_template_from_gguf(*g));
        if (tok.bos_id() >= 0) f.special_["bos_token"] = tok.token_bytes(tok.bos_id());
        const auto eos = tok.eos_ids();
        if (!eos.empty()) f.special_["eos_token"] = tok.token_bytes(eos[0]);
    } else if (!model_path.empty()) {
        EMBER_ASSIGN(ModelChatTemplates t, load_model_chat_templates(model_path));
        if (!t.templates.empty()) {
            EMBER_ASSIGN(src, t.select(/*with_tools=*/false));
            EMBER_ASSIGN(tools_src, t.select(/*with_tools=*/true));
        }
        f.special_ = t.special_tokens;
    }
    if (!src.empty()) {
        auto t = ChatTemplate::parse(src);
        if (!t) return t.status().with_context("the model's chat template");
        f.tmpl_ = std::make_shared<const ChatTemplate>(std::move(t.value()));
        f.reasoning_ = src.find("<think>") != std::string::npos;
    }
    if (!tools_src.empty() && tools_src != src) {
        auto t = ChatTemplate::parse(tools_src);
        if (!t) return t.status().with_context("the model's tool_use chat template");
        f.tools_tmpl_ = std::make_shared<const ChatTemplate>(std::move(t.value()));
    }
    return f;
}

Expected<std::string> ChatFormatter::render(const ojson& messages, bool add_generation_prompt,
                                            const ojson& kwargs, const ojson& tools) const {
    if (!tmpl_) {
        // ChatML (Qwen's format), as `ember generate --chat` does for template-less models
        EMBER_REQUIRE(tools.is_null(), "ChatML (no chat template) has no tool support");
        std::vector<ChatMessage> msgs;
        for (const auto& m : messages) {
            EMBER_REQUIRE(m.value("role", ojson()).is_string() && m.value("content", ojson()).is_string(),
                          "ChatML needs a string role and content in every message");
            msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
        }
        const bool thinking = !kwargs.contains("enable_thinking") || kwargs["enable_thinking"] != false;
        return apply_chatml(msgs, add_generation_prompt, thinking);
    }
    ojson extra = special_;
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) extra[it.key()] = it.value();
    if (!tools.is_null()) extra["tools"] = tools;
    EMBER_ASSIGN(ojson ctx, chat_template_context(messages, add_generation_prompt, extra));
    return (!tools.is_null() && tools_tmpl_ ? tools_tmpl_ : tmpl_)->render(ctx);
}

const std::string& ChatFormatter::tools_source() const {
    static const std::string none;
    return tools_tmpl_ ? tools_tmpl_->source() : tmpl_ ? tmpl_->source() : none;
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, const std::string& text) {
    const int32_t bos = tok.bos_id();
    const bool has_bos = bos >= 0 && text.rfind(tok.token_bytes(bos), 0) == 0;
    return tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace ember::server
