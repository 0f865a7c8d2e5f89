// Chunked GDN prefill driver (contract in gdn_chunked_cuda.h): checks, pieces of ≤ 1024 tokens, three launches
// per piece (gdn_chunked_prep.cu → gdn_chunked_state.cu → gdn_chunked_out.cu; workspace layout in
// gdn_chunked.cuh). Stream order runs the kernels, and so the pieces, strictly one after the other through the
// one workspace; the conv state of the call is read by the first piece (its first chunk) and written by the last.
#include "ops/gated_delta_rule/gdn_chunked_cuda.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "core/check.h"
#include "core/env.h"
#include "ops/gated_delta_rule/gdn_chunked.cuh"

namespace ember::cuda {

using namespace gdn_chunked;

bool gated_delta_net_prefill_supported(const GdnShape& s, int K) {
    return s.nk > 0 && s.nv > 0 && s.nv % s.nk == 0 && s.dk > 0 && s.dk <= 128 && s.dv > 0 && s.dv <= 128 &&
           K >= 2 && K <= 4;
}

bool gated_delta_net_prefill_preferred(const GdnShape& shape, int K, int64_t T) {
    static const bool off = env_off("EMBER_GDN_CHUNKED");
    return !off && T >= kGdnPrefillMinTokens && gated_delta_net_prefill_supported(shape, K);
}

size_t gated_delta_net_prefill_workspace_bytes(const GdnShape& shape, int64_t T) {
    if (T <= 0) return 0;
    const int nc = static_cast<int>(std::min<int64_t>((T + kBT - 1) / kBT, kPieceChunks));
    return static_cast<size_t>(layout_floats(shape, nc)) * sizeof(float);
}

void gated_delta_net_prefill(const GdnDecodeArgs& args, int64_t T, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
    const GdnShape& s = args.shape;
    EMBER_CHECK(T >= 0, "gdn prefill: T=%lld", (long long)T);
    EMBER_CHECK(gated_delta_net_prefill_supported(s, args.K),
                "gdn prefill: unsupported shape nk=%lld nv=%lld dk=%lld dv=%lld K=%d (needs nv %% nk == 0, dk, dv "
                "<= 128, K in 2..4)",
                (long long)s.nk, (long long)s.nv, (long long)s.dk, (long long)s.dv, args.K);
    if (T == 0) return;
    EMBER_CHECK(args.qkv && args.z && args.a && args.b && args.conv_w && args.A_log && args.dt_bias && args.norm_w &&
                    args.conv_state && args.S && args.y,
                "gdn prefill: null pointer");
    const size_t need = gated_delta_net_prefill_workspace_bytes(s, T);
    EMBER_CHECK(workspace && workspace_bytes >= need, "gdn prefill: workspace of %zu bytes, T=%lld needs %zu",
                workspace_bytes, (long long)T, need);
    EMBER_CHECK(reinterpret_cast<uintptr_t>(workspace) % 16 == 0, "gdn prefill: workspace not 16-byte aligned");

    const StatePlan plan = state_plan(s);
    const bool vec = s.dk % 4 == 0 && s.dv % 4 == 0 && reinterpret_cast<uintptr_t>(args.qkv) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(args.conv_state) % 16 == 0;
    const int64_t piece = static_cast<int64_t>(kPieceChunks) * kBT;
    for (int64_t t0 = 0; t0 < T; t0 += piece) {
        Piece pc;
        pc.t0 = t0;
        pc.T = std::min(piece, T - t0);
        pc.T_all = T;
        pc.nc = static_cast<int>((pc.T + kBT - 1) / kBT);
        pc.last = t0 + pc.T == T;
        pc.vec = vec;
        pc.ws = make_layout(s, pc.nc, static_cast<float*>(workspace));
        launch_prep(args, pc, stream);
        launch_state(args, pc, plan, stream);
        launch_out(args, pc, stream);
    }
}

}  // namespace ember::cuda
