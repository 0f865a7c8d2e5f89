// CUDA token masks (structured output): logits of tokens whose mask bit is clear become −inf, before penalties,
// argmax and sampling (sampling_cuda.h). Layout and semantics: ops/sampling/token_mask.h (the CPU reference
// apply_token_mask). Graph-capturable: the mask is read from device memory when the kernel runs.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember::cuda {

// logits [rows, vocab] (row stride ld floats), mask [rows, mask_stride] uint32 words, one row per sequence.
void apply_token_mask(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask,
                      int64_t mask_stride, cudaStream_t stream);
// With a row map in device memory (read when the kernel runs): row r takes mask row mask_row[r], none if < 0
// (reference: ember::apply_token_mask_rows).
void apply_token_mask_rows(float* logits, int64_t rows, int64_t vocab, int64_t ld, const uint32_t* mask,
                           int64_t mask_stride, const int32_t* mask_row, cudaStream_t stream);

}  // namespace ember::cuda
