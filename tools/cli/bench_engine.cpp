// `ember bench --engine B[,B...]`: the library Engine as a server drives it. Per slot count B, 4·B sequences (random
// prompts of --batch-prompt tokens, -n greedy tokens each, no stop ids) wait in a queue; before every step() the
// free slots take the next ones, so new prompts are prefilled (256-token chunks) while the others decode. Timed from
// the first add() to the last token: total tokens per second (prompt + generated), generated per second, the mean
// time from a sequence's add() to its first token, model calls and the rounds that mixed prompt chunks with decode
// rows in one call (CausalLM::batch_step; EMBER_MIXED_STEP=0 runs them apart: the A/B baseline). Each repetition
// draws new prompts (the untimed first one too).
#include "bench_engine.h"

#include <cstdio>
#include <deque>
#include <map>
#include <random>

#include "bench_stat.h"
#include "common.h"
#include "runtime/engine_impl.h"

namespace ember::cli {

namespace {

struct LoadRun {
    double seconds = 0, ttft_s = 0;
    int64_t prompt_tokens = 0, generated = 0, calls = 0;
};

Expected<LoadRun> run_load(const CausalLM& lm, int B, long prompt, long gen, std::mt19937_64& rng) {
    const int64_t V = lm.info().vocab_size;
    EngineOptions eo;
    eo.max_sequences = B;
    EMBER_ASSIGN(Engine e, make_engine(lm, eo));
    std::uniform_int_distribution<int32_t> token(0, int32_t(V - 1));
    std::deque<SequenceParams> queue;
    for (int i = 0; i < 4 * B; ++i) {
        SequenceParams p;
        for (long t = 0; t < prompt; ++t) p.prompt.push_back(token(rng));
        p.max_tokens = gen;
        queue.push_back(std::move(p));
    }
    std::map<SequenceId, double> added;
    LoadRun r;
    std::string failed;
    const double t0 = now_s();
    while (!queue.empty() || e.running() > 0) {
        while (!queue.empty() && e.running() < B) {
            EMBER_ASSIGN(const SequenceId id, e.add(std::move(queue.front())));
            queue.pop_front();
            added[id] = now_s();
        }
        e.step([&](const StepEvent& ev) {
            if (ev.end == SequenceEnd::FAILED) failed = ev.error.empty() ? "failed" : ev.error;
            if (!ev.has_token) return;
            if (auto it = added.find(ev.id); it != added.end()) {
                r.ttft_s += now_s() - it->second;
                added.erase(it);
            }
        });
        if (!failed.empty()) return errorf("%s", failed.c_str());
    }
    r.seconds = now_s() - t0;
    r.ttft_s /= 4.0 * B;
    const EngineStats st = e.stats();
    r.prompt_tokens = st.prompt_tokens;
    r.generated = st.generated_tokens;
    r.calls = st.model_calls;
    return r;
}

}  // namespace

const char* engine_table_header() {
    return "| model | device | test | total t/s (prompt + generated) | generated t/s | mean TTFT ms | model calls | "
           "mixed rounds |\n|---|---|---|---|---|---|---|---|\n";
}

int bench_engine(const CausalLM& lm, const std::string& label, const std::string& dev, const std::vector<long>& sizes,
                 long prompt, long gen, long reps) {
    const int64_t ctx = lm.info().max_context;
    if (ctx > 0 && prompt + gen + 1 > ctx)
        return fail("bench", strfmt("--engine: %ld prompt + %ld generated tokens exceed the context of %lld", prompt,
                                    gen, (long long)ctx));
    std::mt19937_64 rng(0x10ad'5eedull);
    for (const long B : sizes) {
        std::vector<double> total, gen_tps, ttft;
        LoadRun last;
        for (long rep = 0; rep <= reps; ++rep) {
            auto r = run_load(lm, int(B), prompt, gen, rng);
            if (!r) return fail("bench", "--engine " + std::to_string(B) + ": " + r.message());
            if (rep == 0) continue;  // warm-up: allocation, graph capture
            total.push_back(double(r->prompt_tokens + r->generated) / r->seconds);
            gen_tps.push_back(double(r->generated) / r->seconds);
            ttft.push_back(r->ttft_s * 1e3);
            last = *r;
        }
        const Stat t = stat(total), g = stat(gen_tps), f = stat(ttft);
        std::printf("| %s | %s | engine %ld slots: %ld × (pp%ld + tg%ld) | %.1f ± %.1f | %.1f ± %.1f | %.1f ± %.1f | "
                    "%lld | %s |\n",
                    label.c_str(), dev.c_str(), B, 4 * B, prompt, gen, t.mean, t.sd, g.mean, g.sd, f.mean, f.sd,
                    (long long)last.calls, lm.batch_mixed() ? "one call" : "apart");
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace ember::cli
