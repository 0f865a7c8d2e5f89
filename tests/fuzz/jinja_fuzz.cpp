// Fuzz target: Jinja chat templates (template/chat_template.h) — an arbitrary template parsed and rendered with
// the engine's limits, against an arbitrary context. Input: template source, optionally "\0" and a JSON
// context object (else chat_context.h's conversation through chat_template_context, as apply_chat_template).
#include "chat_context.h"
#include "fuzz_util.h"

using namespace ember;
using ojson = nlohmann::ordered_json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto [source, context_text] = fuzz::split_once(fuzz::text(data, size), std::string_view("\0", 1));
    auto t = ChatTemplate::parse(source);
    if (!t) return 0;
    ojson context = ojson::parse(context_text, nullptr, /*allow_exceptions=*/false);
    if (context.is_discarded() || !context.is_object()) {
        auto c = chat_template_context(fuzz::default_messages(), true, fuzz::default_extra());
        if (!c) fuzz::fail("the default context does not build: " + c.message());
        context = std::move(c).value();
    }
    (void)t->render(context, fuzz::options());
    return 0;
}
