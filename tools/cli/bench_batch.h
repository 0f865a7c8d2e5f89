// `ember bench --batch`: aggregate decode of the batched engine (bench_batch.cpp).
#pragma once
#include <string>
#include <vector>

#include "models/model.h"

namespace ember::cli {
// Prints one table row per batch size (same columns as cmd_bench's table; the GPU column is µs per step).
int bench_batch(const CausalLM& lm, const std::string& label, const std::string& dev, const std::vector<long>& sizes,
                long prompt, long steps, long reps, double bw_gbs, bool profile = false);
}  // namespace ember::cli
