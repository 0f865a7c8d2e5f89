// tokenizer_impl.h: the state behind Tokenizer (private to src/tokenizer). Two front ends fill it:
// from_json (tokenizer.json: HF semantics) and from_gguf_vocab (GGUF metadata: llama.cpp semantics).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/special_split.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"

namespace ember {

// Token strings that end generation when present in a vocabulary (both front ends add them to eos_ids()).
inline constexpr const char* kEosTokenNames[] = {"<|im_end|>", "<|endoftext|>", "</s>", "<|end_of_text|>",
                                                 "<|eot_id|>"};

struct Tokenizer::Impl {
    Normalizer normalizer;  // identity for GGUF (llama.cpp does not normalize BPE input)
    PreTokenizer pre_tokenizer;
    std::unique_ptr<Bpe> bpe;  // GGUF "llama" vocabularies: only its vocab() (token_id lookups)
    std::unique_ptr<Spm> spm;  // GGUF "llama" (SentencePiece) vocabularies
    bool add_space_prefix = false;  // spm: " " before a text fragment at the start or after a special token
    // tokenizer.json: HF AddedVocabulary matching (leftmost-longest).
    AddedTokenMatcher raw_added;   // normalized=false tokens, matched in the raw text
    AddedTokenMatcher norm_added;  // normalized=true tokens, matched in the normalized text
    // GGUF: llama.cpp's partition (longest token first over the whole text); used when from_gguf is set.
    SpecialTokenSplitter gguf_special;
    bool from_gguf = false;
    std::unordered_map<std::string, int32_t> added_ids;  // content -> id (tokenizer.json added tokens)
    std::vector<std::string> bytes;                      // id -> bytes it decodes to
    std::vector<uint8_t> special;                        // id is skipped by decode(skip_special)
    std::vector<int32_t> eos;
    int32_t bos_id = -1, eos_id = -1;
    bool add_bos = false, add_eos = false;
};

}  // namespace ember
