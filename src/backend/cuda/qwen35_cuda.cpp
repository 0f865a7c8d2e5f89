// Qwen3.5 forward pass on the GPU (fp32 activations, weights in their stored format), qwen35.md §2.3:
//   h = x + Mixer(RMSNorm(x)); out = h + SwiGLU(RMSNorm(h)); logits = LMHead(RMSNorm(h_L)).
// The residual add is fused into the next RMSNorm (add_rmsnorm). Decode (n = 1) is one graph launch.
#include "backend/cuda/qwen35_cuda.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "backend/cuda/weight_upload.h"
#include "models/qwen35.h"
#include "ops/activation/activation_cuda.h"
#include "ops/attention/attention_cuda.h"
#include "ops/embedding/embedding_cuda.h"
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
};

struct CudaState : ModelState {
    std::vector<DeviceBuffer> bufs;
    std::vector<float*> K, V, conv, S;                   // per layer (null where the type does not apply)
    float *x, *xn, *y, *t0, *t1, *t2, *t3, *t4, *logits;  // activations [max_batch, ...]
    int32_t *ids, *pos_dev;  // token ids [max_batch] and the position of token 0, read by the kernels
    void *lin_ws, *att_ws;
    size_t lin_ws_bytes, att_ws_bytes;
    cudaStream_t stream = nullptr;
    cudaGraphExec_t graph = nullptr;
    DecodeStats stats;
    ~CudaState() override {
        if (graph) cudaGraphExecDestroy(graph);
        if (stream) cudaStreamDestroy(stream);
    }
};

class CudaQwen35 : public CausalLM {
public:
    CudaQwen35(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) : cpu_(std::move(cpu)), opt_(opt) {}
    Status init();
    const ModelInfo& info() const override { return info_; }
    std::unique_ptr<ModelState> new_state() const override;
    Status forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const override;

private:
    void run(CudaState& s, int64_t n, bool all_rows) const;  // enqueue the whole forward for n tokens
    const Qwen35& host() const { return static_cast<const Qwen35&>(*cpu_); }

    std::unique_ptr<CausalLM> cpu_;
    CudaOptions opt_;
    ModelInfo info_;
    DeviceArena arena_;
    Weight embed_, head_;
    const float* final_norm_ = nullptr;
    std::vector<DevLayer> layers_;
    GatedAttentionDims adims_{};
    int64_t widest_ = 0;  // widest activation row (floats)
};

Status CudaQwen35::init() {
    EMBER_REQUIRE(gpu_available(), "--device cuda: no CUDA device is available");
    const Qwen35Config& c = host().config();
    const Qwen35Weights& w = host().weights();
    EMBER_ASSIGN(embed_, arena_.upload(w.embed, "embedding"));
    if (w.lm_head.data == w.embed.data) head_ = embed_;
    else { EMBER_ASSIGN(head_, arena_.upload(w.lm_head, "lm_head")); }
    EMBER_ASSIGN(final_norm_, arena_.upload(w.final_norm, "norm"));
    for (const auto& L : w.layers) {
        DevLayer d;
        d.type = L.type;
        EMBER_ASSIGN(d.input_norm, arena_.upload(L.input_norm, "norm"));
        EMBER_ASSIGN(d.post_norm, arena_.upload(L.post_norm, "norm"));
        EMBER_ASSIGN(d.gate, arena_.upload(L.mlp.gate_proj, "mlp"));
        EMBER_ASSIGN(d.up, arena_.upload(L.mlp.up_proj, "mlp"));
        EMBER_ASSIGN(d.down, arena_.upload(L.mlp.down_proj, "mlp"));
        if (L.type == LayerType::FULL_ATTENTION) {
            EMBER_ASSIGN(d.q, arena_.upload(L.attn.q_proj, "attention"));
            EMBER_ASSIGN(d.k, arena_.upload(L.attn.k_proj, "attention"));
            EMBER_ASSIGN(d.v, arena_.upload(L.attn.v_proj, "attention"));
            EMBER_ASSIGN(d.o, arena_.upload(L.attn.o_proj, "attention"));
            EMBER_ASSIGN(d.q_norm, arena_.upload(L.attn.q_norm, "attention"));
            EMBER_ASSIGN(d.k_norm, arena_.upload(L.attn.k_norm, "attention"));
        } else {
            EMBER_ASSIGN(d.qkv, arena_.upload(L.gdn.in_proj_qkv, "delta net"));
            EMBER_ASSIGN(d.z, arena_.upload(L.gdn.in_proj_z, "delta net"));
            EMBER_ASSIGN(d.b, arena_.upload(L.gdn.in_proj_b, "delta net"));
            EMBER_ASSIGN(d.a, arena_.upload(L.gdn.in_proj_a, "delta net"));
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
    widest_ = std::max({c.hidden_size, c.intermediate_size, 2 * c.num_attention_heads * c.head_dim, c.conv_dim(),
                        c.value_dim()});
    info_ = cpu_->info();
    info_.source += " (cuda: " + device_name() + ")";
    info_.max_context = adims_.capacity;
    return Status::ok();
}

std::unique_ptr<ModelState> CudaQwen35::new_state() const {
    auto s = std::make_unique<CudaState>();
    const Qwen35Config& c = host().config();
    const DeltaNetShape& g = host().delta_net_shape();
    const int64_t B = opt_.max_batch, W = widest_, V = c.vocab_size;
    auto alloc = [&](size_t bytes, const char* what) -> void* {
        auto b = DeviceBuffer::alloc(bytes, what);
        EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());  // TODO(issue 3): surface OOM through Status
        CUDA_CHECK(cudaMemset(b->get(), 0, bytes));
        s->bufs.push_back(std::move(b.value()));
        return s->bufs.back().get();
    };
    s->K.assign(c.num_hidden_layers, nullptr); s->V = s->K; s->conv = s->K; s->S = s->K;
    const size_t kv = static_cast<size_t>(adims_.n_kv * adims_.capacity * adims_.head_dim) * sizeof(float);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        if (c.layer_types[l] == LayerType::FULL_ATTENTION) {
            s->K[l] = static_cast<float*>(alloc(kv, "KV cache"));
            s->V[l] = static_cast<float*>(alloc(kv, "KV cache"));
        } else {
            s->conv[l] = static_cast<float*>(alloc((g.conv_kernel - 1) * g.conv_dim() * sizeof(float), "conv state"));
            s->S[l] = static_cast<float*>(alloc(g.heads.nv * g.heads.dk * g.heads.dv * sizeof(float), "GDN state"));
        }
    }
    float** acts[] = {&s->x, &s->xn, &s->y, &s->t0, &s->t1, &s->t2, &s->t3, &s->t4};
    for (float** a : acts) *a = static_cast<float*>(alloc(B * W * sizeof(float), "activations"));
    s->logits = static_cast<float*>(alloc(8 * V * sizeof(float), "logits"));
    s->ids = static_cast<int32_t*>(alloc(B * sizeof(int32_t), "token ids"));
    s->pos_dev = static_cast<int32_t*>(alloc(sizeof(int32_t), "position"));
    size_t lw = 0;
    for (const auto& L : layers_)
        for (const Weight* w : {&L.gate, &L.up, &L.down, &L.q, &L.k, &L.v, &L.o, &L.qkv, &L.z, &L.b, &L.a, &L.out})
            if (w->data) lw = std::max(lw, linear_workspace_bytes(*w, B));
    lw = std::max(lw, linear_workspace_bytes(head_, 8));
    s->lin_ws_bytes = lw;
    s->lin_ws = lw ? alloc(lw, "linear workspace") : nullptr;
    s->att_ws_bytes = gated_attention_workspace_bytes(adims_, B);
    s->att_ws = s->att_ws_bytes ? alloc(s->att_ws_bytes, "attention workspace") : nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    return s;
}

// Enqueues the forward pass of the n tokens in s.ids at position *s.pos. Logits of the last row (or of
// rows [0, min(n, 8)) when all_rows) land in s.logits.
void CudaQwen35::run(CudaState& s, int64_t n, bool all_rows) const {
    const Qwen35Config& c = host().config();
    const DeltaNetShape& g = host().delta_net_shape();
    const int64_t H = c.hidden_size, I = c.intermediate_size;
    const float eps = c.rms_norm_eps;
    cudaStream_t st = s.stream;
    auto lin = [&](const Weight& w, const float* x, int64_t rows, float* y) {
        linear(w, x, rows, y, st, s.lin_ws, s.lin_ws_bytes);
    };
    embed_rows(embed_, s.ids, n, s.x, st);
    const float* pending = nullptr;  // mixer/MLP output not yet added to the residual stream
    for (size_t l = 0; l < layers_.size(); ++l) {
        const DevLayer& L = layers_[l];
        add_rmsnorm(s.x, pending, L.input_norm, s.xn, n, H, eps, st);
        if (L.type == LayerType::FULL_ATTENTION) {
            lin(L.q, s.xn, n, s.t0);  // [n, heads, 2, d]
            lin(L.k, s.xn, n, s.t1);  // [n, kv, d]
            lin(L.v, s.xn, n, s.t2);
            gated_attention_core(adims_, s.t0, s.t1, s.t2, L.q_norm, L.k_norm, s.K[l], s.V[l], s.pos_dev, n, s.t3,
                                 s.att_ws, s.att_ws_bytes, st);
            lin(L.o, s.t3, n, s.y);
        } else {
            lin(L.qkv, s.xn, n, s.t0);  // [n, conv_dim]
            lin(L.z, s.xn, n, s.t1);    // [n, nv*dv]
            lin(L.b, s.xn, n, s.t2);    // [n, nv]
            lin(L.a, s.xn, n, s.t4);    // [n, nv]
            GdnDecodeArgs a{s.t0, s.t1, s.t4, s.t2, L.conv, L.A_log, L.dt_bias, L.gnorm, s.conv[l], s.S[l], s.t3,
                            g.heads, static_cast<int>(g.conv_kernel), g.eps};
            gated_delta_net_step(a, n, st);
            lin(L.out, s.t3, n, s.y);
        }
        add_rmsnorm(s.x, s.y, L.post_norm, s.xn, n, H, eps, st);
        lin(L.gate, s.xn, n, s.t0);
        lin(L.up, s.xn, n, s.t1);
        swiglu(s.t0, s.t1, s.t2, n * I, st);
        lin(L.down, s.t2, n, s.y);
        pending = s.y;
    }
    int64_t rows = all_rows ? std::min<int64_t>(n, 8) : 1;
    const int64_t first = all_rows ? 0 : n - 1;
    add_rmsnorm(s.x, pending, final_norm_, s.xn, n, H, eps, st);
    lin(head_, s.xn + first * H, rows, s.logits);
}

Status CudaQwen35::forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const {
    auto* s = dynamic_cast<CudaState*>(&state);
    EMBER_REQUIRE(s != nullptr, "forward: state does not belong to this CUDA model");
    EMBER_REQUIRE(n > 0 && n <= opt_.max_batch, "forward: %lld tokens per call (allowed 1..%lld)", (long long)n,
                  (long long)opt_.max_batch);
    EMBER_TRY(check_kv_capacity(s->pos, n, adims_.capacity));
    const int64_t V = info_.vocab_size;
    for (int64_t t = 0; t < n; ++t)
        EMBER_REQUIRE(tokens[t] >= 0 && tokens[t] < V, "token id %d at position %lld is out of range [0, %lld)", tokens[t],
                      (long long)t, (long long)V);
    int32_t pos = static_cast<int32_t>(s->pos);
    CUDA_CHECK(cudaMemcpyAsync(s->ids, tokens, n * sizeof(int32_t), cudaMemcpyHostToDevice, s->stream));
    CUDA_CHECK(cudaMemcpyAsync(s->pos_dev, &pos, sizeof(int32_t), cudaMemcpyHostToDevice, s->stream));
    if (all_logits && n > 8) {
        // Logits of every row: run the stack once, then the head over chunks of 8 rows.
        // (Prefill with all rows is for verification, not speed.)
        run(*s, n, /*all_rows=*/false);
        const Qwen35Config& c = host().config();
        for (int64_t r = 0; r < n; r += 8) {
            int64_t m = std::min<int64_t>(8, n - r);
            // s->xn holds the final-normed rows after run().
            linear(head_, s->xn + r * c.hidden_size, m, s->logits, s->stream, s->lin_ws, s->lin_ws_bytes);
            CUDA_CHECK(cudaMemcpyAsync(logits + r * V, s->logits, m * V * sizeof(float), cudaMemcpyDeviceToHost,
                                       s->stream));
            CUDA_CHECK(cudaStreamSynchronize(s->stream));
        }
    } else if (n == 1 && !all_logits) {
        if (!s->graph) {
            cudaGraph_t graph;
            CUDA_CHECK(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal));
            run(*s, 1, false);
            CUDA_CHECK(cudaStreamEndCapture(s->stream, &graph));
            size_t nodes = 0;
            CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
            s->stats.graph_nodes = static_cast<int64_t>(nodes);
            CUDA_CHECK(cudaGraphInstantiate(&s->graph, graph, 0));
            CUDA_CHECK(cudaGraphDestroy(graph));
        }
        CUDA_CHECK(cudaGraphLaunch(s->graph, s->stream));
        s->stats.used_graph = true;
        CUDA_CHECK(cudaMemcpyAsync(logits, s->logits, V * sizeof(float), cudaMemcpyDeviceToHost, s->stream));
        CUDA_CHECK(cudaStreamSynchronize(s->stream));  // the one host wait per token
    } else {
        run(*s, n, all_logits);
        CUDA_CHECK(cudaMemcpyAsync(logits, s->logits, (all_logits ? n : 1) * V * sizeof(float),
                                   cudaMemcpyDeviceToHost, s->stream));
        CUDA_CHECK(cudaStreamSynchronize(s->stream));
    }
    s->pos += n;
    return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> make_qwen35_cuda(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) {
    EMBER_REQUIRE(dynamic_cast<Qwen35*>(cpu.get()) != nullptr, "--device cuda supports Qwen3.5 models only so far");
    auto m = std::make_unique<CudaQwen35>(std::move(cpu), opt);
    EMBER_TRY(m->init());
    return std::unique_ptr<CausalLM>(std::move(m));
}

DecodeStats last_decode_stats(const ModelState& state) {
    auto* s = dynamic_cast<const CudaState*>(&state);
    return s ? s->stats : DecodeStats{};
}

}  // namespace ember::cuda
