// Qwen35::synthetic: random 4-bit affine (g64) weights of a real configuration, built in memory for benchmarks.
// Values are scaled so activations stay O(1) (weights ≈ N(0, 1/fan_in)); nothing here is a checkpoint.
#include <cmath>
#include <cstring>

#include "models/qwen35.h"

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

Expected<std::unique_ptr<CausalLM>> Qwen35::synthetic(const std::string& preset, uint64_t seed) {
    auto m = std::make_unique<Qwen35>();
    EMBER_ASSIGN(m->cfg_, Qwen35Config::preset(preset));
    const Qwen35Config& c = m->cfg_;
    Builder B(m->owned_, seed);
    const int64_t H = c.hidden_size, I = c.intermediate_size;
    Qwen35Weights& w = m->w_;
    w.embed = B.affine4(c.vocab_size, H);
    w.lm_head = c.tie_word_embeddings ? w.embed : B.affine4(c.vocab_size, H);
    w.final_norm = B.vec(H, 0.9f, 1.1f);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        Qwen35Layer L;
        L.type = c.layer_types[l];
        L.input_norm = B.vec(H, 0.9f, 1.1f);
        L.post_norm = B.vec(H, 0.9f, 1.1f);
        L.mlp = {B.affine4(I, H), B.affine4(I, H), B.affine4(H, I)};
        if (L.type == LayerType::FULL_ATTENTION) {
            const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
            L.attn = {B.affine4(2 * q, H), B.affine4(kv, H), B.affine4(kv, H), B.affine4(H, q),
                      B.vec(c.head_dim, 0.9f, 1.1f), B.vec(c.head_dim, 0.9f, 1.1f)};
        } else {
            const int64_t nv = c.linear_num_value_heads, vd = c.value_dim();
            auto& g = L.gdn;
            g.in_proj_qkv = B.affine4(c.conv_dim(), H);
            g.in_proj_z = B.affine4(vd, H);
            g.in_proj_b = B.affine4(nv, H);
            g.in_proj_a = B.affine4(nv, H);
            g.out_proj = B.affine4(H, vd);
            g.conv = B.vec(c.conv_dim() * c.linear_conv_kernel_dim, -0.5f, 0.5f);
            g.A_log = B.vec(nv, 0.0f, 2.5f);
            g.dt_bias = B.vec(nv, -4.0f, 0.0f);
            g.norm = B.vec(c.linear_value_head_dim, 0.9f, 1.1f);
        }
        w.layers.push_back(std::move(L));
    }
    m->finish_info("synthetic:" + preset, "affine 4-bit, group 64 (random)");
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember
