// ember CLI entry point: dispatches to the subcommands in cmd_*.cpp.
#include <cstdio>
#include <cstring>

#include "commands.h"

namespace {
struct Command {
    const char* name;
    int (*fn)(int, char**);
    const char* help;
};
const Command kCommands[] = {
    {"generate", ember::cli::cmd_generate, "generate text from a prompt"},
    {"logits", ember::cli::cmd_logits, "write raw float32 logits for a token sequence"},
    {"tokenize", ember::cli::cmd_tokenize, "print the token ids of a text"},
    {"convert", ember::cli::cmd_convert, "convert an HF bf16 checkpoint to MLX affine 4/8-bit"},
    {"info", ember::cli::cmd_info, "describe a model: architecture, sizes, quantization, memory"},
    {"perplexity", ember::cli::cmd_perplexity, "llama.cpp-compatible perplexity of a text file"},
    {"bench", ember::cli::cmd_bench, "prefill / decode throughput vs the memory-bandwidth floor"},
    {"serve", ember::cli::cmd_serve, "OpenAI-compatible HTTP server with a web chat page"},
    {"chat", ember::cli::cmd_chat, "interactive chat in the terminal"},
};

void usage() {
    std::fprintf(stderr, "usage: ember <command> [options]   (ember <command> --help for its options)\n\n");
    for (const auto& c : kCommands) std::fprintf(stderr, "  %-10s %s\n", c.name, c.help);
}
}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    for (const auto& c : kCommands)
        if (!std::strcmp(argv[1], c.name)) return c.fn(argc - 1, argv + 1);
    std::fprintf(stderr, "ember: unknown command '%s'\n\n", argv[1]);
    usage();
    return 2;
}
