// Device helpers of the fused GDN kernel (gdn_cuda.cu): fast SiLU, warp sums, float4 math, the sm_90 cluster
// barrier, shared-memory mbarriers and st.async (PTX ISA 8.x), explicitly-global loads/stores. CUDA only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace ember::cuda::gdn_detail {

// silu(x) = x / (1 + e^−x) with the SFU exp and a fast divide: ≈ 2–4 ulp for |x| < 20 (the accurate expf and
// IEEE division compile to long call sequences that sat on the per-token critical path). x < −87: −0.
__device__ __forceinline__ float silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }

// Forces x to be computed at this point of the program (the compiler otherwise sinks long math to its first use,
// which can be after a barrier, onto the critical path).
__device__ __forceinline__ void pin(float x) { asm volatile("" ::"f"(x)); }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float4 operator+(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ float4 fma4(float4 s, float k, float4 acc) {  // acc + s·k
    return make_float4(fmaf(s.x, k, acc.x), fmaf(s.y, k, acc.y), fmaf(s.z, k, acc.z), fmaf(s.w, k, acc.w));
}

// Split cluster barrier (PTX barrier.cluster, all threads of the cluster). arrive.release orders this thread's
// earlier loads and stores before the matching wait.acquire of the others; it costs a MEMBAR.ALL.GPU (seen in
// the SASS, ≈ 650 cycles where nothing else is outstanding), so it is used once per launch, right after the
// prologue's loads (whose latency it then hides in), and the per-token exchange uses mbarriers.
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

// Shared-memory mbarriers and st.async (sm_90): a 4-byte store into another block's shared memory that counts
// its bytes on that block's mbarrier; the receiver waits on its own mbarrier (as for a TMA load).
__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
    asm volatile(
        "{\n"
        ".reg .pred P1;\n"
        "LAB_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@P1 bra DONE;\n"
        "bra LAB_WAIT;\n"
        "DONE:\n"
        "}\n" ::"r"(smem_u32(bar)),
        "r"(parity)
        : "memory");
}
// *slot and *bar of block `rank` of this cluster (same offsets as ours) ← v, with complete_tx(4) on that bar.
__device__ __forceinline__ void st_async_f32(float* slot, uint64_t* bar, unsigned rank, float v) {
    uint32_t ra, rb;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(smem_u32(slot)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rb) : "r"(smem_u32(bar)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(ra),
                 "r"(__float_as_uint(v)), "r"(rb)
                 : "memory");
}

// Global-memory accesses through explicitly global instructions (ld/st.global.cg): a generic pointer might alias
// shared memory, which would order every such load after the preceding shared stores. Scalar versions for rows
// that are not 16-byte aligned; n = valid columns from p (≥ 1).
__device__ __forceinline__ float4 load4(const float* p, int n) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    v.x = __ldcg(p);
    if (n > 1) v.y = __ldcg(p + 1);
    if (n > 2) v.z = __ldcg(p + 2);
    if (n > 3) v.w = __ldcg(p + 3);
    return v;
}
__device__ __forceinline__ void store4(float* p, float4 v, int n) {
    __stcg(p, v.x);
    if (n > 1) __stcg(p + 1, v.y);
    if (n > 2) __stcg(p + 2, v.z);
    if (n > 3) __stcg(p + 3, v.w);
}
__device__ __forceinline__ float get(const float4& v, int c) {  // c: a compile-time constant after unrolling
    return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

}  // namespace ember::cuda::gdn_detail
