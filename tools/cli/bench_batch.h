// `ember bench --batch`: aggregate decode of the batched engine (bench_batch.cpp).
#pragma once
#include <string>
#include <vector>

#include "models/model.h"

namespace ember::cli {
// Prints one table row per batch size (same columns as cmd_bench's table; the GPU column is µs per step).
// sample: every row selects with the device sampler (batch_decode_sample: T 0.8, top-p 0.9, repetition 1.1,
// its own seed) instead of greedy.
int bench_batch(const CausalLM& lm, const std::string& label, const std::string& dev, const std::vector<long>& sizes,
                long prompt, long steps, long reps, double bw_gbs, bool profile = false, bool sample = false);
}  // namespace ember::cli
