// Qwen3.5 from a llama.cpp GGUF file (qwen35.md §3c): metadata → Qwen35Config, tensors → weights.
// Differences from HF handled here: norm weights already contain the +1 (used as stored; ssm_norm is plain in
// both), ssm_a = −exp(A_log) (A_log = log(−ssm_a)), conv {K, C} = our [C, K] rows, and value heads in the
// converter's tiled order (k_head(h) = h % nk), which the delta-rule ops take as KeyHeadMap::TILED — every
// value-head-indexed tensor (v rows of attn_qkv, attn_gate, ssm_alpha/beta, ssm_a, ssm_dt, ssm_out columns,
// conv v channels) is already consistently permuted in the file, so they are used as stored.
#include <cmath>

#include "models/config_limits.h"
#include "models/gguf_weights.h"
#include "models/qwen35.h"

namespace ember {

namespace {
std::string blk(int64_t l, const char* rest) { return "blk." + std::to_string(l) + "." + rest; }
}  // namespace

Expected<std::unique_ptr<CausalLM>> Qwen35::load_gguf(std::shared_ptr<const GgufFile> f, const LoadOptions& opt) {
    auto m = std::make_unique<Qwen35>();
    Qwen35Config& c = m->cfg_;
    const char* p = f->path().c_str();
    const std::string a = "qwen35.";
    EMBER_ASSIGN(int64_t blocks, f->get_int(a + "block_count"));
    EMBER_ASSIGN(int64_t nextn, f->get_int_or(a + "nextn_predict_layers", 0));
    EMBER_TRY(check_limit(f->path(), "qwen35.block_count", blocks, kMaxLayers));  // before blocks − nextn
    EMBER_TRY(check_limit(f->path(), "qwen35.nextn_predict_layers", nextn, blocks));
    c.num_hidden_layers = blocks - nextn;
    c.mtp_num_hidden_layers = nextn;
    EMBER_ASSIGN(c.hidden_size, f->get_int(a + "embedding_length"));
    EMBER_ASSIGN(c.intermediate_size, f->get_int(a + "feed_forward_length"));
    EMBER_ASSIGN(c.num_attention_heads, f->get_int(a + "attention.head_count"));
    EMBER_ASSIGN(c.num_key_value_heads, f->get_int(a + "attention.head_count_kv"));
    EMBER_ASSIGN(c.head_dim, f->get_int(a + "attention.key_length"));
    EMBER_ASSIGN(c.linear_conv_kernel_dim, f->get_int(a + "ssm.conv_kernel"));
    EMBER_ASSIGN(c.linear_key_head_dim, f->get_int(a + "ssm.state_size"));
    EMBER_ASSIGN(c.linear_num_key_heads, f->get_int(a + "ssm.group_count"));
    EMBER_ASSIGN(c.linear_num_value_heads, f->get_int(a + "ssm.time_step_rank"));
    EMBER_ASSIGN(int64_t inner, f->get_int(a + "ssm.inner_size"));
    EMBER_REQUIRE(c.linear_num_value_heads > 0 && inner % c.linear_num_value_heads == 0,
                  "%s: ssm.inner_size %lld is not a multiple of ssm.time_step_rank %lld", p, (long long)inner,
                  (long long)c.linear_num_value_heads);
    c.linear_value_head_dim = inner / c.linear_num_value_heads;
    EMBER_ASSIGN(double eps, f->get_float(a + "attention.layer_norm_rms_epsilon"));
    EMBER_ASSIGN(double theta, f->get_float_or(a + "rope.freq_base", 1e7));
    EMBER_ASSIGN(int64_t rot, f->get_int_or(a + "rope.dimension_count", c.head_dim / 4));
    EMBER_ASSIGN(c.max_position_embeddings, f->get_int_or(a + "context_length", 262144));
    c.rms_norm_eps = static_cast<float>(eps);
    c.rope_theta = static_cast<float>(theta);
    EMBER_REQUIRE(c.head_dim > 0 && rot > 0 && rot <= c.head_dim, "%s: rope.dimension_count %lld, key_length %lld", p,
                  (long long)rot, (long long)c.head_dim);
    c.partial_rotary_factor = static_cast<float>(rot) / static_cast<float>(c.head_dim);
    const GgufTensor* emb = f->tensor("token_embd.weight");
    EMBER_REQUIRE(emb && emb->ne.size() == 2, "%s: missing or non-2-D tensor 'token_embd.weight'", p);
    c.vocab_size = emb->ne[1];
    c.tie_word_embeddings = f->tensor("output.weight") == nullptr;
    EMBER_TRY(c.check_limits(f->path()));  // before the num_hidden_layers-long loop below
    // Layer types: a layer is linear attention when it has the GDN tensors (cross-checked with the metadata array).
    c.layer_types.clear();
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        c.layer_types.push_back(f->tensor(blk(l, "ssm_a")) ? LayerType::LINEAR_ATTENTION : LayerType::FULL_ATTENTION);
    if (const GgufValue* rec = f->find(a + "attention.recurrent_layers")) {  // array of bool
        for (int64_t l = 0; l < c.num_hidden_layers && l < int64_t(rec->size()); ++l) {
            const std::optional<bool> r = rec->bool_at(size_t(l));
            EMBER_REQUIRE(r.has_value(), "%s: attention.recurrent_layers is not an array of bool", p);
            EMBER_REQUIRE(*r == (c.layer_types[l] == LayerType::LINEAR_ATTENTION),
                          "%s: attention.recurrent_layers[%lld] disagrees with the tensors of block %lld", p,
                          (long long)l, (long long)l);
        }
    }
    c.model_type = "qwen35 (GGUF)";
    EMBER_TRY(c.validate(f->path()));

    GgufWeights g(f, opt.q8_activations);
    const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
    const int64_t nv = c.linear_num_value_heads, dv = c.linear_value_head_dim, K = c.linear_conv_kernel_dim;
    Qwen35Weights& w = m->w_;
    EMBER_ASSIGN(w.embed, g.matrix("token_embd.weight", V, H));
    if (c.tie_word_embeddings) w.lm_head = w.embed;
    else { EMBER_ASSIGN(w.lm_head, g.matrix("output.weight", V, H)); }
    EMBER_ASSIGN(w.final_norm, g.vec("output_norm.weight", H));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        Qwen35Layer L;
        L.type = c.layer_types[l];
        EMBER_ASSIGN(L.input_norm, g.vec(blk(l, "attn_norm.weight"), H));
        EMBER_ASSIGN(L.post_norm, g.vec(blk(l, "post_attention_norm.weight"), H));
        EMBER_ASSIGN(L.mlp.gate_proj, g.matrix(blk(l, "ffn_gate.weight"), I, H));
        EMBER_ASSIGN(L.mlp.up_proj, g.matrix(blk(l, "ffn_up.weight"), I, H));
        EMBER_ASSIGN(L.mlp.down_proj, g.matrix(blk(l, "ffn_down.weight"), H, I));
        if (L.type == LayerType::FULL_ATTENTION) {
            GatedAttentionWeights& at = L.attn;
            EMBER_ASSIGN(at.q_proj, g.matrix(blk(l, "attn_q.weight"), nh * hd * 2, H));
            EMBER_ASSIGN(at.k_proj, g.matrix(blk(l, "attn_k.weight"), nkv * hd, H));
            EMBER_ASSIGN(at.v_proj, g.matrix(blk(l, "attn_v.weight"), nkv * hd, H));
            EMBER_ASSIGN(at.o_proj, g.matrix(blk(l, "attn_output.weight"), H, nh * hd));
            EMBER_ASSIGN(at.q_norm, g.vec(blk(l, "attn_q_norm.weight"), hd));
            EMBER_ASSIGN(at.k_norm, g.vec(blk(l, "attn_k_norm.weight"), hd));
        } else {
            GatedDeltaNetWeights& gd = L.gdn;
            EMBER_ASSIGN(gd.in_proj_qkv, g.matrix(blk(l, "attn_qkv.weight"), c.conv_dim(), H));
            EMBER_ASSIGN(gd.in_proj_z, g.matrix(blk(l, "attn_gate.weight"), nv * dv, H));
            EMBER_ASSIGN(gd.in_proj_b, g.matrix(blk(l, "ssm_beta.weight"), nv, H));
            EMBER_ASSIGN(gd.in_proj_a, g.matrix(blk(l, "ssm_alpha.weight"), nv, H));
            EMBER_ASSIGN(gd.out_proj, g.matrix(blk(l, "ssm_out.weight"), H, nv * dv));
            EMBER_ASSIGN(gd.conv, g.vec(blk(l, "ssm_conv1d.weight"), c.conv_dim() * K));  // ne {K, C} = [C, K]
            EMBER_ASSIGN(std::vector<float> ssm_a, g.vec(blk(l, "ssm_a"), nv));
            gd.A_log.resize(ssm_a.size());
            for (size_t i = 0; i < ssm_a.size(); ++i) {
                EMBER_REQUIRE(ssm_a[i] < 0.f, "%s: blk.%lld.ssm_a[%zu] = %g, expected −exp(A_log) < 0", p, (long long)l,
                              i, double(ssm_a[i]));
                gd.A_log[i] = std::log(-ssm_a[i]);
            }
            EMBER_ASSIGN(gd.dt_bias, g.vec(blk(l, "ssm_dt.bias"), nv));
            EMBER_ASSIGN(gd.norm, g.vec(blk(l, "ssm_norm.weight"), dv));
        }
        w.layers.push_back(std::move(L));
    }
    m->gguf_ = f;
    m->head_map_ = KeyHeadMap::TILED;
    m->finish_info(f->path(), "GGUF: " + g.type_summary());
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember
