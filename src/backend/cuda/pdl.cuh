// Programmatic dependent launch, producer side. A kernel calls pdl_trigger() first thing so that the next kernel
// of the stream, when that one is launched with programmatic stream serialization (the streaming GEMV,
// ops/linear/linear_gemv_q.cu), may start on free SMs and prefetch its weights while this one runs. Always safe:
// the dependent executes griddepcontrol.wait — full completion and visibility of this grid — before it touches
// anything this grid reads or writes; a dependent launched normally ignores the trigger.
#pragma once

namespace ember::cuda {

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace ember::cuda
