// `ember bench --engine B[,B...]`: the library Engine under a stream of requests (bench_engine.cpp).
#pragma once
#include <string>
#include <vector>

#include "models/model.h"

namespace ember::cli {
// Per slot count B: 4·B greedy sequences of `prompt` random tokens and `gen` generated tokens, admitted as slots
// free up (as `ember serve` admits waiting requests), so prompt chunks keep arriving beside decode rows. One table
// row per B (the columns of engine_table_header()). Errors: exit code 1.
int bench_engine(const CausalLM& lm, const std::string& label, const std::string& dev, const std::vector<long>& sizes,
                 long prompt, long gen, long reps);
const char* engine_table_header();
}  // namespace ember::cli
