// Qwen3.5 dense hybrid model (Gated DeltaNet + gated full attention), qwen35.md.
#pragma once
#include <memory>
#include <vector>

#include "layers/gated_attention.h"
#include "layers/gated_delta_net.h"
#include "io/gguf.h"
#include "layers/swiglu_mlp.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/model.h"
#include "models/qwen35_config.h"

namespace ember {

struct Qwen35Layer {
    LayerType type;
    std::vector<float> input_norm;  // [hidden] (1 + w) folded in
    std::vector<float> post_norm;   // [hidden]
    GatedAttentionWeights attn;     // FULL_ATTENTION layers
    GatedDeltaNetWeights gdn;       // LINEAR_ATTENTION layers
    SwiGluWeights mlp;
};

struct Qwen35Weights {
    Weight embed;                   // [vocab, hidden]
    Weight lm_head;                 // [vocab, hidden] (== embed when tied)
    std::vector<float> final_norm;  // [hidden]
    std::vector<Qwen35Layer> layers;
};

class Qwen35 : public Decoder {
public:
    static Expected<std::unique_ptr<CausalLM>> load(const std::string& dir, const nlohmann::json& config);
    static Expected<std::unique_ptr<CausalLM>> synthetic(const std::string& preset, uint64_t seed);
    // llama.cpp GGUF (arch `qwen35`, qwen35.md §3c): norms already +1, ssm_a = −exp(A_log), value heads tiled.
    static Expected<std::unique_ptr<CausalLM>> load_gguf(std::shared_ptr<const GgufFile> f, const LoadOptions& opt = {});

    const ModelInfo& info() const override { return info_; }
    uint64_t weights_fingerprint() const override;

    const Qwen35Config& config() const { return cfg_; }
    const Qwen35Weights& weights() const { return w_; }
    const AttentionShape& attention_shape() const { return attn_shape_; }
    const DeltaNetShape& delta_net_shape() const { return gdn_shape_; }

private:
    void finish_info(const std::string& source, const std::string& format);  // shapes, info, then finish_def
    void finish_def();  // the DecoderDef of the loaded weights (qwen35.cpp)

    Qwen35Config cfg_;
    Qwen35Weights w_;
    AttentionShape attn_shape_{};
    DeltaNetShape gdn_shape_{};
    ModelInfo info_;
    std::shared_ptr<Checkpoint> ckpt_;                    // keeps the mapped files alive
    std::shared_ptr<const GgufFile> gguf_;                // (GGUF files)
    KeyHeadMap head_map_ = KeyHeadMap::GROUPED;           // GGUF: TILED (value head h uses key head h % nk)
    std::vector<std::unique_ptr<uint8_t[]>> owned_;       // synthetic weights
};

}  // namespace ember
