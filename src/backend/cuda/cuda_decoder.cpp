// The CUDA backend of decoder_forward (models/decoder.h), fp32 activations, weights in their stored format.
// The residual add is fused into the next RMSNorm (add_rmsnorm); in decode (one row, or a few rows of a batched
// step: CudaCausalLM::fused) the norms, SwiGLU and residual adds run inside the GEMVs when every weight allows it
// (CudaCausalLM::choose_decode_fusion). Each block's math is the line decoder.h gives for it.
#include "backend/cuda/cuda_decoder.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/weight_upload.h"
#include "core/check.h"
#include "models/decoder.h"
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
    MixerKind mixer;
    const float *mixer_norm = nullptr, *mlp_norm = nullptr;
    Weight gate, up, down;
    Weight q, k, v, o;                                   // attention (both kinds)
    const float *q_norm = nullptr, *k_norm = nullptr;    // (optional for ATTENTION)
    const float *q_bias = nullptr, *k_bias = nullptr, *v_bias = nullptr;  // ATTENTION (qwen2): one [q|k|v] upload
    Weight qkv, z, b, a, out;                            // delta net
    const float *conv = nullptr, *A_log = nullptr, *dt_bias = nullptr, *gnorm = nullptr;
    // Projections of one input stacked into one matrix (empty when their formats differ): decode runs one GEMV
    // over [q|k|v], [qkv|z|b|a] or [gate|up]; the parts above are row views into it (used for n > 1).
    Weight attn_in, gdn_in, gate_up;
    const Weight& mixer_in() const { return is_attention(mixer) ? attn_in : gdn_in; }
    const Weight& mixer_out() const { return is_attention(mixer) ? o : out; }
};

class CudaDecoder : public CudaCausalLM {
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
    struct Blocks;  // decoder_forward's backend: one step of n rows on a state
    const DecoderDef& def() const { return static_cast<const Decoder&>(*cpu_).def(); }
    Status upload_layer(const DecoderLayer& L, DevLayer& d);
    // Both return the block's pending output (residual_linear).
    const float* attention_block(CudaState& s, size_t l, const DevLayer& L, int64_t n, bool fz) const;
    const float* delta_net_block(CudaState& s, size_t l, const DevLayer& L, int64_t n, bool fz) const;

    Weight embed_;  // the gather copy (DeviceArena::upload_gather_table)
    const float* final_norm_ = nullptr;
    std::vector<DevLayer> layers_;
    GatedAttentionDims adims_{};
};

struct CudaDecoder::Blocks {
    const CudaDecoder& m;
    CudaState& s;
    int64_t n;
    bool all_rows;
    bool fz;                         // norms, SwiGLU and residual adds inside the GEMVs
    const float* pending = nullptr;  // a block's output not yet added to the residual stream (unfused)

    void embed() { m.embed(s, m.embed_, n); }
    void mixer(size_t l, const DecoderLayer&) {
        const DevLayer& L = m.layers_[l];
        const DecoderDef& d = m.def();
        if (!fz) add_rmsnorm(s.x, pending, L.mixer_norm, s.xn, n, d.hidden, d.eps, s.stream);
        pending = is_attention(L.mixer) ? m.attention_block(s, l, L, n, fz) : m.delta_net_block(s, l, L, n, fz);
    }
    void mlp(size_t l, const DecoderLayer&) {
        const DevLayer& L = m.layers_[l];
        const DecoderDef& d = m.def();
        pending = m.swiglu_mlp(s, pending, L.mlp_norm, d.eps, L.gate_up, L.gate, L.up, L.down, n, d.intermediate, fz);
    }
    void head() { m.lm_head(s, pending, m.final_norm_, n, all_rows, m.def().eps, fz); }
};

Status CudaDecoder::upload_layer(const DecoderLayer& L, DevLayer& d) {
    d.mixer = L.mixer;
    EMBER_ASSIGN(d.mixer_norm, arena_.upload(*L.mixer_norm, "norm"));
    EMBER_ASSIGN(d.mlp_norm, arena_.upload(*L.mlp_norm, "norm"));
    EMBER_TRY(arena_.upload_group({&L.mlp->gate_proj, &L.mlp->up_proj}, d.gate_up, {&d.gate, &d.up}, "mlp"));
    EMBER_ASSIGN(d.down, arena_.upload(L.mlp->down_proj, "mlp"));
    switch (L.mixer) {
        case MixerKind::ATTENTION: {
            const AttentionWeights& A = *L.attn;
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
            if (!A.q_norm.empty()) {
                EMBER_ASSIGN(d.q_norm, arena_.upload(A.q_norm, "attention"));
                EMBER_ASSIGN(d.k_norm, arena_.upload(A.k_norm, "attention"));
            }
            EMBER_TRY(arena_.upload_group({&A.q_proj, &A.k_proj, &A.v_proj}, d.attn_in, {&d.q, &d.k, &d.v}, "attention"));
            EMBER_ASSIGN(d.o, arena_.upload(A.o_proj, "attention"));
            break;
        }
        case MixerKind::GATED_ATTENTION: {
            const GatedAttentionWeights& A = *L.gattn;
            EMBER_TRY(arena_.upload_group({&A.q_proj, &A.k_proj, &A.v_proj}, d.attn_in, {&d.q, &d.k, &d.v}, "attention"));
            EMBER_ASSIGN(d.o, arena_.upload(A.o_proj, "attention"));
            EMBER_ASSIGN(d.q_norm, arena_.upload(A.q_norm, "attention"));
            EMBER_ASSIGN(d.k_norm, arena_.upload(A.k_norm, "attention"));
            break;
        }
        case MixerKind::GATED_DELTA_NET: {
            const GatedDeltaNetWeights& G = *L.gdn;
            EMBER_TRY(arena_.upload_group({&G.in_proj_qkv, &G.in_proj_z, &G.in_proj_b, &G.in_proj_a}, d.gdn_in,
                                          {&d.qkv, &d.z, &d.b, &d.a}, "delta net"));
            EMBER_ASSIGN(d.out, arena_.upload(G.out_proj, "delta net"));
            EMBER_ASSIGN(d.conv, arena_.upload(G.conv, "delta net"));
            EMBER_ASSIGN(d.A_log, arena_.upload(G.A_log, "delta net"));
            EMBER_ASSIGN(d.dt_bias, arena_.upload(G.dt_bias, "delta net"));
            EMBER_ASSIGN(d.gnorm, arena_.upload(G.norm, "delta net"));
            break;
        }
    }
    return Status::ok();
}

Status CudaDecoder::init() {
    EMBER_REQUIRE(gpu_available(), "--device cuda: no CUDA device is available");
    const DecoderDef& d = def();
    bool plain = false, gated = false;
    for (const DecoderLayer& L : d.layers) {
        plain |= L.mixer == MixerKind::ATTENTION;
        gated |= L.mixer == MixerKind::GATED_ATTENTION;
    }
    EMBER_REQUIRE(!(plain && gated), "--device cuda: a model with both gated and plain attention layers is not supported");
    if (plain || gated) {
        const int64_t hd = plain ? d.attn->head_dim : d.gattn->head_dim;
        EMBER_REQUIRE(gated_attention_head_dim_supported(hd),
                      "--device cuda: head dim %lld is not supported by the GPU attention (16, 32, 64, 96, 128, 256)",
                      (long long)hd);
    }
    // Which matrices decide whether every GGML one is repacked (prefer_fusable_uploads): the layers', and the LM
    // head where the architecture says so (DecoderDef::head_in_repack_rule). For Qwen3.5 it does not: a Q6_K head
    // (llama-quantize's default beside Q4_0 / Q4_1 / Q8_0 layers) cannot be repacked, and used to keep the layers'
    // matrices below 8 MiB (the 2B's down, o and GDN projections) on the block GEMV, which re-decodes them per row at
    // 2-8 rows. H100, llama.cpp-made Q4_0 GGUF of the 2B shape, one call (EMBER_GGML_REPACK=all against the old
    // rule): 731 → 772 / 1,608 → 2,412 / 8,519 → 10,806 tok/s at 1 / 8 / 64 streams
    // (bench/results/2026-12-07-h100-gemm-release-fence.md).
    std::vector<const Weight*> hw;
    if (d.head_in_repack_rule) hw.push_back(d.head);
    for (const DecoderLayer& L : d.layers) {
        switch (L.mixer) {
            case MixerKind::ATTENTION:
                for (const Weight* m : {&L.attn->q_proj, &L.attn->k_proj, &L.attn->v_proj, &L.attn->o_proj}) hw.push_back(m);
                break;
            case MixerKind::GATED_ATTENTION:
                for (const Weight* m : {&L.gattn->q_proj, &L.gattn->k_proj, &L.gattn->v_proj, &L.gattn->o_proj})
                    hw.push_back(m);
                break;
            case MixerKind::GATED_DELTA_NET:
                for (const Weight* m : {&L.gdn->in_proj_qkv, &L.gdn->in_proj_z, &L.gdn->in_proj_b, &L.gdn->in_proj_a,
                                        &L.gdn->out_proj})
                    hw.push_back(m);
                break;
        }
        for (const Weight* m : {&L.mlp->gate_proj, &L.mlp->up_proj, &L.mlp->down_proj}) hw.push_back(m);
    }
    prefer_fusable_uploads(hw);
    EMBER_ASSIGN(embed_, arena_.upload_gather_table(*d.embed, "embedding"));
    if (d.head->data == d.embed->data && d.embed->format != WeightFormat::GGML) head_ = embed_;
    else { EMBER_ASSIGN(head_, arena_.upload(*d.head, "lm_head")); }
    host_head_ = d.head;
    EMBER_ASSIGN(final_norm_, arena_.upload(*d.final_norm, "norm"));
    for (const DecoderLayer& L : d.layers) {
        DevLayer dl;
        EMBER_TRY(upload_layer(L, dl));
        layers_.push_back(dl);
    }
    if (plain) {
        const StdAttentionShape& as = *d.attn;
        adims_.n_heads = as.n_heads; adims_.n_kv = as.n_kv; adims_.head_dim = as.head_dim; adims_.rot_dim = as.rot_dim;
        adims_.rope_theta = as.rope_theta; adims_.eps = as.eps;
        adims_.gated = false;
        adims_.rope_interleaved = as.rope_style == RopeStyle::INTERLEAVED;
        adims_.freq_factors = as.freq_factors.empty() ? nullptr : as.freq_factors.data();
        adims_.score_mul = as.score_mul;
    } else if (gated) {
        const AttentionShape& as = *d.gattn;
        adims_.n_heads = as.n_heads; adims_.n_kv = as.n_kv; adims_.head_dim = as.head_dim; adims_.rot_dim = as.rot_dim;
        adims_.rope_theta = as.rope_theta; adims_.eps = as.eps;
    }
    adims_.capacity = std::min(opt_.context, d.context);
    adims_.prefill_bf16 = opt_.prefill_precision == GemmPrecision::BF16;  // --prefill-precision bf16: attention too
    adims_.kv_bf16 = opt_.kv_bf16;
    // The widest activation row a block writes (t0 .. t4, the stacked inputs' outputs).
    int64_t widest = std::max(d.hidden, 2 * d.intermediate);
    if (plain) widest = std::max(widest, (d.attn->n_heads + 2 * d.attn->n_kv) * d.attn->head_dim);
    if (gated) widest = std::max(widest, 2 * d.gattn->n_heads * d.gattn->head_dim);
    if (d.gdn) widest = std::max({widest, d.gdn->conv_dim(), d.gdn->heads.nv * d.gdn->heads.dv});
    for (const auto& L : layers_) widest = std::max({widest, L.attn_in.rows, L.gdn_in.rows});
    finish_init(widest, adims_.capacity);
    std::vector<const Weight*> dw{&head_};
    for (const auto& L : layers_)
        for (const Weight* w : {&L.mixer_in(), &L.mixer_out(), &L.gate_up, &L.down}) dw.push_back(w);
    choose_decode_fusion(dw);
    // Fused batched rows feed the stacked inputs through the split-output GEMV, affine only; the plain attention's
    // fused rows were never measured (the Llama family fused one row only before the decoders shared this file).
    for (const auto& L : layers_)
        if (L.mixer_in().format != WeightFormat::AFFINE || L.mixer == MixerKind::ATTENTION) fuse_rows_ = 1;
    return Status::ok();
}

Status CudaDecoder::allocate_layers(CudaState& s, const DeviceAlloc& alloc) const {
    for (size_t l = 0; l < layers_.size(); ++l) {
        if (is_attention(layers_[l].mixer)) {
            EMBER_TRY(pool_kv(s, alloc, adims_.n_kv * adims_.head_dim, l));
        } else {
            const DeltaNetShape& g = *def().gdn;
            EMBER_TRY(pool_layer(s, alloc, (g.conv_kernel - 1) * g.conv_dim(), "conv state", &s.conv0[l], &s.conv_slot));
            EMBER_TRY(pool_layer(s, alloc, g.heads.nv * g.heads.dk * g.heads.dv, "GDN state", &s.S0[l], &s.S_slot));
        }
    }
    return Status::ok();
}

size_t CudaDecoder::linear_workspace(int64_t B) const {
    size_t lw = 0;
    for (const auto& L : layers_)
        for (const Weight* w : {&L.gate, &L.up, &L.down, &L.q, &L.k, &L.v, &L.o, &L.qkv, &L.z, &L.b, &L.a, &L.out,
                                &L.attn_in, &L.gdn_in, &L.gate_up})
            if (w->data) lw = std::max(lw, linear_workspace_bytes(*w, B));
    const DeltaNetShape* g = def().gdn;  // the chunked GDN prefill shares it (one op at a time)
    for (const auto& L : layers_)
        if (L.mixer == MixerKind::GATED_DELTA_NET && gated_delta_net_prefill_supported(g->heads, int(g->conv_kernel)))
            lw = std::max(lw, gated_delta_net_prefill_workspace_bytes(g->heads, B));
    return lw;
}

// x += Attention(RMSNorm(x)) of layer l (s.xn holds RMSNorm(x) unless fused): q, k, v → the attention core → o.
const float* CudaDecoder::attention_block(CudaState& s, size_t l, const DevLayer& L, int64_t n, bool fz) const {
    const float eps = def().eps;
    const float *q = s.t0, *k = s.t1, *v = s.t2;
    auto part_biases = [&] {
        if (!L.q_bias) return;
        bias(s, s.t0, L.q_bias, n, L.q.rows);
        bias(s, s.t1, L.k_bias, n, L.k.rows);
        bias(s, s.t2, L.v_bias, n, L.v.rows);
    };
    if (fz && n > 1) {  // batched rows: one fused GEMV, its output split into t0 | t1 | t2
        lin_parts_fused(s, L.attn_in, {&L.q, &L.k, &L.v}, {s.t0, s.t1, s.t2}, L.mixer_norm, eps, n);
        part_biases();
    } else if (n == 1 && !L.attn_in.empty()) {  // one GEMV: t0 = [q (+gate) | k | v]
        normed_linear(s, L.attn_in, L.mixer_norm, eps, 1, s.t0, fz);
        if (L.q_bias) bias(s, s.t0, L.q_bias, 1, L.attn_in.rows);
        k = s.t0 + L.q.rows;
        v = k + L.k.rows;
    } else {
        // gated: [n, heads, 2, d]; plain: [n, heads, d]; then [n, kv, d], [n, kv, d]
        lin_parts(s, L.attn_in, {&L.q, &L.k, &L.v}, {s.t0, s.t1, s.t2}, s.xn, n);
        part_biases();
    }
    attention(s, adims_, q, k, v, L.q_norm, L.k_norm, l, n);
    return residual_linear(s, L.o, s.t3, n, fz);
}

// x += GatedDeltaNet(RMSNorm(x)) of layer l: [qkv | z | b | a] → conv + delta rule + gated norm → out.
const float* CudaDecoder::delta_net_block(CudaState& s, size_t l, const DevLayer& L, int64_t n, bool fz) const {
    const DeltaNetShape& g = *def().gdn;
    const float eps = def().eps;
    const float *qkv = s.t0, *z = s.t1, *b = s.t2, *a = s.t4;
    if (fz && n > 1) {
        lin_parts_fused(s, L.gdn_in, {&L.qkv, &L.z, &L.b, &L.a}, {s.t0, s.t1, s.t2, s.t4}, L.mixer_norm, eps, n);
    } else if (n == 1 && !L.gdn_in.empty()) {  // one GEMV: t0 = [qkv | z | b | a]
        normed_linear(s, L.gdn_in, L.mixer_norm, eps, 1, s.t0, fz);
        z = s.t0 + L.qkv.rows;
        b = z + L.z.rows;
        a = b + L.b.rows;
    } else {
        // [n, conv_dim], [n, nv·dv], [n, nv], [n, nv]
        lin_parts(s, L.gdn_in, {&L.qkv, &L.z, &L.b, &L.a}, {s.t0, s.t1, s.t2, s.t4}, s.xn, n);
    }
    GdnDecodeArgs ga{qkv, z, a, b, L.conv, L.A_log, L.dt_bias, L.gnorm, s.conv[l], s.S[l], s.t3,
                     g.heads, static_cast<int>(g.conv_kernel), g.eps};
    if (s.mixed) {  // per prompt chunk, then the decode rows: rows r0.. of every input and of t3
        const int64_t cd = g.conv_dim(), vd = g.heads.nv * g.heads.dv, nv = g.heads.nv;
        auto at = [&](int64_t r0) {
            GdnDecodeArgs x = ga;
            x.qkv = qkv + r0 * cd, x.z = z + r0 * vd, x.a = a + r0 * nv, x.b = b + r0 * nv, x.y = s.t3 + r0 * vd;
            return x;
        };
        for_mixed_segments(
            s,
            [&](int64_t r0, int64_t m) {
                GdnDecodeArgs x = at(r0);
                x.conv_state = s.conv[l], x.S = s.S[l];
                if (gated_delta_net_prefill_preferred(g.heads, x.K, m))
                    gated_delta_net_prefill(x, m, s.lin_ws, s.lin_ws_bytes, s.stream);
                else
                    gdn_step(s, x, m);
            },
            [&](int64_t r0, int64_t rows) {
                GdnDecodeArgs x = at(r0);
                x.conv_state = s.conv0[l], x.S = s.S0[l];
                gated_delta_net_step_rows(x, s.rows_dev, s.conv_slot, s.S_slot, rows, s.stream);
            });
    } else if (s.rows_mode) {
        ga.conv_state = s.conv0[l];
        ga.S = s.S0[l];
        gated_delta_net_step_rows(ga, s.rows_dev, s.conv_slot, s.S_slot, n, s.stream);
    } else if (gated_delta_net_prefill_preferred(g.heads, ga.K, n))
        gated_delta_net_prefill(ga, n, s.lin_ws, s.lin_ws_bytes, s.stream);
    else
        gdn_step(s, ga, n);
    return residual_linear(s, L.out, s.t3, n, fz);
}

// Enqueues the forward pass of the n tokens in s.ids at position *s.pos_dev. Logits of the last row (or of
// rows [0, min(n, 8)) when all_rows) land in s.logits.
void CudaDecoder::run(CudaState& s, int64_t n, bool all_rows) const {
    Blocks b{*this, s, n, all_rows, fused(s, n)};
    decoder_forward(def(), b);
}

}  // namespace

bool is_decoder(const CausalLM& cpu) { return dynamic_cast<const Decoder*>(&cpu) != nullptr; }

Expected<std::unique_ptr<CausalLM>> make_cuda_decoder(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) {
    EMBER_REQUIRE(cpu && is_decoder(*cpu), "make_cuda_decoder: not a decoder model");
    auto m = std::make_unique<CudaDecoder>(std::move(cpu), opt);
    EMBER_TRY(m->init());
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember::cuda
