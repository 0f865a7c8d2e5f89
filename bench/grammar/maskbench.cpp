// maskbench: JSONSchemaBench / MaskBench coverage and timing of the grammar engine, single thread.
//   maskbench --vocab FILE.tiktoken --n-vocab N --eos a,b --data DIR --tokens FILE.jsonl [--limit N]
//             [--oneof-as-anyof] [--json OUT] [--only SUBSTR] [--cpu-clock] [--steps OUT.tsv]
//             [--compile-only [--repeat N]]
// A schema is covered when it compiles, every valid instance is accepted token by token (each token allowed by
// the mask at its step, the grammar complete at the end) and every invalid instance is rejected (a token not
// allowed, or incomplete at the end). Times: compile = schema text → matcher ready (TTFM as MaskBench counts it);
// mask = fill_mask + accept of one token (MaskBench's compute_mask + commit_token). --cpu-clock: times are the
// thread's CPU time (CLOCK_THREAD_CPUTIME_ID) instead of wall time, so that other processes on a shared machine
// (preemption) do not land in the tail; the wall-clock figures are the default. --steps: one line per token
// (file, test, step, µs, mask cache miss, inner sets computed in that step) to find where the tail comes from.
// --compile-only: compile every schema, run no instances (compile profiles); --repeat N: compile each N times
// and count the fastest.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>
#include <time.h>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"

using namespace ember;
using namespace ember::grammar;
using clk = std::chrono::steady_clock;

namespace {

double us_since(clk::time_point t) { return std::chrono::duration<double, std::micro>(clk::now() - t).count(); }

bool g_cpu_clock = false;
// Microseconds on the timing clock: wall (steady_clock) or this thread's CPU time.
double now_us() {
    if (!g_cpu_clock) return std::chrono::duration<double, std::micro>(clk::now().time_since_epoch()).count();
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
}

std::string dataset_of(const std::string& file) {
    const size_t p = file.find("---");
    if (p != std::string::npos) return file.substr(0, p);
    std::string s = file.substr(0, file.rfind('.'));
    const size_t u = s.rfind('_');
    return u == std::string::npos ? s : s.substr(0, u);
}

double pct(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, size_t(q / 100.0 * double(v.size())));
    return v[i];
}

// The feature a compile error names: the quoted keyword / format, else the message head.
std::string feature_of(const std::string& msg) {
    const size_t q = msg.find('\'');
    if (q != std::string::npos) {
        const size_t e = msg.find('\'', q + 1);
        if (e != std::string::npos && e - q < 40) {
            std::string head = msg.substr(0, q);
            const size_t c = head.rfind(": ");
            if (c != std::string::npos) head = head.substr(c + 2);
            return head + msg.substr(q, e - q + 1);
        }
    }
    std::string m = msg;
    const size_t c = m.rfind(": ");
    if (c != std::string::npos && m.find("regex") == std::string::npos) m = m.substr(c + 2);
    if (m.find("regex /") != std::string::npos) m = "regex: " + m.substr(m.rfind(": ") + 2);
    return m.substr(0, 70);
}

}  // namespace

int main(int argc, char** argv) {
    std::string vocab_path, data, tokens, json_out, only, steps_out;
    int64_t n_vocab = 248320, limit = -1;
    std::vector<int32_t> eos = {248044, 248046};
    JsonSchemaOptions opt;
    bool compile_only = false;
    int repeat = 1;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--vocab") vocab_path = next();
        else if (a == "--n-vocab") n_vocab = std::stoll(next());
        else if (a == "--eos") {
            eos.clear();
            std::stringstream ss(next());
            for (std::string x; std::getline(ss, x, ',');) eos.push_back(std::stoi(x));
        } else if (a == "--data") data = next();
        else if (a == "--tokens") tokens = next();
        else if (a == "--limit") limit = std::stoll(next());
        else if (a == "--json") json_out = next();
        else if (a == "--only") only = next();
        else if (a == "--oneof-as-anyof") opt.oneof_as_anyof = true;
        else if (a == "--cpu-clock") g_cpu_clock = true;
        else if (a == "--steps") steps_out = next();
        else if (a == "--compile-only") compile_only = true;
        else if (a == "--repeat") repeat = std::max(1, std::stoi(next()));
        else { std::fprintf(stderr, "maskbench: unknown option %s\n", a.c_str()); return 2; }
    }
    if (vocab_path.empty() || data.empty() || tokens.empty()) {
        std::fprintf(stderr, "usage: maskbench --vocab FILE.tiktoken --data DIR --tokens FILE.jsonl [options]\n");
        return 2;
    }
    auto t0 = clk::now();
    auto vocab = token_index_from_tiktoken(vocab_path, n_vocab, eos);
    if (!vocab) { std::fprintf(stderr, "maskbench: %s\n", vocab.message().c_str()); return 1; }
    std::fprintf(stderr, "vocabulary: %d ids, trie %u nodes, %.0f ms\n", vocab.value()->vocab_size(),
                 vocab.value()->trie().size(), us_since(t0) / 1e3);

    struct Stat { int schemas = 0, covered = 0, compile_err = 0, valid_rejected = 0, invalid_accepted = 0, no_tests = 0; };
    std::map<std::string, Stat> per;
    std::map<std::string, int> features;
    std::vector<double> mask_us, compile_us;
    nlohmann::json rows = nlohmann::json::array();
    std::ifstream tf(tokens);
    std::string line;
    int64_t n = 0, inconsistent = 0;
    std::vector<uint32_t> mask(size_t(vocab.value()->mask_words()));
    std::FILE* steps = steps_out.empty() ? nullptr : std::fopen(steps_out.c_str(), "w");
    if (steps) std::fprintf(steps, "file\ttest\tstep\tus\tmiss\tinner\n");
    while (std::getline(tf, line) && (limit < 0 || n < limit)) {
        const nlohmann::json tl = nlohmann::json::parse(line);
        const std::string file = tl["file"];
        if (!only.empty() && file.find(only) == std::string::npos) continue;
        ++n;
        if (n % 500 == 0) std::fprintf(stderr, "%lld schemas, %.0f s\n", (long long)n, us_since(t0) / 1e6);
        std::ifstream sf(data + "/" + file);
        std::stringstream buf;
        buf << sf.rdbuf();
        const nlohmann::ordered_json d = nlohmann::ordered_json::parse(buf.str());
        const std::string ds = dataset_of(file);
        Stat& st = per[ds];
        st.schemas++;
        nlohmann::json row = {{"file", file}};
        const std::string schema_text = d["schema"].dump();
        std::optional<Expected<std::shared_ptr<Grammar>>> compiled;
        double cus = 0;
        for (int r = 0; r < (compile_only ? repeat : 1); ++r) {
            const double tc = now_us();
            auto ir = json_schema_grammar(schema_text, opt);
            compiled.emplace(ir ? Grammar::create(ir.value(), vocab.value()) : Expected<std::shared_ptr<Grammar>>(ir.status()));
            const double us = now_us() - tc;
            cus = r == 0 ? us : std::min(cus, us);
        }
        Expected<std::shared_ptr<Grammar>> g = std::move(*compiled);
        if (!g) {
            st.compile_err++;
            features[feature_of(g.message())]++;
            row["compile_error"] = g.message();
            rows.push_back(row);
            continue;
        }
        compile_us.push_back(cus);
        row["compile_us"] = cus;
        if (compile_only) {
            rows.push_back(row);
            continue;
        }
        const auto& tests = d["tests"];
        if (tests.empty()) st.no_tests++;
        bool ok = true;
        double schema_mask_max = 0, schema_mask_sum = 0;
        int64_t schema_tokens = 0;
        for (size_t ti = 0; ti < tests.size(); ++ti) {
            const bool valid = tests[ti]["valid"];
            Matcher m(g.value());
            bool accepted = true;
            int64_t step = 0, reject_at = -1;  // reject_at: the token the mask refused (-1: all taken)
            for (int32_t t : tl["tokens"][ti]) {
                const Grammar::CacheStats cs0 = steps ? g.value()->cache_stats() : Grammar::CacheStats{};
                const double tm = now_us();
                const bool mask_ok = m.fill_mask(mask.data()).is_ok();  // over the work bound: nothing allowed
                const bool allowed = mask_ok && ((mask[size_t(t) >> 5] >> (t & 31)) & 1);
                bool acc = false;
                if (allowed) acc = m.accept(t).is_ok();
                const double us = now_us() - tm;
                if (steps) {
                    const Grammar::CacheStats cs1 = g.value()->cache_stats();
                    std::fprintf(steps, "%s\t%zu\t%lld\t%.1f\t%lld\t%lld\n", file.c_str(), ti, (long long)step, us,
                                 (long long)(cs1.misses - cs0.misses), (long long)(cs1.inner_states - cs0.inner_states));
                }
                mask_us.push_back(us);
                schema_mask_max = std::max(schema_mask_max, us);
                schema_mask_sum += us;
                ++schema_tokens;
                if (allowed != acc || (!allowed && m.allows(t))) ++inconsistent;
                if (!acc) { accepted = false; reject_at = step; break; }
                ++step;
            }
            const bool complete = accepted && m.is_complete();
            if (complete != valid) {
                ok = false;
                (valid ? st.valid_rejected : st.invalid_accepted)++;
                row[valid ? "valid_rejected" : "invalid_accepted"] = int(ti);
                if (valid) row["reject_at"] = reject_at;  // -1 with a valid test: every token taken, not complete
                break;
            }
        }
        row["mask_tokens"] = schema_tokens;
        row["mask_sum_us"] = schema_mask_sum;
        row["mask_max_us"] = schema_mask_max;
        if (ok) st.covered++;
        row["covered"] = ok;
        rows.push_back(row);
    }
    // Report.
    std::printf("%-24s %7s %7s %9s %8s %8s %8s %8s\n", "dataset", "schemas", "covered", "coverage", "compile", "valid-", "invalid+", "no-tests");
    Stat all;
    for (auto& [ds, s] : per) {
        std::printf("%-24s %7d %7d %8.1f%% %8d %8d %8d %8d\n", ds.c_str(), s.schemas, s.covered, 100.0 * s.covered / std::max(1, s.schemas),
                    s.compile_err, s.valid_rejected, s.invalid_accepted, s.no_tests);
        all.schemas += s.schemas; all.covered += s.covered; all.compile_err += s.compile_err;
        all.valid_rejected += s.valid_rejected; all.invalid_accepted += s.invalid_accepted; all.no_tests += s.no_tests;
    }
    std::printf("%-24s %7d %7d %8.1f%% %8d %8d %8d %8d\n", "all", all.schemas, all.covered, 100.0 * all.covered / std::max(1, all.schemas),
                all.compile_err, all.valid_rejected, all.invalid_accepted, all.no_tests);
    double sum = 0;
    for (double x : mask_us) sum += x;
    std::printf("\ntimes: %s\n", g_cpu_clock ? "thread CPU time (--cpu-clock)" : "wall clock");
    std::printf("mask (fill_mask + accept) per token: %zu tokens, mean %.1f us, p50 %.1f, p75 %.1f, p90 %.1f, p99 %.1f, p99.9 %.1f, max %.0f us\n",
                mask_us.size(), sum / std::max<size_t>(1, mask_us.size()), pct(mask_us, 50), pct(mask_us, 75), pct(mask_us, 90),
                pct(mask_us, 99), pct(mask_us, 99.9), mask_us.empty() ? 0 : *std::max_element(mask_us.begin(), mask_us.end()));
    std::printf("compile (schema text -> matcher ready): %zu schemas, p50 %.0f us, p75 %.0f, p90 %.0f, p99 %.0f, max %.0f us\n",
                compile_us.size(), pct(compile_us, 50), pct(compile_us, 75), pct(compile_us, 90), pct(compile_us, 99),
                compile_us.empty() ? 0 : *std::max_element(compile_us.begin(), compile_us.end()));
    std::printf("mask/accept disagreements: %lld\n", (long long)inconsistent);
    std::printf("\ncompile errors by feature:\n");
    std::vector<std::pair<int, std::string>> fs;
    for (auto& [f, c] : features) fs.push_back({c, f});
    std::sort(fs.rbegin(), fs.rend());
    for (auto& [c, f] : fs) std::printf("  %5d  %s\n", c, f.c_str());
    if (steps) std::fclose(steps);
    if (!json_out.empty()) {
        std::ofstream o(json_out);
        o << rows.dump(1) << "\n";
    }
    std::fprintf(stderr, "total %.1f s\n", us_since(t0) / 1e6);
    return 0;
}
