// `ember convert` CLI contract: usage errors and bad inputs exit non-zero with a clear message; a conversion of
// the mm_tied fixture writes a checkpoint that `ember logits` runs to exactly the logits of the real
// mlx_lm.convert output of the same fixture; progress goes to stderr as ~10% lines when stderr is not a TTY.
// Environment: EMBER_BIN = the ember executable, EMBER_SOURCE_DIR = repo root (set by ctest).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/temp_dir.h"
#include <iterator>
#include <random>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string env(const char* k) {
    const char* v = std::getenv(k);
    return v ? v : "";
}

fs::path fixture(const char* name) {
    std::string src = env("EMBER_SOURCE_DIR");
#ifdef EMBER_SOURCE_DIR
    if (src.empty()) src = EMBER_SOURCE_DIR;
#endif
    return fs::path(src) / "tests/fixtures/qwen35" / name;
}

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

using Tmp = ember::TempDir;

struct CliRun {
    int code = -1;
    std::string out, err;
};

// Runs `ember <args>` with stdout and stderr captured separately (stderr is a file: not a TTY).
CliRun ember(const Tmp& t, const std::string& args) {
    std::string bin = env("EMBER_BIN");
    CliRun r;
    if (bin.empty() || !fs::exists(bin)) {
        ADD_FAILURE() << "EMBER_BIN is not set or missing (path of the ember executable): '" << bin << "'";
        return r;
    }
    fs::path o = t.p / "stdout.txt", e = t.p / "stderr.txt";
    int st = std::system((quote(bin) + " " + args + " > " + quote(o) + " 2> " + quote(e)).c_str());
    if (st != -1 && WIFEXITED(st)) r.code = WEXITSTATUS(st);
    r.out = slurp(o);
    r.err = slurp(e);
    return r;
}

void expect_fails(const Tmp& t, const std::string& args, const std::string& needle) {
    CliRun r = ember(t, "convert " + args);
    EXPECT_NE(r.code, 0) << "ember convert " << args << " must fail";
    EXPECT_NE(r.err.find(needle), std::string::npos) << "ember convert " << args << "\nstderr: " << r.err;
}

TEST(ConvertCli, UsageAndErrors) {
    Tmp t;
    CliRun h = ember(t, "convert --help");
    EXPECT_EQ(h.code, 0);
    EXPECT_NE(h.out.find("--group-size"), std::string::npos) << h.out;
    const std::string in = quote(fixture("mm_tied").string()), out = quote((t.p / "out").string());
    expect_fails(t, "--out " + out, "--in and --out are required");
    expect_fails(t, "--in " + in + " --out " + out + " --bits 7", "unsupported quantization: bits 7");
    expect_fails(t, "--in " + in + " --out " + out + " --group-size 48", "group size 48");
    expect_fails(t, "--in " + in + " --out " + out + " --bits four", "not an integer");
    expect_fails(t, "--in " + in + " --out " + out + " --dtype q8", "--dtype");
    expect_fails(t, "--in " + in + " --out " + out + " --max-shard-size lots", "--max-shard-size");
    expect_fails(t, "--in " + in + " --out " + out + " --frobnicate", "unknown argument");
    expect_fails(t, "--in " + quote((t.p / "missing").string()) + " --out " + out, "does not exist");
    expect_fails(t, "--in " + quote(fixture("q4_affine").string()) + " --out " + out, "already quantized");
    EXPECT_FALSE(fs::exists(t.p / "out")) << "failed runs must not leave an output directory";
}

TEST(ConvertCli, ConvertsAndRunsLikeMlxLmOutput) {
    Tmp t;
    const fs::path out = t.p / "out";
    CliRun r = ember(t, "convert --in " + quote(fixture("mm_tied").string()) + " --out " + quote(out.string()));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("wrote"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("100%"), std::string::npos) << "progress lines expected on a non-TTY stderr: " << r.err;
    EXPECT_EQ(r.err.find('\r'), std::string::npos) << "no bar redraws when stderr is not a terminal";
    EXPECT_TRUE(fs::exists(out / "model.safetensors"));
    EXPECT_TRUE(fs::exists(out / "config.json"));

    // Second run into the same (non-empty) directory: refused, then allowed with --force.
    expect_fails(t, "--in " + quote(fixture("mm_tied").string()) + " --out " + quote(out.string()), "not empty");
    CliRun f =
        ember(t, "convert -q --force --in " + quote(fixture("mm_tied").string()) + " --out " + quote(out.string()));
    ASSERT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.err, "") << "--quiet prints no progress";

    // ember logits on our conversion == ember logits on mlx_lm.convert's (the tensors are byte-identical).
    const std::string toks = "3,17,99,250,511,0,42";
    CliRun a = ember(t, "logits -m " + quote(out.string()) + " --tokens " + toks + " --out " +
                            quote((t.p / "a.bin").string()));
    CliRun b = ember(t, "logits -m " + quote(fixture("mlx_lm_convert").string()) + " --tokens " + toks + " --out " +
                         quote((t.p / "b.bin").string()));
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    std::string la = slurp(t.p / "a.bin"), lb = slurp(t.p / "b.bin");
    EXPECT_FALSE(la.empty());
    EXPECT_TRUE(la == lb) << "logits differ from the mlx_lm.convert checkpoint's";
}

TEST(ConvertCli, ShardsOnRequest) {
    Tmp t;
    const fs::path out = t.p / "out";
    CliRun r = ember(t, "convert -q --in " + quote(fixture("flat_untied_gqa3").string()) + " --out " +
                         quote(out.string()) + " --max-shard-size 100KiB --bits 8 --group-size 32");
    ASSERT_EQ(r.code, 0) << r.err;
    int shards = 0;
    for (const auto& e : fs::directory_iterator(out)) shards += e.path().extension() == ".safetensors";
    EXPECT_GT(shards, 2);
    EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
    // The converted flat checkpoint loads and runs.
    CliRun l =
        ember(t, "logits -m " + quote(out.string()) + " --tokens 1,2,3 --out " + quote((t.p / "l.bin").string()));
    EXPECT_EQ(l.code, 0) << l.err;
}

}  // namespace
