// ember convert (HF Qwen3.5 → MLX affine): every output tensor checked against the HF input with rules written
// out independently here (names, shapes, dtypes, +1 norms, conv layout, dequantization error), byte equality
// with the real mlx_lm.convert output of the same fixture, loading + forward through ember, sharding, and
// clear errors for bad inputs (leaving nothing behind).
#include "models/convert.h"
#include "core/temp_dir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "io/json_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "models/model.h"
#include "models/qwen35_config.h"
#include "quant/affine.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path fixture(const char* name) { return fs::path(EMBER_SOURCE_DIR) / "tests/fixtures/qwen35" / name; }

using TmpDir = ember::TempDir;

bool ends_with(const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// qwen35.md §3b naming, written out on its own (not shared with convert.cpp).
std::string mlx_name(const std::string& hf) {
    if (starts_with(hf, "model.language_model.")) return "language_model.model." + hf.substr(21);
    if (starts_with(hf, "model.")) return "language_model." + hf;
    if (hf == "lm_head.weight") return "language_model.lm_head.weight";
    return "";
}

enum class K { LINEAR, SHIFT, CAST, CONV, KEEP };
K kind_of(const std::string& n) {
    if ((n.find("_proj") != std::string::npos && ends_with(n, ".weight")) || ends_with(n, "embed_tokens.weight") ||
        n == "lm_head.weight")
        return K::LINEAR;
    if (ends_with(n, "conv1d.weight")) return K::CONV;
    if (ends_with(n, ".A_log")) return K::KEEP;
    for (const char* s : {".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight",
                          ".k_norm.weight", "model.norm.weight", "language_model.norm.weight"})
        if (ends_with(n, s)) return K::SHIFT;
    return K::CAST;  // linear_attn.norm.weight (plain weight), dt_bias
}

struct Stats {
    int64_t quantized = 0, dense_linear = 0, shifted = 0, conv = 0, outputs = 0;
    double worst_ratio = 0;
};

// Checks the converted directory `out` against the HF input `in`, tensor by tensor.
void check_conversion(const fs::path& in, const fs::path& out, int bits, int gs, bool tied, Stats* st) {
    auto hf = TensorStore::open(in.string());
    auto mx = TensorStore::open(out.string());
    ASSERT_TRUE(hf.is_ok()) << hf.message();
    ASSERT_TRUE(mx.is_ok()) << mx.message();
    std::set<std::string> expected;
    const int n = (1 << bits) - 1;
    for (const auto& [name, t] : hf->all()) {
        if (starts_with(name, "mtp.") || starts_with(name, "model.visual.")) continue;
        if (name == "lm_head.weight" && tied) continue;
        const std::string o = mlx_name(name);
        ASSERT_FALSE(o.empty()) << name;
        SCOPED_TRACE(name + " -> " + o);
        const TensorInfo* w = mx->find(o);
        ASSERT_NE(w, nullptr) << "missing output tensor";
        expected.insert(o);
        const K k = kind_of(name);
        if (k == K::LINEAR && t.shape[1] % gs == 0) {
            const std::string base = o.substr(0, o.size() - 7);
            const TensorInfo* s = mx->find(base + ".scales");
            const TensorInfo* b = mx->find(base + ".biases");
            ASSERT_TRUE(s && b);
            expected.insert(base + ".scales");
            expected.insert(base + ".biases");
            const int64_t R = t.shape[0], C = t.shape[1];
            EXPECT_EQ(w->dtype, DType::U32);
            EXPECT_EQ(w->shape, (std::vector<int64_t>{R, C * bits / 32}));
            EXPECT_EQ(s->dtype, DType::BF16);
            EXPECT_EQ(b->dtype, DType::BF16);
            EXPECT_EQ(s->shape, (std::vector<int64_t>{R, C / gs}));
            EXPECT_EQ(b->shape, s->shape);
            Weight W;
            W.format = WeightFormat::AFFINE;
            W.rows = R;
            W.cols = C;
            W.data = w->data;
            W.bits = bits;
            W.group_size = gs;
            W.scales = s->data;
            W.biases = b->data;
            W.sb_dtype = DType::BF16;
            std::vector<float> orig(C), deq(C), rs(C / gs), rb(C / gs);
            std::vector<uint32_t> ref(affine_row_words(C, bits));
            for (int64_t r = 0; r < R; ++r) {
                for (int64_t c = 0; c < C; ++c) orig[c] = load_float(t.data, t.dtype, r * C + c);
                affine_dequantize_row(W, r, deq.data());
                // Same codes and (bf16-rounded) scales/biases as quantizing the original row directly.
                affine_quantize_row(orig.data(), C, bits, gs, ref.data(), rs.data(), rb.data());
                const uint32_t* row = reinterpret_cast<const uint32_t*>(w->data) + r * (C * bits / 32);
                ASSERT_EQ(std::memcmp(row, ref.data(), ref.size() * 4), 0) << "row " << r;
                for (int64_t c = 0; c < C; ++c) {
                    const int64_t g = c / gs;
                    const float sc = load_float(s->data, DType::BF16, r * (C / gs) + g);
                    const float bi = load_float(b->data, DType::BF16, r * (C / gs) + g);
                    if (c % gs == 0) {
                        ASSERT_EQ(f32_to_bf16(rs[g]), f32_to_bf16(sc));
                        ASSERT_EQ(f32_to_bf16(rb[g]), f32_to_bf16(bi));
                    }
                    // Unclamped codes: within |s|/2; the clamped far end: within |s|. bf16 scale/bias storage
                    // adds at most (n·|s| + |b|)·2^-8.
                    const double err = std::fabs(static_cast<double>(deq[c]) - orig[c]);
                    const double slack = (n * std::fabs(sc) + std::fabs(bi)) * std::ldexp(1.0, -8) + 1e-7;
                    const int q = affine_get(row, c, bits);
                    const double bound = (q > 0 && q < n) ? 0.5 * std::fabs(sc) : std::fabs(sc);
                    ASSERT_LE(err, bound + slack) << "row " << r << " col " << c << " code " << q;
                    st->worst_ratio = std::max(st->worst_ratio, err / std::fabs(sc));
                }
            }
            st->quantized++;
            continue;
        }
        // Everything else: same element count, float values as the rule says.
        const std::vector<int64_t> want_shape =
            k == K::CONV ? std::vector<int64_t>{t.shape[0], t.shape[2], 1} : t.shape;
        EXPECT_EQ(w->shape, want_shape);
        EXPECT_EQ(w->dtype, k == K::KEEP ? t.dtype : DType::BF16);
        ASSERT_EQ(w->numel(), t.numel());
        if (k == K::CONV) {
            EXPECT_EQ(t.shape[1], 1);
            st->conv++;
        }
        if (k == K::SHIFT) st->shifted++;
        if (k == K::LINEAR) st->dense_linear++;
        for (int64_t i = 0; i < t.numel(); ++i) {
            float v = load_float(t.data, t.dtype, i);
            if (k == K::SHIFT) v = bf16_to_f32(f32_to_bf16(v + 1.0f));  // +1 in the stored bf16
            float got = load_float(w->data, w->dtype, i);
            float want = k == K::KEEP ? v : bf16_to_f32(f32_to_bf16(v));
            ASSERT_EQ(got, want) << "element " << i;
        }
    }
    std::set<std::string> got;
    for (const auto& [name, t] : mx->all()) {
        got.insert(name);
        EXPECT_EQ(name.find("mtp."), std::string::npos) << name;
        EXPECT_EQ(name.find("visual"), std::string::npos) << name;
        EXPECT_TRUE(starts_with(name, "language_model.model.") || starts_with(name, "language_model.lm_head."))
            << name;
    }
    EXPECT_EQ(got, expected);
    st->outputs = static_cast<int64_t>(got.size());

    auto cfg = read_json_file((out / "config.json").string());
    ASSERT_TRUE(cfg.is_ok()) << cfg.message();
    json q = {{"group_size", gs}, {"bits", bits}, {"mode", "affine"}};
    EXPECT_EQ((*cfg)["quantization"], q);
    EXPECT_EQ((*cfg)["quantization_config"], q);
    EXPECT_FALSE(cfg->contains("vision_config"));
    auto pc = Qwen35Config::from_json(*cfg, "out");
    ASSERT_TRUE(pc.is_ok()) << pc.message();
    EXPECT_TRUE(pc->quant.present);
    EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
}

TEST(Convert, MultimodalTied4Bit) {
    TmpDir d;
    fs::path out = d.p / "out";
    ConvertOptions opt;
    int64_t calls = 0, last_done = -1;
    opt.on_progress = [&](const ConvertProgress& p) {
        ++calls;
        EXPECT_GE(p.tensors_done, last_done);
        EXPECT_LE(p.bytes_in, p.bytes_in_total);
        last_done = p.tensors_done;
    };
    auto r = convert_hf_to_mlx(fixture("mm_tied").string(), out.string(), opt);
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->dropped_mtp, 15);
    EXPECT_GT(r->dropped_vision, 0);
    EXPECT_EQ(r->dense_linear, 0);
    EXPECT_EQ(last_done, r->tensors_in - r->dropped_mtp - r->dropped_vision);
    EXPECT_GT(calls, 0);
    Stats st;
    check_conversion(fixture("mm_tied"), out, 4, 64, /*tied=*/true, &st);
    EXPECT_EQ(st.quantized, r->quantized);
    EXPECT_EQ(st.shifted, 8 * 2 + 1 + 2 * 2);  // 8 layers × 2, final norm, 2 attention layers × q/k
    EXPECT_EQ(st.conv, 6);
    EXPECT_EQ(st.outputs, r->tensors_out);
    EXPECT_FALSE(fs::exists(out / "language_model.lm_head.weight"));
}

// The same fixture through the real mlx_lm.convert (tests/fixtures/qwen35/mlx_lm_convert): identical tensors.
TEST(Convert, ByteIdenticalToMlxLmConvert) {
    TmpDir d;
    fs::path out = d.p / "out";
    auto r = convert_hf_to_mlx(fixture("mm_tied").string(), out.string(), {});
    ASSERT_TRUE(r.is_ok()) << r.message();
    auto ours = TensorStore::open(out.string());
    auto ref = TensorStore::open(fixture("mlx_lm_convert").string());
    ASSERT_TRUE(ours.is_ok() && ref.is_ok());
    ASSERT_EQ(ours->all().size(), ref->all().size());
    for (const auto& [name, t] : ref->all()) {
        const TensorInfo* o = ours->find(name);
        ASSERT_NE(o, nullptr) << name;
        EXPECT_EQ(o->dtype, t.dtype) << name;
        EXPECT_EQ(o->shape, t.shape) << name;
        ASSERT_EQ(o->nbytes, t.nbytes) << name;
        EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << name << " differs from mlx_lm.convert";
    }
    auto a = read_json_file((out / "model.safetensors.index.json").string());
    auto b = read_json_file(fixture("mlx_lm_convert").string() + "/model.safetensors.index.json");
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ((*a)["metadata"], (*b)["metadata"]);  // total_size, total_parameters
    EXPECT_TRUE((*a)["weight_map"] == (*b)["weight_map"]);

    // And ember runs both to the same logits.
    auto m1 = load_model(out.string());
    auto m2 = load_model(fixture("mlx_lm_convert").string());
    ASSERT_TRUE(m1.is_ok()) << m1.message();
    ASSERT_TRUE(m2.is_ok()) << m2.message();
    const int32_t toks[5] = {1, 7, 42, 300, 511};
    const int64_t V = (*m1)->info().vocab_size;
    std::vector<float> l1(5 * V), l2(5 * V);
    auto s1 = (*m1)->new_state();
    auto s2 = (*m2)->new_state();
    ASSERT_TRUE((*m1)->forward(*s1, toks, 5, l1.data(), true).is_ok());
    ASSERT_TRUE((*m2)->forward(*s2, toks, 5, l2.data(), true).is_ok());
    EXPECT_EQ(l1, l2);
}

// Text-only layout, untied head, sharded input, nv = 3·nk; group 128 leaves out_proj (in = 96) dense.
TEST(Convert, FlatUntied8BitGroup128) {
    TmpDir d;
    fs::path out = d.p / "out";
    ConvertOptions opt;
    opt.bits = 8;
    opt.group_size = 128;
    auto r = convert_hf_to_mlx(fixture("flat_untied_gqa3").string(), out.string(), opt);
    ASSERT_TRUE(r.is_ok()) << r.message();
    Stats st;
    check_conversion(fixture("flat_untied_gqa3"), out, 8, 128, /*tied=*/false, &st);
    EXPECT_EQ(st.dense_linear, 4);  // linear_attn.out_proj of the 4 GDN layers
    EXPECT_EQ(r->dense_linear, 4);
    auto mx = TensorStore::open(out.string());
    ASSERT_TRUE(mx.is_ok());
    EXPECT_NE(mx->find("language_model.lm_head.weight"), nullptr);
    EXPECT_NE(mx->find("language_model.lm_head.scales"), nullptr);
    auto cfg = read_json_file((out / "config.json").string());
    EXPECT_EQ((*cfg)["model_type"], "qwen3_5");  // the name mlx-lm knows
    // layer_types [L,F,L,L,F,L] is not the interval-4 pattern mlx-lm assumes: the user is told.
    bool warned = false;
    for (const auto& n : r->notes) warned |= n.find("layer_types") != std::string::npos;
    EXPECT_TRUE(warned);
    auto m = load_model(out.string());
    ASSERT_TRUE(m.is_ok()) << m.message();
}

TEST(Convert, ShardedOutputMatchesSingleFile) {
    TmpDir d;
    ConvertOptions one, many;
    many.max_shard_bytes = 64 << 10;
    auto a = convert_hf_to_mlx(fixture("flat_untied_gqa3").string(), (d.p / "one").string(), one);
    auto b = convert_hf_to_mlx(fixture("flat_untied_gqa3").string(), (d.p / "many").string(), many);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.message() << b.message();
    EXPECT_EQ(a->shards, 1u);
    EXPECT_GT(b->shards, 3u);
    EXPECT_TRUE(fs::exists(d.p / "many" / strfmt("model-00001-of-%05zu.safetensors", b->shards)));
    auto sa = TensorStore::open((d.p / "one").string());
    auto sb = TensorStore::open((d.p / "many").string());
    ASSERT_TRUE(sa.is_ok() && sb.is_ok());
    EXPECT_EQ(sb->num_files(), b->shards);
    ASSERT_EQ(sa->all().size(), sb->all().size());
    for (const auto& [name, t] : sa->all()) {
        const TensorInfo* o = sb->find(name);
        ASSERT_NE(o, nullptr) << name;
        ASSERT_EQ(o->nbytes, t.nbytes);
        EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << name;
    }
}

TEST(Convert, CopiesSideFilesAndForce) {
    TmpDir d;
    fs::path in = d.p / "in", out = d.p / "out";
    fs::copy(fixture("mm_tied"), in, fs::copy_options::recursive);
    std::ofstream(in / "tokenizer.json") << "{}";
    std::ofstream(in / "chat_template.jinja") << "{{ messages }}";
    std::ofstream(in / "notes.txt") << "not copied";
    auto r = convert_hf_to_mlx(in.string(), out.string(), {});
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
    EXPECT_TRUE(fs::exists(out / "chat_template.jinja"));
    EXPECT_FALSE(fs::exists(out / "notes.txt"));
    // Non-empty output: refused without force; with force, stale shards are replaced.
    auto again = convert_hf_to_mlx(in.string(), out.string(), {});
    ASSERT_FALSE(again.is_ok());
    EXPECT_NE(again.message().find("not empty"), std::string::npos) << again.message();
    EXPECT_TRUE(fs::exists(out / "model.safetensors"));  // the earlier output is untouched
    std::ofstream(out / "model-00001-of-00009.safetensors") << "stale";
    ConvertOptions f;
    f.force = true;
    auto forced = convert_hf_to_mlx(in.string(), out.string(), f);
    ASSERT_TRUE(forced.is_ok()) << forced.message();
    EXPECT_FALSE(fs::exists(out / "model-00001-of-00009.safetensors"));
    EXPECT_TRUE(TensorStore::open(out.string()).is_ok());
}

void expect_error(const fs::path& in, const fs::path& out, const ConvertOptions& opt, const std::string& needle) {
    auto r = convert_hf_to_mlx(in.string(), out.string(), opt);
    ASSERT_FALSE(r.is_ok()) << "expected an error containing: " << needle;
    EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
    EXPECT_FALSE(fs::exists(out)) << "a failed conversion left " << out << " behind";
}

TEST(Convert, BadInputsGiveClearErrors) {
    TmpDir d;
    const fs::path out = d.p / "out";
    expect_error(d.p / "nope", out, {}, "does not exist");
    expect_error(fixture("mm_tied") / "config.json", out, {}, "not a directory");
    fs::create_directories(d.p / "empty");
    expect_error(d.p / "empty", out, {}, "no config.json");
    expect_error(fixture("q4_affine"), out, {}, "already quantized");
    for (auto [bits, gs] : {std::pair{7, 64}, {4, 16}, {1, 64}, {4, 256}}) {
        ConvertOptions o;
        o.bits = bits;
        o.group_size = gs;
        expect_error(fixture("mm_tied"), out, o, "unsupported quantization");
    }
    // Not Qwen3.5 / MoE.
    fs::path in = d.p / "in";
    fs::copy(fixture("mm_tied"), in, fs::copy_options::recursive);
    json cfg = json::parse(std::ifstream(in / "config.json"));
    for (const char* mt : {"llama", "qwen3_5_moe"}) {
        json c = cfg;
        c["model_type"] = mt;
        std::ofstream(in / "config.json") << c.dump();
        expect_error(in, out, {}, std::string(mt) == "llama" ? "not a Qwen3.5 config" : "MoE");
    }
    // A bad input under --force leaves an existing output alone.
    {
        fs::create_directories(d.p / "keep");
        std::ofstream(d.p / "keep" / "model.safetensors") << "old";
        ConvertOptions f;
        f.force = true;
        auto r = convert_hf_to_mlx(in.string(), (d.p / "keep").string(), f);  // in has model_type qwen3_5_moe
        ASSERT_FALSE(r.is_ok());
        EXPECT_TRUE(fs::exists(d.p / "keep" / "model.safetensors"));
    }
    // Config and tensors disagree.
    json c = cfg;
    c["text_config"]["intermediate_size"] = 96;
    std::ofstream(in / "config.json") << c.dump();
    expect_error(in, out, {}, "has shape [64, 128], config.json implies [64, 96]");
    c = cfg;
    c["text_config"]["num_hidden_layers"] = 9;
    std::ofstream(in / "config.json") << c.dump();
    expect_error(in, out, {}, "missing tensor 'model.layers.8.");
    c = cfg;
    c["text_config"]["tie_word_embeddings"] = false;
    c["tie_word_embeddings"] = false;
    std::ofstream(in / "config.json") << c.dump();
    expect_error(in, out, {}, "missing tensor 'lm_head.weight'");
    std::ofstream(in / "config.json") << cfg.dump();
    // Output == input (even with --force), or a file.
    ConvertOptions force;
    force.force = true;
    auto r = convert_hf_to_mlx(in.string(), in.string(), force);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.message().find("is the input directory"), std::string::npos) << r.message();
    EXPECT_TRUE(fs::exists(in / "model.safetensors"));
    std::ofstream(d.p / "file") << "x";
    r = convert_hf_to_mlx(in.string(), (d.p / "file").string(), {});
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.message().find("not a directory"), std::string::npos) << r.message();
}

// A stray tensor (not in the model the config describes) is refused rather than silently dropped.
TEST(Convert, UnexpectedTensorIsAnError) {
    TmpDir d;
    fs::path in = d.p / "in";
    fs::create_directories(in);
    fs::copy_file(fixture("mm_tied") / "config.json", in / "config.json");
    auto src = TensorStore::open(fixture("mm_tied").string());
    ASSERT_TRUE(src.is_ok());
    std::vector<TensorSpec> specs;
    for (const auto& [n, t] : src->all()) specs.push_back({n, t.dtype, t.shape});
    specs.push_back({"model.language_model.layers.0.mlp.extra.weight", DType::BF16, {2, 2}});
    auto w = SafetensorsWriter::create((in / "model.safetensors").string(), specs);
    ASSERT_TRUE(w.is_ok()) << w.message();
    for (const auto& [n, t] : src->all()) ASSERT_TRUE((*w)->write(n, t.data, t.nbytes).is_ok());
    uint16_t z[4] = {};
    ASSERT_TRUE((*w)->write("model.language_model.layers.0.mlp.extra.weight", z, sizeof z).is_ok());
    ASSERT_TRUE((*w)->finish().is_ok());
    expect_error(in, d.p / "out", {}, "unexpected tensor 'model.language_model.layers.0.mlp.extra.weight'");
}

}  // namespace
}  // namespace ember
