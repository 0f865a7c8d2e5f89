// Token masks on the CPU (token_mask.h): plain loops; the count by words.
#include "ops/sampling/token_mask.h"

#include <bit>
#include <limits>

namespace ember {

void apply_token_mask(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask, int64_t mask_stride) {
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < vocab; ++v)
            if (!token_allowed(mask + r * mask_stride, v)) logits[r * ld + v] = ninf;
}

void apply_token_mask_rows(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask,
                           int64_t mask_stride, const int32_t* mask_row) {
    for (int64_t r = 0; r < rows; ++r)
        if (mask_row[r] >= 0) apply_token_mask(logits + r * ld, 1, vocab, ld, mask + mask_row[r] * mask_stride, mask_stride);
}

// A word at a time (the batched step counts every constrained row's mask: 7,760 words at 248k tokens); the bits of
// the last word past the vocabulary do not count.
int64_t token_mask_count(const uint32_t* mask, int64_t vocab) {
    const int64_t full = vocab / 32, tail = vocab % 32;
    int64_t n = 0;
    for (int64_t w = 0; w < full; ++w) n += std::popcount(mask[w]);
    if (tail) n += std::popcount(mask[full] & ((1u << tail) - 1u));
    return n;
}

}  // namespace ember
