// open_model.cpp: a model path (or a synthetic name) → a CausalLM on a device, and its tokenizer.
#include "api/open_model.h"

#include <filesystem>

#include "io/gguf.h"
#include "tokenizer/gguf_tokenizer.h"

#ifdef EMBER_HAVE_CUDA
#include "backend/cuda/device.h"
#include "backend/cuda/cuda_model.h"
#endif

namespace ember {

std::string resolve_device(const std::string& device) {
    if (device != "auto") return device;
#ifdef EMBER_HAVE_CUDA
    if (cuda::gpu_available()) return "cuda";
#endif
    return "cpu";
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
    if (load.kv_cache_dtype != "auto" && load.kv_cache_dtype != "f32" && load.kv_cache_dtype != "bf16")
        return errorf("--kv-cache-dtype '%s': use auto, f32 or bf16", load.kv_cache_dtype.c_str());
    if (load.kv_cache_dtype == "bf16" && dev != "cuda")
        return errorf("--kv-cache-dtype bf16: the CPU KV cache is fp32 only; use --device cuda or f32");
#ifndef EMBER_HAVE_CUDA
    if (dev == "cuda") return errorf("--device cuda: this build has no CUDA backend (configure with -DEMBER_CUDA=ON)");
#endif
    EMBER_ASSIGN(auto m, synthetic.empty() ? load_model(path, load) : make_synthetic_model(synthetic));
#ifdef EMBER_HAVE_CUDA
    if (dev == "cuda") {
        cuda::CudaOptions opt;
        opt.context = context;
        opt.prefill_precision = load.prefill_precision == "bf16" ? cuda::GemmPrecision::BF16 : cuda::GemmPrecision::FP32;
        opt.kv_bf16 = load.kv_cache_dtype != "f32";  // auto: bf16 on CUDA
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

}  // namespace ember
