// `ember perplexity`: llama.cpp-compatible perplexity of a text file.
//   tokens = tokenize(text, add_special = true); n_chunk = ⌊|tokens| / n_ctx⌋ (or --chunks);
//   chunk i = tokens[i·n_ctx, (i+1)·n_ctx), its first token replaced by BOS when the model adds BOS;
//   scored: positions j ∈ [n_ctx/2, n_ctx−1), NLL_j = −log softmax(logits_j)[chunk[j+1]] (fresh state per chunk);
//   PPL = exp(mean NLL), ± exp(mean)·sqrt(var(NLL)/(N−1)) as llama-perplexity prints it.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "core/parallel.h"
#include "runtime/session.h"

namespace ember::cli {

int cmd_perplexity(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) {
        std::printf("usage: ember perplexity -m MODEL -f FILE [-c N_CTX] [--chunks N] [--device D] [--threads N]\n"
                    "  llama.cpp's perplexity: chunks of N_CTX tokens (default 512), second half of each scored.\n%s",
                    kQ8ActivationsHelp);
        return 0;
    }
    std::string model = a.str({"-m", "--model"}), file = a.str({"-f", "--file"}), device = a.str({"--device"}, "auto");
    long n_ctx = a.integer({"-c", "--ctx-size"}, 512), max_chunks = a.integer({"--chunks"}, -1);
    long threads = a.integer({"--threads", "-t"}, 0);
    const LoadOptions load = load_options(a);
    if (!a.error().empty()) return fail("perplexity", a.error());
    if (model.empty() || file.empty()) return fail("perplexity", "-m MODEL and -f FILE are required");
    if (n_ctx < 4) return fail("perplexity", "-c must be at least 4");
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    std::ifstream in(file, std::ios::binary);
    if (!in) return fail("perplexity", "cannot open " + file);
    std::stringstream ss;
    ss << in.rdbuf();
    auto tok = open_tokenizer(model);
    if (!tok) return fail("perplexity", tok.message());
    if (!tok.value()) return fail("perplexity", "this model has no tokenizer");
    const Tokenizer& T = *tok.value();
    auto m = open_model(model, "", device, n_ctx, load);
    if (!m) return fail("perplexity", m.message());
    const int64_t V = (*m)->info().vocab_size;

    std::string text = ss.str();
    if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama-perplexity -f reads the file
    std::vector<int32_t> ids = T.encode(text, /*add_special=*/true, /*parse_special=*/false);
    int64_t n_chunk = static_cast<int64_t>(ids.size()) / n_ctx;
    if (max_chunks >= 0 && max_chunks < n_chunk) n_chunk = max_chunks;
    if (n_chunk < 1)
        return fail("perplexity", strfmt("%s has %zu tokens: need at least %ld (2 × n_ctx / 2) for one chunk",
                                         file.c_str(), ids.size(), n_ctx));
    std::fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %ld, scoring the second half of each\n", ids.size(),
                 (long long)n_chunk, n_ctx);
    const int64_t first = n_ctx / 2;
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    for (int64_t c = 0; c < n_chunk; ++c) {
        std::vector<int32_t> chunk(ids.begin() + c * n_ctx, ids.begin() + (c + 1) * n_ctx);
        if (T.add_bos() && T.bos_id() >= 0) chunk[0] = T.bos_id();
        Session s(**m);
        auto lg = s.prefill(chunk, /*all_logits=*/true);
        if (!lg) return fail("perplexity", lg.message());
        for (int64_t j = first; j < n_ctx - 1; ++j) {
            const float* row = lg->data() + j * V;
            double mx = row[0];
            for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
            double z = 0;
            for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - mx);
            const double x = -(double(row[chunk[j + 1]]) - mx - std::log(z));
            if (!std::isfinite(x)) return fail("perplexity", strfmt("non-finite log-likelihood at chunk %lld", (long long)c));
            nll += x;
            nll2 += x * x;
            ++count;
        }
        std::printf("[%lld]%.4f,", (long long)(c + 1), std::exp(nll / double(count)));
        std::fflush(stdout);
    }
    const double mean = nll / double(count), var = nll2 / double(count) - mean * mean;
    const double ppl = std::exp(mean), unc = count > 1 ? ppl * std::sqrt(std::max(0.0, var) / double(count - 1)) : 0;
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, unc);
    return 0;
}

}  // namespace ember::cli
