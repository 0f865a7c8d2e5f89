// Where a captured step's GPU time goes without a profiler: every kernel node of a CUDA graph launched alone, in
// node order, between two events (cluster dimensions kept; no programmatic dependent launch, so launch overlap is
// not counted), summed by kernel name. A diagnostic for `ember bench --batch ... --profile`: the kernels mutate
// the state they run on as in the real step.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

namespace ember::cuda {

// Markdown table (kernel name, calls, total µs, share), slowest first, plus the sum and the count of nodes that
// could not be launched alone (e.g. library kernels). The graph is left as it was.
std::string profile_graph_nodes(cudaGraph_t graph, cudaStream_t stream, int repeats = 3);

}  // namespace ember::cuda
