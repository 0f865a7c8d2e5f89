// CLI helpers implementation.
#include "common.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "args.h"
#include "io/json_file.h"
#include "server/chat_prompt.h"


namespace ember::cli {

int fail(const char* cmd, const std::string& msg) {
    std::fprintf(stderr, "ember %s: %s\n", cmd, msg.c_str());
    return 1;
}

const char* const kQ8ActivationsHelp =
    "  --q8-activations  GGUF: round activations to 8 bits per block before each quantized product, as\n"
    "                    llama.cpp's CPU backend does (its numerics instead of exact ones; CPU only)\n"
    "  --prefill-precision fp32|bf16  CUDA prefill GEMMs: fp32-faithful (default) or one bf16 product (faster)\n"
    "  --kv-cache-dtype auto|f32|bf16  attention KV cache (auto: bf16 on CUDA, f32 on the CPU; bf16 is CUDA only)\n";

const char* const kSamplingHelp =
    "  --temp T          temperature (default 0 = greedy)\n"
    "  --top-k K --top-p P --min-p P\n"
    "  --repeat-penalty R --presence-penalty P --frequency-penalty F\n"
    "  --seed S          sampling seed (same seed, same tokens)\n";

SamplingParams sampling_options(Args& a) {
    SamplingParams sp;
    sp.temperature = static_cast<float>(a.real({"--temp", "--temperature"}, 0.0));
    sp.top_k = static_cast<int>(a.integer({"--top-k"}, 0));
    sp.top_p = static_cast<float>(a.real({"--top-p"}, 1.0));
    sp.min_p = static_cast<float>(a.real({"--min-p"}, 0.0));
    sp.repetition_penalty = static_cast<float>(a.real({"--repeat-penalty"}, 1.0));
    sp.presence_penalty = static_cast<float>(a.real({"--presence-penalty"}, 0.0));
    sp.frequency_penalty = static_cast<float>(a.real({"--frequency-penalty"}, 0.0));
    sp.seed = static_cast<uint64_t>(a.integer({"--seed"}, 0));
    return sp;
}

LoadOptions load_options(Args& a) {
    LoadOptions o;
    o.q8_activations = a.flag({"--q8-activations"});
    o.prefill_precision = a.str({"--prefill-precision"}, "fp32");
    o.kv_cache_dtype = a.str({"--kv-cache-dtype", "--cache-type"}, "auto");
    return o;
}

Expected<std::string> format_chat(const std::string& model_path, const Tokenizer& tok, const std::string& user,
                                  bool thinking) {
    EMBER_ASSIGN(server::ChatFormatter f, server::ChatFormatter::load(model_path, tok));
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
    if (!thinking) kwargs["enable_thinking"] = false;
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", user}});
    return f.render(messages, /*add_generation_prompt=*/true, kwargs);
}

Expected<std::vector<int32_t>> parse_token_list(const std::string& s) {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < s.size()) {
        size_t j = s.find(',', i);
        if (j == std::string::npos) j = s.size();
        std::string tok = s.substr(i, j - i);
        char* end = nullptr;
        long v = std::strtol(tok.c_str(), &end, 10);
        if (tok.empty() || !end || *end || v < 0 || v > 0x7fffffff)
            return errorf("bad token id '%s' in --tokens (expected comma-separated non-negative integers)", tok.c_str());
        out.push_back(static_cast<int32_t>(v));
        i = j + 1;
    }
    if (out.empty()) return errorf("--tokens is empty");
    return out;
}

std::string human_bytes(double b) {
    const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    while (b >= 1024 && k < 4) { b /= 1024; ++k; }
    return strfmt("%.2f %s", b, u[k]);
}

}  // namespace ember::cli
