// Qwen35::finish_info: layer shapes for the forward pass and the facts `ember info` prints.
#include "models/qwen35.h"

namespace ember {

namespace {
int64_t params(const Weight& w) { return w.rows * w.cols; }
}  // namespace

void Qwen35::finish_info(const std::string& source, const std::string& format) {
    const Qwen35Config& c = cfg_;
    attn_shape_ = {c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rotary_dim(),
                   c.rope_theta, c.rms_norm_eps};
    gdn_shape_.hidden = c.hidden_size;
    gdn_shape_.conv_kernel = c.linear_conv_kernel_dim;
    gdn_shape_.heads = {c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim,
                        c.linear_value_head_dim, head_map_};
    gdn_shape_.eps = c.rms_norm_eps;

    ModelInfo& i = info_;
    i.architecture = "qwen3_5 (" + (c.architecture.empty() ? c.model_type : c.architecture) + ")";
    i.source = source;
    i.weight_format = format;
    i.vocab_size = c.vocab_size;
    i.hidden_size = c.hidden_size;
    i.num_layers = c.num_hidden_layers;
    i.max_context = c.max_position_embeddings;
    const bool tied = w_.lm_head.data == w_.embed.data;
    int64_t n = params(w_.embed) + (tied ? 0 : params(w_.lm_head)) + c.hidden_size;
    // Decode reads one embedding row and the whole head.
    int64_t bytes = w_.embed.total_bytes() / std::max<int64_t>(1, w_.embed.rows) + w_.lm_head.total_bytes();
    auto add = [&](const Weight& w) { n += params(w); bytes += w.total_bytes(); };
    for (const auto& L : w_.layers) {
        n += 2 * c.hidden_size;
        for (const Weight* w : {&L.mlp.gate_proj, &L.mlp.up_proj, &L.mlp.down_proj}) add(*w);
        if (L.type == LayerType::FULL_ATTENTION) {
            for (const Weight* w : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj}) add(*w);
            n += 2 * c.head_dim;
        } else {
            const auto& g = L.gdn;
            for (const Weight* w : {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a, &g.out_proj}) add(*w);
            n += static_cast<int64_t>(g.conv.size() + g.A_log.size() + g.dt_bias.size() + g.norm.size());
        }
    }
    i.n_params = n;
    i.weight_bytes = bytes;
    i.state_bytes = c.n_linear_layers() * 4 *
                    ((c.linear_conv_kernel_dim - 1) * c.conv_dim() +
                     c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim);
    i.kv_bytes_per_token = c.n_full_layers() * 2 * c.num_key_value_heads * c.head_dim * 4;
    std::string pattern;
    for (auto t : c.layer_types) pattern += t == LayerType::FULL_ATTENTION ? 'A' : 'L';
    i.details = strfmt(
        "layers: %lld (%lld Gated DeltaNet 'L' + %lld gated attention 'A'): %s\n"
        "attention: %lld q heads, %lld kv heads, head_dim %lld, rotary dims %lld, theta %g\n"
        "delta net: %lld key heads x %lld, %lld value heads x %lld, conv kernel %lld\n"
        "mlp: intermediate %lld; vocab %lld; head %s; rms eps %g\n",
        (long long)c.num_hidden_layers, (long long)c.n_linear_layers(), (long long)c.n_full_layers(),
        pattern.c_str(), (long long)c.num_attention_heads, (long long)c.num_key_value_heads, (long long)c.head_dim,
        (long long)c.rotary_dim(), c.rope_theta, (long long)c.linear_num_key_heads, (long long)c.linear_key_head_dim,
        (long long)c.linear_num_value_heads, (long long)c.linear_value_head_dim, (long long)c.linear_conv_kernel_dim,
        (long long)c.intermediate_size, (long long)c.vocab_size, tied ? "tied to the embedding" : "separate",
        c.rms_norm_eps);
    finish_def();
}

}  // namespace ember
