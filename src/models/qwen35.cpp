// Qwen3.5 as a decoder (models/decoder.h), qwen35.md §2.3:
//   h   = x + Mixer_l(RMSNorm_in(x))        Mixer_l ∈ {GatedDeltaNet, GatedAttention}
//   out = h + SwiGLU(RMSNorm_post(h))
//   logits = LMHead(RMSNorm_final(h_L))
// The norms' 1 + w is folded in at load; the forward itself is decoder_forward, on every backend.
#include "models/qwen35.h"

namespace ember {

void Qwen35::finish_def() {
    DecoderDef d;
    d.embed = &w_.embed;
    d.head = &w_.lm_head;
    d.final_norm = &w_.final_norm;
    d.hidden = cfg_.hidden_size;
    d.intermediate = cfg_.intermediate_size;
    d.vocab = cfg_.vocab_size;
    d.context = cfg_.max_position_embeddings;
    d.eps = cfg_.rms_norm_eps;
    d.gattn = &attn_shape_;
    d.gdn = &gdn_shape_;
    d.head_in_repack_rule = false;  // a Q6_K head (beside Q4_0 layers) must not keep the layers unrepacked
    for (const Qwen35Layer& L : w_.layers) {
        DecoderLayer dl;
        dl.mixer_norm = &L.input_norm;
        dl.mlp_norm = &L.post_norm;
        dl.mlp = &L.mlp;
        if (L.type == LayerType::FULL_ATTENTION) {
            dl.mixer = MixerKind::GATED_ATTENTION;
            dl.gattn = &L.attn;
        } else {
            dl.mixer = MixerKind::GATED_DELTA_NET;
            dl.gdn = &L.gdn;
        }
        d.layers.push_back(dl);
    }
    set_def(std::move(d));
}

}  // namespace ember
