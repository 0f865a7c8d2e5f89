// structured.cpp: grammar constraints for requests (structured.h).
#include "server/structured.h"

#include "grammar/response_format.h"
#include "grammar/vocab.h"
#include "server/tool_xml.h"

namespace ember::server {

Expected<std::shared_ptr<grammar::Grammar>> GrammarCache::get(
    const std::string& key, const std::function<Expected<std::optional<grammar::GrammarIR>>()>& make) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = grammars_.find(key);
        if (it != grammars_.end()) {
            order_.remove(key);
            order_.push_back(key);
            return it->second;
        }
        if (!vocab_) {
            EMBER_REQUIRE(!tok_.eos_ids().empty(), "the tokenizer has no end-of-sequence token to end a grammar with");
            vocab_ = grammar::token_index_from_tokenizer(tok_, n_vocab_);
        }
    }
    // Compiled outside the lock: a large schema does not hold up other requests.
    EMBER_ASSIGN(std::optional<grammar::GrammarIR> ir, make());
    if (!ir) return std::shared_ptr<grammar::Grammar>();
    EMBER_ASSIGN(std::shared_ptr<grammar::Grammar> g, grammar::Grammar::create(*ir, vocab_));
    std::lock_guard<std::mutex> lk(mu_);
    if (!grammars_.count(key)) {
        if (grammars_.size() >= kMaxEntries) {
            grammars_.erase(order_.front());
            order_.pop_front();
        }
        grammars_[key] = g;
        order_.push_back(key);
    }
    return g;
}

namespace {
// g ← (text without "</think>") "</think>" [ \n]* g.
Expected<std::optional<grammar::GrammarIR>> after_think(Expected<std::optional<grammar::GrammarIR>> ir, bool on) {
    if (!ir || !on || !ir.value()) return ir;
    grammar::GrammarIR& g = *ir.value();
    EMBER_ASSIGN(int reasoning, grammar::text_without(g, "</think>"));
    const int ws = g.star(g.bytes(grammar::ByteSet::of(' ') | grammar::ByteSet::of('\n')));
    const int root = g.add_rule("after_reasoning");
    g.define(root, g.seq({reasoning, g.literal("</think>"), ws, g.ref(g.root)}));
    g.root = root;
    return ir;
}

Expected<std::shared_ptr<GrammarConstraint>> constraint_for(Expected<std::shared_ptr<grammar::Grammar>> g) {
    if (!g) return g.status();
    if (!g.value()) return std::shared_ptr<GrammarConstraint>();
    return std::make_shared<GrammarConstraint>(std::move(g.value()));
}
}  // namespace

Expected<std::shared_ptr<GrammarConstraint>> structured_constraint(GrammarCache& cache, const ojson& structured,
                                                                   bool after_reasoning) {
    if (structured.empty()) return std::shared_ptr<GrammarConstraint>();
    return constraint_for(cache.get(strfmt("request %d ", int(after_reasoning)) + dump_json(structured),
                                    [&] { return after_think(grammar::request_grammar(structured), after_reasoning); }));
}

Expected<std::shared_ptr<GrammarConstraint>> tool_constraint(GrammarCache& cache, const ojson& tools,
                                                             const grammar::ToolChoice& choice, ToolSyntax f,
                                                             bool parallel, bool after_reasoning) {
    if (choice.kind == grammar::ToolChoice::NONE) return std::shared_ptr<GrammarConstraint>();
    const std::string key = strfmt("tools %d %d %d %d %s ", int(choice.kind), int(f), int(parallel),
                                   int(after_reasoning), choice.name.c_str()) + dump_json(tools);
    return constraint_for(cache.get(key, [&] {
        if (f == ToolSyntax::QWEN_XML) return after_think(xml_tool_call_grammar(tools, choice, parallel), after_reasoning);
        const auto jf = f == ToolSyntax::QWEN_JSON ? grammar::ToolFormat::QWEN : grammar::ToolFormat::LLAMA3;
        return after_think(grammar::tool_call_grammar(tools, choice, jf, parallel), after_reasoning);
    }));
}

Expected<ToolSyntax> template_tool_format(const std::string& src) {
    EMBER_REQUIRE(!src.empty(), "this model has no chat template (ChatML is used), so it has no tool-call format");
    EMBER_REQUIRE(src.find("tools") != std::string::npos,
                  "this model's chat template does not render tools (no tool support)");
    if (src.find("<tool_call>") != std::string::npos)
        return src.find("<function=") != std::string::npos ? ToolSyntax::QWEN_XML : ToolSyntax::QWEN_JSON;
    if (src.find("<|python_tag|>") != std::string::npos || src.find("ipython") != std::string::npos ||
        (src.find("\"parameters\"") != std::string::npos && src.find("<|eot_id|>") != std::string::npos))
        return ToolSyntax::LLAMA3_JSON;
    return errorf("this model's chat template renders tools, but in a tool-call format ember does not recognise "
                  "(known: Qwen <tool_call> JSON, Llama 3.x JSON)");
}

}  // namespace ember::server
