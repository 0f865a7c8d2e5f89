// JSON Schema → grammar IR (draft-04 … 2020-12 keywords; JSONSchemaBench's forms).
//
// Supported: type (incl. lists, OpenAPI nullable), enum / const, properties / required / additionalProperties /
// patternProperties / propertyNames / minProperties / maxProperties, dependencies / dependentRequired /
// dependentSchemas (a present key requires the named keys, or the object satisfies a schema too: split into
// "without the key" | "with it and the schema"), items / prefixItems / additionalItems / minItems / maxItems,
// allOf (merged), anyOf, oneOf (exact when the branches are provably disjoint, or when they only list required
// keys: exactly one list complete), not of a schema that accepts everything (nothing) or of false, $ref / $defs /
// definitions (JSON pointers within the document, recursion), string minLength / maxLength / pattern / format
// (date, time, date-time, email, uuid, uri, ipv4, hostname), number / integer minimum / maximum /
// exclusiveMinimum / exclusiveMaximum (both drafts' forms) / multipleOf. Annotations and unknown (non-standard)
// keywords are ignored.
// Refused with an error naming the keyword: other not, if / then / else, contains, uniqueItems (true, unless
// maxItems ≤ 1), unevaluated*, $dynamicRef, remote $ref, unknown formats, and oneOf whose branches may overlap
// (unless oneof_as_anyof).
//
// Object properties are generated in the order of `properties` (then required keys and keys named by
// dependencies not listed there, then additional properties); an object of at most 2 such listed keys takes them
// in any order (additional properties after them). JSON whitespace is allowed between tokens. Value
// schemas become rules of their own (cached per content), so their masks are shared wherever the same schema
// appears.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "core/status.h"
#include "grammar/ir.h"

namespace ember::grammar {

struct JsonSchemaOptions {
    bool whitespace = true;        // JSON whitespace [ \t\n\r]* between tokens; false: none at all
    int max_whitespace = -1;       // longest whitespace run (-1 = unbounded)
    bool oneof_as_anyof = false;   // oneOf branches not provably disjoint: accept like anyOf instead of an error
};

Expected<GrammarIR> json_schema_grammar(std::string_view schema_text, const JsonSchemaOptions& opt = {});
Expected<GrammarIR> json_schema_grammar_json(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opt = {});
// Any JSON value (schema `true`); object_only: any JSON object (response_format "json_object").
GrammarIR json_value_grammar(bool object_only, const JsonSchemaOptions& opt = {});

}  // namespace ember::grammar
