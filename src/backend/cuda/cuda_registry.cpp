// The CUDA model registry: ONE line per architecture with a GPU implementation.
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/llama_cuda.h"
#include "backend/cuda/qwen35_cuda.h"

namespace ember::cuda {

namespace {
struct Entry {
    bool (*accepts)(const CausalLM&);
    Expected<std::unique_ptr<CausalLM>> (*make)(std::unique_ptr<CausalLM>, const CudaOptions&);
};
const Entry kRegistry[] = {
    {is_qwen35, make_qwen35_cuda},
    {is_llama, make_llama_cuda},
};
}  // namespace

Expected<std::unique_ptr<CausalLM>> make_cuda_model(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) {
    EMBER_REQUIRE(gpu_available(), "--device cuda: no CUDA device is available");
    for (const auto& e : kRegistry)
        if (e.accepts(*cpu)) return e.make(std::move(cpu), opt);
    return errorf("--device cuda: %s has no GPU implementation yet (use --device cpu)",
                  cpu->info().architecture.c_str());
}

}  // namespace ember::cuda
