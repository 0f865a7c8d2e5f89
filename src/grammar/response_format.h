// OpenAI `response_format` and llama-server's `grammar` / `json_schema` request fields → grammar IR, for the
// server (the HTTP parts live in src/server).
//   {"type": "text"}                                   → none
//   {"type": "json_object"}                            → any JSON object
//   {"type": "json_schema", "json_schema": {"name": N, "schema": S, "strict": B}} → S (enforced whether or not
//       strict: a schema we cannot enforce exactly is an error, never silently loosened)
//   llama-server: "grammar": GBNF text; "json_schema": S
// Two of them in one request → an error.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "core/status.h"
#include "grammar/ir.h"
#include "grammar/json_schema.h"

namespace ember::grammar {

Expected<std::optional<GrammarIR>> request_grammar(const nlohmann::ordered_json& request, const JsonSchemaOptions& opt = {});

}  // namespace ember::grammar
