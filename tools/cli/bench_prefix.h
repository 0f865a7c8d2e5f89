// `ember bench --prefix-ttft`: time to first token of a prompt whose prefix is cached vs the same cold (bench_prefix.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace ember::cli {
// Tokens after the shared prefix in each prompt (the cold and the warm one differ in all of them).
inline constexpr int64_t kPrefixTail = 16;
// Prints one table row per prefix length (the columns of prefix_table_header()); cache_bytes: the engine's prefix
// cache budget. Errors (a length that does not fit the context, a model whose state cannot be cached): exit code 1.
int bench_prefix(const CausalLM& lm, const std::string& label, const std::string& dev, const std::vector<long>& lengths,
                 long reps, int64_t cache_bytes);
const char* prefix_table_header();
}  // namespace ember::cli
