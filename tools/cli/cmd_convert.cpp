// `ember convert`: HF Qwen3.5 bf16 checkpoint → MLX affine-quantized checkpoint (same layout as mlx_lm.convert -q).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "models/convert.h"

namespace ember::cli {

namespace {

const char* kUsage =
    "usage: ember convert --in HF_DIR --out DIR [--bits 4] [--group-size 64] [--dtype bf16]\n"
    "                     [--max-shard-size 5GiB] [--force] [--quiet]\n"
    "\n"
    "Quantizes an HF Qwen3.5 checkpoint (bf16/f16/f32; multimodal or text-only; single or sharded) to MLX affine\n"
    "format, in the layout mlx-lm writes: language_model.model.* names, every Linear/Embedding whose input dim is\n"
    "divisible by the group size quantized (U32 weight + scales/biases), +1 on the zero-centred norms, conv1d as\n"
    "[C, K, 1]; MTP and vision tensors dropped. config.json gets the quantization block; tokenizer files are copied.\n"
    "\n"
    "  --in, -i DIR           HF checkpoint directory (config.json + *.safetensors)\n"
    "  --out, -o DIR          output directory (must not exist or be empty, unless --force)\n"
    "  --bits N               2, 3, 4, 5, 6 or 8 (default 4)\n"
    "  --group-size N         32, 64 or 128 (default 64)\n"
    "  --dtype T              bf16 (default), f16 or f32: scales/biases and unquantized float tensors\n"
    "  --max-shard-size S     split the weights into files of at most S bytes (suffix K/M/G[i]B; default 5GiB)\n"
    "  --force                write into a non-empty output directory (old weight files are replaced)\n"
    "  --quiet, -q            no progress output\n";

// "5GiB", "500MB", "1G", "123" → bytes (binary multiples either way, as mlx-lm's `<< 30`).
bool parse_size(const std::string& s, uint64_t* out) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (!end || end == s.c_str() || v <= 0) return false;
    std::string suf(end);
    for (auto& c : suf) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double mul = 1;
    if (suf.empty() || suf == "B") mul = 1;
    else if (suf == "K" || suf == "KB" || suf == "KIB") mul = 1024.0;
    else if (suf == "M" || suf == "MB" || suf == "MIB") mul = 1024.0 * 1024;
    else if (suf == "G" || suf == "GB" || suf == "GIB") mul = 1024.0 * 1024 * 1024;
    else return false;
    *out = static_cast<uint64_t>(v * mul);
    return *out > 0;
}

// Progress on stderr: a redrawn bar when stderr is a terminal, else one line per ~10% (logs stay readable).
class Progress {
public:
    Progress() : tty_(::isatty(STDERR_FILENO) == 1) {}
    void operator()(const ConvertProgress& p) {
        double frac = p.bytes_in_total ? static_cast<double>(p.bytes_in) / p.bytes_in_total : 1.0;
        double mbs = p.seconds > 0 ? p.bytes_in / 1e6 / p.seconds : 0.0;
        bool last = p.tensors_done == p.tensors_total;
        if (tty_) {
            if (!last && p.seconds - last_draw_ < 0.1) return;
            last_draw_ = p.seconds;
            const int width = 30;
            int fill = static_cast<int>(frac * width);
            std::string bar(static_cast<size_t>(fill), '=');
            if (fill < width) bar += '>' + std::string(static_cast<size_t>(width - fill - 1), ' ');
            std::string name = p.tensor.size() > 48 ? "…" + p.tensor.substr(p.tensor.size() - 47) : p.tensor;
            std::fprintf(stderr, "\r\033[K[%s] %3.0f%%  %lld/%lld tensors  %.0f MB/s  %s", bar.c_str(), frac * 100,
                         (long long)p.tensors_done, (long long)p.tensors_total, mbs, name.c_str());
            if (last) std::fprintf(stderr, "\n");
            std::fflush(stderr);
            return;
        }
        int decile = static_cast<int>(std::floor(frac * 10 + 1e-9));
        if (decile <= last_decile_ && !last) return;
        if (last && last_decile_ >= 10) return;
        last_decile_ = decile;
        std::fprintf(stderr, "convert: %3.0f%%  %lld/%lld tensors  %.1f/%.1f MB  %.0f MB/s\n", frac * 100,
                     (long long)p.tensors_done, (long long)p.tensors_total, p.bytes_in / 1e6, p.bytes_in_total / 1e6,
                     mbs);
    }

private:
    bool tty_;
    double last_draw_ = -1;
    int last_decile_ = 0;
};

}  // namespace

int cmd_convert(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) {
        std::printf("%s", kUsage);
        return 0;
    }
    ConvertOptions opt;
    std::string in = a.str({"--in", "-i"}), out = a.str({"--out", "-o"});
    opt.bits = static_cast<int>(a.integer({"--bits", "-b"}, 4));
    opt.group_size = static_cast<int>(a.integer({"--group-size", "-g"}, 64));
    std::string dtype = a.str({"--dtype"}, "bf16"), shard = a.str({"--max-shard-size"});
    opt.force = a.flag({"--force", "-f"});
    bool quiet = a.flag({"--quiet", "-q"});
    if (!a.error().empty()) return fail("convert", a.error() + "\n" + kUsage);
    if (in.empty() || out.empty()) return fail("convert", std::string("--in and --out are required\n") + kUsage);
    if (dtype == "bf16" || dtype == "bfloat16") opt.dtype = DType::BF16;
    else if (dtype == "f16" || dtype == "float16") opt.dtype = DType::F16;
    else if (dtype == "f32" || dtype == "float32") opt.dtype = DType::F32;
    else return fail("convert", "--dtype must be bf16, f16 or f32 (got '" + dtype + "')");
    if (!shard.empty() && !parse_size(shard, &opt.max_shard_bytes))
        return fail("convert", "--max-shard-size: not a size: '" + shard + "' (e.g. 5GiB, 500MB)");
    Progress progress;
    if (!quiet) opt.on_progress = [&](const ConvertProgress& p) { progress(p); };

    auto r = convert_hf_to_mlx(in, out, opt);
    if (!r) return fail("convert", r.message());
    const ConvertReport& rep = *r;
    std::printf("wrote %s: %lld tensors in %zu file(s), %.1f MB (from %.1f MB), %.1f s\n", out.c_str(),
                (long long)rep.tensors_out, rep.shards, rep.bytes_out / 1e6, rep.bytes_in / 1e6, rep.seconds);
    std::printf("  affine %d-bit, group %d: %lld weights quantized, %lld Linear kept dense (input dim not a multiple "
                "of %d)\n", opt.bits, opt.group_size, (long long)rep.quantized, (long long)rep.dense_linear,
                opt.group_size);
    std::printf("  dropped: %lld MTP, %lld vision, %lld tied lm_head tensors\n", (long long)rep.dropped_mtp,
                (long long)rep.dropped_vision, (long long)rep.dropped_lm_head);
    std::string copied;
    for (const auto& f : rep.copied) copied += " " + f;
    std::printf("  copied:%s\n", copied.empty() ? " (no tokenizer files found)" : copied.c_str());
    for (const auto& n : rep.notes) std::fprintf(stderr, "ember convert: %s\n", n.c_str());
    return 0;
}

}  // namespace ember::cli
