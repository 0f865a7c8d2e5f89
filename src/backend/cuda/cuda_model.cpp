// CudaCausalLM: state allocation, prefill / decode entry points, decode graphs with device token selection.
#include "backend/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/env.h"
#include "ops/activation/activation_cuda.h"
#include "ops/attention/attention_cuda.h"
#include "ops/embedding/embedding_cuda.h"
#include "ops/gated_delta_rule/gdn_cuda.h"
#include "ops/linear/linear_cuda.h"
#include "ops/norm/norm_cuda.h"
#include "ops/sampling/token_mask.h"
#include "ops/sampling/token_mask_cuda.h"

namespace ember::cuda {

void CudaCausalLM::lin(CudaState& s, const Weight& w, const float* x, int64_t n, float* y) const {
    linear(w, x, n, y, s.stream, s.lin_ws, s.lin_ws_bytes, opt_.prefill_precision);
}

void CudaCausalLM::lin_parts(CudaState& s, const Weight& stacked, std::initializer_list<const Weight*> parts,
                             std::initializer_list<float*> ys, const float* x, int64_t n) const {
    EMBER_CHECK(parts.size() == ys.size(), "lin_parts: %zu parts, %zu outputs", parts.size(), ys.size());
    linear_parts(stacked, parts.begin(), ys.begin(), int(parts.size()), x, n, s.stream, s.lin_ws, s.lin_ws_bytes,
                 opt_.prefill_precision);
}

void CudaCausalLM::lin_parts_fused(CudaState& s, const Weight& stacked, std::initializer_list<const Weight*> parts,
                                   std::initializer_list<float*> ys, const float* norm_w, float eps, int64_t n) const {
    EMBER_CHECK(parts.size() == ys.size(), "lin_parts_fused: %zu parts, %zu outputs", parts.size(), ys.size());
    LinearFusion f;
    f.norm_w = norm_w, f.eps = eps;
    linear_parts_fused(stacked, parts.begin(), ys.begin(), int(parts.size()), s.x, n, f, s.stream);
}

void CudaCausalLM::attention(CudaState& s, const GatedAttentionDims& d, const float* q, const float* k, const float* v,
                             const float* q_norm, const float* k_norm, size_t l, int64_t n) const {
    if (s.rec) {  // persistent decode (n = 1, one sequence)
        EMBER_CHECK(n == 1 && !s.rows_mode, "persistent decode: attention of %lld rows", (long long)n);
        EMBER_CHECK(!s.pages, "persistent decode: a paged cache");
        if (s.rec->attention(d, q, k, v, q_norm, k_norm, s.K[l], s.V[l], s.pos_dev, s.t3) || s.rec->dry()) return;
    }
    if (s.mixed) {  // per prompt chunk, then the decode rows: rows r0.. of q (gated: [q | gate] per head), k, v, t3
        const int64_t qs = d.n_heads * d.head_dim * (d.gated ? 2 : 1), ks = d.n_kv * d.head_dim,
                      os = d.n_heads * d.head_dim;
        for_mixed_segments(
            s,
            [&](int64_t r0, int64_t m) {
                gated_attention_core(d, q + r0 * qs, k + r0 * ks, v + r0 * ks, q_norm, k_norm, s.K[l], s.V[l],
                                     s.pos_dev, m, s.t3 + r0 * os, s.att_ws, s.att_ws_bytes, s.stream, s.pages);
            },
            [&](int64_t r0, int64_t rows) {
                gated_attention_decode_rows(d, q + r0 * qs, k + r0 * ks, v + r0 * ks, q_norm, k_norm, s.K0[l],
                                            s.V0[l], s.slots, s.rows_dev, rows, s.t3 + r0 * os, s.att_ws,
                                            s.att_ws_bytes, s.stream, s.paged ? s.page_table : nullptr, s.max_pages);
            });
        return;
    }
    if (s.rows_mode)
        gated_attention_decode_rows(d, q, k, v, q_norm, k_norm, s.K0[l], s.V0[l], s.slots, s.rows_dev, n, s.t3,
                                    s.att_ws, s.att_ws_bytes, s.stream, s.paged ? s.page_table : nullptr, s.max_pages);
    else
        gated_attention_core(d, q, k, v, q_norm, k_norm, s.K[l], s.V[l], s.pos_dev, n, s.t3, s.att_ws, s.att_ws_bytes,
                             s.stream, s.pages);
}

void CudaCausalLM::normed_linear(CudaState& s, const Weight& w, const float* norm_w, float eps, int64_t n, float* y,
                                 bool fz) const {
    if (!fz) {
        lin(s, w, s.xn, n, y);
        return;
    }
    LinearFusion f;
    f.norm_w = norm_w, f.eps = eps;
    fused_gemv(s, w, s.x, y, f, n);
}

void CudaCausalLM::fused_gemv(CudaState& s, const Weight& w, const float* x, float* y, const LinearFusion& f,
                              int64_t n) const {
    if (n == 1) {
        if (s.rec && (s.rec->gemv(w, x, y, f) || s.rec->dry())) return;  // persistent decode
        linear_fused(w, x, 1, y, f, s.stream, nullptr, 0);  // native (choose_decode_fusion): no scratch
        return;
    }
    // With a prologue: the fusable q kernel (choose_decode_fusion checked it takes every decode weight at 2-8 rows).
    // Without one (the residual adds; the down projection after SwiGLU pairs): the rule's kernel — linear_fused
    // runs the mma kernel's accumulate where the rule picks it and takes it, else the q kernel.
    GemvTuning t;
    t.kernel = f.norm_w || f.swiglu ? 1 : 0;
    linear_fused(w, x, n, y, f, s.stream, nullptr, 0, &t);
}

void CudaCausalLM::for_mixed_segments(CudaState& s, const std::function<void(int64_t, int64_t)>& chunk,
                                      const std::function<void(int64_t, int64_t)>& rows) const {
    int32_t* pos = s.pos_dev;
    for (size_t i = 0; i < s.mixed_segs.size(); ++i) {
        const CudaState::MixedSeg& g = s.mixed_segs[i];
        s.select_slot(g.slot);
        s.pos_dev = s.seg_pos_dev + i;
        chunk(g.r0, g.m);
    }
    s.pos_dev = pos;
    if (s.mixed_rows > 0) {
        s.rows_mode = true;
        rows(s.mixed_r0, s.mixed_rows);
        s.rows_mode = false;
    }
}

void CudaCausalLM::embed(CudaState& s, const Weight& table, int64_t n) const {
    if (s.rec && (s.rec->other() || s.rec->dry())) return;
    embed_rows(table, s.ids, n, s.x, s.stream);
}

void CudaCausalLM::gdn_step(CudaState& s, const GdnDecodeArgs& a, int64_t n) const {
    if (s.rec) {
        EMBER_CHECK(n == 1, "persistent decode: GDN step of %lld tokens", (long long)n);
        if (s.rec->gdn(a) || s.rec->dry()) return;
    }
    gated_delta_net_step(a, n, s.stream);
}

void CudaCausalLM::bias(CudaState& s, float* y, const float* b, int64_t n, int64_t rows) const {
    if (s.rec && (s.rec->other() || s.rec->dry())) return;
    add_bias(y, b, n, rows, s.stream);
}

const float* CudaCausalLM::residual_linear(CudaState& s, const Weight& w, const float* x_in, int64_t n, bool fz) const {
    if (!fz) {
        lin(s, w, x_in, n, s.y);
        return s.y;
    }
    LinearFusion f;
    f.accumulate = true;
    fused_gemv(s, w, x_in, s.x, f, n);
    return nullptr;
}

const float* CudaCausalLM::swiglu_mlp(CudaState& s, const float* pending, const float* post_norm, float eps,
                                      const Weight& gate_up, const Weight& gate, const Weight& up, const Weight& down,
                                      int64_t n, int64_t I, bool fz) const {
    // SwiGLU pairs (linear_swiglu_pairs): the [gate | up] GEMV forms h = SwiGLU in its epilogue (no SwiGLU kernel,
    // the down projection reads h). Not offered to the persistent decode recorder, which keeps the prologue form.
    GemvTuning rows_q;
    rows_q.kernel = 1;  // fused rows: the q kernel, as fused_gemv
    if (fz) {  // x += SwiGLU(RMSNorm(x)·[gate | up]ᵀ)·downᵀ
        LinearFusion fn;
        fn.norm_w = post_norm, fn.eps = eps;
        LinearFusion fa;
        fa.accumulate = true;
        if (!s.rec && linear_swiglu_pairs(gate_up, s.x, n, s.t2, fn, s.stream, n > 1 ? &rows_q : nullptr)) {
            fused_gemv(s, down, s.t2, s.x, fa, n);
            return nullptr;
        }
        normed_linear(s, gate_up, post_norm, eps, n, s.t0, true);  // [gate | up] = RMSNorm(x)·Wᵀ
        fa.swiglu = true;
        fused_gemv(s, down, s.t0, s.x, fa, n);
        return nullptr;
    }
    add_rmsnorm(s.x, pending, post_norm, s.xn, n, info_.hidden_size, eps, s.stream);
    if (!gate_up.empty()) {  // [n, gate | up] → SwiGLU
        if (!linear_swiglu_pairs(gate_up, s.xn, n, s.t2, {}, s.stream)) {
            lin(s, gate_up, s.xn, n, s.t0);
            swiglu_fused(s.t0, s.t2, n, I, s.stream);
        }
    } else {
        lin(s, gate, s.xn, n, s.t0);
        lin(s, up, s.xn, n, s.t1);
        swiglu(s.t0, s.t1, s.t2, n * I, s.stream);
    }
    return residual_linear(s, down, s.t2, n, false);
}

void CudaCausalLM::lm_head(CudaState& s, const float* pending, const float* final_norm, int64_t n, bool all_rows,
                           float eps, bool fz) const {
    if (fz) {  // n = 1, or the rows of a batched decode (logits [n, vocab])
        const Weight& hw = s.rows_mode && linear_fused_native(batch_head(n), n) ? batch_head(n) : head_;
        normed_linear(s, hw, final_norm, eps, n, s.logits, true);
        return;
    }
    const int64_t H = info_.hidden_size;
    if (s.mixed) {  // the rows asked for, gathered into s.y
        add_rmsnorm(s.x, pending, final_norm, s.xn, n, H, eps, s.stream);
        const int64_t R = int64_t(s.head_rows.size());
        for (int64_t i = 0; i < R; ++i)
            CUDA_CHECK(cudaMemcpyAsync(s.y + i * H, s.xn + s.head_rows[size_t(i)] * H, size_t(H) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, s.stream));
        lin(s, batch_head(R), s.y, R, s.logits);
        return;
    }
    const int64_t rows = s.rows_mode ? n : all_rows ? std::min<int64_t>(n, 8) : 1;
    const int64_t first = s.rows_mode || all_rows ? 0 : n - 1;
    add_rmsnorm(s.x, pending, final_norm, s.xn, n, H, eps, s.stream);
    lin(s, s.rows_mode ? batch_head(rows) : head_, s.xn + first * H, rows, s.logits);
}

Status CudaCausalLM::pool_layer(CudaState& s, const DeviceAlloc& alloc, int64_t floats_per_slot, const char* what,
                                float** base, int64_t* stride) {
    const int64_t per = (floats_per_slot + 63) / 64 * 64;  // 256-byte aligned slots
    EMBER_ASSIGN(void* p, alloc(size_t(per * s.slots) * sizeof(float), what));
    *base = static_cast<float*>(p);
    *stride = per;
    return Status::ok();
}

Status CudaCausalLM::pool_kv(CudaState& s, const DeviceAlloc& alloc, int64_t row_elems, size_t layer) const {
    s.kv_row_elems[layer] = row_elems;
    if (s.paged) return Status::ok();  // allocate_pages
    const int64_t align = 256 / s.kv_elem;  // 256-byte aligned slots
    const int64_t per = (row_elems * capacity_ + align - 1) / align * align;
    for (void** base : {&s.K0[layer], &s.V0[layer]}) {
        EMBER_ASSIGN(*base, alloc(size_t(per * s.slots * s.kv_elem), "KV cache"));
    }
    s.kv_slot = per;
    return Status::ok();
}

void CudaCausalLM::prefer_fusable_uploads(const std::vector<const Weight*>& decode_weights) {
    bool all = !decode_weights.empty();
    for (const Weight* w : decode_weights) all = all && DeviceArena::repackable_for_fusion(*w);
    arena_.set_repack_all(all);
}

void CudaCausalLM::choose_decode_fusion(const std::vector<const Weight*>& decode_weights) {
    static const bool off = env_off("EMBER_FUSE");
    fuse_decode_ = !off;
    for (const Weight* w : decode_weights) fuse_decode_ = fuse_decode_ && !w->empty() && linear_fused_native(*w, 1);
    static const int64_t rows_max = [] {  // fused() says why 5
        const char* e = env_str("EMBER_FUSE_ROWS");
        return e && e[0] >= '0' && e[0] <= '8' && e[1] == 0 ? int64_t(e[0] - '0') : int64_t(5);
    }();
    fuse_rows_ = fuse_decode_ ? std::max<int64_t>(rows_max, 1) : 1;
    for (int64_t n = 2; n <= fuse_rows_; ++n)
        for (const Weight* w : decode_weights)
            if (!linear_fused_native_q(*w, n)) fuse_rows_ = std::min(fuse_rows_, n - 1);
}

void CudaCausalLM::finish_init(int64_t widest, int64_t capacity) {
    widest_ = widest;
    capacity_ = capacity;
    info_ = cpu_->info();
    info_.source += " (cuda: " + device_name() + ")";
    info_.max_context = capacity;
    if (opt_.kv_bf16) info_.kv_bytes_per_token /= 2;  // the cache holds bf16 elements
}

Status CudaCausalLM::allocate(CudaState& st) const {
    CudaState* s = &st;
    const int64_t B = opt_.max_batch, W = widest_, V = info_.vocab_size;
    size_t total = 0;
    auto alloc = [&](size_t bytes, const char* what) -> Expected<void*> {
        auto b = DeviceBuffer::alloc(bytes, what);
        if (!b)
            return errorf("%s (this session needs %.2f GiB of GPU memory beyond the weights so far; lower -c / "
                          "--ctx-size, now %lld tokens)",
                          b.message().c_str(), (total + bytes) / 1073741824.0, (long long)capacity_);
        total += bytes;
        CUDA_CHECK(cudaMemset(b->get(), 0, bytes));
        s->bufs.push_back(std::move(b.value()));
        return s->bufs.back().get();
    };
    const int64_t L = info_.num_layers;
    s->kv_elem = opt_.kv_bf16 ? 2 : 4;
    s->paged = s->pooled;
    s->kv_row_elems.assign(size_t(info_.num_layers), 0);
    s->K0.assign(L, nullptr); s->V0 = s->K0; s->K = s->K0; s->V = s->K0;
    s->conv0.assign(L, nullptr); s->S0 = s->conv0; s->conv = s->conv0; s->S = s->conv0;
    EMBER_TRY(allocate_layers(*s, alloc));
    float** acts[] = {&s->x, &s->xn, &s->y, &s->t0, &s->t1, &s->t2, &s->t3, &s->t4};
    for (float** a : acts) {
        EMBER_ASSIGN(void* p, alloc(B * W * sizeof(float), "activations"));
        *a = static_cast<float*>(p);
    }
    void* p;
    s->max_rows = std::max<int64_t>(s->max_rows, 8);
    EMBER_ASSIGN(p, alloc(s->max_rows * V * sizeof(float), "logits")); s->logits = static_cast<float*>(p);
    if (s->pooled) {
        EMBER_ASSIGN(p, alloc(s->max_rows * 4 * sizeof(int32_t), "batch rows"));
        s->rows_dev = static_cast<int32_t*>(p);
        s->row_ids = s->rows_dev + 2 * s->max_rows;
    }
    EMBER_ASSIGN(p, alloc(B * sizeof(int32_t), "token ids")); s->ids = static_cast<int32_t*>(p);
    EMBER_ASSIGN(p, alloc(8 * sizeof(int32_t), "position")); s->pos_dev = static_cast<int32_t*>(p);
    s->win_dev = s->pos_dev + 1;
    s->out_id = s->pos_dev + 3;
    EMBER_ASSIGN(p, alloc(V * sizeof(int32_t), "token counts")); s->counts = static_cast<int32_t*>(p);
    EMBER_ASSIGN(p, alloc(256, "sampler state")); s->rng = static_cast<uint64_t*>(p);
    s->params_dev = reinterpret_cast<DeviceSamplingParams*>(static_cast<char*>(p) + 64);
    const size_t lw = std::max({linear_workspace(B), linear_workspace_bytes(head_, 8),
                                s->pooled ? linear_workspace_bytes(batch_head(s->max_rows), s->max_rows) : size_t(0)});
    s->lin_ws_bytes = lw;
    s->lin_ws = nullptr;
    if (lw) { EMBER_ASSIGN(s->lin_ws, alloc(lw, "linear workspace")); }
    s->att_ws_bytes = std::max(attention_workspace(B), s->pooled ? attention_rows_workspace(s->max_rows) : 0);
    s->att_ws = nullptr;
    if (s->att_ws_bytes) { EMBER_ASSIGN(s->att_ws, alloc(s->att_ws_bytes, "attention workspace")); }
    s->smp_ws_bytes = std::max({sample_workspace_bytes(V), argmax_workspace_bytes(V),
                                argmax_rows_workspace_bytes(s->max_rows, V)});
    EMBER_ASSIGN(s->smp_ws, alloc(s->smp_ws_bytes, "sampler workspace"));
    if (s->paged) EMBER_TRY(allocate_pages(*s, alloc));  // last: the pool takes what the GPU has left
    s->select_slot(0);
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s->io), sizeof(StepIO)));
    *s->io = StepIO{};
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&s->ev0));
    CUDA_CHECK(cudaEventCreate(&s->ev1));
    s->ready = true;
    return Status::ok();
}

Status CudaCausalLM::begin_step(CudaState& s, const int32_t* tokens, int64_t n) const {
    EMBER_REQUIRE(n > 0 && n <= opt_.max_batch, "forward: %lld tokens per call (allowed 1..%lld)", (long long)n,
                  (long long)opt_.max_batch);
    EMBER_TRY(check_kv_capacity(s.pos, n, capacity_));
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
void CudaCausalLM::select(CudaState& s, int mode) const {
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

cudaGraphExec_t graph_for(CudaState& s, int key, const std::function<void()>& body) {
    auto it = s.graphs.find(key);
    if (it != s.graphs.end()) return it->second;
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
    body();
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
    s.graph_kernels[key] = kernels;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    s.graphs.emplace(key, exec);
    return exec;
}

void CudaCausalLM::prepare_persistent(CudaState& s) const {
    s.pd_tried = true;
    auto prog = std::make_unique<PdProgram>();
    if (!fuse_decode_ || s.pooled) {
        prog->why_not = fuse_decode_ ? "a batch state" : "the decode fusions are off for this model";
    } else {
        // DRY pass inside a capture that must stay empty (persistent_plan.h).
        PdRecorder rec(*prog, PdRecorder::DRY, s.stream);
        CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
        s.rec = &rec;
        run(s, 1, false);
        rec.finish();
        s.rec = nullptr;
        cudaGraph_t g;
        CUDA_CHECK(cudaStreamEndCapture(s.stream, &g));
        size_t nodes = 0;
        CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
        CUDA_CHECK(cudaGraphDestroy(g));
        if (nodes) prog->why_not = "a kernel of the forward bypassed the recorder";
        else pd_finalize(*prog, s.pos_dev);
    }
    if (!prog->why_not.empty())  // one note per model, not one per sequence
        std::call_once(pd_note_, [&] { std::fprintf(stderr, "ember: persistent decode not used: %s\n", prog->why_not.c_str()); });
    s.pd = std::move(prog);
}

void CudaCausalLM::launch_decode(CudaState& s, int mode, bool first) const {
    const bool pd_on = opt_.persistent < 0 ? persistent_decode_requested() : opt_.persistent > 0;
    if (!(mode & SELECT_ONLY) && !s.pd_tried && pd_on) prepare_persistent(s);
    cudaGraphExec_t exec = graph_for(s, mode, [&] {
        if (!(mode & SELECT_ONLY)) {
            if (s.pd && s.pd->why_not.empty()) {
                PdRecorder rec(*s.pd, PdRecorder::EMIT, s.stream);
                s.rec = &rec;
                run(s, 1, false);
                rec.finish();
                s.rec = nullptr;
            } else {
                run(s, 1, false);
            }
        }
        if (mode & MASK) {
            const int64_t V = info_.vocab_size;
            apply_token_mask(s.logits, 1, V, V, s.mask_dev, token_mask_words(V), s.stream);
        }
        if ((mode & ~(MASK | SELECT_ONLY)) != LOGITS) select(s, mode & ~(MASK | SELECT_ONLY));
    });
    if (first) CUDA_CHECK(cudaEventRecord(s.ev0, s.stream));
    CUDA_CHECK(cudaGraphLaunch(exec, s.stream));
    CUDA_CHECK(cudaEventRecord(s.ev1, s.stream));
    s.stats.kernels = (first ? 0 : s.stats.kernels) + s.graph_kernels[mode];
    s.stats.graph = first;  // two launches per step (masked decode): not "one graph"
}

Status CudaCausalLM::reserve(ModelState& state) const {
    auto* sp = dynamic_cast<CudaState*>(&state);
    EMBER_REQUIRE(sp != nullptr, "reserve: state does not belong to this CUDA model");
    if (!sp->ready) EMBER_TRY(allocate(*sp));
    return Status::ok();
}

Status CudaCausalLM::forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const {
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
        for (int64_t r = 0; r < n; r += 8) {
            int64_t m = std::min<int64_t>(8, n - r);
            // s.xn holds the final-normed rows after run().
            linear(head_, s.xn + r * info_.hidden_size, m, s.logits, s.stream, s.lin_ws, s.lin_ws_bytes);
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

Expected<int32_t> CudaCausalLM::decode_sample(ModelState& state, int32_t token, const SamplingParams& sp,
                                            const std::vector<int32_t>& history, const TokenMaskFn* mask) const {
    auto* stp = dynamic_cast<CudaState*>(&state);
    EMBER_REQUIRE(stp != nullptr, "decode_sample: state does not belong to this CUDA model");
    CudaState& s = *stp;
    EMBER_REQUIRE(!history.empty() && history.back() == token, "decode_sample: history must end with the token");
    EMBER_TRY(check_device_sampling_params(sp));
    const int64_t V = info_.vocab_size;
    const bool penalties = sampling_has_penalties(sp);
    const bool greedy = sampling_is_greedy(sp);
    const int mode = (greedy ? GREEDY : SAMPLE) | (penalties ? PENALTIES : 0);
    EMBER_TRY(check_kv_capacity(s.pos, 1, capacity_));
    if (!s.ready) EMBER_TRY(allocate(s));
    if (!s.have_params || !same_sampling_params(s.params, sp)) {
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
            std::vector<int32_t> counts(static_cast<size_t>(V));
            window_counts(history, N, V, counts.data());
            CUDA_CHECK(cudaMemcpy(s.counts, counts.data(), V * sizeof(int32_t), cudaMemcpyHostToDevice));
        }
        s.counts_len = L;
    } else {
        s.counts_len = -1;
    }
    EMBER_TRY(begin_step(s, &token, 1));  // token, position and the window's enter/leave ids
    s.stats = StepStats{};
    if (mask) {
        // Forward graph; the CPU fills the mask while it runs; the mask is uploaded behind it (pinned, async)
        // and the selection graph applies it before penalties / argmax / sampling.
        const int64_t W = token_mask_words(V);
        if (!s.mask_dev) {
            auto b = DeviceBuffer::alloc(size_t(W) * 4, "token mask");
            if (!b) return b.status();
            s.mask_dev = static_cast<uint32_t*>(b->get());
            s.bufs.push_back(std::move(b.value()));
            CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.mask_host), size_t(W) * 4));
        }
        launch_decode(s, LOGITS);
        (*mask)(s.mask_host);
        CUDA_CHECK(cudaMemcpyAsync(s.mask_dev, s.mask_host, size_t(W) * 4, cudaMemcpyHostToDevice, s.stream));
        launch_decode(s, mode | MASK | SELECT_ONLY, /*first=*/false);
    } else {
        launch_decode(s, mode);
    }
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

}  // namespace ember::cuda
