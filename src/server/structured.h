// structured.h: structured output and tool calling for the server — request fields → grammar constraints (compiled
// against the model's vocabulary, cached), and which tool-call format a chat template writes.
#pragma once
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "grammar/matcher.h"
#include "grammar/tool_calls.h"
#include "server/grammar_constraint.h"
#include "server/openai_types.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

// Compiled grammars bound to the vocabulary, shared between requests that give the same schema / grammar (the
// Grammar keeps its mask caches, so a repeated schema is cheap). Thread-safe; the vocabulary index is built on
// first use.
class GrammarCache {
public:
    GrammarCache(const Tokenizer& tok, int64_t n_vocab) : tok_(tok), n_vocab_(n_vocab) {}
    // The grammar for `key` (a canonical text of what it was made from), made by make() when not cached; null when
    // make() gives no grammar.
    Expected<std::shared_ptr<grammar::Grammar>> get(const std::string& key,
                                                    const std::function<Expected<std::optional<grammar::GrammarIR>>()>& make);

private:
    static constexpr size_t kMaxEntries = 32;
    const Tokenizer& tok_;
    int64_t n_vocab_;
    std::mutex mu_;
    std::shared_ptr<const grammar::TokenIndex> vocab_;
    std::list<std::string> order_;  // least recently used first
    std::map<std::string, std::shared_ptr<grammar::Grammar>> grammars_;
};

// response_format / grammar / json_schema (GenerationOptions::structured) → a fresh constraint, null for none;
// an error (the compiler's message) for an invalid or unsupported schema or grammar.
// after_reasoning: the prompt opened a <think> block (Qwen3.5 with thinking on), so the grammar starts after free
// reasoning text and "</think>" (and whitespace): the reasoning stays free and the content follows the grammar.
Expected<std::shared_ptr<GrammarConstraint>> structured_constraint(GrammarCache& cache, const ojson& structured,
                                                                   bool after_reasoning = false);
// tool_choice required / named → the tool-call grammar; auto → calls that follow their schemas once they start;
// none → null.
Expected<std::shared_ptr<GrammarConstraint>> tool_constraint(GrammarCache& cache, const ojson& tools,
                                                             const grammar::ToolChoice& choice, ToolSyntax f,
                                                             bool parallel, bool after_reasoning);

// The tool-call syntax a chat template writes, from its source: <tool_call><function= XML (Qwen3-Coder / Qwen3.5),
// <tool_call> JSON (Qwen2.5 / Qwen3 / Hermes), Llama 3.x JSON (<|python_tag|>, or ipython / "parameters" with
// <|eot_id|>). An error naming the reason when the template renders no tools or writes another format.
Expected<ToolSyntax> template_tool_format(const std::string& source);

}  // namespace ember::server
