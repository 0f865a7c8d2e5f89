// The persistent decode kernel (persistent_decode.h): one block per SM, 16 consumer warps + 1 producer warp;
// the phases' device code is in persistent_decode_{gemv,gdn,attn}.cuh, the plumbing in persistent_decode_sync.cuh.
#include "ops/decode/persistent_decode.h"

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/env.h"
#include "ops/linear/linear_cuda.h"
#include "ops/decode/persistent_decode_attn.cuh"
#include "ops/decode/persistent_decode_gdn.cuh"
#include "ops/decode/persistent_decode_gemv.cuh"

namespace ember::cuda::pd {

namespace {

using namespace dev;

constexpr int kSmemMax = 227 * 1024;
constexpr int kMaxSplits = 64;

__global__ void __launch_bounds__(kThreads, 1) pd_kernel(const __grid_constant__ PdLaunch L) {
    // (phase descriptors are copied into registers by the consume / produce functions: taken by value)
    extern __shared__ __align__(128) uint8_t smem[];
    const Smem S = carve(smem, L);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, blk = blockIdx.x, grid = L.grid;
    uint32_t* epoch_s = reinterpret_cast<uint32_t*>(S.misc + 60);
    if (tid == 0) {
        *epoch_s = *reinterpret_cast<volatile uint32_t*>(L.sync);
        for (int i = 0; i < S.nslots; ++i) {
            mbar_init(&S.full[i], 32);                // the producer's lanes (lane 0 with the bytes)
            mbar_init(&S.empty[i], kConsumerWarps);   // lane 0 of each consumer warp
        }
        S.pend->active = 0;
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    for (int i = tid; i < kZeroBytes / 4; i += kThreads) reinterpret_cast<uint32_t*>(smem + kOffZero)[i] = 0u;
    __syncthreads();
    const uint32_t epoch = *epoch_s;  // misc[60] is never used by the phases
    const uint32_t target = (epoch + 1u) * uint32_t(grid);
    RingPos it;  // ring position (producer and consumers walk the same sequence)
    if (warp == kConsumerWarps) {
        for (int p = L.first; p < L.first + L.count; ++p)
            if (L.phases[p].kind == PD_GEMV) produce_gemv(L.phases[p].gemv, S, it, lane, blk, grid, (L.debug & 2) == 0, (L.debug & 4) != 0);
    } else {
        for (int p = L.first; p < L.first + L.count; ++p) {
            const PdPhase& ph = L.phases[p];
            uint64_t* tr = L.trace && tid == 0 ? L.trace + (int64_t(p) * grid + blk) * 4 : nullptr;
            if (tr) tr[0] = globaltimer(), tr[3] = 0;
            const Waiter W{p > L.first ? L.flags + p - 1 : nullptr, target, tr, S.pend, L.backoff_ns};
            switch (ph.kind) {
                case PD_GEMV: consume_gemv(ph.gemv, S, it, tid, blk, grid, W, L.debug); break;
                case PD_GDN: consume_gdn(ph.gdn, S, tid, blk, grid, W); break;
                case PD_ATTN: consume_attn(ph.attn, S, L.pos_dev, tid, blk, grid, W); break;
                default: consume_combine(ph.attn, S, L.pos_dev, tid, blk, grid, W); break;
            }
            if (L.trace) {
                consumer_sync();
                if (tr) tr[2] = globaltimer();
            }
            signal_phase(L.flags + p);
        }
        if (S.pend->active) {  // a GDN phase ended the launch: its rows after every block is done with it
            wait_phase(L.flags + L.first + L.count - 1, target);
            flush_pending(S.pend, tid);
        }
    }
    __syncthreads();
    if (tid == 0 && L.last) {
        __threadfence();
        if (atomicAdd(L.sync + 1, 1u) == uint32_t(grid) - 1u) {  // the last block of the run
            atomicExch(L.sync + 1, 0u);
            atomicExch(L.sync, epoch + 1u);
            __threadfence();
        }
    }
}

}  // namespace

bool pd_gemv_supported(int bits, int group_size, int scale_dtype_bytes, int64_t rows, int64_t K, const void* w,
                       const void* scales, const void* biases) {
    const bool aligned = (reinterpret_cast<uintptr_t>(w) & 15u) == 0 &&
                         ((reinterpret_cast<uintptr_t>(scales) | reinterpret_cast<uintptr_t>(biases)) & 3u) == 0;
    return bits == 4 && (group_size == 32 || group_size == 64 || group_size == 128) &&
           (scale_dtype_bytes == 2 || scale_dtype_bytes == 4) && rows > 0 && rows < (int64_t(1) << 30) && K >= 32 &&
           K % 32 == 0 && K % group_size == 0 && K <= 32768 && aligned;
}

bool pd_gdn_supported(int64_t nk, int64_t nv, int64_t dk, int64_t dv, int K) {
    return nk > 0 && nv % nk == 0 && nv <= pd_grid() && dk > 0 && dk <= 128 && dv > 0 && dv <= 128 && dv % 4 == 0 &&
           K >= 2 && K <= 4;
}

bool pd_attention_supported(int64_t H, int64_t G, int64_t D, int64_t rot_dim) {
    return G > 0 && H % G == 0 && H / G <= kAttnMaxR && (D == 64 || D == 128 || D == 256) && rot_dim > 0 &&
           rot_dim % 2 == 0 && rot_dim <= D && H <= pd_grid();
}

int pd_attention_max_splits(int64_t /*G*/) { return kMaxSplits; }

int pd_grid() { return ember::cuda::detail::sm_count(); }  // one block per SM

size_t pd_smem_plan(int64_t max_k, int scale_bytes, PdLaunch& L) {
    const int kc = int(std::min<int64_t>(2048, (std::max<int64_t>(max_k, 128) + 127) / 128 * 128));
    const int64_t nseg = (std::max<int64_t>(max_k, 128) + 127) / 128;
    const int work = int(std::max<int64_t>(kWorkMin, (nseg * 528 + 127) / 128 * 128));
    const int RS = (kc / 2 + 127) / 128 * 128 + 64;
    const int SBR = (scale_bytes + 15) / 16 * 16;
    const int slot = (16 * RS + 2 * 16 * SBR + 127) / 128 * 128;
    const int nslots = std::min(kMaxSlots, (kSmemMax - kHeader - work) / slot);
    EMBER_CHECK(nslots >= 2, "persistent decode: %d ring slots of %d bytes do not fit (x staging %d bytes)", nslots,
                slot, work);
    L.kc = kc, L.work_bytes = work, L.slot_bytes = slot, L.nslots = nslots;
    return size_t(kHeader) + size_t(work) + size_t(nslots) * size_t(slot);
}

void pd_launch(const PdLaunch& L, size_t smem_bytes, cudaStream_t stream) {
    static const bool attr_set = [] {
        CUDA_CHECK(cudaFuncSetAttribute(pd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemMax));
        return true;
    }();
    (void)attr_set;
    EMBER_CHECK(L.grid == pd_grid() && L.count > 0 && smem_bytes <= size_t(kSmemMax), "persistent decode: bad launch");
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(L.grid)), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem_bytes;
    cfg.stream = stream;
    // Every block resident at once (they wait for each other): a cooperative launch (EMBER_PD_COOP=0: a plain one,
    // which one block per SM and nothing else running also makes resident).
    static const bool coop = !env_off("EMBER_PD_COOP");
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.attrs = attr, cfg.numAttrs = coop ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, pd_kernel, L));
}

}  // namespace ember::cuda::pd
