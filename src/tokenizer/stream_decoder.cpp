// stream_decoder.cpp: incremental detokenization that only ever emits complete UTF-8.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ember {

std::string StreamDecoder::push(int32_t id) {
    if (skip_special_ && tok_.is_special(id)) return "";
    pending_ += tok_.token_bytes(id);
    // Emit complete characters; invalid subparts become U+FFFD now (no later byte can repair them); keep an
    // incomplete tail for the next push. This is decode()'s lossy repair applied incrementally.
    std::string out;
    auto p = reinterpret_cast<const unsigned char*>(pending_.data());
    size_t i = 0;
    while (i < pending_.size()) {
        uint32_t cp;
        int k = utf8::scan(p + i, pending_.size() - i, &cp);
        if (k == 0) break;
        if (k > 0) out.append(pending_, i, static_cast<size_t>(k));
        else out += "\xEF\xBF\xBD";
        i += static_cast<size_t>(k > 0 ? k : -k);
    }
    pending_.erase(0, i);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out = utf8::lossy(pending_);
    pending_.clear();
    return out;
}

}  // namespace ember
