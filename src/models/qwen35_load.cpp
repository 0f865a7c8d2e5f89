// Qwen3.5 weights from HF or MLX safetensors (qwen35.md §3a–§3b): names, +1 norm offsets, conv layout.
#include <cstring>

#include "models/qwen35.h"

namespace ember {

namespace {

std::string lp(int64_t l, const char* rest) { return "model.layers." + std::to_string(l) + "." + rest; }

// Conv weight → [C, K]. HF stores [C, 1, K]; MLX [C, K, 1]; a flat [C, K] is accepted too.
Expected<std::vector<float>> load_conv(const Checkpoint& ck, const std::string& name, int64_t C, int64_t K) {
    const TensorInfo* t = ck.find(name);
    if (!t) return errorf("%s: missing tensor '%s'", ck.path().c_str(), name.c_str());
    EMBER_REQUIRE(dtype_is_float(t->dtype), "%s: '%s' has dtype %s, expected a float type", t->file.c_str(),
                  t->name.c_str(), dtype_name(t->dtype));
    const auto& s = t->shape;
    bool ok = (s == std::vector<int64_t>{C, 1, K}) || (s == std::vector<int64_t>{C, K, 1}) ||
              (s == std::vector<int64_t>{C, K});
    EMBER_REQUIRE(ok, "%s: '%s' has shape %s, expected [%lld, 1, %lld] (HF) or [%lld, %lld, 1] (MLX)", t->file.c_str(),
                  t->name.c_str(), t->shape_str().c_str(), (long long)C, (long long)K, (long long)C, (long long)K);
    std::vector<float> v(C * K);  // all three layouts have the same element order: c-major, then k
    for (int64_t i = 0; i < C * K; ++i) v[i] = load_float(t->data, t->dtype, i);
    return v;
}

// MLX files already contain 1 + w for the zero-centred norms; HF files do not. MLX conv weights are [C, K, 1].
bool norms_have_offset(const Checkpoint& ck, const Qwen35Config& c) {
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        if (c.layer_types[l] != LayerType::LINEAR_ATTENTION) continue;
        const TensorInfo* t = ck.find(lp(l, "linear_attn.conv1d.weight"));
        if (t && t->shape.size() == 3) return t->shape[2] == 1 && t->shape[1] != 1;
    }
    return c.quant.present;  // no GDN layer to tell: quantized files come from MLX
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> Qwen35::load(const std::string& dir, const nlohmann::json& config) {
    auto m = std::make_unique<Qwen35>();
    EMBER_ASSIGN(m->cfg_, Qwen35Config::from_json(config, dir + "/config.json"));
    const Qwen35Config& c = m->cfg_;
    EMBER_ASSIGN(m->ckpt_, Checkpoint::open(dir, c.quant));
    const Checkpoint& ck = *m->ckpt_;
    const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    const float off = norms_have_offset(ck, c) ? 0.0f : 1.0f;

    Qwen35Weights& w = m->w_;
    EMBER_ASSIGN(w.embed, ck.linear("model.embed_tokens", V, H));
    if (ck.has("lm_head.weight")) {
        EMBER_ASSIGN(w.lm_head, ck.linear("lm_head", V, H));
    } else {
        EMBER_REQUIRE(c.tie_word_embeddings, "%s: no lm_head.weight and tie_word_embeddings is false", dir.c_str());
        w.lm_head = w.embed;
    }
    EMBER_ASSIGN(w.final_norm, ck.vec("model.norm.weight", H, off));
    const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
    const int64_t nv = c.linear_num_value_heads, dv = c.linear_value_head_dim, K = c.linear_conv_kernel_dim;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        Qwen35Layer L;
        L.type = c.layer_types[l];
        EMBER_ASSIGN(L.input_norm, ck.vec(lp(l, "input_layernorm.weight"), H, off));
        EMBER_ASSIGN(L.post_norm, ck.vec(lp(l, "post_attention_layernorm.weight"), H, off));
        EMBER_ASSIGN(L.mlp.gate_proj, ck.linear(lp(l, "mlp.gate_proj"), I, H));
        EMBER_ASSIGN(L.mlp.up_proj, ck.linear(lp(l, "mlp.up_proj"), I, H));
        EMBER_ASSIGN(L.mlp.down_proj, ck.linear(lp(l, "mlp.down_proj"), H, I));
        if (L.type == LayerType::FULL_ATTENTION) {
            GatedAttentionWeights& a = L.attn;
            EMBER_ASSIGN(a.q_proj, ck.linear(lp(l, "self_attn.q_proj"), nh * hd * 2, H));
            EMBER_ASSIGN(a.k_proj, ck.linear(lp(l, "self_attn.k_proj"), nkv * hd, H));
            EMBER_ASSIGN(a.v_proj, ck.linear(lp(l, "self_attn.v_proj"), nkv * hd, H));
            EMBER_ASSIGN(a.o_proj, ck.linear(lp(l, "self_attn.o_proj"), H, nh * hd));
            EMBER_ASSIGN(a.q_norm, ck.vec(lp(l, "self_attn.q_norm.weight"), hd, off));
            EMBER_ASSIGN(a.k_norm, ck.vec(lp(l, "self_attn.k_norm.weight"), hd, off));
        } else {
            GatedDeltaNetWeights& g = L.gdn;
            EMBER_ASSIGN(g.in_proj_qkv, ck.linear(lp(l, "linear_attn.in_proj_qkv"), c.conv_dim(), H));
            EMBER_ASSIGN(g.in_proj_z, ck.linear(lp(l, "linear_attn.in_proj_z"), nv * dv, H));
            EMBER_ASSIGN(g.in_proj_b, ck.linear(lp(l, "linear_attn.in_proj_b"), nv, H));
            EMBER_ASSIGN(g.in_proj_a, ck.linear(lp(l, "linear_attn.in_proj_a"), nv, H));
            EMBER_ASSIGN(g.out_proj, ck.linear(lp(l, "linear_attn.out_proj"), H, nv * dv));
            EMBER_ASSIGN(g.conv, load_conv(ck, lp(l, "linear_attn.conv1d.weight"), c.conv_dim(), K));
            EMBER_ASSIGN(g.A_log, ck.vec(lp(l, "linear_attn.A_log"), nv));
            EMBER_ASSIGN(g.dt_bias, ck.vec(lp(l, "linear_attn.dt_bias"), nv));
            EMBER_ASSIGN(g.norm, ck.vec(lp(l, "linear_attn.norm.weight"), dv));  // plain weight: no offset
        }
        w.layers.push_back(std::move(L));
    }
    std::string fmt = "dense " + std::string(dtype_name(w.embed.dtype));
    if (c.quant.present) fmt = strfmt("MLX affine %d-bit, group %d", c.quant.bits, c.quant.group_size);
    if (!c.quant.overrides.empty()) fmt += strfmt(" (+%zu per-module overrides)", c.quant.overrides.size());
    m->finish_info(dir, fmt);
    m->info_.details += strfmt("tensors skipped: %lld vision, %lld MTP (recognised, not used yet)\n",
                               (long long)ck.n_vision_tensors(), (long long)ck.n_mtp_tensors());
    for (const auto& u : ck.unused()) m->info_.details += "unused tensor: " + u + "\n";
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember
