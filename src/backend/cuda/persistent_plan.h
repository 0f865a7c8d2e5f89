// The persistent decode of a CUDA model (ops/decode/persistent_decode.h), built from the model's own forward.
// Every op a fused batch-1 decode step (run() with n = 1 and the decode fusions) enqueues goes through
// CudaCausalLM's helpers, which offer it to the state's PdRecorder first:
//   - DRY pass (once per state, before any capture): each op becomes a phase when the persistent kernel takes it
//     (pd_*_supported), else a break; nothing is launched. Consecutive phases form one launch group. The phase
//     table, counters and attention partials are then allocated and uploaded.
//   - EMIT pass (inside each decode graph's capture): a taken op adds nothing; before an op that is not taken (the
//     embedding gather, a GEMV of another format, the head when tiled) and at the end, the pending group is
//     launched (pd_launch), so the graph holds: ordinary kernels and persistent launches in the forward's order.
// The DRY pass runs inside a stream capture that must stay empty: a kernel that bypassed the helpers would show
// up there, and the model then keeps the multi-kernel graph (the plan is refused, never silently wrong).
// EMBER_DECODE=graph|persistent picks the decode path (default graph until the persistent one is the default).
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device.h"
#include "ops/attention/attention_cuda.h"
#include "ops/decode/persistent_decode.h"
#include "ops/gated_delta_rule/gdn_cuda.h"
#include "ops/linear/linear_cuda.h"

namespace ember::cuda {

// Whether the decode runs the persistent kernel (EMBER_DECODE=persistent) — read once.
bool persistent_decode_requested();

struct PdProgram {
    struct Group {
        int first = 0, count = 0;
        size_t smem = 0;
        pd::PdLaunch L{};
    };
    std::vector<pd::PdPhase> phases;
    std::vector<Group> groups;
    std::vector<char> taken;          // per op of the forward (DRY pass): 1 = phase(s), 0 = ordinary kernels
    std::vector<float> rope_host;     // rope tables of the attention phases (patched to device pointers)
    std::vector<int> rope_phase;      // phase of each rope table
    DeviceBuffer table, counters, part, rope;
    DeviceBuffer trace;               // EMBER_PD_TRACE=1|2: per phase and block timestamps (PdLaunch::trace)
    ~PdProgram();                     // with a trace: prints where the last run's time went (stderr)
    int64_t part_floats = 0;
    int ops = 0;                      // ops seen in the DRY pass
    std::string why_not;              // empty when usable
};

class PdRecorder {
public:
    enum Mode { DRY, EMIT };
    PdRecorder(PdProgram& prog, Mode mode, cudaStream_t stream) : p_(prog), mode_(mode), st_(stream) {}
    bool dry() const { return mode_ == DRY; }
    // An op offered by the model's helpers. true: taken (DRY: recorded as a phase; EMIT: part of the pending
    // group); false: the caller runs it as ordinary kernels — in EMIT mode after the pending group was launched,
    // in DRY mode not at all (check dry()).
    bool gemv(const Weight& w, const float* x, float* y, const LinearFusion& f);
    bool gdn(const GdnDecodeArgs& a);
    bool attention(const GatedAttentionDims& d, const float* qg, const float* k, const float* v, const float* q_norm,
                   const float* k_norm, void* K, void* V, const int32_t* pos_dev, float* out);
    bool other();  // an op the recorder never takes
    // End of the forward: DRY closes the last group; EMIT launches it.
    void finish();

private:
    bool take(const pd::PdPhase& ph);
    void launch_pending();
    PdProgram& p_;
    Mode mode_;
    cudaStream_t st_;
    int op_ = 0;          // ops seen so far in this pass
    int open_ = -1;       // DRY: first phase of the open group
    size_t next_group_ = 0;  // EMIT
    bool pending_ = false;   // EMIT: phases taken since the last launch
};

// After the DRY pass: builds the launch groups' shared-memory plans and uploads the table, counters, attention
// partials and rope tables (pos_dev: the state's position). Sets prog.why_not on failure.
void pd_finalize(PdProgram& prog, const int32_t* pos_dev);

}  // namespace ember::cuda
