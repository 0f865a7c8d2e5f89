// Token masks (structured output, src/grammar): a packed bitmask row per sequence, ceil(V / 32) uint32 words,
// bit v % 32 of word v / 32 set = token v allowed. Applying a mask sets the logits of disallowed tokens to −inf,
// before every other sampling step (penalties, temperature, top-k/p, min-p, the draw), so a masked token is never
// chosen. CUDA: token_mask_cuda.h (same semantics; reference = apply_token_mask below).
#pragma once
#include <cstdint>

namespace ember {

inline int64_t token_mask_words(int64_t vocab) { return (vocab + 31) / 32; }
inline bool token_allowed(const uint32_t* mask, int64_t v) { return (mask[v >> 5] >> (v & 31)) & 1u; }

// logits [rows, vocab] with row stride ld; mask [rows, mask_stride] words (mask_stride ≥ token_mask_words(vocab)).
void apply_token_mask(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask, int64_t mask_stride);
// The same with a row map (a batched step where only some sequences are constrained): row r takes mask row
// mask_row[r] (words mask + mask_row[r]·mask_stride); mask_row[r] < 0 leaves row r as it is.
void apply_token_mask_rows(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask,
                           int64_t mask_stride, const int32_t* mask_row);

// Number of allowed tokens of one row in [0, vocab).
int64_t token_mask_count(const uint32_t* mask, int64_t vocab);
// Whether one row allows any token in [0, vocab) (== token_mask_count > 0; stops at the first word with a bit).
bool token_mask_any(const uint32_t* mask, int64_t vocab);

}  // namespace ember
