// CLI contract of `ember bench` on the CPU with a committed fixture model: `-p` takes a list (one ppN row per
// entry, in order; 0 entries skipped), and a list entry that is not a token count is refused with a non-zero exit.
// Environment: EMBER_BIN = path of the ember executable.
#include <gtest/gtest.h>

#include <string>

#include "oracle_util.h"

namespace {

namespace et = ember_test;

std::string bench_cmd(const std::string& bin, const std::string& p) {
  const std::string model = (et::fs::path(et::source_dir()) / "tests/fixtures/qwen35/flat_untied_gqa3").string();
  return et::shell_quote(bin) + " bench -m " + et::shell_quote(model) + " --device cpu -n 0 -r 1 -p " + p;
}

TEST(BenchCliContract, PromptListGivesOneRowPerLength) {
  const std::string bin = et::env_or_empty("EMBER_BIN");
  if (bin.empty()) GTEST_SKIP() << "EMBER_BIN not set";
  et::TempDir tmp;
  et::CmdResult r = et::run_command(bench_cmd(bin, "16,0,40"), tmp.path() / "log");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t a = r.output.find("| pp16 |"), b = r.output.find("| pp40 |");
  EXPECT_NE(a, std::string::npos) << r.output;
  EXPECT_NE(b, std::string::npos) << r.output;
  EXPECT_LT(a, b) << "rows in the order given\n" << r.output;
  EXPECT_EQ(r.output.find("| pp0 |"), std::string::npos) << "0 = skip\n" << r.output;
}

TEST(BenchCliContract, BadPromptListFails) {
  const std::string bin = et::env_or_empty("EMBER_BIN");
  if (bin.empty()) GTEST_SKIP() << "EMBER_BIN not set";
  et::TempDir tmp;
  for (const char* p : {"16,abc", "-5", "16,2x", "''"}) {
    et::CmdResult r = et::run_command(bench_cmd(bin, p), tmp.path() / "log");
    EXPECT_NE(r.exit_code, 0) << "ember bench -p " << p << " must fail\n" << r.output;
  }
}

}  // namespace
