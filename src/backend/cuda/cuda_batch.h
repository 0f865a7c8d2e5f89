// The CUDA batch state (new_batch), shared by the batched step (cuda_batch.cpp) and its device sampler
// (cuda_batch_sample.cpp): the pooled CudaState, pinned staging of the step's inputs and outputs, and the
// per-slot sampling state of batch_decode_sample.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device.h"

namespace ember::cuda {

// Graph keys of batched steps (disjoint from the single-sequence GraphMode keys, all < 32):
//   kRowsKey | rows << 1 | greedy                         forward (+ argmax_rows)
//   kSampleKey | rows << 4 | greedy << 3 | mask << 2 | penalties << 1 | select_only
//                                                         per-row selection (+ forward unless select_only)
constexpr int kRowsKey = 1 << 20;
constexpr int kSampleKey = 1 << 21;

// What batch_decode_sample remembers of a slot (the mirror of CudaState's sampling fields for one sequence):
// the parameters of its last sampled step, whether its RNG counter was seeded since batch_reset, and the
// history length its penalty counts cover (−1: none).
struct SlotSampling {
    bool have_params = false, seeded = false;
    SamplingParams params;
    int64_t counts_len = -1;
};

// Device buffers of batch_decode_sample, allocated by its first call (counts: by its first call with penalties).
struct BatchSampler {
    bool ready = false;
    DeviceBuffer params, win, rng, out, ws, counts;
    // params [slots] DeviceSamplingParams (row r's at r), win [2·slots] int32 (row r: id entering, id leaving the
    // window), rng [slots] uint64 (slot q's counter at q), out: ids [slots] int32 then their logits [slots] float,
    // ws: sample_rows_workspace_bytes(slots, vocab), counts [slots, vocab] int32 (slot q's window at q·vocab).
    DeviceSamplingParams* host_params = nullptr;  // pinned staging: [slots]
    int32_t* host_win = nullptr;                   // [2·slots]
    uint64_t* host_seed = nullptr;                 // [slots]
    std::vector<int32_t> counts_host;              // a window's counts before their upload [vocab]
    // Token masks (structured output; allocated by the first step with a mask): masks [slots, words] the packed
    // mask rows of the step's constrained rows, mask_row [slots] int32 (row r's mask row, −1: none); pinned staging.
    DeviceBuffer masks, mask_row;
    uint32_t* host_masks = nullptr;  // [slots · words]
    int32_t* host_mask_row = nullptr;  // [slots]
    // The masks go up on a stream of their own while the forward runs; the selection waits for `uploaded`.
    cudaStream_t upload = nullptr;
    cudaEvent_t uploaded = nullptr;
    // Timing events of the step split (BatchStepSplit, created on the first split step): the forward's end, the
    // masks' upload end.
    cudaEvent_t t_fwd = nullptr, t_up = nullptr;
    ~BatchSampler() {
        if (t_fwd) cudaEventDestroy(t_fwd);
        if (t_up) cudaEventDestroy(t_up);
        if (uploaded) cudaEventDestroy(uploaded);
        if (upload) cudaStreamDestroy(upload);
        if (host_masks) cudaFreeHost(host_masks);
        if (host_mask_row) cudaFreeHost(host_mask_row);
        if (host_params) cudaFreeHost(host_params);
        if (host_win) cudaFreeHost(host_win);
        if (host_seed) cudaFreeHost(host_seed);
    }
};

struct CudaBatch : BatchState {
    CudaState s;
    int32_t* host_in = nullptr;   // pinned: (slot, position) pairs [2·slots], then token ids [slots]
    int32_t* host_out = nullptr;  // pinned: ids [slots], then their logits (float) [slots]
    std::vector<SlotSampling> smp;  // [slots]
    BatchSampler sampler;
    DeviceBuffer mixed_pos;  // [slots] int32: the prompt chunks' positions of a mixed pass (cuda_mixed.cpp)
    ~CudaBatch() override {
        if (host_in) cudaFreeHost(host_in);
        if (host_out) cudaFreeHost(host_out);
    }
};

Expected<CudaBatch*> as_batch(BatchState& b);

// The shared KV page pool of a pooled state (CudaState::paged): slot `slot` holds pages for its positions
// [0, len) after ensure_pages (an error when the pool has no free page: nothing is taken then); release_pages returns
// a slot's pages; sync_pages uploads the page table on s.stream when it changed (before any kernel that reads it).
Status ensure_pages(CudaState& s, int64_t slot, int64_t len);
void release_pages(CudaState& s, int64_t slot);
void sync_pages(CudaState& s);

// Where batch_decode_sample's steps go — a measurement hook (grammar_decode_bench --split), off unless enabled,
// process-wide, summed over the steps since the last take. Host µs: the call up to the forward's launch (checks
// and staging: prep; the graph launch call itself: launch), the masks' fills (the caller's callbacks: fill and check), their upload and the selection's
// launch, the wait for the step. Device µs (events): the step from its first kernel to its last; of a two-graph
// step (masks or host logits) its forward graph and the rest (the selection graph and any wait for the masks; a
// one-graph step's forward includes its selection); how far the masks' upload ended after the forward (0: before
// it); the masked steps whose fills ended after the forward had (the fills were not hidden).
struct BatchStepSplit {
    int64_t steps = 0, split_steps = 0, masked_steps = 0, fills_late = 0;
    double host_prep_us = 0, host_launch_us = 0, host_fill_us = 0, host_upload_us = 0, host_wait_us = 0;
    double gpu_us = 0, gpu_forward_us = 0, gpu_select_us = 0, upload_late_us = 0;
};
void enable_batch_step_split(bool on);
BatchStepSplit take_batch_step_split();

// Captures (first use of this key) and launches the graph of one batched step. first: starts the step's timing
// (ev0) and its kernel count; a second launch of the same step (first = false) adds to them.
void launch_rows(CudaState& s, int key, const std::function<void()>& body, bool first = true);

}  // namespace ember::cuda
