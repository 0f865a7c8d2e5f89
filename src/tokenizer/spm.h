// spm.h: the SentencePiece BPE model of GGUF "llama" vocabularies, with llama.cpp's semantics
// (llama-vocab.cpp, llm_tokenizer_spm): a text fragment (spaces already escaped to U+2581 "▁", the space prefix
// already added by the caller) is split into UTF-8 characters; repeatedly the adjacent pair whose concatenation
// is a vocabulary token with the highest score is merged (ties: the leftmost pair); every remaining symbol is
// its token, or — a character that is no token — its bytes as the byte tokens "<0xHH>" (the unknown token where
// the vocabulary has no such byte token; skipped if there is none either).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember {

class Spm {
public:
    // vocab: every token text -> id (all types, as llama.cpp's token_to_id); scores[id] (empty: all 0);
    // byte_ids[b]: the id of "<0xHH>" for byte b, or -1; unk_id or -1.
    Spm(std::unordered_map<std::string, int32_t> vocab, std::vector<float> scores, std::vector<int32_t> byte_ids,
        int32_t unk_id);

    // Appends the ids of one escaped fragment to out.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    std::unordered_map<std::string, int32_t> vocab_;
    std::vector<float> scores_;
    std::vector<int32_t> byte_ids_;
    int32_t unk_id_;
};

// " " -> U+2581 (llama.cpp llama_escape_whitespace) and back.
std::string spm_escape_spaces(std::string_view text);
std::string spm_unescape_spaces(std::string_view text);

}  // namespace ember
