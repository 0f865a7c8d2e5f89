// Llama-family model: GGUF loading (metadata → config, tensors → weights), described as a decoder
// (models/decoder.h: its forward is decoder_forward, on every backend).
#include "models/llama.h"

#include <cmath>

#include "models/config_limits.h"

namespace ember {

namespace {

std::string blk(int64_t l, const char* rest) { return "blk." + std::to_string(l) + "." + rest; }

Expected<LlamaConfig> read_config(const GgufFile& f) {
    LlamaConfig c;
    EMBER_ASSIGN(c.arch, f.get_string("general.architecture"));
    const std::string a = c.arch + ".";
    EMBER_ASSIGN(c.n_layers, f.get_int(a + "block_count"));
    EMBER_ASSIGN(c.hidden, f.get_int(a + "embedding_length"));
    EMBER_ASSIGN(c.ffn, f.get_int(a + "feed_forward_length"));
    EMBER_ASSIGN(c.n_heads, f.get_int(a + "attention.head_count"));
    EMBER_ASSIGN(c.n_kv, f.get_int_or(a + "attention.head_count_kv", c.n_heads));
    EMBER_ASSIGN(c.context, f.get_int_or(a + "context_length", 4096));
    EMBER_ASSIGN(double eps, f.get_float(a + "attention.layer_norm_rms_epsilon"));
    EMBER_ASSIGN(double theta, f.get_float_or(a + "rope.freq_base", 10000.0));
    c.eps = static_cast<float>(eps);
    c.rope_theta = static_cast<float>(theta);
    const char* p = f.path().c_str();
    EMBER_REQUIRE(std::isfinite(c.rope_theta) && c.rope_theta > 0, "%s: %srope.freq_base %g must be a positive number", p,
                  a.c_str(), theta);
    EMBER_TRY(check_limit(f.path(), (a + "block_count").c_str(), c.n_layers, kMaxLayers));
    EMBER_TRY(check_limit(f.path(), (a + "embedding_length").c_str(), c.hidden, kMaxWidth));
    EMBER_TRY(check_limit(f.path(), (a + "feed_forward_length").c_str(), c.ffn, kMaxWidth));
    EMBER_TRY(check_limit(f.path(), (a + "attention.head_count").c_str(), c.n_heads, kMaxHeads));
    EMBER_TRY(check_limit(f.path(), (a + "attention.head_count_kv").c_str(), c.n_kv, kMaxHeads));
    EMBER_REQUIRE(c.n_layers > 0 && c.hidden > 0 && c.ffn > 0 && c.n_heads > 0 && c.n_kv > 0,
                  "%s: bad %s dimensions (block_count %lld, embedding_length %lld, feed_forward_length %lld, heads "
                  "%lld/%lld)", p, c.arch.c_str(), (long long)c.n_layers, (long long)c.hidden, (long long)c.ffn,
                  (long long)c.n_heads, (long long)c.n_kv);
    EMBER_REQUIRE(c.n_heads % c.n_kv == 0, "%s: %lld attention heads are not a multiple of %lld kv heads", p,
                  (long long)c.n_heads, (long long)c.n_kv);
    EMBER_ASSIGN(c.head_dim, f.get_int_or(a + "attention.key_length", c.hidden / c.n_heads));
    EMBER_ASSIGN(int64_t vdim, f.get_int_or(a + "attention.value_length", c.head_dim));
    EMBER_REQUIRE(vdim == c.head_dim, "%s: key_length %lld != value_length %lld is not supported", p,
                  (long long)c.head_dim, (long long)vdim);
    EMBER_TRY(check_limit(f.path(), (a + "attention.key_length").c_str(), c.head_dim, kMaxHeadDim));
    EMBER_ASSIGN(c.rot_dim, f.get_int_or(a + "rope.dimension_count", c.head_dim));
    EMBER_REQUIRE(c.head_dim > 0 && c.rot_dim > 0 && c.rot_dim % 2 == 0 && c.rot_dim <= c.head_dim,
                  "%s: rope.dimension_count %lld with head dim %lld", p, (long long)c.rot_dim, (long long)c.head_dim);
    // RoPE scaling (llama.cpp: type default "linear" with factor 0, i.e. none; the old key rope.scale_linear).
    RopeScaling& rs = c.rope_scaling;
    EMBER_ASSIGN(rs.type, f.get_string_or(a + "rope.scaling.type", "none"));
    EMBER_ASSIGN(double factor, f.get_float_or(a + "rope.scaling.factor", 0.0));
    if (factor == 0.0) { EMBER_ASSIGN(factor, f.get_float_or(a + "rope.scale_linear", 0.0)); }
    if (rs.type == "linear" && (factor == 0.0 || factor == 1.0)) rs.type = "none";
    rs.factor = static_cast<float>(factor == 0.0 ? 1.0 : factor);
    if (rs.type == "yarn") {
        EMBER_ASSIGN(rs.orig_ctx, f.get_int_or(a + "rope.scaling.original_context_length", c.context));
        EMBER_ASSIGN(double ext, f.get_float_or(a + "rope.scaling.yarn_ext_factor", 1.0));
        EMBER_ASSIGN(double bf, f.get_float_or(a + "rope.scaling.yarn_beta_fast", 32.0));
        EMBER_ASSIGN(double bs, f.get_float_or(a + "rope.scaling.yarn_beta_slow", 1.0));
        EMBER_ASSIGN(double log_mul, f.get_float_or(a + "rope.scaling.yarn_log_multiplier", 0.0));
        EMBER_REQUIRE(log_mul == 0.0, "%s: yarn rope scaling with yarn_log_multiplier %g (DeepSeek-style mscale) is not "
                      "supported", p, log_mul);
        rs.ext_factor = static_cast<float>(ext), rs.beta_fast = static_cast<float>(bf), rs.beta_slow = static_cast<float>(bs);
    }
    EMBER_ASSIGN(double attn_factor, f.get_float_or(a + "rope.scaling.attn_factor", 1.0));
    rs.attn_factor = static_cast<float>(attn_factor);
    // llama.cpp's `llama` graphs rotate adjacent pairs (its converter permutes HF's q/k rows); qwen2/3 use NeoX.
    c.rope_style = c.arch == "llama" ? RopeStyle::INTERLEAVED : RopeStyle::NEOX;
    const GgufTensor* emb = f.tensor("token_embd.weight");
    EMBER_REQUIRE(emb && emb->ne.size() == 2, "%s: missing or non-2-D tensor 'token_embd.weight'", p);
    c.vocab = emb->ne[1];
    // An empty one (ne[1] = 0, a tensor of no bytes) divided by zero in the info below (found by fuzz_gguf_model).
    EMBER_REQUIRE(c.vocab > 0, "%s: token_embd.weight has no rows (an empty vocabulary)", p);
    EMBER_TRY(check_limit(f.path(), "the vocabulary (token_embd.weight ne[1])", c.vocab, kMaxVocab));
    return c;
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> Llama::load_gguf(std::shared_ptr<const GgufFile> f, const LoadOptions& opt) {
    auto m = std::make_unique<Llama>();
    EMBER_ASSIGN(m->cfg_, read_config(*f));
    const LlamaConfig& c = m->cfg_;
    GgufWeights g(f, opt.q8_activations);
    const int64_t H = c.hidden, d = c.head_dim;
    EMBER_ASSIGN(m->embed_, g.matrix("token_embd.weight", c.vocab, H));
    if (g.has("output.weight")) {
        EMBER_ASSIGN(m->head_, g.matrix("output.weight", c.vocab, H));
    } else {
        m->head_ = m->embed_;  // tied
    }
    EMBER_ASSIGN(m->out_norm_, g.vec("output_norm.weight", H));
    StdAttentionShape& s = m->shape_;
    s.hidden = H; s.n_heads = c.n_heads; s.n_kv = c.n_kv; s.head_dim = d; s.rot_dim = c.rot_dim;
    s.rope_theta = c.rope_theta; s.eps = c.eps; s.rope_style = c.rope_style;
    if (g.has("rope_freqs.weight")) { EMBER_ASSIGN(s.freq_factors, g.vec("rope_freqs.weight", c.rot_dim / 2)); }
    {
        auto mul = apply_rope_scaling(c.rope_scaling, c.rot_dim, d, c.rope_theta, s.freq_factors);
        if (!mul) return errorf("%s: %s", f->path().c_str(), mul.message().c_str());
        s.score_mul = mul.value();
    }
    for (int64_t l = 0; l < c.n_layers; ++l) {
        LlamaLayer L;
        EMBER_ASSIGN(L.attn_norm, g.vec(blk(l, "attn_norm.weight"), H));
        EMBER_ASSIGN(L.ffn_norm, g.vec(blk(l, "ffn_norm.weight"), H));
        EMBER_ASSIGN(L.attn.q_proj, g.matrix(blk(l, "attn_q.weight"), c.n_heads * d, H));
        EMBER_ASSIGN(L.attn.k_proj, g.matrix(blk(l, "attn_k.weight"), c.n_kv * d, H));
        EMBER_ASSIGN(L.attn.v_proj, g.matrix(blk(l, "attn_v.weight"), c.n_kv * d, H));
        EMBER_ASSIGN(L.attn.o_proj, g.matrix(blk(l, "attn_output.weight"), H, c.n_heads * d));
        if (g.has(blk(l, "attn_q.bias"))) {
            EMBER_ASSIGN(L.attn.q_bias, g.vec(blk(l, "attn_q.bias"), c.n_heads * d));
            EMBER_ASSIGN(L.attn.k_bias, g.vec(blk(l, "attn_k.bias"), c.n_kv * d));
            EMBER_ASSIGN(L.attn.v_bias, g.vec(blk(l, "attn_v.bias"), c.n_kv * d));
        }
        if (g.has(blk(l, "attn_q_norm.weight"))) {
            EMBER_ASSIGN(L.attn.q_norm, g.vec(blk(l, "attn_q_norm.weight"), d));
            EMBER_ASSIGN(L.attn.k_norm, g.vec(blk(l, "attn_k_norm.weight"), d));
        }
        EMBER_ASSIGN(L.mlp.gate_proj, g.matrix(blk(l, "ffn_gate.weight"), c.ffn, H));
        EMBER_ASSIGN(L.mlp.up_proj, g.matrix(blk(l, "ffn_up.weight"), c.ffn, H));
        EMBER_ASSIGN(L.mlp.down_proj, g.matrix(blk(l, "ffn_down.weight"), H, c.ffn));
        m->layers_.push_back(std::move(L));
    }
    m->file_ = f;

    ModelInfo& i = m->info_;
    EMBER_ASSIGN(std::string name, f->get_string_or("general.name", ""));
    i.architecture = c.arch + (name.empty() ? "" : " (" + name + ")");
    i.source = f->path();
    i.weight_format = "GGUF: " + g.type_summary();
    i.vocab_size = c.vocab;
    i.hidden_size = H;
    i.num_layers = c.n_layers;
    i.max_context = c.context;
    const bool tied = m->head_.data == m->embed_.data;
    int64_t params = c.vocab * H * (tied ? 1 : 2) + H, bytes = m->embed_.total_bytes() / c.vocab + m->head_.total_bytes();
    for (const auto& L : m->layers_) {
        for (const Weight* w : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj, &L.mlp.gate_proj,
                                &L.mlp.up_proj, &L.mlp.down_proj}) {
            params += w->rows * w->cols;
            bytes += w->total_bytes();
        }
        params += 2 * H;
    }
    i.n_params = params;
    i.weight_bytes = bytes;
    i.kv_bytes_per_token = c.n_layers * 2 * c.n_kv * d * 4;
    i.details = strfmt("layers: %lld; attention: %lld q heads, %lld kv heads, head_dim %lld, rope %s dims %lld theta %g%s%s\n"
                       "mlp: SwiGLU, intermediate %lld; vocab %lld; head %s; rms eps %g\n",
                       (long long)c.n_layers, (long long)c.n_heads, (long long)c.n_kv, (long long)d,
                       c.rope_style == RopeStyle::NEOX ? "neox" : "interleaved", (long long)c.rot_dim, c.rope_theta,
                       c.rope_scaling.type != "none" ? strfmt(" (%s scaling x%g)", c.rope_scaling.type.c_str(),
                                                              c.rope_scaling.factor).c_str()
                       : s.freq_factors.empty()      ? ""
                                                     : " (frequency factors)",
                       m->layers_[0].attn.q_norm.empty() ? "" : ", q/k norm", (long long)c.ffn, (long long)c.vocab,
                       tied ? "tied to the embedding" : "separate", c.eps);
    DecoderDef def;
    def.embed = &m->embed_;
    def.head = &m->head_;
    def.final_norm = &m->out_norm_;
    def.hidden = H;
    def.intermediate = c.ffn;
    def.vocab = c.vocab;
    def.context = c.context;
    def.eps = c.eps;
    def.attn = &m->shape_;
    for (const LlamaLayer& L : m->layers_) {
        DecoderLayer dl;
        dl.mixer = MixerKind::ATTENTION;
        dl.mixer_norm = &L.attn_norm;
        dl.mlp_norm = &L.ffn_norm;
        dl.attn = &L.attn;
        dl.mlp = &L.mlp;
        def.layers.push_back(dl);
    }
    m->set_def(std::move(def));
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember
