// CUDA SwiGLU (qwen35.md §2.3 MLP: down(silu(gate·x) ⊙ (up·x))), fp32, elementwise and memory-bound.
// Reference: ops/activation/activation.h swiglu_ref. silu(g) = g / (1 + e^−g) as the CPU op computes it
// (expf, IEEE division: within a few ulp of the fp64 reference; g < −88 gives −0 like torch).
// 16-byte accesses when the length (row width) is a multiple of 4 and the pointers are 16-byte aligned.
// Graph-capturable: no allocation, no synchronisation.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember::cuda {

// gate, up, out [n]: out = silu(gate) · up. out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);

// Fused gate/up projection output: gu [rows, 2·I], per row [gate(I) | up(I)] → out [rows, I].
// out must not overlap gu.
void swiglu_fused(const float* gu, float* out, int64_t rows, int64_t I, cudaStream_t stream);

}  // namespace ember::cuda
