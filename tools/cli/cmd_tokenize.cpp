// cmd_tokenize.cpp: `ember tokenize -m PATH [-p TEXT | --file FILE]` prints the token ids, comma-separated.
// PATH is a model directory, a tokenizer.json or a .gguf file. No BOS/EOS is added unless --add-special;
// added/special token strings in the text are recognised (HF encode(text, add_special_tokens=False)) unless
// --no-parse-special. FILE is read as raw bytes.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {
namespace {

const char* kUsage =
    "usage: ember tokenize -m PATH [-p TEXT | --file FILE]\n"
    "  -m, --model PATH   model directory (with tokenizer.json), a tokenizer.json file or a .gguf file\n"
    "  -p, --prompt TEXT  text to tokenize\n"
    "  -f, --file FILE    read the text from FILE (raw bytes)\n"
    "  --add-special      add BOS/EOS as the model does (llama.cpp add_special)\n"
    "  --no-parse-special treat special-token strings in the text as plain text\n"
    "prints the token ids comma-separated on one line (no BOS/EOS added by default)\n";

int fail_tok(const std::string& msg) {
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
    const bool add_special = args.flag({"--add-special"}), parse_special = !args.flag({"--no-parse-special"});
    if (std::string err = args.error(); !err.empty()) return fail_tok(err + "\n" + kUsage);
    if (model.empty()) return fail_tok(std::string("missing -m PATH\n") + kUsage);
    if (has_prompt == has_file) return fail_tok(std::string("give exactly one of -p TEXT or --file FILE\n") + kUsage);

    std::string text = prompt;
    if (has_file) {
        std::ifstream f(file, std::ios::binary);
        if (!f) return fail_tok("cannot open '" + file + "'");
        std::ostringstream ss;
        ss << f.rdbuf();
        text = ss.str();
    }
    std::unique_ptr<Tokenizer> tok;
    if (is_gguf_path(model)) {
        auto t = open_tokenizer(model);
        if (!t) return fail_tok(t.message());
        tok = std::move(t.value());
    } else {
        auto t = Tokenizer::load(model);
        if (!t) return fail_tok(t.message());
        tok = std::make_unique<Tokenizer>(std::move(t.value()));
    }
    std::string out;
    for (int32_t id : tok->encode(text, add_special, parse_special)) {
        if (!out.empty()) out += ',';
        out += std::to_string(id);
    }
    std::printf("%s\n", out.c_str());
    return 0;
}

}  // namespace ember::cli
