// ops/linear/linear_gemm_q_wgmma.cuh: the affine GEMM's Hopper kernel (contract: linear_gemm_q.h) — the copy
// pipeline of linear_gemm_q_pipe.cuh (one producer warp, a ring of mbarrier slots, x / {s, b'} / x sums as bulk
// copies, the codes as cp.async) feeding consumer *warpgroups* that issue wgmma instead of mma.sync.
//
//  - A warpgroup owns MF m64 tiles of W rows × all BT tokens of the block (wgmma m64nBTk16, bf16 → fp32). W is the A
//    operand from registers, decoded from the raw codes exactly as the mma.sync kernel does (per warp the wgmma A
//    fragment is the m16n8k16 one: warp w of the group holds rows 16w .. 16w + 15 of each m64 tile), so the same
//    logical column order and the same pre-tiled x serve both kernels. x is the B operand straight from the slot:
//    the prep kernel's rows of 128 bytes with 16-byte chunks XOR-swizzled by row are the K-major 128-byte-swizzle
//    layout of a wgmma descriptor (8-row groups 1024 bytes apart) once the slot is 1024-aligned; k-step q of a stage
//    starts 32·q bytes in.
//  - Per group: the products of its k-steps go to the accumulator P (the group's first wgmma with scale-d = 0), the
//    warpgroup commits and waits, then acc += s·P + b'·X in fp32 as in the mma.sync kernel (same numerics, same
//    order of the per-group fp32 sums). A warpgroup's tensor work pauses during its own wait and epilogue; the other
//    warpgroup of the block fills the tensor pipe meanwhile. The slot is released after the stage's last wait.
//  - fp32-faithful: two wgmma per k-step and tile (x hi, x lo) on the same A registers; bf16 mode: one.
#pragma once
#include <cstdint>

#include "ops/linear/linear_gemm_q_pipe.cuh"
#include "ops/linear/linear_gemv_mma.cuh"

namespace ember::cuda::gemmq {

// NWG consumer warpgroups, each MF m64 tiles of W rows, all over the block's BT tokens; plus one producer warp.
// OVL (MF > 1): a warpgroup commits each m64 tile's wgmma as its own group and closes tile i while the later
// tiles' products still run. (Keeping two *groups of columns* in flight — double-buffered P and A across stages —
// was tried: ptxas serializes the wgmma there, C7513 / C7514, and it ran 25-35 % slower.)
template <int NWG_, int MF_, int BT_, bool OVL_ = false>
struct WgCfg {
    static constexpr int NWG = NWG_, MF = MF_, MINB = 1, ALIGN = 1024;
    static constexpr bool OVL = OVL_ && MF_ > 1;
    static constexpr int NCW = 4 * NWG, BW = NWG * 64 * MF, BT = BT_, NTH = 32 * (NCW + 1);
    static_assert(BT == 64 || BT == 128, "wgmma N of the block tile (the wgmma_rs shapes below)");
};

// Shared-memory matrix descriptor (PTX ISA, wgmma): a K-major bf16 operand in the 128-byte swizzle — start address,
// leading byte offset (unused by this layout: 1), stride byte offset 1024 (8 rows of 128 bytes), layout SWIZZLE_128B.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
    return uint64_t((addr & 0x3FFFFu) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Pins an accumulator register at this point of the program (the compiler may not move its reads or writes across).
__device__ __forceinline__ void pin(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// D (+)= A·B, m64nNk16 bf16 → f32, A (this warp's m16k16 fragment) from registers, B from a descriptor;
// accumulate = 0: D = A·B.
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc, int accumulate);

template <>
__device__ __forceinline__ void wgmma_rs<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_rs<128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

// The A fragments (4 registers: rows g / g + 8, columns 2t.. / 2t + 8..) of the four k-steps of a stage, decoded
// from this lane's code words of the two 32-column spans (rows g and g + 8).
template <int BITS>
__device__ __forceinline__ void decode_stage(const uint8_t* ra, const uint8_t* rb, uint32_t (&A)[4][4]) {
#pragma unroll
    for (int sp = 0; sp < 2; ++sp) {
        if constexpr (BITS == 4) {
            const uint32_t wa = *reinterpret_cast<const uint32_t*>(ra + 16 * sp);
            const uint32_t wb = *reinterpret_cast<const uint32_t*>(rb + 16 * sp);
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                uint32_t(&f)[4] = A[2 * sp + ks];
                f[0] = detail::pair16(wa, 2 * ks), f[1] = detail::pair16(wb, 2 * ks);
                f[2] = detail::pair16(wa, 2 * ks + 1), f[3] = detail::pair16(wb, 2 * ks + 1);
            }
        } else {
            const uint2 va = *reinterpret_cast<const uint2*>(ra + 32 * sp);
            const uint2 vb = *reinterpret_cast<const uint2*>(rb + 32 * sp);
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                uint32_t(&f)[4] = A[2 * sp + ks];
                f[0] = byte_pair(va.x, va.y, 2 * ks), f[1] = byte_pair(vb.x, vb.y, 2 * ks);
                f[2] = byte_pair(va.x, va.y, 2 * ks + 1), f[3] = byte_pair(vb.x, vb.y, 2 * ks + 1);
            }
        }
    }
}

template <class C>
__device__ __forceinline__ void pin_all(float (&P)[C::MF][C::BT / 2]) {
#pragma unroll
    for (int i = 0; i < C::MF; ++i)
#pragma unroll
        for (int r = 0; r < C::BT / 2; ++r) pin(P[i][r]);
}

// The wgmma of k-steps [Q0, Q1) of a stage for one m64 tile into its P (the first with scale-d = 0 when FRESH).
template <class C, bool HILO, int Q0, int Q1, bool FRESH>
__device__ __forceinline__ void wg_issue_tile(const uint32_t (&A)[4][4], uint32_t xaddr, float (&P)[C::BT / 2]) {
#pragma unroll
    for (int q = Q0; q < Q1; ++q) {
        wgmma_rs<C::BT>(P, A[q], desc_sw128(xaddr + 32 * q), (FRESH && q == Q0) ? 0 : 1);
        if constexpr (HILO) wgmma_rs<C::BT>(P, A[q], desc_sw128(xaddr + C::BT * 128 + 32 * q), 1);
    }
}

// Issues those wgmma for every tile and commits them as one group.
template <class C, bool HILO, int Q0, int Q1, bool FRESH>
__device__ __forceinline__ void wg_issue(const uint32_t (&A)[C::MF][4][4], uint32_t xaddr, float (&P)[C::MF][C::BT / 2]) {
    pin_all<C>(P);
    wg_fence();
#pragma unroll
    for (int i = 0; i < C::MF; ++i) wg_issue_tile<C, HILO, Q0, Q1, FRESH>(A[i], xaddr, P[i]);
    wg_commit();
}

// wg_issue, then waits for it.
template <class C, bool HILO, int Q0, int Q1, bool FRESH>
__device__ __forceinline__ void wg_products(const uint32_t (&A)[C::MF][4][4], uint32_t xaddr,
                                            float (&P)[C::MF][C::BT / 2]) {
    wg_issue<C, HILO, Q0, Q1, FRESH>(A, xaddr, P);
    wg_wait<0>();
    pin_all<C>(P);
}

// acc += s·P + b'·X over tiles [I0, I1) for the group at index gi of the slot's {s, b'} pairs and x sums.
template <class C, int I0 = 0, int I1 = C::MF>
__device__ __forceinline__ void wg_close(const float2* sbl, const float* xql, int gi, int rw, int g, int t,
                                         float (&acc)[C::MF][C::BT / 2], const float (&P)[C::MF][C::BT / 2]) {
#pragma unroll
    for (int i = I0; i < I1; ++i) {
        const int ra = rw + 64 * i + g;
        const float2 sa = sbl[gi * C::BW + ra], sb = sbl[gi * C::BW + ra + 8];
#pragma unroll
        for (int j = 0; j < C::BT / 8; ++j) {
            const float2 X = *reinterpret_cast<const float2*>(xql + gi * C::BT + 8 * j + 2 * t);
            acc[i][4 * j + 0] = fmaf(sa.y, X.x, fmaf(sa.x, P[i][4 * j + 0], acc[i][4 * j + 0]));
            acc[i][4 * j + 1] = fmaf(sa.y, X.y, fmaf(sa.x, P[i][4 * j + 1], acc[i][4 * j + 1]));
            acc[i][4 * j + 2] = fmaf(sb.y, X.x, fmaf(sb.x, P[i][4 * j + 2], acc[i][4 * j + 2]));
            acc[i][4 * j + 3] = fmaf(sb.y, X.y, fmaf(sb.x, P[i][4 * j + 3], acc[i][4 * j + 3]));
        }
    }
}

// OVL form of wg_products + wg_close: tile i's wgmma committed as group i; after the wait that leaves MF − 1 − i
// groups in flight, tile i is closed (CLOSE) while the later tiles still compute.
template <class C, bool HILO, int Q0, int Q1, bool FRESH, bool CLOSE, int I = 0>
__device__ __forceinline__ void wg_tiles_close(const uint32_t (&A)[C::MF][4][4], uint32_t xaddr,
                                               float (&P)[C::MF][C::BT / 2], const float2* sbl, const float* xql,
                                               int gi, int rw, int g, int t, float (&acc)[C::MF][C::BT / 2]) {
    if constexpr (I == 0) {
        pin_all<C>(P);
        wg_fence();
#pragma unroll
        for (int i = 0; i < C::MF; ++i) {
            wg_issue_tile<C, HILO, Q0, Q1, FRESH>(A[i], xaddr, P[i]);
            wg_commit();  // one group per tile
        }
    }
    if constexpr (I < C::MF) {
        wg_wait<C::MF - 1 - I>();
#pragma unroll
        for (int r = 0; r < C::BT / 2; ++r) pin(P[I][r]);
        if constexpr (CLOSE) wg_close<C, I, I + 1>(sbl, xql, gi, rw, g, t, acc, P);
        wg_tiles_close<C, HILO, Q0, Q1, FRESH, CLOSE, I + 1>(A, xaddr, P, sbl, xql, gi, rw, g, t, acc);
    }
}

// The products of k-steps [Q0, Q1) and, when CLOSE, the close of group gi: overlapped per tile (OVL) or not.
template <class C, bool HILO, int Q0, int Q1, bool FRESH, bool CLOSE>
__device__ __forceinline__ void wg_group(const uint32_t (&A)[C::MF][4][4], uint32_t xaddr, float (&P)[C::MF][C::BT / 2],
                                         const float2* sbl, const float* xql, int gi, int rw, int g, int t,
                                         float (&acc)[C::MF][C::BT / 2]) {
    if constexpr (C::OVL) {
        wg_tiles_close<C, HILO, Q0, Q1, FRESH, CLOSE>(A, xaddr, P, sbl, xql, gi, rw, g, t, acc);
    } else {
        wg_products<C, HILO, Q0, Q1, FRESH>(A, xaddr, P);
        if constexpr (CLOSE) wg_close<C>(sbl, xql, gi, rw, g, t, acc, P);
    }
}

template <class C, int BITS, int GS, bool HILO>
__global__ void __launch_bounds__(C::NTH, 1) gemm_q_wg_kernel(const Args a) {
    using S = Slot<C, BITS>;
    constexpr int MF = C::MF, NR = C::BT / 2, R = S::R;
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t bars[2 * R];  // FULL[R] (the slot's copies landed), EMPTY[R] (consumers done)
    const uint32_t raw0 = smem_u32(smem_raw), smem0 = (raw0 + 1023u) & ~1023u;  // slots 1024-aligned (swizzle)
    const uint8_t* smem = smem_raw + (smem0 - raw0);
    const BlockPos bp = block_pos<C>(a);
    const int n0 = bp.n0, m0 = bp.m0, st0 = bp.st0, nst = bp.nst, warp = bp.warp, lane = bp.lane;
    const uint32_t bar0 = smem_u32(bars);
    auto full = [&](int i) { return bar0 + 8u * unsigned(i); };
    auto empty = [&](int i) { return bar0 + 8u * unsigned(R + i); };
    if (ring_start<C, BITS, HILO, R>(a, smem0, bar0, bp)) return;  // the producer warp's whole work

    // ---- consumer warpgroups ----
    const int g = lane >> 2, t = lane & 3;
    const int rw = (warp >> 2) * 64 * MF + 16 * (warp & 3);  // this warp's first row (tile 0) in the block tile
    float acc[MF][NR];
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int r = 0; r < NR; ++r) acc[i][r] = 0.f;
    float P[MF][NR];
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int r = 0; r < NR; ++r) P[i][r] = 0.f;
    for (int s = 0; s < nst; ++s) {
        const int sl = s % R, st = st0 + s;
        mbar_wait(full(sl), uint32_t(s / R) & 1u);
        const uint8_t* slot = smem + sl * S::BYTES;
        const uint32_t xaddr = smem0 + sl * S::BYTES;
        const float2* sbl = reinterpret_cast<const float2*>(slot + S::X + S::W);
        const float* xql = reinterpret_cast<const float*>(slot + S::X + S::W + S::SB);
        uint32_t A[MF][4][4];
#pragma unroll
        for (int i = 0; i < MF; ++i) {
            const uint8_t* ra = slot + S::X + (rw + 64 * i + g) * S::WSTRIDE + t * BITS;
            decode_stage<BITS>(ra, ra + 8 * S::WSTRIDE, A[i]);
        }
        if constexpr (GS == 32) {
            wg_group<C, HILO, 0, 2, true, true>(A, xaddr, P, sbl, xql, 0, rw, g, t, acc);
            wg_group<C, HILO, 2, 4, true, true>(A, xaddr, P, sbl, xql, 1, rw, g, t, acc);
        } else if constexpr (GS == 64) {
            wg_group<C, HILO, 0, 4, true, true>(A, xaddr, P, sbl, xql, 0, rw, g, t, acc);
        } else if (!(st & 1)) {  // the first half of a group of 128
            wg_group<C, HILO, 0, 4, true, false>(A, xaddr, P, sbl, xql, 0, rw, g, t, acc);
        } else {  // its second half
            wg_group<C, HILO, 0, 4, false, true>(A, xaddr, P, sbl, xql, 0, rw, g, t, acc);
        }
        release_slot(empty(sl), lane);
    }
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int r = n0 + rw + 64 * i + g + 8 * hh;
            if (r >= a.N) continue;
            int ld;
            float* yr = out_row(a, r, ld);
#pragma unroll
            for (int j = 0; j < C::BT / 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int m = m0 + 8 * j + 2 * t + e;
                    if (m < a.M) yr[int64_t(m) * ld] = acc[i][4 * j + 2 * hh + e];
                }
        }
}

}  // namespace ember::cuda::gemmq
