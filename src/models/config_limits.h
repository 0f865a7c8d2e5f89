// Upper bounds on the hyperparameters a model file states (config.json, GGUF metadata), checked before anything
// is sized or looped over from them, so that a hostile file can neither overflow the int64 products the loaders
// form (heads · head_dim · 2, vocab · hidden, 2 · key heads · key dim + ...) nor make a loop or an allocation
// of its choosing. Each bound is far above any real model (Llama-3.1-405B: 126 layers, hidden 16384, FFN 53248,
// 128 heads; Gemma 3: vocab 262144; Qwen3.5-27B: 64 layers, head_dim 256).
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"

namespace ember {

inline constexpr int64_t kMaxLayers = 1024;                // num_hidden_layers, block_count, MTP layers
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;     // hidden, intermediate / FFN size
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;     // vocab_size
inline constexpr int64_t kMaxHeads = int64_t{1} << 12;     // attention / linear-attention head counts
inline constexpr int64_t kMaxHeadDim = int64_t{1} << 14;   // head_dim, key/value head dims
inline constexpr int64_t kMaxConvKernel = 1024;            // linear_conv_kernel_dim

// "WHERE: NAME = V is beyond ember's limit of MAX" unless 0 ≤ v ≤ max (negative values: "must not be negative").
inline Status check_limit(const std::string& where, const char* name, int64_t v, int64_t max) {
    if (v < 0) return errorf("%s: %s = %lld must not be negative", where.c_str(), name, (long long)v);
    if (v > max)
        return errorf("%s: %s = %lld is beyond ember's limit of %lld", where.c_str(), name, (long long)v,
                      (long long)max);
    return Status::ok();
}

}  // namespace ember
