// The generic batched engine (models/model.h, CausalLM::new_batch ...): each slot is a ModelState of the model's
// own, and a step runs forward() once per row. Every architecture gets batching this way (the CPU models);
// the CUDA models override it with one graph launch per step over a pooled state (backend/cuda/cuda_batch.cpp).
// The checks (slot range, distinct slots, token ids, context) are shared: batch_check_step().
#include <algorithm>
#include <cstring>
#include <vector>

#include "models/model.h"
#include "models/state_io.h"
#include "ops/sampling/sampling.h"

namespace ember {

namespace {

struct GenericBatch : BatchState {
    std::vector<std::unique_ptr<ModelState>> seqs;  // created on first use of a slot
};

constexpr int64_t kMaxSeqs = 1 << 16;

}  // namespace

Expected<ModelState*> generic_batch_state(const CausalLM& m, BatchState& b, int64_t slot) {
    auto* g = dynamic_cast<GenericBatch*>(&b);
    EMBER_REQUIRE(g != nullptr, "batch: this batch state belongs to another model");
    EMBER_REQUIRE(slot >= 0 && slot < b.slots(), "batch: slot %lld is outside the pool of %lld", (long long)slot,
                  (long long)b.slots());
    auto& s = g->seqs[size_t(slot)];
    if (!s) s = m.new_state();
    return s.get();
}

Status batch_check_step(const BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                        int64_t vocab, int64_t context) {
    // One token per row: the mixed step's checks (rows beyond the pool are refused before the lengths are read).
    EMBER_REQUIRE(rows > 0 && rows <= b.slots(), "batch: %lld rows in a step of a pool of %lld", (long long)rows,
                  (long long)b.slots());
    const std::vector<int64_t> ones(static_cast<size_t>(rows), 1);
    return batch_check_mixed(b, slots, ones.data(), tokens, rows, vocab, context);
}

Status batch_check_mixed(const BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                         int64_t seqs, int64_t vocab, int64_t context) {
    EMBER_REQUIRE(seqs > 0 && seqs <= b.slots(), "batch: %lld sequences in a step of a pool of %lld", (long long)seqs,
                  (long long)b.slots());
    std::vector<char> seen(size_t(b.slots()), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < seqs; ++i) {
        const int64_t s = slots[i], n = lens[i];
        EMBER_REQUIRE(s >= 0 && s < b.slots(), "batch: sequence %lld names slot %lld outside the pool of %lld",
                      (long long)i, (long long)s, (long long)b.slots());
        EMBER_REQUIRE(!seen[size_t(s)], "batch: slot %lld appears twice in one step", (long long)s);
        seen[size_t(s)] = 1;
        EMBER_REQUIRE(n > 0, "batch: sequence %lld (slot %lld) feeds %lld tokens", (long long)i, (long long)s,
                      (long long)n);
        EMBER_REQUIRE(n <= context - b.pos[size_t(s)],
                      "context full: slot %lld holds %lld tokens, %lld more exceed the context of %lld", (long long)s,
                      (long long)b.pos[size_t(s)], (long long)n, (long long)context);
        for (int64_t t = 0; t < n; ++t)
            EMBER_REQUIRE(tokens[off + t] >= 0 && tokens[off + t] < vocab,
                          "batch: token id %d (sequence %lld, token %lld) is out of range [0, %lld)", tokens[off + t],
                          (long long)i, (long long)t, (long long)vocab);
        off += n;
    }
    return Status::ok();
}

Expected<std::unique_ptr<BatchState>> CausalLM::new_batch(int64_t max_seqs) const {
    EMBER_REQUIRE(max_seqs > 0 && max_seqs <= kMaxSeqs, "batch: --max-seqs %lld (allowed 1..%lld)",
                  (long long)max_seqs, (long long)kMaxSeqs);
    auto b = std::make_unique<GenericBatch>();
    b->pos.assign(size_t(max_seqs), 0);
    b->seqs.resize(size_t(max_seqs));
    return std::unique_ptr<BatchState>(std::move(b));
}

Status CausalLM::batch_prefill(BatchState& b, int64_t slot, const int32_t* tokens, int64_t n, float* logits) const {
    EMBER_ASSIGN(ModelState * s, generic_batch_state(*this, b, slot));
    EMBER_REQUIRE(n > 0, "batch: prefill of no tokens");
    const int64_t V = info().vocab_size;
    std::vector<float> scratch(logits ? 0 : size_t(V));
    EMBER_TRY(forward(*s, tokens, n, logits ? logits : scratch.data(), false));
    b.pos[size_t(slot)] = s->pos;
    return Status::ok();
}

Status CausalLM::batch_decode(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                              float* logits) const {
    EMBER_TRY(batch_check_step(b, slots, tokens, rows, info().vocab_size, info().max_context));
    const int64_t V = info().vocab_size;
    for (int64_t r = 0; r < rows; ++r) {
        EMBER_ASSIGN(ModelState * s, generic_batch_state(*this, b, slots[r]));
        EMBER_TRY(forward(*s, &tokens[r], 1, logits + r * V, false));
        b.pos[size_t(slots[r])] = s->pos;
    }
    return Status::ok();
}

Status CausalLM::batch_step(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                            int64_t seqs, float* logits, int32_t* ids, const uint8_t* want) const {
    const int64_t V = info().vocab_size;
    EMBER_TRY(batch_check_mixed(b, slots, lens, tokens, seqs, V, info().max_context));
    std::vector<int32_t> one_slots, one_tokens;
    std::vector<int64_t> one_rows;  // which sequence each one-token row is
    int64_t off = 0;
    for (int64_t i = 0; i < seqs; off += lens[i], ++i) {
        if (lens[i] == 1) {
            one_slots.push_back(slots[i]);
            one_tokens.push_back(tokens[off]);
            one_rows.push_back(i);
        } else {
            const bool keep = logits && (!want || want[i]);
            std::vector<float> row(keep || !ids ? 0 : size_t(V));
            float* l = keep ? logits + i * V : ids ? row.data() : nullptr;
            EMBER_TRY(batch_prefill(b, slots[i], tokens + off, lens[i], l));
            if (ids) ids[i] = argmax(l, V);
        }
    }
    if (one_rows.empty()) return Status::ok();
    const int64_t R = int64_t(one_rows.size());
    bool rows_logits = logits != nullptr;  // any one-token row whose logits are asked for
    if (rows_logits && want) {
        rows_logits = false;
        for (int64_t i : one_rows) rows_logits = rows_logits || want[i];
    }
    if (ids && !rows_logits) {  // ids only: the greedy step (CUDA: argmax on the device, no logits cross)
        std::vector<int32_t> got(static_cast<size_t>(R));
        EMBER_TRY(batch_decode_greedy(b, one_slots.data(), one_tokens.data(), R, got.data()));
        for (int64_t r = 0; r < R; ++r) ids[one_rows[size_t(r)]] = got[size_t(r)];
        return Status::ok();
    }
    std::vector<float> out(size_t(R * V));
    EMBER_TRY(batch_decode(b, one_slots.data(), one_tokens.data(), R, out.data()));
    for (int64_t r = 0; r < R; ++r) {
        const int64_t i = one_rows[size_t(r)];
        if (logits && (!want || want[i])) std::copy_n(&out[size_t(r * V)], V, logits + i * V);
        if (ids) ids[i] = argmax(&out[size_t(r * V)], V);
    }
    return Status::ok();
}

Status CausalLM::batch_decode_greedy(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                     int32_t* ids) const {
    const int64_t V = info().vocab_size;
    EMBER_REQUIRE(rows > 0 && rows <= b.slots(), "batch: %lld rows in a step of a pool of %lld", (long long)rows,
                  (long long)b.slots());
    std::vector<float> logits(size_t(rows * V));
    EMBER_TRY(batch_decode(b, slots, tokens, rows, logits.data()));
    for (int64_t r = 0; r < rows; ++r) ids[r] = argmax(&logits[size_t(r * V)], V);
    return Status::ok();
}

Status CausalLM::batch_reset(BatchState& b, int64_t slot) const {
    auto* g = dynamic_cast<GenericBatch*>(&b);
    EMBER_REQUIRE(g != nullptr, "batch: this batch state belongs to another model");
    EMBER_REQUIRE(slot >= 0 && slot < b.slots(), "batch: slot %lld is outside the pool of %lld", (long long)slot,
                  (long long)b.slots());
    g->seqs[size_t(slot)].reset();
    b.pos[size_t(slot)] = 0;
    return Status::ok();
}

Expected<std::vector<StateTensor>> CausalLM::batch_export_slot(BatchState& b, int64_t slot, int64_t from) const {
    EMBER_ASSIGN(ModelState * s, generic_batch_state(*this, b, slot));
    EMBER_REQUIRE(from >= 0 && from <= s->pos, "batch: snapshot from row %lld of a slot at position %lld",
                  (long long)from, (long long)s->pos);
    EMBER_ASSIGN(std::vector<StateTensor> t, export_state(*s));
    for (StateTensor& x : t)
        if (is_kv_tensor(x)) kv_keep_rows_from(x, from);
    return t;
}

Status CausalLM::batch_import_slot(BatchState& b, int64_t slot, int64_t pos,
                                   const std::vector<StateTensor>& tensors) const {
    EMBER_REQUIRE(pos >= 0 && (info().max_context <= 0 || pos <= info().max_context), "batch: a snapshot of %lld tokens for a context of %lld",
                  (long long)pos, (long long)info().max_context);
    EMBER_TRY(check_state_tensors(state_layout(pos), tensors));
    EMBER_TRY(batch_reset(b, slot));
    EMBER_ASSIGN(ModelState * s, generic_batch_state(*this, b, slot));
    EMBER_TRY(import_state(*s, pos, tensors));
    b.pos[size_t(slot)] = s->pos;
    return Status::ok();
}

Expected<std::unique_ptr<SlotSnapshot>> CausalLM::batch_snapshot(BatchState& b, int64_t slot, int64_t from) const {
    auto h = std::make_unique<HostSnapshot>();
    EMBER_ASSIGN(h->tensors, batch_export_slot(b, slot, from));
    for (const StateTensor& x : h->tensors) h->bytes += int64_t(x.data.size() * sizeof(float));
    return std::unique_ptr<SlotSnapshot>(std::move(h));
}

Status CausalLM::batch_restore_links(BatchState& b, int64_t slot, int64_t block,
                                     const std::vector<const SlotSnapshot*>& links) const {
    EMBER_ASSIGN(auto tensors, host_links(links));
    return batch_import_slot_links(b, slot, block, tensors);
}

Status CausalLM::batch_import_slot_links(BatchState& b, int64_t slot, int64_t block,
                                         const std::vector<const std::vector<StateTensor>*>& links) const {
    const int64_t pos = int64_t(links.size()) * block;
    std::vector<StateTensor> want = state_layout(pos);
    EMBER_TRY(check_state_links(want, block, links));
    return batch_import_slot(b, slot, pos, gather_state_links(std::move(want), block, links));
}

}  // namespace ember
