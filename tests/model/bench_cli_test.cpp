// CLI contract of `ember bench` on the CPU with a committed fixture model: `-p` takes a list (one ppN row per
// entry, in order; 0 entries skipped), and a list entry that is not a token count is refused with a non-zero exit;
// `--prefix-ttft L` gives a row whose warm prompt restored every whole 256-token block of L from the prefix cache,
// and refuses lengths that are not one (≤ 0, shorter than a block, beyond the context) or a combination with --batch.
// Environment: EMBER_BIN = path of the ember executable.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "oracle_util.h"

namespace {

namespace et = ember_test;

std::string bench_cmd(const std::string& bin, const std::string& p) {
  const std::string model = (et::fs::path(et::source_dir()) / "tests/fixtures/qwen35/flat_untied_gqa3").string();
  return et::shell_quote(bin) + " bench -m " + et::shell_quote(model) + " --device cpu -n 0 -r 1 -p " + p;
}

std::string prefix_cmd(const std::string& bin, const std::string& args) {
  const std::string model = (et::fs::path(et::source_dir()) / "tests/fixtures/qwen35/flat_untied_gqa3").string();
  return et::shell_quote(bin) + " bench -m " + et::shell_quote(model) + " --device cpu -r 2 " + args;
}

// The cells of the markdown row that contains `key` (empty if none), without the outer bars.
std::vector<std::string> row_cells(const std::string& out, const std::string& key) {
  const size_t at = out.find(key);
  if (at == std::string::npos) return {};
  const size_t b = out.rfind('\n', at) + 1, e = out.find('\n', at);
  std::stringstream line(out.substr(b, e - b));
  std::vector<std::string> cells;
  for (std::string c; std::getline(line, c, '|');) {
    const size_t x = c.find_first_not_of(' '), y = c.find_last_not_of(' ');
    cells.push_back(x == std::string::npos ? "" : c.substr(x, y - x + 1));
  }
  if (!cells.empty()) cells.erase(cells.begin());  // before the first bar
  return cells;
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

TEST(BenchCliContract, PrefixTtftRestoresWholeBlocks) {
  const std::string bin = et::env_or_empty("EMBER_BIN");
  if (bin.empty()) GTEST_SKIP() << "EMBER_BIN not set";
  et::TempDir tmp;
  et::CmdResult r = et::run_command(prefix_cmd(bin, "--prefix-ttft 600,1000"), tmp.path() / "log");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| cold TTFT ms | warm TTFT ms | warm/cold | cached tokens |"), std::string::npos) << r.output;
  // The cache restores the deepest 256-token checkpoint that leaves a token to compute; the cold and warm prompts
  // share L tokens, so that is every whole block of L: 2 of 600 (+16), 3 of 1000 (+16).
  for (const auto& [test, cached] : {std::pair<std::string, std::string>{"prefix-ttft 600+16", "512"},
                                     std::pair<std::string, std::string>{"prefix-ttft 1000+16", "768"}}) {
    const std::vector<std::string> c = row_cells(r.output, "| " + test + " |");
    ASSERT_EQ(c.size(), 13u) << test << "\n" << r.output;
    EXPECT_EQ(c[2], "cpu") << r.output;
    EXPECT_EQ(c[7], cached) << "cached tokens of " << test << "\n" << r.output;
    EXPECT_NE(c[4].find(" ± "), std::string::npos) << "warm ms mean ± sd\n" << r.output;
    EXPECT_GT(std::stod(c[6]), 0.0) << "warm/cold\n" << r.output;
    EXPECT_GT(std::stod(c[9]), 0.0) << "the cold prompt's checkpoints took time\n" << r.output;
    EXPECT_GT(std::stod(c[10]), 0.0) << "the warm prompt's restore took time\n" << r.output;
    EXPECT_GT(std::stod(c[12]), 0.0) << "warm/no cache\n" << r.output;
  }
}

TEST(BenchCliContract, BadPrefixTtftFails) {
  const std::string bin = et::env_or_empty("EMBER_BIN");
  if (bin.empty()) GTEST_SKIP() << "EMBER_BIN not set";
  et::TempDir tmp;
  const std::pair<const char*, const char*> cases[] = {
      {"--prefix-ttft 0", "'0' is not a prefix length"},
      {"--prefix-ttft -5", "'-5' is not a prefix length"},
      {"--prefix-ttft 600,100", "'100' is not a prefix length"},  // shorter than one 256-token checkpoint
      {"--prefix-ttft 4x", "'4x' is not a prefix length"},
      {"--prefix-ttft 5000", "do not fit the context of 4096 tokens"},  // the fixture's max_position_embeddings
      {"--prefix-ttft 600 --batch 1", "--prefix-ttft and --batch are separate benchmarks"},
      {"--prefix-ttft 600 --prefix-cache-mib 0", "--prefix-cache-mib must be in"},
  };
  for (const auto& [args, msg] : cases) {
    et::CmdResult r = et::run_command(prefix_cmd(bin, args), tmp.path() / "log");
    EXPECT_NE(r.exit_code, 0) << "ember bench " << args << " must fail\n" << r.output;
    EXPECT_NE(r.output.find(msg), std::string::npos) << args << ": expected '" << msg << "'\n" << r.output;
  }
}

}  // namespace
