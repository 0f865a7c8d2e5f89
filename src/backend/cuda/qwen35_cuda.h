// Qwen3.5 on the GPU (backend/cuda/cuda_model.h): weights uploaded once (q/k/v, the four GDN input
// projections and gate/up each stacked into one matrix for decode), KV cache and GDN state resident.
#pragma once
#include <memory>

#include "backend/cuda/cuda_model.h"

namespace ember::cuda {

bool is_qwen35(const CausalLM& cpu);
// Builds the GPU model from a loaded CPU Qwen3.5 model (which keeps the host weights mapped).
Expected<std::unique_ptr<CausalLM>> make_qwen35_cuda(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt);

}  // namespace ember::cuda
