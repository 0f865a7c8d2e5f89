// tool_xml.h: the XML tool-call form of the Qwen3-Coder / Qwen3.5 chat templates — parsed (incrementally, into the
// same events as grammar::ToolCallParser) and as a grammar for tool_choice. One call:
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n ... </function>\n</tool_call>
// A VALUE is raw text for a string-typed parameter (as the template writes args_value | string) and JSON otherwise
// (the template's tojson); the arguments become a JSON object, keys in the order written.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "grammar/ir.h"
#include "grammar/tool_calls.h"
#include "server/openai_types.h"

namespace ember::server {

class XmlToolParser {
public:
    // tools: the request's OpenAI tools (for which parameters are strings).
    XmlToolParser(const ojson& tools, std::string id_prefix);
    std::vector<grammar::ToolEvent> push(std::string_view text);
    std::vector<grammar::ToolEvent> finish();

private:
    void scan(std::vector<grammar::ToolEvent>& out, bool at_end);
    void stream_call(std::vector<grammar::ToolEvent>& out);  // the name and each complete parameter so far
    void end_call(std::vector<grammar::ToolEvent>& out);
    ojson tools_;
    std::string id_prefix_, buf_, call_;  // unconsumed text; the current call's text (after <tool_call>)
    bool in_call_ = false;
    int n_calls_ = 0;
    std::string name_, args_;   // the call's function name ("" until its tag is complete) and arguments so far
    size_t parsed_ = 0;         // bytes of call_ consumed by stream_call
    int n_params_ = 0;
};

// The grammar of the model's message under tool_choice (required / named: free text, then one call, or one or more
// when parallel; auto: free text, and a call once one starts); none → no grammar. String parameters with enum /
// const are enforced; other string constraints (minLength, maxLength, pattern, format) cannot be expressed on the
// raw text form and are refused, as are parameter schemas that are not objects with properties.
Expected<std::optional<grammar::GrammarIR>> xml_tool_call_grammar(const ojson& tools, const grammar::ToolChoice& choice,
                                                                  bool parallel);

}  // namespace ember::server
