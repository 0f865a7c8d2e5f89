// chat_template_fixture_test.cpp: every oracle fixture (tests/fixtures/templates/, produced by
// transformers' own renderer via scripts/make_template_fixtures.py) renders byte-identically, and
// every case where transformers fails also fails here (with the same message for raise_exception).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/temp_dir.h"
#include "template/chat_template.h"
#include "template/model_chat_templates.h"

namespace ember {
namespace {

using ojson = nlohmann::ordered_json;

// EMBER_TEMPLATE_FIXTURES points at another fixture directory (e.g. the extended set made by
// scripts/make_template_fixtures.py --all-llama-cpp --out DIR).
std::string fixture_dir() {
    const char* env = std::getenv("EMBER_TEMPLATE_FIXTURES");
    return env && *env ? env : std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/templates";
}

ojson load(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT_TRUE(f.good()) << path;
    std::stringstream ss;
    ss << f.rdbuf();
    return ojson::parse(ss.str());
}

// "2025-03-14T15:09:26" → a normalized std::tm (weekday and day of year filled in).
std::tm parse_now(const std::string& iso) {
    std::tm t{};
    EXPECT_EQ(std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min,
                          &t.tm_sec),
              6);
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    std::time_t secs = timegm(&t);
    std::tm out{};
    gmtime_r(&secs, &out);
    return out;
}

// Where transformers raised raise_exception's TemplateError, the message must come through.
void expect_error(const Expected<std::string>& r, const ojson& err) {
    EXPECT_FALSE(r.is_ok()) << "expected " << err.dump() << ", rendered:\n" << r.value();
    if (r.is_ok()) return;
    if (err["type"] == "TemplateError") {
        EXPECT_NE(r.message().find(err["message"].get<std::string>()), std::string::npos)
            << r.message() << "\n vs " << err.dump();
    }
}

TEST(ChatTemplateFixtures, RealTemplatesMatchTransformers) {
    ojson scen = load(fixture_dir() + "/scenarios.json");
    ChatTemplateOptions opt;
    opt.now = parse_now(scen["now"]);
    int files = 0, rendered = 0, errors = 0;
    for (const auto& entry : std::filesystem::directory_iterator(fixture_dir())) {
        std::string name = entry.path().filename().string();
        if (name.rfind("real_", 0) != 0) continue;
        ++files;
        ojson fx = load(entry.path().string());
        SCOPED_TRACE(name);
        auto t = ChatTemplate::parse(fx["template"].get<std::string>());
        ASSERT_TRUE(t.is_ok()) << t.message();
        for (const ojson& c : fx["cases"]) {
            const ojson& s = scen["scenarios"][c["scenario"].get<std::string>()];
            SCOPED_TRACE(c["scenario"].get<std::string>());
            auto direct = t->render(s["context"], opt);
            auto via_api = apply_chat_template(fx["template"].get<std::string>(), s["messages"],
                                               s["add_generation_prompt"].get<bool>(), s["extra"], opt);
            if (c.contains("expected")) {
                EXPECT_TRUE(direct.is_ok()) << direct.message();
                EXPECT_TRUE(via_api.is_ok()) << via_api.message();
                if (!direct.is_ok() || !via_api.is_ok()) continue;
                EXPECT_EQ(direct.value(), c["expected"].get<std::string>());
                EXPECT_EQ(via_api.value(), c["expected"].get<std::string>());
                ++rendered;
            } else {
                expect_error(direct, c["error"]);
                expect_error(via_api, c["error"]);
                ++errors;
            }
        }
    }
    EXPECT_GE(files, 27);
    std::printf("real templates: %d files, %d outputs identical, %d errors reproduced\n", files, rendered, errors);
}

TEST(ChatTemplateFixtures, ContextIsBuiltLikeTransformers) {
    ojson scen = load(fixture_dir() + "/scenarios.json");
    for (const auto& [name, s] : scen["scenarios"].items()) {
        SCOPED_TRACE(name);
        auto ctx = chat_template_context(s["messages"], s["add_generation_prompt"].get<bool>(), s["extra"]);
        ASSERT_TRUE(ctx.is_ok()) << ctx.message();
        EXPECT_EQ(ctx.value(), s["context"]) << ctx.value().dump() << "\n vs \n" << s["context"].dump();
    }
}

TEST(ChatTemplateFixtures, StressTemplatesMatchJinja) {
    ojson fx = load(fixture_dir() + "/stress.json");
    ChatTemplateOptions opt;
    opt.now = parse_now(fx["now"]);
    int ok = 0, errors = 0;
    for (const ojson& c : fx["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        auto t = ChatTemplate::parse(c["template"].get<std::string>());
        Expected<std::string> r = t.is_ok() ? t->render(c["context"], opt) : Expected<std::string>(t.status());
        if (c.contains("expected")) {
            EXPECT_TRUE(r.is_ok()) << r.message();
            if (!r.is_ok()) continue;
            EXPECT_EQ(r.value(), c["expected"].get<std::string>());
            ++ok;
        } else {
            expect_error(r, c["error"]);
            ++errors;
        }
    }
    std::printf("stress templates: %d outputs identical, %d errors reproduced\n", ok, errors);
}

// Template and special-token discovery in model directories, against what AutoTokenizer makes of them.
TEST(ChatTemplateFixtures, ModelDirectoriesLikeAutoTokenizer) {
    ojson fx = load(fixture_dir() + "/model_dirs.json");
    for (const auto& [name, layout] : fx["layouts"].items()) {
        SCOPED_TRACE(name);
        TempDir dir("ember_chat_template");
        for (const auto& [rel, content] : layout["files"].items()) {
            std::filesystem::path p = dir.path() / rel;
            std::filesystem::create_directories(p.parent_path());
            std::ofstream(p, std::ios::binary) << content.get<std::string>();
        }
        auto m = load_model_chat_templates(dir.path().string());
        ASSERT_TRUE(m.is_ok()) << m.message();
        EXPECT_EQ(m->special_tokens, layout["expected"]["special_tokens"]);
        for (const auto& [key, with_tools] : {std::pair<const char*, bool>{"default", false}, {"with_tools", true}}) {
            const ojson& want = layout["expected"][key];
            auto got = m->select(with_tools);
            if (want.is_string()) {
                ASSERT_TRUE(got.is_ok()) << got.message();
                EXPECT_EQ(got.value(), want.get<std::string>());
            } else {
                EXPECT_FALSE(got.is_ok());
            }
        }
    }
    TempDir empty("ember_chat_template");
    EXPECT_FALSE(load_model_chat_templates(empty.path().string()).is_ok());
    std::ofstream(empty.path() / "tokenizer_config.json") << "{not json";
    EXPECT_FALSE(load_model_chat_templates(empty.path().string()).is_ok());
}

}  // namespace
}  // namespace ember
