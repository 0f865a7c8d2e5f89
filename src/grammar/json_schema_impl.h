// The JSON Schema compiler's state, shared by json_schema*.cpp (private to src/grammar).
#pragma once
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/json_schema.h"

namespace ember::grammar {

using ojson = nlohmann::ordered_json;

// Presence constraints the compiler attaches to an object schema: [{"oneOf": [[names], ...]}, ...] — exactly one
// list complete, per entry (from oneOf of required-only branches). A user schema that spells this keyword gets it
// interpreted the same way.
inline constexpr const char* kPresenceKeyword = "$ember:presence";

class SchemaCompiler {
public:
    SchemaCompiler(const ojson& root, const JsonSchemaOptions& opt);
    Expected<GrammarIR> run();

    // ---- json_schema.cpp ----
    Expected<int> call(const ojson& s);   // a reference to the value rule of s (one rule per schema content)
    Expected<int> value(const ojson& s);  // the value expression of s
    Expected<const ojson*> resolve(const std::string& ref);
    int ws();
    int sep();  // ws "," ws
    int literal_value(const ojson& v);  // a JSON value as text (whitespace allowed inside containers)
    const ojson& own(ojson j) { owned_.push_back(std::move(j)); return owned_.back(); }
    bool ref_siblings_ignored() const { return ref_siblings_ignored_; }

    // ---- json_schema_merge.cpp ----
    // allOf of two schema objects as one schema ($ref at their top level resolved first).
    Expected<ojson> merge(const ojson& a, const ojson& b, int depth = 0);
    Expected<ojson> deref(const ojson& s);  // s with a top-level $ref replaced by its (merged) target
    // oneOf branches that no instance can satisfy together (conservative: false = unknown).
    bool provably_disjoint(const ojson& a, const ojson& b);
    // Does value v satisfy the simple keywords of s (type, bounds, lengths, pattern)? Errors for keywords it
    // cannot check on that value.
    Expected<bool> enum_value_ok(const ojson& s, const ojson& v);

    // ---- json_schema_object.cpp ----
    Expected<int> object_expr(const ojson& s);
    Expected<int> array_expr(const ojson& s);

    GrammarIR g;

private:
    const ojson& root_;
    JsonSchemaOptions opt_;
    std::deque<ojson> owned_;
    std::unordered_map<std::string, int> rules_;  // schema content key → rule
    int ws_ = -1, sep_ = -1;
    int depth_ = 0;
    int schema_deps_ = 0;  // schema dependencies split so far (each doubles the object's alternatives)
    bool ref_siblings_ignored_ = false;  // draft ≤ 7: keywords beside $ref are ignored
    Expected<int> typed(const ojson& s, const std::string& type);
};

// Keywords that only annotate (never change the accepted set).
bool is_annotation(const std::string& k);
// Keywords of JSON Schema that assert something we do not implement (an error names them).
bool is_unsupported(const std::string& k);
// The JSON types an instance of s may have ("integer" counted inside "number"); all when unconstrained.
std::vector<std::string> schema_types(const ojson& s);

}  // namespace ember::grammar
