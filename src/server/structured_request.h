// structured_request.h: the request readers for structured output and tool calling (openai_request.cpp calls them):
// response_format / grammar / json_schema, tools / tool_choice / parallel_tool_calls. They check shapes only; the
// schemas and grammars are compiled against the vocabulary by server/structured.h.
#pragma once
#include "server/json_fields.h"
#include "server/openai_types.h"

namespace ember::server {

// response_format {type: text | json_object | json_schema {name, schema, strict, description}}, llama-server's
// `grammar` (GBNF) and `json_schema` → g.structured (only the fields given; {} for none or type text).
bool read_structured(Fields& f, GenerationOptions& g);
// tools [{type: function, function: {name, description, parameters, strict}}], tool_choice, parallel_tool_calls.
bool read_tools(Fields& f, ChatRequest& r);

}  // namespace ember::server
