// Qwen3.5 saved-session hooks: the state as tensors (models/state_io.h) and the weights' fingerprint.
#include "models/qwen35.h"
#include "models/state_io.h"

namespace ember {

std::vector<StateTensor> Qwen35::state_layout(int64_t pos) const {
    std::vector<StateTensor> t;
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
        if (cfg_.layer_types[l] == LayerType::LINEAR_ATTENTION) gdn_layout(l, gdn_shape_, t);
        else kv_layout(l, attn_shape_.n_kv, pos, attn_shape_.head_dim, t);
    }
    return t;
}

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

Expected<std::vector<StateTensor>> Qwen35::export_state(const ModelState& state) const {
    auto* st = dynamic_cast<const Qwen35State*>(&state);
    EMBER_REQUIRE(st != nullptr, "export_state: state does not belong to a Qwen3.5 model");
    std::vector<StateTensor> t = state_layout(st->pos);
    size_t i = 0;
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l, i += 2) {
        if (cfg_.layer_types[l] == LayerType::LINEAR_ATTENTION) gdn_export(st->gdn[l], &t[i]);
        else kv_export(st->kv[l], st->pos, &t[i]);
    }
    return t;
}

Status Qwen35::import_state(ModelState& state, int64_t pos, const std::vector<StateTensor>& t) const {
    auto* st = dynamic_cast<Qwen35State*>(&state);
    EMBER_REQUIRE(st != nullptr, "import_state: state does not belong to a Qwen3.5 model");
    EMBER_REQUIRE(t.size() == 2 * static_cast<size_t>(cfg_.num_hidden_layers), "import_state: %zu tensors", t.size());
    auto fresh = new_state();
    Qwen35State& s = static_cast<Qwen35State&>(*fresh);
    size_t i = 0;
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l, i += 2) {
        if (cfg_.layer_types[l] == LayerType::LINEAR_ATTENTION) gdn_import(s.gdn[l], &t[i]);
        else kv_import(s.kv[l], pos, &t[i]);
    }
    st->kv = std::move(s.kv);
    st->gdn = std::move(s.gdn);
    st->pos = pos;
    return Status::ok();
}

}  // namespace ember
