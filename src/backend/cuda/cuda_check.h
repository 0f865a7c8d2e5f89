// CUDA_CHECK / CUBLAS_CHECK: abort with expression, function, file, line and the error name (invariants only;
// recoverable conditions such as out-of-memory are reported through Status by the allocator).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CUDA_CHECK(expr)                                                                                  \
    do {                                                                                                  \
        cudaError_t _e = (expr);                                                                          \
        if (_e != cudaSuccess) {                                                                          \
            std::fprintf(stderr, "%s:%d: %s: CUDA error %s (%s) in %s\n", __FILE__, __LINE__, __func__,   \
                         cudaGetErrorName(_e), cudaGetErrorString(_e), #expr);                            \
            std::abort();                                                                                 \
        }                                                                                                 \
    } while (0)

#define CUBLAS_CHECK(expr)                                                                                \
    do {                                                                                                  \
        cublasStatus_t _s = (expr);                                                                       \
        if (_s != CUBLAS_STATUS_SUCCESS) {                                                                \
            std::fprintf(stderr, "%s:%d: %s: cuBLAS error %d in %s\n", __FILE__, __LINE__, __func__,      \
                         static_cast<int>(_s), #expr);                                                    \
            std::abort();                                                                                 \
        }                                                                                                 \
    } while (0)
