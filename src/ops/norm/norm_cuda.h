// CUDA fused residual add + RMSNorm (qwen35.md §2.2-§2.3), fp32. Reference: ops/norm/norm.h rmsnorm_ref.
//
// Per row r of length H:
//   if y:  x[r] ← x[r] + y[r]                         (the residual stream, updated in place; fp32 add)
//   out[r] = x[r] · (1 / sqrt(mean(x[r]²) + eps)) · w  (w already holds Qwen's 1 + w; same op order as rmsnorm())
// One block per row; 16-byte accesses when H % 4 == 0 and every pointer is 16-byte aligned, scalar otherwise;
// rows of up to 16384 (vectorised) / 4096 (scalar) elements stay in registers, longer rows are read twice.
// Σx² is accumulated in fp32 (per-thread partials, then a tree), so it matches the fp64 reference to ≈ √H·ε.
// Graph-capturable: no allocation, no synchronisation.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember::cuda {

// x [n, H] (in/out residual), y [n, H] or null (then x is only read), w [H], out [n, H].
// With y given, out must not alias x; it may alias y (each element of y is read before out is written).
void add_rmsnorm(float* x, const float* y, const float* w, float* out, int64_t n, int64_t H, float eps,
                 cudaStream_t stream);

// out = RMSNorm(x) · w (add_rmsnorm without the residual add; x is not written; out == x allowed).
void rmsnorm(const float* x, const float* w, float* out, int64_t n, int64_t H, float eps, cudaStream_t stream);

}  // namespace ember::cuda
