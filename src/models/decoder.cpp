// The CPU backend of decoder_forward (fp32 activations, the blocks of layers/) and the states of a Decoder: new,
// saved and restored (models/state_io.h).
#include "models/decoder.h"

#include <algorithm>

#include "core/check.h"
#include "core/env.h"
#include "models/state_io.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"
#include "ops/sampling/sampling.h"

namespace ember {

namespace {

// One sequence's rows of a step: rows [r0, r0 + m) of x are its tokens at positions pos0 .. pos0+m−1.
struct Segment {
    DecoderState* st;
    int64_t pos0, r0, m;
};

// decoder_forward's CPU backend over the rows of one or more sequences (a prompt chunk, or one row per sequence of
// a batched step): the projections and the MLP take every row at once (linear() reads each weight once for all of
// them), the mixers' cores run per sequence on its own state. Each op treats a row alone, so a row's result does
// not depend on the other rows (up to linear()'s kernels for different row counts: decoder.h's batch note).
struct CpuBlocks {
    const DecoderDef& d;
    const std::vector<Segment>& segs;
    const std::vector<int64_t>& head_rows;  // the rows whose logits are asked for, in the order of `logits`
    float* logits;
    int64_t n;
    std::vector<float> x, xn, y, o;
    GatedAttentionRows gap;
    AttentionRows ap;
    DeltaNetRows dp;

    CpuBlocks(const DecoderDef& def, const std::vector<Segment>& s, const int32_t* tokens, int64_t rows,
              const std::vector<int64_t>& hr, float* out)
        : d(def), segs(s), head_rows(hr), logits(out), n(rows), x(rows * def.hidden), xn(rows * def.hidden),
          y(rows * def.hidden) {
        for (int64_t t = 0; t < n; ++t) weight_row(*d.embed, tokens[t], &x[t * d.hidden]);
    }

    void add_y() {
        for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    }
    void embed() {}  // done at construction (the token ids are there)
    void mixer(size_t l, const DecoderLayer& L) {
        rmsnorm(x.data(), L.mixer_norm->data(), xn.data(), n, d.hidden, d.eps);
        switch (L.mixer) {
            case MixerKind::ATTENTION:
                attention_in(*L.attn, *d.attn, xn.data(), n, ap);
                o.resize(n * d.attn->n_heads * d.attn->head_dim);
                for (const Segment& g : segs) attention_core(*L.attn, *d.attn, g.st->kv[l], g.pos0, ap, g.r0, g.m, o.data());
                linear(L.attn->o_proj, o.data(), n, y.data());
                break;
            case MixerKind::GATED_ATTENTION:
                gated_attention_in(*L.gattn, *d.gattn, xn.data(), n, gap);
                o.resize(n * d.gattn->n_heads * d.gattn->head_dim);
                for (const Segment& g : segs)
                    gated_attention_core(*L.gattn, *d.gattn, g.st->kv[l], g.pos0, gap, g.r0, g.m, o.data());
                linear(L.gattn->o_proj, o.data(), n, y.data());
                break;
            case MixerKind::GATED_DELTA_NET:
                gated_delta_net_in(*L.gdn, *d.gdn, xn.data(), n, dp);
                o.resize(n * d.gdn->heads.nv * d.gdn->heads.dv);
                for (const Segment& g : segs) gated_delta_net_core(*L.gdn, *d.gdn, g.st->gdn[l], dp, g.r0, g.m, o.data());
                linear(L.gdn->out_proj, o.data(), n, y.data());
                break;
        }
        add_y();
    }
    void mlp(size_t, const DecoderLayer& L) {
        rmsnorm(x.data(), L.mlp_norm->data(), xn.data(), n, d.hidden, d.eps);
        swiglu_mlp(*L.mlp, xn.data(), n, y.data());
        add_y();
    }
    void head() {
        const int64_t rows = int64_t(head_rows.size());
        if (rows == 0) return;
        for (int64_t i = 0; i < rows; ++i)
            std::copy_n(&x[head_rows[i] * d.hidden], d.hidden, &y[i * d.hidden]);
        rmsnorm(y.data(), d.final_norm->data(), xn.data(), rows, d.hidden, d.eps);
        linear(*d.head, xn.data(), rows, logits);
    }
};

int64_t kv_heads(const DecoderDef& d, MixerKind k) { return k == MixerKind::ATTENTION ? d.attn->n_kv : d.gattn->n_kv; }
int64_t head_dim(const DecoderDef& d, MixerKind k) {
    return k == MixerKind::ATTENTION ? d.attn->head_dim : d.gattn->head_dim;
}

}  // namespace

void Decoder::set_def(DecoderDef d) {
    EMBER_CHECK(d.embed && d.head && d.final_norm && d.hidden > 0 && !d.layers.empty(), "DecoderDef incomplete");
    for (const DecoderLayer& L : d.layers) {
        EMBER_CHECK(L.mixer_norm && L.mlp_norm && L.mlp, "DecoderDef: a layer without norms or MLP");
        switch (L.mixer) {
            case MixerKind::ATTENTION: EMBER_CHECK(L.attn && d.attn, "DecoderDef: attention layer"); break;
            case MixerKind::GATED_ATTENTION: EMBER_CHECK(L.gattn && d.gattn, "DecoderDef: gated attention layer"); break;
            case MixerKind::GATED_DELTA_NET: EMBER_CHECK(L.gdn && d.gdn, "DecoderDef: delta-net layer"); break;
        }
    }
    def_ = std::move(d);
}

std::unique_ptr<ModelState> Decoder::new_state() const {
    auto st = std::make_unique<DecoderState>();
    st->kv.resize(def_.layers.size());
    st->gdn.resize(def_.layers.size());
    for (size_t l = 0; l < def_.layers.size(); ++l) {
        const MixerKind k = def_.layers[l].mixer;
        if (is_attention(k)) {
            st->kv[l].n_kv = kv_heads(def_, k);
            st->kv[l].head_dim = head_dim(def_, k);
        } else {
            st->gdn[l].init(*def_.gdn);
        }
    }
    return st;
}

// A/B switch of the CPU batched step: EMBER_CPU_BATCH=rows runs the generic forms (forward() per row, a prefill
// call per prompt chunk).
namespace {
bool per_row_batch() {
    static const bool rows = env_is("EMBER_CPU_BATCH", "rows");
    return rows;
}
}  // namespace

Status Decoder::run_segments(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                             int64_t seqs, float* logits) const {
    std::vector<Segment> segs;
    std::vector<int64_t> head_rows;
    int64_t rows = 0;
    for (int64_t i = 0; i < seqs; ++i) {
        EMBER_ASSIGN(ModelState * s, generic_batch_state(*this, b, slots[i]));
        auto* st = dynamic_cast<DecoderState*>(s);
        EMBER_REQUIRE(st != nullptr, "batch: a slot's state does not belong to this model");
        segs.push_back({st, st->pos, rows, lens[i]});
        rows += lens[i];
        if (logits) head_rows.push_back(rows - 1);
    }
    CpuBlocks blocks(def_, segs, tokens, rows, head_rows, logits);
    decoder_forward(def_, blocks);
    for (int64_t i = 0; i < seqs; ++i) {
        Segment& g = segs[size_t(i)];
        g.st->pos += g.m;
        b.pos[size_t(slots[i])] = g.st->pos;
    }
    return Status::ok();
}

Status Decoder::batch_decode(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                            float* logits) const {
    if (per_row_batch()) return CausalLM::batch_decode(b, slots, tokens, rows, logits);
    EMBER_TRY(batch_check_step(b, slots, tokens, rows, def_.vocab, def_.context));
    const std::vector<int64_t> ones(size_t(rows), 1);
    return run_segments(b, slots, ones.data(), tokens, rows, logits);
}

Status Decoder::batch_step(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                           int64_t seqs, float* logits, int32_t* ids, const uint8_t* want) const {
    if (per_row_batch()) return CausalLM::batch_step(b, slots, lens, tokens, seqs, logits, ids, want);
    EMBER_TRY(batch_check_mixed(b, slots, lens, tokens, seqs, def_.vocab, def_.context));
    if (!ids && !want) return run_segments(b, slots, lens, tokens, seqs, logits);
    const int64_t V = def_.vocab;
    std::vector<float> all(size_t(seqs * V));
    EMBER_TRY(run_segments(b, slots, lens, tokens, seqs, all.data()));
    for (int64_t i = 0; i < seqs; ++i) {
        if (ids) ids[i] = argmax(&all[size_t(i * V)], V);
        if (logits && (!want || want[i])) std::copy_n(&all[size_t(i * V)], V, logits + i * V);
    }
    return Status::ok();
}

bool Decoder::batch_mixed() const { return mixed_steps_ && !per_row_batch(); }

Status Decoder::forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const {
    auto* st = dynamic_cast<DecoderState*>(&state);
    EMBER_REQUIRE(st != nullptr, "forward: state does not belong to this %s model", info().architecture.c_str());
    EMBER_REQUIRE(n > 0, "forward: no tokens");
    EMBER_REQUIRE(st->pos + n <= def_.context, "context full: %lld + %lld tokens exceed the model's context of %lld",
                  (long long)st->pos, (long long)n, (long long)def_.context);
    for (int64_t t = 0; t < n; ++t)
        EMBER_REQUIRE(tokens[t] >= 0 && tokens[t] < def_.vocab, "token id %d at position %lld is out of range [0, %lld)",
                      tokens[t], (long long)t, (long long)def_.vocab);
    const std::vector<Segment> segs{{st, st->pos, 0, n}};
    std::vector<int64_t> head_rows;
    for (int64_t t = all_logits ? 0 : n - 1; t < n; ++t) head_rows.push_back(t);
    CpuBlocks b(def_, segs, tokens, n, head_rows, logits);
    decoder_forward(def_, b);
    st->pos += n;
    return Status::ok();
}

std::vector<StateTensor> Decoder::state_layout(int64_t pos) const {
    std::vector<StateTensor> t;
    for (size_t l = 0; l < def_.layers.size(); ++l) {
        const MixerKind k = def_.layers[l].mixer;
        if (is_attention(k)) kv_layout(int64_t(l), kv_heads(def_, k), pos, head_dim(def_, k), t);
        else gdn_layout(int64_t(l), *def_.gdn, t);
    }
    return t;
}

Expected<std::vector<StateTensor>> Decoder::export_state(const ModelState& state) const {
    auto* st = dynamic_cast<const DecoderState*>(&state);
    EMBER_REQUIRE(st != nullptr, "export_state: state does not belong to this %s model", info().architecture.c_str());
    std::vector<StateTensor> t = state_layout(st->pos);
    for (size_t l = 0; l < def_.layers.size(); ++l) {  // two tensors per layer: k, v or conv, S
        if (is_attention(def_.layers[l].mixer)) kv_export(st->kv[l], st->pos, &t[2 * l]);
        else gdn_export(st->gdn[l], &t[2 * l]);
    }
    return t;
}

Status Decoder::import_state(ModelState& state, int64_t pos, const std::vector<StateTensor>& t) const {
    auto* st = dynamic_cast<DecoderState*>(&state);
    EMBER_REQUIRE(st != nullptr, "import_state: state does not belong to this %s model", info().architecture.c_str());
    EMBER_REQUIRE(t.size() == 2 * def_.layers.size(), "import_state: %zu tensors", t.size());
    auto fresh = new_state();
    DecoderState& s = static_cast<DecoderState&>(*fresh);
    for (size_t l = 0; l < def_.layers.size(); ++l) {
        if (is_attention(def_.layers[l].mixer)) kv_import(s.kv[l], pos, &t[2 * l]);
        else gdn_import(s.gdn[l], &t[2 * l]);
    }
    st->kv = std::move(s.kv);
    st->gdn = std::move(s.gdn);
    st->pos = pos;
    return Status::ok();
}

}  // namespace ember
