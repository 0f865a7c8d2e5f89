// fp32-faithful tensor-core products for the chunked GDN kernels (gdn_chunked_*.cu): mma.sync m16n8k8 TF32 with
// each operand split into big + small TF32 parts, plus cp.async copies of tiles into shared memory. CUDA only.
//
// x = big + small + O(2⁻²³|x|) with big = tf32(x) (round to nearest) and small = x − big (exact in fp32, read as
// TF32 by the tensor core); then a·b ≈ big_a·big_b + big_a·small_b + small_a·big_b: the dropped small·small term
// and the truncations ≈ 2⁻²²|ab|, summed in the fp32 accumulators (the "3xTF32" scheme). The correction products
// go into their own accumulator (`lo`) or, when the caller passes the same one twice, first.
//
// Fragment layouts of m16n8k8 (PTX ISA, g = lane / 4, t = lane % 4):
//   A 16×8:  a[r] = A(g + 8·(r & 1), t + 4·(r >> 1))     B 8×8:  b[r] = B(t + 4·r, g)
//   C 16×8:  c[r] = C(g + 8·(r >> 1), 2t + (r & 1))
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/gated_delta_rule/gdn_cuda_device.cuh"

namespace ember::cuda::gdn_mma {

// big = x rounded to TF32 (nearest, ties away: what cvt.rna.tf32.f32 gives for finite x, in 2 integer ops instead
// of its ~4 with the inf/NaN guard); small = x − big exactly, passed as fp32 bits: the tensor core reads the top
// 19 bits of each operand, i.e. truncates small to TF32 — an error ≤ 2⁻¹¹|small| ≤ 2⁻²³|x|.
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big));
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Operand views of shared memory: element (r, c) of a row-major or a column-major (transposed) matrix.
struct RowMajor {
    const float* p;
    int ld;
    __device__ __forceinline__ float operator()(int r, int c) const { return p[r * ld + c]; }
};
struct ColMajor {
    const float* p;
    int ld;
    __device__ __forceinline__ float operator()(int r, int c) const { return p[c * ld + r]; }
};

// Warp tile accumulators: MT × NT tiles of 16×8, hi (big·big) and lo, lo2 (the two correction products): three
// dependency chains per tile for latency-bound callers; throughput-bound ones pass one array three times (one
// chain per tile, fewer registers).
template <int MT, int NT>
using Acc = float[MT][NT][4];

// f(mi, ni, r) for every accumulator element of an MT × NT warp tile (unrolled).
template <int MT, int NT, class F>
__device__ __forceinline__ void for_each_acc(F&& f) {
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int ni = 0; ni < NT; ++ni)
#pragma unroll
            for (int r = 0; r < 4; ++r) f(mi, ni, r);
}

template <int MT, int NT>
__device__ __forceinline__ void zero(Acc<MT, NT>& acc) {
    for_each_acc<MT, NT>([&](int mi, int ni, int r) { acc[mi][ni][r] = 0.f; });
}

// One k-step of 8: acc[mi][ni] += A(m0 + 16·mi + ·, k0 + ·) · B(k0 + ·, n0 + 8·ni + ·) for ni < nt (nt is
// warp-uniform: tiles ni ≥ nt are skipped, e.g. above the diagonal of a triangular result); acc = hi + lo + lo2.
template <int MT, int NT, class VA, class VB>
__device__ __forceinline__ void mma3_kstep(Acc<MT, NT>& hi, Acc<MT, NT>& lo, Acc<MT, NT>& lo2, const VA& A,
                                           const VB& B, int m0, int n0, int k0, int nt = NT) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    uint32_t ab[MT][4], as[MT][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int r = 0; r < 4; ++r)
            split_tf32(A(m0 + 16 * mi + g + 8 * (r & 1), k0 + t + 4 * (r >> 1)), ab[mi][r], as[mi][r]);
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) {
        if (ni >= nt) break;
        uint32_t bb[2], bs[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) split_tf32(B(k0 + t + 4 * r, n0 + 8 * ni + g), bb[r], bs[r]);
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            mma_tf32(lo[mi][ni], as[mi], bb);
            mma_tf32(lo2[mi][ni], ab[mi], bs);
            mma_tf32(hi[mi][ni], ab[mi], bb);
        }
    }
}

// Row and column of accumulator element r of tile (mi, ni) for this lane, relative to (m0, n0).
__device__ __forceinline__ int acc_row(int mi, int r) { return 16 * mi + ((threadIdx.x & 31) >> 2) + 8 * (r >> 1); }
__device__ __forceinline__ int acc_col(int ni, int r) { return 8 * ni + 2 * (threadIdx.x & 3) + (r & 1); }

// ---- cp.async (16-byte, L2 only) ----
__device__ __forceinline__ void cp_async16(float* smem, const float* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(gdn_detail::smem_u32(smem)), "l"(gmem)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// A ROWS × COLS tile of floats (COLS % 4 == 0; pointers and strides 16-byte aligned) from global memory (row
// stride ldg) into shared memory (row stride LDS), spread over NT threads; rows ≥ `rows` are not copied. The
// shapes are compile-time, so every copy is one LDGSTS plus an address add (a runtime loop with divisions cost
// ~25 instructions per copy).
template <int ROWS, int COLS, int LDS, int NT>
__device__ __forceinline__ void copy_tile_async(float* s, const float* g, int64_t ldg, int tid, int rows = ROWS) {
    constexpr int PER_ROW = COLS / 4, TOTAL = ROWS * PER_ROW, ITERS = (TOTAL + NT - 1) / NT;
#pragma unroll
    for (int k = 0; k < ITERS; ++k) {
        const int e = tid + k * NT;
        const int r = e / PER_ROW, c = 4 * (e % PER_ROW);
        if ((TOTAL % NT == 0 || e < TOTAL) && r < rows) cp_async16(s + r * LDS + c, g + r * ldg + c);
    }
}

}  // namespace ember::cuda::gdn_mma
