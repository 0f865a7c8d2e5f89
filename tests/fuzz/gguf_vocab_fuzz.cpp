// Fuzz target: a GGUF file's tokenizer as the engine loads it (io/gguf.h, then tokenizer_from_gguf:
// tokenizer.ggml.* → GgufVocab → Tokenizer::from_gguf_vocab, gpt2 and llama/SPM models, every pre-tokenizer
// preset) and its chat template; then encode/decode checks (tokenizer_checks.h) on fixed texts.
#include "fuzz_util.h"
#include "io/gguf.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer_checks.h"

using namespace ember;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto f = GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    if (!f) return 0;
    (void)chat_template_from_gguf(**f);
    auto tok = tokenizer_from_gguf(**f);
    if (!tok) return 0;
    fuzz::check_tokenizer_on_samples(*tok);
    return 0;
}
