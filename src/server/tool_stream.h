// tool_stream.h: the reply's content → content and tool calls (grammar::ToolCallParser), as OpenAI deltas: each
// call streams as delta.tool_calls [{index, id, type: "function", function: {name, arguments: ""}}] and then
// [{index, function: {arguments: piece}}]; the whole message gets message.tool_calls.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "grammar/tool_calls.h"
#include "server/openai_types.h"
#include "server/tool_xml.h"

namespace ember::server {

class ToolStream {
public:
    ToolStream(ToolSyntax f, const ojson& tools, const std::string& id_prefix);
    // Replaces d.content by the content outside tool calls and adds the calls' pieces to d.tool_calls.
    void push(ReplyDelta& d);
    void finish(ReplyDelta& d);  // the end of the reply (an unterminated call becomes content)
    const std::vector<ojson>& calls() const { return calls_; }  // complete calls (message.tool_calls entries)

private:
    void apply(const std::vector<grammar::ToolEvent>& ev, ReplyDelta& d);
    std::vector<grammar::ToolEvent> parse(std::string_view text, bool at_end);
    std::optional<grammar::ToolCallParser> json_;
    std::optional<XmlToolParser> xml_;
    std::vector<ojson> calls_;
};

}  // namespace ember::server
