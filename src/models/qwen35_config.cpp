// Qwen35Config parsing (HF config.json, flat or nested) and the named presets of qwen35.md §1.3.
#include "models/qwen35_config.h"

#include <cfloat>
#include <cmath>

#include "models/config_limits.h"

namespace ember {

using json = nlohmann::json;

std::pair<int, int> QuantConfig::for_module(const std::string& path) const {
    auto it = overrides.find(path);
    return it != overrides.end() ? it->second : std::make_pair(bits, group_size);
}

int64_t Qwen35Config::n_linear_layers() const {
    int64_t n = 0;
    for (auto t : layer_types) n += t == LayerType::LINEAR_ATTENTION;
    return n;
}

namespace {

// Reads an integer field; absent → default; present but not a non-negative integer → error.
Status get_int(const json& o, const char* key, int64_t* out, const std::string& where) {
    if (!o.contains(key) || o[key].is_null()) return Status::ok();
    const auto& v = o[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
        return errorf("%s: '%s' must be a non-negative integer", where.c_str(), key);
    *out = v.get<int64_t>();
    return Status::ok();
}
Status get_float(const json& o, const char* key, float* out, const std::string& where) {
    if (!o.contains(key) || o[key].is_null()) return Status::ok();
    if (!o[key].is_number()) return errorf("%s: '%s' must be a number", where.c_str(), key);
    const double v = o[key].get<double>();  // a double beyond float's range would make the float conversion UB
    if (!(std::fabs(v) <= FLT_MAX)) return errorf("%s: '%s' = %g is not a finite float", where.c_str(), key, v);
    *out = static_cast<float>(v);
    return Status::ok();
}

// A string field; absent or null → *out unchanged; any other type → error (nlohmann's value() would throw).
Status get_string(const json& o, const char* key, std::string* out, const std::string& where) {
    if (!o.is_object() || !o.contains(key) || o[key].is_null()) return Status::ok();
    if (!o[key].is_string()) return errorf("%s: '%s' must be a string", where.c_str(), key);
    *out = o[key].get<std::string>();
    return Status::ok();
}

// quantization.bits / group_size (or a module override's): absent → def; an integer that fits int, else error.
Status quant_int(const json& o, const char* key, int def, int* out, const std::string& where, const std::string& at) {
    *out = def;
    if (!o.contains(key)) return Status::ok();
    const json& v = o[key];
    if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
        return errorf("%s: %s.%s must be an integer", where.c_str(), at.c_str(), key);
    *out = static_cast<int>(v.get<int64_t>());
    return Status::ok();
}

Status parse_quant(const json& q, QuantConfig* out, const std::string& where) {
    if (!q.is_object()) return errorf("%s: 'quantization' must be an object", where.c_str());
    out->present = true;
    EMBER_TRY(quant_int(q, "bits", out->bits, &out->bits, where, "quantization"));
    EMBER_TRY(quant_int(q, "group_size", out->group_size, &out->group_size, where, "quantization"));
    if (q.contains("mode")) {
        if (!q["mode"].is_string()) return errorf("%s: quantization.mode must be a string", where.c_str());
        out->mode = q["mode"].get<std::string>();
    }
    // Per-module overrides, as mlx-lm writes them (bool values — a module explicitly not quantized — need no
    // entry: ".scales" decides). Read after bits/group_size, whose values they default to.
    for (auto it = q.begin(); it != q.end(); ++it) {
        if (!it.value().is_object()) continue;
        const std::string at = "quantization." + it.key();
        int b = 0, g = 0;
        EMBER_TRY(quant_int(it.value(), "bits", out->bits, &b, where, at));
        EMBER_TRY(quant_int(it.value(), "group_size", out->group_size, &g, where, at));
        out->overrides[it.key()] = {b, g};
    }
    if (out->mode != "affine")
        return errorf("%s: quantization mode '%s' is not supported (only 'affine')", where.c_str(), out->mode.c_str());
    return Status::ok();
}

}  // namespace

Expected<Qwen35Config> Qwen35Config::from_json(const json& j, const std::string& where) {
    if (!j.is_object()) return errorf("%s: config is not a JSON object", where.c_str());
    const json& t = (j.contains("text_config") && j["text_config"].is_object()) ? j["text_config"] : j;
    Qwen35Config c;
    // HF defaults (Qwen3_5TextConfig), used for absent keys.
    c.hidden_size = 4096; c.intermediate_size = 12288; c.num_hidden_layers = 32;
    c.num_attention_heads = 16; c.num_key_value_heads = 4;
    c.linear_num_key_heads = 16; c.linear_num_value_heads = 32; c.max_position_embeddings = 32768;
    EMBER_TRY(get_string(j, "model_type", &c.model_type, where));
    EMBER_TRY(get_string(t, "model_type", &c.model_type, where));
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0].is_string())
        c.architecture = j["architectures"][0].get<std::string>();
    EMBER_TRY(get_int(t, "vocab_size", &c.vocab_size, where));
    EMBER_TRY(get_int(t, "hidden_size", &c.hidden_size, where));
    EMBER_TRY(get_int(t, "intermediate_size", &c.intermediate_size, where));
    EMBER_TRY(get_int(t, "num_hidden_layers", &c.num_hidden_layers, where));
    EMBER_TRY(get_int(t, "num_attention_heads", &c.num_attention_heads, where));
    EMBER_TRY(get_int(t, "num_key_value_heads", &c.num_key_value_heads, where));
    EMBER_TRY(get_int(t, "head_dim", &c.head_dim, where));
    EMBER_TRY(get_int(t, "linear_num_key_heads", &c.linear_num_key_heads, where));
    EMBER_TRY(get_int(t, "linear_num_value_heads", &c.linear_num_value_heads, where));
    EMBER_TRY(get_int(t, "linear_key_head_dim", &c.linear_key_head_dim, where));
    EMBER_TRY(get_int(t, "linear_value_head_dim", &c.linear_value_head_dim, where));
    EMBER_TRY(get_int(t, "linear_conv_kernel_dim", &c.linear_conv_kernel_dim, where));
    EMBER_TRY(get_int(t, "max_position_embeddings", &c.max_position_embeddings, where));
    EMBER_TRY(get_int(t, "mtp_num_hidden_layers", &c.mtp_num_hidden_layers, where));
    EMBER_TRY(get_float(t, "rms_norm_eps", &c.rms_norm_eps, where));
    // RoPE: "rope_parameters" dict (transformers ≥ 5), else top-level fields (older exports).
    EMBER_TRY(get_float(t, "rope_theta", &c.rope_theta, where));
    EMBER_TRY(get_float(t, "partial_rotary_factor", &c.partial_rotary_factor, where));
    for (const char* key : {"rope_parameters", "rope_scaling"}) {
        if (t.contains(key) && t[key].is_object()) {
            EMBER_TRY(get_float(t[key], "rope_theta", &c.rope_theta, where));
            EMBER_TRY(get_float(t[key], "partial_rotary_factor", &c.partial_rotary_factor, where));
            std::string type = "default";
            EMBER_TRY(get_string(t[key], "type", &type, where));
            EMBER_TRY(get_string(t[key], "rope_type", &type, where));
            if (type != "default" && type != "mrope")
                return errorf("%s: %s.rope_type '%s' is not supported", where.c_str(), key, type.c_str());
        }
    }
    // Tied head: the text config's flag, else the top-level one (the loader also checks which tensors exist).
    const json* tie = t.contains("tie_word_embeddings") ? &t["tie_word_embeddings"]
                      : j.contains("tie_word_embeddings") ? &j["tie_word_embeddings"] : nullptr;
    if (tie && tie->is_boolean()) c.tie_word_embeddings = tie->get<bool>();
    // Layer pattern: explicit layer_types, else every full_attention_interval-th layer is full attention.
    if (t.contains("layer_types") && !t["layer_types"].is_null()) {
        if (!t["layer_types"].is_array()) return errorf("%s: 'layer_types' must be an array", where.c_str());
        for (const auto& s : t["layer_types"]) {
            std::string v = s.is_string() ? s.get<std::string>() : "";
            if (v == "linear_attention") c.layer_types.push_back(LayerType::LINEAR_ATTENTION);
            else if (v == "full_attention") c.layer_types.push_back(LayerType::FULL_ATTENTION);
            else return errorf("%s: unknown layer type '%s' in layer_types", where.c_str(), s.dump().c_str());
        }
    } else {
        EMBER_TRY(check_limit(where, "num_hidden_layers", c.num_hidden_layers, kMaxLayers));
        int64_t interval = 4;
        EMBER_TRY(get_int(t, "full_attention_interval", &interval, where));
        if (interval < 1) return errorf("%s: full_attention_interval must be ≥ 1", where.c_str());
        for (int64_t i = 0; i < c.num_hidden_layers; ++i)
            c.layer_types.push_back((i + 1) % interval ? LayerType::LINEAR_ATTENTION : LayerType::FULL_ATTENTION);
    }
    for (const json* q : {&j, &t}) {
        for (const char* key : {"quantization", "quantization_config"}) {
            if (q->contains(key) && !c.quant.present) {
                std::string method;
                EMBER_TRY(get_string((*q)[key], "quant_method", &method, where));
                if (!method.empty() && !(*q)[key].contains("bits"))
                    return errorf("%s: %s.quant_method '%s' is not supported", where.c_str(), key,
                                  (*q)[key]["quant_method"].dump().c_str());
                EMBER_TRY(parse_quant((*q)[key], &c.quant, where));
            }
        }
    }
    EMBER_TRY(c.validate(where));
    return c;
}

Status Qwen35Config::check_limits(const std::string& where) const {
    const struct { const char* name; int64_t v, max; } fields[] = {
        {"num_hidden_layers", num_hidden_layers, kMaxLayers}, {"mtp_num_hidden_layers", mtp_num_hidden_layers, kMaxLayers},
        {"hidden_size", hidden_size, kMaxWidth}, {"intermediate_size", intermediate_size, kMaxWidth},
        {"vocab_size", vocab_size, kMaxVocab}, {"num_attention_heads", num_attention_heads, kMaxHeads},
        {"num_key_value_heads", num_key_value_heads, kMaxHeads}, {"head_dim", head_dim, kMaxHeadDim},
        {"linear_num_key_heads", linear_num_key_heads, kMaxHeads},
        {"linear_num_value_heads", linear_num_value_heads, kMaxHeads},
        {"linear_key_head_dim", linear_key_head_dim, kMaxHeadDim},
        {"linear_value_head_dim", linear_value_head_dim, kMaxHeadDim},
        {"linear_conv_kernel_dim", linear_conv_kernel_dim, kMaxConvKernel},
    };
    for (const auto& f : fields) EMBER_TRY(check_limit(where, f.name, f.v, f.max));
    EMBER_REQUIRE(partial_rotary_factor >= 0.f && partial_rotary_factor <= 1.f,
                  "%s: partial_rotary_factor %g must be in [0, 1]", where.c_str(), double(partial_rotary_factor));
    return Status::ok();
}

Status Qwen35Config::validate(const std::string& where) const {
    const char* w = where.c_str();
    EMBER_TRY(check_limits(where));
    EMBER_REQUIRE(hidden_size > 0 && num_hidden_layers > 0 && vocab_size > 0 && intermediate_size > 0,
                  "%s: hidden_size, num_hidden_layers, vocab_size and intermediate_size must be positive", w);
    EMBER_REQUIRE(static_cast<int64_t>(layer_types.size()) == num_hidden_layers,
                  "%s: layer_types has %zu entries, expected num_hidden_layers = %lld", w, layer_types.size(),
                  (long long)num_hidden_layers);
    if (n_full_layers() > 0) {
        EMBER_REQUIRE(num_attention_heads > 0 && num_key_value_heads > 0 && head_dim > 0,
                      "%s: attention heads and head_dim must be positive", w);
        EMBER_REQUIRE(num_attention_heads % num_key_value_heads == 0,
                      "%s: num_attention_heads (%lld) is not a multiple of num_key_value_heads (%lld)", w,
                      (long long)num_attention_heads, (long long)num_key_value_heads);
        EMBER_REQUIRE(std::isfinite(rope_theta) && rope_theta > 0, "%s: rope_theta %g must be a positive number", w,
                      double(rope_theta));
        int64_t rot = rotary_dim();
        EMBER_REQUIRE(rot >= 0 && rot <= head_dim && rot % 2 == 0,
                      "%s: rotary dim %lld (head_dim × partial_rotary_factor) must be even and ≤ head_dim", w,
                      (long long)rot);
    }
    if (n_linear_layers() > 0) {
        EMBER_REQUIRE(linear_num_key_heads > 0 && linear_num_value_heads > 0 && linear_key_head_dim > 0 &&
                          linear_value_head_dim > 0 && linear_conv_kernel_dim > 0,
                      "%s: linear-attention head counts/dims and conv kernel must be positive", w);
        EMBER_REQUIRE(linear_num_value_heads % linear_num_key_heads == 0,
                      "%s: linear_num_value_heads (%lld) must be a multiple of linear_num_key_heads (%lld)", w,
                      (long long)linear_num_value_heads, (long long)linear_num_key_heads);
    }
    EMBER_REQUIRE(rms_norm_eps > 0, "%s: rms_norm_eps must be positive", w);
    if (quant.present) {
        EMBER_REQUIRE(quant.bits >= 2 && quant.bits <= 8 && quant.bits != 7, "%s: quantization bits %d unsupported", w,
                      quant.bits);
        EMBER_REQUIRE(quant.group_size == 32 || quant.group_size == 64 || quant.group_size == 128,
                      "%s: quantization group_size %d unsupported (32, 64 or 128)", w, quant.group_size);
        for (const auto& [module, bg] : quant.overrides)
            EMBER_REQUIRE(bg.first >= 2 && bg.first <= 8 && bg.first != 7 &&
                              (bg.second == 32 || bg.second == 64 || bg.second == 128),
                          "%s: quantization.%s: bits %d / group_size %d unsupported", w, module.c_str(), bg.first,
                          bg.second);
    }
    return Status::ok();
}

Expected<Qwen35Config> Qwen35Config::preset(const std::string& name) {
    struct P { const char* name; int64_t hidden, layers, heads, kv, nk, nv, inter; bool tied; };
    static const P kPresets[] = {
        {"qwen3.5-0.8b", 1024, 24, 8, 2, 16, 16, 3584, true},  {"qwen3.5-2b", 2048, 24, 8, 2, 16, 16, 6144, true},
        {"qwen3.5-4b", 2560, 32, 16, 4, 16, 32, 9216, true},   {"qwen3.5-9b", 4096, 32, 16, 4, 16, 32, 12288, false},
        {"qwen3.5-27b", 5120, 64, 24, 4, 16, 48, 17408, false},
    };
    for (const auto& p : kPresets) {
        if (name != p.name) continue;
        Qwen35Config c;
        c.model_type = "qwen3_5_text";
        c.architecture = "synthetic:" + name;
        c.hidden_size = p.hidden; c.num_hidden_layers = p.layers; c.num_attention_heads = p.heads;
        c.num_key_value_heads = p.kv; c.linear_num_key_heads = p.nk; c.linear_num_value_heads = p.nv;
        c.intermediate_size = p.inter; c.tie_word_embeddings = p.tied; c.mtp_num_hidden_layers = 1;
        for (int64_t i = 0; i < c.num_hidden_layers; ++i)
            c.layer_types.push_back((i + 1) % 4 ? LayerType::LINEAR_ATTENTION : LayerType::FULL_ATTENTION);
        c.quant.present = true;  // synthetic models are MLX-style 4-bit, group 64
        return c;
    }
    std::string names;
    for (const auto& p : kPresets) names += std::string(names.empty() ? "" : ", ") + p.name;
    return errorf("unknown synthetic model '%s' (known: %s)", name.c_str(), names.c_str());
}

}  // namespace ember
