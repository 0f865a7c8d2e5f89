// batch_decode_sample on CUDA (models/model.h): the batched step with every row's token selected on the device
// with its own parameters, random stream and penalty window — decode_sample (cuda_model.cpp) for many slots.
//
// Per slot the host mirrors decode_sample's bookkeeping (CudaBatch::smp, cleared by batch_reset): the parameters
// last used, whether the slot's RNG counter was seeded, the history length its penalty counts cover. The device
// keeps the counter rng[slot] and the counts [slot, vocab] (allocated by the first step with penalties). Per
// step the host stages each row's DeviceSamplingParams (penalties zeroed for a row without them, so the
// penalty kernel leaves it alone) and the ids entering / leaving its window, two small copies from pinned
// memory; the graph, one per row count and "any row has penalties", reads everything from device memory:
//   forward of all rows → [window counts, penalties]_rows → sample_rows → ids and chosen logits to pinned memory.
// With `logits` the forward and the selection are two graphs with the logits' copy between them, so the caller
// gets the logits before penalties. When every row is greedy without penalties the step is batch_decode_greedy's
// graph (argmax_rows; sample() of a greedy row is that argmax). One host wait per step.
// Rows with a token mask (structured output): the forward graph runs first; while it runs the host fills the
// masks of those rows into pinned staging (packed, with a row map), uploads them on a stream of their own beside
// it, and the selection graph applies them (apply_token_mask_rows) before the penalties and the draw — or, when
// every row is greedy, inside the argmax (argmax_rows_masked: no pass writing the masked logits;
// EMBER_MASK_ARGMAX=separate: the mask kernel then argmax_rows, for A/B).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/cuda/cuda_batch.h"
#include "backend/cuda/cuda_check.h"
#include "core/env.h"
#include "ops/sampling/sampling_rows_cuda.h"
#include "ops/sampling/token_mask.h"
#include "ops/sampling/token_mask_cuda.h"

namespace ember::cuda {

namespace {

using Clock = std::chrono::steady_clock;

// The step split (cuda_batch.h), summed while enabled.
std::atomic<bool> split_on{false};
std::mutex split_mu;
BatchStepSplit split_sum;

double host_us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
double event_us(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return double(ms) * 1e3;
}

// One step's part of the split: host time points as the step passes them, added to split_sum by add() after the
// host wait. Off (every call a no-op) unless enable_batch_step_split(true).
struct SplitRecorder {
    bool on = split_on.load(std::memory_order_relaxed);
    Clock::time_point t_in = on ? Clock::now() : Clock::time_point{}, t_staged, t_launched, t_filled, t_selected;
    bool fills_late = false;
    void staged() {  // checks and staging done: the forward's graph launch is next
        if (on) t_staged = Clock::now();
    }
    void launched(const BatchSampler& z, cudaStream_t st) {  // the forward graph is launched (two-graph steps)
        if (!on) return;
        CUDA_CHECK(cudaEventRecord(z.t_fwd, st));
        t_launched = t_filled = Clock::now();
    }
    void filled(const BatchSampler& z) {  // the masks are filled: did the forward end before the fills did?
        if (!on) return;
        t_filled = Clock::now();
        const cudaError_t q = cudaEventQuery(z.t_fwd);
        if (q == cudaErrorNotReady) (void)cudaGetLastError();
        else CUDA_CHECK(q);
        fills_late = q == cudaSuccess;
    }
    void selected(bool two) {  // the last graph of the step is launched
        if (!on) return;
        t_selected = Clock::now();
        if (!two) t_launched = t_filled = t_selected;
    }
    void add(const CudaState& s, const BatchSampler& z, bool two, bool masked) const {  // after the host wait
        if (!on) return;
        const Clock::time_point t_out = Clock::now();
        std::lock_guard<std::mutex> lock(split_mu);
        BatchStepSplit& x = split_sum;
        x.steps++;
        x.host_prep_us += host_us(t_in, t_staged);
        x.host_launch_us += host_us(t_staged, t_launched);
        x.host_fill_us += host_us(t_launched, t_filled);
        x.host_upload_us += host_us(t_filled, t_selected);
        x.host_wait_us += host_us(t_selected, t_out);
        x.gpu_us += s.stats.gpu_us;
        if (two) {
            const double fwd = event_us(s.ev0, z.t_fwd);
            x.split_steps++;
            x.gpu_forward_us += fwd;
            x.gpu_select_us += s.stats.gpu_us - fwd;
        }
        if (masked) {
            x.masked_steps++;
            x.fills_late += fills_late;
            x.upload_late_us += std::max(0.0, event_us(z.t_fwd, z.t_up));
        }
    }
};

Expected<DeviceBuffer> zeroed(size_t bytes, const char* what, cudaStream_t stream) {
    EMBER_ASSIGN(DeviceBuffer b, DeviceBuffer::alloc(bytes, what));
    CUDA_CHECK(cudaMemsetAsync(b.get(), 0, bytes, stream));
    return b;
}

// The sampler's device buffers and pinned staging for every slot (first call), the counts pool when needed.
Status ensure_sampler(CudaBatch& cb, int64_t V, bool counts) {
    BatchSampler& z = cb.sampler;
    const size_t N = size_t(cb.slots());
    cudaStream_t st = cb.s.stream;
    if (!z.ready) {
        EMBER_ASSIGN(z.params, zeroed(N * sizeof(DeviceSamplingParams), "batch sampler parameters", st));
        EMBER_ASSIGN(z.win, zeroed(2 * N * sizeof(int32_t), "batch sampler windows", st));
        EMBER_ASSIGN(z.rng, zeroed(N * sizeof(uint64_t), "batch sampler RNG", st));
        EMBER_ASSIGN(z.out, zeroed(2 * N * sizeof(int32_t), "batch sampler ids", st));
        EMBER_ASSIGN(z.ws, zeroed(sample_rows_workspace_bytes(int64_t(N), V), "batch sampler workspace", st));
        CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&z.host_params), N * sizeof(DeviceSamplingParams)));
        CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&z.host_win), 2 * N * sizeof(int32_t)));
        CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&z.host_seed), N * sizeof(uint64_t)));
        z.ready = true;
    }
    if (counts && !z.counts.get()) {
        EMBER_ASSIGN(z.counts, zeroed(N * size_t(V) * sizeof(int32_t), "penalty counts of the batch", st));
        z.counts_host.assign(size_t(V), 0);
    }
    return Status::ok();
}

// The mask buffers (first step with a mask): a mask row per slot and the row map, device and pinned.
Status ensure_masks(CudaBatch& cb, int64_t V) {
    BatchSampler& z = cb.sampler;
    if (z.masks.get()) return Status::ok();
    const size_t N = size_t(cb.slots()), W = size_t(token_mask_words(V));
    EMBER_ASSIGN(z.masks, DeviceBuffer::alloc(N * W * sizeof(uint32_t), "batch token masks"));
    EMBER_ASSIGN(z.mask_row, DeviceBuffer::alloc(N * sizeof(int32_t), "batch token mask rows"));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&z.host_masks), N * W * sizeof(uint32_t)));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&z.host_mask_row), N * sizeof(int32_t)));
    CUDA_CHECK(cudaStreamCreateWithFlags(&z.upload, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&z.uploaded, cudaEventDisableTiming));
    return Status::ok();
}

// Row r's device parameters and window ids into the pinned staging; seeds the slot's stream and uploads a whole
// window's counts when decode_sample would (new parameters or seed, or a history the counts do not continue).
void stage_row(CudaBatch& cb, int64_t r, int32_t slot, int32_t token, const SamplingParams& sp,
               const std::vector<int32_t>& history, int64_t V) {
    BatchSampler& z = cb.sampler;
    SlotSampling& m = cb.smp[size_t(slot)];
    cudaStream_t st = cb.s.stream;
    if (!m.have_params || !same_sampling_params(m.params, sp)) {
        if (!m.seeded || m.params.seed != sp.seed) {
            z.host_seed[slot] = sp.seed;  // pinned, one cell per slot: nothing else writes it before the wait
            CUDA_CHECK(cudaMemcpyAsync(z.rng.as<uint64_t>() + slot, z.host_seed + slot, sizeof(uint64_t),
                                       cudaMemcpyHostToDevice, st));
            m.seeded = true;
        }
        m.params = sp;
        m.have_params = true;
        m.counts_len = -1;
    }
    DeviceSamplingParams d = to_device_params(sp);
    int32_t enter = -1, leave = -1;
    if (sampling_has_penalties(sp)) {
        const int64_t L = int64_t(history.size()), N = sp.penalty_last_n;
        if (m.counts_len == L - 1) {  // the usual step: `token` enters the window, one old token may leave it
            enter = token;
            leave = (N > 0 && L > N) ? history[size_t(L - 1 - N)] : -1;
        } else {  // the whole window (pageable: the copy has left counts_host when cudaMemcpyAsync returns)
            window_counts(history, N, V, z.counts_host.data());
            CUDA_CHECK(cudaMemcpyAsync(z.counts.as<int32_t>() + int64_t(slot) * V, z.counts_host.data(),
                                       size_t(V) * sizeof(int32_t), cudaMemcpyHostToDevice, st));
        }
        m.counts_len = L;
    } else {  // no penalties for this row: the rows kernel skips it and its counts stay as they are
        d.repetition_penalty = 1.f;
        d.presence_penalty = d.frequency_penalty = 0.f;
        m.counts_len = -1;
    }
    z.host_params[r] = d;
    z.host_win[2 * r] = enter;
    z.host_win[2 * r + 1] = leave;
}

// The selection of a step (capturable): the token masks (mask: rows mapped by sampler.mask_row), window counts
// and penalties (pen), per-row sampling, ids and their logits to cb.host_out (the layout batch_body's greedy step
// uses). Row r's slot is s.rows_dev[2r]. greedy (every row greedy, no penalties): argmax_rows, as batch_body's
// greedy step, instead of the sampling pipeline.
void select_rows(CudaBatch& cb, int64_t rows, int64_t V, bool pen, bool mask, bool greedy) {
    CudaState& s = cb.s;
    BatchSampler& z = cb.sampler;
    const int64_t N = cb.slots();
    const auto* P = z.params.as<DeviceSamplingParams>();
    int32_t* out = z.out.as<int32_t>();
    float* lg = reinterpret_cast<float*>(out + N);
    static const bool separate = env_is("EMBER_MASK_ARGMAX", "separate");
    const bool fused = mask && greedy && !separate;  // greedy rows: the masks applied inside the argmax
    if (mask && !fused)
        apply_token_mask_rows(s.logits, rows, V, V, z.masks.as<uint32_t>(), token_mask_words(V),
                              z.mask_row.as<int32_t>(), s.stream);
    if (pen) {
        token_counts_update_rows(z.counts.as<int32_t>(), rows, V, z.win.as<int32_t>(), s.rows_dev, 2, s.stream);
        apply_penalties_rows(s.logits, rows, V, z.counts.as<int32_t>(), P, s.rows_dev, 2, s.stream);
    }
    if (fused)
        argmax_rows_masked(s.logits, rows, V, z.masks.as<uint32_t>(), token_mask_words(V), z.mask_row.as<int32_t>(),
                           out, lg, s.smp_ws, s.stream);
    else if (greedy) argmax_rows(s.logits, rows, V, out, lg, s.smp_ws, s.stream);
    else sample_rows(s.logits, rows, V, P, z.rng.as<uint64_t>(), s.rows_dev, 2, out, lg, z.ws.get(), s.stream);
    CUDA_CHECK(cudaMemcpyAsync(cb.host_out, out, size_t(rows) * sizeof(int32_t), cudaMemcpyDeviceToHost, s.stream));
    CUDA_CHECK(cudaMemcpyAsync(cb.host_out + N, lg, size_t(rows) * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
}

}  // namespace

void enable_batch_step_split(bool on) { split_on.store(on); }

BatchStepSplit take_batch_step_split() {
    std::lock_guard<std::mutex> lock(split_mu);
    BatchStepSplit r = split_sum;
    split_sum = BatchStepSplit{};
    return r;
}

Status CudaCausalLM::batch_decode_sample(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                         const SamplingParams* const* params,
                                         const std::vector<int32_t>* const* history, int32_t* ids,
                                         float* logits, const TokenMaskFn* const* masks) const {
    SplitRecorder split;
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    const int64_t V = info_.vocab_size;
    EMBER_TRY(batch_check_step(b, slots, tokens, rows, V, capacity_));
    EMBER_REQUIRE(params != nullptr && history != nullptr && ids != nullptr,
                  "batch sample: params, history and ids are required");
    bool any_pen = false, all_greedy = true, any_mask = false;
    for (int64_t r = 0; r < rows; ++r) {
        any_mask = any_mask || (masks && masks[r]);
        EMBER_REQUIRE(params[r] != nullptr && history[r] != nullptr,
                      "batch sample: row %lld (slot %d) has no sampling parameters or no history", (long long)r,
                      slots[r]);
        const Status ok = check_device_sampling_params(*params[r]);
        EMBER_REQUIRE(ok.is_ok(), "batch sample: row %lld (slot %d): %s", (long long)r, slots[r],
                      ok.message().c_str());
        const std::vector<int32_t>& h = *history[r];
        EMBER_REQUIRE(!h.empty() && h.back() == tokens[r],
                      "batch sample: row %lld (slot %d): the history must end with the row's token %d (it %s)",
                      (long long)r, slots[r], tokens[r], h.empty() ? "is empty" : "ends with another token");
        any_pen = any_pen || sampling_has_penalties(*params[r]);
        all_greedy = all_greedy && sampling_is_greedy(*params[r]);
    }
    EMBER_TRY(batch_stage(b, slots, tokens, rows));  // allocates the pool on first use; rows and ids to the device
    CudaState& s = cb->s;
    EMBER_TRY(ensure_sampler(*cb, V, any_pen));
    if (any_mask) EMBER_TRY(ensure_masks(*cb, V));
    BatchSampler& z = cb->sampler;
    if (split.on && !z.t_fwd) {
        CUDA_CHECK(cudaEventCreate(&z.t_fwd));
        CUDA_CHECK(cudaEventCreate(&z.t_up));
    }
    for (int64_t r = 0; r < rows; ++r) stage_row(*cb, r, slots[r], tokens[r], *params[r], *history[r], V);
    CUDA_CHECK(cudaMemcpyAsync(z.params.get(), z.host_params, size_t(rows) * sizeof(DeviceSamplingParams),
                               cudaMemcpyHostToDevice, s.stream));
    CUDA_CHECK(cudaMemcpyAsync(z.win.get(), z.host_win, size_t(2 * rows) * sizeof(int32_t), cudaMemcpyHostToDevice,
                               s.stream));
    const int R = int(rows);
    const bool greedy = all_greedy && !any_pen;
    const int sel_key = kSampleKey | R << 4 | int(greedy) << 3 | int(any_pen) << 1;
    const bool two = logits || any_mask;
    split.staged();
    if (two) {  // forward graph, the logits before masks and penalties to the host, the masks
        launch_rows(s, kRowsKey | R << 1, [&] { batch_body(b, rows, false); });
        split.launched(z, s.stream);
        if (logits)
            CUDA_CHECK(cudaMemcpyAsync(logits, s.logits, size_t(rows * V) * sizeof(float), cudaMemcpyDeviceToHost,
                                       s.stream));
        if (any_mask) {  // filled while the forward runs (the previous step's uploads ended at its host wait)
            const int64_t W = token_mask_words(V);
            int32_t k = 0;
            for (int64_t r = 0; r < rows; ++r) {
                z.host_mask_row[r] = masks[r] ? k : -1;
                if (masks[r]) (*masks[r])(z.host_masks + int64_t(k++) * W);
            }
            split.filled(z);
            // Uploaded beside the forward (31 KB a row at 248k tokens: ~2 MB at 64 rows, one copy from pinned
            // memory), not after it (EMBER_MASK_UPLOAD=after: on the forward's stream, the A/B baseline).
            static const bool after = env_is("EMBER_MASK_UPLOAD", "after");
            cudaStream_t up = after ? s.stream : z.upload;
            CUDA_CHECK(cudaMemcpyAsync(z.masks.get(), z.host_masks, size_t(k * W) * sizeof(uint32_t),
                                       cudaMemcpyHostToDevice, up));
            CUDA_CHECK(cudaMemcpyAsync(z.mask_row.get(), z.host_mask_row, size_t(rows) * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, up));
            if (split.on) CUDA_CHECK(cudaEventRecord(z.t_up, up));
            if (!after) {
                CUDA_CHECK(cudaEventRecord(z.uploaded, z.upload));
                CUDA_CHECK(cudaStreamWaitEvent(s.stream, z.uploaded, 0));
            }
        }
        launch_rows(s, sel_key | int(any_mask) << 2 | 1,
                    [&] { select_rows(*cb, rows, V, any_pen, any_mask, greedy); }, /*first=*/false);
    } else if (greedy) {
        launch_rows(s, kRowsKey | R << 1 | 1, [&] { batch_body(b, rows, true); });
    } else {
        launch_rows(s, sel_key, [&] {
            batch_body(b, rows, false);
            select_rows(*cb, rows, V, any_pen, false, false);
        });
    }
    split.selected(two);
    CUDA_CHECK(cudaStreamSynchronize(s.stream));  // the one host wait per step
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, s.ev0, s.ev1));
    s.stats.gpu_us = ms * 1e3;
    split.add(s, z, two, any_mask);
    for (int64_t r = 0; r < rows; ++r) b.pos[size_t(slots[r])] += 1;
    const float* lg = reinterpret_cast<const float*>(cb->host_out + b.slots());
    for (int64_t r = 0; r < rows; ++r) {
        EMBER_REQUIRE(!std::isnan(lg[r]), "the model produced NaN logits for slot %d at position %lld", slots[r],
                      (long long)(b.pos[size_t(slots[r])] - 1));
        EMBER_REQUIRE(cb->host_out[r] >= 0 && cb->host_out[r] < V, "batch sample: row %lld got token %d outside [0, %lld)",
                      (long long)r, cb->host_out[r], (long long)V);
        ids[r] = cb->host_out[r];
    }
    return Status::ok();
}

// A slot's stream (the engine's saved sequences): the counter rng[slot] and the seed it started from; set mirrors
// set_device_rng (cuda_state_io.cpp): stage_row re-seeds only when the seed changes, so a step with this seed
// continues the stream.
bool CudaCausalLM::batch_slot_rng(BatchState& b, int64_t slot, uint64_t* seed, uint64_t* counter) const {
    auto* cb = dynamic_cast<CudaBatch*>(&b);
    if (!cb || slot < 0 || slot >= b.slots() || !cb->sampler.ready || !cb->smp[size_t(slot)].seeded) return false;
    CUDA_CHECK(cudaStreamSynchronize(cb->s.stream));
    CUDA_CHECK(cudaMemcpy(counter, cb->sampler.rng.as<uint64_t>() + slot, sizeof(uint64_t), cudaMemcpyDeviceToHost));
    *seed = cb->smp[size_t(slot)].params.seed;
    return true;
}

Status CudaCausalLM::batch_set_slot_rng(BatchState& b, int64_t slot, uint64_t seed, uint64_t counter) const {
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    EMBER_REQUIRE(slot >= 0 && slot < b.slots(), "batch: slot %lld is outside the pool of %lld", (long long)slot,
                  (long long)b.slots());
    if (!cb->s.ready) EMBER_TRY(allocate(cb->s));
    EMBER_TRY(ensure_sampler(*cb, info_.vocab_size, false));
    // On the sampler's stream, after its buffers were zeroed there (pageable source: copied before the call returns).
    CUDA_CHECK(cudaMemcpyAsync(cb->sampler.rng.as<uint64_t>() + slot, &counter, sizeof(uint64_t),
                               cudaMemcpyHostToDevice, cb->s.stream));
    CUDA_CHECK(cudaStreamSynchronize(cb->s.stream));
    SlotSampling& m = cb->smp[size_t(slot)];
    m = SlotSampling{};
    m.seeded = true;
    m.params.seed = seed;
    return Status::ok();
}

}  // namespace ember::cuda
