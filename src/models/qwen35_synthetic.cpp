// Qwen35::synthetic: random weights of a real configuration, built in memory for benchmarks — 4-bit affine (g64), or
// with a ":q4_k_m" / ":q4_0" suffix GGUF blocks in the type mix llama-quantize gives such a file (below). Values are
// scaled so activations stay O(1) (weights ≈ N(0, 1/fan_in)); nothing here is a checkpoint.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/qwen35.h"
#include "quant/ggml_type.h"

namespace ember {

namespace {

struct Rng {  // splitmix64
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform() { return static_cast<float>(next() >> 40) / 16777216.0f; }  // [0, 1)
};

class Builder {
public:
    Builder(std::vector<std::unique_ptr<uint8_t[]>>& owned, uint64_t seed) : owned_(owned), rng_{seed} {}

    // 4-bit codes uniform in [0, 15]: w = s·(q − 7.5) has std ≈ 4.6·s; pick s so std ≈ 1/sqrt(cols).
    Weight affine4(int64_t rows, int64_t cols) {
        Weight w;
        w.format = WeightFormat::AFFINE;
        w.rows = rows; w.cols = cols; w.bits = 4; w.group_size = 64; w.sb_dtype = DType::BF16;
        int64_t nw = rows * cols / 8, ng = rows * cols / 64;
        auto* q = alloc<uint32_t>(nw);
        for (int64_t i = 0; i < nw; ++i) q[i] = static_cast<uint32_t>(rng_.next());
        auto* s = alloc<uint16_t>(ng);
        auto* b = alloc<uint16_t>(ng);
        float base = 1.0f / (4.6f * std::sqrt(static_cast<float>(cols)));
        for (int64_t i = 0; i < ng; ++i) {
            float sc = base * (0.75f + 0.5f * rng_.uniform());
            s[i] = f32_to_bf16(sc);
            b[i] = f32_to_bf16(-7.5f * sc);
        }
        w.data = q; w.scales = s; w.biases = b;
        return w;
    }
    // GGML blocks with random codes and fixed sub-block scales (Q4_K / Q5_K: sc = mn = 32, dmin = d·mid-code, so
    // w is centred; Q6_K: int8 scales 32), d chosen for std ≈ 1/sqrt(cols). cols % block elements == 0.
    Weight ggml(GgmlType t, int64_t rows, int64_t cols) {
        const GgmlTypeTraits tr = ggml_type_traits(static_cast<uint32_t>(t));
        const int64_t nb = rows * cols / tr.block_elems;
        auto* p = alloc<uint8_t>(nb * tr.block_bytes);
        const float sd_code = t == GgmlType::Q6_K ? 18.5f : t == GgmlType::Q5_K ? 9.2f : 4.6f;
        const float sub = (t == GgmlType::Q4_0) ? 1.f : 32.f;
        const float base = 1.0f / (sd_code * sub * std::sqrt(static_cast<float>(cols)));
        auto put16 = [](uint8_t* q, float v) {
            const uint16_t h = f32_to_f16(v);
            std::memcpy(q, &h, 2);
        };
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* q = p + b * tr.block_bytes;
            for (int i = 0; i < tr.block_bytes; i += 8) {
                const uint64_t r = rng_.next();
                std::memcpy(q + i, &r, std::min(8, tr.block_bytes - i));
            }
            const float d = base * (0.75f + 0.5f * rng_.uniform());
            if (t == GgmlType::Q4_0) {
                put16(q, d);
            } else if (t == GgmlType::Q6_K) {
                std::memset(q + 192, 32, 16);
                put16(q + 208, d);
            } else {  // Q4_K / Q5_K: scales[0..7] = 0xA0 (6-bit 32 + the high bits of sub-blocks 4..7), [8..11] = 0
                put16(q, d);
                put16(q + 2, d * (t == GgmlType::Q5_K ? 15.5f : 7.5f));
                std::memset(q + 4, 0xA0, 8);
                std::memset(q + 12, 0, 4);
            }
        }
        Weight w;
        w.format = WeightFormat::GGML, w.ggml_type = t, w.rows = rows, w.cols = cols, w.data = p;
        return w;
    }
    std::vector<float> vec(int64_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (auto& x : v) x = lo + (hi - lo) * rng_.uniform();
        return v;
    }

private:
    template <class T>
    T* alloc(int64_t n) {
        owned_.emplace_back(new uint8_t[n * sizeof(T)]);
        return reinterpret_cast<T*>(owned_.back().get());
    }
    std::vector<std::unique_ptr<uint8_t[]>>& owned_;
    Rng rng_;
};

}  // namespace

// llama-quantize's choices for a Q4_K_M file of this architecture: Q4_K, with Q6_K for the output (the embedding when
// tied) and for ffn_down / attn_v in the "more bits" layers (the first and last eighth and every third between),
// Q5_K for the fused attn_qkv (the GDN in_proj_qkv). Q4_0: Q4_0 everywhere but the output (Q6_K).
namespace {
bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }
}  // namespace

Expected<std::unique_ptr<CausalLM>> Qwen35::synthetic(const std::string& spec, uint64_t seed) {
    const size_t colon = spec.find(':');
    const std::string preset = spec.substr(0, colon), mix = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (!mix.empty() && mix != "q4_k_m" && mix != "q4_0")
        return errorf("synthetic model '%s': unknown weight mix '%s' (q4_k_m, q4_0, or none for MLX 4-bit g64)",
                      spec.c_str(), mix.c_str());
    auto m = std::make_unique<Qwen35>();
    EMBER_ASSIGN(m->cfg_, Qwen35Config::preset(preset));
    const Qwen35Config& c = m->cfg_;
    Builder B(m->owned_, seed);
    const int64_t H = c.hidden_size, I = c.intermediate_size;
    if (!mix.empty() && (H % 256 || I % 256))
        return errorf("synthetic model '%s': hidden %lld / intermediate %lld not multiples of 256", spec.c_str(),
                      (long long)H, (long long)I);
    // W(kind, rows, cols): kind 0 plain, 1 the output, 2 a "more bits" ffn_down / attn_v, 3 the fused qkv.
    auto W = [&](int kind, int64_t rows, int64_t cols) {
        if (mix.empty()) return B.affine4(rows, cols);
        if (kind == 1 || kind == 2) return B.ggml(GgmlType::Q6_K, rows, cols);
        if (mix == "q4_0") return B.ggml(GgmlType::Q4_0, rows, cols);
        return B.ggml(kind == 3 ? GgmlType::Q5_K : GgmlType::Q4_K, rows, cols);
    };
    Qwen35Weights& w = m->w_;
    w.embed = W(c.tie_word_embeddings ? 1 : 0, c.vocab_size, H);
    w.lm_head = c.tie_word_embeddings ? w.embed : W(1, c.vocab_size, H);
    int64_t n_attn = 0, i_attn = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) n_attn += c.layer_types[l] == LayerType::FULL_ATTENTION;
    w.final_norm = B.vec(H, 0.9f, 1.1f);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        Qwen35Layer L;
        L.type = c.layer_types[l];
        L.input_norm = B.vec(H, 0.9f, 1.1f);
        L.post_norm = B.vec(H, 0.9f, 1.1f);
        const bool mb = mix == "q4_k_m" && more_bits(l, c.num_hidden_layers);
        L.mlp = {W(0, I, H), W(0, I, H), W(mb ? 2 : 0, H, I)};
        if (L.type == LayerType::FULL_ATTENTION) {
            const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
            const bool vb = mix == "q4_k_m" && more_bits(i_attn++, n_attn);
            L.attn = {W(0, 2 * q, H), W(0, kv, H), W(vb ? 2 : 0, kv, H), W(0, H, q),
                      B.vec(c.head_dim, 0.9f, 1.1f), B.vec(c.head_dim, 0.9f, 1.1f)};
        } else {
            const int64_t nv = c.linear_num_value_heads, vd = c.value_dim();
            auto& g = L.gdn;
            g.in_proj_qkv = W(3, c.conv_dim(), H);
            g.in_proj_z = W(0, vd, H);
            g.in_proj_b = W(0, nv, H);
            g.in_proj_a = W(0, nv, H);
            g.out_proj = W(0, H, vd);
            g.conv = B.vec(c.conv_dim() * c.linear_conv_kernel_dim, -0.5f, 0.5f);
            g.A_log = B.vec(nv, 0.0f, 2.5f);
            g.dt_bias = B.vec(nv, -4.0f, 0.0f);
            g.norm = B.vec(c.linear_value_head_dim, 0.9f, 1.1f);
        }
        w.layers.push_back(std::move(L));
    }
    m->finish_info("synthetic:" + spec, mix.empty() ? "affine 4-bit, group 64 (random)"
                                        : mix == "q4_0" ? "GGUF Q4_0 mix, Q6_K output (random blocks)"
                                                        : "GGUF Q4_K_M mix: Q4_K, Q5_K qkv, Q6_K output / some down, v (random blocks)");
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember
