// The CUDA model registry: one line per GPU model family. Every architecture of models/registry.cpp is a decoder
// (models/decoder.h), so one generic GPU model runs them all.
#include "backend/cuda/cuda_decoder.h"
#include "backend/cuda/cuda_model.h"

namespace ember::cuda {

namespace {
struct Entry {
    bool (*accepts)(const CausalLM&);
    Expected<std::unique_ptr<CausalLM>> (*make)(std::unique_ptr<CausalLM>, const CudaOptions&);
};
const Entry kRegistry[] = {
    {is_decoder, make_cuda_decoder},
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
