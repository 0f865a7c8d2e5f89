// ops/linear/cublas_thread.h: the cuBLAS handle of the calling host thread (created on its first use, bound to the
// device current then, destroyed at thread exit), shared by the cuBLAS-based prefill paths (linear_gemm.cu,
// linear_gemm_split.cu). Callers set its stream and workspace on every call, so the calls are graph-capturable.
#pragma once
#include <cublas_v2.h>

namespace ember::cuda::detail {
cublasHandle_t cublas_thread_handle();
}  // namespace ember::cuda::detail
