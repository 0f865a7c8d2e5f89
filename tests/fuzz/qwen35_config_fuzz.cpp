// Fuzz target: a model directory's config.json as load_model reads it (io/json_file.h parse_json_text, then
// Qwen35Config::from_json: flat or text_config, rope parameters, layer_types, MLX quantization blocks), and the
// quantities the loaders derive from a config that validated.
#include "fuzz_util.h"
#include "io/json_file.h"
#include "models/qwen35_config.h"

using namespace ember;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto j = parse_json_text(fuzz::text(data, size), "config.json");
    if (!j || !j->is_object()) return 0;
    auto c = Qwen35Config::from_json(*j, "config.json");
    if (!c) return 0;
    int64_t sum = c->rotary_dim() + c->key_dim() + c->value_dim() + c->conv_dim() + c->n_full_layers();
    auto bg = c->quant.for_module("language_model.model.layers.0.mlp.gate_proj");
    return static_cast<int>((sum + bg.first) & 0);
}
