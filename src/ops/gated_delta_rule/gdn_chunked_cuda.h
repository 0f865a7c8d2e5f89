// Chunked Gated DeltaNet prefill on the GPU: the same layer step as gated_delta_net_step (gdn_cuda.h, same
// GdnDecodeArgs contract, qwen35.md §2.6), computed through the chunked WY / UT-transform form with chunk 64
// (gated_delta_rule_chunked in gated_delta_rule.h; transformers' and fla's chunk_gated_delta_rule) on tensor cores.
// Plain C++ header (no nvcc needed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "ops/gated_delta_rule/gated_delta_rule.h"
#include "ops/gated_delta_rule/gdn_cuda.h"

namespace ember::cuda {

// True when the chunked kernels take this layer shape: nk, nv > 0, nv % nk == 0, dk ≤ 128, dv ≤ 128 and a conv
// kernel of 2..4 taps (every Qwen3.5 shape: dk = dv = 128, K = 4). Other shapes: gated_delta_net_step.
bool gated_delta_net_prefill_supported(const GdnShape& shape, int K);

// Whether a layer step of T tokens should run here rather than in gated_delta_net_step: a supported shape and
// T ≥ kGdnPrefillMinTokens (H200, 2B–27B layers: the step kernel is faster at T = 16, slower at T = 32;
// bench/results/2026-12-01-h200-gdn-chunked.md). EMBER_GDN_CHUNKED=0: never (A/B runs).
constexpr int64_t kGdnPrefillMinTokens = 32;
bool gated_delta_net_prefill_preferred(const GdnShape& shape, int K, int64_t T);

// Device workspace bytes a prefill of T tokens needs (T > 1024: the same as for 1024 — longer prompts run in
// pieces of 1024 tokens through the same workspace). 2B shape: 3.4 MB per 64 tokens (27 MB at T = 512).
size_t gated_delta_net_prefill_workspace_bytes(const GdnShape& shape, int64_t T);

// Advances one GDN layer by T ≥ 0 tokens from the state in args.conv_state / args.S, leaving the final state
// there, and writes y for every token — the result of gated_delta_net_step(args, T) up to fp32 round-off:
//   per chunk of ≤ 64 tokens (γ = within-chunk cumsum of g, in fp64; D_ij = e^{γ_i − γ_j}):
//   A = strict_lower(β_i k̂_i·k̂_j D_ij)   W = (I + A)⁻¹(β e^γ ⊙ K̂)   U = (I + A)⁻¹(β ⊙ V)   U' = U − W S
//   O = (e^γ ⊙ Q̂) S + lower(Q̂K̂ᵀ ⊙ D) U'   S ← e^{γ_last} S + (e^{γ_last − γ} ⊙ K̂)ᵀ U'
// Three kernels per piece of ≤ 1024 tokens: (1) per (chunk, value head): conv + SiLU, L2 norms, gates, the Gram
// matrices, (I + A)⁻¹ by blocked substitution, W and U; (2) per (value head, column block): the chunks in order,
// the state in registers; (3) per (chunk, value head): O and the gated RMSNorm → y; the last piece also writes
// the conv state. Products on tensor cores as three TF32 products (big·big + big·small + small·big, fp32
// accumulation: ≈ 2⁻²¹ relative per product, fp32-faithful); everything else in fp32.
// workspace: ≥ gated_delta_net_prefill_workspace_bytes(shape, T) bytes of device memory, 16-byte aligned, not
// aliasing the arguments; its contents are scratch. Requires gated_delta_net_prefill_supported (EMBER_CHECK).
// No allocation, no host sync: capturable in a CUDA graph. Deterministic (no atomics): two calls give the same
// bits. Plain kernel launches (gdn_chunked.cuh says why not PDL). T = 0 does nothing.
void gated_delta_net_prefill(const GdnDecodeArgs& args, int64_t T, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream);

}  // namespace ember::cuda
