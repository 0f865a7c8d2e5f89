// `ember info`: architecture, sizes, quantization, parameter count and memory needed.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "common.h"

namespace ember::cli {

int cmd_info(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) {
        std::printf("usage: ember info (-m MODEL | --synthetic NAME) [--context N]\n");
        return 0;
    }
    std::string model = a.str({"-m", "--model"}), synth = a.str({"--synthetic"});
    long ctx = a.integer({"--context", "-c"}, 4096);
    if (!a.error().empty()) return fail("info", a.error());
    auto m = open_model(model, synth);
    if (!m) return fail("info", m.message());
    const ModelInfo& i = (*m)->info();
    std::printf("model:         %s\n", i.source.c_str());
    std::printf("architecture:  %s\n", i.architecture.c_str());
    std::printf("weights:       %s\n", i.weight_format.c_str());
    std::printf("parameters:    %.3f B (%lld)\n", i.n_params / 1e9, (long long)i.n_params);
    std::printf("hidden size:   %lld, layers %lld, vocab %lld, max context %lld\n", (long long)i.hidden_size,
                (long long)i.num_layers, (long long)i.vocab_size, (long long)i.max_context);
    std::printf("%s", i.details.c_str());
    std::printf("weights read per decode token: %s\n", human_bytes(static_cast<double>(i.weight_bytes)).c_str());
    std::printf("recurrent state per sequence:  %s\n", human_bytes(static_cast<double>(i.state_bytes)).c_str());
    std::printf("KV cache per token (fp32):     %s (bf16, the CUDA default: %s)\n",
                human_bytes(static_cast<double>(i.kv_bytes_per_token)).c_str(),
                human_bytes(static_cast<double>(i.kv_bytes_per_token) / 2).c_str());
    double total = static_cast<double>(i.weight_bytes) + i.state_bytes + static_cast<double>(i.kv_bytes_per_token) * ctx;
    std::printf("memory needed at %ld tokens of context: %s\n", ctx, human_bytes(total).c_str());
    return 0;
}

}  // namespace ember::cli
