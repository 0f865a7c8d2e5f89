// Fuzz target: a GGUF model file as `ember generate -m FILE.gguf` loads it (load_gguf_model: the registry picks
// Llama / Qwen2 / Qwen3 or Qwen3.5 by general.architecture; metadata → config, tensors → weights with every
// shape checked), then, when the model that loaded is tiny, one forward pass over two tokens.
#include <cstdlib>

#include "fuzz_util.h"
#include "io/gguf.h"
#include "models/model.h"

using namespace ember;

namespace {
constexpr int64_t kMaxForwardBytes = 4 << 20;  // weights + fixed state: larger models only load
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    setenv("EMBER_THREADS", "1", 1);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto f = GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    if (!f) return 0;
    auto m = load_gguf_model(std::shared_ptr<const GgufFile>(std::move(*f)));
    if (!m) return 0;
    const ModelInfo& info = (*m)->info();
    if (info.vocab_size <= 0 || info.hidden_size <= 0) fuzz::fail("a model loaded with an empty vocab or hidden size");
    if (info.weight_bytes + info.state_bytes > kMaxForwardBytes || info.vocab_size > (1 << 16)) return 0;
    auto state = (*m)->new_state();
    std::vector<float> logits(info.vocab_size);
    const int32_t tokens[2] = {0, static_cast<int32_t>(info.vocab_size - 1)};
    (void)(*m)->forward(*state, tokens, 2, logits.data(), /*all_logits=*/false);
    return 0;
}
