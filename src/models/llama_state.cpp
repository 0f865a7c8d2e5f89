// The Llama family's weights' fingerprint (saved sessions refuse a file from other weights; the state's tensors
// are the decoder's, models/decoder.cpp).
#include "models/llama.h"
#include "models/state_io.h"

namespace ember {

uint64_t Llama::weights_fingerprint() const {
    Fingerprint f;
    f.str(cfg_.arch);
    f.weight(embed_), f.weight(head_), f.floats(out_norm_), f.floats(shape_.freq_factors);
    for (const LlamaLayer& L : layers_) {
        f.floats(L.attn_norm), f.floats(L.ffn_norm);
        for (const Weight* w : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj, &L.mlp.gate_proj,
                                &L.mlp.up_proj, &L.mlp.down_proj})
            f.weight(*w);
        for (const auto* v : {&L.attn.q_bias, &L.attn.k_bias, &L.attn.v_bias, &L.attn.q_norm, &L.attn.k_norm})
            f.floats(*v);
    }
    return f.value();
}

}  // namespace ember
