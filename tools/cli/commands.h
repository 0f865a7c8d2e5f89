// The ember subcommands; each lives in its own cmd_<name>.cpp and returns a process exit code.
#pragma once

namespace ember::cli {
int cmd_generate(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_chat(int argc, char** argv);
}  // namespace ember::cli
