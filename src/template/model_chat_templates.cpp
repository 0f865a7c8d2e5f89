// model_chat_templates.cpp: see model_chat_templates.h.
#include "template/model_chat_templates.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "io/json_file.h"

namespace ember {

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

Expected<std::string> read_text(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return errorf("cannot read %s", p.string().c_str());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

Expected<ojson> read_json(const fs::path& p) {
    EMBER_ASSIGN(std::string text, read_text(p));
    if (json_nesting_depth(text) > kMaxJsonDepth)
        return errorf("%s: JSON nested deeper than %zu levels (ember's limit)", p.string().c_str(), kMaxJsonDepth);
    ojson j = ojson::parse(text, nullptr, false);
    if (j.is_discarded()) return errorf("%s is not valid JSON", p.string().c_str());
    if (!j.is_object()) return errorf("%s: expected a JSON object", p.string().c_str());
    return j;
}

// A special-token entry: "text", {"content": "text", ...}, or null.
Expected<std::optional<std::string>> token_text(const ojson& v, const std::string& what) {
    if (v.is_null()) return std::optional<std::string>();
    if (v.is_string()) return std::optional<std::string>(v.get<std::string>());
    if (v.is_object() && v.contains("content") && v["content"].is_string())
        return std::optional<std::string>(v["content"].get<std::string>());
    return errorf("%s: expected a string or an object with \"content\"", what.c_str());
}

}  // namespace

Expected<std::string> ModelChatTemplates::select(bool with_tools) const {
    if (templates.empty()) return errorf("the model has no chat template");
    if (templates.size() == 1) return templates.begin()->second;
    if (with_tools && templates.count("tool_use")) return templates.at("tool_use");
    if (templates.count("default")) return templates.at("default");
    std::string names;
    for (const auto& [name, src] : templates) names += (names.empty() ? "" : ", ") + name;
    return errorf("the model has several chat templates and none is named \"default\" (%s)", names.c_str());
}

Expected<ModelChatTemplates> load_model_chat_templates(const std::string& model_dir) {
    fs::path dir(model_dir);
    ModelChatTemplates out;
    ojson config = ojson::object();
    fs::path config_path = dir / "tokenizer_config.json";
    if (fs::exists(config_path)) {
        EMBER_ASSIGN(config, read_json(config_path));
    }

    // Template files first: they take priority over tokenizer_config.json.
    if (fs::exists(dir / "chat_template.jinja")) {
        EMBER_ASSIGN(out.templates["default"], read_text(dir / "chat_template.jinja"));
    }
    std::error_code ec;
    if (fs::is_directory(dir / "additional_chat_templates", ec)) {
        for (const auto& e : fs::directory_iterator(dir / "additional_chat_templates", ec)) {
            if (e.path().extension() != ".jinja") continue;
            EMBER_ASSIGN(out.templates[e.path().stem().string()], read_text(e.path()));
        }
    }
    if (out.templates.empty() && config.contains("chat_template")) {
        const ojson& ct = config["chat_template"];
        if (ct.is_string()) {
            out.templates["default"] = ct.get<std::string>();
        } else if (ct.is_array()) {
            for (const ojson& t : ct) {
                if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() ||
                    !t["template"].is_string())
                    return errorf("%s: chat_template entries must be {\"name\": ..., \"template\": ...}",
                                  config_path.string().c_str());
                out.templates[t["name"].get<std::string>()] = t["template"].get<std::string>();
            }
        } else if (!ct.is_null()) {
            return errorf("%s: chat_template must be a string or a list", config_path.string().c_str());
        }
    }
    if (out.templates.empty())
        return errorf("no chat template in %s (chat_template.jinja or tokenizer_config.json \"chat_template\")",
                      model_dir.c_str());

    ojson tokens = ojson::object();
    static const char* names[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                  "pad_token", "cls_token", "mask_token"};
    for (const char* name : names)
        if (config.contains(name)) tokens[name] = config[name];
    fs::path map_path = dir / "special_tokens_map.json";
    if (!config.contains("added_tokens_decoder") && fs::exists(map_path)) {
        EMBER_ASSIGN(ojson map, read_json(map_path));
        for (const char* name : names)
            if (map.contains(name)) tokens[name] = map[name];
    }
    for (const char* name : names) {
        if (!tokens.contains(name)) continue;
        EMBER_ASSIGN(auto text, token_text(tokens[name], std::string(model_dir) + ": " + name));
        if (text) out.special_tokens[name] = *text;
    }
    return out;
}

}  // namespace ember
