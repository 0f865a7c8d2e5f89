// chat_template_errors_test.cpp: bad templates and hostile inputs give a Status (with a location for
// syntax errors), never a crash; runaway templates stop at the limits; the API's input handling.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "template/chat_template.h"

namespace ember {
namespace {

using ojson = nlohmann::ordered_json;

Expected<std::string> render(const std::string& src, const ojson& ctx = ojson::object(),
                             const ChatTemplateOptions& opt = {}) {
    EMBER_ASSIGN(ChatTemplate t, ChatTemplate::parse(src));
    return t.render(ctx, opt);
}

void expect_error_containing(const Expected<std::string>& r, const std::string& needle) {
    ASSERT_FALSE(r.is_ok()) << "rendered: " << r.value();
    EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
}

TEST(ChatTemplateErrors, SyntaxErrorsCarryLineAndColumn) {
    expect_error_containing(ChatTemplate::parse("line one\n{% if x %}\n  {{ foo( }}\n{% endif %}").status(),
                            "at 3:11: unexpected '}', expected ')'");
    expect_error_containing(ChatTemplate::parse("{% for x in y %}\nbody").status(), "expected 'endfor' or 'else'");
    expect_error_containing(ChatTemplate::parse("ab\n  {{ x | nosuchfilter }}").status(),
                            "at 2:10: no filter named 'nosuchfilter'");
    expect_error_containing(ChatTemplate::parse("{{ x is nosuchtest }}").status(), "no test named 'nosuchtest'");
    expect_error_containing(ChatTemplate::parse("{% include 'x' %}").status(), "not supported");
    expect_error_containing(ChatTemplate::parse("{% for x in y recursive %}{% endfor %}").status(),
                            "recursive loops are not supported");
    expect_error_containing(ChatTemplate::parse("{{ 'é' ").status(), "1:1: unexpected end of template");
    expect_error_containing(ChatTemplate::parse("{{ 99999999999999999999 }}").status(), "integer literal too large");
    expect_error_containing(ChatTemplate::parse("{{ '\\x4' }}").status(), "truncated");
    expect_error_containing(ChatTemplate::parse("{% macro m(a=1, b) %}{% endmacro %}").status(),
                            "non-default argument follows default argument");
}

TEST(ChatTemplateErrors, RuntimeErrorsAreStatuses) {
    expect_error_containing(render("x\n  {{ raise_exception('Only user and assistant roles!') }}"),
                            "at 2:6: Only user and assistant roles!");
    expect_error_containing(render("{{ nosuchfunction(1) }}"), "'nosuchfunction' is undefined");
    expect_error_containing(render("{{ 'abc'() }}"), "'str' object is not callable");
    expect_error_containing(render("{{ messages[0].content }}"), "'messages' is undefined");
    auto none_attr = render("[{{ x.y }}]", {{"x", nullptr}});  // an attribute of None is undefined, not an error
    ASSERT_TRUE(none_attr.is_ok()) << none_attr.message();
    EXPECT_EQ(none_attr.value(), "[]");
    expect_error_containing(render("{{ [1, 2].append(3) }}"), "unsafe");
    expect_error_containing(render("{{ 1 // 0 }}"), "division or modulo by zero");
    expect_error_containing(render("{{ 9223372036854775807 + 1 }}"), "integer overflow");
    expect_error_containing(render("{% if true %}{{ 1|nosuchfilter }}{% endif %}"), "no filter named 'nosuchfilter'");
}

TEST(ChatTemplateErrors, RunawayTemplatesStop) {
    ChatTemplateOptions opt;
    opt.max_steps = 100000;
    expect_error_containing(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                                   ojson::object(), opt),
                            "budget of 100000 steps");
    expect_error_containing(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "nested deeper than");
    opt = {};
    opt.max_output_bytes = 1 << 20;
    expect_error_containing(render("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", ojson::object(), opt),
                            "exceeds the limit");
    expect_error_containing(render("{{ 'x' * 1000000000000 }}"), "repetition too large");
    expect_error_containing(render("{{ 'ab'|replace('', 'x' * 1000000)|length }}", ojson::object(), opt),
                            "exceeds the limit");
    expect_error_containing(render("{{ range(1000000) }}"), "Range too big");
    expect_error_containing(
        render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
        "nested deeper than");
}

// Work proportional to the size of values is charged to the step budget (review of the jinja fuzz runs: with
// only loop iterations counted, 2000 iterations of `set r = range(100000)` took 37 s, a loop over a reversed
// 100k list or over `"b" in s` for a 16 MiB s ran quadratically for free). With the default limits each of
// these stops at the budget; constant-time filters on lists (messages|length once per message) stay free, so a
// 5000-message conversation still renders.
TEST(ChatTemplateErrors, WorkIsChargedByTheSizeOfValuesBuiltOrScanned) {
    for (const char* t : {
             "{% for i in range(2000) %}{% set r = range(100000) %}{% endfor %}",
             "{% set l = range(100000)|list %}{% for i in range(100000) %}{% set x = l[::-1] %}{% endfor %}",
             "{% set s = 'a' * 16000000 %}{% for i in range(100000) %}{% if 'b' in s %}{% endif %}{% endfor %}",
             "{% set s = 'a' * 16000000 %}{% for i in range(100000) %}{{ s.count('b') }}{% endfor %}",
             "{% set l = range(100000)|list %}{% for i in range(100000) %}{{ l|sum }}{% endfor %}",
         })
        expect_error_containing(render(t), "budget of 200000 steps");
    ojson messages = ojson::array();
    for (int i = 0; i < 5000; ++i) messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "hi"}});
    auto r = render("{% for m in messages %}{% if loop.index0 == messages|length - 1 %}{{ m.role }}{% endif %}"
                    "{% endfor %}", {{"messages", messages}});
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r.value(), "assistant");
    auto big = render("{{ ('xy' * 8000000)|length }}");  // built by doubling, not 8M appends
    ASSERT_TRUE(big.is_ok()) << big.message();
    EXPECT_EQ(big.value(), "16000000");
    // range() items as start + k·step: the step past the last item no longer overflows int64.
    auto top = render("{{ range(9223372036854775805, 9223372036854775807, 2)|list }}");
    ASSERT_TRUE(top.is_ok()) << top.message();
    EXPECT_EQ(top.value(), "[9223372036854775805]");
}

TEST(ChatTemplateErrors, DeepNestingIsAnErrorNotACrash) {
    const int n = 20000;
    const std::pair<const char*, const char*> nests[] = {{"(", ")"}, {"[", "]"}, {"not ", ""}, {"-", ""},
                                                         {"{'a': ", "}"}, {"f(", ")"}, {"x[", "]"}};
    for (const auto& [open, close] : nests) {
        std::string src = "{{ ";
        for (int i = 0; i < n; ++i) src += open;
        src += "1";
        for (int i = 0; i < n; ++i) src += close;
        expect_error_containing(ChatTemplate::parse(src + " }}").status(), "nested too deeply");
    }
    std::string blocks;
    for (int i = 0; i < n; ++i) blocks += "{% if true %}";
    expect_error_containing(ChatTemplate::parse(blocks).status(), "nested too deeply");

    ojson deep = ojson::array();
    for (int i = 0; i < 600; ++i) deep = ojson::array({deep});
    expect_error_containing(render("{{ x }}", {{"x", deep}}), "nested deeper than");
}

TEST(ChatTemplateErrors, CyclicNamespaceDoesNotCrash) {
    auto r = render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns == ns }}|{{ (ns|string)|length > 0 }}");
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r.value(), "True|True");
    expect_error_containing(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}"),
                            "not JSON serializable");
}

TEST(ChatTemplateApi, ContextAndInputs) {
    // nlohmann::json (sorted keys) works as a context too.
    auto t = ChatTemplate::parse("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}");
    ASSERT_TRUE(t.is_ok()) << t.message();
    auto r = t->render(nlohmann::json{{"d", {{"b", 1}, {"a", 2}}}});
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r.value(), "a=2;b=1;");
    r = t->render(ojson{{"d", {{"b", 1}, {"a", 2}}}});
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r.value(), "b=1;a=2;");
    EXPECT_FALSE(t->render(ojson::array()).is_ok());
    EXPECT_EQ(t->source(), "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}");

    const std::string probe =
        "{{ messages[0].content is defined }}|{{ messages[0].thinking }}|{{ messages[0].reasoning_content }}|"
        "{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ bos_token }}";
    ojson msgs = ojson::array({ojson{{"role", "assistant"}, {"content", nullptr}, {"reasoning", "why"}}});
    auto a = apply_chat_template(probe, msgs, true, ojson{{"bos_token", "<s>"}});
    ASSERT_TRUE(a.is_ok()) << a.message();
    EXPECT_EQ(a.value(), "False|why|why|True|True|True|<s>");
    auto b = apply_chat_template(probe, nlohmann::json::array({{{"role", "user"}, {"content", "x"}}}), false);
    ASSERT_TRUE(b.is_ok()) << b.message();
    EXPECT_EQ(b.value(), "True|||True|True|False|");

    EXPECT_FALSE(apply_chat_template(probe, ojson::array(), true).is_ok());
    EXPECT_FALSE(apply_chat_template(probe, ojson::array({"not an object"}), true).is_ok());
    EXPECT_FALSE(apply_chat_template(probe, ojson::object(), true).is_ok());
    EXPECT_FALSE(apply_chat_template(probe, msgs, true, ojson::array({1})).is_ok());
    EXPECT_FALSE(apply_chat_template("{% if %}", msgs, true).is_ok());

    auto year = render("{{ strftime_now('%Y') }}");  // the real clock by default
    ASSERT_TRUE(year.is_ok());
    EXPECT_EQ(year.value().size(), 4u);
}

// Random templates built from Jinja fragments, random context strings (including invalid UTF-8):
// every outcome must be an output or a Status.
TEST(ChatTemplateErrors, RandomTemplatesNeverCrash) {
    static const char* frags[] = {
        "{{ ", " }}", "{% ", " %}", "{# ", " #}", "{%- ", " -%}", "{{- ", " -}}", "if ", "elif ", "else", "endif",
        "for ", "endfor", " in ", "set ", "macro ", "endmacro", "x", "messages", "m", "loop.index", "ns.a",
        "namespace(a=1)", "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "~", "+", "-", "*", "/", "//", "%",
        "**", "==", "!=", "<", ">=", "=", " is ", "not ", " and ", " or ", "defined", "none", "true", "'s'",
        "\"q\"", "0", "1", "-1", "2.5", "length", "tojson", "items", "join", "upper", "trim", "default('d')",
        "map(attribute='role')", "selectattr('role')", "list", "range(3)", "raise_exception('boom')",
        "content", "role", "[::-1]", "[1:]", "break", "continue", "\n", "  ", "text ", "é", "\xff\xfe",
        "{% raw %}", "{% endraw %}", "filter upper", "endfilter", "with ", "endwith", "generation", "endgeneration",
        "strftime_now('%d')", "'%s' % 1", "x if y else z", "lipsum", "loop", "caller()", "{{ ", "}}",
    };
    std::mt19937 rng(12345);
    ojson ctx = {{"messages", ojson::array({{{"role", "user"}, {"content", "hi \xff"}}, {{"role", "assistant"}}})},
                 {"x", 1}, {"y", ojson::array({1, "a", nullptr})}, {"z", {{"k", 2.5}}}};
    ChatTemplateOptions opt;
    opt.max_steps = 20000;
    opt.max_output_bytes = 1 << 16;
    int parsed = 0, rendered = 0;
    auto t0 = std::chrono::steady_clock::now();
    static const char* atoms[] = {"x", "y", "z", "z.k", "y[1]", "y[::-1]", "messages", "messages[0]", "m.role",
                                  "m.content", "loop.index", "ns.a", "none", "true", "1", "-2", "0.5", "'s'",
                                  "'é'", "[1, 'a']", "{'k': y}", "(1, 2)", "u", "range(3)", "x ~ 'q'"};
    static const char* ops[] = {" + ", " - ", " * ", " / ", " // ", " % ", " ** ", " ~ ", " == ", " < ", " in ",
                                " not in ", " and ", " or ", " if x else "};
    static const char* posts[] = {"", "", "|length", "|tojson", "|string", "|trim", "|list", "|items", "|first",
                                  "|map('upper')|list", "|select|list", "|join(',')", "|default(1)", "|int",
                                  " is defined", " is string", " is none", ".split(',')", ".get('k')", "|sort"};
    auto pick = [&](const auto& arr) { return arr[rng() % (sizeof arr / sizeof arr[0])]; };
    auto expr = [&]() {
        std::string e = pick(atoms);
        for (int k = static_cast<int>(rng() % 3); k > 0; --k) e += std::string(pick(ops)) + pick(atoms);
        return e + pick(posts);
    };
    // Well-formed statements around random expressions.
    auto structured = [&]() {
        std::string src = "{% set ns = namespace(a=1) %}";
        for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
            switch (rng() % 5) {
                case 0: src += "{{ " + expr() + " }}"; break;
                case 1: src += "{% if " + expr() + " %}a{% elif " + expr() + " %}b{% else %}c{% endif %}"; break;
                case 2: src += "{% for m in " + expr() + " %}{{ " + expr() + " }}{% endfor %}"; break;
                case 3: src += "{% set ns.a = " + expr() + " %}{{ ns.a }}"; break;
                default: src += "{% macro f(p) %}{{ p }}{{ " + expr() + " }}{% endmacro %}{{ f(" + expr() + ") }}";
            }
        }
        return src;
    };
    const char* env = std::getenv("EMBER_TEMPLATE_FUZZ_ITERS");  // longer runs on demand
    const int iters = env ? std::atoi(env) : 4000;
    for (int iter = 0; iter < iters; ++iter) {
        std::string src;
        if (iter % 2) {
            src = structured();
        } else {
            int n = 1 + static_cast<int>(rng() % 24);
            for (int i = 0; i < n; ++i) src += frags[rng() % (sizeof frags / sizeof frags[0])];
        }
        if (rng() % 8 == 0) src[rng() % src.size()] = static_cast<char>(rng() % 256);
        auto t = ChatTemplate::parse(src);
        if (!t.is_ok()) {
            EXPECT_FALSE(t.message().empty());
            continue;
        }
        ++parsed;
        auto r = t->render(ctx, opt);
        if (r.is_ok()) ++rendered;
        else EXPECT_FALSE(r.message().empty());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("random templates: %d tried, %d parsed, %d rendered (%.2f s)\n", iters, parsed, rendered, secs);
    EXPECT_GT(parsed, iters / 4);
    EXPECT_GT(rendered, iters / 8);
}

}  // namespace
}  // namespace ember
