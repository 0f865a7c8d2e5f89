// The Llama family of dense transformers from GGUF files: `llama` (Llama 2/3.x, SmolLM, Mistral-style),
// `qwen2`, `qwen3`. Pre-norm blocks:
//   h = x + Attention(RMSNorm_attn(x));   out = h + SwiGLU(RMSNorm_ffn(h));   logits = Head(RMSNorm_out(h_L))
// Attention: layers/attention.h (GQA, RoPE interleaved for `llama` GGUFs / NeoX for qwen2/3, q/k norm for
// qwen3, q/k/v biases for qwen2). Norm weights are used as stored (no +1).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "layers/attention.h"
#include "layers/swiglu_mlp.h"
#include "models/gguf_weights.h"
#include "models/decoder.h"
#include "models/model.h"
#include "ops/rope/rope_scaling.h"

namespace ember {

struct LlamaConfig {
    std::string arch;  // general.architecture
    int64_t n_layers = 0, hidden = 0, ffn = 0, n_heads = 0, n_kv = 0, head_dim = 0, rot_dim = 0, vocab = 0,
            context = 0;
    float eps = 1e-5f, rope_theta = 10000.f;
    RopeStyle rope_style = RopeStyle::NEOX;
    RopeScaling rope_scaling;  // {arch}.rope.scaling.* (linear, yarn)
};

struct LlamaLayer {
    std::vector<float> attn_norm, ffn_norm;  // [hidden]
    AttentionWeights attn;
    SwiGluWeights mlp;
};

class Llama : public Decoder {
public:
    static Expected<std::unique_ptr<CausalLM>> load_gguf(std::shared_ptr<const GgufFile> f, const LoadOptions& opt = {});

    const ModelInfo& info() const override { return info_; }
    uint64_t weights_fingerprint() const override;

    const LlamaConfig& config() const { return cfg_; }
    const StdAttentionShape& attention_shape() const { return shape_; }
    const std::vector<LlamaLayer>& layers() const { return layers_; }
    const Weight& embedding() const { return embed_; }
    const Weight& head() const { return head_; }
    const std::vector<float>& final_norm() const { return out_norm_; }

private:
    LlamaConfig cfg_;
    StdAttentionShape shape_;
    Weight embed_, head_;
    std::vector<float> out_norm_;
    std::vector<LlamaLayer> layers_;
    ModelInfo info_;
    std::shared_ptr<const GgufFile> file_;
};

}  // namespace ember
