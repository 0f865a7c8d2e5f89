// Partial rotary position embedding, NeoX ("rotate_half") pairing, as HF Qwen3.5 computes it in fp32.
//
// Only dims [0, rot_dim) of each head rotate; dims [rot_dim, head_dim) pass through untouched.
// With half = rot_dim / 2, for every token t (position p = pos0 + t), head h and j < half:
//   inv_freq[j] = 1 / theta^(2j / rot_dim)   float32, as torch: 1.0 / (base ** (arange(0, rot, 2).float() / rot))
//   φ           = float(p) * inv_freq[j]     float32 product (HF: position_ids.float() * inv_freq)
//   c, s        = cos φ, sin φ               rounded to float32
//   a = x[j], b = x[j + half]
//   x[j]        = a·c − b·s                  (HF: x·cos + rotate_half(x)·sin, rotate_half = cat(−x2, x1))
//   x[j + half] = b·c + a·s
// Qwen3.5: head_dim 256, rot_dim 64 (partial_rotary_factor 0.25), theta 1e7 (qwen35.md §2.5). Text-only
// interleaved M-RoPE is identical to this 1-D form because all three position components are equal.
//
// Parity with torch (CPU, fp32): inv_freq is bit-exact for rot_dim 64 / theta 1e7 (torch's Sleef powf is
// within 1 ulp of the correctly rounded value we compute; for some other (rot_dim, theta) it differs by
// 1 ulp in a few entries). cos/sin here are correctly rounded; torch's Sleef u10 cos/sin differ by 1 ulp
// in ~4 % of angles. The rotation is two products and one add/sub, unfused, as torch does it.
#pragma once
#include <cstdint>

namespace ember {

// inv_freq [rot_dim / 2] (output), float32 exactly as the formula above. rot_dim even, > 0.
void rope_inv_freq(int64_t rot_dim, float theta, float* inv_freq);

// x [n_tokens, n_heads, head_dim] fp32, rotated in place; token t has position pos0 + t.
// rot_dim even, 0 < rot_dim <= head_dim; pos0 >= 0 (positions must stay below 2^24 to be exact in float).
void rope_neox(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0,
               float theta);

// Reference: same spec (float32 inv_freq and angle, which define the op), then cos/sin and the rotation in
// double, rounded to float once at the end. Plain loops.
void rope_neox_ref(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0,
                   float theta);


// The general form used by the Llama family (GGUF files):
//   NEOX:        pairs (j, j + rot_dim/2) as above (Qwen2/3, HF layout)
//   INTERLEAVED: pairs (2j, 2j + 1) (GGUF `llama`: the converter permutes the q/k rows so that this pairing on
//                the stored weights equals NeoX on HF's); x[2j] = a·c − b·s, x[2j+1] = b·c + a·s
// freq_factors [rot_dim/2] or nullptr: the angle of pair j is φ = float(p)·inv_freq[j] / freq_factors[j]
// (llama.cpp `rope_freqs`, Llama 3.1 long-context scaling), all in float32.
enum class RopeStyle : uint8_t { NEOX, INTERLEAVED };
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0, float theta,
          RopeStyle style, const float* freq_factors = nullptr);
void rope_ref(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0,
              float theta, RopeStyle style, const float* freq_factors = nullptr);

}  // namespace ember
