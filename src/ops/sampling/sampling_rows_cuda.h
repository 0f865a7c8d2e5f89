// Rows forms of the device token selection (sampling_cuda.h) for the batched engine: one launch selects a token
// for each of `rows` logits rows, every row with its own parameters, RNG state and penalty counts.
//
// Row r reads logits[r·vocab ..], params[r] (uploaded per step, indexed by row) and, through the row → slot map
// q = slots[r·slot_stride] (slots == nullptr: q = r), the per-SLOT state rng_state[q] and counts[q·vocab ..]:
// a graph captured once per row count serves any assignment of slots to rows, every input read from device
// memory when the kernels run (no allocation, no synchronisation; capturable).
//
// Specification: row r's result is exactly that of the single-row op on that row — same kernels, the row taken
// from the grid (sampling.cu), so the same logits, parameters and RNG state give the same draw and the state
// advances the same way (a greedy row — temperature ≤ 0 or top_k == 1 — neither reads nor writes its state).
// Reference: the single-row sample() / apply_penalties() row by row (sampling_rows_cuda_test.cpp), themselves
// tested against the CPU pipeline (sampling_cuda_test.cpp). rows ≤ 65535; distinct rows must name distinct
// slots (their states are written without atomics).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ops/sampling/sampling_cuda.h"

namespace ember::cuda {

// apply_penalties on every row, in place: row r with counts[q·vocab ..] and params[r]. A row whose params have
// repetition 1 and presence = frequency = 0 is left untouched (its counts are not read).
void apply_penalties_rows(float* logits, int64_t rows, int64_t vocab, const int32_t* counts,
                          const DeviceSamplingParams* params, const int32_t* slots, int32_t slot_stride,
                          cudaStream_t stream);

// The penalty window's counts update of a step: for row r, counts[q·vocab + win[2r]] += 1 and
// counts[q·vocab + win[2r+1]] −= 1, each only when that id is in [0, vocab) (−1: nothing enters / leaves).
void token_counts_update_rows(int32_t* counts, int64_t rows, int64_t vocab, const int32_t* win, const int32_t* slots,
                              int32_t slot_stride, cudaStream_t stream);

// sample() on every row: out_ids[r] = row r's token; out_logits[r] (optional) = row r's logit at that token (NaN:
// the model produced NaN). Workspace: rows slices of sample_workspace_bytes(vocab).
size_t sample_rows_workspace_bytes(int64_t rows, int64_t vocab);
void sample_rows(const float* logits, int64_t rows, int64_t vocab, const DeviceSamplingParams* params,
                 uint64_t* rng_state, const int32_t* slots, int32_t slot_stride, int32_t* out_ids, float* out_logits,
                 void* workspace, cudaStream_t stream);

}  // namespace ember::cuda
