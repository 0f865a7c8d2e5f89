// ops/linear/linear_gemv_ggml_decode_test.cpp: the GGML GEMV's per-type block decoders
// (linear_gemv_ggml.cuh, device code) compiled for the host with small intrinsic shims and run the way the
// kernel runs them (2 rows per warp, lane ℓ takes units ℓ, ℓ + 32, ..., next unit prefetched), against the fp64
// dot product of the ggml_dequantize rows (quant/ggml_blocks.h, checked bit for bit against gguf-py). Runs on
// every machine, GPU or not: the decode arithmetic (PRMT magic floats, funnel-shifted unaligned words, 6-bit
// K-quant scales, Q5/Q6 high bits) is checked even where the CUDA tests skip. Random blocks (every code bit
// pattern, finite random fp16 d/dmin), data at offsets 0/2/4/16 (both load paths, the guard at the end of the
// matrix), ragged row counts, 3 tokens. Budget 2e-5·Σ|w||x| + 1e-6 as in linear_ggml_cuda_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_type.h"

// ---- host shims for the device intrinsics the decoders use ----
#define __device__
#define __forceinline__ inline
namespace {
struct uint4 { uint32_t x, y, z, w; };
struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
template <class T> T __ldg(const T* p) {  // memcpy: the device code reads byte buffers as words / vectors
    T v;
    std::memcpy(&v, static_cast<const void*>(p), sizeof(T));
    return v;
}
inline uint32_t __byte_perm(uint32_t a, uint32_t b, uint32_t s) {
    uint8_t bytes[8];
    std::memcpy(bytes, &a, 4);
    std::memcpy(bytes + 4, &b, 4);
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= uint32_t(bytes[(s >> (4 * i)) & 7]) << (8 * i);
    return r;
}
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t sh) {
    return uint32_t(((uint64_t(hi) << 32) | lo) >> (sh & 31));
}
inline float __uint_as_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
}  // namespace
#define EMBER_GGML_HOST_EMU
namespace ember::cuda::detail::ggml {
inline float h2f(uint32_t u) { return ember::f16_to_f32(uint16_t(u & 0xffffu)); }
}  // namespace ember::cuda::detail::ggml
#include "ops/linear/linear_gemv_ggml.cuh"
#undef __device__
#undef __forceinline__

namespace ember {
namespace {

using namespace ember::cuda::detail::ggml;

// The kernel's loop for every warp (rows r0, r0 + 1), lanes one after the other; lane sums added in double.
template <class T, int NT>
void emulate(const GArgs& a, std::vector<float>& y) {
    for (int64_t r0 = 0; r0 < a.rows; r0 += RW) {
        const uint8_t* rowp[RW];
        for (int r = 0; r < RW; ++r) rowp[r] = a.w + (r0 + r < a.rows ? r0 + r : a.rows - 1) * a.row_bytes;
        double tot[RW][NT] = {};
        for (int lane = 0; lane < 32; ++lane) {
            float acc[RW][NT] = {};
            typename T::Raw cur[RW] = {}, nxt[RW] = {};
            int u = lane;
            if (u < a.upr)
                for (int r = 0; r < RW; ++r) T::load(a, rowp[r] + (u / T::UPB) * T::BB, u % T::UPB, cur[r]);
            while (u < a.upr) {
                const int un = u + 32;
                if (un < a.upr)
                    for (int r = 0; r < RW; ++r) T::load(a, rowp[r] + (un / T::UPB) * T::BB, un % T::UPB, nxt[r]);
                T::template unit<NT, false>(a, u / T::UPB, u % T::UPB, cur, acc);
                for (int r = 0; r < RW; ++r) cur[r] = nxt[r];
                u = un;
            }
            for (int r = 0; r < RW; ++r)
                for (int t = 0; t < NT; ++t) tot[r][t] += acc[r][t];
        }
        for (int r = 0; r < RW; ++r)
            for (int t = 0; t < a.n; ++t)
                if (r0 + r < a.rows) y[size_t(t * a.rows + r0 + r)] = float(tot[r][t]);
    }
}

void run(GgmlType ty, bool a16, const GArgs& a, std::vector<float>& y) {
    switch (ty) {
        case GgmlType::Q4_0: emulate<TQ4_0, 4>(a, y); break;
        case GgmlType::Q4_1: emulate<TQ4_1, 4>(a, y); break;
        case GgmlType::Q5_0: emulate<TQ5_0, 4>(a, y); break;
        case GgmlType::Q8_0: emulate<TQ8_0, 4>(a, y); break;
        case GgmlType::Q4_K: a16 ? emulate<TQ4_K<true>, 4>(a, y) : emulate<TQ4_K<false>, 4>(a, y); break;
        case GgmlType::Q5_K: a16 ? emulate<TQ5_K<true>, 4>(a, y) : emulate<TQ5_K<false>, 4>(a, y); break;
        default: emulate<TQ6_K, 4>(a, y); break;
    }
}

TEST(GgmlGemvDecode, EveryTypeMatchesDequantizedDot) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
    for (GgmlType ty : types)
        for (int off : {0, 2, 4, 16})
            for (int64_t rows : {1, 3, 17}) {
                const GgmlTypeTraits tr = ggml_type_traits(ty);
                SCOPED_TRACE(testing::Message() << tr.name << " offset " << off << " rows " << rows);
                const int64_t K = tr.block_elems == 32 ? 32 * 37 : 256 * 5, nb = K / tr.block_elems;
                const int64_t rb = nb * tr.block_bytes;
                std::vector<uint8_t> buf(size_t(rows * rb) + 32);
                uint8_t* data = buf.data() + off;
                for (int64_t i = 0; i < rows * rb; ++i) data[i] = uint8_t(rng());
                std::vector<int> halves = {0, 2};  // fp16 d (and m / dmin) fields
                if (ty == GgmlType::Q4_0 || ty == GgmlType::Q5_0 || ty == GgmlType::Q8_0) halves = {0};
                if (ty == GgmlType::Q6_K) halves = {208};
                for (int64_t b = 0; b < rows * nb; ++b)
                    for (int o : halves) {
                        const uint16_t h = f32_to_f16(0.01f * nd(rng));
                        std::memcpy(data + b * tr.block_bytes + o, &h, 2);
                    }
                const int n = 3;
                std::vector<float> x(size_t(n * K));
                for (float& v : x) v = nd(rng);
                GArgs a{};
                a.w = data, a.end = data + rows * rb, a.x = x.data(), a.rows = rows, a.row_bytes = rb;
                a.K = int(K), a.n = n, a.x_aligned = 0;
                a.upr = int(nb) * (tr.block_elems == 32 ? 1 : 4);
                std::vector<float> y(size_t(n * rows), NAN);
                run(ty, off % 16 == 0, a, y);
                std::vector<float> w(static_cast<size_t>(K));
                for (int64_t r = 0; r < rows; ++r) {
                    ggml_dequantize(ty, data + r * rb, K, w.data());
                    for (int t = 0; t < n; ++t) {
                        double ref = 0, A = 0;
                        for (int64_t k = 0; k < K; ++k) {
                            const double p = double(w[size_t(k)]) * x[size_t(t * K + k)];
                            ref += p, A += std::fabs(p);
                        }
                        const double got = y[size_t(t * rows + r)];
                        EXPECT_LE(std::fabs(got - ref), 2e-5 * A + 1e-6) << "row " << r << " token " << t;
                    }
                }
            }
}

}  // namespace
}  // namespace ember
