// Model weights out of a GGUF file: matrices as Weight views into the mapping (no copy; block-quantized types
// stay packed as WeightFormat::GGML), small vectors dequantized to f32, and shape/type checks with messages
// that name the file, the tensor, and what was expected.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/gguf.h"
#include "ops/linear/weight.h"

namespace ember {

class GgufWeights {
public:
    // q8_activations: block-quantized matrices get Weight::act_q8 (llama.cpp's 8-bit activation rounding).
    explicit GgufWeights(std::shared_ptr<const GgufFile> f, bool q8_activations = false)
        : f_(std::move(f)), q8_(q8_activations) {}
    const GgufFile& file() const { return *f_; }
    bool has(const std::string& name) const { return f_->tensor(name) != nullptr; }
    // A [rows, cols] matrix (GGUF ne = {cols, rows}) of a supported type.
    Expected<Weight> matrix(const std::string& name, int64_t rows, int64_t cols) const;
    // A tensor of exactly `numel` elements (any supported type, any shape) as f32.
    Expected<std::vector<float>> vec(const std::string& name, int64_t numel) const;
    // "Q4_K (168), Q6_K (31), F32 (61)": the types of the tensors the model used, by count.
    std::string type_summary() const;

private:
    Expected<const GgufTensor*> get(const std::string& name) const;
    std::string type_summary_plain() const;
    std::shared_ptr<const GgufFile> f_;
    bool q8_ = false;
    mutable std::vector<const GgufTensor*> used_;
};

}  // namespace ember
