// batch_generate: several prompts generated together by one ember::Engine — the library API (include/ember/) in
// one page. Prompts join as slots free up (continuous batching); each step advances every live sequence.
//
//   batch_generate MODEL [-n N] [--temp T] [--seed S] [--max-seqs K] [--device D] [--ids] PROMPT...
//
// Prints each prompt with its continuation; --ids prints "i<TAB>prompt ids<TAB>generated ids" instead.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ember/ember.h"

namespace {

int fail(const std::string& msg) {
    std::fprintf(stderr, "batch_generate: %s\n", msg.c_str());
    return 1;
}

std::string join(const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(ids[i]);
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    std::string path, device = "auto";
    long n = 32, max_seqs = 4;
    float temp = 0;
    unsigned long long seed = 0;
    bool print_ids = false;
    std::vector<std::string> prompts;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "-n" && has_value) n = std::atol(argv[++i]);
        else if (a == "--temp" && has_value) temp = float(std::atof(argv[++i]));
        else if (a == "--seed" && has_value) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--max-seqs" && has_value) max_seqs = std::atol(argv[++i]);
        else if (a == "--device" && has_value) device = argv[++i];
        else if (a == "--ids") print_ids = true;
        else if (path.empty()) path = a;
        else prompts.push_back(a);
    }
    if (path.empty() || prompts.empty())
        return fail("usage: batch_generate MODEL [-n N] [--temp T] [--seed S] [--max-seqs K] [--device D] [--ids] "
                    "PROMPT...");

    ember::ModelOptions mo;
    mo.device = device;
    ember::Expected<ember::Model> model = ember::Model::load(path, mo);
    if (!model) return fail(model.message());
    ember::EngineOptions eo;
    eo.max_sequences = int(max_seqs);
    ember::Expected<ember::Engine> engine = ember::Engine::create(*model, eo);
    if (!engine) return fail(engine.message());

    std::vector<std::vector<int32_t>> prompt_ids(prompts.size()), out(prompts.size());
    std::map<ember::SequenceId, size_t> which;  // sequence → prompt
    size_t next = 0;
    // Prompts take the free slots: all at once when they fit, else as earlier ones finish.
    auto admit = [&]() -> ember::Status {
        for (; next < prompts.size() && engine->free_slots() > 0; ++next) {
            ember::Expected<std::vector<int32_t>> ids = model->encode(prompts[next]);
            if (!ids) return ids.status();
            prompt_ids[next] = *ids;
            ember::SequenceParams p;
            p.prompt = *ids;
            p.max_tokens = n;
            p.sampling.temperature = temp;
            p.sampling.seed = seed + next;  // each sequence its own stream: the same tokens alone or together
            p.stop_ids = model->eos_ids();
            ember::Expected<ember::SequenceId> id = engine->add(std::move(p));
            if (!id) return id.status();
            which[*id] = next;
        }
        return ember::Status::ok();
    };
    for (ember::Status st = admit(); engine->running() > 0 || next < prompts.size(); st = admit()) {
        if (!st) return fail(st.message());
        for (const ember::StepEvent& e : engine->step()) {
            if (e.has_token) out[which[e.id]].push_back(e.token.id);
            if (e.end == ember::SequenceEnd::FAILED) return fail(e.error);
        }
    }

    for (size_t i = 0; i < prompts.size(); ++i) {
        if (print_ids) {
            std::printf("%zu\t%s\t%s\n", i, join(prompt_ids[i]).c_str(), join(out[i]).c_str());
            continue;
        }
        ember::Expected<std::string> text = model->decode(out[i]);
        if (!text) return fail(text.message());
        std::printf("[%zu] %s%s\n", i, prompts[i].c_str(), text->c_str());
    }
    return 0;
}
