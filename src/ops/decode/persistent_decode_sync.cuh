// Device plumbing of the persistent decode kernel (persistent_decode.h): the block's roles and shared-memory
// layout, mbarriers and 1-D bulk copies (sm_90), the consumers' named barrier, and the inter-block phase
// counters. CUDA only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/warp_reduce.cuh"
#include "ops/decode/persistent_decode.h"

namespace ember::cuda::pd::dev {

// 8 consumer warps + 1 producer warp: with 9 warps a sub-partition holds at most 3, so a thread may use up to 168
// registers (17 warps would cap it at 96 and spill); 8 warps compute a ring slot far faster than one SM's share of
// the memory bandwidth fills it.
constexpr int kConsumerWarps = 8;
constexpr int kConsumers = 32 * kConsumerWarps;  // threads that compute (named barrier 1)
constexpr int kThreads = kConsumers + 32;        // + one producer warp (the last)
constexpr int kMaxSlots = 16;
// Shared-memory header: mbarriers | misc floats | tile reduction | pending conv-state rows | 512 zero bytes.
constexpr int kOffBars = 0;        // full[kMaxSlots], empty[kMaxSlots] (u64)
constexpr int kOffMisc = 256;      // 64 floats / ints of per-phase scalars
constexpr int kOffRed = 512;       // [2][kConsumerWarps][16 rows] floats
constexpr int kOffPend = 2560;     // PendingConv
constexpr int kPendVals = 2 * 128 * 3;
constexpr int kOffZero = 6144;     // zeros: the B fragments of the GEMV lanes whose MMA column is unused
constexpr int kZeroBytes = 512;
constexpr int kHeader = kOffZero + kZeroBytes;
constexpr int kWorkMin = 30 * 1024;  // attention / GDN / combine scratch

// q/k conv-state rows a GDN task computed but may not write yet (other value heads of the same key head read the
// old rows in the same phase): written after the next phase's wait.
struct PendingConv {
    float* base;  // conv_state
    int32_t active, kh, dk, kd, C, K;
    float vals[kPendVals];  // [2 · dk][K − 1]: q channels then k channels
};
static_assert(kOffPend + sizeof(PendingConv) <= kOffZero, "header");

struct Smem {
    uint64_t* full;
    uint64_t* empty;
    float* misc;
    float* red;
    PendingConv* pend;
    const uint8_t* zero;
    uint8_t* work;
    uint8_t* ring;
    int nslots, slot_bytes, kc;
};

__device__ __forceinline__ Smem carve(uint8_t* smem, const PdLaunch& L) {
    Smem S;
    S.full = reinterpret_cast<uint64_t*>(smem + kOffBars);
    S.empty = S.full + kMaxSlots;
    S.misc = reinterpret_cast<float*>(smem + kOffMisc);
    S.red = reinterpret_cast<float*>(smem + kOffRed);
    S.pend = reinterpret_cast<PendingConv*>(smem + kOffPend);
    S.zero = smem + kOffZero;
    S.work = smem + kHeader;
    S.ring = S.work + L.work_bytes;
    S.nslots = L.nslots, S.slot_bytes = L.slot_bytes, S.kc = L.kc;
    return S;
}

__device__ __forceinline__ uint32_t su32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(su32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(su32(bar)) : "memory");
}
// A consumer warp's release of a ring slot, once every lane's reads of it are done: the proxy fence first, since
// the slot's next bulk copies write through the async proxy and a plain arrive does not wait for shared loads still
// in flight (the affine GEMM lost rows to exactly this, 2026-12-07: linear_gemm_q_pipe.cuh, release_slot).
__device__ __forceinline__ void mbar_release(uint64_t* bar, int lane) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(su32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
    asm volatile(
        "{\n"
        ".reg .pred P1;\n"
        "PD_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@P1 bra PD_DONE;\n"
        "bra PD_WAIT;\n"
        "PD_DONE:\n"
        "}\n" ::"r"(su32(bar)),
        "r"(parity)
        : "memory");
}
// bytes (multiple of 16, both addresses 16-byte aligned) from global src to this block's shared dst, counted on bar.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(su32(dst)),
        "l"(src), "r"(bytes), "r"(su32(bar))
        : "memory");
}

__device__ __forceinline__ uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

// 16 / 4 bytes from global to shared (cp.async, L1 bypassed for 16), and an arrive on bar once every cp.async
// this thread issued before has landed (the arrive counts as one of the barrier's expected arrivals).
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(su32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(su32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(su32(bar)) : "memory");
}

// The consumer warps' barrier (the producer warp never joins it).
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory"); }

__device__ __forceinline__ uint32_t ld_acquire(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Wait until every block is done with the phase counted by `flag` in this run (consumers; ends with a barrier).
__device__ __forceinline__ void wait_phase(const uint32_t* flag, uint32_t target, int backoff_ns = 0) {
    if (threadIdx.x == 0)
        while (static_cast<int32_t>(ld_acquire(flag) - target) < 0) {
            if (backoff_ns) __nanosleep(backoff_ns);
        }
    consumer_sync();
}
// This block is done with the phase counted by `flag` (consumers; every consumer's writes precede the release).
__device__ __forceinline__ void signal_phase(uint32_t* flag) {
    consumer_sync();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(flag, 1u);
    }
}

// Writes the q/k conv-state rows a GDN task kept back (consumers, after the wait for the next phase).
__device__ __forceinline__ void flush_pending(PendingConv* pend, int tid) {
    PendingConv& p = *pend;
    if (!p.active) return;
    if (tid < 2 * p.dk) {
        const int64_t ch = tid < p.dk ? int64_t(p.kh) * p.dk + tid : p.kd + int64_t(p.kh) * p.dk + (tid - p.dk);
        for (int j = 0; j < p.K - 1; ++j) __stcg(p.base + int64_t(j) * p.C + ch, p.vals[tid * (p.K - 1) + j]);
    }
    consumer_sync();
    if (tid == 0) p.active = 0;
    consumer_sync();
}

// The wait for the previous phase, which each phase's consumers call once, after issuing the loads that do not
// depend on it (weights, state from earlier runs), so that those overlap the wait.
struct Waiter {
    const uint32_t* flag;  // nullptr: the launch's first phase (earlier kernels are complete)
    uint32_t target;
    uint64_t* tr;          // trace row of this phase and block (thread 0), or nullptr
    PendingConv* pend;
    int backoff_ns;        // pause between polls (PdLaunch::backoff_ns)
    __device__ __forceinline__ void wait(int tid) const {
        if (flag) {
            wait_phase(flag, target, backoff_ns);
            flush_pending(pend, tid);
        }
        if (tr) tr[1] = globaltimer();
    }
};

// A walker's position in the ring (the producer and the consumers walk the same sequence of slots): slots used so
// far, the current slot and the parity of its round (n / nslots mod 2), kept without a division per slot.
struct RingPos {
    uint32_t n = 0, parity = 0;
    int slot = 0;
    __device__ __forceinline__ void next(int nslots) {
        ++n;
        if (++slot == nslots) slot = 0, parity ^= 1u;
    }
};

// The task range [t0, t1) of block b when n tasks are spread over the grid (balanced to ±1, in order).
__device__ __forceinline__ void task_range(int64_t n, int grid, int b, int64_t& t0, int64_t& t1) {
    t0 = n * b / grid;
    t1 = n * (b + 1) / grid;
}

using ember::cuda::warp_max;
using ember::cuda::warp_sum;

// Sum of v over the consumers, in a fixed order (every consumer gets the same value). Uses misc[0..16]; ends after
// a barrier that also protects misc for the next call.
__device__ __forceinline__ float consumer_sum(float v, float* misc) {
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) misc[warp] = v;
    consumer_sync();
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) s += misc[w];
    consumer_sync();
    return s;
}

}  // namespace ember::cuda::pd::dev
