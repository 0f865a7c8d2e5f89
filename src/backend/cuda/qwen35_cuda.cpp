// Qwen3.5 forward pass on the GPU (fp32 activations, weights in their stored format), qwen35.md §2.3:
//   h = x + Mixer(RMSNorm(x)); out = h + SwiGLU(RMSNorm(h)); logits = LMHead(RMSNorm(h_L)).
// The residual add is fused into the next RMSNorm (add_rmsnorm). Decode (n = 1) is one graph launch.
#include "backend/cuda/qwen35_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

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
#include "ops/sampling/sampling_cuda.h"

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

// Small per-step values the host writes before a graph launch (pinned, so the copies are truly async).
struct StepIO {
    int32_t pos = 0, enter = -1, leave = -1;  // in: position; token entering / leaving the penalty window
    int32_t id = 0;                            // out: selected token
    float logit = 0;                           // out: its logit (NaN → the model produced NaN)
    int32_t token = 0;                         // in: the token of a 1-token step
};

// Decode graph variants (captured on first use, then replayed).
enum GraphMode : int { LOGITS = 0, GREEDY = 1, SAMPLE = 2, PENALTIES = 4 };

struct CudaState : ModelState {
    bool ready = false;  // device buffers allocated (lazily, so out-of-memory is a Status from forward())
    std::vector<DeviceBuffer> bufs;
    std::vector<float*> K, V, conv, S;                   // per layer (null where the type does not apply)
    float *x, *xn, *y, *t0, *t1, *t2, *t3, *t4, *logits;  // activations [max_batch, ...]
    int32_t *ids, *pos_dev;  // token ids [max_batch] and the position of token 0, read by the kernels
    int32_t *win_dev;        // [2] token entering / leaving the penalty window
    int32_t *out_id;         // selected token
    int32_t *counts;         // [vocab] token counts in the penalty window
    uint64_t* rng;           // device RNG counter
    DeviceSamplingParams* params_dev;
    void *lin_ws, *att_ws, *smp_ws;
    size_t lin_ws_bytes, att_ws_bytes, smp_ws_bytes;
    StepIO* io = nullptr;    // pinned host
    cudaStream_t stream = nullptr;
    cudaEvent_t ev0 = nullptr, ev1 = nullptr;
    std::map<int, cudaGraphExec_t> graphs;
    std::map<int, int64_t> graph_kernels;
    StepStats stats;
    // Sampling state mirrored from the host: params last uploaded, RNG seeded?, history length counts cover.
    bool have_params = false, seeded = false;
    SamplingParams params;
    int64_t counts_len = -1;
    ~CudaState() override {
        for (auto& g : graphs) cudaGraphExecDestroy(g.second);
        if (ev0) cudaEventDestroy(ev0);
        if (ev1) cudaEventDestroy(ev1);
        if (stream) cudaStreamDestroy(stream);
        if (io) cudaFreeHost(io);
    }
};

class CudaQwen35 : public CausalLM {
public:
    CudaQwen35(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) : cpu_(std::move(cpu)), opt_(opt) {}
    Status init();
    const ModelInfo& info() const override { return info_; }
    std::unique_ptr<ModelState> new_state() const override;
    Status forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const override;
    bool has_device_sampler() const override { return true; }
    Expected<int32_t> decode_sample(ModelState& state, int32_t token, const SamplingParams& sp,
                                    const std::vector<int32_t>& history) const override;
    StepStats last_step_stats(const ModelState& state) const override {
        auto* s = dynamic_cast<const CudaState*>(&state);
        return s ? s->stats : StepStats{};
    }

private:
    Status allocate(CudaState& s) const;                     // device buffers of a new state
    Status begin_step(CudaState& s, const int32_t* tokens, int64_t n) const;  // checks, allocation, inputs
    void launch_decode(CudaState& s, int mode) const;        // capture (first time) and launch a decode graph
    void select(CudaState& s, int mode) const;               // penalties + argmax / sample + copy of the id
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

std::unique_ptr<ModelState> CudaQwen35::new_state() const { return std::make_unique<CudaState>(); }

Status CudaQwen35::allocate(CudaState& st) const {
    CudaState* s = &st;
    const Qwen35Config& c = host().config();
    const DeltaNetShape& g = host().delta_net_shape();
    const int64_t B = opt_.max_batch, W = widest_, V = c.vocab_size;
    size_t total = 0;
    auto alloc = [&](size_t bytes, const char* what) -> Expected<void*> {
        auto b = DeviceBuffer::alloc(bytes, what);
        if (!b)
            return errorf("%s (this session needs %.2f GiB of GPU memory beyond the weights so far; lower -c / "
                          "--ctx-size, now %lld tokens)",
                          b.message().c_str(), (total + bytes) / 1073741824.0, (long long)adims_.capacity);
        total += bytes;
        CUDA_CHECK(cudaMemset(b->get(), 0, bytes));
        s->bufs.push_back(std::move(b.value()));
        return s->bufs.back().get();
    };
    s->K.assign(c.num_hidden_layers, nullptr); s->V = s->K; s->conv = s->K; s->S = s->K;
    const size_t kv = static_cast<size_t>(adims_.n_kv * adims_.capacity * adims_.head_dim) * sizeof(float);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        if (c.layer_types[l] == LayerType::FULL_ATTENTION) {
            EMBER_ASSIGN(void* k, alloc(kv, "KV cache"));
            EMBER_ASSIGN(void* v, alloc(kv, "KV cache"));
            s->K[l] = static_cast<float*>(k);
            s->V[l] = static_cast<float*>(v);
        } else {
            EMBER_ASSIGN(void* cv, alloc((g.conv_kernel - 1) * g.conv_dim() * sizeof(float), "conv state"));
            EMBER_ASSIGN(void* S, alloc(g.heads.nv * g.heads.dk * g.heads.dv * sizeof(float), "GDN state"));
            s->conv[l] = static_cast<float*>(cv);
            s->S[l] = static_cast<float*>(S);
        }
    }
    float** acts[] = {&s->x, &s->xn, &s->y, &s->t0, &s->t1, &s->t2, &s->t3, &s->t4};
    for (float** a : acts) {
        EMBER_ASSIGN(void* p, alloc(B * W * sizeof(float), "activations"));
        *a = static_cast<float*>(p);
    }
    void* p;
    EMBER_ASSIGN(p, alloc(8 * V * sizeof(float), "logits")); s->logits = static_cast<float*>(p);
    EMBER_ASSIGN(p, alloc(B * sizeof(int32_t), "token ids")); s->ids = static_cast<int32_t*>(p);
    EMBER_ASSIGN(p, alloc(8 * sizeof(int32_t), "position")); s->pos_dev = static_cast<int32_t*>(p);
    s->win_dev = s->pos_dev + 1;
    s->out_id = s->pos_dev + 3;
    EMBER_ASSIGN(p, alloc(V * sizeof(int32_t), "token counts")); s->counts = static_cast<int32_t*>(p);
    EMBER_ASSIGN(p, alloc(256, "sampler state")); s->rng = static_cast<uint64_t*>(p);
    s->params_dev = reinterpret_cast<DeviceSamplingParams*>(static_cast<char*>(p) + 64);
    size_t lw = 0;
    for (const auto& L : layers_)
        for (const Weight* w : {&L.gate, &L.up, &L.down, &L.q, &L.k, &L.v, &L.o, &L.qkv, &L.z, &L.b, &L.a, &L.out})
            if (w->data) lw = std::max(lw, linear_workspace_bytes(*w, B));
    lw = std::max(lw, linear_workspace_bytes(head_, 8));
    s->lin_ws_bytes = lw;
    s->lin_ws = nullptr;
    if (lw) { EMBER_ASSIGN(s->lin_ws, alloc(lw, "linear workspace")); }
    s->att_ws_bytes = gated_attention_workspace_bytes(adims_, B);
    s->att_ws = nullptr;
    if (s->att_ws_bytes) { EMBER_ASSIGN(s->att_ws, alloc(s->att_ws_bytes, "attention workspace")); }
    s->smp_ws_bytes = std::max(sample_workspace_bytes(V), argmax_workspace_bytes(V));
    EMBER_ASSIGN(s->smp_ws, alloc(s->smp_ws_bytes, "sampler workspace"));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s->io), sizeof(StepIO)));
    *s->io = StepIO{};
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&s->ev0));
    CUDA_CHECK(cudaEventCreate(&s->ev1));
    s->ready = true;
    return Status::ok();
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

Status CudaQwen35::begin_step(CudaState& s, const int32_t* tokens, int64_t n) const {
    EMBER_REQUIRE(n > 0 && n <= opt_.max_batch, "forward: %lld tokens per call (allowed 1..%lld)", (long long)n,
                  (long long)opt_.max_batch);
    EMBER_TRY(check_kv_capacity(s.pos, n, adims_.capacity));
    const int64_t V = info_.vocab_size;
    for (int64_t t = 0; t < n; ++t)
        EMBER_REQUIRE(tokens[t] >= 0 && tokens[t] < V, "token id %d at position %lld is out of range [0, %lld)", tokens[t],
                      (long long)t, (long long)V);
    if (!s.ready) EMBER_TRY(allocate(s));
    s.io->pos = static_cast<int32_t>(s.pos);
    if (n == 1) s.io->token = tokens[0];
    CUDA_CHECK(cudaMemcpyAsync(s.ids, n == 1 ? &s.io->token : tokens, n * sizeof(int32_t), cudaMemcpyHostToDevice,
                               s.stream));
    CUDA_CHECK(cudaMemcpyAsync(s.pos_dev, &s.io->pos, 3 * sizeof(int32_t), cudaMemcpyHostToDevice, s.stream));
    return Status::ok();
}

// Token selection after the forward (mode bits: GREEDY / SAMPLE, PENALTIES), then the id and its logit to s.io.
void CudaQwen35::select(CudaState& s, int mode) const {
    const int64_t V = info_.vocab_size;
    if (mode & PENALTIES) {
        token_counts_add(s.counts, V, s.win_dev, +1, s.stream);
        token_counts_add(s.counts, V, s.win_dev + 1, -1, s.stream);
        apply_penalties(s.logits, V, s.counts, s.params_dev, s.stream);
    }
    if (mode & SAMPLE) sample(s.logits, V, s.params_dev, s.rng, s.out_id, s.smp_ws, s.stream);
    else argmax(s.logits, V, s.out_id, s.smp_ws, s.stream);
    gather_logit(s.logits, V, s.out_id, reinterpret_cast<float*>(s.out_id + 1), s.stream);
    CUDA_CHECK(cudaMemcpyAsync(&s.io->id, s.out_id, 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, s.stream));
}

void CudaQwen35::launch_decode(CudaState& s, int mode) const {
    auto it = s.graphs.find(mode);
    if (it == s.graphs.end()) {
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
        run(s, 1, false);
        if (mode != LOGITS) select(s, mode);
        CUDA_CHECK(cudaStreamEndCapture(s.stream, &graph));
        size_t nodes = 0;
        CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
        std::vector<cudaGraphNode_t> list(nodes);
        CUDA_CHECK(cudaGraphGetNodes(graph, list.data(), &nodes));
        int64_t kernels = 0;
        for (auto nd : list) {
            cudaGraphNodeType t;
            CUDA_CHECK(cudaGraphNodeGetType(nd, &t));
            kernels += t == cudaGraphNodeTypeKernel;
        }
        s.graph_kernels[mode] = kernels;
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CHECK(cudaGraphDestroy(graph));
        it = s.graphs.emplace(mode, exec).first;
    }
    CUDA_CHECK(cudaEventRecord(s.ev0, s.stream));
    CUDA_CHECK(cudaGraphLaunch(it->second, s.stream));
    CUDA_CHECK(cudaEventRecord(s.ev1, s.stream));
    s.stats.kernels = s.graph_kernels[mode];
    s.stats.graph = true;
}

Status CudaQwen35::forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const {
    auto* sp = dynamic_cast<CudaState*>(&state);
    EMBER_REQUIRE(sp != nullptr, "forward: state does not belong to this CUDA model");
    CudaState& s = *sp;
    EMBER_TRY(begin_step(s, tokens, n));
    const int64_t V = info_.vocab_size;
    s.stats = StepStats{};
    if (all_logits && n > 8) {
        // Logits of every row: run the stack once, then the head over chunks of 8 rows.
        // (Prefill with all rows is for verification, not speed.)
        run(s, n, /*all_rows=*/false);
        const Qwen35Config& c = host().config();
        for (int64_t r = 0; r < n; r += 8) {
            int64_t m = std::min<int64_t>(8, n - r);
            // s.xn holds the final-normed rows after run().
            linear(head_, s.xn + r * c.hidden_size, m, s.logits, s.stream, s.lin_ws, s.lin_ws_bytes);
            CUDA_CHECK(cudaMemcpyAsync(logits + r * V, s.logits, m * V * sizeof(float), cudaMemcpyDeviceToHost,
                                       s.stream));
            CUDA_CHECK(cudaStreamSynchronize(s.stream));
        }
    } else if (n == 1 && !all_logits) {
        launch_decode(s, LOGITS);
        CUDA_CHECK(cudaMemcpyAsync(logits, s.logits, V * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
        CUDA_CHECK(cudaStreamSynchronize(s.stream));  // the one host wait per token
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, s.ev0, s.ev1));
        s.stats.gpu_us = ms * 1e3;
    } else {
        run(s, n, all_logits);
        CUDA_CHECK(cudaMemcpyAsync(logits, s.logits, (all_logits ? n : 1) * V * sizeof(float),
                                   cudaMemcpyDeviceToHost, s.stream));
        CUDA_CHECK(cudaStreamSynchronize(s.stream));
    }
    s.pos += n;
    return Status::ok();
}

Expected<int32_t> CudaQwen35::decode_sample(ModelState& state, int32_t token, const SamplingParams& sp,
                                            const std::vector<int32_t>& history) const {
    auto* stp = dynamic_cast<CudaState*>(&state);
    EMBER_REQUIRE(stp != nullptr, "decode_sample: state does not belong to this CUDA model");
    CudaState& s = *stp;
    EMBER_REQUIRE(!history.empty() && history.back() == token, "decode_sample: history must end with the token");
    EMBER_TRY(check_device_sampling_params(sp));
    const int64_t V = info_.vocab_size;
    const bool penalties = sp.penalty_last_n != 0 &&
                           (sp.repetition_penalty != 1.f || sp.presence_penalty != 0.f || sp.frequency_penalty != 0.f);
    const bool greedy = sp.temperature <= 0.f || sp.top_k == 1;
    const int mode = (greedy ? GREEDY : SAMPLE) | (penalties ? PENALTIES : 0);
    EMBER_TRY(check_kv_capacity(s.pos, 1, adims_.capacity));
    if (!s.ready) EMBER_TRY(allocate(s));
    auto same = [](const SamplingParams& a, const SamplingParams& b) {
        return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
               a.repetition_penalty == b.repetition_penalty && a.presence_penalty == b.presence_penalty &&
               a.frequency_penalty == b.frequency_penalty && a.penalty_last_n == b.penalty_last_n && a.seed == b.seed;
    };
    if (!s.have_params || !same(s.params, sp)) {
        DeviceSamplingParams d = to_device_params(sp);
        CUDA_CHECK(cudaMemcpy(s.params_dev, &d, sizeof d, cudaMemcpyHostToDevice));
        if (!s.seeded || s.params.seed != sp.seed) {
            CUDA_CHECK(cudaMemcpy(s.rng, &sp.seed, sizeof(uint64_t), cudaMemcpyHostToDevice));
            s.seeded = true;
        }
        s.params = sp;
        s.have_params = true;
        s.counts_len = -1;
    }
    s.io->enter = s.io->leave = -1;
    if (penalties) {
        const int64_t L = static_cast<int64_t>(history.size()), N = sp.penalty_last_n;
        if (s.counts_len == L - 1) {  // the usual step: `token` enters the window, one old token may leave it
            s.io->enter = token;
            s.io->leave = (N > 0 && L > N) ? history[L - 1 - N] : -1;
        } else {  // first step with these parameters: counts of the whole window; the graph adds nothing
            std::vector<int32_t> counts(V, 0);
            for (int64_t i = (N < 0 || N >= L) ? 0 : L - N; i < L; ++i)
                if (history[i] >= 0 && history[i] < V) counts[history[i]]++;
            CUDA_CHECK(cudaMemcpy(s.counts, counts.data(), V * sizeof(int32_t), cudaMemcpyHostToDevice));
        }
        s.counts_len = L;
    } else {
        s.counts_len = -1;
    }
    EMBER_TRY(begin_step(s, &token, 1));  // token, position and the window's enter/leave ids
    s.stats = StepStats{};
    launch_decode(s, mode);
    CUDA_CHECK(cudaStreamSynchronize(s.stream));  // the one host wait per token
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, s.ev0, s.ev1));
    s.stats.gpu_us = ms * 1e3;
    s.pos += 1;
    EMBER_REQUIRE(!std::isnan(s.io->logit), "the model produced NaN logits at position %lld (broken weights?)",
                  (long long)(s.pos - 1));
    EMBER_REQUIRE(s.io->id >= 0 && s.io->id < V, "device sampler returned token %d outside [0, %lld)", s.io->id,
                  (long long)V);
    return s.io->id;
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> make_qwen35_cuda(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) {
    EMBER_REQUIRE(dynamic_cast<Qwen35*>(cpu.get()) != nullptr, "--device cuda supports Qwen3.5 models only so far");
    auto m = std::make_unique<CudaQwen35>(std::move(cpu), opt);
    EMBER_TRY(m->init());
    return std::unique_ptr<CausalLM>(std::move(m));
}

}  // namespace ember::cuda
