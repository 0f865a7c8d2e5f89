// `ember bench --batch B[,B...]`: the batched engine's aggregate decode. Per batch size B: B sequences get a
// --batch-prompt-token prompt each (batch_prefill), then -n steps of all B rows (batch_decode_greedy: one graph
// launch per step on CUDA); the decode time of the steps gives the aggregate tok/s (B·n / t) and per stream
// (n / t). Floor per step: the weights once + each sequence's recurrent state read and written + its KV rows at
// the mean context, over the copy bandwidth of the run. --sample: the steps are batch_decode_sample (every row
// T 0.8, top-p 0.9, repetition penalty 1.1 with its own seed) instead.
#include "bench_batch.h"

#include <cstdio>
#include <vector>

#include "bench_stat.h"
#include "common.h"

namespace ember::cli {

int bench_batch(const CausalLM& lm, const std::string& label, const std::string& dev, const std::vector<long>& sizes,
                long prompt, long steps, long reps, double bw_gbs, bool profile, bool sample) {
    const ModelInfo& info = lm.info();
    const int64_t V = info.vocab_size;
    if (sample && !lm.has_batch_sampler()) return fail("bench", "--sample: this model has no batched device sampler");
    for (const long B : sizes) {
        auto bp = lm.new_batch(B);
        if (!bp) return fail("bench", bp.message());
        BatchState& b = **bp;
        const size_t nb = static_cast<size_t>(B);
        std::vector<int32_t> slots(nb), toks(nb), ids(nb);
        std::vector<SamplingParams> sp(nb);
        std::vector<std::vector<int32_t>> hist(nb);
        std::vector<const SamplingParams*> sp_of(nb);
        std::vector<const std::vector<int32_t>*> hist_of(nb);
        for (size_t s = 0; s < nb; ++s) {
            sp[s].temperature = 0.8f, sp[s].top_p = 0.9f, sp[s].repetition_penalty = 1.1f, sp[s].seed = 1 + s;
            sp_of[s] = &sp[s];
            hist_of[s] = &hist[s];
        }
        std::vector<double> agg, gpu_us;
        double prefill_s = 0;
        for (long r = 0; r <= reps; ++r) {
            double t0 = now_s();
            for (long s = 0; s < B; ++s) {
                if (Status st = lm.batch_reset(b, s); !st) return fail("bench", st.message());
                std::vector<int32_t> p(static_cast<size_t>(prompt));
                for (long i = 0; i < prompt; ++i) p[size_t(i)] = static_cast<int32_t>((i * 7919 + 13 + s * 104729) % V);
                if (Status st = lm.batch_prefill(b, s, p.data(), prompt, nullptr); !st) return fail("bench", st.message());
                slots[size_t(s)] = static_cast<int32_t>(s);
                toks[size_t(s)] = static_cast<int32_t>((s * 31 + 7) % V);
                hist[size_t(s)] = p;
                hist[size_t(s)].push_back(toks[size_t(s)]);
            }
            if (r > 0) prefill_s += now_s() - t0;
            t0 = now_s();
            double g = 0;
            for (long i = 0; i < steps; ++i) {
                const Status st = sample ? lm.batch_decode_sample(b, slots.data(), toks.data(), B, sp_of.data(),
                                                                  hist_of.data(), ids.data())
                                         : lm.batch_decode_greedy(b, slots.data(), toks.data(), B, ids.data());
                if (!st) return fail("bench", st.message());
                toks = ids;
                if (sample)
                    for (size_t s = 0; s < nb; ++s) hist[s].push_back(ids[s]);
                g += lm.last_batch_stats(b).gpu_us;
            }
            const double t = now_s() - t0;
            if (r > 0) {
                agg.push_back(double(B * steps) / t);
                gpu_us.push_back(g / double(steps));
            }
        }
        const Stat a = stat(agg);
        const double mean = a.mean, sd = a.sd, gmean = stat(gpu_us).mean;
        const double step_bytes = double(info.weight_bytes) +
                                  double(B) * (2.0 * double(info.state_bytes) +
                                               double(info.kv_bytes_per_token) * (double(prompt) + double(steps) / 2.0));
        const double floor_us = bw_gbs > 0 ? step_bytes / (bw_gbs * 1e9) * 1e6 : 0;
        const double step_us = 1e6 * double(B) / mean;
        std::printf("| %s | %s | %s | batch %ld%s: pp%ld + tg%ld | %.1f ± %.1f aggregate, %.1f per stream | %.1f %% | %.1f | | %s | %.1f |\n",
                    label.c_str(), human_bytes(double(info.weight_bytes)).c_str(), dev.c_str(), B,
                    sample ? " sampled" : "", prompt, steps, mean,
                    sd, mean / double(B), floor_us > 0 ? 100.0 * floor_us / step_us : 0.0, floor_us,
                    gmean > 0 ? strfmt("%.1f", gmean).c_str() : "-", step_us - gmean);
        std::printf("|  |  |  | batch %ld prefill: %.1f tok/s (%ld sequences × %ld tokens, one at a time) | | | | | | |\n",
                    B, double(B * prompt * reps) / prefill_s, B, prompt);
        if (profile) {  // where one more step's GPU time goes (every kernel node alone)
            auto t = lm.batch_profile(b, slots.data(), toks.data(), B);
            if (!t) return fail("bench", t.message());
            std::printf("\nbatch %ld, one step:\n%s\n", B, t->c_str());
        }
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace ember::cli
