// Fuzz target: request bodies of `ember serve` as the routes parse them (server/openai_types.h:
// parse_chat_request, parse_completion_request, parse_tokenize_request, parse_detokenize_request — JSON, then
// every field checked, unknown or unsupported fields refused). Checks: a refusal is a 4xx with a message, and an
// accepted chat request renders to JSON again (the error body too).
#include "fuzz_util.h"
#include "server/openai_types.h"

using namespace ember;
using namespace ember::server;

namespace {
template <class R>
void check(const Expected<R>& r, const ApiError& e, const char* what) {
    if (r) return;
    if (e.status < 400 || e.status > 499) fuzz::fail(std::string(what) + ": refusal with status " + std::to_string(e.status));
    if (r.message().empty() || e.message.empty()) fuzz::fail(std::string(what) + ": refusal without a message");
    if (error_body(e).empty()) fuzz::fail(std::string(what) + ": empty error body");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view body = fuzz::text(data, size);
    ApiError e1, e2, e3, e4;
    auto chat = parse_chat_request(body, &e1);
    check(chat, e1, "chat");
    if (chat && chat->messages.dump().empty()) fuzz::fail("chat: messages do not serialise");
    check(parse_completion_request(body, &e2), e2, "completion");
    check(parse_tokenize_request(body, &e3), e3, "tokenize");
    check(parse_detokenize_request(body, &e4), e4, "detokenize");
    return 0;
}
