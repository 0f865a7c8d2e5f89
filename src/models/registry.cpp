// The model registry: ONE table mapping config.json model_type / architectures to a loader.
#include <filesystem>

#include "io/json_file.h"
#include "io/gguf.h"
#include "models/llama.h"
#include "models/model.h"
#include "models/qwen35.h"

namespace ember {

namespace {

using Loader = Expected<std::unique_ptr<CausalLM>> (*)(const std::string& dir, const nlohmann::json& config);
struct Entry { const char* model_type; Loader load; };

const Entry kRegistry[] = {
    {"qwen3_5", Qwen35::load},
    {"qwen3_5_text", Qwen35::load},
};

// GGUF files: general.architecture → loader.
using GgufLoader = Expected<std::unique_ptr<CausalLM>> (*)(std::shared_ptr<const GgufFile> f, const LoadOptions& opt);
struct GgufEntry { const char* arch; GgufLoader load; };

const GgufEntry kGgufRegistry[] = {
    {"llama", Llama::load_gguf},
    {"qwen2", Llama::load_gguf},
    {"qwen3", Llama::load_gguf},
    {"qwen35", Qwen35::load_gguf},
};

}  // namespace

Expected<std::unique_ptr<CausalLM>> load_gguf_model(std::shared_ptr<const GgufFile> f, const LoadOptions& opt) {
    EMBER_ASSIGN(std::string arch, f->get_string("general.architecture"));
    for (const auto& e : kGgufRegistry)
        if (arch == e.arch) return e.load(f, opt);
    std::string known;
    for (const auto& e : kGgufRegistry) known += std::string(known.empty() ? "" : ", ") + e.arch;
    return errorf("%s: GGUF architecture '%s' is not supported (supported: %s)", f->path().c_str(), arch.c_str(),
                  known.c_str());
}

Expected<std::unique_ptr<CausalLM>> load_model(const std::string& path, const LoadOptions& opt) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) return errorf("%s: no such file or directory", path.c_str());
    if (!fs::is_directory(path, ec)) {
        if (path.size() > 5 && path.substr(path.size() - 5) == ".gguf") {
            EMBER_ASSIGN(std::unique_ptr<GgufFile> f, GgufFile::open(path));
            return load_gguf_model(std::shared_ptr<const GgufFile>(std::move(f)), opt);
        }
        return errorf("%s: expected a model directory (config.json + *.safetensors) or a .gguf file", path.c_str());
    }
    EMBER_REQUIRE(!opt.q8_activations, "%s: 8-bit activations (llama.cpp numerics) apply to GGUF files only",
                  path.c_str());
    EMBER_ASSIGN(auto config, read_json_file((fs::path(path) / "config.json").string()));
    EMBER_REQUIRE(config.is_object(), "%s/config.json: not a JSON object", path.c_str());
    std::string type = config.contains("model_type") && config["model_type"].is_string()
                           ? config["model_type"].get<std::string>() : std::string();
    for (const auto& e : kRegistry)
        if (type == e.model_type) return e.load(path, config);
    std::string known;
    for (const auto& e : kRegistry) known += std::string(known.empty() ? "" : ", ") + e.model_type;
    return errorf("%s/config.json: model_type '%s' is not supported (supported: %s)", path.c_str(), type.c_str(),
                  known.c_str());
}

Expected<std::unique_ptr<CausalLM>> make_synthetic_model(const std::string& name, uint64_t seed) {
    return Qwen35::synthetic(name, seed);
}

}  // namespace ember
