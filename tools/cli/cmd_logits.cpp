// `ember logits`: the verification contract of verification.md — raw float32 logits [n_tokens, vocab].
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "runtime/session.h"

namespace ember::cli {

int cmd_logits(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) {
        std::printf("usage: ember logits -m MODEL --tokens 1,2,3 --out FILE [--decode-from K] [--chunks A,B,..] [--last-only]\n"
                    "                    [--device auto|cpu|cuda] [-c CTX]\n"
                    "  writes little-endian float32 logits [n_tokens, vocab], one row per input position.\n"
                    "  --decode-from K: prefill tokens [0,K) in one batch, then feed the rest one at a time.\n"
                    "  --chunks A,B,..: prefill the tokens as consecutive calls of A, B, .. tokens (they must add up to\n"
                    "                   the token count; a prompt continuing an earlier prefill).\n"
                    "  --last-only: write only the last position's row [1, vocab] (long prompts: no all-rows head).\n%s",
                    kQ8ActivationsHelp);
        return 0;
    }
    std::string model = a.str({"-m", "--model"}), synth = a.str({"--synthetic"}), toks = a.str({"--tokens"}),
                out = a.str({"--out", "-o"}), device = a.str({"--device"}, "auto");
    long decode_from = a.integer({"--decode-from"}, -1);
    const std::string chunks_arg = a.str({"--chunks"});
    const bool last_only = a.flag({"--last-only"});
    long ctx = a.integer({"--ctx-size", "-c"}, 4096);
    const LoadOptions load = load_options(a);
    if (!a.error().empty()) return fail("logits", a.error());
    if (toks.empty() || out.empty()) return fail("logits", "--tokens and --out are required");
    auto ids = parse_token_list(toks);
    if (!ids) return fail("logits", ids.message());
    const int64_t n = static_cast<int64_t>(ids->size());
    if (decode_from != -1 && (decode_from < 0 || decode_from > n))
        return fail("logits", strfmt("--decode-from %ld is outside [0, %lld]", decode_from, (long long)n));
    std::vector<int64_t> chunks;
    if (!chunks_arg.empty()) {
        if (decode_from != -1) return fail("logits", "--chunks and --decode-from exclude each other");
        auto c = parse_token_list(chunks_arg);
        if (!c) return fail("logits", "--chunks: " + c.message());
        int64_t sum = 0;
        for (int32_t v : *c) {
            if (v <= 0) return fail("logits", "--chunks: sizes must be positive");
            chunks.push_back(v), sum += v;
        }
        if (sum != n)
            return fail("logits", strfmt("--chunks add up to %lld, the tokens are %lld", (long long)sum, (long long)n));
    }
    auto m = open_model(model, synth, device, ctx, load);
    if (!m) return fail("logits", m.message());
    const int64_t V = (*m)->info().vocab_size;
    Session s(**m);
    std::vector<float> logits;
    logits.reserve(static_cast<size_t>(n * V));
    int64_t k = decode_from < 0 ? n : decode_from;
    if (chunks.empty() && k > 0) chunks.push_back(k);
    int64_t at = 0;
    for (int64_t c : chunks) {
        auto r = s.prefill(std::vector<int32_t>(ids->begin() + at, ids->begin() + at + c), /*all_logits=*/!last_only,
                           /*batch=*/512);
        if (!r) return fail("logits", r.message());
        if (last_only) logits = std::move(r.value());
        else logits.insert(logits.end(), r->begin(), r->end());
        at += c;
    }
    for (int64_t t = k; t < n; ++t) {
        auto r = s.decode((*ids)[t]);
        if (!r) return fail("logits", r.message());
        if (last_only) logits = std::move(r.value());
        else logits.insert(logits.end(), r->begin(), r->end());
    }
    FILE* f = std::fopen(out.c_str(), "wb");
    if (!f) return fail("logits", "cannot open " + out + " for writing");
    size_t w = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    if (std::fclose(f) != 0 || w != logits.size()) return fail("logits", "write to " + out + " failed");
    return 0;
}

}  // namespace ember::cli
