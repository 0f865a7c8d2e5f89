// Llama-family saved-session hooks: the KV caches as tensors (models/state_io.h) and the weights' fingerprint.
#include "models/llama.h"
#include "models/state_io.h"

namespace ember {

std::vector<StateTensor> Llama::state_layout(int64_t pos) const {
    std::vector<StateTensor> t;
    for (int64_t l = 0; l < cfg_.n_layers; ++l) kv_layout(l, shape_.n_kv, pos, shape_.head_dim, t);
    return t;
}

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

Expected<std::vector<StateTensor>> Llama::export_state(const ModelState& state) const {
    auto* st = dynamic_cast<const LlamaState*>(&state);
    EMBER_REQUIRE(st != nullptr, "export_state: state does not belong to a %s model", cfg_.arch.c_str());
    std::vector<StateTensor> t = state_layout(st->pos);
    for (int64_t l = 0; l < cfg_.n_layers; ++l) kv_export(st->kv[l], st->pos, &t[2 * l]);
    return t;
}

Status Llama::import_state(ModelState& state, int64_t pos, const std::vector<StateTensor>& t) const {
    auto* st = dynamic_cast<LlamaState*>(&state);
    EMBER_REQUIRE(st != nullptr, "import_state: state does not belong to a %s model", cfg_.arch.c_str());
    EMBER_REQUIRE(t.size() == 2 * static_cast<size_t>(cfg_.n_layers), "import_state: %zu tensors", t.size());
    auto fresh = new_state();
    LlamaState& s = static_cast<LlamaState&>(*fresh);
    for (int64_t l = 0; l < cfg_.n_layers; ++l) kv_import(s.kv[l], pos, &t[2 * l]);
    st->kv = std::move(s.kv);
    st->pos = pos;
    return Status::ok();
}

}  // namespace ember
