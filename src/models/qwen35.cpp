// Qwen3.5 forward pass on the CPU (fp32 activations), qwen35.md §2.3:
//   h   = x + Mixer_l(RMSNorm_in(x))        Mixer_l ∈ {GatedDeltaNet, GatedAttention}
//   out = h + SwiGLU(RMSNorm_post(h))
//   logits = LMHead(RMSNorm_final(h_L))
#include "models/qwen35.h"

#include <cstring>

#include "ops/linear/linear.h"
#include "ops/norm/norm.h"

namespace ember {

std::unique_ptr<ModelState> Qwen35::new_state() const {
    auto st = std::make_unique<Qwen35State>();
    st->kv.resize(cfg_.num_hidden_layers);
    st->gdn.resize(cfg_.num_hidden_layers);
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
        if (cfg_.layer_types[l] == LayerType::LINEAR_ATTENTION) {
            st->gdn[l].init(gdn_shape_);
        } else {
            st->kv[l].n_kv = attn_shape_.n_kv;
            st->kv[l].head_dim = attn_shape_.head_dim;
        }
    }
    return st;
}

// x [n, hidden] in place.
void Qwen35::layer(int l, Qwen35State& st, float* x, int64_t n) const {
    const Qwen35Layer& L = w_.layers[l];
    const int64_t H = cfg_.hidden_size;
    std::vector<float> xn(n * H), y(n * H);
    rmsnorm(x, L.input_norm.data(), xn.data(), n, H, cfg_.rms_norm_eps);
    if (L.type == LayerType::LINEAR_ATTENTION)
        gated_delta_net(L.gdn, gdn_shape_, st.gdn[l], xn.data(), n, y.data());
    else
        gated_attention(L.attn, attn_shape_, st.kv[l], st.pos, xn.data(), n, y.data());
    for (int64_t i = 0; i < n * H; ++i) x[i] += y[i];
    rmsnorm(x, L.post_norm.data(), xn.data(), n, H, cfg_.rms_norm_eps);
    swiglu_mlp(L.mlp, xn.data(), n, y.data());
    for (int64_t i = 0; i < n * H; ++i) x[i] += y[i];
}

Status Qwen35::forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const {
    auto* st = dynamic_cast<Qwen35State*>(&state);
    EMBER_REQUIRE(st != nullptr, "forward: state does not belong to a Qwen3.5 model");
    EMBER_REQUIRE(n > 0, "forward: no tokens");
    EMBER_REQUIRE(st->pos + n <= cfg_.max_position_embeddings,
                  "context full: %lld + %lld tokens exceed the model's context of %lld", (long long)st->pos,
                  (long long)n, (long long)cfg_.max_position_embeddings);
    const int64_t H = cfg_.hidden_size;
    for (int64_t t = 0; t < n; ++t)
        EMBER_REQUIRE(tokens[t] >= 0 && tokens[t] < cfg_.vocab_size, "token id %d at position %lld is out of range [0, %lld)",
                      tokens[t], (long long)t, (long long)cfg_.vocab_size);
    std::vector<float> x(n * H);
    for (int64_t t = 0; t < n; ++t) weight_row(w_.embed, tokens[t], &x[t * H]);
    for (int l = 0; l < static_cast<int>(cfg_.num_hidden_layers); ++l) layer(l, *st, x.data(), n);
    st->pos += n;
    const int64_t rows = all_logits ? n : 1;
    const float* last = all_logits ? x.data() : &x[(n - 1) * H];
    std::vector<float> xn(rows * H);
    rmsnorm(last, w_.final_norm.data(), xn.data(), rows, H, cfg_.rms_norm_eps);
    linear(w_.lm_head, xn.data(), rows, logits);
    return Status::ok();
}

}  // namespace ember
