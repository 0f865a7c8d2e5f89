// `ember bench --prefix-ttft L[,L...]`: what the prefix cache saves on time to first token. Per prefix length L,
// through the library Engine as `ember serve` drives it (one slot, 256-token prefill chunks, the prefix cache on):
//   cold: L random tokens + 16 tail tokens, max_tokens 1 — the time from add() to the step that gives its token
//         (every chunk computed, checkpoints stored every 256 tokens on the way, as in serving);
//   warm: the same L tokens + 16 other tail tokens — restored from the deepest checkpoint, the rest computed;
//         its cached tokens are the whole 256-token blocks of the prefix (a block holding tail tokens differs);
//   no cache: the cold prompt again on an engine without a prefix cache (no checkpoints stored).
// Also the time the cold prompt spent storing checkpoints and the warm one restoring (EngineStats).
// Every repetition (and the untimed warm-up pair first) draws a new prefix from a fixed seed, so the cold prompt is
// never in the cache.
#include "bench_prefix.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "bench_stat.h"
#include "common.h"
#include "runtime/engine_impl.h"

namespace ember::cli {

namespace {

struct FirstToken {
    double seconds = 0;
    int64_t cached = 0;  // prompt tokens the prefix cache restored
};

// Adds a one-token sequence and steps the engine until its token comes.
Expected<FirstToken> time_first_token(Engine& e, std::vector<int32_t> prompt) {
    SequenceParams p;
    p.prompt = std::move(prompt);
    p.max_tokens = 1;
    const double t0 = now_s();
    EMBER_ASSIGN(const SequenceId id, e.add(std::move(p)));
    for (;;) {
        bool got = false;
        FirstToken r;
        std::string failed;
        e.step([&](const StepEvent& ev) {
            if (ev.id != id) return;
            if (ev.has_token && !got) got = true, r.seconds = now_s() - t0, r.cached = ev.cached_tokens;
            if (ev.end == SequenceEnd::FAILED) failed = ev.error.empty() ? "failed" : ev.error;
        });
        if (!failed.empty()) return errorf("%s", failed.c_str());
        if (got) return r;
        if (e.running() == 0) return errorf("the sequence ended without a token");
    }
}

}  // namespace

const char* prefix_table_header() {
    return "| model | weights | device | test | cold TTFT ms | warm TTFT ms | warm/cold | cached tokens | cold prefill t/s "
           "| cold: checkpoints ms | warm: restore ms | no cache TTFT ms | warm/no cache |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
}

int bench_prefix(const CausalLM& lm, const std::string& label, const std::string& dev, const std::vector<long>& lengths,
                 long reps, int64_t cache_bytes) {
    const ModelInfo& info = lm.info();
    const int64_t V = info.vocab_size, ctx = info.max_context;
    if (V < 2) return fail("bench", "--prefix-ttft: a vocabulary of at least 2 tokens is needed");
    EngineOptions eo;
    eo.max_sequences = 1;  // one sequence at a time: the cold one ends and frees its slot before the warm one
    eo.prefix_cache_bytes = cache_bytes;
    auto e = make_engine(lm, eo);
    if (!e) return fail("bench", e.message());
    Engine& engine = e.value();
    eo.prefix_cache_bytes = 0;
    auto e_off = make_engine(lm, eo);
    if (!e_off) return fail("bench", e_off.message());
    if (engine.stats().prefix_cache_budget_bytes == 0)
        return fail("bench", "--prefix-ttft: " + label + " cannot snapshot its state, so it has no prefix cache");
    std::mt19937_64 rng(0x7e57'f1257ull);
    std::uniform_int_distribution<int32_t> token(0, int32_t(V - 1));
    for (const long L : lengths) {
        const int64_t n = L + kPrefixTail;
        if (ctx > 0 && n > ctx)
            return fail("bench", strfmt("--prefix-ttft %ld: %lld tokens with the %lld-token tail do not fit the context "
                                        "of %lld tokens (the model's)",
                                        L, (long long)n, (long long)kPrefixTail, (long long)ctx));
        std::vector<double> cold_s, warm_s, offer_ms, restore_ms, off_s;
        int64_t cached = -1;
        for (long r = 0; r <= reps; ++r) {  // r = 0: warm-up
            std::vector<int32_t> cold(static_cast<size_t>(n)), warm;
            for (int32_t& t : cold) t = token(rng);
            warm = cold;
            for (int64_t i = L; i < n; ++i)  // another tail, different at every position
                warm[size_t(i)] = int32_t((int64_t(cold[size_t(i)]) + 1 + token(rng) % (V - 1)) % V);
            const EngineStats s0 = engine.stats();
            auto off = time_first_token(e_off.value(), cold);
            if (!off) return fail("bench", "--prefix-ttft without the cache: " + off.message());
            if (off->cached != 0) return fail("bench", "--prefix-ttft: an engine without a prefix cache restored tokens");
            auto c = time_first_token(engine, std::move(cold));
            if (!c) return fail("bench", "--prefix-ttft cold: " + c.message());
            const EngineStats s1 = engine.stats();
            auto w = time_first_token(engine, std::move(warm));
            if (!w) return fail("bench", "--prefix-ttft warm: " + w.message());
            const EngineStats s2 = engine.stats();
            if (c->cached != 0)
                return fail("bench", strfmt("--prefix-ttft: the cold prompt found %lld cached tokens (a fresh prefix "
                                            "should find none)", (long long)c->cached));
            if (w->cached <= 0)
                return fail("bench", strfmt("--prefix-ttft %ld: the warm prompt found nothing cached (a budget of "
                                            "%lld MiB too small for one prefix?)", L, (long long)(cache_bytes >> 20)));
            cached = cached < 0 ? w->cached : std::min(cached, w->cached);
            if (r == 0) continue;
            cold_s.push_back(c->seconds * 1e3);
            warm_s.push_back(w->seconds * 1e3);
            off_s.push_back(off->seconds * 1e3);
            offer_ms.push_back(double(s1.prefix_cache_checkpoint_ns - s0.prefix_cache_checkpoint_ns) / 1e6);
            restore_ms.push_back(double(s2.prefix_cache_restore_ns - s1.prefix_cache_restore_ns) / 1e6);
        }
        const Stat c = stat(cold_s), w = stat(warm_s), o = stat(offer_ms), rs = stat(restore_ms), nc = stat(off_s);
        std::printf("| %s | %s | %s | prefix-ttft %ld+%lld | %.2f ± %.2f | %.2f ± %.2f | %.3f | %lld | %.1f | %.2f | "
                    "%.2f | %.2f ± %.2f | %.3f |\n",
                    label.c_str(), human_bytes(double(info.weight_bytes)).c_str(), dev.c_str(), L,
                    (long long)kPrefixTail, c.mean, c.sd, w.mean, w.sd, c.mean > 0 ? w.mean / c.mean : 0.0,
                    (long long)cached, c.mean > 0 ? double(n) / (c.mean / 1e3) : 0.0, o.mean, rs.mean, nc.mean, nc.sd,
                    nc.mean > 0 ? w.mean / nc.mean : 0.0);
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace ember::cli
