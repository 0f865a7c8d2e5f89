// Programmatic dependent launch (PDL). A kernel calls pdl_trigger() first thing so that the next kernel of the
// stream, when that one is launched with programmatic stream serialization (launch_pdl below, or the streaming
// GEMV, ops/linear/linear_gemv_q.cu), is launched early: its blocks are scheduled as ours retire and it may
// prefetch what no earlier kernel writes (the GEMV's weights) while we finish. Such a dependent calls pdl_wait()
// — full completion and memory visibility of the previous grid (which itself waited for its own predecessor, so
// every earlier kernel is complete too) — before it touches anything earlier kernels write. A kernel launched
// normally ignores the trigger, and pdl_wait() is a no-op in it.
#pragma once
#include <cuda_runtime.h>

#include <cstdlib>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/env.h"

namespace ember::cuda {

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// PDL launches of the small decode kernels: on unless EMBER_PDL=0 (A/B runs).
inline bool pdl_enabled() {
    static const bool on = !env_off("EMBER_PDL");
    return on;
}

// kernel<<<grid, block, smem, st>>>(args...) with programmatic stream serialization when `pdl` (and optionally
// a cluster size): the kernel must call pdl_wait() before reading or writing memory that earlier kernels write.
template <class... P, class... A>
void launch_ex(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, bool pdl, unsigned cluster,
               A&&... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
    cfg.attrs = attr, cfg.numAttrs = 1;
    if (cluster > 0) {
        attr[1].id = cudaLaunchAttributeClusterDimension;
        attr[1].val.clusterDim.x = cluster, attr[1].val.clusterDim.y = 1, attr[1].val.clusterDim.z = 1;
        cfg.numAttrs = 2;
    }
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...));
}

// The small decode kernels: PDL unless EMBER_PDL=0.
template <class... P, class... A>
void launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, unsigned cluster,
                A&&... args) {
    launch_ex(kernel, grid, block, smem, st, pdl_enabled(), cluster, std::forward<A>(args)...);
}

}  // namespace ember::cuda
