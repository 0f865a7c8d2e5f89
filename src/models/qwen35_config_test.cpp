// Qwen35Config: both config.json layouts, rope/layer-type variants, quantization blocks, and bad values.
#include "models/qwen35_config.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace ember {
namespace {

using json = nlohmann::json;

json text_cfg() {
    return json{{"model_type", "qwen3_5_text"}, {"hidden_size", 128}, {"intermediate_size", 256},
                {"num_hidden_layers", 6}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                {"head_dim", 32}, {"linear_num_key_heads", 2}, {"linear_num_value_heads", 6},
                {"linear_key_head_dim", 16}, {"linear_value_head_dim", 24}, {"vocab_size", 512},
                {"rms_norm_eps", 1e-6}, {"rope_parameters", {{"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5},
                                                             {"rope_type", "default"}}}};
}

TEST(Qwen35Config, FlatWithDefaultInterval) {
    auto c = Qwen35Config::from_json(text_cfg(), "cfg");
    ASSERT_TRUE(c.is_ok()) << c.message();
    EXPECT_EQ(c->hidden_size, 128);
    EXPECT_EQ(c->rotary_dim(), 16);
    EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
    ASSERT_EQ(c->layer_types.size(), 6u);
    EXPECT_EQ(c->layer_types[3], LayerType::FULL_ATTENTION);
    EXPECT_EQ(c->layer_types[2], LayerType::LINEAR_ATTENTION);
    EXPECT_EQ(c->n_full_layers(), 1);
    EXPECT_EQ(c->conv_dim(), 2 * 2 * 16 + 6 * 24);
    EXPECT_FALSE(c->quant.present);
}

// Fuzz crash 8b24beab (gguf_model target): a file whose rope base was 0 loaded and then aborted in rope_inv_freq at
// the first forward; a rope_theta that is not a positive number is now a load error.
TEST(Qwen35Config, FuzzCrash8b24beabRopeThetaMustBePositive) {
    for (double theta : {0.0, -10000.0, std::nan(""), 1e300}) {
        json t = text_cfg();
        t.erase("rope_parameters");
        t["rope_theta"] = theta;
        auto c = Qwen35Config::from_json(t, "cfg");
        ASSERT_FALSE(c.is_ok()) << theta;
        EXPECT_NE(c.message().find("rope_theta"), std::string::npos) << c.message();
    }
}

TEST(Qwen35Config, NestedTextConfigTopLevelRopeAndLayerTypes) {
    json t = text_cfg();
    t.erase("rope_parameters");
    t["rope_theta"] = 1e7;
    t["partial_rotary_factor"] = 0.25;
    t["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "linear_attention",
                        "full_attention", "linear_attention"};
    json j = {{"model_type", "qwen3_5"}, {"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"text_config", t},
              {"tie_word_embeddings", true}};
    auto c = Qwen35Config::from_json(j, "cfg");
    ASSERT_TRUE(c.is_ok()) << c.message();
    EXPECT_EQ(c->architecture, "Qwen3_5ForConditionalGeneration");
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_EQ(c->rotary_dim(), 8);
    EXPECT_EQ(c->layer_types[1], LayerType::FULL_ATTENTION);
    EXPECT_EQ(c->layer_types[3], LayerType::LINEAR_ATTENTION);
    EXPECT_EQ(c->n_full_layers(), 2);
}

TEST(Qwen35Config, QuantizationBlockWithOverrides) {
    json j = text_cfg();
    j["quantization"] = {{"group_size", 64}, {"bits", 4}, {"mode", "affine"},
                         {"language_model.model.layers.0.mlp.down_proj", {{"group_size", 32}, {"bits", 8}}}};
    auto c = Qwen35Config::from_json(j, "cfg");
    ASSERT_TRUE(c.is_ok()) << c.message();
    EXPECT_TRUE(c->quant.present);
    EXPECT_EQ(c->quant.for_module("language_model.model.layers.0.mlp.down_proj"), std::make_pair(8, 32));
    EXPECT_EQ(c->quant.for_module("language_model.model.layers.0.mlp.up_proj"), std::make_pair(4, 64));
}

TEST(Qwen35Config, BadValuesAreErrors) {
    struct Case { const char* what; json patch; const char* expect; };
    const Case cases[] = {
        {"negative hidden", {{"hidden_size", -5}}, "hidden_size"},
        {"string layers", {{"num_hidden_layers", "six"}}, "num_hidden_layers"},
        {"bad layer type", {{"layer_types", {"linear_attention", "mamba", "x", "y", "z", "w"}}}, "unknown layer type"},
        {"layer_types length", {{"layer_types", {"linear_attention"}}}, "layer_types has 1"},
        {"gqa", {{"num_key_value_heads", 3}}, "multiple of num_key_value_heads"},
        {"gdn heads", {{"linear_num_value_heads", 5}}, "multiple of linear_num_key_heads"},
        {"rope type", {{"rope_parameters", {{"rope_type", "yarn"}}}}, "rope_type"},
        {"quant mode", {{"quantization", {{"bits", 4}, {"group_size", 64}, {"mode", "mxfp4"}}}}, "mode"},
        {"quant bits", {{"quantization", {{"bits", 7}, {"group_size", 64}}}}, "bits 7"},
        {"quant group", {{"quantization", {{"bits", 4}, {"group_size", 48}}}}, "group_size 48"},
    };
    for (const auto& c : cases) {
        json j = text_cfg();
        j.merge_patch(c.patch);
        auto r = Qwen35Config::from_json(j, "cfg.json");
        ASSERT_FALSE(r.is_ok()) << c.what;
        EXPECT_NE(r.message().find(c.expect), std::string::npos) << c.what << ": " << r.message();
        EXPECT_NE(r.message().find("cfg.json"), std::string::npos) << r.message();
    }
    EXPECT_FALSE(Qwen35Config::from_json(json::array(), "x").is_ok());
}

void expect_errors(const char* test, const std::vector<std::tuple<const char*, json, const char*>>& cases) {
    for (const auto& [what, patch, expect] : cases) {
        json j = text_cfg();
        j.merge_patch(patch);
        auto r = Qwen35Config::from_json(j, "cfg.json");
        ASSERT_FALSE(r.is_ok()) << test << ": " << what;
        EXPECT_NE(r.message().find(expect), std::string::npos) << test << ": " << what << ": " << r.message();
    }
}

// fuzz_qwen35_config: {"model_type": {...}} threw nlohmann's type_error out of from_json (value() on a key of
// another type). Every such field is an error naming it; integers that do not fit are errors, not wrapped.
TEST(Qwen35Config, NonStringOrOutOfRangeFieldsAreErrorsNotExceptions) {
    expect_errors("wrong types", {
        {"model_type object", {{"model_type", {{"group_sihead", false}}}}, "'model_type' must be a string"},
        {"rope_type number", {{"rope_parameters", {{"rope_type", 3}}}}, "'rope_type' must be a string"},
        {"rope type bool", {{"rope_scaling", {{"type", true}}}}, "'type' must be a string"},
        {"quant_method number", {{"quantization_config", {{"quant_method", 1}}}}, "'quant_method' must be a string"},
        {"override bits string", {{"quantization", {{"bits", 4}, {"group_size", 64}, {"lm_head", {{"bits", "8"}}}}}},
         "quantization.lm_head.bits must be an integer"},
        {"bits beyond int", {{"quantization", {{"bits", int64_t{1} << 32 | 4}, {"group_size", 64}}}},
         "quantization.bits must be an integer"},
        {"override bits unsupported", {{"quantization", {{"bits", 4}, {"group_size", 64}, {"lm_head", {{"bits", 99}}}}}},
         "quantization.lm_head: bits 99"},
    });
}

// Sizes a hostile config.json could use to overflow the loaders' products or to make them loop / allocate
// (num_hidden_layers drives the layer_types loop) are refused first, naming the field and the limit.
TEST(Qwen35Config, HostileSizesAreRefusedBeforeUse) {
    expect_errors("limits", {
        {"layers", {{"num_hidden_layers", int64_t{1} << 40}}, "num_hidden_layers = 1099511627776 is beyond ember's limit of 1024"},
        {"key head dim", {{"linear_key_head_dim", int64_t{1} << 40}}, "linear_key_head_dim = 1099511627776 is beyond"},
        {"heads", {{"num_attention_heads", int64_t{1} << 33}, {"num_key_value_heads", 1}}, "num_attention_heads"},
        {"vocab", {{"vocab_size", int64_t{1} << 30}}, "vocab_size = 1073741824 is beyond ember's limit of 16777216"},
        {"mtp", {{"mtp_num_hidden_layers", 5000}}, "mtp_num_hidden_layers = 5000"},
        {"eps beyond float", {{"rms_norm_eps", 1e300}}, "'rms_norm_eps' = 1e+300 is not a finite float"},
        {"rotary factor", {{"rope_parameters", {{"partial_rotary_factor", 1e30}}}}, "partial_rotary_factor"},
    });
}

TEST(Qwen35Config, Presets) {
    auto c = Qwen35Config::preset("qwen3.5-2b");
    ASSERT_TRUE(c.is_ok());
    EXPECT_EQ(c->hidden_size, 2048);
    EXPECT_EQ(c->conv_dim(), 6144);
    EXPECT_EQ(c->n_full_layers(), 6);
    EXPECT_TRUE(c->tie_word_embeddings);
    auto c27 = Qwen35Config::preset("qwen3.5-27b");
    ASSERT_TRUE(c27.is_ok());
    EXPECT_EQ(c27->linear_num_value_heads, 48);
    EXPECT_FALSE(Qwen35Config::preset("qwen3.5-1t").is_ok());
}

}  // namespace
}  // namespace ember
