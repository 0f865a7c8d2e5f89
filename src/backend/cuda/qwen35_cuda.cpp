// Qwen3.5 forward pass on the GPU (fp32 activations, weights in their stored format), qwen35.md §2.3:
//   h = x + Mixer(RMSNorm(x)); out = h + SwiGLU(RMSNorm(h)); logits = LMHead(RMSNorm(h_L)).
// The residual add is fused into the next RMSNorm (add_rmsnorm); in decode (n = 1, one graph launch) the norms,
// SwiGLU and residual adds run inside the GEMVs when every weight allows it (CudaCausalLM::choose_decode_fusion).
#include "backend/cuda/qwen35_cuda.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "backend/cuda/weight_upload.h"
#include "models/qwen35.h"
#include "ops/activation/activation_cuda.h"
#include "ops/attention/attention_cuda.h"
#include "ops/embedding/embedding_cuda.h"
#include "ops/gated_delta_rule/gdn_chunked_cuda.h"
#include "ops/gated_delta_rule/gdn_cuda.h"
#include "ops/linear/linear_cuda.h"
#include "ops/norm/norm_cuda.h"

namespace ember::cuda {

namespace {

struct DevLayer {
    LayerType type;
    const float *input_norm, *post_norm;
    Weight gate, up, down;
    Weight q, k, v, o;                                   // attention
    const float *q_norm = nullptr, *k_norm = nullptr;
    Weight qkv, z, b, a, out;                            // delta net
    const float *conv = nullptr, *A_log = nullptr, *dt_bias = nullptr, *gnorm = nullptr;
    // Projections of one input stacked into one matrix (empty when their formats differ): decode runs one GEMV
    // over [q|k|v], [qkv|z|b|a] or [gate|up]; the parts above are row views into it (used for n > 1).
    Weight attn_in, gdn_in, gate_up;
};

class CudaQwen35 : public CudaCausalLM {
public:
    using CudaCausalLM::CudaCausalLM;
    Status init();

protected:
    Status allocate_layers(CudaState& s, const DeviceAlloc& alloc) const override;
    void run(CudaState& s, int64_t n, bool all_rows) const override;
    size_t linear_workspace(int64_t max_tokens) const override;
    size_t attention_workspace(int64_t max_tokens) const override {
        return gated_attention_workspace_bytes(adims_, max_tokens);
    }
    size_t attention_rows_workspace(int64_t rows) const override {
        return gated_attention_rows_workspace_bytes(adims_, rows);
    }

private:
    const Qwen35& host() const { return static_cast<const Qwen35&>(*cpu_); }

    Weight embed_;
    const float* final_norm_ = nullptr;
    std::vector<DevLayer> layers_;
    GatedAttentionDims adims_{};
};

Status CudaQwen35::init() {
    EMBER_REQUIRE(gpu_available(), "--device cuda: no CUDA device is available");
    const Qwen35Config& c = host().config();
    const Qwen35Weights& w = host().weights();
    EMBER_REQUIRE(gated_attention_head_dim_supported(c.head_dim),
                  "--device cuda: head dim %lld is not supported by the GPU attention (16, 32, 64, 96, 128, 256)",
                  (long long)c.head_dim);
    // The layers' matrices decide whether every GGML one is repacked (prefer_fusable_uploads); the LM head does not:
    // a Q6_K head (llama-quantize's default beside Q4_0 / Q4_1 / Q8_0 layers) cannot be, and used to keep the
    // layers' matrices below 8 MiB (the 2B's down, o and GDN projections) on the block GEMV, which re-decodes them
    // per row at 2-8 rows. H100, llama.cpp-made Q4_0 GGUF of the 2B shape, one call (EMBER_GGML_REPACK=all against
    // the old rule): 731 → 772 / 1,608 → 2,412 / 8,519 → 10,806 tok/s at 1 / 8 / 64 streams
    // (bench/results/2026-12-07-h100-gemm-release-fence.md).
    std::vector<const Weight*> hw;
    for (const auto& L : w.layers) {
        for (const Weight* m : {&L.mlp.gate_proj, &L.mlp.up_proj, &L.mlp.down_proj}) hw.push_back(m);
        if (L.type == LayerType::FULL_ATTENTION)
            for (const Weight* m : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj}) hw.push_back(m);
        else
            for (const Weight* m : {&L.gdn.in_proj_qkv, &L.gdn.in_proj_z, &L.gdn.in_proj_b, &L.gdn.in_proj_a,
                                    &L.gdn.out_proj})
                hw.push_back(m);
    }
    prefer_fusable_uploads(hw);
    EMBER_ASSIGN(embed_, arena_.upload_gather_table(w.embed, "embedding"));
    if (w.lm_head.data == w.embed.data && w.embed.format != WeightFormat::GGML) head_ = embed_;
    else { EMBER_ASSIGN(head_, arena_.upload(w.lm_head, "lm_head")); }
    host_head_ = &w.lm_head;
    EMBER_ASSIGN(final_norm_, arena_.upload(w.final_norm, "norm"));
    for (const auto& L : w.layers) {
        DevLayer d;
        d.type = L.type;
        EMBER_ASSIGN(d.input_norm, arena_.upload(L.input_norm, "norm"));
        EMBER_ASSIGN(d.post_norm, arena_.upload(L.post_norm, "norm"));
        EMBER_TRY(arena_.upload_group({&L.mlp.gate_proj, &L.mlp.up_proj}, d.gate_up, {&d.gate, &d.up}, "mlp"));
        EMBER_ASSIGN(d.down, arena_.upload(L.mlp.down_proj, "mlp"));
        if (L.type == LayerType::FULL_ATTENTION) {
            EMBER_TRY(arena_.upload_group({&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj}, d.attn_in, {&d.q, &d.k, &d.v},
                                   "attention"));
            EMBER_ASSIGN(d.o, arena_.upload(L.attn.o_proj, "attention"));
            EMBER_ASSIGN(d.q_norm, arena_.upload(L.attn.q_norm, "attention"));
            EMBER_ASSIGN(d.k_norm, arena_.upload(L.attn.k_norm, "attention"));
        } else {
            EMBER_TRY(arena_.upload_group({&L.gdn.in_proj_qkv, &L.gdn.in_proj_z, &L.gdn.in_proj_b, &L.gdn.in_proj_a}, d.gdn_in,
                                   {&d.qkv, &d.z, &d.b, &d.a}, "delta net"));
            EMBER_ASSIGN(d.out, arena_.upload(L.gdn.out_proj, "delta net"));
            EMBER_ASSIGN(d.conv, arena_.upload(L.gdn.conv, "delta net"));
            EMBER_ASSIGN(d.A_log, arena_.upload(L.gdn.A_log, "delta net"));
            EMBER_ASSIGN(d.dt_bias, arena_.upload(L.gdn.dt_bias, "delta net"));
            EMBER_ASSIGN(d.gnorm, arena_.upload(L.gdn.norm, "delta net"));
        }
        layers_.push_back(d);
    }
    const AttentionShape& as = host().attention_shape();
    adims_.n_heads = as.n_heads; adims_.n_kv = as.n_kv; adims_.head_dim = as.head_dim; adims_.rot_dim = as.rot_dim;
    adims_.rope_theta = as.rope_theta; adims_.eps = as.eps;
    adims_.capacity = std::min(opt_.context, c.max_position_embeddings);
    adims_.prefill_bf16 = opt_.prefill_precision == GemmPrecision::BF16;  // --prefill-precision bf16: attention too
    adims_.kv_bf16 = opt_.kv_bf16;
    int64_t widest = std::max({c.hidden_size, 2 * c.intermediate_size, 2 * c.num_attention_heads * c.head_dim,
                               c.conv_dim(), c.value_dim()});
    for (const auto& L : layers_) widest = std::max({widest, L.attn_in.rows, L.gdn_in.rows});
    finish_init(widest, adims_.capacity);
    std::vector<const Weight*> dw{&head_};
    for (const auto& L : layers_)
        for (const Weight* w : L.type == LayerType::FULL_ATTENTION
                                   ? std::vector<const Weight*>{&L.attn_in, &L.o, &L.gate_up, &L.down}
                                   : std::vector<const Weight*>{&L.gdn_in, &L.out, &L.gate_up, &L.down})
            dw.push_back(w);
    choose_decode_fusion(dw);
    for (const auto& L : layers_)  // fused batched rows: the stacked inputs through the split-output GEMV
        if ((L.type == LayerType::FULL_ATTENTION ? L.attn_in : L.gdn_in).format != WeightFormat::AFFINE) fuse_rows_ = 1;
    return Status::ok();
}

Status CudaQwen35::allocate_layers(CudaState& s, const DeviceAlloc& alloc) const {
    const Qwen35Config& c = host().config();
    const DeltaNetShape& g = host().delta_net_shape();
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        if (c.layer_types[l] == LayerType::FULL_ATTENTION) {
            EMBER_TRY(pool_kv(s, alloc, adims_.n_kv * adims_.head_dim, size_t(l)));
        } else {
            EMBER_TRY(pool_layer(s, alloc, (g.conv_kernel - 1) * g.conv_dim(), "conv state", &s.conv0[l], &s.conv_slot));
            EMBER_TRY(pool_layer(s, alloc, g.heads.nv * g.heads.dk * g.heads.dv, "GDN state", &s.S0[l], &s.S_slot));
        }
    }
    return Status::ok();
}

size_t CudaQwen35::linear_workspace(int64_t B) const {
    size_t lw = 0;
    for (const auto& L : layers_)
        for (const Weight* w : {&L.gate, &L.up, &L.down, &L.q, &L.k, &L.v, &L.o, &L.qkv, &L.z, &L.b, &L.a, &L.out,
                                &L.attn_in, &L.gdn_in, &L.gate_up})
            if (w->data) lw = std::max(lw, linear_workspace_bytes(*w, B));
    const DeltaNetShape& g = host().delta_net_shape();  // the chunked GDN prefill shares it (one op at a time)
    for (const auto& L : layers_)
        if (L.type != LayerType::FULL_ATTENTION && gated_delta_net_prefill_supported(g.heads, int(g.conv_kernel)))
            lw = std::max(lw, gated_delta_net_prefill_workspace_bytes(g.heads, B));
    return lw;
}

// Enqueues the forward pass of the n tokens in s.ids at position *s.pos. Logits of the last row (or of
// rows [0, min(n, 8)) when all_rows) land in s.logits.
void CudaQwen35::run(CudaState& s, int64_t n, bool all_rows) const {
    const Qwen35Config& c = host().config();
    const DeltaNetShape& g = host().delta_net_shape();
    const int64_t H = c.hidden_size, I = c.intermediate_size;
    const float eps = c.rms_norm_eps;
    cudaStream_t st = s.stream;
    const bool fz = fused(s, n);  // norms, SwiGLU and residual adds inside the GEMVs (1 row, or a few batched rows)
    embed(s, embed_, n);
    const float* pending = nullptr;  // mixer/MLP output not yet added to the residual stream
    for (size_t l = 0; l < layers_.size(); ++l) {
        const DevLayer& L = layers_[l];
        if (!fz) add_rmsnorm(s.x, pending, L.input_norm, s.xn, n, H, eps, st);
        auto stacked_in = [&](const Weight& w) { normed_linear(s, w, L.input_norm, eps, 1, s.t0, fz); };
        if (L.type == LayerType::FULL_ATTENTION) {
            const float *q = s.t0, *k = s.t1, *v = s.t2;
            if (fz && n > 1) {  // batched rows: one fused GEMV, its output split into t0 | t1 | t2
                lin_parts_fused(s, L.attn_in, {&L.q, &L.k, &L.v}, {s.t0, s.t1, s.t2}, L.input_norm, eps, n);
            } else if (n == 1 && !L.attn_in.empty()) {  // one GEMV: t0 = [q+gate | k | v]
                stacked_in(L.attn_in);
                k = s.t0 + L.q.rows;
                v = k + L.k.rows;
            } else {
                // [n, heads, 2, d], [n, kv, d], [n, kv, d]
                lin_parts(s, L.attn_in, {&L.q, &L.k, &L.v}, {s.t0, s.t1, s.t2}, s.xn, n);
            }
            attention(s, adims_, q, k, v, L.q_norm, L.k_norm, l, n);
            pending = residual_linear(s, L.o, s.t3, n, fz);
        } else {
            const float *qkv = s.t0, *z = s.t1, *b = s.t2, *a = s.t4;
            if (fz && n > 1) {
                lin_parts_fused(s, L.gdn_in, {&L.qkv, &L.z, &L.b, &L.a}, {s.t0, s.t1, s.t2, s.t4}, L.input_norm,
                                eps, n);
            } else if (n == 1 && !L.gdn_in.empty()) {  // one GEMV: t0 = [qkv | z | b | a]
                stacked_in(L.gdn_in);
                z = s.t0 + L.qkv.rows;
                b = z + L.z.rows;
                a = b + L.b.rows;
            } else {
                // [n, conv_dim], [n, nv·dv], [n, nv], [n, nv]
                lin_parts(s, L.gdn_in, {&L.qkv, &L.z, &L.b, &L.a}, {s.t0, s.t1, s.t2, s.t4}, s.xn, n);
            }
            GdnDecodeArgs ga{qkv, z, a, b, L.conv, L.A_log, L.dt_bias, L.gnorm, s.conv[l], s.S[l], s.t3,
                             g.heads, static_cast<int>(g.conv_kernel), g.eps};
            if (s.rows_mode) {
                ga.conv_state = s.conv0[l];
                ga.S = s.S0[l];
                gated_delta_net_step_rows(ga, s.rows_dev, s.conv_slot, s.S_slot, n, st);
            } else if (gated_delta_net_prefill_preferred(g.heads, ga.K, n))
                gated_delta_net_prefill(ga, n, s.lin_ws, s.lin_ws_bytes, st);
            else
                gdn_step(s, ga, n);
            pending = residual_linear(s, L.out, s.t3, n, fz);
        }
        pending = swiglu_mlp(s, pending, L.post_norm, eps, L.gate_up, L.gate, L.up, L.down, n, I, fz);
    }
    lm_head(s, pending, final_norm_, n, all_rows, eps, fz);
}

}  // namespace

bool is_qwen35(const CausalLM& cpu) { return dynamic_cast<const Qwen35*>(&cpu) != nullptr; }

Expected<std::unique_ptr<CausalLM>> make_qwen35_cuda(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) {
    EMBER_REQUIRE(is_qwen35(*cpu), "make_qwen35_cuda: not a Qwen3.5 model");
    auto m = std::make_unique<CudaQwen35>(std::move(cpu), opt);
    EMBER_TRY(m->init());
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember::cuda
