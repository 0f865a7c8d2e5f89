// Llama-family models from GGUF files written by io/gguf_writer: config and layout detection (rope style per
// architecture, tied head, q/k norm), runtime consistency (prefill + decode ≡ one prefill, all quantized types
// through the same forward), and every broken file or unsupported feature as a clear error.
// Numerics against independent oracles (transformers, llama.cpp) are in gguf_oracle_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "core/temp_dir.h"
#include "io/gguf_writer.h"
#include "models/llama.h"
#include "runtime/session.h"

namespace ember {
namespace {

struct Spec {
    std::string arch = "llama";
    int64_t layers = 2, hidden = 64, ffn = 96, heads = 4, kv = 2, vocab = 300;
    bool tied = true, qk_norm = false;
    GgmlType type = GgmlType::F32;  // type of the 2-D projection weights
    std::function<void(GgufWriter&)> tweak_meta;
    std::string skip_tensor, bad_shape_tensor;
};

std::vector<float> randn(size_t n, uint64_t seed, float sd) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(0.f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// Quantizes f32 rows into Q8_0 blocks (d = max|x|/127 as fp16, q = round(x/d)); exact format, simple rounding.
std::vector<uint8_t> to_q8_0(const std::vector<float>& x) {
    std::vector<uint8_t> out;
    for (size_t b = 0; b < x.size() / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const float d = amax / 127.f;
        const uint16_t h = f32_to_f16(d);
        const float dd = f16_to_f32(h);
        out.push_back(uint8_t(h & 0xff));
        out.push_back(uint8_t(h >> 8));
        for (int j = 0; j < 32; ++j)
            out.push_back(uint8_t(int8_t(dd > 0 ? std::lround(x[b * 32 + j] / dd) : 0)));
    }
    return out;
}

std::string write_model(const TempDir& dir, const Spec& s) {
    GgufWriter w;
    const std::string a = s.arch + ".";
    w.set_string("general.architecture", s.arch);
    w.set_string("general.name", "tiny test model");
    w.set_u32(a + "block_count", uint32_t(s.layers));
    w.set_u32(a + "embedding_length", uint32_t(s.hidden));
    w.set_u32(a + "feed_forward_length", uint32_t(s.ffn));
    w.set_u32(a + "attention.head_count", uint32_t(s.heads));
    w.set_u32(a + "attention.head_count_kv", uint32_t(s.kv));
    w.set_u32(a + "context_length", 512);
    w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_f32(a + "rope.freq_base", 10000.f);
    if (s.tweak_meta) s.tweak_meta(w);
    uint64_t seed = 1;
    auto add = [&](const std::string& name, int64_t rows, int64_t cols, bool matrix, float sd) {
        if (name == s.skip_tensor) return;
        if (name == s.bad_shape_tensor) cols += 32;
        std::vector<float> v = randn(size_t(rows * cols), seed++, sd);
        std::vector<int64_t> ne = rows > 1 || matrix ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{cols};
        Status st;
        if (matrix && s.type == GgmlType::Q8_0) {
            auto q = to_q8_0(v);
            st = w.add_tensor(name, ne, GgmlType::Q8_0, q.data(), q.size());
        } else if (matrix && s.type == GgmlType::Q2_K) {
            std::vector<uint8_t> q(size_t(rows * cols / 256 * 84), 0);
            st = w.add_tensor(name, ne, GgmlType::Q2_K, q.data(), q.size());
        } else {
            st = w.add_tensor(name, ne, GgmlType::F32, v.data(), v.size() * 4);
        }
        EMBER_CHECK(st.is_ok(), "%s", st.message().c_str());
    };
    const int64_t H = s.hidden, d = s.hidden / s.heads;
    add("token_embd.weight", s.vocab, H, true, 1.f);
    add("output_norm.weight", 1, H, false, 0.2f);
    if (!s.tied) add("output.weight", s.vocab, H, true, 0.1f);
    for (int64_t l = 0; l < s.layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        add(b + "attn_norm.weight", 1, H, false, 0.3f);
        add(b + "ffn_norm.weight", 1, H, false, 0.3f);
        add(b + "attn_q.weight", s.heads * d, H, true, 0.15f);
        add(b + "attn_k.weight", s.kv * d, H, true, 0.15f);
        add(b + "attn_v.weight", s.kv * d, H, true, 0.15f);
        add(b + "attn_output.weight", H, s.heads * d, true, 0.15f);
        if (s.qk_norm) {
            add(b + "attn_q_norm.weight", 1, d, false, 0.3f);
            add(b + "attn_k_norm.weight", 1, d, false, 0.3f);
        }
        add(b + "ffn_gate.weight", s.ffn, H, true, 0.15f);
        add(b + "ffn_up.weight", s.ffn, H, true, 0.15f);
        add(b + "ffn_down.weight", H, s.ffn, true, 0.15f);
    }
    const std::string path = (dir.path() / "model.gguf").string();
    Status st = w.write(path);
    EMBER_CHECK(st.is_ok(), "%s", st.message().c_str());
    return path;
}

void expect_error(const Spec& s, const std::string& needle) {
    TempDir dir("ember_gguf_model");
    auto m = load_model(write_model(dir, s));
    ASSERT_FALSE(m.is_ok()) << "loaded a broken model; expected an error containing: " << needle;
    EXPECT_NE(m.message().find(needle), std::string::npos) << m.message();
}

double rel_err(const float* a, const float* b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        num = std::max(num, double(std::fabs(a[i] - b[i])));
        den = std::max(den, double(std::fabs(b[i])));
    }
    return num / std::max(den, 1e-30);
}

TEST(GgufLlama, DetectsLayoutPerArchitecture) {
    TempDir dir("ember_gguf_model");
    Spec s;
    auto m = load_model(write_model(dir, s));
    ASSERT_TRUE(m.is_ok()) << m.message();
    auto* L = dynamic_cast<const Llama*>(m->get());
    ASSERT_NE(L, nullptr);
    EXPECT_EQ(L->attention_shape().rope_style, RopeStyle::INTERLEAVED);
    EXPECT_EQ(L->head().data, L->embedding().data);  // tied
    EXPECT_EQ((*m)->info().vocab_size, 300);
    EXPECT_NE((*m)->info().architecture.find("tiny test model"), std::string::npos);

    TempDir dir2("ember_gguf_model");
    Spec q;
    q.arch = "qwen3";
    q.qk_norm = true;
    q.tied = false;
    auto m2 = load_model(write_model(dir2, q));
    ASSERT_TRUE(m2.is_ok()) << m2.message();
    auto* Q = dynamic_cast<const Llama*>(m2->get());
    EXPECT_EQ(Q->attention_shape().rope_style, RopeStyle::NEOX);
    EXPECT_NE(Q->head().data, Q->embedding().data);
    EXPECT_EQ(Q->layers()[1].attn.q_norm.size(), 16u);
}

TEST(GgufLlama, PrefillThenDecodeEqualsOnePrefill) {
    for (GgmlType t : {GgmlType::F32, GgmlType::Q8_0}) {
        TempDir dir("ember_gguf_model");
        Spec s;
        s.type = t;
        s.arch = t == GgmlType::F32 ? "llama" : "qwen3";
        s.qk_norm = s.arch == "qwen3";
        auto m = load_model(write_model(dir, s));
        ASSERT_TRUE(m.is_ok()) << m.message();
        const int64_t V = (*m)->info().vocab_size;
        std::vector<int32_t> all;
        for (int i = 0; i < 40; ++i) all.push_back((i * 37 + 3) % int32_t(V));
        Session full(**m);
        auto ref = full.prefill(all, true);
        ASSERT_TRUE(ref.is_ok()) << ref.message();
        for (float x : *ref) ASSERT_TRUE(std::isfinite(x));
        Session s2(**m);
        auto p = s2.prefill(std::vector<int32_t>(all.begin(), all.begin() + 33), true, 7);
        ASSERT_TRUE(p.is_ok()) << p.message();
        for (int64_t r = 0; r < 33; ++r) EXPECT_LT(rel_err(&(*p)[r * V], &(*ref)[r * V], V), 1e-4) << "row " << r;
        for (int64_t k = 33; k < 40; ++k) {
            auto d = s2.decode(all[k]);
            ASSERT_TRUE(d.is_ok()) << d.message();
            EXPECT_LT(rel_err(d->data(), &(*ref)[k * V], V), 1e-4) << "decode " << k;
        }
    }
}

// LoadOptions::q8_activations (llama.cpp's 8-bit activation rounding): reported in info(), logits close to the
// exact ones but not equal, the same prefill/decode consistency; other formats refuse it.
TEST(GgufLlama, Q8ActivationsOption) {
    TempDir dir("ember_gguf_model");
    Spec s;
    s.type = GgmlType::Q8_0;
    const std::string path = write_model(dir, s);
    LoadOptions q8;
    q8.q8_activations = true;
    auto exact = load_model(path), rounded = load_model(path, q8);
    ASSERT_TRUE(exact.is_ok() && rounded.is_ok()) << exact.message() << rounded.message();
    EXPECT_NE((*rounded)->info().weight_format.find("8-bit activations"), std::string::npos)
        << (*rounded)->info().weight_format;
    EXPECT_EQ((*exact)->info().weight_format.find("8-bit activations"), std::string::npos);
    const int64_t V = (*exact)->info().vocab_size;
    std::vector<int32_t> all;
    for (int i = 0; i < 24; ++i) all.push_back((i * 53 + 7) % int32_t(V));
    Session se(**exact), sr(**rounded);
    auto le = se.prefill(all, true), lr = sr.prefill(all, true);
    ASSERT_TRUE(le.is_ok() && lr.is_ok());
    for (int64_t r = 0; r < 24; ++r) {
        const double e = rel_err(&(*lr)[r * V], &(*le)[r * V], V);
        EXPECT_GT(e, 1e-6) << "row " << r << ": the rounding must change something";
        EXPECT_LT(e, 5e-2) << "row " << r;
    }
    Session s2(**rounded);
    auto p = s2.prefill(std::vector<int32_t>(all.begin(), all.begin() + 20), true, 6);
    ASSERT_TRUE(p.is_ok()) << p.message();
    for (int64_t r = 0; r < 20; ++r) EXPECT_LT(rel_err(&(*p)[r * V], &(*lr)[r * V], V), 1e-4) << "row " << r;
    for (int64_t k = 20; k < 24; ++k) {
        auto d = s2.decode(all[k]);
        ASSERT_TRUE(d.is_ok()) << d.message();
        EXPECT_LT(rel_err(d->data(), &(*lr)[k * V], V), 1e-4) << "decode " << k;
    }
    auto dir_model = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/qwen35/flat_untied_gqa3", q8);
    ASSERT_FALSE(dir_model.is_ok());
    EXPECT_NE(dir_model.message().find("GGUF files only"), std::string::npos) << dir_model.message();
}

TEST(GgufLlama, BrokenOrUnsupportedFilesAreClearErrors) {
    {
        Spec s;
        s.arch = "mamba";
        expect_error(s, "GGUF architecture 'mamba' is not supported (supported: llama");
    }
    {
        Spec s;
        s.skip_tensor = "blk.1.ffn_up.weight";
        expect_error(s, "missing tensor 'blk.1.ffn_up.weight'");
    }
    {
        Spec s;
        s.bad_shape_tensor = "blk.0.attn_k.weight";
        expect_error(s, "tensor 'blk.0.attn_k.weight' has shape");
    }
    {
        Spec s;
        s.hidden = 256;  // Q2_K needs 256-element rows
        s.ffn = 256;
        s.type = GgmlType::Q2_K;
        expect_error(s, "Q2_K");
    }
    {
        Spec s;
        s.heads = 3;
        s.hidden = 48;
        s.kv = 2;
        expect_error(s, "not a multiple of 2 kv heads");
    }
    {
        Spec s;
        s.tweak_meta = [](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "longrope"); };
        expect_error(s, "rope scaling type 'longrope' is not supported");
    }
    {
        Spec s;
        s.tweak_meta = [](GgufWriter& w) {
            w.set_string("llama.rope.scaling.type", "yarn");
            w.set_f32("llama.rope.scaling.factor", 4.f);
            w.set_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f);
        };
        expect_error(s, "yarn_log_multiplier");
    }
    {
        Spec s;
        s.tweak_meta = [](GgufWriter& w) { w.set_string("llama.block_count", "two"); };
        expect_error(s, "block_count");
    }
    // fuzz_gguf_model: a token_embd.weight of shape [hidden, 0] loaded and divided by zero computing the info.
    {
        Spec s;
        s.vocab = 0;
        expect_error(s, "token_embd.weight has no rows (an empty vocabulary)");
    }
    // Sizes beyond config_limits.h are refused before the loader multiplies or loops over them.
    {
        Spec s;
        s.tweak_meta = [](GgufWriter& w) { w.set_u64("llama.attention.key_length", uint64_t{1} << 40); };
        expect_error(s, "llama.attention.key_length = 1099511627776 is beyond ember's limit of 16384");
    }
    {
        Spec s;
        s.tweak_meta = [](GgufWriter& w) { w.set_u64("llama.block_count", uint64_t{1} << 33); };
        expect_error(s, "llama.block_count = 8589934592 is beyond ember's limit of 1024");
    }
    {
        Spec s;
        s.tweak_meta = [](GgufWriter& w) { w.set_u64("llama.attention.head_count", uint64_t{1} << 40); };
        expect_error(s, "llama.attention.head_count = 1099511627776 is beyond ember's limit of 4096");
    }
}

}  // namespace
}  // namespace ember
