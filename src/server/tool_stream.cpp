// tool_stream.cpp: tool-call events → OpenAI deltas (tool_stream.h).
#include "server/tool_stream.h"

namespace ember::server {

ToolStream::ToolStream(ToolSyntax f, const ojson& tools, const std::string& id_prefix) {
    if (f == ToolSyntax::QWEN_XML) xml_.emplace(tools, id_prefix);
    else json_.emplace(f == ToolSyntax::QWEN_JSON ? grammar::ToolFormat::QWEN : grammar::ToolFormat::LLAMA3, id_prefix);
}

std::vector<grammar::ToolEvent> ToolStream::parse(std::string_view text, bool at_end) {
    if (at_end) return xml_ ? xml_->finish() : json_->finish();
    return xml_ ? xml_->push(text) : json_->push(text);
}

void ToolStream::apply(const std::vector<grammar::ToolEvent>& ev, ReplyDelta& d) {
    using grammar::ToolEvent;
    for (const ToolEvent& e : ev) {
        switch (e.kind) {
            case ToolEvent::CONTENT: d.content += e.text; break;
            case ToolEvent::CALL_BEGIN:
                d.tool_calls.push_back({{"index", e.index}, {"id", e.id}, {"type", "function"},
                                        {"function", {{"name", e.name}, {"arguments", ""}}}});
                break;
            case ToolEvent::ARGUMENTS:
                if (!d.tool_calls.empty() && d.tool_calls.back()["index"] == e.index)  // same chunk: one entry
                    d.tool_calls.back()["function"]["arguments"] =
                        d.tool_calls.back()["function"]["arguments"].get<std::string>() + e.text;
                else
                    d.tool_calls.push_back({{"index", e.index}, {"function", {{"arguments", e.text}}}});
                break;
            case ToolEvent::CALL_END:
                calls_.push_back({{"id", e.id}, {"type", "function"}, {"function", {{"name", e.name}, {"arguments", e.text}}}});
                break;
            case ToolEvent::ERROR: break;  // the malformed call's text comes as CONTENT
        }
    }
}

void ToolStream::push(ReplyDelta& d) {
    std::string text;
    text.swap(d.content);
    if (!text.empty()) apply(parse(text, false), d);
}

void ToolStream::finish(ReplyDelta& d) {
    push(d);
    apply(parse("", true), d);
}

}  // namespace ember::server
