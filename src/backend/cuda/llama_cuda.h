// The Llama family (models/llama.h: llama, qwen3) on the GPU (backend/cuda/cuda_model.h): weights uploaded once
// in their stored format (GGUF block types through the GGML GEMV), q/k/v and gate/up stacked for decode, the
// attention core of ops/attention without the output gate. A block-quantized token embedding is expanded to
// f32 once on the device side for the gather (the tied LM head keeps the packed copy).
#pragma once
#include <memory>

#include "backend/cuda/cuda_model.h"

namespace ember::cuda {

bool is_llama(const CausalLM& cpu);
Expected<std::unique_ptr<CausalLM>> make_llama_cuda(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt);

}  // namespace ember::cuda
