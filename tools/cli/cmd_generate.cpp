// `ember generate`: prompt → streamed text (or ids for tokenizer-less synthetic models) → one stats line.
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "grammar_option.h"
#include "core/parallel.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void usage() {
    std::printf(
        "usage: ember generate (-m MODEL | --synthetic NAME) (-p PROMPT | --tokens IDS | --prompt-len N) [options]\n"
        "  -n N              tokens to generate (default 128)\n"
        "%s"
        "  --chat            format the prompt with the model's chat template (GGUF / tokenizer_config.json; ChatML\n"
        "                    when the model has none); --no-think disables thinking (Qwen)\n"
        "  --ignore-eos      do not stop at end-of-sequence tokens\n"
        "  --threads N       CPU threads\n"
        "  --device D        auto (default: cuda when built with CUDA and a GPU is present), cpu or cuda\n"
        "  -c, --ctx-size N  context capacity of the GPU KV cache (default 4096)\n"
        "  --trace           per decode step on stderr: kernels, GPU time, wall time (also EMBER_TRACE=1)\n"
        "  --save-session F  after the generation, save the sequence (tokens, KV / recurrent state, sampling RNG) to F\n"
        "  --load-session F  continue the sequence saved in F: the prompt (optional; no BOS is added) is appended after\n"
        "                    the restored tokens; without one generation continues where the saved run stopped\n"
        "                    (same model and seed: the same tokens as one uninterrupted run)\n"
        "  --json-schema FILE | --grammar FILE (GBNF) | --regex RE\n"
        "                    structured output: every token is allowed by the grammar; generation ends when the\n"
        "                    text is complete (src/grammar)\n"
        "%s"
        "MODEL is a directory (config.json + safetensors) or a .gguf file. A model without a tokenizer (or\n"
        "--synthetic) takes --tokens 1,2,3 or --prompt-len N and prints ids.\n", kSamplingHelp, kQ8ActivationsHelp);
}
}  // namespace

int cmd_generate(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) { usage(); return 0; }
    std::string model = a.str({"-m", "--model"}), synth = a.str({"--synthetic"}), prompt = a.str({"-p", "--prompt"}),
                toks = a.str({"--tokens"}), device = a.str({"--device"}, "auto");
    long n = a.integer({"-n", "--n-predict"}, 128), plen = a.integer({"--prompt-len"}, 0);
    const SamplingParams sp = sampling_options(a);
    bool chat = a.flag({"--chat"}), no_think = a.flag({"--no-think"}), ignore_eos = a.flag({"--ignore-eos"});
    if (a.flag({"--trace"})) setenv("EMBER_TRACE", "1", 1);
    long threads = a.integer({"--threads", "-t"}, 0);
    long ctx = a.integer({"--ctx-size", "-c"}, 4096);
    GrammarOption gopt;
    gopt.json_schema_file = a.str({"--json-schema"});
    gopt.gbnf_file = a.str({"--grammar"});
    gopt.regex = a.str({"--regex"});
    const std::string save_path = a.str({"--save-session"}), load_path = a.str({"--load-session"});
    const LoadOptions load = load_options(a);
    if (!a.error().empty()) return fail("generate", a.error());
    if (n < 0) return fail("generate", "-n must be ≥ 0");
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    const int prompts = (!prompt.empty()) + (!toks.empty()) + (plen > 0);
    if (load_path.empty() ? prompts != 1 : prompts > 1)
        return fail("generate", load_path.empty() ? "give exactly one of -p PROMPT, --tokens IDS, --prompt-len N"
                                                  : "give at most one of -p PROMPT, --tokens IDS, --prompt-len N");
    if (!load_path.empty() && chat)
        return fail("generate", "--chat renders a whole conversation: it cannot be appended to --load-session");

    auto m = open_model(model, synth, device, ctx, load);
    if (!m) return fail("generate", m.message());
    const CausalLM& lm = **m;

    auto tok_or = open_tokenizer(model);
    if (!tok_or) return fail("generate", tok_or.message());
    std::unique_ptr<Tokenizer> tok = std::move(tok_or.value());
    std::vector<int32_t> ids;
    if (!prompt.empty()) {
        if (!tok) return fail("generate", "this model has no tokenizer: use --tokens or --prompt-len");
        std::string text = prompt;
        if (chat) {
            auto t = format_chat(model, *tok, prompt, !no_think);
            if (!t) return fail("generate", t.message());
            text = t.value();
        }
        // llama.cpp semantics: BOS as the model asks (unless the template already wrote it), special tokens parsed.
        const int32_t bos = tok->bos_id();
        const bool has_bos = bos >= 0 && text.rfind(tok->token_bytes(bos), 0) == 0;
        ids = tok->encode(text, /*add_special=*/!has_bos && load_path.empty(), /*parse_special=*/true);
    } else if (!toks.empty()) {
        auto r = parse_token_list(toks);
        if (!r) return fail("generate", r.message());
        ids = r.value();
    } else {
        for (long i = 0; i < plen; ++i) ids.push_back(static_cast<int32_t>((i * 7919 + 13) % lm.info().vocab_size));
    }
    if (ids.empty() && prompts > 0) return fail("generate", "the prompt encodes to no tokens");

    std::vector<int32_t> stop;
    if (tok && !ignore_eos) stop = tok->eos_ids();
    std::unique_ptr<StreamDecoder> dec;
    if (tok) dec = std::make_unique<StreamDecoder>(*tok);
    if (tok) { std::fputs((prompt + (chat ? "\n" : "")).c_str(), stdout); std::fflush(stdout); }
    std::unique_ptr<TokenConstraint> constraint;
    if (gopt.given()) {
        if (!tok) return fail("generate", "--json-schema / --grammar / --regex need a model with a tokenizer");
        auto c = make_grammar_constraint(gopt, *tok, lm.info().vocab_size);
        if (!c) return fail("generate", c.message());
        constraint = std::move(c.value());
    }
    bool first = true;
    Session s(lm);
    if (!load_path.empty()) {
        const auto t0 = std::chrono::steady_clock::now();
        if (Status r = s.load(load_path); !r) return fail("generate", r.message());
        std::fprintf(stderr, "[session: %lld tokens restored from %s in %.1f ms]\n", (long long)s.pos(),
                     load_path.c_str(), ms_since(t0));
    }
    auto st = s.generate(ids, n, sp, stop, [&](int32_t id) {
        if (dec) std::fputs(dec->push(id).c_str(), stdout);
        else std::printf("%s%d", first ? "" : ",", id);
        first = false;
        std::fflush(stdout);
        return true;
    }, constraint.get());
    if (dec) std::fputs(dec->flush().c_str(), stdout);
    std::printf("\n");
    std::fflush(stdout);
    if (!st) return fail("generate", st.message());
    if (!save_path.empty()) {
        const auto t0 = std::chrono::steady_clock::now();
        if (Status r = s.save(save_path); !r) return fail("generate", r.message());
        std::fprintf(stderr, "[session: %lld tokens + %zu pending saved to %s in %.1f ms, %s]\n", (long long)s.pos(),
                     s.pending().size(), save_path.c_str(), ms_since(t0),
                     human_bytes(static_cast<double>(std::filesystem::file_size(save_path))).c_str());
    }
    const GenerateStats& g = st.value();
    std::string dev_line;
    if (g.decode_steps > 0 && g.decode_kernels > 0)
        dev_line = strfmt(" | %s sampling, %.0f kernels/token, GPU %.1f us/token", g.device_sampling ? "device" : "host",
                          double(g.decode_kernels) / g.decode_steps, g.decode_gpu_s / g.decode_steps * 1e6);
    std::fprintf(stderr,
                 "[prompt: %lld tokens, %.2f tok/s | generated: %lld tokens, %.2f tok/s%s | peak memory %s | %d threads]\n",
                 (long long)g.prompt_tokens, g.prompt_tokens / std::max(g.prefill_s, 1e-9),
                 (long long)g.generated_tokens, g.decode_steps / std::max(g.decode_s, 1e-9), dev_line.c_str(),
                 human_bytes(static_cast<double>(peak_rss_bytes())).c_str(), num_threads());
    return 0;
}

}  // namespace ember::cli
