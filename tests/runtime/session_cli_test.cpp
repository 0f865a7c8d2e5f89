// `ember generate --save-session F` / `--load-session F` (the CLI form of Session::save / load): generating
// 5 tokens, saving, then continuing 9 from the file prints the tokens of one uninterrupted 14-token run (sampled,
// seeded); a bad file is a non-zero exit with a message.
#include <gtest/gtest.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/temp_dir.h"

namespace ember {
namespace {

// Runs `ember generate ARGS`; returns stdout (the ids line) and sets rc; stderr goes to err_path.
std::string generate(const std::string& args, const std::string& err_path, int& rc) {
    const std::string cmd = std::string(std::getenv("EMBER_BIN")) + " generate -m " + EMBER_SOURCE_DIR +
                            "/tests/fixtures/qwen35/mm_tied --threads 1 --temp 1.2 --top-k 40 --seed 9 " + args +
                            " 2>" + err_path;
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    rc = p ? pclose(p) : -1;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

TEST(SessionCli, SaveThenLoadContinuesTheRun) {
    if (!std::getenv("EMBER_BIN")) GTEST_SKIP() << "EMBER_BIN not set";
    TempDir dir;
    const std::string d = dir.path().string(), f = d + "/run.session", err = d + "/err.txt";
    int rc = 0;
    const std::string whole = generate("--tokens 3,1,4,1,5 -n 14", err, rc);
    ASSERT_EQ(rc, 0);
    const std::string head = generate("--tokens 3,1,4,1,5 -n 5 --save-session " + f, err, rc);
    ASSERT_EQ(rc, 0);
    const std::string tail = generate("-n 9 --load-session " + f, err, rc);
    ASSERT_EQ(rc, 0);
    EXPECT_EQ(head + "," + tail, whole);
    EXPECT_EQ(std::count(whole.begin(), whole.end(), ','), 13);
    // A prompt after --load-session is appended; --chat cannot be; a damaged file is refused.
    generate("--tokens 7,8 -n 3 --load-session " + f, err, rc);
    EXPECT_EQ(rc, 0);
    generate("-p hi --chat -n 3 --load-session " + f, err, rc);
    EXPECT_NE(rc, 0);
    FILE* w = std::fopen(f.c_str(), "r+b");
    ASSERT_TRUE(w);
    std::fseek(w, 40, SEEK_SET);
    std::fputc(0x5a, w);
    std::fclose(w);
    generate("-n 3 --load-session " + f, err, rc);
    EXPECT_NE(rc, 0);
}

}  // namespace
}  // namespace ember
