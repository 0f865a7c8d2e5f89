// CUDA core of Qwen3.5 gated full attention (qwen35.md §2.4 steps 2-6, §2.5), fp32 activations, the KV cache in
// fp32 or bf16 (GatedAttentionDims::kv_bf16: K/V rows rounded to nearest-even bf16 when appended, read back
// exactly; every other step unchanged).
// References: ops/norm/norm.h rmsnorm_ref, ops/rope/rope.h rope_neox_ref, ops/attention/attention.h
// attention_causal_ref, ops/activation/activation.h sigmoid_mul_ref (composed as layers/gated_attention.cpp).
//
// For tokens t = 0..n−1 at positions p_t = pos0 + t (pos0 read from device memory), heads h < n_heads,
// kv heads g < n_kv, R = n_heads / n_kv, g(h) = h / R (HF repeat_kv = repeat_interleave):
//   q_h    = RoPE(RMSNorm(qg[t, h, 0, :]) · q_norm)      gate_h = qg[t, h, 1, :]     (q_proj: per head [q | gate])
//   k_g    = RoPE(RMSNorm(k[t, g, :]) · k_norm)          K[g, p_t, :] ← k_g,  V[g, p_t, :] ← v[t, g, :]
//   o_h    = softmax_{s ≤ p_t}(q_h · K[g(h), s, :] / √d) · V[g(h), s, :]
//   out[t, h·d + c] = o_h[c] · sigmoid(gate_h[c])
// RMSNorm: x / sqrt(mean(x²) + eps) · w (w holds Qwen's 1 + w). RoPE: partial NeoX on dims [0, rot_dim) with the
// fp32 angle float(p)·inv_freq[j] and inv_freq from rope_inv_freq() (bit-identical to the CPU op); dims
// [rot_dim, d) pass through.
//
// Kernels (all graph-capturable: no allocation, no sync, nothing read back to the host):
//   1. prologue: one block per (token, head): q/k RMSNorm + RoPE; q → workspace, k/v appended to the cache.
//   2. attention, flash-decoding style: block = (key split, kv head[, group of ≤ 8 query heads], token). All
//      query heads of a kv head share each K/V row read. Keys in tiles of 32: scores by 8-lane groups (16-byte
//      loads), online softmax in base 2, P·V with a float4 column and an interleaved key subset per thread
//      (the subsets' sums are added once per split). A tile keeps 32 KB of K, then of V, in flight per block.
//      Decode (n == 1): gated_attention_decode_splits() splits are launched (fixed at capture time); from the
//      live length T = pos0 + 1 (device) each block derives its range: chunk = max(64, ⌈T / splits⌉ rounded up
//      to 32), blocks past T exit at once. When one split covers T it writes the gated output directly.
//      Prefill (n > 1) runs attention_prefill.h instead: flash attention on tensor cores (bf16 hi + lo, three
//      products, fp32 accumulation) over a bf16 copy of the cache rows in the workspace, with its own splits and
//      combine.
//   3. combine (decode only, when > 1 split is live): merges (max, Σ, acc) of the splits, applies the gate.
//
// Measured on an H200 (AttentionCuda.Timing, graph replays of the three kernels, d = 256): decode 14-18 us up to
// T = 4K (launch/latency bound); T = 40K: 59 us (8/2 heads, 2.8 TB/s of K+V) and 97 us (16/4, 3.4 TB/s);
// T = 64K: 3.2 / 3.7 TB/s (copy bandwidth ≈ 4.3). Prefill (AttentionPrefillCuda.DISABLED_Timing, 8/2 heads) n = 512:
// 79 us at pos0 = 0, 259 us at pos0 = 4096 (the per-token kernel: 139 us, 1.66 ms); n = 8192 from 0: 3.06 ms.
//
// Capacity: the caller guarantees pos0 + n ≤ capacity (check_kv_capacity() on the host before the step; the
// cache never grows on the device). The kernels do not trust it: a token whose position is outside
// [0, capacity) writes nothing to the cache and gets a NaN output row.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace ember::cuda {

struct GatedAttentionDims {
    int64_t n_heads = 0, n_kv = 0;  // n_heads % n_kv == 0
    int64_t head_dim = 0;           // 16, 32, 64, 96, 128 or 256 (gated_attention_head_dim_supported)
    int64_t rot_dim = 0;            // even, 0 < rot_dim ≤ min(head_dim, 256)
    float rope_theta = 0.f, eps = 0.f;
    int64_t capacity = 0;           // rows per kv head in the cache
    // Variants for the Llama family (layers/attention.h), defaults = Qwen3.5's gated attention:
    bool gated = true;              // qg = [n, H, 2, d] (query | gate) and out = σ(gate) ⊙ o; false: qg = q [n, H, d]
    bool rope_interleaved = false;  // RoPE pairs (2j, 2j+1) (GGUF llama) instead of NeoX (j, j + rot/2)
    const float* freq_factors = nullptr;  // HOST array [rot_dim/2] or nullptr: angle / factor (ops/rope/rope.h)
    float score_mul = 1.f;          // scores q·k·d^-½·score_mul (layers/attention.h)
    // Prefill (n > 1) product precision: false = fp32-faithful (bf16 hi + lo, three tensor-core products per
    // product, rel. error ~2⁻¹⁶); true = one bf16 product (faster; rel. error ~2⁻⁹ in every score and weight).
    bool prefill_bf16 = false;
    // KV cache elements: false = fp32, true = bf16 (half the memory and the decode attention's traffic; rel. error
    // ≤ 2⁻⁹ per stored element). The cache pointers below are float* or __nv_bfloat16* accordingly.
    bool kv_bf16 = false;
};

// Key splits a decode step launches (a pure function of the dims: about 4 blocks per SM of an H200 at long
// context, never more than ⌈capacity / 64⌉ or 1024).
int64_t gated_attention_decode_splits(const GatedAttentionDims& d);

// Workspace for calls with up to max_tokens tokens: q after norm/RoPE [max_tokens, n_heads, d] plus the decode
// partials [splits, n_heads, d + 2] (fp32) or, for n > 1, the prefill's bf16 cache copy (2 · n_kv · capacity · d
// · 4 bytes; half in bf16 mode) and its split partials (attention_prefill.h).
size_t gated_attention_workspace_bytes(const GatedAttentionDims& d, int64_t max_tokens);

// Paged caches (the batched engine's shared pools): a pool of pages [n_pages][n_kv][kKvPage][d] and a page table
// whose row per sequence lists its pages in order — cache row p of kv head g of that sequence is row p % kKvPage of
// head g in page pages[p / kKvPage]. The caller keeps the pages of positions [0, pos0 + n) allocated before a call.
constexpr int64_t kKvPage = 64;
#if defined(__CUDACC__)
#define EMBER_KV_HD __host__ __device__
#else
#define EMBER_KV_HD
#endif
// Element offset of cache row p (of its sequence) of kv head g when that row's page is `page`: host copies
// (cuda_state_io.cpp, the tests) and the kernels address a page pool with this one formula.
EMBER_KV_HD inline int64_t kv_page_elem(int64_t page, int64_t g, int64_t p, int64_t G, int64_t D) {
    return ((page * G + g) * kKvPage + p % kKvPage) * D;
}

// Head dims the kernels are built for (16, 32, 64, 96, 128, 256).
bool gated_attention_head_dim_supported(int64_t head_dim);

// Host check the caller runs before a step: error unless 0 ≤ pos0 and pos0 + n ≤ capacity.
Status check_kv_capacity(int64_t pos0, int64_t n, int64_t capacity);

// qg [n, n_heads, 2, d] (q_proj output; [n, n_heads, d] when !gated), k, v [n, n_kv, d], q_norm, k_norm [d] or nullptr (no norm),
// K_cache, V_cache [n_kv, capacity, d] (fp32 or bf16 elements: dims.kv_bf16), pos0_dev: device int32 position of token 0, out [n, n_heads·d] (must
// not alias the inputs), workspace ≥ gated_attention_workspace_bytes(dims, n) bytes. qg, out, the caches and
// the workspace must be 16-byte aligned. n ≤ 65535. pages (device, or nullptr: contiguous caches): the sequence's
// page list (kKvPage above) — K_cache / V_cache are then the page pools.
void gated_attention_core(const GatedAttentionDims& dims, const float* qg, const float* k, const float* v,
                          const float* q_norm, const float* k_norm, void* K_cache, void* V_cache,
                          const int32_t* pos0_dev, int64_t n, float* out, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream, const int32_t* pages = nullptr);

// ---- batched decode: many sequences, one token each ----------------------------------------------------------
// Row r < n is the next token of the sequence in slot rows_dev[2r] at position rows_dev[2r + 1] (device int32
// pairs, read when the kernels run: graph-capturable with the rows rewritten between replays). That sequence's
// caches are K_pool / V_pool + slot · n_kv · capacity · d elements ([n_kv, capacity, d] each, as above). Same math
// as gated_attention_core with n = 1 on that slot's caches; the key splits per row are
// gated_attention_rows_splits(d, n) (fewer than a single decode's, so that n rows fill the GPU about as one
// does), so a row's output equals the single-sequence call up to the order of the fp32 sums. A slot outside
// [0, n_slots) or a position outside [0, capacity) gives that row NaN and writes nothing. Rows must name distinct
// slots. n ≤ 65535; workspace ≥ gated_attention_rows_workspace_bytes(d, n). page_table (device, or nullptr:
// contiguous pools): [n_slots][page_stride] page lists, K_pool / V_pool the page pools (kKvPage above).
int64_t gated_attention_rows_splits(const GatedAttentionDims& d, int64_t n_rows);
size_t gated_attention_rows_workspace_bytes(const GatedAttentionDims& d, int64_t max_rows);
void gated_attention_decode_rows(const GatedAttentionDims& d, const float* qg, const float* k, const float* v,
                                 const float* q_norm, const float* k_norm, void* K_pool, void* V_pool,
                                 int64_t n_slots, const int32_t* rows_dev, int64_t n, float* out, void* workspace,
                                 size_t workspace_bytes, cudaStream_t stream, const int32_t* page_table = nullptr,
                                 int64_t page_stride = 0);

}  // namespace ember::cuda
