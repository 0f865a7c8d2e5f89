// Vocabulary adapters (vocab.h).
#include "grammar/vocab.h"

#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace ember::grammar {

std::shared_ptr<const TokenIndex> token_index_from_tokenizer(const Tokenizer& tok, int64_t n_vocab) {
    std::vector<std::string> bytes;
    bytes.resize(size_t(std::max<int64_t>(n_vocab, tok.vocab_size())));
    for (int32_t id = 0; id < tok.vocab_size(); ++id)
        if (!tok.is_special(id)) bytes[size_t(id)] = tok.token_bytes(id);
    std::vector<int32_t> eos = tok.eos_ids();
    for (int32_t e : eos)
        if (e >= 0 && size_t(e) < bytes.size()) bytes[size_t(e)].clear();
    return TokenIndex::build(std::move(bytes), std::move(eos));
}

namespace {
bool base64_decode(const std::string& in, std::string& out) {
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    out.clear();
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        if (c == '=') break;
        const int v = val(c);
        if (v < 0) return false;
        acc = (acc << 6) | uint32_t(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += char((acc >> bits) & 0xFF);
        }
    }
    return true;
}
}  // namespace

Expected<std::shared_ptr<const TokenIndex>> token_index_from_tiktoken(const std::string& path, int64_t n_vocab,
                                                                      std::vector<int32_t> eos) {
    std::ifstream f(path);
    EMBER_REQUIRE(f.good(), "cannot open tiktoken file %s", path.c_str());
    std::vector<std::string> bytes;
    bytes.resize(size_t(n_vocab));
    std::string line;
    int64_t lineno = 0;
    while (std::getline(f, line)) {
        ++lineno;
        if (line.empty()) continue;
        std::istringstream ss(line);
        std::string b64;
        int64_t rank = -1;
        ss >> b64 >> rank;
        std::string tok;
        EMBER_REQUIRE(rank >= 0 && base64_decode(b64, tok) && !tok.empty(), "%s line %lld: bad entry", path.c_str(),
                      (long long)lineno);
        EMBER_REQUIRE(rank < n_vocab, "%s line %lld: id %lld beyond the vocabulary size %lld", path.c_str(),
                      (long long)lineno, (long long)rank, (long long)n_vocab);
        bytes[size_t(rank)] = std::move(tok);
    }
    return TokenIndex::build(std::move(bytes), std::move(eos));
}

}  // namespace ember::grammar
