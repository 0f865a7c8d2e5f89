// ops/linear/linear_gemv_mma.cuh: the exact bf16 tensor-core building blocks shared by the affine GEMVs
// (linear_gemv_q.cu, linear_gemv_stream.cu, linear_gemv_affine.cu): 4-bit codes as the exact bf16 values 16 + q,
// x as two bf16 terms hi + lo, mma.m16n8k16 with fp32 accumulation.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace ember::cuda::detail {

// bf16x2 {16 + nibble j, 16 + nibble j+4} of a word (j = 0..3): nibbles to mantissa bits 3-6 / 19-22, ORed
// into 16.0 (0x4180: exponent 2⁴, mantissa bit 3 worth 1). One shift + one LOP3 ((v & m) | c, c in a register).
__device__ __forceinline__ uint32_t pair16(uint32_t w, int j) {
    const uint32_t v = j == 0 ? (w << 3) : (w >> (4 * j - 3));
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(v), "n"(0x00780078), "n"(0x41804180));
    return r;
}

// D += A·B, m16n8k16 bf16 → f32 (fragment layout: PTX ISA; g = lane/4, t = lane%4: a0 row g k 2t..2t+1,
// a1 row g+8, a2 row g k 2t+8.., a3 row g+8 k 2t+8..; b0 k 2t.. col g, b1 k 2t+8.. col g; d0,d1 row g cols
// 2t, 2t+1; d2, d3 row g+8).
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// D = A·B (a fresh accumulator).
__device__ __forceinline__ void mma0(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                     uint32_t b1) {
    const float z = 0.f;
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(z));
}

// (a, b) → bf16x2 hi = rn(a, b), lo = rn(a − hi, b − hi) (a in the low halves); returns hi + lo (exact) as floats.
__device__ __forceinline__ void split2(float a, float b, uint32_t& hi, uint32_t& lo, float& sa, float& sb) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hi) : "f"(b), "f"(a));  // first operand → upper half
    const float ha = __uint_as_float(hi << 16), hb = __uint_as_float(hi & 0xffff0000u);
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(lo) : "f"(b - hb), "f"(a - ha));
    sa = ha + __uint_as_float(lo << 16);
    sb = hb + __uint_as_float(lo & 0xffff0000u);
}

}  // namespace ember::cuda::detail
