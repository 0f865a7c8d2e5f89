// CLI helpers implementation.
#include "common.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "args.h"
#include "io/gguf.h"
#include "io/json_file.h"
#include "server/chat_prompt.h"
#include "tokenizer/gguf_tokenizer.h"

#ifdef EMBER_HAVE_CUDA
#include "backend/cuda/device.h"
#include "backend/cuda/cuda_model.h"
#endif

namespace ember::cli {

int fail(const char* cmd, const std::string& msg) {
    std::fprintf(stderr, "ember %s: %s\n", cmd, msg.c_str());
    return 1;
}

std::string resolve_device(const std::string& device) {
    if (device != "auto") return device;
#ifdef EMBER_HAVE_CUDA
    if (cuda::gpu_available()) return "cuda";
#endif
    return "cpu";
}

const char* const kQ8ActivationsHelp =
    "  --q8-activations  GGUF: round activations to 8 bits per block before each quantized product, as\n"
    "                    llama.cpp's CPU backend does (its numerics instead of exact ones; CPU only)\n"
    "  --prefill-precision fp32|bf16  CUDA prefill GEMMs: fp32-faithful (default) or one bf16 product (faster)\n";

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
    return o;
}

Expected<std::unique_ptr<CausalLM>> open_model(const std::string& path, const std::string& synthetic,
                                               const std::string& device, int64_t context, const LoadOptions& load) {
    if (!path.empty() && !synthetic.empty()) return errorf("give either -m MODEL or --synthetic NAME, not both");
    if (path.empty() && synthetic.empty())
        return errorf("no model: give -m MODEL (a directory with config.json) or --synthetic NAME");
    std::string dev = load.q8_activations && device == "auto" ? "cpu" : resolve_device(device);
    if (load.q8_activations && dev != "cpu")
        return errorf("--q8-activations (llama.cpp's CPU numerics) runs on the CPU only: use --device cpu");
    if (load.q8_activations && !synthetic.empty())
        return errorf("--q8-activations applies to GGUF files, not to --synthetic models");
    if (dev != "cpu" && dev != "cuda") return errorf("unknown device '%s' (cpu, cuda or auto)", dev.c_str());
    if (load.prefill_precision != "fp32" && load.prefill_precision != "bf16")
        return errorf("--prefill-precision '%s': use fp32 or bf16", load.prefill_precision.c_str());
    if (load.prefill_precision == "bf16" && dev != "cuda")
        return errorf("--prefill-precision bf16 applies to the CUDA prefill GEMMs: use --device cuda");
#ifndef EMBER_HAVE_CUDA
    if (dev == "cuda") return errorf("--device cuda: this build has no CUDA backend (configure with -DEMBER_CUDA=ON)");
#endif
    EMBER_ASSIGN(auto m, synthetic.empty() ? load_model(path, load) : make_synthetic_model(synthetic));
#ifdef EMBER_HAVE_CUDA
    if (dev == "cuda") {
        cuda::CudaOptions opt;
        opt.context = context;
        opt.prefill_precision = load.prefill_precision == "bf16" ? cuda::GemmPrecision::BF16 : cuda::GemmPrecision::FP32;
        return cuda::make_cuda_model(std::move(m), opt);
    }
#endif
    return m;
}

bool is_gguf_path(const std::string& path) {
    return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0 && !std::filesystem::is_directory(path);
}

Expected<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& model_path) {
    namespace fs = std::filesystem;
    if (model_path.empty()) return std::unique_ptr<Tokenizer>();
    if (is_gguf_path(model_path)) {
        EMBER_ASSIGN(auto f, GgufFile::open(model_path));
        EMBER_ASSIGN(Tokenizer t, tokenizer_from_gguf(*f));
        return std::make_unique<Tokenizer>(std::move(t));
    }
    if (!fs::exists(fs::path(model_path) / "tokenizer.json")) return std::unique_ptr<Tokenizer>();
    EMBER_ASSIGN(Tokenizer t, Tokenizer::load(model_path));
    return std::make_unique<Tokenizer>(std::move(t));
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
