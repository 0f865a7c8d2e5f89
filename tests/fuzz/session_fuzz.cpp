// Fuzz target: saved-session files (runtime/session_file.h decode_session, as Session::load reads them) for the
// committed hybrid fixture tests/fixtures/qwen35/mm_tied. Inputs whose first byte is odd get their checksum
// recomputed so that the parser behind it (lengths, names, shapes, tokens) is reached; a file that decodes is
// imported into a fresh state and advanced by one token.
#include <cstring>
#include <vector>

#include "core/check.h"
#include "fuzz_util.h"
#include "models/model.h"
#include "runtime/session_file.h"

using namespace ember;

namespace {
const CausalLM& model() {
    static std::unique_ptr<CausalLM> m = [] {
        auto r = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/qwen35/mm_tied");
        EMBER_CHECK(r.is_ok(), "%s", r.message().c_str());
        return std::move(r.value());
    }();
    return *m;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::vector<uint8_t> b(data + 1, data + size);
    if ((data[0] & 1) && b.size() >= 24) {
        const uint64_t sum = session_checksum(b.data(), b.size() - 8);
        std::memcpy(&b[b.size() - 8], &sum, 8);
    }
    auto s = decode_session(model(), b, "fuzz");
    if (!s) return 0;
    auto st = model().new_state();
    EMBER_CHECK(model().import_state(*st, s->pos, s->tensors).is_ok(), "a decoded session must import");
    if (s->pos < model().info().max_context) {
        std::vector<float> logits(static_cast<size_t>(model().info().vocab_size));
        const int32_t t = 1;
        (void)model().forward(*st, &t, 1, logits.data(), false);
    }
    return 0;
}
