// ops/linear/linear_gemv_ggml.cuh: per-type block decoders of the GGML GEMV (linear_gemv_ggml.cu; layouts:
// quant/ggml_blocks.h). Each type T has Raw (the registers of one unit of one row), load() (the unit's bytes as
// 32-bit words from 2-byte aligned blocks; nothing past GArgs::end is read) and unit<NT>() (decode the codes
// exactly and accumulate x·w into acc[RW rows][NT tokens] in fp32).
//
// Exactness: a code byte b becomes the float 2²³ + b via one PRMT (bits 0x4B0000bb); subtracting 2²³ + offset
// gives q − offset exactly. Types without a min accumulate S = Σ (q − off)·x per (sub-)block and add D·S (D = d
// or d·sc rounded to fp32 as the reference does); types with a min (Q4_1, Q4_K, Q5_K) form w = fma(D, q, ±M)
// per code (one rounding, ≤ 2⁻²⁴|w|).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_UNROLL _Pragma("unroll")
#else
#define EMBER_UNROLL
#endif

namespace ember::cuda::detail::ggml {


constexpr int RW = 2;  // rows per warp

struct GArgs {
    const uint8_t* w;
    const uint8_t* end;  // one past the last byte of the matrix
    const float* x;
    float* y;
    int64_t rows, row_bytes;
    int K, n, upr;  // columns, tokens, units per row
    int x_aligned;
    const float* xs;  // SX kernels: x staged in shared memory, token t at xs + t·xs_stride, 4 pad floats after
    int pad_shift;    // every 2^pad_shift columns, so that the lanes of a quarter warp read 16-byte pieces in
    int xs_stride;    // distinct banks
};

#ifndef EMBER_GGML_HOST_EMU  // (a host harness may provide h2f and the intrinsics to check the decoders on a CPU)
__device__ __forceinline__ float h2f(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)(u & 0xffffu))); }
#endif

// Exact float of byte m of v minus `off`: bits 0x4B0000bb = 2²³ + b.
template <int OFF>
__device__ __forceinline__ float code(uint32_t v, int m) {
    return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7540u | unsigned(m))) - (8388608.0f + float(OFF));
}

// NW words of the bytes [p, p + 4·NW), p 2-byte aligned: aligned loads + funnel shift; the extra word needed
// when p ≡ 2 (mod 4) is read as a halfword if a full word would pass `end`.
template <int NW>
__device__ __forceinline__ void ld2(const uint8_t* p, const uint8_t* end, uint32_t (&o)[NW]) {
    const uintptr_t ip = reinterpret_cast<uintptr_t>(p);
    const uint32_t* a = reinterpret_cast<const uint32_t*>(ip & ~uintptr_t(3));
    const uint32_t sh = uint32_t(ip & 2u) * 8u;
    uint32_t w[NW + 1];
EMBER_UNROLL
    for (int i = 0; i < NW; ++i) w[i] = __ldg(a + i);
    w[NW] = 0u;
    if (sh) {
        const uint8_t* last = reinterpret_cast<const uint8_t*>(a + NW);
        w[NW] = last + 4 <= end ? __ldg(a + NW) : uint32_t(__ldg(reinterpret_cast<const unsigned short*>(last)));
    }
EMBER_UNROLL
    for (int i = 0; i < NW; ++i) o[i] = __funnelshift_r(w[i], w[i + 1], sh);
}
// 16-byte aligned variant (NW multiple of 4).
template <int NW>
__device__ __forceinline__ void ld16(const uint8_t* p, uint32_t (&o)[NW]) {
EMBER_UNROLL
    for (int i = 0; i < NW; i += 4) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i / 4);
        o[i] = v.x, o[i + 1] = v.y, o[i + 2] = v.z, o[i + 3] = v.w;
    }
}
__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) { return __ldg(reinterpret_cast<const unsigned short*>(p)); }

__device__ __forceinline__ float4 ldx4(const float* p, bool aligned) {
    if (aligned) return __ldg(reinterpret_cast<const float4*>(p));
    return make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
}

// S[r][t] += Σ_m f[r][m]·x[t][col + m] for the RW rows and tokens t < n (NT ≥ n registers). SX: x from the
// padded shared-memory copy.
template <int NT, bool SX>
__device__ __forceinline__ void dot4(const GArgs& a, int col, const float (&f)[RW][4], float (&S)[RW][NT]) {
EMBER_UNROLL
    for (int t = 0; t < NT; ++t) {
        if (t < a.n) {
            const float4 x = SX ? *reinterpret_cast<const float4*>(a.xs + t * a.xs_stride + col + ((col >> a.pad_shift) << 2))
                                : ldx4(a.x + int64_t(t) * a.K + col, a.x_aligned);
EMBER_UNROLL
            for (int r = 0; r < RW; ++r) {
                float s = S[r][t];
                s = fmaf(f[r][0], x.x, s);
                s = fmaf(f[r][1], x.y, s);
                s = fmaf(f[r][2], x.z, s);
                s = fmaf(f[r][3], x.w, s);
                S[r][t] = s;
            }
        }
    }
}

template <int NT>
__device__ __forceinline__ void scale_add(const GArgs& a, const float (&D)[RW], float (&S)[RW][NT], float (&acc)[RW][NT]) {
EMBER_UNROLL
    for (int r = 0; r < RW; ++r)
EMBER_UNROLL
        for (int t = 0; t < NT; ++t) {
            acc[r][t] = fmaf(D[r], S[r][t], acc[r][t]);
            S[r][t] = 0.f;
        }
}

// Q4_0 (18 B): d; qs[16]. w[i] = d·(lo(qs[i]) − 8), w[i+16] = d·(hi(qs[i]) − 8).
struct TQ4_0 {
    static constexpr int UPB = 1, BB = 18, PAD_SHIFT = 5;
    struct Raw { uint32_t d, q[4]; };
    static __device__ void load(const GArgs& a, const uint8_t* blk, int, Raw& r) {
        r.d = ld_u16(blk);
        ld2<4>(blk + 2, a.end, r.q);
    }
    template <int NT, bool SX>
    static __device__ void unit(const GArgs& a, int b, int, const Raw (&R)[RW], float (&acc)[RW][NT]) {
        float S[RW][NT] = {}, D[RW], f[RW][4];
EMBER_UNROLL
        for (int k = 0; k < 4; ++k)
EMBER_UNROLL
            for (int hi = 0; hi < 2; ++hi) {
EMBER_UNROLL
                for (int r = 0; r < RW; ++r) {
                    const uint32_t v = ((R[r].q[k] >> (4 * hi)) & 0x0F0F0F0Fu);
EMBER_UNROLL
                    for (int m = 0; m < 4; ++m) f[r][m] = code<8>(v, m);
                }
                dot4<NT, SX>(a, b * 32 + 16 * hi + 4 * k, f, S);
            }
EMBER_UNROLL
        for (int r = 0; r < RW; ++r) D[r] = h2f(R[r].d);
        scale_add<NT>(a, D, S, acc);
    }
};

// Q4_1 (20 B): d, m; qs[16]. w = d·q + m.
struct TQ4_1 {
    static constexpr int UPB = 1, BB = 20, PAD_SHIFT = 5;
    struct Raw { uint32_t q[5]; };  // q[0] = d | m << 16
    static __device__ void load(const GArgs& a, const uint8_t* blk, int, Raw& r) { ld2<5>(blk, a.end, r.q); }
    template <int NT, bool SX>
    static __device__ void unit(const GArgs& a, int b, int, const Raw (&R)[RW], float (&acc)[RW][NT]) {
        float D[RW], M[RW], f[RW][4];
EMBER_UNROLL
        for (int r = 0; r < RW; ++r) D[r] = h2f(R[r].q[0]), M[r] = h2f(R[r].q[0] >> 16);
EMBER_UNROLL
        for (int k = 0; k < 4; ++k)
EMBER_UNROLL
            for (int hi = 0; hi < 2; ++hi) {
EMBER_UNROLL
                for (int r = 0; r < RW; ++r) {
                    const uint32_t v = ((R[r].q[1 + k] >> (4 * hi)) & 0x0F0F0F0Fu);
EMBER_UNROLL
                    for (int m = 0; m < 4; ++m) f[r][m] = fmaf(D[r], code<0>(v, m), M[r]);
                }
                dot4<NT, SX>(a, b * 32 + 16 * hi + 4 * k, f, acc);
            }
    }
};

// Bits b0..b3 of a nibble to bit 4 of bytes 0..3 (5th code bit of Q5_0).
__device__ __forceinline__ uint32_t spread4(uint32_t nib) { return ((nib * 0x00204081u) & 0x01010101u) << 4; }

// Q5_0 (22 B): d; qh (u32); qs[16]. q = nibble | bit_j(qh) << 4, w = d·(q − 16).
struct TQ5_0 {
    static constexpr int UPB = 1, BB = 22, PAD_SHIFT = 5;
    struct Raw { uint32_t d, q[5]; };  // q[0] = qh
    static __device__ void load(const GArgs& a, const uint8_t* blk, int, Raw& r) {
        r.d = ld_u16(blk);
        ld2<5>(blk + 2, a.end, r.q);
    }
    template <int NT, bool SX>
    static __device__ void unit(const GArgs& a, int b, int, const Raw (&R)[RW], float (&acc)[RW][NT]) {
        float S[RW][NT] = {}, D[RW], f[RW][4];
EMBER_UNROLL
        for (int k = 0; k < 4; ++k)
EMBER_UNROLL
            for (int hi = 0; hi < 2; ++hi) {
EMBER_UNROLL
                for (int r = 0; r < RW; ++r) {
                    const uint32_t v = ((R[r].q[1 + k] >> (4 * hi)) & 0x0F0F0F0Fu) |
                                       spread4((R[r].q[0] >> (16 * hi + 4 * k)) & 0xFu);
EMBER_UNROLL
                    for (int m = 0; m < 4; ++m) f[r][m] = code<16>(v, m);
                }
                dot4<NT, SX>(a, b * 32 + 16 * hi + 4 * k, f, S);
            }
EMBER_UNROLL
        for (int r = 0; r < RW; ++r) D[r] = h2f(R[r].d);
        scale_add<NT>(a, D, S, acc);
    }
};

// Q8_0 (34 B): d; int8 qs[32]. w = d·q.
struct TQ8_0 {
    static constexpr int UPB = 1, BB = 34, PAD_SHIFT = 5;
    struct Raw { uint32_t d, q[8]; };
    static __device__ void load(const GArgs& a, const uint8_t* blk, int, Raw& r) {
        r.d = ld_u16(blk);
        ld2<8>(blk + 2, a.end, r.q);
    }
    template <int NT, bool SX>
    static __device__ void unit(const GArgs& a, int b, int, const Raw (&R)[RW], float (&acc)[RW][NT]) {
        float S[RW][NT] = {}, D[RW], f[RW][4];
EMBER_UNROLL
        for (int k = 0; k < 8; ++k) {
EMBER_UNROLL
            for (int r = 0; r < RW; ++r) {
                const uint32_t v = R[r].q[k] ^ 0x80808080u;  // two's complement q → q + 128
EMBER_UNROLL
                for (int m = 0; m < 4; ++m) f[r][m] = code<128>(v, m);
            }
            dot4<NT, SX>(a, b * 32 + 4 * k, f, S);
        }
EMBER_UNROLL
        for (int r = 0; r < RW; ++r) D[r] = h2f(R[r].d);
        scale_add<NT>(a, D, S, acc);
    }
};

// K-quant 6-bit scale/min of sub-block s from the 12 scale bytes (words sc[0..2]).
// (word chosen by comparisons rather than sc[i >> 2]: GCC 12 -O2 miscompiles the indexed form in the host build of
// linear_gemv_ggml_decode_test.cpp; the selects cost the same on the device)
__device__ __forceinline__ uint32_t sbyte(const uint32_t (&sc)[3], int i) {
    const uint32_t w = i < 4 ? sc[0] : i < 8 ? sc[1] : sc[2];
    return (w >> (8 * (i & 3))) & 0xFFu;
}
__device__ __forceinline__ void kscale(const uint32_t (&sc)[3], int s, uint32_t& scale, uint32_t& mn) {
    if (s < 4) {
        scale = sbyte(sc, s) & 63u, mn = sbyte(sc, s + 4) & 63u;
    } else {
        scale = (sbyte(sc, s + 4) & 0xFu) | ((sbyte(sc, s - 4) >> 6) << 4);
        mn = (sbyte(sc, s + 4) >> 4) | ((sbyte(sc, s) >> 6) << 4);
    }
}

// Q4_K (144 B): d, dmin; scales[12]; qs[128]. Unit c (64 elements): qs[32c..32c+32), lo nibbles sub-block 2c,
// hi nibbles 2c+1; w = (d·sc)·q − dmin·mn.
template <bool A16>
struct TQ4_K {
    static constexpr int UPB = 4, BB = 144, PAD_SHIFT = 6;
    struct Raw { uint32_t h[4], q[8]; };
    static __device__ void load(const GArgs& a, const uint8_t* blk, int c, Raw& r) {
        if constexpr (A16) {
            ld16<4>(blk, r.h);
            ld16<8>(blk + 16 + 32 * c, r.q);
        } else {
            ld2<4>(blk, a.end, r.h);
            ld2<8>(blk + 16 + 32 * c, a.end, r.q);
        }
    }
    template <int NT, bool SX>
    static __device__ void unit(const GArgs& a, int b, int c, const Raw (&R)[RW], float (&acc)[RW][NT]) {
EMBER_UNROLL
        for (int hi = 0; hi < 2; ++hi) {
            float D[RW], M[RW], f[RW][4];
EMBER_UNROLL
            for (int r = 0; r < RW; ++r) {
                const uint32_t sc[3] = {R[r].h[1], R[r].h[2], R[r].h[3]};
                uint32_t s6, m6;
                kscale(sc, 2 * c + hi, s6, m6);
                D[r] = h2f(R[r].h[0]) * float(s6), M[r] = h2f(R[r].h[0] >> 16) * float(m6);
            }
EMBER_UNROLL
            for (int k = 0; k < 8; ++k) {
EMBER_UNROLL
                for (int r = 0; r < RW; ++r) {
                    const uint32_t v = (R[r].q[k] >> (4 * hi)) & 0x0F0F0F0Fu;
EMBER_UNROLL
                    for (int m = 0; m < 4; ++m) f[r][m] = fmaf(D[r], code<0>(v, m), -M[r]);
                }
                dot4<NT, SX>(a, b * 256 + 64 * c + 32 * hi + 4 * k, f, acc);
            }
        }
    }
};

// Q5_K (176 B): d, dmin; scales[12]; qh[32]; qs[128]. As Q4_K plus bit (2c + hi) of qh[l] as the 5th bit.
template <bool A16>
struct TQ5_K {
    static constexpr int UPB = 4, BB = 176, PAD_SHIFT = 6;
    struct Raw { uint32_t h[4], qh[8], q[8]; };
    static __device__ void load(const GArgs& a, const uint8_t* blk, int c, Raw& r) {
        if constexpr (A16) {
            ld16<4>(blk, r.h);
            ld16<8>(blk + 16, r.qh);
            ld16<8>(blk + 48 + 32 * c, r.q);
        } else {
            ld2<4>(blk, a.end, r.h);
            ld2<8>(blk + 16, a.end, r.qh);
            ld2<8>(blk + 48 + 32 * c, a.end, r.q);
        }
    }
    template <int NT, bool SX>
    static __device__ void unit(const GArgs& a, int b, int c, const Raw (&R)[RW], float (&acc)[RW][NT]) {
EMBER_UNROLL
        for (int hi = 0; hi < 2; ++hi) {
            float D[RW], M[RW], f[RW][4];
            const int s = 2 * c + hi;
EMBER_UNROLL
            for (int r = 0; r < RW; ++r) {
                const uint32_t sc[3] = {R[r].h[1], R[r].h[2], R[r].h[3]};
                uint32_t s6, m6;
                kscale(sc, s, s6, m6);
                D[r] = h2f(R[r].h[0]) * float(s6), M[r] = h2f(R[r].h[0] >> 16) * float(m6);
            }
EMBER_UNROLL
            for (int k = 0; k < 8; ++k) {
EMBER_UNROLL
                for (int r = 0; r < RW; ++r) {
                    const uint32_t v = ((R[r].q[k] >> (4 * hi)) & 0x0F0F0F0Fu) | (((R[r].qh[k] >> s) & 0x01010101u) << 4);
EMBER_UNROLL
                    for (int m = 0; m < 4; ++m) f[r][m] = fmaf(D[r], code<0>(v, m), -M[r]);
                }
                dot4<NT, SX>(a, b * 256 + 64 * c + 32 * hi + 4 * k, f, acc);
            }
        }
    }
};

// Q6_K (210 B): ql[128]; qh[64]; int8 scales[16]; d. Unit u = 2h + lh: half h, l ∈ [16·lh, 16·lh + 16):
// element 128h + 32k + l has q = (nibble (k ≥ 2 ? hi : lo) of ql[64h + 32(k & 1) + l]) | ((qh[32h + l] >> 2k) & 3)
// << 4 and scale index 8h + 2k + lh; w = (d·sc)·(q − 32).
struct TQ6_K {
    static constexpr int UPB = 4, BB = 210, PAD_SHIFT = 7;
    struct Raw { uint32_t la[4], lb[4], qh[4], sc[2], d; };
    static __device__ void load(const GArgs& a, const uint8_t* blk, int u, Raw& r) {
        const int h = u >> 1, lh = u & 1;
        ld2<4>(blk + 64 * h + 16 * lh, a.end, r.la);
        ld2<4>(blk + 64 * h + 32 + 16 * lh, a.end, r.lb);
        ld2<4>(blk + 128 + 32 * h + 16 * lh, a.end, r.qh);
        ld2<2>(blk + 192 + 8 * h, a.end, r.sc);
        r.d = ld_u16(blk + 208);
    }
    template <int NT, bool SX>
    static __device__ void unit(const GArgs& a, int b, int u, const Raw (&R)[RW], float (&acc)[RW][NT]) {
        const int h = u >> 1, lh = u & 1;
EMBER_UNROLL
        for (int k = 0; k < 4; ++k) {
            float S[RW][NT] = {}, D[RW], f[RW][4];
EMBER_UNROLL
            for (int j = 0; j < 4; ++j) {
EMBER_UNROLL
                for (int r = 0; r < RW; ++r) {
                    const uint32_t src = (k & 1) ? R[r].lb[j] : R[r].la[j];
                    const uint32_t v = ((src >> (k >= 2 ? 4 : 0)) & 0x0F0F0F0Fu) | (((R[r].qh[j] >> (2 * k)) & 0x03030303u) << 4);
EMBER_UNROLL
                    for (int m = 0; m < 4; ++m) f[r][m] = code<32>(v, m);
                }
                dot4<NT, SX>(a, b * 256 + 128 * h + 32 * k + 16 * lh + 4 * j, f, S);
            }
EMBER_UNROLL
            for (int r = 0; r < RW; ++r) {
                const int si = 2 * k + lh;  // byte of sc[8h .. 8h+7]
                const int8_t s8 = int8_t(((si < 4 ? R[r].sc[0] : R[r].sc[1]) >> (8 * (si & 3))) & 0xFFu);
                D[r] = h2f(R[r].d) * float(s8);
            }
            scale_add<NT>(a, D, S, acc);
        }
    }
};

}  // namespace ember::cuda::detail::ggml
