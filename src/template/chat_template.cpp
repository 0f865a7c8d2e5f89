// chat_template.cpp: parse (lex, parse, check filter/test names) and render (see chat_template.h).
#include "template/chat_template.h"

#include "template/builtins.h"
#include "template/eval.h"
#include "template/lexer.h"
#include "template/parser.h"
#include "template/value_json.h"

namespace ember {

using namespace jinja;

struct ChatTemplate::Impl {
    std::string source;
    Body body;
};

namespace {

// jinja2 resolves filter and test names when it compiles a template, except inside `if` statements
// and `x if c else y` expressions ("soft" frames), where an unknown name fails only if it is reached.
Status check_names(const Expr* e, bool soft) {
    if (!e) return Status::ok();
    if (!soft && e->kind == ExprKind::FILTER && !find_filter(e->name))
        return errorf("template syntax error at %d:%d: no filter named '%s'", e->line, e->col, e->name.c_str());
    if (!soft && e->kind == ExprKind::TEST && !find_test(e->name))
        return errorf("template syntax error at %d:%d: no test named '%s'", e->line, e->col, e->name.c_str());
    soft = soft || e->kind == ExprKind::COND;
    for (const ExprPtr& x : e->items) EMBER_TRY(check_names(x.get(), soft));
    for (const auto& kv : e->kwargs) EMBER_TRY(check_names(kv.second.get(), soft));
    for (const Expr* x : {e->a.get(), e->b.get(), e->c.get(), e->dyn_args.get(), e->dyn_kwargs.get()})
        EMBER_TRY(check_names(x, soft));
    return Status::ok();
}

Status check_names(const Body& body, bool soft) {
    for (const NodePtr& n : body) {
        switch (n->kind) {
            case NodeKind::IF:
                for (const auto& [cond, b] : n->branches) {
                    EMBER_TRY(check_names(cond.get(), true));
                    EMBER_TRY(check_names(b, true));
                }
                EMBER_TRY(check_names(n->else_body, true));
                break;
            case NodeKind::FOR:  // the iterable is evaluated outside the loop's frame
                EMBER_TRY(check_names(n->expr.get(), soft));
                EMBER_TRY(check_names(n->cond.get(), false));
                EMBER_TRY(check_names(n->body, false));
                EMBER_TRY(check_names(n->else_body, false));
                break;
            case NodeKind::WITH:
                for (const ExprPtr& x : n->values) EMBER_TRY(check_names(x.get(), soft));
                EMBER_TRY(check_names(n->body, false));
                break;
            case NodeKind::MACRO:
                for (const ExprPtr& d : n->macro->defaults) EMBER_TRY(check_names(d.get(), false));
                EMBER_TRY(check_names(n->macro->body, false));
                break;
            case NodeKind::SET_BLOCK: case NodeKind::FILTER_BLOCK:
                EMBER_TRY(check_names(n->expr.get(), false));
                EMBER_TRY(check_names(n->body, false));
                break;
            case NodeKind::SCOPE:  // {% generation %} is a call block (its own frame); a print group is not
                EMBER_TRY(check_names(n->body, n->body.empty() || n->body[0]->kind != NodeKind::PRINT ? false : soft));
                break;
            default:
                EMBER_TRY(check_names(n->expr.get(), soft));
                EMBER_TRY(check_names(n->target.get(), soft));
        }
    }
    return Status::ok();
}

template <class Json>
Expected<std::string> render_json(const ChatTemplate::Impl& impl, const Json& context, const ChatTemplateOptions& opt) {
    if (!context.is_object()) return errorf("chat template context must be a JSON object");
    EMBER_ASSIGN(Value ctx, value_from_json(context));
    std::tm now{};
    if (opt.now) {
        now = *opt.now;
    } else {
        std::time_t t = std::time(nullptr);
        localtime_r(&t, &now);
    }
    RenderLimits limits{opt.max_output_bytes, opt.max_steps, opt.max_call_depth};
    Renderer r(limits, now);
    return r.render(impl.body, ctx.as_dict());
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source) {
    auto impl = std::make_shared<Impl>();
    impl->source = std::string(source);
    std::string normalized = normalize_source(source);
    EMBER_ASSIGN(std::vector<Token> tokens, tokenize(normalized));
    EMBER_ASSIGN(impl->body, parse_template(tokens));
    EMBER_TRY(check_names(impl->body, false));
    return ChatTemplate(std::move(impl));
}

Expected<std::string> ChatTemplate::render(const nlohmann::ordered_json& context, const ChatTemplateOptions& opt) const {
    return render_json(*impl_, context, opt);
}

Expected<std::string> ChatTemplate::render(const nlohmann::json& context, const ChatTemplateOptions& opt) const {
    return render_json(*impl_, context, opt);
}

const std::string& ChatTemplate::source() const { return impl_->source; }

Expected<nlohmann::ordered_json> chat_template_context(const nlohmann::ordered_json& messages,
                                                       bool add_generation_prompt,
                                                       const nlohmann::ordered_json& extra) {
    using ojson = nlohmann::ordered_json;
    if (!messages.is_array()) return errorf("chat messages must be a JSON array");
    if (messages.empty()) return errorf("cannot apply a chat template to an empty conversation");
    if (!extra.is_null() && !extra.is_object()) return errorf("chat template arguments must be a JSON object");
    ojson msgs = ojson::array();
    for (const ojson& m : messages) {
        if (!m.is_object()) return errorf("chat messages must be JSON objects, got %s", m.dump().c_str());
        ojson clean = ojson::object();
        for (auto it = m.begin(); it != m.end(); ++it)
            if (!it.value().is_null()) clean[it.key()] = it.value();
        const ojson* reasoning = nullptr;
        for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
            auto it = clean.find(key);
            if (it != clean.end()) { reasoning = &*it; break; }
        }
        if (reasoning) {  // {"thinking": r, **message, "reasoning_content": r}
            ojson r = *reasoning;
            ojson aliased = ojson::object();
            aliased["thinking"] = r;
            for (auto it = clean.begin(); it != clean.end(); ++it) aliased[it.key()] = it.value();
            aliased["reasoning_content"] = r;
            clean = std::move(aliased);
        }
        msgs.push_back(std::move(clean));
    }
    ojson ctx = ojson::object();
    ctx["messages"] = std::move(msgs);
    ctx["tools"] = nullptr;
    ctx["documents"] = nullptr;
    ctx["add_generation_prompt"] = add_generation_prompt;
    if (extra.is_object())
        for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
    return ctx;
}

Expected<std::string> apply_chat_template(std::string_view tmpl, const nlohmann::ordered_json& messages,
                                          bool add_generation_prompt, const nlohmann::ordered_json& extra,
                                          const ChatTemplateOptions& opt) {
    EMBER_ASSIGN(ChatTemplate t, ChatTemplate::parse(tmpl));
    EMBER_ASSIGN(nlohmann::ordered_json ctx, chat_template_context(messages, add_generation_prompt, extra));
    return t.render(ctx, opt);
}

Expected<std::string> apply_chat_template(std::string_view tmpl, const nlohmann::json& messages,
                                          bool add_generation_prompt, const nlohmann::json& extra,
                                          const ChatTemplateOptions& opt) {
    return apply_chat_template(tmpl, nlohmann::ordered_json::parse(messages.dump()), add_generation_prompt,
                               nlohmann::ordered_json::parse(extra.dump()), opt);
}

}  // namespace ember
