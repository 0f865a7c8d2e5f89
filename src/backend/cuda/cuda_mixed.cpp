// cuda_mixed.cpp: CausalLM::batch_step on CUDA — prompt chunks beside decode rows in one eager forward pass over the
// pool (CudaState::mixed): the embedding, the projections (the GEMM over every row), the norms and the MLP run once
// over all rows, so each weight is read once for the chunks and the decode rows together; the mixers run per
// prompt chunk (the prefill kernels on that slot's caches at its position) and over the decode rows (the rows
// kernels of the batched decode). Then the LM head over each sequence's last row, the argmax of each on the device.
// Each op treats a row alone, so a sequence's result does not depend on the others; a decode row's numbers are those
// of a batched step of more than 8 rows (the GEMM), not of the captured few-row GEMVs (the same fp32-faithful class).
// Chunks that do not fit beside the rows in one pass of --max-batch rows, and steps with nothing to mix, take the
// generic form (batch_prefill / batch_decode), as do passes whose decode rows would add a token tile to the chunks'
// GEMMs. Whether the engine uses it: batch_mixed() (off unless EMBER_MIXED_STEP=1 or set_mixed_steps: not measured
// faster yet, bench/results/2026-12-07-mixed-steps.md).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_batch.h"
#include "backend/cuda/cuda_check.h"
#include "ops/sampling/sampling_cuda.h"

namespace ember::cuda {

namespace {

// Every part of a pass starts at a row that is a multiple of this (the mixers' inputs and outputs then stay 16-byte
// aligned whatever their row widths); the rows in between are padding (token 0, their results unused).
constexpr int64_t kRowAlign = 4;
int64_t align_rows(int64_t r) { return (r + kRowAlign - 1) / kRowAlign * kRowAlign; }
// The token tile of the prefill GEMM's wgmma configs (linear_gemm_q.cu: 64 tokens per block tile).
constexpr int64_t kTokenTile = 64;

}  // namespace

Status CudaCausalLM::batch_step(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                                int64_t seqs, float* logits, int32_t* ids, const uint8_t* want) const {
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    const int64_t V = info_.vocab_size;
    EMBER_TRY(batch_check_mixed(b, slots, lens, tokens, seqs, V, capacity_));
    std::vector<int64_t> off(static_cast<size_t>(seqs));
    for (int64_t i = 0, o = 0; i < seqs; o += lens[i], ++i) off[size_t(i)] = o;
    // The pass: the prompt chunks that fit in max_batch rows beside the decode rows (one token each, last).
    std::vector<int64_t> chunks, rows, rest;
    for (int64_t i = 0; i < seqs; ++i)
        if (lens[i] == 1) rows.push_back(i);
    int64_t used = align_rows(int64_t(rows.size()));
    for (int64_t i = 0; i < seqs; ++i) {
        if (lens[i] == 1) continue;
        if (used + align_rows(lens[i]) <= opt_.max_batch) {
            chunks.push_back(i);
            used += align_rows(lens[i]);
        } else {
            rest.push_back(i);
        }
    }
    // Apart when there is nothing to mix, or when the decode rows would cost the chunks' GEMMs another token tile
    // (H100, 2B, 512-token prompts in 256-token chunks beside 8-32 decode rows: one pass 1-3 % slower than apart).
    const int64_t chunk_rows = used - align_rows(int64_t(rows.size()));
    const bool another_tile = (used + kTokenTile - 1) / kTokenTile > (chunk_rows + kTokenTile - 1) / kTokenTile;
    if (chunks.empty() || chunks.size() + (rows.empty() ? 0 : 1) < 2 || another_tile)
        return CausalLM::batch_step(b, slots, lens, tokens, seqs, logits, ids, want);

    CudaState& s = cb->s;
    if (!s.ready) EMBER_TRY(allocate(s));
    if (!cb->mixed_pos.get()) {
        EMBER_ASSIGN(cb->mixed_pos, DeviceBuffer::alloc(size_t(b.slots()) * 4, "mixed step"));
    }
    s.mixed_segs.clear();
    s.head_rows.clear();
    std::vector<int32_t> ids_in(size_t(used), 0), seg_pos, pairs;
    std::vector<int64_t> order;  // the sequence of each head row
    int64_t r = 0;
    for (int64_t i : chunks) {
        const int64_t slot = slots[i], pos = b.pos[size_t(slot)];
        EMBER_TRY(check_kv_capacity(pos, lens[i], capacity_));
        EMBER_TRY(ensure_pages(s, slot, pos + lens[i]));
        std::copy_n(tokens + off[size_t(i)], lens[i], ids_in.begin() + r);
        s.mixed_segs.push_back({slot, r, lens[i]});
        seg_pos.push_back(int32_t(pos));
        s.head_rows.push_back(r + lens[i] - 1);
        order.push_back(i);
        r += align_rows(lens[i]);
    }
    s.mixed_r0 = r;
    s.mixed_rows = int64_t(rows.size());
    for (int64_t i : rows) {
        const int64_t slot = slots[i];
        EMBER_TRY(check_kv_capacity(b.pos[size_t(slot)], 1, capacity_));
        EMBER_TRY(ensure_pages(s, slot, b.pos[size_t(slot)] + 1));
        ids_in[size_t(r)] = tokens[off[size_t(i)]];
        pairs.push_back(int32_t(slot));
        pairs.push_back(int32_t(b.pos[size_t(slot)]));
        s.head_rows.push_back(r++);
        order.push_back(i);
    }
    sync_pages(s);
    const int64_t n = r, H = int64_t(order.size());
    // (pageable sources: each copy has left the vector when cudaMemcpyAsync returns)
    CUDA_CHECK(cudaMemcpyAsync(s.ids, ids_in.data(), size_t(n) * 4, cudaMemcpyHostToDevice, s.stream));
    CUDA_CHECK(cudaMemcpyAsync(cb->mixed_pos.get(), seg_pos.data(), seg_pos.size() * 4, cudaMemcpyHostToDevice,
                               s.stream));
    if (!pairs.empty())
        CUDA_CHECK(cudaMemcpyAsync(s.rows_dev, pairs.data(), pairs.size() * 4, cudaMemcpyHostToDevice, s.stream));
    s.seg_pos_dev = cb->mixed_pos.as<int32_t>();
    s.rows_mode = false;
    s.mixed = true;
    s.stats = StepStats{};
    CUDA_CHECK(cudaEventRecord(s.ev0, s.stream));
    run(s, n, false);
    s.mixed = false;
    float* lg = reinterpret_cast<float*>(s.row_ids + s.max_rows);
    argmax_rows(s.logits, H, V, s.row_ids, lg, s.smp_ws, s.stream);
    CUDA_CHECK(cudaEventRecord(s.ev1, s.stream));
    std::vector<int32_t> top(static_cast<size_t>(H));
    std::vector<float> top_logit(static_cast<size_t>(H));
    CUDA_CHECK(cudaMemcpyAsync(top.data(), s.row_ids, size_t(H) * 4, cudaMemcpyDeviceToHost, s.stream));
    CUDA_CHECK(cudaMemcpyAsync(top_logit.data(), lg, size_t(H) * 4, cudaMemcpyDeviceToHost, s.stream));
    for (int64_t h = 0; h < H; ++h) {
        const int64_t i = order[size_t(h)];
        if (logits && (!want || want[i]))
            CUDA_CHECK(cudaMemcpyAsync(logits + i * V, s.logits + h * V, size_t(V) * sizeof(float),
                                       cudaMemcpyDeviceToHost, s.stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(s.stream));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, s.ev0, s.ev1));
    s.stats.gpu_us = ms * 1e3;
    for (int64_t h = 0; h < H; ++h) {
        const int64_t i = order[size_t(h)];
        b.pos[size_t(slots[i])] += lens[i];
        EMBER_REQUIRE(!std::isnan(top_logit[size_t(h)]), "the model produced NaN logits for slot %d at position %lld",
                      slots[i], (long long)(b.pos[size_t(slots[i])] - 1));
        if (ids) ids[i] = top[size_t(h)];
    }
    // The chunks that did not fit: one prefill call each.
    for (int64_t i : rest) {
        std::vector<float> row(static_cast<size_t>(V));
        float* l = logits && (!want || want[i]) ? logits + i * V : row.data();
        EMBER_TRY(batch_prefill(b, slots[i], tokens + off[size_t(i)], lens[i], l));
        if (ids) ids[i] = ember::argmax(l, V);
    }
    return Status::ok();
}

}  // namespace ember::cuda
