// parse_json_text: the nesting-depth limit (checked before nlohmann parses; its copies, comparisons and dumps
// recurse, so 100k '[' would overflow the stack of whoever copies the value) and its clear errors.
#include "io/json_file.h"

#include <gtest/gtest.h>

#include <string>

namespace ember {
namespace {

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonFile, NestingDepthIsCountedOutsideStrings) {
    EXPECT_EQ(json_nesting_depth(""), 0u);
    EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}]})"), 4u);
    EXPECT_EQ(json_nesting_depth(R"(["[[[[", "\"[[[", "\\"])"), 1u);  // brackets in strings, escaped quotes
    EXPECT_EQ(json_nesting_depth(nested(700)), 700u);
    EXPECT_EQ(json_nesting_depth("]]]][["), 2u);  // stray closers do not go below zero
}

TEST(JsonFile, TextNestedBeyondTheLimitIsRefused) {
    auto ok = parse_json_text(nested(kMaxJsonDepth), "ok.json");
    ASSERT_TRUE(ok.is_ok()) << ok.message();
    auto deep = parse_json_text(nested(100000), "deep.json");
    ASSERT_FALSE(deep.is_ok());
    EXPECT_EQ(deep.message(), "deep.json: JSON nested deeper than 512 levels (ember's limit)");
    auto bad = parse_json_text("{\"a\": ", "bad.json");
    ASSERT_FALSE(bad.is_ok());
    EXPECT_EQ(bad.message(), "bad.json: not valid JSON");
}

}  // namespace
}  // namespace ember
