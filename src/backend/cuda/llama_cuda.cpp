// Llama-family forward pass on the GPU (fp32 activations), models/llama.h:
//   h = x + Attention(RMSNorm(x)); out = h + SwiGLU(RMSNorm(h)); logits = Head(RMSNorm(h_L)).
// The residual add is fused into the next RMSNorm (add_rmsnorm); in decode (n = 1, one graph launch) the norms,
// SwiGLU and residual adds run inside the GEMVs when every weight allows it (CudaCausalLM::choose_decode_fusion).
#include "backend/cuda/llama_cuda.h"

#include <algorithm>

#include "models/llama.h"
#include "ops/activation/activation_cuda.h"
#include "ops/attention/attention_cuda.h"
#include "ops/embedding/embedding_cuda.h"
#include "ops/linear/linear_cuda.h"
#include "ops/norm/norm_cuda.h"

namespace ember::cuda {

namespace {

struct DevLayer {
    const float *attn_norm = nullptr, *ffn_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr;
    Weight q, k, v, o, gate, up, down;
    Weight attn_in, gate_up;  // stacked [q|k|v] and [gate|up] (empty when formats differ)
    const float *q_bias = nullptr, *k_bias = nullptr, *v_bias = nullptr;  // qwen2; q_bias → [q|k|v] biases
};

class CudaLlama : public CudaCausalLM {
public:
    using CudaCausalLM::CudaCausalLM;
    Status init();

protected:
    Status allocate_layers(CudaState& s, const DeviceAlloc& alloc) const override {
        for (size_t l = 0; l < layers_.size(); ++l) {
            EMBER_TRY(pool_kv(s, alloc, adims_.n_kv * adims_.head_dim, size_t(l)));
        }
        return Status::ok();
    }
    size_t attention_rows_workspace(int64_t rows) const override {
        return gated_attention_rows_workspace_bytes(adims_, rows);
    }
    void run(CudaState& s, int64_t n, bool all_rows) const override;
    size_t linear_workspace(int64_t B) const override {
        size_t lw = 0;
        for (const auto& L : layers_)
            for (const Weight* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down, &L.attn_in, &L.gate_up})
                if (w->data) lw = std::max(lw, linear_workspace_bytes(*w, B));
        return lw;
    }
    size_t attention_workspace(int64_t max_tokens) const override {
        return gated_attention_workspace_bytes(adims_, max_tokens);
    }

private:
    const Llama& host() const { return static_cast<const Llama&>(*cpu_); }

    Weight embed_;  // the gather copy (DeviceArena::upload_gather_table)
    const float* final_norm_ = nullptr;
    std::vector<DevLayer> layers_;
    GatedAttentionDims adims_{};
};

Status CudaLlama::init() {
    const LlamaConfig& c = host().config();
    const StdAttentionShape& as = host().attention_shape();
    EMBER_REQUIRE(gated_attention_head_dim_supported(as.head_dim),
                  "--device cuda: head dim %lld is not supported by the GPU attention (16, 32, 64, 96, 128, 256)",
                  (long long)as.head_dim);
    const Weight& E = host().embedding();
    std::vector<const Weight*> hw{&host().head()};
    for (const LlamaLayer& L : host().layers())
        for (const Weight* w : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj, &L.mlp.gate_proj,
                                &L.mlp.up_proj, &L.mlp.down_proj})
            hw.push_back(w);
    prefer_fusable_uploads(hw);
    EMBER_ASSIGN(embed_, arena_.upload_gather_table(E, "embedding"));
    if (host().head().data == E.data && E.format != WeightFormat::GGML) head_ = embed_;
    else { EMBER_ASSIGN(head_, arena_.upload(host().head(), "output")); }
    host_head_ = &host().head();
    EMBER_ASSIGN(final_norm_, arena_.upload(host().final_norm(), "norm"));
    for (const LlamaLayer& L : host().layers()) {
        DevLayer d;
        const auto& A = L.attn;
        EMBER_REQUIRE(A.q_bias.empty() == A.k_bias.empty() && A.q_bias.empty() == A.v_bias.empty(),
                      "--device cuda: attention biases on some of q/k/v only are not supported");
        if (!A.q_bias.empty()) {  // one upload, [q | k | v]: the stacked decode GEMV adds them in one go
            std::vector<float> qkv(A.q_bias);
            qkv.insert(qkv.end(), A.k_bias.begin(), A.k_bias.end());
            qkv.insert(qkv.end(), A.v_bias.begin(), A.v_bias.end());
            EMBER_ASSIGN(d.q_bias, arena_.upload(qkv, "attention"));
            d.k_bias = d.q_bias + A.q_bias.size();
            d.v_bias = d.k_bias + A.k_bias.size();
        }
        EMBER_ASSIGN(d.attn_norm, arena_.upload(L.attn_norm, "norm"));
        EMBER_ASSIGN(d.ffn_norm, arena_.upload(L.ffn_norm, "norm"));
        if (!L.attn.q_norm.empty()) {
            EMBER_ASSIGN(d.q_norm, arena_.upload(L.attn.q_norm, "attention"));
            EMBER_ASSIGN(d.k_norm, arena_.upload(L.attn.k_norm, "attention"));
        }
        EMBER_TRY(arena_.upload_group({&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj}, d.attn_in, {&d.q, &d.k, &d.v},
                                      "attention"));
        EMBER_ASSIGN(d.o, arena_.upload(L.attn.o_proj, "attention"));
        EMBER_TRY(arena_.upload_group({&L.mlp.gate_proj, &L.mlp.up_proj}, d.gate_up, {&d.gate, &d.up}, "mlp"));
        EMBER_ASSIGN(d.down, arena_.upload(L.mlp.down_proj, "mlp"));
        layers_.push_back(d);
    }
    adims_.n_heads = as.n_heads; adims_.n_kv = as.n_kv; adims_.head_dim = as.head_dim; adims_.rot_dim = as.rot_dim;
    adims_.rope_theta = as.rope_theta; adims_.eps = as.eps;
    adims_.capacity = std::min(opt_.context, c.context);
    adims_.gated = false;
    adims_.rope_interleaved = as.rope_style == RopeStyle::INTERLEAVED;
    adims_.freq_factors = as.freq_factors.empty() ? nullptr : as.freq_factors.data();
    adims_.score_mul = as.score_mul;
    adims_.prefill_bf16 = opt_.prefill_precision == GemmPrecision::BF16;  // --prefill-precision bf16: attention too
    adims_.kv_bf16 = opt_.kv_bf16;
    int64_t widest = std::max({c.hidden, 2 * c.ffn, (c.n_heads + 2 * c.n_kv) * c.head_dim});
    finish_init(widest, adims_.capacity);
    std::vector<const Weight*> dw{&head_};
    for (const auto& L : layers_)
        for (const Weight* w : {&L.attn_in, &L.o, &L.gate_up, &L.down}) dw.push_back(w);
    choose_decode_fusion(dw);
    return Status::ok();
}

void CudaLlama::run(CudaState& s, int64_t n, bool all_rows) const {
    const LlamaConfig& c = host().config();
    const int64_t H = c.hidden, I = c.ffn;
    const float eps = c.eps;
    cudaStream_t st = s.stream;
    const bool fz = n == 1 && fuse_decode_;  // norms, SwiGLU and residual adds inside the GEMVs
    embed(s, embed_, n);
    const float* pending = nullptr;  // attention/MLP output not yet added to the residual stream
    for (size_t l = 0; l < layers_.size(); ++l) {
        const DevLayer& L = layers_[l];
        if (!fz) add_rmsnorm(s.x, pending, L.attn_norm, s.xn, n, H, eps, st);
        const float *q = s.t0, *k = s.t1, *v = s.t2;
        if (n == 1 && !L.attn_in.empty()) {  // one GEMV: t0 = [q | k | v]
            normed_linear(s, L.attn_in, L.attn_norm, eps, 1, s.t0, fz);
            if (L.q_bias) bias(s, s.t0, L.q_bias, 1, L.attn_in.rows);
            k = s.t0 + L.q.rows;
            v = k + L.k.rows;
        } else {
            lin_parts(s, L.attn_in, {&L.q, &L.k, &L.v}, {s.t0, s.t1, s.t2}, s.xn, n);
            if (L.q_bias) {
                bias(s, s.t0, L.q_bias, n, L.q.rows);
                bias(s, s.t1, L.k_bias, n, L.k.rows);
                bias(s, s.t2, L.v_bias, n, L.v.rows);
            }
        }
        attention(s, adims_, q, k, v, L.q_norm, L.k_norm, l, n);
        pending = residual_linear(s, L.o, s.t3, n, fz);
        pending = swiglu_mlp(s, pending, L.ffn_norm, eps, L.gate_up, L.gate, L.up, L.down, n, I, fz);
    }
    lm_head(s, pending, final_norm_, n, all_rows, eps, fz);
}

}  // namespace

bool is_llama(const CausalLM& cpu) { return dynamic_cast<const Llama*>(&cpu) != nullptr; }

Expected<std::unique_ptr<CausalLM>> make_llama_cuda(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) {
    EMBER_REQUIRE(is_llama(*cpu), "make_llama_cuda: not a Llama-family model");
    auto m = std::make_unique<CudaLlama>(std::move(cpu), opt);
    EMBER_TRY(m->init());
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember::cuda
