// Model vs oracle through the CLI contract (shared/design/verification.md):
//   ember logits -m MODEL_DIR --tokens 1,2,3 --out FILE [--decode-from K]
// writes raw little-endian float32 [n_tokens, vocab]. For every case in tests/fixtures/qwen35/ (made by
// scripts/make_fixtures.py) the output must match the stored oracle logits within the tolerance stored in
// the case's meta.json, for one prefill over all tokens and for prefill(K) + token-by-token decode.
//
// Environment: EMBER_BIN = path of the ember executable (required), EMBER_SOURCE_DIR = repo root (or the
// compile definition of the same name). A missing binary, directory or file is a failure, never a skip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "oracle_util.h"

namespace {

using ember_test::fs::path;
using nlohmann::json;
namespace et = ember_test;

// Every case directory that must exist (AllFixtureDirsAreTested guards against unlisted additions).
const std::vector<std::string> kCases = {"mm_tied", "flat_untied_gqa3", "q4_affine", "mlx_lm_convert"};

path fixtures_root() { return path(et::source_dir()) / "tests" / "fixtures" / "qwen35"; }

struct Check {
  std::string file;    // oracle file in the case dir, e.g. ref_logits.bin
  std::string metric;  // "rel_l2" (||ours-ref||/||ref|| per row) or "kl" (KL(p_ref||p_ours) per row)
  double max = 0;
  bool argmax_equal = true;
  std::vector<float> logits;
};

struct Case {
  path dir;
  std::vector<int64_t> tokens;
  size_t vocab = 0;
  std::vector<int> decode_from;
  std::vector<Check> checks;
};

// Loads a case; any problem is a test failure (reported via the returned message).
std::optional<std::string> load_case(const std::string& name, Case& c) {
  c.dir = fixtures_root() / name;
  if (et::source_dir().empty()) return "EMBER_SOURCE_DIR is not set";
  if (!et::fs::is_directory(c.dir)) return "missing fixture directory " + c.dir.string();
  for (const char* f : {"config.json", "prompt.json", "meta.json"})
    if (!et::fs::exists(c.dir / f)) return "missing " + (c.dir / f).string();
  try {
    json meta = json::parse(et::read_text(c.dir / "meta.json"));
    json prompt = json::parse(et::read_text(c.dir / "prompt.json"));
    c.tokens = prompt.at("tokens").get<std::vector<int64_t>>();
    c.vocab = meta.at("vocab_size").get<size_t>();
    c.decode_from = meta.at("decode_from").get<std::vector<int>>();
    if (c.tokens.empty() || c.tokens.size() != meta.at("n_tokens").get<size_t>())
      return "prompt.json token count does not match meta.json n_tokens";
    if (c.decode_from.empty()) return "meta.json decode_from is empty";
    if (meta.at("tolerance").empty()) return "meta.json lists no oracle files";
    for (auto& [file, tol] : meta.at("tolerance").items()) {
      Check ch;
      ch.file = file;
      ch.metric = tol.at("metric").get<std::string>();
      ch.max = tol.at("max").get<double>();
      ch.argmax_equal = tol.value("argmax_equal", true);
      if (ch.metric != "rel_l2" && ch.metric != "kl") return "unknown metric " + ch.metric + " for " + file;
      if (!et::fs::exists(c.dir / file)) return "missing oracle file " + (c.dir / file).string();
      ch.logits = et::read_f32(c.dir / file);
      if (ch.logits.size() != c.tokens.size() * c.vocab)
        return file + " has " + std::to_string(ch.logits.size()) + " floats, expected n_tokens*vocab = " +
               std::to_string(c.tokens.size() * c.vocab);
      c.checks.push_back(std::move(ch));
    }
  } catch (const std::exception& e) {
    return "bad fixture " + name + ": " + e.what();
  }
  return std::nullopt;
}

std::string tokens_csv(const std::vector<int64_t>& t) {
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) s += (i ? "," : "") + std::to_string(t[i]);
  return s;
}

// Path of the ember executable, or a failure message.
std::optional<std::string> ember_bin(std::string& bin) {
  bin = et::env_or_empty("EMBER_BIN");
  if (bin.empty()) return "EMBER_BIN is not set (path of the ember executable)";
  if (!et::fs::exists(bin)) return "EMBER_BIN does not exist: " + bin;
  return std::nullopt;
}

std::string logits_cmd(const std::string& bin, const path& model, const std::string& tokens, const path& out,
                       std::optional<int> decode_from, const std::string& extra = "") {
  std::string cmd = et::shell_quote(bin) + " logits -m " + et::shell_quote(model.string()) + " --tokens " +
                    tokens + " --out " + et::shell_quote(out.string());
  if (decode_from) cmd += " --decode-from " + std::to_string(*decode_from);
  return cmd + extra;
}

// Runs the CLI once and compares every row (with last_only: the last row) with every oracle file of the case.
void run_and_compare(const Case& c, std::optional<int> decode_from, const std::string& extra = "",
                     bool last_only = false) {
  std::string bin;
  if (auto err = ember_bin(bin)) FAIL() << *err;
  et::TempDir tmp;
  path out = tmp.path() / "logits.bin";
  std::string cmd = logits_cmd(bin, c.dir, tokens_csv(c.tokens), out, decode_from, extra);
  et::CmdResult r = et::run_command(cmd, tmp.path() / "log.txt");
  ASSERT_EQ(r.exit_code, 0) << "command failed: " << cmd << "\n" << r.output;
  ASSERT_TRUE(et::fs::exists(out)) << "no output file written by: " << cmd << "\n" << r.output;
  std::vector<float> ours = et::read_f32(out);
  const size_t n = last_only ? 1 : c.tokens.size();
  ASSERT_EQ(ours.size(), n * c.vocab) << "output must be float32 [n_tokens=" << n << ", vocab=" << c.vocab << "]";
  size_t non_finite = 0;
  for (float v : ours) non_finite += !std::isfinite(v);
  EXPECT_EQ(non_finite, 0u) << "non-finite logits";
  for (const Check& ch : c.checks) {
    SCOPED_TRACE("oracle " + ch.file + " (" + ch.metric + " <= " + std::to_string(ch.max) + ")");
    const std::vector<float> want =
        last_only ? std::vector<float>(ch.logits.end() - std::ptrdiff_t(c.vocab), ch.logits.end()) : ch.logits;
    et::RowReport rep = et::compare_rows(ours, want, n, c.vocab, ch.metric, ch.max);
    EXPECT_EQ(rep.rows_over, 0u) << rep.describe();
    if (ch.argmax_equal) {
      EXPECT_EQ(rep.argmax_mismatch, 0u) << rep.describe();
    }
    // Always visible in the log: the achieved error, to see how close to the bar a passing run is.
    std::printf("  [%s%s] %-15s %s worst %.3g (row %zu), argmax mismatches %zu\n", c.dir.filename().c_str(),
                decode_from ? (" --decode-from " + std::to_string(*decode_from)).c_str() : "", ch.file.c_str(),
                ch.metric.c_str(), rep.worst, rep.worst_row, rep.argmax_mismatch);
  }
}

class LogitsOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(LogitsOracle, PrefillMatchesOracle) {
  Case c;
  if (auto err = load_case(GetParam(), c)) FAIL() << *err;
  run_and_compare(c, std::nullopt);
}

TEST_P(LogitsOracle, PrefillThenDecodeMatchesOracle) {
  Case c;
  if (auto err = load_case(GetParam(), c)) FAIL() << *err;
  for (int k : c.decode_from) {
    ASSERT_GE(k, 1);
    ASSERT_LT(static_cast<size_t>(k), c.tokens.size());
    SCOPED_TRACE("--decode-from " + std::to_string(k));
    run_and_compare(c, k);
  }
}

// A prompt continuing an earlier prefill (--chunks), and only the last row (--last-only): same oracle bars.
TEST_P(LogitsOracle, ChunkedPrefillAndLastRowMatchOracle) {
  Case c;
  if (auto err = load_case(GetParam(), c)) FAIL() << *err;
  const size_t n = c.tokens.size(), a = n / 3, b = n - a - 1;
  std::string chunks = " --chunks ";
  chunks += std::to_string(a);
  chunks += ",";
  chunks += std::to_string(b);
  chunks += ",1";
  run_and_compare(c, std::nullopt, chunks);
  run_and_compare(c, std::nullopt, chunks + " --last-only", /*last_only=*/true);
  run_and_compare(c, std::nullopt, " --last-only", /*last_only=*/true);
}

INSTANTIATE_TEST_SUITE_P(Qwen35, LogitsOracle, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// A new fixture directory must be added to kCases, not silently ignored.
TEST(LogitsOracleFixtures, AllFixtureDirsAreTested) {
  ASSERT_FALSE(et::source_dir().empty()) << "EMBER_SOURCE_DIR is not set";
  ASSERT_TRUE(et::fs::is_directory(fixtures_root())) << "missing " << fixtures_root();
  std::set<std::string> listed(kCases.begin(), kCases.end());
  for (const auto& e : et::fs::directory_iterator(fixtures_root()))
    if (e.is_directory()) {
      EXPECT_TRUE(listed.count(e.path().filename().string())) << "untested " << e.path();
    }
}

// CLI contract: any error gives a non-zero exit status.
TEST(LogitsCliContract, MissingModelFails) {
  std::string bin;
  if (auto err = ember_bin(bin)) FAIL() << *err;
  et::TempDir tmp;
  path out = tmp.path() / "logits.bin";
  et::CmdResult r =
      et::run_command(logits_cmd(bin, tmp.path() / "no_such_model", "1,2,3", out, std::nullopt), tmp.path() / "log");
  EXPECT_NE(r.exit_code, 0) << "ember logits on a missing model must fail\n" << r.output;
}

// --chunks must add up to the tokens; --prefill-precision bf16 and a bf16 KV cache are CUDA modes (refused on the
// CPU, never ignored); unknown precisions / cache types are refused.
TEST(LogitsCliContract, BadChunksAndCpuBf16PrefillFail) {
  Case c;
  if (auto err = load_case("flat_untied_gqa3", c)) FAIL() << *err;
  std::string bin;
  if (auto err = ember_bin(bin)) FAIL() << *err;
  et::TempDir tmp;
  const std::string toks = tokens_csv(c.tokens);
  std::string zero_chunk = " --chunks 0,";  // (+= only: GCC 12 -Wrestrict false positive on "lit" + string)
  zero_chunk += std::to_string(c.tokens.size());
  for (const std::string& extra : {std::string(" --chunks 1,1"), zero_chunk,
                                   std::string(" --device cpu --prefill-precision bf16"),
                                   std::string(" --prefill-precision fp16"),
                                   std::string(" --device cpu --kv-cache-dtype bf16"),
                                   std::string(" --kv-cache-dtype f16")}) {
    et::CmdResult r =
        et::run_command(logits_cmd(bin, c.dir, toks, tmp.path() / "o.bin", std::nullopt, extra), tmp.path() / "log");
    EXPECT_NE(r.exit_code, 0) << "ember logits" << extra << " must fail\n" << r.output;
    if (extra.find("kv-cache-dtype") != std::string::npos) {
      EXPECT_NE(r.output.find("--kv-cache-dtype"), std::string::npos) << r.output;
    }
  }
  // The CPU's own cache type is accepted by name.
  et::CmdResult ok = et::run_command(
      logits_cmd(bin, c.dir, toks, tmp.path() / "o.bin", std::nullopt, " --device cpu --kv-cache-dtype f32"),
      tmp.path() / "log");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST(LogitsCliContract, OutOfRangeTokenFails) {
  Case c;
  if (auto err = load_case("flat_untied_gqa3", c)) FAIL() << *err;
  std::string bin;
  if (auto err = ember_bin(bin)) FAIL() << *err;
  et::TempDir tmp;
  std::string toks = "1," + std::to_string(c.vocab) + ",2";  // id == vocab_size is out of range
  et::CmdResult r =
      et::run_command(logits_cmd(bin, c.dir, toks, tmp.path() / "o.bin", std::nullopt), tmp.path() / "log");
  EXPECT_NE(r.exit_code, 0) << "ember logits with token id " << c.vocab << " >= vocab must fail\n" << r.output;
}

}  // namespace
