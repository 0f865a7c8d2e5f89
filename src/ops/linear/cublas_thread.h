// ops/linear/cublas_thread.h: the cuBLAS handle of the calling host thread (created on its first use, bound to the
// device current then, destroyed at thread exit), shared by the cuBLAS-based prefill paths (linear_gemm.cu,
// linear_gemm_split.cu). Callers set its stream and workspace on every call, so the calls are graph-capturable.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ember::cuda::detail {
// cuBLAS's part at the start of a caller's workspace (after aligning the pointer up to 256 bytes).
constexpr size_t kCublasWorkspace = size_t(32) << 20;
cublasHandle_t cublas_thread_handle();
// The thread's handle bound to `stream` with the first kCublasWorkspace bytes of `workspace` (aligned up to 256);
// *rest = the aligned workspace after them.
cublasHandle_t cublas_bind(void* workspace, cudaStream_t stream, uint8_t** rest);
}  // namespace ember::cuda::detail
