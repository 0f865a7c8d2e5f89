// logprobs.h: OpenAI-style log-probabilities of a generated token: the log-softmax of the model's logits (before
// penalties and temperature, as vLLM reports by default), in double.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace ember {

// logits [vocab] (finite): log p(id) and the `top` most likely (id, log p), most likely first (ties → lower id).
std::pair<float, std::vector<std::pair<int32_t, float>>> token_logprobs(const float* logits, int64_t vocab, int32_t id,
                                                                        int top);

}  // namespace ember
