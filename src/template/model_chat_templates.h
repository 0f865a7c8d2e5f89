// model_chat_templates.h: a Hugging Face model directory's chat template(s) and special tokens, found
// the way transformers' AutoTokenizer finds them (transformers 5, tokenization_utils_base.py):
//  - chat_template.jinja (the "default" template) and additional_chat_templates/<name>.jinja; when any
//    of these files exist they replace the templates in tokenizer_config.json;
//  - otherwise tokenizer_config.json "chat_template": a string, or a list of {"name", "template"};
//  - special tokens bos/eos/unk/sep/pad/cls/mask_token from tokenizer_config.json (a string, or an
//    AddedToken object {"content": ...}); for configs without "added_tokens_decoder" (the legacy
//    layout), special_tokens_map.json overrides them. These are what transformers passes to every
//    template as template variables (tokenizer.special_tokens_map).
// select() is transformers' get_chat_template(): one template is used as is; of several, "tool_use"
// when tools are given and it exists, else "default".
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "core/status.h"

namespace ember {

struct ModelChatTemplates {
    std::map<std::string, std::string> templates;  // name → source; a lone template is named "default"
    nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // {"bos_token": "<s>", ...}

    Expected<std::string> select(bool with_tools) const;
};

Expected<ModelChatTemplates> load_model_chat_templates(const std::string& model_dir);

}  // namespace ember
