// Model loading from broken checkpoints: every failure is an error naming the file/tensor/field, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "models/model.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Copy {
    fs::path dir;
    explicit Copy(const char* name) {
        dir = fs::temp_directory_path() / ("ember_ld_" + std::to_string(std::random_device{}()));
        fs::copy(fs::path(EMBER_SOURCE_DIR) / "tests/fixtures/qwen35" / name, dir, fs::copy_options::recursive);
    }
    ~Copy() { fs::remove_all(dir); }
    json config() const { return json::parse(std::ifstream(dir / "config.json")); }
    void set_config(const json& j) const { std::ofstream(dir / "config.json") << j.dump(); }
};

void expect_error(const fs::path& dir, const std::string& needle) {
    auto m = load_model(dir.string());
    ASSERT_FALSE(m.is_ok()) << "loaded a broken model; expected an error containing: " << needle;
    EXPECT_NE(m.message().find(needle), std::string::npos) << m.message();
}

TEST(LoaderErrors, MissingPathAndConfig) {
    expect_error("/nonexistent/model", "no such file");
    Copy c("mm_tied");
    fs::remove(c.dir / "config.json");
    expect_error(c.dir, "config.json");
}

TEST(LoaderErrors, UnsupportedModelType) {
    Copy c("mm_tied");
    json j = c.config();
    j["model_type"] = "mamba9";
    c.set_config(j);
    expect_error(c.dir, "model_type 'mamba9' is not supported");
}

TEST(LoaderErrors, TruncatedWeights) {
    Copy c("mm_tied");
    auto p = c.dir / "model.safetensors";
    fs::resize_file(p, fs::file_size(p) / 2);
    expect_error(c.dir, "model.safetensors");
}

TEST(LoaderErrors, ConfigShapeDisagreesWithTensors) {
    Copy c("flat_untied_gqa3");
    json j = c.config();
    j["intermediate_size"] = 192;
    c.set_config(j);
    expect_error(c.dir, "mlp.gate_proj.weight' has shape [128, 128], expected [192, 128]");
}

TEST(LoaderErrors, LayerTypesNameMissingTensors) {
    Copy c("flat_untied_gqa3");
    json j = c.config();
    j["layer_types"][0] = "full_attention";  // layer 0 really is a Gated DeltaNet layer
    c.set_config(j);
    expect_error(c.dir, "model.layers.0.self_attn.q_proj.weight");
}

TEST(LoaderErrors, QuantizedTensorsWithoutQuantizationBlock) {
    Copy c("q4_affine");
    json j = c.config();
    j.erase("quantization");
    j.erase("quantization_config");
    if (j.contains("text_config")) {
        j["text_config"].erase("quantization");
        j["text_config"].erase("quantization_config");
    }
    c.set_config(j);
    expect_error(c.dir, "no 'quantization' block");
}

TEST(LoaderErrors, WrongBitsInConfig) {
    Copy c("q4_affine");
    json j = c.config();
    j["quantization"]["bits"] = 8;
    if (j.contains("quantization_config")) j["quantization_config"]["bits"] = 8;
    c.set_config(j);
    expect_error(c.dir, "at 8 bits");
}

TEST(LoaderErrors, UntiedWithoutHead) {
    Copy c("mm_tied");
    json j = c.config();
    j["tie_word_embeddings"] = false;
    if (j.contains("text_config")) j["text_config"]["tie_word_embeddings"] = false;
    c.set_config(j);
    expect_error(c.dir, "no lm_head.weight");
}

TEST(LoaderErrors, TokenOutOfRangeIsAnError) {
    auto m = load_model((fs::path(EMBER_SOURCE_DIR) / "tests/fixtures/qwen35/mm_tied").string());
    ASSERT_TRUE(m.is_ok()) << m.message();
    auto st = (*m)->new_state();
    std::vector<float> logits((*m)->info().vocab_size);
    int32_t bad = static_cast<int32_t>((*m)->info().vocab_size);
    auto s = (*m)->forward(*st, &bad, 1, logits.data(), false);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
    EXPECT_EQ(st->pos, 0);  // a rejected call leaves the state untouched
}

}  // namespace
}  // namespace ember
