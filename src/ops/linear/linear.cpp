// ops/linear/linear.cpp: linear() — argument checks, x preparation (per-group sums, AVX2 block permutation),
// threads over rows, CPU dispatch — and the portable row kernel (any format; affine bits 3/5/6 everywhere;
// GGML blocks: each block dequantized by quant/ggml_blocks.h, then an fp32 dot product per token).
#include "ops/linear/linear.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/env.h"
#include "core/parallel.h"
#include "ops/linear/linear_kernels.h"
#include "quant/affine.h"
#include "quant/ggml_act.h"
#include "quant/ggml_blocks.h"

namespace ember {
namespace linear_detail {
namespace {

// EMBER_CPU_ISA=portable|avx2 caps the kernel level from the start (to compare summation orders end to end).
int isa_limit_from_env() {
    if (env_is("EMBER_CPU_ISA", "portable")) return static_cast<int>(Isa::Portable);
    if (env_is("EMBER_CPU_ISA", "avx2")) return static_cast<int>(Isa::Avx2);
    return static_cast<int>(Isa::Avx512);
}
std::atomic<int> g_isa_limit{isa_limit_from_env()};

bool ggml_avx2_type(GgmlType t) {  // the types linear_ggml_avx2.cpp has kernels for
    switch (t) {
        case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q8_0:
        case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: return true;
        default: return false;
    }
}

bool avx2_handles(const Weight& W) {
    if (W.format == WeightFormat::DENSE) return true;
    if (W.format == WeightFormat::GGML) return ggml_avx2_type(W.ggml_type);
    return W.bits == 2 || W.bits == 4 || W.bits == 8;
}

// A GGML weight of a plain type (F32/F16/BF16) is an ordinary dense matrix.
bool ggml_plain(GgmlType t, DType* dt) {
    switch (t) {
        case GgmlType::F32: *dt = DType::F32; return true;
        case GgmlType::F16: *dt = DType::F16; return true;
        case GgmlType::BF16: *dt = DType::BF16; return true;
        default: return false;
    }
}

// Codes [c0, c0 + cnt) of a packed row as floats; c0·bits and cnt·bits are multiples of 32 (whole words).
void decode_codes(const uint32_t* row, int64_t c0, int64_t cnt, int bits, float* q) {
    const uint32_t* p = row + c0 * bits / 32;
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    uint64_t window = 0;
    int have = 0;
    for (int64_t i = 0; i < cnt; ++i) {
        if (have < bits) {
            window |= static_cast<uint64_t>(*p++) << have;
            have += 32;
        }
        q[i] = static_cast<float>(window & mask);
        window >>= bits;
        have -= bits;
    }
}

// Dot product with 8 independent partial sums (vectorizable without reassociation flags).
float dot(const float* a, const float* b, int64_t len) {
    float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
        for (int j = 0; j < 8; ++j) p[j] += a[i + j] * b[i + j];
    float s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    for (; i < len; ++i) s += a[i] * b[i];
    return s;
}

// xp[t] = x[t] with every full block of 8E columns permuted so that shift-and-mask code extraction meets its
// x values in order (see linear_kernels.h); columns after the last full block are copied as they are.
void permute_x(const float* x, int64_t n, int64_t K, int bits, float* xp) {
    const int64_t E = 32 / bits, B = 8 * E, nblk = K / B;
    for (int64_t t = 0; t < n; ++t) {
        const float* src = x + t * K;
        float* dst = xp + t * K;
        for (int64_t blk = 0; blk < nblk; ++blk)
            for (int64_t j = 0; j < 8; ++j)
                for (int64_t k = 0; k < E; ++k) dst[blk * B + k * 8 + j] = src[blk * B + j * E + k];
        for (int64_t c = nblk * B; c < K; ++c) dst[c] = src[c];
    }
}

}  // namespace

// F16C: CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
static bool cpu_has_f16c() {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

Isa cpu_isa() {
    static const Isa isa = [] {
        if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c()))
            return Isa::Portable;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
            return Isa::Avx512;
        return Isa::Avx2;
    }();
    return isa;
}

void set_isa_limit(Isa limit) { g_isa_limit = static_cast<int>(limit); }

void rows_portable(const Args& a, int64_t r0, int64_t r1, float* scratch) {
    (void)scratch;
    const Weight& W = *a.W;
    const int64_t K = W.cols, rows = W.rows, n = a.n;
    float buf[256];  // one decoded group (≤ 128), GGML block (≤ 256) or dense chunk (128)
    for (int64_t r = r0; r < r1; ++r) {
        for (int64_t t0 = 0; t0 < n; t0 += kTokenTile) {
            const int64_t tn = std::min(kTokenTile, n - t0);
            float acc[kTokenTile] = {0, 0, 0, 0};
            if (W.format == WeightFormat::GGML && W.act_q8) {  // integer codes · 8-bit activations per sub-block
                const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
                const int64_t be = tr.block_elems, nb = K / be;
                const uint8_t* row = static_cast<const uint8_t*>(W.data) + r * nb * tr.block_bytes;
                int8_t codes[256];
                float sc[16], mn[16];
                for (int64_t b = 0; b < nb; ++b) {
                    const int sl = ggml_decompose(W.ggml_type, row + b * tr.block_bytes, codes, sc, mn).sub_len;
                    for (int64_t t = 0; t < tn; ++t)
                        for (int64_t s = 0; s < be / sl; ++s) {
                            const int64_t c0 = b * be + s * sl, i32 = (t0 + t) * (K / 32) + c0 / 32;
                            const int8_t* xq = a.xq + (t0 + t) * K + c0;
                            int dot = 0;
                            for (int64_t l = 0; l < sl; ++l) dot += codes[s * sl + l] * xq[l];
                            acc[t] += sc[s] * a.xd[i32] * static_cast<float>(dot) + mn[s] * a.xsum[i32];
                        }
                }
            } else if (W.format == WeightFormat::GGML) {  // each block decoded once per token tile
                const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
                const int64_t be = tr.block_elems, nb = K / be;
                const uint8_t* row = static_cast<const uint8_t*>(W.data) + r * nb * tr.block_bytes;
                for (int64_t b = 0; b < nb; ++b) {
                    ggml_dequantize(W.ggml_type, row + b * tr.block_bytes, be, buf);
                    for (int64_t t = 0; t < tn; ++t) acc[t] += dot(buf, a.x + (t0 + t) * K + b * be, be);
                }
            } else if (W.format == WeightFormat::AFFINE) {
                const int64_t gs = W.group_size, ng = K / gs;
                const uint32_t* row = static_cast<const uint32_t*>(W.data) + r * affine_row_words(K, W.bits);
                for (int64_t g = 0; g < ng; ++g) {
                    decode_codes(row, g * gs, gs, W.bits, buf);
                    const float s = load_float(W.scales, W.sb_dtype, static_cast<size_t>(r * ng + g));
                    const float b = load_float(W.biases, W.sb_dtype, static_cast<size_t>(r * ng + g));
                    for (int64_t t = 0; t < tn; ++t) {
                        const float d = dot(buf, a.x + (t0 + t) * K + g * gs, gs);
                        acc[t] += s * d + b * a.xsum[(t0 + t) * ng + g];
                    }
                }
            } else {
                for (int64_t c0 = 0; c0 < K; c0 += 128) {
                    const int64_t len = std::min<int64_t>(128, K - c0);
                    for (int64_t c = 0; c < len; ++c)
                        buf[c] = load_float(W.data, W.dtype, static_cast<size_t>(r * K + c0 + c));
                    for (int64_t t = 0; t < tn; ++t) acc[t] += dot(buf, a.x + (t0 + t) * K + c0, len);
                }
            }
            for (int64_t t = 0; t < tn; ++t) a.y[(t0 + t) * rows + r] = acc[t];
        }
    }
}

}  // namespace linear_detail

void linear(const Weight& W, const float* x, int64_t n, float* y) {
    using namespace linear_detail;
    EMBER_CHECK(!W.empty() && W.rows >= 0 && W.cols >= 0 && n >= 0, "linear: bad arguments");
    if (W.format == WeightFormat::GGML) {
        DType dt;
        if (ggml_plain(W.ggml_type, &dt)) {
            Weight D = W;
            D.format = WeightFormat::DENSE, D.dtype = dt;
            linear(D, x, n, y);
            return;
        }
        const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
        EMBER_CHECK(tr.supported && W.cols % tr.block_elems == 0, "linear: GGML %s with cols=%lld",
                    tr.name ? tr.name : "(unknown)", static_cast<long long>(W.cols));
    } else if (W.format == WeightFormat::AFFINE) {
        EMBER_CHECK(affine_params_valid(W.bits, W.group_size), "linear: bits=%d group_size=%d", W.bits, W.group_size);
        EMBER_CHECK(W.cols % W.group_size == 0 && W.scales && W.biases && dtype_is_float(W.sb_dtype),
                    "linear: bad affine weight (cols=%lld)", static_cast<long long>(W.cols));
    } else {
        EMBER_CHECK(dtype_is_float(W.dtype), "linear: dense dtype %s", dtype_name(W.dtype));
    }
    if (n == 0 || W.rows == 0) return;
    const int64_t K = W.cols;
    if (K == 0) {
        std::fill(y, y + n * W.rows, 0.0f);
        return;
    }
    const int isa = std::min(static_cast<int>(cpu_isa()), g_isa_limit.load());
    const bool fast = isa >= static_cast<int>(Isa::Avx2) && avx2_handles(W);
    thread_local std::vector<float> xp_buf, xsum_buf;
    Args a;
    a.W = &W, a.x = x, a.xp = x, a.n = n, a.y = y;
    a.avx512 = isa >= static_cast<int>(Isa::Avx512);
    thread_local std::vector<int8_t> xq_buf;
    thread_local std::vector<float> xd_buf;
    const bool act_q8 = W.format == WeightFormat::GGML && W.act_q8;
    if (act_q8) {  // llama.cpp's 8-bit activation blocks; s32 goes where the offset terms read Σx
        const ActBlocks at = ggml_act_blocks(W.ggml_type);
        xq_buf.resize(static_cast<size_t>(n * K));
        xd_buf.resize(static_cast<size_t>(n * K / 32));
        xsum_buf.resize(static_cast<size_t>(n * K / 32));
        for (int64_t t = 0; t < n; ++t)
            ggml_quantize_act(at, x + t * K, K, xq_buf.data() + t * K, xd_buf.data() + t * K / 32,
                              xsum_buf.data() + t * K / 32);
        a.xq = xq_buf.data(), a.xd = xd_buf.data(), a.xsum = xsum_buf.data();
    }
    const bool ggml_min = !act_q8 && W.format == WeightFormat::GGML && (W.ggml_type == GgmlType::Q4_1 ||
                                                             W.ggml_type == GgmlType::Q4_K || W.ggml_type == GgmlType::Q5_K);
    if (W.format == WeightFormat::AFFINE || (fast && ggml_min)) {
        const int64_t gs = W.format == WeightFormat::AFFINE ? W.group_size : 32, ng = K / gs;
        xsum_buf.resize(static_cast<size_t>(n * ng));
        for (int64_t t = 0; t < n; ++t)
            for (int64_t g = 0; g < ng; ++g) {
                double s = 0.0;
                for (int64_t c = g * gs; c < (g + 1) * gs; ++c) s += x[t * K + c];
                xsum_buf[t * ng + g] = static_cast<float>(s);
            }
        a.xsum = xsum_buf.data();
        if (fast && W.format == WeightFormat::AFFINE) {
            xp_buf.resize(static_cast<size_t>(n * K));
            permute_x(x, n, K, W.bits, xp_buf.data());
            a.xp = xp_buf.data();
        }
    }
    // Enough work per thread chunk (~64k multiply-adds) to be worth a thread.
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (K * n));
    const int64_t scratch_n = scratch_floats(W);
    parallel_for(W.rows, grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> scratch(static_cast<size_t>(scratch_n));
        if (fast && act_q8) rows_ggml_q8_avx2(a, r0, r1);
        else if (fast && W.format == WeightFormat::GGML) rows_ggml_avx2(a, r0, r1);
        else if (fast) rows_avx2(a, r0, r1, scratch.data());
        else rows_portable(a, r0, r1, scratch.data());
    });
    if (xp_buf.capacity() > (size_t{1} << 22)) std::vector<float>().swap(xp_buf);  // keep ≤ 16 MiB per thread
    if (xsum_buf.capacity() > (size_t{1} << 22)) std::vector<float>().swap(xsum_buf);
    if (xq_buf.capacity() > (size_t{1} << 24)) std::vector<int8_t>().swap(xq_buf);
    if (xd_buf.capacity() > (size_t{1} << 22)) std::vector<float>().swap(xd_buf);
}

}  // namespace ember
