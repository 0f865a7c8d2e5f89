// Qwen3.5's weights' fingerprint (saved sessions refuse a file from other weights; the state's tensors are the
// decoder's, models/decoder.cpp).
#include "models/qwen35.h"
#include "models/state_io.h"

namespace ember {

uint64_t Qwen35::weights_fingerprint() const {
    Fingerprint f;
    f.str("qwen3_5");
    f.i64(static_cast<int64_t>(head_map_));
    f.weight(w_.embed), f.weight(w_.lm_head), f.floats(w_.final_norm);
    for (const Qwen35Layer& L : w_.layers) {
        f.i64(static_cast<int64_t>(L.type));
        f.floats(L.input_norm), f.floats(L.post_norm);
        for (const Weight* w : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj, &L.gdn.in_proj_qkv,
                                &L.gdn.in_proj_z, &L.gdn.in_proj_b, &L.gdn.in_proj_a, &L.gdn.out_proj,
                                &L.mlp.gate_proj, &L.mlp.up_proj, &L.mlp.down_proj})
            f.weight(*w);
        f.floats(L.attn.q_norm), f.floats(L.attn.k_norm), f.floats(L.gdn.conv), f.floats(L.gdn.A_log);
        f.floats(L.gdn.dt_bias), f.floats(L.gdn.norm);
    }
    return f.value();
}

}  // namespace ember
