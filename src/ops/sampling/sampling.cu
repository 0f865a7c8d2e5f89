// CUDA token selection (spec: sampling_cuda.h): argmax, penalties, and the sampling pipeline
//   block max → [radix histogram → select] × 3 → draw (gather or Gumbel-max) → finish,
// nine kernels whose control flow depends only on device data, so one captured graph serves any parameters.
// Every kernel of the pipeline works on rows (sampling_rows_cuda.h): row r is blockIdx.y of the multi-block
// kernels and blockIdx.x of the single-block ones, with its own logits row, params[r], workspace slice and
// (through the row → slot map) RNG state and counts; the single-row API is the rows = 1 case, so a row of a
// batch draws exactly what sample() draws for the same logits, parameters and RNG state.
#include "ops/sampling/sampling_cuda.h"
#include "ops/sampling/sampling_rows_cuda.h"

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace ember::cuda {

namespace {

using u64 = unsigned long long;

constexpr int kThreads = 256;   // multi-block kernels over the vocabulary
constexpr int kOneBlock = 1024;  // single-block kernels (== kMaxTopK: one candidate per thread)
constexpr int kMaxBlocks = 1024;
constexpr int kPerThread = 8;    // vocabulary elements per thread when sizing the grid
constexpr int kBins = 2048;
constexpr int kShift[3] = {21, 10, 0};  // radix digits of the 32-bit key: bits 31..21, 20..10, 9..0
constexpr int kDigitBits[3] = {11, 11, 10};
constexpr u64 kGamma = 0x9e3779b97f4a7c15ULL;
constexpr float kFxScale = 1099511627776.f;  // 2^40: fixed-point mass, w ∈ (0, 1] → [0, 2^40]
constexpr unsigned kFull = 0xffffffffu;
static_assert(kOneBlock == kMaxTopK, "one top-k candidate per thread in k_finish");

enum : int32_t { MODE_GREEDY = 0, MODE_TOPK = 1, MODE_TOPP = 2, MODE_ALL = 3 };

// The cut in the total order (key desc, id asc): token i is inside iff key > tau, or key == tau and i ≤ cut_id.
struct SelectState {
    int32_t mode, no_cut, argmax, k_eff;
    uint32_t prefix, tau, cut_id, pad;
    float M, pad2;
    u64 need;  // count (top-k) or fixed-point mass (top-p) still to cover inside the current radix bucket
};

struct Scratch {
    uint32_t cnt[3][kBins];  // per pass: tokens per digit
    u64 mass[3][kBins];      // per pass: Σ round(w · 2^40) per digit (top-p only)
    uint32_t gather_n, pad[3];
    u64 gather[kMaxTopK];    // top-k candidates, packed (key, id)
    SelectState st;
};
constexpr size_t kZeroBytes = offsetof(Scratch, gather);  // cnt, mass, gather_n: zeroed by the first kernel
static_assert(kZeroBytes % 4 == 0, "zeroed as words");

__host__ __device__ constexpr size_t align256(size_t x) { return (x + 255) / 256 * 256; }

// One row's slice of the sampling workspace: [Scratch][part_max: G][part_draw: G], each 256-byte aligned; rows
// follow each other every `stride` bytes (row_ws_bytes).
size_t row_ws_bytes(int G) { return align256(sizeof(Scratch)) + 2 * align256(size_t(G) * sizeof(u64)); }
struct RowWs {
    Scratch* ws;
    u64 *part_max, *part_draw;
};
__device__ __forceinline__ RowWs row_ws(void* base, int64_t stride, int64_t r, int G) {
    char* p = static_cast<char*>(base) + r * stride;
    RowWs w;
    w.ws = reinterpret_cast<Scratch*>(p);
    w.part_max = reinterpret_cast<u64*>(p + align256(sizeof(Scratch)));
    w.part_draw = w.part_max + align256(size_t(G) * sizeof(u64)) / sizeof(u64);
    return w;
}
// The slot of row r: slots[r · stride], or r itself when there is no map (the single-row API).
__device__ __forceinline__ int64_t slot_of(const int32_t* slots, int32_t stride, int64_t r) {
    return slots ? int64_t(slots[r * stride]) : r;
}

int grid_for(int64_t vocab) {
    int64_t g = (vocab + int64_t(kThreads) * kPerThread - 1) / (int64_t(kThreads) * kPerThread);
    return static_cast<int>(g < 1 ? 1 : (g > kMaxBlocks ? kMaxBlocks : g));
}

// ---- device helpers -----------------------------------------------------------------------------------------

// Order-preserving key: a > b ⇔ key(a) > key(b) for non-NaN floats; −0 and +0 share a key; NaN → 0 (below −inf).
__device__ __forceinline__ uint32_t order_key(float f) {
    if (isnan(f)) return 0u;
    const uint32_t u = __float_as_uint(f == 0.f ? 0.f : f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// (key, id) packed so that the u64 maximum is the largest key, then the lowest id. Never 0 for a real token.
__device__ __forceinline__ u64 pack(uint32_t key, int64_t id) {
    return (u64(key) << 32) | u64(0xffffffffu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ int32_t unpack_id(u64 p) { return static_cast<int32_t>(0xffffffffu - uint32_t(p)); }

__device__ __forceinline__ u64 mix64(u64 z) {  // splitmix64 finalizer
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 max_u64(u64 a, u64 b) { return a > b ? a : b; }

template <int NT>
__device__ u64 block_max_u64(u64 v) {
    __shared__ u64 s[NT / 32 + 1];
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = max_u64(v, __shfl_xor_sync(kFull, v, o));
    if (l == 0) s[w] = v;
    __syncthreads();
    if (w == 0) {
        u64 x = l < NT / 32 ? s[l] : 0ull;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) x = max_u64(x, __shfl_xor_sync(kFull, x, o));
        if (l == 0) s[NT / 32] = x;
    }
    __syncthreads();
    const u64 r = s[NT / 32];
    __syncthreads();  // s may be reused by a later call
    return r;
}

// Exclusive prefix sum over the block in thread order (fixed tree: deterministic for doubles too).
// *total (optional) receives the block total. Every thread must call it.
template <int NT, class T>
__device__ T block_exclusive_scan(T v, T* total) {
    __shared__ T s[NT / 32 + 1];
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    T x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(kFull, x, o);
        if (l >= o) x += y;
    }
    if (l == 31) s[w] = x;
    __syncthreads();
    if (w == 0) {
        const T t = l < NT / 32 ? s[l] : T(0);
        T ti = t;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const T y = __shfl_up_sync(kFull, ti, o);
            if (l >= o) ti += y;
        }
        if (l < NT / 32) s[l] = ti - t;
        if (l == NT / 32 - 1) s[NT / 32] = ti;
    }
    __syncthreads();
    const T r = s[w] + (x - v);
    if (total) *total = s[NT / 32];
    __syncthreads();
    return r;
}

__device__ __forceinline__ int32_t compute_mode(const DeviceSamplingParams& p, int64_t vocab, float M) {
    if (!(p.temperature > 0.f) || p.top_k == 1 || !isfinite(M)) return MODE_GREEDY;
    if (p.top_k > 0 && int64_t(p.top_k) < vocab) return MODE_TOPK;
    if (p.top_p < 1.f) return MODE_TOPP;
    return MODE_ALL;
}

// round(w · 2^40) with w = exp((l − M)/T) as the CPU computes it; 0 for NaN and underflow.
__device__ __forceinline__ u64 mass_fx(float l, float M, float T) {
    const float w = expf((l - M) / T);
    return w > 0.f ? __float2ull_rn(w * kFxScale) : 0ull;
}

// ---- kernels ------------------------------------------------------------------------------------------------

// Token masks read on the way (argmax_rows_masked; mask null: none): row r's mask is row mask_row[r] of mask (none if
// < 0; mask_row null: row r), and a logit whose bit is clear counts as −inf (what apply_token_mask writes there).
struct MaskRef {
    const uint32_t* mask;
    int64_t stride;
    const int32_t* row;
    __device__ __forceinline__ const uint32_t* of(int64_t r) const {
        if (!mask) return nullptr;
        const int64_t mr = row ? int64_t(row[r]) : r;
        return mr < 0 ? nullptr : mask + mr * stride;
    }
};
__device__ __forceinline__ float masked_logit(float l, const uint32_t* m, int64_t i) {
    return !m || ((m[i >> 5] >> (i & 31)) & 1u) ? l : -__int_as_float(0x7f800000);
}

// Per-block maximum of pack(key, id) → part[blockIdx.x]; optionally zeroes `zero_words` words (sampling scratch)
// and applies the row's token mask (a warp's 32 consecutive tokens share one mask word; the logits are not written).
// Each thread issues its kPerThread loads before using any of them.
__global__ void __launch_bounds__(kThreads)
    k_block_max(const float* __restrict__ logits, int64_t vocab, u64* __restrict__ part, int64_t part_stride,
                uint32_t* zero, int zero_words, int64_t zero_stride, MaskRef mk) {
    pdl_trigger();  // argmax() launches this kernel and its successor with PDL
    pdl_wait();
    logits += int64_t(blockIdx.y) * vocab;  // row blockIdx.y (argmax_rows, sample_rows; else 0)
    part += int64_t(blockIdx.y) * part_stride;
    if (zero) zero = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(zero) + int64_t(blockIdx.y) * zero_stride);
    const uint32_t* m = mk.of(blockIdx.y);
    const int64_t stride = int64_t(gridDim.x) * kThreads, first = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    if (zero)
        for (int64_t i = first; i < zero_words; i += stride) zero[i] = 0u;
    u64 best = 0;
    for (int64_t i0 = first; i0 < vocab; i0 += stride * kPerThread) {
        float lv[kPerThread];
#pragma unroll
        for (int u = 0; u < kPerThread; ++u) {
            const int64_t i = i0 + u * stride;
            lv[u] = i < vocab ? logits[i] : __int_as_float(0x7fc00000);
        }
#pragma unroll
        for (int u = 0; u < kPerThread; ++u) {
            const int64_t i = i0 + u * stride;
            if (i < vocab) best = max_u64(best, pack(order_key(masked_logit(lv[u], m, i)), i));
        }
    }
    best = block_max_u64<kThreads>(best);
    if (threadIdx.x == 0) part[blockIdx.x] = best;
}

// Block r: the maximum of row r's G partials → out_id[r] (and out_logit[r] = that row's logit when given; under a
// token mask −inf when the chosen token is masked, i.e. every allowed logit is −inf or NaN).
__global__ void __launch_bounds__(kThreads) k_argmax_final(const u64* __restrict__ part, int G, int32_t* out_id,
                                                           const float* __restrict__ logits, int64_t vocab,
                                                           float* __restrict__ out_logit, MaskRef mk) {
    pdl_trigger();
    pdl_wait();
    const int r = blockIdx.x;
    part += int64_t(r) * G;
    u64 best = 0;
    for (int b = threadIdx.x; b < G; b += kThreads) best = max_u64(best, part[b]);
    best = block_max_u64<kThreads>(best);
    if (threadIdx.x == 0) {
        const int32_t id = unpack_id(best);
        out_id[r] = id;
        if (out_logit) out_logit[r] = masked_logit(logits[int64_t(r) * vocab + id], mk.of(r), id);
    }
}

// Radix pass PASS: histogram of digit PASS of the key over the tokens whose higher digits equal the selected
// prefix, counts and (top-p) fixed-point mass, in shared memory with native 32-bit atomics (the mass as two
// sums of 20-bit halves; ≤ 2048 tokens per block keeps them exact), then added to the global histogram.
// Integer sums: the result does not depend on the order of the atomics. (Pre-combining equal digits within
// a warp with match_any + redux measured 2× slower on an H200.)
template <int PASS>
__global__ void __launch_bounds__(kThreads)
    k_hist(const float* __restrict__ logits, int64_t vocab, const DeviceSamplingParams* __restrict__ params,
           void* ws_base, int64_t ws_stride, int G) {
    constexpr int shift = kShift[PASS], nb = 1 << kDigitBits[PASS];
    __shared__ uint32_t s_cnt[kBins], s_hi[kBins], s_lo[kBins];
    const int tid = threadIdx.x;
    const int64_t row = blockIdx.y;
    const RowWs rw = row_ws(ws_base, ws_stride, row, G);
    Scratch* ws = rw.ws;
    const u64* part_max = rw.part_max;
    logits += row * vocab;
    params += row;
    const DeviceSamplingParams p = *params;
    int32_t mode;
    float M;
    uint32_t prefix = 0;
    if constexpr (PASS == 0) {
        u64 best = 0;
        for (int b = tid; b < G; b += kThreads) best = max_u64(best, part_max[b]);
        best = block_max_u64<kThreads>(best);
        M = logits[unpack_id(best)];
        mode = compute_mode(p, vocab, M);
    } else {
        if (ws->st.no_cut) return;
        mode = ws->st.mode;
        M = ws->st.M;
        prefix = ws->st.prefix;
    }
    if (mode != MODE_TOPK && mode != MODE_TOPP) return;
    const bool use_mass = mode == MODE_TOPP;
    for (int b = tid; b < nb; b += kThreads) {
        s_cnt[b] = 0u;
        s_hi[b] = 0u;
        s_lo[b] = 0u;
    }
    __syncthreads();
    const int64_t stride = int64_t(gridDim.x) * kThreads, first = int64_t(blockIdx.x) * kThreads + tid;
    for (int64_t i0 = first; i0 < vocab; i0 += stride * kPerThread) {
        float lv[kPerThread];  // all loads first
#pragma unroll
        for (int u = 0; u < kPerThread; ++u) {
            const int64_t i = i0 + u * stride;
            lv[u] = i < vocab ? logits[i] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kPerThread; ++u) {
            if (i0 + u * stride >= vocab) break;
            bool in = true;
            const float l = lv[u];
            const uint32_t key = order_key(l);
            if constexpr (PASS > 0) {
                constexpr int hi = shift + kDigitBits[PASS];
                in = in && (key >> hi) == (prefix >> hi);
            }
            if (in) {
                const uint32_t d = (key >> shift) & uint32_t(nb - 1);
                if (use_mass) {  // fx ≤ 2^40 as two 20-bit halves: 32-bit sums stay exact for ≤ 2048 tokens
                    const u64 fx = mass_fx(l, M, p.temperature);
                    atomicAdd(&s_hi[d], static_cast<uint32_t>(fx >> 20));
                    atomicAdd(&s_lo[d], static_cast<uint32_t>(fx & 0xfffffu));
                }
                atomicAdd(&s_cnt[d], 1u);
            }
        }
    }
    __syncthreads();
    for (int b = tid; b < nb; b += kThreads) {
        if (s_cnt[b]) {
            atomicAdd(&ws->cnt[PASS][b], s_cnt[b]);
            const u64 m = (u64(s_hi[b]) << 20) + u64(s_lo[b]);
            if (use_mass && m) atomicAdd(&ws->mass[PASS][b], m);
        }
    }
}

// Radix select step PASS (one block): walks the digits from the top, finds the digit where the running count
// (top-k) or mass (top-p) reaches `need`, narrows the prefix. Pass 0 also fixes the mode, the maximum and the
// target; pass 2 knows the exact cut key and resolves ties at it by id.
template <int PASS>
__global__ void __launch_bounds__(kOneBlock)
    k_select(const float* __restrict__ logits, int64_t vocab, const DeviceSamplingParams* __restrict__ params,
             void* ws_base, int64_t ws_stride, int G) {
    constexpr int nb = 1 << kDigitBits[PASS], E = nb / kOneBlock, shift = kShift[PASS];
    __shared__ int s_cross;
    __shared__ u64 s_above;
    __shared__ int64_t s_cut;
    const int tid = threadIdx.x;
    const int64_t row = blockIdx.x;
    const RowWs rw = row_ws(ws_base, ws_stride, row, G);
    Scratch* ws = rw.ws;
    const u64* part_max = rw.part_max;
    logits += row * vocab;
    params += row;
    SelectState& st = ws->st;
    const DeviceSamplingParams p = *params;
    int32_t mode;
    u64 need = 0;
    uint32_t prefix = 0;
    if (tid == 0) s_cross = -1;
    if constexpr (PASS == 0) {
        u64 best = 0;
        for (int b = tid; b < G; b += kOneBlock) best = max_u64(best, part_max[b]);
        best = block_max_u64<kOneBlock>(best);
        const int32_t am = unpack_id(best);
        const float M = logits[am];
        mode = compute_mode(p, vocab, M);
        if (tid == 0) {
            st.mode = mode;
            st.no_cut = 0;
            st.argmax = am;
            st.k_eff = p.top_k < kMaxTopK ? p.top_k : kMaxTopK;
            st.prefix = 0u;
            st.tau = 0u;
            st.cut_id = 0xffffffffu;
            st.M = M;
            st.need = 0ull;
        }
        if (mode != MODE_TOPK && mode != MODE_TOPP) return;
    } else {
        mode = st.mode;
        if ((mode != MODE_TOPK && mode != MODE_TOPP) || st.no_cut) return;
        need = st.need;
        prefix = st.prefix;
    }
    const bool by_mass = mode == MODE_TOPP;
    // Position q (descending digit order) ↔ digit nb − 1 − q; thread t holds positions t·E .. t·E + E − 1.
    u64 m[E];
    u64 local = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int bin = nb - 1 - (tid * E + e);
        m[e] = by_mass ? ws->mass[PASS][bin] : u64(ws->cnt[PASS][bin]);
        local += m[e];
    }
    u64 total;
    const u64 excl = block_exclusive_scan<kOneBlock, u64>(local, &total);
    if constexpr (PASS == 0) {
        if (by_mass) {  // smallest prefix with Σ fx ≥ top_p · Σ fx (at least one token)
            const double c = ceil(double(p.top_p) * double(total));
            need = c < 1.0 ? 1ull : (c >= double(total) ? total : static_cast<u64>(c));
            if (need > total || total == 0) {  // cannot happen unless everything underflowed: keep all
                if (tid == 0) st.no_cut = 1;
                return;
            }
        } else {
            need = static_cast<u64>(p.top_k < kMaxTopK ? p.top_k : kMaxTopK);  // < vocab ≤ total
        }
    }
    u64 run = excl;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const u64 incl = run + m[e];
        if (run < need && incl >= need) {  // exactly one position satisfies this
            s_cross = tid * E + e;
            s_above = run;
        }
        run = incl;
    }
    __syncthreads();
    const uint32_t d = uint32_t(nb - 1 - s_cross);
    need -= s_above;
    prefix |= d << shift;
    if constexpr (PASS < 2) {
        if (tid == 0) {
            st.need = need;
            st.prefix = prefix;
        }
        return;
    } else {
        // prefix is now the exact key tau of the last token inside the cut; take `take` of its tie_total tokens.
        const uint32_t tie_total = ws->cnt[2][d];
        u64 take = need;
        if (by_mass) {  // tied tokens have equal fixed-point mass
            const u64 per = ws->mass[2][d] / tie_total;
            take = per ? (need + per - 1) / per : u64(tie_total);
        }
        if (take < 1) take = 1;
        if (take > tie_total) take = tie_total;
        uint32_t cut = 0xffffffffu;
        if (take < tie_total) {  // rare (exactly equal logits at the cut): the take-th tie in id order
            const int64_t seg = (vocab + kOneBlock - 1) / kOneBlock;
            const int64_t b0 = int64_t(tid) * seg, b1 = b0 + seg < vocab ? b0 + seg : vocab;
            uint32_t c = 0;
            for (int64_t i = b0; i < b1; ++i) c += order_key(logits[i]) == prefix;
            const u64 ex = block_exclusive_scan<kOneBlock, u64>(u64(c), nullptr);
            if (ex < take && ex + c >= take) {
                u64 r = take - ex;
                for (int64_t i = b0; i < b1; ++i)
                    if (order_key(logits[i]) == prefix && --r == 0) {
                        s_cut = i;
                        break;
                    }
            }
            __syncthreads();
            cut = static_cast<uint32_t>(s_cut);
        }
        if (tid == 0) {
            st.prefix = prefix;
            st.tau = prefix;
            st.cut_id = cut;
        }
    }
}

// Top-k: gathers the tokens inside the cut. Otherwise: Gumbel-max over the kept tokens → part_draw.
__global__ void __launch_bounds__(kThreads)
    k_draw(const float* __restrict__ logits, int64_t vocab, const DeviceSamplingParams* __restrict__ params,
           void* ws_base, int64_t ws_stride, int G, const uint64_t* __restrict__ rng_state,
           const int32_t* __restrict__ slots, int32_t slot_stride) {
    const int64_t row = blockIdx.y;
    const RowWs rw = row_ws(ws_base, ws_stride, row, G);
    Scratch* ws = rw.ws;
    u64* part_draw = rw.part_draw;
    logits += row * vocab;
    params += row;
    const int32_t mode = ws->st.mode;
    if (mode == MODE_GREEDY) return;
    const uint32_t tau = ws->st.tau, cut_id = ws->st.cut_id;
    const int64_t stride = int64_t(gridDim.x) * kThreads, first = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    if (mode == MODE_TOPK) {
        for (int64_t i = first; i < vocab; i += stride) {
            const uint32_t key = order_key(logits[i]);
            if (key > tau || (key == tau && uint32_t(i) <= cut_id)) {
                const uint32_t slot = atomicAdd(&ws->gather_n, 1u);
                if (slot < uint32_t(kMaxTopK)) ws->gather[slot] = pack(key, i);
            }
        }
        return;
    }
    const DeviceSamplingParams p = *params;
    const bool cut = mode == MODE_TOPP && !ws->st.no_cut;
    const float M = ws->st.M, T = p.temperature, min_p = fminf(fmaxf(p.min_p, 0.f), 1.f);
    const u64 key0 = mix64(rng_state[slot_of(slots, slot_stride, row)]);
    u64 best = 0;
    for (int64_t i0 = first; i0 < vocab; i0 += stride * kPerThread) {
        float lv[kPerThread];
#pragma unroll
        for (int u = 0; u < kPerThread; ++u) {
            const int64_t i = i0 + u * stride;
            lv[u] = i < vocab ? logits[i] : __int_as_float(0x7fc00000);  // NaN: never kept
        }
#pragma unroll
        for (int u = 0; u < kPerThread; ++u) {
            const int64_t i = i0 + u * stride;
            const float l = lv[u];
            const float x = (l - M) / T;
            const float w = expf(x);
            bool keep = w > 0.f && w >= min_p;
            if (keep && cut) {
                const uint32_t key = order_key(l);
                keep = key > tau || (key == tau && uint32_t(i) <= cut_id);
            }
            if (keep) {
                const u64 r = mix64(key0 + u64(i + 1) * kGamma);
                const float uu = (float(r >> 41) + 0.5f) * 0x1p-23f;  // (0, 1), never 0 or 1
                const float gk = x - logf(-logf(uu));                 // log w + Gumbel
                best = max_u64(best, pack(order_key(gk), i));
            }
        }
    }
    best = block_max_u64<kThreads>(best);
    if (threadIdx.x == 0) part_draw[blockIdx.x] = best;
}

// Writes out_id and advances the RNG state (non-greedy modes).
__global__ void __launch_bounds__(kOneBlock)
    k_finish(const float* __restrict__ logits, int64_t vocab, const DeviceSamplingParams* __restrict__ params,
             void* ws_base, int64_t ws_stride, int G, uint64_t* rng_state, const int32_t* __restrict__ slots,
             int32_t slot_stride, int32_t* out_id, float* out_logit) {
    __shared__ u64 s_key[kMaxTopK];
    const int tid = threadIdx.x;
    const int64_t row = blockIdx.x;
    const RowWs rw = row_ws(ws_base, ws_stride, row, G);
    Scratch* ws = rw.ws;
    const u64* part_draw = rw.part_draw;
    logits += row * vocab;
    params += row;
    out_id += row;
    if (out_logit) out_logit += row;
    const int32_t mode = ws->st.mode;
    if (mode == MODE_GREEDY) {  // the RNG state is not read or written
        if (tid == 0) {
            *out_id = ws->st.argmax;
            if (out_logit) *out_logit = logits[ws->st.argmax];
        }
        return;
    }
    rng_state += slot_of(slots, slot_stride, row);
    const u64 state = *rng_state;
    if (mode != MODE_TOPK) {
        u64 best = 0;
        for (int b = tid; b < G; b += kOneBlock) best = max_u64(best, part_draw[b]);
        best = block_max_u64<kOneBlock>(best);
        if (tid == 0) {
            const int32_t id = best ? unpack_id(best) : ws->st.argmax;  // best == 0 cannot happen: the max is kept
            *out_id = id;
            if (out_logit) *out_logit = logits[id];
            *rng_state = state + 1;
        }
        return;
    }
    // Top-k: sort the candidates (key desc, id asc), then stages 5-8 as the CPU does them.
    const DeviceSamplingParams p = *params;
    const uint32_t n = ws->gather_n < uint32_t(kMaxTopK) ? ws->gather_n : uint32_t(kMaxTopK);
    s_key[tid] = uint32_t(tid) < n ? ws->gather[tid] : 0ull;
    __syncthreads();
    int P = 32;  // sort length: next power of two ≥ n (entries past n are 0 and sort last)
    while (P < int(n)) P <<= 1;
    for (int k = 2; k <= P; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int ixj = tid ^ j;
            if (ixj > tid && tid < P) {
                const u64 a = s_key[tid], b = s_key[ixj];
                if ((tid & k) == 0 ? a < b : a > b) {
                    s_key[tid] = b;
                    s_key[ixj] = a;
                }
            }
            __syncthreads();
        }
    const float M = ws->st.M, T = p.temperature, min_p = fminf(fmaxf(p.min_p, 0.f), 1.f);
    int32_t id = -1;
    float w = 0.f;
    if (uint32_t(tid) < n) {
        id = unpack_id(s_key[tid]);
        w = expf((logits[id] - M) / T);
        if (!(w > 0.f)) w = 0.f;  // NaN logits and underflow drop out, as on the CPU
    }
    double Z;
    block_exclusive_scan<kOneBlock, double>(double(w), &Z);  // softmax normaliser over the top-k set
    const bool surv = w > 0.f && w >= min_p;                 // a prefix: w does not increase along the order
    bool kept = surv;
    if (p.top_p < 1.f) {
        const double excl = block_exclusive_scan<kOneBlock, double>(surv ? double(w) : 0.0, nullptr);
        kept = surv && (tid == 0 || excl < double(p.top_p) * Z);
    }
    const double kw = kept ? double(w) : 0.0;
    double total;
    const double incl = block_exclusive_scan<kOneBlock, double>(kw, &total) + kw;
    const double target = double(mix64(mix64(state)) >> 11) * 0x1.0p-53 * total;
    u64 n_kept, n_le;
    block_exclusive_scan<kOneBlock, u64>(kept ? 1ull : 0ull, &n_kept);
    block_exclusive_scan<kOneBlock, u64>(kept && incl <= target ? 1ull : 0ull, &n_le);
    const u64 pick = n_le < n_kept ? n_le : n_kept - 1;  // first kept token whose inclusive sum exceeds target
    if (u64(tid) == pick) {
        *out_id = id;
        if (out_logit) *out_logit = logits[id];
    }
    if (tid == 0) *rng_state = state + 1;
}

__global__ void k_penalties(float* logits, int64_t vocab, const int32_t* __restrict__ counts,
                            const DeviceSamplingParams* __restrict__ params, const int32_t* __restrict__ slots,
                            int32_t slot_stride) {
    const int64_t row = blockIdx.y;
    logits += row * vocab;
    counts += slot_of(slots, slot_stride, row) * vocab;
    const DeviceSamplingParams p = params[row];
    if (p.repetition_penalty == 1.f && p.presence_penalty == 0.f && p.frequency_penalty == 0.f) return;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vocab; i += int64_t(gridDim.x) * blockDim.x) {
        const int32_t c = counts[i];
        if (c > 0) {
            float l = logits[i];
            l = l > 0.f ? l / p.repetition_penalty : l * p.repetition_penalty;
            logits[i] = __fsub_rn(l, __fadd_rn(__fmul_rn(float(c), p.frequency_penalty), p.presence_penalty));
        }
    }
}

__global__ void k_gather_logit(const float* logits, int64_t vocab, const int32_t* id, float* out) {
    pdl_wait();
    const int32_t i = *id;
    *out = (i >= 0 && i < vocab) ? logits[i] : __int_as_float(0x7fc00000);
}

__global__ void k_counts_add(int32_t* counts, int64_t vocab, const int32_t* id, int32_t delta) {
    const int32_t t = *id;
    if (t >= 0 && int64_t(t) < vocab) counts[t] += delta;
}

// Thread r: row r's slot gains win[2r] (+1) and loses win[2r + 1] (−1), each when in [0, vocab).
__global__ void k_counts_rows(int32_t* counts, int64_t rows, int64_t vocab, const int32_t* __restrict__ win,
                              const int32_t* __restrict__ slots, int32_t slot_stride) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int32_t* c = counts + slot_of(slots, slot_stride, r) * vocab;
    const int32_t enter = win[2 * r], leave = win[2 * r + 1];
    if (enter >= 0 && int64_t(enter) < vocab) c[enter] += 1;
    if (leave >= 0 && int64_t(leave) < vocab) c[leave] -= 1;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

Status check_device_sampling_params(const SamplingParams& p) {
    if (p.top_k > kMaxTopK)
        return errorf("top_k = %d: the GPU sampler supports top_k ≤ %d", p.top_k, kMaxTopK);
    return Status::ok();
}

size_t argmax_workspace_bytes(int64_t vocab) { return align256(size_t(grid_for(vocab)) * sizeof(u64)); }

void argmax(const float* logits, int64_t vocab, int32_t* out_id, void* workspace, cudaStream_t stream) {
    EMBER_CHECK(vocab > 0 && vocab < INT32_MAX, "argmax: vocab %lld", (long long)vocab);
    EMBER_CHECK(aligned16(workspace), "argmax: workspace alignment");
    const int G = grid_for(vocab);
    u64* part = static_cast<u64*>(workspace);
    launch_pdl(k_block_max, dim3(G), dim3(kThreads), 0, stream, 0, logits, vocab, part, int64_t(G),
               static_cast<uint32_t*>(nullptr), 0, int64_t(0), MaskRef{});
    launch_pdl(k_argmax_final, dim3(1), dim3(kThreads), 0, stream, 0, part, G, out_id, logits, vocab,
               static_cast<float*>(nullptr), MaskRef{});
}

size_t argmax_rows_workspace_bytes(int64_t rows, int64_t vocab) {
    return align256(size_t(rows) * size_t(grid_for(vocab)) * sizeof(u64));
}

void argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out_ids, float* out_logits,
                 void* workspace, cudaStream_t stream) {
    EMBER_CHECK(vocab > 0 && vocab < INT32_MAX, "argmax_rows: vocab %lld", (long long)vocab);
    EMBER_CHECK(rows >= 0 && rows <= 65535, "argmax_rows: %lld rows", (long long)rows);
    EMBER_CHECK(aligned16(workspace), "argmax_rows: workspace alignment");
    if (rows == 0) return;
    const int G = grid_for(vocab);
    u64* part = static_cast<u64*>(workspace);
    launch_pdl(k_block_max, dim3(G, unsigned(rows)), dim3(kThreads), 0, stream, 0, logits, vocab, part, int64_t(G),
               static_cast<uint32_t*>(nullptr), 0, int64_t(0), MaskRef{});
    launch_pdl(k_argmax_final, dim3(unsigned(rows)), dim3(kThreads), 0, stream, 0, part, G, out_ids, logits, vocab,
               out_logits, MaskRef{});
}

void argmax_rows_masked(const float* logits, int64_t rows, int64_t vocab, const uint32_t* mask, int64_t mask_stride,
                        const int32_t* mask_row, int32_t* out_ids, float* out_logits, void* workspace,
                        cudaStream_t stream) {
    EMBER_CHECK(vocab > 0 && vocab < INT32_MAX, "argmax_rows_masked: vocab %lld", (long long)vocab);
    EMBER_CHECK(rows >= 0 && rows <= 65535, "argmax_rows_masked: %lld rows", (long long)rows);
    EMBER_CHECK(mask != nullptr && mask_stride >= (vocab + 31) / 32, "argmax_rows_masked: mask stride %lld",
                (long long)mask_stride);
    EMBER_CHECK(aligned16(workspace), "argmax_rows_masked: workspace alignment");
    if (rows == 0) return;
    const int G = grid_for(vocab);
    u64* part = static_cast<u64*>(workspace);
    const MaskRef mk{mask, mask_stride, mask_row};
    launch_pdl(k_block_max, dim3(G, unsigned(rows)), dim3(kThreads), 0, stream, 0, logits, vocab, part, int64_t(G),
               static_cast<uint32_t*>(nullptr), 0, int64_t(0), mk);
    launch_pdl(k_argmax_final, dim3(unsigned(rows)), dim3(kThreads), 0, stream, 0, part, G, out_ids, logits, vocab,
               out_logits, mk);
}

void apply_penalties(float* logits, int64_t vocab, const int32_t* counts, const DeviceSamplingParams* params,
                     cudaStream_t stream) {
    apply_penalties_rows(logits, 1, vocab, counts, params, nullptr, 1, stream);
}

void apply_penalties_rows(float* logits, int64_t rows, int64_t vocab, const int32_t* counts,
                          const DeviceSamplingParams* params, const int32_t* slots, int32_t slot_stride,
                          cudaStream_t stream) {
    EMBER_CHECK(vocab > 0 && vocab < INT32_MAX, "apply_penalties: vocab %lld", (long long)vocab);
    EMBER_CHECK(rows >= 0 && rows <= 65535, "apply_penalties_rows: %lld rows", (long long)rows);
    if (rows == 0) return;
    k_penalties<<<dim3(grid_for(vocab), unsigned(rows)), kThreads, 0, stream>>>(logits, vocab, counts, params, slots,
                                                                                slot_stride);
    CUDA_CHECK(cudaGetLastError());
}

void token_counts_update_rows(int32_t* counts, int64_t rows, int64_t vocab, const int32_t* win, const int32_t* slots,
                              int32_t slot_stride, cudaStream_t stream) {
    EMBER_CHECK(vocab > 0 && vocab < INT32_MAX, "token_counts_update_rows: vocab %lld", (long long)vocab);
    if (rows <= 0) return;
    const int nt = 256;
    k_counts_rows<<<unsigned((rows + nt - 1) / nt), nt, 0, stream>>>(counts, rows, vocab, win, slots, slot_stride);
    CUDA_CHECK(cudaGetLastError());
}

void gather_logit(const float* logits, int64_t vocab, const int32_t* id, float* out, cudaStream_t stream) {
    launch_pdl(k_gather_logit, dim3(1), dim3(1), 0, stream, 0, logits, vocab, id, out);
}

void token_counts_add(int32_t* counts, int64_t vocab, const int32_t* id, int32_t delta, cudaStream_t stream) {
    k_counts_add<<<1, 1, 0, stream>>>(counts, vocab, id, delta);
    CUDA_CHECK(cudaGetLastError());
}

size_t sample_workspace_bytes(int64_t vocab) { return row_ws_bytes(grid_for(vocab)); }

size_t sample_rows_workspace_bytes(int64_t rows, int64_t vocab) {
    return size_t(rows < 1 ? 1 : rows) * row_ws_bytes(grid_for(vocab));
}

void sample(const float* logits, int64_t vocab, const DeviceSamplingParams* params, uint64_t* rng_state,
            int32_t* out_id, void* workspace, cudaStream_t stream) {
    sample_rows(logits, 1, vocab, params, rng_state, nullptr, 1, out_id, nullptr, workspace, stream);
}

void sample_rows(const float* logits, int64_t rows, int64_t vocab, const DeviceSamplingParams* params,
                 uint64_t* rng_state, const int32_t* slots, int32_t slot_stride, int32_t* out_ids, float* out_logits,
                 void* workspace, cudaStream_t stream) {
    EMBER_CHECK(vocab > 0 && vocab <= int64_t(kMaxBlocks) * kThreads * kPerThread, "sample: vocab %lld (at most %lld)",
                (long long)vocab, (long long)kMaxBlocks * kThreads * kPerThread);
    EMBER_CHECK(rows >= 0 && rows <= 65535, "sample_rows: %lld rows", (long long)rows);
    EMBER_CHECK(aligned16(workspace), "sample: workspace alignment");
    if (rows == 0) return;
    const int G = grid_for(vocab);
    const int64_t S = int64_t(row_ws_bytes(G));
    const unsigned R = unsigned(rows);
    char* ws = static_cast<char*>(workspace);
    u64* part_max0 = reinterpret_cast<u64*>(ws + align256(sizeof(Scratch)));
    k_block_max<<<dim3(G, R), kThreads, 0, stream>>>(logits, vocab, part_max0, S / int64_t(sizeof(u64)),
                                                     reinterpret_cast<uint32_t*>(ws), static_cast<int>(kZeroBytes / 4),
                                                     S, MaskRef{});
    k_hist<0><<<dim3(G, R), kThreads, 0, stream>>>(logits, vocab, params, ws, S, G);
    k_select<0><<<R, kOneBlock, 0, stream>>>(logits, vocab, params, ws, S, G);
    k_hist<1><<<dim3(G, R), kThreads, 0, stream>>>(logits, vocab, params, ws, S, G);
    k_select<1><<<R, kOneBlock, 0, stream>>>(logits, vocab, params, ws, S, G);
    k_hist<2><<<dim3(G, R), kThreads, 0, stream>>>(logits, vocab, params, ws, S, G);
    k_select<2><<<R, kOneBlock, 0, stream>>>(logits, vocab, params, ws, S, G);
    k_draw<<<dim3(G, R), kThreads, 0, stream>>>(logits, vocab, params, ws, S, G, rng_state, slots, slot_stride);
    k_finish<<<R, kOneBlock, 0, stream>>>(logits, vocab, params, ws, S, G, rng_state, slots, slot_stride, out_ids,
                                          out_logits);
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
