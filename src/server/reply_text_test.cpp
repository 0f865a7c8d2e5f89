// Stop strings across token boundaries and the reasoning split, against whole-string oracles on random texts cut
// into random pieces.
#include <gtest/gtest.h>

#include <random>

#include "server/reply_text.h"

namespace ember::server {
namespace {

// Random cuts of `text` into pieces (some empty).
std::vector<std::string> cuts(const std::string& text, std::mt19937& rng) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < text.size()) {
        const size_t k = rng() % 5;
        out.push_back(text.substr(i, k));
        i += k;
    }
    return out;
}

TEST(StopMatcher, EqualsTheEarliestEndingMatchInTheWholeText) {
    std::mt19937 rng(7);
    const std::string alpha = "ab\nc";
    int matched = 0;
    for (int it = 0; it < 5000; ++it) {
        std::string text;
        for (int k = int(rng() % 40); k > 0; --k) text += alpha[rng() % alpha.size()];
        std::vector<std::string> stops;
        for (int k = 1 + int(rng() % 3); k > 0; --k) {
            std::string s;
            for (int j = 1 + int(rng() % 4); j > 0; --j) s += alpha[rng() % alpha.size()];
            stops.push_back(s);
        }
        // The reply ends before the stop string whose first occurrence ends first (ties: the longer one).
        size_t first = std::string::npos, end = std::string::npos;
        for (const auto& s : stops) {
            const size_t at = text.find(s);
            if (at != std::string::npos && (at + s.size() < end || (at + s.size() == end && at < first)))
                first = at, end = at + s.size();
        }
        const std::string want = text.substr(0, first);
        StopMatcher m(stops);
        std::string got;
        for (const auto& p : cuts(text, rng)) {
            const std::string out = m.push(p);
            got += out;
            // Nothing emitted is ever taken back: what was emitted is a prefix of the answer.
            ASSERT_EQ(want.compare(0, got.size(), got), 0) << text;
        }
        got += m.flush();
        ASSERT_EQ(got, want) << "text '" << text << "'";
        EXPECT_EQ(m.stopped(), first != std::string::npos);
        matched += m.stopped();
    }
    EXPECT_GT(matched, 1000);
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStartAStop) {
    StopMatcher m({"</end>"});
    EXPECT_EQ(m.push("hello </"), "hello ");
    EXPECT_EQ(m.push("en"), "");
    EXPECT_EQ(m.push("x"), "</enx");
    EXPECT_EQ(m.push("a</end>b"), "a");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.push("more"), "");
}

// Oracle: split the whole reply at once.
void split_whole(std::string s, bool start_in_reasoning, std::string& reasoning, std::string& content) {
    auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
    if (!start_in_reasoning) {
        size_t i = 0;
        while (i < s.size() && ws(s[i])) ++i;
        if (s.compare(i, 7, "<think>") != 0) return void(content = s);
        s = s.substr(i + 7);
    }
    const size_t e = s.find("</think>");
    if (e == std::string::npos) return void(reasoning = s);
    reasoning = s.substr(0, e);
    size_t j = e + 8;
    while (j < s.size() && ws(s[j])) ++j;
    content = s.substr(j);
}

TEST(ReasoningSplitter, EqualsTheWholeTextSplit) {
    std::mt19937 rng(11);
    const std::vector<std::string> words = {"<think>", "</think>", "a", " ", "\n", "<", "</", "think", ">", "b"};
    for (int it = 0; it < 5000; ++it) {
        std::string text;
        for (int k = int(rng() % 12); k > 0; --k) text += words[rng() % words.size()];
        const bool start = rng() % 2;
        std::string want_r, want_c;
        split_whole(text, start, want_r, want_c);
        ReasoningSplitter s(true, start);
        ReplyDelta d;
        for (const auto& p : cuts(text, rng)) s.push(p, d);
        s.flush(d);
        ASSERT_EQ(d.reasoning, want_r) << "text '" << text << "' start " << start;
        ASSERT_EQ(d.content, want_c) << "text '" << text << "' start " << start;
    }
}

TEST(ReasoningSplitter, DisabledPassesEverythingAsContent) {
    ReasoningSplitter s(false, true);
    ReplyDelta d;
    s.push("<think>x</think>y", d);
    s.flush(d);
    EXPECT_EQ(d.content, "<think>x</think>y");
    EXPECT_EQ(d.reasoning, "");
}

TEST(ReasoningSplitter, PromptThatOpensTheBlock) {
    EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
    EXPECT_FALSE(prompt_opens_reasoning(""));
}

}  // namespace
}  // namespace ember::server
