// GgufWeights implementation.
#include "models/gguf_weights.h"

#include <map>

#include "quant/ggml_blocks.h"

namespace ember {

Expected<const GgufTensor*> GgufWeights::get(const std::string& name) const {
    const GgufTensor* t = f_->tensor(name);
    if (!t) return errorf("%s: missing tensor '%s'", f_->path().c_str(), name.c_str());
    EMBER_TRY(f_->require_supported(*t));
    used_.push_back(t);
    return t;
}

Expected<Weight> GgufWeights::matrix(const std::string& name, int64_t rows, int64_t cols) const {
    EMBER_ASSIGN(const GgufTensor* t, get(name));
    const bool ok = t->ne.size() == 2 && t->ne[0] == cols && t->ne[1] == rows;
    EMBER_REQUIRE(ok, "%s: tensor '%s' has shape %s, expected [%lld, %lld] (ne order)", f_->path().c_str(),
                  name.c_str(), t->shape_str().c_str(), (long long)cols, (long long)rows);
    Weight w;
    w.rows = rows;
    w.cols = cols;
    w.data = t->data;
    switch (t->type) {
        case GgmlType::F32: w.dtype = DType::F32; break;
        case GgmlType::F16: w.dtype = DType::F16; break;
        case GgmlType::BF16: w.dtype = DType::BF16; break;
        default:
            w.format = WeightFormat::GGML;
            w.ggml_type = t->type;
            w.act_q8 = q8_;
    }
    return w;
}

Expected<std::vector<float>> GgufWeights::vec(const std::string& name, int64_t numel) const {
    EMBER_ASSIGN(const GgufTensor* t, get(name));
    EMBER_REQUIRE(t->numel() == numel, "%s: tensor '%s' has shape %s (%lld elements), expected %lld elements",
                  f_->path().c_str(), name.c_str(), t->shape_str().c_str(), (long long)t->numel(), (long long)numel);
    std::vector<float> v(static_cast<size_t>(numel));
    ggml_dequantize(t->type, t->data, numel, v.data());
    return v;
}

std::string GgufWeights::type_summary() const {
    if (q8_) return type_summary_plain() + "; 8-bit activations (llama.cpp CPU numerics)";
    return type_summary_plain();
}

std::string GgufWeights::type_summary_plain() const {
    std::map<std::string, int> n;
    std::map<const GgufTensor*, bool> seen;
    for (const GgufTensor* t : used_)
        if (!seen[t]) { seen[t] = true; n[t->type_name()]++; }
    std::string s;
    for (const auto& [k, c] : n) s += (s.empty() ? "" : ", ") + k + " (" + std::to_string(c) + ")";
    return s;
}

}  // namespace ember
