// HF → MLX affine conversion for Qwen3.5 (see convert.h; mirrors mlx_lm.convert + qwen3_5.Model.sanitize).
#include "models/convert.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "core/parallel.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "models/qwen35_config.h"
#include "quant/affine.h"

namespace ember {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::vector<std::string>& convert_side_files() {
    static const std::vector<std::string> k = {
        "tokenizer.json",   "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
        "generation_config.json", "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json"};
    return k;
}

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const char* p) {
    const size_t n = std::char_traits<char>::length(p);
    return s.size() >= n && s.compare(s.size() - n, n, p) == 0;
}

enum class Kind : uint8_t {
    LINEAR,      // nn.Linear / nn.Embedding weight [out, in]: quantized when in % group_size == 0
    NORM_SHIFT,  // zero-centred RMSNorm weight: 1 + w
    CAST,        // plain float tensor (dt_bias, linear_attn.norm): cast to the output dtype
    CONV,        // depthwise conv [C, 1, K] → [C, K, 1]
    KEEP,        // A_log: stored dtype kept (mlx-lm cast_predicate)
};

struct Expect {
    std::vector<int64_t> shape;  // HF shape
    Kind kind;
};

// The HF text-model tensors a config implies, in model order (canonical names "model.…", "lm_head.weight").
struct ExpectedSet {
    std::vector<std::string> order;
    std::map<std::string, Expect> by_name;
    void add(const std::string& n, std::vector<int64_t> shape, Kind k) {
        order.push_back(n);
        by_name[n] = {std::move(shape), k};
    }
};

ExpectedSet expected_tensors(const Qwen35Config& c) {
    ExpectedSet e;
    const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
    const int64_t nv = c.linear_num_value_heads, dv = c.linear_value_head_dim, K = c.linear_conv_kernel_dim;
    e.add("model.embed_tokens.weight", {V, H}, Kind::LINEAR);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        std::string p = "model.layers." + std::to_string(l) + ".";
        e.add(p + "input_layernorm.weight", {H}, Kind::NORM_SHIFT);
        if (c.layer_types[l] == LayerType::LINEAR_ATTENTION) {
            const std::string a = p + "linear_attn.";
            e.add(a + "A_log", {nv}, Kind::KEEP);
            e.add(a + "conv1d.weight", {c.conv_dim(), 1, K}, Kind::CONV);
            e.add(a + "dt_bias", {nv}, Kind::CAST);
            e.add(a + "in_proj_a.weight", {nv, H}, Kind::LINEAR);
            e.add(a + "in_proj_b.weight", {nv, H}, Kind::LINEAR);
            e.add(a + "in_proj_qkv.weight", {c.conv_dim(), H}, Kind::LINEAR);
            e.add(a + "in_proj_z.weight", {nv * dv, H}, Kind::LINEAR);
            e.add(a + "norm.weight", {dv}, Kind::CAST);  // gated norm: plain weight, no +1
            e.add(a + "out_proj.weight", {H, nv * dv}, Kind::LINEAR);
        } else {
            const std::string a = p + "self_attn.";
            e.add(a + "k_norm.weight", {hd}, Kind::NORM_SHIFT);
            e.add(a + "k_proj.weight", {nkv * hd, H}, Kind::LINEAR);
            e.add(a + "o_proj.weight", {H, nh * hd}, Kind::LINEAR);
            e.add(a + "q_norm.weight", {hd}, Kind::NORM_SHIFT);
            e.add(a + "q_proj.weight", {2 * nh * hd, H}, Kind::LINEAR);  // query + output gate, per head
            e.add(a + "v_proj.weight", {nkv * hd, H}, Kind::LINEAR);
        }
        e.add(p + "mlp.down_proj.weight", {H, I}, Kind::LINEAR);
        e.add(p + "mlp.gate_proj.weight", {I, H}, Kind::LINEAR);
        e.add(p + "mlp.up_proj.weight", {I, H}, Kind::LINEAR);
        e.add(p + "post_attention_layernorm.weight", {H}, Kind::NORM_SHIFT);
    }
    e.add("model.norm.weight", {H}, Kind::NORM_SHIFT);
    if (!c.tie_word_embeddings) e.add("lm_head.weight", {V, H}, Kind::LINEAR);
    return e;
}

enum class Group : uint8_t { LM, MTP, VISION, UNKNOWN };

// HF stored name → canonical text-model name (Qwen3_5ForConditionalGeneration or Qwen3_5ForCausalLM layout).
Group classify(const std::string& n, std::string* canon) {
    if (starts_with(n, "mtp.") || starts_with(n, "model.mtp.")) return Group::MTP;
    for (const char* v : {"model.visual.", "visual.", "model.vision_tower.", "vision_tower."})
        if (starts_with(n, v)) return Group::VISION;
    if (starts_with(n, "model.language_model.")) {
        *canon = "model." + n.substr(21);
        return Group::LM;
    }
    if (n == "lm_head.weight" || starts_with(n, "model.")) {
        *canon = n;
        return Group::LM;
    }
    return Group::UNKNOWN;
}

// MLX module path for a canonical name: model.X → language_model.model.X, lm_head.X → language_model.lm_head.X.
std::string mlx_name(const std::string& canon) { return "language_model." + canon; }

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// The value x takes after astype(t).
inline float round_to(DType t, float x) {
    if (t == DType::F32) return x;
    uint16_t h;
    store_float(&h, t, 0, x);
    return load_float(&h, t, 0);
}

struct Job {
    const TensorInfo* src;
    std::string base;   // output module path without ".weight" (or full name for non-.weight tensors)
    std::string out;    // output tensor name (the .weight one for quantized linears)
    Kind kind;
    bool quantize = false;
};

class Converter {
public:
    Converter(const ConvertOptions& opt, CheckpointWriter* w, uint64_t bytes_in_total, int64_t total)
        : opt_(opt), w_(w), t0_(std::chrono::steady_clock::now()) {
        p_.bytes_in_total = bytes_in_total;
        p_.tensors_total = total;
    }

    Status run(const Job& j) {
        p_.tensor = j.src->name;
        EMBER_TRY(j.quantize ? quantize(j) : elementwise(j));
        release(j.src->data, j.src->nbytes);
        p_.tensors_done++;
        report();
        return Status::ok();
    }

private:
    // Drops the pages of a finished input tensor from our mapping (read-only file pages: re-read on demand),
    // so resident memory stays at one tensor instead of growing to the whole input.
    static void release(const void* p, size_t n) {
        const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
        uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
        uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
        if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
    }
    void report() {
        if (!opt_.on_progress) return;
        p_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        opt_.on_progress(p_);
    }
    Status put(const std::string& name, const void* data, size_t n) {
        EMBER_TRY(w_->write(name, data, n));
        p_.bytes_out += n;
        return Status::ok();
    }

    // Linear [R, C] → packed U32 [R, C·bits/32] + scales/biases [R, C/G], in row blocks of ~16 MiB of fp32.
    Status quantize(const Job& j) {
        const TensorInfo& t = *j.src;
        const int64_t R = t.shape[0], C = t.shape[1], G = opt_.group_size, ng = C / G;
        const int64_t W = affine_row_words(C, opt_.bits);
        const size_t osz = dtype_size(opt_.dtype), isz = dtype_size(t.dtype);
        const int64_t block = std::max<int64_t>(1, (16 << 20) / (C * 4));
        std::vector<uint32_t> packed;
        std::vector<uint8_t> scales, biases;
        for (int64_t r0 = 0; r0 < R; r0 += block) {
            const int64_t nr = std::min(block, R - r0);
            packed.assign(static_cast<size_t>(nr * W), 0);
            scales.resize(static_cast<size_t>(nr * ng) * osz);
            biases.resize(static_cast<size_t>(nr * ng) * osz);
            parallel_for(nr, 8, [&](int64_t b, int64_t e) {
                std::vector<float> row(C), s(ng), bi(ng);
                for (int64_t r = b; r < e; ++r) {
                    const int64_t src_row = (r0 + r) * C;
                    // mlx-lm casts to the model dtype first, then quantizes those values.
                    for (int64_t c = 0; c < C; ++c)
                        row[c] = round_to(opt_.dtype, load_float(t.data, t.dtype, src_row + c));
                    affine_quantize_row(row.data(), C, opt_.bits, G, packed.data() + r * W, s.data(), bi.data());
                    for (int64_t g = 0; g < ng; ++g) {
                        store_float(scales.data(), opt_.dtype, r * ng + g, s[g]);
                        store_float(biases.data(), opt_.dtype, r * ng + g, bi[g]);
                    }
                }
            });
            EMBER_TRY(put(j.out, packed.data(), packed.size() * 4));
            EMBER_TRY(put(j.base + ".scales", scales.data(), scales.size()));
            EMBER_TRY(put(j.base + ".biases", biases.data(), biases.size()));
            p_.bytes_in += static_cast<uint64_t>(nr * C) * isz;
            release(t.data + static_cast<size_t>(r0 * C) * isz, static_cast<size_t>(nr * C) * isz);
            if (r0 + nr < R) report();
        }
        return Status::ok();
    }

    // Cast / +1 / keep, in chunks; the conv transpose [C,1,K] → [C,K,1] moves no bytes (the size-1 axis moves).
    Status elementwise(const Job& j) {
        const TensorInfo& t = *j.src;
        if (j.kind == Kind::KEEP) {
            EMBER_TRY(put(j.out, t.data, t.nbytes));
            p_.bytes_in += t.nbytes;
            return Status::ok();
        }
        const int64_t n = t.numel(), chunk = 1 << 20;
        std::vector<uint8_t> buf;
        for (int64_t i0 = 0; i0 < n; i0 += chunk) {
            const int64_t m = std::min(chunk, n - i0);
            buf.resize(static_cast<size_t>(m) * dtype_size(opt_.dtype));
            for (int64_t i = 0; i < m; ++i) {
                float v = load_float(t.data, t.dtype, i0 + i);
                // mlx-lm adds 1.0 in the stored dtype (sanitize runs before the cast).
                if (j.kind == Kind::NORM_SHIFT) v = round_to(t.dtype, v + 1.0f);
                store_float(buf.data(), opt_.dtype, i, v);
            }
            EMBER_TRY(put(j.out, buf.data(), buf.size()));
            p_.bytes_in += static_cast<uint64_t>(m) * dtype_size(t.dtype);
        }
        return Status::ok();
    }

    const ConvertOptions& opt_;
    CheckpointWriter* w_;
    std::chrono::steady_clock::time_point t0_;
    ConvertProgress p_;
};

Expected<std::string> read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return errorf("%s: cannot open", path.c_str());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// config.json as mlx-lm's save_config writes it: input config + quantization blocks, without _name_or_path and
// vision_config (the vision tower is not kept), top-level keys sorted, indent 4.
Status write_config(const std::string& in_text, const std::string& path, const ConvertOptions& opt) {
    ojson cfg = ojson::parse(in_text, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) return errorf("%s: config is not a JSON object", path.c_str());
    cfg.erase("_name_or_path");
    cfg.erase("vision_config");
    // mlx-lm only knows model_type "qwen3_5" (whose ModelArgs takes a flat config as the text config).
    if (cfg.contains("model_type") && cfg["model_type"] == "qwen3_5_text") cfg["model_type"] = "qwen3_5";
    ojson q = ojson::object();
    q["group_size"] = opt.group_size;
    q["bits"] = opt.bits;
    q["mode"] = "affine";
    cfg["quantization"] = q;
    cfg["quantization_config"] = q;
    std::vector<std::string> keys;
    for (auto it = cfg.begin(); it != cfg.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    ojson sorted = ojson::object();
    for (const auto& k : keys) sorted[k] = cfg[k];
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) return errorf("%s: cannot create", path.c_str());
    f << sorted.dump(4);
    f.flush();
    if (!f) return errorf("%s: write failed (disk full?)", path.c_str());
    return Status::ok();
}

bool dir_is_empty(const fs::path& p) {
    std::error_code ec;
    return fs::directory_iterator(p, ec) == fs::directory_iterator();
}

// Our weight files in an existing output directory (replaced under --force so no stale shard lingers).
void remove_old_weights(const fs::path& out) {
    static const std::regex shard(R"(model(-\d{5}-of-\d{5})?\.safetensors|model\.safetensors\.index\.json)");
    std::error_code ec;
    std::vector<fs::path> old;
    for (const auto& e : fs::directory_iterator(out, ec))
        if (std::regex_match(e.path().filename().string(), shard)) old.push_back(e.path());
    for (const auto& p : old) fs::remove(p, ec);
}

Expected<ConvertReport> convert_impl(const std::string& in_dir, const std::string& out_dir, const ConvertOptions& opt,
                                     std::vector<std::string>* created) {
    const auto t0 = std::chrono::steady_clock::now();
    EMBER_REQUIRE(affine_params_valid(opt.bits, opt.group_size),
                  "unsupported quantization: bits %d, group size %d "
                  "(bits 2, 3, 4, 5, 6 or 8; group size 32, 64 or 128)",
                  opt.bits, opt.group_size);
    EMBER_REQUIRE(dtype_is_float(opt.dtype), "output dtype must be bf16, f16 or f32");
    std::error_code ec;
    const fs::path in(in_dir), out(out_dir);
    EMBER_REQUIRE(fs::exists(in, ec), "input %s does not exist", in_dir.c_str());
    EMBER_REQUIRE(fs::is_directory(in, ec), "input %s is not a directory (expected an HF checkpoint directory)",
                  in_dir.c_str());
    const std::string cfg_path = (in / "config.json").string();
    EMBER_REQUIRE(fs::exists(cfg_path, ec), "input %s has no config.json (not an HF checkpoint directory)",
                  in_dir.c_str());

    // --- config: must be a dense, unquantized Qwen3.5
    EMBER_ASSIGN(std::string cfg_text, read_text(cfg_path));
    EMBER_ASSIGN(auto cfg_json, read_json_file(cfg_path));
    EMBER_REQUIRE(cfg_json.is_object(), "%s: not a JSON object", cfg_path.c_str());
    const std::string mt = cfg_json.contains("model_type") && cfg_json["model_type"].is_string()
                               ? cfg_json["model_type"].get<std::string>() : std::string();
    EMBER_REQUIRE(mt != "qwen3_5_moe", "%s: model_type 'qwen3_5_moe' (MoE) is not supported; only dense Qwen3.5",
                  cfg_path.c_str());
    EMBER_REQUIRE(mt == "qwen3_5" || mt == "qwen3_5_text",
                  "%s: not a Qwen3.5 config (model_type '%s'; expected 'qwen3_5' or 'qwen3_5_text')", cfg_path.c_str(),
                  mt.c_str());
    for (const nlohmann::json* j : {&cfg_json, cfg_json.contains("text_config") ? &cfg_json["text_config"] : &cfg_json})
        for (const char* k : {"quantization", "quantization_config"})
            EMBER_REQUIRE(!j->contains(k), "%s: the input is already quantized ('%s' present); convert needs the "
                          "bf16/f16/f32 HF checkpoint", cfg_path.c_str(), k);
    EMBER_ASSIGN(Qwen35Config cfg, Qwen35Config::from_json(cfg_json, cfg_path));
    ConvertReport rep;
    if (mt == "qwen3_5_text")
        rep.notes.push_back("config.json: model_type 'qwen3_5_text' written as 'qwen3_5' (the name mlx-lm loads)");
    {
        // mlx-lm ignores layer_types and places full attention at every full_attention_interval-th layer.
        const nlohmann::json& t = cfg_json.contains("text_config") ? cfg_json["text_config"] : cfg_json;
        int64_t interval = 4;
        if (t.contains("full_attention_interval") && t["full_attention_interval"].is_number_integer())
            interval = t["full_attention_interval"].get<int64_t>();
        for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
            bool full = interval > 0 && (l + 1) % interval == 0;
            if (full != (cfg.layer_types[l] == LayerType::FULL_ATTENTION)) {
                rep.notes.push_back(strfmt("warning: layer_types (layer %lld) differs from the full_attention_interval "
                                           "%lld pattern that mlx-lm assumes (it ignores layer_types): ember loads "
                                           "the output, mlx-lm will not", (long long)l, (long long)interval));
                break;
            }
        }
    }

    // --- input tensors: classify, check against the config
    EMBER_ASSIGN(TensorStore store, TensorStore::open(in_dir));
    ExpectedSet want = expected_tensors(cfg);
    std::map<std::string, const TensorInfo*> found;  // canonical → stored
    for (const auto& [name, t] : store.all()) {
        rep.tensors_in++;
        std::string canon;
        switch (classify(name, &canon)) {
            case Group::MTP: rep.dropped_mtp++; continue;
            case Group::VISION: rep.dropped_vision++; continue;
            case Group::UNKNOWN:
                return errorf("%s: tensor '%s' is not an HF Qwen3.5 name (expected model.language_model.*, model.*, "
                              "lm_head.weight, mtp.*, model.visual.*)%s", t.file.c_str(), name.c_str(),
                              starts_with(name, "language_model.") ? "; this looks like an MLX checkpoint already"
                                                                   : "");
            case Group::LM: break;
        }
        if (canon == "lm_head.weight" && cfg.tie_word_embeddings) { rep.dropped_lm_head++; continue; }
        auto it = want.by_name.find(canon);
        EMBER_REQUIRE(it != want.by_name.end(),
                      "%s: unexpected tensor '%s' (not part of the Qwen3.5 text model that config.json describes)",
                      t.file.c_str(), name.c_str());
        EMBER_REQUIRE(found.emplace(canon, &t).second, "%s: tensor '%s' is stored twice (as '%s' and '%s')",
                      in_dir.c_str(), canon.c_str(), found[canon]->name.c_str(), name.c_str());
        EMBER_REQUIRE(dtype_is_float(t.dtype), "%s: tensor '%s' has dtype %s; expected BF16, F16 or F32",
                      t.file.c_str(), name.c_str(), dtype_name(t.dtype));
        EMBER_REQUIRE(t.shape == it->second.shape, "%s: tensor '%s' has shape %s, config.json implies %s",
                      t.file.c_str(), name.c_str(), t.shape_str().c_str(), shape_str(it->second.shape).c_str());
    }
    for (const auto& n : want.order)
        EMBER_REQUIRE(found.count(n), "%s: missing tensor '%s'%s", in_dir.c_str(), n.c_str(),
                      n == "lm_head.weight" ? " (tie_word_embeddings is false)" : "");

    // --- plan: jobs in model order, output tensors, totals
    std::vector<Job> jobs;
    std::vector<TensorSpec> specs;
    uint64_t bytes_in_total = 0;
    for (const auto& n : want.order) {
        const TensorInfo* t = found.at(n);
        Job j{t, "", mlx_name(n), want.by_name.at(n).kind};
        bytes_in_total += t->nbytes;
        // mlx-lm's total_parameters sums the leaf modules only: GatedDeltaNet's own A_log/dt_bias are not counted.
        if (!ends_with(n, ".A_log") && !ends_with(n, ".dt_bias")) rep.parameters += t->numel();
        if (j.kind == Kind::LINEAR) {
            j.base = j.out.substr(0, j.out.size() - 7);  // strip ".weight"
            const int64_t R = t->shape[0], C = t->shape[1];
            j.quantize = C % opt.group_size == 0;
            if (j.quantize) {
                rep.quantized++;
                specs.push_back({j.out, DType::U32, {R, affine_row_words(C, opt.bits)}});
                specs.push_back({j.base + ".scales", opt.dtype, {R, C / opt.group_size}});
                specs.push_back({j.base + ".biases", opt.dtype, {R, C / opt.group_size}});
            } else {
                rep.dense_linear++;
                specs.push_back({j.out, opt.dtype, t->shape});
            }
        } else if (j.kind == Kind::CONV) {
            specs.push_back({j.out, opt.dtype, {t->shape[0], t->shape[2], 1}});
        } else {
            specs.push_back({j.out, j.kind == Kind::KEEP ? t->dtype : opt.dtype, t->shape});
        }
        jobs.push_back(std::move(j));
    }
    rep.tensors_out = static_cast<int64_t>(specs.size());
    rep.bytes_in = bytes_in_total;

    // --- output directory (only now: a bad input must not touch an existing output under --force)
    if (fs::exists(out, ec)) {
        EMBER_REQUIRE(fs::is_directory(out, ec), "output %s exists and is not a directory", out_dir.c_str());
        EMBER_REQUIRE(!fs::equivalent(in, out, ec), "output directory %s is the input directory", out_dir.c_str());
        EMBER_REQUIRE(opt.force || dir_is_empty(out),
                      "output directory %s exists and is not empty (use --force to write into it anyway)",
                      out_dir.c_str());
        if (opt.force) remove_old_weights(out);
    } else {
        fs::create_directories(out, ec);
        EMBER_REQUIRE(!ec, "cannot create output directory %s: %s", out_dir.c_str(), ec.message().c_str());
        created->push_back(out.string());  // first entry: the directory itself (removed last, if empty)
    }

    // --- write
    CheckpointWriterOptions wo;
    wo.max_shard_bytes = opt.max_shard_bytes;
    wo.metadata = {{"format", "mlx"}};
    wo.index_metadata = {{"total_parameters", rep.parameters}};
    EMBER_ASSIGN(auto writer, CheckpointWriter::create(out.string(), specs, wo));
    for (const auto& f : writer->files()) created->push_back(f);
    Converter conv(opt, writer.get(), bytes_in_total, static_cast<int64_t>(jobs.size()));
    for (const auto& j : jobs) EMBER_TRY(conv.run(j).with_context("converting " + j.src->name));
    EMBER_TRY(writer->finish());
    rep.bytes_out = writer->total_size();
    rep.shards = writer->num_shards();

    const std::string out_cfg = (out / "config.json").string();
    created->push_back(out_cfg);
    EMBER_TRY(write_config(cfg_text, out_cfg, opt));
    EMBER_ASSIGN(auto check_json, read_json_file(out_cfg));  // what we wrote must load as a quantized Qwen3.5
    EMBER_ASSIGN(Qwen35Config check, Qwen35Config::from_json(check_json, out_cfg));
    EMBER_REQUIRE(check.quant.present && check.quant.bits == opt.bits && check.quant.group_size == opt.group_size,
                  "%s: written config does not read back with the quantization block", out_cfg.c_str());

    for (const auto& f : convert_side_files()) {
        fs::path src = in / f;
        if (!fs::exists(src, ec)) continue;
        created->push_back((out / f).string());
        fs::copy_file(src, out / f, fs::copy_options::overwrite_existing, ec);
        EMBER_REQUIRE(!ec, "copying %s to %s: %s", src.c_str(), out_dir.c_str(), ec.message().c_str());
        rep.copied.push_back(f);
    }
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
}

}  // namespace

Expected<ConvertReport> convert_hf_to_mlx(const std::string& in_dir, const std::string& out_dir,
                                          const ConvertOptions& opt) {
    std::vector<std::string> created;
    auto r = convert_impl(in_dir, out_dir, opt, &created);
    if (!r.is_ok()) {  // leave no half-written checkpoint behind (only what this run created is removed)
        std::error_code ec;
        for (size_t i = created.size(); i-- > 0;) {
            if (fs::is_directory(created[i], ec)) {
                if (dir_is_empty(created[i])) fs::remove(created[i], ec);
            } else {
                fs::remove(created[i], ec);
            }
        }
    }
    return r;
}

}  // namespace ember
