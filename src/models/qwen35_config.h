// Qwen3.5 text-model hyperparameters, named as in HF config.json (qwen35.md §1.2).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember {

enum class LayerType : uint8_t { LINEAR_ATTENTION, FULL_ATTENTION };

// Quantization block of an MLX config.json ("quantization" / "quantization_config").
struct QuantConfig {
    bool present = false;
    int bits = 4, group_size = 64;
    std::string mode = "affine";
    std::map<std::string, std::pair<int, int>> overrides;  // module path -> (bits, group_size)
    // bits/group size for a module path (e.g. "language_model.model.layers.0.mlp.gate_proj").
    std::pair<int, int> for_module(const std::string& path) const;
};

struct Qwen35Config {
    int64_t vocab_size = 248320, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0;
    int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 256;
    int64_t linear_num_key_heads = 0, linear_num_value_heads = 0, linear_key_head_dim = 128,
            linear_value_head_dim = 128, linear_conv_kernel_dim = 4;
    float rms_norm_eps = 1e-6f, rope_theta = 1e7f, partial_rotary_factor = 0.25f;
    int64_t max_position_embeddings = 262144;
    bool tie_word_embeddings = false;
    std::vector<LayerType> layer_types;
    int64_t mtp_num_hidden_layers = 0;
    QuantConfig quant;
    std::string model_type, architecture;

    int64_t rotary_dim() const { return static_cast<int64_t>(head_dim * partial_rotary_factor); }
    int64_t key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
    int64_t value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
    int64_t n_linear_layers() const;
    int64_t n_full_layers() const { return num_hidden_layers - n_linear_layers(); }

    // Parses config.json (flat, or nested under "text_config") and validates every field.
    static Expected<Qwen35Config> from_json(const nlohmann::json& j, const std::string& where);
    // The named real configs of qwen35.md §1.3: qwen3.5-0.8b, -2b, -4b, -9b, -27b.
    static Expected<Qwen35Config> preset(const std::string& name);
    Status validate(const std::string& where) const;
    // The integer fields within config_limits.h (validate() checks this first; loaders call it before they
    // build layer_types, which is num_hidden_layers long).
    Status check_limits(const std::string& where) const;
};

}  // namespace ember
