// Saved sessions on CUDA (CudaCausalLM, cuda_model.h): the per-layer device state downloaded into / uploaded from
// the backend-independent tensors of models/state_io.h (K/V [n_kv, pos, d] out of the [n_kv, capacity, d] caches,
// conv [K−1, conv_dim], S [nv, dk, dv]), and the device sampler's RNG counter. The tensors are fp32 whatever the
// cache holds: a bf16 cache widens exactly on the way out and rounds to nearest-even on the way in (a session
// saved from a bf16 cache restores bit for bit).
#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_batch.h"
#include "backend/cuda/cuda_model.h"
#include "core/dtype.h"
#include "models/state_io.h"

namespace ember::cuda {

namespace {

// The device buffer of a state tensor ("blk.L.k" / v / conv / S) and whether it is a KV cache (pitched rows of
// s.kv_elem-byte elements; the others are fp32).
Expected<void*> tensor_buffer(const CudaState& s, const StateTensor& t, bool* kv) {
    int l = -1;
    char kind[16] = {0};
    EMBER_REQUIRE(std::sscanf(t.name.c_str(), "blk.%d.%15s", &l, kind) == 2 && l >= 0 &&
                  static_cast<size_t>(l) < s.K.size(), "saved session: unknown state tensor '%s'", t.name.c_str());
    const std::string k = kind;
    *kv = k == "k" || k == "v";
    void* p = k == "k" ? s.K[l] : k == "v" ? s.V[l] : k == "conv" ? static_cast<void*>(s.conv[l])
              : k == "S" ? static_cast<void*>(s.S[l]) : nullptr;
    EMBER_REQUIRE(p != nullptr, "saved session: layer %d has no '%s' state on the GPU", l, kind);
    EMBER_REQUIRE(!*kv || t.shape.size() == 3, "saved session: '%s' is not [n_kv, pos, d]", t.name.c_str());
    return p;
}

// Copies rows [at, at + rows) of every kv head between the selected slot's cache `cache` (s.K[l] / s.V[l]: its
// contiguous [n_kv, capacity, d] caches, or the page pools [page][n_kv][kKvPage][d] through s.slot_pages[s.sel])
// and a packed [n_kv, rows, d] buffer, in the cache's element type (s.kv_elem bytes), on s.stream: one pitched copy
// per run of rows that are consecutive in the cache (the whole range, or each page's part).
void kv_copy(const CudaState& s, void* cache, int64_t capacity, int64_t heads, int64_t d, int64_t at, int64_t rows,
             void* packed, cudaMemcpyKind kind, bool to_cache) {
    const int64_t e = s.kv_elem;
    const size_t packed_pitch = size_t(rows * d * e);
    for (int64_t p = at; p < at + rows;) {
        int64_t off, pitch, n;  // element offset of row p (head 0), elements between heads, rows in the run
        if (!s.paged) {
            off = p * d, pitch = capacity * d, n = at + rows - p;
        } else {
            const int64_t page = s.slot_pages[size_t(s.sel)][size_t(p / kKvPage)];
            off = kv_page_elem(page, 0, p, heads, d), pitch = kKvPage * d;
            n = std::min(at + rows, (p / kKvPage + 1) * kKvPage) - p;
        }
        char* c = static_cast<char*>(cache) + off * e;
        char* q = static_cast<char*>(packed) + (p - at) * d * e;
        const size_t width = size_t(n * d * e);
        if (to_cache)
            CUDA_CHECK(cudaMemcpy2DAsync(c, size_t(pitch * e), q, packed_pitch, width, size_t(heads), kind, s.stream));
        else
            CUDA_CHECK(cudaMemcpy2DAsync(q, packed_pitch, c, size_t(pitch * e), width, size_t(heads), kind, s.stream));
        p += n;
    }
}

// Rows [at, at + x.shape[1]) of every kv head of the selected slot's cache → x.data (fp32 [n_kv, rows, d]).
void kv_rows_to_host(const CudaState& s, void* cache, int64_t capacity, int64_t at, StateTensor& x) {
    const int64_t heads = x.shape[0], rows = x.shape[1], d = x.shape[2];
    if (rows <= 0) return;
    if (s.kv_elem == 4) {
        kv_copy(s, cache, capacity, heads, d, at, rows, x.data.data(), cudaMemcpyDeviceToHost, false);
        CUDA_CHECK(cudaStreamSynchronize(s.stream));
        return;
    }
    std::vector<uint16_t> h(size_t(heads * rows * d));
    kv_copy(s, cache, capacity, heads, d, at, rows, h.data(), cudaMemcpyDeviceToHost, false);
    CUDA_CHECK(cudaStreamSynchronize(s.stream));
    for (size_t i = 0; i < h.size(); ++i) x.data[i] = bf16_to_f32(h[i]);
}

// fp32 host rows [n_kv, rows, d] → rows [at, at + rows) of the selected slot's cache, on s.stream (a bf16 cache:
// rounded into `staging`, which must live until the stream has run the copy).
void kv_rows_from_host(const CudaState& s, void* cache, int64_t capacity, int64_t at, const float* src, int64_t heads,
                       int64_t rows, int64_t d, std::vector<uint16_t>& staging) {
    if (rows <= 0) return;
    void* from = const_cast<float*>(src);
    if (s.kv_elem == 2) {
        staging.resize(size_t(heads * rows * d));
        for (size_t i = 0; i < staging.size(); ++i) staging[i] = f32_to_bf16(src[i]);
        from = staging.data();
    }
    kv_copy(s, cache, capacity, heads, d, at, rows, from, cudaMemcpyHostToDevice, true);
}

// The tensors of a layout (KV tensors: rows [from, from + shape[1]) of the caches) out of s's current views.
Status download(const CudaState& s, int64_t capacity, int64_t from, std::vector<StateTensor>& t) {
    if (s.stream) CUDA_CHECK(cudaStreamSynchronize(s.stream));
    for (StateTensor& x : t) {
        x.data.assign(static_cast<size_t>(x.numel()), 0.f);
        if (!s.ready) continue;  // nothing has run: the zero state
        bool kv = false;
        EMBER_ASSIGN(void* src, tensor_buffer(s, x, &kv));
        if (!kv)
            CUDA_CHECK(cudaMemcpy(x.data.data(), src, x.data.size() * sizeof(float), cudaMemcpyDeviceToHost));
        else
            kv_rows_to_host(s, src, capacity, from, x);
    }
    return Status::ok();
}

// The layout of a snapshot of `slot` from row `from` (batch_export_slot, batch_snapshot): state_layout(pos[slot])
// with the KV tensors holding rows [from, pos) ([n_kv, pos − from, d]).
Expected<std::vector<StateTensor>> snapshot_layout(const CausalLM& cpu, const BatchState& b, int64_t slot, int64_t from) {
    EMBER_REQUIRE(slot >= 0 && slot < b.slots(), "batch: slot %lld is outside the pool of %lld", (long long)slot,
                  (long long)b.slots());
    const int64_t pos = b.pos[size_t(slot)];
    EMBER_REQUIRE(from >= 0 && from <= pos, "batch: snapshot from row %lld of a slot at position %lld",
                  (long long)from, (long long)pos);
    std::vector<StateTensor> t = cpu.state_layout(pos);
    for (StateTensor& x : t)
        if (is_kv_tensor(x)) x.shape[1] = pos - from;
    return t;
}

// The tensors of state_layout(pos) into s's current views (allocated).
Status upload(CudaState& s, int64_t capacity, int64_t pos, const std::vector<StateTensor>& t) {
    for (const StateTensor& x : t) {
        bool kv = false;
        EMBER_ASSIGN(void* dst, tensor_buffer(s, x, &kv));
        EMBER_REQUIRE(static_cast<int64_t>(x.data.size()) == x.numel(), "import_state: '%s' has %zu values",
                      x.name.c_str(), x.data.size());
        if (!kv) {
            CUDA_CHECK(cudaMemcpy(dst, x.data.data(), x.data.size() * sizeof(float), cudaMemcpyHostToDevice));
        } else if (pos > 0) {
            EMBER_REQUIRE(x.shape[1] == pos, "import_state: '%s' holds %lld rows at position %lld", x.name.c_str(),
                          (long long)x.shape[1], (long long)pos);
            std::vector<uint16_t> staging;
            kv_rows_from_host(s, dst, capacity, 0, x.data.data(), x.shape[0], x.shape[1], x.shape[2], staging);
            CUDA_CHECK(cudaStreamSynchronize(s.stream));
        }
    }
    return Status::ok();
}

}  // namespace

Expected<std::vector<StateTensor>> CudaCausalLM::export_state(const ModelState& state) const {
    auto* s = dynamic_cast<const CudaState*>(&state);
    EMBER_REQUIRE(s != nullptr, "export_state: state does not belong to this CUDA model");
    std::vector<StateTensor> t = cpu_->state_layout(s->pos);
    EMBER_TRY(download(*s, capacity_, 0, t));
    return t;
}

Status CudaCausalLM::import_state(ModelState& state, int64_t pos, const std::vector<StateTensor>& t) const {
    auto* s = dynamic_cast<CudaState*>(&state);
    EMBER_REQUIRE(s != nullptr, "import_state: state does not belong to this CUDA model");
    EMBER_REQUIRE(pos <= capacity_, "saved session of %lld tokens does not fit the GPU KV cache of %lld (raise -c)",
                  (long long)pos, (long long)capacity_);
    if (!s->ready) EMBER_TRY(allocate(*s));
    EMBER_TRY(upload(*s, capacity_, pos, t));
    s->pos = pos;
    s->counts_len = -1;  // the penalty counts are rebuilt from the history at the next step
    return Status::ok();
}

// A slot of a batch: the same copies through the slot's views of the pooled caches (CudaState::select_slot).
Expected<std::vector<StateTensor>> CudaCausalLM::batch_export_slot(BatchState& b, int64_t slot, int64_t from) const {
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    EMBER_ASSIGN(std::vector<StateTensor> t, snapshot_layout(*cpu_, b, slot, from));
    cb->s.select_slot(slot);
    EMBER_TRY(download(cb->s, capacity_, from, t));
    return t;
}

Status CudaCausalLM::batch_import_slot(BatchState& b, int64_t slot, int64_t pos,
                                       const std::vector<StateTensor>& t) const {
    EMBER_REQUIRE(pos >= 0 && pos <= capacity_, "batch: a snapshot of %lld tokens does not fit the GPU KV cache of %lld",
                  (long long)pos, (long long)capacity_);
    EMBER_TRY(check_state_tensors(cpu_->state_layout(pos), t));
    EMBER_TRY(batch_reset(b, slot));  // also: the slot's sampling state restarts
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    if (!cb->s.ready) EMBER_TRY(allocate(cb->s));
    EMBER_TRY(ensure_pages(cb->s, slot, pos));
    sync_pages(cb->s);
    cb->s.select_slot(slot);
    EMBER_TRY(upload(cb->s, capacity_, pos, t));
    b.pos[size_t(slot)] = pos;
    return Status::ok();
}

// Prefix-cache checkpoints in device memory: the slot's KV rows [from, pos) of each attention layer, packed
// [n_kv, rows, d] in the cache's element type, and its recurrent tensors (fp32), copied on the state's stream
// into one buffer (tensor i at byte offset[i]); `layout` names and shapes them as batch_export_slot's tensors
// would be.
struct DeviceSnapshot : SlotSnapshot {
    std::vector<StateTensor> layout;
    std::vector<int64_t> offset;
    DeviceBuffer buf;
};

Expected<std::unique_ptr<SlotSnapshot>> CudaCausalLM::batch_snapshot(BatchState& b, int64_t slot, int64_t from) const {
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    auto d = std::make_unique<DeviceSnapshot>();
    EMBER_ASSIGN(d->layout, snapshot_layout(*cpu_, b, slot, from));
    int64_t bytes = 0;
    for (const StateTensor& x : d->layout) {
        d->offset.push_back(bytes);
        bytes += x.numel() * (is_kv_tensor(x) ? cb->s.kv_elem : 4);
    }
    auto buf = cb->s.ready ? DeviceBuffer::alloc(size_t(bytes), "prefix-cache checkpoint")
                           : Expected<DeviceBuffer>(errorf("no state yet"));
    if (!buf) return CausalLM::batch_snapshot(b, slot, from);  // no device memory for it: host tensors
    d->buf = std::move(buf.value());
    CudaState& s = cb->s;
    s.select_slot(slot);
    char* base = d->buf.as<char>();
    for (size_t i = 0; i < d->layout.size(); ++i) {
        const StateTensor& x = d->layout[i];
        bool kv = false;
        EMBER_ASSIGN(void* src, tensor_buffer(s, x, &kv));
        if (!kv) {
            CUDA_CHECK(cudaMemcpyAsync(base + d->offset[i], src, size_t(x.numel()) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, s.stream));
        } else if (x.shape[1] > 0) {
            kv_copy(s, src, capacity_, x.shape[0], x.shape[2], from, x.shape[1], base + d->offset[i],
                    cudaMemcpyDeviceToDevice, false);
        }
    }
    d->bytes = int64_t(d->buf.bytes());
    d->device = true;
    return std::unique_ptr<SlotSnapshot>(std::move(d));
}

// A chain of checkpoints (device ones, or host tensors where device memory ran out): each link's KV rows copied
// straight into the slot's caches at their rows, the last link's recurrent tensors.
Status CudaCausalLM::batch_restore_links(BatchState& b, int64_t slot, int64_t block,
                                         const std::vector<const SlotSnapshot*>& links) const {
    const int64_t pos = int64_t(links.size()) * block;
    EMBER_REQUIRE(pos >= 0 && pos <= capacity_, "batch: a snapshot of %lld tokens does not fit the GPU KV cache of %lld",
                  (long long)pos, (long long)capacity_);
    std::vector<const std::vector<StateTensor>*> views;
    std::vector<bool> on_device;
    for (size_t c = 0; c < links.size(); ++c) {
        auto* dev = dynamic_cast<const DeviceSnapshot*>(links[c]);
        auto* host = dynamic_cast<const HostSnapshot*>(links[c]);
        EMBER_REQUIRE(dev || host, "batch: link %zu of a restore is not a snapshot of this model", c);
        views.push_back(dev ? &dev->layout : &host->tensors);
        on_device.push_back(dev != nullptr);
    }
    const std::vector<StateTensor> want = cpu_->state_layout(pos);
    EMBER_TRY(check_state_links(want, block, views, on_device));
    EMBER_TRY(batch_reset(b, slot));
    EMBER_ASSIGN(CudaBatch * cb, as_batch(b));
    if (!cb->s.ready) EMBER_TRY(allocate(cb->s));
    CudaState& s = cb->s;
    EMBER_TRY(ensure_pages(s, slot, pos));
    sync_pages(s);
    s.select_slot(slot);
    std::vector<std::vector<uint16_t>> staging;  // bf16 roundings of host links, alive until the stream sync
    for (size_t i = 0; i < want.size(); ++i) {
        bool kv = false;
        EMBER_ASSIGN(void* dst, tensor_buffer(s, want[i], &kv));
        for (size_t c = kv ? 0 : links.size() - 1; c < links.size(); ++c) {
            auto* dev = on_device[c] ? static_cast<const DeviceSnapshot*>(links[c]) : nullptr;
            const void* src = dev ? static_cast<const void*>(dev->buf.as<char>() + dev->offset[i])
                                  : static_cast<const void*>((*views[c])[i].data.data());
            const cudaMemcpyKind kind = dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
            if (!kv) {
                CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(want[i].numel()) * sizeof(float), kind, s.stream));
                continue;
            }
            const int64_t d = want[i].shape[2];
            if (!dev) {  // host tensors are fp32 whatever the cache holds
                staging.emplace_back();
                kv_rows_from_host(s, dst, capacity_, int64_t(c) * block, static_cast<const float*>(src),
                                  want[i].shape[0], block, d, staging.back());
                continue;
            }
            kv_copy(s, dst, capacity_, want[i].shape[0], d, int64_t(c) * block, block, const_cast<void*>(src), kind,
                    true);
        }
    }
    CUDA_CHECK(cudaStreamSynchronize(s.stream));  // (host sources are pageable: copied before the calls return)
    b.pos[size_t(slot)] = pos;
    return Status::ok();
}

bool CudaCausalLM::device_rng(const ModelState& state, uint64_t* seed, uint64_t* counter) const {
    auto* s = dynamic_cast<const CudaState*>(&state);
    if (!s || !s->ready || !s->seeded) return false;
    if (s->stream) CUDA_CHECK(cudaStreamSynchronize(s->stream));
    CUDA_CHECK(cudaMemcpy(counter, s->rng, sizeof(uint64_t), cudaMemcpyDeviceToHost));
    *seed = s->params.seed;
    return true;
}

Status CudaCausalLM::set_device_rng(ModelState& state, uint64_t seed, uint64_t counter) const {
    auto* s = dynamic_cast<CudaState*>(&state);
    EMBER_REQUIRE(s != nullptr, "set_device_rng: state does not belong to this CUDA model");
    if (!s->ready) EMBER_TRY(allocate(*s));
    CUDA_CHECK(cudaMemcpy(s->rng, &counter, sizeof(uint64_t), cudaMemcpyHostToDevice));
    // decode_sample re-seeds only when the seed changes: a run with this seed continues the saved stream.
    s->seeded = true;
    s->have_params = false;
    s->params = SamplingParams{};
    s->params.seed = seed;
    return Status::ok();
}

}  // namespace ember::cuda
