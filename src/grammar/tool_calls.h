// Tool calling (OpenAI `tools` / `tool_choice` / `tool_calls`) as library code for the server: parsing tool calls
// out of the model's text — incrementally, for streamed deltas — and the grammar that constrains a call.
//
// Formats:
//   QWEN   (Qwen2.5 / Qwen3 / Qwen3.5 chat templates):  <tool_call>\n{"name": F, "arguments": {...}}\n</tool_call>
//          one block per call; text outside the blocks is the message content.
//   LLAMA3 (Llama 3.x JSON tool calling): the message is {"name": F, "parameters": {...}} ("arguments" also
//          accepted), optionally after <|python_tag|>; several calls separated by ';'.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/ir.h"
#include "grammar/json_schema.h"

namespace ember::grammar {

enum class ToolFormat { QWEN, LLAMA3 };

// One streamed event, in the shape of OpenAI chat.completion.chunk deltas.
struct ToolEvent {
    enum Kind {
        CONTENT,    // text: a piece of the message content
        CALL_BEGIN, // index, id, name: a new tool call (delta.tool_calls[i] with id, type, function.name)
        ARGUMENTS,  // index, text: a piece of the call's arguments JSON (delta.tool_calls[i].function.arguments)
        CALL_END,   // index, text = the complete arguments JSON (validated)
        ERROR,      // text: malformed call (the raw block is also reported as CONTENT)
    } kind;
    int index = 0;
    std::string id, name, text;
};

// Incremental parser: push() text as it is generated, finish() at the end; each returns the new events.
class ToolCallParser {
public:
    explicit ToolCallParser(ToolFormat f, std::string id_prefix = "call_");
    std::vector<ToolEvent> push(std::string_view text);
    std::vector<ToolEvent> finish();

private:
    void scan(std::vector<ToolEvent>& out, bool at_end);
    bool scan_call(std::vector<ToolEvent>& out, bool at_end);  // inside a call's JSON
    void end_call(std::vector<ToolEvent>& out, std::string_view json_text);
    ToolFormat fmt_;
    std::string id_prefix_;
    std::string buf_;          // unconsumed text
    bool in_call_ = false, started_ = false;
    int n_calls_ = 0;
    // JSON scanning state of the current call
    std::string call_text_;    // the call's JSON so far
    size_t args_from_ = std::string::npos, args_sent_ = 0;
    bool name_sent_ = false;
};

// Non-streaming: content and calls of a whole message. calls: OpenAI tool_calls entries
// ({"id", "type": "function", "function": {"name", "arguments"}}).
struct ParsedMessage {
    std::string content;
    std::vector<nlohmann::ordered_json> calls;
    std::vector<std::string> errors;
};
ParsedMessage parse_tool_calls(std::string_view text, ToolFormat f);

struct ToolChoice {
    enum Kind { AUTO, NONE, REQUIRED, NAMED } kind = AUTO;
    std::string name;  // NAMED
};
// tool_choice from the request value ("auto" / "none" / "required" / {"type":"function","function":{"name":F}}).
Expected<ToolChoice> parse_tool_choice(const nlohmann::ordered_json& v);

// The grammar of the model's message under tool_choice, from the OpenAI `tools` array (each
// {"type":"function","function":{"name", "parameters": JSON Schema}}): REQUIRED / NAMED — free text without a call
// opener (QWEN: e.g. the thinking block), then one call (parallel: one or more) whose arguments follow the
// function's parameters schema; AUTO — free text, and once a call starts it follows the schema; NONE — no grammar.
Expected<std::optional<GrammarIR>> tool_call_grammar(const nlohmann::ordered_json& tools, const ToolChoice& choice,
                                                     ToolFormat f, bool parallel, const JsonSchemaOptions& opt = {});

// Any UTF-8 text that does not contain `tag`, as an expression of g (the free text before a call).
Expected<int> text_without(GrammarIR& g, std::string_view tag);

}  // namespace ember::grammar
