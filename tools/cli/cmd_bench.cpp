// `ember bench`: llama-bench-like table — prefill (ppN) and decode (tgN) throughput, % of the decode floor,
// kernels per token, GPU µs and host µs per token — for synthetic presets and/or model paths.
//   decode floor = (bytes read per token: weights + recurrent state read and written + KV cache) / copy bw,
//   copy bandwidth measured in the same run (GPU: D2D memcpy; CPU: a multi-threaded read of 1 GiB).
// Other modes instead of pp/tg: --batch (bench_batch.cpp), --prefix-ttft (bench_prefix.cpp), --kernels.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "args.h"
#include "bench_batch.h"
#include "bench_engine.h"
#include "bench_prefix.h"
#include "bench_stat.h"
#include "commands.h"
#include "common.h"
#include "core/parallel.h"
#include "runtime/session.h"

#ifdef EMBER_HAVE_CUDA
#include "backend/cuda/device.h"
#endif

namespace ember::cli {

namespace {

void usage() {
    std::printf(
        "usage: ember bench (-m MODEL[,MODEL...] | --synthetic NAME[,NAME...]) [options]\n"
        "  -p N[,N...]   prompt tokens for the prefill tests, e.g. 512,2048,8192 (default 512; 0 = skip)\n"
        "  -n N          tokens for the decode test (default 128; 0 = skip)\n"
        "  -r N          repetitions (default 3), after one warm-up\n"
        "  --device D    auto (default), cpu or cuda\n"
        "  -c N          context capacity (default 4096)\n"
        "  --threads N   CPU threads\n"
        "  --batch B[,B...]  instead of pp/tg: the batched engine's aggregate decode at B streams (e.g. 1,8,32,64):\n"
        "                B prompts of --batch-prompt tokens (default 128), then -n steps of all B rows, greedy\n"
        "                (--profile: then a table of one step's GPU time by kernel; CUDA; --sample: every row sampled\n"
        "                on the device, T 0.8 top-p 0.9 repetition 1.1, instead of greedy)\n"
        "  --prefix-ttft L[,L...]  instead of pp/tg: time to first token through the engine with its prefix cache, a\n"
        "                prompt of L random tokens + 16 (cold: nothing cached) vs the same L + 16 other tokens (warm:\n"
        "                restored from the checkpoint of every whole 256-token block of L), each rep a new prefix;\n"
        "                prints cold and warm ms (mean ± sd), warm/cold and the tokens restored (L ≥ 256)\n"
        "  --prefix-cache-mib N  the prefix cache's memory for --prefix-ttft (host; device memory on CUDA; default 4096)\n"
        "  --engine B[,B...]  instead of pp/tg: the library Engine under a stream of requests, B slots: 4·B greedy\n"
        "                sequences of --batch-prompt tokens + -n generated, admitted as slots free (prompt chunks beside\n"
        "                decode rows); total and generated tok/s, mean time to first token, model calls\n"
        "%s"
        "  --kernels     instead: the decode-GEMV table (gemv_bench, built with -DEMBER_CUDA=ON next to this binary) and,\n"
        "                when python3 has torch, the peers on the same shapes (bench/peers/torch_int4.py: torch int4\n"
        "                tinygemm, cuBLAS bf16) in the same run\n"
        "Prints a markdown table: tok/s (mean ± sd), %% of the decode floor, kernels/token, GPU and host us/token.\n",
        kQ8ActivationsHelp);
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i <= s.size() && !s.empty()) {
        size_t j = s.find(',', i);
        if (j == std::string::npos) j = s.size();
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

// CPU read bandwidth (GB/s): threads sum a 1 GiB buffer; best of 3.
double cpu_read_bandwidth_gbs() {
    const size_t n = (size_t(1) << 30) / sizeof(uint64_t);
    std::vector<uint64_t> buf(n, 1);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        std::vector<uint64_t> part(256, 0);
        double t0 = now_s();
        parallel_for(256, 1, [&](int64_t c0, int64_t c1) {
            for (int64_t c = c0; c < c1; ++c) {
                uint64_t s = 0;
                const size_t b = n * c / 256, e = n * (c + 1) / 256;
                for (size_t i = b; i < e; ++i) s += buf[i];
                part[c] = s;
            }
        });
        best = std::min(best, now_s() - t0);
        if (std::accumulate(part.begin(), part.end(), uint64_t{0}) != n) return 0;
    }
    return double(n * sizeof(uint64_t)) / best / 1e9;
}

// A comma list of integers in [lo, hi] ("512,2048"); false, with the entry in *bad, if one is not.
bool parse_counts(const std::string& list, long lo, long hi, std::vector<long>* out, std::string* bad) {
    for (const std::string& v : split_list(list)) {
        char* end = nullptr;
        errno = 0;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || errno || n < lo || n > hi) return *bad = v, false;
        out->push_back(n);
    }
    return true;
}

}  // namespace

// `ember bench --kernels`: the kernel-level benchmarks, run as the executables/scripts they are.
int bench_kernels(bool quick) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    std::string gemv;
    for (const fs::path& c : {self.parent_path() / "gemv_bench", self.parent_path().parent_path() / "gemv_bench"})
        if (!ec && fs::exists(c)) { gemv = c.string(); break; }
    if (gemv.empty()) return fail("bench", "--kernels: gemv_bench not found next to ember (configure with -DEMBER_CUDA=ON)");
    std::fflush(stdout);
    int rc = std::system((gemv + (quick ? " --quick" : "")).c_str());
    const fs::path peer = fs::path(EMBER_SOURCE_DIR) / "bench/peers/torch_int4.py";
    if (fs::exists(peer) && std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0) {
        std::printf("\n");
        std::fflush(stdout);
        rc |= std::system(("python3 " + peer.string() + (quick ? " --quick" : "")).c_str());
    } else {
        std::printf("\n(peers skipped: python3 with torch or %s not found)\n", peer.string().c_str());
    }
    return rc == 0 ? 0 : 1;
}

int cmd_bench(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) { usage(); return 0; }
    if (a.flag({"--kernels"})) return bench_kernels(!a.flag({"--full"}));
    std::string models = a.str({"-m", "--model"}), synth = a.str({"--synthetic"}), device = a.str({"--device"}, "auto");
    const std::string pp_list = a.str({"-p", "--n-prompt"}, "512");
    long tg = a.integer({"-n", "--n-gen"}, 128);
    long reps = a.integer({"-r", "--repetitions"}, 3), ctx = a.integer({"-c", "--ctx-size"}, 4096);
    long threads = a.integer({"--threads", "-t"}, 0);
    const std::string batch_list = a.str({"--batch"});
    const long batch_prompt = a.integer({"--batch-prompt"}, 128);
    const bool profile = a.flag({"--profile"});
    const bool sample = a.flag({"--sample"});
    const std::string ttft_list = a.str({"--prefix-ttft"});
    const std::string engine_list = a.str({"--engine"});
    const long cache_mib = a.integer({"--prefix-cache-mib"}, 4096);
    const LoadOptions load = load_options(a);
    if (!a.error().empty()) return fail("bench", a.error());
    std::vector<long> pps, batches, ttfts;
    std::string bad;
    if (!parse_counts(pp_list, 0, 1L << 24, &pps, &bad))
        return fail("bench", "-p: '" + bad + "' is not a token count (a list such as 512,2048,8192)");
    pps.erase(std::remove(pps.begin(), pps.end(), 0L), pps.end());  // 0 = skip
    if (pp_list.empty()) return fail("bench", "-p: empty list");
    if (!parse_counts(batch_list, 1, 4096, &batches, &bad))
        return fail("bench", "--batch: '" + bad + "' is not a stream count 1..4096 (a list such as 1,8,32,64)");
    if (a.has({"--batch"}) && batches.empty()) return fail("bench", "--batch: empty list");
    if (!parse_counts(ttft_list, 256, 1L << 24, &ttfts, &bad))
        return fail("bench", "--prefix-ttft: '" + bad + "' is not a prefix length of 256..16777216 tokens (the cache "
                             "checkpoints every 256; a list such as 1000,4000)");
    if (a.has({"--prefix-ttft"}) && ttfts.empty()) return fail("bench", "--prefix-ttft: empty list");
    std::vector<long> engines;
    if (!parse_counts(engine_list, 1, 4096, &engines, &bad))
        return fail("bench", "--engine: '" + bad + "' is not a slot count 1..4096 (a list such as 8,32)");
    if (a.has({"--engine"}) && engines.empty()) return fail("bench", "--engine: empty list");
    if (!engines.empty() && (a.has({"--batch"}) || a.has({"--prefix-ttft"})))
        return fail("bench", "--engine, --batch and --prefix-ttft are separate benchmarks: give one of them");
    if (!engines.empty() && tg < 1) return fail("bench", "--engine needs -n ≥ 1 generated tokens");
    if (!ttfts.empty() && a.has({"--batch"}))
        return fail("bench", "--prefix-ttft and --batch are separate benchmarks: give one of them");
    if (cache_mib < 1 || cache_mib > (1L << 22)) return fail("bench", "--prefix-cache-mib must be in [1, 4194304]");
    if (batch_prompt < 1 || batch_prompt > (1L << 20)) return fail("bench", "--batch-prompt must be 1..1048576");
    if (!batches.empty() && tg < 1) return fail("bench", "--batch needs -n ≥ 1 decode steps");
    const long pp_max = pps.empty() ? 0 : *std::max_element(pps.begin(), pps.end());
    if (tg < 0 || reps < 1) return fail("bench", "-n must be ≥ 0, -r ≥ 1");
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    if (models.empty() == synth.empty()) return fail("bench", "give -m MODEL[,MODEL...] or --synthetic NAME[,NAME...]");
    const std::string dev = load.q8_activations && device == "auto" ? "cpu" : resolve_device(device);
    if (!ttfts.empty()) {
        const long need = *std::max_element(ttfts.begin(), ttfts.end()) + long(kPrefixTail) + 1;
        if (ctx < need) ctx = need;
    } else if (!batches.empty() || !engines.empty()) {
        if (ctx < batch_prompt + tg + 1) ctx = batch_prompt + tg + 1;
    } else if (ctx < pp_max + tg + 1) {
        ctx = pp_max + tg + 1;
    }

    double bw = 0;
    std::string bw_what;
#ifdef EMBER_HAVE_CUDA
    if (dev == "cuda" && ttfts.empty() && engines.empty()) {
        auto b = cuda::copy_bandwidth_gbs();
        if (!b) return fail("bench", b.message());
        bw = b.value();
        bw_what = "copy bandwidth (D2D) " + std::to_string(int(bw)) + " GB/s on " + cuda::device_name();
    }
#endif
    if (dev == "cpu" && ttfts.empty() && engines.empty()) {
        bw = cpu_read_bandwidth_gbs();
        bw_what = "read bandwidth " + std::to_string(int(bw)) + " GB/s, " + std::to_string(num_threads()) + " threads";
    }
    if (!engines.empty()) {
        std::printf("ember bench — device %s, the library Engine under load, 256-token prefill chunks, greedy\n\n%s",
                    dev.c_str(), engine_table_header());
    } else if (!ttfts.empty()) {  // no floor: time to first token, not bandwidth
        std::printf("ember bench — device %s, prefix cache %ld MiB, a checkpoint every 256 tokens\n\n%s", dev.c_str(),
                    cache_mib, prefix_table_header());
    } else {
        std::printf("ember bench — device %s, %s\n\n", dev.c_str(), bw_what.c_str());
        std::printf("| model | weights | device | test | t/s | %% of floor | floor us/tok | kernels/tok | GPU us/tok | host us/tok |\n");
        std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    }
    std::fflush(stdout);

    const bool is_synth = !synth.empty();
    for (const std::string& name : split_list(is_synth ? synth : models)) {
        auto m = open_model(is_synth ? "" : name, is_synth ? name : "", dev, ctx, load);
        if (!m) return fail("bench", m.message());
        const CausalLM& lm = **m;
        const ModelInfo& info = lm.info();
        const std::string label = is_synth ? name : info.architecture;
        const int64_t V = info.vocab_size;
        if (!ttfts.empty()) {
            if (bench_prefix(lm, label, dev, ttfts, reps, int64_t(cache_mib) << 20) != 0) return 1;
            continue;
        }
        if (!engines.empty()) {
            if (bench_engine(lm, label, dev, engines, batch_prompt, tg, reps) != 0) return 1;
            continue;
        }
        if (!batches.empty()) {
            if (bench_batch(lm, label, dev, batches, batch_prompt, tg, reps, bw, profile, sample) != 0) return 1;
            continue;
        }
        for (const long pp : pps) {
            std::vector<int32_t> prompt;
            for (long i = 0; i < pp; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % V));
            std::vector<double> tps;
            for (long r = 0; r <= reps; ++r) {
                Session s(lm);
                if (Status rs = s.reserve(); !rs) return fail("bench", rs.message());  // buffers before the timer
                double t0 = now_s();
                auto out = s.prefill(prompt);
                double t = now_s() - t0;
                if (!out) return fail("bench", out.message());
                if (r > 0) tps.push_back(double(pp) / t);
            }
            Stat st = stat(tps);
            std::printf("| %s | %s | %s | pp%ld | %.1f ± %.1f | | | | | |\n", label.c_str(),
                        human_bytes(double(info.weight_bytes)).c_str(), dev.c_str(), pp, st.mean, st.sd);
            std::fflush(stdout);
        }
        if (tg > 0) {
            std::vector<double> tps, kern, gpu, host;
            for (long r = 0; r <= reps; ++r) {
                Session s(lm);
                auto st = s.generate({static_cast<int32_t>(13 % V)}, tg + 1, SamplingParams{}, {}, nullptr);
                if (!st) return fail("bench", st.message());
                const GenerateStats& g = st.value();
                if (r == 0 || g.decode_steps == 0) continue;
                const double per_tok = g.decode_s / double(g.decode_steps);
                tps.push_back(1.0 / per_tok);
                kern.push_back(double(g.decode_kernels) / double(g.decode_steps));
                gpu.push_back(g.decode_gpu_s / double(g.decode_steps) * 1e6);
                host.push_back(per_tok * 1e6 - gpu.back());
            }
            Stat t = stat(tps);
            // Bytes per decode token at the mean context of the run.
            const double bytes = double(info.weight_bytes) + 2.0 * double(info.state_bytes) +
                                 double(info.kv_bytes_per_token) * double(tg) / 2.0;
            const double floor_us = bw > 0 ? bytes / (bw * 1e9) * 1e6 : 0;
            const double pct = floor_us > 0 ? 100.0 * floor_us * t.mean / 1e6 : 0;
            const bool has_gpu = stat(gpu).mean > 0;
            std::printf("| %s | %s | %s | tg%ld | %.1f ± %.1f | %.1f %% | %.1f | %s | %s | %s |\n", label.c_str(),
                        human_bytes(double(info.weight_bytes)).c_str(), dev.c_str(), tg, t.mean, t.sd, pct, floor_us,
                        has_gpu ? strfmt("%.0f", stat(kern).mean).c_str() : "-",
                        has_gpu ? strfmt("%.1f", stat(gpu).mean).c_str() : "-",
                        has_gpu ? strfmt("%.1f", stat(host).mean).c_str() : "-");
            std::fflush(stdout);
        }
    }
    return 0;
}

}  // namespace ember::cli
