// A sequence's state as named fp32 tensors (saved sessions, runtime/session_file.h), in one layout shared by the
// CPU and CUDA backends, and a cheap fingerprint of a model's weights (names/shapes/types, a few bytes of each).
// Layout of layer l (the "blk.l." prefix):
//   attention:     k, v   [n_kv, pos, head_dim]  only the pos used rows of the cache
//   Gated DeltaNet: conv  [K−1, conv_dim]        last pre-conv inputs, oldest first
//                   S     [nv, dk, dv]           recurrent state
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "layers/gated_attention.h"
#include "layers/gated_delta_net.h"
#include "models/model.h"
#include "ops/linear/weight.h"

namespace ember {

// The layout entries of one layer (no data).
void kv_layout(int64_t layer, int64_t n_kv, int64_t pos, int64_t head_dim, std::vector<StateTensor>& out);
void gdn_layout(int64_t layer, const DeltaNetShape& s, std::vector<StateTensor>& out);

// Whether a layout entry is an attention cache ("blk.L.k" / "blk.L.v": [n_kv, pos, head_dim]).
bool is_kv_tensor(const StateTensor& t);
// Keeps rows [from, pos) of a KV tensor of [n_kv, pos, d] (shape and data).
void kv_keep_rows_from(StateTensor& t, int64_t from);

// Every tensor of `got` has the name and shape of its entry of `want` (a layout) and its data.
Status check_state_tensors(const std::vector<StateTensor>& want, const std::vector<StateTensor>& got);

// A chain of snapshots (the prefix cache; CausalLM::batch_import_slot_links): link c holds the tensors of
// `want` = state_layout(links.size() · block) with its KV tensors holding rows [c·block, (c+1)·block) only
// ([n_kv, block, d]); the recurrent tensors of the last link are the state's (the other links' are not read).
// shape_only (optional, one flag per link): that link is a layout without data (a device snapshot's).
Status check_state_links(const std::vector<StateTensor>& want, int64_t block,
                         const std::vector<const std::vector<StateTensor>*>& links,
                         const std::vector<bool>& shape_only = {});
// A snapshot held as host tensors (the generic CausalLM::batch_snapshot).
struct HostSnapshot : SlotSnapshot {
    std::vector<StateTensor> tensors;
};
// The host tensors of each link (an error names a link that is not a HostSnapshot).
Expected<std::vector<const std::vector<StateTensor>*>> host_links(const std::vector<const SlotSnapshot*>& links);
// The state the links make: want's KV tensors gathered from the links' blocks, the rest the last link's.
std::vector<StateTensor> gather_state_links(std::vector<StateTensor> want, int64_t block,
                                            const std::vector<const std::vector<StateTensor>*>& links);

// Copies between the CPU caches and the tensors of a layout (t: the layer's entries, in layout order).
void kv_export(const KVCache& c, int64_t pos, StateTensor* t);     // t[0] = k, t[1] = v
void kv_import(KVCache& c, int64_t pos, const StateTensor* t);
void gdn_export(const DeltaNetState& s, StateTensor* t);           // t[0] = conv, t[1] = S
void gdn_import(DeltaNetState& s, const StateTensor* t);

// Rows [0, pos) of each of `groups` blocks of `capacity` rows of `d` floats → [groups, pos, d] (and back).
void copy_rows_out(const float* cache, int64_t groups, int64_t capacity, int64_t pos, int64_t d, float* dst);
void copy_rows_in(const float* src, int64_t groups, int64_t capacity, int64_t pos, int64_t d, float* cache);

// FNV-1a 64 over everything added: identity of a model without reading all of its data.
class Fingerprint {
public:
    void bytes(const void* p, size_t n);
    void i64(int64_t v) { bytes(&v, sizeof v); }
    void str(const std::string& s) { i64(static_cast<int64_t>(s.size())); bytes(s.data(), s.size()); }
    void floats(const std::vector<float>& v) { i64(static_cast<int64_t>(v.size())); bytes(v.data(), v.size() * 4); }
    // Format, type, shape and the first 64 bytes of the data (and of the scales / biases) of a weight.
    void weight(const Weight& w);
    uint64_t value() const { return h_; }

private:
    uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace ember
