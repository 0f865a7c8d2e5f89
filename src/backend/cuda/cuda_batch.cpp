// The batched engine on CUDA (models/model.h: new_batch / batch_prefill / batch_decode / batch_decode_greedy /
// batch_reset). One CudaState holds every slot: the layer caches are pools (slot i at K0[l] + i·kv_slot, ...),
// the activations and workspaces are shared. A prefill runs the single-sequence path eagerly on the slot's views;
// a decode step of `rows` sequences is one graph launch — captured once per row count, the (slot, position) pairs
// and token ids read from device buffers — with attention and the GDN step in their batched-rows forms
// (gated_attention_decode_rows, gated_delta_net_step_rows), the linears over all rows at once (GEMV for ≤ 8 rows,
// the tensor-core GEMMs beyond), and the greedy ids selected on the device (argmax_rows). The per-row sampler
// (batch_decode_sample) is cuda_batch_sample.cpp.
#include "backend/cuda/cuda_batch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/graph_profile.h"
#include "core/env.h"
#include "ops/attention/attention_cuda.h"
#include "ops/linear/cublas_thread.h"

namespace ember::cuda {

namespace {

constexpr int64_t kMaxBatchSeqs = 4096;

// KV pages a sequence of `len` tokens holds.
int64_t pages_for(int64_t len) { return (len + kKvPage - 1) / kKvPage; }

}  // namespace

// The page pools go last in allocate(): every slot's full context when it fits in the GPU memory left (less a
// reserve for cuBLAS, graphs and prefix-cache checkpoints), else as many pages as fit — at least one full context.
Status CudaCausalLM::allocate_pages(CudaState& s, const DeviceAlloc& alloc) const {
    int64_t row_bytes = 0;  // K and V of one token, every attention layer
    for (int64_t e : s.kv_row_elems) row_bytes += 2 * e * s.kv_elem;
    s.max_pages = pages_for(capacity_);
    s.slot_pages.assign(size_t(s.slots), {});
    if (row_bytes == 0) return Status::ok();
    const int64_t page_bytes = row_bytes * kKvPage, want = s.slots * s.max_pages;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const int64_t reserve = std::max<int64_t>(int64_t(512) << 20, int64_t(total_b / 20));
    const int64_t fit = int64_t(free_b) > reserve ? (int64_t(free_b) - reserve) / page_bytes : 0;
    s.n_pages = std::min(want, opt_.kv_pages > 0 ? opt_.kv_pages : fit);
    if (s.n_pages < s.max_pages)
        return errorf("the KV cache needs %.2f GiB for one sequence of %lld tokens (-c / --ctx-size) and %.2f GiB of "
                      "GPU memory are free beyond the weights and buffers (%.2f GiB kept in reserve): lower -c",
                      double(s.max_pages * page_bytes) / 1073741824.0, (long long)capacity_,
                      double(free_b) / 1073741824.0, double(reserve) / 1073741824.0);
    for (size_t l = 0; l < s.kv_row_elems.size(); ++l) {
        if (!s.kv_row_elems[l]) continue;
        const size_t bytes = size_t(s.n_pages * s.kv_row_elems[l] * kKvPage * s.kv_elem);
        EMBER_ASSIGN(s.K0[l], alloc(bytes, "KV cache pages"));
        EMBER_ASSIGN(s.V0[l], alloc(bytes, "KV cache pages"));
    }
    void* t = nullptr;
    EMBER_ASSIGN(t, alloc(size_t(want) * sizeof(int32_t), "KV page table"));
    s.page_table = static_cast<int32_t*>(t);
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.page_host), size_t(want) * sizeof(int32_t)));
    std::memset(s.page_host, 0, size_t(want) * sizeof(int32_t));
    s.free_pages.clear();
    for (int64_t p = s.n_pages - 1; p >= 0; --p) s.free_pages.push_back(int32_t(p));  // pages 0, 1, ... first
    return Status::ok();
}

Status ensure_pages(CudaState& s, int64_t slot, int64_t len) {
    if (!s.paged || s.n_pages == 0) return Status::ok();
    std::vector<int32_t>& mine = s.slot_pages[size_t(slot)];
    const int64_t need = pages_for(len);
    EMBER_REQUIRE(need <= s.max_pages, "KV pages: %lld tokens exceed the context of %lld", (long long)len,
                  (long long)(s.max_pages * kKvPage));
    const int64_t more = need - int64_t(mine.size());
    if (more <= 0) return Status::ok();
    if (more > int64_t(s.free_pages.size())) {  // the counts for the message only
        int64_t used = 0, seqs = 0;
        for (const auto& v : s.slot_pages) used += int64_t(v.size()), seqs += !v.empty();
        return errorf("the KV cache pool is full: %lld of %lld pages (%lld tokens each) are held by %lld sequences and "
                      "a sequence at %lld tokens needs %lld more (lower --max-seqs or --ctx-size, or give the GPU more "
                      "memory)",
                      (long long)used, (long long)s.n_pages, (long long)kKvPage, (long long)seqs, (long long)len,
                      (long long)more);
    }
    for (int64_t i = 0; i < more; ++i) {
        const int32_t p = s.free_pages.back();
        s.free_pages.pop_back();
        s.page_host[slot * s.max_pages + int64_t(mine.size())] = p;
        mine.push_back(p);
    }
    s.page_dirty = true;
    return Status::ok();
}

void release_pages(CudaState& s, int64_t slot) {
    if (!s.paged || size_t(slot) >= s.slot_pages.size()) return;
    std::vector<int32_t>& mine = s.slot_pages[size_t(slot)];
    for (auto it = mine.rbegin(); it != mine.rend(); ++it) s.free_pages.push_back(*it);
    mine.clear();  // the table row keeps stale entries: no kernel reads past a slot's length
}

void sync_pages(CudaState& s) {
    if (!s.paged || !s.page_dirty) return;
    CUDA_CHECK(cudaMemcpyAsync(s.page_table, s.page_host, size_t(s.slots * s.max_pages) * sizeof(int32_t),
                               cudaMemcpyHostToDevice, s.stream));
    s.page_dirty = false;
}

Expected<CudaBatch*> as_batch(BatchState& b) {
    auto* cb = dynamic_cast<CudaBatch*>(&b);
    EMBER_REQUIRE(cb != nullptr, "batch: this batch state belongs to another model");
    return cb;
}

Expected<std::unique_ptr<BatchState>> CudaCausalLM::new_batch(int64_t max_seqs) const {
    EMBER_REQUIRE(max_seqs > 0 && max_seqs <= std::min(kMaxBatchSeqs, opt_.max_batch),
                  "batch: --max-seqs %lld (the GPU engine takes 1..%lld)", (long long)max_seqs,
                  (long long)std::min(kMaxBatchSeqs, opt_.max_batch));
    EMBER_TRY(prepare_batch_head(max_seqs));
    auto b = std::make_unique<CudaBatch>();
    b->pos.assign(size_t(max_seqs), 0);
    b->smp.assign(size_t(max_seqs), SlotSampling{});
    b->s.pooled = true;
    b->s.slots = max_seqs;
    b->s.max_rows = std::max<int64_t>(8, max_seqs);
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&b->host_in), size_t(3 * max_seqs) * sizeof(int32_t)));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&b->host_out), size_t(2 * max_seqs) * sizeof(int32_t)));
    return std::unique_ptr<BatchState>(std::move(b));
}

int64_t CudaCausalLM::untiled_head_rows() const {
    static const int env = env_int("EMBER_HEAD_UNTILED_ROWS", 0);
    if (env > 0) return env;
    if (head_.format == WeightFormat::TILED && head_.ggml_type != GgmlType::Q6_K) return 2;  // affine tiles
    // Q6_K read once per 4 rows by the stream kernel: the copy (its split GEMM) only beyond 64 rows, where it was not
    // measured against the tiled head (slower than it at 16-64 rows).
    return detail::gemv_stream_tokens_per_pass(head_, 4) == 4 ? 65 : 9;
}

Status CudaCausalLM::prepare_batch_head(int64_t max_seqs) const {
    std::lock_guard<std::mutex> lock(batch_mu_);
    if (max_seqs < untiled_head_rows() || head_.format != WeightFormat::TILED || head_rows_.data) return Status::ok();
    EMBER_REQUIRE(host_head_ != nullptr, "batch: the model did not record its LM head");
    EMBER_ASSIGN(head_rows_, arena_.upload_untiled(*host_head_, "lm_head (batched engine copy)"));
    return Status::ok();
}

Status CudaCausalLM::batch_prefill(BatchState& b, int64_t slot, const int32_t* tokens, int64_t n,
                                   float* logits) const {
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    EMBER_REQUIRE(slot >= 0 && slot < b.slots(), "batch: slot %lld is outside the pool of %lld", (long long)slot,
                  (long long)b.slots());
    EMBER_REQUIRE(n > 0, "batch: prefill of no tokens");
    CudaState& s = cb->s;
    s.pos = b.pos[size_t(slot)];
    EMBER_TRY(check_kv_capacity(s.pos, n, capacity_));
    s.rows_mode = false;
    for (int64_t off = 0; off < n; off += opt_.max_batch) {
        const int64_t m = std::min(opt_.max_batch, n - off);
        EMBER_TRY(begin_step(s, tokens + off, m));  // checks the ids; allocates the pools on first use
        EMBER_TRY(ensure_pages(s, slot, s.pos + m));
        sync_pages(s);
        s.select_slot(slot);
        run(s, m, false);
        CUDA_CHECK(cudaStreamSynchronize(s.stream));  // s.io (pinned) is rewritten by the next chunk
        s.pos += m;
        b.pos[size_t(slot)] = s.pos;
    }
    if (logits) {
        CUDA_CHECK(cudaMemcpyAsync(logits, s.logits, info_.vocab_size * sizeof(float), cudaMemcpyDeviceToHost,
                                   s.stream));
        CUDA_CHECK(cudaStreamSynchronize(s.stream));
    }
    return Status::ok();
}

StepStats CudaCausalLM::last_batch_stats(const BatchState& b) const {
    auto* cb = dynamic_cast<const CudaBatch*>(&b);
    return cb ? cb->s.stats : StepStats{};
}

int64_t CudaCausalLM::batch_kv_free(BatchState& b) const {
    auto* cb = dynamic_cast<CudaBatch*>(&b);
    if (!cb) return -1;
    CudaState& s = cb->s;
    if (!s.ready && !allocate(s).is_ok()) return -1;  // (the step then fails with the reason)
    return s.paged && s.n_pages > 0 ? int64_t(s.free_pages.size()) : -1;
}

int64_t CudaCausalLM::batch_kv_need(const BatchState& b, int64_t slot, int64_t len) const {
    const auto* cb = dynamic_cast<const CudaBatch*>(&b);
    if (!cb || !cb->s.paged || cb->s.n_pages == 0 || slot < 0 || slot >= b.slots()) return 0;
    const int64_t held = int64_t(cb->s.slot_pages[size_t(slot)].size());
    return std::max<int64_t>(0, pages_for(len) - held);
}

Status CudaCausalLM::batch_reset(BatchState& b, int64_t slot) const {
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    EMBER_REQUIRE(slot >= 0 && slot < b.slots(), "batch: slot %lld is outside the pool of %lld", (long long)slot,
                  (long long)b.slots());
    CudaState& s = cb->s;
    if (s.ready) {  // the recurrent state restarts from zero; KV rows are overwritten as positions refill
        for (size_t l = 0; l < s.conv0.size(); ++l) {
            if (s.conv0[l])
                CUDA_CHECK(cudaMemsetAsync(s.conv0[l] + slot * s.conv_slot, 0, s.conv_slot * sizeof(float), s.stream));
            if (s.S0[l]) CUDA_CHECK(cudaMemsetAsync(s.S0[l] + slot * s.S_slot, 0, s.S_slot * sizeof(float), s.stream));
        }
        CUDA_CHECK(cudaStreamSynchronize(s.stream));
    }
    release_pages(s, slot);
    b.pos[size_t(slot)] = 0;
    cb->smp[size_t(slot)] = SlotSampling{};  // the next sampled step seeds the slot's stream again
    return Status::ok();
}

void launch_rows(CudaState& s, int key, const std::function<void()>& body, bool first) {
    detail::cublas_thread_handle();  // cuBLAS (the split GEMM of n > 8 rows) cannot create it during capture
    cudaGraphExec_t exec = graph_for(s, key, body);
    if (first) CUDA_CHECK(cudaEventRecord(s.ev0, s.stream));
    CUDA_CHECK(cudaGraphLaunch(exec, s.stream));
    CUDA_CHECK(cudaEventRecord(s.ev1, s.stream));
    const int64_t before = first ? 0 : s.stats.kernels;
    if (first) s.stats = StepStats{};
    s.stats.kernels = before + s.graph_kernels[key];
    s.stats.graph = first;  // two launches in one step: not "one graph"
}

// Shared by the batched steps: checks, allocation, the rows' (slot, position) pairs and token ids to the device.
Status CudaCausalLM::batch_stage(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows) const {
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    EMBER_TRY(batch_check_step(b, slots, tokens, rows, info_.vocab_size, capacity_));
    CudaState& s = cb->s;
    if (!s.ready) EMBER_TRY(allocate(s));
    for (int64_t r = 0; r < rows; ++r) EMBER_TRY(ensure_pages(s, slots[r], b.pos[size_t(slots[r])] + 1));
    sync_pages(s);
    const int64_t N = b.slots();
    for (int64_t r = 0; r < rows; ++r) {
        cb->host_in[2 * r] = slots[r];
        cb->host_in[2 * r + 1] = static_cast<int32_t>(b.pos[size_t(slots[r])]);
        cb->host_in[2 * N + r] = tokens[r];
    }
    CUDA_CHECK(cudaMemcpyAsync(s.rows_dev, cb->host_in, size_t(2 * rows) * sizeof(int32_t), cudaMemcpyHostToDevice,
                               s.stream));
    CUDA_CHECK(cudaMemcpyAsync(s.ids, cb->host_in + 2 * N, size_t(rows) * sizeof(int32_t), cudaMemcpyHostToDevice,
                               s.stream));
    return Status::ok();
}

// The step itself (captured once per row count): the forward of every row, and for greedy the selection and the
// ids + their logits copied to cb.host_out.
void CudaCausalLM::batch_body(BatchState& b, int64_t rows, bool greedy) const {
    CudaBatch& cb = static_cast<CudaBatch&>(b);
    CudaState& s = cb.s;
    s.rows_mode = true;
    run(s, rows, false);
    s.rows_mode = false;
    if (!greedy) return;
    const int64_t N = b.slots();
    float* lg = reinterpret_cast<float*>(s.row_ids + s.max_rows);
    argmax_rows(s.logits, rows, info_.vocab_size, s.row_ids, lg, s.smp_ws, s.stream);
    CUDA_CHECK(cudaMemcpyAsync(cb.host_out, s.row_ids, size_t(rows) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                               s.stream));
    CUDA_CHECK(cudaMemcpyAsync(cb.host_out + N, lg, size_t(rows) * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
}

Status CudaCausalLM::batch_rows_step(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                     bool greedy) const {
    EMBER_TRY(batch_stage(b, slots, tokens, rows));
    launch_rows(static_cast<CudaBatch&>(b).s, kRowsKey | int(rows) << 1 | int(greedy),
                [&] { batch_body(b, rows, greedy); });
    return Status::ok();
}

Expected<std::string> CudaCausalLM::batch_profile(BatchState& b, const int32_t* slots, const int32_t* tokens,
                                                  int64_t rows) const {
    EMBER_TRY(batch_stage(b, slots, tokens, rows));
    CudaState& s = static_cast<CudaBatch&>(b).s;
    detail::cublas_thread_handle();
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
    batch_body(b, rows, true);
    CUDA_CHECK(cudaStreamEndCapture(s.stream, &graph));
    CUDA_CHECK(cudaStreamSynchronize(s.stream));
    std::string t = profile_graph_nodes(graph, s.stream);
    CUDA_CHECK(cudaGraphDestroy(graph));
    return t;
}

Status CudaCausalLM::batch_decode(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                  float* logits) const {
    EMBER_TRY(batch_rows_step(b, slots, tokens, rows, false));
    CudaState& s = static_cast<CudaBatch&>(b).s;
    CUDA_CHECK(cudaMemcpyAsync(logits, s.logits, size_t(rows * info_.vocab_size) * sizeof(float),
                               cudaMemcpyDeviceToHost, s.stream));
    CUDA_CHECK(cudaStreamSynchronize(s.stream));
    for (int64_t r = 0; r < rows; ++r) b.pos[size_t(slots[r])] += 1;
    return Status::ok();
}

Status CudaCausalLM::batch_decode_greedy(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                         int32_t* ids) const {
    EMBER_TRY(batch_rows_step(b, slots, tokens, rows, true));
    CudaBatch& cb = static_cast<CudaBatch&>(b);
    CudaState& s = cb.s;
    CUDA_CHECK(cudaStreamSynchronize(s.stream));  // the one host wait per step
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, s.ev0, s.ev1));
    s.stats.gpu_us = ms * 1e3;
    for (int64_t r = 0; r < rows; ++r) b.pos[size_t(slots[r])] += 1;
    const float* lg = reinterpret_cast<const float*>(cb.host_out + b.slots());
    for (int64_t r = 0; r < rows; ++r) {
        EMBER_REQUIRE(!std::isnan(lg[r]), "the model produced NaN logits for slot %d at position %lld", slots[r],
                      (long long)(b.pos[size_t(slots[r])] - 1));
        ids[r] = cb.host_out[r];
    }
    return Status::ok();
}


}  // namespace ember::cuda
