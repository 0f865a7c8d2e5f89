// The one forward definition of every architecture ember runs: a pre-norm decoder of mixer and MLP blocks.
//   for each layer l:  x += Mixer_l(RMSNorm(x, mixer_norm_l));  x += SwiGLU_l(RMSNorm(x, mlp_norm_l))
//   logits = Head(RMSNorm(x, final_norm))
// An architecture (models/qwen35.h, models/llama.h) is a loader: it reads its files into weights and describes
// them as a DecoderDef (which mixer each layer has, its norms, the shapes); decoder_forward() below is the layer
// order, and each backend supplies the blocks — the CPU one here (decoder.cpp, over layers/), the CUDA one in
// backend/cuda/cuda_decoder.cpp (its fusions, stacked projections, graph capture and batched rows).
// Adding an architecture: a model file that fills a DecoderDef, and one line in models/registry.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/attention.h"
#include "layers/gated_attention.h"
#include "layers/gated_delta_net.h"
#include "layers/swiglu_mlp.h"
#include "models/model.h"

namespace ember {

enum class MixerKind {
    ATTENTION,        // layers/attention.h (Llama family): q/k/v (+ biases, q/k norm), RoPE, GQA, o_proj
    GATED_ATTENTION,  // layers/gated_attention.h (Qwen3.5 full attention): q | gate, q/k norm, partial RoPE, gate
    GATED_DELTA_NET,  // layers/gated_delta_net.h (Qwen3.5 linear attention): recurrent state + conv state
};

// Whether a layer of this mixer keeps a KV cache (both attention kinds) rather than a recurrent state.
inline bool is_attention(MixerKind k) { return k != MixerKind::GATED_DELTA_NET; }

// One layer: views into the architecture's weights (exactly one of attn / gattn / gdn is set, by `mixer`).
struct DecoderLayer {
    MixerKind mixer = MixerKind::ATTENTION;
    const std::vector<float>* mixer_norm = nullptr;  // [hidden], used as stored (an architecture folds any 1 + w)
    const std::vector<float>* mlp_norm = nullptr;    // [hidden]
    const AttentionWeights* attn = nullptr;
    const GatedAttentionWeights* gattn = nullptr;
    const GatedDeltaNetWeights* gdn = nullptr;
    const SwiGluWeights* mlp = nullptr;
};

struct DecoderDef {
    const Weight* embed = nullptr;                   // [vocab, hidden]
    const Weight* head = nullptr;                    // [vocab, hidden] (the embedding itself when tied)
    const std::vector<float>* final_norm = nullptr;  // [hidden]
    int64_t hidden = 0, intermediate = 0, vocab = 0, context = 0;
    float eps = 1e-6f;  // every RMSNorm of the blocks and the final one
    std::vector<DecoderLayer> layers;
    // The shapes of the mixers the layers use (null where no layer has that mixer).
    const StdAttentionShape* attn = nullptr;
    const AttentionShape* gattn = nullptr;
    const DeltaNetShape* gdn = nullptr;
    // CUDA upload rule (backend/cuda/cuda_model.h prefer_fusable_uploads): whether the LM head's format takes part
    // in choosing to repack every GGML matrix. Qwen3.5: no (measured: a Q6_K head must not keep the layers on the
    // block GEMV); the Llama family: yes (unmeasured, kept as it was).
    bool head_in_repack_rule = true;
};

// A sequence's state on the CPU: one KV cache per attention layer, one recurrent state per delta-net layer
// (indexed by layer; the other kind's entry stays empty).
struct DecoderState : ModelState {
    std::vector<KVCache> kv;
    std::vector<DeltaNetState> gdn;
};

// The layer order. B, the backend, runs the blocks on its own buffers:
//   embed()            x = the rows of the embedding for the step's tokens
//   mixer(l, L)        x += Mixer_l(RMSNorm(x, *L.mixer_norm))   (the mixer's state of layer l advances)
//   mlp(l, L)          x += SwiGLU_l(RMSNorm(x, *L.mlp_norm))
//   head()             logits = Head(RMSNorm(x, final_norm)) (the last row, or every row)
// A backend may defer a residual add or fuse a norm into the next block's products (CUDA does), as long as what
// each block computes is the line above.
template <class B>
void decoder_forward(const DecoderDef& d, B& b) {
    b.embed();
    for (size_t l = 0; l < d.layers.size(); ++l) {
        b.mixer(l, d.layers[l]);
        b.mlp(l, d.layers[l]);
    }
    b.head();
}

// The CausalLM of a DecoderDef on the CPU (fp32 activations): forward, states and saved sessions. An architecture
// derives from it, loads its weights, fills def_ (set_def) and its ModelInfo.
class Decoder : public CausalLM {
public:
    const DecoderDef& def() const { return def_; }
    std::unique_ptr<ModelState> new_state() const override;
    Status forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits,
                   bool all_logits) const override;
    std::vector<StateTensor> state_layout(int64_t pos) const override;
    Expected<std::vector<StateTensor>> export_state(const ModelState& state) const override;
    Status import_state(ModelState& state, int64_t pos, const std::vector<StateTensor>& tensors) const override;
    // The batched step on the CPU: every row through decoder_forward at once (the projections and MLPs read each
    // weight once for all rows; each sequence's mixer core on its own state), in the generic pool's states.
    // A row's logits equal the sequence decoded alone up to the summation order of linear()'s kernels for other
    // row counts (the AVX-512 one-row kernel, 2-4-row tiles).
    Status batch_decode(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                        float* logits) const override;
    // The mixed step the same way: every sequence's rows (a prompt chunk, or one decode token) in one pass.
    Status batch_step(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens, int64_t seqs,
                      float* logits, int32_t* ids = nullptr, const uint8_t* want = nullptr) const override;
    // Mixed rounds on the CPU are off by default: on a 2-core machine (SmolLM2 Q4_1, `ember bench --engine 4
    // --batch-prompt 200 -n 32`) one pass per round was no faster (12-08: within the ±5 % noise) and the first
    // tokens came later (bench/results/2026-12-07-mixed-steps.md, 2026-12-08-gemv-x-staging.md).
    // EMBER_MIXED_STEP=1 at load, or CausalLM::set_mixed_steps, turns them on.
    bool batch_mixed() const override;

protected:
    // The rows of lens[i] tokens of each sequence i through one decoder_forward (arguments already checked);
    // logits: [seqs, vocab] of each sequence's last row, or null.
    Status run_segments(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                        int64_t seqs, float* logits) const;
    // Checks the description (every layer's mixer weights and the shape it needs are there) and keeps it.
    void set_def(DecoderDef d);
    DecoderDef def_;
};

}  // namespace ember
