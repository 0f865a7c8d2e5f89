// CUDA token masks (token_mask_cuda.h): one thread per token, rows on blockIdx.y. A warp covers one mask word
// (32 tokens: its lanes read the same word, one transaction) and stores the disallowed ones of its 32 consecutive
// logits together: coalesced, as opposed to one thread per word storing its 32 logits one by one (each warp store
// then touched 32 cache lines: up to 16 M partial-sector stores for the 63.6 MB of logits of 64 rows × 248k).
#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "ops/sampling/token_mask_cuda.h"

namespace ember::cuda {

namespace {

constexpr int kThreads = 256;

// mask_row (optional): row r takes mask row mask_row[r], none if < 0; without it, mask row r.
__global__ void k_apply_token_mask(float* __restrict__ logits, int64_t vocab, int64_t ld,
                                   const uint32_t* __restrict__ mask, int64_t mask_stride,
                                   const int32_t* __restrict__ mask_row) {
    const int64_t v = int64_t(blockIdx.x) * kThreads + threadIdx.x, r = blockIdx.y;
    const int64_t mr = mask_row ? int64_t(mask_row[r]) : r;
    if (v >= vocab || mr < 0) return;
    if (!((mask[mr * mask_stride + (v >> 5)] >> (v & 31)) & 1u)) logits[r * ld + v] = -__int_as_float(0x7f800000);
}

}  // namespace

void apply_token_mask_rows(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask,
                           int64_t mask_stride, const int32_t* mask_row, cudaStream_t stream) {
    EMBER_CHECK(rows > 0 && rows < 65536 && vocab > 0 && ld >= vocab && mask_stride >= (vocab + 31) / 32,
                "apply_token_mask: rows %lld vocab %lld ld %lld mask_stride %lld", (long long)rows, (long long)vocab,
                (long long)ld, (long long)mask_stride);
    const dim3 grid(unsigned((vocab + kThreads - 1) / kThreads), unsigned(rows));
    k_apply_token_mask<<<grid, kThreads, 0, stream>>>(logits, vocab, ld, mask, mask_stride, mask_row);
    CUDA_CHECK(cudaGetLastError());
}

void apply_token_mask(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask,
                      int64_t mask_stride, cudaStream_t stream) {
    apply_token_mask_rows(logits, rows, vocab, ld, mask, mask_stride, nullptr, stream);
}

}  // namespace ember::cuda
