// Fuzz target: tokenizer.json (+ tokenizer_config.json) as Tokenizer::load reads them (Tokenizer::from_json:
// normalizer, pre-tokenizer, BPE model, added tokens, eos_token); then encode/decode checks
// (tokenizer_checks.h) on fixed texts. Input: tokenizer.json, optionally "\n\0\n" and tokenizer_config.json.
#include "fuzz_util.h"
#include "tokenizer_checks.h"

using namespace ember;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto [tokenizer_json, config_json] = fuzz::split_once(fuzz::text(data, size), std::string_view("\n\0\n", 3));
    auto tok = Tokenizer::from_json(tokenizer_json, config_json);
    if (!tok) return 0;
    fuzz::check_tokenizer_on_samples(*tok);
    return 0;
}
