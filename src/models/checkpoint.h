// Checkpoint: uniform "get tensor by canonical HF name" over HF and MLX safetensors layouts.
// Canonical names are HF CausalLM names: "model.layers.3.mlp.gate_proj", "lm_head", "model.norm.weight".
// Known prefixes are stripped (qwen35.md §5.1 item 9); vision tensors are skipped, MTP tensors recognised.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/safetensors.h"
#include "models/qwen35_config.h"
#include "ops/linear/weight.h"

namespace ember {

class Checkpoint {
public:
    static Expected<std::shared_ptr<Checkpoint>> open(const std::string& dir, const QuantConfig& quant);

    const TensorInfo* find(const std::string& canonical) const;
    bool has(const std::string& canonical) const { return find(canonical) != nullptr; }
    // Linear weight "<base>.weight" (+ ".scales"/".biases" when quantized); checks the logical shape.
    Expected<Weight> linear(const std::string& base, int64_t rows, int64_t cols) const;
    // A small float tensor as f32, checking its element count; `add` is added to every element.
    Expected<std::vector<float>> vec(const std::string& name, int64_t numel, float add = 0.0f) const;

    int64_t n_vision_tensors() const { return n_vision_; }
    int64_t n_mtp_tensors() const { return n_mtp_; }
    const std::string& path() const { return path_; }
    // Tensors present in the file but never requested (reported by `ember info`).
    std::vector<std::string> unused() const;

private:
    std::string path_;
    TensorStore store_;
    QuantConfig quant_;
    std::map<std::string, std::string> canon_;  // canonical name -> stored name
    mutable std::map<std::string, bool> used_;
    int64_t n_vision_ = 0, n_mtp_ = 0;
};

}  // namespace ember
