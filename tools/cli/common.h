// Helpers shared by the CLI subcommands: model loading (path or --synthetic), token lists, errors.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace ember::cli {

// Prints "ember <cmd>: <msg>" to stderr and returns exit code 1.
int fail(const char* cmd, const std::string& msg);
// Loads -m PATH, or builds --synthetic NAME (exactly one of them must be given), on `device`:
// "cpu", "cuda", or "auto" (cuda when this build has it and a GPU is present).
Expected<std::unique_ptr<CausalLM>> open_model(const std::string& path, const std::string& synthetic,
                                               const std::string& device = "auto", int64_t context = 4096);
// The device "auto" resolves to.
std::string resolve_device(const std::string& device);
// "1,2,3" → ids (error on anything else).
Expected<std::vector<int32_t>> parse_token_list(const std::string& s);
std::string human_bytes(double b);

}  // namespace ember::cli
