// Fuzz target: the real chat templates of tests/fixtures/templates/real_*.json (SmolLM2, Qwen3.5, Llama 3, ...)
// rendered by apply_chat_template over arbitrary messages. Input: one byte choosing the template, then JSON:
// a messages array, or {"messages": [...], "add_generation_prompt": bool, other keys = extra variables}.
#include <algorithm>
#include <filesystem>

#include "chat_context.h"
#include "fuzz_util.h"

using namespace ember;
using ojson = nlohmann::ordered_json;

namespace {

const std::vector<std::string>& templates() {
    static const std::vector<std::string> t = [] {
        std::vector<std::string> files;
        std::string dir = std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/templates";
        for (const auto& e : std::filesystem::directory_iterator(dir))
            if (e.path().filename().string().rfind("real_", 0) == 0) files.push_back(e.path().filename().string());
        std::sort(files.begin(), files.end());
        std::vector<std::string> out;
        for (const auto& f : files)
            out.push_back(ojson::parse(fuzz::read_source_file("tests/fixtures/templates/" + f)).at("template").get<std::string>());
        if (out.empty()) fuzz::fail("no real_*.json templates in " + dir);
        return out;
    }();
    return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)templates();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string& tmpl = templates()[data[0] % templates().size()];
    ojson in = ojson::parse(fuzz::text(data + 1, size - 1), nullptr, /*allow_exceptions=*/false);
    if (in.is_discarded()) return 0;
    ojson messages = fuzz::default_messages(), extra = fuzz::default_extra();
    bool add_generation_prompt = true;
    if (in.is_object()) {
        for (auto it = in.begin(); it != in.end(); ++it) {
            if (it.key() == "messages") messages = it.value();
            else if (it.key() == "add_generation_prompt" && it.value().is_boolean()) add_generation_prompt = it.value().get<bool>();
            else extra[it.key()] = it.value();
        }
    } else {
        messages = std::move(in);
    }
    (void)apply_chat_template(tmpl, messages, add_generation_prompt, extra, fuzz::options());
    return 0;
}
