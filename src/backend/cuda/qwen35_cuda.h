// Qwen3.5 on the GPU: weights uploaded once, KV cache and GDN state resident, every op a CUDA kernel, and
// the decode step (n = 1) captured once per session as a CUDA graph and replayed per token.
#pragma once
#include <memory>

#include "models/model.h"

namespace ember {
class Qwen35;
}

namespace ember::cuda {

struct CudaOptions {
    int64_t context = 4096;    // KV-cache capacity per session (tokens); beyond it forward() fails clearly
    int64_t max_batch = 512;   // largest prefill chunk per forward call (Session chunks longer prompts)
};

// Builds the GPU model from a loaded CPU model (which keeps the host weights mapped).
Expected<std::unique_ptr<CausalLM>> make_qwen35_cuda(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt);

}  // namespace ember::cuda
