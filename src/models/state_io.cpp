// State tensors of saved sessions and model fingerprints (state_io.h).
#include "models/state_io.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "models/model.h"

namespace ember {

namespace {
std::string blk(int64_t l, const char* what) { return "blk." + std::to_string(l) + "." + what; }
}  // namespace

void kv_layout(int64_t layer, int64_t n_kv, int64_t pos, int64_t head_dim, std::vector<StateTensor>& out) {
    out.push_back({blk(layer, "k"), {n_kv, pos, head_dim}, {}});
    out.push_back({blk(layer, "v"), {n_kv, pos, head_dim}, {}});
}

void gdn_layout(int64_t layer, const DeltaNetShape& s, std::vector<StateTensor>& out) {
    out.push_back({blk(layer, "conv"), {s.conv_kernel - 1, s.conv_dim()}, {}});
    out.push_back({blk(layer, "S"), {s.heads.nv, s.heads.dk, s.heads.dv}, {}});
}

bool is_kv_tensor(const StateTensor& t) {
    const size_t n = t.name.size();
    return t.shape.size() == 3 && n > 2 && t.name[n - 2] == '.' && (t.name[n - 1] == 'k' || t.name[n - 1] == 'v');
}

void kv_keep_rows_from(StateTensor& t, int64_t from) {
    EMBER_CHECK(is_kv_tensor(t) && from >= 0 && from <= t.shape[1], "kv_keep_rows_from: '%s' from %lld",
                t.name.c_str(), (long long)from);
    const int64_t groups = t.shape[0], pos = t.shape[1], d = t.shape[2], keep = pos - from;
    if (from == 0) return;
    if (!t.data.empty())
        for (int64_t g = 0; g < groups; ++g)
            std::memmove(t.data.data() + g * keep * d, t.data.data() + (g * pos + from) * d,
                         static_cast<size_t>(keep * d) * sizeof(float));
    t.data.resize(t.data.empty() ? 0 : static_cast<size_t>(groups * keep * d));
    t.shape[1] = keep;
}

Status check_state_tensors(const std::vector<StateTensor>& want, const std::vector<StateTensor>& got) {
    EMBER_REQUIRE(want.size() == got.size(), "state: %zu tensors where the model has %zu", got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EMBER_REQUIRE(got[i].name == want[i].name && got[i].shape == want[i].shape,
                      "state: tensor %zu is '%s' of another shape or name than the model's '%s'", i,
                      got[i].name.c_str(), want[i].name.c_str());
        EMBER_REQUIRE(static_cast<int64_t>(got[i].data.size()) == got[i].numel(), "state: '%s' has %zu values",
                      got[i].name.c_str(), got[i].data.size());
    }
    return Status::ok();
}

Status check_state_links(const std::vector<StateTensor>& want, int64_t block,
                         const std::vector<const std::vector<StateTensor>*>& links, const std::vector<bool>& shape_only) {
    EMBER_REQUIRE(shape_only.empty() || shape_only.size() == links.size(), "state links: %zu flags for %zu links",
                  shape_only.size(), links.size());
    EMBER_REQUIRE(block > 0 && !links.empty(), "state links: %zu links of %lld rows", links.size(), (long long)block);
    for (size_t c = 0; c < links.size(); ++c) {
        EMBER_REQUIRE(links[c] != nullptr && links[c]->size() == want.size(),
                      "state links: link %zu has %zu tensors where the model has %zu", c,
                      links[c] ? links[c]->size() : size_t(0), want.size());
        const bool last = c + 1 == links.size(), data = shape_only.empty() || !shape_only[c];
        for (size_t i = 0; i < want.size(); ++i) {
            const StateTensor& w = want[i];
            const StateTensor& g = (*links[c])[i];
            const bool kv = is_kv_tensor(w);
            if (!kv && !last) continue;
            std::vector<int64_t> shape = w.shape;
            if (kv) shape[1] = block;
            EMBER_REQUIRE(g.name == w.name && g.shape == shape && (!data || int64_t(g.data.size()) == g.numel()),
                          "state links: tensor %zu of link %zu is '%s' of another name, shape or size than the "
                          "model's '%s'", i, c, g.name.c_str(), w.name.c_str());
        }
    }
    return Status::ok();
}

Expected<std::vector<const std::vector<StateTensor>*>> host_links(const std::vector<const SlotSnapshot*>& links) {
    std::vector<const std::vector<StateTensor>*> out;
    for (size_t c = 0; c < links.size(); ++c) {
        auto* h = dynamic_cast<const HostSnapshot*>(links[c]);
        EMBER_REQUIRE(h != nullptr, "state links: link %zu is not a host snapshot of this model", c);
        out.push_back(&h->tensors);
    }
    return out;
}

std::vector<StateTensor> gather_state_links(std::vector<StateTensor> t, int64_t block,
                                            const std::vector<const std::vector<StateTensor>*>& links) {
    const int64_t pos = int64_t(links.size()) * block;
    const std::vector<StateTensor>& last = *links.back();
    for (size_t i = 0; i < t.size(); ++i) {
        if (!is_kv_tensor(t[i])) {
            t[i].data = last[i].data;
            continue;
        }
        const int64_t groups = t[i].shape[0], d = t[i].shape[2];
        t[i].data.resize(size_t(t[i].numel()));
        for (size_t c = 0; c < links.size(); ++c) {
            const float* src = (*links[c])[i].data.data();
            for (int64_t g = 0; g < groups; ++g)
                std::memcpy(t[i].data.data() + (g * pos + int64_t(c) * block) * d, src + g * block * d,
                            size_t(block * d) * sizeof(float));
        }
    }
    return t;
}

void copy_rows_out(const float* cache, int64_t groups, int64_t capacity, int64_t pos, int64_t d, float* dst) {
    for (int64_t g = 0; g < groups; ++g)
        std::memcpy(dst + g * pos * d, cache + g * capacity * d, static_cast<size_t>(pos * d) * sizeof(float));
}

void copy_rows_in(const float* src, int64_t groups, int64_t capacity, int64_t pos, int64_t d, float* cache) {
    for (int64_t g = 0; g < groups; ++g)
        std::memcpy(cache + g * capacity * d, src + g * pos * d, static_cast<size_t>(pos * d) * sizeof(float));
}

void kv_export(const KVCache& c, int64_t pos, StateTensor* t) {
    EMBER_CHECK(pos <= c.capacity || pos == 0, "kv_export: pos %lld > capacity %lld", (long long)pos,
                (long long)c.capacity);
    for (int i = 0; i < 2; ++i) {
        t[i].data.resize(static_cast<size_t>(c.n_kv * pos * c.head_dim));
        if (pos > 0) copy_rows_out((i ? c.v : c.k).data(), c.n_kv, c.capacity, pos, c.head_dim, t[i].data.data());
    }
}

void kv_import(KVCache& c, int64_t pos, const StateTensor* t) {
    EMBER_CHECK(t[0].numel() == c.n_kv * pos * c.head_dim && t[1].numel() == t[0].numel(), "kv_import: sizes");
    if (pos == 0) return;
    c.ensure(pos);
    copy_rows_in(t[0].data.data(), c.n_kv, c.capacity, pos, c.head_dim, c.k.data());
    copy_rows_in(t[1].data.data(), c.n_kv, c.capacity, pos, c.head_dim, c.v.data());
}

void gdn_export(const DeltaNetState& s, StateTensor* t) {
    t[0].data = s.conv;
    t[1].data = s.S;
}

void gdn_import(DeltaNetState& s, const StateTensor* t) {
    EMBER_CHECK(t[0].data.size() == s.conv.size() && t[1].data.size() == s.S.size(), "gdn_import: sizes");
    s.conv = t[0].data;
    s.S = t[1].data;
}

void Fingerprint::bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 0x100000001b3ull;
}

void Fingerprint::weight(const Weight& w) {
    const int64_t fields[] = {static_cast<int64_t>(w.format), static_cast<int64_t>(w.dtype), w.rows, w.cols,
                              w.bits, w.group_size, static_cast<int64_t>(w.sb_dtype),
                              static_cast<int64_t>(w.ggml_type)};
    for (int64_t f : fields) i64(f);
    if (w.empty()) return;
    const size_t n = static_cast<size_t>(std::min<int64_t>(64, w.row_bytes() * w.rows));
    bytes(w.data, n);
    const size_t sb = static_cast<size_t>(std::min<int64_t>(64, w.row_sb_bytes() * w.rows));
    if (w.scales) bytes(w.scales, sb);
    if (w.biases) bytes(w.biases, sb);
}

// The defaults of CausalLM's saved-session hooks (models/model.h): a model without them cannot save sessions.
std::vector<StateTensor> CausalLM::state_layout(int64_t) const { return {}; }

Expected<std::vector<StateTensor>> CausalLM::export_state(const ModelState&) const {
    return errorf("saved sessions are not supported by this model (%s)", info().architecture.c_str());
}

Status CausalLM::import_state(ModelState&, int64_t, const std::vector<StateTensor>&) const {
    return errorf("saved sessions are not supported by this model (%s)", info().architecture.c_str());
}

}  // namespace ember
