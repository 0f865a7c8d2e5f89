// CUDA token selection: greedy argmax, penalties, and temperature / top-k / top-p / min-p sampling on the
// device, so a decode step needs no host round trip (house-style §3 i). Reference: ops/sampling/sampling.h
// (same pipeline order and semantics; the random draw itself differs from the CPU Sampler's, see sample()).
// Every launcher is graph-capturable: parameters, RNG state and counts are read from device memory when the
// kernels run; no allocation, no synchronisation.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "ops/sampling/sampling.h"

namespace ember::cuda {

// Sampling knobs as the kernels read them (a plain struct the caller keeps in device memory and may rewrite
// between graph replays). Same meaning as SamplingParams; penalty_last_n and seed live with the caller
// (the token-count window and the RNG state).
struct DeviceSamplingParams {
    float temperature = 0.f;         // ≤ 0 → greedy
    int32_t top_k = 0;               // 0 or ≥ vocab = off; 1 = greedy; 2..kMaxTopK; larger values are clamped
    float top_p = 1.f;               // ≥ 1 = off
    float min_p = 0.f;               // clamped to [0, 1]
    float repetition_penalty = 1.f;  // apply_penalties only
    float presence_penalty = 0.f;
    float frequency_penalty = 0.f;
    int32_t reserved = 0;
};

constexpr int kMaxTopK = 1024;

inline DeviceSamplingParams to_device_params(const SamplingParams& p) {
    DeviceSamplingParams d;
    d.temperature = p.temperature;
    d.top_k = p.top_k;
    d.top_p = p.top_p;
    d.min_p = p.min_p;
    d.repetition_penalty = p.repetition_penalty;
    d.presence_penalty = p.presence_penalty;
    d.frequency_penalty = p.frequency_penalty;
    return d;
}

// The host's view of a request, shared by decode_sample and the batched sampler: greedy (no randomness), penalties
// on (counts needed), the same parameters as before (nothing to re-upload or re-seed), and a window's counts.
// (sampling_is_greedy, sampling_has_penalties: ops/sampling/sampling.h)
inline bool same_sampling_params(const SamplingParams& a, const SamplingParams& b) {
    return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
           a.repetition_penalty == b.repetition_penalty && a.presence_penalty == b.presence_penalty &&
           a.frequency_penalty == b.frequency_penalty && a.penalty_last_n == b.penalty_last_n && a.seed == b.seed;
}
// counts [vocab] ← occurrences of each id among the last `last_n` entries of history (−1: all), ids outside
// [0, vocab) ignored.
inline void window_counts(const std::vector<int32_t>& history, int64_t last_n, int64_t vocab, int32_t* counts) {
    std::fill(counts, counts + vocab, 0);
    const int64_t L = static_cast<int64_t>(history.size());
    for (int64_t i = (last_n < 0 || last_n >= L) ? 0 : L - last_n; i < L; ++i)
        if (history[size_t(i)] >= 0 && history[size_t(i)] < vocab) counts[history[size_t(i)]]++;
}

// Host check of what the device path supports (top_k ≤ kMaxTopK); the kernels clamp anything larger.
Status check_device_sampling_params(const SamplingParams& p);

// ---- greedy -------------------------------------------------------------------------------------------------
// out_id[0] = argmax(logits[0..vocab)), ties → lowest id, NaN never chosen, −0 == +0, exactly as ember::argmax;
// all NaN → 0 (ember::argmax returns the last id then; callers check the chosen logit for NaN either way). Two stages: per-block maxima of (value, −id) packed into 64 bits, then one block.
size_t argmax_workspace_bytes(int64_t vocab);
void argmax(const float* logits, int64_t vocab, int32_t* out_id, void* workspace, cudaStream_t stream);

// Batched greedy: out_ids[r] = argmax of row r of logits [rows, vocab] (same rule as argmax above), and
// out_logits[r] (when not null) = that row's logit at the chosen id (NaN: the row is all NaN). rows ≤ 65535.
size_t argmax_rows_workspace_bytes(int64_t rows, int64_t vocab);
void argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out_ids, float* out_logits,
                 void* workspace, cudaStream_t stream);

// argmax_rows under token masks (token_mask.h layout), the logits left as they are: exactly apply_token_mask_rows
// (token_mask_cuda.h: row r takes mask row mask_row[r], none if < 0; mask_row null: mask row r) then argmax_rows —
// the same ids and chosen logits (−inf when the chosen token is masked: every allowed logit −inf or NaN) — in the
// same two kernels, without the mask kernel's pass over the logits (read + write of rows·vocab floats).
void argmax_rows_masked(const float* logits, int64_t rows, int64_t vocab, const uint32_t* mask, int64_t mask_stride,
                        const int32_t* mask_row, int32_t* out_ids, float* out_logits, void* workspace,
                        cudaStream_t stream);

// out[0] = logits[*id] when *id is in [0, vocab), else NaN (one thread): the host checks the chosen logit for NaN
// (a model producing NaN) without copying the logits.
void gather_logit(const float* logits, int64_t vocab, const int32_t* id, float* out, cudaStream_t stream);

// ---- penalties ----------------------------------------------------------------------------------------------
// Stage 1 of the pipeline, in place on device logits: for every id with c = counts[id] > 0,
//   l ← l > 0 ? l / rp : l · rp;   l ← l − (c · frequency + presence)        (fp32, unfused, as the CPU op)
// counts [vocab]: occurrences of each id in the caller's penalty window (bit-identical to ember::apply_penalties
// given the same window). A no-op when rp = 1, presence = frequency = 0.
void apply_penalties(float* logits, int64_t vocab, const int32_t* counts, const DeviceSamplingParams* params,
                     cudaStream_t stream);

// counts[*id] += delta when *id is in [0, vocab) (one thread). For keeping the window's counts on the device:
// add the sampled id (+1) and the id leaving the window (−1), both read from device memory.
void token_counts_add(int32_t* counts, int64_t vocab, const int32_t* id, int32_t delta, cudaStream_t stream);

// ---- sampling -----------------------------------------------------------------------------------------------
// out_id[0] = a token drawn from the distribution of the CPU pipeline, stages 2–8 (penalties: apply_penalties
// first): greedy when temperature ≤ 0 or top_k == 1 (then equal to argmax above, and the RNG is untouched);
// else w = exp((l − max)/T) over the top-k set (ties at the boundary → lower ids), renormalised; top-p keeps
// the shortest prefix (descending logit, then ascending id) with Σw ≥ top_p·Z; min-p keeps w ≥ min_p.
// NaN logits are never drawn; a non-finite maximum falls back to greedy.
//
// Algorithm (deterministic for a given RNG state; not the CPU Sampler's random stream):
//   * cuts in the total order (logit desc, id asc) by a 3-pass radix select on the 32-bit order-preserving key
//     of the logit (11 + 11 + 10 bits): histograms of counts (top-k) or of fixed-point mass w·2^40 (top-p;
//     integer sums, so the result does not depend on the order of the atomics); exact ties at the cut are
//     resolved by id (the j-th tie in id order);
//   * top-k on: the ≤ kMaxTopK survivors are gathered, sorted, and stages 5–8 run as on the CPU (double sums)
//     with an inverse-CDF draw from one uniform (53 bits);
//   * top-k off: Gumbel-max over the vocabulary — argmax over the kept tokens of (l − max)/T − log(−log u_i),
//     u_i from a counter-based hash of (state, i) — which draws exactly from the renormalised kept set.
// RNG: *rng_state is a 64-bit counter; a non-greedy call uses key = splitmix64(*rng_state) and then
// increments it. Seed it by writing the seed there; equal state → equal draw.
// Cost for vocab 248320 on an H200 (graph replay): 9 small kernels, ≈ 14 us greedy, 17 us min-p only, 28-30 us
// with top-k or top-p (argmax() alone: 2 kernels, ≈ 7 us eager; use it when the host knows the request is greedy).
// The vocabulary is limited to 2^21 tokens (≤ 2048 per block keeps the 32-bit mass sums exact).
size_t sample_workspace_bytes(int64_t vocab);
void sample(const float* logits, int64_t vocab, const DeviceSamplingParams* params, uint64_t* rng_state,
            int32_t* out_id, void* workspace, cudaStream_t stream);

}  // namespace ember::cuda
