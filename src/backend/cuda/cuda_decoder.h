// Every decoder (models/decoder.h: Qwen3.5, the Llama family) on the GPU (backend/cuda/cuda_model.h): weights
// uploaded once in their stored format (GGUF block types through the GGML GEMV or repacked to affine), the
// projections of one input stacked into one matrix ([q|k|v], the four delta-net input projections, [gate|up]),
// KV caches and recurrent states resident, the forward pass decoder_forward with the CUDA blocks.
#pragma once
#include <memory>

#include "backend/cuda/cuda_model.h"

namespace ember::cuda {

bool is_decoder(const CausalLM& cpu);
// Builds the GPU model from a loaded CPU decoder (which keeps the host weights mapped).
Expected<std::unique_ptr<CausalLM>> make_cuda_decoder(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt);

}  // namespace ember::cuda
