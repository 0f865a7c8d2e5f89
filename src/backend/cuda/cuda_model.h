// Shared machinery of the CUDA models: per-sequence device state (allocated lazily so out-of-memory is a Status),
// weights uploaded once (DeviceArena), prefill / decode entry points, and the decode step captured once per
// state and mode as a CUDA graph with the token selection inside it (argmax / penalties / sampling), so a
// decode token is one graph launch and one host wait, and only the chosen id crosses to the host.
// An architecture derives from CudaCausalLM and supplies its layer caches and its forward pass (run()).
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <memory>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/persistent_plan.h"
#include "backend/cuda/weight_upload.h"
#include "models/model.h"
#include "ops/attention/attention_cuda.h"
#include "ops/linear/linear_gemm_q.h"
#include "ops/sampling/sampling_cuda.h"

namespace ember::cuda {

struct CudaOptions {
    int64_t context = 4096;    // KV-cache capacity per session (tokens); beyond it forward() fails clearly
    int64_t max_batch = 512;   // largest prefill chunk per forward call (Session chunks longer prompts)
    GemmPrecision prefill_precision = GemmPrecision::FP32;  // products of the n > 8 GEMMs (linear_gemm_q.h)
    bool kv_bf16 = false;      // KV cache in bf16 (half the memory) instead of fp32 (attention_cuda.h)
    int64_t kv_pages = 0;      // batched engine: pages of kKvPage tokens in the shared KV pool (0: every slot's full
                               // context when it fits in the free GPU memory, else as many as fit)
    int persistent = -1;       // batch-1 decode through the persistent kernel (persistent_plan.h): 1 on, 0 off,
                               // -1 as EMBER_DECODE says (persistent | graph)
};

// Small per-step values the host writes before a graph launch (pinned, so the copies are truly async).
struct StepIO {
    int32_t pos = 0, enter = -1, leave = -1;  // in: position; token entering / leaving the penalty window
    int32_t id = 0;                            // out: selected token
    float logit = 0;                           // out: its logit (NaN → the model produced NaN)
    int32_t token = 0;                         // in: the token of a 1-token step
};

// Decode graph variants (captured on first use, then replayed).
// MASK: a token mask (mask_dev) applied before the selection; SELECT_ONLY: the selection without the forward (the
// masked decode runs the LOGITS graph, computes the mask on the CPU meanwhile, then this one).
enum GraphMode : int { LOGITS = 0, GREEDY = 1, SAMPLE = 2, PENALTIES = 4, MASK = 8, SELECT_ONLY = 16 };

struct CudaState : ModelState {
    bool ready = false;  // device buffers allocated (lazily, so out-of-memory is a Status from forward())
    std::vector<DeviceBuffer> bufs;
    std::vector<void*> K, V;                             // per layer: KV caches (fp32 or bf16: kv_elem bytes each)
    std::vector<float*> conv, S;                         // per layer (null where the type does not apply)
    int64_t kv_elem = 4;                                 // bytes per KV cache element (4 fp32, 2 bf16)
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
    uint32_t* mask_dev = nullptr;   // [ceil(vocab/32)] token mask of the selection (allocated on first use)
    uint32_t* mask_host = nullptr;  // pinned host staging of the mask
    cudaStream_t stream = nullptr;
    cudaEvent_t ev0 = nullptr, ev1 = nullptr;
    std::map<int, cudaGraphExec_t> graphs;
    std::map<int, int64_t> graph_kernels;
    StepStats stats;
    // Sampling state mirrored from the host: params last uploaded, RNG seeded?, history length counts cover.
    bool have_params = false, seeded = false;
    SamplingParams params;
    int64_t counts_len = -1;
    // Batched engine (cuda_batch.cpp). The layer caches hold `slots` sequences: slot i's at K0[l] + i·kv_slot
    // elements (V0 likewise; conv0 + i·conv_slot, S0 + i·S_slot floats); K / V / conv / S point at one slot (slot 0 of a
    // single-sequence state; the slot being prefilled in a batch). rows_mode: run() is a batched decode of n
    // rows, row r = (slot, position) at rows_dev[2r], rows_dev[2r + 1]; logits [n, vocab] land in s.logits.
    bool pooled = false;  // a batch state (new_batch): rows buffers allocated
    int64_t slots = 1, kv_slot = 0, conv_slot = 0, S_slot = 0;
    std::vector<void*> K0, V0;
    std::vector<float*> conv0, S0;
    // Paged KV (pooled states; cuda_batch.cpp): K0[l] / V0[l] are page pools [n_pages][n_kv][kKvPage][d] shared by
    // every slot; page_table [slots][max_pages] (device, mirrored in page_host) lists each slot's pages in order;
    // `pages` is the selected slot's row (nullptr: contiguous caches, K / V the slot's own).
    bool paged = false;
    int64_t n_pages = 0, max_pages = 0, sel = 0;
    int32_t* page_table = nullptr;
    int32_t* page_host = nullptr;  // pinned
    bool page_dirty = false;
    std::vector<int32_t> free_pages;
    std::vector<std::vector<int32_t>> slot_pages;
    std::vector<int64_t> kv_row_elems;  // per layer: elements of one cache row of all kv heads (n_kv · d), 0: none
    const int32_t* pages = nullptr;
    int32_t* rows_dev = nullptr;
    bool rows_mode = false;
    // Mixed pass (cuda_mixed.cpp, CausalLM::batch_step): run() over n rows of several sequences — mixed_segs are
    // prompt chunks (slot, first row, rows; position at seg_pos_dev[i]), rows [mixed_r0, mixed_r0 + mixed_rows)
    // one token each of the slots in rows_dev; the mixers run per chunk and over the decode rows, everything else over all n rows;
    // logits of the rows in head_rows land in s.logits rows 0...
    struct MixedSeg {
        int64_t slot, r0, m;
    };
    bool mixed = false;
    std::vector<MixedSeg> mixed_segs;
    int64_t mixed_r0 = 0, mixed_rows = 0;
    int32_t* seg_pos_dev = nullptr;
    std::vector<int64_t> head_rows;
    int64_t max_rows = 8;       // logits rows s.logits holds (≥ 8)
    int32_t* row_ids = nullptr;  // [max_rows] greedy ids of a batched step, then [max_rows] their logits (float)
    // Persistent decode (persistent_plan.h): the program recorded from this state's fused decode step (built on
    // the first decode when EMBER_DECODE=persistent), and the recorder the helpers offer ops to while set.
    std::unique_ptr<PdProgram> pd;
    bool pd_tried = false;
    PdRecorder* rec = nullptr;
    void select_slot(int64_t i) {
        sel = i;
        pages = paged ? page_table + i * max_pages : nullptr;
        for (size_t l = 0; l < K0.size(); ++l) {
            K[l] = K0[l] && !paged ? static_cast<char*>(K0[l]) + i * kv_slot * kv_elem : K0[l];
            V[l] = V0[l] && !paged ? static_cast<char*>(V0[l]) + i * kv_slot * kv_elem : V0[l];
            conv[l] = conv0[l] ? conv0[l] + i * conv_slot : nullptr;
            S[l] = S0[l] ? S0[l] + i * S_slot : nullptr;
        }
    }
    ~CudaState() override {
        for (auto& g : graphs) cudaGraphExecDestroy(g.second);
        if (ev0) cudaEventDestroy(ev0);
        if (ev1) cudaEventDestroy(ev1);
        if (stream) cudaStreamDestroy(stream);
        if (io) cudaFreeHost(io);
        if (page_host) cudaFreeHost(page_host);
        if (mask_host) cudaFreeHost(mask_host);
    }
};

using DeviceAlloc = std::function<Expected<void*>(size_t bytes, const char* what)>;

class CudaCausalLM : public CausalLM {
public:
    CudaCausalLM(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt) : cpu_(std::move(cpu)), opt_(opt) {}
    const ModelInfo& info() const override { return info_; }
    std::unique_ptr<ModelState> new_state() const override { return std::make_unique<CudaState>(); }
    Status forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) const override;
    Status reserve(ModelState& state) const override;
    bool has_device_sampler() const override { return true; }
    Expected<int32_t> decode_sample(ModelState& state, int32_t token, const SamplingParams& sp,
                                    const std::vector<int32_t>& history, const TokenMaskFn* mask = nullptr) const override;
    StepStats last_step_stats(const ModelState& state) const override {
        auto* s = dynamic_cast<const CudaState*>(&state);
        return s ? s->stats : StepStats{};
    }
    // Saved sessions (cuda_state_io.cpp): the CPU model's layout and fingerprint; the state crosses with
    // cudaMemcpy, fp32 in the same layout as on the CPU, so a session saved on one backend loads on the other.
    std::vector<StateTensor> state_layout(int64_t pos) const override { return cpu_->state_layout(pos); }
    uint64_t weights_fingerprint() const override { return cpu_->weights_fingerprint(); }
    Expected<std::vector<StateTensor>> export_state(const ModelState& state) const override;
    Status import_state(ModelState& state, int64_t pos, const std::vector<StateTensor>& tensors) const override;
    // Batched engine (cuda_batch.cpp): one pooled CudaState for every slot; a decode step is one graph launch
    // (captured once per row count) with the greedy ids selected on the device.
    Expected<std::unique_ptr<BatchState>> new_batch(int64_t max_seqs) const override;
    Status batch_prefill(BatchState& b, int64_t slot, const int32_t* tokens, int64_t n, float* logits) const override;
    Status batch_decode(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                        float* logits) const override;
    Status batch_decode_greedy(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                               int32_t* ids) const override;
    // cuda_batch_sample.cpp: per-row penalties and sampling (sampling_rows_cuda.h) inside the step's graph.
    bool has_batch_sampler() const override { return true; }
    Status batch_decode_sample(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                               const SamplingParams* const* params, const std::vector<int32_t>* const* history,
                               int32_t* ids, float* logits = nullptr,
                               const TokenMaskFn* const* masks = nullptr) const override;
    Status batch_reset(BatchState& b, int64_t slot) const override;
    // cuda_mixed.cpp: prompt chunks beside decode rows in one eager pass (the decode rows' mixers through the
    // rows kernels, everything else through the GEMM over all rows); logits and argmax ids per sequence.
    Status batch_step(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens, int64_t seqs,
                      float* logits, int32_t* ids = nullptr, const uint8_t* want = nullptr) const override;
    // Whether the engine runs its rounds as mixed calls: off by default (H100, 12-07: 1-3 % slower than rounds apart
    // in `ember bench --engine`, bench/results/2026-12-07-mixed-steps.md); EMBER_MIXED_STEP=1 at load, or this switch.
    bool batch_mixed() const override { return mixed_steps_; }
    int64_t batch_kv_free(BatchState& b) const override;
    int64_t batch_kv_need(const BatchState& b, int64_t slot, int64_t len) const override;
    StepStats last_batch_stats(const BatchState& b) const override;
    Expected<std::string> batch_profile(BatchState& b, const int32_t* slots, const int32_t* tokens,
                                        int64_t rows) const override;
    Expected<std::vector<StateTensor>> batch_export_slot(BatchState& b, int64_t slot, int64_t from) const override;
    // cuda_state_io.cpp: prefix-cache checkpoints in device memory (host tensors when it runs out).
    Expected<std::unique_ptr<SlotSnapshot>> batch_snapshot(BatchState& b, int64_t slot, int64_t from) const override;
    Status batch_restore_links(BatchState& b, int64_t slot, int64_t block,
                               const std::vector<const SlotSnapshot*>& links) const override;
    Status batch_import_slot(BatchState& b, int64_t slot, int64_t pos,
                             const std::vector<StateTensor>& tensors) const override;
    bool batch_slot_rng(BatchState& b, int64_t slot, uint64_t* seed, uint64_t* counter) const override;
    Status batch_set_slot_rng(BatchState& b, int64_t slot, uint64_t seed, uint64_t counter) const override;
    bool device_rng(const ModelState& state, uint64_t* seed, uint64_t* counter) const override;
    Status set_device_rng(ModelState& state, uint64_t seed, uint64_t counter) const override;

protected:
    // ---- per architecture ----
    // Allocates the layer caches of a new state for s.slots sequences: s.K0 / s.V0 / s.conv0 / s.S0 (indexed by
    // layer) and the per-slot strides s.kv_slot / s.conv_slot / s.S_slot (pool_layer() does both).
    virtual Status allocate_layers(CudaState& s, const DeviceAlloc& alloc) const = 0;
    // One layer's pool: slots × floats_per_slot floats into *base; sets *stride.
    static Status pool_layer(CudaState& s, const DeviceAlloc& alloc, int64_t floats_per_slot, const char* what,
                             float** base, int64_t* stride);
    // The K and V caches of an attention layer whose cache rows hold row_elems elements (n_kv · d) of s.kv_elem
    // bytes: contiguous, slots × capacity rows, or for a pooled state recorded for the page pools that allocate()
    // sizes last (allocate_pages, cuda_batch.cpp).
    Status pool_kv(CudaState& s, const DeviceAlloc& alloc, int64_t row_elems, size_t layer) const;
    Status allocate_pages(CudaState& s, const DeviceAlloc& alloc) const;
    // Enqueues the forward pass of the n tokens in s.ids at position *s.pos_dev. Logits of the last row (or of
    // rows [0, min(n, 8)) when all_rows) land in s.logits; s.xn holds every row final-normed afterwards.
    virtual void run(CudaState& s, int64_t n, bool all_rows) const = 0;
    // Workspace bytes of the layers' linear and attention ops for calls of up to max_tokens tokens.
    virtual size_t linear_workspace(int64_t max_tokens) const = 0;
    virtual size_t attention_workspace(int64_t max_tokens) const = 0;
    // Workspace of the attention op's batched decode of up to `rows` rows (0: no attention layers).
    virtual size_t attention_rows_workspace(int64_t rows) const = 0;
    // The attention core of layer l into s.t3: one sequence at *s.pos_dev (s.K[l], s.V[l]), or in rows mode the
    // batched decode over the pools (s.K0[l], s.V0[l], s.rows_dev).
    void attention(CudaState& s, const GatedAttentionDims& d, const float* q, const float* k, const float* v,
                   const float* q_norm, const float* k_norm, size_t l, int64_t n) const;
    // y = x·Wᵀ for n rows with the state's workspace (n > 8: the GEMM in opt_.prefill_precision).
    void lin(CudaState& s, const Weight& w, const float* x, int64_t n, float* y) const;
    // The row blocks `parts` of the stacked weight (empty when the parts differ in format), each into its own
    // y: one GEMM over the stacked weight where the tensor-core path takes it (n > 8), else lin() per part.
    void lin_parts(CudaState& s, const Weight& stacked, std::initializer_list<const Weight*> parts,
                   std::initializer_list<float*> ys, const float* x, int64_t n) const;
    // The fused form for a batched decode of a few rows: y_k = RMSNorm(s.x)·W_kᵀ, one GEMV over the stacked weight.
    void lin_parts_fused(CudaState& s, const Weight& stacked, std::initializer_list<const Weight*> parts,
                         std::initializer_list<float*> ys, const float* norm_w, float eps, int64_t n) const;
    // Whether run() fuses a step of n rows: one sequence's token, or 2..fuse_rows_ rows of a batched decode.
    // The fused GEMVs stage RMSNorm(x)'s x·w of all n rows in every block (the norm factor applied to the sums),
    // so fusing pays for a few rows only. H100, 12-07, with the factor on the sums, aggregate tok/s fused up to 4
    // or 6 rows against the old default of 2: 2B 3 rows 2,032 / 1,978, 4: 2,504 / 2,469, 5: 2,813 / 2,753 (fused 6
    // vs 4), 6: 2,974 / 2,980; 9B 3: 688 / 674, 4: 985 / 962, 5: 1,079 / 1,044, 6: 1,175 / 1,236; 8 rows (2B):
    // 3,942 / 3,990 unfused. Default 5 rows (the batched-engine tests BatchCuda.*, BatchSampleCuda.*, EngineCuda.*
    // — fused steps checked against sequences decoded alone — pass at 3-5 fused rows: H100 12-07, 18/18;
    // EMBER_FUSE_ROWS=N: up to N ≤ 8 rows, 0 or 1: one row only).
    bool fused(const CudaState& s, int64_t n) const {
        return fuse_decode_ && (n == 1 || (s.rows_mode && n <= fuse_rows_));
    }
    // Shared pieces of run(). Two ways to run a block, chosen by `fz` (= fused(s, n)):
    //  - unfused: add_rmsnorm(s.x, pending, norm, s.xn) first, the GEMVs read s.xn, the block's output lands in
    //    s.y and is returned as the next `pending` (added to s.x by the next add_rmsnorm);
    //  - fused (decode): the GEMVs that read the block input apply the RMSNorm to s.x themselves, the output
    //    projection adds into s.x (linear_fused), nothing is pending (nullptr returned).
    // normed_linear: y = RMSNorm(s.x)·Wᵀ (fused) or s.xn·Wᵀ (unfused; the caller ran add_rmsnorm).
    void normed_linear(CudaState& s, const Weight& w, const float* norm_w, float eps, int64_t n, float* y,
                       bool fz) const;
    // The fused GEMVs of a decode step (linear_fused with `f`), offered to the persistent decode recorder first.
    // n > 1 (batched rows): the streaming q kernel forced (linear_fused_native_q, checked by choose_decode_fusion).
    void fused_gemv(CudaState& s, const Weight& w, const float* x, float* y, const LinearFusion& f,
                    int64_t n = 1) const;
    // residual_linear: x_in·Wᵀ added to s.x (fused; returns nullptr) or written to s.y (returns s.y).
    const float* residual_linear(CudaState& s, const Weight& w, const float* x_in, int64_t n, bool fz) const;
    // The post-attention half of a block: [add_rmsnorm(s.x, pending, post_norm) →] SwiGLU MLP (one GEMV over
    // [gate|up] when gate_up is set; uses s.t0..s.t2) → residual_linear(down). Returns the new pending.
    const float* swiglu_mlp(CudaState& s, const float* pending, const float* post_norm, float eps,
                            const Weight& gate_up, const Weight& gate, const Weight& up, const Weight& down, int64_t n,
                            int64_t I, bool fz) const;
    // The remaining ops of run() that the persistent decode recorder must see (persistent_plan.h): the token
    // embedding gather (n rows of s.ids into s.x), the GDN step of one sequence (T = n), a projection's bias.
    void embed(CudaState& s, const Weight& table, int64_t n) const;
    // The mixed pass's mixer cores (s.mixed): f(slot, first row, rows, position on the device) per prompt chunk,
    // each with s's slot selected (select_slot), then rows(first row, rows) for the decode rows (rows_dev),
    // in s.rows_mode. s.pos_dev is restored after.
    void for_mixed_segments(CudaState& s, const std::function<void(int64_t r0, int64_t m)>& chunk,
                            const std::function<void(int64_t r0, int64_t rows)>& rows) const;
    void gdn_step(CudaState& s, const GdnDecodeArgs& a, int64_t n) const;
    void bias(CudaState& s, float* y, const float* b, int64_t n, int64_t rows) const;
    // Final add + RMSNorm of the residual stream and the head → s.logits (unfused: s.xn holds the normed rows).
    void lm_head(CudaState& s, const float* pending, const float* final_norm, int64_t n, bool all_rows, float eps,
                 bool fz) const;
    // Sets fuse_decode_ when every weight a decode step multiplies (the stacked block inputs, the output
    // projections, [gate|up], down, the head) runs linear_fused natively at n = 1, and fuse_rows_ (the most rows
    // fused(), above) where they also do at 2..fuse_rows_ rows with the q kernel (a model whose stacked inputs
    // are not AFFINE sets it to 1 afterwards).
    void choose_decode_fusion(const std::vector<const Weight*>& decode_weights);
    // Before the uploads: when every HOST matrix in `decode_weights` is DeviceArena::repackable_for_fusion, GGML
    // ones are repacked whatever their size, so that choose_decode_fusion can pick the fused path and the 2-8-row
    // steps of the batched engine run the affine q kernel instead of the per-row block GEMV. The caller picks the
    // list: Llama passes its layers' matrices and the head; Qwen3.5 only its layers' (a Q6_K head cannot be
    // repacked and must not keep the layers on the block GEMV — measured; unmeasured for Llama, so unchanged).
    void prefer_fusable_uploads(const std::vector<const Weight*>& decode_weights);
    bool fuse_decode_ = false;
    int64_t fuse_rows_ = 1;
    // Called by the derived init() last: info from the CPU model, the widest activation row, KV capacity.
    void finish_init(int64_t widest, int64_t capacity);

    std::unique_ptr<CausalLM> cpu_;
    CudaOptions opt_;
    ModelInfo info_;
    mutable DeviceArena arena_;  // mutable: prepare_batch_head() adds the batched engine's copy of the head
    Weight head_;           // device LM head (for the all-rows logits path)
    const Weight* host_head_ = nullptr;  // the CPU model's LM head (set by init(); for batch_head())
    // The head the batched engine multiplies `rows` rows with: head_, or — when head_ is TILED (the stream kernel
    // reads it once per row) — an untiled copy uploaded by the first new_batch() that can use it, from
    // untiled_head_rows() rows on: 2 when the copy is affine (MLX, or GGUF blocks repacked to affine: the q kernel
    // reads it once for up to 8 rows); GGML Q6_K: 65 where the stream kernel takes 4 rows per pass (H200, 2B Q4_0
    // mix: the tiled head 1.05-1.65× faster than the copy's split GEMM at 16-64 rows), else 9 (the copy's block GEMV
    // is compute-bound at several rows; beyond 8 rows the split GEMM). EMBER_HEAD_UNTILED_ROWS=N overrides (A/B).
    const Weight& batch_head(int64_t rows) const {
        return head_rows_.data && rows >= untiled_head_rows() ? head_rows_ : head_;
    }
    int64_t untiled_head_rows() const;
    Status prepare_batch_head(int64_t max_seqs) const;
    mutable std::mutex batch_mu_;
    mutable std::once_flag pd_note_;  // "persistent decode not used: …" printed once
    mutable Weight head_rows_;
    int64_t widest_ = 0;    // widest activation row (floats)
    int64_t capacity_ = 0;  // KV rows per sequence

private:
    Status allocate(CudaState& s) const;                                      // device buffers of a new state
    Status begin_step(CudaState& s, const int32_t* tokens, int64_t n) const;  // checks, allocation, inputs
    void launch_decode(CudaState& s, int mode, bool first = true) const;  // capture (first time) and launch a decode
                                                                          // graph (first: starts the step's timing)
    void select(CudaState& s, int mode) const;         // penalties + argmax / sample + copy of the id
    void prepare_persistent(CudaState& s) const;       // the DRY pass and pd_finalize (persistent_plan.h)
    // cuda_batch.cpp: checks, allocation, rows and ids to the device; then the step's body (capturable).
    Status batch_stage(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows) const;
    void batch_body(BatchState& b, int64_t rows, bool greedy) const;
    Status batch_rows_step(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                           bool greedy) const;
};

// The graph of s under `key`, captured from body() on first use (kernel-node count in s.graph_kernels[key]).
cudaGraphExec_t graph_for(CudaState& s, int key, const std::function<void()>& body);

// The GPU model for a loaded CPU model (backend/cuda/cuda_registry.cpp: one line per architecture).
Expected<std::unique_ptr<CausalLM>> make_cuda_model(std::unique_ptr<CausalLM> cpu, const CudaOptions& opt);

}  // namespace ember::cuda
