// The saved-session file (Session::save / load, `ember generate --save-session / --load-session`): one sequence's
// whole state so that a restored sequence continues exactly as if it had never left.
// Little-endian, in order:
//   "EMBERSES" | u32 version (kSessionFileVersion) | u32 0
//   u64 weights fingerprint (CausalLM::weights_fingerprint) | u64 layout fingerprint (architecture, vocabulary,
//     names and shapes of the state tensors) | u32 n + architecture name (n ≤ 256)
//   i64 vocab | i64 pos | i64 n + i32 tokens[n] (the consumed tokens: n == pos)
//   i64 n + i32 pending[n] (n ≤ 1: the token generate() selected last, not yet consumed)
//   u8 flags (1: host RNG, 2: device RNG) | u64 host seed | u64 host xoshiro256** state[4] | u64 device seed
//     | u64 device counter
//   u32 n tensors, each: u32 n + name (n ≤ 64) | u8 dtype (0 = f32) | u8 ndim (1..4) | i64 shape[ndim] | f32 data
//     (the state_layout(pos) of the model, in its order: only the pos used rows of each KV cache)
//   u64 FNV-1a 64 of every byte before it
// Reading checks the magic, the version, the size against the model's largest possible state, the checksum, the
// model's identity, then every length against the model's layout before anything is allocated for it.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace ember {

constexpr uint32_t kSessionFileVersion = 1;

struct SessionFile {
    int64_t pos = 0;
    std::vector<int32_t> tokens;   // [pos]
    std::vector<int32_t> pending;  // [0 or 1]
    bool host_rng = false, device_rng = false;
    uint64_t host_seed = 0, device_seed = 0, device_counter = 0;
    std::array<uint64_t, 4> host_state{};
    std::vector<StateTensor> tensors;  // model.state_layout(pos) with data
};

// The file's bytes for `model` (fingerprints and architecture taken from it).
std::vector<uint8_t> encode_session(const CausalLM& model, const SessionFile& s);
// Parses and validates bytes written by encode_session for this model; `what` names the source in errors.
Expected<SessionFile> decode_session(const CausalLM& model, const std::vector<uint8_t>& bytes, const std::string& what);

Status write_session_file(const std::string& path, const CausalLM& model, const SessionFile& s);
Expected<SessionFile> read_session_file(const std::string& path, const CausalLM& model);

// FNV-1a 64 (the file's checksum).
uint64_t session_checksum(const uint8_t* p, size_t n);

}  // namespace ember
