// cmd_tokenize.cpp: `ember tokenize -m PATH [-p TEXT | --file FILE]` prints the token ids, comma-separated.
// PATH is a model directory or a tokenizer.json. No BOS/EOS is added; added/special token strings in the
// text are recognised (HF encode(text, add_special_tokens=False)). FILE is read as raw bytes.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "args.h"
#include "commands.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {
namespace {

const char* kUsage =
    "usage: ember tokenize -m PATH [-p TEXT | --file FILE]\n"
    "  -m, --model PATH   model directory (with tokenizer.json) or a tokenizer.json file\n"
    "  -p, --prompt TEXT  text to tokenize\n"
    "  -f, --file FILE    read the text from FILE (raw bytes)\n"
    "prints the token ids comma-separated on one line (no BOS/EOS added)\n";

int fail(const std::string& msg) {
    std::fprintf(stderr, "ember tokenize: %s\n", msg.c_str());
    return 1;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
    Args args(argc, argv);
    if (args.flag({"--help", "-h"})) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    std::string model = args.str({"-m", "--model"});
    bool has_prompt = args.has({"-p", "--prompt"}), has_file = args.has({"-f", "--file"});
    std::string prompt = args.str({"-p", "--prompt"});
    std::string file = args.str({"-f", "--file"});
    if (std::string err = args.error(); !err.empty()) return fail(err + "\n" + kUsage);
    if (model.empty()) return fail(std::string("missing -m PATH\n") + kUsage);
    if (has_prompt == has_file) return fail(std::string("give exactly one of -p TEXT or --file FILE\n") + kUsage);

    std::string text = prompt;
    if (has_file) {
        std::ifstream f(file, std::ios::binary);
        if (!f) return fail("cannot open '" + file + "'");
        std::ostringstream ss;
        ss << f.rdbuf();
        text = ss.str();
    }
    auto tok = Tokenizer::load(model);
    if (!tok) return fail(tok.message());
    std::string out;
    for (int32_t id : tok->encode(text)) {
        if (!out.empty()) out += ',';
        out += std::to_string(id);
    }
    std::printf("%s\n", out.c_str());
    return 0;
}

}  // namespace ember::cli
